//! Unit tests of the sliding window counter: its arithmetic at the edges.

use super::*;
use crate::algorithms::words::Settle;
use crate::algorithms::{Algorithm, Decision, WordEncoded};

const SECOND: u64 = 1_000_000_000;

#[test]
fn retry_after_is_the_first_instant_that_passes() {
    for rounding in [Rounding::Exact, Rounding::Floor] {
        let counter = SlidingWindowCounter::new(10, Duration::from_secs(60))
            .unwrap()
            .with_rounding(rounding);
        let mut state = counter.initial_state(0);
        assert!(counter
            .reserve::<Decision>(&mut state, 50 * SECOND, 10, 0)
            .is_allowed());
        for now in [60 * SECOND, 61 * SECOND, 100 * SECOND, 119 * SECOND] {
            for cost in [1, 4, 10] {
                let refused = counter.peek(&state, now, cost);
                if refused.is_allowed() {
                    continue;
                }
                let at = now + refused.retry_after_nanos();
                assert!(
                    counter.peek(&state, at, cost).is_allowed(),
                    "{rounding:?} {now} {cost}"
                );
                assert!(
                    !counter.peek(&state, at - 1, cost).is_allowed(),
                    "{rounding:?} {now} {cost}"
                );
            }
        }
    }
}

#[test]
fn time_going_backwards_weighs_the_previous_window_fully() {
    let counter = SlidingWindowCounter::new(4, Duration::from_secs(10)).unwrap();
    let mut state = counter.initial_state(0);
    assert!(counter
        .reserve::<Decision>(&mut state, 5 * SECOND, 4, 0)
        .is_allowed());
    assert!(counter
        .reserve::<Decision>(&mut state, 15 * SECOND, 2, 0)
        .is_allowed());
    let refused = counter.reserve::<Decision>(&mut state, 2 * SECOND, 1, 0);
    assert!(!refused.is_allowed());
    // Measured from the real `now` (2 s): the state's point is 10 s, and at 15 s
    // the previous window weighs 2, leaving room for 0 more after the 2 current.
    assert!(refused.retry_after_nanos() > 8 * SECOND);
}

#[test]
fn huge_costs_and_times_saturate() {
    let counter =
        SlidingWindowCounter::new(MAX_LIMIT, Duration::from_nanos(i64::MAX as u64)).unwrap();
    let mut state = counter.initial_state(u64::MAX);
    assert!(counter
        .reserve::<Decision>(&mut state, u64::MAX, MAX_LIMIT, 0)
        .is_allowed());
    assert!(!counter
        .reserve::<Decision>(&mut state, u64::MAX, 1, 0)
        .is_allowed());
    assert!(counter
        .reserve::<Decision>(&mut state, u64::MAX, u64::MAX, 0)
        .is_never());
    let one = SlidingWindowCounter::new(1, Duration::from_secs(1)).unwrap();
    assert!(one
        .reserve::<Decision>(&mut one.initial_state(0), 0, u64::MAX, 0)
        .is_never());
    // A word this type did not make decodes without panicking.
    let odd = SlidingWindowCounter::from_config_words([0, u64::MAX, u64::MAX]);
    let mut state = odd.read_state(&[u64::MAX][..]);
    odd.reserve::<Decision>(&mut state, u64::MAX, 1, 0);
    odd.reserve::<Decision>(&mut state, 0, 1, 0);
}

#[test]
fn the_limit_must_pack_into_one_word() {
    assert!(SlidingWindowCounter::new(MAX_LIMIT, Duration::from_secs(1)).is_ok());
    for limit in [0, MAX_LIMIT + 1, u64::MAX] {
        assert!(matches!(
            SlidingWindowCounter::new(limit, Duration::from_secs(1)),
            Err(ConfigError::InvalidCount { .. })
        ));
    }
}

#[test]
fn configuration_words_round_trip() {
    for rounding in [Rounding::Exact, Rounding::Floor] {
        for counting in [Counting::Admitted, Counting::Attempts] {
            for limit in [1, 3, 100, MAX_LIMIT] {
                let counter = SlidingWindowCounter::new(limit, Duration::from_millis(7))
                    .unwrap()
                    .with_rounding(rounding)
                    .with_counting(counting);
                assert_eq!(
                    SlidingWindowCounter::from_config_words(counter.config_words()),
                    counter
                );
            }
        }
    }
}

