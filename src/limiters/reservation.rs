//! Reservations: permits taken now, acted on later, or given back.

use super::RateLimiter;
use crate::algorithms::{Decision, Receipt};
use crate::cells::{CellAlgorithm, StateCell};
use crate::clock::{nanos_to_duration, Clock, Nanos};
use std::time::Duration;

/// Permits reserved by [`RateLimiter::reserve`]: the caller may act at
/// [`acts_at`](Reservation::acts_at), after [`delay`](Reservation::delay), or give the
/// permits back with [`cancel`](Reservation::cancel).
///
/// Cancelling follows Go's `Reservation.Cancel` rule, as
/// [`Algorithm::cancel`](crate::algorithms::Algorithm::cancel) states it: up to the
/// time to act, that instant included (so a reservation with no delay can be
/// cancelled at once), the permits come back *as far as later reservations allow*;
/// after it, nothing does. Dropping a reservation without cancelling keeps the
/// permits taken.
///
/// [`cancel`](Reservation::cancel) applies this rule at once, to this reservation
/// alone: cancelling an earlier reservation while a later one stands gives back
/// only what the later one leaves. An explicit reservation stays on this rule
/// because its holder chooses when to cancel: cancelling a group latest first gives
/// it all back. The async acquires, whose futures are dropped in whatever order
/// their tasks run, defer their cancels instead, so that waits abandoned together
/// give everything back (see the
/// [abandoned waits](crate::AsyncRateLimiter#abandoned-waits)); to those, a
/// reservation is a grant by another caller.
///
/// A reservation that is not [`ok`](Reservation::is_ok) took nothing; its
/// [`decision`](Reservation::decision) says why (`retry_after`, or never).
///
/// A keyed limiter's reservations are
/// [`KeyedReservation`](crate::KeyedReservation)s, by the same rule on every key.
///
/// ```
/// use sluicegate::{clock::{Clock, ManualClock}, RateLimiter};
/// use std::time::Duration;
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::bursty_with_clock(2.0, clock.clone()).unwrap();
/// let first = limiter.reserve(1).unwrap();
/// assert_eq!(first.delay(), Duration::ZERO);
/// let second = limiter.reserve(1).unwrap();
/// assert_eq!(second.delay(), Duration::from_millis(500));
/// second.wait(); // sleeps 0.5 s on the (virtual) clock
/// assert_eq!(clock.now(), 500_000_000);
/// ```
pub struct Reservation<A: CellAlgorithm, C: Clock> {
    limiter: RateLimiter<A, C>,
    decision: Decision,
    receipt: Receipt,
    acts_at: Nanos,
}

impl<A: CellAlgorithm, C: Clock> Reservation<A, C> {
    pub(crate) fn new(
        limiter: RateLimiter<A, C>,
        decision: Decision,
        receipt: Receipt,
        now: Nanos,
    ) -> Self {
        Reservation {
            limiter,
            decision,
            receipt,
            acts_at: now.saturating_add(decision.wait_nanos()),
        }
    }

    /// True if the permits were reserved.
    ///
    /// ```
    /// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let limiter = RateLimiter::with_clock(window, ManualClock::new());
    /// assert!(limiter.reserve(1).unwrap().is_ok());
    /// assert!(!limiter.reserve(1).unwrap().is_ok()); // a window cannot reserve the future
    /// ```
    pub fn is_ok(&self) -> bool {
        self.decision.is_allowed()
    }

