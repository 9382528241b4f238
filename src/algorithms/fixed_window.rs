//! The fixed window counter: at most `limit` permits per window of length `window`.
//!
//! # The model
//!
//! Time is cut into windows aligned to the clock's origin: window `k` is
//! `[k × window, (k + 1) × window)`. Each window has a counter; a call of cost `c` is
//! allowed if the counter plus `c` stays within the limit, and then adds `c`. A new
//! window starts at zero. Only the current window's counter matters, so the state is
//! the window's index and its count, packed into one word (the count in the low bits,
//! as many as the limit needs). A call in the same window as the last one costs no
//! division: the window's start is `index × window`, compared with `now`.
//!
//! ```text
//!   limit 3 per 60 s
//!   window 0: [0 s, 60 s)           window 1: [60 s, 120 s)
//!   ├──x────x───────────────────────┼x───x────────────────x──x┤
//!      1    2                        1   2                3  denied (4 > 3)
//!                                                           retry_after = until 120 s
//! ```
//!
//! Only allowed calls are counted: a refused call leaves the counter where it was (a
//! client that keeps hammering is not banned for longer, and a caller that retries
//! after `retry_after` gets in).
//!
//! A grant acts at once, so by the crate's cancel rule ([`Algorithm::cancel`]) it
//! can be given back only at the instant it was made: its cost then comes off the
//! count of the window it was counted in, if that is still the window the state
//! counts in (never below zero; what was granted after it stays counted).
//!
//! # The boundary burst
//!
//! The limit holds *per window*, not over every span of `window`: a client can take
//! `limit` permits at the very end of one window and `limit` more at the start of the
//! next, so up to `2 × limit` pass within a span as short as one nanosecond (with
//! 3 per minute: 3 requests at 12:00:59 and 3 more at 12:01:00). And because every client's window resets at the same instant,
//! refused clients tend to come back together. Choose a sliding window counter, a
//! sliding log or a leaky bucket when that matters; choose this when the cost of a
//! check must be minimal and "N per calendar-aligned window" is what you mean.
//!
//! # Edges
//!
//! * A cost above the limit is answered [`Verdict::Never`](super::Verdict::Never).
//! * A window is at most about 292 years, and the limit must fit beside the largest
//!   window index in 64 bits: it may be up to about half the window's length in
//!   nanoseconds (3 per minute and 2²⁸ − 1 per second are fine), so the shortest
//!   window that takes a limit is 2 ns (a limit of 1). Anything else is a typed
//!   error.
//!
//! ```
//! use sluicegate::algorithms::FixedWindow;
//! use sluicegate::ConfigError;
//! use std::time::Duration;
//! let one_ns = FixedWindow::new(1, Duration::from_nanos(1));
//! assert!(matches!(one_ns, Err(ConfigError::InvalidCount { .. })));
//! assert!(FixedWindow::new(1, Duration::from_nanos(2)).is_ok());
//! assert!(FixedWindow::new(1, Duration::ZERO).is_err());
//! ```
//! * Time that appears to go backwards stays in the latest window seen, so it grants
//!   nothing.

use super::validate::validate_positive_period;
use super::words::{one_word_state, Plan, Settle, Words};
use super::{bits, Algorithm, Decision, OneWord, Pace, Receipt, Report, WordEncoded};
use crate::clock::Nanos;
use crate::error::ConfigError;
use std::time::Duration;

/// At most `limit` permits per window of length `window`, windows aligned to the clock's
/// origin. See the [module docs](self) for the model and the boundary burst.
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, FixedWindow};
/// use std::time::Duration;
/// let window = FixedWindow::new(3, Duration::from_secs(60)).unwrap();
/// let mut state = window.initial_state(0);
/// for remaining in [2, 1, 0] {
///     assert_eq!(window.reserve::<Decision>(&mut state, 5_000_000_000, 1, 0).remaining(), remaining);
/// }
/// let refused = window.reserve::<Decision>(&mut state, 5_000_000_000, 1, 0);
/// assert!(!refused.is_allowed());
/// assert_eq!(refused.retry_after(), Duration::from_secs(55));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedWindow {
    window: u64,
    limit: u64,
}

/// The state of a [`FixedWindow`]: one word, the index `k` of the window last counted
/// in (`[k × window, (k + 1) × window)`) above the permits it granted, in as many low bits
/// as the limit needs. Read it with [`FixedWindow::count`].
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, FixedWindow};
/// use std::time::Duration;
/// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
/// let mut state = window.initial_state(0);
/// assert!(window.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// let before = state;
/// assert!(!window.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// assert_eq!(state, before); // a refusal leaves the word as it was
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedWindowState {
    word: u64,
}

