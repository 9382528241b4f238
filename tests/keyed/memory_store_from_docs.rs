//! The keyed limiter's in-memory store, tested from its docs alone: its cap and its
//! forgetting under 100,000 keys, idle keys swept and tables shrunk by ordinary
//! calls, a capped store deciding as one that forgets nothing, and borrowed keys
//! and `_all` calls against the cap.

use super::probe_store::{ms, secs, MS};
use crate::support::rng::Rng;
use sluicegate::algorithms::{
    Algorithm, Decision, FixedWindow, LeakyBucket, SlidingWindowCounter, SmoothBursty,
};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::stores::MemoryStore;
use sluicegate::{Error, KeyedRateLimiter, Verdict};
use std::collections::HashMap;

/// stores/memory (The cap): a capped store holds at most `max_keys` keys, refuses
/// new ones with `StoreFull` (consuming nothing) rather than evicting limited ones,
/// and makes room from keys that have replenished.
#[test]
fn a_capped_store_never_exceeds_its_cap_under_100_000_keys_and_makes_room_from_replenished_ones() {
    const CAP: usize = 1_000;
    let clock = ManualClock::new();
    let window = FixedWindow::new(1, secs(60)).unwrap();
    let store = MemoryStore::new().with_max_keys(CAP).unwrap();
    assert_eq!(store.max_keys(), Some(CAP));
    let limiter = KeyedRateLimiter::with_store(window, store, clock.clone());

    // Nothing replenishes within the window: the first CAP keys get in, and every
    // later new key is refused, with nothing held beyond the cap.
    for key in 0..100_000u64 {
        let answer = limiter.check(&key, 1);
        if key < CAP as u64 {
            assert!(answer.unwrap().is_allowed(), "key {key} refused");
        } else {
            assert_eq!(
                answer,
                Err(Error::StoreFull {
                    max_keys: CAP as u64
                }),
                "key {key}"
            );
        }
        assert!(limiter.live_keys() <= CAP, "cap exceeded at key {key}");
    }
    assert_eq!(limiter.live_keys(), CAP);
    // Keys held keep working: refused by their limit, not by the store.
    let held = limiter.check(&3, 1).unwrap();
    assert_eq!((held.verdict(), held.remaining()), (Verdict::Denied, 0));
    // A peek asks the limit, not the store's room.
    assert!(limiter.peek(&100_000, 1).unwrap().is_allowed());
    assert!(!limiter.try_acquire(&100_000));

    // A new window: every held key has replenished, so new keys take their room,
    // and once the new keys fill it, they are refused again.
    clock.advance(secs(60));
    let mut admitted = 0;
    for key in 100_000..200_000u64 {
        match limiter.check(&key, 1) {
            Ok(d) => {
                assert!(d.is_allowed());
                admitted += 1;
            }
            Err(e) => assert_eq!(
                e,
                Error::StoreFull {
                    max_keys: CAP as u64
                }
            ),
        }
        assert!(limiter.live_keys() <= CAP, "cap exceeded at key {key}");
    }
    assert_eq!(admitted, CAP, "replenished keys did not all make room");
    assert_eq!(limiter.live_keys(), CAP);
}

/// stores/memory (The model): a table grows only for keys that still matter, and is
/// Robin Hood at most 7/8 full, 16 bytes a slot for a bursty key; so a flood of
/// 100,000 keys, 10,000 at a time, each batch replenished before the next, holds
/// about one batch.
#[test]
fn memory_follows_the_keys_within_their_horizon_under_a_flood_of_100_000() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(10.0).unwrap(), clock.clone());
    let mut peak_live = 0;
    for batch in 0..10u64 {
        for key in batch * 10_000..(batch + 1) * 10_000 {
            assert!(limiter.check(&key, 1).unwrap().is_allowed());
        }
        let store = limiter.store();
        let (live, slots) = (store.live_keys(), store.table_bytes() / 16);
        assert!(live >= 10_000, "batch {batch}: live keys {live}");
        assert!(
            live * 8 <= slots * 7,
            "batch {batch}: {live} keys in {slots} slots"
        );
        // All 100,000 would need 1.6 MB of slots at least.
        assert!(
            store.table_bytes() <= 40_000 * 16,
            "batch {batch}: {} bytes of tables",
            store.table_bytes()
        );
        peak_live = peak_live.max(live);
        clock.advance(secs(2)); // past max_burst: the batch has replenished
    }
    assert!(peak_live < 40_000, "peak of {peak_live} live keys");
}

