//! The sliding window counter (seed 000's "sliding window", seed 001's "sliding
//! tail"): two fixed-window counters, the previous one weighted by how much of it
//! still lies inside a window of `len` ending now.
//!
//! # The model
//!
//! Windows are aligned to the clock's origin, as for the
//! [fixed window](super::fixed_window). At a point `e` into the current window (the
//! elapsed fraction is `f = e / len`), the number of permits taken over the last
//! `len` is *estimated* by assuming the previous window's traffic was spread evenly:
//!
//! ```text
//!   estimate = previous × (1 − f) + current
//!
//!         previous window          current window
//!   ├─────────────────────────┼──────────────────────────┤
//!             ├─────────── the last len ──────────┤ now
//!             └ weight 1 − f ─┘└────── f ──────────┘
//! ```
//!
//! A call of cost `c` is allowed if `estimate + c ≤ limit`. Seed 000's example, 100
//! per minute: 100 calls in the first 15 s of a minute; 15 s into the next minute the
//! previous window weighs 0.75, so 75 + 25 = 100 and 25 more calls pass; 45 s into it,
//! 75 more. Had the 100 calls come at 59.4 s, 25 calls would still pass at 75 s, only
//! 16 s later: the estimate is an approximation.
//!
//! The state is the current window's start and two counters; memory and time per call
//! are constant. (It takes three words, so it lives in a
//! [`LockedCell`](crate::stores::LockedCell): two counters of up to the limit plus a
//! window index do not fit in one word for every limit.)
//!
//! # Options
//!
//! * [`Rounding`]: the weighted previous count is a fraction. [`Rounding::Exact`] (the
//!   default) compares it exactly, in integers, which is the same as rounding it *up*:
//!   the estimate of an admitted call never exceeds the limit. [`Rounding::Floor`]
//!   rounds it down, admitting up to one permit more; it reproduces seed 001's table,
//!   which allows calls at weighted counts of 3.6 under a limit of 3.
//! * [`Counting`]: [`Counting::Admitted`] (the default, as seed 002 argues) counts only
//!   granted permits, so a refused call leaves the state untouched and a client that
//!   waits `retry_after` gets in. [`Counting::Attempts`] counts refused calls too (the
//!   `INCR`-first of seeds 000 and 001): a client that keeps hammering stays refused
//!   for longer. In that mode, and only there, a *denied* decision moves the counter;
//!   do not use it inside an all-or-nothing set of limits.
//!
//! # The approximation bound
//!
//! With [`Rounding::Exact`] and either counting, over the window of length `len`
//! ending at any instant, at most `limit + previous × f` permits are granted, where
//! `previous` is the number granted in the previous fixed window and `f` the elapsed
//! fraction of the current one; so never more than `2 × limit − 1` in any span of `len` (the fixed
//! window's worst case), and only when the previous window's traffic bunched at its
//! end. When it was spread evenly the estimate is the true count. [`Rounding::Floor`]
//! allows one permit more: fewer than `limit + 1 + previous × f`, at most `2 × limit`.
//! The estimate is also never *below* the number of permits taken in the current
//! window, so no single window ever grants more than `limit`.
//!
//! # Edges
//!
//! * A cost above the limit is answered [`Verdict::Never`](super::Verdict::Never) (and
//!   is not counted, even when counting attempts).
//! * `retry_after` is exact: the first instant at which the same call would pass, at
//!   most two windows away.
//! * Time that appears to go backwards is read as the start of the latest window seen:
//!   the previous window then weighs fully, so it grants nothing extra.

use super::smooth_bursty::validate_period;
use super::{Algorithm, Decision};
use crate::clock::Nanos;
use crate::error::Error;
use std::time::Duration;

/// How the weighted previous count is rounded before comparing with the limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Rounding {
    /// Compared exactly (equivalently, rounded up): the estimate never exceeds the
    /// limit. The default.
    #[default]
    Exact,
    /// Rounded down: up to one permit more than `Exact` (seed 001's behaviour).
    Floor,
}

/// Which calls add to the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Counting {
    /// Only granted permits. The default: a denied call changes nothing.
    #[default]
    Admitted,
    /// Refused calls too (except those that could never pass): hammering extends a ban.
    Attempts,
}

