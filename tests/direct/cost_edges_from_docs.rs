//! Costs at their documented edges, read from the public docs alone: zero costs and
//! empty key lists are refused by every keyed call and take nothing, costs above
//! capacity are never on every direct and keyed front end and charge nothing, and
//! extreme rates grant at once or end in never without panicking.

use super::edges_common::FOREVER;
use sluicegate::algorithms::{
    Counting, FixedWindow, LeakyBucket, SlidingLog, SlidingWindowBuckets, SlidingWindowCounter,
    SmoothBursty,
};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{CellAlgorithm, Error, KeyedRateLimiter, RateLimiter, Verdict};
use std::time::Duration;

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
