//! Waiting, on virtual time, as the docs describe it: waiters on real threads and
//! tasks (blocking `acquire`, async `acquire().await`, direct, keyed and on key
//! lists) served one slot each in the order they asked; refused timed tries that
//! take no turn; the saved burst after a long idle and no more, by eight threads;
//! a cold warming-up limiter after an idle; costs no wait can grant failing at
//! once; and what cancelled reservations and dropped waits give back.
//!
//! The waiters run on a [`GateClock`]: their sleeps, blocking or async, last until
//! the test moves time past their end, so each waiter is seen asleep before the
//! next one asks, and each turn is released on its own.

use crate::support::adapters::poll_once;
use crate::support::adapters::unbursting;
use crate::support::gate_clock::GateClock;
use crate::support::waiting::{
    answered_at_once, current_thread, eight_threads, in_order, ms, serve_in_turn,
};

use sluicegate::algorithms::{FixedWindow, LeakyBucket, SmoothBursty, SmoothWarmingUp};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{Error, KeyedRateLimiter, RateLimiter};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

#[test]
fn blocking_waiters_are_served_one_slot_each_in_the_order_they_asked() {
    // "a bursty or leaky-bucket queue limiter books each waiter its own slot in
    // the order they asked, so a late caller cannot overtake one that is already
    // waiting" (adapters module docs; the waiters are the limiter's acquires).
    let clock = GateClock::new();
    let direct = RateLimiter::with_clock(unbursting(10.0), clock.clone());
    let got = serve_in_turn(&clock, 8, ms(100), &|_| direct.acquire().unwrap(), &|_| {});
    assert_eq!(got, in_order(), "direct acquire");

    let clock = GateClock::new();
    let keyed = KeyedRateLimiter::with_clock(unbursting(10.0), clock.clone());
    let got = serve_in_turn(
        &clock,
        8,
        ms(100),
        &|_| keyed.acquire(&"k").unwrap(),
        &|_| {},
    );
    assert_eq!(got, in_order(), "keyed acquire");

    let clock = GateClock::new();
    let keyed = KeyedRateLimiter::with_clock(unbursting(10.0), clock.clone());
    let both = |_| keyed.acquire_all(&["ip", "user"], 1).unwrap();
    assert_eq!(
        serve_in_turn(&clock, 8, ms(100), &both, &|_| {}),
        in_order(),
        "acquire_all"
    );

    let clock = GateClock::new();
    let queue = LeakyBucket::queue(10, 1, ms(100)).unwrap();
    let keyed = KeyedRateLimiter::with_clock(queue, clock.clone());
    let got = serve_in_turn(
        &clock,
        8,
        ms(100),
        &|_| keyed.acquire(&"q").unwrap(),
        &|_| {},
    );
    assert_eq!(got, in_order(), "leaky-bucket queue");
}

#[test]
fn async_waiters_are_served_one_slot_each_in_the_order_they_asked() {
    let clock = GateClock::new();
    let direct = RateLimiter::with_clock(unbursting(10.0), clock.clone()).to_async();
    let waiter = |_| futures::executor::block_on(direct.acquire()).unwrap();
    assert_eq!(
        serve_in_turn(&clock, 8, ms(100), &waiter, &|_| {}),
        in_order(),
        "direct acquire().await under block_on"
    );

    let clock = GateClock::new();
    let keyed = KeyedRateLimiter::with_clock(unbursting(10.0), clock.clone()).to_async();
    let waiter = |_| current_thread().block_on(keyed.acquire(&"k")).unwrap();
    assert_eq!(
        serve_in_turn(&clock, 8, ms(100), &waiter, &|_| {}),
        in_order(),
        "keyed acquire(&key).await under tokio"
    );

    let clock = GateClock::new();
    let keyed = KeyedRateLimiter::with_clock(unbursting(10.0), clock.clone()).to_async();
    let waiter = |_| {
        current_thread()
            .block_on(keyed.acquire_all(&["ip", "user"], 1))
            .unwrap()
    };
    assert_eq!(
        serve_in_turn(&clock, 8, ms(100), &waiter, &|_| {}),
        in_order(),
        "acquire_all(..).await under tokio"
    );
}

