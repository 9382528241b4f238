//! Leases (`stores::lease`), tested from their docs alone: limiters leasing from
//! one store admit between the documented bounds in every window, leased admissions
//! over a sliding log are the store's grants delayed by at most the period, one
//! leasing process decides as the plain store, and the lease table stays within
//! `max_keys` under 100,000 keys.

use super::probe_store::{secs, unsourced, Probe, MS, SEC};
use crate::support::rng::Rng;
use sluicegate::algorithms::{Algorithm, FixedWindow, SlidingLog, SmoothBursty};
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::stores::lease::LeasedStore;
use sluicegate::stores::MemoryStore;
use sluicegate::{KeyedRateLimiter, Source};
use std::time::Duration;

/// stores/lease (Bounds): `N` limiters, each over its own `LeasedStore` of lease size
/// `L` and period `P` in front of one shared store, on a random trace of cost-1
/// calls for one key. In every window of a fixed window, the calls admitted across
/// all `N` never exceed the limit, the store grants all of it (its last permits are
/// not stranded), and at least `limit − N·(L−1)·⌈W/P⌉` are admitted.
#[test]
fn leases_across_four_limiters_admit_between_the_documented_bounds_in_every_window() {
    const N: usize = 4;
    const LIMIT: u64 = 100;
    const W: Nanos = 60 * SEC;
    for (size, period, seed) in [
        (5, 60, 1u64),
        (5, 30, 2),
        (3, 20, 3),
        (10, 120, 4),
        (1, 60, 5),
    ] {
        let period_ns = period * SEC;
        let clock = ManualClock::new();
        let shared = Probe::new(MemoryStore::<u32, FixedWindow>::new());
        let window = FixedWindow::new(LIMIT, Duration::from_nanos(W)).unwrap();
        let limiters: Vec<_> = (0..N)
            .map(|_| {
                let leased = LeasedStore::new(shared.clone(), size, secs(period)).unwrap();
                KeyedRateLimiter::with_store(window, leased, clock.clone())
            })
            .collect();
        let floor = LIMIT - N as u64 * (size - 1) * W.div_ceil(period_ns);
        let mut rng = Rng::new(seed);
        let (mut calls, mut store_answered, mut store_grants) = (0, 0, 0);
        for w in 0..6 {
            let mut times: Vec<Nanos> = (0..300).map(|_| rng.below(W)).collect();
            times.sort_unstable();
            let before = shared.granted();
            let mut admitted = 0;
            for t in times {
                clock.advance_nanos(w * W + t - clock.now());
                let d = limiters[rng.below(N as u64) as usize].check(&7, 1).unwrap();
                calls += 1;
                if d.source() == Source::Store {
                    store_answered += 1;
                }
                if d.is_allowed() {
                    admitted += 1;
                    assert!(
                        matches!(d.source(), Source::Leased | Source::Store),
                        "{d:?}"
                    );
                    if d.source() == Source::Store {
                        store_grants += 1;
                    }
                } else {
                    assert_eq!(d.source(), Source::Store);
                }
            }
            let taken = shared.granted() - before;
            let case =
                format!("L {size}, P {period} s, window {w}: {admitted} admitted, {taken} taken");
            assert!(admitted <= LIMIT, "{case}");
            assert_eq!(taken, LIMIT, "{case}");
            assert!(admitted >= floor, "{case}, floor {floor}");
            clock.advance_nanos((w + 1) * W - clock.now());
        }
        // Round trips: one per lease, one per call the store answers, and at most
        // one lease refused per limiter and window (none is asked for again until
        // the refusal's retry_after, the window's end).
        let leases = (shared.granted() - store_grants) / size;
        let trips = shared.calls();
        let least = store_answered + leases;
        assert!(
            (least..=least + N as u64 * 6).contains(&trips),
            "L {size}: {trips} round trips, {store_answered} answered by the store, {leases} leases"
        );
        if size == 1 {
            assert_eq!(
                (trips, store_answered),
                (calls, calls),
                "L = 1 asks the store on every call"
            );
        }
    }
}

