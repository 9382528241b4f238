//! The sliding window counter (also called the "sliding window" or the "sliding
//! tail"): two fixed-window counters, the previous one weighted by how much of it
//! still lies inside a window of length `window` ending now.
//!
//! # The model
//!
//! Windows are aligned to the clock's origin, as for the
//! [fixed window](super::fixed_window). At a point `e` into the current window (the
//! elapsed fraction is `f = e / window`), the number of permits taken over the last
//! `window` is *estimated* by assuming the previous window's traffic was spread evenly:
//!
//! ```text
//!   estimate = previous × (1 − f) + current
//!
//!         previous window          current window
//!   ├─────────────────────────┼──────────────────────────┤
//!             ├───────── the last window ────────┤ now
//!             └ weight 1 − f ─┘└────── f ──────────┘
//! ```
//!
//! A call of cost `c` is allowed if `estimate + c ≤ limit`. For example, 100
//! per minute: 100 calls in the first 15 s of a minute; 15 s into the next minute the
//! previous window weighs 0.75, so 75 + 25 = 100 and 25 more calls pass; 45 s into it,
//! 75 more. Had the 100 calls come at 59.4 s, 25 calls would still pass at 75 s, only
//! 16 s later: the estimate is an approximation.
//!
//! The state is one 64-bit word (see [the state word](#the-state-word)): memory and
//! time per call are constant, and a direct limiter keeps it in a lock-free
//! `WordCell`. No call divides in the common case: the
//! window holding `now` is found by multiplying by a kept reciprocal of the
//! window's length (exact, not an estimate), and a non-blocking try compares the
//! weighted count by cross-multiplying (`⌈p · rest / window⌉ ≤ room` is
//! `p · rest ≤ room · window`).
//!
//! # Options
//!
//! * [`Rounding`]: the weighted previous count is a fraction. [`Rounding::Exact`] (the
//!   default) compares it exactly, in integers, which is the same as rounding it *up*:
//!   the estimate of an admitted call never exceeds the limit. [`Rounding::Floor`]
//!   rounds it down, admitting up to one permit more: a call at a weighted count of
//!   3.6 passes under a limit of 3, as counters that truncate the estimate do.
//! * [`Counting`]: [`Counting::Admitted`] (the default) counts only
//!   granted permits, so a refused call leaves the state untouched and a client that
//!   waits `retry_after` gets in. [`Counting::Attempts`] counts refused calls too (what
//!   a Redis counter that runs `INCR` before comparing does): a client that keeps
//!   hammering stays refused for longer. In that mode, and only there, a *denied*
//!   decision moves the counter. Inside a set of limits
//!   ([`AllOf`](super::AllOf), [`Limits`](super::Limits)) a refused call records
//!   nothing in any member, so there the counter counts admitted permits only and
//!   answers as it would under [`Counting::Admitted`]. Counts saturate (see [the state word](#the-state-word)), which only this
//!   mode can reach.
//!
//! # Cancelling
//!
//! A grant acts at once, so by the crate's cancel rule
//! ([`Algorithm::cancel`](super::Algorithm::cancel)) it can be given back only at
//! the instant it was made (or up to a set's later time to act, inside a set of
//! limits): its cost then comes off the count of the window it was counted in while
//! that still counts, as the current window or, once a later call has moved the
//! state on by one window, as the previous one. Never below zero; permits granted
//! after it stay counted. Under [`Counting::Attempts`] a cancel gives back the
//! grant's own cost only: refused attempts counted beside it stay counted, and a
//! count saturated at `2ᵇ − 1` is left as it is, since the attempts it forgot may
//! cover the grant.
//!
//! # The approximation bound
//!
//! With [`Rounding::Exact`] and either counting, over the window of length `window`
//! ending at any instant, at most `limit + previous × f` permits are granted, where
//! `previous` is the number granted in the previous fixed window and `f` the elapsed
//! fraction of the current one; so never more than `2 × limit − 1` in any span of `window` (the fixed
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
//! * The limit is at most 2²⁴ − 1 (16 777 215) per window, so that the state fits one
//!   word; a larger one is [`ConfigError::InvalidCount`]. (For more per window, use a
//!   shorter window with a proportionally smaller limit.)
//!
//! # The state word
//!
//! With `b` bits per count, the word holds the index of the latest window counted in
//! (window `i` is `[i × window, (i + 1) × window)`), modulo `2ᵏ` where `k = 64 − 2b`, above
//! the two counts:
//!
//! ```text
//!   bit 63            2b 2b−1         b  b−1          0
//!   ├─ window index mod 2ᵏ ┼─── previous ───┼─── current ───┤
//! ```
//!
//! * **Counts.** Under [`Counting::Admitted`] a count never exceeds the limit, and
//!   `b` is the bits the limit needs (a limit of 100 takes 7). Under
//!   [`Counting::Attempts`] refused calls can push a count past the limit, so `b` is
//!   8 bits more, at most 24, and a count *saturates* at `2ᵇ − 1` rather than wrap.
//!   Saturation keeps at least as much as a full window of admitted permits (never
//!   looser than [`Counting::Admitted`]); what it forgets is a hammering client's
//!   attempts beyond `2ᵇ − 1`, whose only effect would have been to extend the ban
//!   further into the next window. With 8 spare bits a saturated previous window
//!   still refuses every call until over 255/256 of the next window has elapsed
//!   (the ban is cut short by less than 1/256 of a window); for limits of 2¹⁶ and
//!   more the spare bits shrink (to none at 2²⁴ − 1), and so does that part of the
//!   ban.
//! * **Window index.** `k` is at least 16 bits (64 − 2 × 24). When every window index
//!   the clock can reach fits in `k` bits (`window ≥ 2⁶⁴⁻ᵏ` ns: with admitted counting,
//!   e.g. 100 per minute, 1 000 or 10 000 per second), the index is
//!   stored whole and compared exactly: nothing wraps, ever. Otherwise it is stored
//!   modulo `2ᵏ` and compared *modularly*: a forward distance `d` from the stored
//!   window to now's, with `d < 2ᵏ⁻¹`, means time moved forward by `d` windows (one:
//!   the current count becomes the previous one; more: both are forgotten). A
//!   distance of `2ᵏ⁻¹` or more is read as time having gone *backwards* by `2ᵏ − d`
//!   windows, and the counts are kept as they are, read at the start of the stored
//!   window as any backward step is. That is right for a clock that steps back, and
//!   conservative for the other possibility, a state idle for `2ᵏ⁻¹` windows or
//!   more (e.g. 2²⁴ − 1 per second left untouched for 9 hours 6 minutes) whose index
//!   has wrapped: its old counts keep counting, for at most `2ᵏ⁻¹` windows more,
//!   until the clock reaches the window they appear to belong to. Either way no
//!   extra permit is granted. A state whose counts are both zero carries nothing to
//!   be conservative about and is simply moved to now's window. Only this mode
//!   finds now's window index on every call (a multiplication by the kept
//!   reciprocal); the exact mode does only when a call moves to a later window.

