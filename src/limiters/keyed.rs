//! The keyed limiter: one limit, applied separately to every key.
//!
//! # The model
//!
//! ```text
//!   KeyedRateLimiter ── algorithm (one configuration, e.g. 10/s)
//!                    ── store     (one state per key: "1.2.3.4" → s₁, "alice" → s₂, …)
//!                    ── clock     (read once per call: `now`)
//!
//!   check_all(["1.2.3.4", "alice"], 1):  one atomic store step over both states;
//!                                        allowed only if allowed for every key,
//!                                        and then charged to every key
//! ```
//!
//! Each key behaves exactly like its own direct limiter over the same algorithm
//! (decisions, pay-later reservations, `retry_after`, `reset_after`), with one
//! difference documented in the [store contract](crate::stores::store): a key seen
//! for the first time starts as if it had been idle since the clock's origin, so a
//! keyed [`SmoothBursty`] key gets its full burst where Guava's direct limiter starts
//! empty. Multi-limit sets are algorithms too, so a key can carry "10/s and 100/min".
//!
//! The store is the in-memory [`MemoryStore`] unless another is given; see it for
//! the cost per key and how idle keys are forgotten.

use crate::algorithms::{Algorithm, Decision, Report, SmoothBursty};
use crate::clock::{duration_to_nanos, Clock, DefaultClock, Nanos};
use crate::error::{ConfigError, Error};
use crate::stores::{MemoryStore, Operation, Store};
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use super::direct::nonzero;
use super::keyed_async::Deferred;
use super::ledger::Ledger;
use super::waiting::{granted_within, wait_blocking};
use super::AsyncKeyedRateLimiter;

/// A thread-safe rate limiter that keeps a separate limit per key (an IP, a user
/// id, any `Hash + Eq + Clone` value), over any [algorithm](crate::algorithms)
/// and any [`Store`].
///
/// Cloning is cheap (an `Arc`) and clones share the store; it is `Send + Sync`.
///
/// Every single-key call, blocking or async, takes the key by reference, as `K`
/// or as the form it borrows as (as `HashMap::get` does): a `String`-keyed
/// limiter takes `&str` and `&String` alike, for one state. A call that keeps its
/// key (a reservation, an async wait) copies it. The `_all` calls take a slice of
/// `K`.
///
/// ```
/// use sluicegate::algorithms::FixedWindow;
/// use sluicegate::{clock::ManualClock, KeyedRateLimiter};
/// use std::time::Duration;
/// let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
/// let per_user: KeyedRateLimiter<String, _, _, _> = KeyedRateLimiter::with_clock(window, ManualClock::new());
/// assert!(per_user.try_acquire("alice"));
/// assert!(per_user.try_acquire(&String::from("alice")));
/// assert!(!per_user.try_acquire("alice")); // one state for both forms
/// ```
///
/// | call | waits? | answers |
/// |---|---|---|
/// | [`try_acquire`](Self::try_acquire) | never | granted or not |
/// | [`check`](Self::check), [`check_all`](Self::check_all) | never | the full [`Decision`] |
/// | [`peek`](Self::peek), [`peek_all`](Self::peek_all) | never, consumes nothing | the [`Decision`] a check would give |
/// | [`acquire`](Self::acquire), [`acquire_n`](Self::acquire_n), [`acquire_all`](Self::acquire_all) | as long as needed | the time waited |
/// | [`try_acquire_n_timeout`](Self::try_acquire_n_timeout) | only if the wait fits | granted or not |
/// | [`reserve`](Self::reserve), [`reserve_all`](Self::reserve_all) | no: you wait, or cancel | a [`KeyedReservation`](crate::KeyedReservation) |
/// | [`to_async`](Self::to_async)`().acquire(&key).await` | asynchronously | the time waited |
///
/// The `_all` calls take several keys (e.g. the client's IP *and* its user id)
/// and are all-or-nothing: granted only if every key allows it, and then charged to
/// every key; a refused call changes no key. Their decision is the tightest one:
/// when refused, the refusing key with the longest `retry_after`; when allowed, the
/// key with the fewest permits remaining, with the longest `wait` and `reset_after`
/// of all keys, and the [`source`](crate::Decision::source) of the least checked key
/// (one key let through by a failure policy makes the call's grant the policy's).
///
/// ```
/// use sluicegate::algorithms::SmoothBursty;
/// use sluicegate::clock::ManualClock;
/// use sluicegate::KeyedRateLimiter;
///
/// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(2.0).unwrap(), ManualClock::new());
/// // A new key starts with a full burst once the clock has run for max_burst (1 s).
/// limiter.clock().advance(std::time::Duration::from_secs(1));
/// assert!(limiter.try_acquire(&"alice"));
/// assert!(limiter.try_acquire(&"alice"));
/// assert!(limiter.try_acquire(&"alice"));  // pay later: the next call pays for this one
/// assert!(!limiter.try_acquire(&"alice")); // alice spent her burst...
/// assert!(limiter.try_acquire(&"bob"));    // ...bob has his own
/// ```
pub struct KeyedRateLimiter<K, A: Algorithm, S = MemoryStore<K, A>, C: Clock = DefaultClock> {
    shared: Arc<Shared<A, S, C>>,
    _key: PhantomData<fn(&K)>,
}

