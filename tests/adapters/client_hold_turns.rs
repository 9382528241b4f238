//! Turns after a hold that requests dropped before their turn give back: the key's
//! pace resumes from them when no later turn is booked, and otherwise the next
//! request that fits takes one; requests still go at most one per turn. On virtual
//! time whose sleeps wait for the test, and on the real clock with eight tasks.
#![cfg(feature = "tower")]

use crate::support::adapters::{poll_once, secs, unbursting, HeldClock};
use http::{HeaderMap, Request, Response, StatusCode};
use sluicegate::adapters::client::{ClientError, ClientLayer};
use sluicegate::adapters::HoldBack;
use sluicegate::algorithms::FixedWindow;
use sluicegate::clock::Clock;
use sluicegate::RateLimiter;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower::{service_fn, Layer, Service};

/// 10 a second: the pace after a hold is one request every 0.1 s.
fn window() -> FixedWindow {
    FixedWindow::new(10, Duration::from_secs(1)).unwrap()
}

type Call = Pin<Box<dyn Future<Output = Result<Response<()>, ClientError<Infallible>>>>>;

fn retry_after(seconds: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("retry-after", seconds.parse().unwrap());
    headers
}

/// A client over a window of 10 a second (a turn every 0.1 s after a hold, which
/// alone spaces the requests: the window would let ten go at once), held for 2 s at
/// 0; its inner service notes when each request is sent.
struct Paced {
    clock: HeldClock,
    sent: Arc<Mutex<Vec<f64>>>,
    new_call: Box<dyn Fn() -> Call>,
}

impl Paced {
    fn new() -> Self {
        let clock = HeldClock::default();
        let limiter = RateLimiter::with_clock(window(), clock.clone());
        let hold = HoldBack::new(clock.clone());
        let sent = Arc::new(Mutex::new(Vec::new()));
        let (log, at) = (sent.clone(), clock.clone());
        let inner = service_fn(move |_: Request<()>| {
            log.lock().unwrap().push(secs(at.now()));
            async { Ok::<_, Infallible>(Response::new(())) }
        });
        let client = ClientLayer::new(limiter)
            .honour_server(hold.clone())
            .layer(inner);
        hold.observe((), StatusCode::TOO_MANY_REQUESTS, &retry_after("2"));
        let new_call = Box::new(move || {
            let request = Request::get("http://api.test/").body(()).unwrap();
            Box::pin(client.clone().call(request)) as Call
        });
        Paced {
            clock,
            sent,
            new_call,
        }
    }

    /// `n` requests made during the hold, then polled once at its end (2 s): the
    /// first is sent at once, the others book turns at 2.1, 2.2, ... s.
    fn booked(&self, n: usize) -> Vec<Call> {
        let mut calls: Vec<Call> = (0..n).map(|_| (self.new_call)()).collect();
        for call in &mut calls {
            assert!(poll_once(call.as_mut()).is_pending(), "held until 2 s");
        }
        self.clock.advance(Duration::from_secs(2));
        let ready: Vec<bool> = calls
            .iter_mut()
            .map(|call| poll_once(call.as_mut()).is_ready())
            .collect();
        let mut expected = vec![false; n];
        expected[0] = true;
        assert_eq!(ready, expected, "the first goes at once, the others wait");
        drop(calls.remove(0));
        calls
    }

    /// Polls `calls` until all are sent, 10 ms of virtual time at a time.
    fn run(&self, mut calls: Vec<Call>) -> Vec<f64> {
        for _ in 0..1_000 {
            calls.retain_mut(|call| poll_once(call.as_mut()).is_pending());
            if calls.is_empty() {
                return self.sent.lock().unwrap().clone();
            }
            self.clock.advance(Duration::from_millis(10));
        }
        panic!("requests still pending after 10 s");
    }
}

#[test]
fn the_last_turns_dropped_give_the_pace_back() {
    let paced = Paced::new();
    let mut waiting = paced.booked(4); // turns at 2.1, 2.2 and 2.3 s
                                       // The last two dropped, the earlier of them first.
    let last = waiting.pop().unwrap();
    let before_last = waiting.pop().unwrap();
    drop(before_last);
    drop(last);
    // A new request takes the turn after the one still booked (2.2 s), not 2.4 s.
    waiting.push((paced.new_call)());
    assert_eq!(paced.run(waiting), [2.0, 2.1, 2.2]);
}

#[test]
fn a_turn_dropped_between_booked_ones_goes_to_the_next_request() {
    let paced = Paced::new();
    let mut waiting = paced.booked(4); // turns at 2.1, 2.2 and 2.3 s
    drop(waiting.remove(0)); // the 2.1 s turn, while 2.2 and 2.3 stay booked
                             // The next request takes the 2.1 s turn; the one after it waits for 2.4 s: a
                             // turn given back is taken once.
    waiting.push((paced.new_call)());
    waiting.push((paced.new_call)());
    assert_eq!(paced.run(waiting), [2.0, 2.1, 2.2, 2.3, 2.4]);
}

