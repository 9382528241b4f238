//! Guava's `SmoothWarmingUp`: a token bucket whose stored permits are *expensive*,
//! so that a limiter that has been idle starts slowly and warms up to its rate.
//!
//! # The model
//!
//! Idle time fills the bucket with stored permits, as in the bursty limiter, but
//! here taking a stored permit costs time: the throttling interval is a function of
//! how many permits are stored, flat at the stable interval up to a threshold and
//! then rising linearly to `cold_factor × stable` at `maxPermits`. Spending `k`
//! stored permits from a level `x` costs the area under the curve between `x − k`
//! and `x`.
//!
//! ```text
//!          ^ throttling interval
//!          |
//!    cold  +                  /
//! interval |                 /.
//!          |                / .
//!          |               /  .   <- the warm-up period is the area of the
//!          |              /   .      trapezoid between threshold and max
//!          |             /    .
//!          |            /     .
//!          |           /      .
//!   stable +----------/  WARM .
//! interval |          .   UP  .
//!          |          . PERIOD.
//!          |          .       .
//!        0 +----------+-------+--------------> stored permits
//!          0      threshold  maxPermits
//! ```
//!
//! With warm-up period `W`, stable interval `s` and cold interval `c = cold_factor × s`:
//! `threshold = 0.5 W / s` (draining from threshold to 0 takes `W/2`),
//! `maxPermits = threshold + 2W / (s + c)` (the trapezoid has area `W`), and idle time
//! refills the bucket at `maxPermits / W` per unit of time, so going from empty to
//! full takes exactly `W` at any rate. A new limiter starts *cold*: full of stored
//! permits. For 2 permits/s, a 4 s warm-up and the default cold factor 3, the first
//! permits cost 1.375 s, 1.125 s, 0.875 s, 0.625 s, then 0.5 s each.
//!
//! Requests are granted at Guava's `nextFreeTicket` and pay later, exactly as in
//! [`SmoothBursty`](super::SmoothBursty).
//!
//! # Edges
//!
//! * A zero warm-up period is accepted and behaves as a plain smooth limiter that
//!   keeps limiting (no stored permits ever); Guava's bug #2730, where such a limiter
//!   stops limiting after the first idle gap, is not reproduced.
//! * Rate `+inf`: every request is free once earlier debt is paid; leaving `+inf`
//!   starts warm (no stored permits), the opposite of the bursty limiter.
//! * All arithmetic saturates; a rate so small that one permit costs more than the
//!   clock can count leaves the limit exhausted for good.
//! * Its instants are signed nanoseconds: from a clock reading of 2^63 − 1 ns (292
//!   years from the clock's origin) on, every call is answered never (see
//!   [`clock`](crate::clock)).

use super::validate::{validate_period, validate_rate};
use super::{signed, until, AdjustableRate, Algorithm, Decision, Pace, Receipt, Report, WordArray};
use crate::clock::Nanos;
use crate::error::ConfigError;
use std::time::Duration;

mod step;
mod word;

use self::step::Outcome;

/// Guava's warming-up token bucket. See the [module docs](self) for the model.
///
/// ```
/// use sluicegate::algorithms::SmoothWarmingUp;
/// use std::time::Duration;
/// let w = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
/// assert_eq!(w.threshold_permits(), 4.0);
/// assert_eq!(w.max_permits(), 8.0);
/// let colder = w.with_cold_factor(10.0).unwrap();
/// assert_eq!(colder.cold_factor(), 10.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SmoothWarmingUp {
    stable_micros: f64,
    warmup_nanos: f64,
    cold_factor: f64,
    threshold: f64,
    max_permits: f64,
    /// Nanoseconds of interval per stored permit above the threshold.
    slope: f64,
}

/// The state of a [`SmoothWarmingUp`] limit: Guava's `storedPermits` and
/// `nextFreeTicket` (signed nanoseconds of the clock).
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, SmoothWarmingUp};
/// use std::time::Duration;
/// let w = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
/// let mut state = w.initial_state(0);
/// w.reserve::<Decision>(&mut state, 0, 1, 0);
/// let after = state;
/// assert!(!w.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// assert_eq!(state, after); // a refusal changes nothing
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WarmingUpState {
    stored: f64,
    next_free: i64,
}

impl WarmingUpState {
    /// Permits currently stored (before any resync to a later `now`).
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, SmoothWarmingUp};
    /// use std::time::Duration;
    /// let w = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    /// let mut state = w.initial_state(0);
    /// assert_eq!(state.stored_permits(), 8.0); // starts cold: full
    /// w.reserve::<Decision>(&mut state, 0, 1, 0);
    /// assert_eq!(state.stored_permits(), 7.0);
    /// ```
    pub fn stored_permits(&self) -> f64 {
        self.stored
    }
}

