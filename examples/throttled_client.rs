//! A client that paces itself and adapts to the server: a local API allowing 4
//! requests per 2-second window, and a reqwest client that would go at 20 per second
//! but honours what the server says. First the server sends the `RateLimit` fields,
//! and the client slows down before it is ever refused; then a server that sends only
//! the legacy fields refuses it once, and the client waits out the `Retry-After` and
//! recovers by itself. It prints each request's time, status and the server's fields,
//! then a Stream adapter paces a batch of jobs. Everything runs on 127.0.0.1 and ends
//! by itself in about 8 seconds.
//!
//! `cargo run --example throttled_client --features tower`

use axum::routing::get;
use axum::Router;
use futures::{stream, StreamExt};
use http::Method;
use sluicegate::adapters::client::ClientLayer;
use sluicegate::adapters::server::{Legacy, Policy, RateLimitHeaders, ServerLayer};
use sluicegate::adapters::{HoldBack, Jitter, Throttled};
use sluicegate::algorithms::FixedWindow;
use sluicegate::RateLimiter;
use std::time::{Duration, Instant};
use tower::{Layer, ServiceExt};

/// Serves a "hello" app behind a server layer allowing 4 requests per 2 s window,
/// sending `headers`; answers its URL.
async fn serve(headers: RateLimitHeaders) -> reqwest::Url {
    let window = FixedWindow::new(4, Duration::from_secs(2)).unwrap();
    let server = ServerLayer::new(RateLimiter::new(window)).headers(headers);
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(server);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = reqwest::Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// Sends `n` requests through a fresh client at 20 per second that honours the
/// server, printing what each got.
async fn run(url: &reqwest::Url, n: usize) {
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
    let start = Instant::now();
    for i in 1..=n {
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
            "{i:>2}  t={:>5.2}s  {}  RateLimit: {:<22} X-RateLimit-Remaining: {:<2} Retry-After: {:<2} -> held back {:.1}s",
            start.elapsed().as_secs_f64(),
            response.status().as_u16(),
            field("ratelimit"),
            field("x-ratelimit-remaining"),
            field("retry-after"),
            hold.remaining(&()).as_secs_f64(),
        );
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let ietf =
        serve(RateLimitHeaders::new().policies([Policy::new("window", 4, Duration::from_secs(2))]))
            .await;
    println!("A server that sends RateLimit (4 per 2 s): the client slows down before any 429");
    run(&ietf, 8).await;

    let legacy = serve(RateLimitHeaders::new().legacy_only(Legacy::XRateLimit)).await;
    println!(
        "\nA server that sends only X-RateLimit-*: one 429, then the client waits out Retry-After"
    );
    run(&legacy, 6).await;

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
