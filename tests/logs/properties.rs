//! Property tests on virtual time for the sliding log and the bucketed sliding
//! window: random traces of calls (time steps and costs), each decision compared
//! with a brute-force oracle over the whole history.

use proptest::prelude::*;
use sluicegate::algorithms::sliding_window_buckets::OldestBucket;
use sluicegate::algorithms::Decision;
use sluicegate::algorithms::{Algorithm, SlidingLog, SlidingWindowBuckets};
use std::time::Duration;

const MS: u64 = 1_000_000;

/// A trace: (time step in ms, cost) pairs; steps are often 0 so calls collide.
fn trace(max_cost: u64) -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((prop_oneof![Just(0u64), 0u64..400], 1..=max_cost), 1..80)
}

/// Σ cost of `history` entries still live at `now` (an entry at t counts before
/// t + duration).
fn live_sum(history: &[(u64, u64)], now: u64, duration: u64) -> u64 {
    history
        .iter()
        .filter(|&&(t, _)| t + duration > now)
        .map(|&(_, c)| c)
        .sum()
}

/// The trace's calls at their times: each step is in ms after the call before.
fn times(steps: &[(u64, u64)]) -> impl Iterator<Item = (u64, u64)> + '_ {
    steps.iter().scan(0, |now, &(step, cost)| {
        *now += step * MS;
        Some((*now, cost))
    })
}

