//! The one thing every adapter needs from a limiter.

use crate::algorithms::{Algorithm, Decision, Pace};
use crate::cells::CellAlgorithm;
use crate::clock::{duration_to_nanos, Clock};
use crate::error::Error;
use crate::limiters::{asynchronous, combine, keyed_async, nonzero};
use crate::stores::{Operation, Store};
use crate::{AsyncKeyedRateLimiter, AsyncRateLimiter, KeyedRateLimiter, RateLimiter};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// The future of [`Permits::acquire`]: resolves to the time waited once the permits
/// are granted. Dropping it before then gives the permits back.
///
/// ```
/// use sluicegate::adapters::{Acquiring, Permits};
/// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, RateLimiter};
/// use std::time::Duration;
/// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
/// let limiter = RateLimiter::with_clock(window, ManualClock::new());
/// let first: Acquiring = Permits::acquire(&limiter, &(), 1, None);
/// assert_eq!(futures::executor::block_on(first), Ok(Duration::ZERO));
/// let second: Acquiring = Permits::acquire(&limiter, &(), 1, None);
/// assert_eq!(futures::executor::block_on(second), Ok(Duration::from_secs(1))); // the next window
/// ```
pub type Acquiring = Pin<Box<dyn Future<Output = Result<Duration, Error>> + Send + 'static>>;

/// The future of [`Permits::check_async`]: the check's decision.
///
/// ```
/// use sluicegate::adapters::{Checking, Permits};
/// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, KeyedRateLimiter};
/// use std::time::Duration;
/// let window = FixedWindow::new(1, Duration::from_secs(60)).unwrap();
/// let limiter = KeyedRateLimiter::with_clock(window, ManualClock::new());
/// let checking: Checking = limiter.check_async(&"k", 1);
/// assert!(futures::executor::block_on(checking).unwrap().is_allowed());
/// let refused = futures::executor::block_on(limiter.check_async(&"k", 1)).unwrap();
/// assert_eq!(refused.retry_after(), Duration::from_secs(60));
/// ```
pub type Checking = Pin<Box<dyn Future<Output = Result<Decision, Error>> + Send + 'static>>;

/// The future of [`Permits::check_each_async`]: the check's decision and how every
/// limit stands after it.
///
/// ```
/// use sluicegate::adapters::{CheckingEach, Permits};
/// use sluicegate::algorithms::{AllOf, FixedWindow};
/// use sluicegate::{clock::ManualClock, KeyedRateLimiter};
/// use std::time::Duration;
/// let set = AllOf::new((
///     FixedWindow::new(3, Duration::from_secs(1)).unwrap(),
///     FixedWindow::new(5, Duration::from_secs(60)).unwrap(),
/// ));
/// let limiter = KeyedRateLimiter::with_clock(set, ManualClock::new());
/// let checking: CheckingEach = limiter.check_each_async(&"k", 2);
/// let (decision, each) = futures::executor::block_on(checking).unwrap();
/// assert_eq!(decision.remaining(), 1); // the tightest limit
/// assert_eq!(each.iter().map(|d| d.remaining()).collect::<Vec<_>>(), [1, 3]);
/// ```
pub type CheckingEach =
    Pin<Box<dyn Future<Output = Result<(Decision, Vec<Decision>), Error>> + Send + 'static>>;