impl FixedWindow {
    /// At most `limit` permits per window of length `window`.
    ///
    /// # Errors
    /// [`ConfigError::InvalidDuration`] for a zero window or one above about 292 years;
    /// [`ConfigError::InvalidCount`] for a zero limit, or one too large to pack beside the
    /// window index in 64 bits (about half the window length in nanoseconds).
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use std::time::Duration;
    /// assert!(FixedWindow::new(100, Duration::from_secs(60)).is_ok());
    /// assert!(FixedWindow::new(0, Duration::from_secs(60)).is_err());
    /// assert!(FixedWindow::new(100, Duration::ZERO).is_err());
    /// ```
    pub fn new(limit: u64, window: Duration) -> Result<Self, ConfigError> {
        let window_nanos = validate_positive_period("window", window)?;
        if limit == 0 || bits(u64::MAX / window_nanos) + bits(limit) > u64::BITS {
            return Err(ConfigError::InvalidCount {
                what: "limit",
                value: limit,
                requirement: "positive and small enough to pack beside the window index in 64 bits (about half the window length in nanoseconds at most)",
            });
        }
        Ok(FixedWindow {
            window: window_nanos,
            limit,
        })
    }

    /// The limit per window, in permits.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use std::time::Duration;
    /// let window = FixedWindow::new(3, Duration::from_secs(60)).unwrap();
    /// assert_eq!((window.limit(), window.window()), (3, Duration::from_secs(60)));
    /// ```
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length. Windows are aligned to the clock's origin, so a window
    /// ends at the next multiple of this length, whenever its first call came.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Decision, FixedWindow};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_millis(1500)).unwrap();
    /// assert_eq!(window.window(), Duration::from_millis(1500));
    /// let mut state = window.initial_state(0);
    /// assert!(window.reserve::<bool>(&mut state, 1_000_000_000, 1, 0));
    /// // Refused at 1 s, until the window [0, 1.5 s) ends.
    /// let refused: Decision = window.reserve(&mut state, 1_000_000_000, 1, 0);
    /// assert_eq!(refused.retry_after(), window.window() - Duration::from_secs(1));
    /// ```
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// The permits counted in the window containing `now` (0 once a later window
    /// has begun).
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, FixedWindow};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(3, Duration::from_secs(60)).unwrap();
    /// let mut state = window.initial_state(0);
    /// window.reserve::<Decision>(&mut state, 5_000_000_000, 2, 0);
    /// assert_eq!(window.count(&state, 59_000_000_000), 2);
    /// assert_eq!(window.count(&state, 60_000_000_000), 0);
    /// ```
    pub fn count(&self, state: &FixedWindowState, now: Nanos) -> u64 {
        self.current(state, now).2
    }

    /// How many low bits of the state word hold the count. At most 62: the
    /// constructor checked that the largest window index needs at least 2 bits.
    #[inline]
    fn shift(&self) -> u32 {
        bits(self.limit)
    }

    #[inline]
    fn pack(&self, index: u64, count: u64) -> FixedWindowState {
        FixedWindowState {
            word: index << self.shift() | count,
        }
    }

    /// The window index, its start and its count as of `now`: a later window starts
    /// from zero; an earlier `now` (time going backwards) stays in the latest window
    /// seen. Only a move to a later window divides.
    #[inline]
    fn current(&self, state: &FixedWindowState, now: Nanos) -> (u64, u64, u64) {
        let shift = self.shift();
        let index = state.word >> shift;
        let count = state.word & ((1 << shift) - 1);
        // index ≤ u64::MAX / window, so this does not overflow.
        let start = index * self.window;
        if now >= start && now - start >= self.window {
            let index = now / self.window;
            (index, index * self.window, 0)
        } else {
            (index, start, count)
        }
    }
}

/// What a call found, for [`describe`](Settle::describe): its window's start and
/// count as of `now`, before the call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WindowSettled {
    now: Nanos,
    start: u64,
    count: u64,
    cost: u64,
}

impl Settle for FixedWindow {
    type Settled = WindowSettled;

    /// Counts the call if it fits: one comparison.
    #[inline(always)]
    fn settle(&self, state: &mut FixedWindowState, now: Nanos, cost: u64) -> WindowSettled {
        let (index, start, count) = self.current(state, now);
        // `cost ≤ limit − count` also rules out a cost above the limit.
        if cost <= self.limit - count {
            *state = self.pack(index, count + cost);
        }
        WindowSettled {
            now,
            start,
            count,
            cost,
        }
    }

