//! The client layer under a server's holds, on virtual time, with many requests of
//! one key in flight at once: a hold stops the requests already waiting for their
//! permits, and after it the key resumes at its limiter's steady pace, whatever the
//! algorithm, never with the credit the limiter stored during the hold.
#![cfg(feature = "tower")]

use crate::support::adapters as adapters_common;

use adapters_common::{poll_once, secs, unbursting, HeldClock};
use http::{HeaderMap, Request, Response, StatusCode};
use sluicegate::adapters::client::{ClientError, ClientLayer};
use sluicegate::adapters::HoldBack;
use sluicegate::algorithms::{
    Algorithm, AllOf, FixedWindow, LeakyBucket, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::Clock;
use sluicegate::{Error, KeyedRateLimiter, RateLimiter};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower::{service_fn, Layer, Service};

type Sent = Arc<Mutex<Vec<f64>>>;
type Call = Pin<Box<dyn Future<Output = Result<Response<()>, ClientError<Infallible>>>>>;

/// An inner service that notes the virtual time of every request and answers `200`.
fn recording(
    clock: HeldClock,
) -> (
    impl Service<Request<()>, Response = Response<()>, Error = Infallible, Future = impl Send> + Clone,
    Sent,
) {
    let sent: Sent = Arc::default();
    let log = sent.clone();
    let service = service_fn(move |_: Request<()>| {
        log.lock().unwrap().push(secs(clock.now()));
        async { Ok::<_, Infallible>(Response::new(())) }
    });
    (service, sent)
}

fn request() -> Request<()> {
    Request::get("http://api.test/").body(()).unwrap()
}

fn retry_after(seconds: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("retry-after", seconds.parse().unwrap());
    headers
}

/// Calls in flight at once, polled together on virtual time.
struct Calls {
    calls: Vec<Call>,
    done: Vec<Option<bool>>,
}

impl Calls {
    /// `n` calls of `client`, not yet polled.
    fn of<S>(client: &S, n: usize) -> Self
    where
        S: Service<Request<()>, Response = Response<()>, Error = ClientError<Infallible>>
            + Clone
            + 'static,
        S::Future: 'static,
    {
        Calls {
            calls: (0..n)
                .map(|_| Box::pin(client.clone().call(request())) as Call)
                .collect(),
            done: vec![None; n],
        }
    }

    /// Polls every call not yet done, once.
    fn poll_all(&mut self) {
        for (call, done) in self.calls.iter_mut().zip(self.done.iter_mut()) {
            if done.is_none()
                && let std::task::Poll::Ready(outcome) = poll_once(call.as_mut())
            {
                *done = Some(outcome.is_ok());
            }
        }
    }

    /// Polls until all are done, moving the clock 10 ms at a time (at most `limit`
    /// of virtual time); answers each call's outcome (`true`: a response).
    fn run(&mut self, clock: &HeldClock, limit: Duration) -> Vec<bool> {
        let mut elapsed = Duration::ZERO;
        loop {
            self.poll_all();
            if self.done.iter().all(Option::is_some) {
                return self.done.iter().map(|d| d.unwrap()).collect();
            }
            assert!(elapsed < limit, "calls still pending after {limit:?}");
            clock.advance(Duration::from_millis(10));
            elapsed += Duration::from_millis(10);
        }
    }
}

#[test]
fn a_hold_stops_requests_already_waiting_for_their_permits() {
    let clock = HeldClock::default();
    // 10 per second with no stored burst: each request waits its own 0.1 s.
    let limiter = RateLimiter::with_clock(unbursting(10.0), clock.clone());
    let hold = HoldBack::new(clock.clone());
    let (inner, sent) = recording(clock.clone());
    let client = ClientLayer::new(limiter)
        .honour_server(hold.clone())
        .layer(inner);
    let mut calls = Calls::of(&client, 4);
    // The first goes at 0; the others wait for permits at 0.1, 0.2 and 0.3.
    calls.poll_all();
    assert_eq!(*sent.lock().unwrap(), [0.0]);
    // At 0.05 s another response of the key asks for 2 s.
    clock.advance(Duration::from_millis(50));
    hold.observe((), StatusCode::TOO_MANY_REQUESTS, &retry_after("2"));
    assert_eq!(calls.run(&clock, Duration::from_secs(5)), [true; 4]);
    // None of the waiting requests left during the hold (until 2.05 s); after it
    // they go at the limiter's pace of 10 per second.
    assert_eq!(*sent.lock().unwrap(), [0.0, 2.05, 2.15, 2.25]);
}

#[test]
fn a_hold_that_outlasts_the_maximum_wait_fails_a_waiting_request_unsent() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(10.0), clock.clone());
    let hold = HoldBack::new(clock.clone());
    let (inner, sent) = recording(clock.clone());
    let client = ClientLayer::new(limiter)
        .with_max_wait(Duration::from_secs(1))
        .honour_server(hold.clone())
        .layer(inner);
    let mut first = Box::pin(client.clone().call(request()));
    let mut second = Box::pin(client.clone().call(request()));
    assert!(poll_once(first.as_mut()).is_ready());
    assert!(
        poll_once(second.as_mut()).is_pending(),
        "waits for its permit"
    );
    hold.observe((), StatusCode::TOO_MANY_REQUESTS, &retry_after("5"));
    clock.advance(Duration::from_millis(100));
    match poll_once(second.as_mut()) {
        std::task::Poll::Ready(Err(ClientError::Throttled(Error::Timeout { needed }))) => {
            assert_eq!(
                needed,
                Duration::from_secs(5),
                "0.1 s of permit, 4.9 s of hold"
            )
        }
        other => panic!("expected a timeout, got {:?}", other.map(|r| r.is_ok())),
    }
    assert_eq!(*sent.lock().unwrap(), [0.0]);
}

