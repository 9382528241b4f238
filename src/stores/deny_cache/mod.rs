//! A local cache of refusals for any store (Redis, typically): [`DenyCache`]
//! wraps a store and, once it has refused a key, refuses that key's further
//! zero-wait calls itself until the refusal's `retry_after`, without a round
//! trip. A key hammered by a client that is over its limit then costs a hash
//! lookup under a shard lock, as an in-memory limiter does.
//!
//! ```
//! use sluicegate::algorithms::FixedWindow;
//! use sluicegate::stores::deny_cache::DenyCache;
//! use sluicegate::stores::MemoryStore;
//! use sluicegate::{KeyedRateLimiter, ManualClock};
//! use std::time::Duration;
//! let window = FixedWindow::new(1, Duration::from_secs(10)).unwrap();
//! let store = DenyCache::new(MemoryStore::new(), &window)?;
//! let clock = ManualClock::new();
//! let limiter = KeyedRateLimiter::with_store(window, store, clock.clone());
//! assert!(limiter.check(&"alice", 1)?.is_allowed());
//! assert!(!limiter.check(&"alice", 1)?.is_allowed()); // the store refused
//! clock.advance(Duration::from_secs(4));
//! let cached = limiter.check(&"alice", 1)?; // no round trip
//! assert_eq!(cached.retry_after(), Duration::from_secs(6));
//! assert_eq!(limiter.store().hits(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The model
//!
//! ```text
//!   zero-wait call (cost c) ──cached refusal of cost ≤ c, not expired──▶ refusal, counted in hits()
//!     └──otherwise──▶ inner store ──refused (Source::Store)──▶ kept until now + retry_after
//!                                 └──granted──▶ the key's refusal (if any) dropped
//!   wait-willing reserve, multi-key call ──▶ inner store (a grant drops the keys' refusals)
//!   cancel ──▶ the keys' refusals dropped, then the inner store
//! ```
//!
//! * **What is cached.** A refusal (`Denied`, never `Never`) the inner store
//!   itself made ([`Source::Store`]: a failover policy's answer is not cached) to
//!   a zero-wait single-key call: an [`Operation::Reserve`](super::Operation::Reserve) with
//!   `max_wait` 0 (whatever the [`Report`](crate::algorithms::Report) asked) or an
//!   [`Operation::Peek`](super::Operation::Peek), sync or async.
//! * **What it answers.** A zero-wait single-key call (as above) whose cost is at
//!   least the refused cost and at most the refusing limit's `limit` (a larger
//!   cost may be refused as never; the store says), before the refusal's
//!   `now + retry_after`. The answer is the store's refusal with `retry_after`
//!   and `reset_after` counted down by the time since it was made (saturating),
//!   `limit`, `remaining` and `limit_index` as the store said: it is the store's
//!   refusal, repeated while it is certain, and its
//!   [`source`](crate::Decision::source) says so ([`Source::Cached`]). [`hits`](DenyCache::hits) counts the calls so
//!   answered. Every other call goes to the inner store: a reserve willing to
//!   wait, a cancel, and any call on several keys, as simple rules are the ones
//!   that are sound. A refusal learned from
//!   [`apply_key_each`](super::Store::apply_key_each) (a keyed limiter's
//!   `check_each`, the server layer's fields) keeps the store's report of every
//!   limit of a set, and its cached answers report each limit as the store did,
//!   counted down alike, so that the fields a server sends for a key do not
//!   change when the cache answers; a refusal learned otherwise reports itself.
//! * **Why a cached refusal is certain.** By the rule of
//!   [`Decision::retry_after`](crate::Decision::retry_after), no retry of the same
//!   cost before `retry_after` can succeed *if nothing else changes the state*; a
//!   larger cost is refused for as long, the limit holding no more permits for it.
//!   Another caller's grant only takes more. What could change the answer is
//!   a refusal that counts, and a cancel:
//!   * *Refusals that count* make the cache unsound, since a refusal the cache
//!     answers is not counted: [`new`](DenyCache::new) refuses with
//!     [`ConfigError::Unsupported`] a [`SlidingLog`] that records refusals and a
//!     [`SlidingWindowCounter`] counting [`Attempts`](Counting::Attempts). Every
//!     other algorithm of the crate counts grants only, and a set of limits
//!     ([`AllOf`](crate::algorithms::AllOf), [`Limits`](crate::algorithms::Limits))
//!     restores every member on a refusal whatever its members, so sets are
//!     accepted: inside a set, a member whose refusals count on its own answers
//!     as if they did not ([`Algorithm::peek_unrecorded`]), so a set's
//!     `retry_after` is the first instant the store grants again. An algorithm
//!     of your own is accepted: the [`Algorithm`] contract says its refusals
//!     change nothing unless its docs say otherwise.
//!   * *Cancels* (Go's rule: the token buckets and the leaky-bucket queue give
//!     back a grant not yet acted on; windows and logs only at the instant of
//!     the grant) can give permits back early. A cancel that goes through this
//!     store drops the cached refusals of its keys, and a refusal learned while
//!     a cancel of a key of the same shard ran is not kept, so in one process
//!     cached answers are what the store would answer. A cancel made by another
//!     process sharing the store is not seen: this process may then refuse a key
//!     until the `retry_after` the store last said, which is the bound, and in
//!     the safe direction (fewer grants, never more).
//! * **Per algorithm.**
//!
//!   | algorithm | cached | in one process, a cached answer is |
//!   |---|---|---|
//!   | [`FixedWindow`](crate::algorithms::FixedWindow) | yes | the store's (the count holds until the window ends) |
//!   | [`SmoothBursty`](crate::algorithms::SmoothBursty), [`SmoothWarmingUp`](crate::algorithms::SmoothWarmingUp) | yes | the store's (a refusal means a debt: nothing stored, for any cost) |
//!   | [`LeakyBucket`](crate::algorithms::LeakyBucket) meter and queue | yes | a refusal; `remaining` may have grown, `retry_after` is the refused cost's |
//!   | [`SlidingWindowBuckets`](crate::algorithms::SlidingWindowBuckets), [`SlidingWindowCounter`] counting admitted permits, [`SlidingLog`] | yes | as the leaky bucket |
//!   | [`SlidingWindowCounter`] counting attempts, [`SlidingLog`] recording refusals | refused by [`new`](DenyCache::new) | (its refusals count) |
//!   | a set ([`AllOf`](crate::algorithms::AllOf), [`Limits`](crate::algorithms::Limits)) | yes, whatever its members | its members' rule at the refused cost; a larger cost may be refused by another member than the one named |
//!
//! * **What may differ from the store.** Grants by other processes only take
//!   more, so the refusal stays certain, but its `remaining` and `reset_after`
//!   are the store's at the refusal: the store might now say fewer remaining and a
//!   later reset. A limit that frees permits as time passes (a leaky bucket,
//!   a sliding log or window) may have more `remaining` than the refusal said
//!   (but never the cost), and for a cost larger than the refused one the
//!   answer is the refused cost's: its `retry_after` a lower bound, and in a set
//!   the member it names may not be the one refusing the larger cost. For a
//!   fixed window and Guava's limiters, and for a set of fixed windows at the
//!   refused cost, cached answers in one process equal the store's (the Redis
//!   tests compare them call by call).
//! * **Time.** Entries expire by the `now` callers pass, the limiter's clock. A
//!   store running steps at the caller's time runs them at that `now` (the Redis
//!   store rounds it down to a microsecond: an entry may then outlive the
//!   store's refusal by less than a microsecond). A store on its server's clock
//!   runs the step after the caller read its clock, so the refusal's
//!   `retry_after` counted from the caller's `now` ends no later than the
//!   server's: the entry expires early, never late (but for the two clocks'
//!   difference in rate over one `retry_after`).
//! * **One configuration.** Entries are by key alone: one cache serves one
//!   algorithm configuration (a keyed limiter's), and calls with another
//!   configuration (another limit, a changed rate) would be answered with the
//!   first one's refusals.
//! * **Memory.** At most [`max_entries`](DenyCache::max_entries) refusals (10 000
//!   unless [`with_max_entries`](DenyCache::with_max_entries) says otherwise), in
//!   16 shards each with its share: about `max_entries × (size_of::<K>() + 88)`
//!   bytes, up to twice that as a hash table grows, and for a set's refusal learned
//!   with its report 16 bytes more and 40 a limit, shared by the hits that repeat
//!   it. An expired entry is dropped
//!   when its key is next looked up, or when its shard is full and a refusal is
//!   to be kept; a refusal that finds its shard full of entries that have not
//!   expired is not kept (the store answers that key next time, as without the
//!   cache). No background thread.
//!
//! [`SlidingLog`]: crate::algorithms::SlidingLog
//! [`SlidingWindowCounter`]: crate::algorithms::SlidingWindowCounter
//! [`Counting::Attempts`]: crate::algorithms::Counting::Attempts
//! [`Source::Store`]: crate::Source::Store
//! [`Source::Cached`]: crate::Source::Cached
//! [`ConfigError::Unsupported`]: crate::ConfigError::Unsupported

