//! The edges of Guava's limiters: infinite rate in and out, the smallest positive
//! rates (one permit, then never again), and a zero warm-up that keeps limiting.

use crate::support::virtual_time;

use sluicegate::algorithms::{SmoothBursty, SmoothWarmingUp};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{Error, RateLimiter};
use std::time::Duration;
use virtual_time::{assert_acquires_slept, assert_slept, bursty};

fn warming(
    rate: f64,
    warmup: Duration,
    cold_factor: f64,
) -> (RateLimiter<SmoothWarmingUp, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let algorithm = SmoothWarmingUp::new(rate, warmup)
        .unwrap()
        .with_cold_factor(cold_factor)
        .unwrap();
    (RateLimiter::with_clock(algorithm, clock.clone()), clock)
}

const I32_MAX: u64 = i32::MAX as u64;

// ---- infinity -----------------------------------------------------------------

#[test]
fn infinity_bursty() {
    // testInfinity_Bursty
    let (limiter, clock) = bursty(f64::INFINITY);
    limiter.acquire_n(I32_MAX / 4).unwrap();
    limiter.acquire_n(I32_MAX / 2).unwrap();
    limiter.acquire_n(I32_MAX).unwrap();
    assert_slept(&clock, &[0.00, 0.00, 0.00]);

    limiter.set_rate(2.0).unwrap();
    // A full 1 s burst (2 permits) is stored on leaving +inf, then the free one.
    assert_acquires_slept(&limiter, &[0.00, 0.00, 0.00, 0.50, 0.50]);

    limiter.set_rate(f64::INFINITY).unwrap();
    // The last request's debt (0.5 s) is repaid, then unlimited again.
    assert_acquires_slept(&limiter, &[0.50, 0.00, 0.00]);
}

#[test]
fn infinity_bursty_time_elapsed() {
    // testInfinity_BustyTimeElapsed
    let (limiter, clock) = bursty(f64::INFINITY);
    clock.advance(Duration::from_millis(1));
    limiter.set_rate(2.0).unwrap();
    assert_acquires_slept(&limiter, &[0.00, 0.00, 0.00, 0.50, 0.50]);
}

#[test]
fn infinity_warm_up() {
    // testInfinity_WarmUp
    let (limiter, clock) = warming(f64::INFINITY, Duration::from_secs(10), 3.0);
    limiter.acquire_n(I32_MAX / 4).unwrap();
    limiter.acquire_n(I32_MAX / 2).unwrap();
    limiter.acquire_n(I32_MAX).unwrap();
    assert_slept(&clock, &[0.00, 0.00, 0.00]);

    limiter.set_rate(1.0).unwrap(); // leaving +inf starts warm: no stored permits
    assert_acquires_slept(&limiter, &[0.00, 1.00, 1.00]);

    limiter.set_rate(f64::INFINITY).unwrap();
    assert_acquires_slept(&limiter, &[1.00, 0.00, 0.00]);
}

#[test]
fn infinity_warm_up_time_elapsed() {
    // testInfinity_WarmUpTimeElapsed
    let (limiter, clock) = warming(f64::INFINITY, Duration::from_secs(10), 3.0);
    clock.advance(Duration::from_millis(1));
    limiter.set_rate(1.0).unwrap();
    assert_acquires_slept(&limiter, &[0.00, 1.00, 1.00, 1.00, 1.00]);
}

#[test]
fn infinite_rate_grants_everything_at_once() {
    let (limiter, clock) = bursty(f64::INFINITY);
    assert!(limiter.try_acquire_n(u64::MAX).unwrap());
    for _ in 0..1000 {
        assert!(limiter.try_acquire());
    }
    assert_eq!(limiter.acquire_n(u64::MAX).unwrap(), Duration::ZERO);
    assert_eq!(clock.now(), 0);
    let (warm, _clock) = warming(f64::INFINITY, Duration::from_secs(1), 3.0);
    assert!(warm.try_acquire_n(u64::MAX).unwrap());
    assert!(warm.try_acquire());
}

