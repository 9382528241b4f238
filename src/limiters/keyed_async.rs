//! Async waiting on a [`KeyedRateLimiter`].

use super::direct::nonzero;
use super::keyed::{combine, no_keys};
use super::waiting::{granted_within, wait_async, Held};
use super::KeyedRateLimiter;
use crate::algorithms::{Algorithm, Decision, Receipt};
use crate::clock::{duration_to_nanos, Clock, DefaultClock, Nanos};
use crate::error::Error;
use crate::stores::{MemoryStore, Step, Store};
use std::future::Future;
use std::time::Duration;

/// An async handle on a [`KeyedRateLimiter`]: `limiter.acquire(key).await`.
///
/// Made with [`KeyedRateLimiter::to_async`] (or `From`); it shares the store with the
/// limiter, so blocking and async callers mix on the same keys. Cloning is cheap.
///
/// The store step itself runs through [`Store::apply_async`], so a remote store
/// does not block the executor while its reply travels; the in-memory store answers
/// at once. Waits use the limiter's clock (virtual under a
/// [`ManualClock`](crate::clock::ManualClock)).
///
/// The futures are `Send + 'static` (they own their keys). **Dropping an acquire
/// before its wait ends cancels its grant** on every key, as far as later grants
/// allow (Go's `Reservation.Cancel` rule), so abandoned tasks do not consume
/// capacity. The cancel goes through [`Store::cancel_detached`], which never blocks
/// the dropping thread: the in-memory store applies it at once; a remote store sends
/// it without waiting for the reply, so with a remote store the permits come back
/// only if that request arrives (if it is lost, they stay taken, never the reverse).
///
/// ```
/// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
/// let clock = ManualClock::new();
/// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(5.0).unwrap(), clock.clone()).to_async();
/// futures::executor::block_on(async {
///     for _ in 0..3 {
///         limiter.acquire("alice").await.unwrap();
///     }
///     limiter.acquire("bob").await.unwrap();
/// });
/// assert_eq!(clock.take_sleeps_secs(), vec![0.0, 0.2, 0.2, 0.0]);
/// ```
pub struct AsyncKeyedRateLimiter<K, A: Algorithm, S = MemoryStore<K, A>, C: Clock = DefaultClock> {
    limiter: KeyedRateLimiter<K, A, S, C>,
}

impl<K, A: Algorithm, S, C: Clock> Clone for AsyncKeyedRateLimiter<K, A, S, C> {
    fn clone(&self) -> Self {
        AsyncKeyedRateLimiter {
            limiter: self.limiter.clone(),
        }
    }
}

impl<K, A: Algorithm, S, C: Clock> From<KeyedRateLimiter<K, A, S, C>>
    for AsyncKeyedRateLimiter<K, A, S, C>
{
    fn from(limiter: KeyedRateLimiter<K, A, S, C>) -> Self {
        AsyncKeyedRateLimiter { limiter }
    }
}