#[test]
fn the_limit_at_the_maximum_fills_and_rolls_exactly() {
    // 2²⁴ − 1 per second: 24-bit counts, a 16-bit index that wraps every 2¹⁶ s.
    let counter = SlidingWindowCounter::new(MAX_LIMIT, Duration::from_secs(1)).unwrap();
    assert!(!counter.exact_index());
    let mut state = counter.initial_state(0);
    assert!(counter
        .reserve::<Decision>(&mut state, 0, MAX_LIMIT - 1, 0)
        .is_allowed());
    assert!(counter
        .reserve::<Decision>(&mut state, SECOND - 1, 1, 0)
        .is_allowed());
    assert!(!counter
        .reserve::<Decision>(&mut state, SECOND - 1, 1, 0)
        .is_allowed());
    assert_eq!(counter.counts(&state, SECOND - 1), (0, MAX_LIMIT));
    // Half a second later the full previous window weighs half the limit, rounded up.
    let half = SECOND + SECOND / 2;
    assert_eq!(counter.counts(&state, half), (MAX_LIMIT, 0));
    let room = counter.peek(&state, half, 1).remaining() + 1;
    assert_eq!(room, MAX_LIMIT - MAX_LIMIT.div_ceil(2));
    assert!(counter
        .reserve::<Decision>(&mut state, half, room, 0)
        .is_allowed());
    assert!(!counter
        .reserve::<Decision>(&mut state, half, 1, 0)
        .is_allowed());
    assert_eq!(counter.counts(&state, half), (MAX_LIMIT, room));
}

#[test]
fn attempts_saturate_at_the_count_width_and_still_refuse() {
    // Limit 3 counts attempts in 10 bits: saturation at 1023.
    let counter = SlidingWindowCounter::new(3, Duration::from_secs(60))
        .unwrap()
        .with_counting(Counting::Attempts);
    let mut state = counter.initial_state(0);
    assert!(counter
        .reserve::<Decision>(&mut state, 0, 3, 0)
        .is_allowed());
    for _ in 0..2000 {
        assert!(!counter
            .reserve::<Decision>(&mut state, SECOND, 3, 0)
            .is_allowed());
    }
    assert_eq!(counter.counts(&state, SECOND), (0, 1023));
    // Next window: 1023 × (60 s − e)/60 s + 1 ≤ 3 needs e ≥ 60 s × 1021/1023: the
    // ban covers all but 2/1023 of the window, and retry_after says exactly when.
    let refused = counter.reserve::<Decision>(&mut state, 60 * SECOND, 1, 0);
    assert!(!refused.is_allowed());
    assert_eq!(counter.counts(&state, 60 * SECOND), (1023, 1));
    // That refusal counted too: 1023 × (60 s − e)/60 s + 1 + 1 ≤ 3.
    assert_eq!(
        refused.retry_after_nanos(),
        60 * SECOND - 60 * SECOND / 1023
    );
    // At the largest limit the spare bits are gone: counts saturate at the limit.
    let big = SlidingWindowCounter::new(MAX_LIMIT, Duration::from_secs(1))
        .unwrap()
        .with_counting(Counting::Attempts);
    let mut state = big.initial_state(0);
    assert!(big
        .reserve::<Decision>(&mut state, 0, MAX_LIMIT, 0)
        .is_allowed());
    assert!(!big
        .reserve::<Decision>(&mut state, 0, MAX_LIMIT, 0)
        .is_allowed());
    assert_eq!(big.counts(&state, 0), (0, MAX_LIMIT));
    // A saturated window weighs as a full window of admitted permits.
    let admitted = SlidingWindowCounter::new(MAX_LIMIT, Duration::from_secs(1)).unwrap();
    let mut full = admitted.initial_state(0);
    assert!(admitted
        .reserve::<Decision>(&mut full, 0, MAX_LIMIT, 0)
        .is_allowed());
    for now in [SECOND, SECOND + SECOND / 3, 2 * SECOND - 1] {
        assert_eq!(
            big.peek(&state, now, 1).remaining(),
            admitted.peek(&full, now, 1).remaining()
        );
    }
}

