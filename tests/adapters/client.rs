//! The client layer on virtual time: exact send times, keys and costs from the
//! request, shared limits across clones, fail-fast, permits given back by a dropped
//! request, deterministic jitter, and back-off after a server's 429/503.
#![cfg(feature = "tower")]

use crate::support::adapters as adapters_common;

use adapters_common::{poll_once, secs, unbursting, HeldClock, Remote};
use futures::executor::block_on;
use http::{Request, Response, StatusCode};
use sluicegate::adapters::client::{ClientError, ClientLayer};
use sluicegate::adapters::{HoldBack, Jitter, Weighed};
use sluicegate::algorithms::{AllOf, FixedWindow, SmoothBursty};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{Error, KeyedRateLimiter, RateLimiter};
use std::convert::Infallible;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower::{service_fn, Layer, Service, ServiceExt};

type Log = Arc<Mutex<Vec<(String, f64)>>>;

/// An inner service that notes (path, virtual time) of every request it receives
/// and answers what `answer` says for that path.
fn recording<C: Clock>(
    clock: C,
    answer: impl Fn(&str) -> Response<()> + Clone + Send + 'static,
) -> (
    impl Service<Request<()>, Response = Response<()>, Error = Infallible, Future = impl Send> + Clone,
    Log,
) {
    let log: Log = Arc::default();
    let seen = log.clone();
    let service = service_fn(move |request: Request<()>| {
        let path = request.uri().path().to_owned();
        seen.lock().unwrap().push((path.clone(), secs(clock.now())));
        let response = answer(&path);
        async move { Ok::<_, Infallible>(response) }
    });
    (service, log)
}

fn ok(_: &str) -> Response<()> {
    Response::new(())
}

fn get(path: &str) -> Request<()> {
    Request::get(format!("http://api.test{path}"))
        .body(())
        .unwrap()
}

fn times(log: &Log) -> Vec<f64> {
    log.lock().unwrap().iter().map(|(_, t)| *t).collect()
}

#[test]
fn requests_are_sent_at_the_limiters_rate() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(4.0, clock.clone()).unwrap();
    let (inner, log) = recording(clock.clone(), ok);
    let client = ClientLayer::new(limiter).layer(inner);
    block_on(async {
        for n in 0..5 {
            client.clone().oneshot(get(&format!("/{n}"))).await.unwrap();
        }
    });
    assert_eq!(times(&log), [0.0, 0.25, 0.5, 0.75, 1.0]);
}

#[test]
fn clones_share_one_limit_and_poll_ready_is_optional() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(2.0, clock.clone()).unwrap();
    let (inner, log) = recording(clock.clone(), ok);
    let layer = ClientLayer::new(limiter);
    let mut a = layer.layer(inner.clone());
    let mut b = layer.layer(inner);
    block_on(async {
        // `call` without `poll_ready` first: never a panic (tower#408).
        a.call(get("/a1")).await.unwrap();
        b.call(get("/b1")).await.unwrap();
        a.call(get("/a2")).await.unwrap();
        b.clone().call(get("/b2")).await.unwrap();
    });
    assert_eq!(times(&log), [0.0, 0.5, 1.0, 1.5]);
}

#[test]
fn key_and_cost_come_from_the_request() {
    let clock = ManualClock::new();
    // Per host: 1 per second, no saved burst; writes cost 2.
    let per_host = KeyedRateLimiter::with_clock(unbursting(1.0), clock.clone());
    let (inner, log) = recording(clock.clone(), ok);
    let client = ClientLayer::with_weigher(per_host, |r: &Request<()>| {
        let host = r.uri().host().unwrap_or_default().to_owned();
        (
            host,
            if r.method() == http::Method::POST {
                2
            } else {
                1
            },
        )
    })
    .layer(inner);
    let request = |method: &str, host: &str, path: &str| {
        Request::builder()
            .method(method)
            .uri(format!("http://{host}{path}"))
            .body(())
            .unwrap()
    };
    block_on(async {
        for r in [
            request("POST", "a.test", "/a-write"),
            request("GET", "a.test", "/a-read"),
            request("GET", "b.test", "/b-read"),
            request("GET", "a.test", "/a-read2"),
        ] {
            client.clone().oneshot(r).await.unwrap();
        }
    });
    let log = log.lock().unwrap().clone();
    // a: the write is free (pay later) but costs 2 s for the next; b is its own key.
    let expected: Vec<(String, f64)> = [
        ("/a-write", 0.0),
        ("/a-read", 2.0),
        ("/b-read", 2.0),
        ("/a-read2", 3.0),
    ]
    .iter()
    .map(|(p, t)| ((*p).to_owned(), *t))
    .collect();
    assert_eq!(log, expected);
}

