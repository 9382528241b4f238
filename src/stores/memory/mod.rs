//! The in-memory store: a sharded table of per-key states that forgets idle keys
//! by itself.
//!
//! # The model
//!
//! ```text
//!   key ──hash (SipHash, secret per store)──▶ h: u64
//!         h mod shards ─▶ shard (a mutex, on its own cache lines)
//!                          └─ table: [ (h, state) … ]   Robin Hood, 7/8 full at most
//! ```
//!
//! Each call hashes its key once, locks one shard (calls on other shards never
//! wait), finds the slot and runs the algorithm step on the state in place. There is
//! no background thread. Keys whose state has fully replenished
//! ([`Algorithm::is_replenished`]) are forgotten lazily, paid for by ordinary calls:
//!
//! * before a shard's table grows, it forgets every replenished key it holds, and
//!   grows only if it is still more than 3/4 full. Growth is O(n) anyway, so this
//!   sweep costs no more than the growth it often avoids, and it is what bounds
//!   memory under a flood of new keys: a table grows only for keys that still
//!   matter;
//! * every 16th call on a shard also looks at the next slot of a sweep cursor, so
//!   that a shard whose keys went idle empties, and a table that falls below 1/4
//!   full shrinks, without any new key arriving.
//!
//! The sweep is deliberately slow: a key used steadily below its rate is replenished
//! between its calls, and forgetting it only to add it again would cost time for no
//! memory.
//!
//! So memory follows the keys *active within their limits' horizon*, not every key
//! ever seen, without any manual call (governor needs `retain_recent`). Forgetting a
//! replenished key changes no decision (see the [store contract](super::store)).
//!
//! # What a key costs
//!
//! A slot is the 64-bit hash and the state, nothing else: 16 bytes for a Guava
//! bursty key (its state is one `i64`). There is no stored key, no control byte and no
//! per-key allocation; capacity grows by half rather than doubling. At 1 million keys
//! that is about 20–27 bytes per key, measured as resident memory growth.
//!
//! **Keys are identified by their hash.** Two distinct keys whose 64-bit hashes are
//! equal share one state. With the default hasher (SipHash-1-3 keyed by a random
//! secret drawn for each store, `std`'s `RandomState`), an outsider cannot choose keys
//! that collide, and among `n` live keys the chance that any two collide is about
//! `n²/2⁶⁵`: 3·10⁻⁸ at a million keys. A collision can only make the
//! two keys *stricter* (they share one allowance), never more permissive. This is the
//! trade that halves the memory of a table storing the keys; the `Eq` bound on keys
//! is kept so that a future exact mode can be added without an API change.
//!
//! # The cap
//!
//! [`with_max_keys`](MemoryStore::with_max_keys) bounds the number of keys held.
//! When full, a call that needs a new key first forgets the replenished keys of its
//! shard (all of them on the first refusal, then a few slots per refused call and
//! all of them again once per quarter-shard of refusals, so a flood of new keys
//! cannot make every call scan a shard; other shards forget theirs through their
//! own traffic); if the store is still full the call fails with
//! [`Error::StoreFull`] and consumes nothing. Keys already held keep working and
//! are **never evicted before they have replenished**: evicting a limited key (say,
//! least recently used) would hand it a fresh allowance, so an attacker could reset
//! their own limit by flooding new keys. Refusing new keys instead keeps every limit
//! exact and lets the caller choose what a refused new key means (fail closed: answer
//! 429; fail open: let it through) from a typed error.

mod table;

use self::table::{Probe, Table};
use super::store::{Reporting, Step, Store};
use crate::algorithms::{Algorithm, Decision, Receipt};
use crate::clock::Nanos;
use crate::error::{ConfigError, Error};
use parking_lot::{Mutex, MutexGuard};
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Every this many calls on a shard, the sweep looks at one slot. Rare enough that
/// a key used steadily below its rate (so replenished between calls) is seldom
/// forgotten and re-added; frequent enough that a shard whose keys went idle
/// shrinks after a few passes of ordinary traffic.
const TICK_SWEEP_EVERY: u32 = 16;
/// Slots the sweep looks at on a refusal of a full store between two full sweeps.
const REFUSAL_SWEEP: usize = 4;

