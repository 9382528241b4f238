//! The documented edges of the in-memory limiters and of every algorithm, read from
//! the public docs alone: zero and out-of-range parameters, zero and huge costs, the
//! ends of the clock, time that goes backwards, timeouts of zero and `Duration::MAX`,
//! reservations given back or kept, sets of limits, and many callers at once.
//!
//! Virtual time (`ManualClock`) wherever a result is exact; the few real-clock tests
//! assert only the limiters' own guarantees (no grant before its turn) and that
//! every waiter finishes within a generous bound.

use futures::task::noop_waker_ref;
use sluicegate::algorithms::sliding_log::MAX_ENTRIES;
use sluicegate::algorithms::sliding_window_buckets::{OldestBucket, MAX_BUCKETS};
use sluicegate::algorithms::{
    Algorithm, AllOf, Counting, FixedWindow, LeakyBucket, Limits, Receipt, SlidingLog,
    SlidingWindowBuckets, SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::stores::MemoryStore;
use sluicegate::{
    CellAlgorithm, ConfigError, Decision, Error, KeyedRateLimiter, RateLimiter, Verdict,
};
use std::future::Future;
use std::sync::Barrier;
use std::task::Context;
use std::thread;
use std::time::{Duration, Instant};

const SECOND: Nanos = 1_000_000_000;
const MS: Nanos = 1_000_000;
/// Past the about 292 years (`i64::MAX` ns) that every period may span.
const CENTURIES_3: Duration = Duration::from_secs(300 * 365 * 86_400);
/// `Duration` of `u64::MAX` ns: a never decision's `retry_after`.
const FOREVER: Duration = Duration::from_nanos(u64::MAX);

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

#[test]
fn zero_cost_and_no_keys_are_refused_by_every_keyed_call_and_take_nothing() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(window, clock.clone());
    let handle = limiter.to_async();
    let zero = Err::<(), _>(Error::ZeroCost);
    let same = |got: Result<(), Error>, what: &str| assert_eq!(got, zero, "{what}");
    same(limiter.check(&"k", 0).map(drop), "check");
    same(limiter.peek(&"k", 0).map(drop), "peek");
    same(limiter.acquire_n(&"k", 0).map(drop), "acquire_n");
    same(
        limiter
            .try_acquire_n_timeout(&"k", 0, Duration::MAX)
            .map(drop),
        "try_acquire_n_timeout",
    );
    same(limiter.reserve(&"k", 0).map(drop), "reserve");
    same(limiter.check_all(&["k", "j"], 0).map(drop), "check_all");
    same(limiter.peek_all(&["k", "j"], 0).map(drop), "peek_all");
    same(limiter.acquire_all(&["k", "j"], 0).map(drop), "acquire_all");
    same(limiter.reserve_all(&["k", "j"], 0).map(drop), "reserve_all");
    futures::executor::block_on(async {
        same(handle.check(&"k", 0).await.map(drop), "async check");
        same(handle.acquire_n(&"k", 0).await.map(drop), "async acquire_n");
        same(
            handle
                .try_acquire_n_timeout(&"k", 0, Duration::MAX)
                .await
                .map(drop),
            "async try_acquire_n_timeout",
        );
        same(handle.reserve(&"k", 0).await.map(drop), "async reserve");
        same(
            handle.acquire_all(&["k", "j"], 0).await.map(drop),
            "async acquire_all",
        );
        same(
            handle.reserve_all(&["k", "j"], 0).await.map(drop),
            "async reserve_all",
        );
    });
    // No keys: an InvalidCount naming what is wrong, on every call over keys.
    let no_keys = |got: Result<(), Error>, what: &str| match &got {
        Err(Error::InvalidCount {
            what: param,
            value: 0,
            requirement,
        }) => {
            let text = got.as_ref().unwrap_err().to_string();
            assert!(
                text.contains(param) && text.contains(requirement),
                "{what}: {text}"
            );
        }
        other => panic!("{what}: {other:?}"),
    };
    no_keys(limiter.check_all(&[], 1).map(drop), "check_all");
    no_keys(limiter.peek_all(&[], 1).map(drop), "peek_all");
    no_keys(limiter.acquire_all(&[], 1).map(drop), "acquire_all");
    no_keys(limiter.reserve_all(&[], 1).map(drop), "reserve_all");
    futures::executor::block_on(async {
        no_keys(
            handle.acquire_all(&[], 1).await.map(drop),
            "async acquire_all",
        );
        no_keys(
            handle.reserve_all(&[], 1).await.map(drop),
            "async reserve_all",
        );
    });
    // Nothing was taken, no key was made and no time passed.
    assert_eq!(limiter.live_keys(), 0);
    assert_eq!(clock.now(), 0);
    assert!(clock.sleeps().is_empty());
    assert!(limiter.check_all(&["k", "j"], 2).unwrap().is_allowed());
}