/// A counter whose index wraps after 2¹⁶ windows of 1 µs: limit 2²⁴ − 1.
fn wrapping() -> SlidingWindowCounter {
    let counter = SlidingWindowCounter::new(MAX_LIMIT, Duration::from_micros(1)).unwrap();
    assert_eq!(counter.index_bits(), 16);
    counter
}

const MICRO: u64 = 1_000;
const WRAP: u64 = 1 << 16;

#[test]
fn the_window_index_wraps_forward_across_its_modulus() {
    let counter = wrapping();
    // The last window before the index wraps, then the first one after it.
    let last = (WRAP - 1) * MICRO;
    let mut state = counter.initial_state(last);
    assert!(counter
        .reserve::<Decision>(&mut state, last, 10, 0)
        .is_allowed());
    assert_eq!(counter.counts(&state, last + MICRO), (10, 0));
    assert!(counter
        .reserve::<Decision>(&mut state, last + MICRO, 5, 0)
        .is_allowed());
    assert_eq!(state.word >> 48, 0); // stored as index 0
    assert_eq!(counter.counts(&state, last + MICRO), (10, 5));
    assert_eq!(counter.counts(&state, last + 2 * MICRO), (5, 0));
    // Forward by up to 2¹⁵ − 1 windows: counts forgotten, a fresh window.
    let far = last + MICRO + (WRAP / 2 - 1) * MICRO;
    assert_eq!(counter.counts(&state, far), (0, 0));
    assert!(counter.is_replenished(&state, far));
    // Many wraps later, in the forward half: the same.
    assert_eq!(
        counter.counts(&state, last + MICRO + (7 * WRAP + 3) * MICRO),
        (0, 0)
    );
}

#[test]
fn a_wrapped_index_in_the_backward_half_keeps_its_counts() {
    let counter = wrapping();
    let mut state = counter.initial_state(0);
    assert!(counter
        .reserve::<Decision>(&mut state, 0, MAX_LIMIT, 0)
        .is_allowed());
    // 2¹⁵ windows on is ambiguous (as far back as forward): counts kept, read as
    // the start of a window 2¹⁵ µs in the future, and the retry measured from now.
    let ambiguous = (WRAP / 2) * MICRO;
    let refused = counter.reserve::<Decision>(&mut state, ambiguous, 1, 0);
    assert!(!refused.is_allowed());
    assert_eq!(counter.counts(&state, ambiguous), (0, MAX_LIMIT));
    assert!(!counter.is_replenished(&state, ambiguous));
    // It becomes the window 2¹⁶ µs (the stored index, wrapped) and is retried 1 µs
    // plus the part of it the previous count must age by after that.
    let retry = refused.retry_after_nanos();
    assert!(retry > (WRAP / 2) * MICRO && retry <= (WRAP / 2 + 2) * MICRO);
    assert!(counter.peek(&state, ambiguous + retry, 1).is_allowed());
    // One window before 2¹⁵ is still forward: forgotten.
    assert_eq!(counter.counts(&state, (WRAP / 2 - 1) * MICRO), (0, 0));
    // A state with nothing counted is simply moved to now, whatever the distance.
    let empty = counter.initial_state(0);
    assert!(counter.peek(&empty, ambiguous, MAX_LIMIT).is_allowed());
    // (Its one permit is counted in now's window, which starts now: gone in 2 µs.)
    assert_eq!(
        counter.peek(&empty, ambiguous, 1).reset_after_nanos(),
        2 * MICRO
    );
}

#[test]
fn time_going_backwards_never_grants_more_in_either_index_mode() {
    let exact = SlidingWindowCounter::new(5, Duration::from_micros(1)).unwrap();
    assert!(exact.exact_index());
    for counter in [exact, wrapping()] {
        let limit = counter.limit();
        let mut state = counter.initial_state(0);
        let now = 10 * MICRO + 300;
        assert!(counter
            .reserve::<Decision>(&mut state, now, limit, 0)
            .is_allowed());
        for back in [1, 300, MICRO, 5 * MICRO, 10 * MICRO] {
            let earlier = now - back;
            let refused = counter.reserve::<Decision>(&mut state, earlier, 1, 0);
            assert!(!refused.is_allowed(), "{back}");
            assert_eq!(counter.counts(&state, earlier), (0, limit), "{back}");
            // Measured from the real `now`: not before the latest window ends.
            assert!(earlier + refused.retry_after_nanos() > 11 * MICRO, "{back}");
        }
        // An allowed call from the past is counted in the latest window.
        let mut state = counter.initial_state(0);
        assert!(counter
            .reserve::<Decision>(&mut state, now, 1, 0)
            .is_allowed());
        assert!(counter
            .reserve::<Decision>(&mut state, now - 5 * MICRO, 1, 0)
            .is_allowed());
        assert_eq!(counter.counts(&state, now), (0, 2));
    }
}

