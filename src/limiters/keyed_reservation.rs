//! Keyed reservations: permits taken now on one key or several, acted on later, or
//! given back, by the direct [`Reservation`](super::Reservation)'s rule.

use super::combine::{combine, with_repeats_of};
use super::direct::nonzero;
use super::keyed_all::no_keys;
use super::{reservation, KeyedRateLimiter};
use crate::algorithms::{Algorithm, Decision, Receipt};
use crate::clock::{Clock, DefaultClock, Nanos};
use crate::error::Error;
use crate::stores::store::blank;
use crate::stores::{MemoryStore, Operation, Store};
use std::fmt;
use std::future::Future;
use std::time::Duration;

/// Permits reserved on one key ([`KeyedRateLimiter::reserve`]) or on several at
/// once ([`reserve_all`](KeyedRateLimiter::reserve_all), and the async
/// [`AsyncKeyedRateLimiter::reserve`](crate::AsyncKeyedRateLimiter::reserve)): the
/// caller may act at [`acts_at`](Self::acts_at), after [`delay`](Self::delay), or
/// give the permits back with [`cancel`](Self::cancel). The methods mean what the
/// direct [`Reservation`](crate::Reservation)'s do, key by key: given the same calls
/// on one key, a keyed reservation decides and gives back exactly what a direct
/// limiter's does.
///
/// **Several keys** are all-or-nothing, as
/// [`check_all`](KeyedRateLimiter::check_all): the reservation is ok only if every
/// key grants it, and then every key is charged; its decision is the combined one
/// (the type docs of [`KeyedRateLimiter`] say which), so the caller acts once the
/// latest of the keys' turns has come, and that one time to act is the
/// reservation's on every key.
///
/// **Cancelling** follows Go's `Reservation.Cancel` rule, as
/// [`Algorithm::cancel`] states it, through one [`Operation::Cancel`] on every key of
/// the reservation: up to the time to act, that instant included, the permits come
/// back *as far as later grants on the same key allow*; after it, nothing does. An
/// explicit reservation stays on this rule, cancelled at once and alone, because
/// its holder chooses the order: cancelling a group latest first gives it all back.
/// The async acquires' [abandoned waits](crate::AsyncKeyedRateLimiter) are recorded
/// apart; to them, and to other processes on a shared store, a reservation is a
/// grant by another caller. On a set of limits ([`AllOf`](crate::algorithms::AllOf),
/// [`Limits`](crate::algorithms::Limits)) the receipt carries every member's own,
/// so any of a key's reservations on a set comes back by the same rule, each key's
/// by its own time to act (also for a key of a
/// [`reserve_all`](KeyedRateLimiter::reserve_all) whose own turn came first).
///
/// **Dropping** a reservation without cancelling keeps the permits taken.
///
/// **Failures.** [`cancel`](Self::cancel) is one store step: one round trip to a
/// remote store, answering the store's error as any call does
/// ([`Error::Store`] says whether it may have been applied: with
/// [`Applied::No`](crate::Applied::No) the permits stay taken; with
/// [`Applied::Unknown`](crate::Applied::Unknown) they may have come back, and since
/// a receipt cancelled twice may give back twice, the reservation is consumed and
/// cannot be cancelled again). A lost cancel leaves permits taken, never grants
/// more than the limit. The in-memory store's cancel cannot fail. In async code,
/// [`cancel_async`](Self::cancel_async) does the same without blocking the
/// executor.
///
/// **Time.** The time to act is on the limiter's clock: when the reservation was
/// asked for, plus the wait the store answered. A store that decides at its own
/// time (Redis, by default) answers that wait relative to it, so the time to act is
/// placed within a request's travel time; the cancel sends it relative to the time
/// of the cancel, so both sides judge "has it passed" by the caller's clock.
///
/// The reservation owns what it needs (a handle on the limiter, its keys and
/// receipts): it is `'static`, and `Send` when `K` is (`Sync` when `K` is).
///
/// ```
/// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
/// use std::time::Duration;
/// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(2.0).unwrap(), ManualClock::new());
/// let first = limiter.reserve(&"alice", 1).unwrap();
/// assert_eq!(first.delay(), Duration::ZERO);
/// let second = limiter.reserve(&"alice", 1).unwrap();
/// assert_eq!(second.delay(), Duration::from_millis(500)); // pays for the first
/// assert_eq!(limiter.reserve(&"bob", 1).unwrap().delay(), Duration::ZERO); // bob's own limit
/// second.cancel().unwrap(); // the latest on alice: all of it comes back
/// assert_eq!(limiter.reserve(&"alice", 1).unwrap().delay(), Duration::from_millis(500));
/// ```
pub struct KeyedReservation<K, A: Algorithm, S = MemoryStore<K, A>, C: Clock = DefaultClock> {
    limiter: KeyedRateLimiter<K, A, S, C>,
    keys: Vec<K>,
    /// One per key, in the order of `keys` (nothing to give back when not ok).
    receipts: Vec<Receipt>,
    decision: Decision,
    acts_at: Nanos,
}