use super::bits;
use super::divisor::Divisor;
use super::validate::validate_positive_period;
use crate::clock::Nanos;
use crate::error::ConfigError;
use std::time::Duration;

mod step;
mod weight;
mod word;

/// The largest limit: two counts of up to 24 bits leave 16 bits of window index.
const MAX_LIMIT: u64 = (1 << 24) - 1;

/// How the weighted previous count is rounded before comparing with the limit.
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, Rounding, SlidingWindowCounter};
/// use std::time::Duration;
/// assert_eq!(Rounding::default(), Rounding::Exact);
/// let floor = SlidingWindowCounter::new(2, Duration::from_secs(60)).unwrap().with_rounding(Rounding::Floor);
/// let mut state = floor.initial_state(0);
/// floor.reserve::<Decision>(&mut state, 0, 2, 0);
/// // 45 s into the next minute the previous 2 weigh 0.5, rounded down to 0.
/// assert!(floor.peek(&state, 105_000_000_000, 2).is_allowed());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Rounding {
    /// Compared exactly (equivalently, rounded up): the estimate never exceeds the
    /// limit. The default.
    #[default]
    Exact,
    /// Rounded down: up to one permit more than `Exact` (as a counter that truncates
    /// the weighted count does).
    Floor,
}

/// Which calls add to the counters.
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, Counting, SlidingWindowCounter};
/// use std::time::Duration;
/// assert_eq!(Counting::default(), Counting::Admitted);
/// let counter = SlidingWindowCounter::new(1, Duration::from_secs(60)).unwrap();
/// let mut state = counter.initial_state(0);
/// counter.reserve::<Decision>(&mut state, 0, 1, 0);
/// assert!(!counter.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// assert_eq!(counter.counts(&state, 0), (0, 1)); // the refusal was not counted
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Counting {
    /// Only granted permits. The default: a denied call changes nothing.
    #[default]
    Admitted,
    /// Refused calls too (except those that could never pass): hammering extends a ban.
    /// Counts saturate at `2ᵇ − 1`, at least the limit (see the
    /// [module docs](self#the-state-word)).
    Attempts,
}

