//! The client layer beside the Stream and Sink adapters, checked against the
//! documentation alone: all three adapters booking turns on one limit in the order
//! asked; a turn after a hold that stays booked when its request is dropped; a hold
//! that must stop a request not yet sent, whether it sleeps its jitter or waits for
//! the inner service; `HoldBack::wait` against a hold lengthened meanwhile; and many
//! tasks against a real loopback server that answers `429`, in memory and over a
//! keyed Redis store: the refusals a hold can still meet are bounded by the
//! requests in flight when it began.
#![cfg(feature = "tower")]

use crate::support::adapters::{poll_next, poll_once, serve, unbursting, HeldClock};
use futures::channel::mpsc;
use futures::{stream, SinkExt};
use http::{HeaderMap, Response, StatusCode};
use sluicegate::adapters::client::{ClientError, ClientLayer};
use sluicegate::adapters::{HoldBack, Jitter, Throttled, ThrottledSink};
use sluicegate::clock::Clock;
use sluicegate::RateLimiter;
use std::convert::Infallible;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tower::{service_fn, Layer, Service, ServiceExt};

/// Every call an inner service received: its label and the clock's reading in ms.
type Sent = Arc<Mutex<Vec<(u32, u64)>>>;

/// An inner service on `clock` that records each call and answers `429` with
/// `Retry-After: 2` to label 1, `200` to the others.
fn holding_on_first(
    clock: HeldClock,
    sent: Sent,
) -> impl Service<u32, Response = Response<()>, Error = Infallible, Future = impl Send> + Clone {
    service_fn(move |label: u32| {
        sent.lock().unwrap().push((label, clock.now() / 1_000_000));
        let response = if label == 1 {
            Response::builder()
                .status(StatusCode::TOO_MANY_REQUESTS)
                .header("retry-after", "2")
                .body(())
                .unwrap()
        } else {
            Response::new(())
        };
        async move { Ok::<_, Infallible>(response) }
    })
}

/// Polls `future` to its end on held time, moving the clock 10 ms per pending poll
/// (at most 10 s of it).
fn drive<F: Future>(future: F, clock: &HeldClock) -> F::Output {
    let mut future = pin!(future);
    for _ in 0..1000 {
        if let Poll::Ready(out) = poll_once(future.as_mut()) {
            return out;
        }
        clock.advance(Duration::from_millis(10));
    }
    panic!("still pending after 10 s of virtual time")
}

// --- Virtual time ---------------------------------------------------------------

/// README: "Every adapter owns a shared handle to any limiter, so ... clones share
/// one limit"; the module's "Waiting": a bursty limiter "books each waiter its own
/// slot in the order they asked". A stream's items, a sink's and a client's
/// requests asked for in turn on one limit come out one interval apart in that
/// order, whichever adapter is polled first.
#[test]
fn a_stream_a_sink_and_a_client_on_one_limit_are_served_in_the_order_they_asked() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(10.0), clock.clone());
    let mut paced = Throttled::new(stream::iter(["a", "d"]), limiter.clone());
    let (tx, mut rx) = mpsc::unbounded::<&str>();
    let mut sink = ThrottledSink::new(tx, limiter.clone());
    let client =
        ClientLayer::new(limiter.clone()).layer(service_fn(|s: &'static str| async move {
            Ok::<_, Infallible>(s)
        }));

    assert_eq!(poll_next(Pin::new(&mut paced)), Poll::Ready(Some(Ok("a"))));
    let mut request = Box::pin(client.oneshot("b"));
    assert!(poll_once(request.as_mut()).is_pending(), "b's turn: 100 ms");
    let mut send = Box::pin(sink.send("c"));
    assert!(poll_once(send.as_mut()).is_pending(), "c's turn: 200 ms");
    assert!(
        poll_next(Pin::new(&mut paced)).is_pending(),
        "d's turn: 300 ms"
    );

    let mut order = Vec::new();
    let (mut b_done, mut c_done) = (false, false);
    for step in 1..=3 {
        clock.advance(Duration::from_millis(100));
        let mut now = Vec::new();
        if let Poll::Ready(Some(item)) = poll_next(Pin::new(&mut paced)) {
            now.push(item.unwrap());
        }
        if !c_done && let Poll::Ready(sent) = poll_once(send.as_mut()) {
            sent.unwrap();
            c_done = true;
            now.push(rx.try_recv().unwrap());
        }
        if !b_done && let Poll::Ready(answer) = poll_once(request.as_mut()) {
            b_done = true;
            now.push(answer.unwrap());
        }
        assert_eq!(now.len(), 1, "at {} ms: {now:?}", step * 100);
        order.extend(now);
    }
    assert_eq!(order, ["b", "c", "d"]);
}