impl<K: fmt::Debug, A: Algorithm, S, C: Clock> fmt::Debug for KeyedReservation<K, A, S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedReservation")
            .field("keys", &self.keys)
            .field("decision", &self.decision)
            .field("acts_at", &self.acts_at)
            .finish_non_exhaustive()
    }
}

impl<K, A: Algorithm, S: Store<K, A>, C: Clock> KeyedReservation<K, A, S, C> {
    /// The reservation a reserve step answered at `now`, one answer per key, and
    /// their one `decision`.
    fn new(
        limiter: KeyedRateLimiter<K, A, S, C>,
        keys: Vec<K>,
        answers: &[(Decision, Receipt)],
        decision: Decision,
        now: Nanos,
    ) -> Self {
        KeyedReservation {
            limiter,
            keys,
            receipts: answers.iter().map(|(_, receipt)| receipt.clone()).collect(),
            decision,
            acts_at: now.saturating_add(decision.wait_nanos()),
        }
    }

    /// True if the permits were reserved (on every key).
    ///
    /// ```
    /// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let limiter = KeyedRateLimiter::with_clock(window, ManualClock::new());
    /// assert!(limiter.reserve(&"k", 1).unwrap().is_ok());
    /// assert!(!limiter.reserve(&"k", 1).unwrap().is_ok()); // a window cannot reserve the future
    /// assert!(!limiter.reserve_all(&["fresh", "k"], 1).unwrap().is_ok()); // all or nothing
    /// assert!(limiter.reserve(&"fresh", 1).unwrap().is_ok()); // nothing was taken from it
    /// ```
    pub fn is_ok(&self) -> bool {
        self.decision.is_allowed()
    }

