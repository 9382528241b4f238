//! Unit tests of the bursty bucket: its step against a plain oracle of the
//! one-instant model, on random traces.

use super::*;
use crate::algorithms::words::Settle;
use crate::algorithms::WordEncoded;
use proptest::prelude::*;

/// A plain model of the step, written plainly on the one-instant model (resync to
/// `now − burst`, wait for `T`, then charge), the burst and the remaining
/// permits computed from the float configuration on every call instead of the
/// derived words: the step must match it field by field.
fn plain_reserve(
    bursty: &SmoothBursty,
    state: &mut BurstyState,
    now: Nanos,
    cost: u64,
    max_wait: Nanos,
) -> (Decision, Receipt) {
    let now = signed(now);
    let limit = smooth_limit(bursty.max_permits());
    let burst = if bursty.is_unlimited() {
        0
    } else {
        (bursty.max_burst_seconds * 1e9) as i64
    };
    let tat = state.tat.max(now.saturating_sub(burst));
    if tat == i64::MAX {
        return (Decision::never(limit, 0, u64::MAX), Receipt::NONE);
    }
    let wait = until(now, tat);
    if wait > max_wait {
        let reset = until(now, tat.saturating_add(burst));
        return (Decision::denied(limit, 0, wait, reset), Receipt::NONE);
    }
    let charge = bursty.cost_nanos(cost);
    let next = tat.saturating_add(charge);
    state.tat = next;
    let remaining = if bursty.is_unlimited() {
        u64::MAX
    } else {
        let stored = until(next, now) as f64 / bursty.interval_nanos();
        stored.min(bursty.max_permits()) as u64
    };
    let reset = until(now, next.saturating_add(burst));
    (
        Decision::allowed_after(wait, limit, remaining, reset),
        Receipt::new(next, charge as u64),
    )
}

fn rate() -> impl Strategy<Value = f64> {
    prop_oneof![
        1e-3..1e3f64,
        Just(1e9),
        Just(1e12),
        Just(f64::INFINITY),
        Just(1e-300),
        Just(f64::MIN_POSITIVE),
        Just(f64::MAX),
    ]
}

fn burst() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (0u64..5_000_000_000).prop_map(Duration::from_nanos),
        Just(Duration::from_secs(1)),
        Just(Duration::from_secs(200 * 365 * 86_400)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// One permit from a full bucket leaves what the division finds, at any
    /// time, at rates and bursts from the tiny to the unlimited.
    #[test]
    fn one_permit_from_a_full_bucket_leaves_what_the_division_finds(
        rate in rate(),
        burst in burst(),
        now in prop_oneof![Just(0u64), Just(u64::MAX), 0u64..u64::MAX],
        idle in 0u64..u64::MAX,
    ) {
        let bursty = SmoothBursty::new(rate).unwrap().with_max_burst(burst).unwrap();
        let mut state = BurstyState { tat: signed(now).saturating_sub(bursty.burst_nanos).saturating_sub_unsigned(idle) };
        let mut probe = state;
        let expected = plain_reserve(&bursty, &mut probe, now, 1, 0).0;
        prop_assert_eq!(bursty.reserve::<Decision>(&mut state, now, 1, 0), expected);
    }

    /// The step at any wait, and the check (split in settle and describe, and on
    /// words) match a plain model of the step: every field of every decision and receipt,
    /// and the state, on random traces with rate changes
    /// (which keep the whole burst in step with the rate) and time that
    /// sometimes goes backwards.
    #[test]
    fn the_step_matches_the_plain_model(
        rate in rate(),
        burst in burst(),
        start in prop_oneof![Just(0u64), 0u64..u64::MAX],
        steps in proptest::collection::vec(
            (
                -50_000i64..3_000_000_000,
                1u64..2_000,
                prop_oneof![Just(0u64), Just(u64::MAX), 0u64..2_000_000_000],
                proptest::option::weighted(0.05, rate()),
            ),
            1..60,
        ),
    ) {
        let mut bursty = SmoothBursty::new(rate).unwrap().with_max_burst(burst).unwrap();
        let mut plain = bursty.initial_state(start);
        let mut new = plain;
        let mut now = start;
        for (step, cost, max_wait, new_rate) in steps {
            now = now.saturating_add_signed(step);
            if let Some(new_rate) = new_rate {
                bursty.set_rate(&mut new, now, new_rate).unwrap();
                plain = new;
                prop_assert_eq!(bursty.whole_burst, bursty.max_permits() as u64);
                prop_assert_eq!(SmoothBursty::from_config_words(bursty.config_words()), bursty);
            }
            // The check: zero wait, split, and on words.
            let mut probe = plain;
            let (expected, _) = plain_reserve(&bursty, &mut probe, now, cost, 0);
            let mut split = new;
            let settled = bursty.settle(&mut split, now, cost);
            prop_assert_eq!(bursty.describe(&settled), expected, "at {} cost {}", now, cost);
            prop_assert_eq!(split, probe);
            let mut words = [0];
            bursty.write_state(&new, &mut words[..]);
            let checked = bursty.check_words(&mut words[..], now, cost, |_| true);
            prop_assert_eq!(checked, Some(expected));
            prop_assert_eq!(bursty.read_state(&words[..]), probe);
            // The step at any wait.
            let expected = plain_reserve(&bursty, &mut plain, now, cost, max_wait);
            prop_assert_eq!(bursty.reserve::<(Decision, Receipt)>(&mut new, now, cost, max_wait), expected, "at {} cost {}", now, cost);
            prop_assert_eq!(new, plain);
        }
    }
}
