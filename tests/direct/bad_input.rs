//! Every bad input gives a typed error that says what was wrong, never a panic, and
//! a rejected call never changes the limiter's state.

use sluicegate::algorithms::{SmoothBursty, SmoothWarmingUp};
use sluicegate::clock::ManualClock;
use sluicegate::CellAlgorithm;
use sluicegate::{Error, RateLimiter};
use std::time::Duration;

const BAD_RATES: [f64; 6] = [
    0.0,
    -0.0,
    -1.0,
    f64::NAN,
    f64::NEG_INFINITY,
    -f64::MIN_POSITIVE,
];
const GOOD_RATES: [f64; 5] = [f64::INFINITY, f64::MIN_POSITIVE, 5e-324, 1e-9, 1e12];

fn is_invalid_rate(err: sluicegate::ConfigError, rate: f64) -> bool {
    match err {
        sluicegate::ConfigError::InvalidRate { rate: got } => got.to_bits() == rate.to_bits(),
        _ => false,
    }
}

#[test]
fn bad_rates_are_refused_by_every_constructor() {
    let clock = ManualClock::new();
    let second = Duration::from_secs(1);
    for rate in BAD_RATES {
        assert!(
            is_invalid_rate(SmoothBursty::new(rate).unwrap_err(), rate),
            "{rate}"
        );
        assert!(
            is_invalid_rate(RateLimiter::bursty(rate).unwrap_err(), rate),
            "{rate}"
        );
        assert!(is_invalid_rate(
            RateLimiter::bursty_with_clock(rate, clock.clone()).unwrap_err(),
            rate
        ));
        assert!(is_invalid_rate(
            SmoothWarmingUp::new(rate, second).unwrap_err(),
            rate
        ));
        assert!(is_invalid_rate(
            RateLimiter::warming_up(rate, second).unwrap_err(),
            rate
        ));
        assert!(is_invalid_rate(
            RateLimiter::warming_up_with_clock(rate, Duration::ZERO, clock.clone()).unwrap_err(),
            rate
        ));
    }
}

#[test]
fn good_rates_are_accepted() {
    let clock = ManualClock::new();
    for rate in GOOD_RATES {
        assert!(
            RateLimiter::bursty_with_clock(rate, clock.clone()).is_ok(),
            "{rate}"
        );
        assert!(
            RateLimiter::warming_up_with_clock(rate, Duration::from_secs(1), clock.clone()).is_ok(),
            "{rate}"
        );
    }
}

#[test]
fn the_error_says_what_was_wrong() {
    let err = RateLimiter::bursty(f64::NAN).unwrap_err();
    assert!(err.to_string().contains("NaN"), "{err}");
    assert!(err.to_string().contains("rate"), "{err}");
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(1.0, clock).unwrap();
    let err = limiter.acquire_n(0).unwrap_err();
    assert_eq!(err, Error::ZeroCost);
    assert!(err.to_string().contains("permits"), "{err}");
    let err = SmoothWarmingUp::new(1.0, Duration::from_secs(1))
        .unwrap()
        .with_cold_factor(0.5)
        .unwrap_err();
    assert!(err.to_string().contains("0.5"), "{err}");
}

#[test]
fn bad_set_rate_changes_nothing() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(2.0, clock.clone()).unwrap();
    let warm =
        RateLimiter::warming_up_with_clock(2.0, Duration::from_secs(4), clock.clone()).unwrap();
    limiter.acquire().unwrap();
    warm.acquire().unwrap();
    clock.advance(Duration::from_millis(100));
    let (before, warm_before) = (limiter.peek(1).unwrap(), warm.peek(1).unwrap());
    for rate in BAD_RATES {
        assert!(is_invalid_rate(limiter.set_rate(rate).unwrap_err(), rate));
        assert!(is_invalid_rate(warm.set_rate(rate).unwrap_err(), rate));
    }
    assert_eq!(limiter.rate(), 2.0);
    assert_eq!(warm.rate(), 2.0);
    assert_eq!(limiter.peek(1).unwrap(), before);
    assert_eq!(warm.peek(1).unwrap(), warm_before);
    clock.take_sleeps();
    limiter.acquire().unwrap();
    warm.acquire().unwrap();
    // The schedules carry on as if nothing had been tried: the bursty one had 0.4 s
    // left; the warming-up one had 1.275 s left, 0.4 s of which the first sleep spent
    // on the shared clock.
    assert_eq!(clock.take_sleeps_secs(), vec![0.40, 0.88]);
}

/// Every blocking call of the limiter refuses a cost of 0 as `ZeroCost`.
fn assert_zero_cost_refused<A: CellAlgorithm>(limiter: &RateLimiter<A, ManualClock>) {
    assert_eq!(limiter.acquire_n(0), Err(Error::ZeroCost));
    assert_eq!(limiter.try_acquire_n(0), Err(Error::ZeroCost));
    assert_eq!(
        limiter.try_acquire_n_timeout(0, Duration::ZERO),
        Err(Error::ZeroCost)
    );
    assert_eq!(limiter.check(0), Err(Error::ZeroCost));
    assert_eq!(limiter.peek(0), Err(Error::ZeroCost));
    assert!(matches!(limiter.reserve(0), Err(Error::ZeroCost)));
}

