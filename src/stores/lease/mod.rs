//! Leased local budgets over a shared store: [`LeasedStore`] takes a *lease* of
//! `L` permits of a key from the inner store (Redis, typically) in one round
//! trip, then grants that key's zero-wait calls from the lease in this process,
//! with no round trip, until it is spent or its period `P` ends. The eventually
//! consistent model of a limiter that decides locally and settles with a shared
//! store now and then, with the direction of its error chosen: it never admits
//! more than the shared limit, and may admit less.
//!
//! ```
//! use sluicegate::algorithms::FixedWindow;
//! use sluicegate::stores::lease::LeasedStore;
//! use sluicegate::stores::MemoryStore;
//! use sluicegate::{KeyedRateLimiter, ManualClock, Source};
//! use std::time::Duration;
//! // 1000 a minute shared; leases of 100, each good for at most 5 seconds.
//! let window = FixedWindow::new(1000, Duration::from_secs(60)).unwrap();
//! let store = LeasedStore::new(MemoryStore::new(), 100, Duration::from_secs(5)).unwrap();
//! let limiter = KeyedRateLimiter::with_store(window, store, ManualClock::new());
//! let first = limiter.check(&"alice", 1)?; // takes the lease: 100 from the store
//! let second = limiter.check(&"alice", 1)?; // from the lease
//! assert_eq!((first.source(), first.remaining()), (Source::Leased, 999));
//! assert_eq!((second.source(), second.remaining()), (Source::Leased, 998));
//! # Ok::<(), sluicegate::Error>(())
//! ```
//!
//! # The model
//!
//! ```text
//!   zero-wait reserve of cost c < L on one key
//!     ├── live lease holding ≥ c ───────────────────────▶ spend c here (Source::Leased, no round trip)
//!     ├── else: reserve of cost L on the inner store ──granted──▶ new lease, spend c (Source::Leased)
//!     │                                             └──refused──▶ reserve of cost c on the inner store
//!     └── no lease asked for (refused recently, another call is taking one, table full)
//!                                                    ───────────▶ reserve of cost c on the inner store
//!   anything else (c ≥ L, several keys, peeks, waits, cancels) ──▶ the inner store, as it is
//! ```
//!
//! * **A lease** is one zero-wait reserve of cost `L` on the inner store: the
//!   store's own step, under its own atomicity, so the permits are taken from the
//!   shared limit *before* any of them is spent. A lease ends when it is spent or
//!   `P` after it was granted, or when the grant's
//!   [`reset_after`](crate::Decision::reset_after) ends if sooner (for a
//!   [`FixedWindow`](crate::algorithms::FixedWindow), the end of the window it was
//!   taken in), on the callers' time (the `now` of the call). Each process holds
//!   at most one lease per key: while one call asks for it, the others of that
//!   key go to the store with their own cost.
//! * **Unused permits are not given back.** A lease is a grant that acts at once,
//!   and the store's cancel follows Go's rule (see
//!   [`Algorithm::cancel`](crate::algorithms::Algorithm::cancel)): such a grant
//!   comes back only if cancelled at the instant it was made, so the permits a
//!   lease still holds when it ends cannot be given back to a window, a log or a
//!   meter. They stay taken; what is left of a lease is dropped when the next one
//!   is taken (for calls of cost 1 a lease is replaced only when spent or ended).
//! * **The last permits.** When the store refuses a lease (fewer than `L` left),
//!   the call asks the store for its own cost instead, and no lease is asked for
//!   until the refusal's `retry_after` for cost `L` (one period `P` if it can
//!   never be granted): the last `L − 1` permits of a limit go one call at a time,
//!   as on the plain store, and are not stranded.
//! * **Decisions.** A grant from a lease is allowed at once with
//!   [`Source::Leased`](crate::Source::Leased), the lease grant's `limit` and
//!   `limit_index`, `reset_after` counted down from the lease grant's, and
//!   `remaining` the store's remaining right after it granted the lease *plus*
//!   what is left of the lease here: what the plain store would have answered had
//!   no other process called since, and exactly that with one process. (A lease
//!   that a failure policy granted, a
//!   [`FailoverStore`](crate::stores::failover::FailoverStore) inside answering
//!   for a store that failed, names that policy's source instead, `Local` or
//!   `Unchecked`: no shared limit was consulted.) Its receipt
//!   is [`Receipt::NONE`](crate::algorithms::Receipt::NONE): cancelling it gives
//!   nothing back. Every other decision is the inner store's, as it gave it.
//! * **Reporting calls** ([`apply_key_each`](crate::stores::Store::apply_key_each)
//!   and its async form: a keyed limiter's `check_each`, the server layer's
//!   fields) lease as the others do. A lease taken by such a call is asked for
//!   with the store's report of every limit, and a grant from it reports each
//!   limit as the store did, with what is left of the lease added to its
//!   `remaining` and its durations counted down, as the leased decision is: with
//!   one process, every limit of a set as the plain store reports it. A lease
//!   taken by a call that did not report reports its leased decision alone.
//! * **`L = 1`** asks the store on every call, so decides exactly as the plain
//!   store; so does any call of cost `c ≥ L`.
//! * **Passed through.** Calls on several keys, peeks, reserves that may wait,
//!   and cancels (but those of leased grants, which give back nothing) go to the
//!   inner store unchanged.
//!
//! # Bounds
//!
//! With `N` processes each holding a `LeasedStore` of lease size `L` and period
//! `P` over one shared store, for one key:
//!
//! * **Over-admission: none.** Every permit granted here was taken from the
//!   shared store by a lease the store granted in full. For a
//!   [`FixedWindow`](crate::algorithms::FixedWindow) a lease ends with the window
//!   it was taken in, so the calls admitted in each window, across all `N`
//!   processes, never exceed the window's limit. For an algorithm whose grants
//!   are spread in time (a bucket, a sliding window), a leased permit is spent at
//!   most `P` after the store counted it: the admissions are the store's grants,
//!   each delayed by at most `P`.
//! * **Under-admission: at most `N·(L−1)` at any moment** (calls of cost 1):
//!   each process holds at most one lease per key, and a live lease holds at most
//!   `L − 1` permits taken from the store and not yet spent. Over a fixed window
//!   of length `W` a process strands at most `L − 1` permits per lease that ends
//!   unspent; its leases in one window do not overlap, and each but the last
//!   lasts `P`, so at most `⌈W/P⌉` of them end unspent, and the window admits at
//!   least `limit − N·(L−1)·⌈W/P⌉` when the demand exceeds the limit:
//!   `limit − N·(L−1)` for `P ≥ W`. A call of cost `c > 1` that finds fewer than
//!   `c` left drops them (fewer than `c`) when it takes the next lease.
//! * **Round trips:** one per lease, so one per `L` permits granted, instead of
//!   one per call; and one per call while the store refuses leases (its last
//!   `L − 1` permits, and every refusal: refused calls go to the store as they
//!   would without leases).
//!
//! # Memory
//!
//! The lease table holds at most [`max_keys`](LeasedStore::with_max_keys) keys
//! (default 100 000). An entry matters until its lease ends (and a refusal no
//! longer holds); a full table forgets the entries that no longer matter in the
//! call that finds it full, and no sooner than the first of them ends. A call
//! whose key finds the table full of entries that still matter goes to the store.
//! There is no background thread.

