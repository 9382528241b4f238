//! A `String`-keyed limiter looked up by `&str`, as a `HashMap<String, _>` is:
//! every single-key call, blocking and async, in memory and through the wrapper
//! stores, names one state whichever form of the key it is given.

use futures::executor::block_on;
use sluicegate::algorithms::{AllOf, FixedWindow, SmoothBursty};
use sluicegate::clock::ManualClock;
use sluicegate::stores::deny_cache::DenyCache;
use sluicegate::stores::failover::{FailoverStore, FailurePolicy, Unreachable};
use sluicegate::stores::lease::LeasedStore;
use sluicegate::stores::{MemoryStore, Operation, Store};
use sluicegate::{Decision, KeyedRateLimiter, Source};
use std::time::Duration;

fn window(limit: u64) -> FixedWindow {
    FixedWindow::new(limit, Duration::from_secs(60)).unwrap()
}

fn by_name(
    limit: u64,
) -> KeyedRateLimiter<String, FixedWindow, MemoryStore<String, FixedWindow>, ManualClock> {
    KeyedRateLimiter::with_clock(window(limit), ManualClock::new())
}

#[test]
fn a_string_keyed_limiter_takes_str_and_string_for_one_state() {
    let limiter = by_name(4);
    let alice = String::from("alice");
    assert!(limiter.try_acquire("alice"));
    assert!(limiter.try_acquire(&alice));
    assert_eq!(limiter.check("alice", 1).unwrap().remaining(), 1);
    assert_eq!(limiter.peek(&alice, 1).unwrap().remaining(), 0);
    assert!(limiter.try_acquire("alice"));
    assert!(!limiter.try_acquire(&alice));
    assert!(!limiter.check("alice", 1).unwrap().is_allowed());
    // Another name is another state, by either form.
    assert!(limiter.try_acquire("bob"));
    assert_eq!(
        limiter.peek(&String::from("bob"), 1).unwrap().remaining(),
        2
    );
    assert_eq!(limiter.live_keys(), 2);
}

#[test]
fn every_single_key_call_borrows_the_key() {
    let limiter = by_name(3);
    assert_eq!(limiter.acquire("k").unwrap(), Duration::ZERO);
    assert_eq!(limiter.acquire_n("k", 1).unwrap(), Duration::ZERO);
    assert!(limiter
        .try_acquire_n_timeout("k", 1, Duration::ZERO)
        .unwrap());
    // Spent: the next window is a minute away.
    assert!(!limiter
        .try_acquire_n_timeout("k", 1, Duration::from_secs(59))
        .unwrap());
    assert_eq!(limiter.acquire("k").unwrap(), Duration::from_secs(60));
    let mut each = Vec::new();
    let d = limiter
        .check_each("k", 1, &mut |d| each.push(d.remaining()))
        .unwrap();
    assert!(d.is_allowed());
    assert_eq!(each, [1]);
    // A reservation keeps an owned key, so that its cancel names the same state.
    let r = limiter.reserve("k", 1).unwrap();
    assert!(r.is_ok());
    assert_eq!(limiter.peek("k", 1).unwrap().remaining(), 0);
    assert!(!limiter.peek("k", 1).unwrap().is_allowed());
    r.cancel().unwrap();
    assert!(limiter.peek("k", 1).unwrap().is_allowed());
}

#[test]
fn async_calls_take_the_key_as_the_blocking_ones_do() {
    let limiter = by_name(2).to_async();
    block_on(async {
        assert!(limiter.check("k", 1).await.unwrap().is_allowed());
        assert_eq!(limiter.acquire("k").await.unwrap(), Duration::ZERO);
        assert!(!limiter.try_acquire("k"));
        assert!(!limiter
            .try_acquire_n_timeout("k", 1, Duration::from_secs(1))
            .await
            .unwrap());
        let r = limiter.reserve("k", 1).await.unwrap();
        assert_eq!(
            r.delay(),
            Duration::from_secs(60),
            "a window answers when it turns"
        );
        assert!(limiter.try_acquire("other"));
    });
    assert!(limiter
        .blocking()
        .peek(&String::from("other"), 1)
        .unwrap()
        .is_allowed());
}

