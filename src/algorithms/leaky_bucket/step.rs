//! The leaky bucket's step, in 64 bits.

use super::ticks::whole_permits;
use super::{LeakyBucket, LeakyMode, LeakyState};
use crate::algorithms::{Decision, Receipt, Report};
use crate::clock::Nanos;

impl LeakyBucket {
    /// The step of [`Algorithm::reserve`](crate::algorithms::Algorithm::reserve),
    /// with `WHOLE` true when ticks are nanoseconds (`count == 1`), so that
    /// reading the clock and every duration of the decision compile to plain
    /// subtractions there.
    ///
    /// All in 64 bits: a bucket holds its capacity in at most i64::MAX ticks (its
    /// constructors check it; words they did not make saturate), so a charge that
    /// overflows is above the capacity, and an end that overflows lies beyond the
    /// end of time: either way the call can never pass.
    #[inline(always)]
    pub(super) fn reserve_in<const WHOLE: bool, R: Report>(
        &self,
        state: &mut LeakyState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> R {
        let ticks = self.ticks();
        let limit = u64::from(self.capacity);
        let now_ticks = if WHOLE { now } else { ticks.reading(now) };
        let tat = state.tat;
        let start = tat.max(now_ticks);
        let until = |tick: u64| {
            if WHOLE {
                tick.saturating_sub(now_ticks)
            } else {
                ticks.first_reading(tick).saturating_sub(now)
            }
        };
        // `start − now`, read off the state rather than after `start`: a grant's
        // compare-and-swap waits for every value computed before it.
        let backlog = tat.saturating_sub(now_ticks);
        let capacity = limit.saturating_mul(ticks.per_permit);
        let free = || whole_permits(capacity.saturating_sub(backlog), ticks.per_permit);
        let fits = cost
            .checked_mul(ticks.per_permit)
            .filter(|&charge| charge <= capacity)
            .and_then(|charge| Some((charge, start.checked_add(charge)?)));
        let Some((charge, end)) = fits else {
            return R::refused(|| Decision::never(limit, free(), until(tat)));
        };
        // The level after the call, `end − now` in ticks: at most `end`.
        let level = backlog + charge;
        // How long until the clock reads `end − less`: with a backlog, `end` is
        // `TAT + charge`, read off the state, so that converting it to nanoseconds
        // need not wait for `now`'s conversion (`until(start)` is `until(TAT)`
        // likewise, as `until(now)` is 0).
        let until_end_less = |less: u64| {
            if backlog > 0 {
                until((tat + charge).saturating_sub(less))
            } else {
                until(end.saturating_sub(less))
            }
        };
        let wait = match self.mode {
            LeakyMode::Meter => 0,
            LeakyMode::Queue if WHOLE => backlog,
            LeakyMode::Queue => until(tat),
        };
        if level > capacity || wait > max_wait {
            // When the bucket will have drained enough (level ≤ capacity once `now`
            // reaches end − capacity). A queue's turn stays at `start` meanwhile, so
            // if that is past the caller's deadline no retry before it can help:
            // the retry is then when a caller who does not wait fits, at `start`
            // (the rule of `Decision::retry_after`).
            return R::refused(|| {
                let drained = until_end_less(capacity);
                let retry = if wait > max_wait {
                    drained.max(wait)
                } else {
                    drained
                };
                Decision::denied(limit, free(), retry, until(tat))
            });
        }
        state.tat = end;
        R::granted(
            || {
                let reset = if WHOLE { level } else { until_end_less(0) };
                let remaining = if backlog == 0 {
                    // An idle bucket: no division needed.
                    limit - cost
                } else {
                    whole_permits(capacity - level, ticks.per_permit)
                };
                Decision::allowed_after(wait, limit, remaining, reset)
            },
            || Receipt::new(end as i64, charge),
        )
    }
}