mod store;
mod table;
#[cfg(test)]
mod tests;

use self::table::Table;
use crate::clock::{duration_to_nanos, Nanos};
use crate::error::ConfigError;
use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// The default cap on the keys the lease table holds.
const DEFAULT_MAX_KEYS: usize = 100_000;

/// A [`Store`](crate::stores::Store) over a shared inner store that grants a
/// key's zero-wait calls from leases of `L` permits, each taken from the inner
/// store in one round trip. See the [module docs](self) for the rules and the
/// bounds.
///
/// `S` is the inner store, `K` the key and `A` the algorithm.
///
/// ```
/// use sluicegate::algorithms::FixedWindow;
/// use sluicegate::stores::lease::LeasedStore;
/// use sluicegate::stores::MemoryStore;
/// use sluicegate::{KeyedRateLimiter, ManualClock, Source};
/// use std::time::Duration;
/// // Leases of 4 from a window of 6: one lease, then the last 2 one at a time.
/// let window = FixedWindow::new(6, Duration::from_secs(60)).unwrap();
/// let store = LeasedStore::new(MemoryStore::new(), 4, Duration::from_secs(60)).unwrap();
/// let limiter = KeyedRateLimiter::with_store(window, store, ManualClock::new());
/// let sources: Vec<Source> = (0..7).map(|_| limiter.check(&"k", 1).unwrap().source()).collect();
/// assert_eq!(&sources[..4], &[Source::Leased; 4]);
/// assert_eq!(&sources[4..], &[Source::Store; 3]); // 2 granted, then refused
/// assert!(!limiter.check(&"k", 1)?.is_allowed());
/// # Ok::<(), sluicegate::Error>(())
/// ```
pub struct LeasedStore<S, K, A> {
    inner: Arc<S>,
    table: Arc<Table<K>>,
    size: u64,
    period: Nanos,
    _algorithm: PhantomData<fn(&A)>,
}

