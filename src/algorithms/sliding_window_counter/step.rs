//! The sliding window counter's step: decide and count a call by
//! cross-multiplying (the lean take and the check's first half), describe the
//! decision after, and the [`Algorithm`] impl built on the two.

use super::{Counting, SlidingWindowCounter, SlidingWindowState, View};
use crate::algorithms::words::Settle;
use crate::algorithms::{Algorithm, Decision, OneWord, Pace, Receipt, Report};
use crate::clock::Nanos;

impl SlidingWindowCounter {
    /// The lean non-blocking take: exactly `reserve(state, now, cost, 0).is_allowed()`,
    /// with the same change of state (a denial counted when counting attempts), but
    /// without `retry_after` and `reset_after`, and comparing the weighted count by
    /// cross-multiplying instead of dividing.
    #[inline]
    pub(crate) fn take(&self, state: &mut SlidingWindowState, now: Nanos, cost: u64) -> bool {
        if cost > self.limit {
            return false;
        }
        let view = self.view_inlined(state, now);
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

    /// An empty state in now's window.
    #[inline]
    pub(super) fn fresh(&self, now: Nanos) -> View {
        let now_index = self.window_of(now);
        View {
            index: now_index & (u64::MAX >> (2 * self.count_bits())),
            previous: 0,
            current: 0,
            elapsed: now - now_index * self.window,
            behind: 0,
        }
    }
}

/// What a call found, for [`describe`](Settle::describe): the state as of now,
/// before the call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CounterSettled {
    view: View,
    cost: u64,
    granted: bool,
}

impl Settle for SlidingWindowCounter {
    type Settled = CounterSettled;

    /// Decides and counts the call as the lean take does, by cross-multiplying:
    /// the weighted count itself (a division by the kept multiplier) is left to
    /// `describe`, after the new state is published.
    #[inline(always)]
    fn settle(&self, state: &mut SlidingWindowState, now: Nanos, cost: u64) -> CounterSettled {
        let view = self.view_inlined(state, now);
        let granted = self.admit(state, view, cost);
        CounterSettled {
            view,
            cost,
            granted,
        }
    }

    #[inline(always)]
    fn describe(&self, settled: &CounterSettled) -> Decision {
        self.described(settled, self.counting == Counting::Attempts)
    }
}

impl SlidingWindowCounter {
    /// The decision of a call that found `settled`, a refusal described with the
    /// attempt counted if `counted`.
    #[inline(always)]
    fn described(&self, settled: &CounterSettled, counted: bool) -> Decision {
        // Immediate or denied: an estimate cannot promise future capacity.
        let CounterSettled { mut view, cost, .. } = *settled;
        // Counts are below 2³¹ and the weight is at most the previous count, so
        // neither this sum nor `used + cost` (cost ≤ limit) overflows. `admit`
        // granted exactly when `used + cost ≤ limit`.
        let used = self.weighted(view.previous, view.elapsed) + view.current;
        let remaining = self.limit.saturating_sub(used);
        if cost > self.limit {
            let reset = self.reset_after(&view);
            return Decision::never(self.limit, remaining, reset.saturating_add(view.behind));
        }
        if used + cost > self.limit {
            if counted {
                // The refused attempt was counted: the state it left.
                view.current = self.attempted(view.current, cost);
            }
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

    /// The step is settle (decide, move the state), then describe (the decision),
    /// with a receipt naming the window the grant was counted in (the state's
    /// window right after it, as stored) and its cost.
    #[inline]
    fn reserve<R: Report>(
        &self,
        state: &mut SlidingWindowState,
        now: Nanos,
        cost: u64,
        _max_wait: Nanos,
    ) -> R {
        let settled = self.settle(state, now, cost);
        if !settled.granted {
            return R::refused(|| self.describe(&settled));
        }
        // Each count takes at least one bit, so the index is below 2⁶²: it fits the mark.
        let index = state.word >> (2 * self.count_bits());
        R::granted(
            || self.describe(&settled),
            || Receipt::new(index as i64, cost),
        )
    }

    /// Counting attempts, a refusal described as if the attempt were not counted:
    /// the same counter counting grants; `None` counting grants.
    fn peek_unrecorded(
        &self,
        state: &SlidingWindowState,
        now: Nanos,
        cost: u64,
    ) -> Option<Decision> {
        if self.counting != Counting::Attempts {
            return None;
        }
        let settled = self.settle(&mut state.clone(), now, cost);
        Some(self.described(&settled, false))
    }

    #[inline]
    fn pace(&self) -> Option<Pace> {
        Pace::per(self.limit(), self.window())
    }

    fn is_replenished(&self, state: &SlidingWindowState, now: Nanos) -> bool {
        let view = self.view(state, now);
        view.previous == 0 && view.current == 0
    }

    /// The rule of [`Algorithm::cancel`], as the [module docs](super#cancelling)
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