/// A shared handle on a limiter that the adapters draw permits from: every limiter
/// of this crate, direct ([`RateLimiter`], [`AsyncRateLimiter`], whose key is `()`)
/// or keyed ([`KeyedRateLimiter`], [`AsyncKeyedRateLimiter`] over any [`Store`],
/// whose key is `K`).
///
/// Clones share one limit. The adapters call [`acquire`](Permits::acquire) to wait
/// and [`check`](Permits::check) to decide without waiting; both take the
/// limiter's usual errors ([`Error::ZeroCost`] for a cost of 0, the store's
/// errors). A cost above capacity fails `acquire` with [`Error::Never`]; `check`
/// answers it with a decision that [`is_never`](Decision::is_never).
///
/// ```
/// use sluicegate::adapters::Permits;
/// use sluicegate::{clock::ManualClock, RateLimiter};
/// use std::time::Duration;
/// let limiter = RateLimiter::bursty_with_clock(2.0, ManualClock::new()).unwrap();
/// futures::executor::block_on(async {
///     assert_eq!(Permits::acquire(&limiter, &(), 1, None).await.unwrap(), Duration::ZERO);
///     // The next permit is 0.5 s away: more than this caller will wait.
///     let late = Permits::acquire(&limiter, &(), 1, Some(Duration::from_millis(100))).await;
///     assert!(matches!(late, Err(sluicegate::Error::Timeout { .. })));
/// });
/// ```
///
/// It is sealed: implemented by the crate's four limiters, and not implementable
/// outside the crate (the adapters rely on what the limiters promise: a dropped
/// wait gives its permits back, and `try_now` and `checks_at_once` say truly what
/// blocks). Name it as a bound, and call it:
///
/// ```compile_fail,E0277
/// use sluicegate::adapters::{Acquiring, Permits};
/// use sluicegate::{algorithms::SmoothBursty, DefaultClock, Decision, Error, RateLimiter};
/// use std::time::Duration;
/// #[derive(Clone)]
/// struct Mine(RateLimiter<SmoothBursty>);
/// impl Permits for Mine { // the trait bound `Mine: Sealed` is not satisfied
///     type Key = ();
///     type Clock = DefaultClock;
///     fn clock(&self) -> &DefaultClock {
///         Permits::clock(&self.0)
///     }
///     fn acquire(&self, key: &(), cost: u64, max_wait: Option<Duration>) -> Acquiring {
///         Permits::acquire(&self.0, key, cost, max_wait)
///     }
///     fn check(&self, key: &(), cost: u64) -> Result<Decision, Error> {
///         Permits::check(&self.0, key, cost)
///     }
///     fn peek(&self, key: &(), cost: u64) -> Result<Decision, Error> {
///         Permits::peek(&self.0, key, cost)
///     }
/// }
/// ```
pub trait Permits: Clone + Send + Sync + 'static + sealed::Sealed {
    /// What a call is charged to: `()` for a direct limiter, the key type of a keyed
    /// one.
    type Key: Send + 'static;
    /// The limiter's clock, which the adapters also sleep on (jitter, back-off).
    type Clock: Clock;

    /// The limiter's clock: the one its decisions read, and the one the adapters
    /// sleep on, so that under a [`ManualClock`](crate::ManualClock) every wait is
    /// virtual. Costs a field read.
    ///
    /// ```
    /// use sluicegate::adapters::Permits;
    /// use sluicegate::clock::{Clock, ManualClock};
    /// use sluicegate::RateLimiter;
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    /// clock.advance(Duration::from_secs(3));
    /// assert_eq!(Permits::clock(&limiter).now(), 3_000_000_000); // the same timeline
    /// ```
    fn clock(&self) -> &Self::Clock;

    /// Takes `cost` permits for `key`, waiting as long as needed, or at most
    /// `max_wait`: a wait that would be longer fails at once with
    /// [`Error::Timeout`], consuming nothing. Dropping the future while it waits
    /// gives the permits back, and futures dropped together give back all of
    /// theirs, in whatever order they are dropped (the limiter's
    /// [abandoned waits](crate::AsyncRateLimiter#abandoned-waits) rule, per key for
    /// a keyed limiter).
    ///
    /// The future resolves to the time waited (zero when granted at once). A cost
    /// of 0 fails with [`Error::ZeroCost`] and a cost that can never be granted
    /// (above capacity) with [`Error::Never`], both at once and whatever
    /// `max_wait`; `None` waits as long as it takes. Nothing happens until the
    /// future is polled.
    ///
    /// ```
    /// use sluicegate::adapters::Permits;
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::clock::{Clock, ManualClock};
    /// use sluicegate::{Error, KeyedRateLimiter};
    /// use std::time::Duration;
    /// use futures::executor::block_on;
    /// let clock = ManualClock::new();
    /// let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    /// let limiter = KeyedRateLimiter::with_clock(window, clock.clone());
    /// assert_eq!(block_on(Permits::acquire(&limiter, &"a", 2, None)), Ok(Duration::ZERO));
    /// // "a" has spent its window; "b" has not.
    /// assert_eq!(block_on(Permits::acquire(&limiter, &"b", 1, None)), Ok(Duration::ZERO));
    /// let short = block_on(Permits::acquire(&limiter, &"a", 1, Some(Duration::from_millis(100))));
    /// assert_eq!(short, Err(Error::Timeout { needed: Duration::from_secs(1) }));
    /// assert_eq!(clock.now(), 0); // failed at once, consuming nothing
    /// // Without a maximum it waits for the next window (virtual time here).
    /// assert_eq!(block_on(Permits::acquire(&limiter, &"a", 1, None)), Ok(Duration::from_secs(1)));
    /// assert_eq!(clock.now(), 1_000_000_000);
    /// assert_eq!(block_on(Permits::acquire(&limiter, &"a", 0, None)), Err(Error::ZeroCost));
    /// assert_eq!(block_on(Permits::acquire(&limiter, &"a", 3, None)), Err(Error::Never { cost: 3 }));
    /// ```
    fn acquire(&self, key: &Self::Key, cost: u64, max_wait: Option<Duration>) -> Acquiring;

    /// [`check_each`](Permits::check_each) without blocking the calling task, as
    /// [`check_async`](Permits::check_async) is `check`: the future resolves with
    /// the decision and every limit's standing, in order. A keyed limiter asks its
    /// store ([`Store::apply_key_each_async`]: over Redis, the step and the report
    /// are one round trip). The default answers `check_each` in a ready future.
    ///
    /// # Errors
    /// As [`check`](Permits::check), when the future resolves.
    ///
    /// ```
    /// use sluicegate::adapters::Permits;
    /// use sluicegate::algorithms::{AllOf, FixedWindow};
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// let set = AllOf::new((
    ///     FixedWindow::new(2, Duration::from_secs(1)).unwrap(),
    ///     FixedWindow::new(10, Duration::from_secs(60)).unwrap(),
    /// ));
    /// let limiter = RateLimiter::with_clock(set, ManualClock::new());
    /// let checking = limiter.check_each_async(&(), 1);
    /// let (decision, each) = futures::executor::block_on(checking).unwrap();
    /// assert_eq!(decision.remaining(), 1);
    /// assert_eq!(each.iter().map(|d| d.remaining()).collect::<Vec<_>>(), [1, 9]);
    /// ```
    fn check_each_async(&self, key: &Self::Key, cost: u64) -> CheckingEach {
        let mut each = Vec::new();
        let checked = self.check_each(key, cost, &mut |d| each.push(d));
        Box::pin(std::future::ready(checked.map(|d| (d, each))))
    }

    /// Takes `cost` permits for `key` if that needs no waiting, answering the full
    /// [`Decision`]. With a remote store this blocks the calling thread for one round
    /// trip.
    ///
    /// A refusal consumes nothing and says when to retry; a cost that can never be
    /// granted (above capacity) is not an error here but a decision that
    /// [`is_never`](Decision::is_never).
    ///
    /// # Errors
    /// As the limiter's `check`: [`Error::ZeroCost`] for a cost of 0, the store's
    /// errors.
    ///
    /// ```
    /// use sluicegate::adapters::Permits;
    /// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, Error, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(2, Duration::from_secs(60)).unwrap();
    /// let limiter = KeyedRateLimiter::with_clock(window, ManualClock::new());
    /// let granted = Permits::check(&limiter, &"a", 2).unwrap();
    /// assert!(granted.is_allowed() && granted.remaining() == 0);
    /// let refused = Permits::check(&limiter, &"a", 1).unwrap();
    /// assert!(!refused.is_allowed());
    /// assert_eq!(refused.retry_after(), Duration::from_secs(60));
    /// assert!(Permits::check(&limiter, &"b", 1).unwrap().is_allowed()); // its own limit
    /// assert!(Permits::check(&limiter, &"b", 3).unwrap().is_never()); // above capacity
    /// assert_eq!(Permits::check(&limiter, &"b", 0), Err(Error::ZeroCost));
    /// ```
    fn check(&self, key: &Self::Key, cost: u64) -> Result<Decision, Error>;

    /// [`check`](Permits::check) for a caller that reads a grant no further than
    /// "granted": `None` if granted, otherwise the refusal in full, as
    /// [`Algorithm::reserve`](crate::algorithms::Algorithm::reserve) answers
    /// `Result<(), Decision>`. What the server layer runs when it sends no fields
    /// on grants. A keyed limiter asks its store for that report
    /// ([`Store::apply_key`]); the default runs `check`.
    ///
    /// # Errors
    /// As [`check`](Permits::check).
    ///
    /// ```
    /// use sluicegate::adapters::Permits;
    /// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let limiter = KeyedRateLimiter::with_clock(window, ManualClock::new());
    /// assert_eq!(Permits::try_take(&limiter, &"k", 1).unwrap(), None);
    /// let refusal = Permits::try_take(&limiter, &"k", 1).unwrap().unwrap();
    /// assert_eq!(refusal.retry_after(), Duration::from_secs(1));
    /// ```
    #[inline]
    fn try_take(&self, key: &Self::Key, cost: u64) -> Result<Option<Decision>, Error> {
        let decision = self.check(key, cost)?;
        Ok((!decision.is_allowed()).then_some(decision))
    }

    /// True if [`check`](Permits::check) answers at once, without waiting on
    /// anything but locks in this process: a direct limiter, or a keyed one whose
    /// store [answers at once](Store::ANSWERS_AT_ONCE) (the in-memory store). The
    /// server layer then checks on the calling task; otherwise it awaits
    /// [`check_async`](Permits::check_async), so a remote store never blocks the
    /// executor. The default is `true`.
    ///
    /// ```
    /// use sluicegate::adapters::Permits;
    /// use sluicegate::{algorithms::SmoothBursty, KeyedRateLimiter, RateLimiter};
    /// assert!(RateLimiter::bursty(1.0).unwrap().checks_at_once());
    /// assert!(KeyedRateLimiter::<u64, _>::new(SmoothBursty::new(1.0).unwrap()).checks_at_once());
    /// ```
    fn checks_at_once(&self) -> bool {
        true
    }

    /// [`check`](Permits::check) without blocking the calling task: a keyed
    /// limiter sends its store step at once ([`Store::apply_async`]) and the future
    /// resolves with the reply. It borrows nothing. The default answers `check`'s
    /// decision in a ready future.
    ///
    /// # Errors
    /// As [`check`](Permits::check), when the future resolves.
    ///
    /// ```
    /// use sluicegate::adapters::Permits;
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap();
    /// let decision = futures::executor::block_on(limiter.check_async(&(), 1)).unwrap();
    /// assert!(decision.is_allowed());
    /// ```
    fn check_async(&self, key: &Self::Key, cost: u64) -> Checking {
        Box::pin(std::future::ready(self.check(key, cost)))
    }

    /// [`check`](Permits::check), also telling `each` how every limit stands after
    /// it, one decision per limit in order (see
    /// [`Algorithm::reserve_each`](crate::algorithms::Algorithm::reserve_each)).
    /// A direct limiter reports every member of a set; a keyed one does when its
    /// store can in the same step (the in-memory and Redis stores can). The
    /// default reports the combined decision once.
    ///
    /// # Errors
    /// As [`check`](Permits::check).
    ///
    /// ```
    /// use sluicegate::adapters::Permits;
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(2.0, ManualClock::new()).unwrap();
    /// let mut reported = Vec::new();
    /// let decision = Permits::check_each(&limiter, &(), 1, &mut |d| reported.push(d)).unwrap();
    /// assert!(decision.is_allowed() && decision.remaining() == 0);
    /// // Its last permit granted, the one limit says when the next one comes.
    /// assert!(!reported[0].is_allowed());
    /// assert_eq!(reported[0].retry_after(), std::time::Duration::from_millis(500));
    /// ```
    fn check_each(
        &self,
        key: &Self::Key,
        cost: u64,
        each: &mut dyn FnMut(Decision),
    ) -> Result<Decision, Error> {
        let decision = self.check(key, cost)?;
        each(decision);
        Ok(decision)
    }

    /// Takes `cost` permits for `key` if that needs no waiting, answering whether it
    /// did, when the limiter can answer that without blocking (its state is in this
    /// process); `None` when it cannot say so cheaply. The adapters try this first
    /// and start a (boxed) wait only when it does not answer `Some(true)`: an
    /// allowed item or request then costs no allocation. Direct limiters answer with
    /// their lean try; keyed limiters answer `None`, as their store may be remote.
    ///
    /// ```
    /// use sluicegate::adapters::Permits;
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap();
    /// assert_eq!(limiter.try_now(&(), 1), Some(true));
    /// assert_eq!(limiter.try_now(&(), 1), Some(false)); // the next permit is 1 s away
    /// ```
    fn try_now(&self, key: &Self::Key, cost: u64) -> Option<bool> {
        let _ = (key, cost);
        None
    }

    /// The decision `check` would give now, consuming nothing: peeking twice
    /// answers the same, and a cost above capacity is a decision that
    /// [`is_never`](Decision::is_never). With a remote store this blocks the
    /// calling thread for one round trip, as `check` does.
    ///
    /// # Errors
    /// As the limiter's `peek`: [`Error::ZeroCost`] for a cost of 0, the store's
    /// errors.
    ///
    /// ```
    /// use sluicegate::adapters::Permits;
    /// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, Error, RateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(2, Duration::from_secs(60)).unwrap();
    /// let limiter = RateLimiter::with_clock(window, ManualClock::new());
    /// assert_eq!(Permits::peek(&limiter, &(), 2).unwrap().remaining(), 0);
    /// assert_eq!(Permits::peek(&limiter, &(), 2).unwrap().remaining(), 0); // took nothing
    /// assert!(Permits::check(&limiter, &(), 1).unwrap().is_allowed());
    /// assert!(!Permits::peek(&limiter, &(), 2).unwrap().is_allowed());
    /// assert!(Permits::peek(&limiter, &(), 1).unwrap().is_allowed());
    /// assert_eq!(Permits::peek(&limiter, &(), 0), Err(Error::ZeroCost));
    /// ```
    fn peek(&self, key: &Self::Key, cost: u64) -> Result<Decision, Error>;

    /// The limiter's steady rate, [`Algorithm::pace`] of its algorithm (the same
    /// for every key): what the client layer paces a key by after a server's hold.
    /// The default is `None`: no pacing.
    ///
    /// ```
    /// use sluicegate::adapters::Permits;
    /// use sluicegate::RateLimiter;
    /// use std::time::Duration;
    /// let limiter = RateLimiter::bursty(4.0).unwrap();
    /// assert_eq!(Permits::pace(&limiter).unwrap().interval(), Duration::from_millis(250));
    /// ```
    fn pace(&self) -> Option<Pace> {
        None
    }
}

