//! The server's holds as the client layer's documentation describes them:
//! `HoldBack` reading each kind of response as its table says, a hold that begins
//! while a request waits, a longer hold set meanwhile, holds per key, the steady
//! pace after a hold one turn per permit, on virtual time; and a server's `429`
//! holding every task of a reqwest client against an axum server on loopback, which
//! then resume paced.
#![cfg(feature = "tower")]

use super::client_common::{
    answering_later, at_once, held, ms, ok, recording, refused, sent_of, Sent,
};
use crate::support::adapters::{poll_once, serve, unbursting, HeldClock};
use futures::executor::block_on;
use http::StatusCode;
use sluicegate::adapters::client::{ClientError, ClientLayer};
use sluicegate::adapters::{HoldBack, Weighed};
use sluicegate::algorithms::{FixedWindow, SmoothBursty};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{Error, KeyedRateLimiter, RateLimiter};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};
use tower::{service_fn, Layer, Service, ServiceExt};

/// `HoldBack`: "After a hold, the key resumes at its limiter's steady rate, not with
/// a burst ... from the end of the hold, the key's requests are given turns one
/// `Pace::interval` apart per permit ... The pace ends once a whole `Pace::refill`
/// passes with no request."
#[test]
fn after_a_hold_a_key_resumes_at_the_steady_pace_not_in_a_burst() {
    let clock = ManualClock::new();
    // 4 per second, a 1 s burst: interval 250 ms, refill 1 s.
    let limiter = RateLimiter::bursty_with_clock(4.0, clock.clone()).unwrap();
    let sent = Sent::default();
    let client = ClientLayer::new(limiter)
        .honour_server(HoldBack::new(clock.clone()))
        .layer(recording(clock.clone(), sent.clone(), |label| {
            if label == 0 {
                refused("2")
            } else {
                ok()
            }
        }));
    block_on(async {
        for label in 0..6 {
            client.clone().oneshot(label).await.unwrap();
        }
    });
    // The limiter stored its full burst of 4 during the 2 s hold; the requests
    // after it go one interval apart all the same.
    assert_eq!(
        sent_of(&sent),
        [
            (0, 0),
            (1, 2000),
            (2, 2250),
            (3, 2500),
            (4, 2750),
            (5, 3000)
        ]
    );

    // Two seconds without a request, more than the refill: the pace is over, and
    // the stored burst goes at once.
    clock.advance(Duration::from_secs(2));
    block_on(async {
        for label in 6..10 {
            client.clone().oneshot(label).await.unwrap();
        }
    });
    assert_eq!(
        sent_of(&sent)[6..],
        [(6, 5000), (7, 5000), (8, 5000), (9, 5000)]
    );
}

/// `ResponseFuture`: "a hold that began while it waited for them sends it back to
/// wait the hold out and take fresh permits after it"; the module: the server's
/// answer holds back "those already waiting for permits".
#[test]
fn a_hold_that_begins_while_a_request_waits_for_permits_sends_it_back() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(1.0), clock.clone());
    let sent = Sent::default();
    let mut client = ClientLayer::new(limiter)
        .honour_server(HoldBack::new(clock.clone()))
        .layer(answering_later(clock.clone(), sent.clone()));

    let (first, answer_first) = held(0);
    let mut first = Box::pin(client.call(first));
    assert!(
        poll_once(first.as_mut()).is_pending(),
        "awaiting its response"
    );
    let mut waiting = Box::pin(client.call(at_once(1)));
    assert!(
        poll_once(waiting.as_mut()).is_pending(),
        "its permit is 1 s away"
    );

    answer_first.send(refused("3")).unwrap();
    let Poll::Ready(Ok(response)) = poll_once(first.as_mut()) else {
        panic!("the first response is in")
    };
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);

    for _ in 0..2 {
        clock.advance(Duration::from_secs(1));
        assert!(
            poll_once(waiting.as_mut()).is_pending(),
            "sent during the hold, at {} ms",
            ms(clock.now())
        );
    }
    clock.advance(Duration::from_secs(1));
    assert!(poll_once(waiting.as_mut()).is_ready());
    assert_eq!(sent_of(&sent), [(0, 0), (1, 3000)]);
}

