//! A failure policy for any store that can fail: [`FailoverStore`] wraps a store
//! (Redis, typically) and answers by a [`FailurePolicy`] while it is down, without
//! making every call wait for it.
//!
//! ```
//! use sluicegate::algorithms::FixedWindow;
//! use sluicegate::stores::failover::{FailoverStore, FailurePolicy, Unreachable};
//! use sluicegate::{KeyedRateLimiter, ManualClock, Source};
//! use std::time::Duration;
//! // 100 a minute across 4 instances; while the store is down, 25 each.
//! let window = FixedWindow::new(100, Duration::from_secs(60)).unwrap();
//! let share = FixedWindow::new(25, Duration::from_secs(60)).unwrap();
//! let store = FailoverStore::new(Unreachable, FailurePolicy::Local(share));
//! let limiter = KeyedRateLimiter::with_store(window, store, ManualClock::new());
//! let decision = limiter.check(&"alice", 1)?;
//! assert!(decision.is_allowed());
//! assert_eq!((decision.source(), decision.limit(), decision.remaining()), (Source::Local, 25, 24));
//! # Ok::<(), sluicegate::Error>(())
//! ```
//!
//! # The model
//!
//! ```text
//!   call ──healthy──▶ inner store ──answer──────────────────────────▶ decision (Source::Store)
//!     │                   └──Error::Store──▶ back off ──▶ policy ──▶ decision (Local/Unchecked/FailedClosed)
//!     ├──backed off─────────────────────────────────────▶ policy ──▶ at once, no round trip
//!     └──back-off over: one caller probes the inner store; the others use the policy
//! ```
//!
//! * **Failures.** Only [`Error::Store`] (the store could not
//!   answer: a timeout, a refused or dropped connection, an error reply) counts as
//!   a failure; every other error (bad input, keys a Cluster cannot take together)
//!   is the call's own and is returned as it is. A failed call is answered by the
//!   policy instead of the error: it waited at most the inner store's own timeouts
//!   (the Redis store's connect and response timeouts), and no later call waits at
//!   all until the back-off ends.
//! * **Back-off** ([`Backoff`], default 1 s doubling up to 30 s): after a failure
//!   the inner store is not asked until the back-off ends; then the first caller
//!   probes it with its own call while every other caller keeps to the policy. A
//!   probe that is answered ends the degradation (decisions come from the store
//!   again and the back-off is reset); one that fails doubles the back-off. There
//!   is no background thread: all of it happens in callers' calls, on the store's
//!   clock ([`with_clock`](FailoverStore::with_clock); the default clock
//!   otherwise).
//! * **Sources.** Every decision says who made it ([`Decision::source`]):
//!   [`Source::Store`] from the inner store, otherwise the policy's source.
//! * **Cancels.** A receipt of a grant the local limit made is marked as such, and
//!   its cancel goes to the local limit, whenever it comes. A cancel of the inner
//!   store's grants goes to the inner store while it is healthy, and is dropped
//!   while it is backed off (counted in [`Stats::dropped_cancels`]): the permits
//!   then stay taken there, the safe direction the store contract already allows
//!   for a lost cancel. Unchecked grants and refusals have nothing to give back.
//!   So no cancel ever gives back permits to a limit that did not grant them.
//! * **Observing.** [`stats`](FailoverStore::stats) reads counters;
//!   [`on_degraded`](FailoverStore::on_degraded) calls back on every decision the
//!   policy made.
//!
//! [`Decision::source`]: crate::Decision::source

mod backoff;
mod observe;
mod policy;
mod store;
#[cfg(test)]
mod tests;
mod unreachable;

pub use backoff::Backoff;
pub use observe::{Event, Stats};
pub use policy::FailurePolicy;
pub use unreachable::Unreachable;

use self::backoff::Health;
use self::observe::{Counters, Observer};
use self::policy::Fallback;
use crate::algorithms::{Algorithm, Source};
use crate::clock::{Clock, DefaultClock};
use crate::error::Error;
use std::fmt;
use std::sync::Arc;

