//! Async waiting on a [`KeyedRateLimiter`].

use super::combine::{combine, repeats_never, with_repeats, with_repeats_of};
use super::direct::nonzero;
use super::keyed_all::no_keys;
use super::keyed_reservation::reserve_async;
use super::ledger::Ticket;
use super::waiting::{granted_within, wait_async, Held};
use super::{KeyedRateLimiter, KeyedReservation};
use crate::algorithms::{Algorithm, Decision, Receipt};
use crate::clock::{duration_to_nanos, Clock, DefaultClock, Nanos};
use crate::error::Error;
use crate::stores::{MemoryStore, Operation, Store};
use std::future::Future;
use std::time::Duration;

/// An async handle on a [`KeyedRateLimiter`]: `limiter.acquire(&key).await`.
///
/// Made with [`KeyedRateLimiter::to_async`] (or `From`); it shares the store with the
/// limiter, so blocking and async callers mix on the same keys. Cloning is cheap.
///
/// The store step itself runs through [`Store::apply_async`], so a remote store
/// does not block the executor while its reply travels; the in-memory store answers
/// at once. Waits use the limiter's clock (virtual under a
/// [`ManualClock`](crate::clock::ManualClock)).
///
/// The futures are `Send + 'static` (they hold copies of their keys). **Dropping an acquire
/// before its wait ends gives its grant back** on every key, so abandoned tasks do
/// not consume capacity, by the rule of the direct limiter's
/// [abandoned waits](crate::AsyncRateLimiter#abandoned-waits): waits dropped
/// together are given back latest first, each once no wait after it is pending.
/// The waits are recorded per key, and an `acquire_all` per key list (in the order
/// of its keys), so a pending wait holds back only the waits on the same key or
/// list. The guarantee is the direct limiter's, per key or key list: a group of
/// waits abandoned together, with no pending wait of this process on the same key
/// or list reserved after them, gives back all its permits, as far as grants made
/// after them by others allow: a blocking acquire, another process on a shared
/// store, or a wait of this process on a list that shares a key with them (a
/// single key and a longer list holding it are recorded apart; a list of one key
/// is recorded as that key, whose state it alone reserves on). Keys are told apart by the
/// store ([`Store::key_id`]: the in-memory and Redis stores do); on a store that
/// cannot, each dropped wait is cancelled alone, at once, by Go's rule. A store
/// that decides at its own time (Redis, by default) answers waits relative to it,
/// so their times to act are placed on the caller's clock within a request's
/// travel time: waits whose turns are closer together than the network's jitter
/// may be given back out of order, and then give back less, never more.
///
/// The cancels go through [`Store::cancel_detached`], which never blocks the
/// dropping thread and keeps their order: the in-memory store applies each at
/// once; the Redis store sends them one after another, in the order given, without
/// the dropping task waiting for the replies, and its later calls wait for them
/// (so a request made right after a group timed out takes one of their turns), so
/// with a remote store the permits come back only if the requests arrive (if one
/// is lost, they stay taken, never the reverse).
///
/// [`reserve`](Self::reserve) and [`reserve_all`](Self::reserve_all) answer a
/// [`KeyedReservation`] through [`Store::apply_async`] too. Its permits are the
/// caller's to act on or give back ([`KeyedReservation::cancel_async`], awaited,
/// in the order the caller chooses), by Go's rule at once; it is not recorded with
/// the waits, to which it is a grant by another caller.
///
/// ```
/// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
/// let clock = ManualClock::new();
/// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(5.0).unwrap(), clock.clone()).to_async();
/// futures::executor::block_on(async {
///     for _ in 0..3 {
///         limiter.acquire(&"alice").await.unwrap();
///     }
///     limiter.acquire(&"bob").await.unwrap();
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
    pub fn try_acquire<Q>(&self, key: &Q) -> bool
    where
        Q: ToOwned<Owned = K> + ?Sized,
        S: Store<Q, A>,
    {
        self.limiter.try_acquire(key)
    }
}

