//! Unit tests of the leaky bucket: its tick arithmetic, its step against a plain
//! model, and its configuration words at the edges.

use super::ticks::whole_permits;
use super::*;
use crate::algorithms::WordEncoded;

const SECOND: u64 = 1_000_000_000;

#[test]
fn ticks_of_a_third_of_a_second() {
    let bucket = LeakyBucket::meter(1, 3, Duration::from_secs(1)).unwrap();
    assert_eq!(bucket.interval(), (SECOND, 3));
    let ticks = bucket.ticks();
    assert_eq!(ticks.per_permit, 333_333_334);
    // Three permits are exactly one second of ticks.
    assert_eq!(ticks.reading(SECOND), 3 * ticks.per_permit);
    let zero = ticks.read(0);
    assert_eq!(ticks.until(zero, 3 * u128::from(ticks.per_permit)), SECOND);
    // The first nanosecond that reads at least one permit of ticks is ⌈1e9/3⌉,
    // from any reading before it.
    for from in [0, 1, 333_333_332, 333_333_333] {
        let waited = ticks.until(ticks.read(from), u128::from(ticks.per_permit));
        assert_eq!(from + waited, 333_333_334);
    }
    assert_eq!(
        ticks.until(ticks.read(333_333_334), u128::from(ticks.per_permit)),
        0
    );
    assert_eq!(ticks.reading(333_333_333), ticks.per_permit - 1);
}

#[test]
fn the_64_bit_and_128_bit_readings_agree() {
    // 2³² − 1 per 2⁶² ns: the excess is large, so late readings take the 128-bit
    // path; both must agree with the plain formula.
    for count in [3, 7, 1_000_003, u64::from(u32::MAX)] {
        let bucket = LeakyBucket::meter(1, count, Duration::from_nanos(1 << 62)).unwrap();
        let ticks = bucket.ticks();
        for nanos in [0, 1, 12_345_678_901, 1 << 40, 1 << 62, u64::MAX / 3] {
            let scaled = u128::from(nanos) * u128::from(ticks.num);
            let read = ticks.read(nanos);
            assert_eq!(u128::from(read.ticks), scaled / u128::from(ticks.den));
            assert_eq!(u128::from(read.dropped), scaled % u128::from(ticks.den));
        }
    }
}

#[test]
fn whole_nanosecond_intervals_use_nanoseconds() {
    let bucket = LeakyBucket::meter(1, 100, Duration::from_secs(60)).unwrap();
    assert_eq!(bucket.interval(), (600_000_000, 1));
    let ticks = bucket.ticks();
    assert_eq!((ticks.num, ticks.den), (1, 1));
    assert_eq!(ticks.reading(12_345), 12_345);
}

#[test]
fn words_round_trip() {
    for bucket in [
        LeakyBucket::meter(u64::from(u32::MAX), 7, Duration::from_secs(3)).unwrap(),
        LeakyBucket::queue(1, 1, Duration::from_nanos(i64::MAX as u64)).unwrap(),
    ] {
        assert_eq!(
            LeakyBucket::from_config_words(bucket.config_words()),
            bucket
        );
    }
}

#[test]
fn bad_parameters_are_typed_errors() {
    let one = Duration::from_secs(1);
    assert!(matches!(
        LeakyBucket::meter(0, 1, one),
        Err(ConfigError::InvalidCount {
            what: "capacity",
            ..
        })
    ));
    assert!(matches!(
        LeakyBucket::meter(1 << 32, 1, one),
        Err(ConfigError::InvalidCount {
            what: "capacity",
            ..
        })
    ));
    assert!(matches!(
        LeakyBucket::meter(1, 0, one),
        Err(ConfigError::InvalidCount { what: "count", .. })
    ));
    assert!(matches!(
        LeakyBucket::meter(1, 2, Duration::from_nanos(1)),
        Err(ConfigError::InvalidCount { what: "count", .. })
    ));
    assert!(matches!(
        LeakyBucket::meter(1, 1, Duration::ZERO),
        Err(ConfigError::InvalidDuration { .. })
    ));
    assert!(matches!(
        LeakyBucket::queue(1, 1, Duration::MAX),
        Err(ConfigError::InvalidDuration { .. })
    ));
    // 2³² + 1 is odd, so a period of 2⁶² ns does not reduce it below u32::MAX.
    assert!(LeakyBucket::meter(1, (1 << 32) + 1, Duration::from_nanos(1 << 62)).is_err());
}

