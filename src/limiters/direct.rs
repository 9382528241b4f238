//! The direct limiter: one limit, shared by every caller.

use super::ledger::Ledger;
use super::waiting::{granted_within, wait_blocking};
use super::{AsyncRateLimiter, Reservation};
use crate::algorithms::{AdjustableRate, Decision, Receipt, SmoothBursty, SmoothWarmingUp};
use crate::cells::{set_rate, CellAlgorithm, StateCell};
use crate::clock::{duration_to_nanos, Clock, DefaultClock, Nanos};
use crate::error::{ConfigError, Error};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A thread-safe rate limiter over one limit: Guava's `RateLimiter`, for any
/// [algorithm](crate::algorithms).
///
/// Cloning is cheap (an `Arc`) and clones share one state, so a limiter can be handed
/// to every thread or task that must respect it. It is `Send + Sync`.
///
/// # The calls
///
/// | call | waits? | answers |
/// |---|---|---|
/// | [`acquire`](Self::acquire), [`acquire_n`](Self::acquire_n) | as long as needed | the time waited |
/// | [`try_acquire`](Self::try_acquire), [`try_acquire_n`](Self::try_acquire_n) | never | granted or not |
/// | [`try_acquire_timeout`](Self::try_acquire_timeout), [`try_acquire_n_timeout`](Self::try_acquire_n_timeout) | only if the wait fits the timeout | granted or not |
/// | [`check`](Self::check) | never | the full [`Decision`] |
/// | [`peek`](Self::peek) | never, and consumes nothing | the [`Decision`] a `check` would give |
/// | [`reserve`](Self::reserve) | no: you wait, or cancel | a [`Reservation`] |
/// | [`to_async`](Self::to_async)`().acquire().await` | asynchronously | the time waited |
///
/// A blocking wait sleeps on the limiter's clock *outside* any lock. For Guava's
/// limiters, whether a timed try succeeds depends only on when the previous
/// reservation ends (Guava's `canAcquire`): the size of the request never matters,
/// because a request's own cost is paid by the next one. Algorithms that cannot
/// reserve future capacity (the window counters) wait for `retry_after` and try again.
///
/// A cost of 0 is an error ([`Error::ZeroCost`]), never a panic; a cost that can never
/// be granted makes blocking calls fail at once with [`Error::Never`] and tries answer
/// `false`.
///
/// ```
/// use sluicegate::RateLimiter;
/// use sluicegate::clock::ManualClock;
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::bursty_with_clock(5.0, clock.clone()).unwrap();
/// for _ in 0..3 {
///     limiter.acquire().unwrap();
/// }
/// // Virtual time: the waits Guava documents for 5 permits per second.
/// assert_eq!(clock.take_sleeps_secs(), vec![0.0, 0.2, 0.2]);
/// ```
pub struct RateLimiter<A: CellAlgorithm, C: Clock = DefaultClock> {
    shared: Arc<Shared<A, C>>,
}

struct Shared<A: CellAlgorithm, C: Clock> {
    cell: A::Cell,
    clock: C,
    /// The async waits that reserved the future (see [`Ledger`]).
    waits: Ledger<Receipt>,
}