#[test]
fn the_state_is_one_word() {
    assert_eq!(std::mem::size_of::<SlidingWindowState>(), 8);
    let counter = SlidingWindowCounter::new(100, Duration::from_secs(60)).unwrap();
    let state = counter.initial_state(61 * SECOND);
    let mut words = [0];
    counter.write_state(&state, &mut words[..]);
    assert_eq!(counter.read_state(&words[..]), state);
}

#[test]
fn window_of_divides_exactly_without_dividing() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        // xorshift64*: deterministic, spread over the whole range.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut windows_ns = vec![
        1,
        2,
        3,
        7,
        1 << 20,
        999_999_937,
        SECOND,
        u64::MAX / 3,
        u64::MAX,
    ];
    for _ in 0..200 {
        let shift = next() % 64;
        windows_ns.push((next() >> shift).max(1));
    }
    for window in windows_ns {
        let counter = SlidingWindowCounter::new(1, Duration::from_nanos(window));
        let Ok(counter) = counter else { continue };
        let mut instants = vec![
            0,
            1,
            window - 1,
            window,
            window.saturating_add(1),
            u64::MAX,
            u64::MAX - 1,
        ];
        instants.extend((0..200).map(|_| next()));
        for now in instants {
            assert_eq!(
                counter.window_of(now),
                now / counter.window,
                "{now} / {window}"
            );
        }
    }
}

/// A plain model of the step, written with plain divisions and the layout worked out
/// afresh on every call (no kept reciprocal, no layout in the configuration): the
/// step must match it field by field.
fn plain_reserve(
    counter: &SlidingWindowCounter,
    state: &mut SlidingWindowState,
    now: Nanos,
    cost: u64,
) -> Decision {
    let weighted = |previous: u64, elapsed: u64| -> u64 {
        if previous == 0 {
            return 0;
        }
        let weighted = u128::from(previous) * u128::from(counter.window - elapsed);
        let window = u128::from(counter.window);
        let rounded = match counter.rounding {
            Rounding::Exact => weighted.div_ceil(window),
            Rounding::Floor => weighted / window,
        };
        u64::try_from(rounded).unwrap_or(previous)
    };
    let mut view = counter.view(state, now);
    let used = weighted(view.previous, view.elapsed) + view.current;
    let remaining = counter.limit.saturating_sub(used);
    if cost > counter.limit {
        let reset = counter.reset_after(&view);
        return Decision::never(counter.limit, remaining, reset.saturating_add(view.behind));
    }
    if used + cost > counter.limit {
        if counter.counting == Counting::Attempts {
            let saturated = (1 << counter.count_bits()) - 1;
            view.current = (view.current + cost).min(saturated);
            *state = counter.pack(view.index, view.previous, view.current);
        }
        let retry = counter.retry_after(&view, cost);
        let reset = counter.reset_after(&view);
        return Decision::denied(
            counter.limit,
            remaining,
            retry.saturating_add(view.behind),
            reset.saturating_add(view.behind),
        );
    }
    view.current += cost;
    *state = counter.pack(view.index, view.previous, view.current);
    let reset = counter.reset_after(&view);
    Decision::allowed(
        counter.limit,
        remaining - cost,
        reset.saturating_add(view.behind),
    )
}

#[test]
fn the_kept_layout_is_the_one_the_limit_and_counting_need() {
    for counting in [Counting::Admitted, Counting::Attempts] {
        for limit in [1, 2, 3, 255, 256, 65_535, MAX_LIMIT] {
            for window in [1, 1_000, SECOND, 1 << 50] {
                let counter = SlidingWindowCounter::new(limit, Duration::from_nanos(window))
                    .unwrap()
                    .with_counting(counting);
                let b = match counting {
                    Counting::Admitted => bits(limit),
                    Counting::Attempts => (bits(limit) + 8).min(24),
                };
                assert_eq!(counter.count_bits(), b);
                assert_eq!(counter.exact_index(), window > u64::MAX >> (64 - 2 * b));
            }
        }
    }
}

