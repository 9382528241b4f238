//! The Stream and Sink adapters checked against their documentation alone:
//! impossible items are refused typed and the adapter goes on, and an adapter
//! dropped while an item waits gives that item's permits back.
#![cfg(feature = "tower")]

use crate::support::adapters::{poll_next, poll_once, unbursting, HeldClock};
use futures::channel::mpsc;
use futures::executor::block_on;
use futures::{stream, SinkExt, StreamExt};
use sluicegate::adapters::sink::SinkError;
use sluicegate::adapters::{Rejected, Throttled, ThrottledSink, Weighed};
use sluicegate::algorithms::FixedWindow;
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{Error, RateLimiter};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

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