struct Shared<A, S, C> {
    algorithm: A,
    store: S,
    clock: C,
    /// The async waits that reserved the future (see [`Ledger`]).
    waits: Ledger<Deferred<A, S>>,
}

impl<K, A: Algorithm, S, C: Clock> Clone for KeyedRateLimiter<K, A, S, C> {
    fn clone(&self) -> Self {
        KeyedRateLimiter {
            shared: Arc::clone(&self.shared),
            _key: PhantomData,
        }
    }
}

impl<K, A: Algorithm + fmt::Debug, S: fmt::Debug, C: Clock> fmt::Debug
    for KeyedRateLimiter<K, A, S, C>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimiter")
            .field("algorithm", &self.shared.algorithm)
            .field("store", &self.shared.store)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone> KeyedRateLimiter<K, SmoothBursty> {
    /// A keyed Guava bursty limiter: `rate` permits per second per key, 1 second of
    /// burst, in memory, on the real clock.
    ///
    /// # Errors
    /// [`ConfigError::InvalidRate`] unless `rate > 0`.
    ///
    /// ```
    /// let limiter = sluicegate::KeyedRateLimiter::bursty(100.0).unwrap();
    /// assert!(limiter.try_acquire(&"10.0.0.1"));
    /// ```
    pub fn bursty(rate: f64) -> Result<Self, ConfigError> {
        Ok(KeyedRateLimiter::new(SmoothBursty::new(rate)?))
    }
}

impl<K: Hash + Eq + Clone, A: Algorithm> KeyedRateLimiter<K, A> {
    /// A keyed limiter running `algorithm` per key in a new [`MemoryStore`], on the
    /// real clock.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, KeyedRateLimiter};
    /// let limiter: KeyedRateLimiter<u64, _> = KeyedRateLimiter::new(SmoothBursty::new(5.0).unwrap());
    /// assert!(limiter.try_acquire(&7));
    /// ```
    pub fn new(algorithm: A) -> Self {
        Self::with_store(algorithm, MemoryStore::new(), DefaultClock::new())
    }
}

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> KeyedRateLimiter<K, A, MemoryStore<K, A>, C> {
    /// A keyed limiter running `algorithm` per key in a new [`MemoryStore`], on
    /// `clock` (e.g. a [`ManualClock`](crate::clock::ManualClock) in tests).
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new());
    /// assert!(limiter.try_acquire(&1u8));
    /// assert!(!limiter.try_acquire(&1u8));
    /// ```
    pub fn with_clock(algorithm: A, clock: C) -> Self {
        Self::with_store(algorithm, MemoryStore::new(), clock)
    }

    /// The number of keys the in-memory store holds now (see
    /// [`MemoryStore::live_keys`]).
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new());
    /// assert_eq!(limiter.live_keys(), 0);
    /// limiter.try_acquire(&"a");
    /// limiter.try_acquire(&"b");
    /// limiter.peek(&"c", 1).unwrap(); // a peek creates no state
    /// assert_eq!(limiter.live_keys(), 2);
    /// ```
    pub fn live_keys(&self) -> usize {
        self.shared.store.live_keys()
    }
}

