//! The store wrappers stacked on each other over a Redis server that fails, as the
//! README ("Operating the Redis store") and the docs of `stores::deny_cache`,
//! `stores::failover` and `stores::lease` describe them: a deny cache over a
//! failover store and a failover store over a deny cache, a failover store over
//! leases, eight threads over leases through a pause, a deny cache that keeps no
//! local share's refusals, and async calls through the stacks on a paused server.
//! The "no round trip" claims are counted with the server's own `INFO
//! commandstats`.
#![cfg(feature = "redis")]

use super::operating_common::{
    bounded, fcalls_settled, redis, remaining_on_redis, year_window, Failover, Fw, Redis, TIMEOUT,
};
use crate::support::redis as redis_support;
use redis_support::{calls, unique_prefix, RedisServer};
use sluicegate::clock::ManualClock;
use sluicegate::stores::deny_cache::DenyCache;
use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy};
use sluicegate::stores::lease::LeasedStore;
use sluicegate::{Decision, DefaultClock, KeyedRateLimiter, Source};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

#[test]
fn a_deny_cache_over_a_failover_store_keeps_refusing_the_hot_key_and_never_caches_the_policy_s_answers_eight_threads(
) {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("cache-over-failover");
    let limit = 5;
    let window = year_window(limit);
    let failover: Failover<DefaultClock> =
        FailoverStore::new(redis(&server, &prefix), FailurePolicy::Closed)
            .with_backoff(Backoff::fixed(Duration::from_millis(300)));
    let store = DenyCache::new(failover, &window).unwrap();
    let limiter = Arc::new(KeyedRateLimiter::with_store(
        window,
        store,
        DefaultClock::new(),
    ));
    let mut admin = server.connection();

    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads + 1));
    let granted = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (limiter, barrier, granted) = (
                Arc::clone(&limiter),
                Arc::clone(&barrier),
                Arc::clone(&granted),
            );
            std::thread::spawn(move || {
                for _ in 0..10 {
                    let d = limiter.check("hot", 1).unwrap();
                    if d.is_allowed() {
                        assert_eq!(d.source(), Source::Store);
                        granted.fetch_add(1, Ordering::Relaxed);
                    } else {
                        assert!(
                            matches!(d.source(), Source::Store | Source::Cached),
                            "{d:?}"
                        );
                    }
                }
                barrier.wait(); // healthy phase done
                barrier.wait(); // server paused
                let mut sources = Vec::new();
                for _ in 0..10 {
                    let d = bounded("cached while paused", TIMEOUT, || limiter.check("hot", 1))
                        .unwrap();
                    assert!(!d.is_allowed());
                    sources.push(d.source());
                }
                let cold = format!("cold-{t}");
                let d = bounded("cold while paused", TIMEOUT, || limiter.check(&cold, 1)).unwrap();
                (sources, d)
            })
        })
        .collect();
    barrier.wait();
    assert_eq!(
        granted.load(Ordering::Relaxed),
        limit,
        "the hot key's grants"
    );
    let before = calls(&mut admin, "fcall");
    let hits_before = limiter.store().hits();
    server.pause();
    barrier.wait();
    for handle in handles {
        let (sources, cold) = handle.join().unwrap();
        assert!(sources.iter().all(|s| *s == Source::Cached), "{sources:?}");
        assert_eq!(
            (cold.source(), cold.is_allowed()),
            (Source::FailedClosed, false)
        );
    }
    assert_eq!(limiter.store().hits(), hits_before + 80);
    assert_eq!(
        limiter.store().len(),
        1,
        "only the store's own refusal is kept"
    );
    server.resume();
    let failures = limiter.store().inner().stats().failures;
    assert!((1..=threads as u64).contains(&failures), "{failures}");
    assert_eq!(
        fcalls_settled(&mut admin),
        before + failures,
        "only the failed calls were sent"
    );
    for t in 0..threads {
        assert_eq!(
            remaining_on_redis(&server, &prefix, limit, &format!("cold-{t}")),
            limit
        );
    }

    // Once the back-off is over, a key the policy refused is asked again.
    std::thread::sleep(Duration::from_millis(400));
    let d = limiter.check("cold-0", 1).unwrap();
    assert_eq!((d.source(), d.is_allowed()), (Source::Store, true));
}