/// Every front end of a direct limiter answers a cost above `capacity` (and
/// `u64::MAX`) as never: no wait, no error but `Never` for acquires, `false` for
/// tries, a reservation that is not ok with a `retry_after` of `u64::MAX` ns; and
/// nothing is taken, not even by a limit that records refusals.
fn assert_never_above_capacity<A: CellAlgorithm>(label: &str, algorithm: A, capacity: u64) {
    let clock = ManualClock::new();
    clock.advance(Duration::from_millis(10_250));
    let start = clock.now();
    let limiter = RateLimiter::with_clock(algorithm, clock.clone());
    let handle = limiter.to_async();
    for cost in [capacity + 1, u64::MAX] {
        let what = format!("{label}, cost {cost}");
        for decision in [limiter.check(cost).unwrap(), limiter.peek(cost).unwrap()] {
            assert_eq!(decision.verdict(), Verdict::Never, "{what}: {decision:?}");
            assert_eq!(decision.retry_after(), FOREVER, "{what}");
            assert_eq!(decision.limit(), capacity, "{what}: {decision:?}");
        }
        assert_eq!(limiter.try_acquire_n(cost), Ok(false), "{what}");
        assert_eq!(
            limiter.try_acquire_n_timeout(cost, Duration::MAX),
            Ok(false),
            "{what}"
        );
        assert_eq!(
            limiter.acquire_n(cost),
            Err(Error::Never { cost }),
            "{what}"
        );
        futures::executor::block_on(async {
            assert_eq!(
                handle.acquire_n(cost).await,
                Err(Error::Never { cost }),
                "{what}"
            );
            assert_eq!(
                handle.try_acquire_n_timeout(cost, Duration::MAX).await,
                Ok(false),
                "{what}"
            );
        });
        let refused = limiter.reserve(cost).unwrap();
        assert!(!refused.is_ok() && refused.decision().is_never(), "{what}");
        assert_eq!(refused.delay(), FOREVER, "{what}");
        assert_eq!(refused.wait(), Duration::ZERO, "{what}");
        limiter.reserve(cost).unwrap().cancel();
        let err = limiter.acquire_n(cost).unwrap_err().to_string();
        assert!(err.contains(&cost.to_string()), "{what}: {err}");
    }
    assert_eq!(
        clock.now(),
        start,
        "{label}: a never answer waits for nothing"
    );
    assert!(clock.sleeps().is_empty(), "{label}: {:?}", clock.sleeps());
    let whole = limiter.check(capacity).unwrap();
    assert!(
        whole.is_allowed() && whole.wait().is_zero(),
        "{label}: {whole:?}"
    );
}

#[test]
fn costs_above_capacity_are_never_on_every_direct_front_end() {
    let s = Duration::from_secs(1);
    let quarter = Duration::from_millis(250);
    assert_never_above_capacity("fixed window", FixedWindow::new(3, s).unwrap(), 3);
    assert_never_above_capacity("counter", SlidingWindowCounter::new(3, s).unwrap(), 3);
    assert_never_above_capacity(
        "counter counting attempts",
        SlidingWindowCounter::new(3, s)
            .unwrap()
            .with_counting(Counting::Attempts),
        3,
    );
    assert_never_above_capacity(
        "dropping buckets",
        SlidingWindowBuckets::dropping(3, s, quarter).unwrap(),
        3,
    );
    assert_never_above_capacity(
        "weighted buckets",
        SlidingWindowBuckets::weighted(3, s, quarter).unwrap(),
        3,
    );
    assert_never_above_capacity("log", SlidingLog::new(3, s).unwrap(), 3);
    assert_never_above_capacity(
        "log recording refusals",
        SlidingLog::new(3, s).unwrap().with_rejected_recorded(),
        3,
    );
    assert_never_above_capacity("meter", LeakyBucket::meter(3, 1, s).unwrap(), 3);
    assert_never_above_capacity("queue", LeakyBucket::queue(3, 1, s).unwrap(), 3);
}

#[test]
fn keyed_costs_above_capacity_are_never_and_charge_no_key() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(window, clock.clone());
    for cost in [3, u64::MAX] {
        let d = limiter.check(&"k", cost).unwrap();
        assert!(d.is_never() && d.retry_after() == FOREVER, "{d:?}");
        assert!(limiter.peek(&"k", cost).unwrap().is_never());
        assert!(limiter.check_all(&["j", "k"], cost).unwrap().is_never());
        assert_eq!(limiter.acquire_n(&"k", cost), Err(Error::Never { cost }));
        assert_eq!(
            limiter.acquire_all(&["j", "k"], cost),
            Err(Error::Never { cost })
        );
        assert_eq!(
            limiter.try_acquire_n_timeout(&"k", cost, Duration::MAX),
            Ok(false)
        );
        let r = limiter.reserve(&"k", cost).unwrap();
        assert!(!r.is_ok() && r.decision().is_never());
        // "u64::MAX nanoseconds for never".
        assert_eq!(r.delay(), FOREVER);
        r.cancel().unwrap();
        let all = limiter.reserve_all(&["j", "k"], cost).unwrap();
        assert!(!all.is_ok() && all.delay() == FOREVER);
        assert_eq!(all.wait(), Duration::ZERO);
        let handle = limiter.to_async();
        futures::executor::block_on(async {
            assert_eq!(
                handle.acquire_n(&"k", cost).await,
                Err(Error::Never { cost })
            );
            assert_eq!(
                handle.acquire_all(&["j", "k"], cost).await,
                Err(Error::Never { cost })
            );
            assert!(handle
                .reserve(&"k", cost)
                .await
                .unwrap()
                .decision()
                .is_never());
        });
    }
    assert!(clock.sleeps().is_empty() && clock.now() == 0);
    assert!(limiter.check_all(&["j", "k"], 2).unwrap().is_allowed());
}

#[test]
fn extreme_rates_grant_at_once_or_end_in_never_without_panicking() {
    // The largest finite rate: any cost goes at once, and what it owes is less than
    // a nanosecond.
    let clock = ManualClock::new();
    let fastest = RateLimiter::bursty_with_clock(f64::MAX, clock.clone()).unwrap();
    assert_eq!(fastest.acquire_n(u64::MAX), Ok(Duration::ZERO));
    assert_eq!(fastest.acquire_n(u64::MAX), Ok(Duration::ZERO));
    assert!(fastest.try_acquire_n(u64::MAX).unwrap());
    assert_eq!(clock.now(), 0);
    // The smallest rate, on a keyed limiter: a key's first request goes (pay later),
    // then the key is exhausted for good: Never, at once, on every front end; other
    // keys keep their own first request.
    let keyed =
        KeyedRateLimiter::with_clock(SmoothBursty::new(f64::MIN_POSITIVE).unwrap(), clock.clone());
    assert!(keyed.try_acquire(&"a"));
    assert!(!keyed.try_acquire(&"a"));
    assert_eq!(keyed.check(&"a", 1).unwrap().verdict(), Verdict::Never);
    assert_eq!(keyed.acquire(&"a"), Err(Error::Never { cost: 1 }));
    let handle = keyed.to_async();
    assert_eq!(
        futures::executor::block_on(handle.acquire(&"a")),
        Err(Error::Never { cost: 1 })
    );
    assert!(keyed.try_acquire(&"b"));
    // A keyed pay-later grant of u64::MAX saturates its key the same way.
    let one = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), clock.clone());
    assert_eq!(one.acquire_n(&"k", u64::MAX), Ok(Duration::ZERO));
    assert_eq!(one.acquire(&"k"), Err(Error::Never { cost: 1 }));
    assert!(
        clock.sleeps().iter().all(Duration::is_zero),
        "{:?}",
        clock.sleeps()
    );
    assert_eq!(clock.now(), 0);
}