#[test]
fn zero_permits_is_refused_by_every_call_and_changes_nothing() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    let before = limiter.peek(1).unwrap();
    assert_zero_cost_refused(&limiter);
    assert_eq!(
        limiter.try_acquire_n_timeout(0, Duration::MAX),
        Err(Error::ZeroCost)
    );
    let handle = limiter.to_async();
    futures::executor::block_on(async {
        assert_eq!(handle.acquire_n(0).await, Err(Error::ZeroCost));
        assert_eq!(
            handle.try_acquire_n_timeout(0, Duration::MAX).await,
            Err(Error::ZeroCost)
        );
    });
    assert_eq!(limiter.peek(1).unwrap(), before);
    assert!(clock.sleeps().is_empty(), "a refused call never sleeps");
    assert!(limiter.try_acquire());
    assert!(!limiter.try_acquire());

    let warm =
        RateLimiter::warming_up_with_clock(1.0, Duration::from_secs(1), clock.clone()).unwrap();
    let before = warm.peek(1).unwrap();
    assert_zero_cost_refused(&warm);
    assert_eq!(warm.peek(1).unwrap(), before);
}

#[test]
fn periods_too_long_for_the_clock_are_refused() {
    let too_long = [
        Duration::MAX,
        Duration::from_nanos(i64::MAX as u64) + Duration::from_nanos(1),
        Duration::from_secs(u64::MAX / 2),
    ];
    for period in too_long {
        match SmoothWarmingUp::new(1.0, period) {
            Err(sluicegate::ConfigError::InvalidDuration { what, value, .. }) => {
                assert_eq!(what, "warmup period");
                assert_eq!(value, period);
            }
            other => panic!("warm-up {period:?}: {other:?}"),
        }
        assert!(matches!(
            RateLimiter::warming_up(1.0, period),
            Err(sluicegate::ConfigError::InvalidDuration { .. })
        ));
        match SmoothBursty::new(1.0).unwrap().with_max_burst(period) {
            Err(sluicegate::ConfigError::InvalidDuration { what, value, .. }) => {
                assert_eq!(what, "max_burst");
                assert_eq!(value, period);
            }
            other => panic!("max_burst {period:?}: {other:?}"),
        }
    }
    // The longest representable period is fine.
    let longest = Duration::from_nanos(i64::MAX as u64);
    assert!(SmoothWarmingUp::new(1.0, longest).is_ok());
    assert!(SmoothBursty::new(1.0)
        .unwrap()
        .with_max_burst(longest)
        .is_ok());
}

#[test]
fn warm_up_is_checked_before_the_rate_as_guava_does() {
    assert!(matches!(
        SmoothWarmingUp::new(0.0, Duration::MAX),
        Err(sluicegate::ConfigError::InvalidDuration { .. })
    ));
    assert!(matches!(
        SmoothWarmingUp::new(0.0, Duration::from_secs(1)),
        Err(sluicegate::ConfigError::InvalidRate { .. })
    ));
}

#[test]
fn bad_cold_factors_are_refused() {
    let base = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    for cf in [
        0.5,
        0.0,
        -1.0,
        0.999_999,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        match base.with_cold_factor(cf) {
            Err(sluicegate::ConfigError::InvalidColdFactor { cold_factor }) => {
                assert_eq!(cold_factor.to_bits(), cf.to_bits())
            }
            other => panic!("cold factor {cf}: {other:?}"),
        }
    }
    assert_eq!(base.with_cold_factor(1.0).unwrap().cold_factor(), 1.0);
    // The refused calls did not touch `base` (it is Copy, but check its behaviour).
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(base, clock.clone());
    for _ in 0..3 {
        limiter.acquire().unwrap();
    }
    assert_eq!(clock.take_sleeps_secs(), vec![0.00, 1.38, 1.13]);
}

#[test]
fn zero_max_burst_saves_nothing() {
    let clock = ManualClock::new();
    let algorithm = SmoothBursty::new(10.0)
        .unwrap()
        .with_max_burst(Duration::ZERO)
        .unwrap();
    let limiter = RateLimiter::with_clock(algorithm, clock.clone());
    clock.advance(Duration::from_secs(100));
    assert!(limiter.try_acquire());
    assert!(!limiter.try_acquire());
    assert_eq!(limiter.acquire().unwrap(), Duration::from_millis(100));
}

#[test]
fn denied_calls_change_nothing() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    limiter.acquire_n(5).unwrap();
    let before = limiter.peek(1).unwrap();
    for n in [1, 2, 1_000, u64::MAX] {
        assert!(!limiter.try_acquire_n(n).unwrap());
        assert!(!limiter.check(n).unwrap().is_allowed());
        assert!(!limiter
            .try_acquire_n_timeout(n, Duration::from_millis(4_999))
            .unwrap());
    }
    assert_eq!(limiter.peek(1).unwrap(), before);
    assert_eq!(limiter.acquire().unwrap(), Duration::from_secs(5));
}
