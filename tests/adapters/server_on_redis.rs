//! The server layer over the Redis store, on a real server at the caller's
//! (virtual) time: every response carries exactly the fields the in-memory store
//! gives, one `RateLimit` item per limit of a set, each limit's standing coming
//! back in the same round trip as the check.
#![cfg(all(feature = "redis", feature = "tower"))]

use crate::support::redis as redis_support;

use http::{Request, Response};
use redis_support::trace::caller_time_options;
use redis_support::{unique_prefix, RedisServer};
use sluicegate::adapters::server::ServerLayer;
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket, Limits, SlidingLog};
use sluicegate::clock::ManualClock;
use sluicegate::stores::redis::{RedisAlgorithm, RedisStore};
use sluicegate::stores::{MemoryStore, Store};
use sluicegate::KeyedRateLimiter;
use std::convert::Infallible;
use std::time::Duration;
use tower::{service_fn, Layer, ServiceExt};

/// Status and rate-limit fields of one response, in a comparable form.
type Seen = (u16, Vec<(String, String)>);

/// Sends `advances.len()` requests of cost 1 (each after advancing the clock by
/// that many ms) through the server layer over `store`, answering what came back.
async fn responses<A, S>(algorithm: A, store: S, advances: &[u64]) -> Vec<Seen>
where
    A: sluicegate::algorithms::Algorithm,
    S: Store<String, A> + 'static,
{
    let clock = ManualClock::new();
    clock.advance(Duration::from_millis(2_500));
    let limiter = KeyedRateLimiter::with_store(algorithm, store, clock.clone());
    let app = service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(())) });
    let weigher = |_: &Request<()>| ("ann".to_owned(), 1);
    let server = ServerLayer::with_weigher(limiter, weigher).layer(app);
    let mut seen = Vec::new();
    for &advance in advances {
        clock.advance(Duration::from_millis(advance));
        let response = server.clone().oneshot(Request::new(())).await.unwrap();
        let mut fields: Vec<(String, String)> = response
            .headers()
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
            .collect();
        fields.sort();
        seen.push((response.status().as_u16(), fields));
    }
    seen
}

/// The same requests through the memory store and the Redis store.
async fn both<A: RedisAlgorithm + Clone>(server: &RedisServer, algorithm: A, advances: &[u64]) {
    let memory: MemoryStore<String, A> = MemoryStore::new();
    let expected = responses(algorithm.clone(), memory, advances).await;
    let options = caller_time_options(&unique_prefix("server-layer"));
    let redis: RedisStore<String, A> = RedisStore::open_with(server.url(), options).unwrap();
    let got = responses(algorithm, redis, advances).await;
    assert_eq!(got, expected);
    // The trace saw refusals and sets' items, so it compared what it is for.
    assert!(expected.iter().any(|(status, _)| *status == 429));
}

fn three_limits() -> (LeakyBucket, FixedWindow, FixedWindow) {
    (
        LeakyBucket::meter(2, 1, Duration::from_secs(1)).unwrap(),
        FixedWindow::new(3, Duration::from_secs(60)).unwrap(),
        FixedWindow::new(100, Duration::from_secs(3600)).unwrap(),
    )
}

const ADVANCES: [u64; 8] = [0, 0, 1_000, 0, 400, 700, 0, 60_000];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_over_redis_lists_every_limit_as_in_memory() {
    let server = RedisServer::start();
    let (bucket, minute, hour) = three_limits();
    both(&server, AllOf::new((bucket, minute, hour)), &ADVANCES).await;
    let limits = Limits::new().with(bucket).with(minute).with(hour);
    both(&server, limits, &ADVANCES).await;
    // The sliding log too (a hash-kept state), beside a window.
    let log = SlidingLog::new(2, Duration::from_secs(1)).unwrap();
    both(&server, AllOf::new((log, minute)), &ADVANCES).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_limit_over_redis_says_when_its_next_permit_comes() {
    // A grant of the last permit lists the refusal one more would get (its next
    // permit), read on the server in the same call.
    let server = RedisServer::start();
    let (bucket, minute, _) = three_limits();
    both(&server, bucket, &ADVANCES).await;
    both(&server, minute, &ADVANCES).await;
}