impl<A: CellAlgorithm, C: Clock> Clone for RateLimiter<A, C> {
    fn clone(&self) -> Self {
        RateLimiter {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<A: CellAlgorithm + fmt::Debug, C: Clock> fmt::Debug for RateLimiter<A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("algorithm", &self.algorithm())
            .finish_non_exhaustive()
    }
}

impl RateLimiter<SmoothBursty> {
    /// Guava's `RateLimiter.create(rate)`: a [`SmoothBursty`] limiter of `rate` permits
    /// per second with a 1-second burst, on the real clock.
    ///
    /// # Errors
    /// [`ConfigError::InvalidRate`] unless `rate > 0` (`+inf` is unlimited).
    ///
    /// ```
    /// let limiter = sluicegate::RateLimiter::bursty(100.0).unwrap();
    /// assert!(limiter.try_acquire());
    /// ```
    pub fn bursty(rate: f64) -> Result<Self, ConfigError> {
        Ok(RateLimiter::new(SmoothBursty::new(rate)?))
    }
}

impl<C: Clock> RateLimiter<SmoothBursty, C> {
    /// [`bursty`](RateLimiter::bursty) on a given clock (e.g. a
    /// [`ManualClock`](crate::clock::ManualClock) in tests).
    ///
    /// # Errors
    /// [`ConfigError::InvalidRate`] unless `rate > 0`.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(2.0, ManualClock::new()).unwrap();
    /// assert_eq!(limiter.rate(), 2.0);
    /// ```
    pub fn bursty_with_clock(rate: f64, clock: C) -> Result<Self, ConfigError> {
        Ok(RateLimiter::with_clock(SmoothBursty::new(rate)?, clock))
    }
}

impl RateLimiter<SmoothWarmingUp> {
    /// Guava's `RateLimiter.create(rate, warmupPeriod)`: a [`SmoothWarmingUp`] limiter
    /// that starts cold and reaches `rate` permits per second over `warmup`, with cold
    /// factor 3, on the real clock.
    ///
    /// # Errors
    /// [`ConfigError::InvalidRate`] unless `rate > 0`; [`ConfigError::InvalidDuration`] for a
    /// warm-up beyond about 292 years. A zero warm-up is valid.
    ///
    /// ```
    /// use std::time::Duration;
    /// let limiter = sluicegate::RateLimiter::warming_up(10.0, Duration::from_secs(3)).unwrap();
    /// assert!(limiter.try_acquire());
    /// ```
    pub fn warming_up(rate: f64, warmup: Duration) -> Result<Self, ConfigError> {
        Ok(RateLimiter::new(SmoothWarmingUp::new(rate, warmup)?))
    }
}

impl<C: Clock> RateLimiter<SmoothWarmingUp, C> {
    /// [`warming_up`](RateLimiter::warming_up) on a given clock.
    ///
    /// # Errors
    /// As [`warming_up`](RateLimiter::warming_up).
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::warming_up_with_clock(2.0, Duration::from_secs(4), clock.clone()).unwrap();
    /// for _ in 0..6 {
    ///     limiter.acquire().unwrap();
    /// }
    /// assert_eq!(clock.take_sleeps_secs(), vec![0.0, 1.38, 1.13, 0.88, 0.63, 0.5]);
    /// ```
    pub fn warming_up_with_clock(
        rate: f64,
        warmup: Duration,
        clock: C,
    ) -> Result<Self, ConfigError> {
        Ok(RateLimiter::with_clock(
            SmoothWarmingUp::new(rate, warmup)?,
            clock,
        ))
    }
}

impl<A: CellAlgorithm> RateLimiter<A> {
    /// A limiter running `algorithm` on the real clock ([`DefaultClock`]).
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, RateLimiter};
    /// use std::time::Duration;
    /// let algorithm = SmoothBursty::new(50.0).unwrap().with_max_burst(Duration::from_secs(2)).unwrap();
    /// let limiter = RateLimiter::new(algorithm);
    /// assert!(limiter.try_acquire());
    /// ```
    pub fn new(algorithm: A) -> Self {
        Self::with_clock(algorithm, DefaultClock::new())
    }
}

impl<A: CellAlgorithm, C: Clock> RateLimiter<A, C> {
    /// A limiter running `algorithm` on `clock`; its state starts at the clock's
    /// current reading.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), ManualClock::new());
    /// assert!(limiter.try_acquire());
    /// assert!(!limiter.try_acquire());
    /// ```
    pub fn with_clock(algorithm: A, clock: C) -> Self {
        let cell = A::Cell::new(algorithm, clock.now());
        RateLimiter {
            shared: Arc::new(Shared {
                cell,
                clock,
                waits: Ledger::default(),
            }),
        }
    }