/// The seal of [`Permits`]: public in a private module, so no other crate can name
/// it, and only the limiters implement it.
mod sealed {
    pub trait Sealed {}
}

fn budget(max_wait: Option<Duration>) -> u64 {
    max_wait.map_or(u64::MAX, duration_to_nanos)
}

impl<A: CellAlgorithm, C: Clock> sealed::Sealed for RateLimiter<A, C> {}

impl<A: CellAlgorithm, C: Clock> Permits for RateLimiter<A, C> {
    type Key = ();
    type Clock = C;

    fn clock(&self) -> &C {
        RateLimiter::clock(self)
    }

    fn acquire(&self, _key: &(), cost: u64, max_wait: Option<Duration>) -> Acquiring {
        Box::pin(asynchronous::acquire_within(
            self.clone(),
            cost,
            budget(max_wait),
        ))
    }

    fn check(&self, _key: &(), cost: u64) -> Result<Decision, Error> {
        RateLimiter::check(self, cost)
    }

    fn check_each(
        &self,
        _key: &(),
        cost: u64,
        each: &mut dyn FnMut(Decision),
    ) -> Result<Decision, Error> {
        RateLimiter::check_each(self, cost, each)
    }

    #[inline]
    fn try_now(&self, _key: &(), cost: u64) -> Option<bool> {
        // A zero cost is an error for the acquire to report.
        self.try_acquire_n(cost).ok()
    }

