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
//! The state is one 64-bit word (see [the state word](#the-state-word)): memory and
//! time per call are constant, and a direct limiter keeps it in a lock-free
//! [`WordCell`](crate::cells::WordCell). No call divides in the common case: the
//! window holding `now` is found with a kept reciprocal of the window's length, and
//! a non-blocking try compares the weighted count by cross-multiplying
//! (`⌈p · rest / len⌉ ≤ room` is `p · rest ≤ room · len`).
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
//!   do not use it inside an all-or-nothing set of limits. Counts saturate (see
//!   [the state word](#the-state-word)), which only this mode can reach.
//!
//! # Cancelling
//!
//! A grant acts at once, so by the crate's cancel rule ([`Algorithm::cancel`]) it
//! can be given back only at the instant it was made (or up to a set's later time
//! to act, inside a set of limits): its cost then comes off the count of the window
//! it was counted in while that still counts, as the current window or, once a
//! later call has moved the state on by one window, as the previous one. Never
//! below zero; permits granted after it stay counted. Under [`Counting::Attempts`]
//! a cancel gives back the grant's own cost only: refused attempts counted beside
//! it stay counted, and a count saturated at `2ᵇ − 1` is left as it is, since the
//! attempts it forgot may cover the grant.
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
//! * The limit is at most 2²⁴ − 1 (16 777 215) per window, so that the state fits one
//!   word; a larger one is [`Error::InvalidCount`]. (For more per window, use a
//!   shorter window with a proportionally smaller limit.)
//!
//! # The state word
//!
//! With `b` bits per count, the word holds the index of the latest window counted in
//! (window `i` is `[i × len, (i + 1) × len)`), modulo `2ᵏ` where `k = 64 − 2b`, above
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
//!   the clock can reach fits in `k` bits (`len ≥ 2⁶⁴⁻ᵏ` ns: with admitted counting,
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
//!   divides on every call (to find now's window index); the exact mode divides only
//!   when a call moves to a later window.

use super::validate::validate_positive_period;
use super::words::{one_word_state, Plan, Settle, Words};
use super::{Algorithm, Decision, OneWord, Receipt, WordEncoded};
use crate::clock::Nanos;
use crate::error::Error;
use std::time::Duration;

/// The largest limit: two counts of up to 24 bits leave 16 bits of window index.
const MAX_LIMIT: u64 = (1 << 24) - 1;

/// How the weighted previous count is rounded before comparing with the limit.
///
/// ```
/// use sluicegate::algorithms::{Algorithm, Rounding, SlidingWindowCounter};
/// use std::time::Duration;
/// assert_eq!(Rounding::default(), Rounding::Exact);
/// let floor = SlidingWindowCounter::new(2, Duration::from_secs(60)).unwrap().with_rounding(Rounding::Floor);
/// let mut state = floor.initial_state(0);
/// floor.reserve(&mut state, 0, 2, 0);
/// // 45 s into the next minute the previous 2 weigh 0.5, rounded down to 0.
/// assert!(floor.peek(&state, 105_000_000_000, 2).is_allowed());
/// ```
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
///
/// ```
/// use sluicegate::algorithms::{Algorithm, Counting, SlidingWindowCounter};
/// use std::time::Duration;
/// assert_eq!(Counting::default(), Counting::Admitted);
/// let counter = SlidingWindowCounter::new(1, Duration::from_secs(60)).unwrap();
/// let mut state = counter.initial_state(0);
/// counter.reserve(&mut state, 0, 1, 0);
/// assert!(!counter.reserve(&mut state, 0, 1, 0).is_allowed());
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
    /// `⌊(2⁶⁴ − 1) / len⌋`: finds the window holding an instant with a
    /// multiplication instead of a division (see `window_of`).
    reciprocal: u64,
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
/// use sluicegate::algorithms::{Algorithm, SlidingWindowCounter};
/// use std::time::Duration;
/// let counter = SlidingWindowCounter::new(5, Duration::from_secs(1)).unwrap();
/// let mut state = counter.initial_state(0);
/// counter.reserve(&mut state, 0, 3, 0);
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

/// Bits needed to write `value`.
fn bits(value: u64) -> u32 {
    u64::BITS - value.leading_zeros()
}

