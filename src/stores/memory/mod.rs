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

mod many_keys;
mod one_key;
mod shard;
mod table;

use self::shard::{default_shards, Shard};
use super::store::{Operation, Reporting, Store};
use crate::algorithms::{Algorithm, Decision, Receipt, Report};
use crate::clock::Nanos;
use crate::error::{ConfigError, Error};
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};

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

impl<K, A: Algorithm> MemoryStore<K, A> {
    /// An empty, uncapped store with the default hasher and `8 × cores` shards
    /// (rounded up to a power of two, between 16 and 4096). Allocates only the shard
    /// array; tables grow as keys arrive.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::MemoryStore;
    /// let store: MemoryStore<String, SmoothBursty> = MemoryStore::new();
    /// assert!(store.shards().is_power_of_two());
    /// assert!((16..=4096).contains(&store.shards()));
    /// assert_eq!(store.max_keys(), None); // uncapped
    /// assert_eq!(store.live_keys(), 0);
    /// assert_eq!(store.table_bytes(), 0); // no table allocated yet
    /// ```
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
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::MemoryStore;
    /// use sluicegate::{clock::ManualClock, Error, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// // One shard: a new key may forget the replenished keys of its own shard.
    /// let store = MemoryStore::new().with_shards(1).unwrap().with_max_keys(1).unwrap();
    /// let clock = ManualClock::new();
    /// let limiter = KeyedRateLimiter::with_store(window, store, clock.clone());
    /// assert!(limiter.check(&"a", 1).unwrap().is_allowed());
    /// // Full, and "a" has not replenished: a new key is refused, consuming nothing.
    /// assert_eq!(limiter.check(&"b", 1).unwrap_err(), Error::StoreFull { max_keys: 1 });
    /// assert!(!limiter.check(&"a", 1).unwrap().is_allowed()); // held keys keep working
    /// clock.advance(Duration::from_secs(1)); // "a" replenishes and can be forgotten
    /// assert!(limiter.check(&"b", 1).unwrap().is_allowed());
    /// assert_eq!(limiter.store().live_keys(), 1);
    /// assert!(MemoryStore::<&str, FixedWindow>::new().with_max_keys(0).is_err());
    /// ```
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
    /// horizon, plus replenished ones the lazy sweep has not reached yet. Reads
    /// one counter per shard, without locking: under concurrent calls it is a
    /// snapshot, not an exact count.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::MemoryStore;
    /// use sluicegate::{clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(5, Duration::from_secs(1)).unwrap();
    /// let limiter = KeyedRateLimiter::with_store(window, MemoryStore::new(), ManualClock::new());
    /// assert_eq!(limiter.store().live_keys(), 0);
    /// for key in ["a", "b", "a"] {
    ///     limiter.check(&key, 1).unwrap();
    /// }
    /// assert_eq!(limiter.store().live_keys(), 2); // one state per distinct key
    /// limiter.peek(&"c", 1).unwrap();
    /// assert_eq!(limiter.store().live_keys(), 2); // a peek creates no state
    /// ```
    pub fn live_keys(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.len.load(Ordering::Relaxed))
            .sum()
    }

    /// The cap on keys, if any: `None` for an uncapped store.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::MemoryStore;
    /// let store: MemoryStore<u64, SmoothBursty> = MemoryStore::new();
    /// assert_eq!(store.max_keys(), None);
    /// assert_eq!(store.with_max_keys(10_000).unwrap().max_keys(), Some(10_000));
    /// ```
    pub fn max_keys(&self) -> Option<usize> {
        (self.max_keys != usize::MAX).then_some(self.max_keys)
    }

    /// The number of shards: a power of two, fixed when the store is built
    /// ([`with_shards`](Self::with_shards), or the default of [`new`](MemoryStore::new)).
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::MemoryStore;
    /// let store: MemoryStore<u64, SmoothBursty> = MemoryStore::new().with_shards(1).unwrap();
    /// assert_eq!(store.shards(), 1);
    /// assert_eq!(store.with_shards(8).unwrap().shards(), 8);
    /// ```
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// The bytes held by the tables' slot arrays (excluding allocator overhead and
    /// the shard array). Locks each shard in turn. Zero for a new store; it grows
    /// with the keys held, each slot a 64-bit hash and the state.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::MemoryStore;
    /// use sluicegate::{clock::ManualClock, KeyedRateLimiter};
    /// let store: MemoryStore<u64, SmoothBursty> = MemoryStore::new().with_shards(1).unwrap();
    /// assert_eq!(store.table_bytes(), 0);
    /// let bursty = SmoothBursty::new(1.0).unwrap();
    /// let limiter = KeyedRateLimiter::with_store(bursty, store, ManualClock::new());
    /// for key in 0..100u64 {
    ///     limiter.check(&key, 1).unwrap();
    /// }
    /// let bytes = limiter.store().table_bytes();
    /// assert!(bytes >= 100 * 16, "{bytes}"); // 16 bytes a slot for a bursty key
    /// ```
    pub fn table_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.inner.lock().table.allocated_bytes())
            .sum()
    }
}

/// For `K` and its borrowed form (`str` for `String` keys), as `HashMap::get`
/// is: a key and its borrowed form hash alike, so they name one state. (The
/// borrowed form is the one whose owned form is `K`, which names `K` when a
/// store's type is inferred.)
impl<K, Q, A, H> Store<Q, A> for MemoryStore<K, A, H>
where
    Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    A: Algorithm,
    H: BuildHasher + Send + Sync,
{
    type Pending = futures::future::Ready<Result<Vec<(Decision, Receipt)>, Error>>;

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
        super::store::check_output(keys.len(), out.len())?;
        match keys {
            [] => Ok(()),
            [key] => {
                let answer: (Decision, Receipt) = self.apply_one(algorithm, key, now, step)?;
                if !matches!(step, Operation::Cancel { .. }) {
                    out[0] = answer;
                }
                Ok(())
            }
            _ => self.apply_many(algorithm, keys, now, step, out),
        }
    }

    #[inline]
    fn apply_key<R: Report>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<R, Error> {
        self.apply_one(algorithm, key, now, step)
    }

    /// True: a step waits only on a shard's lock.
    const ANSWERS_AT_ONCE: bool = true;

    /// Runs the step and reports every limit under the shard's one lock.
    fn apply_key_each(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
        let Operation::Reserve { .. } = step else {
            let answer: (Decision, Receipt) = self.apply_one(algorithm, key, now, step)?;
            each(answer.0);
            return Ok(answer);
        };
        self.apply_one_each(algorithm, key, now, step, each)
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
        let mut each = Vec::new();
        let result = self.apply_key_each(algorithm, key, now, step, &mut |d| each.push(d));
        Box::pin(futures::future::ready(result.map(|answer| (answer, each))))
    }

    fn apply_async(
        &self,
        algorithm: &A,
        keys: &[Q],
        now: Nanos,
        step: Operation<'_>,
    ) -> Self::Pending
    where
        Q: Sized,
    {
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
        keys: &[Q],
        now: Nanos,
        receipts: &[Receipt],
        acts_at: Nanos,
    ) where
        Q: Sized,
    {
        let mut out = vec![super::store::blank(); keys.len()];
        // A cancel only ever gives permits back; a store error (none is possible for
        // a cancel, which inserts nothing) would leave them taken.
        let _ = self.apply(
            algorithm,
            keys,
            now,
            Operation::Cancel { receipts, acts_at },
            &mut out,
        );
    }

    /// The key's hash, the store's own (secretly keyed, 64 bits).
    fn key_id(&self, key: &Q) -> Option<u64> {
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
