//! The keyed limiter's store and its wrappers, tested from their docs alone: the
//! in-memory store's cap and forgetting under 100,000 keys, the deny cache, leases
//! shared by several limiters, the failover policies over a store that can be made
//! to fail, and many threads and tasks on the real clock sharing one limiter.
//!
//! `Probe` is a store of this file's own: it wraps any store behind an `Arc`, so
//! that several wrappers share one inner store, counts the steps it is asked for
//! and the permits its inner store granted, and can be switched to fail or be held
//! mid-step.

use crate::support::rng::Rng;
use futures::future;
use sluicegate::algorithms::{
    Algorithm, AllOf, Counting, Decision, FixedWindow, LeakyBucket, Limits, Plain, Receipt, Report,
    SlidingLog, SlidingWindowBuckets, SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::stores::deny_cache::DenyCache;
use sluicegate::stores::failover::{Backoff, Event, FailoverStore, FailurePolicy};
use sluicegate::stores::lease::LeasedStore;
use sluicegate::stores::store::Reporting;
use sluicegate::stores::{MemoryStore, Operation, Store};
use sluicegate::{
    Applied, ConfigError, DefaultClock, Error, KeyedRateLimiter, Source, StoreError, Verdict,
};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

const MS: Nanos = 1_000_000;
const SEC: Nanos = 1_000_000_000;

// ---------------------------------------------------------------------------
// A store of our own: counts, fails on demand, holds a step mid-way.
// ---------------------------------------------------------------------------

const UP: u8 = 0;
const DOWN: u8 = 1;
const BAD_INPUT: u8 = 2;

const PAUSE_OFF: u8 = 0;
const PAUSE_ARMED: u8 = 1;
const PAUSE_ENTERED: u8 = 2;
const PAUSE_RELEASED: u8 = 3;

#[derive(Default)]
struct Tally {
    /// Steps asked for, cancels included, failed ones included.
    calls: AtomicU64,
    /// Cancels asked for (`Operation::Cancel` and detached cancels).
    cancels: AtomicU64,
    /// Permits the inner store granted to reserves, summed over keys.
    granted: AtomicU64,
    mode: AtomicU8,
    pause: Mutex<u8>,
    paused: Condvar,
}

impl Tally {
    /// Counts a step, holds it while a pause is armed, and fails it as the mode says.
    fn enter(&self, cancel: bool) -> Result<(), Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if cancel {
            self.cancels.fetch_add(1, Ordering::SeqCst);
        }
        let mut pause = self.pause.lock().unwrap();
        if *pause == PAUSE_ARMED {
            *pause = PAUSE_ENTERED;
            self.paused.notify_all();
            while *pause != PAUSE_RELEASED {
                pause = self.paused.wait(pause).unwrap();
            }
            *pause = PAUSE_OFF;
        }
        drop(pause);
        match self.mode.load(Ordering::SeqCst) {
            DOWN => Err(Error::Store(StoreError::new(
                "probe",
                Applied::No,
                "connection refused",
            ))),
            BAD_INPUT => Err(Error::InvalidKeys {
                why: "the probe refuses these keys",
                help: "none",
            }),
            _ => Ok(()),
        }
    }

    fn note<'a>(&self, reserve_cost: Option<u64>, decisions: impl Iterator<Item = &'a Decision>) {
        if let Some(cost) = reserve_cost {
            let allowed = decisions.filter(|d| d.is_allowed()).count() as u64;
            self.granted.fetch_add(cost * allowed, Ordering::SeqCst);
        }
    }
}

fn reserve_cost(step: &Operation<'_>) -> Option<u64> {
    match step {
        Operation::Reserve { cost, .. } => Some(*cost),
        _ => None,
    }
}

fn is_cancel(step: &Operation<'_>) -> bool {
    matches!(step, Operation::Cancel { .. })
}

struct Probe<S> {
    inner: Arc<S>,
    tally: Arc<Tally>,
}

impl<S> Clone for Probe<S> {
    fn clone(&self) -> Self {
        Probe {
            inner: Arc::clone(&self.inner),
            tally: Arc::clone(&self.tally),
        }
    }
}

impl<S> Probe<S> {
    fn new(inner: S) -> Self {
        Probe {
            inner: Arc::new(inner),
            tally: Arc::new(Tally::default()),
        }
    }
    fn calls(&self) -> u64 {
        self.tally.calls.load(Ordering::SeqCst)
    }
    fn cancels(&self) -> u64 {
        self.tally.cancels.load(Ordering::SeqCst)
    }
    fn granted(&self) -> u64 {
        self.tally.granted.load(Ordering::SeqCst)
    }
    fn set(&self, mode: u8) {
        self.tally.mode.store(mode, Ordering::SeqCst);
    }
    /// The next step to arrive stops until `release`.
    fn arm_pause(&self) {
        *self.tally.pause.lock().unwrap() = PAUSE_ARMED;
    }
    fn wait_until_paused(&self) {
        let mut pause = self.tally.pause.lock().unwrap();
        while *pause != PAUSE_ENTERED {
            pause = self.tally.paused.wait(pause).unwrap();
        }
    }
    fn release(&self) {
        *self.tally.pause.lock().unwrap() = PAUSE_RELEASED;
        self.tally.paused.notify_all();
    }
}

type Boxed = Pin<Box<dyn Future<Output = Result<Vec<(Decision, Receipt)>, Error>> + Send>>;

