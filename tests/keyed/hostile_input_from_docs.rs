//! The keyed limiter and the in-memory store fed hostile input as their docs
//! describe the answer: no keys (`Error::InvalidCount`), cost 0
//! (`Error::ZeroCost`), a key listed more often than its limit can ever hold
//! (never), costs above capacity, shard counts and caps out of range
//! (`ConfigError::InvalidCount`), a full capped store (`Error::StoreFull`,
//! nothing consumed), and the clock's last reading. Each answer is the typed one
//! the docs name, never a panic, and a refused call changes no key.

use sluicegate::algorithms::{FixedWindow, SlidingLog, SmoothBursty};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::stores::MemoryStore;
use sluicegate::{ConfigError, Error, KeyedRateLimiter};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);

fn window(limit: u64) -> FixedWindow {
    FixedWindow::new(limit, MINUTE).unwrap()
}

/// Runs `f`, failing the test with `input` named if it panics.
fn no_panic<T>(input: &str, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| panic!("{input}: panicked"))
}

fn is_no_keys(input: &str, err: Error) {
    match &err {
        Error::InvalidCount { what, value, .. } => {
            assert_eq!(*value, 0, "{input}: {err}");
            assert!(what.contains("key"), "{input}: names {what:?}: {err}");
        }
        other => panic!("{input}: expected InvalidCount for no keys, got {other:?}"),
    }
}

#[test]
fn no_keys_is_an_invalid_count_on_every_all_call() {
    let limiter = KeyedRateLimiter::with_clock(window(3), ManualClock::new());
    let none: [&str; 0] = [];
    is_no_keys("check_all", limiter.check_all(&none, 1).unwrap_err());
    is_no_keys("peek_all", limiter.peek_all(&none, 1).unwrap_err());
    is_no_keys("acquire_all", limiter.acquire_all(&none, 1).unwrap_err());
    is_no_keys("reserve_all", limiter.reserve_all(&none, 1).err().unwrap());
    let handle = limiter.to_async();
    futures::executor::block_on(async {
        is_no_keys(
            "async acquire_all",
            handle.acquire_all(&none, 1).await.unwrap_err(),
        );
        is_no_keys(
            "async reserve_all",
            handle.reserve_all(&none, 1).await.err().unwrap(),
        );
    });
    // No keys and no cost: either is what was wrong, and nothing is touched.
    let both = limiter.check_all(&none, 0).unwrap_err();
    assert!(
        matches!(both, Error::ZeroCost | Error::InvalidCount { .. }),
        "{both:?}"
    );
    assert_eq!(limiter.live_keys(), 0);
}

#[test]
fn a_cost_of_zero_is_zero_cost_on_every_keyed_call() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(window(3), clock.clone());
    let errors: Vec<(&str, Error)> = vec![
        ("check", limiter.check(&"k", 0).unwrap_err()),
        ("peek", limiter.peek(&"k", 0).unwrap_err()),
        ("acquire_n", limiter.acquire_n(&"k", 0).unwrap_err()),
        (
            "try_acquire_n_timeout",
            limiter
                .try_acquire_n_timeout(&"k", 0, Duration::MAX)
                .unwrap_err(),
        ),
        ("reserve", limiter.reserve(&"k", 0).err().unwrap()),
        ("check_all", limiter.check_all(&["k", "j"], 0).unwrap_err()),
        ("acquire_all", limiter.acquire_all(&["k"], 0).unwrap_err()),
        (
            "reserve_all",
            limiter.reserve_all(&["k", "j"], 0).err().unwrap(),
        ),
        (
            "check_each",
            limiter.check_each(&"k", 0, &mut |_| {}).unwrap_err(),
        ),
    ];
    for (call, err) in errors {
        assert_eq!(err, Error::ZeroCost, "{call}(0)");
    }
    let handle = limiter.to_async();
    futures::executor::block_on(async {
        assert_eq!(
            handle.acquire_n(&"k", 0).await.unwrap_err(),
            Error::ZeroCost
        );
        let timed = handle.try_acquire_n_timeout(&"k", 0, Duration::ZERO).await;
        assert_eq!(timed.unwrap_err(), Error::ZeroCost);
        assert_eq!(handle.check(&"k", 0).await.unwrap_err(), Error::ZeroCost);
    });
    assert_eq!(limiter.live_keys(), 0, "a cost of 0 made a key");
    assert!(clock.sleeps().is_empty(), "a cost of 0 slept");
}

