//! Time at its documented edges, read from the public docs alone, on virtual time
//! (`ManualClock`): every algorithm answers within its limit at the end of the
//! clock, time going backwards grants nothing in any algorithm, and timeouts of
//! zero and `Duration::MAX` on a window.

use super::edges_common::{MS, SECOND};
use sluicegate::algorithms::{
    Algorithm, AllOf, Counting, FixedWindow, LeakyBucket, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::{CellAlgorithm, Decision, KeyedRateLimiter, RateLimiter};
use std::time::Duration;

/// At the clock reading `now`, a fresh limiter still answers every call, and at one
/// instant admits at most `at_most` (exactly that many when `exact`), never more.
fn late_in_time<A: CellAlgorithm>(
    label: &str,
    algorithm: A,
    now: Nanos,
    at_most: usize,
    exact: bool,
) {
    let clock = ManualClock::new();
    clock.advance_nanos(now);
    let limiter = RateLimiter::with_clock(algorithm, clock.clone());
    let granted = (0..3 * at_most + 3)
        .filter(|_| limiter.try_acquire())
        .count();
    if exact {
        assert_eq!(granted, at_most, "{label} at {now}");
    } else {
        assert!(granted <= at_most, "{label} at {now}: {granted} granted");
    }
    let refused = limiter.check(1).unwrap();
    assert!(!refused.is_allowed(), "{label} at {now}: {refused:?}");
    assert!(!limiter.peek(1).unwrap().is_allowed(), "{label} at {now}");
    limiter.reserve(1).unwrap().cancel();
    assert!(!limiter.try_acquire(), "{label} at {now}");
    assert_eq!(clock.now(), now, "{label}");
}

/// Runs [`late_in_time`] on one algorithm twice: a second before 292 years (the
/// span every state covers: signed nanoseconds, or leaky-bucket ticks that "span at
/// least 292 years"), where a fresh limiter admits exactly `n` at one instant; and
/// at the clock's last reading, where states may have saturated (Guava's limiters
/// and the leaky bucket then refuse everything) but nothing may grant more than `n`.
fn late_and_last<A: CellAlgorithm + Clone>(label: &str, algorithm: A, n: usize) {
    late_in_time(label, algorithm.clone(), i64::MAX as u64 - SECOND, n, true);
    late_in_time(label, algorithm, u64::MAX, n, false);
}

#[test]
fn at_the_end_of_the_clock_every_algorithm_answers_within_its_limit() {
    let s = Duration::from_secs(1);
    late_and_last("fixed window", FixedWindow::new(3, s).unwrap(), 3);
    late_and_last("counter", SlidingWindowCounter::new(3, s).unwrap(), 3);
    late_and_last(
        "counter counting attempts",
        SlidingWindowCounter::new(3, s)
            .unwrap()
            .with_counting(Counting::Attempts),
        3,
    );
    late_and_last(
        "buckets",
        SlidingWindowBuckets::weighted(3, s, Duration::from_millis(100)).unwrap(),
        3,
    );
    late_and_last("meter", LeakyBucket::meter(3, 3, s).unwrap(), 3);
    // A queue's try takes only a turn that is due now; Guava's limiters start with
    // nothing stored at the clock's reading (the warming-up one full of expensive
    // permits), so each grants its one pay-later request.
    late_and_last("queue", LeakyBucket::queue(3, 3, s).unwrap(), 1);
    late_and_last("bursty", SmoothBursty::new(3.0).unwrap(), 1);
    late_and_last(
        "warming up",
        SmoothWarmingUp::new(3.0, Duration::from_secs(2)).unwrap(),
        1,
    );
    late_and_last(
        "set",
        AllOf::new((
            FixedWindow::new(3, s).unwrap(),
            SlidingWindowCounter::new(2, s).unwrap(),
        )),
        2,
    );
    // The log is exact a nanosecond before the clock's last reading, and at it
    // "no window of length `window`, wherever it lies, ever holds more than
    // `limit` granted permits".
    late_in_time("log", SlidingLog::new(3, s).unwrap(), u64::MAX - 1, 3, true);
    late_and_last("log", SlidingLog::new(3, s).unwrap(), 3);
}

/// Spends `algorithm` at `at`, then asks at each earlier instant: "time that
/// appears to go backwards must never grant extra permits" (`Algorithm`'s contract).
fn backwards<A: Algorithm>(label: &str, algorithm: &A, at: Nanos, earlier: &[Nanos]) {
    let mut state = algorithm.initial_state(0);
    let mut granted = 0;
    while algorithm
        .reserve::<Decision>(&mut state, at, 1, 0)
        .is_allowed()
    {
        granted += 1;
        assert!(granted < 10_000, "{label}: never refuses");
    }
    assert!(granted >= 1, "{label}: granted nothing at {at}");
    for &then in earlier {
        let peeked = algorithm.peek(&state, then, 1);
        assert!(
            !peeked.is_allowed(),
            "{label}: peek at {then} after {at}: {peeked:?}"
        );
        let asked: Decision = algorithm.reserve(&mut state, then, 1, 0);
        assert!(
            !asked.is_allowed(),
            "{label}: reserve at {then} after {at}: {asked:?}"
        );
    }
    // And back at the latest instant, still nothing more.
    let again: Decision = algorithm.reserve(&mut state, at, 1, 0);
    assert!(!again.is_allowed(), "{label}: {again:?}");
}

#[test]
fn time_going_backwards_grants_nothing_in_any_algorithm() {
    let s = Duration::from_secs(1);
    let at = 10 * SECOND + 500 * MS;
    let earlier = [
        at - 1,
        at - 400 * MS,
        at - 600 * MS,
        at - SECOND,
        at - 3 * SECOND,
        0,
    ];
    backwards("bursty", &SmoothBursty::new(5.0).unwrap(), at, &earlier);
    backwards(
        "warming up",
        &SmoothWarmingUp::new(5.0, Duration::from_secs(2)).unwrap(),
        at,
        &earlier,
    );
    backwards("meter", &LeakyBucket::meter(3, 3, s).unwrap(), at, &earlier);
    backwards("queue", &LeakyBucket::queue(3, 3, s).unwrap(), at, &earlier);
    backwards(
        "fixed window",
        &FixedWindow::new(3, s).unwrap(),
        at,
        &earlier,
    );
    backwards(
        "counter",
        &SlidingWindowCounter::new(3, s).unwrap(),
        at,
        &earlier,
    );
    backwards(
        "dropping buckets",
        &SlidingWindowBuckets::dropping(3, s, Duration::from_millis(250)).unwrap(),
        at,
        &earlier,
    );
    backwards(
        "weighted buckets",
        &SlidingWindowBuckets::weighted(3, s, Duration::from_millis(300)).unwrap(),
        at,
        &earlier,
    );
    backwards("log", &SlidingLog::new(3, s).unwrap(), at, &earlier);
    backwards(
        "spaced log",
        &SlidingLog::new(3, s)
            .unwrap()
            .with_min_spacing(Duration::from_millis(100)),
        at,
        &earlier,
    );
    backwards(
        "set",
        &AllOf::new((
            FixedWindow::new(5, s).unwrap(),
            SlidingLog::new(3, s).unwrap(),
        )),
        at,
        &earlier,
    );
}

#[test]
fn timeouts_of_zero_and_duration_max_on_a_window() {
    let window = || FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    // Direct, blocking.
    let clock = ManualClock::new();
    clock.advance(Duration::from_millis(250));
    let limiter = RateLimiter::with_clock(window(), clock.clone());
    assert!(limiter.try_acquire_n_timeout(2, Duration::ZERO).unwrap());
    // A granted timed try sleeps, as every acquire does, even for zero.
    assert_eq!(clock.take_sleeps(), [Duration::ZERO]);
    assert!(!limiter.try_acquire_timeout(Duration::ZERO));
    // The next window is 750 ms away: a timeout a nanosecond short answers false
    // at once, without sleeping.
    let short = Duration::from_millis(750) - Duration::from_nanos(1);
    assert!(!limiter.try_acquire_n_timeout(1, short).unwrap());
    assert!(clock.sleeps().is_empty() && clock.now() == 250 * MS);
    // Exactly 750 ms fits ("retry_after <= left").
    assert!(limiter
        .try_acquire_n_timeout(1, Duration::from_millis(750))
        .unwrap());
    assert_eq!(clock.now(), SECOND);
    assert!(limiter.try_acquire());
    // Duration::MAX means no limit.
    assert!(limiter.try_acquire_timeout(Duration::MAX));
    assert_eq!(clock.now(), 2 * SECOND);
    assert_eq!(
        clock.take_sleeps().iter().sum::<Duration>(),
        Duration::from_secs(1) + Duration::from_millis(750)
    );
    // Async: the same answers on the same clock.
    let handle = limiter.to_async();
    futures::executor::block_on(async {
        assert!(handle.try_acquire());
        assert!(!handle
            .try_acquire_n_timeout(1, short + Duration::from_millis(250))
            .await
            .unwrap());
        assert_eq!(clock.now(), 2 * SECOND);
        assert!(handle
            .try_acquire_n_timeout(1, Duration::MAX)
            .await
            .unwrap());
        assert_eq!(clock.now(), 3 * SECOND);
        assert_eq!(
            handle.try_acquire_n_timeout(3, Duration::MAX).await,
            Ok(false)
        );
    });
    assert_eq!(clock.now(), 3 * SECOND);
    // Keyed: the same, per key.
    let keyed = KeyedRateLimiter::with_clock(window(), clock.clone());
    assert!(keyed
        .try_acquire_n_timeout(&"k", 2, Duration::ZERO)
        .unwrap());
    assert!(!keyed
        .try_acquire_n_timeout(&"k", 1, Duration::from_millis(999))
        .unwrap());
    assert_eq!(clock.now(), 3 * SECOND);
    assert!(keyed
        .try_acquire_n_timeout(&"j", 2, Duration::ZERO)
        .unwrap());
    assert!(keyed.try_acquire_n_timeout(&"k", 1, Duration::MAX).unwrap());
    assert_eq!(clock.now(), 4 * SECOND);
    assert_eq!(
        keyed.try_acquire_n_timeout(&"k", u64::MAX, Duration::MAX),
        Ok(false)
    );
    assert_eq!(clock.now(), 4 * SECOND);
}