    #[inline(always)]
    fn describe(&self, settled: &WindowSettled) -> Decision {
        // A window counter cannot promise future capacity: a grant is immediate or a
        // denial with the exact time the window rolls over.
        let WindowSettled {
            now,
            start,
            count,
            cost,
        } = *settled;
        let until_end = start.saturating_add(self.window).saturating_sub(now);
        let remaining = self.limit - count;
        let reset = if count == 0 { 0 } else { until_end };
        if cost > self.limit {
            return Decision::never(self.limit, remaining, reset);
        }
        if cost > remaining {
            return Decision::denied(self.limit, remaining, until_end, reset);
        }
        Decision::allowed(self.limit, remaining - cost, until_end)
    }
}

impl Algorithm for FixedWindow {
    type State = FixedWindowState;
    type Shape = OneWord;

    fn initial_state(&self, now: Nanos) -> FixedWindowState {
        self.pack(now / self.window, 0)
    }

    /// The step is settle (decide, move the state), then describe (the decision),
    /// with a receipt naming the window the grant was counted in (the state's
    /// window right after it) and its cost.
    #[inline]
    fn reserve<R: Report>(
        &self,
        state: &mut FixedWindowState,
        now: Nanos,
        cost: u64,
        _max_wait: Nanos,
    ) -> R {
        let settled = self.settle(state, now, cost);
        // What `settle` compared: the call was counted if it fit.
        if settled.cost > self.limit - settled.count {
            return R::refused(|| self.describe(&settled));
        }
        // The count takes at least one bit, so the index is below 2⁶³: it fits the mark.
        let index = state.word >> self.shift();
        R::granted(
            || self.describe(&settled),
            || Receipt::new(index as i64, cost),
        )
    }

    /// The rule of [`Algorithm::cancel`]: up to `acts_at`, that instant included,
    /// the grant's cost comes off the count of its window if the state still
    /// counts in that window (never below zero); a receipt of another window, or a
    /// cancel after `acts_at`, gives nothing back.
    fn cancel(&self, state: &mut FixedWindowState, now: Nanos, receipt: &Receipt, acts_at: Nanos) {
        if acts_at < now {
            return;
        }
        let shift = self.shift();
        let index = state.word >> shift;
        if index != receipt.mark() as u64 {
            return;
        }
        let count = state.word & ((1 << shift) - 1);
        *state = self.pack(index, count.saturating_sub(receipt.charge()));
    }

    fn pace(&self) -> Option<Pace> {
        Pace::per(self.limit(), self.window())
    }

    fn is_replenished(&self, state: &FixedWindowState, now: Nanos) -> bool {
        self.count(state, now) == 0
    }
}

impl WordEncoded for FixedWindow {
    type Config = [u64; 2];
    // Publishes the new state first, then describes the decision.
    one_word_state!(FixedWindowState { word: u64 }, settled);

    #[inline(always)]
    fn config_words(&self) -> [u64; 2] {
        [self.window, self.limit]
    }

    #[inline(always)]
    fn from_config_words(words: [u64; 2]) -> Self {
        // Clamped so that the steps cannot panic: a window of at least 1 ns, a
        // count that fits 62 bits.
        Self::from_own_config_words([words[0].max(1), words[1].clamp(1, (1 << 62) - 1)])
    }

    #[inline(always)]
    fn from_own_config_words(words: [u64; 2]) -> Self {
        FixedWindow {
            window: words[0],
            limit: words[1],
        }
    }

