//! The Stream and Sink adapters on virtual time: exact release and send times,
//! per-item costs and keys, fail-fast past the maximum wait, and permits given back
//! by an adapter dropped mid-wait.

use crate::support::adapters as adapters_common;

use adapters_common::{poll_next, poll_once, secs, unbursting, HeldClock};
use futures::channel::mpsc;
use futures::{stream, Sink, SinkExt, Stream, StreamExt};
use sluicegate::adapters::{sink::SinkError, Throttled, ThrottledSink, Weighed};
use sluicegate::algorithms::{FixedWindow, LeakyBucket, SmoothBursty};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{Error, KeyedRateLimiter, RateLimiter};
use std::pin::{pin, Pin};
use std::task::Poll;
use std::time::Duration;

/// Drains a throttled stream, noting the virtual time each item came out.
fn release_times<S: Stream + Unpin>(clock: &ManualClock, mut stream: S) -> Vec<(S::Item, f64)> {
    futures::executor::block_on(async {
        let mut out = Vec::new();
        while let Some(item) = stream.next().await {
            out.push((item, secs(clock.now())));
        }
        out
    })
}

#[test]
fn stream_releases_items_at_the_limiters_rate() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(5.0, clock.clone()).unwrap();
    let out = release_times(&clock, Throttled::new(stream::iter(0..5), limiter));
    let times: Vec<f64> = out.iter().map(|(_, t)| *t).collect();
    assert_eq!(times, [0.0, 0.2, 0.4, 0.6, 0.8]);
    assert!(out.iter().enumerate().all(|(i, (item, _))| *item == Ok(i)));
}

#[test]
fn stream_charges_each_item_its_cost() {
    // A driftless meter of 2 per second, capacity 2: costs 2, 1, 1, 2.
    let clock = ManualClock::new();
    let bucket = LeakyBucket::meter(2, 2, Duration::from_secs(1)).unwrap();
    let limiter = RateLimiter::with_clock(bucket, clock.clone());
    let items = stream::iter([2u64, 1, 1, 2]);
    let paced = Throttled::with_weigher(items, limiter, Weighed(|cost: &u64| *cost));
    let times: Vec<f64> = release_times(&clock, paced)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    // The first fills the bucket; each later item waits until its cost has drained.
    assert_eq!(times, [0.0, 0.5, 1.0, 2.0]);
}

#[test]
fn keyed_stream_paces_each_key_separately() {
    let clock = ManualClock::new();
    let per_host = KeyedRateLimiter::with_clock(unbursting(2.0), clock.clone());
    let jobs = stream::iter([("a", 1), ("a", 2), ("b", 1), ("a", 3), ("b", 2)]);
    let paced = Throttled::with_weigher(jobs, per_host, |job: &(&'static str, i32)| (job.0, 1));
    let out: Vec<((&str, i32), f64)> = release_times(&clock, paced)
        .into_iter()
        .map(|(job, t)| (job.unwrap(), t))
        .collect();
    // a: 0, 0.5, 1.0; b by its own limit: 0, 0.5. Items go one at a time, in
    // order, so each b also waits for the a before it.
    assert_eq!(
        out,
        [
            (("a", 1), 0.0),
            (("a", 2), 0.5),
            (("b", 1), 0.5),
            (("a", 3), 1.0),
            (("b", 2), 1.0),
        ]
    );
}

#[test]
fn stream_refuses_past_max_wait_at_once_and_consumes_nothing() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    let limiter = RateLimiter::with_clock(window, clock.clone());
    let paced = Throttled::new(stream::iter(0..3), limiter.clone())
        .with_max_wait(Duration::from_millis(500));
    let out = release_times(&clock, paced);
    assert_eq!(out[0], (Ok(0), 0.0));
    assert_eq!(out[1], (Ok(1), 0.0));
    let (Err(refused), at) = &out[2] else {
        panic!("the third item needs the next window, 1 s away: {out:?}")
    };
    assert_eq!(*at, 0.0, "failed fast, without sleeping");
    assert_eq!(refused.item, 2);
    assert_eq!(
        refused.error,
        Error::Timeout {
            needed: Duration::from_secs(1)
        }
    );
    // The granted items record their zero waits; nothing slept for the refusal.
    assert!(clock.sleeps().iter().all(Duration::is_zero));
    // Nothing was consumed by the refusal: the next window grants its full 2.
    clock.advance(Duration::from_secs(1));
    assert_eq!(limiter.check(2).unwrap().remaining(), 0);
}

#[test]
fn stream_item_above_capacity_is_refused_as_never_and_the_stream_goes_on() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(3, Duration::from_secs(1)).unwrap();
    let limiter = RateLimiter::with_clock(window, clock.clone());
    let paced = Throttled::with_weigher(stream::iter([1u64, 4, 2]), limiter, Weighed(|c: &u64| *c));
    let out: Vec<_> = release_times(&clock, paced)
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert_eq!(out[0], Ok(1));
    assert_eq!(out[1].as_ref().unwrap_err().error, Error::Never { cost: 4 });
    assert_eq!(out[2], Ok(2));
}

