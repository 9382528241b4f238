//! Rates that change while a limiter runs (Guava's `setRate`).

use super::{sealed, Algorithm};
use crate::clock::Nanos;

/// An algorithm whose rate can change while it runs (Guava's `setRate`).
///
/// `set_rate` first brings the state up to `now` under the old rate, then switches.
/// A rejected rate leaves both configuration and state untouched.
///
/// ```
/// use sluicegate::algorithms::{AdjustableRate, Algorithm, SmoothBursty};
/// let mut b = SmoothBursty::new(2.0).unwrap();
/// let mut state = b.initial_state(0);
/// b.set_rate(&mut state, 0, 7.0).unwrap();
/// assert_eq!(AdjustableRate::rate(&b), 6.999999999999999); // as Guava computes it
/// assert!(b.set_rate(&mut state, 0, f64::NAN).is_err());
/// ```
///
/// It is sealed: implemented by the crate's rate-based algorithms,
/// [`SmoothBursty`](super::SmoothBursty) and
/// [`SmoothWarmingUp`](super::SmoothWarmingUp), whose `set_rate` a direct limiter
/// applies atomically ([`RateLimiter::set_rate`](crate::RateLimiter::set_rate)), and
/// not implementable outside the crate. An algorithm of your own changes its rate
/// through its own methods:
///
/// ```compile_fail,E0277
/// use sluicegate::algorithms::{AdjustableRate, Algorithm, Decision, Plain, Receipt, Report};
/// struct Always;
/// # impl Algorithm for Always {
/// #     type State = ();
/// #     type Shape = Plain;
/// #     fn initial_state(&self, _now: u64) {}
/// #     fn reserve<R: Report>(&self, _: &mut (), _now: u64, _cost: u64, _max_wait: u64) -> R {
/// #         R::granted(|| Decision::allowed(u64::MAX, u64::MAX, 0), || Receipt::NONE)
/// #     }
/// #     fn is_replenished(&self, _: &(), _now: u64) -> bool {
/// #         true
/// #     }
/// # }
/// impl AdjustableRate for Always { // the trait bound `Always: Sealed` is not satisfied
///     fn rate(&self) -> f64 {
///         f64::INFINITY
///     }
///     fn set_rate(&mut self, _: &mut (), _now: u64, _rate: f64) -> Result<(), sluicegate::ConfigError> {
///         Ok(())
///     }
/// }
/// ```
pub trait AdjustableRate: Algorithm + sealed::Sealed {
    /// The current rate in permits per second (`+inf` when unlimited): the one the
    /// constructor or the last accepted [`set_rate`](AdjustableRate::set_rate)
    /// gave, as computed back from the algorithm's interval (see the trait's
    /// example).
    ///
    /// ```
    /// use sluicegate::algorithms::{AdjustableRate, Algorithm, SmoothBursty, SmoothWarmingUp};
    /// use std::time::Duration;
    /// assert_eq!(AdjustableRate::rate(&SmoothBursty::new(f64::INFINITY).unwrap()), f64::INFINITY);
    /// let mut warming = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    /// let mut state = warming.initial_state(0);
    /// warming.set_rate(&mut state, 0, 4.0).unwrap();
    /// assert_eq!(AdjustableRate::rate(&warming), 4.0);
    /// ```
    fn rate(&self) -> f64;

    /// Switches to `rate` permits per second at `now`, having brought the state up
    /// to `now` under the old rate: a wait already reserved stays as it was, and
    /// permits reserved from then on are charged at the new rate.
    ///
    /// # Errors
    /// [`ConfigError::InvalidRate`](crate::ConfigError::InvalidRate) unless `rate > 0`,
    /// leaving the configuration and the state as they were.
    ///
    /// ```
    /// use sluicegate::algorithms::{AdjustableRate, Algorithm, Decision, SmoothBursty};
    /// let mut bursty = SmoothBursty::new(1.0).unwrap();
    /// let (mut state, s) = (bursty.initial_state(0), 1_000_000_000);
    /// assert!(bursty.reserve::<bool>(&mut state, 0, 1, 0)); // the next pays 1 s at 1/s
    /// bursty.set_rate(&mut state, 0, 10.0).unwrap();
    /// assert_eq!(bursty.reserve::<Decision>(&mut state, 0, 1, u64::MAX).wait_nanos(), s);
    /// assert_eq!(bursty.reserve::<Decision>(&mut state, 0, 1, u64::MAX).wait_nanos(), s + s / 10);
    /// let before = state;
    /// assert!(bursty.set_rate(&mut state, 0, 0.0).is_err());
    /// assert_eq!((AdjustableRate::rate(&bursty), state), (10.0, before));
    /// ```
    fn set_rate(
        &mut self,
        state: &mut Self::State,
        now: Nanos,
        rate: f64,
    ) -> Result<(), crate::ConfigError>;
}
