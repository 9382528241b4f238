//! [`Limits`]: a set of any number of limits chosen at run time.

use super::erased::foreign;
use super::{index_u32, Call, DynLimit, DynState, Tally};
use crate::algorithms::{Algorithm, Decision, Pace, Plain, Receipt, Report};
use crate::clock::Nanos;
use std::fmt;

/// Any number of limits, of any algorithms, chosen at run time, that must all admit
/// a call. See the [module docs](super) for what a set guarantees and answers.
///
/// Members are indexed in the order they were added. A call costs each member one
/// virtual call and one reserve on the allowed path (plus a peek for a member whose
/// state owns heap memory), and allocates nothing unless the caller asks for the
/// grant's [`Receipt`] (one allocation holding the members'); the state ([`LimitsState`])
/// allocates two boxes per member (its state and pass 1's saved copy) when it is
/// created. An empty set admits everything.
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, Limits, SmoothBursty, SmoothWarmingUp};
/// use std::time::Duration;
/// let limits = Limits::new()
///     .with(SmoothBursty::new(10.0).unwrap())
///     .with(SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap());
/// assert_eq!(limits.len(), 2);
/// let mut state = limits.initial_state(0);
/// assert!(limits.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// let refused = limits.reserve::<Decision>(&mut state, 0, 1, 0);
/// assert_eq!(refused.limit_index(), 1); // the cold limiter: 1.375 s
/// assert_eq!(refused.retry_after_nanos(), 1_375_000_000);
/// ```
#[derive(Default)]
pub struct Limits {
    members: Vec<Box<dyn DynLimit>>,
}

impl Limits {
    /// An empty set, which admits every call, of any cost, answering `u64::MAX` for
    /// both `limit` and `remaining`.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, Limits};
    /// let empty = Limits::new();
    /// let mut state = empty.initial_state(0);
    /// let d = empty.reserve::<Decision>(&mut state, 0, 1_000_000, 0);
    /// assert!(d.is_allowed());
    /// assert_eq!((d.limit(), d.remaining()), (u64::MAX, u64::MAX));
    /// ```
    pub fn new() -> Self {
        Limits::default()
    }

    /// The set with `limit` added as its last member.
    pub fn with<A: Algorithm + Clone>(mut self, limit: A) -> Self {
        self.push(limit);
        self
    }

    /// Adds `limit` as the last member. States made before this call belong to a
    /// different set: steps on them answer never.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, Limits, SmoothBursty};
    /// let mut limits = Limits::new();
    /// let mut stale = limits.initial_state(0);
    /// limits.push(SmoothBursty::new(1.0).unwrap());
    /// assert!(limits.reserve::<Decision>(&mut stale, 0, 1, 0).is_never()); // made for the empty set
    /// let mut fresh = limits.initial_state(0);
    /// assert!(limits.reserve::<Decision>(&mut fresh, 0, 1, 0).is_allowed());
    /// ```
    pub fn push<A: Algorithm + Clone>(&mut self, limit: A) {
        self.members.push(Box::new(limit));
    }

    /// The number of member limits.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True if the set has no member (and so admits everything).
    ///
    /// ```
    /// use sluicegate::algorithms::{Limits, SmoothBursty};
    /// assert!(Limits::new().is_empty());
    /// assert!(!Limits::new().with(SmoothBursty::new(1.0).unwrap()).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The member limits, in order.
    #[cfg(any(test, feature = "redis"))]
    pub(crate) fn members(&self) -> &[Box<dyn DynLimit>] {
        &self.members
    }

    /// Puts back the members pass 1 reserved in.
    fn restore_taken(&self, state: &mut LimitsState) {
        for (index, member) in self.members.iter().enumerate() {
            if state.taken[index] {
                member.restore_dyn(&mut state.members[index], &state.backups[index]);
            }
        }
    }

    /// True if `state` was made for a set of this many members.
    fn fits(&self, state: &LimitsState) -> bool {
        let n = self.members.len();
        state.members.len() == n
            && state.backups.len() == n
            && state.pending.len() == n
            && state.taken.len() == n
    }