/// `ResponseFuture`: "it waits out a server's hold on the key (and any longer hold
/// another response sets meanwhile)".
#[test]
fn a_request_held_back_waits_out_a_longer_hold_set_meanwhile() {
    let clock = HeldClock::default();
    let window = FixedWindow::new(100, Duration::from_secs(60)).unwrap();
    let limiter = RateLimiter::with_clock(window, clock.clone());
    let sent = Sent::default();
    let mut client = ClientLayer::new(limiter)
        .honour_server(HoldBack::new(clock.clone()))
        .layer(answering_later(clock.clone(), sent.clone()));

    let (a, answer_a) = held(0);
    let (b, answer_b) = held(1);
    let mut a = Box::pin(client.call(a));
    let mut b = Box::pin(client.call(b));
    assert!(poll_once(a.as_mut()).is_pending());
    assert!(poll_once(b.as_mut()).is_pending());

    answer_a.send(refused("2")).unwrap(); // held until 2 s
    assert!(poll_once(a.as_mut()).is_ready());
    let mut c = Box::pin(client.call(at_once(2)));
    assert!(poll_once(c.as_mut()).is_pending(), "held back");

    clock.advance(Duration::from_secs(1));
    answer_b.send(refused("5")).unwrap(); // at 1 s: held until 6 s
    assert!(poll_once(b.as_mut()).is_ready());
    assert!(poll_once(c.as_mut()).is_pending());

    for _ in 0..4 {
        clock.advance(Duration::from_secs(1)); // 2 s .. 5 s
        assert!(
            poll_once(c.as_mut()).is_pending(),
            "sent during the longer hold, at {} ms",
            ms(clock.now())
        );
    }
    clock.advance(Duration::from_secs(1));
    assert!(poll_once(c.as_mut()).is_ready());
    assert_eq!(sent_of(&sent), [(0, 0), (1, 0), (2, 6000)]);
}

/// The module: "the server's answer to one of them holds back every request of
/// that key"; `with_weigher` takes the key from the request. Other keys are not
/// held (holds are per key).
#[test]
fn a_hold_on_one_key_leaves_other_keys_alone() {
    let clock = ManualClock::new();
    let per_host = KeyedRateLimiter::with_clock(SmoothBursty::new(10.0).unwrap(), clock.clone());
    let sent = Sent::default();
    // Labels below 100 are for host a, the rest for host b.
    let host = |label: &u32| (if *label < 100 { "a" } else { "b" }.to_owned(), 1);
    let client = ClientLayer::with_weigher(per_host, host)
        .honour_server(HoldBack::new(clock.clone()))
        .layer(recording(clock.clone(), sent.clone(), |label| {
            if label == 0 {
                refused("5")
            } else {
                ok()
            }
        }));
    block_on(async {
        client.clone().oneshot(0).await.unwrap(); // a: held until 5 s
        client.clone().oneshot(100).await.unwrap();
        client.clone().oneshot(101).await.unwrap();
        client.clone().oneshot(1).await.unwrap();
    });
    assert_eq!(sent_of(&sent), [(0, 0), (100, 0), (101, 100), (1, 5000)]);
}

