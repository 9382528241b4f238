//! Property tests on random traces for the fixed window, the leaky bucket and the
//! sliding window counter: each stays within the bound its docs state, refused
//! calls are told exactly when to come back, and blocking acquires through the
//! limiter (on the manual clock) keep the same bounds.

use proptest::prelude::*;
use sluicegate::algorithms::Decision;
use sluicegate::algorithms::{
    Algorithm, Counting, FixedWindow, LeakyBucket, Rounding, SlidingWindowCounter,
};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::CellAlgorithm;
use sluicegate::{Error, RateLimiter};
use std::time::Duration;

/// A trace: (gap since the previous call in ns, cost).
fn trace(max_gap: u64, max_cost: u64) -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0..max_gap, 1..=max_cost), 1..120)
}

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(64)
}

/// True if, over every span between two admissions, the permits admitted stay within
/// `capacity + (t_j − t_i + slack) × count / period` (checked in integers). When the
/// interval is not a whole number of nanoseconds, the bucket reads `now` rounded down
/// to a tick (under 1 ns), so a span can gain under one tick: the documented bound is
/// `b + r × (t + 1 ns)`, checked with a slack of 1 ns; whole-nanosecond intervals are
/// checked with none.
/// Blocking `acquire_n` of each cost in turn on a limiter of `algorithm` on a manual
/// clock: each cost with the clock's reading once granted, or the error.
fn acquire_each<A: CellAlgorithm>(algorithm: A, costs: &[u64]) -> Vec<(u64, Result<u64, Error>)> {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(algorithm, clock.clone());
    costs
        .iter()
        .map(|&cost| (cost, limiter.acquire_n(cost).map(|_| clock.now())))
        .collect()
}

/// The granted ones of [`acquire_each`]'s outcomes, as (time, cost).
fn admitted_of(outcomes: Vec<(u64, Result<u64, Error>)>) -> Vec<(u64, u64)> {
    outcomes
        .into_iter()
        .filter_map(|(cost, outcome)| outcome.ok().map(|at| (at, cost)))
        .collect()
}