/// stores/lease (Bounds: over-admission): for an algorithm whose grants are spread in
/// time, a leased permit is spent at most `P` after the store counted it, so over a
/// sliding log of `limit` per `W` the admissions in any span of `W − P` never exceed
/// `limit`; and every admission is a permit the store granted.
#[test]
fn leased_admissions_over_a_sliding_log_are_the_stores_grants_delayed_by_at_most_the_period() {
    const LIMIT: u64 = 30;
    const W: Nanos = 10 * SEC;
    const P: Nanos = 2 * SEC;
    let clock = ManualClock::new();
    let shared = Probe::new(MemoryStore::<u32, SlidingLog>::new());
    let log = SlidingLog::new(LIMIT, Duration::from_nanos(W)).unwrap();
    let limiters: Vec<_> = (0..3)
        .map(|_| {
            let leased = LeasedStore::new(shared.clone(), 4, Duration::from_nanos(P)).unwrap();
            KeyedRateLimiter::with_store(log, leased, clock.clone())
        })
        .collect();
    let mut rng = Rng::new(99);
    let mut admitted: Vec<Nanos> = Vec::new();
    let mut permits = 0;
    while clock.now() < 90 * SEC {
        clock.advance_nanos(rng.below(40 * MS));
        let cost = if rng.chance(80) { 1 } else { 2 };
        let d = limiters[rng.below(3) as usize].check(&1, cost).unwrap();
        if d.is_allowed() {
            admitted.extend(std::iter::repeat_n(clock.now(), cost as usize));
            permits += cost;
        }
    }
    assert!(
        permits <= shared.granted(),
        "{permits} admitted, {} granted",
        shared.granted()
    );
    let mut last = 0;
    for (i, &start) in admitted.iter().enumerate() {
        while last < admitted.len() && admitted[last] < start + (W - P) {
            last += 1;
        }
        assert!(
            last - i <= LIMIT as usize,
            "{} admitted in [{start}, +W-P)",
            last - i
        );
    }
    assert!(permits > 8 * LIMIT, "{permits} admitted in 90 s");
}

/// stores/lease (Decisions): with one process, a lease's grants say what the plain
/// store would (remaining included), so a fixed window with `P ≥ W` and calls of
/// cost 1 decides as the plain store; `L = 1`, or any call of cost `c ≥ L`, decides
/// exactly as the plain store, source included.
#[test]
fn one_leasing_process_decides_as_the_plain_store() {
    fn trace<A: Algorithm + Clone>(
        algorithm: A,
        size: u64,
        period: Duration,
        costs: std::ops::RangeInclusive<u64>,
        exact_source: bool,
        seed: u64,
    ) -> u64 {
        let clock = ManualClock::new();
        let plain =
            KeyedRateLimiter::with_store(algorithm.clone(), MemoryStore::new(), clock.clone());
        let leased_store = LeasedStore::new(MemoryStore::new(), size, period).unwrap();
        let leased = KeyedRateLimiter::with_store(algorithm, leased_store, clock.clone());
        let mut rng = Rng::new(seed);
        let mut from_leases = 0;
        let span = costs.end() - costs.start() + 1;
        for step in 0..5_000 {
            clock.advance_nanos(rng.below(60 * MS));
            let key = rng.below(3) as u32;
            let cost = costs.start() + rng.below(span);
            let (p, l) = (
                plain.check(&key, cost).unwrap(),
                leased.check(&key, cost).unwrap(),
            );
            if exact_source {
                assert_eq!(p, l, "step {step}, key {key}, cost {cost}");
            } else {
                assert_eq!(p, unsourced(l), "step {step}, key {key}, cost {cost}");
                assert!(matches!(l.source(), Source::Leased | Source::Store));
            }
            if l.source() == Source::Leased {
                from_leases += 1;
                assert!(leased.store().leased(&key, clock.now()) < size);
            }
        }
        from_leases
    }
    let window = FixedWindow::new(23, secs(10)).unwrap();
    assert!(trace(window, 5, secs(10), 1..=1, false, 7) > 500);
    assert!(trace(window, 5, secs(25), 1..=1, false, 8) > 500);
    assert_eq!(trace(window, 1, secs(10), 1..=3, true, 9), 0);
    assert_eq!(trace(window, 4, secs(10), 4..=6, true, 10), 0);
    let bursty = SmoothBursty::new(20.0).unwrap();
    assert_eq!(trace(bursty, 1, secs(1), 1..=4, true, 11), 0);
}

/// stores/lease (Memory): the lease table holds at most `max_keys` keys whatever the
/// number of keys, and a key that finds it full of live leases goes to the store.
#[test]
fn the_lease_table_stays_within_max_keys_under_100_000_keys() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(50, secs(60)).unwrap();
    let store = LeasedStore::new(MemoryStore::new(), 10, secs(60))
        .unwrap()
        .with_max_keys(100)
        .unwrap();
    assert_eq!(store.max_keys(), 100);
    let limiter = KeyedRateLimiter::with_store(window, store, clock.clone());
    let (mut leased, mut stored) = (0, 0);
    for key in 0..100_000u64 {
        let d = limiter.check(&key, 1).unwrap();
        assert!(d.is_allowed());
        assert_eq!(d.remaining(), 49);
        match d.source() {
            Source::Leased => leased += 1,
            Source::Store => stored += 1,
            other => panic!("key {key}: {other:?}"),
        }
        assert!(
            limiter.store().leased_keys() <= 100,
            "{} leased keys",
            limiter.store().leased_keys()
        );
        if key % 1_000 == 999 {
            clock.advance(secs(60)); // every lease so far has ended
        }
    }
    // In each block of 1,000 keys the first call finds the table full of ended
    // leases and forgets them: the first 100 keys lease, the rest go to the store.
    assert_eq!((leased, stored), (10_000, 90_000));
}