/// The module, under concurrency: "the server's answer to one of them holds back
/// every request of that key: those that have not started waiting, and those
/// already waiting for permits ... After the hold the key resumes at its limiter's
/// steady rate, one turn per `Pace::interval`, not with the burst its limiter stored
/// meanwhile." Ten tasks share a reqwest client behind the layer against an axum
/// server on loopback that answers one `429` with `Retry-After: 1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_servers_429_holds_every_task_then_they_resume_paced() {
    use axum::response::IntoResponse;

    let arrivals: Arc<Mutex<usize>> = Arc::default();
    let app = axum::Router::new().route(
        "/",
        axum::routing::get({
            let arrivals = arrivals.clone();
            move || {
                let arrivals = arrivals.clone();
                async move {
                    let n = {
                        let mut count = arrivals.lock().unwrap();
                        *count += 1;
                        *count
                    };
                    if n == 6 {
                        (
                            StatusCode::TOO_MANY_REQUESTS,
                            [("retry-after", "1")],
                            "slow down",
                        )
                            .into_response()
                    } else {
                        "ok".into_response()
                    }
                }
            }
        }),
    );
    let url = reqwest::Url::parse(&serve(app).await).unwrap();

    // What the layer hands to reqwest, and when the 429 came back.
    let sends: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let refusals: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let inner = {
        let (http, sends, refusals) = (reqwest::Client::new(), sends.clone(), refusals.clone());
        service_fn(move |request: reqwest::Request| {
            let (http, sends, refusals) = (http.clone(), sends.clone(), refusals.clone());
            async move {
                sends.lock().unwrap().push(Instant::now());
                let response = http.execute(request).await;
                if matches!(&response, Ok(r) if r.status() == StatusCode::TOO_MANY_REQUESTS) {
                    refusals.lock().unwrap().push(Instant::now());
                }
                response
            }
        })
    };
    // 20 per second with a 1 s burst: the limiter stores 20 permits during the hold.
    let limiter = RateLimiter::bursty(20.0).unwrap();
    let hold = HoldBack::new(limiter.clock().clone());
    let client = ClientLayer::new(limiter)
        .honour_server_with(hold, |r: &reqwest::Response| (r.status(), r.headers()))
        .layer(inner);

    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                for _ in 0..3 {
                    let request = reqwest::Request::new(http::Method::GET, url.clone());
                    statuses.push(client.clone().oneshot(request).await.unwrap().status());
                }
                statuses
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for task in tasks {
        statuses.extend(task.await.unwrap());
    }
    assert_eq!(statuses.len(), 30);
    let refused = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!(refused, 1);

    let refused_at = refusals.lock().unwrap()[0];
    let sends = sends.lock().unwrap().clone();
    let after = |from: u64, to: u64| {
        sends
            .iter()
            .filter(|t| {
                **t > refused_at + Duration::from_millis(from)
                    && **t < refused_at + Duration::from_millis(to)
            })
            .count()
    };
    // Held: nothing is sent during the second the server asked for (100 ms of
    // margin for a request that left before the hold was read).
    assert_eq!(after(100, 900), 0, "sent during the hold");
    // Then paced at 50 ms: about 3 in the first 150 ms after the hold, not the
    // burst of all ten waiting tasks.
    let resumed = after(900, 1150);
    assert!(
        resumed <= 6,
        "{resumed} sent in the first 150 ms after the hold"
    );
    assert_eq!(sends.len(), 30);
}

fn headers(fields: &[(&'static str, &'static str)]) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    for (name, value) in fields {
        map.append(*name, value.parse().unwrap());
    }
    map
}