/// A sharded in-memory [`Store`] for any `Hash + Eq` key and any algorithm. See the
/// [module docs](self) for the layout, the lazy forgetting of idle keys, what a key
/// costs and the cap's policy.
///
/// It never fails except when capped and full ([`Error::StoreFull`]). `H` is the
/// hasher; the default is `std`'s randomly keyed SipHash, which keeps hash
/// collisions out of an attacker's reach.
///
/// ```
/// use sluicegate::algorithms::SmoothBursty;
/// use sluicegate::stores::MemoryStore;
/// let store: MemoryStore<u64, SmoothBursty> = MemoryStore::new().with_max_keys(1_000_000).unwrap();
/// assert_eq!(store.live_keys(), 0);
/// ```
pub struct MemoryStore<K, A: Algorithm, H = RandomState> {
    shards: Box<[Shard<A::State>]>,
    hasher: H,
    live: AtomicUsize,
    max_keys: usize,
    _key: PhantomData<fn(&K)>,
}

/// One shard, alone on its cache lines so that two shards' locks never share one.
#[repr(align(128))]
struct Shard<S> {
    inner: Mutex<ShardState<S>>,
    /// The table's length, published after each call for [`MemoryStore::live_keys`]
    /// (a plain store under the lock, not a shared counter every call would contend on).
    len: AtomicUsize,
}

struct ShardState<S> {
    table: Table<S>,
    /// Calls since the shard was created (wrapping), to pace the sweep.
    ticks: u32,
    /// New keys refused since the last full sweep done to make room.
    refused: usize,
}

impl<S: Clone> Shard<S> {
    fn new() -> Self {
        Shard {
            inner: Mutex::new(ShardState {
                table: Table::new(),
                ticks: 0,
                refused: 0,
            }),
            len: AtomicUsize::new(0),
        }
    }
}

fn default_shards() -> usize {
    let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
    (cores * 8).next_power_of_two().clamp(16, 4096)
}

impl<K, A: Algorithm> MemoryStore<K, A> {
    /// An empty, uncapped store with the default hasher and `8 × cores` shards
    /// (rounded up to a power of two, between 16 and 4096). Allocates only the shard
    /// array; tables grow as keys arrive.
    pub fn new() -> Self {
        Self::with_hasher(RandomState::new())
    }
}

impl<K, A: Algorithm> Default for MemoryStore<K, A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K, A: Algorithm, H> MemoryStore<K, A, H> {
    /// An empty, uncapped store hashing keys with `hasher`.
    ///
    /// A hasher that is not keyed with a secret (e.g. a fixed-seed fast hash) lets
    /// whoever chooses keys make them collide, and colliding keys share one state:
    /// use one only for keys you trust.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::MemoryStore;
    /// use std::collections::hash_map::RandomState;
    /// let store: MemoryStore<u32, SmoothBursty, _> = MemoryStore::with_hasher(RandomState::new());
    /// assert_eq!(store.max_keys(), None);
    /// ```
    pub fn with_hasher(hasher: H) -> Self {
        MemoryStore {
            shards: (0..default_shards()).map(|_| Shard::new()).collect(),
            hasher,
            live: AtomicUsize::new(0),
            max_keys: usize::MAX,
            _key: PhantomData,
        }
    }

    /// The same store with `shards` shards (a power of two, 1 to 65536). More shards
    /// mean less contention between threads and a few hundred bytes each.
    ///
    /// # Errors
    /// [`ConfigError::InvalidCount`] if `shards` is not a power of two in range.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::MemoryStore;
    /// let store: MemoryStore<u64, SmoothBursty> = MemoryStore::new().with_shards(4).unwrap();
    /// assert_eq!(store.shards(), 4);
    /// assert!(MemoryStore::<u64, SmoothBursty>::new().with_shards(3).is_err());
    /// ```
    pub fn with_shards(mut self, shards: usize) -> Result<Self, ConfigError> {
        if !shards.is_power_of_two() || shards > 65536 {
            return Err(ConfigError::InvalidCount {
                what: "shards",
                value: shards as u64,
                requirement: "a power of two from 1 to 65536",
            });
        }
        self.shards = (0..shards).map(|_| Shard::new()).collect();
        self.live = AtomicUsize::new(0);
        Ok(self)
    }

    /// The same store holding at most `max_keys` keys; see the [module docs](self)
    /// for what happens when it is full.
    ///
    /// # Errors
    /// [`ConfigError::InvalidCount`] for 0.
    pub fn with_max_keys(mut self, max_keys: usize) -> Result<Self, ConfigError> {
        if max_keys == 0 {
            return Err(ConfigError::InvalidCount {
                what: "max_keys",
                value: 0,
                requirement: "at least 1",
            });
        }
        self.max_keys = max_keys;
        Ok(self)
    }

