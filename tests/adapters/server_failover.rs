//! The server layer over a failover store: a policy's answer consulted no limit,
//! so it carries no rate-limit fields. Fail open lets the request through bare,
//! fail closed answers `503` with the back-off as `Retry-After` (never held back),
//! and a local fallback is described by the share it enforces. Over a store that
//! is always down; `service_stores` runs each policy over a real Redis killed and
//! paused under eight concurrent clients on loopback.
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
