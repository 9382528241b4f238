//! The fast check is the full step: `StateCell::check` (what `RateLimiter::check`
//! calls) must answer exactly `reserve(now, cost, 0)`, every field of the
//! `Decision`, and leave the same state, for the one-word algorithms (the lock-free
//! cell publishes before it describes), through the cell and through the limiter.
//! (Each algorithm's unit tests pin its split step; this pins the plumbing.)

use crate::algorithms::{
    Counting, FixedWindow, LeakyBucket, Rounding, SlidingWindowCounter, SmoothBursty,
};
use crate::cells::{CellAlgorithm, StateCell};
use crate::clock::{Clock, ManualClock};
use crate::Decision;
use crate::RateLimiter;
use proptest::prelude::*;
use std::fmt::Debug;

/// Runs `steps` (time moved by the first, possibly backwards; the cost the second)
/// through the cell's check and, on a manual clock that only moves forward, the
/// limiter's check, each against `reserve` on a plain state.
fn check_is_reserve<A: CellAlgorithm + Debug>(
    algorithm: A,
    steps: &[(i64, u64)],
) -> Result<(), TestCaseError> {
    let start = 1_000_000_000_000;
    let cell = A::Cell::new(algorithm.clone(), start);
    let mut state = algorithm.initial_state(start);
    let clock = ManualClock::new();
    clock.advance_nanos(start);
    let limiter = RateLimiter::with_clock(algorithm.clone(), clock.clone());
    let mut limiter_state = algorithm.initial_state(start);
    let mut now = start;
    for &(step, cost) in steps {
        now = now.saturating_add_signed(step);
        let expected = algorithm.reserve::<Decision>(&mut state, now, cost, 0);
        prop_assert_eq!(cell.check(now, cost), expected, "at {} cost {}", now, cost);
        // The same state: the next answers agree too.
        prop_assert_eq!(cell.peek(now, 1), algorithm.peek(&state, now, 1));
        clock.advance_nanos(step.max(0).unsigned_abs());
        let expected = algorithm.reserve::<Decision>(&mut limiter_state, clock.now(), cost, 0);
        prop_assert_eq!(limiter.check(cost).unwrap(), expected);
    }
    Ok(())
}

fn steps() -> impl Strategy<Value = Vec<(i64, u64)>> {
    proptest::collection::vec(
        (
            prop_oneof![
                4 => 0i64..2_000_000,
                2 => 0i64..5_000_000_000,
                1 => -2_000_000i64..0,
            ],
            prop_oneof![4 => 1u64..3, 1 => 1u64..40],
        ),
        1..80,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn bursty_check_is_reserve(
        rate in prop_oneof![0.1..1e4f64, Just(1e9), Just(f64::INFINITY)],
        burst_ms in prop_oneof![Just(0u64), 0u64..3_000],
        steps in steps(),
    ) {
        let burst = std::time::Duration::from_millis(burst_ms);
        let bursty = SmoothBursty::new(rate).unwrap().with_max_burst(burst).unwrap();
        check_is_reserve(bursty, &steps)?;
    }

    #[test]
    fn leaky_check_is_reserve(
        capacity in 1u64..20,
        count in 1u64..10,
        period_ms in 1u64..3_000,
        queue in any::<bool>(),
        steps in steps(),
    ) {
        let period = std::time::Duration::from_millis(period_ms);
        let bucket = if queue {
            LeakyBucket::queue(capacity, count, period)
        } else {
            LeakyBucket::meter(capacity, count, period)
        };
        check_is_reserve(bucket.unwrap(), &steps)?;
    }

    #[test]
    fn fixed_window_check_is_reserve(
        limit in 1u64..30,
        len_ms in 1u64..5_000,
        steps in steps(),
    ) {
        let window = FixedWindow::new(limit, std::time::Duration::from_millis(len_ms)).unwrap();
        check_is_reserve(window, &steps)?;
    }

    #[test]
    fn sliding_window_counter_check_is_reserve(
        limit in prop_oneof![1u64..30, Just((1u64 << 24) - 1)],
        len_ms in 1u64..5_000,
        floor in any::<bool>(),
        attempts in any::<bool>(),
        steps in steps(),
    ) {
        let counter = SlidingWindowCounter::new(limit, std::time::Duration::from_millis(len_ms))
            .unwrap()
            .with_rounding(if floor { Rounding::Floor } else { Rounding::Exact })
            .with_counting(if attempts { Counting::Attempts } else { Counting::Admitted });
        check_is_reserve(counter, &steps)?;
    }
}

/// Under contention a check describes the state its own swap replaced: every
/// granted call of a window sees a different `remaining`, exactly `limit` are
/// granted, and the refusals all see none left.
#[test]
fn concurrent_checks_describe_their_own_swap() {
    let limit = 1_500;
    let clock = ManualClock::new();
    let window = FixedWindow::new(limit, std::time::Duration::from_secs(3600)).unwrap();
    let limiter = RateLimiter::with_clock(window, clock);
    let decisions: Vec<_> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let limiter = &limiter;
                scope.spawn(move || {
                    (0..500)
                        .map(|_| limiter.check(1).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap())
            .collect()
    });
    let mut remaining: Vec<u64> = decisions
        .iter()
        .filter(|decision| decision.is_allowed())
        .map(|decision| decision.remaining())
        .collect();
    remaining.sort_unstable();
    assert_eq!(remaining, (0..limit).collect::<Vec<_>>());
    assert!(decisions
        .iter()
        .filter(|decision| !decision.is_allowed())
        .all(|decision| decision.remaining() == 0));
}
