//! `ServerLayer::delay_up_to`: a request the limit refuses is held back for its
//! permits, up to a maximum, instead of refused (nginx's `limit_req` burst without
//! `nodelay`), so a queue shapes traffic. On held virtual time (a wait stays pending
//! until the test moves the clock), and on a real clock over loopback.
#![cfg(feature = "tower")]

use crate::support::adapters as adapters_common;

use crate::support::adapters::serve;
use adapters_common::{poll_once, HeldClock};
use axum::routing::get;
use axum::Router;
use http::{HeaderMap, Request, Response, StatusCode};
use sluicegate::adapters::server::ServerLayer;
use sluicegate::algorithms::{FixedWindow, LeakyBucket};
use sluicegate::clock::DefaultClock;
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};
use tower::{service_fn, Layer, Service, ServiceExt};

type Answer = Pin<Box<dyn Future<Output = Result<Response<()>, Infallible>>>>;

/// An app that counts its calls, and a server of `limiter` in front of it that
/// holds requests back for up to `max`.
fn held_server<L: sluicegate::adapters::Permits<Key = ()>>(
    limiter: L,
    max: Duration,
) -> (
    impl Service<Request<()>, Response = Response<()>, Error = Infallible, Future: 'static>
        + Clone
        + 'static,
    Arc<AtomicUsize>,
) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let app = service_fn(move |_: Request<()>| {
        seen.fetch_add(1, Ordering::Relaxed);
        async { Ok::<_, Infallible>(Response::new(())) }
    });
    (ServerLayer::new(limiter).delay_up_to(max).layer(app), calls)
}

/// Starts a request and polls it once.
fn start<S>(server: &S) -> (Answer, Poll<Response<()>>)
where
    S: Service<Request<()>, Response = Response<()>, Error = Infallible> + Clone + 'static,
    S::Future: 'static,
{
    let mut answer: Answer = Box::pin(server.clone().oneshot(Request::new(())));
    let polled = poll_once(answer.as_mut()).map(Result::unwrap);
    (answer, polled)
}

fn ready(polled: Poll<Response<()>>) -> Response<()> {
    match polled {
        Poll::Ready(response) => response,
        Poll::Pending => panic!("still held back"),
    }
}

fn names(headers: &HeaderMap) -> Vec<&str> {
    let mut names: Vec<&str> = headers.keys().map(|k| k.as_str()).collect();
    names.sort_unstable();
    names
}

#[test]
fn a_queue_behind_the_server_spaces_requests_and_refuses_past_the_maximum() {
    // 2 a second, 4 queued at most; a request may be held back up to 1 s.
    let clock = HeldClock::default();
    let queue = LeakyBucket::queue(4, 2, Duration::from_secs(1)).unwrap();
    let (server, calls) = held_server(
        RateLimiter::with_clock(queue, clock.clone()),
        Duration::from_secs(1),
    );
    // Five arrive at once. The first goes at once, with its fields.
    let first = ready(start(&server).1);
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.headers()["ratelimit"], r#""default";r=3;t=1"#);
    // The next two are held back, for 0.5 s and 1 s.
    let (mut second, polled) = start(&server);
    assert!(polled.is_pending());
    let (mut third, polled) = start(&server);
    assert!(polled.is_pending());
    // The next two would wait 1.5 s: refused at once, consuming nothing.
    for _ in 0..2 {
        let refused = ready(start(&server).1);
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()["ratelimit"], r#""default";r=0;t=2"#);
        assert_eq!(refused.headers()["retry-after"], "2");
    }
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    clock.advance(Duration::from_millis(499));
    assert!(poll_once(second.as_mut()).is_pending());
    clock.advance(Duration::from_millis(1));
    let second = ready(poll_once(second.as_mut()).map(Result::unwrap));
    assert_eq!(second.status(), StatusCode::OK);
    // Let through after a wait: the policy, but no stale RateLimit item.
    assert_eq!(names(second.headers()), ["ratelimit-policy"]);
    assert!(poll_once(third.as_mut()).is_pending());
    clock.advance(Duration::from_millis(500));
    assert_eq!(
        ready(poll_once(third.as_mut()).map(Result::unwrap)).status(),
        StatusCode::OK
    );
    assert_eq!(calls.load(Ordering::Relaxed), 3);
}