impl<S, K: Hash + Eq + Clone, A> LeasedStore<S, K, A> {
    /// `inner` with leases of `size` permits, each ending `period` after it was
    /// granted (or sooner, see the [module docs](self)), and the default cap of
    /// 100 000 keys.
    ///
    /// # Errors
    /// [`ConfigError::InvalidCount`] for a size of 0;
    /// [`ConfigError::InvalidDuration`] for a zero period.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::lease::LeasedStore;
    /// use sluicegate::stores::MemoryStore;
    /// use std::time::Duration;
    /// let store: LeasedStore<MemoryStore<u64, FixedWindow>, u64, FixedWindow> =
    ///     LeasedStore::new(MemoryStore::new(), 50, Duration::from_secs(1)).unwrap();
    /// assert_eq!(store.lease_size(), 50);
    /// let empty: MemoryStore<u64, FixedWindow> = MemoryStore::new();
    /// assert!(LeasedStore::<_, u64, FixedWindow>::new(empty, 0, Duration::from_secs(1)).is_err());
    /// ```
    pub fn new(inner: S, size: u64, period: Duration) -> Result<Self, ConfigError> {
        if size == 0 {
            return Err(ConfigError::InvalidCount {
                what: "lease size",
                value: 0,
                requirement: "at least 1",
            });
        }
        if period.is_zero() {
            return Err(ConfigError::InvalidDuration {
                what: "lease period",
                value: period,
                requirement: "above zero",
            });
        }
        Ok(LeasedStore {
            inner: Arc::new(inner),
            table: Arc::new(Table::new(DEFAULT_MAX_KEYS)),
            size,
            period: duration_to_nanos(period),
            _algorithm: PhantomData,
        })
    }

    /// The same store holding leases for at most `max_keys` keys. Configure
    /// before the first call: the table starts empty.
    ///
    /// # Errors
    /// [`ConfigError::InvalidCount`] for 0.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::lease::LeasedStore;
    /// use sluicegate::stores::MemoryStore;
    /// use std::time::Duration;
    /// let store: LeasedStore<MemoryStore<u64, FixedWindow>, u64, FixedWindow> =
    ///     LeasedStore::new(MemoryStore::new(), 50, Duration::from_secs(1))?.with_max_keys(1000)?;
    /// assert_eq!(store.max_keys(), 1000);
    /// # Ok::<(), sluicegate::ConfigError>(())
    /// ```
    pub fn with_max_keys(mut self, max_keys: usize) -> Result<Self, ConfigError> {
        if max_keys == 0 {
            return Err(ConfigError::InvalidCount {
                what: "max_keys",
                value: 0,
                requirement: "at least 1",
            });
        }
        self.table = Arc::new(Table::new(max_keys));
        Ok(self)
    }

