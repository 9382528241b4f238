//! The server and client layers used as a service uses them, over a real loopback
//! connection (axum behind `ServerLayer`, reqwest behind `ClientLayer`), with the
//! in-memory store: every field value of the module docs on a set of limits, a
//! free request, a request costlier than the quota, held requests, stacked
//! layers, many concurrent clients against one limit, and a client that resumes
//! after a hold at its steady pace. Exact values run on a `ManualClock`; the rest
//! on the real clock with generous bounds only.
#![cfg(feature = "tower")]

use crate::support::adapters::serve;
use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::{HeaderMap, Method, Request, StatusCode};
use sluicegate::adapters::client::ClientLayer;
use sluicegate::adapters::server::{Legacy, Policy, RateLimitHeaders, ServerLayer};
use sluicegate::adapters::HoldBack;
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket, SlidingLog, SmoothBursty};
use sluicegate::clock::{DefaultClock, ManualClock};
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tower::{Layer, ServiceExt};

/// Every line of field `name`, in order.
pub fn lines(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

/// The rate-limit fields present on a response, by name, sorted.
pub fn present(headers: &HeaderMap) -> Vec<String> {
    let mut names: Vec<String> = headers
        .keys()
        .map(|n| n.as_str().to_owned())
        .filter(|n| n.contains("ratelimit") || n == "retry-after")
        .collect();
    names.sort();
    names
}

/// A router answering "hello" on `/` and `/heavy` and `/health`, counting the calls
/// that reach it.
fn counted_app(reached: Arc<AtomicUsize>) -> Router {
    let count = move || {
        let reached = Arc::clone(&reached);
        async move {
            reached.fetch_add(1, Ordering::SeqCst);
            "hello"
        }
    };
    Router::new()
        .route("/", get(count.clone()))
        .route("/heavy", get(count.clone()))
        .route("/health", get(count))
}

/// Everything is one client; `/health` is free, `/heavy` costs 100, the rest 1.
fn by_path(request: &Request<Body>) -> (String, u64) {
    let cost = match request.uri().path() {
        "/health" => 0,
        "/heavy" => 100,
        _ => 1,
    };
    ("ann".to_owned(), cost)
}

fn legacy(h: &HeaderMap) -> [String; 3] {
    [
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
    ]
    .map(|name| h[name].to_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_lists_every_limit_on_grants_and_the_refusing_ones_on_refusals() {
    let clock = ManualClock::new();
    let set = AllOf::new((
        FixedWindow::new(3, Duration::from_secs(10)).unwrap(),
        FixedWindow::new(6, Duration::from_secs(60)).unwrap(),
    ));
    let limiter = KeyedRateLimiter::with_clock(set, clock.clone());
    let policies = Policy::describe(limiter.algorithm(), ["burst", "minute"]);
    let headers = RateLimitHeaders::new()
        .policies(policies)
        .legacy(Legacy::XRateLimit);
    let reached = Arc::new(AtomicUsize::new(0));
    let layer = ServerLayer::with_weigher(limiter, by_path).headers(headers);
    let base = serve(counted_app(Arc::clone(&reached)).layer(layer)).await;
    let http = reqwest::Client::new();
    let get = || async { http.get(&base).send().await.unwrap() };
    clock.advance(Duration::from_millis(4_500));

    // Grants: one item per limit, in the set's order; t until more than r are there.
    let first = get().await;
    assert_eq!(first.status(), StatusCode::OK);
    let h = first.headers();
    assert_eq!(
        lines(h, "ratelimit"),
        [r#""burst";r=2;t=6, "minute";r=5;t=56"#]
    );
    assert_eq!(
        lines(h, "ratelimit-policy"),
        [r#""burst";q=3;w=10, "minute";q=6;w=60"#]
    );
    assert!(h.get("retry-after").is_none());
    // The legacy trio: the tightest limit, its reset when it is whole again.
    assert_eq!(legacy(h), ["3", "2", "6"]);
    get().await;
    let third = get().await;
    assert_eq!(
        lines(third.headers(), "ratelimit"),
        [r#""burst";r=0;t=6, "minute";r=3;t=56"#]
    );

    // Refused by the burst alone: only its item, r=0, t its retry.
    let refused = get().await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let h = refused.headers();
    assert_eq!(lines(h, "ratelimit"), [r#""burst";r=0;t=6"#]);
    assert_eq!(h["retry-after"], "6");
    assert_eq!(legacy(h), ["3", "0", "6"]);
    assert_eq!(
        reached.load(Ordering::SeqCst),
        3,
        "a refusal reaches the app"
    );

    // The burst's next window: three more, after which both limits are spent.
    clock.advance(Duration::from_secs(6));
    for _ in 0..3 {
        assert_eq!(get().await.status(), StatusCode::OK);
    }
    let both = get().await;
    assert_eq!(both.status(), StatusCode::TOO_MANY_REQUESTS);
    let h = both.headers();
    assert_eq!(
        lines(h, "ratelimit"),
        [r#""burst";r=0;t=10, "minute";r=0;t=50"#]
    );
    // Retry-After: the longest refusing t; the trio never earlier than it.
    assert_eq!(h["retry-after"], "50");
    let [_, remaining, reset] = legacy(h);
    assert_eq!(remaining, "0");
    assert!(reset.parse::<u64>().unwrap() >= 50, "reset {reset}");

    // Refused by the minute alone, the burst having a whole window.
    clock.advance(Duration::from_secs(10));
    let h = get().await.headers().clone();
    assert_eq!(lines(&h, "ratelimit"), [r#""minute";r=0;t=40"#]);
    assert_eq!(h["retry-after"], "40");
    assert_eq!(legacy(&h), ["6", "0", "40"]);
    // The policy field stays the same from response to response.
    assert_eq!(
        lines(&h, "ratelimit-policy"),
        [r#""burst";q=3;w=10, "minute";q=6;w=60"#]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_request_passes_uncounted_without_fields_even_when_the_key_is_refused() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(
        FixedWindow::new(2, Duration::from_secs(60)).unwrap(),
        clock.clone(),
    );
    let reached = Arc::new(AtomicUsize::new(0));
    let layer = ServerLayer::with_weigher(limiter.clone(), by_path)
        .headers(RateLimitHeaders::new().legacy(Legacy::XRateLimit));
    let base = serve(counted_app(Arc::clone(&reached)).layer(layer)).await;
    let http = reqwest::Client::new();
    for _ in 0..5 {
        let health = http.get(format!("{base}health")).send().await.unwrap();
        assert_eq!(health.status(), StatusCode::OK);
        assert!(
            present(health.headers()).is_empty(),
            "{:?}",
            health.headers()
        );
    }
    // Nothing was counted: both permits are still there.
    let first = http.get(&base).send().await.unwrap();
    assert_eq!(
        lines(first.headers(), "ratelimit"),
        [r#""default";r=1;t=60"#]
    );
    http.get(&base).send().await.unwrap();
    assert_eq!(
        http.get(&base).send().await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // While the key is refused, a free request still passes, bare.
    let health = http.get(format!("{base}health")).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    assert!(present(health.headers()).is_empty());
    assert_eq!(reached.load(Ordering::SeqCst), 5 + 2 + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_above_the_quota_is_400_with_the_policy_and_no_retry_after() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(
        FixedWindow::new(10, Duration::from_secs(60)).unwrap(),
        clock.clone(),
    );
    let headers = RateLimitHeaders::new()
        .policies([Policy::new("minute", 10, Duration::from_secs(60))])
        .legacy(Legacy::XRateLimit);
    let reached = Arc::new(AtomicUsize::new(0));
    let layer = ServerLayer::with_weigher(limiter.clone(), by_path).headers(headers.clone());
    let base = serve(counted_app(Arc::clone(&reached)).layer(layer)).await;
    let http = reqwest::Client::new();
    clock.advance(Duration::from_secs(5));
    for _ in 0..3 {
        http.get(&base).send().await.unwrap();
    }
    let heavy = http.get(format!("{base}heavy")).send().await.unwrap();
    assert_eq!(heavy.status(), StatusCode::BAD_REQUEST);
    let h = heavy.headers();
    assert!(h.get("retry-after").is_none());
    // No t (no wait grants it), r what is left.
    assert_eq!(lines(h, "ratelimit"), [r#""minute";r=7"#]);
    assert_eq!(lines(h, "ratelimit-policy"), [r#""minute";q=10;w=60"#]);
    assert_eq!(reached.load(Ordering::SeqCst), 3);
    // It consumed nothing.
    let next = http.get(&base).send().await.unwrap();
    assert_eq!(lines(next.headers(), "ratelimit"), [r#""minute";r=6;t=55"#]);

    // never_status picks another status for the same answer.
    let layer = ServerLayer::with_weigher(limiter, by_path)
        .headers(headers)
        .never_status(StatusCode::PAYLOAD_TOO_LARGE);
    let base = serve(counted_app(Arc::clone(&reached)).layer(layer)).await;
    let heavy = http.get(format!("{base}heavy")).send().await.unwrap();
    assert_eq!(heavy.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(heavy.headers().get("retry-after").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_requests_pass_in_turn_with_the_policy_only_and_excess_is_refused_at_once() {
    // 5 a second, room for 20 queued; held for up to 1.5 s: about 8 pass.
    let queue = RateLimiter::new(LeakyBucket::queue(20, 5, Duration::from_secs(1)).unwrap());
    let (seen, reached) = held_round(queue).await;
    let ok = seen.iter().filter(|s| s.0 == StatusCode::OK).count();
    // What 1.5 s drains at 5 a second, and the first, at most.
    assert!((2..=9).contains(&ok), "{seen:?}");
    assert_eq!(reached, ok);
    for s in &seen {
        assert!(
            s.0 == StatusCode::OK || s.0 == StatusCode::TOO_MANY_REQUESTS,
            "{s:?}"
        );
        // Every request was answered within its maximum wait (plus a margin).
        assert!(s.3 < Duration::from_secs(4), "{seen:?}");
    }
    let held: Vec<_> = seen
        .iter()
        .filter(|s| s.0 == StatusCode::OK && s.2.is_empty())
        .collect();
    assert!(!held.is_empty(), "no request was held: {seen:?}");
    for s in &held {
        // A held response: the policy, no RateLimit item, no legacy trio.
        assert_eq!(s.1, ["ratelimit-policy"], "{s:?}");
    }
    for s in seen.iter().filter(|s| s.0 == StatusCode::TOO_MANY_REQUESTS) {
        assert!(s.1.contains(&"retry-after".to_owned()), "{s:?}");
        // Refused at once, not after waiting up to the maximum.
        assert!(s.3 < Duration::from_secs(1), "{s:?} among {seen:?}");
    }
}

/// One response as a held round sees it: status, rate-limit field names, the
/// `RateLimit` lines, and when it came (since the round began).
pub type Held = (StatusCode, Vec<String>, Vec<String>, Duration);

/// 12 requests at once through a server layer over `queue` holding each for up
/// to 1.5 s: what each got, and how many reached the app.
pub async fn held_round(queue: RateLimiter<LeakyBucket>) -> (Vec<Held>, usize) {
    let reached = Arc::new(AtomicUsize::new(0));
    let layer = ServerLayer::new(queue).delay_up_to(Duration::from_millis(1_500));
    let base = serve(counted_app(Arc::clone(&reached)).layer(layer)).await;
    let started = Instant::now();
    let tasks: Vec<_> = (0..12)
        .map(|_| {
            let base = base.clone();
            tokio::spawn(async move {
                let response = reqwest::get(&base).await.unwrap();
                (
                    response.status(),
                    present(response.headers()),
                    lines(response.headers(), "ratelimit"),
                    started.elapsed(),
                )
            })
        })
        .collect();
    let mut seen = Vec::new();
    for task in tasks {
        seen.push(task.await.unwrap());
    }
    (seen, reached.load(Ordering::SeqCst))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_clients_never_get_more_than_the_limit() {
    // 25 in any 60 s; the test takes far less, so 25 grants in all.
    let limiter = KeyedRateLimiter::with_clock(
        SlidingLog::new(25, Duration::from_secs(60)).unwrap(),
        DefaultClock::new(),
    );
    let layer = ServerLayer::with_weigher(limiter, by_path);
    let base = serve(counted_app(Arc::default()).layer(layer)).await;
    let statuses = hammer(&base, 8, 10).await;
    let ok = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(ok, 25, "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 200 || *s == 429));
}

/// `clients` clients each send `each` requests one after another, all at once;
/// what `read` makes of each response, given the time it took.
pub async fn rounds<T: Send + 'static>(
    base: &str,
    clients: usize,
    each: usize,
    read: fn(&reqwest::Response, Duration) -> T,
) -> Vec<T> {
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let base = base.to_owned();
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let mut seen = Vec::new();
                for _ in 0..each {
                    let started = Instant::now();
                    let response = http.get(&base).send().await.unwrap();
                    seen.push(read(&response, started.elapsed()));
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

/// [`rounds`] reading every status.
pub async fn hammer(base: &str, clients: usize, each: usize) -> Vec<u16> {
    rounds(base, clients, each, |response, _| {
        response.status().as_u16()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_hold_concurrent_requests_resume_at_the_clients_pace_not_in_a_burst() {
    // Server: 5 a second. Client: 10 a second with 2 s of burst (20) saved.
    let server_limit = RateLimiter::new(FixedWindow::new(5, Duration::from_secs(1)).unwrap());
    let arrivals = Arc::new(Mutex::new(Vec::<(Instant, u16)>::new()));
    let record = Arc::clone(&arrivals);
    let router = counted_app(Arc::default())
        .layer(ServerLayer::new(server_limit))
        .layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let record = Arc::clone(&record);
                async move {
                    let at = Instant::now();
                    let response = next.run(request).await;
                    record
                        .lock()
                        .unwrap()
                        .push((at, response.status().as_u16()));
                    response
                }
            },
        ));
    let base = serve(router).await;
    let client_limit = RateLimiter::new(
        SmoothBursty::new(10.0)
            .unwrap()
            .with_max_burst(Duration::from_secs(2))
            .unwrap(),
    );
    let hold = HoldBack::new(client_limit.clock().clone());
    let client = ClientLayer::new(client_limit)
        .honour_server_with(hold, |r: &reqwest::Response| (r.status(), r.headers()))
        .layer(reqwest::Client::new());
    let url = reqwest::Url::parse(&base).unwrap();
    // 8 tasks share the client: 16 requests, about 4 of the server's windows.
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            let url = url.clone();
            tokio::spawn(async move {
                for _ in 0..2 {
                    let request = reqwest::Request::new(Method::GET, url.clone());
                    client.clone().oneshot(request).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("the client finishes")
            .unwrap();
    }
    let arrivals = arrivals.lock().unwrap().clone();
    // A 429 is the caller's answer, not retried: 16 requests reach the server.
    assert_eq!(arrivals.len(), 16);
    // The first burst (before any hold) may be refused in part; after it the
    // holds keep the client within the server's limit but for requests in flight.
    let later_refusals = arrivals
        .iter()
        .skip(8)
        .filter(|(_, status)| *status == 429)
        .count();
    assert!(later_refusals <= 2, "{arrivals:?}");
    // Paced at 100 ms, no three requests arrive within 60 ms of each other after
    // the first hold (a burst would send 5 or more together).
    let mut times: Vec<Instant> = arrivals.iter().skip(8).map(|(at, _)| *at).collect();
    times.sort();
    for three in times.windows(3) {
        assert!(
            three[2] - three[0] >= Duration::from_millis(60),
            "a burst after a hold: {:?}",
            times.iter().map(|t| *t - times[0]).collect::<Vec<_>>()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_a_full_queue_no_request_is_held_past_the_maximum() {
    // 5 a second, at most 3 queued, held up to 1.5 s, 12 at once: the queue fills,
    // the held ones compete for its slots, and the ones left without a turn are
    // refused once the maximum has passed, never later.
    let queue = RateLimiter::new(LeakyBucket::queue(3, 5, Duration::from_secs(1)).unwrap());
    let (seen, reached) = held_round(queue).await;
    let bound = Duration::from_millis(1_500) + Duration::from_secs(1);
    assert!(seen.iter().all(|s| s.3 < bound), "{seen:?}");
    let ok = seen.iter().filter(|s| s.0 == StatusCode::OK).count();
    let refused: Vec<_> = seen
        .iter()
        .filter(|s| s.0 == StatusCode::TOO_MANY_REQUESTS)
        .collect();
    assert!(!refused.is_empty(), "{seen:?}");
    assert!(
        refused
            .iter()
            .all(|s| s.1.iter().any(|f| f == "retry-after")),
        "{seen:?}"
    );
    assert_eq!(ok + refused.len(), seen.len(), "{seen:?}");
    assert_eq!(reached, ok);
}