/// `ResponseFuture`: "Dropped while waiting for its turn after a hold, it gives the
/// turn back: if no later turn is booked, the key's pace resumes from it ..., so the
/// next request goes as if the dropped ones had never asked."
#[test]
fn a_request_dropped_while_waiting_for_its_turn_after_a_hold_gives_that_turn_back() {
    // Two runs alike but for a request (label 3) dropped mid-turn in the first:
    // when the request after it (label 4) is sent.
    let run = |drop_one: bool| {
        let clock = HeldClock::default();
        let limiter = RateLimiter::bursty_with_clock(4.0, clock.clone()).unwrap();
        let sent = Sent::default();
        let client = ClientLayer::new(limiter)
            .honour_server(HoldBack::new(clock.clone()))
            .layer(holding_on_first(clock.clone(), sent.clone()));
        let refused = drive(client.clone().oneshot(1), &clock).unwrap();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        drive(client.clone().oneshot(2), &clock).unwrap();
        if drop_one {
            let mut third = Box::pin(client.clone().oneshot(3));
            assert!(poll_once(third.as_mut()).is_pending(), "3 waits its turn");
        }
        drive(client.clone().oneshot(4), &clock).unwrap();
        let sent = sent.lock().unwrap().clone();
        assert_eq!(sent.len(), 3, "{sent:?}");
        assert!(sent[1].1 >= 2000, "2 went during the hold: {sent:?}");
        (sent[1].1, sent[2].1)
    };
    let (second, fourth_alone) = run(false);
    assert_eq!(fourth_alone - second, 250, "one turn at 4 per second");
    assert_eq!(
        run(true),
        (second, second + 250),
        "4 takes the turn 3 gave back"
    );
}

/// `ResponseFuture`: "A request goes only when both its permits and every hold of
/// its key allow it"; the module: the server's answer "holds back every request of
/// that key ... A request already sent cannot be recalled". A request that has its
/// permit and sleeps its jitter is not sent yet: a hold that begins then stops it
/// as it stops one still waiting for its permit.
#[test]
fn a_hold_that_begins_during_a_requests_jitter_stops_it_too() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(1.0), clock.clone());
    let max = Duration::from_millis(500);
    let first_draw = Jitter::new(max, 3).draw();
    assert!(first_draw >= Duration::from_millis(50), "{first_draw:?}");
    let hold = HoldBack::new(clock.clone());
    let sent = Sent::default();
    let client = ClientLayer::new(limiter)
        .with_jitter(Jitter::new(max, 3))
        .honour_server(hold.clone())
        .layer(holding_on_first(clock.clone(), sent.clone()));
    drive(client.clone().oneshot(0), &clock).unwrap(); // at once: no jitter
    let mut second = Box::pin(client.clone().oneshot(2));
    assert!(poll_once(second.as_mut()).is_pending(), "its permit: 1 s");
    clock.advance(Duration::from_secs(1));
    assert!(
        poll_once(second.as_mut()).is_pending(),
        "permit granted, jitter of {first_draw:?} to sleep"
    );
    // Another response of the key asks for 2 s, until 3 s.
    let mut headers = HeaderMap::new();
    headers.insert("retry-after", "2".parse().unwrap());
    hold.observe((), StatusCode::TOO_MANY_REQUESTS, &headers);
    drive(second, &clock).unwrap();
    let sent = sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent[1].1 >= 3000,
        "sent at {} ms, inside the hold that ends at 3000 ms",
        sent[1].1
    );
}

/// The same promise for a request that has its permit and waits for the inner
/// service to be ready (a full connection pool): "A request goes only when both its
/// permits and every hold of its key allow it", and the refusals a hold can still
/// meet are "bounded by the requests in flight when it began" (sent ones). Not
/// sent yet when the hold begins, it waits the hold out.
#[test]
fn a_hold_that_begins_while_the_inner_service_is_not_ready_stops_the_request_too() {
    #[derive(Clone)]
    struct Gated {
        open: Arc<std::sync::atomic::AtomicBool>,
        clock: HeldClock,
        sent: Sent,
    }
    impl Service<u32> for Gated {
        type Response = Response<()>;
        type Error = Infallible;
        type Future = futures::future::Ready<Result<Response<()>, Infallible>>;
        fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), Infallible>> {
            if self.open.load(Ordering::SeqCst) {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        }
        fn call(&mut self, label: u32) -> Self::Future {
            let at = self.clock.now() / 1_000_000;
            self.sent.lock().unwrap().push((label, at));
            futures::future::ready(Ok(Response::new(())))
        }
    }

    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(10.0), clock.clone());
    let hold = HoldBack::new(clock.clone());
    let inner = Gated {
        open: Arc::new(std::sync::atomic::AtomicBool::new(true)),
        clock: clock.clone(),
        sent: Sent::default(),
    };
    let (open, sent) = (inner.open.clone(), inner.sent.clone());
    let client = ClientLayer::new(limiter)
        .honour_server(hold.clone())
        .layer(inner);
    drive(client.clone().oneshot(0), &clock).unwrap();
    open.store(false, Ordering::SeqCst); // the pool is full
    let mut second = Box::pin(client.clone().oneshot(2));
    assert!(
        poll_once(second.as_mut()).is_pending(),
        "its permit: 100 ms"
    );
    clock.advance(Duration::from_millis(100));
    assert!(poll_once(second.as_mut()).is_pending(), "the pool is full");
    // A response of the key asks for 2 s, until 2.1 s; then the pool frees up.
    let mut headers = HeaderMap::new();
    headers.insert("retry-after", "2".parse().unwrap());
    hold.observe((), StatusCode::TOO_MANY_REQUESTS, &headers);
    open.store(true, Ordering::SeqCst);
    drive(second, &clock).unwrap();
    let sent = sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent[1].1 >= 2100,
        "sent at {} ms, inside the hold that ends at 2100 ms",
        sent[1].1
    );
}