    /// The limiter's clock.
    ///
    /// ```
    /// use sluicegate::{clock::{Clock, ManualClock}, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(5.0, ManualClock::new()).unwrap();
    /// limiter.acquire().unwrap();
    /// limiter.acquire().unwrap();
    /// assert_eq!(limiter.clock().now(), 200_000_000); // the second acquire slept 0.2 s
    /// ```
    pub fn clock(&self) -> &C {
        &self.shared.clock
    }

    /// A copy of the current configuration.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(5.0, ManualClock::new()).unwrap();
    /// limiter.set_rate(8.0).unwrap();
    /// assert_eq!(limiter.algorithm().rate(), 8.0); // a snapshot of the live configuration
    /// ```
    pub fn algorithm(&self) -> A {
        self.shared.cell.algorithm()
    }

    /// Takes one permit, blocking as long as needed; returns the time waited.
    ///
    /// Equivalent to [`acquire_n(1)`](Self::acquire_n).
    ///
    /// # Errors
    /// [`Error::Never`] if the limit will never grant a permit again (e.g. the smallest
    /// positive rate after its one permit); it fails at once instead of sleeping
    /// forever.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, Error, RateLimiter};
    /// use std::time::Duration;
    /// let limiter = RateLimiter::bursty_with_clock(2.0, ManualClock::new()).unwrap();
    /// assert_eq!(limiter.acquire().unwrap(), Duration::ZERO);
    /// assert_eq!(limiter.acquire().unwrap(), Duration::from_millis(500));
    /// // One permit in 10^308 seconds: after the first, the next can never come.
    /// let frozen = RateLimiter::with_clock(SmoothBursty::new(f64::MIN_POSITIVE).unwrap(), ManualClock::new());
    /// frozen.acquire().unwrap();
    /// assert!(matches!(frozen.acquire(), Err(Error::Never { .. })));
    /// ```
    pub fn acquire(&self) -> Result<Duration, Error> {
        self.acquire_n(1)
    }

    /// Takes `cost` permits, blocking as long as needed; returns the time waited (zero if
    /// not throttled). Under Guava's limiters the wait pays for the *previous*
    /// request; this request's cost is paid by the next one.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for a cost of 0; [`Error::Never`] if the cost can never be
    /// granted (above a window's capacity, or the limit is exhausted for good).
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// let limiter = RateLimiter::bursty_with_clock(10.0, ManualClock::new()).unwrap();
    /// assert_eq!(limiter.acquire_n(20).unwrap(), Duration::ZERO); // pay later...
    /// assert_eq!(limiter.acquire_n(1).unwrap(), Duration::from_secs(2)); // ...by the next caller
    /// assert!(limiter.acquire_n(0).is_err());
    /// ```
    pub fn acquire_n(&self, cost: u64) -> Result<Duration, Error> {
        self.acquire_within(cost, u64::MAX)
    }

    /// Takes one permit if that needs no waiting. Never blocks.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap();
    /// assert!(limiter.try_acquire());
    /// assert!(!limiter.try_acquire());
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> bool {
        let now = self.shared.clock.now();
        self.shared.cell.try_take(now, 1)
    }

    /// Takes `cost` permits if that needs no waiting. Never blocks. A cost that can never
    /// be granted (above a window's capacity) answers `false`, not an error.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for a cost of 0.
    ///
    /// ```
    /// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(3, Duration::from_secs(1)).unwrap();
    /// let limiter = RateLimiter::with_clock(window, ManualClock::new());
    /// assert!(limiter.try_acquire_n(2).unwrap());
    /// assert!(!limiter.try_acquire_n(2).unwrap()); // only 1 left: nothing taken
    /// assert!(limiter.try_acquire_n(1).unwrap());
    /// assert!(!limiter.try_acquire_n(4).unwrap()); // above capacity: never, so false
    /// assert!(limiter.try_acquire_n(0).is_err());
    /// ```
    pub fn try_acquire_n(&self, cost: u64) -> Result<bool, Error> {
        Ok(self.check(cost)?.is_allowed())
    }