type HeldBursty = RateLimiter<SmoothBursty, HeldClock>;
type TwoItems = Throttled<stream::Iter<std::array::IntoIter<i32, 2>>, HeldBursty>;

/// One permit a second on held time, and a throttled stream of 1 and 2 polled until
/// 1 is out and 2 has reserved the permit at 1 s and is waiting for it.
fn second_item_waiting() -> (HeldBursty, HeldClock, Pin<Box<TwoItems>>) {
    let clock = HeldClock::default();
    let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    let mut paced = Box::pin(Throttled::new(stream::iter([1, 2]), limiter.clone()));
    assert_eq!(poll_next(paced.as_mut()), Poll::Ready(Some(Ok(1))));
    assert_eq!(poll_next(paced.as_mut()), Poll::Pending);
    (limiter, clock, paced)
}

#[test]
fn stream_dropped_while_waiting_gives_the_permits_back() {
    let (limiter, clock, paced) = second_item_waiting();
    drop(paced);
    // Dropped mid-wait: its reservation is cancelled, so the limiter's next free
    // permit is at 1 s again, not 2 s.
    clock.advance(Duration::from_secs(1));
    assert!(limiter.try_acquire());
}

#[test]
fn stream_waiting_item_is_released_when_its_time_comes() {
    let (limiter, clock, mut paced) = second_item_waiting();
    clock.advance(Duration::from_millis(999));
    assert_eq!(poll_next(paced.as_mut()), Poll::Pending);
    clock.advance(Duration::from_millis(1));
    assert_eq!(poll_next(paced.as_mut()), Poll::Ready(Some(Ok(2))));
    assert_eq!(poll_next(paced.as_mut()), Poll::Ready(None));
    // The permit was used: the next is a second later.
    assert!(!limiter.try_acquire());
}

#[test]
fn sink_sends_items_at_the_limiters_rate() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(4.0, clock.clone()).unwrap();
    let (tx, rx) = mpsc::unbounded();
    let mut paced = ThrottledSink::new(tx, limiter);
    let mut sent_at = Vec::new();
    futures::executor::block_on(async {
        for n in 0..4 {
            paced.send(n).await.unwrap();
            sent_at.push(secs(clock.now()));
        }
        paced.close().await.unwrap();
    });
    assert_eq!(sent_at, [0.0, 0.25, 0.5, 0.75]);
    assert_eq!(
        futures::executor::block_on(rx.collect::<Vec<_>>()),
        [0, 1, 2, 3]
    );
}

