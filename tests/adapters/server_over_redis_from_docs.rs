//! The server layer over a Redis server the test starts itself, at the caller's
//! (virtual) time or the server's, as its public docs describe it: a request
//! waiting on a paused Redis blocks no thread, keys and costs get the documented
//! fields, sixteen concurrent clients get exactly the limit, and a queue with a
//! delay spaces requests one interval apart.
#![cfg(all(feature = "redis", feature = "tower"))]

use super::server_http::{cost_of, get, hammer};
use super::server_redis_common::{minute, options};
use crate::support::adapters::{client_of, counted_app, serve};
use crate::support::redis::trace::caller_time_options;
use crate::support::redis::{unique_prefix, RedisServer};
use axum::body::Body;
use http::Request;
use sluicegate::adapters::server::ServerLayer;
use sluicegate::algorithms::{FixedWindow, LeakyBucket, SlidingLog};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::KeyedRateLimiter;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// README: with Redis the layer "awaits the store, blocking no thread". On a
/// single-threaded runtime, a request waiting for a paused Redis must not stop
/// a free request (which needs no store) from being served meanwhile.
#[tokio::test(flavor = "current_thread")]
async fn a_request_waiting_on_a_paused_redis_blocks_no_thread() {
    let mut redis = RedisServer::start_own();
    let slow = caller_time_options(&unique_prefix("srv-docs-no-block"));
    let store: RedisStore<String, FixedWindow> = RedisStore::open_with(redis.url(), slow).unwrap();
    let limiter = KeyedRateLimiter::with_store(minute(5), store, ManualClock::new());
    let weigher = |r: &Request<Body>| (client_of(r), cost_of(r));
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::with_weigher(limiter, weigher))).await;
    let client = reqwest::Client::new();
    assert_eq!(get(&client, &base, &[]).await.status, 200); // connected

    redis.pause();
    let waiting = tokio::spawn({
        let (client, base) = (client.clone(), base.clone());
        async move { get(&client, &base, &[]).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let free = get(&client, &base, &[("x-cost", "0")]).await;
    assert_eq!(free.status, 200);
    assert!(
        !waiting.is_finished(),
        "the paused round trip was answered before the free request"
    );
    redis.resume();
    // Resumed well within its 5 s response timeout: Redis answers it.
    let answered = waiting.await.unwrap();
    assert_eq!(
        (answered.status, answered.field("ratelimit")),
        (200, r#""default";r=3;t=60"#.to_owned())
    );
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

/// Keys and costs over Redis give the fields the docs give them in memory
/// (README: "the same decisions as the in-memory store").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_redis_keys_and_costs_get_the_documented_fields_at_known_instants() {
    let redis = RedisServer::start_own();
    let clock = ManualClock::new();
    clock.advance(Duration::from_millis(15_250));
    let store: RedisStore<String, FixedWindow> =
        RedisStore::open_with(redis.url(), options("srv-docs-costs")).unwrap();
    let limiter = KeyedRateLimiter::with_store(minute(5), store, clock.clone());
    let weigher = |r: &Request<Body>| (client_of(r), cost_of(r));
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::with_weigher(limiter, weigher))).await;
    let client = reqwest::Client::new();
    let ann = |cost: &'static str| [("x-client", "ann"), ("x-cost", cost)];

    let three = get(&client, &base, &ann("3")).await;
    assert_eq!(
        (three.status, three.field("ratelimit")),
        (200, r#""default";r=2;t=45"#.to_owned())
    );
    let refused = get(&client, &base, &ann("3")).await;
    assert_eq!(
        (refused.status, refused.field("retry-after")),
        (429, "45".to_owned())
    );
    assert_eq!(refused.field("ratelimit"), r#""default";r=0;t=45"#);
    let never = get(&client, &base, &ann("6")).await;
    assert_eq!(
        (
            never.status,
            never.field("ratelimit"),
            never.get("retry-after")
        ),
        (400, r#""default";r=2"#.to_owned(), None)
    );
    let bob = get(&client, &base, &[("x-client", "bob"), ("x-cost", "5")]).await;
    assert_eq!(
        (bob.status, bob.field("ratelimit")),
        (200, r#""default";r=0;t=45"#.to_owned())
    );
    let two = get(&client, &base, &ann("2")).await;
    assert_eq!(
        (two.status, two.field("ratelimit")),
        (200, r#""default";r=0;t=45"#.to_owned())
    );
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

/// Sixteen concurrent clients over HTTP, the limit kept in Redis at the
/// server's time: a sliding log grants exactly its limit per key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_clients_over_redis_get_exactly_the_limit() {
    let redis = RedisServer::start_own();
    let options = RedisOptions::default()
        .prefix(unique_prefix("srv-docs-16"))
        .unwrap();
    let store: RedisStore<String, SlidingLog> =
        RedisStore::open_with(redis.url(), options).unwrap();
    let log = SlidingLog::new(10, Duration::from_secs(60)).unwrap();
    let limiter = KeyedRateLimiter::with_store(log, store, sluicegate::DefaultClock::new());
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::keyed(limiter, client_of))).await;

    let seen = hammer(&base, 16, 3, |i| format!("k{}", i % 2)).await;
    for key in ["k0", "k1"] {
        let statuses: Vec<u16> = seen
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, s)| s.status)
            .collect();
        let granted = statuses.iter().filter(|s| **s == 200).count();
        assert_eq!(
            (statuses.len(), granted),
            (24, 10),
            "key {key}: {statuses:?}"
        );
        assert!(
            statuses.iter().all(|s| *s == 200 || *s == 429),
            "{statuses:?}"
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 20);
}

/// `delay_up_to` over Redis: the held request waits in its response future
/// ("the limiter's async acquire ... on the limiter's clock"), and "over a
/// `LeakyBucket::queue` with room, requests leave one interval apart".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_redis_a_queue_with_a_delay_spaces_requests_one_interval_apart() {
    let redis = RedisServer::start_own();
    let clock = ManualClock::new();
    let store: RedisStore<String, LeakyBucket> =
        RedisStore::open_with(redis.url(), options("srv-docs-queue")).unwrap();
    let queue = LeakyBucket::queue(4, 2, Duration::from_secs(1)).unwrap();
    let limiter = KeyedRateLimiter::with_store(queue, store, clock.clone());
    let layer = ServerLayer::keyed(limiter, client_of).delay_up_to(Duration::from_secs(1));
    let (router, runs) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();

    let mut sent = Vec::new();
    for _ in 0..4 {
        let seen = get(&client, &base, &[]).await;
        sent.push((seen.status, clock.now() / 1_000_000, seen.present()));
    }
    let all = vec!["ratelimit", "ratelimit-policy"];
    let policy = vec!["ratelimit-policy"];
    assert_eq!(
        sent,
        [
            (200, 0, all),
            (200, 500, policy.clone()),
            (200, 1000, policy.clone()),
            (200, 1500, policy)
        ]
    );
    assert_eq!(runs.load(Ordering::SeqCst), 4);
}
