//! Failure policies across outages and under leases, as their docs state them: a
//! local share lives as long as its failover store, so a second outage in the
//! same window decides on what the first left; and a lease that a failure policy
//! granted names that policy's source, so the outage stays visible.
#![cfg(feature = "redis")]

use super::operating_common::{failover_limiter, redis, remaining_on_redis, year_window, Failover};
use crate::support::redis::{unique_prefix, RedisServer};
use sluicegate::clock::ManualClock;
use sluicegate::stores::failover::{FailoverStore, FailurePolicy};
use sluicegate::stores::lease::LeasedStore;
use sluicegate::{Decision, KeyedRateLimiter, Source};
use std::time::Duration;

#[test]
fn a_local_share_lives_across_outages() {
    // "what one outage spends stays spent in the next while its window or bucket
    // says so": a second outage in the same window decides on what is left.
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("local-twice");
    let clock = ManualClock::new();
    let (limiter, _) = failover_limiter(
        &server,
        &prefix,
        FailurePolicy::Local(year_window(5)),
        &clock,
    );
    assert_eq!(limiter.check("k", 1).unwrap().source(), Source::Store);

    server.kill();
    let left: Vec<u64> = (0..3)
        .map(|_| limiter.check("k", 1).unwrap().remaining())
        .collect();
    assert_eq!(left, [4, 3, 2]);

    server.restart();
    clock.advance(Duration::from_secs(1));
    assert_eq!(limiter.check("k", 1).unwrap().source(), Source::Store);

    server.kill();
    let d = limiter.check("k", 1).unwrap();
    assert_eq!((d.source(), d.remaining()), (Source::Local, 1), "{d:?}");
}

#[test]
fn leases_taken_from_a_failover_store_s_unchecked_grants_are_reported_as_degraded() {
    // A lease that a failure policy granted "names that policy's source instead":
    // with a failover store under the leases, a lease the open policy let
    // through unchecked consulted no limit.
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("lease-over-failover");
    let clock = ManualClock::new();
    let failover: Failover =
        FailoverStore::new(redis(&server, &prefix), FailurePolicy::Open).with_clock(clock.clone());
    let store = LeasedStore::new(failover, 5, Duration::from_secs(3600)).unwrap();
    let limiter = KeyedRateLimiter::with_store(year_window(100), store, clock.clone());
    server.kill();
    let during: Vec<Decision> = (0..3).map(|_| limiter.check("k", 1).unwrap()).collect();
    // Once the server is back and the back-off over, the rest of that lease is
    // still spent here without Redis counting it.
    server.restart();
    clock.advance(Duration::from_secs(1));
    let after: Vec<Decision> = (0..2).map(|_| limiter.check("k", 1).unwrap()).collect();
    let counted = remaining_on_redis(&server, &prefix, 100, "k");
    assert!(
        during.iter().all(|d| d.source().is_degraded()),
        "decisions while the store is dead: {during:?}"
    );
    assert!(
        after.iter().all(|d| d.source() == Source::Store) || counted < 100,
        "after recovery {after:?} with nothing counted on Redis"
    );
}
