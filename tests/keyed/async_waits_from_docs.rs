//! The async keyed front end's waits, tested from the public docs alone
//! (`AsyncKeyedRateLimiter`, `KeyedReservation`): when an async reserve and an
//! async cancel read the time, and what abandoned waits on a key and on a key list
//! give back, in memory (the same on Redis in `async_on_redis_from_docs`).

use super::async_common::{ms, runtime, secs, Keyed};
use crate::support::adapters::poll_once;
use crate::support::timed_clock::Timed;

use sluicegate::algorithms::{AllOf, LeakyBucket, SmoothBursty};
use sluicegate::clock::ManualClock;
use sluicegate::stores::Store;
use sluicegate::{Error, KeyedRateLimiter};
use std::future::Future;
use std::task::Poll;
use std::time::Duration;

/// Polls `wait` on `rt` until it has begun sleeping on `timed` (its grant is
/// reserved and it is mid-wait), failing if it resolves instead. A step on a
/// remote store needs its reply first, so this polls while the runtime runs.
fn park<F>(rt: &tokio::runtime::Runtime, timed: &Timed, wait: &mut std::pin::Pin<Box<F>>)
where
    F: Future<Output = Result<Duration, Error>>,
{
    let before = timed.sleeps_begun();
    rt.block_on(async {
        for _ in 0..10_000 {
            if let Poll::Ready(done) = futures::poll!(wait.as_mut()) {
                panic!("the wait resolved instead of sleeping: {done:?}");
            }
            if timed.sleeps_begun() > before {
                return;
            }
            tokio::time::sleep(ms(1)).await;
        }
        panic!("the wait never began its sleep");
    });
}

// ---------------------------------------------------------------------------
// When the async calls read the time.
// ---------------------------------------------------------------------------

/// `AsyncKeyedRateLimiter::reserve`: "The time of the reserve is read when the
/// future is first polled." A reserve made at 0 and first polled at 3 s acts at
/// 3 s; `reserve_all` likewise.
pub(crate) fn an_async_reserve_reads_the_time_when_first_polled<S>(
    limiter: Keyed<SmoothBursty, S, ManualClock>,
    rt: &tokio::runtime::Runtime,
) where
    S: Store<&'static str, SmoothBursty> + 'static,
{
    let handle = limiter.to_async();
    limiter.acquire(&"k").unwrap(); // k's next turn: 1 s
    limiter.acquire(&"j").unwrap();
    let one = handle.reserve(&"k", 1);
    let all = handle.reserve_all(&["j", "i"], 1);
    limiter.clock().advance(secs(3));
    let one = rt.block_on(one).unwrap();
    assert_eq!(
        one.acts_at(),
        3_000_000_000,
        "read at the first poll, not at the call"
    );
    assert_eq!(one.delay(), Duration::ZERO);
    let all = rt.block_on(all).unwrap();
    assert_eq!(all.acts_at(), 3_000_000_000);
}

/// `KeyedReservation::cancel_async`: "The time of the cancel is read when this is
/// called." A cancel called at 0.5 s, before the time to act (1 s), and awaited
/// at 2.5 s, after it, gives the permit back.
pub(crate) fn an_async_cancel_reads_the_time_when_called<S>(
    limiter: Keyed<SmoothBursty, S, ManualClock>,
    rt: &tokio::runtime::Runtime,
) where
    S: Store<&'static str, SmoothBursty> + 'static,
{
    limiter.acquire(&"k").unwrap();
    let later = limiter.reserve(&"k", 1).unwrap();
    assert_eq!(later.acts_at(), 1_000_000_000);
    limiter.clock().advance(ms(500));
    let cancel = later.cancel_async();
    limiter.clock().advance(secs(2));
    rt.block_on(cancel).unwrap();
    // Given back: at 2.5 s a whole permit is saved (the burst is 1 s), so two
    // tries pass (the second pays later); kept, only half a permit is saved and
    // one passes.
    assert!(limiter.try_acquire(&"k"));
    assert!(
        limiter.try_acquire(&"k"),
        "the cancel was judged at 2.5 s, not at 0.5 s"
    );
    assert!(!limiter.try_acquire(&"k"));
}

#[test]
fn an_async_reserve_reads_the_time_when_first_polled_in_memory() {
    let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new());
    an_async_reserve_reads_the_time_when_first_polled(limiter, &runtime());
}

#[test]
fn an_async_cancel_reads_the_time_when_called_in_memory() {
    let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new());
    an_async_cancel_reads_the_time_when_called(limiter, &runtime());
}

// ---------------------------------------------------------------------------
// Abandoned async waits on keys and key lists (`AsyncKeyedRateLimiter` docs).
// ---------------------------------------------------------------------------