    /// The number of permits a lease takes (`L`).
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::lease::LeasedStore;
    /// use sluicegate::stores::MemoryStore;
    /// use std::time::Duration;
    /// let store: LeasedStore<MemoryStore<u64, FixedWindow>, u64, FixedWindow> =
    ///     LeasedStore::new(MemoryStore::new(), 1, Duration::from_secs(1)).unwrap();
    /// assert_eq!(store.lease_size(), 1); // every call goes to the store
    /// ```
    pub fn lease_size(&self) -> u64 {
        self.size
    }

    /// How long a lease lasts at most (`P`).
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::lease::LeasedStore;
    /// use sluicegate::stores::MemoryStore;
    /// use std::time::Duration;
    /// let store: LeasedStore<MemoryStore<u64, FixedWindow>, u64, FixedWindow> =
    ///     LeasedStore::new(MemoryStore::new(), 10, Duration::from_millis(250)).unwrap();
    /// assert_eq!(store.lease_period(), Duration::from_millis(250));
    /// ```
    pub fn lease_period(&self) -> Duration {
        crate::clock::nanos_to_duration(self.period)
    }

    /// The cap on the keys the lease table holds.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::lease::LeasedStore;
    /// use sluicegate::stores::MemoryStore;
    /// use std::time::Duration;
    /// let store: LeasedStore<MemoryStore<u64, FixedWindow>, u64, FixedWindow> =
    ///     LeasedStore::new(MemoryStore::new(), 10, Duration::from_secs(1)).unwrap();
    /// assert_eq!(store.max_keys(), 100_000);
    /// ```
    pub fn max_keys(&self) -> usize {
        self.table.max_keys()
    }

    /// The number of keys the lease table holds now: keys with a lease that has
    /// not ended, and others not yet forgotten.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::lease::LeasedStore;
    /// use sluicegate::stores::{MemoryStore, Operation, Store};
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// let window = FixedWindow::new(100, Duration::from_secs(1)).unwrap();
    /// let store = LeasedStore::new(MemoryStore::new(), 10, Duration::from_secs(1)).unwrap();
    /// let take = Operation::Reserve { cost: 1, max_wait: 0 };
    /// let _: Decision = store.apply_key(&window, &"k", 0, take).unwrap();
    /// assert_eq!(store.leased_keys(), 1);
    /// ```
    pub fn leased_keys(&self) -> usize {
        self.table.len()
    }

    /// The permits left to spend in `key`'s lease at `now` (0 if it has none, or
    /// it has ended).
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::lease::LeasedStore;
    /// use sluicegate::stores::{MemoryStore, Operation, Store};
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// let window = FixedWindow::new(100, Duration::from_secs(1)).unwrap();
    /// let store = LeasedStore::new(MemoryStore::new(), 10, Duration::from_secs(1)).unwrap();
    /// let take = Operation::Reserve { cost: 3, max_wait: 0 };
    /// let _: Decision = store.apply_key(&window, &"k", 0, take).unwrap();
    /// assert_eq!(store.leased(&"k", 0), 7);
    /// assert_eq!(store.leased(&"k", 1_000_000_000), 0); // the lease has ended
    /// ```
    pub fn leased<Q>(&self, key: &Q, now: Nanos) -> u64
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.table.left(key, now)
    }

    /// The inner store.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::lease::LeasedStore;
    /// use sluicegate::stores::MemoryStore;
    /// use std::time::Duration;
    /// let store: LeasedStore<MemoryStore<u64, FixedWindow>, u64, FixedWindow> =
    ///     LeasedStore::new(MemoryStore::new(), 10, Duration::from_secs(1)).unwrap();
    /// let _inner: &MemoryStore<u64, FixedWindow> = store.inner();
    /// ```
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: fmt::Debug, K, A> fmt::Debug for LeasedStore<S, K, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedStore")
            .field("inner", &self.inner)
            .field("lease_size", &self.size)
            .field("lease_period_nanos", &self.period)
            .finish_non_exhaustive()
    }
}