/// At most `limit` permits per sliding window of length `window`, estimated from two fixed
/// windows. See the [module docs](self) for the model, the options and the bound.
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, SlidingWindowCounter};
/// use std::time::Duration;
/// let minute = 60_000_000_000;
/// let counter = SlidingWindowCounter::new(100, Duration::from_secs(60)).unwrap();
/// let mut state = counter.initial_state(0);
/// assert!(counter.reserve::<Decision>(&mut state, 0, 100, 0).is_allowed());
/// // 1.25 minutes: the previous minute weighs 0.75, so 25 permits remain.
/// assert_eq!(counter.peek(&state, minute + minute / 4, 1).remaining(), 24);
/// assert!(counter.reserve::<Decision>(&mut state, minute + minute / 4, 25, 0).is_allowed());
/// assert!(!counter.reserve::<Decision>(&mut state, minute + minute / 4, 1, 0).is_allowed());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindowCounter {
    window: u64,
    /// The multiplier that divides by `window` (a `Divisor`'s): finds the window
    /// holding an instant with a multiplication instead of a division.
    window_multiplier: u64,
    limit: u64,
    rounding: Rounding,
    counting: Counting,
    /// Bits per count, `b`: derived from the limit and the counting, and kept (in
    /// the configuration words too) so that no call works it out again.
    count_bits: u32,
    /// Whether window indices are stored whole (see `exact_index`); derived and
    /// kept likewise.
    exact_index: bool,
}

/// The state of a [`SlidingWindowCounter`]: one word holding the index of the latest
/// window counted in and the counts of that window and the one before (layout in the
/// [module docs](self#the-state-word)). The layout depends on the limit and the
/// [`Counting`], so a state is meaningful only to a counter configured like the one
/// that made it. Read it with [`SlidingWindowCounter::counts`].
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, SlidingWindowCounter};
/// use std::time::Duration;
/// let counter = SlidingWindowCounter::new(5, Duration::from_secs(1)).unwrap();
/// let mut state = counter.initial_state(0);
/// counter.reserve::<Decision>(&mut state, 0, 3, 0);
/// assert_eq!(std::mem::size_of_val(&state), 8); // one word
/// assert_eq!(counter.counts(&state, 0), (0, 3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindowState {
    word: u64,
}

/// The state as of some `now`: counts rolled forward to now's window, and where
/// `now` falls relative to the window the counts belong to.
#[derive(Clone, Copy, Debug)]
struct View {
    /// The window index to store, modulo `2ᵏ`.
    index: u64,
    previous: u64,
    current: u64,
    /// How far into the counts' window the decision is taken (0 when time went
    /// backwards: it is taken at the window's start).
    elapsed: u64,
    /// How far `now` lies before that point when time went backwards (0 otherwise);
    /// added to every duration so that they are measured from the real `now`.
    behind: u64,
}

impl SlidingWindowCounter {
    /// At most `limit` permits per sliding window of length `window`, with [`Rounding::Exact`]
    /// and [`Counting::Admitted`].
    ///
    /// # Errors
    /// [`ConfigError::InvalidCount`] for a zero limit or one above 2²⁴ − 1 (16 777 215),
    /// the most that packs into the one-word state; [`ConfigError::InvalidDuration`] for a
    /// zero window or one above about 292 years.
    ///
    /// ```
    /// use sluicegate::algorithms::SlidingWindowCounter;
    /// use std::time::Duration;
    /// assert!(SlidingWindowCounter::new(100, Duration::from_secs(60)).is_ok());
    /// assert!(SlidingWindowCounter::new((1 << 24) - 1, Duration::from_secs(1)).is_ok());
    /// assert!(SlidingWindowCounter::new(1 << 24, Duration::from_secs(1)).is_err());
    /// assert!(SlidingWindowCounter::new(0, Duration::from_secs(60)).is_err());
    /// assert!(SlidingWindowCounter::new(100, Duration::ZERO).is_err());
    /// ```
    pub fn new(limit: u64, window: Duration) -> Result<Self, ConfigError> {
        let window_nanos = validate_positive_period("window", window)?;
        if limit == 0 || limit > MAX_LIMIT {
            return Err(ConfigError::InvalidCount {
                what: "limit",
                value: limit,
                requirement: "between 1 and 2^24 - 1 (16777215), so that the state packs into one 64-bit word",
            });
        }
        Ok(SlidingWindowCounter {
            window: window_nanos,
            window_multiplier: Divisor::new(window_nanos).multiplier(),
            limit,
            rounding: Rounding::Exact,
            counting: Counting::Admitted,
            count_bits: 0,
            exact_index: false,
        }
        .derived())
    }

    /// The same counter with its derived layout (`count_bits`, `exact_index`)
    /// worked out from the limit, the counting and the window's length.
    fn derived(mut self) -> Self {
        self.count_bits = match self.counting {
            Counting::Admitted => bits(self.limit),
            Counting::Attempts => (bits(self.limit) + 8).min(24),
        };
        self.exact_index = self.window > u64::MAX >> self.index_bits();
        self
    }

