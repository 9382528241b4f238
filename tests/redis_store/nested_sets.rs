//! Sets nested in sets over the Redis store, held to its docs ("the same
//! decisions as the in-memory store", `check_each` reporting every limit "in the
//! same round trip") and to the sets' ("a nested set ... its limits are counted
//! and reported in its place"): in every shape, a refusal by each leaf names that
//! leaf's index and is reported by it, one report per leaf, as in memory.
#![cfg(feature = "redis")]

use crate::support::nested_sets::{self, log, minute, ten, Seen};
use crate::support::redis::trace::{caller_time_options, NOV_2025};
use crate::support::redis::{unique_prefix, RedisServer};
use sluicegate::algorithms::{AllOf, Limits};
use sluicegate::clock::ManualClock;
use sluicegate::stores::redis::{RedisAlgorithm, RedisStore};
use sluicegate::KeyedRateLimiter;

/// The script on `set` in memory and over Redis, each on a clock of its own at
/// November 2025 (the Redis store at the caller's time): what each saw.
fn on_both<A: RedisAlgorithm + Clone>(server: &RedisServer, test: &str, set: A) -> (Seen, Seen) {
    assert_eq!(set.limit_count(), 3, "{test}: three leaf limits");
    let clock = ManualClock::new();
    clock.advance_nanos(NOV_2025);
    let memory = KeyedRateLimiter::with_clock(set.clone(), clock.clone());
    let in_memory = nested_sets::run(&memory, &clock);
    let clock = ManualClock::new();
    clock.advance_nanos(NOV_2025);
    let store =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix(test))).unwrap();
    let redis = KeyedRateLimiter::with_store(set, store, clock.clone());
    (in_memory, nested_sets::run(&redis, &clock))
}

fn assert_as_memory<A: RedisAlgorithm + Clone>(server: &RedisServer, test: &str, set: A) {
    let (memory, redis) = on_both(server, test, set);
    nested_sets::assert_each_leaf_refuses_alone(&redis, test);
    assert_eq!(redis, memory, "{test}: Redis as memory");
}

#[test]
fn each_leaf_of_a_nested_all_of_refuses_alone_as_in_memory() {
    let server = RedisServer::start();
    assert_as_memory(
        &server,
        "nested-inner-pair",
        AllOf::new((AllOf::new((ten(), minute())), log())),
    );
    assert_as_memory(
        &server,
        "nested-outer-first",
        AllOf::new((ten(), AllOf::new((minute(), log())))),
    );
    assert_as_memory(
        &server,
        "nested-three-levels",
        AllOf::new((
            AllOf::new((AllOf::new((ten(), minute())), log())),
            Limits::new(),
        )),
    );
}

#[test]
fn each_leaf_of_a_nested_limits_refuses_alone_as_in_memory() {
    let server = RedisServer::start();
    assert_as_memory(
        &server,
        "nested-limits",
        Limits::new()
            .with(Limits::new().with(ten()).with(minute()))
            .with(log()),
    );
    // A Limits on the server holds single limits and Limits, not an AllOf.
    assert_as_memory(
        &server,
        "nested-limits-three-levels",
        Limits::new()
            .with(ten())
            .with(Limits::new().with(minute()).with(Limits::new().with(log()))),
    );
    assert_as_memory(
        &server,
        "nested-empty-first",
        AllOf::new((Limits::new(), AllOf::new((ten(), minute())), log())),
    );
}