/// At the clock reading `now`, a fresh limiter still answers every call, and at one
/// instant admits at most `at_most` (exactly that many when `exact`), never more.
fn late_in_time<A: CellAlgorithm>(
    label: &str,
    algorithm: A,
    now: Nanos,
    at_most: usize,
    exact: bool,
) {
    let clock = ManualClock::new();
    clock.advance_nanos(now);
    let limiter = RateLimiter::with_clock(algorithm, clock.clone());
    let granted = (0..3 * at_most + 3)
        .filter(|_| limiter.try_acquire())
        .count();
    if exact {
        assert_eq!(granted, at_most, "{label} at {now}");
    } else {
        assert!(granted <= at_most, "{label} at {now}: {granted} granted");
    }
    let refused = limiter.check(1).unwrap();
    assert!(!refused.is_allowed(), "{label} at {now}: {refused:?}");
    assert!(!limiter.peek(1).unwrap().is_allowed(), "{label} at {now}");
    limiter.reserve(1).unwrap().cancel();
    assert!(!limiter.try_acquire(), "{label} at {now}");
    assert_eq!(clock.now(), now, "{label}");
}

/// Runs [`late_in_time`] on one algorithm twice: a second before 292 years (the
/// span every state covers: signed nanoseconds, or leaky-bucket ticks that "span at
/// least 292 years"), where a fresh limiter admits exactly `n` at one instant; and
/// at the clock's last reading, where states may have saturated (Guava's limiters
/// and the leaky bucket then refuse everything) but nothing may grant more than `n`.
fn late_and_last<A: CellAlgorithm + Clone>(label: &str, algorithm: A, n: usize) {
    late_in_time(label, algorithm.clone(), i64::MAX as u64 - SECOND, n, true);
    late_in_time(label, algorithm, u64::MAX, n, false);
}

#[test]
fn at_the_end_of_the_clock_every_algorithm_answers_within_its_limit() {
    let s = Duration::from_secs(1);
    late_and_last("fixed window", FixedWindow::new(3, s).unwrap(), 3);
    late_and_last("counter", SlidingWindowCounter::new(3, s).unwrap(), 3);
    late_and_last(
        "counter counting attempts",
        SlidingWindowCounter::new(3, s)
            .unwrap()
            .with_counting(Counting::Attempts),
        3,
    );
    late_and_last(
        "buckets",
        SlidingWindowBuckets::weighted(3, s, Duration::from_millis(100)).unwrap(),
        3,
    );
    late_and_last("meter", LeakyBucket::meter(3, 3, s).unwrap(), 3);
    // A queue's try takes only a turn that is due now; Guava's limiters start with
    // nothing stored at the clock's reading (the warming-up one full of expensive
    // permits), so each grants its one pay-later request.
    late_and_last("queue", LeakyBucket::queue(3, 3, s).unwrap(), 1);
    late_and_last("bursty", SmoothBursty::new(3.0).unwrap(), 1);
    late_and_last(
        "warming up",
        SmoothWarmingUp::new(3.0, Duration::from_secs(2)).unwrap(),
        1,
    );
    late_and_last(
        "set",
        AllOf::new((
            FixedWindow::new(3, s).unwrap(),
            SlidingWindowCounter::new(2, s).unwrap(),
        )),
        2,
    );
    // The log is exact a nanosecond before the clock's last reading, and at it
    // "no window of length `window`, wherever it lies, ever holds more than
    // `limit` granted permits".
    late_in_time("log", SlidingLog::new(3, s).unwrap(), u64::MAX - 1, 3, true);
    late_and_last("log", SlidingLog::new(3, s).unwrap(), 3);
}

/// Spends `algorithm` at `at`, then asks at each earlier instant: "time that
/// appears to go backwards must never grant extra permits" (`Algorithm`'s contract).
fn backwards<A: Algorithm>(label: &str, algorithm: &A, at: Nanos, earlier: &[Nanos]) {
    let mut state = algorithm.initial_state(0);
    let mut granted = 0;
    while algorithm
        .reserve::<Decision>(&mut state, at, 1, 0)
        .is_allowed()
    {
        granted += 1;
        assert!(granted < 10_000, "{label}: never refuses");
    }
    assert!(granted >= 1, "{label}: granted nothing at {at}");
    for &then in earlier {
        let peeked = algorithm.peek(&state, then, 1);
        assert!(
            !peeked.is_allowed(),
            "{label}: peek at {then} after {at}: {peeked:?}"
        );
        let asked: Decision = algorithm.reserve(&mut state, then, 1, 0);
        assert!(
            !asked.is_allowed(),
            "{label}: reserve at {then} after {at}: {asked:?}"
        );
    }
    // And back at the latest instant, still nothing more.
    let again: Decision = algorithm.reserve(&mut state, at, 1, 0);
    assert!(!again.is_allowed(), "{label}: {again:?}");
}