impl<K, A: Algorithm, S: Store<K, A>, C: Clock> KeyedRateLimiter<K, A, S, C> {
    /// A keyed limiter running `algorithm` per key in `store`, on `clock`. The clock
    /// gives the `now` passed to the store (which may use its own time instead, see
    /// the [store contract](crate::stores::store)) and does the blocking waits.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, stores::MemoryStore, KeyedRateLimiter};
    /// let store = MemoryStore::new().with_max_keys(10_000).unwrap();
    /// let limiter = KeyedRateLimiter::with_store(SmoothBursty::new(1.0).unwrap(), store, ManualClock::new());
    /// assert!(limiter.try_acquire(&"k"));
    /// ```
    pub fn with_store(algorithm: A, store: S, clock: C) -> Self {
        KeyedRateLimiter {
            shared: Arc::new(Shared {
                algorithm,
                store,
                clock,
                waits: Ledger::default(),
            }),
            _key: PhantomData,
        }
    }

    /// The algorithm every key runs.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, KeyedRateLimiter};
    /// let limiter: KeyedRateLimiter<u32, _> = KeyedRateLimiter::bursty(4.0).unwrap();
    /// assert_eq!(limiter.algorithm().rate(), 4.0);
    /// ```
    pub fn algorithm(&self) -> &A {
        &self.shared.algorithm
    }

    /// The store holding the keys' states.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new());
    /// limiter.try_acquire(&7u64);
    /// assert_eq!(limiter.store().live_keys(), 1);
    /// ```
    pub fn store(&self) -> &S {
        &self.shared.store
    }