    /// The same limit with another [`Rounding`] of the weighted previous count.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, Rounding, SlidingWindowCounter};
    /// use std::time::Duration;
    /// let exact = SlidingWindowCounter::new(3, Duration::from_secs(60)).unwrap();
    /// let floor = exact.with_rounding(Rounding::Floor);
    /// let mut state = exact.initial_state(0);
    /// exact.reserve::<Decision>(&mut state, 0, 3, 0);
    /// // 30 s into the next minute the previous 3 weigh 1.5: 1.5 + 2 > 3 ≥ ⌊1.5⌋ + 2.
    /// assert!(!exact.peek(&state, 90_000_000_000, 2).is_allowed());
    /// assert!(floor.peek(&state, 90_000_000_000, 2).is_allowed());
    /// ```
    pub fn with_rounding(mut self, rounding: Rounding) -> Self {
        self.rounding = rounding;
        self
    }

    /// The same limit with another [`Counting`] of refused calls. (This changes the
    /// state's layout: a state made by the counter before the change is not
    /// meaningful to the one after.)
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, Counting, SlidingWindowCounter};
    /// use std::time::Duration;
    /// let counter = SlidingWindowCounter::new(1, Duration::from_secs(60))
    ///     .unwrap()
    ///     .with_counting(Counting::Attempts);
    /// let mut state = counter.initial_state(0);
    /// counter.reserve::<Decision>(&mut state, 0, 1, 0);
    /// assert!(!counter.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
    /// assert_eq!(counter.counts(&state, 0), (0, 2)); // the refused call counted
    /// ```
    pub fn with_counting(mut self, counting: Counting) -> Self {
        self.counting = counting;
        self.derived()
    }

    /// What the counts count: admitted permits only (the default) or refused
    /// attempts too.
    ///
    /// ```
    /// use sluicegate::algorithms::{Counting, SlidingWindowCounter};
    /// use std::time::Duration;
    /// let counter = SlidingWindowCounter::new(10, Duration::from_secs(1)).unwrap();
    /// assert_eq!(counter.counting(), Counting::Admitted);
    /// assert_eq!(counter.with_counting(Counting::Attempts).counting(), Counting::Attempts);
    /// ```
    pub fn counting(&self) -> Counting {
        self.counting
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

    /// The window length: of the fixed windows, aligned to the clock's origin, and
    /// of the sliding window the estimate covers, in which the previous fixed
    /// window weighs the fraction of it still inside.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SlidingWindowCounter};
    /// use std::time::Duration;
    /// let counter = SlidingWindowCounter::new(10, Duration::from_secs(10)).unwrap();
    /// assert_eq!(counter.window(), Duration::from_secs(10));
    /// let (mut state, s) = (counter.initial_state(0), 1_000_000_000);
    /// assert!(counter.reserve::<bool>(&mut state, 0, 10, 0));
    /// // Half-way through the next window the previous one weighs half: 5 fit, not 6.
    /// assert!(!counter.reserve::<bool>(&mut state, 15 * s, 6, 0));
    /// assert!(counter.reserve::<bool>(&mut state, 15 * s, 5, 0));
    /// ```
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// The counts `(previous, current)` of the previous and current fixed windows as
    /// of `now` (a window that has ended becomes the previous one; older ones are
    /// forgotten). Under [`Counting::Attempts`] each saturates at `2ᵇ − 1` (see the
    /// [module docs](self#the-state-word)).
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, SlidingWindowCounter};
    /// use std::time::Duration;
    /// let counter = SlidingWindowCounter::new(10, Duration::from_secs(60)).unwrap();
    /// let mut state = counter.initial_state(0);
    /// counter.reserve::<Decision>(&mut state, 0, 4, 0);
    /// assert_eq!(counter.counts(&state, 0), (0, 4));
    /// assert_eq!(counter.counts(&state, 60_000_000_000), (4, 0));
    /// assert_eq!(counter.counts(&state, 120_000_000_000), (0, 0));
    /// ```
    pub fn counts(&self, state: &SlidingWindowState, now: Nanos) -> (u64, u64) {
        let view = self.view(state, now);
        (view.previous, view.current)
    }

    /// The estimate `previous × (1 − f) + current` at `now`, unrounded (for display
    /// and headers; decisions are computed in exact integers).
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, SlidingWindowCounter};
    /// use std::time::Duration;
    /// let counter = SlidingWindowCounter::new(3, Duration::from_secs(60)).unwrap();
    /// let mut state = counter.initial_state(0);
    /// counter.reserve::<Decision>(&mut state, 5_000_000_000, 2, 0);
    /// assert_eq!(counter.estimate(&state, 75_000_000_000), 1.5);
    /// ```
    pub fn estimate(&self, state: &SlidingWindowState, now: Nanos) -> f64 {
        let view = self.view(state, now);
        let weight = (self.window - view.elapsed) as f64 / self.window as f64;
        view.previous as f64 * weight + view.current as f64
    }
}

#[cfg(test)]
mod tests;