    /// The decision behind this reservation, as [`check`](KeyedRateLimiter::check)
    /// answers one (the combined decision for several keys). Not ok: denied with a
    /// `retry_after` (a window, which cannot reserve the future, or a full queue),
    /// or never (a cost above what a key's limit can ever hold).
    ///
    /// ```
    /// use sluicegate::algorithms::LeakyBucket;
    /// use sluicegate::{clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// // A queue of 3, one leaving every 100 ms.
    /// let queue = LeakyBucket::queue(3, 1, Duration::from_millis(100)).unwrap();
    /// let limiter = KeyedRateLimiter::with_clock(queue, ManualClock::new());
    /// assert!(limiter.reserve(&"k", 4).unwrap().decision().is_never());
    /// let turn = limiter.reserve(&"k", 1).unwrap();
    /// assert_eq!(turn.decision().remaining(), 2);
    /// ```
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// When the caller may act, on the limiter's clock (nanoseconds): the time of
    /// the reserve plus its wait. For a reservation that is not ok, the time of the
    /// reserve.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::{Clock, ManualClock}, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_secs(10));
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(2.0).unwrap(), clock.clone());
    /// limiter.check(&"k", 3).unwrap(); // the burst of 2, and one paid by the next call
    /// assert_eq!(limiter.reserve(&"k", 1).unwrap().acts_at(), clock.now() + 500_000_000);
    /// ```
    pub fn acts_at(&self) -> Nanos {
        self.acts_at
    }

    /// How long from now until the caller may act (zero once it may, never
    /// negative). For a reservation that is not ok, its `retry_after` as of when it
    /// was made (`u64::MAX` nanoseconds for never).
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::{clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let clock = ManualClock::new();
    /// let limiter = KeyedRateLimiter::with_clock(window, clock.clone());
    /// let granted = limiter.reserve(&"k", 1).unwrap();
    /// let refused = limiter.reserve(&"k", 1).unwrap();
    /// clock.advance(Duration::from_millis(300));
    /// assert_eq!(granted.delay(), Duration::ZERO);
    /// assert_eq!(refused.delay(), Duration::from_secs(1)); // as of when it was made
    /// ```
    pub fn delay(&self) -> Duration {
        reservation::delay(&self.decision, self.acts_at, self.limiter.clock())
    }

    /// Blocks the thread until the caller may act, sleeping on the limiter's clock,
    /// and returns how long that was. Returns at once for a reservation that is not
    /// ok. The permits stay taken.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(4.0).unwrap(), clock.clone());
    /// limiter.reserve(&"k", 1).unwrap().wait();
    /// assert_eq!(limiter.reserve(&"k", 1).unwrap().wait(), Duration::from_millis(250));
    /// assert_eq!(clock.take_sleeps_secs(), vec![0.0, 0.25]);
    /// ```
    pub fn wait(self) -> Duration {
        reservation::wait(&self.decision, self.acts_at, self.limiter.clock())
    }

    /// [`wait`](Self::wait) without blocking the thread: a future that completes
    /// once the caller may act, on the limiter's clock
    /// ([`Clock::sleep_async`]), and resolves to how long that was from this call.
    /// Ready at once for a reservation that is not ok. Dropping the future keeps
    /// the permits taken: the reservation is consumed either way.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::{Clock, ManualClock}, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(4.0).unwrap(), clock.clone());
    /// let handle = limiter.to_async();
    /// futures::executor::block_on(async {
    ///     handle.reserve(&"k", 1).await.unwrap().wait_async().await;
    ///     let r = handle.reserve(&"k", 1).await.unwrap();
    ///     assert_eq!(r.wait_async().await, Duration::from_millis(250));
    /// });
    /// assert_eq!(clock.now(), 250_000_000);
    /// ```
    pub fn wait_async(self) -> impl Future<Output = Duration> + Send + 'static {
        let delay = if self.is_ok() {
            self.delay()
        } else {
            Duration::ZERO
        };
        let sleep = self
            .is_ok()
            .then(|| self.limiter.clock().sleep_async(delay));
        async move {
            if let Some(sleep) = sleep {
                sleep.await;
            }
            delay
        }
    }

    /// Gives the reserved permits back now, on every key of the reservation, as
    /// far as the grants made after it allow (Go's rule, see the type's docs):
    /// cancel a group latest first to give all of it back. Gives nothing back once
    /// the time to act has passed, and does nothing for a reservation that is not
    /// ok (no store call).
    ///
    /// Blocks for the store's step: one round trip to a remote store.
    ///
    /// # Errors
    /// The store's errors; see the type's docs for what a failed cancel leaves.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), clock.clone());
    /// limiter.acquire(&"k").unwrap();
    /// let late = limiter.reserve(&"k", 1).unwrap(); // acts at 1 s
    /// clock.advance(Duration::from_secs(2)); // past its time to act
    /// late.cancel().unwrap(); // nothing comes back
    /// assert!(limiter.try_acquire(&"k")); // the reserved permit's interval has run out
    /// assert!(!limiter.try_acquire(&"k")); // a restoring cancel would have let this pass too
    /// ```
    pub fn cancel(self) -> Result<(), Error> {
        if !self.is_ok() {
            return Ok(());
        }
        let now = self.limiter.clock().now();
        self.limiter.step(&self.keys, now, self.cancel_step())?;
        Ok(())
    }

    /// [`cancel`](Self::cancel) without blocking the executor: the step goes
    /// through [`Store::apply_async`] (a remote store's reply travels while the
    /// task waits; the in-memory store answers at once), and the future resolves
    /// with its outcome. The time of the cancel is read when this is called. The
    /// cancel is applied once the future has run to its end; dropped before that,
    /// it may not be, and the permits stay taken. Cancels reach the store in the
    /// order they are awaited: to give a group back latest first, await each before
    /// starting the next (cancels spawned as separate tasks run in any order).
    ///
    /// # Errors
    /// As [`cancel`](Self::cancel), when the future resolves.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new());
    /// let handle = limiter.to_async();
    /// futures::executor::block_on(async {
    ///     let taken: Vec<_> = vec![
    ///         handle.reserve(&"k", 1).await.unwrap(), // acts now
    ///         handle.reserve(&"k", 1).await.unwrap(), // at 1 s
    ///         handle.reserve(&"k", 1).await.unwrap(), // at 2 s
    ///     ];
    ///     for r in taken.into_iter().rev() {
    ///         r.cancel_async().await.unwrap(); // latest first: all three come back
    ///     }
    /// });
    /// assert!(limiter.try_acquire(&"k"));
    /// ```
    pub fn cancel_async(self) -> impl Future<Output = Result<(), Error>> + Send + 'static {
        let pending = self.is_ok().then(|| {
            let (algorithm, store, clock) = self.limiter.shared_parts();
            store.apply_async(algorithm, &self.keys, clock.now(), self.cancel_step())
        });
        async move {
            if let Some(pending) = pending {
                pending.await?;
            }
            Ok(())
        }
    }

    fn cancel_step(&self) -> Operation<'_> {
        Operation::Cancel {
            receipts: &self.receipts,
            acts_at: self.acts_at,
        }
    }
}