impl<K, A, S, C> AsyncKeyedRateLimiter<K, A, S, C>
where
    K: Send + Sync + 'static,
    A: Algorithm,
    S: Store<K, A> + 'static,
    C: Clock,
{
    /// The blocking limiter this handle shares its store with.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// let handle = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new()).to_async();
    /// assert!(handle.blocking().try_acquire(&"k"));
    /// assert!(!handle.try_acquire(&"k")); // the same store
    /// ```
    pub fn blocking(&self) -> &KeyedRateLimiter<K, A, S, C> {
        &self.limiter
    }

    /// Takes one permit for `key` if that needs no waiting (never waits; a store
    /// error answers `false`). With a remote store this blocks the thread for one
    /// round trip; prefer [`check`](Self::check) in async code.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// let handle = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new()).to_async();
    /// assert!(handle.try_acquire(&"a"));
    /// assert!(!handle.try_acquire(&"a"));
    /// assert!(handle.try_acquire(&"b"));
    /// ```
    pub fn try_acquire(&self, key: &K) -> bool {
        self.limiter.try_acquire(key)
    }

    /// Takes `cost` permits for `key` if that needs no waiting, answering with the
    /// full [`Decision`], without blocking the executor on the store.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for 0; the store's errors.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new()).to_async();
    /// let d = futures::executor::block_on(limiter.check(7u32, 1)).unwrap();
    /// assert!(d.is_allowed());
    /// ```
    pub fn check(
        &self,
        key: K,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + Send + 'static {
        let limiter = self.limiter.clone();
        async move {
            let cost = nonzero(cost)?;
            let keys = [key];
            let now = limiter.clock().now();
            step_async(&limiter, &keys, now, Step::Reserve { cost, max_wait: 0 }).await
        }
    }

    /// Takes one permit for `key`, waiting asynchronously as long as needed;
    /// resolves to the time waited.
    ///
    /// # Errors
    /// [`Error::Never`] if the limit will never grant it; the store's errors.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let handle = KeyedRateLimiter::with_clock(SmoothBursty::new(4.0).unwrap(), ManualClock::new()).to_async();
    /// futures::executor::block_on(async {
    ///     assert_eq!(handle.acquire("k").await.unwrap(), Duration::ZERO);
    ///     assert_eq!(handle.acquire("k").await.unwrap(), Duration::from_millis(250));
    /// });
    /// ```
    pub fn acquire(
        &self,
        key: K,
    ) -> impl Future<Output = Result<Duration, Error>> + Send + 'static {
        self.acquire_n(key, 1)
    }

    /// Takes `cost` permits for `key`, waiting asynchronously as long as needed.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for 0; [`Error::Never`] if the cost can never be granted;
    /// the store's errors.
    ///
    /// ```
    /// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, Error, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(3, Duration::from_secs(1)).unwrap();
    /// let handle = KeyedRateLimiter::with_clock(window, ManualClock::new()).to_async();
    /// futures::executor::block_on(async {
    ///     assert_eq!(handle.acquire_n("k", 3).await.unwrap(), Duration::ZERO);
    ///     assert_eq!(handle.acquire_n("k", 2).await.unwrap(), Duration::from_secs(1));
    ///     assert!(matches!(handle.acquire_n("k", 4).await, Err(Error::Never { .. })));
    ///     assert!(matches!(handle.acquire_n("k", 0).await, Err(Error::ZeroCost)));
    /// });
    /// ```
    pub fn acquire_n(
        &self,
        key: K,
        cost: u64,
    ) -> impl Future<Output = Result<Duration, Error>> + Send + 'static {
        // One key travels in a one-element array: no allocation per call.
        acquire_within(self.limiter.clone(), [key], cost, u64::MAX)
    }

    /// Takes `cost` permits from every key in `keys` (all-or-nothing), waiting
    /// asynchronously as long as needed.
    ///
    /// # Errors
    /// As [`acquire_n`](Self::acquire_n), plus [`Error::InvalidCount`] for no keys.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(2.0).unwrap(), clock.clone()).to_async();
    /// futures::executor::block_on(async {
    ///     limiter.acquire_all(vec!["ip", "user"], 1).await.unwrap();
    ///     limiter.acquire_all(vec!["ip", "user"], 1).await.unwrap();
    /// });
    /// assert_eq!(clock.take_sleeps_secs(), vec![0.0, 0.5]);
    /// ```
    pub fn acquire_all(
        &self,
        keys: Vec<K>,
        cost: u64,
    ) -> impl Future<Output = Result<Duration, Error>> + Send + 'static {
        acquire_within(self.limiter.clone(), keys, cost, u64::MAX)
    }

    /// Takes `cost` permits for `key` if they can be had within `timeout`, waiting
    /// asynchronously; resolves to `false` at once, consuming nothing, if not.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for 0; the store's errors.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let handle = KeyedRateLimiter::with_clock(SmoothBursty::new(5.0).unwrap(), ManualClock::new()).to_async();
    /// futures::executor::block_on(async {
    ///     assert!(handle.try_acquire_n_timeout("k", 1, Duration::ZERO).await.unwrap());
    ///     assert!(!handle.try_acquire_n_timeout("k", 1, Duration::from_millis(199)).await.unwrap());
    ///     assert!(handle.try_acquire_n_timeout("k", 1, Duration::from_millis(200)).await.unwrap());
    ///     assert!(handle.try_acquire_n_timeout("k", 0, Duration::ZERO).await.is_err());
    /// });
    /// ```
    pub fn try_acquire_n_timeout(
        &self,
        key: K,
        cost: u64,
        timeout: Duration,
    ) -> impl Future<Output = Result<bool, Error>> + Send + 'static {
        let budget = duration_to_nanos(timeout);
        let acquired = acquire_within(self.limiter.clone(), [key], cost, budget);
        async move { granted_within(acquired.await) }
    }
}

