//! The Stream and Sink adapters and `Jitter` on virtual time, checked against their
//! documentation alone: one item pulled and waiting at a time, `into_inner`
//! mid-wait, a sink's back-pressure through `poll_ready`, `poll_flush` and
//! `poll_close`, refusals that surface at the poll that charges them, a zero
//! maximum wait, many adapters on one limit (turns booked in the order asked, a
//! window's and a queue's exact pace, waits dropped together in any order, per key
//! too), and the jitter's shared, inclusive, uniform sequence.

use crate::support::adapters::{poll_next, poll_once, unbursting, HeldClock};
use futures::channel::mpsc;
use futures::executor::{block_on, block_on_stream};
use futures::task::noop_waker_ref;
use futures::{stream, Sink, SinkExt, StreamExt};
use sluicegate::adapters::sink::SinkError;
use sluicegate::adapters::{Jitter, Rejected, Throttled, ThrottledSink, Weighed};
use sluicegate::algorithms::{FixedWindow, LeakyBucket};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{Error, KeyedRateLimiter, RateLimiter};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

fn ready<S: Sink<T> + Unpin, T>(sink: &mut S) -> Poll<Result<(), S::Error>> {
    Pin::new(sink).poll_ready(&mut Context::from_waker(noop_waker_ref()))
}

fn flush<S: Sink<T> + Unpin, T>(sink: &mut S) -> Poll<Result<(), S::Error>> {
    Pin::new(sink).poll_flush(&mut Context::from_waker(noop_waker_ref()))
}

fn close<S: Sink<T> + Unpin, T>(sink: &mut S) -> Poll<Result<(), S::Error>> {
    Pin::new(sink).poll_close(&mut Context::from_waker(noop_waker_ref()))
}

// --- One adapter on virtual time ---------------------------------------------------

/// `Throttled`: "One item waits at a time: the next is pulled from the inner stream
/// only after the previous one was yielded." An inner stream that ends while an
/// item waits loses nothing: the item comes out, then the end.
#[test]
fn stream_pulls_the_next_item_only_once_the_waiting_one_is_out() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(1.0), clock.clone());
    let pulled = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::unbounded::<u32>();
    for n in 1..=3 {
        tx.unbounded_send(n).unwrap();
    }
    let counter = pulled.clone();
    let inner = rx.inspect(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let mut paced = Throttled::new(inner, limiter);
    let pulls = || pulled.load(Ordering::SeqCst);
    assert_eq!(poll_next(Pin::new(&mut paced)), Poll::Ready(Some(Ok(1))));
    assert_eq!(pulls(), 1);
    assert!(
        poll_next(Pin::new(&mut paced)).is_pending(),
        "2 waits for 1 s"
    );
    assert!(poll_next(Pin::new(&mut paced)).is_pending());
    assert_eq!(pulls(), 2, "3 stays in the inner stream while 2 waits");
    drop(tx); // the inner stream ends (after 3) while 2 waits
    clock.advance(Duration::from_secs(1));
    assert_eq!(poll_next(Pin::new(&mut paced)), Poll::Ready(Some(Ok(2))));
    assert!(
        poll_next(Pin::new(&mut paced)).is_pending(),
        "3 waits for 2 s"
    );
    assert_eq!(pulls(), 3);
    clock.advance(Duration::from_secs(1));
    assert_eq!(poll_next(Pin::new(&mut paced)), Poll::Ready(Some(Ok(3))));
    assert_eq!(poll_next(Pin::new(&mut paced)), Poll::Ready(None));
}

/// `Throttled::into_inner`: "Gives back the inner stream. An item waiting for its
/// permits is dropped and its permits given back."
#[test]
fn stream_into_inner_mid_wait_drops_the_item_and_gives_its_permits_back() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(1.0), clock.clone());
    let mut paced = Throttled::new(stream::iter([1, 2, 3]), limiter.clone());
    assert_eq!(poll_next(Pin::new(&mut paced)), Poll::Ready(Some(Ok(1))));
    assert!(
        poll_next(Pin::new(&mut paced)).is_pending(),
        "2 waits for 1 s"
    );
    let rest: Vec<i32> = block_on_stream(paced.into_inner()).collect();
    assert_eq!(rest, [3], "2 was dropped, 3 never pulled");
    // Kept, 2's turn would push the next free permit to 2 s.
    assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::from_secs(1));
}

