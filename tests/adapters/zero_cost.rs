//! A cost of 0 is free in the Stream and Sink adapters, as in the server layer:
//! the item passes at once, uncounted, even when the limit is spent.

use crate::support::adapters as adapters_common;

use adapters_common::secs;
use futures::channel::mpsc;
use futures::{stream, SinkExt, StreamExt};
use sluicegate::adapters::{Throttled, ThrottledSink, Weighed};
use sluicegate::algorithms::FixedWindow;
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::time::Duration;

/// One permit per second, in fixed windows, on virtual time.
fn one_per_second(clock: &ManualClock) -> RateLimiter<FixedWindow, ManualClock> {
    let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    RateLimiter::with_clock(window, clock.clone())
}

#[test]
fn a_free_stream_item_passes_at_once_uncounted() {
    let clock = ManualClock::new();
    let limiter = one_per_second(&clock);
    // The first spends the window; the free ones after it do not wait for the next.
    let items = stream::iter([1u64, 0, 0, 1, 0]);
    let mut paced = Throttled::with_weigher(items, limiter.clone(), Weighed(|c: &u64| *c));
    let out: Vec<(u64, f64)> = futures::executor::block_on(async {
        let mut out = Vec::new();
        while let Some(item) = paced.next().await {
            out.push((item.unwrap(), secs(clock.now())));
        }
        out
    });
    assert_eq!(out, [(1, 0.0), (0, 0.0), (0, 0.0), (1, 1.0), (0, 1.0)]);
    // Nothing but the two items of cost 1 was counted: the window at 1 s is spent
    // by the second alone.
    assert!(!limiter.try_acquire());
    clock.advance(Duration::from_secs(1));
    assert!(limiter.try_acquire());
}

#[test]
fn a_free_keyed_stream_item_touches_no_key() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(window, clock.clone());
    let jobs = stream::iter([("a", 0u64), ("a", 0), ("a", 1)]);
    let paced = Throttled::with_weigher(jobs, limiter.clone(), |job: &(&'static str, u64)| *job);
    let out: Vec<_> = futures::executor::block_on(paced.collect());
    assert!(out.iter().all(Result::is_ok));
    assert_eq!(clock.now(), 0, "no item waited");
    // "a"'s one permit went to the item that cost 1.
    assert!(!limiter.check(&"a", 1).unwrap().is_allowed());
}

#[test]
fn a_free_sink_item_is_sent_at_once_uncounted() {
    let clock = ManualClock::new();
    let limiter = one_per_second(&clock);
    let (tx, rx) = mpsc::unbounded::<u64>();
    let mut paced = ThrottledSink::with_weigher(tx, limiter.clone(), Weighed(|c: &u64| *c));
    let sent_at: Vec<f64> = futures::executor::block_on(async {
        let mut at = Vec::new();
        for cost in [1, 0, 0, 1, 0] {
            paced.send(cost).await.unwrap();
            at.push(secs(clock.now()));
        }
        at
    });
    assert_eq!(sent_at, [0.0, 0.0, 0.0, 1.0, 1.0]);
    drop(paced);
    let received: Vec<u64> = futures::executor::block_on(rx.collect());
    assert_eq!(received, [1, 0, 0, 1, 0]);
    assert!(
        !limiter.try_acquire(),
        "the second window went to the second 1"
    );
}