/// At most `limit` permits per sliding window of `len`, estimated from two fixed
/// windows. See the [module docs](self) for the model, the options and the bound.
///
/// ```
/// use sluicegate::algorithms::{Algorithm, SlidingWindowCounter};
/// use std::time::Duration;
/// let minute = 60_000_000_000;
/// let counter = SlidingWindowCounter::new(100, Duration::from_secs(60)).unwrap();
/// let mut state = counter.initial_state(0);
/// assert!(counter.reserve(&mut state, 0, 100, 0).is_allowed());
/// // 1.25 minutes: the previous minute weighs 0.75, so 25 permits remain.
/// assert_eq!(counter.peek(&state, minute + minute / 4, 1).remaining(), 24);
/// assert!(counter.reserve(&mut state, minute + minute / 4, 25, 0).is_allowed());
/// assert!(!counter.reserve(&mut state, minute + minute / 4, 1, 0).is_allowed());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindowCounter {
    len: u64,
    limit: u64,
    rounding: Rounding,
    counting: Counting,
}

/// The state of a [`SlidingWindowCounter`]: the start of the current window and the
/// counts of the previous and current windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindowState {
    start: u64,
    previous: u64,
    current: u64,
}

impl SlidingWindowCounter {
    /// At most `limit` permits per sliding window of `len`, with [`Rounding::Exact`]
    /// and [`Counting::Admitted`].
    ///
    /// # Errors
    /// [`Error::InvalidCount`] for a zero limit; [`Error::InvalidDuration`] for a zero
    /// window or one above about 292 years.
    ///
    /// ```
    /// use sluicegate::algorithms::SlidingWindowCounter;
    /// use std::time::Duration;
    /// assert!(SlidingWindowCounter::new(100, Duration::from_secs(60)).is_ok());
    /// assert!(SlidingWindowCounter::new(0, Duration::from_secs(60)).is_err());
    /// assert!(SlidingWindowCounter::new(100, Duration::ZERO).is_err());
    /// ```
    pub fn new(limit: u64, len: Duration) -> Result<Self, Error> {
        let len_nanos = validate_period("window", len)?;
        if len_nanos == 0 {
            return Err(Error::InvalidDuration {
                what: "window",
                value: len,
                requirement: "positive",
            });
        }
        if limit == 0 {
            return Err(Error::InvalidCount {
                what: "limit",
                value: limit,
                requirement: "positive",
            });
        }
        Ok(SlidingWindowCounter {
            len: len_nanos,
            limit,
            rounding: Rounding::Exact,
            counting: Counting::Admitted,
        })
    }

    /// The same limit with another [`Rounding`] of the weighted previous count.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Rounding, SlidingWindowCounter};
    /// use std::time::Duration;
    /// let exact = SlidingWindowCounter::new(3, Duration::from_secs(60)).unwrap();
    /// let floor = exact.with_rounding(Rounding::Floor);
    /// let mut state = exact.initial_state(0);
    /// exact.reserve(&mut state, 0, 3, 0);
    /// // 30 s into the next minute the previous 3 weigh 1.5: 1.5 + 2 > 3 ≥ ⌊1.5⌋ + 2.
    /// assert!(!exact.peek(&state, 90_000_000_000, 2).is_allowed());
    /// assert!(floor.peek(&state, 90_000_000_000, 2).is_allowed());
    /// ```
    pub fn with_rounding(mut self, rounding: Rounding) -> Self {
        self.rounding = rounding;
        self
    }

    /// The same limit with another [`Counting`] of refused calls.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Counting, SlidingWindowCounter};
    /// use std::time::Duration;
    /// let counter = SlidingWindowCounter::new(1, Duration::from_secs(60))
    ///     .unwrap()
    ///     .with_counting(Counting::Attempts);
    /// let mut state = counter.initial_state(0);
    /// counter.reserve(&mut state, 0, 1, 0);
    /// assert!(!counter.reserve(&mut state, 0, 1, 0).is_allowed());
    /// assert_eq!(counter.counts(&state, 0), (0, 2)); // the refused call counted
    /// ```
    pub fn with_counting(mut self, counting: Counting) -> Self {
        self.counting = counting;
        self
    }