/// `ThrottledSink::into_inner`: "An item waiting for its permits is dropped, never
/// sent, and its permits given back."
#[test]
fn sink_into_inner_mid_wait_never_sends_the_item_and_gives_its_permits_back() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(1.0), clock.clone());
    let (tx, rx) = mpsc::unbounded::<u32>();
    let mut paced = ThrottledSink::new(tx, limiter.clone());
    assert!(matches!(
        poll_once(pin!(paced.send(1))),
        Poll::Ready(Ok(()))
    ));
    assert!(
        poll_once(pin!(paced.send(2))).is_pending(),
        "2 waits for 1 s"
    );
    let tx = paced.into_inner();
    assert!(!tx.is_closed());
    drop(tx);
    assert_eq!(block_on(rx.collect::<Vec<_>>()), [1], "2 was never sent");
    assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::from_secs(1));
}

/// `ThrottledSink`: "`start_send` holds the item; the next `poll_ready`,
/// `poll_flush` or `poll_close` charges it, waits, and sends it on when it is
/// granted", and "nothing goes past an item still waiting for its permits". The
/// item is charged once however often the sink is polled.
#[test]
fn sink_ready_flush_and_close_all_wait_behind_a_waiting_item() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(1.0), clock.clone());
    let (tx, mut rx) = mpsc::unbounded::<u32>();
    let mut paced = ThrottledSink::new(tx, limiter.clone());
    assert!(matches!(ready(&mut paced), Poll::Ready(Ok(()))));
    Pin::new(&mut paced).start_send(1).unwrap();
    assert!(matches!(flush(&mut paced), Poll::Ready(Ok(()))));
    assert_eq!(rx.try_recv().ok(), Some(1));

    assert!(matches!(ready(&mut paced), Poll::Ready(Ok(()))));
    Pin::new(&mut paced).start_send(2).unwrap();
    for _ in 0..3 {
        assert!(ready(&mut paced).is_pending(), "back-pressure: 2 waits");
        assert!(flush(&mut paced).is_pending());
        assert!(close(&mut paced).is_pending());
    }
    assert!(rx.try_recv().is_err(), "nothing sent on");
    clock.advance(Duration::from_millis(999));
    assert!(close(&mut paced).is_pending());
    clock.advance(Duration::from_millis(1));
    assert!(matches!(close(&mut paced), Poll::Ready(Ok(()))));
    assert_eq!(block_on(rx.collect::<Vec<_>>()), [2], "sent, then closed");
    // 2 took the permit at 1 s, once: the next is at 2 s.
    assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::from_secs(1));
}

/// `ThrottledSink`: a held item is charged at "the next `poll_ready`, `poll_flush`
/// or `poll_close`", and "A refused item ... is returned in `SinkError::Refused` and
/// the sink stays usable": a refusal comes back from whichever of them charged it.
#[test]
fn a_sink_refusal_comes_back_from_the_poll_that_charged_it_and_the_sink_goes_on() {
    let window = FixedWindow::new(2, Duration::from_secs(60)).unwrap();
    let limiter = RateLimiter::with_clock(window, HeldClock::default());
    let (tx, rx) = mpsc::unbounded::<u64>();
    let mut paced = ThrottledSink::with_weigher(tx, limiter, Weighed(|n: &u64| *n))
        .with_max_wait(Duration::from_secs(1));
    block_on(async {
        paced.feed(5).await.unwrap(); // held, not yet charged
        let refused = paced.feed(1).await; // its poll_ready charges 5
        let Err(SinkError::Refused(Rejected { item, error })) = refused else {
            panic!("expected 5 refused, got {refused:?}")
        };
        assert_eq!((item, error), (5, Error::Never { cost: 5 }));
        paced.send(1).await.unwrap();
        paced.send(1).await.unwrap();
        paced.feed(1).await.unwrap(); // the window is spent for 60 s
        let refused = paced.close().await;
        let Err(SinkError::Refused(Rejected { item, error })) = refused else {
            panic!("expected 1 refused, got {refused:?}")
        };
        assert_eq!(
            (item, error),
            (
                1,
                Error::Timeout {
                    needed: Duration::from_secs(60)
                }
            )
        );
        paced.close().await.unwrap();
    });
    assert_eq!(block_on(rx.collect::<Vec<_>>()), [1, 1]);
}