/// A [`Store`](crate::stores::Store) over an inner store that can fail, answering
/// by a [`FailurePolicy`] while it is down, with a back-off so that a store that is
/// down costs no round trip. See the [module docs](self) for the rules.
///
/// `S` is the inner store, `K` the key, `A` the algorithm and `C` the clock the
/// back-off runs on.
///
/// ```
/// use sluicegate::algorithms::FixedWindow;
/// use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy, Unreachable};
/// use sluicegate::{KeyedRateLimiter, ManualClock, Source};
/// use std::time::Duration;
/// let clock = ManualClock::new();
/// let store = FailoverStore::new(Unreachable, FailurePolicy::Closed)
///     .with_clock(clock.clone())
///     .with_backoff(Backoff::fixed(Duration::from_secs(2)));
/// let window = FixedWindow::new(10, Duration::from_secs(1)).unwrap();
/// let limiter = KeyedRateLimiter::with_store(window, store, clock.clone());
/// let refused = limiter.check(&"k", 1)?;
/// assert_eq!(refused.source(), Source::FailedClosed);
/// assert_eq!(refused.retry_after(), Duration::from_secs(2));
/// clock.advance(Duration::from_millis(500));
/// assert_eq!(limiter.check(&"k", 1)?.retry_after(), Duration::from_millis(1500));
/// # Ok::<(), sluicegate::Error>(())
/// ```
pub struct FailoverStore<S, K, A: Algorithm, C = DefaultClock> {
    inner: S,
    ctx: Ctx<K, A, C>,
}

/// What the store's calls and their futures share.
struct Ctx<K, A: Algorithm, C> {
    fallback: Arc<Fallback<K, A>>,
    health: Arc<Health<C>>,
    counters: Arc<Counters>,
    observer: Option<Observer>,
}

impl<K, A: Algorithm, C> Clone for Ctx<K, A, C> {
    fn clone(&self) -> Self {
        Ctx {
            fallback: Arc::clone(&self.fallback),
            health: Arc::clone(&self.health),
            counters: Arc::clone(&self.counters),
            observer: self.observer.clone(),
        }
    }
}

impl<K, A: Algorithm, C> Ctx<K, A, C> {
    /// Answers by the policy (`answer`), counting and reporting the decision.
    fn degrade<T>(
        &self,
        answer: impl FnOnce(u64) -> Result<T, Error>,
        retry_after: u64,
        error: Option<&Error>,
    ) -> Result<T, Error> {
        let result = answer(retry_after);
        if result.is_ok() {
            let source = self.fallback.source();
            observe::degraded(&self.counters, self.observer.as_ref(), source, error);
        }
        result
    }
}

impl<S, K, A: Algorithm> FailoverStore<S, K, A, DefaultClock> {
    /// `inner` answering by `policy` while it fails, with the default [`Backoff`]
    /// on the default clock.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::failover::{FailoverStore, FailurePolicy, Unreachable};
    /// let store: FailoverStore<_, u64, SmoothBursty> = FailoverStore::new(Unreachable, FailurePolicy::Open);
    /// assert!(!store.is_degraded()); // not until a call fails
    /// ```
    pub fn new(inner: S, policy: FailurePolicy<A>) -> Self {
        FailoverStore {
            inner,
            ctx: Ctx {
                fallback: Arc::new(Fallback::new(policy)),
                health: Arc::new(Health::new(DefaultClock::new(), Backoff::default())),
                counters: Arc::default(),
                observer: None,
            },
        }
    }
}

impl<S, K, A: Algorithm, C: Clock> FailoverStore<S, K, A, C> {
    /// The same store with its back-off timed by `clock` (e.g. the limiter's
    /// [`ManualClock`](crate::ManualClock) in tests). Configure before the first
    /// call: the back-off starts over.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::failover::{FailoverStore, FailurePolicy, Unreachable};
    /// use sluicegate::ManualClock;
    /// let store: FailoverStore<_, u64, SmoothBursty, ManualClock> =
    ///     FailoverStore::new(Unreachable, FailurePolicy::Open).with_clock(ManualClock::new());
    /// # let _ = store;
    /// ```
    pub fn with_clock<C2: Clock>(self, clock: C2) -> FailoverStore<S, K, A, C2> {
        let backoff = self.ctx.health.backoff();
        FailoverStore {
            inner: self.inner,
            ctx: Ctx {
                fallback: self.ctx.fallback,
                health: Arc::new(Health::new(clock, backoff)),
                counters: self.ctx.counters,
                observer: self.ctx.observer,
            },
        }
    }