#[test]
fn blocking_and_async_waiters_mixed_on_one_key_keep_the_order_they_asked_in() {
    // "it shares the store with the limiter, so blocking and async callers mix on
    // the same keys" (AsyncKeyedRateLimiter): one queue of turns for both.
    let clock = GateClock::new();
    let keyed = KeyedRateLimiter::with_clock(unbursting(10.0), clock.clone());
    let handle = keyed.to_async();
    let waiter = |i: usize| match i % 3 {
        0 => keyed.acquire(&"k").unwrap(),
        1 => current_thread().block_on(handle.acquire(&"k")).unwrap(),
        _ => futures::executor::block_on(handle.acquire_n(&"k", 1)).unwrap(),
    };
    assert_eq!(
        serve_in_turn(&clock, 8, ms(100), &waiter, &|_| {}),
        in_order()
    );

    let clock = GateClock::new();
    let direct = RateLimiter::with_clock(unbursting(10.0), clock.clone());
    let handle = direct.to_async();
    let waiter = |i: usize| {
        if i.is_multiple_of(2) {
            direct.acquire().unwrap()
        } else {
            futures::executor::block_on(handle.acquire()).unwrap()
        }
    };
    assert_eq!(
        serve_in_turn(&clock, 8, ms(100), &waiter, &|_| {}),
        in_order()
    );
}

#[test]
fn refused_timed_tries_between_the_waiters_take_no_turn_and_do_not_wait() {
    // try_acquire_timeout: "answers false at once, without waiting, if it cannot";
    // try_acquire_n_timeout: "answers false without consuming anything". After
    // waiter i has asked, the next turn is (i + 1) × 100 ms away: a try willing to
    // wait a little less is refused, and the waiters behind it keep their slots.
    let clock = GateClock::new();
    let direct = RateLimiter::with_clock(unbursting(10.0), clock.clone());
    let handle = direct.to_async();
    let refused = AtomicUsize::new(0);
    let between = |i: usize| {
        let short = ms(100) * (i as u32 + 1) - Duration::from_nanos(1);
        let sleeps = clock.sleeps().len();
        let tried = answered_at_once(&clock, "a timed try", || {
            [
                direct.try_acquire_timeout(short),
                direct.try_acquire_n_timeout(3, short).unwrap(),
                futures::executor::block_on(handle.try_acquire_n_timeout(1, short)).unwrap(),
            ]
        });
        assert_eq!(tried, [false; 3], "after waiter {i}");
        assert_eq!(clock.sleeps().len(), sleeps, "a refused try sleeps nothing");
        assert_eq!(clock.parked(), i);
        refused.fetch_add(3, Ordering::Relaxed);
    };
    let got = serve_in_turn(&clock, 8, ms(100), &|_| direct.acquire().unwrap(), &between);
    assert_eq!(got, in_order());
    assert_eq!(refused.load(Ordering::Relaxed), 24);

    let clock = GateClock::new();
    let keyed = KeyedRateLimiter::with_clock(unbursting(10.0), clock.clone());
    let handle = keyed.to_async();
    let between = |i: usize| {
        let short = ms(100) * (i as u32 + 1) - Duration::from_nanos(1);
        let tried = answered_at_once(&clock, "a timed try", || {
            [
                keyed.try_acquire_n_timeout(&"k", 1, short).unwrap(),
                current_thread()
                    .block_on(handle.try_acquire_n_timeout(&"k", 2, short))
                    .unwrap(),
                keyed.try_acquire(&"k"),
            ]
        });
        assert_eq!(tried, [false; 3], "after waiter {i}");
        assert_eq!(clock.parked(), i);
    };
    let got = serve_in_turn(
        &clock,
        8,
        ms(100),
        &|_| keyed.acquire(&"k").unwrap(),
        &between,
    );
    assert_eq!(got, in_order());
}

#[test]
fn refused_timed_tries_from_eight_threads_at_once_take_nothing() {
    // One permit a second: after a first acquire the next turn is 1 s away. 600
    // tries willing to wait 999 ms, from eight threads at once, blocking and
    // async, are all refused, none sleeps, and the next turn is still 1 s away.
    let clock = ManualClock::new();
    let keyed = KeyedRateLimiter::with_clock(unbursting(1.0), clock.clone());
    let handle = keyed.to_async();
    keyed.acquire(&"k").unwrap();
    let almost = ms(999);
    let granted = eight_threads(25, &|| {
        keyed.try_acquire_n_timeout(&"k", 1, almost).unwrap()
            || futures::executor::block_on(handle.try_acquire_n_timeout(&"k", 1, almost)).unwrap()
            || keyed.try_acquire(&"k")
    });
    assert_eq!(granted, 0);
    assert_eq!(clock.now(), 0, "no refusal waited");
    assert_eq!(
        keyed.reserve(&"k", 1).unwrap().delay(),
        Duration::from_secs(1)
    );

    let clock = ManualClock::new();
    let direct = RateLimiter::with_clock(unbursting(1.0), clock.clone());
    let handle = direct.to_async();
    direct.acquire().unwrap();
    let granted = eight_threads(25, &|| {
        direct.try_acquire_timeout(almost)
            || direct.try_acquire_n_timeout(5, almost).unwrap()
            || futures::executor::block_on(handle.try_acquire_n_timeout(1, almost)).unwrap()
    });
    assert_eq!(granted, 0);
    assert_eq!(clock.now(), 0, "no refusal waited");
    assert_eq!(direct.reserve(1).unwrap().delay(), Duration::from_secs(1));
}

