//! The failover store (`stores::failover`) over a `Probe` switched to fail, tested
//! from its docs alone: fail-closed backs off, doubling, and one probe recovers;
//! fail-open lets every call through unchecked; a local share limits each key while
//! the store is down and cancels go where their grant was made; only a store error
//! degrades it; and while one caller probes, the others keep to the policy.

use super::probe_store::{ms, secs, Probe, BAD_INPUT, DOWN, MS, UP};
use sluicegate::algorithms::FixedWindow;
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::stores::failover::{Backoff, Event, FailoverStore, FailurePolicy};
use sluicegate::stores::MemoryStore;
use sluicegate::{Error, KeyedRateLimiter, Source, Verdict};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Events = Arc<Mutex<Vec<(Source, bool)>>>;

fn recorder() -> (Events, impl Fn(&Event<'_>) + Send + Sync + 'static) {
    let events: Events = Arc::default();
    let log = Arc::clone(&events);
    (events, move |e: &Event<'_>| {
        log.lock().unwrap().push((e.source, e.error.is_some()))
    })
}

/// stores/failover (Back-off) and FailurePolicy::Closed: a failed call is refused
/// with the rest of the back-off as retry_after; the store is not asked until the
/// back-off ends; then one call probes it; a failed probe doubles the back-off up
/// to its max; an answered one ends the degradation and resets the back-off.
#[test]
fn fail_closed_backs_off_doubling_and_one_probe_recovers() {
    let clock = ManualClock::new();
    let probe = Probe::new(MemoryStore::<&'static str, FixedWindow>::new());
    let (events, observer) = recorder();
    let store = FailoverStore::new(probe.clone(), FailurePolicy::Closed)
        .with_clock(clock.clone())
        .with_backoff(Backoff::new(secs(1), secs(4)))
        .on_degraded(observer);
    let limiter = KeyedRateLimiter::with_store(
        FixedWindow::new(10, secs(60)).unwrap(),
        store,
        clock.clone(),
    );
    let refused_for = |wait: Duration, calls: u64| {
        let d = limiter.check(&"k", 1).unwrap();
        assert_eq!(d.source(), Source::FailedClosed);
        assert_eq!(
            (d.verdict(), d.limit(), d.remaining()),
            (Verdict::Denied, 0, 0)
        );
        assert_eq!(d.retry_after(), wait, "at {} ms", clock.now() / MS);
        assert_eq!(probe.calls(), calls, "at {} ms", clock.now() / MS);
    };

    assert_eq!(limiter.check(&"k", 1).unwrap().remaining(), 9);
    probe.set(DOWN);
    refused_for(secs(1), 2); // asked, failed
    assert!(limiter.store().is_degraded());
    clock.advance(ms(400));
    refused_for(ms(600), 2); // backed off: not asked
    clock.advance(ms(600));
    refused_for(secs(2), 3); // a failed probe doubles the back-off
    clock.advance(secs(1));
    refused_for(secs(1), 3);
    clock.advance(secs(1));
    refused_for(secs(4), 4);
    clock.advance(secs(4));
    refused_for(secs(4), 5); // at its max
    probe.set(UP);
    clock.advance(ms(3_999));
    refused_for(ms(1), 5);
    clock.advance(ms(1));
    let back = limiter.check(&"k", 1).unwrap(); // the probe is answered
    assert_eq!((back.source(), back.remaining()), (Source::Store, 8));
    assert!(!limiter.store().is_degraded());
    assert_eq!(limiter.check(&"k", 1).unwrap().source(), Source::Store);
    assert_eq!(probe.calls(), 7);
    probe.set(DOWN);
    refused_for(secs(1), 8); // the back-off starts over

    let stats = limiter.store().stats();
    assert_eq!((stats.failures, stats.probes, stats.recoveries), (5, 4, 1));
    assert_eq!(
        (stats.failed_closed, stats.unchecked, stats.local),
        (8, 0, 0)
    );
    use Source::FailedClosed as F;
    let seen = events.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (F, true),
            (F, false),
            (F, true),
            (F, false),
            (F, true),
            (F, true),
            (F, false),
            (F, true),
        ]
    );
}

