//! Async waiting on a [`RateLimiter`].

use super::direct::nonzero;
use super::ledger::Ticket;
use super::waiting::{granted_within, wait_async, Held};
use super::RateLimiter;
use crate::algorithms::{Decision, Receipt};
use crate::cells::{CellAlgorithm, StateCell};
use crate::clock::{duration_to_nanos, Clock, DefaultClock, Nanos};
use crate::error::Error;
use std::future::Future;
use std::time::Duration;

/// An async handle on a [`RateLimiter`]: `limiter.acquire().await`.
///
/// Made with [`RateLimiter::to_async`] (or `From`); it shares state with the limiter
/// and every clone of it, so blocking and async callers can mix on one limit. Cloning
/// is cheap.
///
/// Waiting uses the limiter's [`Clock`]: with the default clock a
/// [`futures_timer::Delay`], which works under tokio, async-std or
/// `futures::executor::block_on` alike, with no runtime feature to choose; with a
/// [`ManualClock`](crate::clock::ManualClock) the wait advances virtual time at once.
///
/// The futures are `Send + 'static` (they hold their own handle), so they can be
/// spawned.
///
/// ```
/// use sluicegate::{clock::ManualClock, RateLimiter};
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::bursty_with_clock(5.0, clock.clone()).unwrap().to_async();
/// futures::executor::block_on(async {
///     for _ in 0..3 {
///         limiter.acquire().await.unwrap();
///     }
/// });
/// assert_eq!(clock.take_sleeps_secs(), vec![0.0, 0.2, 0.2]);
/// ```
///
/// # Abandoned waits
///
/// **Dropping an acquire before its wait ends gives its permits back**, so a
/// timed-out or abandoned task does not consume capacity. A grant is cancelled by
/// Go's rule (see [`Reservation`](crate::Reservation)): its permits come back only as far as the grants
/// made after it allow. Waits dropped together (equal timeouts) are dropped in
/// whatever order their tasks happen to run, and cancelled in that order each one
/// with a later grant behind it would give nothing back. So the limiter records
/// the waits that reserved the future, in the order they act (ties in the order
/// they were made), and a dropped wait is given back only once no wait after it is
/// pending:
///
/// * a dropped wait with a pending wait after it is marked abandoned, and gives
///   nothing back yet;
/// * a dropped wait with no pending wait after it is cancelled at once, then every
///   abandoned wait just before it, latest first, up to the first pending one;
/// * a wait that acts leaves the record with the abandoned waits just before it:
///   their time to act has come, and by the cancel rule nothing of theirs comes
///   back, as nothing does for a wait dropped after its time to act.
///
/// The guarantee: **any group of waits abandoned together, with no pending wait of
/// this process reserved after them, gives back all its permits**, as far as the
/// grants made after them by other callers allow (a blocking acquire, a
/// [`Reservation`](crate::Reservation), another process on a shared store), exactly as cancelling them
/// one by one, latest first, does. The price of waiting for the waits after it: a
/// wait abandoned ahead of one that then acts gives nothing back, where a cancel at
/// once would have given back what it took beyond the grants after it. A set of
/// limits ([`AllOf`](crate::algorithms::AllOf),
/// [`Limits`](crate::algorithms::Limits)) follows the same rule: each wait's receipt
/// carries its members' own, so a group on a set comes back whole, as on one limit.
/// The window algorithms' waiters sleep on a refusal and hold no grant: nothing to
/// give back.
///
/// Only a wait that sleeps is recorded, and leaves the record when it acts or is
/// given back: a grant that acts at once, a try and a check take no lock for it and
/// allocate nothing.
///
/// ```
/// use futures::task::noop_waker_ref;
/// use sluicegate::RateLimiter;
/// use std::future::Future;
/// use std::task::Context;
/// use std::time::Duration;
/// // One permit every 100 s: after a first request, the next turn is 100 s away.
/// let limiter = RateLimiter::bursty(0.01).unwrap();
/// limiter.acquire().unwrap();
/// let handle = limiter.to_async();
/// let mut waits: Vec<_> = (0..5).map(|_| Box::pin(handle.acquire())).collect();
/// for wait in &mut waits {
///     // Each reserves its turn (100, 200, … 500 s away) and sleeps.
///     assert!(wait.as_mut().poll(&mut Context::from_waker(noop_waker_ref())).is_pending());
/// }
/// drop(waits); // all five abandoned together, first to last
/// // Every turn is back: the next request waits for the first one only.
/// assert!(limiter.reserve(1).unwrap().delay() <= Duration::from_secs(100));
/// ```
pub struct AsyncRateLimiter<A: CellAlgorithm, C: Clock = DefaultClock> {
    limiter: RateLimiter<A, C>,
}

impl<A: CellAlgorithm, C: Clock> Clone for AsyncRateLimiter<A, C> {
    fn clone(&self) -> Self {
        AsyncRateLimiter {
            limiter: self.limiter.clone(),
        }
    }
}

impl<A: CellAlgorithm, C: Clock> From<RateLimiter<A, C>> for AsyncRateLimiter<A, C> {
    fn from(limiter: RateLimiter<A, C>) -> Self {
        AsyncRateLimiter { limiter }
    }
}