#[test]
fn costs_a_key_can_never_hold_are_never_and_acquires_fail_at_once() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(window(3), clock.clone());
    for cost in [4, u64::MAX] {
        let d = limiter.check(&"k", cost).unwrap();
        assert!(d.is_never(), "cost {cost}: {d:?}");
        assert!(limiter.peek(&"k", cost).unwrap().is_never());
        let timed = limiter.try_acquire_n_timeout(&"k", cost, Duration::MAX);
        assert_eq!(timed, Ok(false), "cost {cost}: timed try");
        assert_eq!(limiter.acquire_n(&"k", cost), Err(Error::Never { cost }));
        let all = limiter.check_all(&["k", "j"], cost).unwrap();
        assert!(all.is_never(), "cost {cost} over two keys: {all:?}");
        let handle = limiter.to_async();
        let got = futures::executor::block_on(handle.acquire_n(&"k", cost));
        assert_eq!(got, Err(Error::Never { cost }), "async, cost {cost}");
    }
    assert!(
        clock.sleeps().iter().all(|s| s.is_zero()),
        "{:?}",
        clock.sleeps()
    );
    assert!(
        limiter.check(&"k", 3).unwrap().is_allowed(),
        "a never call took permits"
    );
}

#[test]
fn a_key_listed_more_often_than_its_limit_holds_is_never_not_denied() {
    // README: "a key listed twice is charged twice, and a call that charges one
    // key more than its limit ever grants at once is never, not denied".
    let limiter = KeyedRateLimiter::with_clock(window(2), ManualClock::new());
    let thrice = ["a", "a", "a"];
    let d = limiter.check_all(&thrice, 1).unwrap();
    assert!(d.is_never(), "three charges on a limit of 2: {d:?}");
    assert!(limiter.peek_all(&thrice, 1).unwrap().is_never());
    let got = limiter.acquire_all(&thrice, 1);
    assert!(matches!(got, Err(Error::Never { .. })), "{got:?}");
    let handle = limiter.to_async();
    let got = futures::executor::block_on(handle.acquire_all(&thrice, 1));
    assert!(matches!(got, Err(Error::Never { .. })), "async: {got:?}");
    // Twice fits exactly, once.
    assert!(limiter.check_all(&["a", "a"], 1).unwrap().is_allowed());
    let after = limiter.check_all(&["a", "a"], 1).unwrap();
    assert!(!after.is_allowed() && !after.is_never(), "{after:?}");
}

#[test]
fn shard_counts_and_caps_out_of_range_are_typed_errors() {
    type Mem = MemoryStore<String, FixedWindow>;
    for shards in [0, 3, 6, 65_535, 65_537, 1 << 17, usize::MAX] {
        let input = format!("with_shards({shards})");
        let got = no_panic(&input, || Mem::new().with_shards(shards));
        match got {
            Err(ConfigError::InvalidCount { what, value, .. }) => {
                assert_eq!(value, shards as u64, "{input}");
                assert!(what.contains("shard"), "{input}: names {what:?}");
            }
            other => panic!("{input}: {:?}", other.map(|s| s.shards())),
        }
    }
    for shards in [1, 2, 1024, 65_536] {
        let store = Mem::new().with_shards(shards).unwrap();
        assert_eq!(store.shards(), shards);
    }
    match no_panic("with_max_keys(0)", || Mem::new().with_max_keys(0)) {
        Err(ConfigError::InvalidCount { what, value: 0, .. }) => {
            assert!(what.contains("key"), "names {what:?}");
        }
        other => panic!("with_max_keys(0): {:?}", other.is_ok()),
    }
    for max in [1, usize::MAX] {
        assert!(
            Mem::new().with_max_keys(max).is_ok(),
            "with_max_keys({max})"
        );
    }
}

