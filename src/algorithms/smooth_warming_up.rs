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

use super::smooth_bursty::smooth_limit;
use super::validate::{validate_period, validate_rate};
use super::words::{try_take_by_words, Plan, Words, WordsMut};
use super::{
    signed, until, AdjustableRate, Algorithm, Decision, Pace, Receipt, WordArray, WordEncoded,
};
use crate::clock::Nanos;
use crate::error::ConfigError;
use std::time::Duration;

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
/// use sluicegate::algorithms::{Algorithm, SmoothWarmingUp};
/// use std::time::Duration;
/// let w = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
/// let mut state = w.initial_state(0);
/// w.reserve(&mut state, 0, 1, 0);
/// let after = state;
/// assert!(!w.reserve(&mut state, 0, 1, 0).is_allowed());
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
    /// use sluicegate::algorithms::{Algorithm, SmoothWarmingUp};
    /// use std::time::Duration;
    /// let w = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    /// let mut state = w.initial_state(0);
    /// assert_eq!(state.stored_permits(), 8.0); // starts cold: full
    /// w.reserve(&mut state, 0, 1, 0);
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

    /// The cold factor.
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

    #[inline]
    fn permits_to_time(&self, permits: f64) -> f64 {
        self.stable_nanos() + permits * self.slope
    }

    /// The area under the throttling curve between `stored - take` and `stored`,
    /// with the trapezoid and the flat part truncated separately, as Guava does.
    #[inline]
    fn stored_permits_to_wait(&self, stored: f64, mut take: f64) -> i64 {
        let above = stored - self.threshold;
        let mut nanos: i64 = 0;
        if above > 0.0 {
            let t = above.min(take);
            let length = self.permits_to_time(above) + self.permits_to_time(above - t);
            nanos = (t * length / 2.0) as i64;
            take -= t;
        }
        nanos.saturating_add((self.stable_nanos() * take) as i64)
    }

    #[inline(always)]
    fn resync(&self, state: &WarmingUpState, now: i64) -> WarmingUpState {
        if now > state.next_free {
            let idle = now.abs_diff(state.next_free);
            // The same value either way; i64 -> f64 is one instruction, u64 -> f64
            // several, and this sits on the hot path's critical chain.
            let idle = match i64::try_from(idle) {
                Ok(idle) => idle as f64,
                Err(_) => idle as f64,
            };
            let cool_down = self.cool_down_nanos();
            let stored = if state.stored >= self.max_permits
                || idle >= (self.max_permits - state.stored) * cool_down * FILLS_FOR_SURE
            {
                // The bucket is, or certainly gets, full: `stored + idle / cool_down`
                // is at least `max_permits` (fresh permits are never negative or NaN;
                // the margin FILLS_FOR_SURE dwarfs the rounding of the four float
                // operations involved, and an underflowing product means under a
                // nanosecond of room), so the cap gives `max_permits` exactly, and the
                // division, the slowest step of a hot limiter, is skipped. A NaN or
                // infinite product fails the test and takes the exact path.
                self.max_permits
            } else {
                self.max_permits.min(state.stored + idle / cool_down)
            };
            WarmingUpState {
                stored,
                next_free: now,
            }
        } else {
            *state
        }
    }

    #[inline]
    fn limit(&self) -> u64 {
        if self.stable_micros == 0.0 {
            u64::MAX
        } else {
            smooth_limit(self.max_permits)
        }
    }

    #[inline]
    fn reset_after(&self, state: &WarmingUpState, now: i64) -> Nanos {
        let missing = (self.max_permits - state.stored).max(0.0);
        let refill = (missing * self.cool_down_nanos()) as u64;
        until(now, state.next_free).saturating_add(refill)
    }
}

/// `1 + 2^-40`: a relative margin far above the error of a few float operations
/// (each at most `2^-53`), used to know without dividing that idle time has filled
/// the bucket.
const FILLS_FOR_SURE: f64 = 1.0 + 1.0 / (1u64 << 40) as f64;

/// What one reservation decided, before it is dressed as a [`Decision`]: the core
/// shared by [`Algorithm::reserve`] and the lean [`WordEncoded::plan_take`], so
/// the two cannot disagree.
enum Step {
    Never,
    /// Refused: the caller would wait `wait`.
    Denied {
        wait: Nanos,
    },
    /// Granted after `wait`; the state becomes `next`, whose `next_free` is `charge`
    /// nanoseconds later than the resynced one.
    Allowed {
        wait: Nanos,
        next: WarmingUpState,
        charge: i64,
        /// Stored permits spent, which a cancel gives back.
        spend: f64,
    },
}

