//! Guava's `SmoothBursty`: a token bucket that saves up to `max_burst` of unused
//! permits and lets a request take more than is there, paid for by the next one.
//!
//! # The model
//!
//! Guava keeps two numbers: `storedPermits` (saved from idle time, capped at
//! `maxPermits = max_burst × rate`) and `nextFreeTicket` (when the next request may
//! go; in the past while permits are stored). A request is granted at
//! `nextFreeTicket`, and its *own* cost is added to `nextFreeTicket` afterwards: the
//! next request pays for it ("pay later"). So on an idle limiter `acquire(1000)`
//! returns at once and the following call waits for the 1000 permits.
//!
//! For the bursty limiter the two numbers fold into one instant,
//! `T = nextFreeTicket − storedPermits × interval`: the time at which the bucket
//! would have been empty. Guava's resync and reservation become
//!
//! ```text
//!   resync:   T ← max(T, now − burst)        burst = maxPermits × interval = max_burst
//!   reserve:  the caller may go at max(T, now); then T ← T + cost × interval
//!
//!            stored permits = (now − T) / interval, at most maxPermits
//!    ──────────┼─────────────────┼──────────────┼────────→ time
//!          now − burst           T             now       (T < now: permits stored)
//!                                   now          T        (T > now: the next caller
//!                                                          waits T − now)
//! ```
//!
//! which is the generic cell rate algorithm with Guava's pay-later rule, in one
//! 64-bit word of signed nanoseconds. Guava's proportional rescaling of stored
//! permits on a rate change leaves `T` unchanged (the burst spans the same time at
//! any rate), so only entering or leaving an infinite rate moves it.
//!
//! # Edges
//!
//! * Rate `+inf`: every request is free, but debt reserved earlier is still paid.
//!   Leaving `+inf` starts with a full burst (Guava issue 1791).
//! * One known difference from Guava, from folding its two numbers into one: if
//!   the rate leaves `+inf` while debt reserved *before* entering `+inf` is still
//!   unpaid (finite → `+inf` → finite with no request in between), Guava makes the
//!   next request wait out the whole debt and then grants the stored burst, where
//!   this limiter lets the stored burst go first, before the debt. The grants are
//!   the same in number; each comes at most one `max_burst` earlier.
//! * A tiny rate such as `f64::MIN_POSITIVE` or `5e-324`: the first request goes, its
//!   cost saturates the state, and every later request is refused for good
//!   ([`Verdict::Never`](super::Verdict::Never)).
//! * The state is signed nanoseconds: a limiter whose state starts at a clock
//!   reading of 2^63 − 1 ns (292 years from the clock's origin) or later answers
//!   every call never (see [`clock`](crate::clock)).
//! * All arithmetic saturates.
//! * Guava truncates each reservation to whole microseconds; this crate keeps
//!   nanoseconds, so waits agree with Guava's to within a microsecond.

use super::validate::{validate_period, validate_rate};
use super::{signed, until, AdjustableRate, Algorithm, Decision, OneWord, Pace, Receipt, Report};
use crate::clock::Nanos;
use crate::error::ConfigError;
use std::time::Duration;

mod step;
mod word;