impl SlidingWindowCounter {
    /// At most `limit` permits per sliding window of `len`, with [`Rounding::Exact`]
    /// and [`Counting::Admitted`].
    ///
    /// # Errors
    /// [`Error::InvalidCount`] for a zero limit or one above 2²⁴ − 1 (16 777 215),
    /// the most that packs into the one-word state; [`Error::InvalidDuration`] for a
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
    pub fn new(limit: u64, len: Duration) -> Result<Self, Error> {
        let len_nanos = validate_positive_period("window", len)?;
        if limit == 0 || limit > MAX_LIMIT {
            return Err(Error::InvalidCount {
                what: "limit",
                value: limit,
                requirement: "between 1 and 2^24 - 1 (16777215), so that the state packs into one 64-bit word",
            });
        }
        Ok(SlidingWindowCounter {
            len: len_nanos,
            reciprocal: u64::MAX / len_nanos,
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
        self.exact_index = self.len > u64::MAX >> self.index_bits();
        self
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

    /// The same limit with another [`Counting`] of refused calls. (This changes the
    /// state's layout: a state made by the counter before the change is not
    /// meaningful to the one after.)
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
        self.derived()
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
    /// forgotten). Under [`Counting::Attempts`] each saturates at `2ᵇ − 1` (see the
    /// [module docs](self#the-state-word)).
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
        let view = self.view(state, now);
        (view.previous, view.current)
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
        let view = self.view(state, now);
        let weight = (self.len - view.elapsed) as f64 / self.len as f64;
        view.previous as f64 * weight + view.current as f64
    }

    /// Bits per count: what the limit needs, plus 8 under [`Counting::Attempts`]
    /// (whose counts may pass the limit), at most 24 (kept: see `derived`).
    #[inline(always)]
    fn count_bits(&self) -> u32 {
        self.count_bits
    }

    /// The window index's bits, `k = 64 − 2b`: at least 16.
    #[inline]
    fn index_bits(&self) -> u32 {
        u64::BITS - 2 * self.count_bits()
    }

    /// True if every window index the clock can reach fits in the index bits
    /// (`u64::MAX / len < 2ᵏ`), so that indices are stored whole and never wrap.
    #[inline(always)]
    fn exact_index(&self) -> bool {
        self.exact_index
    }

    #[inline]
    fn pack(&self, index: u64, previous: u64, current: u64) -> SlidingWindowState {
        let b = self.count_bits();
        SlidingWindowState {
            word: index << (2 * b) | previous << b | current,
        }
    }

    /// The state as of `now` (see [`View`]). A later window shifts the counts; an
    /// earlier one is read as the start of the stored window (exactly, or by the
    /// modular rule of the module docs when indices wrap).
    ///
    /// Kept out of line: inlined into the lean take's compare-and-swap loop it
    /// measured 16 instructions more per `try_acquire`, not fewer.
    #[inline(never)]
    fn view(&self, state: &SlidingWindowState, now: Nanos) -> View {
        self.view_inlined(state, now)
    }

    /// [`view`](Self::view), always inlined: the full step's, where a call measured
    /// 30 to 40 instructions more per `check`.
    #[inline(always)]
    fn view_inlined(&self, state: &SlidingWindowState, now: Nanos) -> View {
        let b = self.count_bits();
        let count_mask = (1 << b) - 1;
        let index = state.word >> (2 * b);
        let previous = state.word >> b & count_mask;
        let current = state.word & count_mask;
        let stored = |elapsed, behind| View {
            index,
            previous,
            current,
            elapsed,
            behind,
        };
        let index_mask = u64::MAX >> (2 * b);
        let (now_index, distance) = if self.exact_index() {
            // index < 2ᵏ ≤ u64::MAX / len + 1; saturate for a word we did not make.
            let start = index.saturating_mul(self.len);
            if now >= start && now - start < self.len {
                // Still the stored window: the common case costs no division.
                return stored(now - start, 0);
            }
            if now < start {
                if previous | current == 0 {
                    return self.fresh(now);
                }
                return stored(0, start - now);
            }
            let now_index = self.window_of(now);
            (now_index, now_index - index)
        } else {
            let now_index = self.window_of(now);
            let distance = now_index.wrapping_sub(index) & index_mask;
            if distance > index_mask >> 1 {
                // Backwards by 2ᵏ − distance windows (or an old state whose index
                // wrapped: the same conservative reading).
                if previous | current == 0 {
                    return self.fresh(now);
                }
                let back = index_mask - distance + 1;
                let start = now_index.saturating_add(back).saturating_mul(self.len);
                return stored(0, start.saturating_sub(now));
            }
            (now_index, distance)
        };
        let (previous, current) = match distance {
            0 => (previous, current),
            1 => (current, 0),
            _ => (0, 0),
        };
        View {
            index: now_index & index_mask,
            previous,
            current,
            elapsed: now - now_index * self.len,
            behind: 0,
        }
    }

    /// The window holding `now`, `⌊now / len⌋`, without a division: with
    /// `m = ⌊(2⁶⁴ − 1) / len⌋ > 2⁶⁴ / len − 1`, the estimate `⌊now · m / 2⁶⁴⌋`
    /// falls short of the quotient by less than `now / 2⁶⁴ < 1`, so one
    /// correction step makes it exact. (A cell's words hold this `m`, and
    /// [`from_config_words`](WordEncoded::from_config_words) computes it afresh for
    /// words from anywhere; one that overshoots is caught and divided for.)
    #[inline(always)]
    fn window_of(&self, now: Nanos) -> u64 {
        let mut window = ((u128::from(now) * u128::from(self.reciprocal)) >> 64) as u64;
        let Some(mut start) = window.checked_mul(self.len).filter(|&start| start <= now) else {
            return now / self.len;
        };
        while now - start >= self.len {
            window += 1;
            start += self.len;
        }
        window
    }

    /// The lean non-blocking take: exactly `reserve(state, now, cost, 0).is_allowed()`,
    /// with the same change of state (a denial counted when counting attempts), but
    /// without `retry_after` and `reset_after`, and comparing the weighted count by
    /// cross-multiplying instead of dividing.
    #[inline]
    pub(crate) fn take(&self, state: &mut SlidingWindowState, now: Nanos, cost: u64) -> bool {
        if cost > self.limit {
            return false;
        }
        let view = self.view(state, now);
        self.admit(state, view, cost)
    }

    /// Decides a call of `cost` on the state as of now (`view`) and counts it, by
    /// cross-multiplying: whether it was granted. A cost above the limit is never
    /// counted; a refusal only when counting attempts.
    #[inline(always)]
    fn admit(&self, state: &mut SlidingWindowState, mut view: View, cost: u64) -> bool {
        if cost > self.limit {
            return false;
        }
        // Counts are below 2³¹ and the cost at most the limit: no overflow.
        let granted = match self.limit.checked_sub(view.current + cost) {
            None => false,
            Some(room) => self.weight_fits(view.previous, view.elapsed, room),
        };
        if granted {
            view.current += cost;
        } else if self.counting == Counting::Attempts {
            view.current = self.attempted(view.current, cost);
        } else {
            return false;
        }
        *state = self.pack(view.index, view.previous, view.current);
        granted
    }

    /// A count with a refused attempt of `cost` added, saturating at the count width.
    #[inline(always)]
    fn attempted(&self, count: u64, cost: u64) -> u64 {
        let saturated = (1 << self.count_bits()) - 1;
        (count + cost).min(saturated)
    }

    /// True if the previous count's weight at `elapsed` ([`weighted`](Self::weighted))
    /// is at most `room`: `⌈p · rest / len⌉ ≤ room` is `p · rest ≤ room · len`, and
    /// `⌊p · rest / len⌋ ≤ room` is `p · rest < (room + 1) · len`. A count within the
    /// room fits at once, since the weight never exceeds it.
    #[inline(always)]
    fn weight_fits(&self, previous: u64, elapsed: u64, room: u64) -> bool {
        if previous <= room {
            return true;
        }
        let weighted = u128::from(previous) * u128::from(self.len - elapsed);
        let len = u128::from(self.len);
        match self.rounding {
            Rounding::Exact => weighted <= u128::from(room) * len,
            Rounding::Floor => weighted < (u128::from(room) + 1) * len,
        }
    }

    /// An empty state in now's window.
    #[inline]
    fn fresh(&self, now: Nanos) -> View {
        let now_index = self.window_of(now);
        View {
            index: now_index & (u64::MAX >> (2 * self.count_bits())),
            previous: 0,
            current: 0,
            elapsed: now - now_index * self.len,
            behind: 0,
        }
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
            // ⌊weighted / len⌋ by the kept reciprocal (`window_of` divides any value
            // by the window's length), rounded up if it was not exact.
            let floor = self.window_of(weighted);
            return match self.rounding {
                Rounding::Exact => floor + u64::from(floor * self.len != weighted),
                Rounding::Floor => floor,
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
    #[inline(always)]
    fn first_fit(&self, previous: u64, room: u64) -> Option<u64> {
        // The common answers need no division: a count within the room fits at once
        // (in either rounding), and none fits an exact room of zero before the end.
        if previous <= room {
            return Some(0);
        }
        if room == 0 && self.rounding == Rounding::Exact {
            return None;
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

    /// How long after the view's `elapsed` point a call of `cost` would first pass
    /// (the call does not pass now).
    #[inline(always)]
    fn retry_after(&self, view: &View, cost: u64) -> Nanos {
        let room = view
            .current
            .checked_add(cost)
            .and_then(|used| self.limit.checked_sub(used));
        if let Some(room) = room {
            if let Some(first) = self.first_fit(view.previous, room) {
                return first.saturating_sub(view.elapsed);
            }
        }
        let to_next = self.len - view.elapsed;
        if let Some(first) = self.first_fit(view.current, self.limit - cost) {
            return to_next.saturating_add(first);
        }
        to_next.saturating_add(self.len)
    }

    #[inline(always)]
    fn reset_after(&self, view: &View) -> Nanos {
        let to_next = self.len - view.elapsed;
        if view.current > 0 {
            to_next.saturating_add(self.len)
        } else if view.previous > 0 {
            to_next
        } else {
            0
        }
    }
}

/// What a call found, for [`describe`](Settle::describe): the state as of now
/// before the call (with the refused attempt counted, when attempts are), and the
/// weighted count it was decided on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CounterSettled {
    view: View,
    used: u64,
    cost: u64,
}

impl Settle for SlidingWindowCounter {
    type Settled = CounterSettled;

    /// Weighs the previous count (a multiplication by the kept reciprocal) and
    /// counts the call if it fits.
    #[inline(always)]
    fn settle(&self, state: &mut SlidingWindowState, now: Nanos, cost: u64) -> CounterSettled {
        let mut view = self.view_inlined(state, now);
        // Counts are below 2³¹ and the weight is at most the previous count, so
        // neither this sum nor `used + cost` (cost ≤ limit) overflows.
        let used = self.weighted(view.previous, view.elapsed) + view.current;
        if cost <= self.limit {
            if used + cost <= self.limit {
                *state = self.pack(view.index, view.previous, view.current + cost);
            } else if self.counting == Counting::Attempts {
                view.current = self.attempted(view.current, cost);
                *state = self.pack(view.index, view.previous, view.current);
            }
        }
        CounterSettled { view, used, cost }
    }

    #[inline(always)]
    fn describe(&self, settled: &CounterSettled) -> Decision {
        // Immediate or denied: an estimate cannot promise future capacity.
        let CounterSettled {
            mut view,
            used,
            cost,
        } = *settled;
        let remaining = self.limit.saturating_sub(used);
        if cost > self.limit {
            let reset = self.reset_after(&view);
            return Decision::never(self.limit, remaining, reset.saturating_add(view.behind));
        }
        if used + cost > self.limit {
            let retry = self.retry_after(&view, cost);
            let reset = self.reset_after(&view);
            return Decision::denied(
                self.limit,
                remaining,
                retry.saturating_add(view.behind),
                reset.saturating_add(view.behind),
            );
        }
        view.current += cost;
        let reset = self.reset_after(&view);
        Decision::allowed(
            self.limit,
            remaining - cost,
            reset.saturating_add(view.behind),
        )
    }
}

impl Algorithm for SlidingWindowCounter {
    type State = SlidingWindowState;
    type Shape = OneWord;

    #[inline]
    fn initial_state(&self, now: Nanos) -> SlidingWindowState {
        self.pack(self.fresh(now).index, 0, 0)
    }

    // The step is settle (decide, move the state), then describe (the decision).
    #[inline]
    fn reserve(
        &self,
        state: &mut SlidingWindowState,
        now: Nanos,
        cost: u64,
        _max_wait: Nanos,
    ) -> Decision {
        let settled = self.settle(state, now, cost);
        self.describe(&settled)
    }

    #[inline]
    fn is_replenished(&self, state: &SlidingWindowState, now: Nanos) -> bool {
        let view = self.view(state, now);
        view.previous == 0 && view.current == 0
    }

    /// [`reserve`](Algorithm::reserve), unchanged, with a receipt naming the window
    /// the grant was counted in (the state's window right after it, as stored) and
    /// its cost.
    #[inline]
    fn reserve_with_receipt(
        &self,
        state: &mut SlidingWindowState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> (Decision, Receipt) {
        let decision = self.reserve(state, now, cost, max_wait);
        if !decision.is_allowed() {
            return (decision, Receipt::NONE);
        }
        // Each count takes at least one bit, so the index is below 2⁶²: it fits the mark.
        let index = state.word >> (2 * self.count_bits());
        (decision, Receipt::new(index as i64, cost))
    }

    /// The rule of [`Algorithm::cancel`], as the [module docs](self#cancelling)
    /// apply it: up to `acts_at`, that instant included, the grant's cost comes off
    /// the count of its window, current or (once the state has moved on by one)
    /// previous, never below zero.
    fn cancel(
        &self,
        state: &mut SlidingWindowState,
        now: Nanos,
        receipt: &Receipt,
        acts_at: Nanos,
    ) {
        if acts_at < now {
            return;
        }
        let b = self.count_bits();
        let count_mask = (1 << b) - 1;
        let index = state.word >> (2 * b);
        let previous = state.word >> b & count_mask;
        let current = state.word & count_mask;
        let back = |count: u64| {
            // A saturated count of attempts may have forgotten more than the grant.
            if self.counting == Counting::Attempts && count == count_mask {
                count
            } else {
                count.saturating_sub(receipt.charge())
            }
        };
        let window = receipt.mark() as u64;
        if index == window {
            *state = self.pack(index, previous, back(current));
        } else if index == window.wrapping_add(1) & (u64::MAX >> (2 * b)) {
            *state = self.pack(index, back(previous), current);
        }
    }
}

/// Configuration words: the window length in nanoseconds, then the limit (low 32
/// bits) with the rounding (bit 32), counting (bit 33) and whole-index (bit 34)
/// flags and the bits per count (bits 40 to 44), then the length's reciprocal.
impl WordEncoded for SlidingWindowCounter {
    type Config = [u64; 3];
    // Publishes the new state first, then describes the decision.
    one_word_state!(SlidingWindowState { word: u64 }, settled);

    #[inline]
    fn config_words(&self) -> [u64; 3] {
        let floor = u64::from(self.rounding == Rounding::Floor);
        let attempts = u64::from(self.counting == Counting::Attempts);
        let exact = u64::from(self.exact_index);
        let layout = exact << 34 | u64::from(self.count_bits) << 40;
        [
            self.len,
            self.limit | floor << 32 | attempts << 33 | layout,
            self.reciprocal,
        ]
    }

    /// Words from anywhere: [`from_own_config_words`](Self::from_own_config_words)
    /// with the reciprocal computed from the length, so that `window_of` never
    /// steps more than once.
    fn from_config_words(words: [u64; 3]) -> Self {
        let mut counter = Self::from_own_config_words(words);
        counter.reciprocal = u64::MAX / counter.len;
        counter
    }

    #[inline]
    fn from_own_config_words(words: [u64; 3]) -> Self {
        // Clamped so that even words this type did not encode cannot panic later
        // (`window_of` checks its reciprocal as it goes).
        SlidingWindowCounter {
            len: words[0].max(1),
            reciprocal: words[2],
            limit: (words[1] & 0xFFFF_FFFF).clamp(1, MAX_LIMIT),
            rounding: if words[1] >> 32 & 1 == 1 {
                Rounding::Floor
            } else {
                Rounding::Exact
            },
            counting: if words[1] >> 33 & 1 == 1 {
                Counting::Attempts
            } else {
                Counting::Admitted
            },
            // Five bits: at most 31 per count keeps every shift (by up to 2b) below 64.
            count_bits: (words[1] >> 40 & 0x1F) as u32,
            exact_index: words[1] >> 34 & 1 == 1,
        }
    }

    /// A refusal changes the state too when attempts are counted: it plans a write
    /// whenever the word changed.
    #[inline(always)]
    fn plan_take<W: Words + ?Sized>(
        &self,
        words: &W,
        now: Nanos,
        cost: u64,
    ) -> Plan<SlidingWindowState> {
        let before = self.read_state(words);
        let mut after = before;
        let granted = self.take(&mut after, now, cost);
        (granted, (after != before).then_some(after))
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
            SlidingWindowCounter::new(MAX_LIMIT, Duration::from_nanos(i64::MAX as u64)).unwrap();
        let mut state = counter.initial_state(u64::MAX);
        assert!(counter
            .reserve(&mut state, u64::MAX, MAX_LIMIT, 0)
            .is_allowed());
        assert!(!counter.reserve(&mut state, u64::MAX, 1, 0).is_allowed());
        assert!(counter
            .reserve(&mut state, u64::MAX, u64::MAX, 0)
            .is_never());
        let one = SlidingWindowCounter::new(1, Duration::from_secs(1)).unwrap();
        assert!(one
            .reserve(&mut one.initial_state(0), 0, u64::MAX, 0)
            .is_never());
        // A word this type did not make decodes without panicking.
        let odd = SlidingWindowCounter::from_config_words([0, u64::MAX, u64::MAX]);
        let mut state = odd.read_state(&[u64::MAX][..]);
        odd.reserve(&mut state, u64::MAX, 1, 0);
        odd.reserve(&mut state, 0, 1, 0);
    }

    #[test]
    fn the_limit_must_pack_into_one_word() {
        assert!(SlidingWindowCounter::new(MAX_LIMIT, Duration::from_secs(1)).is_ok());
        for limit in [0, MAX_LIMIT + 1, u64::MAX] {
            assert!(matches!(
                SlidingWindowCounter::new(limit, Duration::from_secs(1)),
                Err(Error::InvalidCount { .. })
            ));
        }
    }

    #[test]
    fn configuration_words_round_trip() {
        for rounding in [Rounding::Exact, Rounding::Floor] {
            for counting in [Counting::Admitted, Counting::Attempts] {
                for limit in [1, 3, 100, MAX_LIMIT] {
                    let counter = SlidingWindowCounter::new(limit, Duration::from_millis(7))
                        .unwrap()
                        .with_rounding(rounding)
                        .with_counting(counting);
                    assert_eq!(
                        SlidingWindowCounter::from_config_words(counter.config_words()),
                        counter
                    );
                }
            }
        }
    }

    #[test]
    fn the_limit_at_the_maximum_fills_and_rolls_exactly() {
        // 2²⁴ − 1 per second: 24-bit counts, a 16-bit index that wraps every 2¹⁶ s.
        let counter = SlidingWindowCounter::new(MAX_LIMIT, Duration::from_secs(1)).unwrap();
        assert!(!counter.exact_index());
        let mut state = counter.initial_state(0);
        assert!(counter
            .reserve(&mut state, 0, MAX_LIMIT - 1, 0)
            .is_allowed());
        assert!(counter.reserve(&mut state, SECOND - 1, 1, 0).is_allowed());
        assert!(!counter.reserve(&mut state, SECOND - 1, 1, 0).is_allowed());
        assert_eq!(counter.counts(&state, SECOND - 1), (0, MAX_LIMIT));
        // Half a second later the full previous window weighs half the limit, rounded up.
        let half = SECOND + SECOND / 2;
        assert_eq!(counter.counts(&state, half), (MAX_LIMIT, 0));
        let room = counter.peek(&state, half, 1).remaining() + 1;
        assert_eq!(room, MAX_LIMIT - MAX_LIMIT.div_ceil(2));
        assert!(counter.reserve(&mut state, half, room, 0).is_allowed());
        assert!(!counter.reserve(&mut state, half, 1, 0).is_allowed());
        assert_eq!(counter.counts(&state, half), (MAX_LIMIT, room));
    }

    #[test]
    fn attempts_saturate_at_the_count_width_and_still_refuse() {
        // Limit 3 counts attempts in 10 bits: saturation at 1023.
        let counter = SlidingWindowCounter::new(3, Duration::from_secs(60))
            .unwrap()
            .with_counting(Counting::Attempts);
        let mut state = counter.initial_state(0);
        assert!(counter.reserve(&mut state, 0, 3, 0).is_allowed());
        for _ in 0..2000 {
            assert!(!counter.reserve(&mut state, SECOND, 3, 0).is_allowed());
        }
        assert_eq!(counter.counts(&state, SECOND), (0, 1023));
        // Next window: 1023 × (60 s − e)/60 s + 1 ≤ 3 needs e ≥ 60 s × 1021/1023: the
        // ban covers all but 2/1023 of the window, and retry_after says exactly when.
        let refused = counter.reserve(&mut state, 60 * SECOND, 1, 0);
        assert!(!refused.is_allowed());
        assert_eq!(counter.counts(&state, 60 * SECOND), (1023, 1));
        // That refusal counted too: 1023 × (60 s − e)/60 s + 1 + 1 ≤ 3.
        assert_eq!(
            refused.retry_after_nanos(),
            60 * SECOND - 60 * SECOND / 1023
        );
        // At the largest limit the spare bits are gone: counts saturate at the limit.
        let big = SlidingWindowCounter::new(MAX_LIMIT, Duration::from_secs(1))
            .unwrap()
            .with_counting(Counting::Attempts);
        let mut state = big.initial_state(0);
        assert!(big.reserve(&mut state, 0, MAX_LIMIT, 0).is_allowed());
        assert!(!big.reserve(&mut state, 0, MAX_LIMIT, 0).is_allowed());
        assert_eq!(big.counts(&state, 0), (0, MAX_LIMIT));
        // A saturated window weighs as a full window of admitted permits.
        let admitted = SlidingWindowCounter::new(MAX_LIMIT, Duration::from_secs(1)).unwrap();
        let mut full = admitted.initial_state(0);
        assert!(admitted.reserve(&mut full, 0, MAX_LIMIT, 0).is_allowed());
        for now in [SECOND, SECOND + SECOND / 3, 2 * SECOND - 1] {
            assert_eq!(
                big.peek(&state, now, 1).remaining(),
                admitted.peek(&full, now, 1).remaining()
            );
        }
    }

    /// A counter whose index wraps after 2¹⁶ windows of 1 µs: limit 2²⁴ − 1.
    fn wrapping() -> SlidingWindowCounter {
        let counter = SlidingWindowCounter::new(MAX_LIMIT, Duration::from_micros(1)).unwrap();
        assert_eq!(counter.index_bits(), 16);
        counter
    }

    const MICRO: u64 = 1_000;
    const WRAP: u64 = 1 << 16;

    #[test]
    fn the_window_index_wraps_forward_across_its_modulus() {
        let counter = wrapping();
        // The last window before the index wraps, then the first one after it.
        let last = (WRAP - 1) * MICRO;
        let mut state = counter.initial_state(last);
        assert!(counter.reserve(&mut state, last, 10, 0).is_allowed());
        assert_eq!(counter.counts(&state, last + MICRO), (10, 0));
        assert!(counter.reserve(&mut state, last + MICRO, 5, 0).is_allowed());
        assert_eq!(state.word >> 48, 0); // stored as index 0
        assert_eq!(counter.counts(&state, last + MICRO), (10, 5));
        assert_eq!(counter.counts(&state, last + 2 * MICRO), (5, 0));
        // Forward by up to 2¹⁵ − 1 windows: counts forgotten, a fresh window.
        let far = last + MICRO + (WRAP / 2 - 1) * MICRO;
        assert_eq!(counter.counts(&state, far), (0, 0));
        assert!(counter.is_replenished(&state, far));
        // Many wraps later, in the forward half: the same.
        assert_eq!(
            counter.counts(&state, last + MICRO + (7 * WRAP + 3) * MICRO),
            (0, 0)
        );
    }

    #[test]
    fn a_wrapped_index_in_the_backward_half_keeps_its_counts() {
        let counter = wrapping();
        let mut state = counter.initial_state(0);
        assert!(counter.reserve(&mut state, 0, MAX_LIMIT, 0).is_allowed());
        // 2¹⁵ windows on is ambiguous (as far back as forward): counts kept, read as
        // the start of a window 2¹⁵ µs in the future, and the retry measured from now.
        let ambiguous = (WRAP / 2) * MICRO;
        let refused = counter.reserve(&mut state, ambiguous, 1, 0);
        assert!(!refused.is_allowed());
        assert_eq!(counter.counts(&state, ambiguous), (0, MAX_LIMIT));
        assert!(!counter.is_replenished(&state, ambiguous));
        // It becomes the window 2¹⁶ µs (the stored index, wrapped) and is retried 1 µs
        // plus the part of it the previous count must age by after that.
        let retry = refused.retry_after_nanos();
        assert!(retry > (WRAP / 2) * MICRO && retry <= (WRAP / 2 + 2) * MICRO);
        assert!(counter.peek(&state, ambiguous + retry, 1).is_allowed());
        // One window before 2¹⁵ is still forward: forgotten.
        assert_eq!(counter.counts(&state, (WRAP / 2 - 1) * MICRO), (0, 0));
        // A state with nothing counted is simply moved to now, whatever the distance.
        let empty = counter.initial_state(0);
        assert!(counter.peek(&empty, ambiguous, MAX_LIMIT).is_allowed());
        // (Its one permit is counted in now's window, which starts now: gone in 2 µs.)
        assert_eq!(
            counter.peek(&empty, ambiguous, 1).reset_after_nanos(),
            2 * MICRO
        );
    }

    #[test]
    fn time_going_backwards_never_grants_more_in_either_index_mode() {
        let exact = SlidingWindowCounter::new(5, Duration::from_micros(1)).unwrap();
        assert!(exact.exact_index());
        for counter in [exact, wrapping()] {
            let limit = counter.limit();
            let mut state = counter.initial_state(0);
            let now = 10 * MICRO + 300;
            assert!(counter.reserve(&mut state, now, limit, 0).is_allowed());
            for back in [1, 300, MICRO, 5 * MICRO, 10 * MICRO] {
                let earlier = now - back;
                let refused = counter.reserve(&mut state, earlier, 1, 0);
                assert!(!refused.is_allowed(), "{back}");
                assert_eq!(counter.counts(&state, earlier), (0, limit), "{back}");
                // Measured from the real `now`: not before the latest window ends.
                assert!(earlier + refused.retry_after_nanos() > 11 * MICRO, "{back}");
            }
            // An allowed call from the past is counted in the latest window.
            let mut state = counter.initial_state(0);
            assert!(counter.reserve(&mut state, now, 1, 0).is_allowed());
            assert!(counter
                .reserve(&mut state, now - 5 * MICRO, 1, 0)
                .is_allowed());
            assert_eq!(counter.counts(&state, now), (0, 2));
        }
    }

    #[test]
    fn the_state_is_one_word() {
        assert_eq!(std::mem::size_of::<SlidingWindowState>(), 8);
        let counter = SlidingWindowCounter::new(100, Duration::from_secs(60)).unwrap();
        let state = counter.initial_state(61 * SECOND);
        let mut words = [0];
        counter.write_state(&state, &mut words[..]);
        assert_eq!(counter.read_state(&words[..]), state);
    }

    #[test]
    fn window_of_divides_exactly_without_dividing() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            // xorshift64*: deterministic, spread over the whole range.
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        };
        let mut lens = vec![
            1,
            2,
            3,
            7,
            1 << 20,
            999_999_937,
            SECOND,
            u64::MAX / 3,
            u64::MAX,
        ];
        for _ in 0..200 {
            let shift = next() % 64;
            lens.push((next() >> shift).max(1));
        }
        for len in lens {
            let counter = SlidingWindowCounter::new(1, Duration::from_nanos(len));
            let Ok(counter) = counter else { continue };
            let mut instants = vec![
                0,
                1,
                len - 1,
                len,
                len.saturating_add(1),
                u64::MAX,
                u64::MAX - 1,
            ];
            instants.extend((0..200).map(|_| next()));
            for now in instants {
                assert_eq!(counter.window_of(now), now / counter.len, "{now} / {len}");
            }
        }
    }

    /// The full step as it was before issue 8 divided the weight by the kept
    /// reciprocal and kept the layout in the configuration: the oracle it must
    /// match, field by field.
    fn reserve_before(
        counter: &SlidingWindowCounter,
        state: &mut SlidingWindowState,
        now: Nanos,
        cost: u64,
    ) -> Decision {
        let weighted = |previous: u64, elapsed: u64| -> u64 {
            if previous == 0 {
                return 0;
            }
            let weighted = u128::from(previous) * u128::from(counter.len - elapsed);
            let len = u128::from(counter.len);
            let rounded = match counter.rounding {
                Rounding::Exact => weighted.div_ceil(len),
                Rounding::Floor => weighted / len,
            };
            u64::try_from(rounded).unwrap_or(previous)
        };
        let mut view = counter.view(state, now);
        let used = weighted(view.previous, view.elapsed) + view.current;
        let remaining = counter.limit.saturating_sub(used);
        if cost > counter.limit {
            let reset = counter.reset_after(&view);
            return Decision::never(counter.limit, remaining, reset.saturating_add(view.behind));
        }
        if used + cost > counter.limit {
            if counter.counting == Counting::Attempts {
                let saturated = (1 << counter.count_bits()) - 1;
                view.current = (view.current + cost).min(saturated);
                *state = counter.pack(view.index, view.previous, view.current);
            }
            let retry = counter.retry_after(&view, cost);
            let reset = counter.reset_after(&view);
            return Decision::denied(
                counter.limit,
                remaining,
                retry.saturating_add(view.behind),
                reset.saturating_add(view.behind),
            );
        }
        view.current += cost;
        *state = counter.pack(view.index, view.previous, view.current);
        let reset = counter.reset_after(&view);
        Decision::allowed(
            counter.limit,
            remaining - cost,
            reset.saturating_add(view.behind),
        )
    }

    #[test]
    fn the_kept_layout_is_the_one_the_limit_and_counting_need() {
        for counting in [Counting::Admitted, Counting::Attempts] {
            for limit in [1, 2, 3, 255, 256, 65_535, MAX_LIMIT] {
                for len in [1, 1_000, SECOND, 1 << 50] {
                    let counter = SlidingWindowCounter::new(limit, Duration::from_nanos(len))
                        .unwrap()
                        .with_counting(counting);
                    let b = match counting {
                        Counting::Admitted => bits(limit),
                        Counting::Attempts => (bits(limit) + 8).min(24),
                    };
                    assert_eq!(counter.count_bits(), b);
                    assert_eq!(counter.exact_index(), len > u64::MAX >> (64 - 2 * b));
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// The lean try is the full step without waiting: same answer, same state
        /// word, in both roundings and both countings, with indices stored whole or
        /// wrapping, and with time that sometimes goes backwards.
        #[test]
        fn lean_try_is_the_full_step_without_waiting(
            limit in proptest::prop_oneof![1u64..10, 1_000u64..MAX_LIMIT],
            len in proptest::prop_oneof![1u64..100, 1_000u64..10_000_000_000],
            floor in proptest::prelude::any::<bool>(),
            attempts in proptest::prelude::any::<bool>(),
            start in proptest::prop_oneof![proptest::strategy::Just(0u64), 0u64..u64::MAX / 2],
            steps in proptest::collection::vec((-5_000i64..5_000_000, 0u64..1_000), 1..100),
        ) {
            let counter = SlidingWindowCounter::new(limit, Duration::from_nanos(len))
                .unwrap()
                .with_rounding(if floor { Rounding::Floor } else { Rounding::Exact })
                .with_counting(if attempts { Counting::Attempts } else { Counting::Admitted });
            let mut full = counter.initial_state(start);
            let mut lean = full;
            let mut now = start;
            for (step, fraction) in steps {
                now = now.saturating_add_signed(step);
                let cost = 1 + fraction * limit / 900; // up to a little above the limit
                let decision = counter.reserve(&mut full, now, cost, 0);
                let granted = counter.take(&mut lean, now, cost);
                proptest::prop_assert_eq!(granted, decision.is_allowed(), "at {} cost {}", now, cost);
                proptest::prop_assert_eq!(lean, full, "at {} cost {}", now, cost);
            }
        }

        /// The step, its split check (settle, then describe) and `check_words` are
        /// the step as it was: every field of every decision, and the state word, in
        /// both roundings and both countings, with indices stored
        /// whole or wrapping, long windows whose weight needs 128 bits, and time that
        /// sometimes goes backwards.
        #[test]
        fn the_step_is_the_step_as_it_was(
            limit in proptest::prop_oneof![1u64..10, 1_000u64..MAX_LIMIT],
            len in proptest::prop_oneof![1u64..100, 1_000u64..10_000_000_000, (1u64 << 50)..(1u64 << 62)],
            floor in proptest::prelude::any::<bool>(),
            attempts in proptest::prelude::any::<bool>(),
            start in proptest::prop_oneof![proptest::strategy::Just(0u64), 0u64..u64::MAX / 2],
            steps in proptest::collection::vec((-5_000i64..5_000_000, 0u64..1_000, 0i64..4), 1..100),
        ) {
            let counter = SlidingWindowCounter::new(limit, Duration::from_nanos(len))
                .unwrap()
                .with_rounding(if floor { Rounding::Floor } else { Rounding::Exact })
                .with_counting(if attempts { Counting::Attempts } else { Counting::Admitted });
            let mut old = counter.initial_state(start);
            let mut new = old;
            let mut split = old;
            let mut words = [0];
            counter.write_state(&old, &mut words[..]);
            let mut now = start;
            for (step, fraction, windows) in steps {
                // Now and then a step of a few windows, whatever their length.
                let step = step.saturating_add((len as i64).saturating_mul(windows) / 2);
                now = now.saturating_add_signed(step);
                let cost = 1 + fraction * limit / 900; // up to a little above the limit
                let expected = reserve_before(&counter, &mut old, now, cost);
                proptest::prop_assert_eq!(counter.reserve(&mut new, now, cost, 0), expected, "at {} cost {}", now, cost);
                proptest::prop_assert_eq!(new, old, "at {} cost {}", now, cost);
                let settled = counter.settle(&mut split, now, cost);
                proptest::prop_assert_eq!(counter.describe(&settled), expected);
                proptest::prop_assert_eq!(split, old);
                let checked = counter.check_words(&mut words[..], now, cost, |_| true);
                proptest::prop_assert_eq!(checked, Some(expected));
                proptest::prop_assert_eq!(counter.read_state(&words[..]), old);
            }
        }
    }
}
