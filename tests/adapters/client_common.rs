//! What the client-layer tests from the docs share: inner services on a clock that
//! record each call they receive and answer as told, requests whose response the
//! test sends when it chooses, the `200` and `429` responses, the most requests
//! sent in any window of time, and sends checked against their turns.
#![cfg(feature = "tower")]

use futures::channel::oneshot;
use http::{Response, StatusCode};
use sluicegate::clock::Clock;
use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tower::{service_fn, Service};

/// Every call the inner service received: its label and the clock's reading, in
/// milliseconds, when it was called.
pub(crate) type Sent = Arc<Mutex<Vec<(u32, u64)>>>;

pub(crate) fn ms(nanos: u64) -> u64 {
    nanos / 1_000_000
}

pub(crate) fn ok() -> Response<()> {
    Response::new(())
}

/// A `429` asking the client to wait `seconds`.
pub(crate) fn refused(seconds: &str) -> Response<()> {
    Response::builder()
        .status(StatusCode::TOO_MANY_REQUESTS)
        .header("retry-after", seconds)
        .body(())
        .unwrap()
}

/// An inner HTTP-like service on `clock`: records each call in `sent` and answers
/// what `answer` says for its label.
pub(crate) fn recording<C, F>(
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
pub(crate) struct Held {
    pub(crate) label: u32,
    pub(crate) answer: Option<oneshot::Receiver<Response<()>>>,
}

pub(crate) fn held(label: u32) -> (Held, oneshot::Sender<Response<()>>) {
    let (tx, rx) = oneshot::channel();
    let request = Held {
        label,
        answer: Some(rx),
    };
    (request, tx)
}

pub(crate) fn at_once(label: u32) -> Held {
    Held {
        label,
        answer: None,
    }
}

/// An inner service for [`Held`] requests on `clock`, recording each call in `sent`.
pub(crate) fn answering_later<C: Clock + Clone>(
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

pub(crate) fn sent_of(sent: &Sent) -> Vec<(u32, u64)> {
    sent.lock().unwrap().clone()
}

/// Asserts that the limit was not beaten: sorted, the k-th of `sends` came no
/// earlier than k `interval`s after `start` (each send waited for its turn;
/// unthrottled, all would go at once), with `slack` for clocks read apart. Turns
/// are lower bounds only: a loaded machine may send late, and late sends may
/// crowd together.
pub(crate) fn assert_each_send_after_its_turn(
    sends: &[Instant],
    start: Instant,
    interval: Duration,
    slack: Duration,
) {
    let mut sorted = sends.to_vec();
    sorted.sort();
    for (k, at) in sorted.iter().enumerate() {
        let earliest = interval * k as u32;
        assert!(
            *at - start + slack >= earliest,
            "send {k} at {:?}, before its turn at {earliest:?}",
            *at - start
        );
    }
}

/// The largest number of `times` inside any span of `window`.
pub(crate) fn most_in_any_window(times: &[Instant], window: Duration) -> usize {
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