/// The reserve step of every keyed reservation: `cost` permits for a caller who
/// takes whatever turn comes (as the direct limiter's reserve).
fn reserve_step(cost: u64) -> Result<Operation<'static>, Error> {
    Ok(Operation::Reserve {
        cost: nonzero(cost)?,
        max_wait: u64::MAX,
    })
}

impl<K: Clone, A: Algorithm, S: Store<K, A>, C: Clock> KeyedRateLimiter<K, A, S, C> {
    /// Reserves `cost` permits for `key` now, for a caller who will act when the
    /// reservation says and may change its mind: see [`KeyedReservation`]. Never
    /// blocks but for the store's step (one round trip to a remote store). Under
    /// Guava's limiters and the leaky-bucket queue it takes a turn in the future;
    /// a window, which cannot reserve the future, answers a reservation that is not
    /// ok, with its `retry_after`, unless the permits are free now; a cost above
    /// what the key's limit can ever hold answers one whose decision is never.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for a cost of 0; the store's errors (e.g.
    /// [`Error::StoreFull`]). Nothing is reserved on error, except that a remote
    /// store's [`Applied::Unknown`](crate::Applied::Unknown) may have reserved,
    /// with no reservation to cancel it by.
    ///
    /// ```
    /// use sluicegate::algorithms::{FixedWindow, SmoothBursty};
    /// use sluicegate::{clock::ManualClock, Error, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new());
    /// limiter.acquire(&"k").unwrap();
    /// let r = limiter.reserve(&"k", 1).unwrap();
    /// assert_eq!(r.delay(), Duration::from_secs(1));
    /// r.cancel().unwrap(); // the next caller waits 1 s, not 2 s
    /// assert_eq!(limiter.reserve(&"k", 1).unwrap().delay(), Duration::from_secs(1));
    /// assert!(matches!(limiter.reserve(&"k", 0), Err(Error::ZeroCost)));
    ///
    /// let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    /// let windowed = KeyedRateLimiter::with_clock(window, ManualClock::new());
    /// assert!(windowed.reserve(&"k", 3).unwrap().decision().is_never()); // above capacity
    /// windowed.reserve(&"k", 2).unwrap();
    /// let refused = windowed.reserve(&"k", 1).unwrap();
    /// assert!(!refused.is_ok());
    /// assert_eq!(refused.decision().retry_after(), Duration::from_secs(1));
    /// ```
    pub fn reserve<Q>(&self, key: &Q, cost: u64) -> Result<KeyedReservation<K, A, S, C>, Error>
    where
        Q: ToOwned<Owned = K> + ?Sized,
        S: Store<Q, A>,
    {
        let step = reserve_step(cost)?;
        let now = self.clock().now();
        let answer: (Decision, Receipt) = self.step_key(key, now, step)?;
        Ok(KeyedReservation::new(
            self.clone(),
            vec![key.to_owned()],
            std::slice::from_ref(&answer),
            answer.0,
            now,
        ))
    }

