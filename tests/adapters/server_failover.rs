//! The server layer over a failover store: a policy's answer consulted no limit,
//! so it carries no rate-limit fields. Fail open lets the request through bare,
//! fail closed answers `503` with the back-off as `Retry-After` (never held back),
//! and a local fallback is described by the share it enforces. Over a store that
//! is always down, then over a real Redis killed under eight concurrent clients on
//! loopback.
#![cfg(feature = "tower")]

use http::{HeaderMap, Request, Response, StatusCode};
use sluicegate::adapters::server::{Legacy, RateLimitHeaders, ServerLayer};
use sluicegate::algorithms::FixedWindow;
use sluicegate::clock::ManualClock;
use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy, Unreachable};
use sluicegate::KeyedRateLimiter;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tower::{service_fn, Layer, ServiceExt};

const FIELDS: [&str; 6] = [
    "ratelimit",
    "ratelimit-policy",
    "retry-after",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
];

fn minute(limit: u64) -> FixedWindow {
    FixedWindow::new(limit, Duration::from_secs(60)).unwrap()
}

fn present(headers: &HeaderMap) -> Vec<&'static str> {
    FIELDS
        .into_iter()
        .filter(|name| headers.contains_key(*name))
        .collect()
}

/// One request through the server layer over a store that is always down, under
/// `policy` (back-off fixed at 7 s), with every field turned on and, if given,
/// a delay: the response and whether the inner service was called.
async fn through_down_store(
    policy: FailurePolicy<FixedWindow>,
    delay: Option<Duration>,
) -> (Response<()>, usize) {
    let store: FailoverStore<Unreachable, String, FixedWindow> =
        FailoverStore::new(Unreachable, policy)
            .with_backoff(Backoff::fixed(Duration::from_secs(7)));
    let limiter = KeyedRateLimiter::with_store(minute(100), store, ManualClock::new());
    let called = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&called);
    let app = service_fn(move |_: Request<()>| {
        seen.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, Infallible>(Response::new(())) }
    });
    let weigher = |_: &Request<()>| ("ann".to_owned(), 1);
    let headers = RateLimitHeaders::new().legacy(Legacy::XRateLimit);
    let mut layer = ServerLayer::with_weigher(limiter, weigher).headers(headers);
    if let Some(max) = delay {
        layer = layer.delay_up_to(max);
    }
    let response = layer.layer(app).oneshot(Request::new(())).await.unwrap();
    (response, called.load(Ordering::SeqCst))
}

#[tokio::test]
async fn a_fail_open_answer_goes_through_without_fields() {
    let (response, called) = through_down_store(FailurePolicy::Open, None).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(called, 1);
    assert_eq!(present(response.headers()), Vec::<&str>::new());
}

#[tokio::test]
async fn a_fail_closed_answer_is_503_with_the_back_off_as_retry_after() {
    for delay in [None, Some(Duration::from_secs(60))] {
        let (response, called) = through_down_store(FailurePolicy::Closed, delay).await;
        assert_eq!(
            response.status(),
            StatusCode::SERVICE_UNAVAILABLE,
            "{delay:?}"
        );
        assert_eq!(called, 0, "{delay:?}");
        assert_eq!(present(response.headers()), ["retry-after"], "{delay:?}");
        assert_eq!(response.headers()["retry-after"], "7", "{delay:?}");
    }
}

#[tokio::test]
async fn a_local_fallback_is_described_by_its_share() {
    let (response, called) = through_down_store(FailurePolicy::Local(minute(5)), None).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(called, 1);
    let h = response.headers();
    assert_eq!(h["ratelimit"], r#""default";r=4;t=60"#);
    assert_eq!(h["ratelimit-policy"], r#""default";q=5"#);
    assert_eq!(h["x-ratelimit-limit"], "5");
}

/// A real Redis behind the failover store, eight concurrent reqwest clients on
/// loopback: fields while Redis decides, then, with the server killed, every
/// response within the store's timeout and a margin, bare 200s under fail open
/// and 503s with `Retry-After` under fail closed, and fields again once Redis is
/// back.
#[cfg(feature = "redis")]
mod over_redis {
    use super::{minute, present};
    use crate::support::adapters::serve;
    use crate::support::redis::{unique_prefix, RedisServer};
    use axum::routing::get;
    use axum::Router;
    use http::{Request, StatusCode};
    use sluicegate::adapters::server::ServerLayer;
    use sluicegate::algorithms::FixedWindow;
    use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy};
    use sluicegate::stores::redis::{RedisOptions, RedisStore};
    use sluicegate::{DefaultClock, KeyedRateLimiter};
    use std::time::{Duration, Instant};

    const TIMEOUT: Duration = Duration::from_millis(300);
    const MARGIN: Duration = Duration::from_secs(3);
    const CLIENTS: usize = 8;

    /// `CLIENTS` clients each send `each` requests at once; every response's
    /// status and fields, each checked to come back within the timeout and margin.
    async fn round(base: &str, each: usize) -> Vec<(StatusCode, Vec<&'static str>)> {
        let tasks: Vec<_> = (0..CLIENTS)
            .map(|_| {
                let base = base.to_owned();
                tokio::spawn(async move {
                    let http = reqwest::Client::new();
                    let mut seen = Vec::new();
                    for _ in 0..each {
                        let started = Instant::now();
                        let response = http.get(&base).send().await.unwrap();
                        let took = started.elapsed();
                        assert!(took < TIMEOUT + MARGIN, "a request took {took:?}");
                        seen.push((response.status(), present(response.headers())));
                    }
                    seen
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        all
    }

    async fn killed_under(policy: FailurePolicy<FixedWindow>, expected: (StatusCode, &[&str])) {
        let mut server = RedisServer::start_own();
        let options = RedisOptions::default()
            .prefix(unique_prefix("server-failover"))
            .unwrap()
            .connect_timeout(TIMEOUT)
            .response_timeout(TIMEOUT);
        let redis: RedisStore<String, FixedWindow> =
            RedisStore::open_with(server.url(), options).unwrap();
        let backoff = Duration::from_millis(500);
        let store = FailoverStore::new(redis, policy).with_backoff(Backoff::fixed(backoff));
        let limiter = KeyedRateLimiter::with_store(minute(10_000), store, DefaultClock::new());
        let one_key = |_: &Request<axum::body::Body>| ("everyone".to_owned(), 1);
        let layer = ServerLayer::with_weigher(limiter, one_key);
        let router = Router::new().route("/", get(|| async { "hello" }));
        let base = serve(router.layer(layer)).await;

        let fielded = (StatusCode::OK, vec!["ratelimit", "ratelimit-policy"]);
        let up = round(&base, 3).await;
        assert!(up.iter().all(|seen| *seen == fielded), "{up:?}");

        server.kill();
        let down = round(&base, 5).await;
        let policy = (expected.0, expected.1.to_vec());
        assert!(down.iter().all(|seen| *seen == policy), "{down:?}");

        server.restart();
        let deadline = Instant::now() + backoff + MARGIN;
        loop {
            let back = round(&base, 1).await;
            if back.iter().all(|seen| *seen == fielded) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no fields after Redis came back: {back:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn with_redis_killed_fail_open_answers_bare_200s_in_time() {
        killed_under(FailurePolicy::Open, (StatusCode::OK, &[])).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn with_redis_killed_fail_closed_answers_503s_with_retry_after_in_time() {
        killed_under(
            FailurePolicy::Closed,
            (StatusCode::SERVICE_UNAVAILABLE, &["retry-after"]),
        )
        .await;
    }
}