    /// The limit per sliding window, in permits.
    ///
    /// ```
    /// use sluicegate::algorithms::SlidingWindowCounter;
    /// use std::time::Duration;
    /// let counter = SlidingWindowCounter::new(100, Duration::from_secs(60)).unwrap();
    /// assert_eq!((counter.limit(), counter.window()), (100, Duration::from_secs(60)));
    /// ```
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length (see [`limit`](SlidingWindowCounter::limit) for an
    /// example).
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.len)
    }

    /// The counts `(previous, current)` of the previous and current fixed windows as
    /// of `now` (a window that has ended becomes the previous one; older ones are
    /// forgotten).
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SlidingWindowCounter};
    /// use std::time::Duration;
    /// let counter = SlidingWindowCounter::new(10, Duration::from_secs(60)).unwrap();
    /// let mut state = counter.initial_state(0);
    /// counter.reserve(&mut state, 0, 4, 0);
    /// assert_eq!(counter.counts(&state, 0), (0, 4));
    /// assert_eq!(counter.counts(&state, 60_000_000_000), (4, 0));
    /// assert_eq!(counter.counts(&state, 120_000_000_000), (0, 0));
    /// ```
    pub fn counts(&self, state: &SlidingWindowState, now: Nanos) -> (u64, u64) {
        let (state, _) = self.roll(state, now);
        (state.previous, state.current)
    }

    /// The estimate `previous × (1 − f) + current` at `now`, unrounded (for display
    /// and headers; decisions are computed in exact integers).
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SlidingWindowCounter};
    /// use std::time::Duration;
    /// let counter = SlidingWindowCounter::new(3, Duration::from_secs(60)).unwrap();
    /// let mut state = counter.initial_state(0);
    /// counter.reserve(&mut state, 5_000_000_000, 2, 0);
    /// assert_eq!(counter.estimate(&state, 75_000_000_000), 1.5);
    /// ```
    pub fn estimate(&self, state: &SlidingWindowState, now: Nanos) -> f64 {
        let (state, elapsed) = self.roll(state, now);
        let weight = (self.len - elapsed) as f64 / self.len as f64;
        state.previous as f64 * weight + state.current as f64
    }

    /// The state as of `now` and how far `now` is into its window. A later window
    /// shifts the counters; an earlier `now` (time going backwards) is read as the
    /// start of the stored window.
    #[inline]
    fn roll(&self, state: &SlidingWindowState, now: Nanos) -> (SlidingWindowState, u64) {
        if now < state.start {
            return (*state, 0);
        }
        let elapsed = now - state.start;
        if elapsed < self.len {
            // Still the stored window: the common case costs no division.
            return (*state, elapsed);
        }
        let start = now - now % self.len;
        let previous = if start - state.start == self.len {
            state.current
        } else {
            0
        };
        let rolled = SlidingWindowState {
            start,
            previous,
            current: 0,
        };
        (rolled, now - start)
    }

    /// The previous count's weight at `elapsed`, rounded to whole permits (at most
    /// `previous`). Stays in u64 arithmetic when the product fits, which is the
    /// common case and much cheaper than a 128-bit division.
    #[inline]
    fn weighted(&self, previous: u64, elapsed: u64) -> u64 {
        if previous == 0 {
            return 0;
        }
        let rest = self.len - elapsed;
        if let Some(weighted) = previous.checked_mul(rest) {
            return match self.rounding {
                Rounding::Exact => weighted.div_ceil(self.len),
                Rounding::Floor => weighted / self.len,
            };
        }
        let len = u128::from(self.len);
        let weighted = u128::from(previous) * u128::from(rest);
        let rounded = match self.rounding {
            Rounding::Exact => weighted.div_ceil(len),
            Rounding::Floor => weighted / len,
        };
        // rest ≤ len, so the weight is at most `previous`.
        u64::try_from(rounded).unwrap_or(previous)
    }

    /// The first elapsed time in a window at which a previous count of `previous`
    /// weighs at most `room` whole permits; `None` if not within the window.
    fn first_fit(&self, previous: u64, room: u64) -> Option<u64> {
        if previous == 0 {
            return Some(0);
        }
        let len = u128::from(self.len);
        // previous × (len − e) must be ≤ room × len (exact), or < (room + 1) × len.
        let allowance = match self.rounding {
            Rounding::Exact => u128::from(room) * len,
            Rounding::Floor => (u128::from(room) + 1) * len - 1,
        };
        // The longest unelapsed part that still fits; u64 division when it can.
        let span = match u64::try_from(allowance) {
            Ok(allowance) => u128::from(allowance / previous),
            Err(_) => allowance / u128::from(previous),
        };
        let first = len.saturating_sub(span);
        (first < len).then_some(first as u64)
    }

    /// How long after the state's `elapsed` point a call of `cost` would first pass
    /// (the call does not pass now).
    fn retry_after(&self, state: &SlidingWindowState, elapsed: u64, cost: u64) -> Nanos {
        let room = state
            .current
            .checked_add(cost)
            .and_then(|used| self.limit.checked_sub(used));
        if let Some(room) = room {
            if let Some(first) = self.first_fit(state.previous, room) {
                return first.saturating_sub(elapsed);
            }
        }
        let to_next = self.len - elapsed;
        if let Some(first) = self.first_fit(state.current, self.limit - cost) {
            return to_next.saturating_add(first);
        }
        to_next.saturating_add(self.len)
    }

    fn reset_after(&self, state: &SlidingWindowState, elapsed: u64) -> Nanos {
        let to_next = self.len - elapsed;
        if state.current > 0 {
            to_next.saturating_add(self.len)
        } else if state.previous > 0 {
            to_next
        } else {
            0
        }
    }
}