    /// The set's step (see the module docs); with `REPORT`, also tells `each`
    /// every member's standing (see [`Algorithm::reserve_each`]). Without it the
    /// reporting compiles away.
    #[inline(always)]
    fn step<const REPORT: bool>(
        &self,
        state: &mut LimitsState,
        Call {
            now,
            cost,
            max_wait,
            receipts,
        }: Call,
        each: &mut dyn FnMut(Decision),
    ) -> (Decision, Receipt) {
        if !self.fits(state) {
            return (foreign(), Receipt::NONE);
        }
        let mut tally = Tally::default();
        let mut refused = false;
        for (index, member) in self.members.iter().enumerate() {
            let (decision, receipt, taken) = member.attempt_dyn(
                &mut state.members[index],
                &mut state.backups[index],
                now,
                cost,
                max_wait,
                refused,
            );
            state.taken[index] = taken;
            state.pending[index] = (decision, receipt);
            refused |= !decision.is_allowed();
            tally.add(index, decision);
        }
        let report = |each: &mut dyn FnMut(Decision), state: &LimitsState, look| {
            if REPORT {
                for (index, member) in self.members.iter().enumerate() {
                    let answer = state.pending[index].0;
                    each(if look {
                        member.standing_dyn(&state.members[index], now, answer)
                    } else {
                        answer
                    });
                }
            }
        };
        if refused {
            report(each, state, false);
            self.restore_taken(state);
            return (tally.decision(), Receipt::NONE);
        }
        let mut broken = None;
        for (index, member) in self.members.iter().enumerate() {
            if !state.taken[index] {
                let grant = member.reserve_dyn(&mut state.members[index], now, cost, max_wait);
                if !grant.0.is_allowed() && broken.is_none() {
                    broken = Some(grant.0.with_limit_index(index_u32(index)));
                }
                state.pending[index] = grant;
            }
        }
        if let Some(refusal) = broken {
            // A member broke its contract (see the module docs): undo the others.
            report(each, state, false);
            self.restore_taken(state);
            for (index, member) in self.members.iter().enumerate() {
                let (grant, receipt) = &state.pending[index];
                if !state.taken[index] && grant.is_allowed() {
                    member.cancel_dyn(&mut state.members[index], now, receipt, Nanos::MAX);
                }
            }
            return (refusal, Receipt::NONE);
        }
        report(each, state, true);
        let receipt = if receipts {
            Receipt::of_members(cost, state.pending.iter().map(|(_, r)| r.clone()))
        } else {
            Receipt::NONE
        };
        (tally.decision(), receipt)
    }
}

impl Clone for Limits {
    fn clone(&self) -> Self {
        Limits {
            members: self.members.iter().map(|m| m.clone_dyn()).collect(),
        }
    }
}

impl fmt::Debug for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limits")
            .field("members", &self.members.len())
            .finish()
    }
}

/// The state of a [`Limits`] set: one boxed state per member, and the scratch
/// space a call works in, allocated with it.
///
/// ```
/// use sluicegate::algorithms::{Algorithm, Limits, SmoothBursty};
/// use sluicegate::algorithms::smooth_bursty::BurstyState;
/// let limits = Limits::new().with(SmoothBursty::new(1.0).unwrap());
/// let state = limits.initial_state(0);
/// assert!(state.member::<BurstyState>(0).is_some());
/// assert!(state.member::<u64>(0).is_none());
/// assert!(state.member::<BurstyState>(1).is_none());
/// ```
#[derive(Clone, Debug)]
pub struct LimitsState {
    members: Vec<DynState>,
    /// Pass 1's saved copies of plain-data member states.
    backups: Vec<DynState>,
    /// This call's member decisions and receipts.
    pending: Vec<(Decision, Receipt)>,
    /// Which members pass 1 reserved in already.
    taken: Vec<bool>,
}

impl LimitsState {
    /// The state of member `index`, if there is one and it is an `S`.
    pub fn member<S: 'static>(&self, index: usize) -> Option<&S> {
        self.members.get(index)?.downcast_ref()
    }

    /// The member states, in order.
    #[cfg(test)]
    pub(crate) fn members(&self) -> &[DynState] {
        &self.members
    }
}

impl Algorithm for Limits {
    type State = LimitsState;
    type Shape = Plain;

    fn initial_state(&self, now: Nanos) -> LimitsState {
        let members: Vec<DynState> = self
            .members
            .iter()
            .map(|m| m.initial_dyn_state(now))
            .collect();
        let n = members.len();
        LimitsState {
            backups: members.clone(),
            members,
            pending: vec![(Decision::never(0, 0, 0), Receipt::NONE); n],
            taken: vec![false; n],
        }
    }

    #[inline]
    fn reserve<R: Report>(
        &self,
        state: &mut LimitsState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> R {
        let step = Call {
            now,
            cost,
            max_wait,
            receipts: R::KEEPS_RECEIPT,
        };
        let (decision, receipt) = self.step::<false>(state, step, &mut |_| {});
        R::decided(decision, receipt)
    }

    fn reserve_each(
        &self,
        state: &mut LimitsState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
        each: &mut dyn FnMut(Decision),
    ) -> (Decision, Receipt) {
        // Reporting serves checks, which give nothing back: no receipt.
        let step = Call {
            now,
            cost,
            max_wait,
            receipts: false,
        };
        self.step::<true>(state, step, each)
    }

    fn peek(&self, state: &LimitsState, now: Nanos, cost: u64) -> Decision {
        if !self.fits(state) {
            return foreign();
        }
        let mut tally = Tally::default();
        for (index, (member, s)) in self.members.iter().zip(&state.members).enumerate() {
            tally.add(index, member.peek_dyn(s, now, cost));
        }
        tally.decision()
    }

    fn cancel(&self, state: &mut LimitsState, now: Nanos, receipt: &Receipt, acts_at: Nanos) {
        if !self.fits(state) || receipt.members().len() != self.members.len() {
            return;
        }
        for ((member, s), r) in self
            .members
            .iter()
            .zip(&mut state.members)
            .zip(receipt.members())
        {
            member.cancel_dyn(s, now, r, acts_at);
        }
    }

    fn pace(&self) -> Option<Pace> {
        self.members
            .iter()
            .fold(None, |pace, member| Pace::slowest(pace, member.pace_dyn()))
    }

    fn is_replenished(&self, state: &LimitsState, now: Nanos) -> bool {
        !self.fits(state)
            || self
                .members
                .iter()
                .zip(&state.members)
                .all(|(member, s)| member.is_replenished_dyn(s, now))
    }
}
