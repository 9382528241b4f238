//! The client layer over a remote store, checked against its documentation alone
//! ("Built from any `Permits` (... memory or remote)"): tokio tasks sharing a
//! client over a keyed limiter on a real Redis keep to its rate, and a store that
//! cannot be reached fails the request typed and unsent.
#![cfg(all(feature = "redis", feature = "tower"))]

use super::client_common::assert_each_send_after_its_turn;
use crate::support::adapters::unbursting;
use sluicegate::adapters::client::{ClientError, ClientLayer};
use sluicegate::algorithms::SmoothBursty;
use sluicegate::{Error, KeyedRateLimiter};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tower::{service_fn, Layer, ServiceExt};

/// `ClientLayer`: "Built from any `Permits` (a direct or keyed limiter, any
/// algorithm, set and store, memory or remote)": eight tasks share a client over a
/// keyed limiter on a real Redis, and keep to its rate.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_over_the_redis_store_paces_concurrent_tasks() {
    use crate::support::redis::{unique_prefix, RedisServer};
    use sluicegate::clock::DefaultClock;
    use sluicegate::stores::redis::{RedisOptions, RedisStore};

    let server = tokio::task::spawn_blocking(RedisServer::start_own)
        .await
        .unwrap();
    let options = RedisOptions::default()
        .prefix(unique_prefix("client-from-docs"))
        .unwrap();
    let store: RedisStore<String, SmoothBursty> =
        RedisStore::open_with(server.url(), options).unwrap();
    let limiter = KeyedRateLimiter::with_store(unbursting(10.0), store, DefaultClock::new());
    let sends: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let client = {
        let sends = sends.clone();
        ClientLayer::with_weigher(limiter, |_: &u32| ("api".to_owned(), 1)).layer(service_fn(
            move |n: u32| {
                sends.lock().unwrap().push(Instant::now());
                async move { Ok::<_, Infallible>(n) }
            },
        ))
    };
    let start = Instant::now();
    let tasks: Vec<_> = (0..8u32)
        .map(|task| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in 0..2 {
                    client.clone().oneshot(task * 10 + i).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = start.elapsed();
    let sends = sends.lock().unwrap().clone();
    assert_eq!(sends.len(), 16);
    // One turn of 100 ms each, after the first reservation (made after `start`);
    // 15 ms for the server's clock, in whole microseconds, and `Instant` reading
    // apart.
    assert_each_send_after_its_turn(
        &sends,
        start,
        Duration::from_millis(100),
        Duration::from_millis(15),
    );
    assert!(elapsed < Duration::from_secs(8), "took {elapsed:?}");
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .unwrap();
}

/// `ClientError::Throttled`: "Not sent: ... or a store's error": a store that
/// cannot be reached fails the request typed, unsent, without a panic or a hang.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreachable_store_fails_the_request_typed_and_unsent() {
    use crate::support::redis::unreachable_store;
    use sluicegate::clock::DefaultClock;
    use sluicegate::stores::redis::RedisStore;

    // A port nothing listens on (bound, read, released).
    let store: RedisStore<String, SmoothBursty> = unreachable_store("client-from-docs-down");
    let limiter =
        KeyedRateLimiter::with_store(SmoothBursty::new(10.0).unwrap(), store, DefaultClock::new());
    let calls = Arc::new(AtomicUsize::new(0));
    let client = {
        let calls = calls.clone();
        ClientLayer::with_weigher(limiter, |_: &u32| ("api".to_owned(), 1)).layer(service_fn(
            move |n: u32| {
                calls.fetch_add(1, Ordering::SeqCst);
                async move { Ok::<_, Infallible>(n) }
            },
        ))
    };
    let outcome = tokio::time::timeout(Duration::from_secs(5), client.oneshot(1))
        .await
        .expect("the store's failure comes back, not a hang");
    assert!(
        matches!(outcome, Err(ClientError::Throttled(Error::Store(_)))),
        "{outcome:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0, "a request was sent");
}
