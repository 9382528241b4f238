//! Many threads and tasks on a Redis Cluster on the real clock, as the README and
//! the keyed limiters' docs promise: one key's limit never passed by eight threads
//! or sixteen tokio tasks, `check_all` charging every key or none, a bursty key
//! granting no more than its burst and rate, and the async API outside tokio, in a
//! second runtime after the first is dropped and while the first is idle.
#![cfg(feature = "redis")]

use super::cluster_common::{multi_thread_runtime, real_time_store, s, OnRedis, MINUTE};
use crate::support::redis as redis_support;
use redis_support::RedisCluster;
use sluicegate::algorithms::{FixedWindow, Limits, SlidingLog, SmoothBursty};
use sluicegate::stores::redis::RedisOptions;
use sluicegate::{DefaultClock, KeyedRateLimiter};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Generous timeouts at the server's time, for tests that only count grants.
fn patient(prefix: &str) -> RedisOptions {
    RedisOptions::default()
        .prefix(prefix)
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
}

/// Runs `per_thread` on 8 threads started together; the sum of what they return.
fn on_eight_threads(per_thread: impl Fn(usize) -> u64 + Sync) -> u64 {
    let barrier = Barrier::new(8);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (barrier, per_thread) = (&barrier, &per_thread);
                scope.spawn(move || {
                    barrier.wait();
                    per_thread(i)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

#[test]
fn eight_threads_sharing_one_key_on_a_cluster_never_exceed_its_limit() {
    let cluster = RedisCluster::start();
    let log = SlidingLog::new(40, MINUTE).unwrap();
    let limiter: OnRedis<SlidingLog, DefaultClock> = KeyedRateLimiter::with_store(
        log,
        real_time_store(&cluster, patient("hot:")),
        DefaultClock::new(),
    );
    let granted = on_eight_threads(|_| {
        (0..25)
            .map(|_| u64::from(limiter.check(&s("hot"), 1).unwrap().is_allowed()))
            .sum()
    });
    assert_eq!(granted, 40, "200 attempts on a limit of 40 a minute");
    assert!(!limiter.try_acquire(&s("hot")));
}

#[test]
fn eight_threads_calling_check_all_on_a_cluster_charge_every_key_or_none() {
    let cluster = RedisCluster::start();
    // 30 a minute (exact) and 1000 a day, per key.
    let limits = Limits::new()
        .with(SlidingLog::new(30, MINUTE).unwrap())
        .with(FixedWindow::new(1000, Duration::from_secs(86_400)).unwrap());
    let options = patient("pairs:").shared_tag("pairs").unwrap();
    let limiter: OnRedis<Limits, DefaultClock> = KeyedRateLimiter::with_store(
        limits,
        real_time_store(&cluster, options),
        DefaultClock::new(),
    );
    let per_thread: Vec<AtomicU64> = (0..8).map(|_| AtomicU64::new(0)).collect();
    let granted = on_eight_threads(|i| {
        let keys = [s("shared"), format!("own:{i}")];
        let mine = (0..20)
            .map(|_| u64::from(limiter.check_all(&keys, 1).unwrap().is_allowed()))
            .sum();
        per_thread[i].store(mine, Ordering::Relaxed);
        mine
    });
    assert_eq!(granted, 30, "160 attempts on the shared key's 30 a minute");
    // Each own key was charged exactly for its thread's grants.
    for (i, mine) in per_thread.iter().enumerate() {
        let mine = mine.load(Ordering::Relaxed);
        let d = limiter.peek(&format!("own:{i}"), 1).unwrap();
        let used = if d.is_allowed() {
            30 - 1 - d.remaining()
        } else {
            30
        };
        assert_eq!(used, mine, "own:{i}: {d:?}");
    }
}

#[test]
fn eight_threads_on_a_bursty_key_on_a_cluster_get_no_more_than_its_burst_and_rate() {
    let cluster = RedisCluster::start();
    let rate = 50.0;
    let limiter: OnRedis<SmoothBursty, DefaultClock> = KeyedRateLimiter::with_store(
        SmoothBursty::new(rate).unwrap(),
        real_time_store(&cluster, patient("bursty:")),
        DefaultClock::new(),
    );
    let start = Instant::now();
    let run_for = Duration::from_millis(800);
    // Each thread calls at least 8 times, however late it starts: 64 calls in
    // all, more than the burst.
    let granted = on_eight_threads(|_| {
        let (mut mine, mut calls) = (0, 0);
        while calls < 8 || start.elapsed() < run_for {
            mine += u64::from(limiter.check(&s("hot"), 1).unwrap().is_allowed());
            calls += 1;
        }
        mine
    });
    let elapsed = start.elapsed().as_secs_f64();
    // A new key holds a full burst (1 s of permits), plus one paid later; then
    // the rate. One more for rounding at the edges of the span.
    let bound = rate + 1.0 + rate * elapsed + 1.0;
    assert!(
        (granted as f64) <= bound,
        "{granted} grants in {elapsed:.3} s, over {bound:.1}"
    );
    assert!(
        granted as f64 >= rate,
        "the burst alone grants {rate}: {granted}"
    );
}

#[test]
fn sixteen_tokio_tasks_sharing_one_key_on_a_cluster_never_exceed_its_limit() {
    let cluster = RedisCluster::start();
    let limiter: OnRedis<SlidingLog, DefaultClock> = KeyedRateLimiter::with_store(
        SlidingLog::new(30, MINUTE).unwrap(),
        real_time_store(&cluster, patient("tasks:")),
        DefaultClock::new(),
    );
    let handle = limiter.to_async();
    let runtime = multi_thread_runtime();
    let granted: u64 = runtime.block_on(async {
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let handle = handle.clone();
                tokio::spawn(async move {
                    let mut mine = 0;
                    for _ in 0..15 {
                        mine += u64::from(handle.check(&s("hot"), 1).await.unwrap().is_allowed());
                    }
                    mine
                })
            })
            .collect();
        let mut sum = 0;
        for task in tasks {
            sum += task.await.unwrap();
        }
        sum
    });
    assert_eq!(granted, 30, "240 attempts on a limit of 30 a minute");
    assert!(!runtime
        .block_on(handle.check(&s("hot"), 1))
        .unwrap()
        .is_allowed());
}

#[test]
fn the_async_api_on_a_cluster_runs_outside_tokio_on_eight_threads_at_once() {
    let cluster = RedisCluster::start();
    let options = patient("outside:").shared_tag("outside").unwrap();
    let limiter: OnRedis<SlidingLog, DefaultClock> = KeyedRateLimiter::with_store(
        SlidingLog::new(24, MINUTE).unwrap(),
        real_time_store(&cluster, options),
        DefaultClock::new(),
    );
    let handle = limiter.to_async();
    let waited = Arc::new(AtomicU64::new(0));
    let granted = on_eight_threads(|i| {
        futures::executor::block_on(async {
            let mut mine = 0;
            for _ in 0..10 {
                mine += u64::from(handle.check(&s("hot"), 1).await.unwrap().is_allowed());
            }
            let pair = [format!("own:{i}"), s("common")];
            let w = handle.acquire_all(&pair, 1).await.unwrap();
            waited.fetch_add(w.as_nanos() as u64, Ordering::Relaxed);
            mine
        })
    });
    assert_eq!(granted, 24, "80 attempts on a limit of 24 a minute");
    assert_eq!(waited.load(Ordering::Relaxed), 0, "8 of 24: no wait");
    // 24 - 8 acquired - the peek's 1.
    assert_eq!(limiter.peek(&s("common"), 1).unwrap().remaining(), 15);
    for i in 0..8 {
        assert_eq!(
            limiter.peek(&format!("own:{i}"), 1).unwrap().remaining(),
            22
        );
    }
}

/// A limiter of 100 a minute on `cluster` whose calls wait at most 1 s.
fn async_limiter(cluster: &RedisCluster, prefix: &str) -> OnRedis<SlidingLog, DefaultClock> {
    let options = RedisOptions::default()
        .prefix(prefix)
        .unwrap()
        .connect_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1));
    KeyedRateLimiter::with_store(
        SlidingLog::new(100, MINUTE).unwrap(),
        real_time_store(cluster, options),
        DefaultClock::new(),
    )
}

#[test]
fn an_async_call_in_a_second_runtime_is_answered_after_the_first_runtime_is_dropped() {
    let cluster = RedisCluster::start();
    let handle = async_limiter(&cluster, "runtimes:").to_async();
    crate::runtimes::second_runtime_after_the_first_is_dropped(&handle);
}

#[test]
fn an_async_call_outside_tokio_is_answered_while_the_runtime_that_called_first_is_idle() {
    let cluster = RedisCluster::start();
    let handle = async_limiter(&cluster, "idle:").to_async();
    crate::runtimes::outside_tokio_while_the_first_runtime_is_idle(&handle);
}