impl<Q, A, S> Store<Q, A> for Probe<S>
where
    Q: ?Sized,
    A: Algorithm,
    S: Store<Q, A> + 'static,
{
    type Pending = Boxed;

    fn apply(
        &self,
        algorithm: &A,
        keys: &[Q],
        now: Nanos,
        step: Operation<'_>,
        out: &mut [(Decision, Receipt)],
    ) -> Result<(), Error>
    where
        Q: Sized,
    {
        self.tally.enter(is_cancel(&step))?;
        self.inner.apply(algorithm, keys, now, step, out)?;
        self.tally
            .note(reserve_cost(&step), out.iter().map(|(d, _)| d));
        Ok(())
    }

    fn apply_key<R: Report>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<R, Error> {
        self.tally.enter(is_cancel(&step))?;
        let (decision, receipt): (Decision, Receipt) =
            self.inner.apply_key(algorithm, key, now, step)?;
        self.tally
            .note(reserve_cost(&step), std::iter::once(&decision));
        Ok(R::decided(decision, receipt))
    }

    fn apply_key_each(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
        self.tally.enter(is_cancel(&step))?;
        let answer = self.inner.apply_key_each(algorithm, key, now, step, each)?;
        self.tally
            .note(reserve_cost(&step), std::iter::once(&answer.0));
        Ok(answer)
    }

    fn apply_async(&self, algorithm: &A, keys: &[Q], now: Nanos, step: Operation<'_>) -> Boxed
    where
        Q: Sized,
    {
        if let Err(error) = self.tally.enter(is_cancel(&step)) {
            return Box::pin(future::ready(Err(error)));
        }
        let pending = self.inner.apply_async(algorithm, keys, now, step);
        let tally = Arc::clone(&self.tally);
        let cost = reserve_cost(&step);
        Box::pin(async move {
            let out = pending.await?;
            tally.note(cost, out.iter().map(|(d, _)| d));
            Ok(out)
        })
    }

    fn apply_key_each_async(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
    ) -> Reporting
    where
        Q: Sized,
    {
        if let Err(error) = self.tally.enter(is_cancel(&step)) {
            return Box::pin(future::ready(Err(error)));
        }
        let pending = self.inner.apply_key_each_async(algorithm, key, now, step);
        let tally = Arc::clone(&self.tally);
        let cost = reserve_cost(&step);
        Box::pin(async move {
            let out = pending.await?;
            tally.note(cost, std::iter::once(&out.0 .0));
            Ok(out)
        })
    }

    fn cancel_detached(
        &self,
        algorithm: &A,
        keys: &[Q],
        now: Nanos,
        receipts: &[Receipt],
        acts_at: Nanos,
    ) where
        Q: Sized,
    {
        if self.tally.enter(true).is_ok() {
            self.inner
                .cancel_detached(algorithm, keys, now, receipts, acts_at);
        }
    }

    fn key_id(&self, key: &Q) -> Option<u64> {
        self.inner.key_id(key)
    }
}

/// A decision with its source set aside, to compare what two stores decided.
fn unsourced(d: Decision) -> Decision {
    d.with_source(Source::Store)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

// ---------------------------------------------------------------------------
// The in-memory store: the cap, forgetting, borrowed keys, `_all` calls.
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// The deny cache.
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Debug)]
enum Agree {
    /// FixedWindow and Guava's limiters: a cached answer is the store's, field by field.
    Exact,
    /// One limit that frees permits as time passes: a refusal, as many or fewer
    /// remaining and an earlier or equal retry_after.
    Refusal,
    /// A set: a refusal.
    SetRefusal,
}

/// Checks a pair of answers: the plain store's and the cached store's.
fn agree(agree: Agree, step: usize, what: &str, plain: Decision, cached: Decision) {
    assert_eq!(plain.source(), Source::Store);
    match cached.source() {
        // The inner store answered on the same state as the plain store.
        Source::Store => assert_eq!(plain, cached, "step {step}: {what}"),
        Source::Cached => {
            assert_eq!(cached.verdict(), Verdict::Denied, "step {step}: {what}");
            assert!(
                !plain.is_allowed(),
                "step {step}: {what}: cached {cached:?}, store {plain:?}"
            );
            match agree {
                Agree::Exact => assert_eq!(plain, unsourced(cached), "step {step}: {what}"),
                Agree::Refusal => {
                    assert_eq!(plain.verdict(), Verdict::Denied, "step {step}: {what}");
                    assert_eq!(
                        (plain.limit(), plain.limit_index()),
                        (cached.limit(), cached.limit_index()),
                        "step {step}: {what}"
                    );
                    assert!(
                        cached.retry_after() <= plain.retry_after()
                            && cached.remaining() <= plain.remaining(),
                        "step {step}: {what}: cached {cached:?}, store {plain:?}"
                    );
                }
                Agree::SetRefusal => {}
            }
        }
        other => panic!("step {step}: {what}: source {other:?}"),
    }
}

