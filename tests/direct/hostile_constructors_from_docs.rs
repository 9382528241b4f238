//! Every algorithm's constructors and builders, fed hostile parameters as their
//! `# Errors` sections and module `# Edges` describe them: each input is either
//! accepted, and then serves calls without panicking, or refused with the typed
//! `ConfigError` the docs name, whose `what` names the parameter (README: "a
//! constructor returns a `ConfigError` naming the parameter").

use sluicegate::algorithms::sliding_log::MAX_ENTRIES;
use sluicegate::algorithms::sliding_window_buckets::{OldestBucket, MAX_BUCKETS};
use sluicegate::algorithms::{
    Algorithm, Counting, FixedWindow, LeakyBucket, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::ManualClock;
use sluicegate::{CellAlgorithm, ConfigError, Decision, RateLimiter};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

const NS: Duration = Duration::from_nanos(1);
const SECOND: Duration = Duration::from_secs(1);
/// Well inside "about 292 years" (`i64::MAX` ns is 292.27 years).
const YEARS_290: Duration = Duration::from_secs(290 * 365 * 86_400);
/// Well past it.
const YEARS_300: Duration = Duration::from_secs(300 * 365 * 86_400);

/// Runs `build`, failing the test with `input` named if it panics.
fn no_panic<T>(input: &str, build: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(build)) {
        Ok(value) => value,
        Err(_) => panic!("{input}: panicked instead of answering"),
    }
}

/// The parameter a `ConfigError` names, read the way its message shows it.
fn named(err: &ConfigError) -> String {
    match err {
        ConfigError::InvalidDuration { what, .. } | ConfigError::InvalidCount { what, .. } => {
            what.replace(['_', '-'], " ").to_lowercase()
        }
        other => panic!("expected a duration or count error, got {other:?}"),
    }
}

/// Asserts `result` is an `InvalidCount` naming one of `params` with `value`.
fn invalid_count<T>(input: &str, result: Result<T, ConfigError>, params: &[&str], value: u64) {
    let err = result.err().unwrap_or_else(|| panic!("{input}: accepted"));
    let ConfigError::InvalidCount { value: got, .. } = &err else {
        panic!("{input}: expected InvalidCount, got {err:?}");
    };
    assert_eq!(*got, value, "{input}: {err}");
    let what = named(&err);
    assert!(
        params.iter().any(|p| what.contains(&p.replace('_', " "))),
        "{input}: names {what:?}, not one of {params:?}: {err}"
    );
    assert!(
        err.to_string().contains(&value.to_string()),
        "{input}: {err}"
    );
}

/// Asserts `result` is an `InvalidDuration` naming `param`, carrying `value`.
fn invalid_duration<T>(input: &str, result: Result<T, ConfigError>, param: &str, value: Duration) {
    let err = result.err().unwrap_or_else(|| panic!("{input}: accepted"));
    let ConfigError::InvalidDuration { value: got, .. } = &err else {
        panic!("{input}: expected InvalidDuration, got {err:?}");
    };
    assert_eq!(*got, value, "{input}: {err}");
    let what = named(&err);
    assert!(
        what.contains(&param.replace('_', " ")),
        "{input}: names {what:?}, not {param:?}: {err}"
    );
    assert!(
        err.to_string().contains(&format!("{value:?}")),
        "{input}: {err}"
    );
}

/// An accepted configuration serves a few calls of every size on a manual clock,
/// at its zero and at its last instant, without panicking.
fn serves<A: CellAlgorithm + Clone>(input: &str, algorithm: A) {
    no_panic(input, || {
        let limiter = RateLimiter::with_clock(algorithm, ManualClock::new());
        for cost in [1, 2, u64::MAX] {
            let _ = limiter.check(cost).unwrap();
            let _ = limiter.peek(cost).unwrap();
            let _ = limiter.try_acquire_n(cost).unwrap();
        }
        limiter.clock().advance(Duration::MAX);
        for cost in [1, u64::MAX] {
            let _ = limiter.check(cost).unwrap();
        }
    });
}

