//! A client that paces itself and adapts to the server: a local API allowing 4
//! requests per 2-second window, and a reqwest client that would go at 20 per second
//! but honours what the server says (`RateLimit` fields, `Retry-After`). It prints
//! each request's time, status and the server's fields, then a Stream adapter paces a
//! batch of jobs. Everything runs on 127.0.0.1 and ends by itself in about 5 seconds.
//!
//! `cargo run --example throttled_client --features tower`

use axum::routing::get;
use axum::Router;
use futures::{stream, StreamExt};
use http::Method;
use sluicegate::adapters::client::ClientLayer;
use sluicegate::adapters::server::{Policy, RateLimitHeaders, ServerLayer};
use sluicegate::adapters::{HoldBack, Jitter, Throttled};
use sluicegate::algorithms::FixedWindow;
use sluicegate::RateLimiter;
use std::time::{Duration, Instant};
use tower::{Layer, ServiceExt};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // The server: 4 requests per 2-second window, with the IETF fields.
    let window = FixedWindow::new(4, Duration::from_secs(2)).unwrap();
    let server = ServerLayer::new(RateLimiter::new(window)).headers(
        RateLimitHeaders::new().policies([Policy::new("window", 4, Duration::from_secs(2))]),
    );
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(server);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = reqwest::Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    // The client: 20 per second of its own, a little jitter for requests that had to
    // wait, and a back-off that honours the server (capped at 10 s).
    let own_limit = RateLimiter::bursty(20.0).unwrap();
    let hold = HoldBack::new(own_limit.clock().clone()).with_cap(Duration::from_secs(10));
    let client = ClientLayer::new(own_limit)
        .with_jitter(Jitter::new(Duration::from_millis(20), 2024))
        .honour_server_with(hold.clone(), |r: &reqwest::Response| {
            (r.status(), r.headers())
        })
        .layer(reqwest::Client::new());

    println!("GET {url} ten times; the server allows 4 per 2 s:");
    let start = Instant::now();
    for n in 1..=10 {
        let request = reqwest::Request::new(Method::GET, url.clone());
        let response = client
            .clone()
            .oneshot(request)
            .await
            .expect("loopback request");
        let field = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
                .to_owned()
        };
        println!(
            "{n:>2}  t={:>5.2}s  {}  RateLimit: {:<22} Retry-After: {:<3} then held back {:.1}s",
            start.elapsed().as_secs_f64(),
            response.status().as_u16(),
            field("ratelimit"),
            field("retry-after"),
            hold.remaining(&()).as_secs_f64(),
        );
    }

    // The same pacing for any stream: 5 jobs at 10 per second.
    println!("\nA stream of jobs at 10 per second:");
    let start = Instant::now();
    let jobs = Throttled::new(
        stream::iter(["a", "b", "c", "d", "e"]),
        RateLimiter::bursty(10.0).unwrap(),
    );
    jobs.for_each(|job| async move {
        println!(
            "  job {} released at t={:.2}s",
            job.unwrap(),
            start.elapsed().as_secs_f64()
        );
    })
    .await;
}