#[test]
fn a_keyed_set_of_limits_paces_requests_too() {
    let clock = ManualClock::new();
    // 2 per second, and 3 per 10-second window.
    let set = AllOf::new((
        unbursting(2.0),
        FixedWindow::new(3, Duration::from_secs(10)).unwrap(),
    ));
    let limiter = KeyedRateLimiter::with_clock(set, clock.clone());
    let (inner, log) = recording(clock.clone(), ok);
    let client = ClientLayer::with_weigher(limiter, |_: &Request<()>| ("me", 1)).layer(inner);
    block_on(async {
        for _ in 0..4 {
            client.clone().oneshot(get("/")).await.unwrap();
        }
    });
    // The fourth waits for the next window.
    assert_eq!(times(&log), [0.0, 0.5, 1.0, 10.0]);
}

#[test]
fn past_the_maximum_wait_a_request_fails_unsent_and_consumes_nothing() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    let limiter = RateLimiter::with_clock(window, clock.clone());
    let (inner, log) = recording(clock.clone(), ok);
    let client = ClientLayer::new(limiter.clone())
        .with_max_wait(Duration::from_millis(400))
        .layer(inner);
    block_on(async {
        client.clone().oneshot(get("/1")).await.unwrap();
        match client.clone().oneshot(get("/2")).await {
            Err(ClientError::Throttled(Error::Timeout { needed })) => {
                assert_eq!(needed, Duration::from_secs(1));
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
    });
    assert_eq!(times(&log), [0.0], "the refused request was never sent");
    clock.advance(Duration::from_secs(1));
    assert!(
        limiter.try_acquire() && !limiter.try_acquire(),
        "the refusal took nothing"
    );
}

#[test]
fn a_cost_above_capacity_fails_at_once_as_never() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(3, Duration::from_secs(1)).unwrap();
    let limiter = RateLimiter::with_clock(window, clock.clone());
    let (inner, log) = recording(clock.clone(), ok);
    let client = ClientLayer::with_weigher(limiter, Weighed(|_: &Request<()>| 5)).layer(inner);
    let outcome = block_on(client.oneshot(get("/big")));
    assert!(matches!(
        outcome,
        Err(ClientError::Throttled(Error::Never { cost: 5 }))
    ));
    assert!(log.lock().unwrap().is_empty());
}

#[test]
fn a_request_dropped_while_waiting_gives_its_permits_back() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    let (inner, log) = recording(clock.clone(), ok);
    let client = ClientLayer::new(limiter.clone()).layer(inner);
    assert!(poll_once(pin!(client.clone().oneshot(get("/1")))).is_ready());
    {
        let mut second = pin!(client.clone().oneshot(get("/2")));
        assert!(
            poll_once(second.as_mut()).is_pending(),
            "waits for the permit at 1 s"
        );
    }
    clock.advance(Duration::from_secs(1));
    assert!(
        limiter.try_acquire(),
        "the dropped request's permit came back"
    );
    assert_eq!(times(&log), [0.0]);
}