/// `Throttled::with_max_wait`: "A zero `max_wait` lets through only what needs no
/// wait." A bursty limiter of 2 a second idle for 1 s has stored 2 permits and
/// grants a third at once, paid for by the next (Guava's pay-later); the fourth
/// needs 0.5 s, and is refused without a sleep.
#[test]
fn a_zero_max_wait_lets_through_exactly_what_needs_no_wait() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(2.0, clock.clone()).unwrap();
    clock.advance(Duration::from_secs(1));
    let paced = Throttled::new(stream::iter(1..=5), limiter).with_max_wait(Duration::ZERO);
    let out: Vec<_> = block_on(paced.collect());
    let half = Duration::from_millis(500);
    assert_eq!(
        out,
        [
            Ok(1),
            Ok(2),
            Ok(3),
            Err(Rejected {
                item: 4,
                error: Error::Timeout { needed: half }
            }),
            Err(Rejected {
                item: 5,
                error: Error::Timeout { needed: half }
            }),
        ]
    );
    assert_eq!(clock.now(), 1_000_000_000, "nothing slept");
}

/// `Throttled::with_max_wait` refuses an item "when it would have to wait longer
/// than `max_wait`" (the sink's: "longer than"), so a wait of exactly the maximum is
/// waited; and "a cost that can never be granted fails at once with `Error::Never`,
/// whatever the maximum wait", a zero one included.
#[test]
fn a_wait_of_exactly_the_maximum_is_waited_and_never_beats_a_zero_maximum() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    let limiter = RateLimiter::with_clock(window, clock.clone());
    let paced = Throttled::with_weigher(stream::iter([2u64, 2]), limiter, Weighed(|n: &u64| *n))
        .with_max_wait(Duration::from_secs(1));
    assert_eq!(block_on(paced.collect::<Vec<_>>()), [Ok(2), Ok(2)]);
    assert_eq!(clock.now(), 1_000_000_000, "the second waited its 1 s");

    let clock = ManualClock::new();
    let limiter = RateLimiter::bursty_with_clock(4.0, clock.clone()).unwrap();
    let (tx, rx) = mpsc::unbounded::<u32>();
    let mut paced = ThrottledSink::new(tx, limiter).with_max_wait(Duration::from_millis(250));
    block_on(async {
        paced.send(1).await.unwrap();
        paced.send(2).await.unwrap();
    });
    assert_eq!(clock.now(), 250_000_000, "the second waited its 250 ms");
    drop(paced);
    assert_eq!(block_on(rx.collect::<Vec<_>>()), [1, 2]);

    let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    let limiter = RateLimiter::with_clock(window, ManualClock::new());
    let paced = Throttled::with_weigher(stream::iter([3u64]), limiter, Weighed(|n: &u64| *n))
        .with_max_wait(Duration::ZERO);
    let out: Vec<_> = block_on(paced.collect());
    assert_eq!(
        out,
        [Err(Rejected {
            item: 3,
            error: Error::Never { cost: 3 }
        })]
    );
}

// --- Many adapters on one limit, virtual time -----------------------------------------

type HeldStream = Throttled<
    stream::Iter<std::vec::IntoIter<u32>>,
    RateLimiter<sluicegate::algorithms::SmoothBursty, HeldClock>,
>;

/// The module's "Waiting": "a bursty or leaky-bucket queue limiter books each
/// waiter its own slot in the order they asked, so a late caller cannot overtake
/// one that is already waiting". Eight streams on one limit, polled in reverse
/// order at every step, come out one interval apart in the order they first asked.
#[test]
fn eight_streams_on_one_limit_come_out_one_interval_apart_in_the_order_they_asked() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(10.0), clock.clone());
    let mut streams: Vec<HeldStream> = (0..8)
        .map(|k| Throttled::new(stream::iter(vec![k]), limiter.clone()))
        .collect();
    assert_eq!(
        poll_next(Pin::new(&mut streams[0])),
        Poll::Ready(Some(Ok(0)))
    );
    for s in &mut streams[1..] {
        assert!(poll_next(Pin::new(s)).is_pending());
    }
    let mut out = vec![0];
    for step in 1..8 {
        clock.advance(Duration::from_millis(50));
        for s in streams.iter_mut().rev() {
            assert!(!matches!(poll_next(Pin::new(s)), Poll::Ready(Some(_))));
        }
        clock.advance(Duration::from_millis(50));
        let released: Vec<u32> = streams
            .iter_mut()
            .rev()
            .filter_map(|s| match poll_next(Pin::new(s)) {
                Poll::Ready(Some(item)) => Some(item.unwrap()),
                _ => None,
            })
            .collect();
        assert_eq!(released, [step], "at {} ms", step * 100);
        out.extend(released);
    }
    assert_eq!(out, (0..8).collect::<Vec<_>>());
}