mod store;
mod table;
#[cfg(test)]
mod tests;

use self::table::Table;
use crate::algorithms::{Algorithm, Counting, SlidingLog, SlidingWindowCounter};
use crate::error::ConfigError;
use crate::stores::Store;
use std::any::Any;
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

/// The number of refusals a [`DenyCache`] keeps unless told otherwise.
const DEFAULT_MAX_ENTRIES: usize = 10_000;

/// A [`Store`] over an inner store that refuses, locally
/// and without a round trip, the keys the inner store has refused, until the
/// refusal's `retry_after`. See the [module docs](self) for the rules and what
/// they guarantee.
///
/// `S` is the inner store, `K` the key and `A` the algorithm.
///
/// ```
/// use sluicegate::algorithms::SmoothBursty;
/// use sluicegate::stores::deny_cache::DenyCache;
/// use sluicegate::stores::{MemoryStore, Operation, Store};
/// use sluicegate::Decision;
/// let bursty = SmoothBursty::new(1.0).unwrap();
/// let store = DenyCache::new(MemoryStore::<&str, SmoothBursty>::new(), &bursty)?;
/// let take = Operation::Reserve { cost: 1, max_wait: 0 };
/// let granted: Result<(), Decision> = store.apply_key(&bursty, &"k", 0, take)?;
/// assert!(granted.is_ok());
/// let refused: Result<(), Decision> = store.apply_key(&bursty, &"k", 0, take)?;
/// assert!(refused.is_err()); // refused by the store, which the cache keeps
/// let cached: Decision = store.apply_key(&bursty, &"k", 400_000_000, take)?;
/// assert_eq!((cached.retry_after_nanos(), store.hits()), (600_000_000, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DenyCache<S, K, A> {
    inner: S,
    table: Arc<Table<K>>,
    algorithm: PhantomData<fn(&A)>,
}