#[test]
fn time_going_backwards_grants_nothing_in_any_algorithm() {
    let s = Duration::from_secs(1);
    let at = 10 * SECOND + 500 * MS;
    let earlier = [
        at - 1,
        at - 400 * MS,
        at - 600 * MS,
        at - SECOND,
        at - 3 * SECOND,
        0,
    ];
    backwards("bursty", &SmoothBursty::new(5.0).unwrap(), at, &earlier);
    backwards(
        "warming up",
        &SmoothWarmingUp::new(5.0, Duration::from_secs(2)).unwrap(),
        at,
        &earlier,
    );
    backwards("meter", &LeakyBucket::meter(3, 3, s).unwrap(), at, &earlier);
    backwards("queue", &LeakyBucket::queue(3, 3, s).unwrap(), at, &earlier);
    backwards(
        "fixed window",
        &FixedWindow::new(3, s).unwrap(),
        at,
        &earlier,
    );
    backwards(
        "counter",
        &SlidingWindowCounter::new(3, s).unwrap(),
        at,
        &earlier,
    );
    backwards(
        "dropping buckets",
        &SlidingWindowBuckets::dropping(3, s, Duration::from_millis(250)).unwrap(),
        at,
        &earlier,
    );
    backwards(
        "weighted buckets",
        &SlidingWindowBuckets::weighted(3, s, Duration::from_millis(300)).unwrap(),
        at,
        &earlier,
    );
    backwards("log", &SlidingLog::new(3, s).unwrap(), at, &earlier);
    backwards(
        "spaced log",
        &SlidingLog::new(3, s)
            .unwrap()
            .with_min_spacing(Duration::from_millis(100)),
        at,
        &earlier,
    );
    backwards(
        "set",
        &AllOf::new((
            FixedWindow::new(5, s).unwrap(),
            SlidingLog::new(3, s).unwrap(),
        )),
        at,
        &earlier,
    );
}

#[test]
fn timeouts_of_zero_and_duration_max_on_a_window() {
    let window = || FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    // Direct, blocking.
    let clock = ManualClock::new();
    clock.advance(Duration::from_millis(250));
    let limiter = RateLimiter::with_clock(window(), clock.clone());
    assert!(limiter.try_acquire_n_timeout(2, Duration::ZERO).unwrap());
    // A granted timed try sleeps, as every acquire does, even for zero.
    assert_eq!(clock.take_sleeps(), [Duration::ZERO]);
    assert!(!limiter.try_acquire_timeout(Duration::ZERO));
    // The next window is 750 ms away: a timeout a nanosecond short answers false
    // at once, without sleeping.
    let short = Duration::from_millis(750) - Duration::from_nanos(1);
    assert!(!limiter.try_acquire_n_timeout(1, short).unwrap());
    assert!(clock.sleeps().is_empty() && clock.now() == 250 * MS);
    // Exactly 750 ms fits ("retry_after <= left").
    assert!(limiter
        .try_acquire_n_timeout(1, Duration::from_millis(750))
        .unwrap());
    assert_eq!(clock.now(), SECOND);
    assert!(limiter.try_acquire());
    // Duration::MAX means no limit.
    assert!(limiter.try_acquire_timeout(Duration::MAX));
    assert_eq!(clock.now(), 2 * SECOND);
    assert_eq!(
        clock.take_sleeps().iter().sum::<Duration>(),
        Duration::from_secs(1) + Duration::from_millis(750)
    );
    // Async: the same answers on the same clock.
    let handle = limiter.to_async();
    futures::executor::block_on(async {
        assert!(handle.try_acquire());
        assert!(!handle
            .try_acquire_n_timeout(1, short + Duration::from_millis(250))
            .await
            .unwrap());
        assert_eq!(clock.now(), 2 * SECOND);
        assert!(handle
            .try_acquire_n_timeout(1, Duration::MAX)
            .await
            .unwrap());
        assert_eq!(clock.now(), 3 * SECOND);
        assert_eq!(
            handle.try_acquire_n_timeout(3, Duration::MAX).await,
            Ok(false)
        );
    });
    assert_eq!(clock.now(), 3 * SECOND);
    // Keyed: the same, per key.
    let keyed = KeyedRateLimiter::with_clock(window(), clock.clone());
    assert!(keyed
        .try_acquire_n_timeout(&"k", 2, Duration::ZERO)
        .unwrap());
    assert!(!keyed
        .try_acquire_n_timeout(&"k", 1, Duration::from_millis(999))
        .unwrap());
    assert_eq!(clock.now(), 3 * SECOND);
    assert!(keyed
        .try_acquire_n_timeout(&"j", 2, Duration::ZERO)
        .unwrap());
    assert!(keyed.try_acquire_n_timeout(&"k", 1, Duration::MAX).unwrap());
    assert_eq!(clock.now(), 4 * SECOND);
    assert_eq!(
        keyed.try_acquire_n_timeout(&"k", u64::MAX, Duration::MAX),
        Ok(false)
    );
    assert_eq!(clock.now(), 4 * SECOND);
}

/// A grant that acts at once can be given back only at the instant it was made
/// (`Algorithm::cancel`); later, or dropped, it stays taken.
fn cancel_only_at_the_instant<A: CellAlgorithm>(label: &str, algorithm: A, capacity: usize) {
    let clock = ManualClock::new();
    clock.advance(Duration::from_millis(10_100));
    let limiter = RateLimiter::with_clock(algorithm, clock.clone());
    let left_now = || (0..2 * capacity).filter(|_| limiter.try_acquire()).count();
    // At the same instant: the permit comes back.
    let r = limiter.reserve(1).unwrap();
    assert!(
        r.is_ok() && r.delay().is_zero(),
        "{label}: {:?}",
        r.decision()
    );
    assert_eq!(r.acts_at(), clock.now(), "{label}");
    r.cancel();
    assert_eq!(left_now(), capacity, "{label}: a cancel at the instant");
    // A nanosecond later: nothing comes back.
    clock.advance(Duration::from_secs(100));
    let r = limiter.reserve(1).unwrap();
    clock.advance_nanos(1);
    r.cancel();
    assert_eq!(left_now(), capacity - 1, "{label}: a cancel 1 ns late");
    // Dropped: kept.
    clock.advance(Duration::from_secs(100));
    drop(limiter.reserve(1).unwrap());
    assert_eq!(left_now(), capacity - 1, "{label}: a dropped reservation");
    assert!(clock.sleeps().is_empty(), "{label}");
}

