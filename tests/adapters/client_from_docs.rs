//! The outbound adapters checked against their documentation alone: the client
//! layer's pacing, readiness, maximum wait, cost edges, jitter, server holds and the
//! steady pace after them, given-back turns, keys and stores; and the Stream and
//! Sink adapters' refusals and abandoned waits. Exact rules run on virtual time
//! (`ManualClock`, or `HeldClock` where a request must be observed mid-wait);
//! concurrency runs 8 or more tokio tasks on the real clock, with bounds that
//! leave generous margins, and one test holds a reqwest client back against an
//! axum server on loopback.
#![cfg(feature = "tower")]

use crate::support::adapters::{poll_next, poll_once, serve, unbursting, HeldClock};
use futures::channel::{mpsc, oneshot};
use futures::executor::block_on;
use futures::task::noop_waker_ref;
use futures::{stream, SinkExt, StreamExt};
use http::{Response, StatusCode};
use sluicegate::adapters::client::{ClientError, ClientLayer};
use sluicegate::adapters::sink::SinkError;
use sluicegate::adapters::{HoldBack, Jitter, Rejected, Throttled, ThrottledSink, Weighed};
use sluicegate::algorithms::{FixedWindow, SmoothBursty};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{Error, KeyedRateLimiter, RateLimiter};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tower::{service_fn, Layer, Service, ServiceExt};

/// Every call the inner service received: its label and the clock's reading, in
/// milliseconds, when it was called.
type Sent = Arc<Mutex<Vec<(u32, u64)>>>;

fn ms(nanos: u64) -> u64 {
    nanos / 1_000_000
}

fn ok() -> Response<()> {
    Response::new(())
}

/// A `429` asking the client to wait `seconds`.
fn refused(seconds: &str) -> Response<()> {
    Response::builder()
        .status(StatusCode::TOO_MANY_REQUESTS)
        .header("retry-after", seconds)
        .body(())
        .unwrap()
}

/// An inner HTTP-like service on `clock`: records each call in `sent` and answers
/// what `answer` says for its label.
fn recording<C, F>(
    clock: C,
    sent: Sent,
    answer: F,
) -> impl Service<
    u32,
    Response = Response<()>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<()>, Infallible>>,
> + Clone
where
    C: Clock + Clone,
    F: Fn(u32) -> Response<()> + Clone,
{
    service_fn(move |label: u32| {
        sent.lock().unwrap().push((label, ms(clock.now())));
        let response = answer(label);
        async move { Ok::<_, Infallible>(response) }
    })
}

/// A request whose response the test sends when it chooses (or `200` at once).
struct Held {
    label: u32,
    answer: Option<oneshot::Receiver<Response<()>>>,
}

fn held(label: u32) -> (Held, oneshot::Sender<Response<()>>) {
    let (tx, rx) = oneshot::channel();
    let request = Held {
        label,
        answer: Some(rx),
    };
    (request, tx)
}

fn at_once(label: u32) -> Held {
    Held {
        label,
        answer: None,
    }
}

/// An inner service for [`Held`] requests on `clock`, recording each call in `sent`.
fn answering_later<C: Clock + Clone>(
    clock: C,
    sent: Sent,
) -> impl Service<
    Held,
    Response = Response<()>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<()>, Infallible>>,
> + Clone {
    service_fn(move |request: Held| {
        sent.lock().unwrap().push((request.label, ms(clock.now())));
        async move {
            Ok::<_, Infallible>(match request.answer {
                Some(rx) => rx.await.expect("the test answers every held request"),
                None => ok(),
            })
        }
    })
}

fn sent_of(sent: &Sent) -> Vec<(u32, u64)> {
    sent.lock().unwrap().clone()
}

/// The largest number of `times` inside any span of `window`.
fn most_in_any_window(times: &[Instant], window: Duration) -> usize {
    let mut sorted = times.to_vec();
    sorted.sort();
    (0..sorted.len())
        .map(|i| {
            sorted[i..]
                .iter()
                .take_while(|t| **t - sorted[i] <= window)
                .count()
        })
        .max()
        .unwrap_or(0)
}

// --- Virtual time: the exact rules ---------------------------------------------