#[test]
fn a_failover_store_over_a_deny_cache_answers_cached_refusals_without_failing_until_another_call_fails(
) {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("failover-over-cache");
    let clock = ManualClock::new();
    let window = year_window(2);
    let cache = DenyCache::new(redis(&server, &prefix), &window).unwrap();
    let store = FailoverStore::new(cache, FailurePolicy::Open).with_clock(clock.clone());
    let limiter = KeyedRateLimiter::with_store(window, store, clock.clone());
    assert!(limiter.try_acquire("hot") && limiter.try_acquire("hot"));
    assert_eq!(limiter.check("hot", 1).unwrap().source(), Source::Store);

    server.kill();
    // The cache answers without asking the dead server: no failure.
    let d = bounded("cached", TIMEOUT, || limiter.check("hot", 1)).unwrap();
    assert_eq!((d.source(), d.is_allowed()), (Source::Cached, false));
    assert!(!limiter.store().is_degraded());
    assert_eq!(limiter.store().stats().failures, 0);
    assert_eq!(limiter.store().inner().hits(), 1);

    // Another key fails; from then on the policy answers every call, the hot
    // key's too (the cache sits below the failover store).
    let cold = bounded("cold", TIMEOUT, || limiter.check("cold", 1)).unwrap();
    assert_eq!(
        (cold.source(), cold.is_allowed()),
        (Source::Unchecked, true)
    );
    let hot = limiter.check("hot", 1).unwrap();
    assert_eq!(hot.source(), Source::Unchecked);
    assert_eq!(limiter.store().stats().failures, 1);
}

type Leased = LeasedStore<Redis, String, Fw>;

#[test]
fn a_failover_store_over_leases_spends_the_lease_while_paused_and_the_lease_that_timed_out_never_lands(
) {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("failover-over-lease");
    let clock = ManualClock::new();
    let leased: Leased =
        LeasedStore::new(redis(&server, &prefix), 5, Duration::from_secs(3600)).unwrap();
    let store = FailoverStore::new(leased, FailurePolicy::Closed).with_clock(clock.clone());
    let limiter = KeyedRateLimiter::with_store(year_window(100), store, clock.clone());
    let mut admin = server.connection();

    let first = limiter.check("k", 1).unwrap();
    assert_eq!((first.source(), first.remaining()), (Source::Leased, 99));
    assert_eq!(remaining_on_redis(&server, &prefix, 100, "k"), 95);
    let before = calls(&mut admin, "fcall");

    server.pause();
    for left in [98, 97, 96, 95] {
        let d = bounded("from the lease", TIMEOUT, || limiter.check("k", 1)).unwrap();
        assert_eq!((d.source(), d.remaining()), (Source::Leased, left));
    }
    // The lease is spent: the next one is asked of the paused server.
    let d = bounded("new lease", TIMEOUT, || limiter.check("k", 1)).unwrap();
    assert_eq!((d.source(), d.is_allowed()), (Source::FailedClosed, false));
    let d = bounded("backed off", TIMEOUT, || limiter.check("k", 1)).unwrap();
    assert_eq!(d.source(), Source::FailedClosed);
    server.resume();

    assert_eq!(fcalls_settled(&mut admin), before + 1);
    assert_eq!(
        remaining_on_redis(&server, &prefix, 100, "k"),
        95,
        "the lease that timed out landed"
    );

    clock.advance(Duration::from_secs(1));
    let d = limiter.check("k", 1).unwrap();
    assert_eq!((d.source(), d.remaining()), (Source::Leased, 94));
    assert_eq!(remaining_on_redis(&server, &prefix, 100, "k"), 90);
}

#[test]
fn eight_threads_over_leases_through_a_pause_never_admit_more_than_redis_counted() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("lease-threads");
    let limit = 60;
    let size = 5;
    let leased: Leased =
        LeasedStore::new(redis(&server, &prefix), size, Duration::from_secs(3600)).unwrap();
    let store: FailoverStore<Leased, String, Fw> = FailoverStore::new(leased, FailurePolicy::Open)
        .with_backoff(Backoff::fixed(Duration::from_secs(60)));
    let limiter = Arc::new(KeyedRateLimiter::with_store(
        year_window(limit),
        store,
        DefaultClock::new(),
    ));

    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (limiter, barrier) = (Arc::clone(&limiter), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let mut decided = Vec::new();
                for _ in 0..6 {
                    decided.push(limiter.check("hot", 1).unwrap());
                }
                barrier.wait();
                barrier.wait();
                for _ in 0..6 {
                    decided.push(bounded("paused", TIMEOUT, || limiter.check("hot", 1)).unwrap());
                }
                decided
            })
        })
        .collect();
    barrier.wait();
    server.pause();
    barrier.wait();
    let decided: Vec<Decision> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    server.resume();
    std::thread::sleep(Duration::from_millis(300));

    let checked = decided
        .iter()
        .filter(|d| d.is_allowed() && matches!(d.source(), Source::Leased | Source::Store))
        .count() as u64;
    for d in &decided {
        assert!(
            matches!(
                d.source(),
                Source::Leased | Source::Store | Source::Unchecked
            ),
            "{d:?}"
        );
    }
    let consumed = limit - remaining_on_redis(&server, &prefix, limit, "hot");
    // Every checked grant left Redis first; at most one lease of this process
    // holds unspent permits.
    assert!(checked <= limit, "{checked}");
    assert!(
        consumed >= checked,
        "consumed {consumed} < granted {checked}"
    );
    assert!(
        consumed <= checked + (size - 1),
        "consumed {consumed}, granted {checked}"
    );
    assert!(limiter.store().stats().failures >= 1);
}