#[test]
fn a_held_request_dropped_mid_wait_gives_its_turn_back() {
    let clock = HeldClock::default();
    let queue = LeakyBucket::queue(4, 1, Duration::from_secs(1)).unwrap();
    let (server, calls) = held_server(
        RateLimiter::with_clock(queue, clock.clone()),
        Duration::from_secs(5),
    );
    ready(start(&server).1);
    let (abandoned, polled) = start(&server);
    assert!(polled.is_pending());
    drop(abandoned); // the client went away
                     // The next one takes the turn at 1 s, not the one after it at 2 s.
    let (mut next, polled) = start(&server);
    assert!(polled.is_pending());
    clock.advance(Duration::from_secs(1));
    assert!(poll_once(next.as_mut()).is_ready());
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}

#[test]
fn a_window_that_cannot_book_the_future_holds_its_waiter_until_it_turns() {
    let clock = HeldClock::default();
    let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    let (server, calls) = held_server(
        RateLimiter::with_clock(window, clock.clone()),
        Duration::from_secs(2),
    );
    ready(start(&server).1);
    let (mut held, polled) = start(&server);
    assert!(polled.is_pending());
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        ready(poll_once(held.as_mut()).map(Result::unwrap)).status(),
        StatusCode::OK
    );
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}

#[test]
fn without_a_delay_or_with_a_zero_one_nothing_is_held() {
    let clock = HeldClock::default();
    let queue = LeakyBucket::queue(4, 1, Duration::from_secs(1)).unwrap();
    let (server, _) = held_server(RateLimiter::with_clock(queue, clock), Duration::ZERO);
    ready(start(&server).1);
    assert_eq!(
        ready(start(&server).1).status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_loopback_a_queue_spaces_concurrent_requests_at_its_rate_and_refuses_none() {
    // 20 a second (one every 50 ms), up to 16 queued, each held up to 2 s; the app
    // notes when each request reaches it.
    const REQUESTS: usize = 10;
    let interval = Duration::from_millis(50);
    let queue = LeakyBucket::queue(16, 20, Duration::from_secs(1)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(queue, DefaultClock::new());
    let reached = Arc::new(Mutex::new(Vec::new()));
    let noted = reached.clone();
    let router = Router::new()
        .route(
            "/",
            get(move || {
                let noted = noted.clone();
                async move {
                    noted.lock().unwrap().push(Instant::now());
                    "hello"
                }
            }),
        )
        .layer(
            ServerLayer::keyed(limiter, |_: &Request<axum::body::Body>| "all")
                .delay_up_to(Duration::from_secs(2)),
        );
    let base = serve(router).await;
    let http = reqwest::Client::new();
    let started = Instant::now();
    let tasks: Vec<_> = (0..REQUESTS)
        .map(|_| {
            let (http, base) = (http.clone(), base.clone());
            tokio::spawn(async move { http.get(&base).send().await.unwrap().status() })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), StatusCode::OK, "none refused");
    }
    let mut reached = reached.lock().unwrap().clone();
    reached.sort();
    assert_eq!(reached.len(), REQUESTS);
    // The k-th to reach the app waited for its turn, k intervals after the first
    // could go (which is after `started`). A tenth of an interval allows for the
    // limiter's clock and `Instant` reading apart; a slow machine only spaces them
    // further.
    for (k, at) in reached.iter().enumerate() {
        let earliest = interval * k as u32 - interval / 10 * (k > 0) as u32;
        assert!(
            at.duration_since(started) >= earliest,
            "request {k} reached the app {:?} after the start",
            at.duration_since(started)
        );
    }
}