/// Σ cost of `history` entries at `start` or up to `span` after it.
fn held(history: &[(u64, u64)], start: u64, span: u64) -> u64 {
    history
        .iter()
        .filter(|&&(t, _)| t >= start && t < start + span)
        .map(|&(_, c)| c)
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// The log grants exactly the calls that fit: never more than the limit in any
    /// window of its duration, never a refusal of a call that would fit, and a
    /// `retry_after` that is the first instant the call fits.
    #[test]
    fn sliding_log_matches_the_brute_force_oracle(
        limit in 1u64..8,
        duration_ms in 1u64..2000,
        steps in trace(4),
    ) {
        let duration = duration_ms * MS;
        let log = SlidingLog::new(limit, Duration::from_nanos(duration)).unwrap();
        let mut state = log.initial_state(0);
        let mut admitted: Vec<(u64, u64)> = vec![];
        for (now, cost) in times(&steps) {
            let fits = cost <= limit && live_sum(&admitted, now, duration) + cost <= limit;
            let peeked = log.peek(&state, now, cost);
            let d = log.reserve::<Decision>(&mut state, now, cost, 0);
            prop_assert_eq!(peeked, d);
            prop_assert_eq!(d.is_allowed(), fits, "at {} cost {}", now, cost);
            prop_assert!(state.entry_count() as u64 <= limit);
            if d.is_allowed() {
                admitted.push((now, cost));
                prop_assert_eq!(d.remaining(), limit - live_sum(&admitted, now, duration));
            } else if cost <= limit {
                let at = now + d.retry_after_nanos();
                prop_assert!(live_sum(&admitted, at, duration) + cost <= limit);
                prop_assert!(live_sum(&admitted, at - 1, duration) + cost > limit);
                prop_assert!(log.peek(&state, at, cost).is_allowed());
            } else {
                prop_assert!(d.is_never());
            }
        }
        // No window of length `window` ever held more than the limit.
        for &(start, _) in &admitted {
            prop_assert!(held(&admitted, start, duration) <= limit);
        }
    }

    /// With a minimum spacing, granted calls are at least that far apart, and the log
    /// otherwise still grants exactly what fits.
    #[test]
    fn sliding_log_respects_min_spacing(
        limit in 1u64..8,
        duration_ms in 1u64..2000,
        spacing_ms in 1u64..300,
        steps in trace(3),
    ) {
        let (duration, spacing) = (duration_ms * MS, spacing_ms * MS);
        let log = SlidingLog::new(limit, Duration::from_nanos(duration))
            .unwrap()
            .with_min_spacing(Duration::from_nanos(spacing));
        let mut state = log.initial_state(0);
        let mut admitted: Vec<(u64, u64)> = vec![];
        for (now, cost) in times(&steps) {
            let spaced = admitted.last().is_none_or(|&(t, _)| now >= t + spacing);
            let fits = cost <= limit && live_sum(&admitted, now, duration) + cost <= limit;
            let d = log.reserve::<Decision>(&mut state, now, cost, 0);
            prop_assert_eq!(d.is_allowed(), fits && spaced);
            if d.is_allowed() {
                admitted.push((now, cost));
            } else if cost <= limit {
                let at = now + d.retry_after_nanos();
                prop_assert!(log.peek(&state, at, cost).is_allowed());
                prop_assert!(!log.peek(&state, at - 1, cost).is_allowed());
            }
        }
        for pair in admitted.windows(2) {
            prop_assert!(pair[1].0 - pair[0].0 >= spacing);
        }
    }

    /// Recording refusals in `limit + 1` entries decides exactly as an unbounded log
    /// of every attempt would, and the memory never exceeds the cap.
    #[test]
    fn recorded_refusals_in_a_capped_log_match_an_unbounded_log(
        limit in 1u64..6,
        duration_ms in 1u64..2000,
        steps in trace(3),
    ) {
        let duration = duration_ms * MS;
        let log = SlidingLog::new(limit, Duration::from_nanos(duration))
            .unwrap()
            .with_rejected_recorded();
        let mut state = log.initial_state(0);
        let mut attempts: Vec<(u64, u64)> = vec![];
        for (now, cost) in times(&steps) {
            let fits = cost <= limit && live_sum(&attempts, now, duration) + cost <= limit;
            let d = log.reserve::<Decision>(&mut state, now, cost, 0);
            prop_assert_eq!(d.is_allowed(), fits);
            prop_assert!(state.entry_count() as u64 <= limit + 1);
            if cost <= limit {
                attempts.push((now, cost));
            }
            if !d.is_allowed() && cost <= limit {
                // The retry time, judged by the unbounded log (which now holds this
                // attempt too).
                let at = now + d.retry_after_nanos();
                prop_assert!(live_sum(&attempts, at, duration) + cost <= limit);
                prop_assert!(live_sum(&attempts, at - 1, duration) + cost > limit);
            }
        }
    }

    /// The bucketed window grants exactly what its documented count allows (checked
    /// against a brute-force count over the admitted history), keeps every span of
    /// K aligned buckets within the limit, and any window of its duration within
    /// twice the limit when the duration is a multiple of the precision.
    #[test]
    fn bucketed_window_matches_its_documented_count(
        limit in 1u64..10,
        precision_ms in 1u64..500,
        buckets in 1u64..6,
        extra_ms in 0u64..500,
        weighted in any::<bool>(),
        steps in trace(4),
    ) {
        let p = precision_ms * MS;
        // A multiple of the precision, or (half the time) a little more.
        let d = buckets * p + if extra_ms % 2 == 0 { 0 } else { (extra_ms * MS) % p };
        let oldest = if weighted { OldestBucket::Weighted } else { OldestBucket::Drop };
        let w = SlidingWindowBuckets::new(
            limit,
            Duration::from_nanos(d),
            Duration::from_nanos(p),
            oldest,
        )
        .unwrap();
        let b = d.div_ceil(p);
        let mut state = w.initial_state(0);
        let mut admitted: Vec<(u64, u64)> = vec![];
        // The count, scaled by p, that the docs define.
        let scaled = |admitted: &[(u64, u64)], now: u64| -> u128 {
            let n = now / p;
            admitted
                .iter()
                .map(|&(t, c)| {
                    let bucket = t / p;
                    let weight: u64 = match oldest {
                        OldestBucket::Drop => u64::from(bucket + b > n) * p,
                        OldestBucket::Weighted => match now.checked_sub(d) {
                            None => p,
                            Some(start) if bucket > start / p => p,
                            Some(start) if bucket == start / p => (bucket + 1) * p - start,
                            Some(_) => 0,
                        },
                    };
                    u128::from(c) * u128::from(weight)
                })
                .sum()
        };
        for (now, cost) in times(&steps) {
            let fits = cost <= limit
                && scaled(&admitted, now) + u128::from(cost * p) <= u128::from(limit * p);
            let peeked = w.peek(&state, now, cost);
            let dec = w.reserve::<Decision>(&mut state, now, cost, 0);
            prop_assert_eq!(peeked, dec);
            prop_assert_eq!(dec.is_allowed(), fits, "at {} cost {}", now, cost);
            if dec.is_allowed() {
                admitted.push((now, cost));
                let used = scaled(&admitted, now).div_ceil(u128::from(p)) as u64;
                prop_assert_eq!(dec.remaining(), limit - used);
            } else if cost <= limit {
                let at = now + dec.retry_after_nanos();
                let room = u128::from((limit - cost) * p);
                prop_assert!(scaled(&admitted, at) <= room, "retry at {} too early", at);
                prop_assert!(scaled(&admitted, at - 1) > room, "retry at {} too late", at);
                prop_assert!(w.peek(&state, at, cost).is_allowed());
            } else {
                prop_assert!(dec.is_never());
            }
            if w.is_replenished(&state, now) {
                prop_assert_eq!(scaled(&admitted, now), 0);
            }
        }
        // Spans of K aligned buckets: K = B when dropping, ⌊d/p⌋ when weighting.
        let k = if weighted { d / p } else { b };
        // The fullest span starts at some admitted call's bucket.
        {
            let by_bucket: Vec<(u64, u64)> = admitted.iter().map(|&(t, c)| (t / p, c)).collect();
            for &(first, _) in &by_bucket {
                let sum = held(&by_bucket, first, k);
                prop_assert!(sum <= limit, "buckets {}..{} hold {}", first, first + k, sum);
            }
        }
        if d.is_multiple_of(p) {
            for &(start, _) in &admitted {
                prop_assert!(held(&admitted, start, d) <= 2 * limit);
            }
        }
    }
}