/// A key that stored its whole credit, held for 2 s at 0, then `n` requests at
/// once: their send times.
fn sends_after_a_hold<A: Algorithm>(algorithm: A, n: usize) -> Vec<f64> {
    let clock = HeldClock::default();
    // Idle long enough for every algorithm to store a full burst.
    clock.advance(Duration::from_secs(100));
    let limiter = KeyedRateLimiter::with_clock(algorithm, clock.clone());
    let hold = HoldBack::new(clock.clone());
    let (inner, sent) = recording(clock.clone());
    let client = ClientLayer::with_weigher(limiter, |_: &Request<()>| ("api.test", 1))
        .honour_server(hold.clone())
        .layer(inner);
    hold.observe("api.test", StatusCode::TOO_MANY_REQUESTS, &retry_after("2"));
    let outcomes = Calls::of(&client, n).run(&clock, Duration::from_secs(30));
    assert_eq!(outcomes, vec![true; n]);
    let sent = sent.lock().unwrap();
    sent.iter()
        .map(|t| ((t - 100.0) * 100.0).round() / 100.0)
        .collect()
}

#[test]
fn after_a_hold_every_algorithm_resumes_at_its_steady_pace_not_with_its_burst() {
    let second = Duration::from_secs(1);
    let paced = [2.0, 2.1, 2.2, 2.3, 2.4, 2.5];
    // Ten per second, each: the burst it stored over 100 s is not fired at 2 s.
    assert_eq!(
        sends_after_a_hold(SmoothBursty::new(10.0).unwrap(), 6),
        paced
    );
    assert_eq!(
        sends_after_a_hold(LeakyBucket::meter(10, 10, second).unwrap(), 6),
        paced
    );
    assert_eq!(
        sends_after_a_hold(LeakyBucket::queue(10, 10, second).unwrap(), 6),
        paced
    );
    assert_eq!(
        sends_after_a_hold(FixedWindow::new(10, second).unwrap(), 6),
        paced
    );
    assert_eq!(
        sends_after_a_hold(SlidingWindowCounter::new(10, second).unwrap(), 6),
        paced
    );
    let buckets = SlidingWindowBuckets::dropping(10, second, Duration::from_millis(100));
    assert_eq!(sends_after_a_hold(buckets.unwrap(), 6), paced);
    assert_eq!(
        sends_after_a_hold(SlidingLog::new(10, second).unwrap(), 6),
        paced
    );
    // A set goes at its slowest member's pace: one per 0.2 s.
    let set = AllOf::new((
        SmoothBursty::new(10.0).unwrap(),
        FixedWindow::new(30, Duration::from_secs(6)).unwrap(),
    ));
    assert_eq!(sends_after_a_hold(set, 4), [2.0, 2.2, 2.4, 2.6]);
    // A cold warming-up limiter is slower than its steady pace by its own rule:
    // the pace only keeps it from going faster.
    let warming = SmoothWarmingUp::new(10.0, Duration::from_secs(1)).unwrap();
    let sends = sends_after_a_hold(warming, 6);
    assert_eq!(sends[0], 2.0);
    for pair in sends.windows(2) {
        assert!(pair[1] - pair[0] >= 0.1 - 1e-9, "{sends:?}");
    }
}

