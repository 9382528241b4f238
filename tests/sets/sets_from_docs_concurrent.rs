//! Sets of limits (`AllOf`, `Limits`) under concurrent callers on the real clock,
//! held to the documentation alone: `multi`'s "concurrent callers see a set change
//! all its members at once or not at all", so threads and tasks never get more
//! than the tightest member allows, through the direct limiter, the keyed
//! `check_all`, the async keyed handle, blocking acquires and timed tries.

use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket, Limits, SlidingLog, SmoothBursty};
use sluicegate::clock::{Clock, Nanos};
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SECOND: Nanos = 1_000_000_000;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Sixteen threads on the real clock never get more from a set than its tightest
/// member allows (`multi`: "concurrent callers see a set change all its members at
/// once or not at all"), through the direct limiter, the keyed `check_all` and the
/// async keyed handle on a multi-thread runtime.
#[test]
fn concurrent_callers_on_the_real_clock_get_exactly_the_tightest_member() {
    const TRIES: u64 = 400;
    let hour = secs(3600);
    let direct = RateLimiter::new(AllOf::new((
        SlidingLog::new(40, hour).unwrap(),
        FixedWindow::new(25, hour).unwrap(),
        SmoothBursty::new(1_000_000.0).unwrap(),
    )));
    let keyed = KeyedRateLimiter::<String, _>::new(
        Limits::new()
            .with(FixedWindow::new(30, hour).unwrap())
            .with(SlidingLog::new(1_000, hour).unwrap()),
    );
    let granted_direct = Arc::new(AtomicU64::new(0));
    let granted_keyed = Arc::new(AtomicU64::new(0));
    let mine: Vec<AtomicU64> = (0..16).map(|_| AtomicU64::new(0)).collect();
    let deadline = Instant::now() + secs(20);
    std::thread::scope(|s| {
        for t in 0..16 {
            let mine = &mine;
            let (direct, keyed) = (direct.clone(), keyed.clone());
            let (gd, gk) = (Arc::clone(&granted_direct), Arc::clone(&granted_keyed));
            s.spawn(move || {
                let own = format!("thread-{t}");
                for _ in 0..TRIES {
                    assert!(Instant::now() < deadline, "the hammer is stuck");
                    if direct.try_acquire() {
                        gd.fetch_add(1, Ordering::Relaxed);
                    }
                    let keys = ["shared".to_owned(), own.clone()];
                    if keyed.check_all(&keys, 1).unwrap().is_allowed() {
                        gk.fetch_add(1, Ordering::Relaxed);
                        mine[t].fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(granted_direct.load(Ordering::Relaxed), 25);
    assert_eq!(granted_keyed.load(Ordering::Relaxed), 30);
    // Every thread's own key was charged exactly its grants.
    for (t, mine) in mine.iter().enumerate() {
        let n = mine.load(Ordering::Relaxed);
        let key = format!("thread-{t}");
        // What is left of the window takes the rest at once, one more never fits.
        if n < 30 {
            assert!(
                keyed.peek(&key, 30 - n).unwrap().is_allowed(),
                "thread {t}: {n}"
            );
        }
        assert!(
            !keyed.peek(&key, 30 - n + 1).unwrap().is_allowed(),
            "thread {t}: {n}"
        );
    }

    let tasks = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap();
    let handle = KeyedRateLimiter::<&str, _>::new(AllOf::new((
        FixedWindow::new(1_000, hour).unwrap(),
        LeakyBucket::meter(17, 1, hour).unwrap(),
    )))
    .to_async();
    let granted: u64 = tasks.block_on(async {
        let runs: Vec<_> = (0..8)
            .map(|_| {
                let handle = handle.clone();
                tokio::spawn(async move {
                    let mut n = 0;
                    for _ in 0..50 {
                        if handle.check(&"k", 1).await.unwrap().is_allowed() {
                            n += 1;
                        }
                        tokio::task::yield_now().await;
                    }
                    n
                })
            })
            .collect();
        let mut total = 0;
        for run in runs {
            total += run.await.unwrap();
        }
        total
    });
    assert_eq!(granted, 17);
}

/// Blocking acquires from eight threads on the real clock: every caller is
/// granted, and the set's tightest member (a leaky bucket of 4, one more every
/// 20 ms) spaces them, so the last grant comes at least 20 ms per caller past the
/// burst; the window member (3 per 10 minutes for a single key) never lets a
/// fourth through the keyed calls.
#[test]
fn blocking_acquires_from_threads_wait_for_every_member() {
    let limiter = RateLimiter::new(AllOf::new((
        LeakyBucket::meter(4, 1, Duration::from_millis(20)).unwrap(),
        SmoothBursty::new(1_000.0).unwrap(),
    )));
    let start = limiter.clock().now();
    std::thread::scope(|s| {
        for _ in 0..8 {
            let limiter = limiter.clone();
            s.spawn(move || {
                for _ in 0..2 {
                    limiter.acquire().unwrap();
                }
            });
        }
    });
    // The meter's bound, at most b + r·t over any span t: 16 grants from a bucket
    // of 4 that refills one every 20 ms span at least 12 refills.
    let elapsed = limiter.clock().now() - start;
    assert!(4 + elapsed / 20_000_000 >= 16, "16 grants in {elapsed} ns");
    assert!(elapsed < 20 * SECOND, "{elapsed} ns");

    let keyed = KeyedRateLimiter::<u8, _>::new(AllOf::new((
        FixedWindow::new(3, secs(600)).unwrap(),
        SmoothBursty::new(1_000.0).unwrap(),
    )));
    let granted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                let ok = keyed
                    .try_acquire_n_timeout(&7, 1, Duration::from_millis(50))
                    .unwrap();
                if ok {
                    granted.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    assert_eq!(granted.load(Ordering::Relaxed), 3);
}
