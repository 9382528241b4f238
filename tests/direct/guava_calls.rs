//! Guava's calls beyond plain pacing: rate changes mid-run, `rate()` read-back,
//! `Display`, and timed tries with Guava's `canAcquire` rule.

use crate::support::virtual_time;

use sluicegate::algorithms::SmoothWarmingUp;
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::RateLimiter;
use std::time::Duration;
use virtual_time::{assert_slept, bursty};

fn warming(
    rate: f64,
    warmup: Duration,
) -> (RateLimiter<SmoothWarmingUp, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    (
        RateLimiter::warming_up_with_clock(rate, warmup, clock.clone()).unwrap(),
        clock,
    )
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn count_free_grants<A: sluicegate::CellAlgorithm, C: Clock>(limiter: &RateLimiter<A, C>) -> usize {
    (0..10_000).take_while(|_| limiter.try_acquire()).count()
}

// ---- rate changes -------------------------------------------------------------

#[test]
fn bursty_and_update() {
    // testBurstyAndUpdate: the first request after set_rate still repays the debt
    // reserved under the old rate; the new rate applies from the next one.
    let (limiter, clock) = bursty(1.0);
    limiter.acquire_n(1).unwrap();
    limiter.acquire_n(1).unwrap();
    limiter.set_rate(2.0).unwrap();
    limiter.acquire_n(1).unwrap();
    limiter.acquire_n(2).unwrap();
    limiter.acquire_n(4).unwrap();
    limiter.acquire_n(1).unwrap();
    assert_slept(&clock, &[0.00, 1.00, 1.00, 0.50, 1.00, 2.00]);
}

#[test]
fn bursty_rate_change_rescales_stored_permits_up() {
    let (limiter, clock) = bursty(2.0);
    clock.advance(ms(500)); // one permit stored (of 2)
    limiter.set_rate(10.0).unwrap(); // 1 × 10 / 2 = 5 stored
    assert_eq!(count_free_grants(&limiter), 5 + 1);
}

#[test]
fn bursty_rate_change_rescales_stored_permits_down() {
    let (limiter, clock) = bursty(4.0);
    clock.advance(Duration::from_secs(3)); // full: 4 stored
    limiter.set_rate(2.0).unwrap(); // 4 × 2 / 4 = 2 stored
    assert_eq!(count_free_grants(&limiter), 2 + 1);
}

#[test]
fn bursty_rate_change_keeps_the_debt() {
    let (limiter, clock) = bursty(1.0);
    limiter.acquire_n(10).unwrap(); // 10 s of debt at the old rate
    limiter.set_rate(100.0).unwrap();
    assert!(!limiter.try_acquire_timeout(Duration::from_millis(9_999)));
    assert!(limiter.try_acquire_timeout(Duration::from_secs(10)));
    assert_eq!(clock.now(), 10_000_000_000);
    assert_eq!(limiter.acquire().unwrap(), ms(10));
}

#[test]
fn simple_rate_update() {
    // testSimpleRateUpdate, on a warming-up limiter.
    let (limiter, _clock) = warming(5.0, Duration::from_secs(5));
    assert_eq!(limiter.rate(), 5.0);
    limiter.set_rate(10.0).unwrap();
    assert_eq!(limiter.rate(), 10.0);
    assert!(limiter.set_rate(0.0).is_err());
    assert!(limiter.set_rate(-10.0).is_err());
    assert_eq!(limiter.rate(), 10.0);
}

#[test]
fn warming_up_rate_change_mid_warm_up_rescales_stored_permits() {
    // From cold at 2/s (8 stored, threshold 4), spend 3; 5 stored = 3/8 of the way
    // down. At 4/s the bucket holds 16: 10 stored, still above the threshold of 8,
    // so the next permits still cost more than the new stable 0.25 s.
    let (limiter, clock) = warming(2.0, Duration::from_secs(4));
    for _ in 0..3 {
        limiter.acquire().unwrap();
    }
    limiter.set_rate(4.0).unwrap();
    limiter.acquire().unwrap(); // repays the old-rate debt
    clock.take_sleeps();
    let waits: Vec<f64> = (0..4)
        .map(|_| limiter.acquire().unwrap().as_secs_f64())
        .collect();
    assert!(
        waits[0] > 0.25 && waits.windows(2).all(|w| w[0] >= w[1]),
        "{waits:?}"
    );
    assert!((waits[3] - 0.25).abs() < 1e-6, "{waits:?}");
}

// ---- rate() and Display ---------------------------------------------------------

#[test]
fn rate_reads_back_as_guava_computes_it() {
    let (limiter, _clock) = bursty(7.0);
    assert_eq!(limiter.rate(), 6.999999999999999);
    let (warm, _clock) = warming(7.0, Duration::from_secs(1));
    assert_eq!(warm.rate(), 6.999999999999999);
    for exact in [3.0, 5.0, 10.0, 0.1, 0.3, 1.5, 333.0, 0.001] {
        limiter.set_rate(exact).unwrap();
        assert_eq!(limiter.rate(), exact);
        warm.set_rate(exact).unwrap();
        assert_eq!(warm.rate(), exact);
    }
    limiter.set_rate(7.0).unwrap();
    assert_eq!(limiter.rate(), 6.999999999999999);
    limiter.set_rate(f64::INFINITY).unwrap();
    assert_eq!(limiter.rate(), f64::INFINITY);
}

#[test]
fn display_is_guavas_to_string() {
    let (limiter, _clock) = bursty(5.0);
    assert_eq!(limiter.to_string(), "RateLimiter[stableRate=5.0qps]");
    limiter.set_rate(7.0).unwrap();
    assert_eq!(limiter.to_string(), "RateLimiter[stableRate=7.0qps]");
    limiter.set_rate(0.25).unwrap();
    assert_eq!(limiter.to_string(), "RateLimiter[stableRate=0.3qps]");
    let (warm, _clock) = warming(1.0, Duration::from_secs(1));
    assert_eq!(warm.to_string(), "RateLimiter[stableRate=1.0qps]");
    warm.set_rate(333.0).unwrap();
    assert_eq!(warm.to_string(), "RateLimiter[stableRate=333.0qps]");
}

// ---- timeouts: Guava's canAcquire ---------------------------------------------------

#[test]
fn try_acquire_no_wait_allowed() {
    // testTryAcquire_noWaitAllowed
    let (limiter, clock) = bursty(5.0);
    assert!(limiter.try_acquire_timeout(Duration::ZERO));
    assert!(!limiter.try_acquire_timeout(Duration::ZERO));
    assert!(!limiter.try_acquire_timeout(Duration::ZERO));
    clock.advance(ms(100));
    assert!(!limiter.try_acquire_timeout(Duration::ZERO));
}

#[test]
fn try_acquire_some_wait_allowed() {
    // testTryAcquire_someWaitAllowed
    let (limiter, clock) = bursty(5.0);
    assert!(limiter.try_acquire_timeout(Duration::ZERO));
    assert!(limiter.try_acquire_timeout(ms(200)));
    assert!(!limiter.try_acquire_timeout(ms(100)));
    clock.advance(ms(100));
    assert!(limiter.try_acquire_timeout(ms(100)));
    // Successful tries sleep their wait (0 included); a failed one never sleeps.
    assert_slept(&clock, &[0.00, 0.20, 0.10]);
}

#[test]
fn try_acquire_overflow() {
    // testTryAcquire_overflow: the largest timeout saturates instead of overflowing.
    let (limiter, clock) = bursty(5.0);
    assert!(limiter.try_acquire_timeout(Duration::ZERO));
    clock.advance(ms(100));
    assert!(limiter.try_acquire_timeout(Duration::MAX));
    assert_slept(&clock, &[0.00, 0.10]);
}

#[test]
fn duration_max_timeout_waits_out_a_big_debt() {
    let (limiter, clock) = bursty(1.0);
    limiter.acquire_n(1000).unwrap();
    assert!(limiter.try_acquire_n_timeout(3, Duration::MAX).unwrap());
    assert_eq!(clock.now(), 1000 * 1_000_000_000);
}

#[test]
fn try_acquire_zero_timeout_is_guavas_negative_timeout() {
    // testTryAcquire_negative: Guava clamps negative timeouts to 0; a Duration
    // cannot be negative, so zero is the floor, with the same meaning.
    let (limiter, clock) = bursty(5.0);
    assert!(limiter.try_acquire_n_timeout(5, Duration::ZERO).unwrap());
    clock.advance(ms(900));
    assert!(!limiter.try_acquire_n_timeout(1, Duration::ZERO).unwrap());
    clock.advance(ms(100));
    assert!(limiter.try_acquire_n_timeout(1, Duration::ZERO).unwrap());
}

#[test]
fn the_size_of_n_never_matters_for_success() {
    // canAcquire looks only at when the previous reservation ends.
    let (limiter, clock) = bursty(1.0);
    assert!(limiter
        .try_acquire_n_timeout(1_000_000, Duration::ZERO)
        .unwrap());
    assert!(!limiter
        .try_acquire_n_timeout(1, Duration::from_secs(999_999))
        .unwrap());
    assert!(limiter
        .try_acquire_n_timeout(1_000_000, Duration::from_secs(1_000_000))
        .unwrap());
    assert_eq!(clock.now(), 1_000_000 * 1_000_000_000);
    assert!(!limiter.try_acquire_n(1).unwrap());
    assert!(limiter
        .try_acquire_n_timeout(1, Duration::from_secs(1_000_000))
        .unwrap());
}

#[test]
fn a_failed_timed_try_changes_nothing() {
    let (limiter, clock) = bursty(2.0);
    limiter.acquire().unwrap();
    let before = limiter.peek(1).unwrap();
    assert!(!limiter.try_acquire_n_timeout(7, ms(499)).unwrap());
    assert!(!limiter.try_acquire_n(3).unwrap());
    assert_eq!(limiter.peek(1).unwrap(), before);
    assert_slept(&clock, &[0.00]);
    assert!(limiter.try_acquire_n_timeout(1, ms(500)).unwrap());
}

#[test]
fn warming_up_timeouts_follow_the_same_rule() {
    let (limiter, clock) = warming(2.0, Duration::from_secs(4));
    assert!(limiter.try_acquire_n_timeout(1, Duration::ZERO).unwrap());
    assert!(!limiter.try_acquire_n_timeout(1, ms(1374)).unwrap());
    assert!(limiter.try_acquire_n_timeout(100, ms(1375)).unwrap());
    assert_slept(&clock, &[0.00, 1.38]);
    assert!(limiter.try_acquire_timeout(Duration::MAX));
}

#[test]
fn display_rounds_like_javas_format() {
    let cases = [
        (0.25, "0.3"),
        (2.25, "2.3"),
        (0.15, "0.2"), // 0.1499999… in binary, but Java rounds the shortest decimal
        (9.96, "10.0"),
        (99.95, "100.0"),
        (0.001, "0.0"),
        (0.05, "0.1"),
        (1e6, "1000000.0"),
        (f64::INFINITY, "Infinity"),
    ];
    let (limiter, _clock) = bursty(1.0);
    for (rate, shown) in cases {
        limiter.set_rate(rate).unwrap();
        assert_eq!(
            limiter.to_string(),
            format!("RateLimiter[stableRate={shown}qps]"),
            "{rate}"
        );
    }
}
