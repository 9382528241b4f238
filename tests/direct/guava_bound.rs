//! Property: whatever the schedule of acquires and idle gaps, Guava's limiters never
//! admit more than `rate × elapsed + max_permits` plus the one pay-later request.

use proptest::prelude::*;
use sluicegate::algorithms::{SmoothBursty, SmoothWarmingUp};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::CellAlgorithm;
use sluicegate::RateLimiter;
use std::time::Duration;

#[derive(Clone, Debug)]
enum Op {
    /// Idle for this many milliseconds.
    Gap(u64),
    /// `try_acquire_n(n)`.
    Try(u64),
    /// `check(n)`.
    Check(u64),
    /// `try_acquire_n_timeout(n, ms)`: may sleep up to the timeout.
    TryFor(u64, u64),
    /// Blocking `acquire_n(n)`: always granted, sleeps as needed.
    Acquire(u64),
}

fn op(max_n: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..3_000).prop_map(Op::Gap),
        4 => (1..=max_n).prop_map(Op::Try),
        2 => (1..=max_n).prop_map(Op::Check),
        2 => (1..=max_n, 0u64..2_000).prop_map(|(n, ms)| Op::TryFor(n, ms)),
        1 => (1..=max_n).prop_map(Op::Acquire),
    ]
}

/// Runs the schedule; returns (permits granted, the last grant's size, elapsed s).
fn run<A: CellAlgorithm>(
    limiter: &RateLimiter<A, ManualClock>,
    clock: &ManualClock,
    ops: &[Op],
) -> (f64, f64, f64) {
    let mut total = 0u64;
    let mut last = 0u64;
    let mut grant = |n: u64, granted: bool| {
        if granted {
            total += n;
            last = n;
        }
    };
    for op in ops {
        match *op {
            Op::Gap(ms) => clock.advance(Duration::from_millis(ms)),
            Op::Try(n) => grant(n, limiter.try_acquire_n(n).unwrap()),
            Op::Check(n) => grant(n, limiter.check(n).unwrap().is_allowed()),
            Op::TryFor(n, ms) => grant(
                n,
                limiter
                    .try_acquire_n_timeout(n, Duration::from_millis(ms))
                    .unwrap(),
            ),
            Op::Acquire(n) => {
                limiter.acquire_n(n).unwrap();
                grant(n, true);
            }
        }
    }
    (total as f64, last as f64, clock.now() as f64 / 1e9)
}

/// Nanosecond truncation of each charge can make a grant up to a few ns cheaper.
fn slack(rate: f64, ops: usize) -> f64 {
    1e-6 + rate * ops as f64 * 3e-9
}

/// `total` permits in `elapsed` seconds stay within `bound`, give or take `slack`.
fn stays_under(total: f64, bound: f64, slack: f64, elapsed: f64) -> Result<(), TestCaseError> {
    prop_assert!(
        total <= bound + slack,
        "{total} permits in {elapsed} s > {bound}"
    );
    Ok(())
}

/// A bursty limiter of `rate` permits a second storing up to `burst_ms` of them, its
/// clock, and the most permits it can store.
fn bursty(rate: f64, burst_ms: u64) -> (RateLimiter<SmoothBursty, ManualClock>, ManualClock, f64) {
    let clock = ManualClock::new();
    let algorithm = SmoothBursty::new(rate)
        .unwrap()
        .with_max_burst(Duration::from_millis(burst_ms))
        .unwrap();
    let max_permits = algorithm.max_permits();
    (
        RateLimiter::with_clock(algorithm, clock.clone()),
        clock,
        max_permits,
    )
}

/// Runs `ops` on [`bursty`]`(rate, burst_ms)` and checks it stayed under
/// `rate × elapsed + max_permits`, plus `pay_later(last grant's size)` permits for the
/// one pay-later request.
fn bursty_stays_under(
    rate: f64,
    burst_ms: u64,
    ops: &[Op],
    pay_later: fn(f64) -> f64,
) -> Result<(), TestCaseError> {
    let (limiter, clock, max_permits) = bursty(rate, burst_ms);
    let (total, last, elapsed) = run(&limiter, &clock, ops);
    let bound = rate * elapsed + max_permits + pay_later(last);
    stays_under(total, bound, slack(rate, ops.len()), elapsed)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn bursty_single_permits_stay_under_the_bound(
        rate in 0.1f64..1_000.0,
        burst_ms in 0u64..5_000,
        ops in prop::collection::vec(op(1), 1..80),
    ) {
        bursty_stays_under(rate, burst_ms, &ops, |_| 1.0)?;
    }

    #[test]
    fn bursty_random_costs_stay_under_the_bound(
        rate in 0.1f64..1_000.0,
        burst_ms in 0u64..5_000,
        ops in prop::collection::vec(op(20), 1..80),
    ) {
        // The pay-later request is the last one granted, of whatever size.
        bursty_stays_under(rate, burst_ms, &ops, |last| last)?;
    }

    #[test]
    fn warming_up_stays_under_the_bound(
        rate in 0.1f64..1_000.0,
        warmup_ms in 0u64..5_000,
        cold_factor in 1.0f64..10.0,
        ops in prop::collection::vec(op(20), 1..80),
    ) {
        let clock = ManualClock::new();
        let algorithm = SmoothWarmingUp::new(rate, Duration::from_millis(warmup_ms)).unwrap()
            .with_cold_factor(cold_factor).unwrap();
        let max_permits = algorithm.max_permits();
        let limiter = RateLimiter::with_clock(algorithm, clock.clone());
        let (total, last, elapsed) = run(&limiter, &clock, &ops);
        let slack = slack(rate, ops.len());
        let bound = rate * elapsed + max_permits + last;
        stays_under(total, bound, slack, elapsed)?;
        // Tighter: a stored warm-up permit costs at least the stable interval, so
        // stored permits never add to the budget; only the pay-later request does.
        let tight = rate * elapsed + last;
        stays_under(total, tight, slack, elapsed)?;
    }
}