/// stores/memory (The model): every 16th call on a shard sweeps a slot, so a shard
/// whose keys went idle empties, and a table below 1/4 full shrinks, with no new
/// key arriving.
#[test]
fn idle_keys_are_swept_by_ordinary_calls_and_the_tables_shrink() {
    let clock = ManualClock::new();
    let store = MemoryStore::new().with_shards(16).unwrap();
    let limiter = KeyedRateLimiter::with_store(FixedWindow::new(1, secs(1)).unwrap(), store, clock);
    for key in 0..20_000u64 {
        limiter.check(&key, 1).unwrap();
    }
    let peak_bytes = limiter.store().table_bytes();
    assert_eq!(limiter.live_keys(), 20_000);

    // Every key has replenished; 1,024 of them stay in use, on every shard: calls
    // on them, and only them.
    limiter.clock().advance(secs(3));
    for round in 0..2_000u64 {
        for key in 0..1_024u64 {
            let d = limiter.check(&key, 1).unwrap();
            assert_eq!(d.is_allowed(), round == 0);
        }
    }
    assert_eq!(limiter.live_keys(), 1_024, "idle keys were not swept");
    let bytes = limiter.store().table_bytes();
    assert!(
        bytes < peak_bytes / 4,
        "tables of {bytes} bytes after a peak of {peak_bytes}"
    );
}

/// stores/memory (The model): a table that falls below 1/4 full shrinks under
/// ordinary traffic. Here a shard's table, one key short of growing, is emptied by
/// the sweep a new key's arrival makes before growing, leaving that one key in it.
#[test]
fn a_table_emptied_to_make_room_for_a_new_key_shrinks_under_ordinary_traffic() {
    let window = FixedWindow::new(1, secs(1)).unwrap();
    let one_shard = || {
        MemoryStore::<u64, FixedWindow>::new()
            .with_shards(1)
            .unwrap()
    };
    // How many keys the table holds before it grows past 4,000 keys: growth goes
    // by the count of keys alone, so another store grows at the same count.
    let probe = KeyedRateLimiter::with_store(window, one_shard(), ManualClock::new());
    let mut held = 0;
    let mut bytes = 0;
    for key in 0u64.. {
        let before = probe.store().table_bytes();
        probe.check(&key, 1).unwrap();
        if key >= 4_000 && probe.store().table_bytes() != before {
            (held, bytes) = (key, before);
            break;
        }
    }

    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_store(window, one_shard(), clock.clone());
    for key in 0..held {
        limiter.check(&key, 1).unwrap();
    }
    assert_eq!(
        (limiter.live_keys() as u64, limiter.store().table_bytes()),
        (held, bytes)
    );
    // Every key has replenished. A new key finds the table full: the replenished
    // keys are forgotten instead of growing it, and the table holds one key.
    clock.advance(secs(2));
    assert!(limiter.check(&u64::MAX, 1).unwrap().is_allowed());
    assert_eq!(limiter.live_keys(), 1);
    for _ in 0..200_000 {
        limiter.check(&u64::MAX, 1).unwrap();
    }
    let after = limiter.store().table_bytes();
    assert!(
        after < bytes / 4,
        "one key in {after} bytes of table, {bytes} at its peak"
    );
}