#[test]
fn bursty_burst_lengths_at_zero_one_nanosecond_290_years_and_beyond() {
    for rate in [f64::MIN_POSITIVE, 1.0, 1e9, f64::MAX, f64::INFINITY] {
        for burst in [Duration::ZERO, NS, SECOND, YEARS_290] {
            let input = format!("SmoothBursty::new({rate}).with_max_burst({burst:?})");
            let built = no_panic(&input, || {
                SmoothBursty::new(rate).unwrap().with_max_burst(burst)
            });
            let bursty = built.unwrap_or_else(|e| panic!("{input}: {e}"));
            // max_permits = max_burst seconds × rate.
            if rate.is_finite() && rate <= 1e9 && burst <= SECOND {
                let expected = burst.as_secs_f64() * rate;
                let got = bursty.max_permits();
                assert!(
                    (got - expected).abs() <= expected * 1e-9 + 1e-300,
                    "{input}: {got}"
                );
            }
            serves(&input, bursty);
        }
        for burst in [YEARS_300, Duration::MAX] {
            let input = format!("SmoothBursty::new({rate}).with_max_burst({burst:?})");
            let result = no_panic(&input, || {
                SmoothBursty::new(rate).unwrap().with_max_burst(burst)
            });
            invalid_duration(&input, result, "burst", burst);
        }
    }
}

#[test]
fn warm_up_lengths_and_cold_factors_at_their_edges() {
    for warmup in [Duration::ZERO, NS, SECOND, YEARS_290] {
        for rate in [f64::MIN_POSITIVE, 1.0, f64::MAX, f64::INFINITY] {
            let input = format!("SmoothWarmingUp::new({rate}, {warmup:?})");
            let w = no_panic(&input, || SmoothWarmingUp::new(rate, warmup));
            let w = w.unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(w.warmup(), warmup, "{input}");
            if warmup.is_zero() {
                assert_eq!(
                    w.max_permits(),
                    0.0,
                    "{input}: a zero warm-up stores nothing"
                );
            }
            serves(&input, w);
        }
    }
    for warmup in [YEARS_300, Duration::MAX] {
        let input = format!("SmoothWarmingUp::new(2.0, {warmup:?})");
        let result = no_panic(&input, || SmoothWarmingUp::new(2.0, warmup));
        invalid_duration(&input, result, "warm", warmup);
    }
    // "below 1, NaN or infinite" is refused; everything else from 1 up is a factor.
    let base = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    for bad in [
        0.0,
        -0.0,
        -1.0,
        0.999_999_999,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        let input = format!("with_cold_factor({bad})");
        match no_panic(&input, || base.with_cold_factor(bad)) {
            Err(ConfigError::InvalidColdFactor { cold_factor }) => {
                assert_eq!(cold_factor.to_bits(), bad.to_bits(), "{input}");
            }
            other => panic!("{input}: {:?}", other.map(|w| w.cold_factor())),
        }
    }
    for good in [1.0, 1.0 + f64::EPSILON, 1e300, f64::MAX] {
        let input = format!("with_cold_factor({good})");
        let w = no_panic(&input, || base.with_cold_factor(good));
        let w = w.unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(w.cold_factor(), good, "{input}");
        serves(&input, w);
    }
}