    /// The number of keys whose state is held now: keys active within their
    /// horizon, plus replenished ones the lazy sweep has not reached yet.
    pub fn live_keys(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.len.load(Ordering::Relaxed))
            .sum()
    }

    /// The cap on keys, if any.
    pub fn max_keys(&self) -> Option<usize> {
        (self.max_keys != usize::MAX).then_some(self.max_keys)
    }

    /// The number of shards.
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// The bytes held by the tables' slot arrays (excluding allocator overhead and
    /// the shard array). Locks each shard in turn.
    pub fn table_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.inner.lock().table.allocated_bytes())
            .sum()
    }

    /// Claims room for `count` new keys under the cap. Uncapped stores keep no
    /// global count, so adding a key touches no shared counter.
    fn claim(&self, count: usize) -> bool {
        if self.max_keys == usize::MAX {
            return true;
        }
        self.live
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
                live.checked_add(count)
                    .filter(|&total| total <= self.max_keys)
            })
            .is_ok()
    }

    fn release(&self, count: usize) {
        if count > 0 && self.max_keys != usize::MAX {
            self.live.fetch_sub(count, Ordering::Relaxed);
        }
    }
}

impl<K, A: Algorithm, H: BuildHasher> MemoryStore<K, A, H> {
    #[inline]
    fn hash(&self, key: &K) -> u64
    where
        K: Hash,
    {
        // 0 marks an empty slot.
        self.hasher.hash_one(key).max(1)
    }

    #[inline]
    fn shard_of(&self, hash: u64) -> usize {
        // Low bits pick the shard; the table's home slot comes from the high bits.
        (hash as usize) & (self.shards.len() - 1)
    }

    /// Forgets replenished keys of a shard to make room under the cap: all of them
    /// on the first refusal since a key was last added to the shard and once per
    /// quarter of the shard's size in further refusals; the next few slots of the
    /// sweep cursor on the refusals in between. A flood of new keys into a full
    /// store thus costs O(1) amortized per call, never a scan each, and room that
    /// time has made is still found within a quarter-shard of refusals.
    fn sweep_for_room(&self, shard: &mut ShardState<A::State>, algorithm: &A, now: Nanos) {
        let empty = algorithm.initial_state(0);
        let forget = |state: &A::State| algorithm.is_replenished(state, now);
        let freed = if shard.refused > 0 && shard.refused < shard.table.len() / 4 {
            shard.refused += 1;
            shard.table.sweep(REFUSAL_SWEEP, &empty, forget)
        } else {
            shard.refused = 1;
            shard.table.sweep_all(&empty, forget)
        };
        self.release(freed);
        shard.table.maybe_shrink(&empty);
    }

    /// Adds a key whose room under the cap is already claimed.
    fn insert(
        &self,
        shard: &mut ShardState<A::State>,
        hash: u64,
        state: A::State,
        algorithm: &A,
        now: Nanos,
    ) {
        shard.refused = 0;
        let empty = algorithm.initial_state(0);
        let forget = |state: &A::State| algorithm.is_replenished(state, now);
        if !shard.table.has_room() {
            let freed = shard.table.sweep_all(&empty, forget);
            self.release(freed);
            if shard.table.is_crowded() {
                shard.table.grow(&empty);
            }
        }
        shard.table.insert(hash, state, &empty);
    }

    /// The pacing sweep every call pays for.
    #[inline]
    fn tick(&self, shard: &mut ShardState<A::State>, algorithm: &A, now: Nanos) {
        shard.ticks = shard.ticks.wrapping_add(1);
        if shard.ticks % TICK_SWEEP_EVERY != 0 {
            return;
        }
        let empty = algorithm.initial_state(0);
        let freed = shard
            .table
            .sweep(1, &empty, |state| algorithm.is_replenished(state, now));
        if freed > 0 {
            self.release(freed);
            shard.table.maybe_shrink(&empty);
        }
    }

    #[inline]
    fn apply_one(
        &self,
        algorithm: &A,
        key: &K,
        now: Nanos,
        step: Step<'_>,
    ) -> Result<(Decision, Receipt), Error>
    where
        K: Hash,
    {
        self.apply_one_with::<false>(algorithm, key, now, step, &mut |_| {})
    }

