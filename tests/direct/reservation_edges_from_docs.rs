//! Reservations given back or kept, read from the public docs alone, on virtual
//! time (`ManualClock`): a grant that acts at once comes back only when cancelled
//! at its instant, a queue's turns are given back by Go's rule, a full queue is
//! waited out only when the turn fits the timeout, a key listed twice is charged
//! twice, a cancel gives back the grant alone, and a refused reservation keeps its
//! `retry_after` and gives back nothing.

use super::edges_common::{MS, SECOND};
use sluicegate::algorithms::{
    Algorithm, Counting, FixedWindow, LeakyBucket, Limits, Receipt, SlidingLog,
    SlidingWindowBuckets, SlidingWindowCounter, SmoothBursty,
};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{CellAlgorithm, Decision, KeyedRateLimiter, RateLimiter};
use std::time::Duration;

/// A grant that acts at once can be given back only at the instant it was made
/// (`Algorithm::cancel`); later, or dropped, it stays taken.
fn cancel_only_at_the_instant<A: CellAlgorithm>(label: &str, algorithm: A, capacity: usize) {
    let clock = ManualClock::new();
    clock.advance(Duration::from_millis(10_100));
    let limiter = RateLimiter::with_clock(algorithm, clock.clone());
    let left_now = || (0..2 * capacity).filter(|_| limiter.try_acquire()).count();
    // At the same instant: the permit comes back.
    let r = limiter.reserve(1).unwrap();
    assert!(
        r.is_ok() && r.delay().is_zero(),
        "{label}: {:?}",
        r.decision()
    );
    assert_eq!(r.acts_at(), clock.now(), "{label}");
    r.cancel();
    assert_eq!(left_now(), capacity, "{label}: a cancel at the instant");
    // A nanosecond later: nothing comes back.
    clock.advance(Duration::from_secs(100));
    let r = limiter.reserve(1).unwrap();
    clock.advance_nanos(1);
    r.cancel();
    assert_eq!(left_now(), capacity - 1, "{label}: a cancel 1 ns late");
    // Dropped: kept.
    clock.advance(Duration::from_secs(100));
    drop(limiter.reserve(1).unwrap());
    assert_eq!(left_now(), capacity - 1, "{label}: a dropped reservation");
    assert!(clock.sleeps().is_empty(), "{label}");
}

#[test]
fn grants_that_act_at_once_come_back_only_when_cancelled_at_their_instant() {
    let s = Duration::from_secs(1);
    let quarter = Duration::from_millis(250);
    cancel_only_at_the_instant("fixed window", FixedWindow::new(3, s).unwrap(), 3);
    cancel_only_at_the_instant("counter", SlidingWindowCounter::new(3, s).unwrap(), 3);
    cancel_only_at_the_instant(
        "dropping buckets",
        SlidingWindowBuckets::dropping(3, s, quarter).unwrap(),
        3,
    );
    cancel_only_at_the_instant(
        "weighted buckets",
        SlidingWindowBuckets::weighted(3, s, quarter).unwrap(),
        3,
    );
    cancel_only_at_the_instant("log", SlidingLog::new(3, s).unwrap(), 3);
    cancel_only_at_the_instant(
        "spaced log",
        SlidingLog::new(3, s)
            .unwrap()
            .with_min_spacing(Duration::ZERO),
        3,
    );
    cancel_only_at_the_instant("meter", LeakyBucket::meter(3, 1, s).unwrap(), 3);
}

#[test]
fn queue_turns_are_given_back_by_gos_rule() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(
        LeakyBucket::queue(3, 1, Duration::from_secs(1)).unwrap(),
        clock.clone(),
    );
    let turns: Vec<_> = (0..3).map(|_| limiter.reserve(1).unwrap()).collect();
    let delays: Vec<_> = turns.iter().map(|r| r.delay()).collect();
    assert_eq!(delays, [0, 1, 2].map(Duration::from_secs));
    // Full: a fourth is refused at once rather than queued.
    assert!(!limiter.reserve(1).unwrap().is_ok());
    let mut turns = turns.into_iter();
    let (_first, second, third) = (
        turns.next().unwrap(),
        turns.next().unwrap(),
        turns.next().unwrap(),
    );
    // The second turn has the third behind it: nothing comes back.
    second.cancel();
    assert!(!limiter.reserve(1).unwrap().is_ok());
    // The latest comes back whole.
    third.cancel();
    let again = limiter.reserve(1).unwrap();
    assert!(again.is_ok());
    assert_eq!(again.delay(), Duration::from_secs(2));
    // Past its time to act (2 s), nothing comes back: the next turn is at 3 s.
    clock.advance(Duration::from_millis(2_500));
    again.cancel();
    let next = limiter.reserve(1).unwrap();
    assert_eq!(next.delay(), Duration::from_millis(500));
    // At its time to act exactly, "that instant included", it does.
    clock.advance(Duration::from_millis(500));
    next.cancel();
    assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::ZERO);
    assert!(clock.sleeps().is_empty());
}

#[test]
fn a_full_queue_is_waited_out_only_when_the_turn_fits_the_timeout() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(
        LeakyBucket::queue(2, 1, Duration::from_secs(1)).unwrap(),
        clock.clone(),
    );
    assert!(limiter.try_acquire());
    assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::from_secs(1));
    // Full: a caller who does not wait gets in once the queue is idle, at 2 s.
    assert_eq!(
        limiter.check(1).unwrap().retry_after(),
        Duration::from_secs(2)
    );
    // Room comes at 1 s, but the turn it gives is at 2 s, past a 1.5 s deadline:
    // false at once, without sleeping towards a retry that cannot succeed.
    let short = Duration::from_millis(1_500);
    assert_eq!(limiter.try_acquire_n_timeout(1, short), Ok(false));
    assert!(clock.sleeps().is_empty() && clock.now() == 0);
    // With 2 s it fits: a second for room, a second for the turn.
    assert_eq!(
        limiter.try_acquire_n_timeout(1, Duration::from_secs(2)),
        Ok(true)
    );
    assert_eq!(clock.now(), 2 * SECOND);
    assert_eq!(
        clock.take_sleeps().iter().sum::<Duration>(),
        Duration::from_secs(2)
    );
    // One queued behind the one being served: the next waits one interval.
    assert_eq!(limiter.acquire(), Ok(Duration::from_secs(1)));
    assert_eq!(clock.now(), 3 * SECOND);
}