/// `HoldBack`'s table: what each response asks for; "`Retry-After` takes precedence
/// over `RateLimit`"; "Every pause is capped"; "a key already held back longer
/// keeps its longer hold"; "Malformed fields are ignored"; a response with `Age`
/// above 0 asks for nothing.
#[test]
fn hold_back_reads_each_kind_of_response_as_its_table_says() {
    let clock = ManualClock::new();
    let hold = HoldBack::new(clock.clone());
    let too_many = StatusCode::TOO_MANY_REQUESTS;
    let unavailable = StatusCode::SERVICE_UNAVAILABLE;
    let secs = Duration::from_secs;

    assert_eq!(
        hold.observe(1, unavailable, &headers(&[("retry-after", "4")])),
        Some(secs(4))
    );
    let mixed = r#""a";r=0;t=3, "b";r=5;t=9, "c";r=0;t=7"#;
    assert_eq!(
        hold.observe(2, too_many, &headers(&[("ratelimit", mixed)])),
        Some(secs(7))
    );
    let none_spent = r#""a";r=2;t=3, "b";r=5;t=9"#;
    assert_eq!(
        hold.observe(3, unavailable, &headers(&[("ratelimit", none_spent)])),
        Some(secs(9))
    );
    let both = [("retry-after", "2"), ("ratelimit", r#""a";r=0;t=30"#)];
    assert_eq!(hold.observe(4, too_many, &headers(&both)), Some(secs(2)));
    let ok = StatusCode::OK;
    assert_eq!(
        hold.observe(5, ok, &headers(&[("ratelimit", none_spent)])),
        None
    );
    assert_eq!(
        hold.observe(5, ok, &headers(&[("ratelimit", mixed)])),
        Some(secs(7))
    );
    let cached = [("retry-after", "5"), ("age", "10")];
    assert_eq!(hold.observe(6, too_many, &headers(&cached)), None);
    let server_error = StatusCode::INTERNAL_SERVER_ERROR;
    assert_eq!(
        hold.observe(7, server_error, &headers(&[("retry-after", "5")])),
        None
    );
    assert_eq!(
        hold.observe(8, too_many, &headers(&[])),
        Some(secs(1)),
        "the fallback"
    );
    let malformed = [("retry-after", "soon")];
    assert_eq!(
        hold.observe(9, too_many, &headers(&malformed)),
        Some(secs(1)),
        "as a bare 429"
    );
    let hostile = [("retry-after", "1000000")];
    assert_eq!(
        hold.observe(10, too_many, &headers(&hostile)),
        Some(secs(60)),
        "the cap"
    );

    // A shorter pause does not shorten a longer hold.
    assert_eq!(
        hold.observe(11, too_many, &headers(&[("retry-after", "10")])),
        Some(secs(10))
    );
    assert_eq!(
        hold.observe(11, too_many, &headers(&[("retry-after", "1")])),
        Some(secs(1))
    );
    assert_eq!(hold.remaining(&11), secs(10));
    for key in [6, 7] {
        assert_eq!(
            hold.remaining(&key),
            Duration::ZERO,
            "key {key} is not held"
        );
    }
    clock.advance(secs(4));
    assert_eq!(hold.remaining(&11), secs(6));
    assert_eq!(hold.remaining(&1), Duration::ZERO, "its hold is over");

    // A zero cap disables holding.
    let off = HoldBack::new(clock.clone()).with_cap(Duration::ZERO);
    off.observe(1, too_many, &headers(&[("retry-after", "5")]));
    assert_eq!(off.remaining(&1), Duration::ZERO);
}

/// `HoldBack`: turns come "one `Pace::interval` apart per permit"; `ResponseFuture`:
/// the turn "counts against the maximum wait", and a request that would wait past
/// it fails at once "consuming nothing" (here: no turn).
#[test]
fn after_a_hold_turns_are_per_permit_and_a_timed_out_request_takes_none() {
    // Labels' last digit is their cost. 4 per second: 250 ms a permit.
    let weigh = Weighed(|label: &u32| u64::from(*label % 10));
    let hold_on_first = |label: u32| if label == 1 { refused("2") } else { ok() };

    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(4.0, clock.clone()).unwrap();
    let sent = Sent::default();
    let client = ClientLayer::with_weigher(limiter, weigh)
        .honour_server(HoldBack::new(clock.clone()))
        .layer(recording(clock.clone(), sent.clone(), hold_on_first));
    block_on(async {
        for label in [1, 12, 22, 32] {
            client.clone().oneshot(label).await.unwrap();
        }
    });
    let times: Vec<u64> = sent_of(&sent).iter().map(|(_, at)| *at).collect();
    assert!(times[1] == 2000 || times[1] == 2250, "{times:?}");
    assert_eq!(
        [times[2] - times[1], times[3] - times[2]],
        [500, 500],
        "two permits, two turns: {times:?}"
    );

    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(4.0, clock.clone()).unwrap();
    let sent = Sent::default();
    let layer =
        ClientLayer::with_weigher(limiter, weigh).honour_server(HoldBack::new(clock.clone()));
    let inner = recording(clock.clone(), sent.clone(), hold_on_first);
    let patient = layer.clone().layer(inner.clone());
    let hasty = layer.with_max_wait(Duration::from_millis(100)).layer(inner);
    block_on(async {
        patient.clone().oneshot(1).await.unwrap(); // held until 2 s
        patient.clone().oneshot(11).await.unwrap(); // 2 s, the first turn
        let late = hasty.clone().oneshot(21).await; // its turn is 250 ms away
        assert!(
            matches!(late, Err(ClientError::Throttled(Error::Timeout { .. }))),
            "{late:?}"
        );
        assert_eq!(clock.now(), 2_000_000_000, "it failed at once");
        patient.clone().oneshot(31).await.unwrap();
        patient.clone().oneshot(41).await.unwrap();
    });
    assert_eq!(sent_of(&sent), [(1, 0), (11, 2000), (31, 2250), (41, 2500)]);
}