impl<S: Store<K, A>, K: Hash + Eq, A: Algorithm> DenyCache<S, K, A> {
    /// `inner` with a cache of up to 10 000 refusals, for `algorithm`'s limits.
    ///
    /// # Errors
    /// [`ConfigError::Unsupported`] for an algorithm whose refusals count (a
    /// [`SlidingLog`] recording refusals, a [`SlidingWindowCounter`] counting
    /// attempts): a refusal answered from the cache would not be counted.
    ///
    /// ```
    /// use sluicegate::algorithms::SlidingLog;
    /// use sluicegate::stores::deny_cache::DenyCache;
    /// use sluicegate::stores::MemoryStore;
    /// use sluicegate::ConfigError;
    /// use std::time::Duration;
    /// let log = SlidingLog::new(5, Duration::from_secs(1)).unwrap();
    /// assert!(DenyCache::<_, u64, _>::new(MemoryStore::<u64, _>::new(), &log).is_ok());
    /// let recording = log.with_rejected_recorded();
    /// let refused = DenyCache::<_, u64, _>::new(MemoryStore::<u64, _>::new(), &recording);
    /// assert!(matches!(refused.err(), Some(ConfigError::Unsupported { .. })));
    /// ```
    pub fn new(inner: S, algorithm: &A) -> Result<Self, ConfigError> {
        check_refusals_count_nothing(algorithm)?;
        Ok(DenyCache {
            inner,
            table: Arc::new(Table::new(DEFAULT_MAX_ENTRIES)),
            algorithm: PhantomData,
        })
    }

    /// The same store keeping at most `max_entries` refusals (rounded down to a
    /// multiple of its shard count when above it). Configure before the first
    /// call: the cache starts empty.
    ///
    /// # Errors
    /// [`ConfigError::InvalidCount`] for 0.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::deny_cache::DenyCache;
    /// use sluicegate::stores::MemoryStore;
    /// use std::time::Duration;
    /// let window = FixedWindow::new(10, Duration::from_secs(1)).unwrap();
    /// let store = DenyCache::<_, u64, _>::new(MemoryStore::<u64, _>::new(), &window)?.with_max_entries(1_000)?;
    /// assert_eq!(store.max_entries(), 992); // 16 shards of 62
    /// assert!(DenyCache::<_, u64, _>::new(MemoryStore::<u64, _>::new(), &window)?.with_max_entries(0).is_err());
    /// # Ok::<(), sluicegate::ConfigError>(())
    /// ```
    pub fn with_max_entries(mut self, max_entries: usize) -> Result<Self, ConfigError> {
        if max_entries == 0 {
            return Err(ConfigError::InvalidCount {
                what: "deny cache max_entries",
                value: 0,
                requirement: "at least 1",
            });
        }
        self.table = Arc::new(Table::new(max_entries));
        Ok(self)
    }