    /// Takes one permit if it can be had within `timeout`, waiting for it; answers
    /// `false` at once, without waiting, if it cannot. A timeout of `Duration::MAX`
    /// means no limit (it saturates, as Guava's does).
    ///
    /// ```
    /// use sluicegate::{clock::{Clock, ManualClock}, RateLimiter};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::bursty_with_clock(5.0, clock.clone()).unwrap();
    /// assert!(limiter.try_acquire_timeout(Duration::ZERO));
    /// assert!(!limiter.try_acquire_timeout(Duration::from_millis(100))); // needs 200 ms
    /// assert_eq!(clock.now(), 0); // a refusal does not wait
    /// assert!(limiter.try_acquire_timeout(Duration::MAX));
    /// assert_eq!(clock.now(), 200_000_000);
    /// ```
    pub fn try_acquire_timeout(&self, timeout: Duration) -> bool {
        matches!(self.try_acquire_n_timeout(1, timeout), Ok(true))
    }

    /// Takes `cost` permits if they can be had within `timeout`, waiting for them; answers
    /// `false` without consuming anything if they cannot (Guava's `canAcquire` rule:
    /// the wait must fit the timeout).
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for a cost of 0.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// let limiter = RateLimiter::bursty_with_clock(5.0, ManualClock::new()).unwrap();
    /// assert!(limiter.try_acquire_n_timeout(1, Duration::ZERO).unwrap());
    /// assert!(!limiter.try_acquire_n_timeout(1, Duration::from_millis(199)).unwrap());
    /// assert!(limiter.try_acquire_n_timeout(1, Duration::from_millis(200)).unwrap());
    /// ```
    pub fn try_acquire_n_timeout(&self, cost: u64, timeout: Duration) -> Result<bool, Error> {
        granted_within(self.acquire_within(cost, duration_to_nanos(timeout)))
    }