/// The store contract (New keys, Expiry) and stores/memory (The cap): forgetting a
/// replenished key changes no decision, and a capped store refuses only keys it
/// does not hold: never granted, or replenished. Checked on a random trace over
/// 2,000 keys and a cap of 64 against a model that keeps every key's state for ever.
#[test]
fn a_capped_store_decides_as_a_store_that_forgets_nothing() {
    fn run<A: Algorithm + Clone>(algorithm: A, seed: u64) {
        const CAP: usize = 64;
        let clock = ManualClock::new();
        let store = MemoryStore::new().with_max_keys(CAP).unwrap();
        let limiter = KeyedRateLimiter::with_store(algorithm.clone(), store, clock.clone());
        let mut model: HashMap<u32, A::State> = HashMap::new();
        // Keys ever granted: a key never granted has no state to keep.
        let mut granted_keys = std::collections::HashSet::new();
        let mut rng = Rng::new(seed);
        let (mut full, mut refused, mut granted) = (0, 0, 0);
        for step in 0..30_000 {
            clock.advance_nanos(rng.below(4 * MS));
            let now = clock.now();
            let key = if rng.chance(50) {
                rng.below(8) as u32
            } else {
                40 + rng.below(2_000) as u32
            };
            let cost = 1 + rng.below(2);
            let state = model
                .entry(key)
                .or_insert_with(|| algorithm.initial_state(0));
            match limiter.check(&key, cost) {
                Ok(decision) => {
                    let expected: Decision = algorithm.reserve(state, now, cost, 0);
                    assert_eq!(decision, expected, "step {step}, key {key}");
                    if decision.is_allowed() {
                        granted_keys.insert(key);
                        granted += 1;
                    } else {
                        refused += 1;
                    }
                }
                Err(error) => {
                    assert_eq!(
                        error,
                        Error::StoreFull {
                            max_keys: CAP as u64
                        }
                    );
                    assert!(
                        !granted_keys.contains(&key) || algorithm.is_replenished(state, now),
                        "step {step}: key {key} refused for room while its limit still counted"
                    );
                    // A full store still answers a peek from the limit.
                    let peeked = limiter.peek(&key, cost).unwrap();
                    assert_eq!(peeked, algorithm.peek(state, now, cost), "step {step}");
                    full += 1;
                }
            }
            assert!(limiter.live_keys() <= CAP);
        }
        assert!(
            full > 300 && refused > 300 && granted > 1_000,
            "{full} {refused} {granted}"
        );
    }
    run(SmoothBursty::new(20.0).unwrap(), 1);
    run(SlidingWindowCounter::new(4, ms(150)).unwrap(), 2);
    run(LeakyBucket::meter(3, 10, secs(1)).unwrap(), 3);
}

/// KeyedRateLimiter: a `String`-keyed limiter takes `&str` and `&String` for one
/// state; `_all` calls are all-or-nothing, so one that fails for room charges no
/// key (Error::StoreFull: nothing consumed).
#[test]
fn borrowed_keys_count_once_against_the_cap_and_a_full_store_charges_no_key_of_an_all_call() {
    let clock = ManualClock::new();
    let store = MemoryStore::new()
        .with_shards(1)
        .unwrap()
        .with_max_keys(3)
        .unwrap();
    let window = FixedWindow::new(2, secs(60)).unwrap();
    let limiter: KeyedRateLimiter<String, _, _, _> =
        KeyedRateLimiter::with_store(window, store, clock.clone());
    let owned = |s: &str| s.to_owned();

    assert_eq!(limiter.check("a", 1).unwrap().remaining(), 1);
    assert_eq!(limiter.live_keys(), 1);
    assert!(limiter.try_acquire("b"));
    assert!(limiter.try_acquire(&owned("c")));
    assert_eq!(limiter.live_keys(), 3);

    let full = Err(Error::StoreFull { max_keys: 3 });
    assert_eq!(limiter.check_all(&[owned("a"), owned("d")], 1), full);
    assert_eq!(limiter.check_all(&[owned("d"), owned("b")], 1), full);
    assert_eq!(
        limiter
            .peek_all(&[owned("a"), owned("d")], 1)
            .map(|d| d.is_allowed()),
        Ok(true)
    );
    let async_full = futures::executor::block_on(limiter.to_async().check("d", 1));
    assert_eq!(async_full, full);
    // Neither "a" nor "b" was charged by the calls that failed.
    assert_eq!(limiter.check(&owned("a"), 1).unwrap().remaining(), 0);
    assert_eq!(limiter.peek("b", 1).unwrap().remaining(), 0);
    // "a" is spent, so the pair is refused and "b" keeps its permit.
    let pair = limiter.check_all(&[owned("a"), owned("b")], 1).unwrap();
    assert_eq!(pair.verdict(), Verdict::Denied);
    assert_eq!(pair.retry_after(), secs(60));
    assert!(limiter.try_acquire("b"));
    assert_eq!(limiter.live_keys(), 3);

    // The next window: the held keys have replenished and "d" takes one's room.
    clock.advance(secs(60));
    assert_eq!(
        limiter
            .check_all(&[owned("d"), owned("a")], 1)
            .unwrap()
            .remaining(),
        1
    );
    assert!(limiter.live_keys() <= 3);
}