/// The waiting calls. Each borrows its keys, as the blocking calls do, and its
/// future holds a copy of them: it outlives the call, and a wait abandoned midway
/// still names its keys when it gives its grant back.
impl<K, A, S, C> AsyncKeyedRateLimiter<K, A, S, C>
where
    K: Clone + PartialEq + Send + Sync + 'static,
    A: Algorithm,
    S: Store<K, A> + 'static,
    C: Clock,
{
    /// Takes `cost` permits for `key` if that needs no waiting, answering with the
    /// full [`Decision`], without blocking the executor on the store.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for 0; the store's errors.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new()).to_async();
    /// let d = futures::executor::block_on(limiter.check(&7u32, 1)).unwrap();
    /// assert!(d.is_allowed());
    /// ```
    pub fn check<Q: ToOwned<Owned = K> + ?Sized>(
        &self,
        key: &Q,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + Send + 'static + use<Q, K, A, S, C> {
        let limiter = self.limiter.clone();
        let keys = [key.to_owned()];
        async move {
            let cost = nonzero(cost)?;
            let now = limiter.clock().now();
            step_async(
                &limiter,
                &keys,
                now,
                Operation::Reserve { cost, max_wait: 0 },
            )
            .await
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
    ///     assert_eq!(handle.acquire(&"k").await.unwrap(), Duration::ZERO);
    ///     assert_eq!(handle.acquire(&"k").await.unwrap(), Duration::from_millis(250));
    /// });
    /// ```
    pub fn acquire<Q: ToOwned<Owned = K> + ?Sized>(
        &self,
        key: &Q,
    ) -> impl Future<Output = Result<Duration, Error>> + Send + 'static + use<Q, K, A, S, C> {
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
    ///     assert_eq!(handle.acquire_n(&"k", 3).await.unwrap(), Duration::ZERO);
    ///     assert_eq!(handle.acquire_n(&"k", 2).await.unwrap(), Duration::from_secs(1));
    ///     assert!(matches!(handle.acquire_n(&"k", 4).await, Err(Error::Never { .. })));
    ///     assert!(matches!(handle.acquire_n(&"k", 0).await, Err(Error::ZeroCost)));
    /// });
    /// ```
    pub fn acquire_n<Q: ToOwned<Owned = K> + ?Sized>(
        &self,
        key: &Q,
        cost: u64,
    ) -> impl Future<Output = Result<Duration, Error>> + Send + 'static + use<Q, K, A, S, C> {
        // One key travels in a one-element array: no allocation per call.
        acquire_within(self.limiter.clone(), [key.to_owned()], cost, u64::MAX)
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
    ///     limiter.acquire_all(&["ip", "user"], 1).await.unwrap();
    ///     limiter.acquire_all(&["ip", "user"], 1).await.unwrap();
    /// });
    /// assert_eq!(clock.take_sleeps_secs(), vec![0.0, 0.5]);
    /// ```
    pub fn acquire_all(
        &self,
        keys: &[K],
        cost: u64,
    ) -> impl Future<Output = Result<Duration, Error>> + Send + 'static + use<K, A, S, C> {
        acquire_within(self.limiter.clone(), keys.to_vec(), cost, u64::MAX)
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
    ///     assert!(handle.try_acquire_n_timeout(&"k", 1, Duration::ZERO).await.unwrap());
    ///     assert!(!handle.try_acquire_n_timeout(&"k", 1, Duration::from_millis(199)).await.unwrap());
    ///     assert!(handle.try_acquire_n_timeout(&"k", 1, Duration::from_millis(200)).await.unwrap());
    ///     assert!(handle.try_acquire_n_timeout(&"k", 0, Duration::ZERO).await.is_err());
    /// });
    /// ```
    pub fn try_acquire_n_timeout<Q: ToOwned<Owned = K> + ?Sized>(
        &self,
        key: &Q,
        cost: u64,
        timeout: Duration,
    ) -> impl Future<Output = Result<bool, Error>> + Send + 'static + use<Q, K, A, S, C> {
        let budget = duration_to_nanos(timeout);
        let acquired = acquire_within(self.limiter.clone(), [key.to_owned()], cost, budget);
        async move { granted_within(acquired.await) }
    }

    /// Reserves `cost` permits for `key`, as [`KeyedRateLimiter::reserve`] does,
    /// without blocking the executor on the store: the step goes through
    /// [`Store::apply_async`], and the future resolves with the
    /// [`KeyedReservation`]. It never sleeps; act after
    /// [`wait_async`](KeyedReservation::wait_async), or give the permits back with
    /// [`cancel_async`](KeyedReservation::cancel_async). The time of the reserve
    /// is read when the future is first polled. A future dropped before it resolves
    /// may have reserved on a remote store (the request was sent): those permits
    /// stay taken, as a dropped reservation's do.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for 0; the store's errors.
    ///
    /// ```
    /// use sluicegate::algorithms::{FixedWindow, SmoothBursty};
    /// use sluicegate::{clock::ManualClock, Error, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let handle = KeyedRateLimiter::with_clock(SmoothBursty::new(2.0).unwrap(), ManualClock::new()).to_async();
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let windowed = KeyedRateLimiter::with_clock(window, ManualClock::new()).to_async();
    /// futures::executor::block_on(async {
    ///     assert_eq!(handle.reserve(&"k", 1).await.unwrap().delay(), Duration::ZERO);
    ///     let second = handle.reserve(&"k", 1).await.unwrap();
    ///     assert_eq!(second.delay(), Duration::from_millis(500));
    ///     assert!(matches!(handle.reserve(&"k", 0).await, Err(Error::ZeroCost)));
    ///     assert!(windowed.reserve(&"k", 2).await.unwrap().decision().is_never());
    ///     windowed.reserve(&"k", 1).await.unwrap();
    ///     let refused = windowed.reserve(&"k", 1).await.unwrap(); // a window cannot reserve the future
    ///     assert_eq!(refused.delay(), Duration::from_secs(1));
    /// });
    /// ```
    pub fn reserve<Q: ToOwned<Owned = K> + ?Sized>(
        &self,
        key: &Q,
        cost: u64,
    ) -> impl Future<Output = Result<KeyedReservation<K, A, S, C>, Error>>
           + Send
           + 'static
           + use<Q, K, A, S, C> {
        reserve_async(self.limiter.clone(), vec![key.to_owned()], cost)
    }

    /// Reserves `cost` permits on every key in `keys`, or on none, as
    /// [`KeyedRateLimiter::reserve_all`] does, without blocking the executor on
    /// the store (see [`reserve`](Self::reserve)).
    ///
    /// # Errors
    /// As [`reserve`](Self::reserve), plus [`Error::InvalidCount`] for no keys.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let handle = KeyedRateLimiter::with_clock(SmoothBursty::new(2.0).unwrap(), ManualClock::new()).to_async();
    /// futures::executor::block_on(async {
    ///     handle.acquire(&"user").await.unwrap();
    ///     let both = handle.reserve_all(&["ip", "user"], 1).await.unwrap();
    ///     assert_eq!(both.delay(), Duration::from_millis(500)); // the user's turn
    ///     both.cancel_async().await.unwrap(); // given back on both keys
    ///     assert!(handle.try_acquire(&"ip"));
    ///     assert!(handle.reserve_all(&[], 1).await.is_err());
    /// });
    /// ```
    pub fn reserve_all(
        &self,
        keys: &[K],
        cost: u64,
    ) -> impl Future<Output = Result<KeyedReservation<K, A, S, C>, Error>>
           + Send
           + 'static
           + use<K, A, S, C> {
        reserve_async(self.limiter.clone(), keys.to_vec(), cost)
    }
}

/// One store step through [`Store::apply_async`], combined into one decision
/// (a reserve or peek never for its repeated keys, see [`repeats_never`]).
async fn step_async<K, A, S, C>(
    limiter: &KeyedRateLimiter<K, A, S, C>,
    keys: &[K],
    now: Nanos,
    step: Operation<'_>,
) -> Result<Decision, Error>
where
    K: PartialEq,
    A: Algorithm,
    S: Store<K, A>,
    C: Clock,
{
    if keys.is_empty() {
        return Err(no_keys());
    }
    let (algorithm, store, _) = limiter.shared_parts();
    let answers = store.apply_async(algorithm, keys, now, step).await?;
    Ok(with_repeats_of(
        combine(&answers),
        algorithm,
        keys,
        now,
        step,
    ))
}

/// A keyed grant given back after its wait was abandoned: a cancel of its keys
/// and receipts, given the limiter's algorithm and store, the time now and when
/// the grant was to act. Boxed so that the ledger's type names no key type.
pub(crate) type Deferred<A, S> = Box<dyn FnOnce(&A, &S, Nanos, Nanos) + Send>;

/// A keyed grant held while its caller sleeps, with the keys it was granted on. A
/// grant that must wait is recorded in the limiter's ledger (grouped by its keys,
/// when the store can name them), through which it acts, or, dropped mid-sleep, is
/// given back; one that acts at once has nothing to give back.
struct Waiting<'a, K, A, S, C, Keys>
where
    A: Algorithm,
    S: Store<K, A>,
    C: Clock,
    Keys: AsRef<[K]> + Send + 'static,
{
    limiter: &'a KeyedRateLimiter<K, A, S, C>,
    /// The keys and receipts, while there is something to give back.
    grant: Option<(Keys, Vec<Receipt>)>,
    acts_at: Nanos,
    /// Where the wait is recorded; `None` when the store cannot name its keys, and
    /// a dropped wait is cancelled alone, at once.
    ticket: Option<Ticket>,
}

impl<K, A, S, C, Keys> Drop for Waiting<'_, K, A, S, C, Keys>
where
    A: Algorithm,
    S: Store<K, A>,
    C: Clock,
    Keys: AsRef<[K]> + Send + 'static,
{
    fn drop(&mut self) {
        let Some((keys, receipts)) = self.grant.take() else {
            return;
        };
        let (algorithm, store, clock) = self.limiter.shared_parts();
        let now = clock.now();
        let Some(ticket) = self.ticket.take() else {
            store.cancel_detached(algorithm, keys.as_ref(), now, &receipts, self.acts_at);
            return;
        };
        let grant: Deferred<A, S> = Box::new(move |algorithm, store, now, acts_at| {
            store.cancel_detached(algorithm, keys.as_ref(), now, &receipts, acts_at);
        });
        self.limiter
            .waits()
            .abandon(ticket, grant, now, |grant, acts_at| {
                grant(algorithm, store, now, acts_at);
            });
    }
}

impl<K, A, S, C, Keys> Held for Waiting<'_, K, A, S, C, Keys>
where
    A: Algorithm,
    S: Store<K, A>,
    C: Clock,
    Keys: AsRef<[K]> + Send + 'static,
{
    fn keep(mut self) {
        self.grant = None;
        if let Some(ticket) = self.ticket.take() {
            self.limiter.waits().act(ticket);
        }
    }
}

/// The ledger group of a call's keys: one key's own number, a key list's the
/// numbers of its keys in order, mixed; `None` if the store cannot name a key.
fn group_of<K, A: Algorithm, S: Store<K, A>>(store: &S, keys: &[K]) -> Option<u64> {
    let mut ids = keys.iter().map(|key| store.key_id(key));
    let first = ids.next()??;
    ids.try_fold(first, |group, id| {
        // Order matters (a multiplier), and equal numbers do not cancel out.
        Some(group.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29) ^ id?)
    })
}