#[test]
fn eight_threads_after_a_long_idle_get_the_saved_burst_and_one_more() {
    // Guava's SmoothBursty: after at least max_burst idle, `rate × max_burst`
    // stored permits are free, and one more is granted at once and paid by the
    // next caller. "A new key starts with a full burst once the clock has run for
    // max_burst" (KeyedRateLimiter). Eight threads hammering at once get exactly
    // that, and after a second long idle exactly that again: the saving is capped.
    let clock = ManualClock::new();
    let keyed = KeyedRateLimiter::with_clock(SmoothBursty::new(10.0).unwrap(), clock.clone());
    clock.advance(Duration::from_secs(3600));
    assert_eq!(eight_threads(50, &|| keyed.try_acquire(&"k")), 11);
    assert_eq!(eight_threads(50, &|| keyed.try_acquire(&"k")), 0);
    clock.advance(Duration::from_secs(3600));
    assert_eq!(eight_threads(50, &|| keyed.try_acquire(&"k")), 11);
    let lists = eight_threads(50, &|| {
        keyed.check_all(&["a", "b"], 1).unwrap().is_allowed()
    });
    assert_eq!(lists, 11, "two idle keys together");

    let two_seconds = SmoothBursty::new(10.0)
        .unwrap()
        .with_max_burst(Duration::from_secs(2))
        .unwrap();
    let clock = ManualClock::new();
    let direct = RateLimiter::with_clock(two_seconds, clock.clone());
    clock.advance(Duration::from_secs(3600));
    assert_eq!(eight_threads(50, &|| direct.try_acquire()), 21);
    clock.advance(Duration::from_secs(3600));
    let handle = direct.to_async();
    let granted = eight_threads(50, &|| {
        futures::executor::block_on(handle.try_acquire_n_timeout(1, Duration::ZERO)).unwrap()
    });
    assert_eq!(granted, 21);
}

#[test]
fn eight_threads_on_a_warming_up_limit_idle_for_long_get_one_permit_then_the_cold_rate() {
    // SmoothWarmingUp: idle time fills the limit with expensive permits, so a
    // limit idle beyond its warm-up is cold again: the first request is granted
    // at once (pay later) and the next waits the first cold permit's cost, 1.375 s
    // at 2 qps with a 4 s warm-up (guava-semantics §8), however many ask at once.
    let clock = ManualClock::new();
    let warming = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    let keyed = KeyedRateLimiter::with_clock(warming, clock.clone());
    clock.advance(Duration::from_secs(3600));
    for _ in 0..12 {
        keyed.acquire(&"k").unwrap(); // warmed up: 0.5 s apart by now
    }
    assert_eq!(clock.take_sleeps_secs().last(), Some(&0.5));
    clock.advance(Duration::from_secs(3600));
    assert_eq!(eight_threads(50, &|| keyed.try_acquire(&"k")), 1);
    keyed.acquire(&"k").unwrap();
    assert_eq!(clock.take_sleeps_secs(), [1.38]);

    let clock = ManualClock::new();
    let warming = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    let direct = RateLimiter::with_clock(warming, clock.clone());
    for _ in 0..12 {
        direct.acquire().unwrap();
    }
    clock.take_sleeps();
    clock.advance(Duration::from_secs(3600));
    assert_eq!(eight_threads(50, &|| direct.try_acquire()), 1);
    futures::executor::block_on(direct.to_async().acquire()).unwrap();
    assert_eq!(clock.take_sleeps_secs(), [1.38]);
}

/// Asserts that `result` is `Error::Never` for `cost`.
#[track_caller]
fn assert_never(result: Result<Duration, Error>, cost: u64) {
    match result {
        Err(Error::Never { cost: c }) => assert_eq!(c, cost),
        other => panic!("expected Error::Never for {cost}, got {other:?}"),
    }
}