#[test]
fn every_turn_dropped_in_any_order_leaves_the_pace_where_the_sent_ones_left_it() {
    let paced = Paced::new();
    let mut waiting = paced.booked(5); // turns at 2.1 to 2.4 s
                                       // Dropped middle, first, last, then the one left.
    for index in [1, 0, 1, 0] {
        drop(waiting.remove(index));
    }
    assert!(waiting.is_empty());
    let next = vec![(paced.new_call)(), (paced.new_call)()];
    assert_eq!(paced.run(next), [2.0, 2.1, 2.2]);
}

#[test]
fn a_turn_that_came_is_not_given_back_when_its_request_is_dropped_later() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(window(), clock.clone());
    let hold = HoldBack::new(clock.clone());
    let sent = Arc::new(Mutex::new(Vec::new()));
    let log = sent.clone();
    // An inner service that never answers: a request sent stays in flight.
    let inner = service_fn(move |_: Request<()>| {
        log.lock().unwrap().push(());
        futures::future::pending::<Result<Response<()>, Infallible>>()
    });
    let client = ClientLayer::new(limiter)
        .honour_server(hold.clone())
        .layer(inner);
    hold.observe((), StatusCode::TOO_MANY_REQUESTS, &retry_after("2"));
    let request = || Request::get("http://api.test/").body(()).unwrap();
    let mut first = Box::pin(client.clone().call(request()));
    let mut second = Box::pin(client.clone().call(request()));
    clock.advance(Duration::from_secs(2));
    assert!(poll_once(first.as_mut()).is_pending());
    assert!(poll_once(second.as_mut()).is_pending()); // its turn: 2.1 s
    clock.advance(Duration::from_millis(100));
    assert!(poll_once(second.as_mut()).is_pending()); // sent, awaiting its answer
    assert_eq!(sent.lock().unwrap().len(), 2);
    drop(second);
    // The turn was used: the next request's is 2.2 s, not 2.1 s again.
    let mut third = Box::pin(client.clone().call(request()));
    assert!(poll_once(third.as_mut()).is_pending());
    assert_eq!(sent.lock().unwrap().len(), 2);
    clock.advance(Duration::from_millis(100));
    assert!(poll_once(third.as_mut()).is_pending());
    assert_eq!(sent.lock().unwrap().len(), 3);
}

mod real_clock {
    use super::*;
    use std::time::Instant;
    use tower::ServiceExt;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tasks_aborted_before_their_turns_give_them_to_a_later_request() {
        // 2 per second with no stored burst: a turn every 0.5 s after a hold.
        let limiter = RateLimiter::new(unbursting(2.0));
        let hold = HoldBack::new(limiter.clock().clone());
        let start = Instant::now();
        let sent = Arc::new(Mutex::new(Vec::<(usize, Duration)>::new()));
        let log = sent.clone();
        let inner = service_fn(move |request: Request<usize>| {
            log.lock().unwrap().push((*request.body(), start.elapsed()));
            async { Ok::<_, Infallible>(Response::new(())) }
        });
        let client = ClientLayer::new(limiter)
            .honour_server(hold.clone())
            .layer(inner);
        // Held for 1 s; eight tasks then book turns at 1.0, 1.5, ..., 4.5 s.
        hold.observe((), StatusCode::TOO_MANY_REQUESTS, &retry_after("1"));
        let call = |id: usize| client.clone().oneshot(Request::new(id));
        let tasks: Vec<_> = (0..8).map(|id| tokio::spawn(call(id))).collect();
        tokio::time::sleep(Duration::from_millis(1_250)).await;
        // Four of them give up before their turns (dropped once each abort is
        // seen: awaited before the late request asks).
        let mut tasks = tasks;
        let aborted = tasks.split_off(4);
        for task in &aborted {
            task.abort();
        }
        for task in aborted {
            let _ = task.await;
        }
        // Past this the aborted tasks are gone; an abort that a loaded machine
        // sees late may let one of them reach a later turn first.
        let aborted_by = start.elapsed();
        let late = tokio::spawn(call(8));
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        late.await.unwrap().unwrap();
        let sent = sent.lock().unwrap().clone();
        eprintln!("sent: {sent:?}");
        // The four kept and the late request were sent; an aborted task was only if
        // its turn came before it was gone (the first turn, at 1.0 s, on time).
        for id in [0, 1, 2, 3, 8] {
            assert!(sent.iter().any(|(sent, _)| *sent == id), "{id}: {sent:?}");
        }
        let aborted = |id: &usize| (4..8).contains(id);
        for (id, at) in &sent {
            assert!(!aborted(id) || *at < aborted_by, "{aborted_by:?}: {sent:?}");
        }
        // Whichever turns the aborted tasks held, the late request takes one of
        // them (by 3.0 s at the latest, on time), where booked turns would have
        // sent it at 5.0 s; and nothing went before the hold ended.
        let late_at = sent.iter().find(|(id, _)| *id == 8).unwrap().1;
        assert!(late_at < Duration::from_millis(4_200), "{sent:?}");
        assert!(
            sent.iter().all(|(_, at)| *at >= Duration::from_millis(990)),
            "{sent:?}"
        );
    }
}
