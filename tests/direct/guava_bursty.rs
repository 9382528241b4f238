//! Guava's `RateLimiterTest` for `SmoothBursty`, on virtual time: the exact sleeps
//! a limiter asks for, as Guava's fake stopwatch records them (`R0.20` = 0.20 s).

use crate::support::virtual_time;

use sluicegate::algorithms::SmoothBursty;
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::RateLimiter;
use std::time::Duration;
use virtual_time::{assert_acquires_slept, assert_slept, bursty};

fn millis(clock: &ManualClock, ms: u64) {
    clock.advance(Duration::from_millis(ms));
}

/// One blocking `acquire()` per entry of `waits`, each answering that it waited
/// that long.
#[track_caller]
fn assert_acquires_waited(limiter: &RateLimiter<SmoothBursty, ManualClock>, waits: &[Duration]) {
    for &wait in waits {
        assert_eq!(limiter.acquire().unwrap(), wait);
    }
}

#[test]
fn simple_pacing() {
    let (limiter, _clock) = bursty(5.0);
    assert_acquires_slept(&limiter, &[0.00, 0.20, 0.20]);
}

#[test]
fn every_acquire_sleeps_even_for_zero() {
    // Guava calls sleep after every successful acquire, even for 0 µs.
    let (limiter, clock) = bursty(5.0);
    limiter.acquire().unwrap();
    assert_eq!(clock.sleeps(), vec![Duration::ZERO]);
}

#[test]
fn exact_interval_in_nanos() {
    let (limiter, clock) = bursty(5.0);
    limiter.acquire().unwrap();
    assert_eq!(limiter.acquire().unwrap(), Duration::from_millis(200));
    assert_eq!(clock.now(), 200_000_000);
}

#[test]
fn simple_with_wait() {
    // testSimpleWithWait: an idle gap shorter than the interval shortens the next wait.
    let (limiter, clock) = bursty(5.0);
    limiter.acquire().unwrap();
    millis(&clock, 200);
    limiter.acquire().unwrap();
    limiter.acquire().unwrap();
    assert_slept(&clock, &[0.00, 0.00, 0.20]);
}

#[test]
fn simple_acquire_return_values() {
    let (limiter, clock) = bursty(5.0);
    assert_eq!(limiter.acquire().unwrap(), Duration::ZERO);
    millis(&clock, 200);
    assert_acquires_waited(&limiter, &[Duration::ZERO, Duration::from_millis(200)]);
}

#[test]
fn earliest_available_in_the_past() {
    // testSimpleAcquireEarliestAvailableIsInPast
    let (limiter, clock) = bursty(5.0);
    assert_eq!(limiter.acquire().unwrap(), Duration::ZERO);
    millis(&clock, 400);
    assert_acquires_waited(
        &limiter,
        &[Duration::ZERO, Duration::ZERO, Duration::from_millis(200)],
    );
}

#[test]
fn partial_idle_gap_shortens_the_wait() {
    let (limiter, clock) = bursty(5.0);
    limiter.acquire().unwrap();
    limiter.acquire().unwrap(); // now at 0.2 s, next free at 0.4 s
    millis(&clock, 50);
    assert_eq!(limiter.acquire().unwrap(), Duration::from_millis(150));
}

#[test]
fn one_second_burst() {
    // testOneSecondBurst: after >= 1 s idle, 5 stored permits plus the pay-later one
    // go at once; the one after waits.
    let (limiter, clock) = bursty(5.0);
    millis(&clock, 1000);
    millis(&clock, 1000); // makes no difference: the burst is capped at 1 s
    limiter.acquire_n(1).unwrap();
    limiter.acquire_n(1).unwrap();
    limiter.acquire_n(3).unwrap();
    limiter.acquire_n(1).unwrap();
    limiter.acquire().unwrap();
    assert_slept(&clock, &[0.00, 0.00, 0.00, 0.00, 0.20]);
}