#[test]
fn jitter_is_within_its_bounds_repeatable_and_only_for_waiters() {
    let run = |seed: u64| {
        let clock = ManualClock::new();
        let limiter = RateLimiter::bursty_with_clock(10.0, clock.clone()).unwrap();
        let (inner, log) = recording(clock.clone(), ok);
        let client = ClientLayer::new(limiter)
            .with_jitter(Jitter::new(Duration::from_millis(50), seed))
            .layer(inner);
        block_on(async {
            for _ in 0..6 {
                client.clone().oneshot(get("/")).await.unwrap();
            }
        });
        let sent = times(&log);
        (sent, clock.take_sleeps())
    };
    let (sent, sleeps) = run(7);
    assert_eq!(
        run(7),
        (sent.clone(), sleeps.clone()),
        "same seed, same schedule"
    );
    assert_ne!(run(8).0, sent, "another seed, another schedule");
    assert_eq!(sent[0], 0.0, "the first request did not wait, so no jitter");
    // The first request goes at once (no wait, so no jitter and no sleep at all).
    // Request k (k >= 1) waits for its slot at 0.1 k s, then draws its jitter; the
    // next request's wait is shortened by the jitter already slept. So the sleeps are
    // [100ms, j1, 100ms - j1, j2, 100ms - j2, ...].
    let slot = Duration::from_millis(100);
    assert_eq!(sleeps.len(), 2 * 5, "{sleeps:?}");
    assert_eq!(sleeps[0], slot);
    for k in 1..5 {
        let jitter = sleeps[2 * k - 1];
        assert!(jitter <= Duration::from_millis(50), "{sleeps:?}");
        assert_eq!(sleeps[2 * k], slot - jitter, "{sleeps:?}");
    }
    assert!(sleeps[9] <= Duration::from_millis(50));
}

fn too_many(retry_after: &str) -> Response<()> {
    Response::builder()
        .status(StatusCode::TOO_MANY_REQUESTS)
        .header("retry-after", retry_after)
        .body(())
        .unwrap()
}

/// A client at 10 per second whose server answers the paths it is given.
fn honouring(
    answer: impl Fn(&str) -> Response<()> + Clone + Send + 'static,
) -> (
    impl Service<Request<()>, Response = Response<()>, Error = ClientError<Infallible>> + Clone,
    Log,
    ManualClock,
) {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(10.0, clock.clone()).unwrap();
    let (inner, log) = recording(clock.clone(), answer);
    let client = ClientLayer::new(limiter)
        .honour_server(HoldBack::new(clock.clone()))
        .layer(inner);
    (client, log, clock)
}

fn send_all<S>(client: &S, paths: &[&str])
where
    S: Service<Request<()>, Response = Response<()>> + Clone,
    S::Error: std::fmt::Debug,
{
    block_on(async {
        for path in paths {
            client.clone().oneshot(get(path)).await.unwrap();
        }
    });
}

#[test]
fn retry_after_seconds_holds_the_client_back() {
    let (client, log, _) = honouring(|path| match path {
        "/limited" => too_many("3"),
        _ => Response::new(()),
    });
    send_all(&client, &["/limited", "/next", "/after"]);
    // The 429 at 0 holds the key for 3 s. The limiter saved a burst meanwhile, but
    // the key resumes at its steady rate (10 per second), not with that burst.
    assert_eq!(times(&log), [0.0, 3.0, 3.1]);
}

#[test]
fn retry_after_http_date_holds_the_client_back_from_the_servers_date() {
    let (client, log, _) = honouring(|path| match path {
        "/limited" => Response::builder()
            .status(StatusCode::SERVICE_UNAVAILABLE)
            .header("date", "Sun, 06 Nov 1994 08:49:37 GMT")
            .header("retry-after", "Sun, 06 Nov 1994 08:49:42 GMT")
            .body(())
            .unwrap(),
        _ => Response::new(()),
    });
    send_all(&client, &["/limited", "/next"]);
    assert_eq!(times(&log), [0.0, 5.0]);
}

#[test]
fn ratelimit_fields_hold_the_client_back_when_the_quota_is_spent() {
    let (client, log, _) = honouring(|path| {
        let field = match path {
            "/spent" => r#""burst";r=0;t=2, "daily";r=900;t=80000"#,
            _ => r#""burst";r=5;t=2"#,
        };
        Response::builder()
            .header("ratelimit", field)
            .body(())
            .unwrap()
    });
    // /fine leaves quota (no hold; the limiter's 0.1 s); /spent says r=0 for 2 s.
    send_all(&client, &["/fine", "/spent", "/next"]);
    assert_eq!(times(&log), [0.0, 0.1, 2.1]);
}

