//! Guava's `RateLimiterTest` for `SmoothWarmingUp`, on virtual time, plus the
//! parameter table and per-permit costs of guava-semantics.md §8.

use crate::support::virtual_time;
use virtual_time::assert_acquires_slept;

use sluicegate::algorithms::SmoothWarmingUp;
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::RateLimiter;
use std::time::Duration;

type Limiter = RateLimiter<SmoothWarmingUp, ManualClock>;

fn warming(rate: f64, warmup_ms: u64, cold_factor: f64) -> (Limiter, ManualClock) {
    let clock = ManualClock::new();
    let algorithm = SmoothWarmingUp::new(rate, Duration::from_millis(warmup_ms))
        .unwrap()
        .with_cold_factor(cold_factor)
        .unwrap();
    (RateLimiter::with_clock(algorithm, clock.clone()), clock)
}

fn acquire_times(limiter: &Limiter, times: usize) {
    for _ in 0..times {
        limiter.acquire().unwrap();
    }
}

/// The sleeps, in seconds, of eight acquires.
fn eight_sleeps(limiter: &Limiter, clock: &ManualClock) -> Vec<f64> {
    acquire_times(limiter, 8);
    clock.take_sleeps_secs()
}

fn millis(clock: &ManualClock, ms: u64) {
    clock.advance(Duration::from_millis(ms));
}

/// Guava works in whole microseconds, this crate in nanoseconds: a wait agrees
/// with Guava's truncated microseconds to within one microsecond.
fn assert_micros(actual: Duration, guava_micros: u64) {
    let expected = guava_micros as i128 * 1000;
    let diff = actual.as_nanos() as i128 - expected;
    assert!(
        (0..1000).contains(&diff),
        "waited {actual:?}, Guava waits {guava_micros} µs"
    );
}

#[test]
fn parameter_table() {
    // rate, W (ms), cold factor, threshold, maxPermits
    let rows = [
        (2.0, 4000, 3.0, 4.0, 8.0),
        (4.0, 4000, 3.0, 8.0, 16.0),
        (5.0, 4000, 10.0, 10.0, 10.0 + 40.0 / 11.0),
        (10.0, 4000, 10.0, 20.0, 20.0 + 80.0 / 11.0),
        (5.0, 4000, 1.0, 10.0, 30.0),
        (1.0, 10_000, 3.0, 5.0, 10.0),
    ];
    for (rate, w, cf, threshold, max) in rows {
        let a = SmoothWarmingUp::new(rate, Duration::from_millis(w))
            .unwrap()
            .with_cold_factor(cf)
            .unwrap();
        assert!(
            (a.threshold_permits() - threshold).abs() < 1e-9,
            "{rate} {w} {cf}"
        );
        assert!((a.max_permits() - max).abs() < 1e-9, "{rate} {w} {cf}");
        assert_eq!(a.cold_factor(), cf);
        assert_eq!(a.warmup(), Duration::from_millis(w));
    }
}

#[test]
fn default_cold_factor_is_three() {
    let a = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    assert_eq!(a.cold_factor(), 3.0);
    assert_eq!(a.max_permits(), 8.0);
}

/// The waits, in Guava's microseconds, of the permits after a cold limiter's free
/// first one: at 2 per second with cold factor 3, and at 5 with 10.
#[test]
fn per_permit_costs_from_cold() {
    let cases = [
        (
            2.0,
            3.0,
            [1_375_000, 1_125_000, 875_000, 625_000, 500_000, 500_000],
        ),
        (
            5.0,
            10.0,
            [1_752_500, 1_257_500, 762_500, 300_227, 200_000, 200_000],
        ),
    ];
    for (rate, cold_factor, waits) in cases {
        let (limiter, _clock) = warming(rate, 4000, cold_factor);
        assert_eq!(limiter.acquire().unwrap(), Duration::ZERO);
        for micros in waits {
            assert_micros(limiter.acquire().unwrap(), micros);
        }
    }
}

#[test]
fn per_permit_costs_from_cold_1qps_10s_cf3() {
    // threshold 5, max 10, slope 0.4 s: stored permits cost 2.8, 2.2, 1.8, 1.4, 1.0 s
    // (trapezoid areas), then the flat part at 1 s.
    let (limiter, _clock) = warming(1.0, 10_000, 3.0);
    assert_acquires_slept(&limiter, &[0.00, 2.80, 2.40, 2.00, 1.60, 1.20, 1.00, 1.00]);
}

/// testWarmUp and testWarmUpWithColdFactor: eight acquires from cold; eight more
/// once the last one's debt is repaid and the 4 s warm-up period has passed (cold
/// again, the same schedule); eight more after repaying and only part of it (still
/// warm).
#[test]
fn warm_up_cold_again_then_still_warm() {
    // rate, cold factor, repay ms, partly ms; the cold schedule, the still warm one
    let cases = [
        // After 2 s it is not cold yet: it takes another 2 s.
        (
            (2.0, 3.0, 500, 2000),
            [0.00, 1.38, 1.13, 0.88, 0.63, 0.50, 0.50, 0.50],
            [0.00, 0.50, 0.50, 0.50, 0.50, 0.50, 0.50, 0.50],
        ),
        // After 1 s it is still warm: it takes another 3 s to go cold.
        (
            (5.0, 10.0, 200, 1000),
            [0.00, 1.75, 1.26, 0.76, 0.30, 0.20, 0.20, 0.20],
            [0.00, 0.20, 0.20, 0.20, 0.20, 0.20, 0.20, 0.20],
        ),
    ];
    for ((rate, cold_factor, repay_ms, partly_ms), cold, warm) in cases {
        let (limiter, clock) = warming(rate, 4000, cold_factor);
        assert_eq!(
            eight_sleeps(&limiter, &clock),
            cold,
            "rate {rate}: from cold"
        );
        millis(&clock, repay_ms + 4000);
        assert_eq!(
            eight_sleeps(&limiter, &clock),
            cold,
            "rate {rate}: cold again"
        );
        millis(&clock, repay_ms + partly_ms);
        assert_eq!(
            eight_sleeps(&limiter, &clock),
            warm,
            "rate {rate}: still warm"
        );
    }
}

