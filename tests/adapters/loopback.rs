//! Over a real loopback connection: an axum server behind the server layer and a
//! reqwest client behind the client layer. Header values are asserted exactly and
//! read back with an independent structured-field parser (`sfv`). The pacing tests
//! run on real time (the server's clock must be real for the client to meet it), so
//! they are smoke tests with generous bounds: a few requests, about two seconds.
#![cfg(feature = "tower")]

use crate::support::adapters as adapters_common;

use crate::support::adapters::serve;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use http::{Method, Request, StatusCode};
use sluicegate::adapters::client::ClientLayer;
use sluicegate::adapters::server::{Legacy, Policy, RateLimitHeaders, ServerLayer};
use sluicegate::adapters::HoldBack;
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket};
use sluicegate::clock::{DefaultClock, ManualClock};
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tower::{Layer, ServiceExt};

/// The peer's IP: the server layer's key.
fn peer_ip(request: &Request<Body>) -> (Option<IpAddr>, u64) {
    let ip = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip());
    (ip, 1)
}

fn hello() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

fn named(name: &str, params: &[(&str, i64)]) -> (String, Vec<(String, i64)>) {
    (
        name.to_owned(),
        params.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_values_over_loopback_are_exact_and_parse_as_structured_fields() {
    // The server's limiter is on virtual time, so the values are exact.
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(
        FixedWindow::new(2, Duration::from_secs(60)).unwrap(),
        clock.clone(),
    );
    let headers = RateLimitHeaders::new()
        .policies([Policy::new("per-minute", 2, Duration::from_secs(60))])
        .legacy(Legacy::XRateLimit);
    let server = ServerLayer::with_weigher(limiter, peer_ip).headers(headers);
    let base = serve(hello().layer(server)).await;
    clock.advance(Duration::from_millis(15_250));
    let http = reqwest::Client::new();

    let first = http.get(&base).send().await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let h = first.headers().clone();
    assert_eq!(first.text().await.unwrap(), "hello");
    assert_eq!(h["ratelimit"], r#""per-minute";r=1;t=45"#);
    assert_eq!(h["ratelimit-policy"], r#""per-minute";q=2;w=60"#);
    assert_eq!(h["x-ratelimit-limit"], "2");
    assert_eq!(h["x-ratelimit-remaining"], "1");
    assert_eq!(h["x-ratelimit-reset"], "45");
    assert!(h.get("retry-after").is_none());
    assert_eq!(
        adapters_common::sf_list(&h["ratelimit"]),
        [named("per-minute", &[("r", 1), ("t", 45)])]
    );
    assert_eq!(
        adapters_common::sf_list(&h["ratelimit-policy"]),
        [named("per-minute", &[("q", 2), ("w", 60)])]
    );

    assert_eq!(
        http.get(&base).send().await.unwrap().status(),
        StatusCode::OK
    );
    clock.advance(Duration::from_millis(500));
    let refused = http.get(&base).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let h = refused.headers();
    assert_eq!(h["retry-after"], "45"); // 44.25 s, rounded up
    assert_eq!(
        adapters_common::sf_list(&h["ratelimit"]),
        [named("per-minute", &[("r", 0), ("t", 45)])]
    );
    assert_eq!(h["x-ratelimit-remaining"], "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_over_loopback_lists_one_item_per_limit() {
    let clock = ManualClock::new();
    let set = AllOf::new((
        FixedWindow::new(2, Duration::from_secs(10)).unwrap(),
        FixedWindow::new(50, Duration::from_secs(3600)).unwrap(),
    ));
    let limiter = KeyedRateLimiter::with_clock(set, clock.clone());
    let policies = Policy::describe(limiter.algorithm(), ["burst", "hourly"]);
    let server = ServerLayer::with_weigher(limiter, peer_ip)
        .headers(RateLimitHeaders::new().policies(policies));
    let base = serve(hello().layer(server)).await;
    clock.advance(Duration::from_millis(4_500));
    let http = reqwest::Client::new();

    let first = http.get(&base).send().await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let h = first.headers();
    assert_eq!(h["ratelimit"], r#""burst";r=1;t=6, "hourly";r=49;t=3596"#);
    assert_eq!(
        h["ratelimit-policy"],
        r#""burst";q=2;w=10, "hourly";q=50;w=3600"#
    );
    assert_eq!(
        adapters_common::sf_list(&h["ratelimit"]),
        [
            named("burst", &[("r", 1), ("t", 6)]),
            named("hourly", &[("r", 49), ("t", 3596)]),
        ]
    );
    assert_eq!(
        adapters_common::sf_list(&h["ratelimit-policy"]),
        [
            named("burst", &[("q", 2), ("w", 10)]),
            named("hourly", &[("q", 50), ("w", 3600)]),
        ]
    );
    let second = http.get(&base).send().await.unwrap();
    assert_eq!(
        adapters_common::sf_list(&second.headers()["ratelimit"]),
        [
            named("burst", &[("r", 0), ("t", 6)]), // its next permit: the next window
            named("hourly", &[("r", 48), ("t", 3596)]),
        ]
    );
    let refused = http.get(&base).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let h = refused.headers();
    assert_eq!(h["retry-after"], "6");
    // Only the limit that refused: the hour took nothing.
    assert_eq!(
        adapters_common::sf_list(&h["ratelimit"]),
        [named("burst", &[("r", 0), ("t", 6)])]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_whose_limit_matches_the_servers_never_gets_a_429() {
    // Server: 20 per second per client, a leaky-bucket meter that absorbs a little
    // network jitter (capacity 4). Client: 20 per second, evenly spaced.
    let server_limit = KeyedRateLimiter::with_clock(
        LeakyBucket::meter(4, 20, Duration::from_secs(1)).unwrap(),
        DefaultClock::new(),
    );
    let base = serve(hello().layer(ServerLayer::with_weigher(server_limit, peer_ip))).await;
    let client_limit = RateLimiter::new(adapters_common::unbursting(20.0));
    let client = ClientLayer::new(client_limit).layer(reqwest::Client::new());
    // Three tasks share the client (and so its one limit): 30 requests, 1.5 s.
    let tasks: Vec<_> = (0..3)
        .map(|_| {
            let client = client.clone();
            let url = reqwest::Url::parse(&base).unwrap();
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                for _ in 0..10 {
                    let request = reqwest::Request::new(Method::GET, url.clone());
                    statuses.push(client.clone().oneshot(request).await.unwrap().status());
                }
                statuses
            })
        })
        .collect();
    for task in tasks {
        let statuses = task.await.unwrap();
        assert!(
            statuses.iter().all(|s| *s == StatusCode::OK),
            "{statuses:?}"
        );
    }
}

/// A server allowing 3 requests per 2-second window, and a client 25 times faster
/// that honours the server. Answers the statuses of 6 sequential requests.
async fn too_fast_client(headers: RateLimitHeaders) -> Vec<u16> {
    let server_limit = RateLimiter::new(FixedWindow::new(3, Duration::from_secs(2)).unwrap());
    let base = serve(hello().layer(ServerLayer::new(server_limit).headers(headers))).await;
    let client_limit = RateLimiter::bursty(50.0).unwrap();
    let hold = HoldBack::new(client_limit.clock().clone());
    let client = ClientLayer::new(client_limit)
        .honour_server_with(hold, |r: &reqwest::Response| (r.status(), r.headers()))
        .layer(reqwest::Client::new());
    let url = reqwest::Url::parse(&base).unwrap();
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let request = reqwest::Request::new(Method::GET, url.clone());
        statuses.push(
            client
                .clone()
                .oneshot(request)
                .await
                .unwrap()
                .status()
                .as_u16(),
        );
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_too_fast_client_recovers_by_itself_from_retry_after() {
    // Only the legacy fields: the client learns from the 429's Retry-After alone.
    let statuses = too_fast_client(RateLimitHeaders::new().legacy_only(Legacy::XRateLimit)).await;
    // The window's 3, one refusal with Retry-After: 2, then the next window's.
    assert_eq!(statuses, [200, 200, 200, 429, 200, 200]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reading_ratelimit_fields_slows_down_before_any_429() {
    // The third grant says r=0;t=2: the client holds back and is never refused.
    let statuses = too_fast_client(RateLimitHeaders::new()).await;
    assert_eq!(statuses, [200; 6]);
}