    fn peek(&self, _key: &(), cost: u64) -> Result<Decision, Error> {
        RateLimiter::peek(self, cost)
    }

    fn pace(&self) -> Option<Pace> {
        // The live configuration: a changed rate paces at the new rate.
        self.algorithm().pace()
    }
}

impl<K, A: Algorithm, S, C: Clock> sealed::Sealed for KeyedRateLimiter<K, A, S, C> {}

impl<K, A, S, C> Permits for KeyedRateLimiter<K, A, S, C>
where
    K: Clone + PartialEq + Send + Sync + 'static,
    A: Algorithm,
    S: Store<K, A> + 'static,
    C: Clock,
{
    type Key = K;
    type Clock = C;

    fn clock(&self) -> &C {
        KeyedRateLimiter::clock(self)
    }

    fn acquire(&self, key: &K, cost: u64, max_wait: Option<Duration>) -> Acquiring {
        Box::pin(keyed_async::acquire_within(
            self.clone(),
            [key.clone()],
            cost,
            budget(max_wait),
        ))
    }

    fn check(&self, key: &K, cost: u64) -> Result<Decision, Error> {
        KeyedRateLimiter::check(self, key, cost)
    }

    #[inline]
    fn try_take(&self, key: &K, cost: u64) -> Result<Option<Decision>, Error> {
        KeyedRateLimiter::try_take(self, key, cost)
    }

    fn checks_at_once(&self) -> bool {
        S::ANSWERS_AT_ONCE
    }

    fn check_async(&self, key: &K, cost: u64) -> Checking {
        let Ok(cost) = nonzero(cost) else {
            return Box::pin(std::future::ready(Err(Error::ZeroCost)));
        };
        let (algorithm, store, clock) = self.shared_parts();
        let step = Operation::Reserve { cost, max_wait: 0 };
        // Sent now: the pending reply borrows nothing.
        let pending = store.apply_async(algorithm, std::slice::from_ref(key), clock.now(), step);
        Box::pin(async move { Ok(combine(&pending.await?)) })
    }

    fn check_each_async(&self, key: &K, cost: u64) -> CheckingEach {
        let Ok(cost) = nonzero(cost) else {
            return Box::pin(std::future::ready(Err(Error::ZeroCost)));
        };
        let (algorithm, store, clock) = self.shared_parts();
        let step = Operation::Reserve { cost, max_wait: 0 };
        // Sent now: the pending reply borrows nothing.
        let pending = store.apply_key_each_async(algorithm, key, clock.now(), step);
        Box::pin(async move { pending.await.map(|((d, _), each)| (d, each)) })
    }

    fn check_each(
        &self,
        key: &K,
        cost: u64,
        each: &mut dyn FnMut(Decision),
    ) -> Result<Decision, Error> {
        KeyedRateLimiter::check_each(self, key, cost, each)
    }

    fn peek(&self, key: &K, cost: u64) -> Result<Decision, Error> {
        KeyedRateLimiter::peek(self, key, cost)
    }

    fn pace(&self) -> Option<Pace> {
        self.algorithm().pace()
    }
}

