//! Server layers stacked (a per-client limit over a global one): each adds its own
//! `RateLimit` and `RateLimit-Policy` line, so a client sees every limit and the
//! one that refused; `Retry-After` is never shortened and the legacy trio stays
//! the refusing limit's. On virtual time, and over a real loopback connection.
#![cfg(feature = "tower")]

use crate::support::adapters as adapters_common;

use crate::support::adapters::serve;
use axum::body::Body;
use axum::routing::get;
use axum::Router;
use futures::executor::block_on;
use http::{HeaderMap, Request, Response, StatusCode};
use sluicegate::adapters::server::{Legacy, Policy, RateLimitHeaders, ServerLayer};
use sluicegate::algorithms::FixedWindow;
use sluicegate::clock::ManualClock;
use sluicegate::{Decision, KeyedRateLimiter, RateLimiter};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;
use tower::{service_fn, Layer, ServiceExt};

fn minute() -> Duration {
    Duration::from_secs(60)
}

/// Every line of `name`, in order.
fn lines(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_inner_refusal_shows_both_limits_and_names_the_refusing_one() {
    let clock = ManualClock::new();
    // Inside: 2 a minute for the whole service. Outside: 5 a minute per client.
    let global = RateLimiter::with_clock(FixedWindow::new(2, minute()).unwrap(), clock.clone());
    let per_client =
        KeyedRateLimiter::with_clock(FixedWindow::new(5, minute()).unwrap(), clock.clone());
    let fields = |name: &str, quota| {
        RateLimitHeaders::new()
            .policies([Policy::new(name, quota, minute())])
            .legacy(Legacy::XRateLimit)
    };
    let app = service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(())) });
    let inner = ServerLayer::new(global)
        .headers(fields("global", 2))
        .layer(app);
    let server = ServerLayer::keyed(per_client, |r: &Request<()>| {
        r.headers()["x-client"].to_str().unwrap().to_owned()
    })
    .headers(fields("per-client", 5))
    .layer(inner);
    clock.advance(Duration::from_secs(15));
    let send = || {
        let request = Request::builder()
            .header("x-client", "ann")
            .body(())
            .unwrap();
        block_on(server.clone().oneshot(request)).unwrap()
    };
    let first = send();
    assert_eq!(first.status(), StatusCode::OK);
    let h = first.headers();
    assert_eq!(
        lines(h, "ratelimit"),
        [r#""global";r=1;t=45"#, r#""per-client";r=4;t=45"#]
    );
    assert_eq!(
        lines(h, "ratelimit-policy"),
        [r#""global";q=2;w=60"#, r#""per-client";q=5;w=60"#]
    );
    // Between two grants the trio is the one with fewer left: the global limit's.
    assert_eq!(h["x-ratelimit-limit"], "2");
    assert_eq!(h["x-ratelimit-remaining"], "1");
    send();
    clock.advance(Duration::from_secs(5));
    let refused = send();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let h = refused.headers();
    // The global limit refused (r=0); the client's own had 2 left after it.
    assert_eq!(
        lines(h, "ratelimit"),
        [r#""global";r=0;t=40"#, r#""per-client";r=2;t=40"#]
    );
    assert_eq!(lines(h, "retry-after"), ["40"]);
    assert_eq!(
        [
            &h["x-ratelimit-limit"],
            &h["x-ratelimit-remaining"],
            &h["x-ratelimit-reset"]
        ],
        ["2", "0", "40"]
    );
}

#[test]
fn retry_after_already_there_is_never_shortened() {
    let fields = RateLimitHeaders::new();
    let refusal = Decision::denied(10, 0, 5_000_000_000, 5_000_000_000);
    let after = |existing: &str| {
        let mut out = HeaderMap::new();
        out.insert("retry-after", existing.parse().unwrap());
        fields.write(&refusal, &mut out);
        lines(&out, "retry-after")
    };
    assert_eq!(after("120"), ["120"]);
    assert_eq!(after("3"), ["5"]);
    assert_eq!(
        after("Wed, 21 Oct 2015 07:28:00 GMT"),
        ["Wed, 21 Oct 2015 07:28:00 GMT"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_loopback_a_client_receives_both_items_and_the_refusing_one_says_r_0() {
    let clock = ManualClock::new();
    let global = RateLimiter::with_clock(FixedWindow::new(1, minute()).unwrap(), clock.clone());
    let per_client =
        KeyedRateLimiter::with_clock(FixedWindow::new(10, minute()).unwrap(), clock.clone());
    let global = ServerLayer::new(global).headers(RateLimitHeaders::new().policies([Policy::new(
        "global",
        1,
        minute(),
    )]));
    let per_client = ServerLayer::keyed(per_client, |r: &Request<Body>| {
        r.extensions()
            .get::<axum::extract::ConnectInfo<SocketAddr>>()
            .map(|info| info.0.ip())
    })
    .headers(RateLimitHeaders::new().policies([Policy::new("per-client", 10, minute())]));
    // axum: the last layer added is the outermost.
    let router = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(global)
        .layer(per_client);
    let base = serve(router).await;
    let http = reqwest::Client::new();
    assert_eq!(http.get(&base).send().await.unwrap().status(), 200);
    let refused = http.get(&base).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let h = refused.headers();
    let items: Vec<_> = h
        .get_all("ratelimit")
        .iter()
        .flat_map(adapters_common::sf_list)
        .collect();
    let named = |name: &str, r: i64| {
        (
            name.to_owned(),
            vec![("r".to_owned(), r), ("t".to_owned(), 60)],
        )
    };
    assert_eq!(items, [named("global", 0), named("per-client", 8)]);
    let policies: Vec<String> = h
        .get_all("ratelimit-policy")
        .iter()
        .flat_map(adapters_common::sf_list)
        .map(|(name, _)| name)
        .collect();
    assert_eq!(policies, ["global", "per-client"]);
    assert_eq!(h["retry-after"], "60");
}