fn within_rate(
    admitted: &[(u64, u64)],
    capacity: u64,
    count: u64,
    period: u64,
    slack: u64,
) -> bool {
    let mut sorted = admitted.to_vec();
    sorted.sort();
    for i in 0..sorted.len() {
        let mut sum: u128 = 0;
        for j in i..sorted.len() {
            sum += u128::from(sorted[j].1);
            let span = u128::from(sorted[j].0 - sorted[i].0 + slack);
            if sum * u128::from(period)
                > u128::from(capacity) * u128::from(period) + span * u128::from(count)
            {
                return false;
            }
        }
    }
    true
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fixed_window_counts_exactly_and_never_exceeds_the_limit_per_window(
        limit in 1u64..8,
        len in 1u64..50,
        calls in trace(30, 4),
    ) {
        let window = FixedWindow::new(limit, Duration::from_nanos(len * 1000)).unwrap();
        let len = len * 1000;
        let mut state = window.initial_state(0);
        let (mut now, mut model_window, mut model_count) = (0, 0, 0);
        for (gap, cost) in calls {
            now += gap * 100;
            if now / len != model_window {
                model_window = now / len;
                model_count = 0;
            }
            let decision = window.reserve::<Decision>(&mut state, now, cost, 0);
            if cost > limit {
                prop_assert!(decision.is_never());
            } else if model_count + cost <= limit {
                // Never rejects a call that fits.
                prop_assert!(decision.is_allowed());
                model_count += cost;
            } else {
                prop_assert!(!decision.is_allowed());
                prop_assert_eq!(decision.retry_after_nanos(), (model_window + 1) * len - now);
            }
            prop_assert!(model_count <= limit);
            prop_assert_eq!(window.count(&state, now), model_count);
            prop_assert_eq!(decision.remaining(), limit - model_count);
        }
    }

    #[test]
    fn leaky_bucket_never_exceeds_rate_times_span_plus_capacity(
        capacity in 1u64..6,
        count in 1u64..5,
        period in 1u64..4000,
        queue in any::<bool>(),
        calls in prop::collection::vec((0u64..3000, 1u64..4, prop::option::of(0u64..3000)), 1..100),
    ) {
        let period = period + count; // at most one permit per nanosecond
        let bucket = if queue {
            LeakyBucket::queue(capacity, count, Duration::from_nanos(period)).unwrap()
        } else {
            LeakyBucket::meter(capacity, count, Duration::from_nanos(period)).unwrap()
        };
        let mut state = bucket.initial_state(0);
        let mut now = 0;
        let mut admitted = Vec::new();
        for (gap, cost, max_wait) in calls {
            now += gap;
            let max_wait = max_wait.unwrap_or(u64::MAX);
            let peeked = bucket.peek(&state, now, cost);
            let decision = bucket.reserve::<Decision>(&mut state, now, cost, max_wait);
            if cost > capacity {
                prop_assert!(decision.is_never());
                continue;
            }
            if decision.is_allowed() {
                prop_assert!(decision.wait_nanos() <= max_wait);
                // A queued caller waits at most (capacity − cost) intervals.
                let longest = ((capacity - cost) * period).div_ceil(count);
                prop_assert!(decision.wait_nanos() <= longest);
                admitted.push((now + decision.wait_nanos(), cost));
            } else {
                // Told exactly when the same caller, keeping its deadline (what is
                // left of max_wait), passes: the rule of `Decision::retry_after`.
                let retry = decision.retry_after_nanos();
                let left = |s: u64| max_wait.saturating_sub(s);
                let mut probe = state;
                prop_assert!(bucket.reserve::<Decision>(&mut probe, now + retry, cost, left(retry)).is_allowed());
                let mut probe = state;
                prop_assert!(!bucket.reserve::<Decision>(&mut probe, now + retry - 1, cost, left(retry - 1)).is_allowed());
            }
            // A peek is a zero-wait reserve: the same for a meter; for a queue, a
            // caller that accepts a wait can only do better.
            if !queue {
                prop_assert_eq!(peeked, decision);
            } else if peeked.is_allowed() {
                prop_assert!(decision.is_allowed());
            }
        }
        let slack = u64::from(period % count != 0);
        prop_assert!(within_rate(&admitted, capacity, count, period, slack));
        if queue && admitted.iter().all(|a| a.1 == 1) {
            // The queue's output is smooth: one start per interval, no burst.
            prop_assert!(within_rate(&admitted, 1, count, period, slack));
        }
    }

    #[test]
    fn sliding_window_counter_stays_within_its_documented_bound(
        limit in 1u64..8,
        len in 1u64..40,
        floor in any::<bool>(),
        attempts in any::<bool>(),
        calls in trace(40, 3),
    ) {
        let len = len * 1000;
        let rounding = if floor { Rounding::Floor } else { Rounding::Exact };
        let counting = if attempts { Counting::Attempts } else { Counting::Admitted };
        let counter = SlidingWindowCounter::new(limit, Duration::from_nanos(len))
            .unwrap()
            .with_rounding(rounding)
            .with_counting(counting);
        let mut state = counter.initial_state(0);
        let mut now = 0;
        let mut admitted: Vec<(u64, u64)> = Vec::new();
        for (gap, cost) in calls {
            now += gap * 100;
            let (previous, _) = counter.counts(&state, now);
            let decision = counter.reserve::<Decision>(&mut state, now, cost, 0);
            if cost > limit {
                prop_assert!(decision.is_never());
                continue;
            }
            if !decision.is_allowed() {
                let retry = decision.retry_after_nanos();
                prop_assert!(retry <= 2 * len);
                prop_assert!(counter.peek(&state, now + retry, cost).is_allowed());
                if !attempts {
                    prop_assert!(!counter.peek(&state, now + retry - 1, cost).is_allowed());
                }
                continue;
            }
            admitted.push((now, cost));
            // Over the window of `len` ending now: at most limit + previous × f
            // (Exact), fewer than limit + 1 + previous × f (Floor).
            let in_span: u64 = admitted.iter().filter(|a| a.0 + len > now).map(|a| a.1).sum();
            let elapsed = now % len;
            let lhs = u128::from(in_span) * u128::from(len);
            let bound = u128::from(limit) * u128::from(len) + u128::from(previous) * u128::from(elapsed);
            if floor {
                prop_assert!(lhs < bound + u128::from(len));
                prop_assert!(in_span <= 2 * limit);
            } else {
                prop_assert!(lhs <= bound);
                prop_assert!(in_span < 2 * limit);
            }
            // No single fixed window grants more than the limit.
            let this_window: u64 = admitted.iter().filter(|a| a.0 / len == now / len).map(|a| a.1).sum();
            prop_assert!(this_window <= limit);
        }
    }

    #[test]
    fn blocking_acquire_respects_each_bound(
        limit in 1u64..5,
        costs in prop::collection::vec(1u64..7, 1..40),
    ) {
        let len = Duration::from_secs(10);
        let ns = 10_000_000_000u64;

        let mut windows = std::collections::HashMap::new();
        for (cost, outcome) in acquire_each(FixedWindow::new(limit, len).unwrap(), &costs) {
            match outcome {
                Ok(at) => *windows.entry(at / ns).or_insert(0) += cost,
                Err(error) => {
                    prop_assert!(cost > limit);
                    prop_assert_eq!(error, Error::Never { cost });
                }
            }
        }
        prop_assert!(windows.values().all(|&n| n <= limit));

        let mut admitted = Vec::new();
        for (cost, outcome) in acquire_each(LeakyBucket::meter(limit, 3, len).unwrap(), &costs) {
            if let Ok(at) = outcome {
                admitted.push((at, cost));
            } else {
                prop_assert!(cost > limit);
            }
        }
        prop_assert!(within_rate(&admitted, limit, 3, ns, 1));

        let admitted = admitted_of(acquire_each(LeakyBucket::queue(limit, 3, len).unwrap(), &costs));
        prop_assert!(within_rate(&admitted, limit, 3, ns, 1));

        let admitted = admitted_of(acquire_each(SlidingWindowCounter::new(limit, len).unwrap(), &costs));
        for (index, &(now, _)) in admitted.iter().enumerate() {
            let in_span: u64 = admitted[..=index].iter().filter(|a| a.0 + ns > now).map(|a| a.1).sum();
            prop_assert!(in_span < 2 * limit);
        }
        let total: u64 = costs.iter().filter(|&&c| c <= limit).sum();
        prop_assert_eq!(admitted.iter().map(|a| a.1).sum::<u64>(), total);
    }
}