impl Algorithm for SlidingWindowCounter {
    type State = SlidingWindowState;

    fn initial_state(&self, now: Nanos) -> SlidingWindowState {
        SlidingWindowState {
            start: now - now % self.len,
            previous: 0,
            current: 0,
        }
    }

    #[inline]
    fn reserve(
        &self,
        state: &mut SlidingWindowState,
        now: Nanos,
        cost: u64,
        _max_wait: Nanos,
    ) -> Decision {
        // Immediate or denied: an estimate cannot promise future capacity.
        let (mut rolled, elapsed) = self.roll(state, now);
        // Durations are measured from the state's point; `behind` is how far `now`
        // lies before it when time went backwards (0 otherwise).
        let behind = rolled.start.saturating_add(elapsed).saturating_sub(now);
        let used = u128::from(self.weighted(rolled.previous, elapsed)) + u128::from(rolled.current);
        let remaining = u64::try_from(u128::from(self.limit).saturating_sub(used)).unwrap_or(0);
        if cost > self.limit {
            let reset = self.reset_after(&rolled, elapsed);
            return Decision::never(self.limit, remaining, reset.saturating_add(behind));
        }
        if used + u128::from(cost) > u128::from(self.limit) {
            if self.counting == Counting::Attempts {
                rolled.current = rolled.current.saturating_add(cost);
                *state = rolled;
            }
            let retry = self.retry_after(&rolled, elapsed, cost);
            let reset = self.reset_after(&rolled, elapsed);
            return Decision::denied(
                self.limit,
                remaining,
                retry.saturating_add(behind),
                reset.saturating_add(behind),
            );
        }
        rolled.current += cost;
        *state = rolled;
        let reset = self.reset_after(&rolled, elapsed);
        Decision::allowed(self.limit, remaining - cost, reset.saturating_add(behind))
    }

    fn is_replenished(&self, state: &SlidingWindowState, now: Nanos) -> bool {
        let (rolled, _) = self.roll(state, now);
        rolled.previous == 0 && rolled.current == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn retry_after_is_the_first_instant_that_passes() {
        for rounding in [Rounding::Exact, Rounding::Floor] {
            let counter = SlidingWindowCounter::new(10, Duration::from_secs(60))
                .unwrap()
                .with_rounding(rounding);
            let mut state = counter.initial_state(0);
            assert!(counter.reserve(&mut state, 50 * SECOND, 10, 0).is_allowed());
            for now in [60 * SECOND, 61 * SECOND, 100 * SECOND, 119 * SECOND] {
                for cost in [1, 4, 10] {
                    let refused = counter.peek(&state, now, cost);
                    if refused.is_allowed() {
                        continue;
                    }
                    let at = now + refused.retry_after_nanos();
                    assert!(
                        counter.peek(&state, at, cost).is_allowed(),
                        "{rounding:?} {now} {cost}"
                    );
                    assert!(
                        !counter.peek(&state, at - 1, cost).is_allowed(),
                        "{rounding:?} {now} {cost}"
                    );
                }
            }
        }
    }

    #[test]
    fn time_going_backwards_weighs_the_previous_window_fully() {
        let counter = SlidingWindowCounter::new(4, Duration::from_secs(10)).unwrap();
        let mut state = counter.initial_state(0);
        assert!(counter.reserve(&mut state, 5 * SECOND, 4, 0).is_allowed());
        assert!(counter.reserve(&mut state, 15 * SECOND, 2, 0).is_allowed());
        let refused = counter.reserve(&mut state, 2 * SECOND, 1, 0);
        assert!(!refused.is_allowed());
        // Measured from the real `now` (2 s): the state's point is 10 s, and at 15 s
        // the previous window weighs 2, leaving room for 0 more after the 2 current.
        assert!(refused.retry_after_nanos() > 8 * SECOND);
    }

    #[test]
    fn huge_costs_and_times_saturate() {
        let counter =
            SlidingWindowCounter::new(u64::MAX, Duration::from_nanos(i64::MAX as u64)).unwrap();
        let mut state = counter.initial_state(u64::MAX);
        assert!(counter
            .reserve(&mut state, u64::MAX, u64::MAX, 0)
            .is_allowed());
        assert!(!counter.reserve(&mut state, u64::MAX, 1, 0).is_allowed());
        let one = SlidingWindowCounter::new(1, Duration::from_secs(1)).unwrap();
        assert!(one
            .reserve(&mut one.initial_state(0), 0, u64::MAX, 0)
            .is_never());
    }
}