#[test]
fn a_full_capped_store_refuses_new_keys_and_consumes_nothing() {
    // with_max_keys: "the call fails with Error::StoreFull and consumes nothing.
    // Keys already held keep working"; peek "asks the limit, not the store's
    // capacity: on a capped store that is full, a new key peeks allowed".
    // One shard: a full store's new key forgets the replenished keys of its shard.
    let store = MemoryStore::new()
        .with_shards(1)
        .unwrap()
        .with_max_keys(1)
        .unwrap();
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_store(window(3), store, clock.clone());
    assert!(limiter.check(&"alice", 1).unwrap().is_allowed());
    let full = limiter.check(&"bob", 1).unwrap_err();
    assert_eq!(full, Error::StoreFull { max_keys: 1 });
    assert!(full.to_string().contains("maximum of 1 keys"), "{full}");
    assert!(!limiter.try_acquire(&"bob"), "a full store answers false");
    assert!(limiter.peek(&"bob", 1).unwrap().is_allowed());
    assert_eq!(
        limiter.acquire(&"bob"),
        Err(Error::StoreFull { max_keys: 1 })
    );
    assert!(limiter.reserve(&"bob", 1).is_err());
    // A call over a held key and a new one fails whole: alice is not charged.
    let both = limiter.check_all(&["alice", "bob"], 1).unwrap_err();
    assert_eq!(both, Error::StoreFull { max_keys: 1 });
    assert_eq!(
        limiter.peek(&"alice", 1).unwrap().remaining(),
        1,
        "alice was charged"
    );
    assert!(
        clock.sleeps().iter().all(|s| s.is_zero()),
        "{:?}",
        clock.sleeps()
    );
    // Once alice's window has passed her key is replenished and may be forgotten.
    clock.advance(MINUTE);
    assert!(
        limiter.check(&"bob", 1).unwrap().is_allowed(),
        "alice was never forgotten"
    );
}

#[test]
fn at_the_clocks_last_reading_a_key_grants_its_limit_and_then_never() {
    for (name, limit) in [("fixed window", 3u64), ("sliding log", 2)] {
        let clock = ManualClock::new();
        clock.advance(Duration::MAX);
        assert_eq!(clock.now(), u64::MAX);
        let input = format!("{name} at u64::MAX ns");
        let granted = if name == "fixed window" {
            let limiter = KeyedRateLimiter::with_clock(window(limit), clock.clone());
            run_out(&input, limiter)
        } else {
            let log = SlidingLog::new(limit, MINUTE).unwrap();
            let limiter = KeyedRateLimiter::with_clock(log, clock.clone());
            run_out(&input, limiter)
        };
        assert_eq!(granted, limit, "{input}");
    }
    // A bursty key first seen there holds its full burst (keys start at the clock's
    // zero), and no more.
    let clock = ManualClock::new();
    clock.advance(Duration::MAX);
    let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(2.0).unwrap(), clock);
    let granted = (0..10).filter(|_| limiter.try_acquire(&"k")).count();
    assert!(
        (2..=3).contains(&granted),
        "bursty at u64::MAX: {granted} granted"
    );
}

/// Takes one permit at a time until refused; then an acquire must fail with
/// `Error::Never` on a thread that answers within 10 s. Returns the grants.
fn run_out<A>(
    input: &str,
    limiter: KeyedRateLimiter<&'static str, A, MemoryStore<&'static str, A>, ManualClock>,
) -> u64
where
    A: sluicegate::algorithms::Algorithm + Send + Sync + 'static,
    A::State: Send,
{
    let mut granted = 0;
    while limiter.try_acquire(&"k") {
        granted += 1;
        assert!(granted < 1000, "{input}: grants without end");
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let l = limiter.clone();
    std::thread::spawn(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(|| l.acquire(&"k"))));
    });
    let got = rx
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{input}: acquire never answered"))
        .unwrap_or_else(|_| panic!("{input}: acquire panicked"));
    assert_eq!(
        got,
        Err(Error::Never { cost: 1 }),
        "{input}: acquire after running out"
    );
    granted
}
