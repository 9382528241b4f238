//! The bursty bucket's step: Guava's resync and reservation on the folded instant
//! `T`, decided once and then dressed as a decision, so that the full step, the
//! check ([`Settle`]) and the lean take cannot disagree.

use super::{BurstyState, SmoothBursty};
use crate::algorithms::words::Settle;
use crate::algorithms::{signed, until, Decision, Receipt, Report};
use crate::clock::Nanos;

/// What one reservation decided, before it is dressed as a [`Decision`]: the core
/// shared by [`Algorithm::reserve`](crate::algorithms::Algorithm::reserve), the
/// check ([`Settle`]) and the lean
/// `WordEncoded::plan_take`, so that
/// they cannot disagree.
#[derive(Clone, Copy, Debug)]
pub(super) enum Outcome {
    Never,
    /// Refused: `tat` is the resynced state, `wait` how long the caller would wait.
    Denied {
        tat: i64,
        wait: Nanos,
    },
    /// Granted after `wait`; the state becomes `next`, `charge` nanoseconds later
    /// than it was; `full` if the bucket held a whole burst.
    Allowed {
        wait: Nanos,
        next: i64,
        charge: i64,
        full: bool,
    },
}

/// An [`Outcome`] and the instant (signed) it was taken at, with the burst's span: all
/// that [`describe`](Settle::describe) needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BurstySettled {
    now: i64,
    burst: i64,
    step: Outcome,
}

/// `max(tat, now − burst) + charge`, saturating, for a valid configuration
/// (`charge` and `burst` not negative): written as the later of `tat + charge` and
/// `now + (charge − burst)`, so that the compare-and-swap that publishes it waits
/// for one addition and one comparison after the clock read, not for a resync and
/// then a saturating addition whose direction is known only from the sum's sign.
/// (Words from elsewhere give some value, never a panic.)
#[inline(always)]
fn later_by(tat: i64, now: i64, charge: i64, burst: i64) -> i64 {
    let from_now = match now.overflowing_add(charge.wrapping_sub(burst)) {
        (sum, false) => sum,
        (_, true) => i64::MAX,
    };
    let from_tat = match tat.overflowing_add(charge) {
        (sum, false) => sum,
        (_, true) => i64::MAX,
    };
    from_tat.max(from_now)
}

impl SmoothBursty {
    /// Guava's resync and reservation on the folded state `tat` (see the module docs).
    ///
    /// A grant's compare-and-swap, a locked instruction, runs only once every
    /// instruction before it has: what a grant costs beyond the clock read is the
    /// depth of this code after `now`, not its length. So nothing here waits for the
    /// resync `max(tat, now − burst)`: as the burst is not negative, the resync never
    /// moves `tat` past `now`, and the wait and the end of time can be read off `tat`
    /// itself.
    #[inline(always)]
    pub(super) fn step(
        &self,
        tat: i64,
        now: i64,
        burst: i64,
        cost: u64,
        max_wait: Nanos,
    ) -> Outcome {
        if tat == i64::MAX || (now == i64::MAX && burst == 0) {
            return Outcome::Never;
        }
        let wait = until(now, tat);
        let oldest = now.saturating_sub(burst);
        if wait > max_wait {
            return Outcome::Denied {
                tat: tat.max(oldest),
                wait,
            };
        }
        let charge = if cost == 1 {
            self.one_charge
        } else {
            self.cost_nanos(cost)
        };
        Outcome::Allowed {
            wait,
            next: later_by(tat, now, charge, burst),
            charge,
            full: tat <= oldest,
        }
    }

    /// The step at any wait, applied to the state if it grants.
    #[inline(always)]
    pub(super) fn settle_within(
        &self,
        state: &mut BurstyState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> BurstySettled {
        let now = signed(now);
        let burst = self.burst_nanos();
        let step = self.step(state.tat, now, burst, cost, max_wait);
        if let Outcome::Allowed { next, .. } = step {
            state.tat = next;
        }
        BurstySettled { now, burst, step }
    }

    /// A settled step in the caller's report: a grant's decision and receipt are
    /// built only if the report reads them.
    #[inline(always)]
    pub(super) fn report<R: Report>(&self, settled: &BurstySettled) -> R {
        match settled.step {
            Outcome::Allowed { next, charge, .. } => R::granted(
                || self.describe(settled),
                || Receipt::new(next, charge as u64),
            ),
            _ => R::refused(|| self.describe(settled)),
        }
    }
}

impl Settle for SmoothBursty {
    type Settled = BurstySettled;

    #[inline(always)]
    fn settle(&self, state: &mut BurstyState, now: Nanos, cost: u64) -> BurstySettled {
        self.settle_within(state, now, cost, 0)
    }

    #[inline(always)]
    fn describe(&self, settled: &BurstySettled) -> Decision {
        let BurstySettled { now, burst, step } = *settled;
        let limit = self.limit();
        match step {
            Outcome::Never => Decision::never(limit, 0, u64::MAX),
            Outcome::Denied { tat, wait } => {
                let reset = until(now, tat.saturating_add(burst));
                Decision::denied(limit, 0, wait, reset)
            }
            Outcome::Allowed {
                wait,
                next,
                charge,
                full,
            } => {
                let reset = until(now, next.saturating_add(burst));
                let remaining = if full && charge == self.one_charge {
                    self.one_from_full
                } else {
                    self.remaining(next, now)
                };
                Decision::allowed_after(wait, limit, remaining, reset)
            }
        }
    }
}
