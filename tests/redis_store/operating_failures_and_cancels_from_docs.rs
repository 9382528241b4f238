//! What counts as a failure of the Redis store under a failover store, and where
//! cancels go, as the failover docs describe it: a configuration the store cannot
//! run is the call's own error, not a failure; cancels of the store's grants go to
//! it while it is healthy and are dropped while backed off; a local grant's cancel
//! goes back to the local share.
#![cfg(feature = "redis")]

use super::operating_common::{
    bounded, failover_limiter, options, redis, year_window, Failover, TIMEOUT,
};
use crate::support::redis as redis_support;
use redis_support::{unique_prefix, RedisServer};
use sluicegate::algorithms::{FixedWindow, SmoothBursty};
use sluicegate::clock::ManualClock;
use sluicegate::stores::failover::{FailoverStore, FailurePolicy};
use sluicegate::stores::redis::RedisStore;
use sluicegate::{DefaultClock, Error, KeyedRateLimiter, Source};
use std::time::Duration;

#[test]
fn a_configuration_the_store_cannot_run_is_the_call_s_own_error_not_a_failure() {
    // Not whole microseconds: refused by the Redis store before anything is
    // sent, so even a dead server makes it the call's own error, returned as it
    // is, and the failover store is not degraded by it.
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("bad-config");
    let odd = FixedWindow::new(10, Duration::from_nanos(1_000_000_500)).unwrap();
    let store: Failover<DefaultClock> =
        FailoverStore::new(redis(&server, &prefix), FailurePolicy::Open);
    let limiter = KeyedRateLimiter::with_store(odd, store, DefaultClock::new());
    let live = limiter.check("k", 1);
    server.kill();
    let dead = limiter.check("k", 1);
    for result in [live, dead] {
        match result {
            Err(Error::Store(e)) => {
                panic!("a configuration error reported as a store failure: {e}")
            }
            Err(_) => {}
            Ok(d) => panic!("answered {d:?} instead of the call's own error"),
        }
    }
    assert!(!limiter.store().is_degraded());
    assert_eq!(limiter.store().stats().failures, 0);
}

#[test]
fn cancels_of_the_store_s_grants_go_to_it_while_healthy_and_are_dropped_while_backed_off() {
    // One permit per 10 s: each reserve after the first owes 10 s more.
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("cancels");
    let clock = ManualClock::new();
    let rate = SmoothBursty::new(0.1).unwrap();
    let store = FailoverStore::new(
        RedisStore::<String, SmoothBursty>::open_with(server.url(), options(&prefix)).unwrap(),
        FailurePolicy::Closed,
    )
    .with_clock(clock.clone());
    let limiter = KeyedRateLimiter::with_store(rate, store, clock.clone());
    let now = limiter.reserve("k", 1).unwrap();
    assert_eq!(now.delay(), Duration::ZERO);
    let queued = limiter.reserve("k", 1).unwrap();
    // About 9 s (the first grant spent the 0.1 permit a 1 s burst stores), then 19 s.
    assert!(
        queued.delay() > Duration::from_secs(8),
        "{:?}",
        queued.delay()
    );
    let more = limiter.reserve("k", 1).unwrap();
    assert!(more.delay() > Duration::from_secs(18), "{:?}", more.delay());
    // Healthy: the cancel reaches Redis and the last turn comes back.
    more.cancel().unwrap();
    let peek = limiter.peek("k", 1).unwrap();
    assert!(peek.retry_after() < Duration::from_secs(21), "{peek:?}");
    assert!(peek.retry_after() > Duration::from_secs(15), "{peek:?}");

    server.pause();
    let failed = bounded("failure", TIMEOUT, || limiter.check("other", 1)).unwrap();
    assert_eq!(failed.source(), Source::FailedClosed);
    // Backed off: the cancel is dropped at once, and counted.
    bounded("dropped cancel", Duration::ZERO, || queued.cancel()).unwrap();
    assert_eq!(limiter.store().stats().dropped_cancels, 1);
    server.resume();

    clock.advance(Duration::from_secs(1));
    let peek = limiter.peek("k", 1).unwrap();
    assert_eq!(peek.source(), Source::Store);
    // Two turns still owed (about 19 s), not one (about 9 s): the dropped
    // cancel gave nothing back.
    assert!(peek.retry_after() > Duration::from_secs(15), "{peek:?}");
}

#[test]
fn a_local_grant_s_cancel_goes_back_to_the_local_share() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("local-cancel");
    let clock = ManualClock::new();
    let (limiter, _) = failover_limiter(
        &server,
        &prefix,
        FailurePolicy::Local(year_window(2)),
        &clock,
    );
    assert!(limiter.try_acquire("k"));
    server.kill();
    let r = limiter.reserve("k", 1).unwrap();
    assert_eq!(
        (r.decision().source(), r.decision().remaining()),
        (Source::Local, 1)
    );
    r.cancel().unwrap();
    let d = limiter.check("k", 1).unwrap();
    assert_eq!(
        (d.source(), d.remaining()),
        (Source::Local, 1),
        "the cancel gave the permit back"
    );
    assert_eq!(limiter.store().stats().dropped_cancels, 0);
}