/// `FixedWindow`: "at most `limit` per aligned window"; the module: "The window
/// counters cannot book the future: their waiters sleep the refusal's
/// `retry_after` and ask again". Eight streams of three items on a window of 3 a
/// second: exactly 3 come out in every window, whoever asks first.
#[test]
fn eight_streams_on_a_fixed_window_get_exactly_its_limit_per_window() {
    let clock = HeldClock::default();
    let window = FixedWindow::new(3, Duration::from_secs(1)).unwrap();
    let limiter = RateLimiter::with_clock(window, clock.clone());
    let mut streams: Vec<_> = (0..8u32)
        .map(|k| Throttled::new(stream::iter(vec![k; 3]), limiter.clone()))
        .collect();
    let mut per_window = Vec::new();
    let mut left = 24;
    for w in 0..9 {
        let mut released = 0;
        for i in 0..8 {
            let s = &mut streams[(i + w) % 8];
            while let Poll::Ready(Some(item)) = poll_next(Pin::new(s)) {
                item.unwrap();
                released += 1;
            }
        }
        left -= released;
        per_window.push(released);
        clock.advance(Duration::from_secs(1));
    }
    assert_eq!(per_window, [3, 3, 3, 3, 3, 3, 3, 3, 0]);
    assert_eq!(left, 0);
}

/// The module: "waits dropped together (requests timing out at once) give back all
/// of theirs, in whatever order they are dropped". Eight streams, each with its
/// item booked 1 to 8 s away, dropped in a scrambled order.
#[test]
fn streams_dropped_together_in_any_order_give_back_every_turn() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(1.0), clock.clone());
    assert!(limiter.try_acquire());
    let mut streams: Vec<Option<HeldStream>> = (0..8)
        .map(|k| Some(Throttled::new(stream::iter(vec![k]), limiter.clone())))
        .collect();
    for s in streams.iter_mut().flatten() {
        assert!(poll_next(Pin::new(s)).is_pending());
    }
    for k in [3, 0, 7, 5, 1, 6, 2, 4] {
        streams[k] = None;
    }
    // Every turn is back: the next permit is the one at 1 s, not at 9 s.
    assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::from_secs(1));
}

/// As above for sinks: "Dropping it while an item waits gives that item's permits
/// back (the item is dropped, never sent)", eight at once, in a scrambled order.
#[test]
fn sinks_dropped_together_in_any_order_give_back_every_turn_and_send_nothing() {
    let clock = HeldClock::default();
    let limiter = RateLimiter::with_clock(unbursting(1.0), clock.clone());
    assert!(limiter.try_acquire());
    let (tx, rx) = mpsc::unbounded::<u32>();
    let mut sinks: Vec<Option<_>> = (0..8)
        .map(|_| Some(ThrottledSink::new(tx.clone(), limiter.clone())))
        .collect();
    drop(tx);
    for (k, sink) in sinks.iter_mut().enumerate() {
        let sink = sink.as_mut().unwrap();
        assert!(poll_once(pin!(sink.send(k as u32))).is_pending());
    }
    for k in [6, 2, 7, 0, 4, 1, 5, 3] {
        sinks[k] = None;
    }
    assert_eq!(block_on(rx.collect::<Vec<_>>()), Vec::<u32>::new());
    assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::from_secs(1));
}

/// As above per key: `Permits::acquire`: futures dropped together give back all of
/// theirs, "in whatever order they are dropped (the limiter's abandoned waits rule,
/// per key for a keyed limiter)". Eight keyed streams on two keys.
#[test]
fn keyed_streams_dropped_together_give_back_every_turn_of_each_key() {
    let clock = HeldClock::default();
    let per_key = KeyedRateLimiter::with_clock(unbursting(1.0), clock.clone());
    assert!(per_key.try_acquire(&"a"));
    assert!(per_key.try_acquire(&"b"));
    let key_of = |k: &u32| (if k.is_multiple_of(2) { "a" } else { "b" }, 1u64);
    let mut streams: Vec<Option<_>> = (0..8u32)
        .map(|k| {
            Some(Throttled::with_weigher(
                stream::iter(vec![k]),
                per_key.clone(),
                key_of,
            ))
        })
        .collect();
    for s in streams.iter_mut().flatten() {
        assert!(poll_next(Pin::new(s)).is_pending());
    }
    for k in [5, 2, 0, 7, 3, 6, 4, 1] {
        streams[k] = None;
    }
    for key in ["a", "b"] {
        let next = per_key.reserve(&key, 1).unwrap().delay();
        assert_eq!(next, Duration::from_secs(1), "key {key}");
    }
}

