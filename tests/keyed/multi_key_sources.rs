//! A call on several keys is only as checked as its least checked key: its one
//! decision names the failure policy's source when a policy answered for any key,
//! and the store when the store answered for all.

use sluicegate::algorithms::FixedWindow;
use sluicegate::clock::ManualClock;
use sluicegate::stores::failover::{FailoverStore, FailurePolicy, Unreachable};
use sluicegate::stores::MemoryStore;
use sluicegate::{KeyedRateLimiter, Source};
use std::time::Duration;

fn window(limit: u64) -> FixedWindow {
    FixedWindow::new(limit, Duration::from_secs(60)).unwrap()
}

/// A limiter of 10 a minute over a store that never answers, with `policy`.
fn over_a_down_store(
    policy: FailurePolicy<FixedWindow>,
) -> KeyedRateLimiter<
    String,
    FixedWindow,
    FailoverStore<Unreachable, String, FixedWindow>,
    ManualClock,
> {
    let store = FailoverStore::new(Unreachable, policy);
    KeyedRateLimiter::with_store(window(10), store, ManualClock::new())
}

fn keys() -> Vec<String> {
    vec!["ip:10.0.0.1".to_owned(), "user:42".to_owned()]
}

#[test]
fn an_open_policy_grant_on_several_keys_says_unchecked() {
    let limiter = over_a_down_store(FailurePolicy::Open);
    let decision = limiter.check_all(&keys(), 1).unwrap();
    assert!(decision.is_allowed());
    assert_eq!(decision.source(), Source::Unchecked);
    assert!(decision.source().is_degraded());
    let reserved = limiter.reserve_all(&keys(), 1).unwrap();
    assert_eq!(reserved.decision().source(), Source::Unchecked);
}

#[test]
fn a_local_share_grant_on_several_keys_says_local() {
    let limiter = over_a_down_store(FailurePolicy::Local(window(2)));
    let first = limiter.check_all(&keys(), 1).unwrap();
    assert!(first.is_allowed());
    assert_eq!(first.source(), Source::Local);
    assert_eq!(first.remaining(), 1, "the local share of 2 decides");
    let second = limiter.check_all(&keys(), 1).unwrap();
    assert_eq!(second.source(), Source::Local);
    let refused = limiter.check_all(&keys(), 1).unwrap();
    assert!(!refused.is_allowed());
    assert_eq!(refused.source(), Source::Local);
}

#[test]
fn a_grant_the_store_made_for_every_key_says_store() {
    let limiter: KeyedRateLimiter<String, FixedWindow, MemoryStore<String, FixedWindow>, _> =
        KeyedRateLimiter::with_clock(window(10), ManualClock::new());
    let decision = limiter.check_all(&keys(), 1).unwrap();
    assert!(decision.is_allowed());
    assert_eq!(decision.source(), Source::Store);
}