#[test]
fn leaky_bucket_counts_periods_and_capacities_from_its_errors_section() {
    type Build = fn(u64, u64, Duration) -> Result<LeakyBucket, ConfigError>;
    let both: [(&str, Build); 2] = [("meter", LeakyBucket::meter), ("queue", LeakyBucket::queue)];
    let u32_max = u64::from(u32::MAX);
    for (mode, build) in both {
        let input = |c: u64, n: u64, p: Duration| format!("LeakyBucket::{mode}({c}, {n}, {p:?})");
        let call = |c, n, p| no_panic(&input(c, n, p), || build(c, n, p));
        // Zero capacity or count; a capacity above u32::MAX.
        invalid_count(&input(0, 1, SECOND), call(0, 1, SECOND), &["capacity"], 0);
        invalid_count(&input(1, 0, SECOND), call(1, 0, SECOND), &["count"], 0);
        let (c, n) = (u32_max + 1, 1);
        let p = Duration::from_secs(1);
        invalid_count(&input(c, n, p), call(c, n, p), &["capacity"], c);
        invalid_count(
            &input(u64::MAX, 1, p),
            call(u64::MAX, 1, p),
            &["capacity"],
            u64::MAX,
        );
        // More than one permit per nanosecond.
        let input2 = input(1, 2, NS);
        let err = call(1, 2, NS)
            .err()
            .unwrap_or_else(|| panic!("{input2}: accepted"));
        assert!(
            matches!(err, ConfigError::InvalidCount { .. }),
            "{input2}: {err:?}"
        );
        let input3 = input(1, u64::MAX, SECOND);
        let err = call(1, u64::MAX, SECOND).err();
        let err = err.unwrap_or_else(|| panic!("{input3}: accepted"));
        assert!(
            matches!(err, ConfigError::InvalidCount { .. }),
            "{input3}: {err:?}"
        );
        // Exactly one permit per nanosecond, and the largest capacity: fine.
        let edge =
            call(u32_max, 1, NS).unwrap_or_else(|e| panic!("{}: {e}", input(u32_max, 1, NS)));
        assert_eq!(edge.capacity(), u32_max);
        serves(&input(u32_max, 1, NS), edge);
        // A count above u32::MAX that reduces below it is the reduced fraction.
        let (n, p) = (1u64 << 33, Duration::from_nanos(1 << 34));
        let halves = call(1, n, p).unwrap_or_else(|e| panic!("{}: {e}", input(1, n, p)));
        assert_eq!(halves.interval(), (2, 1), "{}", input(1, n, p));
        // One that stays above it once reduced: 2^32 + 1 = 641 × 6700417, coprime to 10^10.
        let (n, p) = (u32_max + 2, Duration::from_secs(10));
        invalid_count(&input(1, n, p), call(1, n, p), &["count"], u32_max + 2);
        // Zero and too-long periods.
        invalid_duration(
            &input(1, 1, Duration::ZERO),
            call(1, 1, Duration::ZERO),
            "period",
            Duration::ZERO,
        );
        for p in [YEARS_300, Duration::MAX] {
            invalid_duration(&input(1, 1, p), call(1, 1, p), "period", p);
        }
        // A full bucket that would take more than ~292 years to drain.
        let (c, p) = (10, Duration::from_secs(100 * 365 * 86_400));
        invalid_count(&input(c, 1, p), call(c, 1, p), &["capacity"], c);
        let ok = call(2, 1, Duration::from_secs(100 * 365 * 86_400));
        serves(
            &input(2, 1, YEARS_290),
            ok.unwrap_or_else(|e| panic!("{mode} 2 per century: {e}")),
        );
    }
}

#[test]
fn fixed_window_limits_against_the_window_length() {
    let input = |l: u64, w: Duration| format!("FixedWindow::new({l}, {w:?})");
    let call = |l, w| no_panic(&input(l, w), || FixedWindow::new(l, w));
    invalid_count(&input(0, SECOND), call(0, SECOND), &["limit"], 0);
    invalid_duration(
        &input(1, Duration::ZERO),
        call(1, Duration::ZERO),
        "window",
        Duration::ZERO,
    );
    for w in [YEARS_300, Duration::MAX] {
        invalid_duration(&input(1, w), call(1, w), "window", w);
    }
    // "3 per minute and 2^28 − 1 per second are fine".
    for (l, w) in [
        (3, Duration::from_secs(60)),
        ((1 << 28) - 1, SECOND),
        (1, YEARS_290),
    ] {
        let window = call(l, w).unwrap_or_else(|e| panic!("{}: {e}", input(l, w)));
        assert_eq!((window.limit(), window.window()), (l, w));
        serves(&input(l, w), window);
    }
    // Far above half the window's length in nanoseconds.
    for (l, w) in [
        (1 << 31, SECOND),
        (u64::MAX, SECOND),
        (u64::MAX, YEARS_290),
        (3, NS),
    ] {
        invalid_count(&input(l, w), call(l, w), &["limit"], l);
    }
}