    /// Takes `cost` permits if that needs no waiting, and answers with the full
    /// [`Decision`]: remaining permits, `retry_after`, `reset_after`. Never blocks.
    /// Costs a little more than [`try_acquire`](Self::try_acquire), which answers
    /// only the verdict: for the bursty limiter, the fixed window and the sliding
    /// window counter, the lock-free cell publishes the new state first and works
    /// out the decision's other fields after its compare-and-swap
    /// (`StateCell::check`).
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for a cost of 0.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter, Verdict};
    /// use std::time::Duration;
    /// let limiter = RateLimiter::bursty_with_clock(4.0, ManualClock::new()).unwrap();
    /// assert!(limiter.check(1).unwrap().is_allowed());
    /// let refused = limiter.check(1).unwrap();
    /// assert_eq!(refused.verdict(), Verdict::Denied);
    /// assert_eq!(refused.retry_after(), Duration::from_millis(250));
    /// ```
    #[inline(always)]
    pub fn check(&self, cost: u64) -> Result<Decision, Error> {
        let cost = nonzero(cost)?;
        let now = self.shared.clock.now();
        Ok(self.shared.cell.check(now, cost))
    }

    /// [`check`](Self::check), also telling `each` how every limit stands after
    /// it, one decision per limit in order (see
    /// [`Algorithm::reserve_each`](crate::algorithms::Algorithm::reserve_each)):
    /// every limit of a set ([`AllOf`](crate::algorithms::AllOf),
    /// [`Limits`](crate::algorithms::Limits)), a nested set's in its place, in the
    /// same atomic step; a single limit reports the check's decision (after a
    /// grant of its last permit, the refusal one more would get). A cost above a
    /// limit's capacity makes that limit report never, and the call is refused.
    /// What the server layer lists as one `RateLimit` item per limit.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for a cost of 0.
    ///
    /// ```
    /// use sluicegate::algorithms::{FixedWindow, Limits};
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// let limits = Limits::new()
    ///     .with(FixedWindow::new(3, Duration::from_secs(1)).unwrap())
    ///     .with(FixedWindow::new(100, Duration::from_secs(3600)).unwrap());
    /// let limiter = RateLimiter::with_clock(limits, ManualClock::new());
    /// let mut left = Vec::new();
    /// let decision = limiter.check_each(1, &mut |d| left.push(d.remaining())).unwrap();
    /// assert_eq!(decision.remaining(), 2); // the tightest member
    /// assert_eq!(left, [2, 99]);
    /// assert!(limiter.check_each(0, &mut |_| {}).is_err());
    /// ```
    pub fn check_each(&self, cost: u64, each: &mut dyn FnMut(Decision)) -> Result<Decision, Error> {
        let cost = nonzero(cost)?;
        let now = self.shared.clock.now();
        Ok(self.shared.cell.check_each(now, cost, each))
    }

    /// The decision [`check`](Self::check) would give now, without consuming
    /// anything.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for a cost of 0.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap();
    /// assert!(limiter.peek(1).unwrap().is_allowed());
    /// assert!(limiter.peek(1).unwrap().is_allowed()); // peeking took nothing
    /// assert!(limiter.try_acquire());
    /// assert!(!limiter.peek(1).unwrap().is_allowed());
    /// assert!(limiter.peek(0).is_err());
    /// ```
    pub fn peek(&self, cost: u64) -> Result<Decision, Error> {
        let cost = nonzero(cost)?;
        let now = self.shared.clock.now();
        Ok(self.shared.cell.peek(now, cost))
    }

    /// Reserves `cost` permits now, for a caller who will act when the reservation says
    /// and may change its mind: see [`Reservation`]. For algorithms that cannot
    /// reserve future capacity, a reservation that is not immediately available is
    /// not ok, and carries its `retry_after`.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for a cost of 0.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// let limiter = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap();
    /// limiter.acquire().unwrap();
    /// let r = limiter.reserve(1).unwrap();
    /// assert!(r.is_ok());
    /// assert_eq!(r.delay(), Duration::from_secs(1));
    /// r.cancel(); // gives the permit back: the next caller waits 1 s, not 2 s
    /// assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::from_secs(1));
    /// ```
    pub fn reserve(&self, cost: u64) -> Result<Reservation<A, C>, Error> {
        let cost = nonzero(cost)?;
        let now = self.shared.clock.now();
        let (decision, receipt) = self.shared.cell.reserve(now, cost, u64::MAX);
        Ok(Reservation::new(self.clone(), decision, receipt, now))
    }

    /// An async handle on this limiter, sharing its state: `to_async().acquire().await`.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(5.0, ManualClock::new()).unwrap();
    /// let handle = limiter.to_async();
    /// futures::executor::block_on(async {
    ///     handle.acquire().await.unwrap();
    ///     handle.acquire().await.unwrap();
    /// });
    /// assert_eq!(limiter.clock().take_sleeps_secs(), vec![0.0, 0.2]);
    /// ```
    pub fn to_async(&self) -> AsyncRateLimiter<A, C> {
        AsyncRateLimiter::from(self.clone())
    }

    /// The one blocking core: reserve `cost` for a caller willing to wait up to
    /// `budget`, then sleep until the grant may act. Algorithms that cannot reserve
    /// the future deny with a `retry_after`; we sleep that and try again while the
    /// budget lasts.
    fn acquire_within(&self, cost: u64, budget: Nanos) -> Result<Duration, Error> {
        let cost = nonzero(cost)?;
        let cell = &self.shared.cell;
        wait_blocking(&self.shared.clock, cost, budget, |now, left| {
            Ok(cell.reserve(now, cost, left).0)
        })
    }

    pub(crate) fn cell(&self) -> &A::Cell {
        &self.shared.cell
    }

    pub(crate) fn waits(&self) -> &Ledger<Receipt> {
        &self.shared.waits
    }
}