/// README: "`LeakyBucket::queue` | callers act one interval apart, in order; at
/// most `b` queued"; its module: "no more than `b + r × t` permits are granted over
/// any span `t` (for the queue, counted at the time each caller acts)". Eight
/// streams on a queue of 3 at 10 a second, polled every 100 ms: one item comes out
/// per interval, and every item gets through.
#[test]
fn eight_streams_on_a_queue_come_out_one_interval_apart() {
    let clock = HeldClock::default();
    let queue = LeakyBucket::queue(3, 10, Duration::from_secs(1)).unwrap();
    let limiter = RateLimiter::with_clock(queue, clock.clone());
    let mut streams: Vec<Option<_>> = (0..8u32)
        .map(|k| Some(Throttled::new(stream::iter(vec![k]), limiter.clone())))
        .collect();
    let mut per_step = Vec::new();
    for step in 0..20 {
        let mut released = 0;
        for i in 0..8 {
            let slot = &mut streams[(i + step) % 8];
            if let Some(s) = slot {
                match poll_next(Pin::new(s)) {
                    Poll::Ready(Some(item)) => {
                        assert!(item.is_ok(), "at step {step}: {item:?}");
                        released += 1;
                        *slot = None;
                    }
                    Poll::Ready(None) => panic!("a stream ended without its item"),
                    Poll::Pending => {}
                }
            }
        }
        per_step.push(released);
        clock.advance(Duration::from_millis(100));
    }
    assert!(per_step.iter().all(|n| *n <= 1), "{per_step:?}");
    assert_eq!(per_step.iter().sum::<usize>(), 8, "{per_step:?}");
}

// --- Jitter ------------------------------------------------------------------------

/// `Jitter`: "Clones share one sequence: each draw takes the next value, whichever
/// clone draws."
#[test]
fn jitter_clones_draw_from_one_sequence() {
    let max = Duration::from_millis(100);
    let a = Jitter::new(max, 5);
    let b = a.clone();
    let interleaved: Vec<Duration> = (0..10)
        .map(|i| if i % 2 == 0 { a.draw() } else { b.draw() })
        .collect();
    let fresh = Jitter::new(max, 5);
    let alone: Vec<Duration> = (0..10).map(|_| fresh.draw()).collect();
    assert_eq!(interleaved, alone);
}

/// "each draw takes the next value, whichever clone draws", from eight threads at
/// once: together they take the sequence's first values, each exactly once.
#[test]
fn jitter_drawn_from_eight_threads_takes_each_value_once() {
    let max = Duration::from_secs(1);
    let shared = Jitter::new(max, 11);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let jitter = shared.clone();
            std::thread::spawn(move || (0..500).map(|_| jitter.draw()).collect::<Vec<_>>())
        })
        .collect();
    let mut drawn: Vec<Duration> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let fresh = Jitter::new(max, 11);
    let mut expected: Vec<Duration> = (0..4000).map(|_| fresh.draw()).collect();
    drawn.sort();
    expected.sort();
    assert_eq!(drawn, expected);
}

/// "Up to `max` of extra delay, drawn uniformly"; `new`: "Jitter of up to `max`
/// (inclusive)". A max of 1 ns draws both 0 and 1 ns; a max of 1 s spreads its
/// draws over the whole range, about a tenth in each tenth.
#[test]
fn jitter_is_uniform_over_its_range_max_included() {
    let tiny = Jitter::new(Duration::from_nanos(1), 3);
    let draws: Vec<Duration> = (0..1000).map(|_| tiny.draw()).collect();
    assert!(draws.iter().all(|d| *d <= Duration::from_nanos(1)));
    assert!(draws.contains(&Duration::ZERO), "0 never drawn");
    assert!(
        draws.contains(&Duration::from_nanos(1)),
        "the max (inclusive) never drawn"
    );

    let jitter = Jitter::new(Duration::from_secs(1), 17);
    let mut tenths = [0usize; 10];
    for _ in 0..20_000 {
        let d = jitter.draw();
        assert!(d <= Duration::from_secs(1));
        tenths[((d.as_nanos() * 10 / 1_000_000_001) as usize).min(9)] += 1;
    }
    assert!(
        tenths.iter().all(|n| (1_700..=2_300).contains(n)),
        "not uniform: {tenths:?}"
    );
}