#[test]
fn sliding_window_counter_limits_and_windows() {
    let input = |l: u64, w: Duration| format!("SlidingWindowCounter::new({l}, {w:?})");
    let call = |l, w| no_panic(&input(l, w), || SlidingWindowCounter::new(l, w));
    invalid_count(&input(0, SECOND), call(0, SECOND), &["limit"], 0);
    for l in [1 << 24, u64::MAX] {
        invalid_count(&input(l, SECOND), call(l, SECOND), &["limit"], l);
    }
    invalid_duration(
        &input(1, Duration::ZERO),
        call(1, Duration::ZERO),
        "window",
        Duration::ZERO,
    );
    for w in [YEARS_300, Duration::MAX] {
        invalid_duration(&input(1, w), call(1, w), "window", w);
    }
    for (l, w) in [((1 << 24) - 1, NS), (1, NS), ((1 << 24) - 1, YEARS_290)] {
        let counter = call(l, w).unwrap_or_else(|e| panic!("{}: {e}", input(l, w)));
        serves(&input(l, w), counter);
        serves(
            &format!("{} attempts", input(l, w)),
            counter.with_counting(Counting::Attempts),
        );
    }
}

#[test]
fn bucketed_windows_with_odd_precisions_and_too_many_buckets() {
    for oldest in [OldestBucket::Drop, OldestBucket::Weighted] {
        let input = |l: u64, w: Duration, p: Duration| {
            format!("SlidingWindowBuckets::new({l}, {w:?}, {p:?}, {oldest:?})")
        };
        let call = |l, w, p| {
            no_panic(&input(l, w, p), || {
                SlidingWindowBuckets::new(l, w, p, oldest)
            })
        };
        invalid_count(
            &input(0, SECOND, SECOND),
            call(0, SECOND, SECOND),
            &["limit"],
            0,
        );
        let zero = Duration::ZERO;
        invalid_duration(&input(1, zero, NS), call(1, zero, NS), "window", zero);
        invalid_duration(
            &input(1, SECOND, zero),
            call(1, SECOND, zero),
            "precision",
            zero,
        );
        invalid_duration(
            &input(1, NS, SECOND),
            call(1, NS, SECOND),
            "precision",
            SECOND,
        );
        for w in [YEARS_300, Duration::MAX] {
            let r = call(1, w, w);
            let err = r
                .err()
                .unwrap_or_else(|| panic!("{}: accepted", input(1, w, w)));
            assert!(
                matches!(err, ConfigError::InvalidDuration { .. }),
                "{err:?}"
            );
        }
        // More buckets than MAX_BUCKETS, up to one bucket per nanosecond of a window.
        let many = MAX_BUCKETS + 1;
        let w = Duration::from_nanos(many);
        invalid_count(&input(1, w, NS), call(1, w, NS), &["bucket"], many);
        let err = call(1, YEARS_290, NS).err();
        assert!(
            matches!(err, Some(ConfigError::InvalidCount { .. })),
            "{err:?}"
        );
        // A window not divisible by its precision: ⌈window / precision⌉ buckets.
        let w = Duration::from_nanos(MAX_BUCKETS);
        let exact = call(5, w, NS).unwrap_or_else(|e| panic!("{}: {e}", input(5, w, NS)));
        assert_eq!(exact.buckets(), MAX_BUCKETS);
        serves(&input(5, w, NS), exact);
        let (w, p) = (Duration::from_secs(10), Duration::from_secs(3));
        let odd = call(7, w, p).unwrap_or_else(|e| panic!("{}: {e}", input(7, w, p)));
        assert_eq!(odd.buckets(), 4, "{}", input(7, w, p));
        serves(&input(7, w, p), odd);
        let (w, p) = (
            Duration::from_nanos(1_000_000_007),
            Duration::from_nanos(1_000_000_006),
        );
        let odd = call(1, w, p).unwrap_or_else(|e| panic!("{}: {e}", input(1, w, p)));
        assert_eq!(odd.buckets(), 2);
        serves(&input(1, w, p), odd);
        // The docs bound the limit only below: a limit of u64::MAX is a window.
        let huge = call(u64::MAX, SECOND, SECOND);
        let huge = huge.unwrap_or_else(|e| panic!("{}: {e}", input(u64::MAX, SECOND, SECOND)));
        assert_eq!(huge.limit(), u64::MAX);
        serves(&input(u64::MAX, SECOND, SECOND), huge);
    }
}

