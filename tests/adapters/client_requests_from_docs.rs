//! The client layer's rules for one request, checked against its documentation
//! alone on virtual time (`ManualClock`, or `HeldClock` where a request must be
//! observed mid-wait): clones share one limit, readiness, the maximum wait, costs
//! above capacity and of zero, and jitter.
#![cfg(feature = "tower")]

use super::client_common::{ms, ok, recording, refused, sent_of, Sent};
use crate::support::adapters::poll_once;
use futures::executor::block_on;
use futures::task::noop_waker_ref;
use http::StatusCode;
use sluicegate::adapters::client::{ClientError, ClientLayer};
use sluicegate::adapters::{HoldBack, Jitter, Weighed};
use sluicegate::algorithms::FixedWindow;
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{Error, RateLimiter};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::{Layer, Service, ServiceExt};

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
