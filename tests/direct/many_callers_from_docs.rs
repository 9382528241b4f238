//! Many callers at once on the in-memory limiters, read from the public docs alone:
//! eight threads at one frozen instant are granted exactly the limit,
//! all-or-nothing keyed calls charge every key or none, and on the real clock
//! threads and tasks never pass a limit and all finish within a generous bound.

use sluicegate::algorithms::{
    AllOf, FixedWindow, LeakyBucket, SlidingLog, SlidingWindowBuckets, SlidingWindowCounter,
};
use sluicegate::clock::ManualClock;
use sluicegate::{CellAlgorithm, KeyedRateLimiter, RateLimiter};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

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