    /// The most refusals the cache keeps.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::deny_cache::DenyCache;
    /// use sluicegate::stores::MemoryStore;
    /// use std::time::Duration;
    /// let window = FixedWindow::new(10, Duration::from_secs(1)).unwrap();
    /// let store = DenyCache::<_, u64, _>::new(MemoryStore::<u64, _>::new(), &window)?;
    /// assert_eq!(store.max_entries(), 10_000);
    /// # Ok::<(), sluicegate::ConfigError>(())
    /// ```
    pub fn max_entries(&self) -> usize {
        self.table.max_entries()
    }

    /// The refusals kept now (expired ones not yet dropped included).
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::deny_cache::DenyCache;
    /// use sluicegate::stores::{MemoryStore, Operation, Store};
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let store = DenyCache::<_, u64, _>::new(MemoryStore::<u64, _>::new(), &window)?;
    /// let take = Operation::Reserve { cost: 1, max_wait: 0 };
    /// let _: Decision = store.apply_key(&window, &7, 0, take)?;
    /// assert_eq!(store.len(), 0); // granted: nothing to keep
    /// let _: Decision = store.apply_key(&window, &7, 0, take)?;
    /// assert_eq!(store.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// True if no refusal is kept.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::deny_cache::DenyCache;
    /// use sluicegate::stores::MemoryStore;
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// assert!(DenyCache::<_, u64, _>::new(MemoryStore::<u64, _>::new(), &window)?.is_empty());
    /// # Ok::<(), sluicegate::ConfigError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The calls answered from the cache so far, without asking the inner store.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::deny_cache::DenyCache;
    /// use sluicegate::stores::{MemoryStore, Operation, Store};
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let store = DenyCache::<_, u64, _>::new(MemoryStore::<u64, _>::new(), &window)?;
    /// let take = Operation::Reserve { cost: 1, max_wait: 0 };
    /// for _ in 0..5 {
    ///     let _: Decision = store.apply_key(&window, &7, 0, take)?;
    /// }
    /// // A grant, the store's refusal, then three answered from the cache.
    /// assert_eq!(store.hits(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hits(&self) -> u64 {
        self.table.hits()
    }

    /// The inner store.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::deny_cache::DenyCache;
    /// use sluicegate::stores::MemoryStore;
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let store = DenyCache::<_, u64, _>::new(MemoryStore::<u64, _>::new(), &window)?;
    /// let _inner: &MemoryStore<u64, FixedWindow> = store.inner();
    /// # Ok::<(), sluicegate::ConfigError>(())
    /// ```
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

/// Refuses the crate's algorithms configured so that refusals count: a refusal
/// the cache answered would not be counted. The type test is decided when the
/// code is compiled; only these two types read their configuration.
fn check_refusals_count_nothing<A: Algorithm>(algorithm: &A) -> Result<(), ConfigError> {
    if refusals_count(algorithm) {
        return Err(ConfigError::Unsupported {
            what: "a deny cache over an algorithm whose refusals count",
            why: "a refusal answered from the cache would not be counted; use the store \
                  alone, or count admitted permits only",
        });
    }
    Ok(())
}

/// True for a [`SlidingLog`] recording refusals and a [`SlidingWindowCounter`]
/// counting attempts.
fn refusals_count<A: Algorithm>(algorithm: &A) -> bool {
    let any: &dyn Any = algorithm;
    if let Some(log) = any.downcast_ref::<SlidingLog>() {
        return log.rejected_recorded();
    }
    if let Some(counter) = any.downcast_ref::<SlidingWindowCounter>() {
        return counter.counting() == Counting::Attempts;
    }
    false
}

impl<S: fmt::Debug, K: Hash + Eq, A> fmt::Debug for DenyCache<S, K, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DenyCache")
            .field("inner", &self.inner)
            .field("max_entries", &self.table.max_entries())
            .finish_non_exhaustive()
    }
}