#[test]
fn costs_no_wait_can_grant_fail_at_once_on_every_waiting_call() {
    // "A cost above a limit's capacity is answered Verdict::Never, and acquires
    // fail at once with Error::Never instead of hanging" (README); "a cost that can
    // never be granted makes blocking calls fail at once with Error::Never and
    // tries answer false" (RateLimiter), whatever the timeout.
    let clock = ManualClock::new();
    let window = FixedWindow::new(3, Duration::from_secs(1)).unwrap();
    let keyed = KeyedRateLimiter::with_clock(window, clock.clone());
    let handle = keyed.to_async();
    assert_never(keyed.acquire_n(&"k", 4), 4);
    assert_never(keyed.acquire_all(&["k", "j"], 4), 4);
    assert!(!keyed.try_acquire_n_timeout(&"k", 4, Duration::MAX).unwrap());
    futures::executor::block_on(async {
        assert_never(handle.acquire_n(&"k", 4).await, 4);
        assert_never(handle.acquire_all(&["k", "j"], 4).await, 4);
        let tried = handle.try_acquire_n_timeout(&"k", 4, Duration::MAX).await;
        assert!(!tried.unwrap());
    });
    assert_eq!(
        keyed.check(&"k", 3).unwrap().remaining(),
        0,
        "nothing taken"
    );

    let queue = LeakyBucket::queue(3, 1, Duration::from_secs(1)).unwrap();
    let queued = KeyedRateLimiter::with_clock(queue, clock.clone());
    assert_never(queued.acquire_n(&"q", 4), 4);
    assert_never(
        futures::executor::block_on(queued.to_async().acquire_n(&"q", 4)),
        4,
    );
    assert!(!queued
        .try_acquire_n_timeout(&"q", 4, Duration::MAX)
        .unwrap());

    let direct = RateLimiter::with_clock(window, clock.clone());
    assert_never(direct.acquire_n(4), 4);
    assert!(!direct.try_acquire_n_timeout(4, Duration::MAX).unwrap());
    let handle = direct.to_async();
    assert_never(futures::executor::block_on(handle.acquire_n(4)), 4);
    let tried = futures::executor::block_on(handle.try_acquire_n_timeout(4, Duration::MAX));
    assert!(!tried.unwrap());

    assert_eq!(clock.now(), 0, "nothing waited");
    assert!(clock.sleeps().iter().all(Duration::is_zero));
}

#[test]
fn a_limit_that_will_never_grant_again_answers_never_or_false_even_to_an_unbounded_timeout() {
    // "Error::Never if the limit will never grant a permit again (e.g. the
    // smallest positive rate after its one permit); it fails at once instead of
    // sleeping forever" (RateLimiter::acquire), and tries answer false: a timeout
    // of Duration::MAX "means no limit", but no wait ends this one.
    let clock = ManualClock::new();
    let frozen = || SmoothBursty::new(f64::MIN_POSITIVE).unwrap();
    let direct = RateLimiter::with_clock(frozen(), clock.clone());
    assert_eq!(direct.acquire().unwrap(), Duration::ZERO);
    assert_never(direct.acquire(), 1);
    assert_never(futures::executor::block_on(direct.to_async().acquire()), 1);
    let tried =
        futures::executor::block_on(direct.to_async().try_acquire_n_timeout(1, Duration::MAX));
    assert!(!tried.unwrap(), "async timed try");
    assert!(!direct.try_acquire_n_timeout(1, Duration::MAX).unwrap());
    assert!(!direct.try_acquire_timeout(Duration::MAX));
    assert_eq!(clock.now(), 0, "nothing waited");

    let keyed = KeyedRateLimiter::with_clock(frozen(), clock.clone());
    assert_eq!(keyed.acquire(&"k").unwrap(), Duration::ZERO);
    assert_never(keyed.acquire(&"k"), 1);
    assert_never(keyed.acquire_all(&["fresh", "k"], 1), 1);
    assert_never(
        futures::executor::block_on(keyed.to_async().acquire(&"k")),
        1,
    );
    assert!(!keyed.try_acquire_n_timeout(&"k", 1, Duration::MAX).unwrap());
    assert_eq!(clock.now(), 0, "nothing waited");
}