#[test]
fn the_pace_ends_once_a_whole_refill_passes_without_a_request() {
    let clock = HeldClock::default();
    clock.advance(Duration::from_secs(100));
    let limiter = RateLimiter::with_clock(SmoothBursty::new(10.0).unwrap(), clock.clone());
    let hold = HoldBack::new(clock.clone());
    let (inner, sent) = recording(clock.clone());
    let client = ClientLayer::new(limiter)
        .honour_server(hold.clone())
        .layer(inner);
    hold.observe((), StatusCode::TOO_MANY_REQUESTS, &retry_after("1"));
    Calls::of(&client, 3).run(&clock, Duration::from_secs(5));
    // The bucket's refill is 1 s: after 1 s more without a request, the limiter
    // alone decides again, and it has stored its burst by its own rule.
    clock.advance(Duration::from_millis(1_200));
    let after = secs(clock.now()) - 100.0;
    Calls::of(&client, 3).run(&clock, Duration::from_secs(5));
    let sent: Vec<f64> = sent
        .lock()
        .unwrap()
        .iter()
        .map(|t| ((t - 100.0) * 100.0).round() / 100.0)
        .collect();
    let after = (after * 100.0).round() / 100.0;
    assert_eq!(sent, [1.0, 1.1, 1.2, after, after, after]);
}

#[test]
fn a_response_from_a_cache_holds_nothing() {
    let clock = HeldClock::default();
    let hold = HoldBack::new(clock.clone());
    let mut headers = retry_after("5");
    headers.insert("age", "3".parse().unwrap());
    assert_eq!(
        hold.observe("k", StatusCode::TOO_MANY_REQUESTS, &headers),
        None
    );
    headers.insert("ratelimit", r#""q";r=0;t=9"#.parse().unwrap());
    assert_eq!(hold.observe("k", StatusCode::OK, &headers), None);
    assert_eq!(hold.remaining(&"k"), Duration::ZERO);
    // A fresh response (Age 0) is honoured.
    headers.insert("age", "0".parse().unwrap());
    assert_eq!(
        hold.observe("k", StatusCode::TOO_MANY_REQUESTS, &headers),
        Some(Duration::from_secs(5))
    );
}

#[test]
fn a_free_request_takes_no_permit_and_no_turn_but_honours_the_hold() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), clock.clone());
    let hold = HoldBack::new(clock.clone());
    let (inner, sent) = recording(clock.clone());
    let free = |_: &Request<()>| ((), 0);
    let client = ClientLayer::with_weigher(limiter.clone(), free)
        .honour_server(hold.clone())
        .layer(inner);
    let outcomes = Calls::of(&client, 3).run(&clock, Duration::from_secs(1));
    assert_eq!(outcomes, [true; 3]);
    assert!(limiter.try_acquire(), "nothing was taken from the limiter");
    hold.observe((), StatusCode::TOO_MANY_REQUESTS, &retry_after("2"));
    let outcomes = Calls::of(&client, 1).run(&clock, Duration::from_secs(3));
    assert_eq!(outcomes, [true]);
    assert_eq!(*sent.lock().unwrap(), [0.0, 0.0, 0.0, 2.0]);
}

// On the real clock, over loopback: an axum server behind the server layer, and
// many tasks sharing one reqwest client behind the client layer. Bounded: a few
// seconds each, with generous margins.

mod loopback {
    use axum::routing::get;
    use axum::Router;
    use http::StatusCode;
    use sluicegate::adapters::client::ClientLayer;
    use sluicegate::adapters::server::ServerLayer;
    use sluicegate::adapters::HoldBack;
    use sluicegate::RateLimiter;
    use std::time::{Duration, Instant};
    use tower::{Layer, Service, ServiceExt};