impl SmoothWarmingUp {
    /// A warming-up limit of `rate` permits per second that takes `warmup` to go from
    /// cold to its full rate, with Guava's default cold factor of 3.
    ///
    /// # Errors
    /// [`ConfigError::InvalidRate`] unless `rate > 0`; [`ConfigError::InvalidDuration`] if `warmup`
    /// exceeds about 292 years. A zero warm-up is valid (see the module docs).
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothWarmingUp, ConfigError};
    /// use std::time::Duration;
    /// let w = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    /// assert_eq!(w.cold_factor(), 3.0);
    /// let flat = SmoothWarmingUp::new(2.0, Duration::ZERO).unwrap(); // nothing to store
    /// assert_eq!(flat.max_permits(), 0.0);
    /// assert!(matches!(SmoothWarmingUp::new(0.0, Duration::from_secs(4)), Err(ConfigError::InvalidRate { .. })));
    /// ```
    pub fn new(rate: f64, warmup: Duration) -> Result<Self, ConfigError> {
        let warmup_nanos = validate_period("warmup period", warmup)? as f64;
        let rate = validate_rate(rate)?;
        let mut config = SmoothWarmingUp {
            stable_micros: 0.0,
            warmup_nanos,
            cold_factor: 3.0,
            threshold: 0.0,
            max_permits: 0.0,
            slope: 0.0,
        };
        config.configure(rate);
        Ok(config)
    }

    /// The same limit with another cold factor: the cold interval is
    /// `cold_factor × stable interval`. 1.0 makes stored permits cost exactly the
    /// stable interval.
    ///
    /// # Errors
    /// [`ConfigError::InvalidColdFactor`] if `cold_factor` is below 1, NaN or infinite.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothWarmingUp, ConfigError};
    /// use std::time::Duration;
    /// let w = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    /// assert_eq!(w.with_cold_factor(1.0).unwrap().max_permits(), 12.0);
    /// for bad in [0.5, f64::NAN, f64::INFINITY] {
    ///     assert!(matches!(w.with_cold_factor(bad), Err(ConfigError::InvalidColdFactor { .. })));
    /// }
    /// ```
    pub fn with_cold_factor(mut self, cold_factor: f64) -> Result<Self, ConfigError> {
        if !(cold_factor >= 1.0 && cold_factor.is_finite()) {
            return Err(ConfigError::InvalidColdFactor { cold_factor });
        }
        self.cold_factor = cold_factor;
        self.configure(self.rate());
        // A fresh limit starts cold under its final parameters.
        Ok(self)
    }

    /// The rate in permits per second, recomputed from the stable interval as Guava
    /// does.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothWarmingUp;
    /// use std::time::Duration;
    /// assert_eq!(SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap().rate(), 2.0);
    /// assert_eq!(SmoothWarmingUp::new(7.0, Duration::from_secs(4)).unwrap().rate(), 6.999999999999999);
    /// ```
    pub fn rate(&self) -> f64 {
        1e6 / self.stable_micros
    }

    /// The cold factor: at a full store of permits (the limit at its coldest) the
    /// throttling interval is `cold_factor` stable intervals, falling linearly to
    /// the stable interval at the threshold. 3 by default, as in Guava; 1 makes
    /// stored permits cost exactly the stable interval.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Decision, SmoothWarmingUp};
    /// use std::time::Duration;
    /// let w = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    /// assert_eq!(w.cold_factor(), 3.0);
    /// // A cold start: the first stored permit costs 1.375 s; with a factor of 1, 0.5 s.
    /// for (limit, first) in [(w, 1_375_000_000), (w.with_cold_factor(1.0).unwrap(), 500_000_000)] {
    ///     let mut state = limit.initial_state(0);
    ///     assert!(limit.reserve::<bool>(&mut state, 0, 1, 0)); // paid for by the next call
    ///     assert_eq!(limit.reserve::<Decision>(&mut state, 0, 1, u64::MAX).wait_nanos(), first);
    /// }
    /// ```
    pub fn cold_factor(&self) -> f64 {
        self.cold_factor
    }

    /// Stored permits below which permits cost the stable interval.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothWarmingUp;
    /// use std::time::Duration;
    /// // Guava: half the warm-up's worth of permits at the stable rate.
    /// let w = SmoothWarmingUp::new(10.0, Duration::from_secs(2)).unwrap();
    /// assert_eq!(w.threshold_permits(), 10.0);
    /// ```
    pub fn threshold_permits(&self) -> f64 {
        self.threshold
    }

    /// The most permits that can be stored.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothWarmingUp;
    /// use std::time::Duration;
    /// // threshold + 2 × warmup / (stable + cold interval) = 10 + 2 × 2 s / 0.4 s
    /// let w = SmoothWarmingUp::new(10.0, Duration::from_secs(2)).unwrap();
    /// assert_eq!(w.max_permits(), 20.0);
    /// ```
    pub fn max_permits(&self) -> f64 {
        self.max_permits
    }

    /// The warm-up period.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothWarmingUp;
    /// use std::time::Duration;
    /// let w = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    /// assert_eq!(w.warmup(), Duration::from_secs(4));
    /// ```
    pub fn warmup(&self) -> Duration {
        Duration::from_nanos(self.warmup_nanos as u64)
    }

    #[inline]
    fn stable_nanos(&self) -> f64 {
        self.stable_micros * 1000.0
    }

    /// Guava's `doSetRate` for the derived parameters (not the stored permits).
    fn configure(&mut self, rate: f64) {
        self.stable_micros = 1e6 / rate;
        if self.warmup_nanos == 0.0 {
            // No warm-up: nothing is ever stored, so there is no trapezoid. Spelled
            // out because Guava's formulas give 0/0 here at an infinite rate.
            self.threshold = 0.0;
            self.max_permits = 0.0;
            self.slope = 0.0;
            return;
        }
        let stable = self.stable_nanos();
        let cold = stable * self.cold_factor;
        self.threshold = 0.5 * self.warmup_nanos / stable;
        self.max_permits = self.threshold + 2.0 * self.warmup_nanos / (stable + cold);
        self.slope = (cold - stable) / (self.max_permits - self.threshold);
    }

    /// Idle nanoseconds per stored permit: the bucket fills in exactly the warm-up
    /// period. With nothing to store (zero warm-up) nothing accrues.
    #[inline]
    fn cool_down_nanos(&self) -> f64 {
        if self.max_permits == 0.0 {
            f64::INFINITY
        } else {
            self.warmup_nanos / self.max_permits
        }
    }
}