    /// [`apply_one`](Self::apply_one), also reporting every limit to `each` when
    /// `EACH` (see [`Algorithm::reserve_each`]); without it, the plain step.
    #[inline(always)]
    fn apply_one_with<const EACH: bool>(
        &self,
        algorithm: &A,
        key: &K,
        now: Nanos,
        step: Step<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error>
    where
        K: Hash,
    {
        self.locked(key, |shard, hash| {
            self.step_one::<EACH>(shard, algorithm, hash, now, step, each)
        })
    }

    /// [`Store::try_take_key`]: the algorithm's lean step under the shard's lock.
    #[inline]
    fn try_take_one(
        &self,
        algorithm: &A,
        key: &K,
        now: Nanos,
        cost: u64,
    ) -> Result<Option<Decision>, Error>
    where
        K: Hash,
    {
        self.locked(key, |shard, hash| {
            let refusal = self.reserve_in(shard, algorithm, hash, now, |state| {
                let refusal = algorithm.try_take(state, now, cost);
                let granted = refusal.is_none();
                (refusal, granted)
            })?;
            self.tick(shard, algorithm, now);
            Ok(refusal)
        })
    }

    /// Runs `f` on the shard of `key` (and the key's hash) under its lock, then
    /// publishes the shard's length.
    #[inline(always)]
    fn locked<R>(&self, key: &K, f: impl FnOnce(&mut ShardState<A::State>, u64) -> R) -> R
    where
        K: Hash,
    {
        let hash = self.hash(key);
        let home = &self.shards[self.shard_of(hash)];
        let mut guard = home.inner.lock();
        let result = f(&mut guard, hash);
        home.len.store(guard.table.len(), Ordering::Relaxed);
        result
    }

    /// Runs a reserving `step` on the state of `hash`, or on a new key's initial
    /// state, which is kept only if `step` granted (it answers that beside its
    /// answer) and left something to remember.
    #[inline(always)]
    fn reserve_in<R>(
        &self,
        shard: &mut ShardState<A::State>,
        algorithm: &A,
        hash: u64,
        now: Nanos,
        step: impl FnOnce(&mut A::State) -> (R, bool),
    ) -> Result<R, Error> {
        // One call site for `step`, so that it is inlined.
        let mut fresh = None;
        let state = match shard.table.find(hash) {
            Probe::Found(at) => shard.table.state_mut(at),
            Probe::Absent => fresh.insert(algorithm.initial_state(0)),
        };
        let (answer, granted) = step(state);
        if let Some(state) = fresh {
            if granted && !algorithm.is_replenished(&state, now) {
                if !self.claim(1) {
                    self.sweep_for_room(shard, algorithm, now);
                    if !self.claim(1) {
                        return Err(self.full());
                    }
                }
                self.insert(shard, hash, state, algorithm, now);
            }
        }
        Ok(answer)
    }

    #[inline]
    fn step_one<const EACH: bool>(
        &self,
        shard: &mut ShardState<A::State>,
        algorithm: &A,
        hash: u64,
        now: Nanos,
        step: Step<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
        let answer = match step {
            Step::Reserve { cost, max_wait } => {
                self.reserve_in(shard, algorithm, hash, now, |state| {
                    let answer = if EACH {
                        algorithm.reserve_each(state, now, cost, max_wait, &mut *each)
                    } else {
                        algorithm.reserve_with_receipt(state, now, cost, max_wait)
                    };
                    let allowed = answer.0.is_allowed();
                    (answer, allowed)
                })?
            }
            Step::Peek { cost } => {
                let decision = match shard.table.find(hash) {
                    Probe::Found(at) => algorithm.peek(shard.table.state(at), now, cost),
                    Probe::Absent => algorithm.peek(&algorithm.initial_state(0), now, cost),
                };
                (decision, Receipt::NONE)
            }
            Step::Cancel { receipts, acts_at } => {
                let receipt = receipts.first().cloned().unwrap_or(Receipt::NONE);
                if let Probe::Found(at) = shard.table.find(hash) {
                    algorithm.cancel(shard.table.state_mut(at), now, &receipt, acts_at);
                }
                super::store::blank()
            }
        };
        self.tick(shard, algorithm, now);
        Ok(answer)
    }

    fn full(&self) -> Error {
        Error::StoreFull {
            max_keys: self.max_keys as u64,
        }
    }

    fn apply_many(
        &self,
        algorithm: &A,
        keys: &[K],
        now: Nanos,
        step: Step<'_>,
        out: &mut [(Decision, Receipt)],
    ) -> Result<(), Error>
    where
        K: Hash,
    {
        let hashes: Vec<u64> = keys.iter().map(|key| self.hash(key)).collect();
        let mut shard_ids: Vec<usize> = hashes.iter().map(|&h| self.shard_of(h)).collect();
        shard_ids.sort_unstable();
        shard_ids.dedup();
        // Locks are taken in shard order, so two multi-key calls never deadlock.
        let mut guards: Vec<MutexGuard<'_, ShardState<A::State>>> = shard_ids
            .iter()
            .map(|&id| self.shards[id].inner.lock())
            .collect();
        let lock_of: Vec<usize> = hashes
            .iter()
            .map(|&h| shard_ids.binary_search(&self.shard_of(h)).unwrap_or(0))
            .collect();
        let result = match step {
            Step::Reserve { cost, max_wait } => self.reserve_many(
                algorithm,
                &hashes,
                &lock_of,
                &mut guards,
                now,
                (cost, max_wait),
                out,
            ),
            Step::Peek { cost } => {
                let work = working_states(algorithm, &hashes, &lock_of, &guards);
                run_reserves(algorithm, work, &hashes, now, (cost, 0), out);
                for (_, receipt) in out.iter_mut() {
                    *receipt = Receipt::NONE;
                }
                Ok(())
            }
            Step::Cancel { receipts, acts_at } => {
                for (index, &hash) in hashes.iter().enumerate() {
                    let receipt = receipts.get(index).cloned().unwrap_or(Receipt::NONE);
                    let table = &mut guards[lock_of[index]].table;
                    if let Probe::Found(at) = table.find(hash) {
                        algorithm.cancel(table.state_mut(at), now, &receipt, acts_at);
                    }
                }
                Ok(())
            }
        };
        for (guard, &id) in guards.iter_mut().zip(&shard_ids) {
            self.tick(guard, algorithm, now);
            self.shards[id]
                .len
                .store(guard.table.len(), Ordering::Relaxed);
        }
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn reserve_many(
        &self,
        algorithm: &A,
        hashes: &[u64],
        lock_of: &[usize],
        guards: &mut [MutexGuard<'_, ShardState<A::State>>],
        now: Nanos,
        request: (u64, Nanos),
        out: &mut [(Decision, Receipt)],
    ) -> Result<(), Error> {
        let mut swept = false;
        loop {
            let work = working_states(algorithm, hashes, lock_of, guards);
            let work = run_reserves(algorithm, work, hashes, now, request, out);
            if !out.iter().all(|(decision, _)| decision.is_allowed()) {
                return Ok(());
            }
            let new = work
                .iter()
                .filter(|w| !w.held && !algorithm.is_replenished(&w.state, now))
                .count();
            if new > 0 && !self.claim(new) {
                if swept {
                    return Err(self.full());
                }
                // Making room may forget keys this call read: start again from the
                // tables (forgetting changed no decision, only what is held).
                for guard in guards.iter_mut() {
                    self.sweep_for_room(guard, algorithm, now);
                }
                swept = true;
                continue;
            }
            // Existing keys first: inserting may move entries around.
            for w in work.iter().filter(|w| w.held) {
                let table = &mut guards[w.lock].table;
                if let Probe::Found(at) = table.find(w.hash) {
                    *table.state_mut(at) = w.state.clone();
                }
            }
            for w in work {
                if !w.held && !algorithm.is_replenished(&w.state, now) {
                    self.insert(&mut guards[w.lock], w.hash, w.state, algorithm, now);
                }
            }
            return Ok(());
        }
    }
}

/// The working copy of one distinct key's state during a multi-key call.
struct Work<S> {
    hash: u64,
    lock: usize,
    state: S,
    held: bool,
}

/// One working state per distinct hash, copied from the tables or fresh.
fn working_states<A: Algorithm>(
    algorithm: &A,
    hashes: &[u64],
    lock_of: &[usize],
    guards: &[MutexGuard<'_, ShardState<A::State>>],
) -> Vec<Work<A::State>> {
    let mut work: Vec<Work<A::State>> = Vec::with_capacity(hashes.len());
    for (index, &hash) in hashes.iter().enumerate() {
        if work.iter().any(|w| w.hash == hash) {
            continue;
        }
        let table = &guards[lock_of[index]].table;
        let (state, held) = match table.find(hash) {
            Probe::Found(at) => (table.state(at).clone(), true),
            Probe::Absent => (algorithm.initial_state(0), false),
        };
        work.push(Work {
            hash,
            lock: lock_of[index],
            state,
            held,
        });
    }
    work
}

/// Reserves on the working states in key order (a repeated key is charged again on
/// its updated copy), writing each key's decision and receipt.
fn run_reserves<A: Algorithm>(
    algorithm: &A,
    mut work: Vec<Work<A::State>>,
    hashes: &[u64],
    now: Nanos,
    (cost, max_wait): (u64, Nanos),
    out: &mut [(Decision, Receipt)],
) -> Vec<Work<A::State>> {
    for (index, &hash) in hashes.iter().enumerate() {
        if let Some(w) = work.iter_mut().find(|w| w.hash == hash) {
            out[index] = algorithm.reserve_with_receipt(&mut w.state, now, cost, max_wait);
        }
    }
    work
}

impl<K, A, H> Store<K, A> for MemoryStore<K, A, H>
where
    K: Hash + Eq,
    A: Algorithm,
    H: BuildHasher + Send + Sync,
{
    type Pending = futures::future::Ready<Result<Vec<(Decision, Receipt)>, Error>>;

    fn apply(
        &self,
        algorithm: &A,
        keys: &[K],
        now: Nanos,
        step: Step<'_>,
        out: &mut [(Decision, Receipt)],
    ) -> Result<(), Error> {
        super::store::check_output(keys.len(), out.len())?;
        match keys {
            [] => Ok(()),
            [key] => {
                let answer = self.apply_one(algorithm, key, now, step)?;
                if !matches!(step, Step::Cancel { .. }) {
                    out[0] = answer;
                }
                Ok(())
            }
            _ => self.apply_many(algorithm, keys, now, step, out),
        }
    }

    #[inline]
    fn apply_key(
        &self,
        algorithm: &A,
        key: &K,
        now: Nanos,
        step: Step<'_>,
    ) -> Result<(Decision, Receipt), Error> {
        self.apply_one(algorithm, key, now, step)
    }

    #[inline]
    fn try_take_key(
        &self,
        algorithm: &A,
        key: &K,
        now: Nanos,
        cost: u64,
    ) -> Result<Option<Decision>, Error> {
        self.try_take_one(algorithm, key, now, cost)
    }

    /// True: a step waits only on a shard's lock.
    fn answers_at_once(&self) -> bool {
        true
    }

    /// Runs the step and reports every limit under the shard's one lock.
    fn apply_key_each(
        &self,
        algorithm: &A,
        key: &K,
        now: Nanos,
        step: Step<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
        let Step::Reserve { .. } = step else {
            let answer = self.apply_one(algorithm, key, now, step)?;
            each(answer.0);
            return Ok(answer);
        };
        self.apply_one_with::<true>(algorithm, key, now, step, each)
    }

    fn apply_key_each_async(
        &self,
        algorithm: &A,
        key: &K,
        now: Nanos,
        step: Step<'_>,
    ) -> Reporting {
        let mut each = Vec::new();
        let result = self.apply_key_each(algorithm, key, now, step, &mut |d| each.push(d));
        Box::pin(futures::future::ready(result.map(|answer| (answer, each))))
    }

    fn apply_async(&self, algorithm: &A, keys: &[K], now: Nanos, step: Step<'_>) -> Self::Pending {
        let mut out = vec![super::store::blank(); keys.len()];
        let result = self
            .apply(algorithm, keys, now, step, &mut out)
            .map(|()| out);
        futures::future::ready(result)
    }

    /// Applies the cancel at once: the in-memory store never waits on anything but
    /// its shard locks.
    fn cancel_detached(
        &self,
        algorithm: &A,
        keys: &[K],
        now: Nanos,
        receipts: &[Receipt],
        acts_at: Nanos,
    ) {
        let mut out = vec![super::store::blank(); keys.len()];
        // A cancel only ever gives permits back; a store error (none is possible for
        // a cancel, which inserts nothing) would leave them taken.
        let _ = self.apply(
            algorithm,
            keys,
            now,
            Step::Cancel { receipts, acts_at },
            &mut out,
        );
    }

    /// The key's hash, the store's own (secretly keyed, 64 bits).
    fn key_id(&self, key: &K) -> Option<u64> {
        Some(self.hash(key))
    }
}

impl<K, A: Algorithm, H> fmt::Debug for MemoryStore<K, A, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.shards.len())
            .field("live_keys", &self.live_keys())
            .field("max_keys", &self.max_keys())
            .finish_non_exhaustive()
    }
}