#[test]
fn sliding_log_limits_windows_and_spacings() {
    let input = |l: u64, w: Duration| format!("SlidingLog::new({l}, {w:?})");
    let call = |l, w| no_panic(&input(l, w), || SlidingLog::new(l, w));
    invalid_count(&input(0, SECOND), call(0, SECOND), &["limit"], 0);
    for l in [MAX_ENTRIES + 1, u64::MAX] {
        invalid_count(&input(l, SECOND), call(l, SECOND), &["limit"], l);
    }
    invalid_duration(
        &input(1, Duration::ZERO),
        call(1, Duration::ZERO),
        "window",
        Duration::ZERO,
    );
    for w in [YEARS_300, Duration::MAX] {
        invalid_duration(&input(1, w), call(1, w), "window", w);
    }
    for w in [NS, YEARS_290] {
        let log = call(3, w).unwrap_or_else(|e| panic!("{}: {e}", input(3, w)));
        for spacing in [Duration::ZERO, NS, YEARS_290, YEARS_300, Duration::MAX] {
            let spaced = log.with_min_spacing(spacing);
            // Read back in the crate's nanoseconds: Duration::MAX saturates.
            let kept = spacing.min(Duration::from_nanos(u64::MAX));
            assert_eq!(spaced.min_spacing(), kept);
            serves(&format!("{} spaced {spacing:?}", input(3, w)), spaced);
            serves(
                &format!("{} recording", input(3, w)),
                spaced.with_rejected_recorded(),
            );
        }
    }
}

#[test]
fn a_spacing_that_reaches_the_clocks_last_reading_allows_one_call_ever() {
    // with_min_spacing: "A spacing whose end would reach the clock's last reading
    // (u64::MAX ns ...) never ends: every call after the one it follows is refused
    // for good (Verdict::Never, so acquires fail at once)". A spacing of u64::MAX ns
    // reaches it from any instant, and so does one of 2^63 ns from 2^63.
    for (spacing, first) in [
        (Duration::from_nanos(u64::MAX), 0),
        (Duration::from_nanos(u64::MAX), 1),
        (Duration::from_nanos(1 << 63), 1 << 63),
        (YEARS_300, u64::MAX - YEARS_300.as_nanos() as u64),
    ] {
        let log = SlidingLog::new(100, SECOND)
            .unwrap()
            .with_min_spacing(spacing);
        let input = format!("spacing {spacing:?} from {first} ns");
        let clock = ManualClock::new();
        clock.advance_nanos(first);
        let limiter = RateLimiter::with_clock(log, clock.clone());
        assert!(limiter.try_acquire(), "{input}: the first call");
        for later in [0, 1, 1_000_000_000] {
            clock.advance_nanos(later);
            let d = limiter.check(1).unwrap();
            assert!(d.is_never(), "{input}, {later} ns on: {d:?}");
        }
        let err = no_panic(&input, || limiter.acquire()).unwrap_err();
        assert_eq!(err, sluicegate::Error::Never { cost: 1 }, "{input}");
    }
}

#[test]
fn a_limit_of_u64_max_buckets_takes_a_cost_of_u64_max_once() {
    // "A call of cost c is granted iff counted + c ≤ limit"; "Counters saturate".
    let window = SlidingWindowBuckets::dropping(u64::MAX, SECOND, Duration::from_millis(100));
    let window = window.unwrap();
    let mut state = window.initial_state(0);
    let first: Decision = no_panic("cost u64::MAX", || {
        window.reserve(&mut state, 0, u64::MAX, 0)
    });
    assert!(first.is_allowed(), "{first:?}");
    assert_eq!(first.remaining(), 0);
    let second: Decision = no_panic("one more", || window.reserve(&mut state, 1, 1, 0));
    assert!(!second.is_allowed(), "{second:?}");
    assert_eq!(
        second.retry_after(),
        SECOND - NS,
        "the first bucket leaves at 1 s"
    );
    let later: Decision = no_panic("a second on", || {
        window.reserve(&mut state, 1_000_000_000, 1, 0)
    });
    assert!(later.is_allowed(), "{later:?}");
}