#[test]
fn an_earlier_reservation_cancelled_first_is_lost_where_an_abandoned_wait_is_not() {
    // Reservation: "cancelling an earlier reservation while a later one stands
    // gives back only what the later one leaves ... The async acquires ... defer
    // their cancels instead, so that waits abandoned together give everything
    // back". Eight turns 100 ms apart; the one at 300 ms is given up first, then
    // the four after it, latest first.
    let clock = GateClock::new();
    let keyed = KeyedRateLimiter::with_clock(unbursting(10.0), clock.clone());
    let mut held: Vec<_> = (0..8)
        .map(|_| Some(keyed.reserve(&"r", 1).unwrap()))
        .collect();
    for (i, r) in held.iter().enumerate() {
        assert_eq!(r.as_ref().unwrap().delay(), ms(100) * i as u32);
    }
    held[3].take().unwrap().cancel().unwrap();
    for i in (4..8).rev() {
        held[i].take().unwrap().cancel().unwrap();
    }
    assert_eq!(
        keyed.reserve(&"r", 1).unwrap().delay(),
        ms(400),
        "the reservation at 300 ms was cancelled behind later ones: it gives nothing back"
    );

    let handle = keyed.to_async();
    assert_eq!(keyed.acquire(&"w").unwrap(), Duration::ZERO);
    let mut waits: Vec<_> = (1..8)
        .map(|_| Some(Box::pin(handle.acquire(&"w"))))
        .collect();
    for wait in waits.iter_mut() {
        assert!(poll_once(wait.as_mut().unwrap().as_mut()).is_pending());
    }
    assert_eq!(clock.parked(), 7);
    drop(waits[2].take()); // the wait for 300 ms
    for i in (3..7).rev() {
        drop(waits[i].take());
    }
    assert_eq!(
        keyed.reserve(&"w", 1).unwrap().delay(),
        ms(300),
        "waits dropped together give everything back, whatever the order"
    );
    clock.advance(ms(200));
    for wait in waits.iter_mut().take(2) {
        let waited = poll_once(wait.as_mut().unwrap().as_mut());
        assert!(matches!(waited, Poll::Ready(Ok(_))), "{waited:?}");
    }
}

#[test]
fn an_async_timed_try_dropped_mid_wait_gives_its_permits_back() {
    // "Dropping an acquire before its wait ends gives its permits back, so a
    // timed-out or abandoned task does not consume capacity" (abandoned waits): a
    // timed try that was granted and is waiting is such an acquire.
    let clock = GateClock::new();
    let keyed = KeyedRateLimiter::with_clock(unbursting(10.0), clock.clone());
    let handle = keyed.to_async();
    keyed.acquire(&"k").unwrap();
    let mut tried = Box::pin(handle.try_acquire_n_timeout(&"k", 1, Duration::from_secs(1)));
    assert!(poll_once(tried.as_mut()).is_pending());
    assert_eq!(clock.parked(), 1, "granted and waiting for its turn");
    drop(tried);
    assert_eq!(keyed.reserve(&"k", 1).unwrap().delay(), ms(100));

    let clock = GateClock::new();
    let direct = RateLimiter::with_clock(unbursting(10.0), clock.clone());
    let handle = direct.to_async();
    direct.acquire().unwrap();
    let mut tried = Box::pin(handle.try_acquire_n_timeout(1, Duration::from_secs(1)));
    assert!(poll_once(tried.as_mut()).is_pending());
    assert_eq!(clock.parked(), 1, "granted and waiting for its turn");
    drop(tried);
    assert_eq!(direct.reserve(1).unwrap().delay(), ms(100));
}

#[test]
fn a_list_reservation_cancelled_before_its_one_time_to_act_gives_back_on_every_key() {
    // KeyedReservation: "the caller acts once the latest of the keys' turns has
    // come, and that one time to act is the reservation's on every key"; up to it
    // the permits come back. The IP's own turn (now) has passed when the cancel
    // comes, 300 ms in, but the reservation's (500 ms) has not.
    let clock = ManualClock::new();
    let keyed = KeyedRateLimiter::with_clock(unbursting(2.0), clock.clone());
    keyed.acquire(&"user").unwrap();
    let both = keyed.reserve_all(&["ip", "user"], 1).unwrap();
    assert_eq!(both.delay(), ms(500));
    clock.advance(ms(300));
    both.cancel().unwrap();
    assert!(keyed.try_acquire(&"ip"), "the IP's permit came back");
    assert_eq!(keyed.reserve(&"user", 1).unwrap().delay(), ms(200));
}