#[test]
fn a_deny_cache_does_not_keep_a_local_share_s_refusals() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("cache-local");
    let clock = ManualClock::new();
    let window = year_window(10);
    let failover = FailoverStore::new(
        redis(&server, &prefix),
        FailurePolicy::Local(year_window(1)),
    )
    .with_clock(clock.clone());
    let store = DenyCache::new(failover, &window).unwrap();
    let limiter = KeyedRateLimiter::with_store(window, store, clock.clone());
    assert!(limiter.try_acquire("k"));
    server.kill();
    let granted = limiter.check("k", 1).unwrap();
    assert_eq!(
        (granted.source(), granted.is_allowed()),
        (Source::Local, true)
    );
    for _ in 0..3 {
        let refused = limiter.check("k", 1).unwrap();
        assert_eq!(
            (refused.source(), refused.is_allowed()),
            (Source::Local, false)
        );
    }
    assert!(limiter.store().is_empty());
    assert_eq!(limiter.store().hits(), 0);
}

#[test]
fn async_calls_through_the_stacks_on_a_paused_server_answer_from_the_cache_the_lease_and_the_policy(
) {
    let mut server = RedisServer::start_own();
    let rt = redis_support::current_thread_runtime();
    let clock = ManualClock::new();

    // A deny cache over a closed failover store.
    let cached_prefix = unique_prefix("async-cache");
    let window = year_window(2);
    let failover = FailoverStore::new(redis(&server, &cached_prefix), FailurePolicy::Closed)
        .with_clock(clock.clone());
    let cached = KeyedRateLimiter::with_store(
        window,
        DenyCache::new(failover, &window).unwrap(),
        clock.clone(),
    )
    .to_async();
    // A closed failover store over leases of 5.
    let leased_prefix = unique_prefix("async-lease");
    let leased: Leased =
        LeasedStore::new(redis(&server, &leased_prefix), 5, Duration::from_secs(3600)).unwrap();
    let over_lease = KeyedRateLimiter::with_store(
        year_window(100),
        FailoverStore::new(leased, FailurePolicy::Closed).with_clock(clock.clone()),
        clock.clone(),
    )
    .to_async();

    rt.block_on(async {
        assert!(cached.check("hot", 1).await.unwrap().is_allowed());
        assert!(cached.check("hot", 1).await.unwrap().is_allowed());
        assert_eq!(
            cached.check("hot", 1).await.unwrap().source(),
            Source::Store
        );
        let first = over_lease.check("k", 1).await.unwrap();
        assert_eq!((first.source(), first.remaining()), (Source::Leased, 99));
    });
    server.pause();
    for _ in 0..3 {
        let d = bounded("cached", TIMEOUT, || rt.block_on(cached.check("hot", 1))).unwrap();
        assert_eq!((d.source(), d.is_allowed()), (Source::Cached, false));
    }
    let d = bounded("cold", TIMEOUT, || rt.block_on(cached.check("cold", 1))).unwrap();
    assert_eq!(d.source(), Source::FailedClosed);
    for left in [98, 97, 96, 95] {
        let d = bounded("leased", TIMEOUT, || rt.block_on(over_lease.check("k", 1))).unwrap();
        assert_eq!((d.source(), d.remaining()), (Source::Leased, left));
    }
    let d = bounded("new lease", TIMEOUT, || {
        rt.block_on(over_lease.check("k", 1))
    })
    .unwrap();
    assert_eq!(d.source(), Source::FailedClosed);
    server.resume();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(remaining_on_redis(&server, &cached_prefix, 2, "cold"), 2);
    assert_eq!(remaining_on_redis(&server, &leased_prefix, 100, "k"), 95);
    assert_eq!(cached.blocking().store().hits(), 3);
}
