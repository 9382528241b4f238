//! Many threads and tasks on the real clock sharing one keyed limiter, in memory,
//! over a deny cache and over leases: none passes a key's limit or the lease
//! bounds.

use super::probe_store::{secs, Probe};
use crate::support::rng::Rng;
use sluicegate::algorithms::SlidingLog;
use sluicegate::stores::deny_cache::DenyCache;
use sluicegate::stores::lease::LeasedStore;
use sluicegate::stores::MemoryStore;
use sluicegate::{DefaultClock, KeyedRateLimiter};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// KeyedRateLimiter: thread-safe, one limit per key. Eight threads hammer four
/// `String` keys of one limiter (by `&str`, and in pairs with `check_all`) on the
/// real clock: a sliding log of 40 a minute admits exactly 40 per key, since the
/// test runs well within the minute.
#[test]
fn eight_threads_on_the_real_clock_never_exceed_a_keys_limit() {
    const LIMIT: u64 = 40;
    let log = SlidingLog::new(LIMIT, secs(60)).unwrap();
    let limiter: KeyedRateLimiter<String, SlidingLog> = KeyedRateLimiter::new(log);
    let names = ["k0", "k1", "k2", "k3"];
    let granted: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
    std::thread::scope(|scope| {
        for t in 0..8u64 {
            let (limiter, granted) = (&limiter, &granted);
            scope.spawn(move || {
                let mut rng = Rng::new(100 + t);
                for _ in 0..3_000 {
                    let i = rng.below(4) as usize;
                    match rng.below(3) {
                        0 => {
                            if limiter.try_acquire(names[i]) {
                                granted[i].fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        1 => {
                            if limiter.check(names[i], 1).unwrap().is_allowed() {
                                granted[i].fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        _ => {
                            let j = (i + 1) % 4;
                            let pair = [names[i].to_owned(), names[j].to_owned()];
                            if limiter.check_all(&pair, 1).unwrap().is_allowed() {
                                granted[i].fetch_add(1, Ordering::SeqCst);
                                granted[j].fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    }
                }
            });
        }
    });
    let granted: Vec<u64> = granted.iter().map(|g| g.load(Ordering::SeqCst)).collect();
    assert_eq!(granted, [LIMIT; 4]);
    assert_eq!(limiter.live_keys(), 4);
}

/// AsyncKeyedRateLimiter over a deny cache: sixteen tokio tasks on four worker
/// threads hammer three keys; each key admits exactly its limit, and the cache
/// answers refusals on the async path.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_tasks_over_a_deny_cache_never_exceed_a_keys_limit() {
    const LIMIT: u64 = 25;
    let log = SlidingLog::new(LIMIT, secs(60)).unwrap();
    let store = DenyCache::new(MemoryStore::new(), &log).unwrap();
    let limiter: KeyedRateLimiter<String, _, _, _> =
        KeyedRateLimiter::with_store(log, store, DefaultClock::new());
    let handle = limiter.to_async();
    let granted: Arc<Vec<AtomicU64>> = Arc::new((0..3).map(|_| AtomicU64::new(0)).collect());
    let tasks: Vec<_> = (0..16u64)
        .map(|t| {
            let (handle, granted) = (handle.clone(), Arc::clone(&granted));
            tokio::spawn(async move {
                let mut rng = Rng::new(200 + t);
                for n in 0..500 {
                    let i = rng.below(3) as usize;
                    let key = format!("user:{i}");
                    let ok = if n % 2 == 0 {
                        handle.check(key.as_str(), 1).await.unwrap().is_allowed()
                    } else {
                        handle
                            .try_acquire_n_timeout(key.as_str(), 1, Duration::ZERO)
                            .await
                            .unwrap()
                    };
                    if ok {
                        granted[i].fetch_add(1, Ordering::SeqCst);
                    }
                    if n % 50 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let granted: Vec<u64> = granted.iter().map(|g| g.load(Ordering::SeqCst)).collect();
    assert_eq!(granted, [LIMIT; 3]);
    assert!(
        limiter.store().hits() > 1_000,
        "hits: {}",
        limiter.store().hits()
    );
}

/// stores/lease (Bounds) on the real clock: four limiters, each over its own lease
/// table in front of one shared store, two threads each. A sliding log of 100 a
/// minute, leases of 7 good for a minute: never more than 100 admitted, and at most
/// `N·(L−1)` = 24 left unspent in leases once the store is spent.
#[test]
fn eight_threads_leasing_from_one_store_stay_within_the_lease_bounds() {
    const LIMIT: u64 = 100;
    let log = SlidingLog::new(LIMIT, secs(60)).unwrap();
    let shared = Probe::new(MemoryStore::<u64, SlidingLog>::new());
    let limiters: Vec<_> = (0..4)
        .map(|_| {
            let leased = LeasedStore::new(shared.clone(), 7, secs(60)).unwrap();
            KeyedRateLimiter::with_store(log, leased, DefaultClock::new())
        })
        .collect();
    let admitted = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for t in 0..8 {
            let (limiter, admitted) = (&limiters[t / 2], &admitted);
            scope.spawn(move || {
                for _ in 0..2_000 {
                    if limiter.try_acquire(&5) {
                        admitted.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    let admitted = admitted.load(Ordering::SeqCst);
    assert_eq!(shared.granted(), LIMIT);
    assert!(
        (LIMIT - 4 * 6..=LIMIT).contains(&admitted),
        "{admitted} admitted"
    );
}