    /// The decision behind this reservation, by value, as
    /// [`check`](RateLimiter::check) answers one. Not ok: denied with a
    /// `retry_after` (a window, which cannot reserve the future), or never (a cost
    /// above what the limit can ever hold).
    ///
    /// ```
    /// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// let limiter = RateLimiter::bursty_with_clock(2.0, ManualClock::new()).unwrap();
    /// limiter.acquire().unwrap();
    /// let r = limiter.reserve(1).unwrap();
    /// assert_eq!(r.decision().wait_nanos(), 500_000_000);
    /// let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    /// let windowed = RateLimiter::with_clock(window, ManualClock::new());
    /// assert!(windowed.reserve(3).unwrap().decision().is_never()); // above capacity
    /// ```
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// When the caller may act, on the limiter's clock (nanoseconds).
    ///
    /// ```
    /// use sluicegate::{clock::{Clock, ManualClock}, RateLimiter};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_secs(10));
    /// let limiter = RateLimiter::bursty_with_clock(2.0, clock.clone()).unwrap();
    /// limiter.acquire().unwrap();
    /// assert_eq!(limiter.reserve(1).unwrap().acts_at(), clock.now() + 500_000_000);
    /// ```
    pub fn acts_at(&self) -> Nanos {
        self.acts_at
    }

    /// How long from now until the caller may act (zero if already). For a
    /// reservation that is not ok, its `retry_after` as of when it was made.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::bursty_with_clock(2.0, clock.clone()).unwrap();
    /// limiter.acquire().unwrap();
    /// let r = limiter.reserve(1).unwrap();
    /// clock.advance(Duration::from_millis(200));
    /// assert_eq!(r.delay(), Duration::from_millis(300)); // counts down with the clock
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(r.delay(), Duration::ZERO); // never negative
    /// ```
    pub fn delay(&self) -> Duration {
        delay(&self.decision, self.acts_at, self.limiter.clock())
    }

    /// Blocks until the caller may act, and returns how long that was. Returns at
    /// once for a reservation that is not ok.
    ///
    /// ```
    /// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(window, clock.clone());
    /// limiter.acquire().unwrap();
    /// let refused = limiter.reserve(1).unwrap();
    /// assert_eq!(refused.wait(), Duration::ZERO); // not ok: no sleep
    /// assert_eq!(clock.take_sleeps().len(), 1); // only the acquire's
    /// ```
    pub fn wait(self) -> Duration {
        wait(&self.decision, self.acts_at, self.limiter.clock())
    }

    /// Gives the reserved permits back now, as far as the grants made after it allow
    /// (Go's rule, see the type's docs): cancel a group latest first to give all of
    /// it back. Does nothing once the time to act has passed, or for a reservation
    /// that is not ok.
    ///
    /// It cannot fail, and so answers nothing: the state is in this process. A
    /// [`KeyedReservation::cancel`](crate::KeyedReservation::cancel), whose store
    /// may be remote, answers the store's error.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    /// limiter.acquire().unwrap();
    /// let late = limiter.reserve(1).unwrap();
    /// clock.advance(Duration::from_secs(2)); // past its time to act
    /// late.cancel(); // nothing comes back
    /// assert!(limiter.try_acquire()); // the reserved permit's interval has run out
    /// assert!(!limiter.try_acquire()); // a restoring cancel would have let this pass too
    /// ```
    pub fn cancel(self) {
        self.cancel_at(self.limiter.clock().now());
    }

    pub(crate) fn cancel_at(&self, now: Nanos) {
        if self.is_ok() {
            self.limiter.cell().cancel(now, &self.receipt, self.acts_at);
        }
    }
}

/// A reservation's delay, direct or keyed: from `clock`'s now until `acts_at` (never
/// negative) if `decision` granted, else the refusal's `retry_after`.
pub(super) fn delay<C: Clock>(decision: &Decision, acts_at: Nanos, clock: &C) -> Duration {
    if !decision.is_allowed() {
        return decision.retry_after();
    }
    nanos_to_duration(acts_at.saturating_sub(clock.now()))
}

/// Sleeps on `clock` until a granted reservation may act (not at all for a
/// refusal); answers how long.
pub(super) fn wait<C: Clock>(decision: &Decision, acts_at: Nanos, clock: &C) -> Duration {
    if !decision.is_allowed() {
        return Duration::ZERO;
    }
    let delay = delay(decision, acts_at, clock);
    clock.sleep(delay);
    delay
}