    /// The limiter's clock.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::{Clock, ManualClock}, KeyedRateLimiter};
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(5.0).unwrap(), ManualClock::new());
    /// limiter.acquire(&"k").unwrap();
    /// limiter.acquire(&"k").unwrap();
    /// assert_eq!(limiter.clock().now(), 200_000_000);
    /// ```
    pub fn clock(&self) -> &C {
        &self.shared.clock
    }

    /// Takes one permit for `key` if that needs no waiting. Never blocks.
    ///
    /// A store error (a capped store that is full, an unreachable remote store)
    /// answers `false`: fail closed. Use [`check`](Self::check) to see the error.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, stores::MemoryStore, KeyedRateLimiter};
    /// let store = MemoryStore::new().with_max_keys(1).unwrap();
    /// let limiter = KeyedRateLimiter::with_store(SmoothBursty::new(1.0).unwrap(), store, ManualClock::new());
    /// assert!(limiter.try_acquire(&"a"));
    /// assert!(!limiter.try_acquire(&"a")); // a's permit is spent
    /// assert!(!limiter.try_acquire(&"b")); // the store is full: fail closed
    /// assert!(limiter.check(&"b", 1).is_err());
    /// ```
    #[inline]
    pub fn try_acquire<Q>(&self, key: &Q) -> bool
    where
        Q: ToOwned<Owned = K> + ?Sized,
        S: Store<Q, A>,
    {
        matches!(self.try_take(key, 1), Ok(None))
    }

    /// The store's zero-wait step in the lean report ([`Store::apply_key`]):
    /// `None` if granted, else the refusal in full.
    #[inline]
    pub(crate) fn try_take<Q>(&self, key: &Q, cost: u64) -> Result<Option<Decision>, Error>
    where
        Q: ToOwned<Owned = K> + ?Sized,
        S: Store<Q, A>,
    {
        let cost = nonzero(cost)?;
        let now = self.shared.clock.now();
        let step = Operation::Reserve { cost, max_wait: 0 };
        let taken: Result<(), Decision> = self.step_key(key, now, step)?;
        Ok(taken.err())
    }

    /// Takes `cost` permits for `key` if that needs no waiting, and answers with the
    /// full [`Decision`]. Never blocks. A cost above what the limit can ever hold
    /// answers [`Verdict::Never`](crate::Verdict::Never).
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for a cost of 0; the store's errors (e.g.
    /// [`Error::StoreFull`]). Nothing is consumed on error.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter, Verdict};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_secs(1));
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(4.0).unwrap(), clock);
    /// let burst = limiter.check(&"ip", 4).unwrap();
    /// assert!(burst.is_allowed());
    /// assert_eq!(burst.remaining(), 0);
    /// assert!(limiter.check(&"ip", 1).unwrap().is_allowed()); // pay later: the next call pays
    /// let refused = limiter.check(&"ip", 1).unwrap();
    /// assert_eq!(refused.verdict(), Verdict::Denied);
    /// assert_eq!(refused.retry_after(), Duration::from_millis(250));
    /// ```
    #[inline]
    pub fn check<Q>(&self, key: &Q, cost: u64) -> Result<Decision, Error>
    where
        Q: ToOwned<Owned = K> + ?Sized,
        S: Store<Q, A>,
    {
        let cost = nonzero(cost)?;
        let now = self.shared.clock.now();
        self.step_key(key, now, Operation::Reserve { cost, max_wait: 0 })
    }

    /// [`check`](Self::check), also telling `each` how every limit of the
    /// algorithm stands after the step, one decision per limit in order (see
    /// [`Algorithm::reserve_each`]): every limit of a set
    /// ([`AllOf`](crate::algorithms::AllOf), [`Limits`](crate::algorithms::Limits)),
    /// a nested set's in its place, when the store can say so in the same step
    /// (the in-memory store can, under the same lock, and the Redis store, in the
    /// same round trip; a store that cannot reports the combined decision once,
    /// see [`Store::apply_key_each`]).
    /// A cost above a limit's capacity makes that limit report never, and the call
    /// is refused. What the server layer lists as one `RateLimit` item per limit.
    ///
    /// # Errors
    /// As [`check`](Self::check).
    ///
    /// ```
    /// use sluicegate::algorithms::{AllOf, FixedWindow};
    /// use sluicegate::{clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let set = AllOf::new((
    ///     FixedWindow::new(3, Duration::from_secs(1)).unwrap(),
    ///     FixedWindow::new(100, Duration::from_secs(3600)).unwrap(),
    /// ));
    /// let limiter = KeyedRateLimiter::with_clock(set, ManualClock::new());
    /// let mut left = Vec::new();
    /// let decision = limiter.check_each(&"ip", 1, &mut |d| left.push(d.remaining())).unwrap();
    /// assert_eq!(decision.remaining(), 2); // the tightest member
    /// assert_eq!(left, [2, 99]);
    /// ```
    #[inline]
    pub fn check_each<Q>(
        &self,
        key: &Q,
        cost: u64,
        each: &mut dyn FnMut(Decision),
    ) -> Result<Decision, Error>
    where
        Q: ToOwned<Owned = K> + ?Sized,
        S: Store<Q, A>,
    {
        let cost = nonzero(cost)?;
        let shared = &*self.shared;
        let now = shared.clock.now();
        let step = Operation::Reserve { cost, max_wait: 0 };
        let answer =
            Store::<Q, A>::apply_key_each(&shared.store, &shared.algorithm, key, now, step, each)?;
        Ok(answer.0)
    }

    /// The decision the key's limit would give a [`check`](Self::check) now,
    /// consuming nothing and creating no state. It asks the limit, not the store's
    /// capacity: on a capped store that is full, a new key peeks allowed while a
    /// `check` of it fails with [`Error::StoreFull`].
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for a cost of 0; the store's errors.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new());
    /// assert!(limiter.peek(&3u32, 1).unwrap().is_allowed());
    /// assert!(limiter.peek(&3u32, 1).unwrap().is_allowed());
    /// assert_eq!(limiter.live_keys(), 0);
    /// ```
    pub fn peek<Q>(&self, key: &Q, cost: u64) -> Result<Decision, Error>
    where
        Q: ToOwned<Owned = K> + ?Sized,
        S: Store<Q, A>,
    {
        let cost = nonzero(cost)?;
        let now = self.shared.clock.now();
        self.step_key(key, now, Operation::Peek { cost })
    }

    /// Takes one permit for `key`, blocking as long as needed; returns the time
    /// waited.
    ///
    /// # Errors
    /// [`Error::Never`] if the limit will never grant it; the store's errors.
    ///
    /// ```
    /// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, Error, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let limiter = KeyedRateLimiter::with_clock(window, ManualClock::new());
    /// assert_eq!(limiter.acquire(&"k").unwrap(), Duration::ZERO);
    /// assert_eq!(limiter.acquire(&"k").unwrap(), Duration::from_secs(1)); // the next window
    /// assert_eq!(limiter.acquire(&"other").unwrap(), Duration::ZERO);
    /// assert!(matches!(limiter.acquire_n(&"k", 2), Err(Error::Never { .. })));
    /// ```
    pub fn acquire<Q>(&self, key: &Q) -> Result<Duration, Error>
    where
        Q: ToOwned<Owned = K> + ?Sized,
        S: Store<Q, A>,
    {
        self.acquire_n(key, 1)
    }

    /// Takes `cost` permits for `key`, blocking as long as needed; returns the time
    /// waited. Under Guava's limiters the wait pays for the key's *previous* request.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for 0; [`Error::Never`] if the cost can never be granted
    /// (it fails at once rather than sleeping for ever); the store's errors.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(5.0).unwrap(), clock.clone());
    /// for _ in 0..3 {
    ///     limiter.acquire(&"a").unwrap();
    /// }
    /// assert_eq!(clock.take_sleeps_secs(), vec![0.0, 0.2, 0.2]); // as Guava, at time 0
    /// ```
    pub fn acquire_n<Q>(&self, key: &Q, cost: u64) -> Result<Duration, Error>
    where
        Q: ToOwned<Owned = K> + ?Sized,
        S: Store<Q, A>,
    {
        self.acquire_within(cost, u64::MAX, |now, step| self.step_key(key, now, step))
    }

    /// Takes `cost` permits for `key` if they can be had within `timeout`, waiting
    /// for them; answers `false` at once, consuming nothing, if they cannot.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for 0; the store's errors.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(5.0).unwrap(), ManualClock::new());
    /// assert!(limiter.try_acquire_n_timeout(&1, 1, Duration::ZERO).unwrap());
    /// assert!(!limiter.try_acquire_n_timeout(&1, 1, Duration::from_millis(199)).unwrap());
    /// assert!(limiter.try_acquire_n_timeout(&1, 1, Duration::from_millis(200)).unwrap());
    /// ```
    pub fn try_acquire_n_timeout<Q>(
        &self,
        key: &Q,
        cost: u64,
        timeout: Duration,
    ) -> Result<bool, Error>
    where
        Q: ToOwned<Owned = K> + ?Sized,
        S: Store<Q, A>,
    {
        let budget = duration_to_nanos(timeout);
        granted_within(self.acquire_within(cost, budget, |now, step| self.step_key(key, now, step)))
    }

    /// An async handle on this limiter, sharing its store:
    /// `to_async().acquire(&key).await`.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(5.0).unwrap(), ManualClock::new());
    /// let handle = limiter.to_async();
    /// futures::executor::block_on(async {
    ///     handle.acquire(&"k").await.unwrap();
    ///     handle.acquire(&"k").await.unwrap();
    /// });
    /// assert_eq!(limiter.clock().take_sleeps_secs(), vec![0.0, 0.2]);
    /// assert!(!limiter.try_acquire(&"k")); // the handle shares the store
    /// ```
    pub fn to_async(&self) -> AsyncKeyedRateLimiter<K, A, S, C> {
        AsyncKeyedRateLimiter::from(self.clone())
    }

    /// One store step on `key`, answered in the caller's report.
    #[inline]
    pub(crate) fn step_key<Q, R: Report>(
        &self,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<R, Error>
    where
        Q: ?Sized,
        S: Store<Q, A>,
    {
        let shared = &*self.shared;
        Store::<Q, A>::apply_key(&shared.store, &shared.algorithm, key, now, step)
    }

    /// The blocking core, as the direct limiter's: reserve by `step` for a
    /// caller willing to wait up to `budget`, then sleep until the grant may act;
    /// algorithms that cannot reserve the future deny with a `retry_after`, slept
    /// and retried while the budget lasts.
    pub(super) fn acquire_within(
        &self,
        cost: u64,
        budget: Nanos,
        step: impl Fn(Nanos, Operation<'_>) -> Result<Decision, Error>,
    ) -> Result<Duration, Error> {
        let cost = nonzero(cost)?;
        wait_blocking(&self.shared.clock, cost, budget, |now, left| {
            step(
                now,
                Operation::Reserve {
                    cost,
                    max_wait: left,
                },
            )
        })
    }

    pub(crate) fn shared_parts(&self) -> (&A, &S, &C) {
        (
            &self.shared.algorithm,
            &self.shared.store,
            &self.shared.clock,
        )
    }

    pub(crate) fn waits(&self) -> &Ledger<Deferred<A, S>> {
        &self.shared.waits
    }
}