#[test]
fn the_hold_is_capped_and_only_ever_slows_down() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(10.0, clock.clone()).unwrap();
    let (inner, log) = recording(clock.clone(), |path| match path {
        "/huge" => too_many("100000"),
        "/short" => too_many("1"),
        _ => Response::new(()),
    });
    let hold = HoldBack::new(clock.clone()).with_cap(Duration::from_secs(30));
    let client = ClientLayer::new(limiter)
        .honour_server(hold.clone())
        .layer(inner);
    send_all(&client, &["/huge"]);
    assert_eq!(hold.remaining(&()), Duration::from_secs(30), "capped");
    // A later, shorter hint does not shorten the hold already in place.
    let mut headers = http::HeaderMap::new();
    headers.insert("retry-after", "1".parse().unwrap());
    hold.observe((), StatusCode::TOO_MANY_REQUESTS, &headers);
    assert_eq!(hold.remaining(&()), Duration::from_secs(30));
    send_all(&client, &["/next"]);
    assert_eq!(times(&log), [0.0, 30.0]);
}

#[test]
fn a_hold_longer_than_the_maximum_wait_fails_fast() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(10.0, clock.clone()).unwrap();
    let (inner, log) = recording(clock.clone(), |_| too_many("5"));
    let client = ClientLayer::new(limiter)
        .with_max_wait(Duration::from_secs(2))
        .honour_server(HoldBack::new(clock.clone()))
        .layer(inner);
    block_on(async {
        client.clone().oneshot(get("/")).await.unwrap();
        let refused = client.clone().oneshot(get("/")).await;
        assert!(matches!(
            refused,
            Err(ClientError::Throttled(Error::Timeout { needed })) if needed == Duration::from_secs(5)
        ));
    });
    assert_eq!(times(&log), [0.0]);
    assert_eq!(clock.now(), 0, "failed without sleeping");
}

#[test]
fn holds_are_per_key() {
    let clock = ManualClock::new();
    let per_host = KeyedRateLimiter::with_clock(SmoothBursty::new(100.0).unwrap(), clock.clone());
    let (inner, log) = recording(clock.clone(), |path| match path {
        "/a-limited" => too_many("4"),
        _ => Response::new(()),
    });
    let client = ClientLayer::with_weigher(per_host, |r: &Request<()>| {
        (r.uri().path().chars().nth(1).unwrap_or('-'), 1)
    })
    .honour_server(HoldBack::new(clock.clone()))
    .layer(inner);
    send_all(&client, &["/a-limited", "/b-free", "/a-next"]);
    assert_eq!(times(&log), [0.0, 0.0, 4.0]);
}

#[test]
fn a_keyed_limiter_over_an_asynchronous_store_paces_and_gives_back() {
    let clock = HeldClock::default();
    let round_trips = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let store = Remote::new(round_trips.clone());
    let bursty = unbursting(1.0);
    let limiter = KeyedRateLimiter::with_store(bursty, store, clock.clone());
    let (inner, log) = recording(clock.clone(), ok);
    let client =
        ClientLayer::with_weigher(limiter.clone(), |_: &Request<()>| ("api", 1)).layer(inner);
    let mut first = pin!(client.clone().oneshot(get("/1")));
    assert!(
        poll_once(first.as_mut()).is_pending(),
        "the store's reply is in flight"
    );
    assert!(poll_once(first.as_mut()).is_ready());
    {
        let mut second = pin!(client.clone().oneshot(get("/2")));
        assert!(poll_once(second.as_mut()).is_pending());
        assert!(
            poll_once(second.as_mut()).is_pending(),
            "granted at 1 s: waiting"
        );
    }
    // The dropped request's cancel went to the store (a blocking round trip).
    assert_eq!(round_trips.load(std::sync::atomic::Ordering::Relaxed), 3);
    clock.advance(Duration::from_secs(1));
    assert!(limiter.try_acquire(&"api"), "its permit came back");
    assert_eq!(times(&log), [0.0]);
}