/// "The layer and every service it makes share the one limiter ... clone them
/// freely", and the limiter is a shared handle: two services made by clones of one
/// layer, a clone of one of them, and the limiter itself all draw on one limit.
#[test]
fn clones_of_the_layer_and_its_services_share_one_limit() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(2.0, clock.clone()).unwrap();
    let sent = Sent::default();
    let layer = ClientLayer::new(limiter.clone());
    let first = layer.layer(recording(clock.clone(), sent.clone(), |_| ok()));
    let second = layer
        .clone()
        .layer(recording(clock.clone(), sent.clone(), |_| ok()));
    let third = first.clone();
    block_on(async {
        first.clone().oneshot(1).await.unwrap();
        second.clone().oneshot(2).await.unwrap();
        limiter.acquire().unwrap(); // the 1 s turn, taken outside the layer
        third.clone().oneshot(3).await.unwrap();
    });
    assert_eq!(sent_of(&sent), [(1, 0), (2, 500), (3, 1500)]);
}

/// An inner service that is ready only once `open` is set, and counts calls made
/// on a clone it had not readied (tower forbids them).
struct Gate {
    open: Arc<AtomicBool>,
    readied: bool,
    calls: Arc<AtomicUsize>,
    unreadied_calls: Arc<AtomicUsize>,
}

impl Clone for Gate {
    /// A clone starts unreadied, as tower's contract has it.
    fn clone(&self) -> Self {
        Gate {
            open: self.open.clone(),
            readied: false,
            calls: self.calls.clone(),
            unreadied_calls: self.unreadied_calls.clone(),
        }
    }
}

impl Service<u32> for Gate {
    type Response = u32;
    type Error = std::io::Error;
    type Future = futures::future::Ready<Result<u32, std::io::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.open.load(Ordering::SeqCst) {
            self.readied = true;
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }

    fn call(&mut self, n: u32) -> Self::Future {
        if !self.readied {
            self.unreadied_calls.fetch_add(1, Ordering::SeqCst);
        }
        self.readied = false;
        self.calls.fetch_add(1, Ordering::SeqCst);
        futures::future::ready(if n == 13 {
            Err(std::io::Error::other("inner failed"))
        } else {
            Ok(n)
        })
    }
}

/// `Client::poll_ready`: "Always ready: the response future waits for the permits
/// and then readies its own clone of the inner service, so calling without
/// `poll_ready` is fine too"; and `ClientError::Service` carries the inner error.
#[test]
fn poll_ready_is_always_ready_and_the_future_readies_its_own_inner_clone() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    let gate = Gate {
        open: Arc::new(AtomicBool::new(false)),
        readied: false,
        calls: Arc::new(AtomicUsize::new(0)),
        unreadied_calls: Arc::new(AtomicUsize::new(0)),
    };
    let (open, calls, unreadied) = (
        gate.open.clone(),
        gate.calls.clone(),
        gate.unreadied_calls.clone(),
    );
    let mut client = ClientLayer::new(limiter).layer(gate);
    assert!(client.permits().try_acquire(), "the first permit is free");

    // The limiter is spent and the inner service is not ready: still ready.
    let mut cx = Context::from_waker(noop_waker_ref());
    assert!(matches!(client.poll_ready(&mut cx), Poll::Ready(Ok(()))));

    // Called without `poll_ready`: the future waits for its permit, then for the
    // inner service, and calls nothing before it is ready.
    let mut request = Box::pin(client.call(7));
    assert!(poll_once(request.as_mut()).is_pending());
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    open.store(true, Ordering::SeqCst);
    assert!(matches!(poll_once(request.as_mut()), Poll::Ready(Ok(7))));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(clock.now(), 1_000_000_000, "it went at its permit's time");

    // The inner error comes back typed, with its source.
    let failed = block_on(client.call(13)).unwrap_err();
    let ClientError::Service(inner) = &failed else {
        panic!("expected the inner service's error, got {failed:?}");
    };
    assert_eq!(inner.to_string(), "inner failed");
    assert!(std::error::Error::source(&failed).is_some());
    assert_eq!(
        unreadied.load(Ordering::SeqCst),
        0,
        "a call on an unreadied clone"
    );
}