    /// The full step is already lean: a window's decision costs no division beyond
    /// finding the window.
    #[inline(always)]
    fn plan_take<W: Words + ?Sized>(
        &self,
        words: &W,
        now: Nanos,
        cost: u64,
    ) -> Plan<FixedWindowState> {
        let mut state = self.read_state(words);
        let granted: bool = self.reserve(&mut state, now, cost, 0);
        (granted, granted.then_some(state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain model of the step, written as one piece (decide and describe
    /// together), where the step decides, publishes, then describes: the step
    /// must match it field by field.
    fn plain_reserve(
        window: &FixedWindow,
        state: &mut FixedWindowState,
        now: Nanos,
        cost: u64,
    ) -> Decision {
        let (index, start, count) = window.current(state, now);
        let until_end = start.saturating_add(window.window).saturating_sub(now);
        let remaining = window.limit - count;
        let reset = if count == 0 { 0 } else { until_end };
        if cost > window.limit {
            return Decision::never(window.limit, remaining, reset);
        }
        if cost > remaining {
            return Decision::denied(window.limit, remaining, until_end, reset);
        }
        *state = window.pack(index, count + cost);
        Decision::allowed(window.limit, remaining - cost, until_end)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// The split check (settle, then describe), `check_words` and `reserve` match
        /// a plain model of the step: every field of every decision, and the state, with
        /// costs above the limit and time that sometimes goes backwards.
        #[test]
        fn the_split_check_and_the_step_match_the_plain_model(
            limit in proptest::prop_oneof![1u64..10, 1_000u64..1_000_000],
            window in proptest::prop_oneof![1_000u64..100_000, 1_000_000u64..10_000_000_000],
            start in proptest::prop_oneof![proptest::strategy::Just(0u64), 0u64..u64::MAX / 2],
            steps in proptest::collection::vec((-5_000i64..5_000_000, 0u64..1_000), 1..100),
        ) {
            // A limit must pack beside the window index: at most about window / 2.
            let limit = limit.min(window / 4);
            let window = FixedWindow::new(limit, Duration::from_nanos(window)).unwrap();
            let mut plain = window.initial_state(start);
            let mut split = plain;
            let mut general = plain;
            let mut words = [0];
            window.write_state(&plain, &mut words[..]);
            let mut now = start;
            for (step, fraction) in steps {
                now = now.saturating_add_signed(step);
                let cost = 1 + fraction * limit / 900; // up to a little above the limit
                let expected = plain_reserve(&window, &mut plain, now, cost);
                let settled = window.settle(&mut split, now, cost);
                proptest::prop_assert_eq!(window.describe(&settled), expected, "at {} cost {}", now, cost);
                proptest::prop_assert_eq!(split, plain);
                proptest::prop_assert_eq!(window.reserve::<Decision>(&mut general, now, cost, 0), expected);
                proptest::prop_assert_eq!(general, plain);
                let checked = window.check_words(&mut words[..], now, cost, |_| true);
                proptest::prop_assert_eq!(checked, Some(expected));
                proptest::prop_assert_eq!(window.read_state(&words[..]), plain);
            }
        }
    }

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn bad_parameters_are_typed_errors() {
        let minute = Duration::from_secs(60);
        assert!(matches!(
            FixedWindow::new(0, minute),
            Err(ConfigError::InvalidCount { .. })
        ));
        // u64::MAX / 10 needs 61 bits, which leaves 3 for the count.
        assert!(matches!(
            FixedWindow::new(8, Duration::from_nanos(10)),
            Err(ConfigError::InvalidCount { .. })
        ));
        assert!(FixedWindow::new(7, Duration::from_nanos(10)).is_ok());
        assert!(FixedWindow::new((1 << 28) - 1, Duration::from_secs(1)).is_ok());
        assert!(FixedWindow::new(1 << 35, Duration::from_secs(3600)).is_ok());
        assert!(matches!(
            FixedWindow::new(1, Duration::ZERO),
            Err(ConfigError::InvalidDuration { .. })
        ));
        assert!(matches!(
            FixedWindow::new(1, Duration::MAX),
            Err(ConfigError::InvalidDuration { .. })
        ));
    }

    #[test]
    fn time_going_backwards_stays_in_the_latest_window() {
        let window = FixedWindow::new(2, Duration::from_secs(10)).unwrap();
        let mut state = window.initial_state(0);
        assert!(window
            .reserve::<Decision>(&mut state, 25 * SECOND, 2, 0)
            .is_allowed());
        let refused = window.reserve::<Decision>(&mut state, 5 * SECOND, 1, 0);
        assert!(!refused.is_allowed());
        assert_eq!(refused.retry_after_nanos(), 25 * SECOND);
        assert_eq!(window.count(&state, 5 * SECOND), 2);
    }

    #[test]
    fn the_last_window_before_the_end_of_time_does_not_panic() {
        let window = FixedWindow::new(3, Duration::from_secs(7)).unwrap();
        let mut state = window.initial_state(u64::MAX);
        for _ in 0..4 {
            let decision = window.reserve::<Decision>(&mut state, u64::MAX, 1, 0);
            assert!(decision.remaining() <= 3);
        }
        assert!(window
            .reserve::<Decision>(&mut state, u64::MAX, 4, 0)
            .is_never());
    }
}
