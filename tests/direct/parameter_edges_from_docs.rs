//! The limiters' and algorithms' parameters at their documented edges, read from
//! the public docs alone: every constructor refuses out-of-range parameters with a
//! typed error naming them and what they must be, and parameters at the documented
//! bounds are accepted and work.

use sluicegate::algorithms::sliding_log::MAX_ENTRIES;
use sluicegate::algorithms::sliding_window_buckets::{OldestBucket, MAX_BUCKETS};
use sluicegate::algorithms::{
    Counting, FixedWindow, LeakyBucket, SlidingLog, SlidingWindowBuckets, SlidingWindowCounter,
    SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::ManualClock;
use sluicegate::stores::MemoryStore;
use sluicegate::{ConfigError, KeyedRateLimiter, RateLimiter};
use std::time::Duration;

/// Past the about 292 years (`i64::MAX` ns) that every period may span.
const CENTURIES_3: Duration = Duration::from_secs(300 * 365 * 86_400);

/// What a constructor is expected to refuse with.
#[derive(Clone, Copy, Debug)]
enum Refusal {
    /// `InvalidCount`, with the rejected value when the docs make it plain.
    Count(Option<u64>),
    /// `InvalidDuration`, with the parameter's name and value when the docs make them
    /// plain.
    Span(Option<&'static str>, Option<Duration>),
    /// `InvalidCount` or `InvalidDuration`: the docs say "a typed error" only.
    CountOrDuration,
    ColdFactor,
    Rate,
}

/// Checks that an error's message `text` names the parameter `what` and the
/// `requirement` it broke, both given.
fn assert_names(label: &str, text: &str, what: &str, requirement: &str) {
    assert!(
        !what.is_empty() && !requirement.is_empty(),
        "{label}: {text:?}"
    );
    assert!(
        text.contains(what),
        "{label}: {text:?} does not name {what:?}"
    );
    assert!(
        text.contains(requirement),
        "{label}: {text:?} does not say {requirement:?}"
    );
}

/// Checks that `got` is the expected typed error and that its message names the
/// parameter and what it must be (`ConfigError`'s docs: "each variant names the
/// parameter and what it must be").
fn assert_refused<T>(label: &str, got: Result<T, ConfigError>, expected: Refusal) {
    let Err(err) = got else {
        panic!("{label}: accepted, expected {expected:?}");
    };
    let text = err.to_string();
    match (&err, &expected) {
        (
            ConfigError::InvalidCount {
                what,
                value,
                requirement,
            },
            Refusal::Count(_) | Refusal::CountOrDuration,
        ) => {
            if let Refusal::Count(Some(want)) = expected {
                assert_eq!(*value, want, "{label}: {err:?}");
            }
            assert_names(label, &text, what, requirement);
        }
        (
            ConfigError::InvalidDuration {
                what,
                value,
                requirement,
            },
            Refusal::Span(..) | Refusal::CountOrDuration,
        ) => {
            if let Refusal::Span(want_what, want_value) = expected {
                if let Some(want) = want_what {
                    assert_eq!(*what, want, "{label}: {err:?}");
                }
                if let Some(want) = want_value {
                    assert_eq!(*value, want, "{label}: {err:?}");
                }
            }
            assert_names(label, &text, what, requirement);
        }
        (ConfigError::InvalidColdFactor { .. }, Refusal::ColdFactor) => {
            assert!(text.contains("cold"), "{label}: {text:?}");
        }
        (ConfigError::InvalidRate { .. }, Refusal::Rate) => {
            assert!(text.contains("rate"), "{label}: {text:?}");
        }
        _ => panic!("{label}: {err:?}, expected {expected:?}"),
    }
}

#[test]
fn every_constructor_refuses_out_of_range_parameters_with_an_error_naming_them() {
    use Refusal::*;
    let s = Duration::from_secs(1);
    let minute = Duration::from_secs(60);
    // FixedWindow: a zero limit or window, a window past 292 years, a limit that
    // cannot pack beside the window index (about half the window in ns).
    assert_refused("fixed limit 0", FixedWindow::new(0, minute), Count(Some(0)));
    assert_refused(
        "fixed window 0",
        FixedWindow::new(1, Duration::ZERO),
        Span(None, Some(Duration::ZERO)),
    );
    assert_refused(
        "fixed window MAX",
        FixedWindow::new(1, Duration::MAX),
        Span(None, Some(Duration::MAX)),
    );
    assert_refused(
        "fixed window 300 y",
        FixedWindow::new(1, CENTURIES_3),
        Span(None, None),
    );
    assert_refused(
        "fixed limit 2^30 per s",
        FixedWindow::new(1 << 30, s),
        Count(Some(1 << 30)),
    );
    assert_refused(
        "fixed limit u64::MAX",
        FixedWindow::new(u64::MAX, s),
        Count(Some(u64::MAX)),
    );
    // SlidingWindowCounter: 0, 2^24, a zero or too long window.
    assert_refused(
        "counter limit 0",
        SlidingWindowCounter::new(0, minute),
        Count(Some(0)),
    );
    assert_refused(
        "counter limit 2^24",
        SlidingWindowCounter::new(1 << 24, s),
        Count(Some(1 << 24)),
    );
    assert_refused(
        "counter window 0",
        SlidingWindowCounter::new(1, Duration::ZERO),
        Span(None, Some(Duration::ZERO)),
    );
    assert_refused(
        "counter window MAX",
        SlidingWindowCounter::new(1, Duration::MAX),
        Span(None, Some(Duration::MAX)),
    );
    // SlidingWindowBuckets: limit 0, precision 0, precision > window, too many
    // buckets, a period past 292 years.
    assert_refused(
        "buckets limit 0",
        SlidingWindowBuckets::dropping(0, minute, s),
        Count(Some(0)),
    );
    assert_refused(
        "buckets window 0",
        SlidingWindowBuckets::weighted(1, Duration::ZERO, Duration::from_nanos(1)),
        CountOrDuration,
    );
    assert_refused(
        "buckets precision 0",
        SlidingWindowBuckets::dropping(1, minute, Duration::ZERO),
        Span(Some("precision"), Some(Duration::ZERO)),
    );
    assert_refused(
        "buckets precision > window",
        SlidingWindowBuckets::new(1, s, 2 * s, OldestBucket::Weighted),
        Span(Some("precision"), Some(2 * s)),
    );
    assert_refused(
        "buckets 4097",
        SlidingWindowBuckets::dropping(
            1,
            Duration::from_millis(MAX_BUCKETS + 1),
            Duration::from_millis(1),
        ),
        Count(None),
    );
    assert_refused(
        "buckets window MAX",
        SlidingWindowBuckets::dropping(1, Duration::MAX, Duration::MAX),
        CountOrDuration,
    );
    // SlidingLog: 0, above MAX_ENTRIES, a zero or too long window.
    assert_refused("log limit 0", SlidingLog::new(0, minute), Count(Some(0)));
    assert_refused(
        "log limit MAX_ENTRIES + 1",
        SlidingLog::new(MAX_ENTRIES + 1, minute),
        Count(Some(MAX_ENTRIES + 1)),
    );
    assert_refused(
        "log window 0",
        SlidingLog::new(1, Duration::ZERO),
        Span(None, Some(Duration::ZERO)),
    );
    assert_refused(
        "log window MAX",
        SlidingLog::new(1, Duration::MAX),
        Span(None, Some(Duration::MAX)),
    );
    // LeakyBucket, both uses: every rule its constructor lists.
    for (mode, make) in [
        (
            "meter",
            LeakyBucket::meter as fn(u64, u64, Duration) -> Result<LeakyBucket, ConfigError>,
        ),
        ("queue", LeakyBucket::queue),
    ] {
        let label = |what: &str| format!("{mode}: {what}");
        assert_refused(&label("capacity 0"), make(0, 1, s), Count(Some(0)));
        assert_refused(&label("count 0"), make(1, 0, s), Count(Some(0)));
        assert_refused(
            &label("capacity above u32::MAX"),
            make(u64::from(u32::MAX) + 1, 1, s),
            Count(Some(u64::from(u32::MAX) + 1)),
        );
        assert_refused(
            &label("two permits per ns"),
            make(1, 2, Duration::from_nanos(1)),
            Count(None),
        );
        // 2^32 + 1 = 641 × 6700417 shares no factor with 10^10: it stays above
        // u32::MAX once reduced, at under one permit per ns.
        assert_refused(
            &label("reduced count above u32::MAX"),
            make(1, (1 << 32) + 1, Duration::from_secs(10)),
            Count(None),
        );
        assert_refused(
            &label("a full bucket draining for centuries"),
            make(u64::from(u32::MAX), 1, Duration::from_secs(3_000_000_000)),
            Count(None),
        );
        assert_refused(
            &label("period 0"),
            make(1, 1, Duration::ZERO),
            Span(None, Some(Duration::ZERO)),
        );
        assert_refused(
            &label("period MAX"),
            make(1, 1, Duration::MAX),
            Span(None, Some(Duration::MAX)),
        );
        assert_refused(
            &label("period 300 y"),
            make(1, 1, CENTURIES_3),
            Span(None, None),
        );
    }
    // Guava's limiters: bursts and warm-ups past 292 years, cold factors, rates.
    let bursty = SmoothBursty::new(2.0).unwrap();
    assert_refused(
        "max_burst MAX",
        bursty.with_max_burst(Duration::MAX),
        Span(None, Some(Duration::MAX)),
    );
    assert_refused(
        "max_burst 300 y",
        bursty.with_max_burst(CENTURIES_3),
        Span(None, None),
    );
    assert_refused(
        "warm-up MAX",
        SmoothWarmingUp::new(2.0, Duration::MAX),
        Span(None, Some(Duration::MAX)),
    );
    let warming = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    for bad in [
        0.999_999,
        0.0,
        -1.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        assert_refused(
            &format!("cold factor {bad}"),
            warming.with_cold_factor(bad),
            ColdFactor,
        );
    }
    for bad in [0.0, -0.0, -1.0, f64::NAN, f64::NEG_INFINITY] {
        assert_refused(
            &format!("keyed bursty {bad}"),
            KeyedRateLimiter::<u8, _>::bursty(bad),
            Rate,
        );
        assert_refused(
            &format!("warming up {bad}"),
            SmoothWarmingUp::new(bad, Duration::from_secs(1)),
            Rate,
        );
    }
    // A store capped at zero keys.
    let store: Result<MemoryStore<&str, FixedWindow>, _> = MemoryStore::new().with_max_keys(0);
    assert_refused("max_keys 0", store, Count(Some(0)));
}

#[test]
fn parameters_at_the_documented_bounds_are_accepted_and_work() {
    let s = Duration::from_secs(1);
    let on = |clock: &ManualClock| clock.clone();
    let clock = ManualClock::new();
    // "2²⁸ − 1 per second are fine": the whole limit is granted at once, no more.
    let fixed = RateLimiter::with_clock(FixedWindow::new((1 << 28) - 1, s).unwrap(), on(&clock));
    let all = fixed.check((1 << 28) - 1).unwrap();
    assert!(all.is_allowed() && all.remaining() == 0, "{all:?}");
    assert!(!fixed.try_acquire());
    // The counter's largest limit, in both countings.
    for counting in [Counting::Admitted, Counting::Attempts] {
        let counter = SlidingWindowCounter::new((1 << 24) - 1, s)
            .unwrap()
            .with_counting(counting);
        let limiter = RateLimiter::with_clock(counter, on(&clock));
        assert!(
            limiter.try_acquire_n((1 << 24) - 1).unwrap(),
            "{counting:?}"
        );
        assert!(!limiter.try_acquire(), "{counting:?}");
    }
    // MAX_BUCKETS buckets.
    let ms = Duration::from_millis(1);
    let buckets = SlidingWindowBuckets::dropping(10, ms * MAX_BUCKETS as u32, ms).unwrap();
    assert_eq!(buckets.buckets(), MAX_BUCKETS);
    let limiter = RateLimiter::with_clock(buckets, on(&clock));
    assert!(limiter.try_acquire_n(10).unwrap());
    assert!(!limiter.try_acquire());
    // MAX_ENTRIES log entries.
    let log = RateLimiter::with_clock(SlidingLog::new(MAX_ENTRIES, s).unwrap(), on(&clock));
    assert!(log.try_acquire_n(MAX_ENTRIES).unwrap());
    assert!(!log.try_acquire());
    // One permit per nanosecond, the fastest leaky bucket.
    let fastest = RateLimiter::with_clock(
        LeakyBucket::meter(1, 1, Duration::from_nanos(1)).unwrap(),
        on(&clock),
    );
    assert!(fastest.try_acquire());
    assert_eq!(fastest.check(1).unwrap().retry_after_nanos(), 1);
    clock.advance_nanos(1);
    assert!(fastest.try_acquire());
    // The largest capacity, and a bucket draining for a century: "a fresh bucket
    // can always grant its whole capacity at once".
    let widest = LeakyBucket::meter(u64::from(u32::MAX), 1, Duration::from_nanos(1)).unwrap();
    let widest = RateLimiter::with_clock(widest, on(&clock));
    assert!(widest.try_acquire_n(u64::from(u32::MAX)).unwrap());
    assert!(!widest.try_acquire());
    let century = Duration::from_secs(100 * 365 * 86_400);
    for queue in [false, true] {
        let bucket = (if queue {
            LeakyBucket::queue(2, 1, century)
        } else {
            LeakyBucket::meter(2, 1, century)
        })
        .unwrap();
        let limiter = RateLimiter::with_clock(bucket, on(&clock));
        let both = limiter.check(2).unwrap();
        assert!(
            both.is_allowed() && both.wait().is_zero(),
            "queue {queue}: {both:?}"
        );
        assert!(!limiter.try_acquire(), "queue {queue}");
    }
    // A cold factor of exactly 1, a zero warm-up and a zero burst.
    let warming = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    assert_eq!(warming.with_cold_factor(1.0).unwrap().cold_factor(), 1.0);
    assert_eq!(
        SmoothWarmingUp::new(2.0, Duration::ZERO)
            .unwrap()
            .max_permits(),
        0.0
    );
    let no_burst = SmoothBursty::new(2.0)
        .unwrap()
        .with_max_burst(Duration::ZERO)
        .unwrap();
    assert_eq!(no_burst.max_permits(), 0.0);
    // A spacing of Duration::MAX saturates: one call, ever.
    let once = SlidingLog::new(100, s)
        .unwrap()
        .with_min_spacing(Duration::MAX);
    let limiter = RateLimiter::with_clock(once, on(&clock));
    assert!(limiter.try_acquire());
    clock.advance(Duration::from_secs(500 * 365 * 86_400));
    assert!(!limiter.try_acquire());
}