/// `with_max_wait`: "A request that would wait longer than `max_wait` (held back by
/// the server and waiting for permits together) fails at once with
/// `ClientError::Throttled(Error::Timeout)`, unsent, consuming nothing."
#[test]
fn max_wait_fails_at_once_unsent_consuming_nothing_and_counts_a_hold() {
    // Waiting for permits.
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    let sent = Sent::default();
    let layer = ClientLayer::new(limiter);
    let patient = layer
        .clone()
        .layer(recording(clock.clone(), sent.clone(), |_| ok()));
    let hasty = layer
        .with_max_wait(Duration::from_millis(100))
        .layer(recording(clock.clone(), sent.clone(), |_| ok()));
    block_on(async {
        hasty.clone().oneshot(1).await.unwrap();
        let late = hasty.clone().oneshot(2).await;
        assert!(
            matches!(
                late,
                Err(ClientError::Throttled(Error::Timeout { needed })) if needed == Duration::from_secs(1)
            ),
            "{late:?}"
        );
        assert_eq!(clock.now(), 0, "it failed at once, without waiting");
        // Nothing was consumed: the next request still gets the 1 s turn.
        patient.clone().oneshot(3).await.unwrap();
    });
    assert_eq!(sent_of(&sent), [(1, 0), (3, 1000)]);

    // Held back by the server: a hold longer than the maximum wait fails at once,
    // although permits are to spare.
    let clock = ManualClock::new();
    let window = FixedWindow::new(100, Duration::from_secs(60)).unwrap();
    let limiter = RateLimiter::with_clock(window, clock.clone());
    let sent = Sent::default();
    let layer = ClientLayer::new(limiter.clone())
        .honour_server(HoldBack::new(clock.clone()))
        .with_max_wait(Duration::from_millis(500));
    let inner = recording(clock.clone(), sent.clone(), |label| {
        if label == 1 {
            refused("2")
        } else {
            ok()
        }
    });
    let hasty = layer.clone().layer(inner.clone());
    let patient = layer.with_max_wait(Duration::from_secs(5)).layer(inner);
    block_on(async {
        let first = hasty.clone().oneshot(1).await.unwrap();
        assert_eq!(first.status(), StatusCode::TOO_MANY_REQUESTS);
        let late = hasty.clone().oneshot(2).await;
        assert!(
            matches!(
                late,
                Err(ClientError::Throttled(Error::Timeout { needed })) if needed >= Duration::from_secs(2)
            ),
            "{late:?}"
        );
        assert_eq!(clock.now(), 0, "it failed at once, without waiting");
        patient.clone().oneshot(3).await.unwrap();
    });
    assert_eq!(sent_of(&sent), [(1, 0), (3, 2000)]);
    // Two requests sent, two permits taken: the refused one took none.
    assert_eq!(limiter.peek(98).map(|d| d.is_allowed()), Ok(true));
    assert_eq!(limiter.peek(99).map(|d| d.is_allowed()), Ok(false));
}

/// "A cost that can never be granted fails at once with `Error::Never`, whatever
/// the maximum wait"; `ClientError::Throttled`: "Not sent".
#[test]
fn cost_above_capacity_fails_with_never_at_once_whatever_the_max_wait() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(3, Duration::from_secs(1)).unwrap();
    let limiter = RateLimiter::with_clock(window, clock.clone());
    let sent = Sent::default();
    let layer = ClientLayer::with_weigher(limiter.clone(), Weighed(|cost: &u32| u64::from(*cost)));
    let inner = recording(clock.clone(), sent.clone(), |_| ok());
    let unbounded = layer.clone().layer(inner.clone());
    let bounded = layer.with_max_wait(Duration::from_secs(3600)).layer(inner);
    block_on(async {
        for client in [unbounded.clone(), bounded.clone()] {
            let impossible = client.oneshot(4).await;
            assert!(
                matches!(
                    impossible,
                    Err(ClientError::Throttled(Error::Never { cost: 4 }))
                ),
                "{impossible:?}"
            );
        }
        assert_eq!(clock.now(), 0, "refused at once, without waiting");
        unbounded.clone().oneshot(3).await.unwrap();
    });
    assert_eq!(
        sent_of(&sent),
        [(3, 0)],
        "only the possible request was sent"
    );
}