/// Guava's bursty token bucket: `rate` permits per second, up to `max_burst` of
/// unused permits saved (1 second's worth by default), pay-later reservations.
///
/// Starts with no stored permits, as Guava does: a direct limiter at its creation.
/// A key of a keyed limiter starts as a state made at the clock's zero
/// (`initial_state(0)`, see [`stores`](crate::stores)), so a key first seen once the
/// clock has run for `max_burst` holds a full burst. See the [module docs](self)
/// for the model.
///
/// ```
/// use sluicegate::algorithms::{Algorithm, SmoothBursty};
/// use std::time::Duration;
/// let b = SmoothBursty::new(10.0).unwrap().with_max_burst(Duration::from_secs(2)).unwrap();
/// assert_eq!(b.rate(), 10.0);
/// assert_eq!(b.max_permits(), 20.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SmoothBursty {
    /// Guava's `stableIntervalMicros`: 1e6 / rate. 0 for an infinite rate.
    stable_micros: f64,
    /// How many seconds of permits can be saved.
    max_burst_seconds: f64,
    /// The whole permits a full burst holds, [`max_permits`](SmoothBursty::max_permits)
    /// rounded down (saturating; `u64::MAX` when unlimited). This and the fields
    /// below are derived from the two above and kept as configuration words, so that
    /// a step converts no float for them, and the usual call (one permit from a full
    /// bucket: a limit that is not hammered) divides nothing.
    whole_burst: u64,
    /// The time a full burst spans, in ns: `max_burst_seconds × 1e9`, saturating; 0
    /// when unlimited.
    burst_nanos: i64,
    /// The charge of one permit, in ns: `cost_nanos(1)`.
    one_charge: i64,
    /// The permits left after one is granted from a full bucket.
    one_from_full: u64,
}

/// The state of a [`SmoothBursty`] limit: the instant `T` at which its bucket would
/// have been empty, in signed nanoseconds of the clock.
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, SmoothBursty};
/// let bursty = SmoothBursty::new(1.0).unwrap();
/// let mut state = bursty.initial_state(0);
/// assert!(bursty.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// let after = state;
/// assert!(!bursty.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// assert_eq!(state, after); // a refusal leaves `T` where it was
/// assert_eq!(std::mem::size_of::<sluicegate::algorithms::smooth_bursty::BurstyState>(), 8);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BurstyState {
    tat: i64,
}

/// The `limit` a Guava-style limiter reports in its decisions: the permits a full
/// burst holds, but at least 1, because a request of any size can always go once
/// (its cost is paid by the next one), and a `RateLimit-Limit: 0` header would tell
/// clients nothing can pass; `u64::MAX` when unlimited.
pub(crate) fn smooth_limit(max_permits: f64) -> u64 {
    if max_permits == f64::INFINITY {
        u64::MAX
    } else {
        (max_permits as u64).max(1)
    }
}