impl Algorithm for SmoothWarmingUp {
    type State = WarmingUpState;
    type Shape = WordArray;

    /// Starts cold: fully stocked with expensive permits.
    fn initial_state(&self, now: Nanos) -> WarmingUpState {
        WarmingUpState {
            stored: self.max_permits,
            next_free: signed(now),
        }
    }

    #[inline(always)]
    fn reserve<R: Report>(
        &self,
        state: &mut WarmingUpState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> R {
        let now = signed(now);
        match self.step(state, now, cost, max_wait) {
            Outcome::Never => R::refused(|| Decision::never(self.limit(), 0, u64::MAX)),
            Outcome::Denied { wait } => {
                let synced = self.resync(state, now);
                let reset = self.reset_after(&synced, now);
                R::refused(|| Decision::denied(self.limit(), 0, wait, reset))
            }
            Outcome::Allowed {
                wait,
                next,
                charge,
                spend,
            } => {
                *state = next;
                R::granted(
                    || {
                        let remaining = if next.next_free <= now {
                            next.stored as u64
                        } else {
                            0
                        };
                        let reset = self.reset_after(&next, now);
                        Decision::allowed_after(wait, self.limit(), remaining, reset)
                    },
                    || Receipt::new(next.next_free, charge as u64).with_stored_spent(spend),
                )
            }
        }
    }

    /// Go's rule: give back the grant's charge minus what later grants reserved
    /// after it. The stored permits it spent come back in the same proportion, so a
    /// cancelled grant leaves the limiter as cold as it found it; the part of the
    /// charge that reaches back before `now` returns as stored permits at the stable
    /// interval.
    fn cancel(&self, state: &mut WarmingUpState, now: Nanos, receipt: &Receipt, acts_at: Nanos) {
        if self.stable_micros == 0.0 || acts_at < now {
            return;
        }
        let reserved_after = until(receipt.mark(), state.next_free);
        let restore = receipt.charge().saturating_sub(reserved_after);
        if restore == 0 || state.next_free == i64::MAX {
            return;
        }
        let share = restore as f64 / receipt.charge() as f64;
        let mut stored = state.stored + receipt.stored_spent() * share;
        let now = signed(now);
        let rolled_back = state
            .next_free
            .saturating_sub(i64::try_from(restore).unwrap_or(i64::MAX));
        if rolled_back >= now {
            state.next_free = rolled_back;
        } else {
            stored += now.abs_diff(rolled_back) as f64 / self.stable_nanos();
            state.next_free = now;
        }
        state.stored = self.max_permits.min(stored);
    }

    fn pace(&self) -> Option<Pace> {
        let interval = self.stable_nanos().ceil();
        (interval > 0.0).then(|| Pace::from_nanos(interval as Nanos, self.warmup_nanos as Nanos))
    }

    fn is_replenished(&self, state: &WarmingUpState, now: Nanos) -> bool {
        let synced = self.resync(state, signed(now));
        synced.next_free <= signed(now) && synced.stored >= self.max_permits
    }
}

impl AdjustableRate for SmoothWarmingUp {
    fn rate(&self) -> f64 {
        SmoothWarmingUp::rate(self)
    }

    fn set_rate(
        &mut self,
        state: &mut WarmingUpState,
        now: Nanos,
        rate: f64,
    ) -> Result<(), ConfigError> {
        let rate = validate_rate(rate)?;
        let mut synced = self.resync(state, signed(now));
        let old_max = self.max_permits;
        self.configure(rate);
        synced.stored = if old_max == f64::INFINITY {
            // Leaving +inf starts warm.
            0.0
        } else if self.max_permits == f64::INFINITY {
            // Entering +inf: Guava's stored × inf / oldMax; stored permits no longer
            // matter, so keep a clean +inf rather than a NaN.
            f64::INFINITY
        } else if old_max == 0.0 {
            // Only a zero warm-up has nothing to store; keep it that way.
            0.0
        } else {
            synced.stored * self.max_permits / old_max
        };
        *state = synced;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