/// "A cost of 0 is free, as in every adapter: such a request takes no permits and
/// no turn, and goes as soon as no hold stops its key."
#[test]
fn zero_cost_passes_at_once_uncounted_and_only_waits_out_a_hold() {
    // No hold: a spent limit does not stop it, and it takes nothing.
    let clock = ManualClock::new();
    let window = FixedWindow::new(1, Duration::from_secs(60)).unwrap();
    let limiter = RateLimiter::with_clock(window, clock.clone());
    let sent = Sent::default();
    let client = ClientLayer::with_weigher(limiter.clone(), Weighed(|cost: &u32| u64::from(*cost)))
        .layer(recording(clock.clone(), sent.clone(), |_| ok()));
    block_on(async {
        client.clone().oneshot(1).await.unwrap();
        client.clone().oneshot(0).await.unwrap();
        client.clone().oneshot(0).await.unwrap();
    });
    assert_eq!(sent_of(&sent), [(1, 0), (0, 0), (0, 0)]);
    let after = limiter.peek(1).unwrap();
    assert!(!after.is_allowed());
    assert_eq!(after.retry_after(), Duration::from_secs(60));

    // A hold: it waits the hold out, and the turn at the end of the hold is still
    // there for the next request that costs something.
    let clock = ManualClock::new();
    let window = FixedWindow::new(3, Duration::from_secs(60)).unwrap(); // pace: 20 s
    let limiter = RateLimiter::with_clock(window, clock.clone());
    let sent = Sent::default();
    // Labels 10, 11, ... cost 1; labels 0, 1, ... cost 0.
    let client = ClientLayer::with_weigher(
        limiter.clone(),
        Weighed(|label: &u32| u64::from(*label >= 10)),
    )
    .honour_server(HoldBack::new(clock.clone()))
    .layer(recording(clock.clone(), sent.clone(), |label| {
        if label == 10 {
            refused("2")
        } else {
            ok()
        }
    }));
    block_on(async {
        let first = client.clone().oneshot(10).await.unwrap();
        assert_eq!(first.status(), StatusCode::TOO_MANY_REQUESTS);
        client.clone().oneshot(0).await.unwrap();
        client.clone().oneshot(11).await.unwrap();
    });
    assert_eq!(sent_of(&sent), [(10, 0), (0, 2000), (11, 2000)]);
    // Two requests cost 1 each: one permit of the three is left.
    assert_eq!(limiter.peek(1).map(|d| d.is_allowed()), Ok(true));
    assert_eq!(limiter.peek(2).map(|d| d.is_allowed()), Ok(false));
}

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