/// `HoldBack::wait`: "Waits, on the clock, until `key` is no longer held back;
/// resolves to the time waited"; `HoldBack`: "a key already held back longer keeps
/// its longer hold". A hold lengthened while a caller waits is waited out in full.
#[test]
fn hold_back_wait_lasts_until_a_hold_lengthened_meanwhile_is_over() {
    let clock = HeldClock::default();
    let hold = HoldBack::new(clock.clone());
    let retry_after = |seconds: &str| {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", seconds.parse().unwrap());
        headers
    };
    hold.observe("k", StatusCode::TOO_MANY_REQUESTS, &retry_after("2"));
    let mut waiting = Box::pin(hold.wait(&"k"));
    assert!(poll_once(waiting.as_mut()).is_pending());
    clock.advance(Duration::from_secs(1));
    // Another response asks for 3 s more: the key is held until 4 s.
    hold.observe("k", StatusCode::TOO_MANY_REQUESTS, &retry_after("3"));
    clock.advance(Duration::from_secs(1));
    let at_2s = poll_once(waiting.as_mut());
    assert!(
        at_2s.is_pending(),
        "the wait ended at 2 s ({at_2s:?}) with the key held {:?} more",
        hold.remaining(&"k")
    );
    clock.advance(Duration::from_secs(2));
    assert_eq!(
        poll_once(waiting.as_mut()),
        Poll::Ready(Duration::from_secs(4))
    );
}

// --- Many tasks against a real server ---------------------------------------------

/// An HTTP-date (IMF-fixdate) for `secs` seconds after the Unix epoch.
fn http_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86_400;
    // Howard Hinnant's civil_from_days, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let s = secs % 86_400;
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        day,
        MONTHS[(month - 1) as usize],
        year,
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

#[test]
fn http_date_formats_as_the_rfc_example() {
    // RFC 9110's example: 784111777 s after the epoch.
    assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
}

/// A server that holds its clients itself: its fifth request starts a 2 s refusal,
/// and every request that arrives during it is answered `429` with a 2 s
/// `Retry-After` (in delay-seconds, or as an HTTP-date with `Date`).
async fn refusing_server(http_dates: bool) -> reqwest::Url {
    use axum::response::IntoResponse;
    let state: Arc<Mutex<(usize, Option<Instant>)>> = Arc::default();
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let state = state.clone();
            async move {
                let refuse = {
                    let mut state = state.lock().unwrap();
                    state.0 += 1;
                    if state.0 == 5 {
                        state.1 = Some(Instant::now() + Duration::from_secs(2));
                    }
                    matches!(state.1, Some(until) if Instant::now() < until)
                };
                if !refuse {
                    return "ok".into_response();
                }
                let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
                let headers = if http_dates {
                    vec![
                        ("date", http_date(now.as_secs())),
                        ("retry-after", http_date(now.as_secs() + 2)),
                    ]
                } else {
                    vec![("retry-after", "2".to_owned())]
                };
                let mut response = (StatusCode::TOO_MANY_REQUESTS, "slow down").into_response();
                for (name, value) in headers {
                    response.headers_mut().insert(name, value.parse().unwrap());
                }
                response
            }
        }),
    );
    reqwest::Url::parse(&serve(app).await).unwrap()
}