/// One store step through [`Store::apply_async`], combined into one decision.
async fn step_async<K, A, S, C>(
    limiter: &KeyedRateLimiter<K, A, S, C>,
    keys: &[K],
    now: Nanos,
    step: Step<'_>,
) -> Result<Decision, Error>
where
    A: Algorithm,
    S: Store<K, A>,
    C: Clock,
{
    if keys.is_empty() {
        return Err(no_keys());
    }
    let (algorithm, store, _) = limiter.shared_parts();
    let answers = store.apply_async(algorithm, keys, now, step).await?;
    Ok(combine(&answers))
}

/// Gives back the grants of an acquire whose wait was abandoned.
struct CancelOnDrop<'a, K, A: Algorithm, S: Store<K, A>, C: Clock> {
    limiter: &'a KeyedRateLimiter<K, A, S, C>,
    keys: &'a [K],
    receipts: Option<Vec<Receipt>>,
    acts_at: Nanos,
}

impl<K, A: Algorithm, S: Store<K, A>, C: Clock> Drop for CancelOnDrop<'_, K, A, S, C> {
    fn drop(&mut self) {
        if let Some(receipts) = self.receipts.take() {
            let (algorithm, store, clock) = self.limiter.shared_parts();
            store.cancel_detached(algorithm, self.keys, clock.now(), &receipts, self.acts_at);
        }
    }
}

impl<K, A: Algorithm, S: Store<K, A>, C: Clock> Held for CancelOnDrop<'_, K, A, S, C> {
    fn keep(mut self) {
        self.receipts = None;
    }
}

/// The async twin of the blocking core in `keyed.rs`. `keys` is owned by the future
/// (a `Vec`, or a one-element array for a single key).
pub(crate) async fn acquire_within<K, A, S, C, Keys>(
    limiter: KeyedRateLimiter<K, A, S, C>,
    keys: Keys,
    cost: u64,
    budget: Nanos,
) -> Result<Duration, Error>
where
    A: Algorithm,
    S: Store<K, A>,
    C: Clock,
    Keys: AsRef<[K]>,
{
    let keys = keys.as_ref();
    let cost = nonzero(cost)?;
    if keys.is_empty() {
        return Err(no_keys());
    }
    let (algorithm, store, clock) = limiter.shared_parts();
    let reserve = |now, left| {
        let step = Step::Reserve {
            cost,
            max_wait: left,
        };
        let pending = store.apply_async(algorithm, keys, now, step);
        async move {
            let answers = pending.await?;
            Ok((combine(&answers), answers))
        }
    };
    let hold = |decision: Decision, answers: Vec<(Decision, Receipt)>, now: Nanos| {
        let wait = decision.wait_nanos();
        CancelOnDrop {
            limiter: &limiter,
            keys,
            // A grant that acts at once is acted on at once: nothing to give back.
            receipts: (wait > 0).then(|| answers.iter().map(|(_, r)| *r).collect()),
            acts_at: now.saturating_add(wait),
        }
    };
    wait_async(clock, cost, budget, reserve, hold).await
}