/// `with_jitter`: "Adds a `Jitter` delay to every request that had to wait (not to
/// one that went at once), after its wait"; `ResponseFuture`: "All of this counts
/// against the maximum wait; the jitter (only after a wait) does not."
#[test]
fn jitter_follows_only_a_wait_and_does_not_count_against_the_max_wait() {
    let expected = Jitter::new(Duration::from_millis(100), 7);
    let (d1, d2) = (
        ms(expected.draw().as_nanos() as u64),
        ms(expected.draw().as_nanos() as u64),
    );
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(2.0, clock.clone()).unwrap();
    let sent = Sent::default();
    let client = ClientLayer::new(limiter)
        .with_jitter(Jitter::new(Duration::from_millis(100), 7))
        .layer(recording(clock.clone(), sent.clone(), |_| ok()));
    block_on(async {
        for label in 1..=3 {
            client.clone().oneshot(label).await.unwrap();
        }
    });
    // The first went at once, undelayed; the others at their turns plus the first
    // two draws of the sequence, in order.
    assert_eq!(sent_of(&sent), [(1, 0), (2, 500 + d1), (3, 1000 + d2)]);

    // A 500 ms wait within a 600 ms maximum, then a jitter that takes it past the
    // maximum: still sent.
    let long = Jitter::new(Duration::from_secs(5), 11).draw();
    assert!(long > Duration::from_millis(100), "the seed draws {long:?}");
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(2.0, clock.clone()).unwrap();
    let sent = Sent::default();
    let client = ClientLayer::new(limiter)
        .with_max_wait(Duration::from_millis(600))
        .with_jitter(Jitter::new(Duration::from_secs(5), 11))
        .layer(recording(clock.clone(), sent.clone(), |_| ok()));
    block_on(async {
        client.clone().oneshot(1).await.unwrap();
        let jittered = client.clone().oneshot(2).await;
        assert!(jittered.is_ok(), "{jittered:?}");
    });
    assert_eq!(
        sent_of(&sent),
        [(1, 0), (2, 500 + ms(long.as_nanos() as u64))]
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

/// The module: "a request future dropped while it waits gives its permits back";
/// `adapters`: "waits dropped together (requests timing out at once) give back all
/// of theirs, in whatever order they are dropped".
#[test]
fn requests_dropped_together_while_waiting_give_back_every_turn() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(1.0), clock.clone());
    let sent = Sent::default();
    let mut client = ClientLayer::new(limiter).layer(answering_later(clock.clone(), sent.clone()));

    let mut first = Box::pin(client.call(at_once(0)));
    assert!(poll_once(first.as_mut()).is_ready());
    let mut waiting: Vec<_> = (1..=3).map(|n| Box::pin(client.call(at_once(n)))).collect();
    for request in &mut waiting {
        assert!(poll_once(request.as_mut()).is_pending()); // turns at 1, 2 and 3 s
    }
    // Dropped in an order that is neither first-to-last nor last-to-first.
    let third = waiting.pop().unwrap();
    let second = waiting.pop().unwrap();
    let one = waiting.pop().unwrap();
    drop(one);
    drop(third);
    drop(second);

    let mut next = Box::pin(client.call(at_once(4)));
    assert!(poll_once(next.as_mut()).is_pending());
    clock.advance(Duration::from_secs(1));
    assert!(
        poll_once(next.as_mut()).is_ready(),
        "the first given-back turn, at 1 s, is the next request's"
    );
    assert_eq!(sent_of(&sent), [(0, 0), (4, 1000)]);
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

// --- The Stream and Sink adapters ----------------------------------------------

/// `Throttled`: "an item the limiter refuses is yielded as `Err(Rejected)` and the
/// stream goes on with the next"; `Rejected`: "`Error::Timeout` past the maximum
/// wait, `Error::Never` for a cost above capacity ... The item comes back". An item
/// that costs 0 is free. `ThrottledSink`: "A refused item ... is returned in
/// `SinkError::Refused` and the sink stays usable."
#[test]
fn stream_and_sink_refuse_impossible_items_typed_and_go_on() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(3, Duration::from_secs(60)).unwrap();
    let limiter = RateLimiter::with_clock(window, clock.clone());
    let items = stream::iter([2u64, 5, 0, 1, 1]);
    let paced = Throttled::with_weigher(items, limiter.clone(), Weighed(|n: &u64| *n))
        .with_max_wait(Duration::from_secs(1));
    let out: Vec<_> = block_on(paced.collect());
    assert_eq!(
        out,
        [
            Ok(2),
            Err(Rejected {
                item: 5,
                error: Error::Never { cost: 5 }
            }),
            Ok(0),
            Ok(1),
            Err(Rejected {
                item: 1,
                error: Error::Timeout {
                    needed: Duration::from_secs(60)
                }
            }),
        ]
    );
    assert_eq!(clock.now(), 0, "nothing waited");

    let window = FixedWindow::new(2, Duration::from_secs(60)).unwrap();
    let limiter = RateLimiter::with_clock(window, ManualClock::new());
    let (tx, rx) = mpsc::unbounded::<u64>();
    let mut paced = ThrottledSink::with_weigher(tx, limiter, Weighed(|n: &u64| *n));
    block_on(async {
        let refused = paced.send(5).await;
        let Err(SinkError::Refused(rejected)) = refused else {
            panic!("expected a refusal, got {refused:?}")
        };
        assert_eq!(
            (rejected.item, rejected.error),
            (5, Error::Never { cost: 5 })
        );
        paced.send(2).await.unwrap();
        paced.send(0).await.unwrap();
    });
    drop(paced);
    assert_eq!(block_on(rx.collect::<Vec<_>>()), [2, 0]);
}

/// `Throttled`: "Dropping the adapter while an item waits gives that item's permits
/// back"; `ThrottledSink`: "Dropping it while an item waits gives that item's
/// permits back (the item is dropped, never sent)."
#[test]
fn stream_and_sink_dropped_while_an_item_waits_give_its_permits_back() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(1.0), clock.clone());
    let mut paced = Box::pin(Throttled::new(stream::iter([1, 2]), limiter.clone()));
    assert_eq!(poll_next(paced.as_mut()), Poll::Ready(Some(Ok(1))));
    assert!(
        poll_next(paced.as_mut()).is_pending(),
        "item 2 waits for 1 s"
    );
    drop(paced);
    assert_eq!(
        limiter.reserve(1).unwrap().delay(),
        Duration::from_secs(1),
        "item 2's turn is free again"
    );

    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(1.0), clock.clone());
    let (tx, rx) = mpsc::unbounded::<u32>();
    let mut sink = Box::pin(ThrottledSink::new(tx, limiter.clone()));
    {
        let mut first = sink.send(1);
        assert!(matches!(
            poll_once(Pin::new(&mut first)),
            Poll::Ready(Ok(()))
        ));
        let mut second = sink.send(2);
        assert!(
            poll_once(Pin::new(&mut second)).is_pending(),
            "item 2 waits for 1 s"
        );
    }
    drop(sink);
    assert_eq!(
        block_on(rx.collect::<Vec<_>>()),
        [1],
        "item 2 was never sent"
    );
    assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::from_secs(1));
}