impl SmoothBursty {
    /// A bursty limit of `rate` permits per second with a 1-second burst.
    ///
    /// # Errors
    /// [`ConfigError::InvalidRate`] unless `rate > 0` (so 0, negative, NaN and -inf are
    /// refused; +inf means unlimited).
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, ConfigError};
    /// assert!(SmoothBursty::new(5.0).is_ok());
    /// assert!(SmoothBursty::new(f64::INFINITY).is_ok()); // unlimited
    /// for bad in [0.0, -1.0, f64::NAN, f64::NEG_INFINITY] {
    ///     assert!(matches!(SmoothBursty::new(bad), Err(ConfigError::InvalidRate { .. })));
    /// }
    /// ```
    pub fn new(rate: f64) -> Result<Self, ConfigError> {
        let rate = validate_rate(rate)?;
        Ok(SmoothBursty::with_parts(1e6 / rate, 1.0))
    }

    /// The limit of the given interval and burst, with its derived `whole_burst`.
    fn with_parts(stable_micros: f64, max_burst_seconds: f64) -> Self {
        let mut bursty = SmoothBursty {
            stable_micros,
            max_burst_seconds,
            whole_burst: 0,
            burst_nanos: 0,
            one_charge: 0,
            one_from_full: 0,
        };
        bursty.whole_burst = bursty.max_permits() as u64;
        if !bursty.is_unlimited() {
            // Never negative, even from foreign words: `step` relies on it.
            bursty.burst_nanos = ((max_burst_seconds * 1e9) as i64).max(0);
        }
        bursty.one_charge = bursty.cost_nanos(1);
        // A full bucket's `T` lies a burst back; one permit moves it on by its
        // charge, which leaves the burst less that charge stored (none if the
        // charge is longer), whatever the time.
        let stored = bursty.burst_nanos.saturating_sub(bursty.one_charge).max(0);
        bursty.one_from_full = bursty.stored_permits(stored as Nanos);
        bursty
    }

    /// The same limit saving up to `max_burst` of unused permits instead of 1 s.
    /// A zero burst saves nothing: every request pays the full interval.
    ///
    /// # Errors
    /// [`ConfigError::InvalidDuration`] if `max_burst` exceeds about 292 years.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, SmoothBursty};
    /// use std::time::Duration;
    /// let strict = SmoothBursty::new(2.0).unwrap().with_max_burst(Duration::ZERO).unwrap();
    /// let mut state = strict.initial_state(0);
    /// // After 10 idle seconds nothing was saved: the second call still pays 0.5 s.
    /// strict.reserve::<Decision>(&mut state, 10_000_000_000, 1, u64::MAX);
    /// assert_eq!(strict.reserve::<Decision>(&mut state, 10_000_000_000, 1, u64::MAX).wait_nanos(), 500_000_000);
    /// assert!(SmoothBursty::new(2.0).unwrap().with_max_burst(Duration::MAX).is_err());
    /// ```
    pub fn with_max_burst(self, max_burst: Duration) -> Result<Self, ConfigError> {
        validate_period("max_burst", max_burst)?;
        Ok(SmoothBursty::with_parts(
            self.stable_micros,
            max_burst.as_secs_f64(),
        ))
    }

    /// The rate in permits per second, recomputed as Guava does from the stable
    /// interval (`1e6 / stableIntervalMicros`), so 7.0 reads back as
    /// 6.999999999999999. `+inf` for an unlimited limit.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// assert_eq!(SmoothBursty::new(7.0).unwrap().rate(), 6.999999999999999);
    /// assert_eq!(SmoothBursty::new(f64::INFINITY).unwrap().rate(), f64::INFINITY);
    /// ```
    pub fn rate(&self) -> f64 {
        1e6 / self.stable_micros
    }

    /// The maximum number of stored permits: `max_burst` seconds × rate.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use std::time::Duration;
    /// assert_eq!(SmoothBursty::new(5.0).unwrap().max_permits(), 5.0);
    /// let none = SmoothBursty::new(5.0).unwrap().with_max_burst(Duration::ZERO).unwrap();
    /// assert_eq!(none.max_permits(), 0.0);
    /// ```
    pub fn max_permits(&self) -> f64 {
        if self.is_unlimited() {
            // Guava's 0 × inf would be NaN for a zero burst; unlimited is unlimited.
            return f64::INFINITY;
        }
        self.max_burst_seconds * self.rate()
    }

    fn interval_nanos(&self) -> f64 {
        self.stable_micros * 1000.0
    }

    fn is_unlimited(&self) -> bool {
        self.stable_micros == 0.0
    }

    /// How far back `T` may lie: the time a full burst spans. Zero at an infinite
    /// rate, where `T` is simply Guava's `nextFreeTicket`.
    #[inline(always)]
    fn burst_nanos(&self) -> i64 {
        self.burst_nanos
    }

    fn cost_nanos(&self, cost: u64) -> i64 {
        // `as` saturates, and maps NaN (0 × inf) to 0.
        (cost as f64 * self.interval_nanos()) as i64
    }

    /// [`smooth_limit`] of the burst, from the kept whole burst.
    #[inline(always)]
    fn limit(&self) -> u64 {
        self.whole_burst.max(1)
    }

    /// The whole permits stored at `now`.
    #[inline(always)]
    fn remaining(&self, tat: i64, now: i64) -> u64 {
        self.stored_permits(until(tat, now))
    }

    /// The whole permits `stored` nanoseconds of saved time hold, at most a burst
    /// (`u64::MAX` when unlimited).
    #[inline(always)]
    fn stored_permits(&self, stored: Nanos) -> u64 {
        if self.is_unlimited() {
            return u64::MAX;
        }
        // Guava's min(stored, maxPermits), rounded down: the same as rounding each
        // down first, rounding being monotone. (`max_permits` is never NaN: a valid
        // rate survives 1e6 / (1e6 / rate) finite; were it 0 × inf, the burst would
        // be zero and nothing ever stored, so both would still answer 0.)
        ((stored as f64 / self.interval_nanos()) as u64).min(self.whole_burst)
    }
}