impl SmoothWarmingUp {
    /// Guava's resync and reservation. The wait depends only on `nextFreeTicket`,
    /// which a resync moves to `max(now, nextFreeTicket)`, so the stored permits (two
    /// float divisions) are resynced only for a grant.
    #[inline(always)]
    fn step(&self, state: &WarmingUpState, now: i64, cost: u64, max_wait: Nanos) -> Step {
        let wait = match Self::admit(state, now, max_wait) {
            Ok(wait) => wait,
            Err(refusal) => return refusal,
        };
        let synced = self.resync(state, now);
        let cost = cost as f64;
        let spend = cost.min(synced.stored);
        let fresh = cost - spend;
        let charge = self
            .stored_permits_to_wait(synced.stored, spend)
            .saturating_add((fresh * self.stable_nanos()) as i64);
        Step::Allowed {
            wait,
            next: WarmingUpState {
                stored: synced.stored - spend,
                next_free: synced.next_free.saturating_add(charge),
            },
            charge,
            spend,
        }
    }

    /// The integer half of [`step`](Self::step): the wait before a grant, or the
    /// refusal. It does not depend on the cost or on the stored permits.
    #[inline(always)]
    fn admit(state: &WarmingUpState, now: i64, max_wait: Nanos) -> Result<Nanos, Step> {
        let next_free = state.next_free.max(now);
        if next_free == i64::MAX {
            return Err(Step::Never);
        }
        let wait = until(now, next_free);
        if wait > max_wait {
            return Err(Step::Denied { wait });
        }
        Ok(wait)
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
    fn reserve(
        &self,
        state: &mut WarmingUpState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> Decision {
        self.reserve_with_receipt(state, now, cost, max_wait).0
    }

    #[inline(always)]
    fn reserve_with_receipt(
        &self,
        state: &mut WarmingUpState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> (Decision, Receipt) {
        let now = signed(now);
        match self.step(state, now, cost, max_wait) {
            Step::Never => (Decision::never(self.limit(), 0, u64::MAX), Receipt::NONE),
            Step::Denied { wait } => {
                let synced = self.resync(state, now);
                let reset = self.reset_after(&synced, now);
                (
                    Decision::denied(self.limit(), 0, wait, reset),
                    Receipt::NONE,
                )
            }
            Step::Allowed {
                wait,
                next,
                charge,
                spend,
            } => {
                *state = next;
                let remaining = if next.next_free <= now {
                    next.stored as u64
                } else {
                    0
                };
                let reset = self.reset_after(&next, now);
                (
                    Decision::allowed_after(wait, self.limit(), remaining, reset),
                    Receipt::new(next.next_free, charge as u64).with_stored_spent(spend),
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

    #[inline]
    fn try_take(&self, state: &mut WarmingUpState, now: Nanos, cost: u64) -> Option<Decision> {
        try_take_by_words::<_, 2>(self, state, now, cost)
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

/// Six configuration words and two of state, each a field's exact bits.
impl WordEncoded for SmoothWarmingUp {
    type Config = [u64; 6];
    /// `(now, cost)`: the take's float half runs once the state is claimed.
    type Take = (Nanos, u64);

    #[inline(always)]
    fn config_words(&self) -> [u64; 6] {
        [
            self.stable_micros.to_bits(),
            self.warmup_nanos.to_bits(),
            self.cold_factor.to_bits(),
            self.threshold.to_bits(),
            self.max_permits.to_bits(),
            self.slope.to_bits(),
        ]
    }

    #[inline(always)]
    fn from_config_words(words: [u64; 6]) -> Self {
        SmoothWarmingUp {
            stable_micros: f64::from_bits(words[0]),
            warmup_nanos: f64::from_bits(words[1]),
            cold_factor: f64::from_bits(words[2]),
            threshold: f64::from_bits(words[3]),
            max_permits: f64::from_bits(words[4]),
            slope: f64::from_bits(words[5]),
        }
    }

    #[inline(always)]
    fn state_words(&self) -> usize {
        2
    }

    #[inline(always)]
    fn read_state<W: Words + ?Sized>(&self, words: &W) -> WarmingUpState {
        WarmingUpState {
            stored: f64::from_bits(words.word(0)),
            next_free: words.word(1) as i64,
        }
    }

    #[inline(always)]
    fn write_state<W: WordsMut + ?Sized>(&self, state: &WarmingUpState, words: &mut W) {
        words.set_word(0, state.stored.to_bits());
        words.set_word(1, state.next_free as u64);
    }

    /// Only the integer half of the step: whether the caller may act now depends on
    /// `nextFreeTicket` alone, so the plan reads one word, and the float half
    /// (spending stored permits) runs in [`apply_take`](Self::apply_take), on the
    /// same words, once a cell has claimed them.
    #[inline(always)]
    fn plan_take<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> Plan<(Nanos, u64)> {
        let next_free = words.word(1) as i64;
        let state = WarmingUpState {
            stored: 0.0,
            next_free,
        };
        match Self::admit(&state, signed(now), 0) {
            Ok(_) => (true, Some((now, cost))),
            Err(_) => (false, None),
        }
    }

    #[inline(always)]
    fn apply_take<W: WordsMut + ?Sized>(&self, words: &mut W, (now, cost): (Nanos, u64)) {
        let state = self.read_state(words);
        // Granted by construction (same words, same integer test as the plan).
        if let Step::Allowed { next, .. } = self.step(&state, signed(now), cost, 0) {
            self.write_state(&next, words);
        }
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
mod resync_tests {
    use super::*;
    use proptest::prelude::*;

    /// The resync formula as Guava writes it, with no shortcut.
    fn reference(config: &SmoothWarmingUp, state: &WarmingUpState, now: i64) -> WarmingUpState {
        if now > state.next_free {
            let fresh = now.abs_diff(state.next_free) as f64 / config.cool_down_nanos();
            WarmingUpState {
                stored: config.max_permits.min(state.stored + fresh),
                next_free: now,
            }
        } else {
            *state
        }
    }

    fn config(rate: f64, warmup_ms: u64, cold_factor: f64) -> SmoothWarmingUp {
        SmoothWarmingUp::new(rate, Duration::from_millis(warmup_ms))
            .unwrap()
            .with_cold_factor(cold_factor)
            .unwrap()
    }

    fn same(a: WarmingUpState, b: WarmingUpState) -> bool {
        a.stored.to_bits() == b.stored.to_bits() && a.next_free == b.next_free
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// The skipped division never changes a bit, in particular for idle times
        /// right at the edge of filling the bucket.
        #[test]
        fn resync_is_bit_exact(
            rate in prop_oneof![1e-3..1e9f64, Just(f64::INFINITY), Just(1e-300)],
            warmup_ms in prop_oneof![Just(0u64), 1u64..100_000_000],
            cold_factor in 1.0..10.0f64,
            fill in prop_oneof![0.0..=1.0f64, Just(0.0), Just(1.0)],
            next_free in 0i64..1 << 62,
            scale in prop_oneof![-1e-9..1e-9f64, -0.5..0.5f64, Just(0.0)],
            idle_raw in 1i64..1 << 62,
        ) {
            let config = config(rate, warmup_ms, cold_factor);
            let stored = config.max_permits * fill;
            let state = WarmingUpState { stored, next_free };
            // Idle time close to what fills the bucket, or arbitrary.
            let edge = (config.max_permits - stored) * config.cool_down_nanos() * (1.0 + scale);
            for idle in [edge as i64, (edge as i64).saturating_add(1), edge as i64 - 1, idle_raw] {
                let now = next_free.saturating_add(idle.max(1));
                let got = config.resync(&state, now);
                let want = reference(&config, &state, now);
                prop_assert!(same(got, want), "{:?} {:?} now {}: {:?} != {:?}", config, state, now, got, want);
            }
        }
    }

    #[test]
    fn resync_edges_are_bit_exact() {
        let configs = [
            config(2.0, 4_000, 3.0),
            config(1e9, 1_000, 3.0),
            config(f64::INFINITY, 1_000, 3.0),
            config(5.0, 0, 3.0),
            config(f64::MIN_POSITIVE, 1_000, 3.0),
        ];
        for config in configs {
            for stored in [
                0.0,
                -0.0,
                config.max_permits,
                config.max_permits / 3.0,
                f64::NAN,
                f64::INFINITY,
            ] {
                for idle in [1i64, 2, 1_000, 1 << 40, i64::MAX] {
                    let state = WarmingUpState {
                        stored,
                        next_free: 0,
                    };
                    let got = config.resync(&state, idle);
                    let want = reference(&config, &state, idle);
                    assert!(
                        same(got, want),
                        "{config:?} {state:?} {idle}: {got:?} != {want:?}"
                    );
                }
            }
        }
    }
}