// --- The real clock: many tasks on one client ----------------------------------

/// Ten tasks share one client (clones of two services of one layer): together they
/// keep to the one limit, however many ask at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_tasks_sharing_one_client_keep_to_its_rate() {
    let limiter = RateLimiter::new(unbursting(20.0)); // one every 50 ms
    let sends: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let inner = {
        let sends = sends.clone();
        service_fn(move |n: u32| {
            sends.lock().unwrap().push(Instant::now());
            async move { Ok::<_, Infallible>(n) }
        })
    };
    let layer = ClientLayer::new(limiter);
    let services = [layer.layer(inner.clone()), layer.clone().layer(inner)];
    let start = Instant::now();
    let tasks: Vec<_> = (0..10u32)
        .map(|task| {
            let client = services[task as usize % 2].clone();
            tokio::spawn(async move {
                for i in 0..4 {
                    let n = task * 10 + i;
                    assert_eq!(client.clone().oneshot(n).await.unwrap(), n);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = start.elapsed();
    let sends = sends.lock().unwrap().clone();
    assert_eq!(sends.len(), 40);
    let span = *sends.iter().max().unwrap() - *sends.iter().min().unwrap();
    // 40 requests one 50 ms turn apart span 1.95 s; the limit cannot be beaten.
    assert!(
        span >= Duration::from_millis(1850),
        "40 sends within {span:?}"
    );
    // At 20 per second at most 11 fit in any 500 ms; unthrottled, all 40 would.
    let crowd = most_in_any_window(&sends, Duration::from_millis(500));
    assert!(crowd <= 13, "{crowd} sends within 500 ms");
    assert!(elapsed < Duration::from_secs(6), "took {elapsed:?}");
}

/// "waiters are served in the order they asked (the limiter's reservations)":
/// requests that asked one after another are sent in that order, whichever task
/// wakes first.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiters_are_sent_in_the_order_they_asked() {
    let limiter = RateLimiter::new(unbursting(10.0)); // one every 100 ms
    let order: Arc<Mutex<Vec<u32>>> = Arc::default();
    let mut client = {
        let order = order.clone();
        ClientLayer::new(limiter).layer(service_fn(move |n: u32| {
            order.lock().unwrap().push(n);
            async move { Ok::<_, Infallible>(n) }
        }))
    };
    client.clone().oneshot(0).await.unwrap();
    let mut tasks = Vec::new();
    for n in 1..=10 {
        // Each asks (its first poll) before the next does, then waits on a task
        // of its own.
        let mut request = Box::pin(client.call(n));
        assert!(poll_once(request.as_mut()).is_pending());
        tasks.push(tokio::spawn(request));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..=10).collect::<Vec<_>>());
}

/// "waits dropped together (requests timing out at once) give back all of theirs,
/// in whatever order they are dropped": eight tasks time out together, and the
/// next request takes one of their turns instead of queueing behind them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_timing_out_together_give_their_turns_back() {
    let limiter = RateLimiter::new(unbursting(5.0)); // one every 200 ms
    let client =
        ClientLayer::new(limiter).layer(service_fn(|n: u32| async move { Ok::<_, Infallible>(n) }));
    let waited = eight_time_out_then_one(client).await;
    // Given back, the next turn is at most one interval away; kept, it would be
    // behind all eight (about 1.5 s).
    assert!(
        waited < Duration::from_millis(800),
        "waited {waited:?} behind abandoned turns"
    );
}

/// Over `client`, at 5 per second with no burst: request 0, then 1 to 8 each with
/// a 300 ms timeout on tasks of their own (their turns at 0.2, 0.4, ... 1.6 s: all
/// but at most two time out together), then request 99: how long 99 waited.
async fn eight_time_out_then_one<S>(client: S) -> Duration
where
    S: Service<u32> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: std::fmt::Debug,
{
    client.clone().oneshot(0).await.unwrap();
    let tasks: Vec<_> = (1..=8)
        .map(|n| {
            let client = client.clone();
            tokio::spawn(async move {
                tokio::time::timeout(Duration::from_millis(300), client.oneshot(n))
                    .await
                    .is_ok()
            })
        })
        .collect();
    let mut sent = 0;
    for task in tasks {
        sent += usize::from(task.await.unwrap());
    }
    assert!(
        sent <= 2,
        "{sent} of 8 were sent within 300 ms at 5 per second"
    );
    let asked = Instant::now();
    client.oneshot(99).await.unwrap();
    asked.elapsed()
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

/// `with_weigher` with a keyed limiter: each key keeps its own limit, so eight
/// tasks on four keys proceed in parallel, each key at its own rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keyed_limits_run_independently_under_concurrency() {
    let per_host: KeyedRateLimiter<String, SmoothBursty> = KeyedRateLimiter::new(unbursting(10.0));
    let sends: Arc<Mutex<Vec<(usize, Instant)>>> = Arc::default();
    let client = {
        let sends = sends.clone();
        ClientLayer::with_weigher(per_host, |r: &(usize, u32)| (format!("host-{}", r.0), 1)).layer(
            service_fn(move |r: (usize, u32)| {
                sends.lock().unwrap().push((r.0, Instant::now()));
                async move { Ok::<_, Infallible>(()) }
            }),
        )
    };
    let start = Instant::now();
    let tasks: Vec<_> = (0..8usize)
        .map(|task| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in 0..4 {
                    client.clone().oneshot((task % 4, i)).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = start.elapsed();
    let sends = sends.lock().unwrap().clone();
    assert_eq!(sends.len(), 32);
    for host in 0..4 {
        let times: Vec<Instant> = sends
            .iter()
            .filter(|(h, _)| *h == host)
            .map(|(_, t)| *t)
            .collect();
        assert_eq!(times.len(), 8);
        let span = *times.iter().max().unwrap() - *times.iter().min().unwrap();
        assert!(
            span >= Duration::from_millis(650),
            "host {host}: 8 sends in {span:?}"
        );
        let crowd = most_in_any_window(&times, Duration::from_millis(250));
        assert!(crowd <= 5, "host {host}: {crowd} sends within 250 ms");
    }
    // Each key needs 0.7 s; one shared limit would need 3.1 s.
    assert!(elapsed < Duration::from_millis(2400), "took {elapsed:?}");
}

// --- A remote store ---------------------------------------------------------------

/// `ClientLayer`: "Built from any `Permits` (a direct or keyed limiter, any
/// algorithm, set and store, memory or remote)": eight tasks share a client over a
/// keyed limiter on a real Redis, and keep to its rate.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_over_the_redis_store_paces_concurrent_tasks() {
    use crate::support::redis::{unique_prefix, RedisServer};
    use sluicegate::clock::DefaultClock;
    use sluicegate::stores::redis::{RedisOptions, RedisStore};

    let server = tokio::task::spawn_blocking(RedisServer::start_own)
        .await
        .unwrap();
    let options = RedisOptions::default()
        .prefix(unique_prefix("client-from-docs"))
        .unwrap();
    let store: RedisStore<String, SmoothBursty> =
        RedisStore::open_with(server.url(), options).unwrap();
    let limiter = KeyedRateLimiter::with_store(unbursting(10.0), store, DefaultClock::new());
    let sends: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let client = {
        let sends = sends.clone();
        ClientLayer::with_weigher(limiter, |_: &u32| ("api".to_owned(), 1)).layer(service_fn(
            move |n: u32| {
                sends.lock().unwrap().push(Instant::now());
                async move { Ok::<_, Infallible>(n) }
            },
        ))
    };
    let start = Instant::now();
    let tasks: Vec<_> = (0..8u32)
        .map(|task| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in 0..2 {
                    client.clone().oneshot(task * 10 + i).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = start.elapsed();
    let sends = sends.lock().unwrap().clone();
    assert_eq!(sends.len(), 16);
    let span = *sends.iter().max().unwrap() - *sends.iter().min().unwrap();
    // 16 requests one 100 ms turn apart span 1.5 s.
    assert!(
        span >= Duration::from_millis(1350),
        "16 sends within {span:?}"
    );
    let crowd = most_in_any_window(&sends, Duration::from_millis(500));
    assert!(crowd <= 8, "{crowd} sends within 500 ms");
    assert!(elapsed < Duration::from_secs(8), "took {elapsed:?}");
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .unwrap();
}

/// `ClientError::Throttled`: "Not sent: ... or a store's error": a store that
/// cannot be reached fails the request typed, unsent, without a panic or a hang.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreachable_store_fails_the_request_typed_and_unsent() {
    use crate::support::redis::unreachable_store;
    use sluicegate::clock::DefaultClock;
    use sluicegate::stores::redis::RedisStore;

    // A port nothing listens on (bound, read, released).
    let store: RedisStore<String, SmoothBursty> = unreachable_store("client-from-docs-down");
    let limiter =
        KeyedRateLimiter::with_store(SmoothBursty::new(10.0).unwrap(), store, DefaultClock::new());
    let calls = Arc::new(AtomicUsize::new(0));
    let client = {
        let calls = calls.clone();
        ClientLayer::with_weigher(limiter, |_: &u32| ("api".to_owned(), 1)).layer(service_fn(
            move |n: u32| {
                calls.fetch_add(1, Ordering::SeqCst);
                async move { Ok::<_, Infallible>(n) }
            },
        ))
    };
    let outcome = tokio::time::timeout(Duration::from_secs(5), client.oneshot(1))
        .await
        .expect("the store's failure comes back, not a hang");
    assert!(
        matches!(outcome, Err(ClientError::Throttled(Error::Store(_)))),
        "{outcome:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0, "a request was sent");
}

// --- Further documented edges ------------------------------------------------------

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

/// `Permits::acquire`: "futures dropped together give back all of theirs, in
/// whatever order they are dropped (the limiter's abandoned waits rule, per key for
/// a keyed limiter)": the client over a keyed limiter.
#[test]
fn keyed_requests_dropped_together_give_back_every_turn_of_their_key() {
    let clock = HeldClock::default();
    let per_host = KeyedRateLimiter::with_clock(unbursting(1.0), clock.clone());
    let sent = Sent::default();
    // Labels below 100 are for host a, the rest for host b.
    let host = |r: &Held| (if r.label < 100 { "a" } else { "b" }.to_owned(), 1);
    let mut client = ClientLayer::with_weigher(per_host, host)
        .layer(answering_later(clock.clone(), sent.clone()));

    for label in [0, 100] {
        let mut first = Box::pin(client.call(at_once(label)));
        assert!(poll_once(first.as_mut()).is_ready());
    }
    // a: turns at 1, 2, 3 s; b: a turn at 1 s that stays.
    let mut waiting: Vec<_> = [1, 2, 3].map(|n| Box::pin(client.call(at_once(n)))).into();
    let mut other = Box::pin(client.call(at_once(101)));
    for request in &mut waiting {
        assert!(poll_once(request.as_mut()).is_pending());
    }
    assert!(poll_once(other.as_mut()).is_pending());
    let last = waiting.pop().unwrap();
    waiting.reverse();
    drop(waiting); // 2, then 1
    drop(last); // then 3

    let mut next = Box::pin(client.call(at_once(4)));
    assert!(poll_once(next.as_mut()).is_pending());
    clock.advance(Duration::from_secs(1));
    assert!(
        poll_once(next.as_mut()).is_ready(),
        "a's turn at 1 s is free again"
    );
    assert!(poll_once(other.as_mut()).is_ready(), "b keeps its own turn");
    assert_eq!(sent_of(&sent), [(0, 0), (100, 0), (4, 1000), (101, 1000)]);
}

/// `Permits::acquire`: "futures dropped together give back all of theirs, in
/// whatever order they are dropped (the limiter's abandoned waits rule, per key for
/// a keyed limiter)", for a client "Built from any `Permits` (... memory or
/// remote)": eight requests over a keyed limiter on a real Redis time out together,
/// and the next request takes one of their turns instead of queueing behind them.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_over_the_redis_store_timing_out_together_give_their_turns_back() {
    use crate::support::redis::{unique_prefix, RedisServer};
    use sluicegate::clock::DefaultClock;
    use sluicegate::stores::redis::{RedisOptions, RedisStore};

    let server = tokio::task::spawn_blocking(RedisServer::start_own)
        .await
        .unwrap();
    let options = RedisOptions::default()
        .prefix(unique_prefix("client-from-docs-abandoned"))
        .unwrap();
    let store: RedisStore<String, SmoothBursty> =
        RedisStore::open_with(server.url(), options).unwrap();
    let limiter = KeyedRateLimiter::with_store(unbursting(5.0), store, DefaultClock::new());
    let client = ClientLayer::with_weigher(limiter, |_: &u32| ("api".to_owned(), 1))
        .layer(service_fn(|n: u32| async move { Ok::<_, Infallible>(n) }));
    let waited = eight_time_out_then_one(client).await;
    assert!(
        waited < Duration::from_millis(800),
        "waited {waited:?} behind abandoned turns"
    );
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .unwrap();
}
