//! The Redis store over TLS (feature `redis-tls`, `rediss://`), as the
//! `stores::redis` docs ("TLS", "Blocking and async") describe it, with the
//! wrappers over it: a TLS Cluster shared by blocking threads and async tasks
//! never admitting over the limit; a TLS Cluster node paused under a fail-closed
//! policy, every call answered in time and none that gave up applied late; and the
//! deny cache and leases over a TLS server saving their round trips.
//!
//! The servers are started here with certificates from the test CA, which this
//! process trusts (`SSL_CERT_FILE`), with ring as rustls's crypto provider (the
//! crate leaves that choice to the application).
#![cfg(feature = "redis-tls")]

use super::failover_on_cluster_from_docs::{
    assert_bounded, on_eight_threads, short_timeouts, Call, MARGIN, TIMEOUT,
};
use super::wrappers_on_cluster_from_docs::key_on_node;
use crate::support::redis as redis_support;
use redis_support::trace::caller_time_options;
use redis_support::{calls, current_thread_runtime, trust_test_ca, RedisCluster, RedisServer};
use sluicegate::algorithms::{FixedWindow, SlidingLog};
use sluicegate::stores::deny_cache::DenyCache;
use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy};
use sluicegate::stores::lease::LeasedStore;
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::{DefaultClock, KeyedRateLimiter, ManualClock, Source};
use std::time::{Duration, Instant};

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn eight_threads_and_eight_tasks_on_one_key_of_a_tls_cluster_get_exactly_its_limit() {
    let cluster = RedisCluster::start_tls();
    trust_test_ca();
    let options = RedisOptions::default()
        .prefix("tls-many:")
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5));
    let store: RedisStore<String, SlidingLog> =
        RedisStore::open_cluster(cluster.tls_urls(), options).unwrap();
    let limiter = KeyedRateLimiter::with_store(
        SlidingLog::new(40, HOUR).unwrap(),
        store,
        DefaultClock::new(),
    );
    let handle = limiter.to_async();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let granted = std::thread::scope(|scope| {
        let tasks = scope.spawn(|| {
            runtime.block_on(async {
                let tasks: Vec<_> = (0..8)
                    .map(|_| {
                        let handle = handle.clone();
                        tokio::spawn(async move {
                            let mut granted = 0;
                            for _ in 0..10 {
                                granted += u64::from(
                                    handle.check("shared", 1).await.unwrap().is_allowed(),
                                );
                            }
                            granted
                        })
                    })
                    .collect();
                let mut sum = 0;
                for task in tasks {
                    sum += task.await.unwrap();
                }
                sum
            })
        });
        let threads: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    (0..10)
                        .filter(|_| limiter.check("shared", 1).unwrap().is_allowed())
                        .count() as u64
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum::<u64>() + tasks.join().unwrap()
    });
    assert_eq!(granted, 40, "160 calls on a limit of 40");
}

#[test]
fn fail_closed_over_a_paused_tls_node_answers_in_time_and_no_call_that_gave_up_lands() {
    let mut cluster = RedisCluster::start_tls();
    trust_test_ca();
    let log = SlidingLog::new(10, HOUR).unwrap();
    let store = FailoverStore::new(
        short_timeouts(cluster.tls_urls(), "tls-fo:"),
        FailurePolicy::Closed,
    )
    .with_backoff(Backoff::fixed(Duration::from_millis(300)));
    let limiter = KeyedRateLimiter::with_store(log, store, DefaultClock::new());
    // The plain cluster ports see the same slots as the TLS ones.
    let victim = key_on_node(&cluster, 0, |k| limiter.store().inner().server_key(k));
    let d = limiter.check(&victim, 1).unwrap();
    assert_eq!((d.source(), d.remaining()), (Source::Store, 9));
    cluster.pause_node(0);
    let keys = [victim.clone()];
    let outage = on_eight_threads(&keys, 6, Duration::from_millis(40), |k| limiter.check(k, 1));
    cluster.resume_node(0);
    assert_bounded(&outage);
    for Call { decision, .. } in &outage {
        assert_eq!(
            (decision.source(), decision.is_allowed()),
            (Source::FailedClosed, false)
        );
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    let d = loop {
        let d = limiter.check(&victim, 1).unwrap();
        if d.source() == Source::Store {
            break d;
        }
        assert!(
            Instant::now() < deadline,
            "the store never decided again: {d:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        (d.is_allowed(), d.remaining()),
        (true, 8),
        "only the grant before the pause counted"
    );
    let took = Instant::now();
    let _ = limiter.check(&victim, 1).unwrap();
    assert!(took.elapsed() <= TIMEOUT + MARGIN);
}

#[test]
fn a_deny_cache_and_leases_over_a_tls_server_save_their_round_trips_blocking_and_async() {
    let server = RedisServer::start_own_tls();
    trust_test_ca();
    let window = FixedWindow::new(2, HOUR).unwrap();
    let open = |prefix: &str| -> RedisStore<String, FixedWindow> {
        RedisStore::open_with(server.tls_url(), caller_time_options(prefix)).unwrap()
    };
    let fcalls = || calls(&mut server.connection(), "fcall");
    let cache = DenyCache::new(open("tls-dc:"), &window).unwrap();
    let cached = KeyedRateLimiter::with_store(window, cache, ManualClock::new());
    let runtime = current_thread_runtime();
    let handle = cached.to_async();
    for _ in 0..2 {
        assert!(cached.check("k", 1).unwrap().is_allowed());
    }
    assert_eq!(
        runtime.block_on(handle.check("k", 1)).unwrap().source(),
        Source::Store
    );
    let sent = fcalls();
    for _ in 0..3 {
        assert_eq!(cached.check("k", 1).unwrap().source(), Source::Cached);
        assert_eq!(
            runtime.block_on(handle.check("k", 1)).unwrap().source(),
            Source::Cached
        );
    }
    assert_eq!((fcalls(), cached.store().hits()), (sent, 6));

    let window = FixedWindow::new(100, HOUR).unwrap();
    let lease = LeasedStore::new(open("tls-lease:"), 10, HOUR).unwrap();
    let leased = KeyedRateLimiter::with_store(window, lease, ManualClock::new());
    let handle = leased.to_async();
    let sent = fcalls();
    for i in 0..20u64 {
        let d = if i % 2 == 0 {
            leased.check("k", 1).unwrap()
        } else {
            runtime.block_on(handle.check("k", 1)).unwrap()
        };
        assert_eq!(
            (d.source(), d.remaining()),
            (Source::Leased, 99 - i),
            "call {i}"
        );
    }
    assert_eq!(fcalls() - sent, 2, "one round trip per lease of 10");
}