/// A counter of `limit` per `window` ns, rounding down if `floor` and counting
/// attempts if `attempts`: the configurations the properties below range over.
fn configured(limit: u64, window: u64, floor: bool, attempts: bool) -> SlidingWindowCounter {
    let rounding = if floor {
        Rounding::Floor
    } else {
        Rounding::Exact
    };
    let counting = if attempts {
        Counting::Attempts
    } else {
        Counting::Admitted
    };
    SlidingWindowCounter::new(limit, Duration::from_nanos(window))
        .unwrap()
        .with_rounding(rounding)
        .with_counting(counting)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// The lean try is the full step without waiting: same answer, same state
    /// word, in both roundings and both countings, with indices stored whole or
    /// wrapping, and with time that sometimes goes backwards.
    #[test]
    fn lean_try_is_the_full_step_without_waiting(
        limit in proptest::prop_oneof![1u64..10, 1_000u64..MAX_LIMIT],
        window in proptest::prop_oneof![1u64..100, 1_000u64..10_000_000_000],
        floor in proptest::prelude::any::<bool>(),
        attempts in proptest::prelude::any::<bool>(),
        start in proptest::prop_oneof![proptest::strategy::Just(0u64), 0u64..u64::MAX / 2],
        steps in proptest::collection::vec((-5_000i64..5_000_000, 0u64..1_000), 1..100),
    ) {
        let counter = configured(limit, window, floor, attempts);
        let mut full = counter.initial_state(start);
        let mut lean = full;
        let mut now = start;
        for (step, fraction) in steps {
            now = now.saturating_add_signed(step);
            let cost = 1 + fraction * limit / 900; // up to a little above the limit
            let decision = counter.reserve::<Decision>(&mut full, now, cost, 0);
            let granted = counter.take(&mut lean, now, cost);
            proptest::prop_assert_eq!(granted, decision.is_allowed(), "at {} cost {}", now, cost);
            proptest::prop_assert_eq!(lean, full, "at {} cost {}", now, cost);
        }
    }

    /// The step, its split check (settle, then describe) and `check_words` match
    /// a plain model of the step: every field of every decision, and the state word, in
    /// both roundings and both countings, with indices stored
    /// whole or wrapping, long windows whose weight needs 128 bits, and time that
    /// sometimes goes backwards.
    #[test]
    fn the_step_matches_the_plain_model(
        limit in proptest::prop_oneof![1u64..10, 1_000u64..MAX_LIMIT],
        window in proptest::prop_oneof![1u64..100, 1_000u64..10_000_000_000, (1u64 << 50)..(1u64 << 62)],
        floor in proptest::prelude::any::<bool>(),
        attempts in proptest::prelude::any::<bool>(),
        start in proptest::prop_oneof![proptest::strategy::Just(0u64), 0u64..u64::MAX / 2],
        steps in proptest::collection::vec((-5_000i64..5_000_000, 0u64..1_000, 0i64..4), 1..100),
    ) {
        let counter = configured(limit, window, floor, attempts);
        let mut plain = counter.initial_state(start);
        let mut new = plain;
        let mut split = plain;
        let mut words = [0];
        counter.write_state(&plain, &mut words[..]);
        let mut now = start;
        for (step, fraction, windows) in steps {
            // Now and then a step of a few windows, whatever their length.
            let step = step.saturating_add((window as i64).saturating_mul(windows) / 2);
            now = now.saturating_add_signed(step);
            let cost = 1 + fraction * limit / 900; // up to a little above the limit
            let expected = plain_reserve(&counter, &mut plain, now, cost);
            proptest::prop_assert_eq!(counter.reserve::<Decision>(&mut new, now, cost, 0), expected, "at {} cost {}", now, cost);
            proptest::prop_assert_eq!(new, plain, "at {} cost {}", now, cost);
            let settled = counter.settle(&mut split, now, cost);
            proptest::prop_assert_eq!(counter.describe(&settled), expected);
            proptest::prop_assert_eq!(split, plain);
            let checked = counter.check_words(&mut words[..], now, cost, |_| true);
            proptest::prop_assert_eq!(checked, Some(expected));
            proptest::prop_assert_eq!(counter.read_state(&words[..]), plain);
        }
    }
}