#[test]
fn waiters_are_served_in_the_order_they_asked() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    let (inner, log) = recording(clock.clone(), ok);
    let client = ClientLayer::new(limiter).layer(inner);
    // The client's own futures (a done one stays pending if polled again).
    let mut a = pin!(client.clone().call(get("/a")));
    let mut b = pin!(client.clone().call(get("/b")));
    let mut c = pin!(client.clone().call(get("/c")));
    let mut d = pin!(client.clone().call(get("/d")));
    // a goes at once; b, c and d each book the next slot, in the order they asked.
    assert!(poll_once(a.as_mut()).is_ready());
    for waiting in [b.as_mut(), c.as_mut(), d.as_mut()] {
        assert!(poll_once(waiting).is_pending());
    }
    // Polled latest first at every second: only the one whose slot came goes.
    for (second, expected) in [(1, "/b"), (2, "/c"), (3, "/d")] {
        clock.advance(Duration::from_secs(1));
        let _ = poll_once(d.as_mut());
        let _ = poll_once(c.as_mut());
        let _ = poll_once(b.as_mut());
        let sent = log.lock().unwrap().clone();
        assert_eq!(
            sent.last().unwrap(),
            &(expected.to_owned(), f64::from(second))
        );
        assert_eq!(sent.len(), second as usize + 1);
    }
}

/// An inner service that is never ready: it fails its readiness check.
#[derive(Clone)]
struct Broken;

impl Service<Request<()>> for Broken {
    type Response = Response<()>;
    type Error = &'static str;
    type Future = futures::future::Ready<Result<Response<()>, &'static str>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Err("connection pool closed"))
    }

    fn call(&mut self, _: Request<()>) -> Self::Future {
        futures::future::ready(Ok(Response::new(())))
    }
}

#[test]
fn the_inner_services_errors_come_through_after_the_wait() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    let mut client = ClientLayer::new(limiter.clone()).layer(Broken);
    // Always ready itself: the inner readiness is checked after the wait.
    assert!(block_on(futures::future::poll_fn(|cx| client.poll_ready(cx))).is_ok());
    let outcome = block_on(client.call(get("/")));
    assert!(matches!(
        outcome,
        Err(ClientError::Service("connection pool closed"))
    ));
    assert_eq!(outcome.unwrap_err().to_string(), "connection pool closed");
    // The permit was spent on the attempt (it was granted before the inner failed).
    assert!(!limiter.try_acquire());
}

#[test]
fn a_hold_lengthened_while_a_request_waits_it_out_is_honoured() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::bursty_with_clock(100.0, clock.clone()).unwrap();
    let (inner, log) = recording(clock.clone(), |path| match path {
        "/limited" => too_many("2"),
        _ => Response::new(()),
    });
    let hold = HoldBack::new(clock.clone());
    let client = ClientLayer::new(limiter)
        .honour_server(hold.clone())
        .layer(inner);
    assert!(poll_once(pin!(client.clone().call(get("/limited")))).is_ready());
    let mut next = pin!(client.clone().call(get("/next")));
    assert!(poll_once(next.as_mut()).is_pending(), "held back for 2 s");
    // Meanwhile another response asks for 5 s from t = 1 s.
    clock.advance(Duration::from_secs(1));
    let mut longer = http::HeaderMap::new();
    longer.insert("retry-after", "5".parse().unwrap());
    hold.observe((), StatusCode::TOO_MANY_REQUESTS, &longer);
    clock.advance(Duration::from_secs(1));
    assert!(
        poll_once(next.as_mut()).is_pending(),
        "the first hold ended, the longer did not"
    );
    clock.advance(Duration::from_secs(4));
    assert!(poll_once(next.as_mut()).is_ready());
    assert_eq!(times(&log), [0.0, 6.0]);
}

/// An inner service whose clones start unready (as tower's `ConcurrencyLimit` and
/// `Buffer` do) and which refuses a call it was not readied for.
struct Probe {
    ready: bool,
}

impl Clone for Probe {
    fn clone(&self) -> Self {
        Probe { ready: false }
    }
}

impl Service<Request<()>> for Probe {
    type Response = Response<()>;
    type Error = &'static str;
    type Future = futures::future::Ready<Result<Response<()>, &'static str>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.ready = true;
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<()>) -> Self::Future {
        let outcome = if std::mem::take(&mut self.ready) {
            Ok(Response::new(()))
        } else {
            Err("called without poll_ready")
        };
        futures::future::ready(outcome)
    }
}

#[test]
fn the_inner_service_is_readied_before_every_call() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(10.0, clock).unwrap();
    let client = ClientLayer::new(limiter).layer(Probe { ready: false });
    block_on(async {
        for _ in 0..3 {
            // With and without the caller's own poll_ready.
            client.clone().oneshot(get("/")).await.unwrap();
            client.clone().call(get("/")).await.unwrap();
        }
    });
}