#[test]
fn sets_run_on_borrowed_keys_too() {
    let set = AllOf::new((window(2), SmoothBursty::new(1.0).unwrap()));
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(1));
    let limiter: KeyedRateLimiter<String, _, _, _> = KeyedRateLimiter::with_clock(set, clock);
    let mut left = Vec::new();
    assert!(limiter
        .check_each("k", 1, &mut |d| left.push(d.remaining()))
        .unwrap()
        .is_allowed());
    assert_eq!(left, [1, 0]);
    assert!(limiter.try_acquire("k")); // the bursty member pays later
    assert!(!limiter.try_acquire(&String::from("k"))); // the window is spent
}

#[test]
fn the_deny_cache_answers_a_borrowed_key_from_its_refusal() {
    let w = window(1);
    let cached: DenyCache<MemoryStore<String, FixedWindow>, String, FixedWindow> =
        DenyCache::new(MemoryStore::new(), &w).unwrap();
    let limiter = KeyedRateLimiter::with_store(w, cached, ManualClock::new());
    assert!(limiter.try_acquire("k"));
    assert!(!limiter.try_acquire("k")); // refused by the store, and kept
    let hits = limiter.store().hits();
    let refusal = limiter.check(&String::from("k"), 1).unwrap();
    assert!(!refusal.is_allowed());
    assert_eq!(
        limiter.store().hits(),
        hits + 1,
        "the owned form finds the borrowed form's refusal"
    );
    assert!(limiter.try_acquire("other"));
}

#[test]
fn a_lease_is_spent_by_either_form_of_the_key() {
    let w = window(10);
    let leased: LeasedStore<MemoryStore<String, FixedWindow>, String, FixedWindow> =
        LeasedStore::new(MemoryStore::new(), 4, Duration::from_secs(60)).unwrap();
    let limiter = KeyedRateLimiter::with_store(w, leased, ManualClock::new());
    assert!(limiter.try_acquire("k")); // takes a lease of 4 from the inner store
    assert!(limiter.try_acquire(&String::from("k")));
    assert!(limiter.try_acquire("k"));
    assert!(limiter.try_acquire("k"));
    assert_eq!(limiter.store().leased("k", 0), 0);
    // One lease of 4 taken from the inner store, not one per form of the key.
    let inner: Decision = Store::<str, FixedWindow>::apply_key(
        limiter.store().inner(),
        &w,
        "k",
        0,
        Operation::Peek { cost: 1 },
    )
    .unwrap();
    assert_eq!(inner.remaining(), 5);
}

#[test]
fn a_local_fallback_decides_and_gives_back_on_a_borrowed_key() {
    let store: FailoverStore<Unreachable, String, FixedWindow> =
        FailoverStore::new(Unreachable, FailurePolicy::Local(window(2)));
    let w = window(100);
    let take = Operation::Reserve {
        cost: 1,
        max_wait: 0,
    };
    let first: Decision = store.apply_key(&w, "k", 0, take).unwrap();
    assert_eq!(first.source(), Source::Local);
    assert_eq!(first.remaining(), 1);
    let (second, receipt): (Decision, _) = store.apply_key(&w, "k", 0, take).unwrap();
    assert_eq!(second.remaining(), 0);
    // The cancel of a local grant goes back to the local limit, by the borrowed key.
    let cancel = Operation::Cancel {
        receipts: std::slice::from_ref(&receipt),
        acts_at: 0,
    };
    let _: Decision = store.apply_key(&w, "k", 0, cancel).unwrap();
    let again: Decision = store.apply_key(&w, &String::from("k"), 0, take).unwrap();
    assert!(again.is_allowed(), "the second grant was given back");
    assert_eq!(again.remaining(), 0, "both forms name one local state");
}

#[test]
fn a_keyed_reservation_on_a_local_fallback_of_a_set_gives_its_permits_back() {
    type Set = AllOf<(FixedWindow, FixedWindow)>;
    let share = AllOf::new((window(2), window(5)));
    let store: FailoverStore<Unreachable, String, Set> =
        FailoverStore::new(Unreachable, FailurePolicy::Local(share));
    let limiter = KeyedRateLimiter::with_store(
        AllOf::new((window(20), window(50))),
        store,
        ManualClock::new(),
    );
    let r = limiter.reserve("k", 2).unwrap();
    assert!(r.is_ok());
    assert_eq!(r.decision().source(), Source::Local);
    assert!(
        !limiter.peek("k", 1).unwrap().is_allowed(),
        "the local share is spent"
    );
    r.cancel().unwrap();
    let d = limiter.peek("k", 2).unwrap();
    assert!(
        d.is_allowed(),
        "the cancel gave the set's grant back to the local limit"
    );
    assert_eq!(d.source(), Source::Local);
}
