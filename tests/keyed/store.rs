//! The in-memory store: idle keys are forgotten by ordinary calls, the cap's
//! policy, and no lost updates under concurrency.

use sluicegate::algorithms::{FixedWindow, SmoothBursty};
use sluicegate::clock::ManualClock;
use sluicegate::stores::MemoryStore;
use sluicegate::{Error, KeyedRateLimiter};
use std::time::Duration;

fn window(limit: u64) -> FixedWindow {
    FixedWindow::new(limit, Duration::from_secs(1)).unwrap()
}

fn one_shard<K: std::hash::Hash + Eq, A: sluicegate::algorithms::Algorithm>() -> MemoryStore<K, A> {
    MemoryStore::new().with_shards(1).unwrap()
}

#[test]
fn idle_keys_vanish_after_their_horizon_and_come_back_fresh() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_store(window(3), one_shard(), clock.clone());
    for key in 0..100u32 {
        limiter.check(&key, 2).unwrap();
    }
    assert_eq!(limiter.store().live_keys(), 100);
    // Within the window nothing is forgotten, however many calls sweep.
    for _ in 0..1000 {
        limiter.check(&0u32, 1).unwrap();
    }
    assert_eq!(limiter.store().live_keys(), 100);
    // Past the horizon, ordinary calls on other keys forget the idle ones.
    clock.advance(Duration::from_secs(1));
    for key in 1000..1300u32 {
        limiter.check(&key, 1).unwrap();
    }
    assert_eq!(limiter.store().live_keys(), 300, "idle keys not forgotten");
    // ...and a forgotten key comes back fresh.
    let back = limiter.check(&5u32, 1).unwrap();
    assert!(back.is_allowed());
    assert_eq!(back.remaining(), 2);
}

#[test]
fn a_replenished_bursty_key_is_forgotten_and_returns_full() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(5));
    let algorithm = SmoothBursty::new(10.0).unwrap();
    let limiter = KeyedRateLimiter::with_store(algorithm, one_shard(), clock.clone());
    const CLIENT: u64 = u64::MAX;
    for _ in 0..11 {
        assert!(limiter.check(&CLIENT, 1).unwrap().is_allowed());
    }
    assert!(!limiter.check(&CLIENT, 1).unwrap().is_allowed());
    // One second of burst plus the 0.1 s of pay-later debt: replenished.
    clock.advance(Duration::from_millis(1200));
    // Calls on other keys sweep the shard; "client" is forgotten.
    for key in 0..64u64 {
        limiter.check(&key, 1).unwrap();
    }
    assert_eq!(limiter.store().live_keys(), 64);
    let fresh = limiter.check(&CLIENT, 1).unwrap();
    assert!(fresh.is_allowed());
    assert_eq!(fresh.remaining(), 9);
}

#[test]
fn memory_follows_active_keys_not_keys_ever_seen() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_store(window(5), one_shard(), clock.clone());
    for round in 0..50u64 {
        for key in 0..200u64 {
            limiter.check(&(round * 1000 + key), 1).unwrap();
        }
        clock.advance(Duration::from_secs(1));
    }
    let live = limiter.store().live_keys();
    assert!(live <= 2 * 200 + 50, "{live} live keys after 10 000 seen");
}

#[test]
fn a_full_store_refuses_new_keys_and_keeps_old_ones_exact() {
    let clock = ManualClock::new();
    let store = one_shard().with_max_keys(3).unwrap();
    let limiter = KeyedRateLimiter::with_store(window(2), store, clock.clone());
    for key in ["a", "b", "c"] {
        assert!(limiter.try_acquire(&key));
    }
    assert_eq!(
        limiter.check(&"d", 1),
        Err(Error::StoreFull { max_keys: 3 })
    );
    assert!(!limiter.try_acquire(&"d"));
    // Held keys keep working and keep their counts.
    assert!(limiter.try_acquire(&"a"));
    assert!(!limiter.try_acquire(&"a"));
    // A multi-key call needing a new key fails whole: "b" is not charged.
    assert!(matches!(
        limiter.check_all(&["b", "e"], 1),
        Err(Error::StoreFull { .. })
    ));
    assert_eq!(limiter.peek(&"b", 1).unwrap().remaining(), 0);
    // Peeking a new key needs no room.
    assert!(limiter.peek(&"f", 1).unwrap().is_allowed());
    // Once held keys replenish, they make room.
    clock.advance(Duration::from_secs(1));
    assert!(limiter.try_acquire(&"d"));
    assert_eq!(limiter.store().live_keys(), 1);
}

#[test]
fn a_full_store_still_refuses_when_nothing_has_replenished() {
    let clock = ManualClock::new();
    let store = MemoryStore::new().with_max_keys(50).unwrap();
    let limiter = KeyedRateLimiter::with_store(window(2), store, clock.clone());
    for key in 0..50u32 {
        limiter.check(&key, 1).unwrap();
    }
    for key in 50..1000u32 {
        assert!(matches!(
            limiter.check(&key, 1),
            Err(Error::StoreFull { .. })
        ));
    }
    assert_eq!(limiter.store().live_keys(), 50);
    for key in 0..50u32 {
        assert_eq!(limiter.check(&key, 1).unwrap().remaining(), 0);
    }
}