#[test]
fn warm_up_with_cold_factor_one() {
    // testWarmUpWithColdFactor1: stored permits cost exactly the stable interval.
    let (limiter, clock) = warming(5.0, 4000, 1.0);
    let first = eight_sleeps(&limiter, &clock);
    millis(&clock, 340);
    let second = eight_sleeps(&limiter, &clock);
    let flat = vec![0.00, 0.20, 0.20, 0.20, 0.20, 0.20, 0.20, 0.20];
    assert_eq!(first, flat);
    assert_eq!(second, flat);
}

#[test]
fn warm_up_and_update() {
    // testWarmUpAndUpdate: the areas (times) stay the same while permits change.
    let (limiter, clock) = warming(2.0, 4000, 3.0);
    assert_acquires_slept(&limiter, &[0.00, 1.38, 1.13, 0.88, 0.63, 0.50, 0.50, 0.50]);
    millis(&clock, 4500); // back to cold (warm-up period + repaying the last acquire)
    assert_acquires_slept(&limiter, &[0.00, 1.38, 1.13]); // somewhere in the warm-up period

    limiter.set_rate(4.0).unwrap();
    assert_acquires_slept(&limiter, &[0.88]); // repays the last acquire, at the old rate
    assert_acquires_slept(&limiter, &[0.34, 0.28, 0.25, 0.25]);

    // Back to cold, then warming up from totally cold.
    millis(&clock, 4250);
    assert_acquires_slept(
        &limiter,
        &[
            0.00, 0.72, 0.66, 0.59, 0.53, 0.47, 0.41, 0.34, 0.28, 0.25, 0.25,
        ],
    );
}

#[test]
fn cool_down_takes_the_warm_up_period_at_any_rate() {
    for rate in [0.5, 2.0, 10.0, 100.0] {
        let (cold, cold_clock) = warming(rate, 3000, 3.0);
        let steps = cold.algorithm().max_permits().ceil() as usize + 2;
        acquire_times(&cold, steps);
        let from_cold = cold_clock.take_sleeps();

        let (limiter, clock) = warming(rate, 3000, 3.0);
        // Spend every stored permit, then wait out the debt: fully warm.
        limiter.acquire_n(steps as u64).unwrap();
        let pending = limiter.peek(1).unwrap().retry_after();
        clock.advance(pending);
        assert!(limiter.peek(1).unwrap().is_allowed());
        // Half the warm-up period refills only part of the bucket: the first stored
        // permit is cheaper than from cold.
        clock.advance(Duration::from_millis(1500));
        limiter.acquire().unwrap();
        let half = limiter.acquire().unwrap();
        assert!(
            half < from_cold[1],
            "rate {rate}: {half:?} vs {:?}",
            from_cold[1]
        );
        // Wait out the debt, then a full warm-up period: cold again, the same
        // schedule as a new limiter.
        clock.advance(limiter.peek(1).unwrap().retry_after());
        clock.advance(Duration::from_millis(3000));
        clock.take_sleeps();
        acquire_times(&limiter, steps);
        let again = clock.take_sleeps();
        for (a, b) in again.iter().zip(&from_cold) {
            assert!(
                a.abs_diff(*b) < Duration::from_micros(1),
                "rate {rate}: {again:?} vs {from_cold:?}"
            );
        }
    }
}

#[test]
fn try_acquire_from_cold() {
    // A cold limiter grants one permit at once; the next has to wait 1.375 s.
    let (limiter, clock) = warming(2.0, 4000, 3.0);
    assert!(limiter.try_acquire());
    assert!(!limiter.try_acquire());
    millis(&clock, 1374);
    assert!(!limiter.try_acquire());
    millis(&clock, 1);
    assert!(limiter.try_acquire());
}

#[test]
fn time_to_warm_up_is_honoured_even_with_weights() {
    // testTimeToWarmUpIsHonouredEvenWithWeights: spending the warm-up permits
    // (maxPermits - threshold) from cold takes the warm-up period, however split.
    let warmup_permits = 10u64;
    for cold_factor in [2.0, 3.0, 10.0] {
        for qps in [4.0, 2.0, 1.0, 0.5, 0.1] {
            let warmup_ms =
                ((1.0 + cold_factor) * warmup_permits as f64 / (2.0 * qps) * 1000.0) as u64;
            for split in [1u64, 2, 3, 5, 10] {
                let (limiter, clock) = warming(qps, warmup_ms, cold_factor);
                let start = clock.now();
                let mut permits = warmup_permits;
                while permits > 0 {
                    let chunk = split.min(permits);
                    permits -= chunk;
                    limiter.acquire_n(chunk).unwrap();
                }
                limiter.acquire().unwrap(); // repay the last chunk
                let elapsed_ms = (clock.now() - start) as f64 / 1e6;
                assert!(
                    (elapsed_ms - warmup_ms as f64).abs() < 1.0,
                    "cf {cold_factor} qps {qps} split {split}: {elapsed_ms} ms vs {warmup_ms} ms"
                );
            }
        }
    }
}