#[test]
fn time_going_backwards_grants_nothing() {
    let meter = LeakyBucket::meter(2, 1, Duration::from_secs(1)).unwrap();
    let mut state = meter.initial_state(10 * SECOND);
    assert!(meter
        .reserve::<Decision>(&mut state, 10 * SECOND, 2, 0)
        .is_allowed());
    assert!(!meter
        .reserve::<Decision>(&mut state, 5 * SECOND, 1, 0)
        .is_allowed());
}

#[test]
fn saturation_at_the_end_of_time_is_never_not_a_panic() {
    let meter = LeakyBucket::meter(3, 1, Duration::from_secs(1)).unwrap();
    let mut state = meter.initial_state(u64::MAX);
    assert!(meter
        .reserve::<Decision>(&mut state, u64::MAX, 1, 0)
        .is_never());
    assert!(meter
        .reserve::<Decision>(&mut state, u64::MAX, u64::MAX, u64::MAX)
        .is_never());
}

/// A plain model of the step, written plainly in 128-bit arithmetic throughout,
/// without the 64-bit forms the step uses where they fit: the step must match
/// it field by field.
fn plain_reserve(
    bucket: &LeakyBucket,
    state: &mut LeakyState,
    now: Nanos,
    cost: u64,
    max_wait: Nanos,
) -> (Decision, Receipt) {
    let ticks = bucket.ticks();
    let per_permit = u128::from(ticks.per_permit);
    let limit = u64::from(bucket.capacity);
    let reading = ticks.read(now);
    let now_ticks = reading.ticks;
    let start = state.tat.max(now_ticks);
    let until = |tick: u128| ticks.until(reading, tick);
    let backlog = u128::from(start - now_ticks);
    let capacity = u128::from(bucket.capacity) * per_permit;
    let free = || {
        let ticks_free = capacity.saturating_sub(backlog);
        u64::try_from(ticks_free / per_permit).unwrap_or(u64::MAX)
    };
    let charge = u128::from(cost) * per_permit;
    let end = u128::from(start) + charge;
    if charge > capacity || end > u128::from(u64::MAX) {
        let never = Decision::never(limit, free(), until(start.into()));
        return (never, Receipt::NONE);
    }
    let level = backlog + charge;
    let wait = match bucket.mode {
        LeakyMode::Meter => 0,
        LeakyMode::Queue => until(start.into()),
    };
    if level > capacity || wait > max_wait {
        let drained = until(end - capacity.min(end));
        let retry = if wait > max_wait {
            drained.max(wait)
        } else {
            drained
        };
        let denied = Decision::denied(limit, free(), retry, until(start.into()));
        return (denied, Receipt::NONE);
    }
    state.tat = end as u64;
    let remaining = if backlog == 0 {
        limit - cost
    } else {
        u64::try_from((capacity - level) / per_permit).unwrap_or(u64::MAX)
    };
    (
        Decision::allowed_after(wait, limit, remaining, until(end)),
        Receipt::new(end as i64, charge as u64),
    )
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// The step matches a plain model of it: every field of every decision and
    /// receipt, and the state, for meter and queue at any wait, at
    /// whole-nanosecond and fractional intervals, with large capacities, costs
    /// above the capacity, time that sometimes goes backwards, and near the end
    /// of time.
    #[test]
    fn the_step_matches_the_plain_model(
        capacity in proptest::prop_oneof![1u64..6, proptest::strategy::Just(u64::from(u32::MAX))],
        count in 1u64..10,
        period in proptest::prop_oneof![1u64..50, 1_000u64..1_000_000_007, (1u64 << 30)..(1u64 << 62)],
        queue in proptest::prelude::any::<bool>(),
        start in proptest::prop_oneof![proptest::strategy::Just(0u64), 0u64..u64::MAX],
        steps in proptest::collection::vec(
            (
                -50i64..2_000_000_000,
                proptest::prop_oneof![1u64..8, proptest::strategy::Just(u64::MAX)],
                proptest::prop_oneof![proptest::strategy::Just(0u64), proptest::strategy::Just(u64::MAX), 0u64..3_000_000_000],
            ),
            1..80,
        ),
    ) {
        let period = Duration::from_nanos(period.max(count));
        let bucket = if queue {
            LeakyBucket::queue(capacity, count, period)
        } else {
            LeakyBucket::meter(capacity, count, period)
        };
        // A full bucket must drain within i64::MAX ns: larger ones are refused.
        proptest::prop_assume!(bucket.is_ok());
        let bucket = bucket.unwrap();
        let mut plain = bucket.initial_state(start);
        let mut new = plain;
        let mut now = start;
        for (step, cost, max_wait) in steps {
            now = now.saturating_add_signed(step);
            let expected = plain_reserve(&bucket, &mut plain, now, cost, max_wait);
            proptest::prop_assert_eq!(bucket.reserve::<(Decision, Receipt)>(&mut new, now, cost, max_wait), expected, "at {} cost {}", now, cost);
            proptest::prop_assert_eq!(new, plain);
        }
    }

    /// The wait for `delta` more ticks, in 64 bits through `excess`, is the 128-bit
    /// formula's `⌈(delta · den − dropped) / num⌉`.
    #[test]
    fn the_wait_in_64_bits_is_the_128_bit_quotient(
        count in 2u64..5_000,
        period in 2u64..4_000_000_000_000,
        nanos in proptest::prelude::any::<u64>(),
        delta in proptest::prop_oneof![1u64..10_000, 1u64..u64::MAX],
    ) {
        let Ok(bucket) = LeakyBucket::meter(1, count, Duration::from_nanos(period)) else {
            return Ok(());
        };
        let ticks = bucket.ticks();
        let now = ticks.read(nanos);
        let need = u128::from(delta) * u128::from(ticks.den) - u128::from(now.dropped);
        let expected = u64::try_from(need.div_ceil(u128::from(ticks.num))).unwrap_or(u64::MAX);
        proptest::prop_assert_eq!(ticks.nanos_for(now, u128::from(delta)), expected);
    }

    /// Counting whole permits skips the division below one permit, and agrees
    /// with it everywhere.
    #[test]
    fn whole_permits_is_the_quotient(
        ticks in proptest::prop_oneof![0u64..1_000, proptest::prelude::any::<u64>()],
        per_permit in proptest::prop_oneof![1u64..1_000, 1u64..u64::MAX],
    ) {
        proptest::prop_assert_eq!(whole_permits(ticks, per_permit), ticks / per_permit);
    }
}

proptest::proptest! {
    /// The first reading at or past a target, less `now`, is the wait measured
    /// from `now`'s reading, for any target and clock reading: at whole-nanosecond
    /// and fractional intervals, and where `target × excess` overflows.
    #[test]
    fn the_first_reading_less_now_is_the_wait_from_the_reading(
        count in 1u64..1_000,
        period in proptest::prop_oneof![1u64..50, 1_000u64..1_000_000_007, (1u64 << 30)..(1u64 << 62)],
        now in proptest::prop_oneof![0u64..1 << 40, 0u64..u64::MAX],
        target in proptest::prop_oneof![0u64..1 << 40, 0u64..u64::MAX],
    ) {
        let bucket = LeakyBucket::meter(1, count.min(period), Duration::from_nanos(period)).unwrap();
        let ticks = bucket.ticks();
        let from_reading = ticks.until(ticks.read(now), u128::from(target));
        proptest::prop_assert_eq!(ticks.first_reading(target).saturating_sub(now), from_reading);
    }
}