/// An async limiter is a handle on a blocking one sharing its state: every call
/// is the blocking limiter's (whose own waits are already async).
macro_rules! permits_of_the_blocking_limiter {
    ([$($generics:tt)*] $limiter:ty, key $key:ty) => {
        impl<$($generics)*> sealed::Sealed for $limiter {}

        impl<$($generics)*> Permits for $limiter {
            type Key = $key;
            type Clock = C;

            fn clock(&self) -> &C {
                self.blocking().clock()
            }

            fn acquire(&self, key: &$key, cost: u64, max_wait: Option<Duration>) -> Acquiring {
                Permits::acquire(self.blocking(), key, cost, max_wait)
            }

            fn check(&self, key: &$key, cost: u64) -> Result<Decision, Error> {
                Permits::check(self.blocking(), key, cost)
            }

            #[inline]
            fn try_take(&self, key: &$key, cost: u64) -> Result<Option<Decision>, Error> {
                Permits::try_take(self.blocking(), key, cost)
            }

            fn checks_at_once(&self) -> bool {
                Permits::checks_at_once(self.blocking())
            }

            fn check_async(&self, key: &$key, cost: u64) -> Checking {
                Permits::check_async(self.blocking(), key, cost)
            }

            fn check_each_async(&self, key: &$key, cost: u64) -> CheckingEach {
                Permits::check_each_async(self.blocking(), key, cost)
            }

            fn check_each(
                &self,
                key: &$key,
                cost: u64,
                each: &mut dyn FnMut(Decision),
            ) -> Result<Decision, Error> {
                Permits::check_each(self.blocking(), key, cost, each)
            }

            #[inline]
            fn try_now(&self, key: &$key, cost: u64) -> Option<bool> {
                Permits::try_now(self.blocking(), key, cost)
            }

            fn peek(&self, key: &$key, cost: u64) -> Result<Decision, Error> {
                Permits::peek(self.blocking(), key, cost)
            }

            fn pace(&self) -> Option<Pace> {
                Permits::pace(self.blocking())
            }
        }
    };
}

permits_of_the_blocking_limiter!([A: CellAlgorithm, C: Clock] AsyncRateLimiter<A, C>, key ());
permits_of_the_blocking_limiter!(
    [K: Clone + PartialEq + Send + Sync + 'static, A: Algorithm, S: Store<K, A> + 'static, C: Clock]
    AsyncKeyedRateLimiter<K, A, S, C>,
    key K
);
