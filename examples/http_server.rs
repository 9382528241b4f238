//! The server layer on an axum app: each client IP is limited by a set of two limits
//! (a burst of 3 draining at 2 per second, and 5 per minute), writes cost 2, and
//! every response carries `RateLimit` / `RateLimit-Policy` (and the legacy
//! `X-RateLimit-*`); refusals are `429` with `Retry-After`, and a request heavier
//! than the whole quota is `413`. A plain client on the same machine fires requests
//! at it and prints what comes back. Runs on 127.0.0.1 and ends by itself.
//!
//! `cargo run --example http_server --features tower`

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use http::{Method, Request};
use sluicegate::adapters::server::{Legacy, Policy, RateLimitHeaders, ServerLayer};
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket};
use sluicegate::KeyedRateLimiter;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Whom and how much a request is charged: the peer's IP; POST costs 2, a request
/// marked `x-weight` costs what it says.
fn meter(request: &Request<Body>) -> (Option<IpAddr>, u64) {
    let ip = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip());
    let weight = request
        .headers()
        .get("x-weight")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let cost = weight.unwrap_or(if request.method() == Method::POST {
        2
    } else {
        1
    });
    (ip, cost)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let burst = LeakyBucket::meter(3, 2, Duration::from_secs(1)).unwrap();
    let per_minute = FixedWindow::new(5, Duration::from_secs(60)).unwrap();
    let set = AllOf::new((burst, per_minute));
    // One RateLimit-Policy item per limit of the set, stated by the set itself.
    let headers = RateLimitHeaders::new()
        .policies(Policy::describe(&set, ["burst", "minute"]))
        .legacy(Legacy::XRateLimit);
    let limiter = KeyedRateLimiter::new(set);
    let app = Router::new()
        .route("/", get(|| async { "read" }).post(|| async { "written" }))
        .layer(ServerLayer::with_meter(limiter, meter).headers(headers));

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, service).await });
    println!("serving on {base}\n");

    let http = reqwest::Client::new();
    let plan = [
        ("GET", None),
        ("POST", None),
        ("GET", None),
        ("GET", Some("9")),
        ("GET", None),
        ("GET", None),
    ];
    for (method, weight) in plan {
        let mut request = http.request(method.parse().unwrap(), &base);
        if let Some(weight) = weight {
            request = request.header("x-weight", weight);
        }
        let response = request.send().await.expect("loopback request");
        println!(
            "{method:<4} {}",
            weight.map_or(String::new(), |w| format!("(weight {w})"))
        );
        println!("  -> {}", response.status());
        for name in [
            "retry-after",
            "ratelimit",
            "ratelimit-policy",
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
        ] {
            if let Some(value) = response.headers().get(name) {
                println!("     {name}: {}", value.to_str().unwrap_or("?"));
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    let after = http.get(&base).send().await.expect("loopback request");
    println!("GET after 0.6 s\n  -> {}", after.status());
}