#[test]
fn sink_send_all_paces_a_whole_stream_per_key() {
    let clock = ManualClock::new();
    let per_user = KeyedRateLimiter::with_clock(unbursting(1.0), clock.clone());
    // The receiving side notes the virtual time each message arrives.
    let arrivals = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = arrivals.clone();
    let stamp = clock.clone();
    let recorder = futures::sink::drain().with(move |msg: (&'static str, u32)| {
        log.lock().unwrap().push((msg, secs(stamp.now())));
        futures::future::ready(Ok::<_, std::convert::Infallible>(msg))
    });
    let mut paced =
        ThrottledSink::with_weigher(recorder, per_user, |m: &(&'static str, u32)| (m.0, 1));
    let mut messages = stream::iter([("ann", 1), ("ann", 2), ("bo", 1), ("ann", 3)]).map(Ok);
    futures::executor::block_on(paced.send_all(&mut messages)).unwrap();
    assert_eq!(
        *arrivals.lock().unwrap(),
        [
            (("ann", 1), 0.0),
            (("ann", 2), 1.0),
            (("bo", 1), 1.0),
            (("ann", 3), 2.0),
        ]
    );
}

#[test]
fn sink_refuses_past_max_wait_and_stays_usable() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(2.0, clock.clone()).unwrap();
    let (tx, rx) = mpsc::unbounded();
    let mut paced = ThrottledSink::new(tx, limiter).with_max_wait(Duration::from_millis(100));
    futures::executor::block_on(async {
        paced.send(1).await.unwrap();
        match paced.send(2).await {
            Err(SinkError::Refused(r)) => {
                assert_eq!(r.item, 2);
                assert_eq!(
                    r.error,
                    Error::Timeout {
                        needed: Duration::from_millis(500)
                    }
                );
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(
            clock.sleeps().iter().all(Duration::is_zero),
            "refused without sleeping"
        );
        clock.advance(Duration::from_millis(500));
        paced.send(3).await.unwrap();
        paced.close().await.unwrap();
    });
    assert_eq!(futures::executor::block_on(rx.collect::<Vec<_>>()), [1, 3]);
}

#[test]
fn sink_dropped_while_waiting_gives_the_permits_back_and_sends_nothing() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    let (tx, rx) = mpsc::unbounded();
    {
        let mut paced = ThrottledSink::new(tx, limiter.clone());
        assert!(matches!(
            poll_once(pin!(paced.send(1))),
            Poll::Ready(Ok(()))
        ));
        // The second send reserves the permit at 1 s and waits for it.
        let mut second = pin!(paced.send(2));
        assert!(poll_once(second.as_mut()).is_pending());
    }
    clock.advance(Duration::from_secs(1));
    assert!(
        limiter.try_acquire(),
        "the abandoned item's permit came back"
    );
    assert_eq!(futures::executor::block_on(rx.collect::<Vec<_>>()), [1]);
}

#[test]
fn sink_passes_inner_errors_through() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(10.0, clock).unwrap();
    let (tx, rx) = mpsc::unbounded::<u8>();
    drop(rx);
    let mut paced = ThrottledSink::new(tx, limiter);
    let outcome = futures::executor::block_on(paced.send(1));
    assert!(matches!(outcome, Err(SinkError::Inner(e)) if e.is_disconnected()));
}

/// Both adapters are `Send + 'static` over `Send` inner types, so they can be spawned.
#[test]
fn adapters_are_send_and_static() {
    fn spawnable<T: Send + 'static>(_: &T) {}
    let limiter = RateLimiter::bursty(1.0).unwrap();
    spawnable(&Throttled::new(stream::iter([1]), limiter.clone()));
    let (tx, _rx) = mpsc::unbounded::<u8>();
    let sink = ThrottledSink::new(tx, limiter);
    spawnable(&sink);
    fn is_sink<S: Sink<u8>>(_: &S) {}
    is_sink(&sink);
}

#[test]
fn sink_item_dropped_before_it_is_polled_charges_nothing() {
    let limiter = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap();
    let (tx, rx) = mpsc::unbounded();
    let mut paced = ThrottledSink::new(tx, limiter.clone());
    assert!(matches!(
        poll_once(pin!(futures::future::poll_fn(|cx| std::pin::Pin::new(
            &mut paced
        )
        .poll_ready(cx)))),
        Poll::Ready(Ok(()))
    ));
    std::pin::Pin::new(&mut paced).start_send(1).unwrap();
    drop(paced);
    assert!(limiter.try_acquire(), "the unsent item took nothing");
    assert!(futures::executor::block_on(rx.collect::<Vec<u8>>()).is_empty());
}
