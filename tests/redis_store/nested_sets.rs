//! Sets nested in sets over the Redis store, held to its docs ("the same
//! decisions as the in-memory store", `check_each` reporting every limit "in the
//! same round trip") and to the sets' ("a nested set ... its limits are counted
//! and reported in its place"): in every shape, a refusal by each leaf names that
//! leaf's index and is reported by it, one report per leaf, as in memory.
#![cfg(feature = "redis")]

use crate::support::nested_sets::{self, log, minute, ten, Seen};
use crate::support::redis::trace::{caller_time_options, NOV_2025};
use crate::support::redis::{unique_prefix, RedisServer};
use sluicegate::algorithms::{
    Algorithm, AllOf, Counting, FixedWindow, Limits, SlidingLog, SlidingWindowCounter, SmoothBursty,
};
use sluicegate::clock::ManualClock;
use sluicegate::stores::redis::{RedisAlgorithm, RedisStore};
use sluicegate::stores::{Operation, Store};
use sluicegate::{Decision, KeyedRateLimiter};
use std::time::Duration;

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

/// `multi`'s table: a never's `reset_after` is the "longest of all members". A
/// nested set that can never grant a caller willing to wait answers, on the
/// server as in memory, with its other limits' answers to that caller.
#[test]
fn a_nested_set_that_can_never_grant_a_waiting_caller_answers_as_in_memory() {
    let server = RedisServer::start();
    let ms = Duration::from_millis;
    let set = AllOf::new((
        AllOf::new((
            SlidingLog::new(3, ms(100))
                .unwrap()
                .with_rejected_recorded(),
            // No saved burst: the first call leaves it owing the next permit.
            SmoothBursty::new(20.0)
                .unwrap()
                .with_max_burst(Duration::ZERO)
                .unwrap(),
        )),
        FixedWindow::new(4, ms(50)).unwrap(),
        SlidingWindowCounter::new(5, ms(80))
            .unwrap()
            .with_counting(Counting::Attempts),
    ));
    let store = RedisStore::open_with(
        server.url(),
        caller_time_options(&unique_prefix("nested-never")),
    )
    .unwrap();
    // A store's new key starts as a state made at the clock's zero.
    let mut state = set.initial_state(0);
    for (cost, max_wait) in [(1, 0), (4, u64::MAX), (4, 30_000_000)] {
        let expected = set.reserve::<Decision>(&mut state, NOV_2025, cost, max_wait);
        let step = Operation::Reserve { cost, max_wait };
        let got = store
            .apply_key::<Decision>(&set, &"k", NOV_2025, step)
            .unwrap();
        assert_eq!(got, expected, "cost {cost}, max_wait {max_wait}");
        assert_eq!(expected.is_never(), cost == 4, "{expected:?}");
    }
}
