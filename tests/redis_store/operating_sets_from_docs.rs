//! Sets of limits on a failing Redis store, as the failover and deny-cache docs
//! describe them: a set fails over to its local share member by member, a cached
//! refusal of a set keeps answering while the server is paused, and a set's report
//! under a closed policy is the one refusal.
#![cfg(feature = "redis")]

use super::operating_common::{bounded, options, year_window, Pair, TIMEOUT};
use crate::support::redis as redis_support;
use redis_support::{unique_prefix, RedisServer};
use sluicegate::algorithms::AllOf;
use sluicegate::clock::ManualClock;
use sluicegate::stores::deny_cache::DenyCache;
use sluicegate::stores::failover::{FailoverStore, FailurePolicy};
use sluicegate::stores::redis::RedisStore;
use sluicegate::{DefaultClock, KeyedRateLimiter, Source};
use std::time::Duration;

#[test]
fn a_set_fails_over_to_its_local_share_member_by_member() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("set-local");
    let clock = ManualClock::new();
    let set = AllOf::new((year_window(10), year_window(3)));
    let share = AllOf::new((year_window(5), year_window(2)));
    let store = FailoverStore::new(
        RedisStore::<String, Pair>::open_with(server.url(), options(&prefix)).unwrap(),
        FailurePolicy::Local(share),
    )
    .with_clock(clock.clone());
    let limiter = KeyedRateLimiter::with_store(set, store, clock.clone());

    let mut left = Vec::new();
    let d = limiter
        .check_each("k", 1, &mut |d| left.push((d.source(), d.remaining())))
        .unwrap();
    assert_eq!((d.source(), d.remaining()), (Source::Store, 2));
    assert_eq!(left, [(Source::Store, 9), (Source::Store, 2)]);

    server.kill();
    let mut left = Vec::new();
    let d = bounded("set", TIMEOUT, || {
        limiter.check_each("k", 1, &mut |d| left.push((d.source(), d.remaining())))
    })
    .unwrap();
    assert_eq!((d.source(), d.remaining()), (Source::Local, 1));
    assert_eq!(left, [(Source::Local, 4), (Source::Local, 1)]);
    assert!(limiter.check("k", 1).unwrap().is_allowed());
    let refused = limiter.check("k", 1).unwrap();
    assert_eq!(
        (
            refused.source(),
            refused.is_allowed(),
            refused.limit_index()
        ),
        (Source::Local, false, 1)
    );

    server.restart();
    clock.advance(Duration::from_secs(1));
    let d = limiter.check("k", 1).unwrap();
    assert_eq!(
        (d.source(), d.remaining()),
        (Source::Store, 2),
        "a new, empty server"
    );
}

#[test]
fn a_cached_refusal_of_a_set_keeps_answering_while_the_server_is_paused() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("set-cache");
    let set = AllOf::new((year_window(10), year_window(2)));
    let store = DenyCache::new(
        RedisStore::<String, Pair>::open_with(server.url(), options(&prefix)).unwrap(),
        &set,
    )
    .unwrap();
    let limiter = KeyedRateLimiter::with_store(set, store, DefaultClock::new());
    assert!(limiter.try_acquire("k") && limiter.try_acquire("k"));
    let refused = limiter.check("k", 1).unwrap();
    assert_eq!(
        (refused.source(), refused.is_allowed()),
        (Source::Store, false)
    );
    server.pause();
    for _ in 0..5 {
        let d = bounded("cached", Duration::ZERO, || limiter.check("k", 1)).unwrap();
        assert_eq!(
            (d.source(), d.is_allowed(), d.limit_index()),
            (Source::Cached, false, 1)
        );
    }
    assert_eq!(limiter.store().hits(), 5);
    server.resume();
}

#[test]
fn a_set_s_report_on_a_paused_server_under_a_closed_policy_is_the_one_refusal() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("set-closed");
    let clock = ManualClock::new();
    let set = AllOf::new((year_window(10), year_window(3)));
    let store = FailoverStore::new(
        RedisStore::<String, Pair>::open_with(server.url(), options(&prefix)).unwrap(),
        FailurePolicy::Closed,
    )
    .with_clock(clock.clone());
    let limiter = KeyedRateLimiter::with_store(set, store, clock.clone());
    assert!(limiter.check("k", 1).unwrap().is_allowed());
    server.pause();
    let mut each = Vec::new();
    let d = bounded("set", TIMEOUT, || {
        limiter.check_each("k", 1, &mut |d| each.push(d))
    })
    .unwrap();
    server.resume();
    assert_eq!((d.source(), d.is_allowed()), (Source::FailedClosed, false));
    assert_eq!(each.len(), 1, "{each:?}");
    assert_eq!(each[0].source(), Source::FailedClosed);
    std::thread::sleep(Duration::from_millis(300));
    clock.advance(Duration::from_secs(1));
    let mut each = Vec::new();
    let d = limiter
        .check_each("k", 1, &mut |d| each.push(d.remaining()))
        .unwrap();
    assert_eq!(
        (d.source(), d.remaining()),
        (Source::Store, 1),
        "the timed-out call did not land"
    );
    assert_eq!(each, [8, 1]);
}