    /// Reserves `cost` permits on *every* key in `keys`, or on none, in one atomic
    /// store step: ok only if each key's limit grants it (see
    /// [`KeyedReservation`]). A key listed twice is charged twice (the store's
    /// contract), so the call is never granted where its limit could never grant
    /// twice the cost at once, and its two grants are cancelled in the order
    /// listed, the first giving back only what the second leaves: pass each key
    /// once.
    ///
    /// # Errors
    /// As [`reserve`](Self::reserve), plus [`Error::InvalidCount`] for no keys.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(2.0).unwrap(), ManualClock::new());
    /// limiter.acquire(&"user:alice").unwrap();
    /// // The IP is fresh but alice pays for her last call: both act in 0.5 s.
    /// let both = limiter.reserve_all(&["ip:10.0.0.1", "user:alice"], 1).unwrap();
    /// assert_eq!(both.delay(), Duration::from_millis(500));
    /// both.cancel().unwrap(); // given back on both keys
    /// assert!(limiter.try_acquire(&"ip:10.0.0.1"));
    /// assert!(limiter.reserve_all(&[], 1).is_err());
    /// ```
    pub fn reserve_all(&self, keys: &[K], cost: u64) -> Result<KeyedReservation<K, A, S, C>, Error>
    where
        K: PartialEq,
    {
        let step = reserve_step(cost)?;
        if keys.is_empty() {
            return Err(no_keys());
        }
        let (algorithm, store, clock) = self.shared_parts();
        let now = clock.now();
        let mut answers = vec![blank(); keys.len()];
        store.apply(algorithm, keys, now, step, &mut answers)?;
        let decision = with_repeats_of(combine(&answers), algorithm, keys, now, step);
        Ok(KeyedReservation::new(
            self.clone(),
            keys.to_vec(),
            &answers,
            decision,
            now,
        ))
    }
}

/// The async twin of [`KeyedRateLimiter::reserve_all`]: the same step, through
/// [`Store::apply_async`].
pub(crate) async fn reserve_async<K, A, S, C>(
    limiter: KeyedRateLimiter<K, A, S, C>,
    keys: Vec<K>,
    cost: u64,
) -> Result<KeyedReservation<K, A, S, C>, Error>
where
    K: PartialEq,
    A: Algorithm,
    S: Store<K, A>,
    C: Clock,
{
    let step = reserve_step(cost)?;
    if keys.is_empty() {
        return Err(no_keys());
    }
    let now = limiter.clock().now();
    let pending = {
        let (algorithm, store, _) = limiter.shared_parts();
        store.apply_async(algorithm, &keys, now, step)
    };
    let answers = pending.await?;
    let decision = with_repeats_of(combine(&answers), limiter.algorithm(), &keys, now, step);
    Ok(KeyedReservation::new(
        limiter, keys, &answers, decision, now,
    ))
}