/// Ten tasks send four requests each through `client` (an inner reqwest service
/// counting sends in `sent`): how many were refused, and how many had been sent
/// when the first task to be refused got its answer back, that is once the layer
/// had read it and the hold had begun. The four before the fifth were answered
/// `200`; one more request may have passed the layer's last look at the hold
/// without yet being counted, so a client that honours the hold meets at most
/// `in_flight - 3` refusals.
async fn ten_tasks_against<S>(
    client: S,
    url: reqwest::Url,
    sent: Arc<AtomicUsize>,
) -> (usize, usize)
where
    S: Service<reqwest::Request, Response = reqwest::Response, Error = ClientError<reqwest::Error>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    let sent_by_first_refusal: Arc<Mutex<Option<usize>>> = Arc::default();
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            let (sent, first) = (sent.clone(), sent_by_first_refusal.clone());
            tokio::spawn(async move {
                let mut refused = 0;
                for _ in 0..4 {
                    let request = reqwest::Request::new(http::Method::GET, url.clone());
                    let response = client.clone().oneshot(request).await.unwrap();
                    if response.status() == StatusCode::TOO_MANY_REQUESTS {
                        let sent_now = sent.load(Ordering::SeqCst);
                        let mut first = first.lock().unwrap();
                        first.get_or_insert(sent_now);
                        refused += 1;
                    } else {
                        assert_eq!(response.status(), StatusCode::OK);
                    }
                }
                refused
            })
        })
        .collect();
    let mut refused = 0;
    for task in tasks {
        refused += tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .expect("the tasks finish")
            .unwrap();
    }
    assert_eq!(sent.load(Ordering::SeqCst), 40, "every request sent once");
    let first = sent_by_first_refusal
        .lock()
        .unwrap()
        .expect("a 429 came back");
    (refused, first)
}

/// A reqwest client as a tower service, counting what it sends.
fn counted_reqwest(
    sent: Arc<AtomicUsize>,
) -> impl Service<
    reqwest::Request,
    Response = reqwest::Response,
    Error = reqwest::Error,
    Future = impl Send,
> + Clone {
    let http = reqwest::Client::new();
    service_fn(move |request: reqwest::Request| {
        let (http, sent) = (http.clone(), sent.clone());
        async move {
            sent.fetch_add(1, Ordering::SeqCst);
            http.execute(request).await
        }
    })
}

/// The client module, "Under concurrency": "the server's answer to one of them
/// holds back every request of that key: those that have not started waiting, and
/// those already waiting for permits ... A request already sent cannot be recalled,
/// so the refusals a hold can still meet are bounded by the requests in flight when
/// it began." Ten tasks, a direct limiter of 20 a second, a server that refuses
/// for 2 s with `Retry-After: 2`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_tasks_meet_no_more_429s_than_were_in_flight_when_the_hold_began() {
    let url = refusing_server(false).await;
    let sent = Arc::new(AtomicUsize::new(0));
    let limiter = RateLimiter::new(unbursting(20.0));
    let hold = HoldBack::new(limiter.clock().clone());
    let client = ClientLayer::new(limiter)
        .honour_server_with(hold, |r: &reqwest::Response| (r.status(), r.headers()))
        .layer(counted_reqwest(sent.clone()));
    let (refused, in_flight) = ten_tasks_against(client, url, sent).await;
    // Unheld, the 40 requests at 20 a second would meet about 36 refusals.
    assert!(refused >= 1);
    assert!(
        refused <= in_flight - 3,
        "{refused} refused; at most {} of the {in_flight} sent were in flight",
        in_flight - 3
    );
}

/// As above over a keyed limiter on a real Redis (one key per host), with the
/// server's `Retry-After` as an HTTP-date measured from its `Date`.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_tasks_over_the_redis_store_meet_no_more_429s_than_were_in_flight() {
    use crate::support::redis::{unique_prefix, RedisServer};
    use sluicegate::algorithms::SmoothBursty;
    use sluicegate::clock::DefaultClock;
    use sluicegate::stores::redis::{RedisOptions, RedisStore};
    use sluicegate::KeyedRateLimiter;

    let server = tokio::task::spawn_blocking(RedisServer::start_own)
        .await
        .unwrap();
    let options = RedisOptions::default()
        .prefix(unique_prefix("streams-from-docs-client"))
        .unwrap();
    let store: RedisStore<String, SmoothBursty> =
        RedisStore::open_with(server.url(), options).unwrap();
    let clock = DefaultClock::new();
    let limiter = KeyedRateLimiter::with_store(unbursting(20.0), store, clock.clone());
    let url = refusing_server(true).await;
    let sent = Arc::new(AtomicUsize::new(0));
    let by_host = |r: &reqwest::Request| (r.url().host_str().unwrap_or("").to_owned(), 1);
    let client = ClientLayer::with_weigher(limiter, by_host)
        .honour_server_with(HoldBack::new(clock), |r: &reqwest::Response| {
            (r.status(), r.headers())
        })
        .layer(counted_reqwest(sent.clone()));
    let (refused, in_flight) = ten_tasks_against(client, url, sent).await;
    assert!(refused >= 1);
    assert!(
        refused <= in_flight - 3,
        "{refused} refused; at most {} of the {in_flight} sent were in flight",
        in_flight - 3
    );
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .unwrap();
}