#[test]
fn burst_is_capped_at_max_burst() {
    let clock = ManualClock::new();
    let algorithm = sluicegate::algorithms::SmoothBursty::new(10.0)
        .unwrap()
        .with_max_burst(Duration::from_secs(2))
        .unwrap();
    let limiter = RateLimiter::with_clock(algorithm, clock.clone());
    clock.advance(Duration::from_secs(60));
    // 20 stored + 1 pay-later: 21 immediate grants, then refused.
    let granted = (0..100).take_while(|_| limiter.try_acquire()).count();
    assert_eq!(granted, 21);
}

#[test]
fn simple_weights_pay_later() {
    // testSimpleWeights: each wait repays the previous request's size.
    let (limiter, clock) = bursty(1.0);
    for n in [1, 1, 2, 4, 8, 1] {
        limiter.acquire_n(n).unwrap();
    }
    assert_slept(&clock, &[0.00, 1.00, 1.00, 2.00, 4.00, 8.00]);
}

#[test]
fn big_acquire_on_idle_limiter_is_free_and_the_next_pays() {
    let (limiter, clock) = bursty(10.0);
    assert_eq!(limiter.acquire_n(1000).unwrap(), Duration::ZERO);
    assert_eq!(limiter.acquire().unwrap(), Duration::from_secs(100));
    assert_eq!(clock.now(), 100_000_000_000);
    assert_eq!(limiter.acquire().unwrap(), Duration::from_millis(100));
}

#[test]
fn huge_acquire_saturates_instead_of_overflowing() {
    let (limiter, _clock) = bursty(1.0);
    assert_eq!(limiter.acquire_n(u64::MAX).unwrap(), Duration::ZERO);
    // The debt saturates the state: nothing is ever granted again.
    assert!(!limiter.try_acquire());
    assert!(matches!(
        limiter.acquire(),
        Err(sluicegate::Error::Never { cost: 1 })
    ));
}

#[test]
fn immediate_try_acquire() {
    let (limiter, _clock) = bursty(1.0);
    assert!(limiter.try_acquire());
    assert!(!limiter.try_acquire());
}

#[test]
fn try_acquire_succeeds_again_after_the_interval() {
    let (limiter, clock) = bursty(4.0);
    assert!(limiter.try_acquire());
    millis(&clock, 249);
    assert!(!limiter.try_acquire());
    millis(&clock, 1);
    assert!(limiter.try_acquire());
    // try_acquire never sleeps.
    assert!(clock.sleeps().iter().all(|d| d.is_zero()));
}

#[test]
fn we_never_get_a_burst_of_more_than_one_second() {
    // testWeNeverGetABurstMoreThanOneSec, with a fixed schedule of request sizes.
    let (limiter, clock) = bursty(1.0);
    for rate in [1000u64, 1, 10, 1_000_000, 10, 1] {
        let work = rate;
        millis(&clock, rate * 1000);
        limiter.set_rate(rate as f64).unwrap();
        let burst = measure_total_millis(&limiter, &clock, work);
        assert!(burst <= 1000, "rate {rate}: burst took {burst} ms");
        let after = measure_total_millis(&limiter, &clock, work);
        assert!(after >= 1000, "rate {rate}: after-burst took {after} ms");
    }
}

/// Guava's measureTotalTimeMillis: spend `permits` in chunks, then one more to repay
/// the last chunk. Chunks follow a deterministic halving schedule.
fn measure_total_millis(
    limiter: &RateLimiter<sluicegate::algorithms::SmoothBursty, ManualClock>,
    clock: &ManualClock,
    mut permits: u64,
) -> u64 {
    let start = clock.now();
    while permits > 0 {
        let chunk = (permits / 2).max(1);
        permits -= chunk;
        limiter.acquire_n(chunk).unwrap();
    }
    limiter.acquire_n(1).unwrap();
    (clock.now() - start) / 1_000_000
}