#[test]
fn grants_that_act_at_once_come_back_only_when_cancelled_at_their_instant() {
    let s = Duration::from_secs(1);
    let quarter = Duration::from_millis(250);
    cancel_only_at_the_instant("fixed window", FixedWindow::new(3, s).unwrap(), 3);
    cancel_only_at_the_instant("counter", SlidingWindowCounter::new(3, s).unwrap(), 3);
    cancel_only_at_the_instant(
        "dropping buckets",
        SlidingWindowBuckets::dropping(3, s, quarter).unwrap(),
        3,
    );
    cancel_only_at_the_instant(
        "weighted buckets",
        SlidingWindowBuckets::weighted(3, s, quarter).unwrap(),
        3,
    );
    cancel_only_at_the_instant("log", SlidingLog::new(3, s).unwrap(), 3);
    cancel_only_at_the_instant(
        "spaced log",
        SlidingLog::new(3, s)
            .unwrap()
            .with_min_spacing(Duration::ZERO),
        3,
    );
    cancel_only_at_the_instant("meter", LeakyBucket::meter(3, 1, s).unwrap(), 3);
}

#[test]
fn queue_turns_are_given_back_by_gos_rule() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(
        LeakyBucket::queue(3, 1, Duration::from_secs(1)).unwrap(),
        clock.clone(),
    );
    let turns: Vec<_> = (0..3).map(|_| limiter.reserve(1).unwrap()).collect();
    let delays: Vec<_> = turns.iter().map(|r| r.delay()).collect();
    assert_eq!(delays, [0, 1, 2].map(Duration::from_secs));
    // Full: a fourth is refused at once rather than queued.
    assert!(!limiter.reserve(1).unwrap().is_ok());
    let mut turns = turns.into_iter();
    let (_first, second, third) = (
        turns.next().unwrap(),
        turns.next().unwrap(),
        turns.next().unwrap(),
    );
    // The second turn has the third behind it: nothing comes back.
    second.cancel();
    assert!(!limiter.reserve(1).unwrap().is_ok());
    // The latest comes back whole.
    third.cancel();
    let again = limiter.reserve(1).unwrap();
    assert!(again.is_ok());
    assert_eq!(again.delay(), Duration::from_secs(2));
    // Past its time to act (2 s), nothing comes back: the next turn is at 3 s.
    clock.advance(Duration::from_millis(2_500));
    again.cancel();
    let next = limiter.reserve(1).unwrap();
    assert_eq!(next.delay(), Duration::from_millis(500));
    // At its time to act exactly, "that instant included", it does.
    clock.advance(Duration::from_millis(500));
    next.cancel();
    assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::ZERO);
    assert!(clock.sleeps().is_empty());
}

#[test]
fn a_full_queue_is_waited_out_only_when_the_turn_fits_the_timeout() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(
        LeakyBucket::queue(2, 1, Duration::from_secs(1)).unwrap(),
        clock.clone(),
    );
    assert!(limiter.try_acquire());
    assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::from_secs(1));
    // Full: a caller who does not wait gets in once the queue is idle, at 2 s.
    assert_eq!(
        limiter.check(1).unwrap().retry_after(),
        Duration::from_secs(2)
    );
    // Room comes at 1 s, but the turn it gives is at 2 s, past a 1.5 s deadline:
    // false at once, without sleeping towards a retry that cannot succeed.
    let short = Duration::from_millis(1_500);
    assert_eq!(limiter.try_acquire_n_timeout(1, short), Ok(false));
    assert!(clock.sleeps().is_empty() && clock.now() == 0);
    // With 2 s it fits: a second for room, a second for the turn.
    assert_eq!(
        limiter.try_acquire_n_timeout(1, Duration::from_secs(2)),
        Ok(true)
    );
    assert_eq!(clock.now(), 2 * SECOND);
    assert_eq!(
        clock.take_sleeps().iter().sum::<Duration>(),
        Duration::from_secs(2)
    );
    // One queued behind the one being served: the next waits one interval.
    assert_eq!(limiter.acquire(), Ok(Duration::from_secs(1)));
    assert_eq!(clock.now(), 3 * SECOND);
}

#[test]
fn a_key_listed_twice_is_charged_twice_and_cancelled_in_the_order_listed() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    let windowed = KeyedRateLimiter::with_clock(window, clock.clone());
    // "check_all(&[a, a], 1) needs room for 2 in a".
    assert!(!windowed.check_all(&["b", "b"], 1).unwrap().is_allowed());
    assert!(windowed.check(&"b", 1).unwrap().is_allowed());
    // Pay later, twice on one key: turns at 0 s and 0.5 s; the reservation acts at
    // the later one.
    let bursty = KeyedRateLimiter::with_clock(SmoothBursty::new(2.0).unwrap(), clock.clone());
    let twice = bursty.reserve_all(&["a", "a"], 1).unwrap();
    assert!(twice.is_ok());
    assert_eq!(twice.delay(), Duration::from_millis(500));
    // "the first giving back only what the second leaves": the first gives back
    // nothing (the second was reserved after it), the second its whole charge.
    twice.cancel().unwrap();
    assert_eq!(
        bursty.reserve(&"a", 1).unwrap().delay(),
        Duration::from_millis(500)
    );
    assert!(clock.sleeps().is_empty());
}

#[test]
fn a_cancel_gives_back_the_grant_alone_never_the_refusals_recorded_beside_it() {
    let now = 500 * MS;
    // The counter counting attempts: a cancel takes the grant's own cost off, and
    // the refused attempt counted after it stays counted.
    for (counting, after_refusal, after_cancel) in [
        (Counting::Admitted, (0, 1), (0, 0)),
        (Counting::Attempts, (0, 4), (0, 3)),
    ] {
        let counter = SlidingWindowCounter::new(3, Duration::from_secs(1))
            .unwrap()
            .with_counting(counting);
        let mut state = counter.initial_state(0);
        let (grant, receipt): (Decision, Receipt) = counter.reserve(&mut state, now, 1, 0);
        assert!(grant.is_allowed() && !receipt.is_none(), "{counting:?}");
        let refused: Decision = counter.reserve(&mut state, now, 3, 0);
        assert!(!refused.is_allowed(), "{counting:?}");
        assert_eq!(counter.counts(&state, now), after_refusal, "{counting:?}");
        counter.cancel(&mut state, now, &receipt, now);
        assert_eq!(counter.counts(&state, now), after_cancel, "{counting:?}");
    }
    // The log: an entry comes back only while it is the newest.
    let window = Duration::from_secs(10);
    for recording in [false, true] {
        let log = SlidingLog::new(3, window).unwrap();
        let log = if recording {
            log.with_rejected_recorded()
        } else {
            log
        };
        let mut state = log.initial_state(0);
        let (_, first): (Decision, Receipt) = log.reserve(&mut state, now, 1, 0);
        let (_, second): (Decision, Receipt) = log.reserve(&mut state, now, 1, 0);
        log.cancel(&mut state, now, &first, now); // behind the second: nothing
        assert_eq!(
            log.live_entries(&state, now).count(),
            2,
            "recording {recording}"
        );
        let refused: Decision = log.reserve(&mut state, now, 2, 0);
        assert!(!refused.is_allowed(), "recording {recording}");
        log.cancel(&mut state, now, &second, now);
        let live: Vec<_> = log.live_entries(&state, now).collect();
        if recording {
            // The refused attempt (cost 2) was recorded after the second grant,
            // which is then no longer the newest: both stay.
            assert_eq!(live, [(now, 1), (now, 1), (now, 2)]);
        } else {
            assert_eq!(live, [(now, 1)]);
        }
    }
}