#[test]
fn entering_infinity_from_idle_and_leaving_again_leaks_no_nan() {
    // Entering +inf with no stored permits is Guava's 0 × inf / max = NaN case.
    let (limiter, clock) = bursty(3.0);
    limiter.set_rate(f64::INFINITY).unwrap();
    assert!(limiter.try_acquire_n(1_000_000).unwrap());
    clock.advance(Duration::from_secs(5));
    limiter.set_rate(3.0).unwrap();
    // A full burst of 3, the pay-later one, then 1/3 s each.
    assert_eq!((0..100).take_while(|_| limiter.try_acquire()).count(), 4);
    // Guava waits 333333 µs; nanoseconds agree to within a microsecond.
    let wait = limiter.acquire().unwrap();
    assert!(
        wait.abs_diff(Duration::from_micros(333_333)) < Duration::from_micros(1),
        "{wait:?}"
    );

    let (warm, clock) = warming(3.0, Duration::from_secs(3), 3.0);
    warm.acquire_n(100).unwrap();
    warm.set_rate(f64::INFINITY).unwrap();
    warm.acquire().unwrap(); // repays the 100 permits
    clock.take_sleeps();
    clock.advance(Duration::from_secs(5));
    warm.set_rate(3.0).unwrap(); // starts warm
    assert_acquires_slept(&warm, &[0.00, 0.33, 0.33]);
}

// ---- the smallest positive rates -----------------------------------------------

#[test]
fn smallest_rates_grant_exactly_one_permit_bursty() {
    // testDoubleMinValueCanAcquireExactlyOnce, for Double.MIN_VALUE (5e-324) and
    // f64::MIN_POSITIVE.
    for rate in [5e-324, f64::MIN_POSITIVE] {
        let (limiter, clock) = bursty(rate);
        assert!(limiter.try_acquire(), "{rate}");
        assert!(!limiter.try_acquire(), "{rate}");
        clock.advance(Duration::from_millis(i32::MAX as u64));
        assert!(!limiter.try_acquire(), "{rate}");
        clock.advance(Duration::MAX); // the end of time: still never
        assert!(!limiter.try_acquire(), "{rate}");
        assert!(!limiter.try_acquire_timeout(Duration::MAX), "{rate}");
    }
}

#[test]
fn smallest_rates_grant_exactly_one_permit_warming_up() {
    for rate in [5e-324, f64::MIN_POSITIVE] {
        let (limiter, clock) = warming(rate, Duration::from_secs(10), 3.0);
        assert!(limiter.try_acquire(), "{rate}");
        assert!(!limiter.try_acquire(), "{rate}");
        clock.advance(Duration::from_secs(1_000_000_000));
        assert!(!limiter.try_acquire(), "{rate}");
        assert!(!limiter.try_acquire_timeout(Duration::MAX), "{rate}");
    }
}

#[test]
fn exhausted_limiter_fails_acquire_at_once_instead_of_hanging() {
    let (limiter, clock) = bursty(5e-324);
    assert_eq!(limiter.acquire().unwrap(), Duration::ZERO);
    assert_eq!(limiter.acquire(), Err(Error::Never { cost: 1 }));
    assert_eq!(limiter.acquire_n(7), Err(Error::Never { cost: 7 }));
    // It did not sleep: only the first acquire's zero sleep is recorded.
    assert_eq!(clock.sleeps(), vec![Duration::ZERO]);
    assert_eq!(clock.now(), 0);
    let decision = limiter.check(1).unwrap();
    assert!(decision.is_never());
    assert_eq!(decision.retry_after(), Duration::from_nanos(u64::MAX));

    let (warm, clock) = warming(5e-324, Duration::from_secs(1), 3.0);
    warm.acquire().unwrap();
    assert_eq!(warm.acquire(), Err(Error::Never { cost: 1 }));
    assert_eq!(clock.now(), 0);
}

#[test]
fn a_smallest_rate_limiter_stays_exhausted_after_set_rate() {
    let (limiter, _clock) = bursty(5e-324);
    assert!(limiter.try_acquire());
    assert!(!limiter.try_acquire());
    // The saturated debt belongs to the old rate and is still owed: Guava's
    // setRate never touches nextFreeTicket.
    limiter.set_rate(1.0).unwrap();
    assert!(!limiter.try_acquire());
    assert_eq!(limiter.acquire(), Err(Error::Never { cost: 1 }));
}

// ---- zero warm-up (not Guava's bug #2730) --------------------------------------

#[test]
fn zero_warm_up_is_accepted_and_keeps_limiting_after_idle_gaps() {
    for cold_factor in [1.0, 3.0, 10.0] {
        let (limiter, clock) = warming(2.0, Duration::ZERO, cold_factor);
        for _ in 0..3 {
            limiter.acquire().unwrap();
        }
        assert_eq!(
            clock.take_sleeps_secs(),
            vec![0.00, 0.50, 0.50],
            "cf {cold_factor}"
        );
        for gap_secs in [1, 10, 1000] {
            clock.advance(Duration::from_secs(gap_secs));
            // Nothing is stored: one (pay-later) grant, then refused.
            assert!(limiter.try_acquire(), "cf {cold_factor}");
            assert!(
                !limiter.try_acquire(),
                "cf {cold_factor} after {gap_secs} s idle"
            );
            assert_eq!(limiter.acquire().unwrap(), Duration::from_millis(500));
            assert_eq!(limiter.acquire().unwrap(), Duration::from_millis(500));
        }
    }
}

