//! The bucketed sliding window on words: the step decides by the plain count rule,
//! and its plan is total on any words (the lock-free cell runs it on reads that
//! may mix two states).

use crate::algorithms::sliding_window_buckets::OldestBucket;
use crate::algorithms::words::WordEncoded;
use crate::algorithms::SlidingWindowBuckets;
use crate::cells::{StateCell, WordsCell};
use proptest::prelude::*;
use std::time::Duration;

/// A window of `limit` per `precision · k + extra` (so that durations that are not a
/// multiple of the precision come up too), dropping or weighting the oldest bucket.
fn window() -> impl Strategy<Value = SlidingWindowBuckets> {
    (1u64..8, 1u64..1_000, 1u64..12, 0u64..1_000, any::<bool>()).prop_map(
        |(limit, precision, k, extra, weighted)| {
            let extra = extra % precision;
            let duration = Duration::from_nanos(precision * k + extra);
            let precision = Duration::from_nanos(precision);
            let oldest = if weighted {
                OldestBucket::Weighted
            } else {
                OldestBucket::Drop
            };
            SlidingWindowBuckets::new(limit, duration, precision, oldest).unwrap()
        },
    )
}

/// Steps of (time moved, cost): mostly forward, sometimes backwards.
fn trace() -> impl Strategy<Value = Vec<(i64, u64)>> {
    prop::collection::vec((-300i64..3_000, 1u64..10), 1..200)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The step against a plain model of its rule: a call fits when the permits
    /// counted in the window (the oldest bucket dropped, or weighted by the part of
    /// it still inside), scaled by the precision so that nothing rounds, plus its
    /// cost are within the limit; only a grant writes.
    #[test]
    fn the_step_decides_by_the_plain_count_rule(window in window(), trace in trace()) {
        let mut words = vec![0; window.state_words()];
        window.init_words(&mut words[..], 0);
        let mut now: u64 = 5_000;
        for (step, cost) in trace {
            now = now.saturating_add_signed(step);
            let view = window.view(&words[..], now);
            let scaled = window.used_scaled(&words[..], &view);
            let fits = cost <= window.limit
                && scaled <= u128::from(window.limit - cost) * u128::from(window.precision);
            let before = words.clone();
            let (decision, _) = window.reserve_words(&mut words[..], now, cost, 0);
            prop_assert_eq!(decision.is_allowed(), fits, "at {} cost {}", now, cost);
            prop_assert_eq!(decision.is_never(), cost > window.limit);
            if !fits {
                prop_assert_eq!(&before, &words, "a refusal at {} of cost {} wrote", now, cost);
            }
        }
    }

    #[test]
    fn lean_try_is_total_on_any_words(
        window in window(),
        words in prop::collection::vec(
            prop_oneof![any::<u64>(), Just(u64::MAX), Just(0u64), 0u64..64],
            0..40,
        ),
        now in prop_oneof![any::<u64>(), Just(u64::MAX), 0u64..10_000],
        cost in 1u64..10,
    ) {
        // Whatever it answers on garbage, it answers (no panic, no endless loop),
        // and applying what it planned stays within the words.
        let (granted, take) = window.plan_take(&words[..], now, cost);
        prop_assert_eq!(take.is_some(), granted);
        let mut words = words;
        if let Some(take) = take {
            window.apply_take(&mut words[..], take);
        }
    }
}

#[test]
fn the_cell_reconfigures_only_to_a_state_of_the_same_size() {
    let minute = Duration::from_secs(60);
    let window = SlidingWindowBuckets::dropping(2, minute, Duration::from_secs(15)).unwrap();
    let cell = WordsCell::new(window, 0);
    assert!(cell.try_take(0, 2));
    // Four buckets to five: the ring keeps 8 slots (4 + 1 and 5 + 1 round up alike).
    let finer = SlidingWindowBuckets::dropping(5, minute, Duration::from_secs(12)).unwrap();
    cell.reconfigure(&|algorithm, _| {
        *algorithm = finer;
        Ok(())
    })
    .unwrap();
    assert_eq!(cell.algorithm(), finer);
    // The two permits taken still count against the new limit of 5.
    assert!(cell.try_take(0, 3));
    assert!(!cell.try_take(0, 1));
    // Sixty buckets need a larger ring, three a smaller one: refused, whether the
    // change brings a state of its own size or keeps the old one, and nothing changes.
    let sixty = SlidingWindowBuckets::dropping(100, minute, Duration::from_secs(1)).unwrap();
    let three = SlidingWindowBuckets::dropping(5, minute, Duration::from_secs(20)).unwrap();
    for other in [sixty, three] {
        let with_state = cell.reconfigure(&|algorithm, state| {
            *algorithm = other;
            *state = crate::algorithms::Algorithm::initial_state(&other, 0);
            Ok(())
        });
        let alone = cell.reconfigure(&|algorithm, _| {
            *algorithm = other;
            Ok(())
        });
        for refused in [with_state, alone] {
            assert!(
                matches!(refused, Err(crate::ConfigError::InvalidCount { .. })),
                "{refused:?}"
            );
        }
    }
    assert_eq!(cell.algorithm(), finer);
    assert!(!cell.reserve(0, 1, 0).0.is_allowed());
    assert_eq!(cell.peek(0, 1).retry_after(), minute);
}

#[test]
fn configuration_words_it_did_not_encode_never_make_a_step_panic() {
    let odd = [0, u64::MAX, 1 << 40];
    for limit in odd {
        for duration in odd {
            for precision in odd {
                for shape in [0, 1, u64::MAX, u64::MAX - 1] {
                    let window = SlidingWindowBuckets::from_config_words([
                        limit, duration, precision, shape,
                    ]);
                    assert!(window.state_words() <= 2 + 8192, "{window:?}");
                    let mut words = vec![0; window.state_words()];
                    window.init_words(&mut words[..], u64::MAX / 2);
                    for now in [0, 1, u64::MAX / 2, u64::MAX] {
                        let _ = window.plan_take(&words[..], now, 1);
                        let _ = window.peek_words(&words[..], now, 1);
                        let _ = window.reserve_words(&mut words[..], now, 1, 0);
                    }
                }
            }
        }
    }
}

#[test]
fn the_lean_take_fills_a_one_permit_window() {
    use crate::algorithms::{words::WordEncoded, SlidingWindowBuckets};
    use std::time::Duration;
    let w = SlidingWindowBuckets::dropping(1, Duration::from_secs(60), Duration::from_secs(15))
        .unwrap();
    let mut words = vec![0; w.state_words()];
    w.init_words(&mut words[..], 0);
    let (granted, take) = w.plan_take(&words[..], 0, 1);
    assert!(granted && take.is_some());
    w.apply_take(&mut words[..], take.unwrap());
    assert_eq!(w.plan_take(&words[..], 0, 1), (false, None));
}
