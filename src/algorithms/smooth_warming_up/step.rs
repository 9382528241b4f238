//! The warming-up bucket's step: the throttling curve (what stored permits cost),
//! Guava's resync and reservation, decided once and then dressed as a decision,
//! so that the full step and the lean take cannot disagree.

use super::{SmoothWarmingUp, WarmingUpState};
use crate::algorithms::smooth_bursty::smooth_limit;
use crate::algorithms::until;
use crate::clock::Nanos;

impl SmoothWarmingUp {
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
    pub(super) fn resync(&self, state: &WarmingUpState, now: i64) -> WarmingUpState {
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
    pub(super) fn limit(&self) -> u64 {
        if self.stable_micros == 0.0 {
            u64::MAX
        } else {
            smooth_limit(self.max_permits)
        }
    }

    #[inline]
    pub(super) fn reset_after(&self, state: &WarmingUpState, now: i64) -> Nanos {
        let missing = (self.max_permits - state.stored).max(0.0);
        let refill = (missing * self.cool_down_nanos()) as u64;
        until(now, state.next_free).saturating_add(refill)
    }
}

/// `1 + 2^-40`: a relative margin far above the error of a few float operations
/// (each at most `2^-53`), used to know without dividing that idle time has filled
/// the bucket.
const FILLS_FOR_SURE: f64 = 1.0 + 1.0 / (1u64 << 40) as f64;

/// What one reservation decided, before it is dressed as a
/// [`Decision`](crate::algorithms::Decision): the core shared by
/// [`Algorithm::reserve`](crate::algorithms::Algorithm::reserve) and the lean
/// `WordEncoded::plan_take`, so the
/// two cannot disagree.
pub(super) enum Outcome {
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
    pub(super) fn step(
        &self,
        state: &WarmingUpState,
        now: i64,
        cost: u64,
        max_wait: Nanos,
    ) -> Outcome {
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
        Outcome::Allowed {
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
    pub(super) fn admit(
        state: &WarmingUpState,
        now: i64,
        max_wait: Nanos,
    ) -> Result<Nanos, Outcome> {
        let next_free = state.next_free.max(now);
        if next_free == i64::MAX {
            return Err(Outcome::Never);
        }
        let wait = until(now, next_free);
        if wait > max_wait {
            return Err(Outcome::Denied { wait });
        }
        Ok(wait)
    }
}