#[test]
fn sub_microsecond_warm_up_keeps_limiting() {
    // Guava truncates 1 ns to 0 µs (issue #6475); either way it must keep limiting.
    let (limiter, clock) = warming(4.0, Duration::from_nanos(1), 3.0);
    clock.advance(Duration::from_secs(100));
    assert!(limiter.try_acquire());
    assert!(!limiter.try_acquire());
    clock.advance(Duration::from_secs(100));
    let granted = (0..100).take_while(|_| limiter.try_acquire()).count();
    assert_eq!(granted, 1);
}

#[test]
fn zero_warm_up_survives_rate_changes() {
    let (limiter, clock) = warming(2.0, Duration::ZERO, 3.0);
    limiter.set_rate(4.0).unwrap();
    clock.advance(Duration::from_secs(10));
    limiter.set_rate(f64::INFINITY).unwrap();
    limiter.set_rate(4.0).unwrap();
    clock.advance(Duration::from_secs(10));
    assert_acquires_slept(&limiter, &[0.00, 0.25, 0.25]);
}

#[test]
fn huge_time_jumps_saturate() {
    let (limiter, clock) = bursty(1e9);
    clock.advance(Duration::MAX);
    assert_eq!(clock.now(), u64::MAX);
    assert!(limiter.try_acquire());
    // The warming-up limiter's clock reading saturates at its "exhausted" mark
    // 292 years in; it must still answer without panicking.
    let (warm, clock) = warming(1e9, Duration::from_secs(1), 3.0);
    clock.advance(Duration::MAX);
    let _ = warm.try_acquire();
    let _ = warm.check(u64::MAX).unwrap();
    warm.set_rate(1.0).unwrap();
}

#[test]
fn time_wrapping() {
    // testTimeWrapping: near the end of the clock's range, waits stay exact instead
    // of wrapping. (The crate's range is i64 nanoseconds, 292 years from the
    // clock's origin, so the test starts 10 s before its end.)
    let clock = ManualClock::new();
    clock.advance_nanos(i64::MAX as u64 - 10_000_000_000);
    let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    assert_acquires_slept(&limiter, &[0.00, 1.00, 1.00, 1.00]);
    let warm =
        RateLimiter::warming_up_with_clock(1.0, Duration::from_secs(2), clock.clone()).unwrap();
    for _ in 0..4 {
        warm.acquire().unwrap();
    }
    let sleeps = clock.take_sleeps_secs();
    assert_eq!(sleeps[0], 0.0);
    assert!(
        sleeps[1..].iter().all(|s| (1.0..=3.0).contains(s)),
        "{sleeps:?}"
    );
}

#[test]
fn zero_warmup_at_an_infinite_rate_has_no_nan_parameters() {
    let w = SmoothWarmingUp::new(f64::INFINITY, Duration::ZERO).unwrap();
    assert_eq!(w.threshold_permits(), 0.0);
    assert_eq!(w.max_permits(), 0.0);
    let limiter = RateLimiter::with_clock(w, ManualClock::new());
    for _ in 0..3 {
        assert!(limiter.try_acquire());
    }
    assert_eq!(limiter.check(1).unwrap().limit(), u64::MAX); // unlimited
}

#[test]
fn limits_report_at_least_one_permit_and_unlimited_as_max() {
    let zero_burst = SmoothBursty::new(2.0)
        .unwrap()
        .with_max_burst(Duration::ZERO)
        .unwrap();
    let limiter = RateLimiter::with_clock(zero_burst, ManualClock::new());
    assert_eq!(limiter.check(1).unwrap().limit(), 1);
    let unlimited = SmoothBursty::new(f64::INFINITY)
        .unwrap()
        .with_max_burst(Duration::ZERO)
        .unwrap();
    assert_eq!(unlimited.max_permits(), f64::INFINITY);
    let limiter = RateLimiter::with_clock(unlimited, ManualClock::new());
    assert_eq!(limiter.check(1).unwrap().limit(), u64::MAX);
    let zero_warmup = SmoothWarmingUp::new(2.0, Duration::ZERO).unwrap();
    let limiter = RateLimiter::with_clock(zero_warmup, ManualClock::new());
    assert_eq!(limiter.check(1).unwrap().limit(), 1);
}