/// Two limiters on one trace, each on its own manual clock kept in step: one over a
/// plain in-memory store, one over a deny cache in front of one. Returns the
/// number of answers the cache gave.
fn deny_cache_trace<A: Algorithm + Clone>(
    name: &str,
    algorithm: A,
    mode: Agree,
    max_cost: u64,
    seed: u64,
) -> u64 {
    let plain =
        KeyedRateLimiter::with_store(algorithm.clone(), MemoryStore::new(), ManualClock::new());
    let cache = DenyCache::new(MemoryStore::new(), &algorithm).unwrap();
    let cached = KeyedRateLimiter::with_store(algorithm, cache, ManualClock::new());
    let (plain_async, cached_async) = (plain.to_async(), cached.to_async());
    let mut plain_held = Vec::new();
    let mut cached_held = Vec::new();
    let mut rng = Rng::new(seed);
    let mut cached_answers = 0;
    for step in 0..4_000 {
        let advance = if rng.chance(60) {
            rng.below(150 * MS)
        } else {
            0
        };
        plain.clock().advance_nanos(advance);
        cached.clock().advance_nanos(advance);
        let key = rng.below(4) as u8;
        let cost = 1 + rng.below(max_cost);
        let what = format!("{name}, key {key}, cost {cost}");
        let mut pair = |p: Decision, c: Decision, what: &str| {
            if c.source() == Source::Cached {
                cached_answers += 1;
            }
            agree(mode, step, what, p, c);
        };
        match rng.below(100) {
            0..=34 => pair(
                plain.check(&key, cost).unwrap(),
                cached.check(&key, cost).unwrap(),
                &what,
            ),
            35..=44 => pair(
                plain.peek(&key, cost).unwrap(),
                cached.peek(&key, cost).unwrap(),
                &what,
            ),
            45..=54 => assert_eq!(
                plain.try_acquire(&key),
                cached.try_acquire(&key),
                "step {step}: {what}"
            ),
            55..=62 => {
                let p = futures::executor::block_on(plain_async.check(&key, cost)).unwrap();
                let c = futures::executor::block_on(cached_async.check(&key, cost)).unwrap();
                pair(p, c, &format!("async {what}"));
            }
            63..=69 => {
                let (mut pe, mut ce) = (Vec::new(), Vec::new());
                let p = plain.check_each(&key, cost, &mut |d| pe.push(d)).unwrap();
                let c = cached.check_each(&key, cost, &mut |d| ce.push(d)).unwrap();
                pair(p, c, &format!("check_each {what}"));
                let ce: Vec<_> = ce.into_iter().map(unsourced).collect();
                if c.source() == Source::Store {
                    assert_eq!(pe, ce, "step {step}: each of {what}");
                } else {
                    // A refusal learned from a report repeats it; one learned
                    // otherwise reports itself.
                    assert!(
                        ce.len() == pe.len() || ce == [unsourced(c)],
                        "step {step}: {what}"
                    );
                    if mode == Agree::Exact {
                        assert_eq!(pe, ce, "step {step}: each of {what}");
                    }
                }
            }
            70..=77 => {
                let p = plain.reserve(&key, cost).unwrap();
                let c = cached.reserve(&key, cost).unwrap();
                assert_eq!(p.decision(), c.decision(), "step {step}: reserve {what}");
                plain_held.push(p);
                cached_held.push(c);
            }
            78..=85 if !plain_held.is_empty() => {
                let i = rng.below(plain_held.len() as u64) as usize;
                let (p, c) = (plain_held.swap_remove(i), cached_held.swap_remove(i));
                assert_eq!(
                    p.cancel().is_ok(),
                    c.cancel().is_ok(),
                    "step {step}: cancel"
                );
            }
            86..=91 => {
                let other = (key + 1 + rng.below(3) as u8) % 4;
                let p = plain.check_all(&[key, other], 1).unwrap();
                let c = cached.check_all(&[key, other], 1).unwrap();
                assert_eq!(p, c, "step {step}: check_all {what}");
            }
            92..=95 => {
                let timeout = Duration::from_nanos(rng.below(400 * MS));
                let p = plain.try_acquire_n_timeout(&key, cost, timeout).unwrap();
                let c = cached.try_acquire_n_timeout(&key, cost, timeout).unwrap();
                assert_eq!(p, c, "step {step}: timed {what}");
            }
            _ => {
                let p = plain.check(&key, max_cost + 3).unwrap();
                let c = cached.check(&key, max_cost + 3).unwrap();
                pair(p, c, &format!("{what}, above every limit"));
            }
        }
        assert_eq!(
            plain.clock().now(),
            cached.clock().now(),
            "step {step}: the clocks parted"
        );
    }
    assert!(cached.store().hits() >= cached_answers);
    cached_answers
}

/// stores/deny_cache (Per algorithm, What may differ from the store): on a seeded
/// random trace of every call a keyed limiter makes (checks, peeks, tries, async
/// checks, reports, reservations and their cancels, `_all` calls, timed waits),
/// the cache answers as the store would: field by field for a fixed window and
/// Guava's limiters, and for the rest a refusal whose retry_after and remaining
/// are at most the store's.
#[test]
fn the_deny_cache_answers_as_the_uncached_store_on_a_random_trace() {
    let log = |n, w| SlidingLog::new(n, w).unwrap();
    let window = |n, w| FixedWindow::new(n, w).unwrap();
    let answered = [
        deny_cache_trace("fixed window", window(5, secs(1)), Agree::Exact, 3, 11),
        deny_cache_trace(
            "bursty",
            SmoothBursty::new(4.0).unwrap(),
            Agree::Exact,
            3,
            12,
        ),
        deny_cache_trace(
            "warming up",
            SmoothWarmingUp::new(4.0, secs(2)).unwrap(),
            Agree::Exact,
            3,
            13,
        ),
        deny_cache_trace(
            "meter",
            LeakyBucket::meter(5, 3, secs(1)).unwrap(),
            Agree::Refusal,
            3,
            14,
        ),
        deny_cache_trace(
            "queue",
            LeakyBucket::queue(3, 4, secs(1)).unwrap(),
            Agree::Refusal,
            2,
            15,
        ),
        deny_cache_trace(
            "buckets",
            SlidingWindowBuckets::dropping(6, secs(2), ms(500)).unwrap(),
            Agree::Refusal,
            3,
            16,
        ),
        deny_cache_trace(
            "counter",
            SlidingWindowCounter::new(6, secs(2)).unwrap(),
            Agree::Refusal,
            3,
            17,
        ),
        deny_cache_trace("log", log(5, secs(2)), Agree::Refusal, 3, 18),
        deny_cache_trace(
            "spaced log",
            log(4, secs(1)).with_min_spacing(ms(100)),
            Agree::Refusal,
            2,
            19,
        ),
        deny_cache_trace(
            "set with a log",
            AllOf::new((window(3, secs(1)), log(8, secs(5)))),
            Agree::SetRefusal,
            3,
            20,
        ),
        deny_cache_trace(
            "limits",
            Limits::new()
                .with(window(4, secs(1)))
                .with(window(12, secs(10))),
            Agree::SetRefusal,
            3,
            21,
        ),
    ];
    assert!(
        answered.iter().all(|&n| n > 50),
        "cached answers per algorithm: {answered:?}"
    );
}

