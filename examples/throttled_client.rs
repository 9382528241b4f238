//! A client that paces itself and adapts to the server. First a local API allowing
//! 4 requests per 2-second window sends the `RateLimit` fields, and a reqwest client
//! that would go at 20 per second slows down before it is ever refused. Then eight
//! tasks share one such client against a server allowing 5 per second that sends
//! only the legacy fields: the first refusal holds every task back, including those
//! already waiting for permits, and after the `Retry-After` the client resumes at its
//! steady pace instead of firing the burst its limiter stored meanwhile. It prints
//! each request's time, status and the server's fields, then a Stream adapter paces a
//! batch of jobs. Everything runs on 127.0.0.1 and ends by itself in about 10 seconds.
//!
//! `cargo run --example throttled_client --features tower`
//!
//! The second part's output on loopback looks like this (task.request, time,
//! status, the server's fields, the hold that followed):
//!
//! ```text
//!   0.1  t= 0.00s  200  X-RateLimit-Remaining: 0  Retry-After: -  -> held back 0.0s
//!   1.1  t= 0.06s  429  X-RateLimit-Remaining: 0  Retry-After: 1  -> held back 1.0s
//!   1.2  t= 1.07s  200  X-RateLimit-Remaining: 3  Retry-After: -  -> held back 0.0s
//!   0.2  t= 1.12s  200  X-RateLimit-Remaining: 2  Retry-After: -  -> held back 0.0s
//!   7.1  t= 1.17s  200  X-RateLimit-Remaining: 1  Retry-After: -  -> held back 0.0s
//!   ...
//! 24 requests in 4.1s, 3 refused
//! ```
//!
//! The `429` at 0.06 s holds all eight tasks, those already waiting for permits
//! among them; at 1.07 s they resume one client interval (50 ms) apart, not all at
//! once.

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

/// Serves a "hello" app behind a server layer over `limiter`, sending `headers`;
/// answers its URL.
async fn serve<A>(limiter: RateLimiter<A>, headers: RateLimitHeaders) -> reqwest::Url
where
    A: sluicegate::CellAlgorithm,
{
    let server = ServerLayer::new(limiter).headers(headers);
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(server);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = reqwest::Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// A client at 20 per second of its own, with a little jitter for requests that
/// had to wait, that honours the server (holds capped at 10 s); and its back-off.
fn client() -> (
    impl tower::Service<
            reqwest::Request,
            Response = reqwest::Response,
            Error = impl std::fmt::Debug,
            Future = impl Send,
        > + Clone
        + Send,
    HoldBack<(), sluicegate::clock::DefaultClock>,
) {
    let own_limit = RateLimiter::bursty(20.0).unwrap();
    let hold = HoldBack::new(own_limit.clock().clone()).with_cap(Duration::from_secs(10));
    let client = ClientLayer::new(own_limit)
        .with_jitter(Jitter::new(Duration::from_millis(20), 2024))
        .honour_server_with(hold.clone(), |r: &reqwest::Response| {
            (r.status(), r.headers())
        })
        .layer(reqwest::Client::new());
    (client, hold)
}

/// One line for a response: when, which request, its status and the fields.
fn line(label: &str, at: Duration, response: &reqwest::Response, held: Duration) -> String {
    let field = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
            .to_owned()
    };
    format!(
        "{label:>5}  t={:>5.2}s  {}  RateLimit: {:<22} X-RateLimit-Remaining: {:<2} Retry-After: {:<2} -> held back {:.1}s",
        at.as_secs_f64(),
        response.status().as_u16(),
        field("ratelimit"),
        field("x-ratelimit-remaining"),
        field("retry-after"),
        held.as_secs_f64(),
    )
}

/// Sends `n` requests one after another through a fresh client, printing what each
/// got.
async fn run(url: &reqwest::Url, n: usize) {
    let (client, hold) = client();
    let start = Instant::now();
    for i in 1..=n {
        let request = reqwest::Request::new(Method::GET, url.clone());
        let response = client
            .clone()
            .oneshot(request)
            .await
            .expect("loopback request");
        let label = i.to_string();
        println!(
            "{}",
            line(&label, start.elapsed(), &response, hold.remaining(&()))
        );
    }
}

/// Eight tasks share one fresh client, each sending `each` requests, printing what
/// each got as it came; then how many were refused.
async fn run_concurrently(url: &reqwest::Url, each: usize) {
    let (client, hold) = client();
    let start = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let (client, hold, url) = (client.clone(), hold.clone(), url.clone());
            tokio::spawn(async move {
                let mut refused = 0;
                for i in 1..=each {
                    let request = reqwest::Request::new(Method::GET, url.clone());
                    let response = client
                        .clone()
                        .oneshot(request)
                        .await
                        .expect("loopback request");
                    refused += usize::from(response.status() == 429);
                    let label = format!("{task}.{i}");
                    println!(
                        "{}",
                        line(&label, start.elapsed(), &response, hold.remaining(&()))
                    );
                }
                refused
            })
        })
        .collect();
    let mut refused = 0;
    for task in tasks {
        refused += task.await.expect("task");
    }
    println!(
        "{} requests in {:.1}s, {refused} refused",
        8 * each,
        start.elapsed().as_secs_f64()
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let window = RateLimiter::new(FixedWindow::new(4, Duration::from_secs(2)).unwrap());
    let policy = Policy::new("window", 4, Duration::from_secs(2));
    let ietf = serve(window, RateLimitHeaders::new().policies([policy])).await;
    println!("A server that sends RateLimit (4 per 2 s): the client slows down before any 429");
    run(&ietf, 8).await;

    let per_second = RateLimiter::bursty(5.0).unwrap();
    let legacy = serve(
        per_second,
        RateLimitHeaders::new().legacy_only(Legacy::XRateLimit),
    )
    .await;
    println!(
        "\nEight tasks share the client; the server allows 5 per second and sends only \
         X-RateLimit-*: a 429 holds every task, then the client resumes at its pace"
    );
    run_concurrently(&legacy, 3).await;

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