impl<A: CellAlgorithm + AdjustableRate, C: Clock> RateLimiter<A, C> {
    /// Changes the rate (Guava's `setRate`). Stored permits are rescaled in
    /// proportion; debt already reserved under the old rate is still paid by the next
    /// request, and the new rate applies from the request after it.
    ///
    /// # Errors
    /// [`ConfigError::InvalidRate`] unless `rate > 0`; the limiter is then unchanged.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    /// limiter.acquire().unwrap();
    /// limiter.set_rate(2.0).unwrap();
    /// limiter.acquire().unwrap(); // pays 1.0 s: the previous request was under the old rate
    /// limiter.acquire().unwrap(); // pays 0.5 s
    /// assert_eq!(clock.take_sleeps_secs(), vec![0.0, 1.0, 0.5]);
    /// assert!(limiter.set_rate(0.0).is_err());
    /// ```
    pub fn set_rate(&self, rate: f64) -> Result<(), ConfigError> {
        set_rate(&self.shared.cell, self.shared.clock.now(), rate)
    }

    /// The current rate in permits per second, recomputed from the stable interval
    /// as Guava does (`+inf` when unlimited), so a rate such as 7.0 reads back as
    /// 6.999999999999999. It reads the live configuration: a
    /// [`set_rate`](Self::set_rate) shows at once. Changes nothing.
    ///
    /// ```
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(5.0, ManualClock::new()).unwrap();
    /// assert_eq!(limiter.rate(), 5.0);
    /// limiter.set_rate(7.0).unwrap();
    /// assert_eq!(limiter.rate(), 6.999999999999999); // 1e6 / the interval in µs
    /// assert!(limiter.set_rate(0.0).is_err());
    /// assert_eq!(limiter.rate(), 6.999999999999999); // a refused rate changes nothing
    /// limiter.set_rate(f64::INFINITY).unwrap();
    /// assert_eq!(limiter.rate(), f64::INFINITY); // unlimited
    /// ```
    pub fn rate(&self) -> f64 {
        self.algorithm().rate()
    }
}

impl<A: CellAlgorithm + AdjustableRate, C: Clock> fmt::Display for RateLimiter<A, C> {
    /// Guava's `toString`: `RateLimiter[stableRate=5.0qps]`, with Java's `%3.1f`
    /// rounding (half up, so 0.25 shows as `0.3`) and `Infinity` for `+inf`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RateLimiter[stableRate={}qps]",
            java_one_decimal(self.rate())
        )
    }
}

/// Java's `String.format("%.1f", x)` for a positive `x`: Java rounds the shortest
/// decimal that reads back as `x` half up, where Rust's `{:.1}` rounds the exact
/// binary value half to even (0.25 gives "0.3" in Java, "0.2" in Rust).
fn java_one_decimal(x: f64) -> String {
    if x.is_infinite() {
        return "Infinity".to_owned();
    }
    // Rust's Display is the shortest round-tripping decimal, never in exponent form.
    let shortest = x.to_string();
    let (int_part, frac_part) = shortest.split_once('.').unwrap_or((&shortest, ""));
    let mut frac = frac_part.bytes();
    let tenth = frac.next().unwrap_or(b'0');
    let round_up = frac.next().is_some_and(|d| d >= b'5');
    // The number in tenths, as decimal digits, so that no precision is lost.
    let mut digits: Vec<u8> = int_part.bytes().chain(std::iter::once(tenth)).collect();
    if round_up {
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, b'1');
                break;
            }
            i -= 1;
            if digits[i] == b'9' {
                digits[i] = b'0';
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let tenth = digits.pop().map_or('0', char::from);
    let int_part = String::from_utf8(digits).unwrap_or_default();
    format!("{int_part}.{tenth}")
}

pub(crate) fn nonzero(cost: u64) -> Result<u64, Error> {
    if cost == 0 {
        Err(Error::ZeroCost)
    } else {
        Ok(cost)
    }
}