#[test]
fn a_refused_reservation_keeps_its_retry_after_and_gives_back_nothing() {
    let s = Duration::from_secs(1);
    // Each limit in a one-member set, so that both limiters have one type.
    for (label, limiter) in [
        (
            "fixed window",
            RateLimiter::with_clock(
                Limits::new().with(FixedWindow::new(1, s).unwrap()),
                ManualClock::new(),
            ),
        ),
        (
            "log",
            RateLimiter::with_clock(
                Limits::new().with(SlidingLog::new(1, s).unwrap()),
                ManualClock::new(),
            ),
        ),
    ] {
        let clock = limiter.clock().clone();
        clock.advance(Duration::from_millis(250));
        assert!(limiter.try_acquire(), "{label}");
        let refused = limiter.reserve(1).unwrap();
        assert!(!refused.is_ok(), "{label}");
        let first = refused.delay();
        assert!(!first.is_zero() && first <= s, "{label}: {first:?}");
        clock.advance(Duration::from_millis(100));
        // "its retry_after as of when it was made".
        assert_eq!(refused.delay(), first, "{label}");
        assert_eq!(refused.decision().retry_after(), first, "{label}");
        assert_eq!(refused.wait(), Duration::ZERO, "{label}");
        limiter.reserve(1).unwrap().cancel();
        assert!(
            !limiter.try_acquire(),
            "{label}: a refusal's cancel gave something"
        );
        assert!(clock.sleeps().is_empty(), "{label}");
    }
}

#[test]
fn reservations_on_a_set_cancelled_latest_first_give_everything_back() {
    // The set docs: "Cancelling it hands each member its receipt with the set's time
    // to act, so each gives back what Go's rule lets it, for any grant of the set,
    // not only its latest".
    let members = || {
        (
            SmoothBursty::new(1.0).unwrap(),
            SmoothBursty::new(4.0).unwrap(),
        )
    };
    let direct = RateLimiter::with_clock(AllOf::new(members()), ManualClock::new());
    let taken: Vec<_> = (0..3).map(|_| direct.reserve(1).unwrap()).collect();
    let delays: Vec<_> = taken.iter().map(|r| r.delay()).collect();
    assert_eq!(delays, [0, 1, 2].map(Duration::from_secs));
    for r in taken.into_iter().rev() {
        r.cancel();
    }
    assert_eq!(direct.reserve(1).unwrap().delay(), Duration::ZERO, "AllOf");
    let (a, b) = members();
    let dynamic = RateLimiter::with_clock(Limits::new().with(a).with(b), ManualClock::new());
    let taken: Vec<_> = (0..3).map(|_| dynamic.reserve(1).unwrap()).collect();
    for r in taken.into_iter().rev() {
        r.cancel();
    }
    assert_eq!(
        dynamic.reserve(1).unwrap().delay(),
        Duration::ZERO,
        "Limits"
    );
    // Keyed, on one key: the same rule, key by key.
    let keyed = KeyedRateLimiter::with_clock(AllOf::new(members()), ManualClock::new());
    let taken: Vec<_> = (0..3).map(|_| keyed.reserve(&"k", 1).unwrap()).collect();
    assert_eq!(taken[2].delay(), Duration::from_secs(2));
    for r in taken.into_iter().rev() {
        r.cancel().unwrap();
    }
    assert_eq!(
        keyed.reserve(&"k", 1).unwrap().delay(),
        Duration::ZERO,
        "keyed AllOf"
    );
}

#[test]
fn abandoned_async_waits_on_a_set_give_back_their_turns() {
    // The set docs: "waits abandoned together, cancelled latest first, give all
    // their permits back, as they do on one limit". One permit every 100 s (and
    // every 50 s): after a first request each wait sleeps far beyond this test,
    // on the real clock.
    let set = AllOf::new((
        SmoothBursty::new(0.01).unwrap(),
        SmoothBursty::new(0.02).unwrap(),
    ));
    let limiter = RateLimiter::new(set);
    limiter.acquire().unwrap();
    let handle = limiter.to_async();
    let mut waits: Vec<_> = (0..5).map(|_| Box::pin(handle.acquire())).collect();
    for wait in &mut waits {
        let polled = wait
            .as_mut()
            .poll(&mut Context::from_waker(noop_waker_ref()));
        assert!(polled.is_pending());
    }
    drop(waits);
    let next = limiter.reserve(1).unwrap().delay();
    assert!(
        next <= Duration::from_secs(100),
        "{next:?}: the turns stayed taken"
    );
}