/// The async twin of the blocking core in `keyed.rs`. `keys` is owned by the future
/// (a `Vec`, or a one-element array for a single key), and by a wait it abandons
/// until its grant is given back.
pub(crate) async fn acquire_within<K, A, S, C, Keys>(
    limiter: KeyedRateLimiter<K, A, S, C>,
    keys: Keys,
    cost: u64,
    budget: Nanos,
) -> Result<Duration, Error>
where
    K: PartialEq,
    A: Algorithm,
    S: Store<K, A>,
    C: Clock,
    Keys: AsRef<[K]> + Send + 'static,
{
    let cost = nonzero(cost)?;
    if keys.as_ref().is_empty() {
        return Err(no_keys());
    }
    let (algorithm, store, clock) = limiter.shared_parts();
    let reserve = |keys: &Keys, now, left| {
        let step = Operation::Reserve {
            cost,
            max_wait: left,
        };
        let pending = store.apply_async(algorithm, keys.as_ref(), now, step);
        // Asked before the reply, whose future cannot borrow the keys.
        let never = keys.as_ref().len() > 1 && repeats_never(algorithm, keys.as_ref(), now, cost);
        async move {
            let answers = pending.await?;
            Ok((with_repeats(combine(&answers), || never), answers))
        }
    };
    let hold = |keys: Keys, decision: Decision, answers: Vec<(Decision, Receipt)>, now: Nanos| {
        let wait = decision.wait_nanos();
        let acts_at = now.saturating_add(wait);
        // A grant that acts at once is acted on at once: nothing to give back.
        let ticket = if wait > 0 {
            group_of(store, keys.as_ref()).map(|group| limiter.waits().enter(group, acts_at))
        } else {
            None
        };
        Waiting {
            limiter: &limiter,
            grant: (wait > 0).then(|| (keys, answers.iter().map(|(_, r)| r.clone()).collect())),
            acts_at,
            ticket,
        }
    };
    wait_async(clock, cost, budget, keys, reserve, hold).await
}