impl<A: CellAlgorithm, C: Clock> AsyncRateLimiter<A, C> {
    /// The blocking limiter this handle shares state with.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let handle = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap().to_async();
    /// assert!(handle.blocking().try_acquire());
    /// assert!(!handle.try_acquire()); // the same state
    /// ```
    pub fn blocking(&self) -> &RateLimiter<A, C> {
        &self.limiter
    }

    /// Takes one permit, waiting asynchronously as long as needed; resolves to the
    /// time waited.
    ///
    /// # Errors
    /// [`Error::Never`] if the limit will never grant again.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// let handle = RateLimiter::bursty_with_clock(4.0, ManualClock::new()).unwrap().to_async();
    /// futures::executor::block_on(async {
    ///     assert_eq!(handle.acquire().await.unwrap(), Duration::ZERO);
    ///     assert_eq!(handle.acquire().await.unwrap(), Duration::from_millis(250));
    /// });
    /// ```
    pub fn acquire(
        &self,
    ) -> impl Future<Output = Result<Duration, Error>> + Send + 'static + use<A, C> {
        self.acquire_n(1)
    }

    /// Takes `cost` permits, waiting asynchronously as long as needed.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for a cost of 0; [`Error::Never`] if the cost can never be
    /// granted.
    ///
    /// ```
    /// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, Error, RateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(3, Duration::from_secs(1)).unwrap();
    /// let handle = RateLimiter::with_clock(window, ManualClock::new()).to_async();
    /// futures::executor::block_on(async {
    ///     assert_eq!(handle.acquire_n(3).await.unwrap(), Duration::ZERO);
    ///     assert_eq!(handle.acquire_n(1).await.unwrap(), Duration::from_secs(1)); // next window
    ///     assert!(matches!(handle.acquire_n(4).await, Err(Error::Never { .. })));
    ///     assert!(matches!(handle.acquire_n(0).await, Err(Error::ZeroCost)));
    /// });
    /// ```
    pub fn acquire_n(
        &self,
        cost: u64,
    ) -> impl Future<Output = Result<Duration, Error>> + Send + 'static + use<A, C> {
        acquire_within(self.limiter.clone(), cost, u64::MAX)
    }

    /// Takes `cost` permits if they can be had within `timeout`, waiting asynchronously;
    /// resolves to `false` at once, consuming nothing, if they cannot.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for a cost of 0.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// let limiter = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap().to_async();
    /// futures::executor::block_on(async {
    ///     assert!(limiter.try_acquire_n_timeout(1, Duration::ZERO).await.unwrap());
    ///     assert!(!limiter.try_acquire_n_timeout(1, Duration::from_millis(10)).await.unwrap());
    ///     assert!(limiter.try_acquire_n_timeout(1, Duration::from_secs(1)).await.unwrap());
    /// });
    /// ```
    pub fn try_acquire_n_timeout(
        &self,
        cost: u64,
        timeout: Duration,
    ) -> impl Future<Output = Result<bool, Error>> + Send + 'static + use<A, C> {
        let acquired = acquire_within(self.limiter.clone(), cost, duration_to_nanos(timeout));
        async move { granted_within(acquired.await) }
    }

    /// Takes one permit if that needs no waiting (never waits; same as the blocking
    /// limiter's).
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let handle = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap().to_async();
    /// assert!(handle.try_acquire());
    /// assert!(!handle.try_acquire());
    /// ```
    pub fn try_acquire(&self) -> bool {
        self.limiter.try_acquire()
    }
}

/// A grant held while its caller sleeps. A grant that must wait is recorded in the
/// limiter's ledger, through which it acts, or, dropped mid-sleep, is given back
/// (see [`ledger`](super::ledger)); one that acts at once has nothing to give back.
struct Waiting<'a, A: CellAlgorithm, C: Clock> {
    limiter: &'a RateLimiter<A, C>,
    receipt: Receipt,
    ticket: Option<Ticket>,
}

impl<A: CellAlgorithm, C: Clock> Drop for Waiting<'_, A, C> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            let now = self.limiter.clock().now();
            let cell = self.limiter.cell();
            self.limiter.waits().abandon(
                ticket,
                std::mem::take(&mut self.receipt),
                now,
                |receipt, acts_at| {
                    cell.cancel(now, &receipt, acts_at);
                },
            );
        }
    }
}

impl<A: CellAlgorithm, C: Clock> Held for Waiting<'_, A, C> {
    fn keep(mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.limiter.waits().act(ticket);
        }
    }
}

/// The one group of a direct limiter's ledger.
const ONE_LIMIT: u64 = 0;

/// The async twin of the blocking core in `direct.rs`.
pub(crate) async fn acquire_within<A: CellAlgorithm, C: Clock>(
    limiter: RateLimiter<A, C>,
    cost: u64,
    budget: Nanos,
) -> Result<Duration, Error> {
    let cost = nonzero(cost)?;
    let clock = limiter.clock().clone();
    let reserve =
        |_: &(), now, left| std::future::ready(Ok(limiter.cell().reserve(now, cost, left)));
    let hold = |(), decision: Decision, receipt, now: Nanos| {
        let wait = decision.wait_nanos();
        Waiting {
            limiter: &limiter,
            receipt,
            ticket: (wait > 0).then(|| limiter.waits().enter(ONE_LIMIT, now.saturating_add(wait))),
        }
    };
    wait_async(&clock, cost, budget, (), reserve, hold).await
}
