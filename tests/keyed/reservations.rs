//! Keyed reservations (`KeyedRateLimiter::reserve`/`reserve_all`, the async
//! handle's `reserve`/`reserve_all`) on virtual time, in memory: on one key they
//! decide and give back exactly what the direct limiter's reservations do given the
//! same calls (random traces, every kind of algorithm, blocking and async); over
//! several keys they are all-or-nothing and give back on every key; and their edges
//! (zero cost, no keys, costs above capacity, windows, late cancels, a full store).
//! The Redis store is held to the same traces in `redis_store/keyed_reservations.rs`.

use crate::support::reservation_trace;
use crate::support::virtual_time;

use reservation_trace::{assert_same, counts, run_direct, run_keyed, trace, Mode, Op};
use sluicegate::algorithms::{
    Algorithm, AllOf, FixedWindow, LeakyBucket, SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::stores::MemoryStore;
use sluicegate::CellAlgorithm;
use sluicegate::{Error, KeyedRateLimiter, KeyedReservation, RateLimiter};
use std::time::Duration;
use virtual_time::StuckClock;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn bursty(rate: f64) -> SmoothBursty {
    SmoothBursty::new(rate).unwrap()
}

fn window(limit: u64) -> FixedWindow {
    FixedWindow::new(limit, Duration::from_secs(1)).unwrap()
}

fn queue(capacity: u64) -> LeakyBucket {
    LeakyBucket::queue(capacity, 1, ms(250)).unwrap()
}

fn warming_up() -> SmoothWarmingUp {
    SmoothWarmingUp::new(2.0, Duration::from_secs(2)).unwrap()
}

fn sliding(limit: u64) -> SlidingWindowCounter {
    SlidingWindowCounter::new(limit, Duration::from_secs(1)).unwrap()
}

fn keyed<A: Algorithm>(
    algorithm: A,
) -> KeyedRateLimiter<&'static str, A, MemoryStore<&'static str, A>, ManualClock> {
    KeyedRateLimiter::with_clock(algorithm, ManualClock::new())
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The trace with every cancel turned into a drop.
fn without_cancels(ops: &[Op]) -> Vec<Op> {
    ops.iter()
        .map(|op| match *op {
            Op::Cancel(at) => Op::Drop(at),
            other => other,
        })
        .collect()
}

/// Random traces on one key: the keyed limiter (blocking, and async) sees what a
/// direct limiter over the same algorithm sees, call for call; and the cancels
/// matter (the same trace with drops instead sees something else).
fn same_as_direct<A: CellAlgorithm>(algorithm: A, max_cost: u64) {
    let runtime = tokio_runtime();
    for seed in 0..40 {
        let ops = trace(seed, 120, max_cost);
        let expected = run_direct(algorithm.clone(), &ops);
        let blocking = run_keyed(&keyed(algorithm.clone()), &["k"], &ops, Mode::Blocking);
        assert_same(
            &format!("blocking, seed {seed}"),
            &ops,
            &expected,
            &blocking,
        );
        let asynchronous = run_keyed(
            &keyed(algorithm.clone()),
            &["k"],
            &ops,
            Mode::Async(&runtime),
        );
        assert_same(
            &format!("async, seed {seed}"),
            &ops,
            &expected,
            &asynchronous,
        );
    }
    let gave_back = (0..40).any(|seed| {
        let ops = trace(seed, 120, max_cost);
        run_direct(algorithm.clone(), &ops) != run_direct(algorithm.clone(), &without_cancels(&ops))
    });
    assert!(gave_back, "no trace had a cancel that gave anything back");
    let (reserves, cancels) = counts(&trace(0, 120, max_cost));
    assert!(reserves > 20 && cancels > 10, "{reserves} {cancels}");
}

#[test]
fn bursty_reservations_are_the_direct_limiters_on_one_key() {
    same_as_direct(bursty(4.0), 6);
}

#[test]
fn warming_up_reservations_are_the_direct_limiters_on_one_key() {
    same_as_direct(warming_up(), 4);
}

#[test]
fn leaky_queue_reservations_are_the_direct_limiters_on_one_key() {
    same_as_direct(queue(4), 5); // 5: above capacity, never
}

#[test]
fn window_reservations_are_the_direct_limiters_on_one_key() {
    same_as_direct(window(3), 4);
    same_as_direct(sliding(5), 6);
}

#[test]
fn set_reservations_are_the_direct_limiters_on_one_key() {
    same_as_direct(AllOf::new((bursty(5.0), queue(6))), 4);
    same_as_direct(AllOf::new((bursty(3.0), window(4))), 5);
}

/// `reserve_all` on a fresh key and on one already charged `precharge`, against a
/// direct limiter per key given the same calls: ok, its decision the combined one
/// (the longest wait, the fewest remaining), both keys charged as their direct
/// limiters; cancelled at once, given back on both as theirs are; a refused one
/// (`too_much`, where the algorithm refuses any cost) changes neither key; and one
/// cancelled after its time to act gives nothing back on either. Answers the
/// first reservation's delays on the fresh key and on the busy one.
fn reserve_all_is_per_key_all_or_nothing<A: CellAlgorithm>(
    algorithm: A,
    precharge: u64,
    cost: u64,
    too_much: Option<u64>,
) -> [Duration; 2] {
    // All three start at time 0, as a new key does, then idle 5 s.
    let limiter = keyed(algorithm.clone());
    let clock = limiter.clock().clone();
    let direct = || RateLimiter::with_clock(algorithm.clone(), clock.clone());
    let (fresh, busy) = (direct(), direct());
    clock.advance(Duration::from_secs(5));
    if precharge > 0 {
        assert!(limiter.check(&"busy", precharge).unwrap().is_allowed());
        assert!(busy.check(precharge).unwrap().is_allowed());
    }
    let peeks = |limiter: &KeyedRateLimiter<_, A, _, _>| {
        [
            limiter.peek(&"fresh", 1).unwrap(),
            limiter.peek(&"busy", 1).unwrap(),
        ]
    };
    let direct_peeks = || [fresh.peek(1).unwrap(), busy.peek(1).unwrap()];
    assert_eq!(peeks(&limiter), direct_peeks(), "the same starting states");

    let r = limiter.reserve_all(&["fresh", "busy"], cost).unwrap();
    let (f, b) = (fresh.reserve(cost).unwrap(), busy.reserve(cost).unwrap());
    assert!(r.is_ok() && f.is_ok() && b.is_ok());
    let delays = [f.delay(), b.delay()];
    let wait = delays[0].max(delays[1]);
    assert_eq!(r.delay(), wait);
    assert_eq!(r.acts_at(), clock.now() + wait.as_nanos() as u64);
    let tightest = f.decision().remaining().min(b.decision().remaining());
    assert_eq!(r.decision().remaining(), tightest);
    let charged = peeks(&limiter);
    assert_eq!(charged, direct_peeks(), "both keys charged");
    r.cancel().unwrap();
    b.cancel();
    f.cancel();
    let back = peeks(&limiter);
    assert_eq!(back, direct_peeks(), "given back on both keys");
    assert!(
        back[0] != charged[0] && back[1] != charged[1],
        "{back:?} {charged:?}"
    );

    if let Some(too_much) = too_much {
        let before = peeks(&limiter);
        let refused = limiter.reserve_all(&["fresh", "busy"], too_much).unwrap();
        assert!(!refused.is_ok());
        assert_eq!(refused.delay(), refused.decision().retry_after());
        refused.cancel().unwrap();
        assert_eq!(
            peeks(&limiter),
            before,
            "a refused reservation takes nothing"
        );
    }

    let late = limiter.reserve_all(&["fresh", "busy"], cost).unwrap();
    let (f, b) = (fresh.reserve(cost).unwrap(), busy.reserve(cost).unwrap());
    clock.advance(late.delay() + Duration::from_nanos(1));
    late.cancel().unwrap();
    drop((f, b)); // the permits stay taken
    assert_eq!(
        peeks(&limiter),
        direct_peeks(),
        "nothing back after the time to act"
    );
    delays
}

#[test]
fn bursty_reserve_all_is_all_or_nothing_and_cancels_on_every_key() {
    // 2 a second, 2 stored: busy spends 3, so it waits 0.5 s where fresh does not.
    let never = SmoothBursty::new(f64::MIN_POSITIVE).unwrap();
    let delays = reserve_all_is_per_key_all_or_nothing(bursty(2.0), 3, 1, None);
    assert_eq!(delays, [Duration::ZERO, ms(500)]);
    // A limit that grants one request ever: the second is never.
    let limiter = keyed(never);
    assert!(limiter.reserve(&"a", 1).unwrap().is_ok());
    let refused = limiter.reserve_all(&["b", "a"], 1).unwrap();
    assert!(refused.decision().is_never());
    assert!(
        limiter.reserve(&"b", 1).unwrap().is_ok(),
        "b was not charged"
    );
}

#[test]
fn warming_up_reserve_all_is_all_or_nothing_and_cancels_on_every_key() {
    let [fresh, busy] = reserve_all_is_per_key_all_or_nothing(warming_up(), 2, 1, None);
    assert!(fresh < busy, "{fresh:?} {busy:?}");
}

#[test]
fn leaky_queue_reserve_all_is_all_or_nothing_and_cancels_on_every_key() {
    let [fresh, busy] = reserve_all_is_per_key_all_or_nothing(queue(4), 2, 2, Some(3));
    assert!(fresh < busy, "{fresh:?} {busy:?}");
}

#[test]
fn window_reserve_all_is_all_or_nothing_and_cancels_on_every_key() {
    reserve_all_is_per_key_all_or_nothing(window(4), 2, 1, Some(3));
    reserve_all_is_per_key_all_or_nothing(sliding(4), 2, 1, Some(3));
}

#[test]
fn set_reserve_all_is_all_or_nothing_and_cancels_on_every_key() {
    // Both keys' turns are now (stored permits): the sets recognize the cancel.
    reserve_all_is_per_key_all_or_nothing(AllOf::new((bursty(4.0), window(6))), 2, 1, Some(5));
    reserve_all_is_per_key_all_or_nothing(AllOf::new((bursty(4.0), queue(8))), 0, 2, Some(9));
}

#[test]
fn go_cancel_rules_hold_per_key() {
    // Go's cancel tests on key "a" (10 a second, 2 taken), with "b" beside it.
    let limiter = keyed(bursty(10.0));
    limiter.check(&"a", 2).unwrap();
    let b = limiter.reserve(&"b", 5).unwrap();
    // The last reservation on a key comes back whole (TestCancelLast).
    let r = limiter.reserve(&"a", 2).unwrap();
    assert_eq!(r.delay(), ms(200));
    r.cancel().unwrap();
    assert_eq!(limiter.reserve(&"a", 2).unwrap().delay(), ms(200));
    // Behind a later reservation it gives back only what that one leaves
    // (TestCancel1Token): a 2 and then a 1, the 2 cancelled at its time to act.
    let clock = limiter.clock().clone();
    let two = limiter.reserve(&"a", 2).unwrap(); // acts at 400 ms
    let one = limiter.reserve(&"a", 1).unwrap(); // acts at 600 ms
    assert_eq!((two.acts_at(), one.acts_at()), (400_000_000, 600_000_000));
    clock.advance(ms(400));
    two.cancel().unwrap();
    assert_eq!(limiter.reserve(&"a", 1).unwrap().acts_at(), 600_000_000);
    // The reservation on "b" neither held these back nor was touched by them; its
    // time to act (0) has passed, so its cancel gives nothing back.
    assert_eq!((b.is_ok(), b.acts_at()), (true, 0));
    b.cancel().unwrap();
    assert_eq!(limiter.peek(&"b", 1).unwrap().retry_after(), ms(100));
}

#[test]
fn the_edges() {
    let limiter = keyed(queue(3));
    assert!(matches!(limiter.reserve(&"k", 0), Err(Error::ZeroCost)));
    assert!(matches!(
        limiter.reserve_all(&["k"], 0),
        Err(Error::ZeroCost)
    ));
    assert!(matches!(
        limiter.reserve_all(&[], 1),
        Err(Error::InvalidCount { .. })
    ));
    // Above capacity: not ok, never, nothing to wait for or give back.
    let never = limiter.reserve(&"k", 4).unwrap();
    assert!(!never.is_ok());
    assert!(never.decision().is_never());
    assert_eq!(never.delay(), Duration::from_nanos(u64::MAX));
    assert_eq!(never.wait(), Duration::ZERO);
    assert!(
        limiter.clock().take_sleeps().is_empty(),
        "no sleep for a refusal"
    );
    // A window cannot reserve the future: not ok, with its retry_after.
    let windowed = keyed(window(1));
    windowed.clock().advance(ms(300));
    assert!(windowed.reserve(&"k", 1).unwrap().is_ok());
    let refused = windowed.reserve(&"k", 1).unwrap();
    assert!(!refused.is_ok());
    assert_eq!(refused.decision().retry_after(), ms(700));
    assert_eq!(refused.delay(), ms(700));
    refused.cancel().unwrap(); // nothing to give back: still refused
    assert!(!windowed.try_acquire(&"k"));
}

#[test]
fn a_window_grant_comes_back_only_at_its_instant() {
    let limiter = keyed(window(2));
    let now = limiter.reserve(&"k", 2).unwrap();
    assert_eq!(now.delay(), Duration::ZERO);
    now.cancel().unwrap(); // at the very instant: given back
    let late = limiter.reserve(&"k", 2).unwrap();
    limiter.clock().advance(Duration::from_nanos(1));
    late.cancel().unwrap(); // a nanosecond late: nothing
    assert!(!limiter.try_acquire(&"k"));
}

#[test]
fn dropping_keeps_and_waiting_sleeps_on_the_limiters_clock() {
    let limiter = keyed(bursty(4.0));
    drop(limiter.reserve(&"k", 1).unwrap());
    let r = limiter.reserve(&"k", 1).unwrap();
    assert_eq!(r.delay(), ms(250), "the dropped one kept its permit");
    limiter.clock().advance(ms(100));
    assert_eq!(r.wait(), ms(150));
    assert_eq!(limiter.clock().take_sleeps_secs(), vec![0.15]);
    // The async wait, on the same clock.
    let r = limiter.reserve(&"k", 1).unwrap();
    assert_eq!(futures::executor::block_on(r.wait_async()), ms(250));
    assert_eq!(limiter.clock().now(), 500_000_000);
    let refused = keyed(window(1));
    refused.try_acquire(&"k");
    let r = refused.reserve(&"k", 1).unwrap();
    assert_eq!(futures::executor::block_on(r.wait_async()), Duration::ZERO);
    assert_eq!(refused.clock().now(), 0);
}

#[test]
fn a_full_store_refuses_new_keys_and_still_cancels() {
    let store = MemoryStore::new().with_max_keys(1).unwrap();
    let limiter = KeyedRateLimiter::with_store(bursty(1.0), store, ManualClock::new());
    limiter.acquire(&"a").unwrap();
    let r = limiter.reserve(&"a", 1).unwrap();
    assert!(matches!(
        limiter.reserve(&"b", 1),
        Err(Error::StoreFull { .. })
    ));
    assert!(matches!(
        limiter.reserve_all(&["a", "b"], 1),
        Err(Error::StoreFull { .. })
    ));
    r.cancel().unwrap();
    assert_eq!(
        limiter.reserve(&"a", 1).unwrap().delay(),
        Duration::from_secs(1)
    );
}

#[test]
fn an_async_reserve_owns_what_it_needs_and_sleeps_on_nothing() {
    fn send_static<T: Send + 'static>(value: T) -> T {
        value
    }
    fn sync<T: Sync>(value: &T) -> &T {
        value
    }
    // Virtual time whose sleeps never end: reserving must not sleep.
    let limiter = KeyedRateLimiter::with_clock(bursty(1.0), StuckClock::default());
    let handle = limiter.to_async();
    let (first, second) = futures::executor::block_on(async {
        let key = String::from("k");
        let first = send_static(handle.reserve(&key, 1)).await.unwrap();
        let second = send_static(handle.reserve_all(&[key], 1)).await.unwrap();
        (first, second)
    });
    let second: KeyedReservation<String, SmoothBursty, _, StuckClock> = send_static(second);
    assert_eq!(sync(&second).delay(), Duration::from_secs(1));
    assert!(format!("{second:?}").starts_with(r#"KeyedReservation { keys: ["k"]"#));
    futures::executor::block_on(send_static(second.cancel_async())).unwrap();
    futures::executor::block_on(first.cancel_async()).unwrap();
    assert!(
        limiter.try_acquire(&"k".to_owned()),
        "both given back, latest first"
    );
    // A reservation outlives the limiter handle it came from.
    let r = limiter.reserve(&"k".to_owned(), 1).unwrap();
    drop((limiter, handle));
    assert_eq!(r.delay(), Duration::from_secs(1));
    assert!(r.is_ok());
}

#[test]
fn a_sets_reserve_all_gives_back_a_key_whose_own_turn_came_first() {
    // "early" has a stored burst and would act at once; "late" spent its burst and
    // must wait: the reservation acts at the later of the two turns.
    let set = || AllOf::new((bursty(2.0), window(10)));
    let limiter = keyed(set());
    let untouched = keyed(set());
    for l in [&limiter, &untouched] {
        l.clock().advance(Duration::from_secs(5));
        assert!(l.check(&"late", 3).unwrap().is_allowed());
    }
    let r = limiter.reserve_all(&["early", "late"], 1).unwrap();
    assert!(r.is_ok() && r.delay() > Duration::ZERO);
    r.cancel().unwrap();
    for key in ["early", "late"] {
        assert_eq!(
            limiter.peek(&key, 1).unwrap(),
            untouched.peek(&key, 1).unwrap(),
            "{key} given back"
        );
    }
}