/// FailurePolicy::Open: every call is allowed unchecked, with limit and remaining 0
/// and nothing to give back, blocking, async and on several keys; nothing is
/// counted in the store meanwhile.
#[test]
fn fail_open_lets_every_call_through_unchecked_and_counts_nothing() {
    let clock = ManualClock::new();
    let probe = Probe::new(MemoryStore::<&'static str, FixedWindow>::new());
    let store = FailoverStore::new(probe.clone(), FailurePolicy::Open).with_clock(clock.clone());
    let limiter =
        KeyedRateLimiter::with_store(FixedWindow::new(3, secs(60)).unwrap(), store, clock.clone());
    probe.set(DOWN);
    for _ in 0..10 {
        let d = limiter.check(&"k", 2).unwrap();
        assert_eq!(
            (d.source(), d.is_allowed(), d.limit(), d.remaining()),
            (Source::Unchecked, true, 0, 0)
        );
    }
    assert_eq!(limiter.acquire_n(&"k", 3).unwrap(), Duration::ZERO);
    assert!(limiter.check_all(&["k", "j"], 1).unwrap().is_allowed());
    let async_answer = futures::executor::block_on(limiter.to_async().check(&"k", 1)).unwrap();
    assert_eq!(async_answer.source(), Source::Unchecked);
    let held = limiter.reserve(&"k", 1).unwrap();
    assert!(held.is_ok());
    held.cancel().unwrap();
    assert_eq!(probe.cancels(), 0);
    assert_eq!(probe.calls(), 1);
    assert_eq!(limiter.store().stats().unchecked, 14);

    probe.set(UP);
    clock.advance(secs(1));
    let d = limiter.check(&"k", 1).unwrap();
    assert_eq!((d.source(), d.remaining()), (Source::Store, 2));
}

/// FailurePolicy::Local and stores/failover (Cancels): while the store is down each
/// key gets the local share, keys apart; a local grant's cancel goes to the local
/// limit; a cancel of the store's grant while backed off is dropped (its permit
/// stays taken there); nothing is merged back; what an outage spent stays spent in
/// the next within its window.
#[test]
fn a_local_share_limits_each_key_while_down_and_cancels_go_where_the_grant_was_made() {
    let clock = ManualClock::new();
    let probe = Probe::new(MemoryStore::<&'static str, FixedWindow>::new());
    let share = FixedWindow::new(3, secs(60)).unwrap();
    let store = FailoverStore::new(probe.clone(), FailurePolicy::Local(share))
        .with_clock(clock.clone())
        .with_backoff(Backoff::fixed(secs(1)));
    let limiter = KeyedRateLimiter::with_store(
        FixedWindow::new(10, secs(60)).unwrap(),
        store,
        clock.clone(),
    );
    let local = |key: &'static str, remaining: u64| {
        let d = limiter.check(&key, 1).unwrap();
        assert_eq!(
            (d.source(), d.is_allowed(), d.limit(), d.remaining()),
            (Source::Local, true, 3, remaining),
            "{key}"
        );
    };

    let from_store = limiter.reserve(&"a", 1).unwrap();
    assert_eq!(from_store.decision().source(), Source::Store);
    probe.set(DOWN);
    local("a", 2);
    from_store.cancel().unwrap(); // backed off: dropped
    assert_eq!(
        (limiter.store().stats().dropped_cancels, probe.cancels()),
        (1, 0)
    );
    local("a", 1);
    local("a", 0);
    let refused = limiter.check(&"a", 1).unwrap();
    assert_eq!(
        (refused.source(), refused.verdict(), refused.retry_after()),
        (Source::Local, Verdict::Denied, secs(60))
    );
    local("b", 2);
    let from_local = limiter.reserve(&"b", 1).unwrap();
    assert_eq!(from_local.decision().source(), Source::Local);
    from_local.cancel().unwrap(); // at its instant: given back to the local limit
    local("b", 1);
    assert_eq!(probe.cancels(), 0);

    probe.set(UP);
    clock.advance(secs(1));
    let back = limiter.check(&"a", 1).unwrap();
    // The store still counts the dropped cancel's permit, and none of the local ones.
    assert_eq!((back.source(), back.remaining()), (Source::Store, 8));
    probe.set(DOWN);
    let spent = limiter.check(&"a", 1).unwrap();
    assert_eq!((spent.source(), spent.is_allowed()), (Source::Local, false));
    local("c", 2);
    let stats = limiter.store().stats();
    assert_eq!((stats.recoveries, stats.failures, stats.local), (1, 2, 9));
}

/// stores/failover (Failures): only `Error::Store` counts as a failure; any other
/// error is the call's own, returned as it is, and the store stays healthy.
#[test]
fn only_a_store_error_degrades_the_failover_store() {
    let clock = ManualClock::new();
    let probe = Probe::new(MemoryStore::<&'static str, FixedWindow>::new());
    let store = FailoverStore::new(probe.clone(), FailurePolicy::Open).with_clock(clock.clone());
    let limiter =
        KeyedRateLimiter::with_store(FixedWindow::new(3, secs(60)).unwrap(), store, clock);
    probe.set(BAD_INPUT);
    for calls in 1..=3 {
        assert!(matches!(
            limiter.check(&"k", 1),
            Err(Error::InvalidKeys { .. })
        ));
        assert_eq!(probe.calls(), calls);
    }
    assert!(matches!(
        limiter.check_all(&["k", "j"], 1),
        Err(Error::InvalidKeys { .. })
    ));
    assert!(!limiter.store().is_degraded());
    assert_eq!(limiter.store().stats().failures, 0);
    probe.set(UP);
    assert_eq!(limiter.check(&"k", 1).unwrap().source(), Source::Store);
    assert_eq!(probe.calls(), 5);
}

/// stores/failover (Back-off): once the back-off is over, the first caller probes
/// the store with its own call while every other caller keeps to the policy, at
/// once, refused with the initial back-off as retry_after.
#[test]
fn while_one_caller_probes_the_others_keep_to_the_policy() {
    let clock = ManualClock::new();
    let probe = Probe::new(MemoryStore::<&'static str, FixedWindow>::new());
    let (events, observer) = recorder();
    let store = FailoverStore::new(probe.clone(), FailurePolicy::Closed)
        .with_clock(clock.clone())
        .with_backoff(Backoff::new(secs(1), secs(8)))
        .on_degraded(observer);
    let limiter = KeyedRateLimiter::with_store(
        FixedWindow::new(10, secs(60)).unwrap(),
        store,
        clock.clone(),
    );
    probe.set(DOWN);
    assert_eq!(
        limiter.check(&"k", 1).unwrap().source(),
        Source::FailedClosed
    );
    clock.advance(secs(1));
    probe.set(UP);
    probe.arm_pause();
    std::thread::scope(|scope| {
        let prober = scope.spawn(|| limiter.check(&"k", 1).unwrap());
        probe.wait_until_paused();
        for _ in 0..8 {
            let other = limiter.check(&"j", 1).unwrap();
            assert_eq!(
                (other.source(), other.retry_after()),
                (Source::FailedClosed, secs(1))
            );
        }
        assert_eq!(probe.calls(), 2);
        probe.release();
        let probed = prober.join().unwrap();
        assert_eq!((probed.source(), probed.remaining()), (Source::Store, 9));
    });
    assert!(!limiter.store().is_degraded());
    assert_eq!(limiter.check(&"j", 1).unwrap().source(), Source::Store);
    let stats = limiter.store().stats();
    assert_eq!(
        (stats.probes, stats.recoveries, stats.failed_closed),
        (1, 1, 9)
    );
    let seen = events.lock().unwrap();
    assert_eq!(seen[0], (Source::FailedClosed, true));
    assert!(seen[1..]
        .iter()
        .all(|&e| e == (Source::FailedClosed, false)));
}