#[test]
fn a_key_listed_twice_is_charged_twice_and_cancelled_in_the_order_listed() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    let windowed = KeyedRateLimiter::with_clock(window, clock.clone());
    // "check_all(&[a, a], 1) needs room for 2 in a".
    assert!(!windowed.check_all(&["b", "b"], 1).unwrap().is_allowed());
    assert!(windowed.check(&"b", 1).unwrap().is_allowed());
    // Pay later, twice on one key: turns at 0 s and 0.5 s; the reservation acts at
    // the later one.
    let bursty = KeyedRateLimiter::with_clock(SmoothBursty::new(2.0).unwrap(), clock.clone());
    let twice = bursty.reserve_all(&["a", "a"], 1).unwrap();
    assert!(twice.is_ok());
    assert_eq!(twice.delay(), Duration::from_millis(500));
    // "the first giving back only what the second leaves": the first gives back
    // nothing (the second was reserved after it), the second its whole charge.
    twice.cancel().unwrap();
    assert_eq!(
        bursty.reserve(&"a", 1).unwrap().delay(),
        Duration::from_millis(500)
    );
    assert!(clock.sleeps().is_empty());
}

#[test]
fn a_cancel_gives_back_the_grant_alone_never_the_refusals_recorded_beside_it() {
    let now = 500 * MS;
    // The counter counting attempts: a cancel takes the grant's own cost off, and
    // the refused attempt counted after it stays counted.
    for (counting, after_refusal, after_cancel) in [
        (Counting::Admitted, (0, 1), (0, 0)),
        (Counting::Attempts, (0, 4), (0, 3)),
    ] {
        let counter = SlidingWindowCounter::new(3, Duration::from_secs(1))
            .unwrap()
            .with_counting(counting);
        let mut state = counter.initial_state(0);
        let (grant, receipt): (Decision, Receipt) = counter.reserve(&mut state, now, 1, 0);
        assert!(grant.is_allowed() && !receipt.is_none(), "{counting:?}");
        let refused: Decision = counter.reserve(&mut state, now, 3, 0);
        assert!(!refused.is_allowed(), "{counting:?}");
        assert_eq!(counter.counts(&state, now), after_refusal, "{counting:?}");
        counter.cancel(&mut state, now, &receipt, now);
        assert_eq!(counter.counts(&state, now), after_cancel, "{counting:?}");
    }
    // The log: an entry comes back only while it is the newest.
    let window = Duration::from_secs(10);
    for recording in [false, true] {
        let log = SlidingLog::new(3, window).unwrap();
        let log = if recording {
            log.with_rejected_recorded()
        } else {
            log
        };
        let mut state = log.initial_state(0);
        let (_, first): (Decision, Receipt) = log.reserve(&mut state, now, 1, 0);
        let (_, second): (Decision, Receipt) = log.reserve(&mut state, now, 1, 0);
        log.cancel(&mut state, now, &first, now); // behind the second: nothing
        assert_eq!(
            log.live_entries(&state, now).count(),
            2,
            "recording {recording}"
        );
        let refused: Decision = log.reserve(&mut state, now, 2, 0);
        assert!(!refused.is_allowed(), "recording {recording}");
        log.cancel(&mut state, now, &second, now);
        let live: Vec<_> = log.live_entries(&state, now).collect();
        if recording {
            // The refused attempt (cost 2) was recorded after the second grant,
            // which is then no longer the newest: both stay.
            assert_eq!(live, [(now, 1), (now, 1), (now, 2)]);
        } else {
            assert_eq!(live, [(now, 1)]);
        }
    }
}

#[test]
fn a_refused_reservation_keeps_its_retry_after_and_gives_back_nothing() {
    let s = Duration::from_secs(1);
    // Each limit in a one-member set, so that both limiters have one type.
    for (label, limiter) in [
        (
            "fixed window",
            RateLimiter::with_clock(
                Limits::new().with(FixedWindow::new(1, s).unwrap()),
                ManualClock::new(),
            ),
        ),
        (
            "log",
            RateLimiter::with_clock(
                Limits::new().with(SlidingLog::new(1, s).unwrap()),
                ManualClock::new(),
            ),
        ),
    ] {
        let clock = limiter.clock().clone();
        clock.advance(Duration::from_millis(250));
        assert!(limiter.try_acquire(), "{label}");
        let refused = limiter.reserve(1).unwrap();
        assert!(!refused.is_ok(), "{label}");
        let first = refused.delay();
        assert!(!first.is_zero() && first <= s, "{label}: {first:?}");
        clock.advance(Duration::from_millis(100));
        // "its retry_after as of when it was made".
        assert_eq!(refused.delay(), first, "{label}");
        assert_eq!(refused.decision().retry_after(), first, "{label}");
        assert_eq!(refused.wait(), Duration::ZERO, "{label}");
        limiter.reserve(1).unwrap().cancel();
        assert!(
            !limiter.try_acquire(),
            "{label}: a refusal's cancel gave something"
        );
        assert!(clock.sleeps().is_empty(), "{label}");
    }
}