impl Algorithm for SmoothBursty {
    type State = BurstyState;
    type Shape = OneWord;

    fn initial_state(&self, now: Nanos) -> BurstyState {
        BurstyState { tat: signed(now) }
    }

    #[inline(always)]
    fn reserve<R: Report>(
        &self,
        state: &mut BurstyState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> R {
        let settled = self.settle_within(state, now, cost, max_wait);
        self.report(&settled)
    }

    fn peek(&self, state: &BurstyState, now: Nanos, cost: u64) -> Decision {
        let mut scratch = *state;
        self.reserve::<Decision>(&mut scratch, now, cost, 0)
    }

    /// With debt to pay (`reset_after` beyond a burst), the default rule: the next
    /// call goes when the debt is paid. Otherwise pay later would let any cost
    /// through at once, so the next permit is when the stored permits first read
    /// `remaining + 1`: `(remaining + 1) × interval` after `T`, to the nanosecond at
    /// which the step's own division reads it, as `T = now − (burst − reset_after)`.
    fn standing(&self, answer: Decision, peek: &mut dyn FnMut(u64) -> Decision) -> Decision {
        let (remaining, reset) = (answer.remaining(), answer.reset_after_nanos());
        let burst = self.burst_nanos() as u64;
        if !answer.is_allowed() || remaining >= self.limit() || reset > burst {
            return super::standing_with(answer, peek);
        }
        let more = remaining + 1;
        let mut saved = (more as f64 * self.interval_nanos()).ceil() as u64;
        // The quotient of a rounded product may read a hair below `more`.
        for _ in 0..2 {
            if self.stored_permits(saved) < more {
                saved += 1;
            }
        }
        super::short_of_whole(answer, saved.saturating_sub(burst - reset))
    }

    /// Go's rule: if the grant has not acted yet, give back its charge minus
    /// whatever later grants reserved after it; never more than a full burst.
    fn cancel(&self, state: &mut BurstyState, now: Nanos, receipt: &Receipt, acts_at: Nanos) {
        if self.is_unlimited() || acts_at < now {
            return;
        }
        let reserved_after = until(receipt.mark(), state.tat);
        let restore = receipt.charge().saturating_sub(reserved_after);
        if restore == 0 || state.tat == i64::MAX {
            return;
        }
        let now = signed(now);
        let restored = state
            .tat
            .saturating_sub(i64::try_from(restore).unwrap_or(i64::MAX));
        state.tat = restored.max(now.saturating_sub(self.burst_nanos()));
    }

    fn pace(&self) -> Option<Pace> {
        let interval = self.interval_nanos().ceil();
        // `as` saturates; an unlimited limit (a zero interval) has no pace.
        (interval > 0.0).then(|| Pace::from_nanos(interval as Nanos, self.burst_nanos() as Nanos))
    }

    fn is_replenished(&self, state: &BurstyState, now: Nanos) -> bool {
        state.tat <= signed(now).saturating_sub(self.burst_nanos())
    }
}

impl AdjustableRate for SmoothBursty {
    fn rate(&self) -> f64 {
        SmoothBursty::rate(self)
    }

    fn set_rate(
        &mut self,
        state: &mut BurstyState,
        now: Nanos,
        rate: f64,
    ) -> Result<(), ConfigError> {
        let rate = validate_rate(rate)?;
        let now = signed(now);
        // Resync under the old parameters first, as Guava does.
        let tat = state.tat.max(now.saturating_sub(self.burst_nanos()));
        let was_unlimited = self.is_unlimited();
        *self = SmoothBursty::with_parts(1e6 / rate, self.max_burst_seconds);
        state.tat = if was_unlimited && !self.is_unlimited() {
            // Leaving +inf: a full burst is stored, debt already reserved still stands.
            tat.max(now).saturating_sub(self.burst_nanos())
        } else {
            // Proportional rescaling of stored permits keeps T where it is.
            tat
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests;