/// stores/deny_cache (The model): a cached refusal is answered without asking the
/// inner store (hits count it); a wait-willing reserve, a multi-key call, a cost
/// above the limit and a call past the refusal's retry_after all go to it; a grant
/// drops the key's refusal.
#[test]
fn a_cached_refusal_is_answered_without_asking_the_inner_store() {
    let window = FixedWindow::new(2, secs(10)).unwrap();
    let probe = Probe::new(MemoryStore::<&'static str, FixedWindow>::new());
    let store = DenyCache::new(probe.clone(), &window).unwrap();
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_store(window, store, clock.clone());
    let cache = || limiter.store();

    assert!(limiter.check(&"k", 1).unwrap().is_allowed());
    assert!(limiter.check(&"k", 1).unwrap().is_allowed());
    let refusal = limiter.check(&"k", 1).unwrap();
    assert_eq!(
        (refusal.source(), refusal.retry_after()),
        (Source::Store, secs(10))
    );
    assert_eq!((probe.calls(), cache().len(), cache().hits()), (3, 1, 0));

    clock.advance(secs(4));
    for _ in 0..5 {
        let cached = limiter.check(&"k", 1).unwrap();
        assert_eq!(
            (cached.source(), cached.retry_after()),
            (Source::Cached, secs(6))
        );
        assert_eq!((cached.limit(), cached.remaining()), (2, 0));
    }
    assert!(!limiter.try_acquire(&"k"));
    assert_eq!(limiter.peek(&"k", 1).unwrap().source(), Source::Cached);
    let answer = futures::executor::block_on(limiter.to_async().check(&"k", 2)).unwrap();
    assert_eq!(answer.source(), Source::Cached); // a larger cost, within the limit
    assert_eq!((probe.calls(), cache().hits()), (3, 8));

    // Calls the cache does not answer.
    assert!(limiter.check(&"k", 3).unwrap().is_never()); // above the limit
    assert!(!limiter.reserve(&"k", 1).unwrap().is_ok()); // willing to wait
    assert!(!limiter.check_all(&["k", "j"], 1).unwrap().is_allowed()); // several keys
    assert!(limiter.check(&"j", 1).unwrap().is_allowed()); // another key
    assert_eq!((probe.calls(), cache().hits()), (7, 8));

    // Past the refusal's retry_after the store is asked again, and its grant
    // drops the refusal.
    clock.advance(secs(6));
    let fresh = limiter.check(&"k", 1).unwrap();
    assert_eq!((fresh.source(), fresh.is_allowed()), (Source::Store, true));
    assert_eq!((probe.calls(), cache().len()), (8, 0));
}

/// stores/deny_cache (Why a cached refusal is certain): a cancel that goes through
/// the cache drops its keys' refusals, so the next call on the key is the store's.
#[test]
fn a_cancel_through_the_deny_cache_drops_the_keys_refusal() {
    let bursty = SmoothBursty::new(1.0).unwrap();
    let probe = Probe::new(MemoryStore::<&'static str, SmoothBursty>::new());
    let limiter = KeyedRateLimiter::with_store(
        bursty,
        DenyCache::new(probe.clone(), &bursty).unwrap(),
        ManualClock::new(),
    );
    assert!(limiter.try_acquire(&"k")); // pay later: the next permit is 1 s away
    let turn = limiter.reserve(&"k", 1).unwrap();
    assert_eq!(turn.delay(), secs(1)); // the 2 s slot is now booked
    let refused = limiter.check(&"k", 1).unwrap();
    assert_eq!(
        (refused.source(), refused.retry_after()),
        (Source::Store, secs(2))
    );
    assert_eq!(limiter.check(&"k", 1).unwrap().source(), Source::Cached);
    let calls = probe.calls();

    turn.cancel().unwrap();
    assert_eq!(probe.cancels(), 1);
    assert!(limiter.store().is_empty());
    let after = limiter.check(&"k", 1).unwrap();
    assert_eq!(
        (after.source(), after.retry_after()),
        (Source::Store, secs(1))
    );
    assert_eq!(probe.calls(), calls + 2);
}

/// `AllOf`: a refused set records nothing, and a member whose refusals count
/// answers the set as if they did not, so the set's `retry_after` is the first
/// instant the call succeeds; the deny cache's docs: it refuses until that
/// `retry_after` and never grants what the store would not.
#[test]
fn a_set_with_a_recording_log_is_refused_from_the_cache_until_the_first_instant_it_grants() {
    let set = AllOf::new((
        FixedWindow::new(100, secs(1)).unwrap(),
        SlidingLog::new(8, secs(5))
            .unwrap()
            .with_rejected_recorded(),
    ));
    let plain = KeyedRateLimiter::with_store(set, MemoryStore::new(), ManualClock::new());
    let cache = DenyCache::new(MemoryStore::new(), &set).unwrap();
    let cached = KeyedRateLimiter::with_store(set, cache, ManualClock::new());
    let at = |t: Nanos| {
        plain.clock().advance_nanos(t - plain.clock().now());
        cached.clock().advance_nanos(t - cached.clock().now());
    };
    // Eight permits logged at 0 s (1), 1 s (3), 2 s (1), 3 s (2) and 3.1 s (1).
    for (t, cost) in [
        (0, 1),
        (SEC, 3),
        (2 * SEC, 1),
        (3 * SEC, 2),
        (3 * SEC + 100 * MS, 1),
    ] {
        at(t);
        assert!(plain.check(&"k", cost).unwrap().is_allowed());
        assert!(cached.check(&"k", cost).unwrap().is_allowed());
    }
    let refused_at = 3 * SEC + 200 * MS;
    at(refused_at);
    let refusal = plain.check(&"k", 1).unwrap();
    // The store's refusal, which the cache learns: the entry of 0 s leaves the log
    // at 5 s, and the refused attempts in between record nothing.
    assert_eq!(refusal, cached.check(&"k", 1).unwrap());
    assert_eq!(refusal.retry_after(), Duration::from_millis(1_800));
    at(5 * SEC - 1);
    assert!(!plain.check(&"k", 1).unwrap().is_allowed());
    let cache_says = cached.check(&"k", 1).unwrap();
    assert!(!cache_says.is_allowed());
    assert_eq!(cache_says.retry_after(), Duration::from_nanos(1));
    at(5 * SEC);
    assert!(plain.check(&"k", 1).unwrap().is_allowed());
    assert!(cached.check(&"k", 1).unwrap().is_allowed());
}

/// stores/deny_cache (DenyCache::new, Why a cached refusal is certain): the
/// algorithms whose refusals count are refused; every other, sets (whatever their
/// members) and an algorithm of one's own are accepted. A failover policy's
/// answer is not cached.
#[test]
fn the_deny_cache_refuses_counted_refusals_and_caches_only_the_stores_own() {
    fn accepts<A: Algorithm>(algorithm: &A) -> Result<(), ConfigError> {
        DenyCache::<_, u64, A>::new(MemoryStore::<u64, A>::new(), algorithm).map(|_| ())
    }
    let log = SlidingLog::new(5, secs(1)).unwrap();
    let attempts = SlidingWindowCounter::new(5, secs(1))
        .unwrap()
        .with_counting(Counting::Attempts);
    assert!(matches!(
        accepts(&log.with_rejected_recorded()),
        Err(ConfigError::Unsupported { .. })
    ));
    assert!(matches!(
        accepts(&attempts),
        Err(ConfigError::Unsupported { .. })
    ));
    assert!(accepts(&log).is_ok());
    assert!(accepts(&SlidingWindowCounter::new(5, secs(1)).unwrap()).is_ok());
    assert!(accepts(&LeakyBucket::queue(3, 1, secs(1)).unwrap()).is_ok());
    assert!(accepts(&SlidingWindowBuckets::dropping(5, secs(1), ms(100)).unwrap()).is_ok());
    assert!(accepts(&AllOf::new((
        FixedWindow::new(1, secs(1)).unwrap(),
        attempts
    )))
    .is_ok());
    assert!(accepts(&Limits::new().with(log.with_rejected_recorded())).is_ok());

    #[derive(Clone)]
    struct Spacing;
    impl Algorithm for Spacing {
        type State = Nanos;
        type Shape = Plain;
        fn initial_state(&self, _now: Nanos) -> Nanos {
            0
        }
        fn reserve<R: Report>(
            &self,
            next: &mut Nanos,
            now: Nanos,
            cost: u64,
            max_wait: Nanos,
        ) -> R {
            if cost > 1 {
                return R::refused(|| Decision::never(1, 0, 0));
            }
            let wait = next.saturating_sub(now);
            if wait > max_wait {
                return R::refused(|| Decision::denied(1, 0, wait - max_wait, wait));
            }
            *next = now.max(*next) + 100 * MS;
            R::granted(
                || Decision::allowed_after(wait, 1, 0, *next - now),
                || Receipt::NONE,
            )
        }
        fn is_replenished(&self, next: &Nanos, now: Nanos) -> bool {
            *next <= now
        }
    }
    assert!(accepts(&Spacing).is_ok());

    // Over a failover store that fails closed: its refusals are not the store's.
    let clock = ManualClock::new();
    let window = FixedWindow::new(1, secs(60)).unwrap();
    let probe = Probe::new(MemoryStore::<&'static str, FixedWindow>::new());
    let failover = FailoverStore::new(probe.clone(), FailurePolicy::Closed)
        .with_clock(clock.clone())
        .with_backoff(Backoff::fixed(secs(1)));
    let limiter = KeyedRateLimiter::with_store(
        window,
        DenyCache::new(failover, &window).unwrap(),
        clock.clone(),
    );
    probe.set(DOWN);
    for _ in 0..3 {
        assert_eq!(
            limiter.check(&"k", 1).unwrap().source(),
            Source::FailedClosed
        );
    }
    assert_eq!((limiter.store().len(), limiter.store().hits()), (0, 0));
    probe.set(UP);
    clock.advance(secs(1));
    assert_eq!(limiter.check(&"k", 1).unwrap().source(), Source::Store);
    assert_eq!(limiter.check(&"k", 1).unwrap().source(), Source::Store); // the store's refusal
    assert_eq!(limiter.check(&"k", 1).unwrap().source(), Source::Cached);
    assert_eq!(limiter.store().inner().stats().recoveries, 1);
}

/// stores/deny_cache (Memory): at most `max_entries` refusals are kept, however
/// many keys are refused; a refusal that finds no room is answered by the store
/// next time, as without the cache.
#[test]
fn the_deny_cache_keeps_at_most_max_entries_under_100_000_refused_keys() {
    let window = FixedWindow::new(1, secs(60)).unwrap();
    let cache = DenyCache::new(MemoryStore::<u64, FixedWindow>::new(), &window)
        .unwrap()
        .with_max_entries(160)
        .unwrap();
    assert_eq!(cache.max_entries(), 160);
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_store(window, cache, clock.clone());
    let mut from_store = 0;
    for round in 0..2u64 {
        for key in round * 50_000..(round + 1) * 50_000 {
            assert!(limiter.check(&key, 1).unwrap().is_allowed());
            assert_eq!(limiter.check(&key, 1).unwrap().source(), Source::Store);
            let again = limiter.check(&key, 1).unwrap();
            assert!(!again.is_allowed());
            if again.source() == Source::Store {
                from_store += 1;
            }
            assert!(
                limiter.store().len() <= 160,
                "{} refusals kept",
                limiter.store().len()
            );
        }
        // Every refusal kept so far has expired: the next round replaces them.
        clock.advance(secs(60));
    }
    assert!(!limiter.store().is_empty());
    assert!(
        limiter.store().hits() >= 2 * 160,
        "hits: {}",
        limiter.store().hits()
    );
    assert!(
        from_store > 90_000,
        "{from_store} refusals answered by the store"
    );
}

// ---------------------------------------------------------------------------
// Leases.
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// The failover store, over a store of our own that fails on demand.
// ---------------------------------------------------------------------------

type Events = Arc<Mutex<Vec<(Source, bool)>>>;

fn recorder() -> (Events, impl Fn(&Event<'_>) + Send + Sync + 'static) {
    let events: Events = Arc::default();
    let log = Arc::clone(&events);
    (events, move |e: &Event<'_>| {
        log.lock().unwrap().push((e.source, e.error.is_some()))
    })
}

/// stores/failover (Back-off) and FailurePolicy::Closed: a failed call is refused
/// with the rest of the back-off as retry_after; the store is not asked until the
/// back-off ends; then one call probes it; a failed probe doubles the back-off up
/// to its max; an answered one ends the degradation and resets the back-off.
#[test]
fn fail_closed_backs_off_doubling_and_one_probe_recovers() {
    let clock = ManualClock::new();
    let probe = Probe::new(MemoryStore::<&'static str, FixedWindow>::new());
    let (events, observer) = recorder();
    let store = FailoverStore::new(probe.clone(), FailurePolicy::Closed)
        .with_clock(clock.clone())
        .with_backoff(Backoff::new(secs(1), secs(4)))
        .on_degraded(observer);
    let limiter = KeyedRateLimiter::with_store(
        FixedWindow::new(10, secs(60)).unwrap(),
        store,
        clock.clone(),
    );
    let refused_for = |wait: Duration, calls: u64| {
        let d = limiter.check(&"k", 1).unwrap();
        assert_eq!(d.source(), Source::FailedClosed);
        assert_eq!(
            (d.verdict(), d.limit(), d.remaining()),
            (Verdict::Denied, 0, 0)
        );
        assert_eq!(d.retry_after(), wait, "at {} ms", clock.now() / MS);
        assert_eq!(probe.calls(), calls, "at {} ms", clock.now() / MS);
    };

    assert_eq!(limiter.check(&"k", 1).unwrap().remaining(), 9);
    probe.set(DOWN);
    refused_for(secs(1), 2); // asked, failed
    assert!(limiter.store().is_degraded());
    clock.advance(ms(400));
    refused_for(ms(600), 2); // backed off: not asked
    clock.advance(ms(600));
    refused_for(secs(2), 3); // a failed probe doubles the back-off
    clock.advance(secs(1));
    refused_for(secs(1), 3);
    clock.advance(secs(1));
    refused_for(secs(4), 4);
    clock.advance(secs(4));
    refused_for(secs(4), 5); // at its max
    probe.set(UP);
    clock.advance(ms(3_999));
    refused_for(ms(1), 5);
    clock.advance(ms(1));
    let back = limiter.check(&"k", 1).unwrap(); // the probe is answered
    assert_eq!((back.source(), back.remaining()), (Source::Store, 8));
    assert!(!limiter.store().is_degraded());
    assert_eq!(limiter.check(&"k", 1).unwrap().source(), Source::Store);
    assert_eq!(probe.calls(), 7);
    probe.set(DOWN);
    refused_for(secs(1), 8); // the back-off starts over

    let stats = limiter.store().stats();
    assert_eq!((stats.failures, stats.probes, stats.recoveries), (5, 4, 1));
    assert_eq!(
        (stats.failed_closed, stats.unchecked, stats.local),
        (8, 0, 0)
    );
    use Source::FailedClosed as F;
    let seen = events.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (F, true),
            (F, false),
            (F, true),
            (F, false),
            (F, true),
            (F, true),
            (F, false),
            (F, true),
        ]
    );
}

/// FailurePolicy::Open: every call is allowed unchecked, with limit and remaining 0
/// and nothing to give back, blocking, async and on several keys; nothing is
/// counted in the store meanwhile.
#[test]
fn fail_open_lets_every_call_through_unchecked_and_counts_nothing() {
    let clock = ManualClock::new();
    let probe = Probe::new(MemoryStore::<&'static str, FixedWindow>::new());
    let store = FailoverStore::new(probe.clone(), FailurePolicy::Open).with_clock(clock.clone());
    let limiter =
        KeyedRateLimiter::with_store(FixedWindow::new(3, secs(60)).unwrap(), store, clock.clone());
    probe.set(DOWN);
    for _ in 0..10 {
        let d = limiter.check(&"k", 2).unwrap();
        assert_eq!(
            (d.source(), d.is_allowed(), d.limit(), d.remaining()),
            (Source::Unchecked, true, 0, 0)
        );
    }
    assert_eq!(limiter.acquire_n(&"k", 3).unwrap(), Duration::ZERO);
    assert!(limiter.check_all(&["k", "j"], 1).unwrap().is_allowed());
    let async_answer = futures::executor::block_on(limiter.to_async().check(&"k", 1)).unwrap();
    assert_eq!(async_answer.source(), Source::Unchecked);
    let held = limiter.reserve(&"k", 1).unwrap();
    assert!(held.is_ok());
    held.cancel().unwrap();
    assert_eq!(probe.cancels(), 0);
    assert_eq!(probe.calls(), 1);
    assert_eq!(limiter.store().stats().unchecked, 14);

    probe.set(UP);
    clock.advance(secs(1));
    let d = limiter.check(&"k", 1).unwrap();
    assert_eq!((d.source(), d.remaining()), (Source::Store, 2));
}

/// FailurePolicy::Local and stores/failover (Cancels): while the store is down each
/// key gets the local share, keys apart; a local grant's cancel goes to the local
/// limit; a cancel of the store's grant while backed off is dropped (its permit
/// stays taken there); nothing is merged back; what an outage spent stays spent in
/// the next within its window.
#[test]
fn a_local_share_limits_each_key_while_down_and_cancels_go_where_the_grant_was_made() {
    let clock = ManualClock::new();
    let probe = Probe::new(MemoryStore::<&'static str, FixedWindow>::new());
    let share = FixedWindow::new(3, secs(60)).unwrap();
    let store = FailoverStore::new(probe.clone(), FailurePolicy::Local(share))
        .with_clock(clock.clone())
        .with_backoff(Backoff::fixed(secs(1)));
    let limiter = KeyedRateLimiter::with_store(
        FixedWindow::new(10, secs(60)).unwrap(),
        store,
        clock.clone(),
    );
    let local = |key: &'static str, remaining: u64| {
        let d = limiter.check(&key, 1).unwrap();
        assert_eq!(
            (d.source(), d.is_allowed(), d.limit(), d.remaining()),
            (Source::Local, true, 3, remaining),
            "{key}"
        );
    };

    let from_store = limiter.reserve(&"a", 1).unwrap();
    assert_eq!(from_store.decision().source(), Source::Store);
    probe.set(DOWN);
    local("a", 2);
    from_store.cancel().unwrap(); // backed off: dropped
    assert_eq!(
        (limiter.store().stats().dropped_cancels, probe.cancels()),
        (1, 0)
    );
    local("a", 1);
    local("a", 0);
    let refused = limiter.check(&"a", 1).unwrap();
    assert_eq!(
        (refused.source(), refused.verdict(), refused.retry_after()),
        (Source::Local, Verdict::Denied, secs(60))
    );
    local("b", 2);
    let from_local = limiter.reserve(&"b", 1).unwrap();
    assert_eq!(from_local.decision().source(), Source::Local);
    from_local.cancel().unwrap(); // at its instant: given back to the local limit
    local("b", 1);
    assert_eq!(probe.cancels(), 0);

    probe.set(UP);
    clock.advance(secs(1));
    let back = limiter.check(&"a", 1).unwrap();
    // The store still counts the dropped cancel's permit, and none of the local ones.
    assert_eq!((back.source(), back.remaining()), (Source::Store, 8));
    probe.set(DOWN);
    let spent = limiter.check(&"a", 1).unwrap();
    assert_eq!((spent.source(), spent.is_allowed()), (Source::Local, false));
    local("c", 2);
    let stats = limiter.store().stats();
    assert_eq!((stats.recoveries, stats.failures, stats.local), (1, 2, 9));
}

/// stores/failover (Failures): only `Error::Store` counts as a failure; any other
/// error is the call's own, returned as it is, and the store stays healthy.
#[test]
fn only_a_store_error_degrades_the_failover_store() {
    let clock = ManualClock::new();
    let probe = Probe::new(MemoryStore::<&'static str, FixedWindow>::new());
    let store = FailoverStore::new(probe.clone(), FailurePolicy::Open).with_clock(clock.clone());
    let limiter =
        KeyedRateLimiter::with_store(FixedWindow::new(3, secs(60)).unwrap(), store, clock);
    probe.set(BAD_INPUT);
    for calls in 1..=3 {
        assert!(matches!(
            limiter.check(&"k", 1),
            Err(Error::InvalidKeys { .. })
        ));
        assert_eq!(probe.calls(), calls);
    }
    assert!(matches!(
        limiter.check_all(&["k", "j"], 1),
        Err(Error::InvalidKeys { .. })
    ));
    assert!(!limiter.store().is_degraded());
    assert_eq!(limiter.store().stats().failures, 0);
    probe.set(UP);
    assert_eq!(limiter.check(&"k", 1).unwrap().source(), Source::Store);
    assert_eq!(probe.calls(), 5);
}

/// stores/failover (Back-off): once the back-off is over, the first caller probes
/// the store with its own call while every other caller keeps to the policy, at
/// once, refused with the initial back-off as retry_after.
#[test]
fn while_one_caller_probes_the_others_keep_to_the_policy() {
    let clock = ManualClock::new();
    let probe = Probe::new(MemoryStore::<&'static str, FixedWindow>::new());
    let (events, observer) = recorder();
    let store = FailoverStore::new(probe.clone(), FailurePolicy::Closed)
        .with_clock(clock.clone())
        .with_backoff(Backoff::new(secs(1), secs(8)))
        .on_degraded(observer);
    let limiter = KeyedRateLimiter::with_store(
        FixedWindow::new(10, secs(60)).unwrap(),
        store,
        clock.clone(),
    );
    probe.set(DOWN);
    assert_eq!(
        limiter.check(&"k", 1).unwrap().source(),
        Source::FailedClosed
    );
    clock.advance(secs(1));
    probe.set(UP);
    probe.arm_pause();
    std::thread::scope(|scope| {
        let prober = scope.spawn(|| limiter.check(&"k", 1).unwrap());
        probe.wait_until_paused();
        for _ in 0..8 {
            let other = limiter.check(&"j", 1).unwrap();
            assert_eq!(
                (other.source(), other.retry_after()),
                (Source::FailedClosed, secs(1))
            );
        }
        assert_eq!(probe.calls(), 2);
        probe.release();
        let probed = prober.join().unwrap();
        assert_eq!((probed.source(), probed.remaining()), (Source::Store, 9));
    });
    assert!(!limiter.store().is_degraded());
    assert_eq!(limiter.check(&"j", 1).unwrap().source(), Source::Store);
    let stats = limiter.store().stats();
    assert_eq!(
        (stats.probes, stats.recoveries, stats.failed_closed),
        (1, 1, 9)
    );
    let seen = events.lock().unwrap();
    assert_eq!(seen[0], (Source::FailedClosed, true));
    assert!(seen[1..]
        .iter()
        .all(|&e| e == (Source::FailedClosed, false)));
}

// ---------------------------------------------------------------------------
// Many threads and tasks on the real clock.
// ---------------------------------------------------------------------------

/// KeyedRateLimiter: thread-safe, one limit per key. Eight threads hammer four
/// `String` keys of one limiter (by `&str`, and in pairs with `check_all`) on the
/// real clock: a sliding log of 40 a minute admits exactly 40 per key, since the
/// test runs well within the minute.
#[test]
fn eight_threads_on_the_real_clock_never_exceed_a_keys_limit() {
    const LIMIT: u64 = 40;
    let log = SlidingLog::new(LIMIT, secs(60)).unwrap();
    let limiter: KeyedRateLimiter<String, SlidingLog> = KeyedRateLimiter::new(log);
    let names = ["k0", "k1", "k2", "k3"];
    let granted: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
    std::thread::scope(|scope| {
        for t in 0..8u64 {
            let (limiter, granted) = (&limiter, &granted);
            scope.spawn(move || {
                let mut rng = Rng::new(100 + t);
                for _ in 0..3_000 {
                    let i = rng.below(4) as usize;
                    match rng.below(3) {
                        0 => {
                            if limiter.try_acquire(names[i]) {
                                granted[i].fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        1 => {
                            if limiter.check(names[i], 1).unwrap().is_allowed() {
                                granted[i].fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        _ => {
                            let j = (i + 1) % 4;
                            let pair = [names[i].to_owned(), names[j].to_owned()];
                            if limiter.check_all(&pair, 1).unwrap().is_allowed() {
                                granted[i].fetch_add(1, Ordering::SeqCst);
                                granted[j].fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    }
                }
            });
        }
    });
    let granted: Vec<u64> = granted.iter().map(|g| g.load(Ordering::SeqCst)).collect();
    assert_eq!(granted, [LIMIT; 4]);
    assert_eq!(limiter.live_keys(), 4);
}

/// AsyncKeyedRateLimiter over a deny cache: sixteen tokio tasks on four worker
/// threads hammer three keys; each key admits exactly its limit, and the cache
/// answers refusals on the async path.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_tasks_over_a_deny_cache_never_exceed_a_keys_limit() {
    const LIMIT: u64 = 25;
    let log = SlidingLog::new(LIMIT, secs(60)).unwrap();
    let store = DenyCache::new(MemoryStore::new(), &log).unwrap();
    let limiter: KeyedRateLimiter<String, _, _, _> =
        KeyedRateLimiter::with_store(log, store, DefaultClock::new());
    let handle = limiter.to_async();
    let granted: Arc<Vec<AtomicU64>> = Arc::new((0..3).map(|_| AtomicU64::new(0)).collect());
    let tasks: Vec<_> = (0..16u64)
        .map(|t| {
            let (handle, granted) = (handle.clone(), Arc::clone(&granted));
            tokio::spawn(async move {
                let mut rng = Rng::new(200 + t);
                for n in 0..500 {
                    let i = rng.below(3) as usize;
                    let key = format!("user:{i}");
                    let ok = if n % 2 == 0 {
                        handle.check(key.as_str(), 1).await.unwrap().is_allowed()
                    } else {
                        handle
                            .try_acquire_n_timeout(key.as_str(), 1, Duration::ZERO)
                            .await
                            .unwrap()
                    };
                    if ok {
                        granted[i].fetch_add(1, Ordering::SeqCst);
                    }
                    if n % 50 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let granted: Vec<u64> = granted.iter().map(|g| g.load(Ordering::SeqCst)).collect();
    assert_eq!(granted, [LIMIT; 3]);
    assert!(
        limiter.store().hits() > 1_000,
        "hits: {}",
        limiter.store().hits()
    );
}

/// stores/lease (Bounds) on the real clock: four limiters, each over its own lease
/// table in front of one shared store, two threads each. A sliding log of 100 a
/// minute, leases of 7 good for a minute: never more than 100 admitted, and at most
/// `N·(L−1)` = 24 left unspent in leases once the store is spent.
#[test]
fn eight_threads_leasing_from_one_store_stay_within_the_lease_bounds() {
    const LIMIT: u64 = 100;
    let log = SlidingLog::new(LIMIT, secs(60)).unwrap();
    let shared = Probe::new(MemoryStore::<u64, SlidingLog>::new());
    let limiters: Vec<_> = (0..4)
        .map(|_| {
            let leased = LeasedStore::new(shared.clone(), 7, secs(60)).unwrap();
            KeyedRateLimiter::with_store(log, leased, DefaultClock::new())
        })
        .collect();
    let admitted = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for t in 0..8 {
            let (limiter, admitted) = (&limiters[t / 2], &admitted);
            scope.spawn(move || {
                for _ in 0..2_000 {
                    if limiter.try_acquire(&5) {
                        admitted.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    let admitted = admitted.load(Ordering::SeqCst);
    assert_eq!(shared.granted(), LIMIT);
    assert!(
        (LIMIT - 4 * 6..=LIMIT).contains(&admitted),
        "{admitted} admitted"
    );
}