    /// The same store with `backoff`. Configure before the first call: the
    /// back-off starts over.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy, Unreachable};
    /// use std::time::Duration;
    /// let backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(5));
    /// let store: FailoverStore<_, u64, SmoothBursty> =
    ///     FailoverStore::new(Unreachable, FailurePolicy::Closed).with_backoff(backoff);
    /// assert_eq!(store.backoff(), backoff);
    /// ```
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        let clock = self.ctx.health.clock().clone();
        self.ctx.health = Arc::new(Health::new(clock, backoff));
        self
    }

    /// The same store, calling `observer` on every decision its policy makes
    /// (see [`Event`]). It runs on the calling thread, inside the call: keep it
    /// short (count, or hand off to a logger).
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::failover::{FailoverStore, FailurePolicy, Unreachable};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    /// let degraded = Arc::new(AtomicU64::new(0));
    /// let count = Arc::clone(&degraded);
    /// let store: FailoverStore<_, u64, SmoothBursty> = FailoverStore::new(Unreachable, FailurePolicy::Open)
    ///     .on_degraded(move |_| { count.fetch_add(1, Ordering::Relaxed); });
    /// # let _ = store;
    /// ```
    pub fn on_degraded(mut self, observer: impl Fn(&Event<'_>) + Send + Sync + 'static) -> Self {
        self.ctx.observer = Some(Arc::new(observer));
        self
    }

    /// The back-off in use.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy, Unreachable};
    /// let store: FailoverStore<_, u64, SmoothBursty> = FailoverStore::new(Unreachable, FailurePolicy::Open);
    /// assert_eq!(store.backoff(), Backoff::default());
    /// ```
    pub fn backoff(&self) -> Backoff {
        self.ctx.health.backoff()
    }

    /// The counters so far (see [`Stats`]).
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::failover::{FailoverStore, FailurePolicy, Stats, Unreachable};
    /// let store: FailoverStore<_, u64, SmoothBursty> = FailoverStore::new(Unreachable, FailurePolicy::Open);
    /// assert_eq!(store.stats(), Stats::default());
    /// ```
    pub fn stats(&self) -> Stats {
        self.ctx.counters.snapshot()
    }

    /// True from a failure of the inner store until a probe finds it answering:
    /// calls are then answered by the policy (but for the one probing).
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::failover::{FailoverStore, FailurePolicy, Unreachable};
    /// use sluicegate::stores::{Operation, Store};
    /// use sluicegate::Decision;
    /// let store: FailoverStore<_, &str, FixedWindow> = FailoverStore::new(Unreachable, FailurePolicy::Open);
    /// let window = FixedWindow::new(1, std::time::Duration::from_secs(1)).unwrap();
    /// let take = Operation::Reserve { cost: 1, max_wait: 0 };
    /// let _: Decision = store.apply_key(&window, &"k", 0, take).unwrap();
    /// assert!(store.is_degraded());
    /// ```
    pub fn is_degraded(&self) -> bool {
        self.ctx.health.is_degraded()
    }

    /// The source of the decisions the policy makes.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::failover::{FailoverStore, FailurePolicy, Unreachable};
    /// use sluicegate::Source;
    /// let store: FailoverStore<_, u64, SmoothBursty> = FailoverStore::new(Unreachable, FailurePolicy::Closed);
    /// assert_eq!(store.policy_source(), Source::FailedClosed);
    /// ```
    pub fn policy_source(&self) -> Source {
        self.ctx.fallback.source()
    }

    /// The inner store.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::failover::{FailoverStore, FailurePolicy, Unreachable};
    /// let store: FailoverStore<_, u64, SmoothBursty> = FailoverStore::new(Unreachable, FailurePolicy::Open);
    /// let _inner: &Unreachable = store.inner();
    /// ```
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: fmt::Debug, K, A: Algorithm, C: Clock> fmt::Debug for FailoverStore<S, K, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FailoverStore")
            .field("inner", &self.inner)
            .field("policy", &self.ctx.fallback.source())
            .field("degraded", &self.ctx.health.is_degraded())
            .finish_non_exhaustive()
    }
}