#[test]
fn a_set_admits_exactly_what_its_tightest_member_allows() {
    let s = Duration::from_secs(1);
    let window = || FixedWindow::new(3, s).unwrap();
    let log = || SlidingLog::new(4, Duration::from_secs(10)).unwrap();
    // A set, named, with (the window's index, the log's index) in it.
    type Named = (&'static str, RateLimiter<Limits, ManualClock>, (u32, u32));
    let sets: Vec<Named> = vec![
        (
            "window, log",
            RateLimiter::with_clock(Limits::new().with(window()).with(log()), ManualClock::new()),
            (0, 1),
        ),
        (
            "log, window",
            RateLimiter::with_clock(Limits::new().with(log()).with(window()), ManualClock::new()),
            (1, 0),
        ),
    ];
    for (label, limiter, (w, l)) in sets {
        let clock = limiter.clock().clone();
        let hammer = |n: usize| (0..n).filter(|_| limiter.try_acquire()).count();
        // 0 s: the window (3) is tightest; the first grant names it.
        let first = limiter.check(1).unwrap();
        assert_eq!(
            (first.remaining(), first.limit(), first.limit_index()),
            (2, 3, w),
            "{label}"
        );
        assert_eq!(hammer(20), 2, "{label}");
        let refused = limiter.check(1).unwrap();
        assert_eq!(refused.limit_index(), w, "{label}");
        assert_eq!(refused.retry_after(), s, "{label}");
        // 1 s: the window has 3 again, the log 1 left.
        clock.advance(s);
        assert_eq!(hammer(20), 1, "{label}");
        let refused = limiter.check(1).unwrap();
        assert_eq!(refused.limit_index(), l, "{label}");
        assert_eq!(refused.retry_after(), Duration::from_secs(9), "{label}");
        // Refused calls are counted by none, however many.
        for _ in 0..5 {
            clock.advance(Duration::from_millis(1_700));
            assert_eq!(hammer(50), 0, "{label}");
        }
        // 10 s: the three entries of 0 s have left the log; the window is fresh.
        clock.advance(Duration::from_millis(10_000 - 1_000 - 5 * 1_700));
        assert_eq!(clock.now(), 10 * SECOND);
        assert_eq!(hammer(20), 3, "{label}");
        // Both are spent, both for a second: the first on a tie.
        let refused = limiter.check(1).unwrap();
        assert_eq!(refused.limit_index(), 0, "{label}");
        assert_eq!(refused.retry_after(), s, "{label}");
    }
    // AllOf decides as Limits does.
    let all = RateLimiter::with_clock(AllOf::new((window(), log())), ManualClock::new());
    let granted = (0..20).filter(|_| all.try_acquire()).count();
    assert_eq!(granted, 3);
}

#[test]
fn a_set_answers_never_for_a_cost_any_member_can_never_grant() {
    let s = Duration::from_secs(1);
    let limiter = RateLimiter::with_clock(
        AllOf::new((
            FixedWindow::new(3, s).unwrap(),
            SlidingLog::new(10, s).unwrap(),
        )),
        ManualClock::new(),
    );
    let never = limiter.check(5).unwrap();
    assert!(never.is_never(), "{never:?}");
    assert_eq!((never.limit_index(), never.limit()), (0, 3));
    assert_eq!(never.retry_after(), FOREVER);
    // check_each: the window says never, the log what it would have granted.
    let mut each = Vec::new();
    let decision = limiter.check_each(5, &mut |d| each.push(d)).unwrap();
    assert!(decision.is_never());
    assert_eq!(each.len(), 2);
    assert!(each[0].is_never(), "{:?}", each[0]);
    assert!(
        each[1].is_allowed() && each[1].remaining() == 5,
        "{:?}",
        each[1]
    );
    assert_eq!(limiter.acquire_n(5), Err(Error::Never { cost: 5 }));
    // Above both: the first member that answered never.
    let both = limiter.check(11).unwrap();
    assert!(both.is_never() && both.limit_index() == 0, "{both:?}");
    // Nothing was taken from either member.
    assert!(limiter.try_acquire_n(3).unwrap());
    // The other order names the other index.
    let reversed = RateLimiter::with_clock(
        Limits::new()
            .with(SlidingLog::new(10, s).unwrap())
            .with(FixedWindow::new(3, s).unwrap()),
        ManualClock::new(),
    );
    assert_eq!(reversed.check(5).unwrap().limit_index(), 1);
    // An empty set limits nothing, at any cost.
    let empty = RateLimiter::with_clock(Limits::new(), ManualClock::new());
    for _ in 0..3 {
        assert_eq!(empty.acquire_n(u64::MAX), Ok(Duration::ZERO));
        let d = empty.check(u64::MAX).unwrap();
        assert!(d.is_allowed() && d.remaining() == u64::MAX && d.limit() == u64::MAX);
    }
}

/// Eight threads hammer one limiter at one frozen instant: together they are
/// granted exactly what the limit holds, through every non-blocking call.
fn eight_threads_at_one_instant<A: CellAlgorithm>(
    label: &str,
    limiter: RateLimiter<A, ManualClock>,
    exactly: usize,
) {
    let barrier = Barrier::new(8);
    let granted: usize = thread::scope(|scope| {
        let workers: Vec<_> = (0..8)
            .map(|i| {
                let (limiter, barrier) = (&limiter, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    (0..60)
                        .filter(|n| match (i + n) % 3 {
                            0 => limiter.try_acquire(),
                            1 => limiter.check(1).unwrap().is_allowed(),
                            _ => limiter.try_acquire_n_timeout(1, Duration::ZERO).unwrap(),
                        })
                        .count()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(granted, exactly, "{label}");
    assert!(!limiter.try_acquire(), "{label}");
}

#[test]
fn eight_threads_at_one_instant_are_granted_exactly_the_limit() {
    let s = Duration::from_secs(1);
    let clock = || {
        let clock = ManualClock::new();
        clock.advance(Duration::from_millis(5_500));
        clock
    };
    eight_threads_at_one_instant(
        "fixed window",
        RateLimiter::with_clock(FixedWindow::new(50, s).unwrap(), clock()),
        50,
    );
    eight_threads_at_one_instant(
        "counter",
        RateLimiter::with_clock(SlidingWindowCounter::new(50, s).unwrap(), clock()),
        50,
    );
    eight_threads_at_one_instant(
        "buckets",
        RateLimiter::with_clock(
            SlidingWindowBuckets::weighted(50, s, Duration::from_millis(100)).unwrap(),
            clock(),
        ),
        50,
    );
    eight_threads_at_one_instant(
        "log",
        RateLimiter::with_clock(SlidingLog::new(50, s).unwrap(), clock()),
        50,
    );
    eight_threads_at_one_instant(
        "meter",
        RateLimiter::with_clock(LeakyBucket::meter(50, 1, s).unwrap(), clock()),
        50,
    );
    eight_threads_at_one_instant(
        "set",
        RateLimiter::with_clock(
            AllOf::new((
                FixedWindow::new(50, s).unwrap(),
                SlidingLog::new(30, s).unwrap(),
            )),
            clock(),
        ),
        30,
    );
    // A bursty limiter stores a full burst (50) once idle for max_burst, plus the
    // pay-later request.
    let c = clock();
    let bursty = RateLimiter::bursty_with_clock(50.0, c.clone()).unwrap();
    c.advance(s);
    eight_threads_at_one_instant("bursty", bursty, 51);
}

#[test]
fn eight_threads_on_all_or_nothing_keyed_calls_charge_every_key_or_none() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(40, Duration::from_secs(1)).unwrap();
    let limiter: KeyedRateLimiter<String, _, _, _> = KeyedRateLimiter::with_clock(window, clock);
    let barrier = Barrier::new(8);
    let grants: Vec<u64> = thread::scope(|scope| {
        let workers: Vec<_> = (0..8)
            .map(|i| {
                let (limiter, barrier) = (&limiter, &barrier);
                scope.spawn(move || {
                    let keys = ["shared".to_owned(), format!("own{i}")];
                    barrier.wait();
                    (0..30)
                        .filter(|_| limiter.check_all(&keys, 1).unwrap().is_allowed())
                        .count() as u64
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(grants.iter().sum::<u64>(), 40, "{grants:?}");
    assert!(!limiter.try_acquire("shared"));
    // Each thread's own key was charged its grants, not its refusals.
    for (i, &g) in grants.iter().enumerate() {
        let own = format!("own{i}");
        let left = limiter.peek(own.as_str(), 40 - g).unwrap();
        assert!(
            left.is_allowed() && left.remaining() == 0,
            "{own}: {g} granted, {left:?}"
        );
    }
}

/// The `k`-th earliest of `instants` (sorted), as time since `start`.
fn since(start: Instant, mut instants: Vec<Instant>) -> Vec<Duration> {
    instants.sort();
    instants.into_iter().map(|t| t - start).collect()
}

/// A generous allowance for the two real clocks (the limiter's and `Instant`).
const SLACK: Duration = Duration::from_millis(15);

#[test]
fn eight_threads_blocking_on_a_real_sliding_log_never_pass_it() {
    let window = Duration::from_millis(100);
    let start = Instant::now();
    let limiter = RateLimiter::new(SlidingLog::new(5, window).unwrap());
    let done: Vec<Instant> = thread::scope(|scope| {
        let workers: Vec<_> = (0..8)
            .map(|_| {
                let limiter = &limiter;
                scope.spawn(move || {
                    (0..4)
                        .map(|_| {
                            limiter.acquire().unwrap();
                            Instant::now()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let elapsed = start.elapsed();
    assert_eq!(done.len(), 32);
    // Exact: no window holds more than 5 grants, so the k-th grant (and its
    // acquire's return) comes at least ⌊k/5⌋ windows after the first.
    for (k, at) in since(start, done).into_iter().enumerate() {
        let earliest = window * (k as u32 / 5);
        assert!(
            at + SLACK >= earliest,
            "grant {k} returned at {at:?}, before {earliest:?}"
        );
    }
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_tasks_awaiting_one_bursty_limiter_all_finish_at_its_pace() {
    let rate = 200.0;
    let interval = Duration::from_millis(5);
    let start = Instant::now();
    let handle = RateLimiter::bursty(rate).unwrap().to_async();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let handle = handle.clone();
            tokio::spawn(async move {
                let mut done = Vec::new();
                for _ in 0..5 {
                    handle.acquire().await.unwrap();
                    done.push(Instant::now());
                }
                done
            })
        })
        .collect();
    let all = tokio::time::timeout(Duration::from_secs(5), futures::future::join_all(tasks))
        .await
        .expect("every waiter finishes");
    let done: Vec<Instant> = all.into_iter().flat_map(|t| t.unwrap()).collect();
    assert_eq!(done.len(), 80);
    // A new bursty limiter stores nothing: the k-th grant acts k intervals after
    // the first at the earliest.
    for (k, at) in since(start, done).into_iter().enumerate() {
        let earliest = interval * k as u32;
        assert!(
            at + SLACK >= earliest,
            "grant {k} returned at {at:?}, before {earliest:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_tasks_on_a_keyed_window_all_finish_within_each_keys_limit() {
    let window = Duration::from_millis(100);
    let start = Instant::now();
    let limiter: KeyedRateLimiter<&str, _> =
        KeyedRateLimiter::new(FixedWindow::new(5, window).unwrap());
    let handle = limiter.to_async();
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let handle = handle.clone();
            let key = if i % 2 == 0 { "even" } else { "odd" };
            tokio::spawn(async move {
                let mut done = Vec::new();
                for _ in 0..3 {
                    handle.acquire(&key).await.unwrap();
                    done.push(Instant::now());
                }
                (key, done)
            })
        })
        .collect();
    let all = tokio::time::timeout(Duration::from_secs(5), futures::future::join_all(tasks))
        .await
        .expect("every waiter finishes");
    for key in ["even", "odd"] {
        let done: Vec<Instant> = all
            .iter()
            .map(|t| t.as_ref().unwrap())
            .filter(|(k, _)| *k == key)
            .flat_map(|(_, d)| d.clone())
            .collect();
        assert_eq!(done.len(), 24, "{key}");
        // 5 per window aligned to the clock's origin (made after `start`): the k-th
        // grant is in window ⌊k/5⌋ or later.
        for (k, at) in since(start, done).into_iter().enumerate() {
            let earliest = window * (k as u32 / 5);
            assert!(
                at + SLACK >= earliest,
                "{key}: grant {k} at {at:?}, before {earliest:?}"
            );
        }
    }
}
