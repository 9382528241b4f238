//! The sliding window counter's weighing: the previous window's weight at a
//! point of the current one, whether a count fits under it, and when a call would
//! first pass or the counts reset.

use super::{Rounding, SlidingWindowCounter, View};
use crate::clock::Nanos;

impl SlidingWindowCounter {
    /// True if the previous count's weight at `elapsed` ([`weighted`](Self::weighted))
    /// is at most `room`: `⌈p · rest / window⌉ ≤ room` is `p · rest ≤ room · window`, and
    /// `⌊p · rest / window⌋ ≤ room` is `p · rest < (room + 1) · window`. A count within the
    /// room fits at once, since the weight never exceeds it.
    #[inline(always)]
    pub(super) fn weight_fits(&self, previous: u64, elapsed: u64, room: u64) -> bool {
        if previous <= room {
            return true;
        }
        let weighted = u128::from(previous) * u128::from(self.window - elapsed);
        let window = u128::from(self.window);
        match self.rounding {
            Rounding::Exact => weighted <= u128::from(room) * window,
            Rounding::Floor => weighted < (u128::from(room) + 1) * window,
        }
    }

    /// The previous count's weight at `elapsed`, rounded to whole permits (at most
    /// `previous`). Stays in u64 arithmetic when the product fits, which is the
    /// common case and much cheaper than a 128-bit division.
    #[inline(always)]
    pub(super) fn weighted(&self, previous: u64, elapsed: u64) -> u64 {
        if previous == 0 {
            return 0;
        }
        let rest = self.window - elapsed;
        if let Some(weighted) = previous.checked_mul(rest) {
            // ⌊weighted / window⌋ by the kept multiplier (`window_of` divides any value
            // by the window's length), rounded up if it was not exact.
            let floor = self.window_of(weighted);
            return match self.rounding {
                Rounding::Exact => floor + u64::from(floor * self.window != weighted),
                Rounding::Floor => floor,
            };
        }
        let window = u128::from(self.window);
        let weighted = u128::from(previous) * u128::from(rest);
        let rounded = match self.rounding {
            Rounding::Exact => weighted.div_ceil(window),
            Rounding::Floor => weighted / window,
        };
        // rest ≤ window, so the weight is at most `previous`.
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
        let window = u128::from(self.window);
        // previous × (window − e) must be ≤ room × window (exact), or < (room + 1) × window.
        let allowance = match self.rounding {
            Rounding::Exact => u128::from(room) * window,
            Rounding::Floor => (u128::from(room) + 1) * window - 1,
        };
        // The longest unelapsed part that still fits; u64 division when it can.
        let span = match u64::try_from(allowance) {
            Ok(allowance) => u128::from(allowance / previous),
            Err(_) => allowance / u128::from(previous),
        };
        let first = window.saturating_sub(span);
        (first < window).then_some(first as u64)
    }

    /// How long after the view's `elapsed` point a call of `cost` would first pass
    /// (the call does not pass now).
    #[inline(always)]
    pub(super) fn retry_after(&self, view: &View, cost: u64) -> Nanos {
        let room = view
            .current
            .checked_add(cost)
            .and_then(|used| self.limit.checked_sub(used));
        if let Some(room) = room
            && let Some(first) = self.first_fit(view.previous, room)
        {
            return first.saturating_sub(view.elapsed);
        }
        let to_next = self.window - view.elapsed;
        if let Some(first) = self.first_fit(view.current, self.limit - cost) {
            return to_next.saturating_add(first);
        }
        to_next.saturating_add(self.window)
    }

    #[inline(always)]
    pub(super) fn reset_after(&self, view: &View) -> Nanos {
        let to_next = self.window - view.elapsed;
        if view.current > 0 {
            to_next.saturating_add(self.window)
        } else if view.previous > 0 {
            to_next
        } else {
            0
        }
    }
}