/// "A single key and a list holding it are recorded apart": a list wait dropped
/// while a later single-key wait on one of its keys is pending is given back at
/// once, in full on the key no later grant holds, and nothing on the key the
/// later wait holds; that wait, dropped next, gives back its own.
pub(crate) fn a_list_wait_and_a_key_wait_are_recorded_apart<S>(
    limiter: Keyed<SmoothBursty, S, Timed>,
    rt: &tokio::runtime::Runtime,
) where
    S: Store<&'static str, SmoothBursty> + 'static,
{
    let timed = limiter.clock().clone();
    let handle = limiter.to_async();
    limiter.acquire_all(&["a", "b"], 1).unwrap(); // both next at 1 s
    let mut list = Box::pin(handle.acquire_all(&["a", "b"], 1)); // 1 s; both next at 2 s
    park(rt, &timed, &mut list);
    let mut single = Box::pin(handle.acquire(&"a")); // 2 s; a next at 3 s
    park(rt, &timed, &mut single);

    drop(list);
    let b = limiter.reserve(&"b", 1).unwrap();
    assert_eq!(
        b.delay(),
        secs(1),
        "b: the list's turn is back, no wait of its list pends"
    );
    b.cancel().unwrap();
    let a = limiter.peek(&"a", 1).unwrap();
    assert_eq!(
        a.retry_after(),
        secs(3),
        "a: the later wait on a keeps the list's turn"
    );

    drop(single);
    let a = limiter.peek(&"a", 1).unwrap();
    assert_eq!(
        a.retry_after(),
        secs(2),
        "a: the single wait's own turn is back"
    );
}

/// "A wait that acts leaves the record with the abandoned waits just before it":
/// a list wait dropped ahead of a pending one on the same list is marked
/// abandoned (nothing back yet); when the later one acts, nothing of the first
/// comes back. Dropped instead, the later one takes the first back with it.
pub(crate) fn a_wait_that_acts_keeps_the_abandoned_ones_before_it<S>(
    make: impl Fn() -> Keyed<SmoothBursty, S, Timed>,
    rt: &tokio::runtime::Runtime,
) where
    S: Store<&'static str, SmoothBursty> + 'static,
{
    for acts in [true, false] {
        let limiter = make();
        let timed = limiter.clock().clone();
        let handle = limiter.to_async();
        limiter.acquire_all(&["a", "b"], 1).unwrap(); // next at 1 s
        let mut first = Box::pin(handle.acquire_all(&["a", "b"], 1)); // 1 s
        park(rt, &timed, &mut first);
        let mut second = Box::pin(handle.acquire_all(&["a", "b"], 1)); // 2 s
        park(rt, &timed, &mut second);
        drop(first);
        for key in ["a", "b"] {
            let d = limiter.peek(&key, 1).unwrap();
            assert_eq!(
                d.retry_after(),
                secs(3),
                "{key}: marked abandoned, nothing back yet"
            );
        }
        if acts {
            timed.clock.advance(secs(2));
            let waited = rt.block_on(second).unwrap();
            assert_eq!(waited, secs(2));
            for key in ["a", "b"] {
                let d = limiter.peek(&key, 1).unwrap();
                assert_eq!(
                    d.retry_after(),
                    secs(1),
                    "{key}: the first's turn stays taken"
                );
            }
        } else {
            drop(second);
            for key in ["a", "b"] {
                let d = limiter.peek(&key, 1).unwrap();
                assert_eq!(d.retry_after(), secs(1), "{key}: both turns are back");
            }
        }
    }
}

fn bursty_on_timed(
) -> Keyed<SmoothBursty, sluicegate::stores::MemoryStore<&'static str, SmoothBursty>, Timed> {
    KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), Timed::default())
}

#[test]
fn a_list_wait_and_a_key_wait_are_recorded_apart_in_memory() {
    a_list_wait_and_a_key_wait_are_recorded_apart(bursty_on_timed(), &runtime());
}

#[test]
fn a_wait_that_acts_keeps_the_abandoned_list_waits_before_it_in_memory() {
    a_wait_that_acts_keeps_the_abandoned_ones_before_it(bursty_on_timed, &runtime());
}

/// Waits on a set of limits over a key list, dropped together first to last (the
/// order that gives nothing back under Go's rule alone), give back every member's
/// permits on every key: the next call waits as if they had never been made.
#[test]
fn set_waits_on_a_key_list_dropped_first_to_last_give_everything_back() {
    let cadence = SmoothBursty::new(2.0)
        .unwrap()
        .with_max_burst(Duration::ZERO)
        .unwrap();
    let queue = LeakyBucket::queue(10, 1, ms(300)).unwrap();
    let timed = Timed::default();
    let limiter = KeyedRateLimiter::with_clock(AllOf::new((cadence, queue)), timed.clone());
    let handle = limiter.to_async();
    limiter.acquire_all(&["ip", "user"], 1).unwrap();
    let before = limiter.peek_all(&["ip", "user"], 1).unwrap();
    let mut waits: Vec<_> = (0..5)
        .map(|_| Box::pin(handle.acquire_all(&["ip", "user"], 1)))
        .collect();
    for wait in &mut waits {
        assert!(poll_once(wait.as_mut()).is_pending());
    }
    assert_eq!(timed.sleeps_begun(), 5);
    for wait in waits {
        drop(wait); // first to last
    }
    assert_eq!(limiter.peek_all(&["ip", "user"], 1).unwrap(), before);
    for key in ["ip", "user"] {
        assert_eq!(
            limiter.peek(&key, 1).unwrap().retry_after(),
            ms(500),
            "{key}"
        );
    }
}