    async fn serve(router: Router) -> reqwest::Url {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await });
        reqwest::Url::parse(&url).unwrap()
    }

    /// A reqwest client behind a client layer at `rate` per second that honours the
    /// server.
    fn client(
        rate: f64,
    ) -> impl Service<
        reqwest::Request,
        Response = reqwest::Response,
        Error = impl std::fmt::Debug,
        Future = impl Send,
    > + Clone
           + Send {
        let limiter = RateLimiter::bursty(rate).unwrap();
        let hold = HoldBack::new(limiter.clock().clone());
        ClientLayer::new(limiter)
            .honour_server_with(hold, |r: &reqwest::Response| (r.status(), r.headers()))
            .layer(reqwest::Client::new())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn eight_tasks_sharing_a_client_meet_a_slower_server_with_few_refusals() {
        // The server allows 10 per second; the client would go at 20.
        let server = ServerLayer::new(RateLimiter::bursty(10.0).unwrap());
        let url = serve(
            Router::new()
                .route("/", get(|| async { "ok" }))
                .layer(server),
        )
        .await;
        let client = client(20.0);
        let deadline = Instant::now() + Duration::from_secs(3);
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (client, url) = (client.clone(), url.clone());
                tokio::spawn(async move {
                    let (mut ok, mut refused) = (0u32, 0u32);
                    while Instant::now() < deadline {
                        let request = reqwest::Request::new(http::Method::GET, url.clone());
                        let response = client.clone().oneshot(request).await.unwrap();
                        match response.status() {
                            StatusCode::OK => ok += 1,
                            StatusCode::TOO_MANY_REQUESTS => refused += 1,
                            other => panic!("unexpected {other}"),
                        }
                    }
                    (ok, refused)
                })
            })
            .collect();
        let (mut ok, mut refused) = (0, 0);
        for task in tasks {
            let (o, r) = task.await.unwrap();
            ok += o;
            refused += r;
        }
        // The server's `RateLimit` field says `r=0` on the grant of its last permit,
        // which holds the key back before any refusal; a refusal can only meet a
        // request already in flight when a hold began (at most the 8 tasks'), and
        // each hold is followed by the steady pace, not a burst.
        eprintln!("{ok} served, {refused} refused");
        assert!(refused <= 8, "{refused} refused, {ok} served");
        // About 10 per second for 3 s, plus the server's stored burst of 10.
        assert!((15..=45).contains(&ok), "{ok} served");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn after_a_hold_a_client_resumes_at_its_pace_not_with_its_stored_burst() {
        // A server that answers its first request `429` with `Retry-After: 1`.
        let first = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let app = Router::new().route(
            "/",
            get(move || {
                let refuse = first.swap(false, std::sync::atomic::Ordering::SeqCst);
                async move {
                    if refuse {
                        (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")]).into_response()
                    } else {
                        "ok".into_response()
                    }
                }
            }),
        );
        let url = serve(app).await;
        // 10 per second, idle long enough to store a full burst of 10.
        let client = client(10.0);
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        let start = Instant::now();
        let refused = client
            .clone()
            .oneshot(reqwest::Request::new(http::Method::GET, url.clone()))
            .await
            .unwrap();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (client, url) = (client.clone(), url.clone());
                tokio::spawn(async move {
                    let request = reqwest::Request::new(http::Method::GET, url);
                    let response = client.oneshot(request).await.unwrap();
                    assert_eq!(response.status(), StatusCode::OK);
                    start.elapsed()
                })
            })
            .collect();
        let mut sent = Vec::new();
        for task in tasks {
            sent.push(task.await.unwrap());
        }
        sent.sort();
        eprintln!("sent at {sent:?}");
        // Nothing before the hold ends, then 10 per second: the 8 answers span
        // about 0.7 s (the stored burst would have sent them within milliseconds).
        // The span is measured, not each gap: on a loaded machine two answers sent
        // 100 ms apart may arrive together, while a burst cannot span 0.5 s.
        assert!(sent[0] >= Duration::from_millis(990), "{sent:?}");
        let span = sent[7] - sent[0];
        assert!(span >= Duration::from_millis(500), "{sent:?}");
    }

    use axum::response::IntoResponse;
}