#[test]
fn two_threads_on_shared_keys_lose_no_update() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(2));
    // 100 per second with a 1 s burst: each key admits its burst of 100, plus one
    // pay-later call, at a frozen time: exactly 101.
    let limiter = KeyedRateLimiter::with_store(
        SmoothBursty::new(100.0).unwrap(),
        MemoryStore::new().with_shards(2).unwrap(),
        clock.clone(),
    );
    let keys: Vec<u32> = (0..8).collect();
    let admitted: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|t| {
                let limiter = limiter.clone();
                let keys = &keys;
                scope.spawn(move || {
                    let mut admitted = 0;
                    for i in 0..2000 {
                        let key = keys[(i + t * 3) % keys.len()];
                        if limiter.try_acquire(&key) {
                            admitted += 1;
                        }
                        // Pairs in both orders: all-or-nothing calls must not deadlock.
                        let pair = if t == 0 { [1000, 1001] } else { [1001, 1000] };
                        if limiter.check_all(&pair, 1).unwrap().is_allowed() {
                            admitted += 1;
                        }
                    }
                    admitted
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(admitted, 8 * 101 + 101);
    assert_eq!(limiter.store().live_keys(), 10);
}

#[test]
fn store_configuration_is_validated() {
    assert!(MemoryStore::<u8, FixedWindow>::new()
        .with_shards(0)
        .is_err());
    assert!(MemoryStore::<u8, FixedWindow>::new()
        .with_shards(6)
        .is_err());
    assert!(MemoryStore::<u8, FixedWindow>::new()
        .with_max_keys(0)
        .is_err());
    let store = MemoryStore::<u8, FixedWindow>::new()
        .with_max_keys(7)
        .unwrap();
    assert_eq!(store.max_keys(), Some(7));
}

/// Every key hashes to the same value: the worst a hasher can do.
#[derive(Default)]
struct Constant;

impl std::hash::Hasher for Constant {
    fn finish(&self) -> u64 {
        42
    }
    fn write(&mut self, _bytes: &[u8]) {}
}

#[test]
fn keys_whose_hashes_collide_share_one_stricter_state() {
    let store: MemoryStore<u32, FixedWindow, std::hash::BuildHasherDefault<Constant>> =
        MemoryStore::with_hasher(Default::default());
    let limiter = KeyedRateLimiter::with_store(window(3), store, ManualClock::new());
    assert!(limiter.try_acquire(&1));
    assert!(limiter.try_acquire(&2));
    assert!(limiter.try_acquire(&3));
    // Together they got one key's allowance, never more.
    assert!(!limiter.try_acquire(&4));
    assert_eq!(limiter.store().live_keys(), 1);
}

#[test]
fn limiters_and_their_futures_cross_threads() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send + 'static>(_: &T) {}
    let limiter: KeyedRateLimiter<String, SmoothBursty> =
        KeyedRateLimiter::new(SmoothBursty::new(1.0).unwrap());
    send_sync(&limiter);
    send_sync(limiter.store());
    let handle = limiter.to_async();
    send_sync(&handle);
    send(&handle.acquire(&"k".to_string()));
    send(&handle.acquire_all(&["a".to_string(), "b".to_string()], 1));
}

#[test]
fn a_full_store_makes_room_at_once_when_its_keys_have_replenished() {
    let clock = ManualClock::new();
    let store = one_shard().with_max_keys(100).unwrap();
    let limiter = KeyedRateLimiter::with_store(window(2), store, clock.clone());
    for key in 0..100u32 {
        limiter.check(&key, 1).unwrap();
    }
    assert!(matches!(
        limiter.check(&100, 1),
        Err(Error::StoreFull { .. })
    ));
    clock.advance(Duration::from_secs(1));
    // Every held key has replenished: the very next new key finds room, and so do
    // the next hundred.
    for key in 101..201u32 {
        assert!(limiter.check(&key, 1).unwrap().is_allowed(), "key {key}");
    }
    assert_eq!(limiter.store().live_keys(), 100);
}

#[test]
fn an_output_buffer_of_the_wrong_length_is_a_typed_error_and_applies_nothing() {
    use sluicegate::algorithms::{Decision, Receipt};
    use sluicegate::stores::{Operation, Store};
    let algorithm = window(1);
    let store: MemoryStore<u32, _> = one_shard();
    let mut short = [(Decision::never(0, 0, 0), Receipt::NONE); 1];
    let take = Operation::Reserve {
        cost: 1,
        max_wait: 0,
    };
    let err = store
        .apply(&algorithm, &[1, 2], 0, take, &mut short)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidCount { value: 1, .. }), "{err}");
    assert_eq!(store.live_keys(), 0);
    // Nothing was taken: the key's one permit is still there.
    store.apply(&algorithm, &[1], 0, take, &mut short).unwrap();
    assert!(short[0].0.is_allowed());
}
