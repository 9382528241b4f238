//! [`Limits`]: a set of any number of limits chosen at run time.

use super::erased::foreign;
use super::{leaf_index, DynLimit, DynState, Tally};
use crate::algorithms::sealed::MemberCall;
use crate::algorithms::{Algorithm, Decision, Pace, Plain, Receipt, Report};
use crate::clock::Nanos;
use std::fmt;

/// Any number of limits, of any algorithms, chosen at run time, that must all admit
/// a call. See the [module docs](super) for what a set guarantees and answers.
///
/// Members count in the order they were added; a decision's
/// [`limit_index`](Decision::limit_index) counts leaf limits, depth first, so a
/// member that is itself a set counts its own limits in its place. A call costs
/// each member one virtual call and one reserve on the allowed path (plus a peek
/// for a member whose state owns heap memory), and allocates nothing unless the
/// caller asks for the grant's [`Receipt`] (one allocation holding the members');
/// the state ([`LimitsState`]) allocates two boxes per member (its state and pass
/// 1's saved copy) when it is created. An empty set admits everything.
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
///
/// With a nested set as its first member, the cold limiter is limit 2:
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, AllOf, Limits, SmoothBursty, SmoothWarmingUp};
/// use std::time::Duration;
/// let rate = |r| SmoothBursty::new(r).unwrap();
/// let limits = Limits::new()
///     .with(AllOf::new((rate(10.0), rate(20.0))))
///     .with(SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap());
/// assert_eq!((limits.len(), limits.limit_count()), (2, 3));
/// let mut state = limits.initial_state(0);
/// assert!(limits.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// assert_eq!(limits.reserve::<Decision>(&mut state, 0, 1, 0).limit_index(), 2);
/// ```
#[derive(Default)]
pub struct Limits {
    members: Vec<Box<dyn DynLimit>>,
    /// Each member's [`limit_count`](Algorithm::limit_count), by which limit
    /// indices count leaf limits; kept rather than asked on every call.
    counts: Vec<usize>,
    /// Their sum, the set's own limit count.
    leaves: usize,
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

    /// The set with `limit` added as its last member, as
    /// [`push`](Limits::push) adds it: its limits are counted after those already
    /// in the set.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Decision, FixedWindow, Limits};
    /// use std::time::Duration;
    /// let limits = Limits::new()
    ///     .with(FixedWindow::new(10, Duration::from_secs(1)).unwrap())
    ///     .with(FixedWindow::new(1, Duration::from_secs(60)).unwrap());
    /// let mut state = limits.initial_state(0);
    /// assert!(limits.reserve::<bool>(&mut state, 0, 1, 0));
    /// // Refused by the limit added last: limit 1, of 1 per minute.
    /// let refused: Decision = limits.reserve(&mut state, 0, 1, 0);
    /// assert_eq!((refused.limit_index(), refused.limit()), (1, 1));
    /// ```
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
        let count = limit.limit_count();
        self.members.push(Box::new(limit));
        self.counts.push(count);
        self.leaves = self.leaves.saturating_add(count);
    }

    /// The number of member limits: a member that is itself a set counts as one
    /// here, where [`limit_count`](Algorithm::limit_count) counts its limits.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, AllOf, Limits, SmoothBursty};
    /// let rate = |r| SmoothBursty::new(r).unwrap();
    /// assert_eq!(Limits::new().len(), 0);
    /// let limits = Limits::new().with(rate(1.0)).with(AllOf::new((rate(2.0), rate(3.0))));
    /// assert_eq!((limits.len(), limits.limit_count()), (2, 3));
    /// ```
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

    /// The limit index of member `index`'s decision, its leaf limits starting
    /// at `offset` (see [`leaf_index`]).
    #[inline]
    fn index_of(&self, index: usize, offset: usize, decision: Decision) -> u32 {
        leaf_index(offset, self.counts[index], decision)
    }

    /// Reports each member's limits' answers to a refused call (see
    /// [`Algorithm::answer_leaves`]), on the states the refusal left.
    fn answer_each(&self, state: &LimitsState, call: MemberCall, each: &mut dyn FnMut(Decision)) {
        for (index, member) in self.members.iter().enumerate() {
            let answer = Some(state.pending[index].0);
            member.answer_leaves_dyn(&state.members[index], call, answer, each);
        }
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
    /// how every limit stands (see [`Algorithm::reserve_each`]), a nested set's
    /// limits in its place. Without it the reporting compiles away.
    #[inline(always)]
    fn step<const REPORT: bool>(
        &self,
        state: &mut LimitsState,
        call: MemberCall,
        each: &mut dyn FnMut(Decision),
    ) -> (Decision, Receipt) {
        if !self.fits(state) {
            return (foreign(), Receipt::NONE);
        }
        let MemberCall {
            now,
            cost,
            receipts,
            ..
        } = call;
        // What nested sets report as they reserve, held until the answer is
        // known, and where: (member, start, end). Allocated only once one reports.
        let mut held: Vec<Decision> = Vec::new();
        let mut spans: Vec<(usize, usize, usize)> = Vec::new();
        let mut tally = Tally::default();
        let mut refused = false;
        let mut offset = 0;
        for (index, member) in self.members.iter().enumerate() {
            let start = held.len();
            let mut keep = |d| held.push(d);
            let attempted = member.attempt_dyn(
                &mut state.members[index],
                &mut state.backups[index],
                call,
                refused,
                if REPORT { Some(&mut keep) } else { None },
            );
            if attempted.reported {
                spans.push((index, start, held.len()));
            }
            let decision = attempted.decision;
            state.taken[index] = attempted.taken;
            state.pending[index] = (decision, attempted.receipt);
            refused |= !decision.is_allowed();
            tally.add(self.index_of(index, offset, decision), decision);
            offset += self.counts[index];
        }
        if refused {
            self.restore_taken(state);
            if REPORT {
                self.answer_each(state, call, each);
            }
            return (tally.decision(), Receipt::NONE);
        }
        let mut broken = None;
        let mut offset = 0;
        for (index, member) in self.members.iter().enumerate() {
            if !state.taken[index] {
                let start = held.len();
                let leaves = if REPORT {
                    let keep = &mut |d| held.push(d);
                    member.reserve_leaves_dyn(&mut state.members[index], call, keep)
                } else {
                    None
                };
                let grant = match leaves {
                    Some(decision) => {
                        spans.push((index, start, held.len()));
                        (decision, Receipt::NONE)
                    }
                    None => member.reserve_dyn(&mut state.members[index], call),
                };
                if !grant.0.is_allowed() && broken.is_none() {
                    broken = Some(
                        grant
                            .0
                            .with_limit_index(self.index_of(index, offset, grant.0)),
                    );
                }
                state.pending[index] = grant;
            }
            offset += self.counts[index];
        }
        if let Some(refusal) = broken {
            // A member broke its contract (see the module docs): undo the others.
            self.restore_taken(state);
            for (index, member) in self.members.iter().enumerate() {
                let (grant, receipt) = &state.pending[index];
                if !state.taken[index] && grant.is_allowed() {
                    member.cancel_dyn(&mut state.members[index], now, receipt, Nanos::MAX);
                }
            }
            if REPORT {
                self.answer_each(state, call, each);
            }
            return (refusal, Receipt::NONE);
        }
        if REPORT {
            for (index, member) in self.members.iter().enumerate() {
                match spans.iter().find(|(m, ..)| *m == index) {
                    Some(&(_, start, end)) => held[start..end].iter().for_each(|d| each(*d)),
                    None => {
                        let grant = state.pending[index].0;
                        each(member.standing_dyn(&state.members[index], now, grant));
                    }
                }
            }
        }
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
            counts: self.counts.clone(),
            leaves: self.leaves,
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
    /// The state of member `index`, if there is one and it is an `S` (the state
    /// type of the algorithm added at that place); `None` otherwise.
    ///
    /// ```
    /// use sluicegate::algorithms::fixed_window::FixedWindowState;
    /// use sluicegate::algorithms::{Algorithm, FixedWindow, Limits};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(3, Duration::from_secs(1)).unwrap();
    /// let limits = Limits::new().with(window);
    /// let mut state = limits.initial_state(0);
    /// assert!(limits.reserve::<bool>(&mut state, 0, 2, 0));
    /// let member = state.member::<FixedWindowState>(0).unwrap();
    /// assert_eq!(window.count(member, 0), 2);
    /// assert!(state.member::<FixedWindowState>(1).is_none()); // no such member
    /// assert!(state.member::<u64>(0).is_none()); // not its state type
    /// ```
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
        let step = MemberCall {
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
        let step = MemberCall {
            now,
            cost,
            max_wait,
            receipts: false,
        };
        self.step::<true>(state, step, each)
    }

    #[inline]
    fn limit_count(&self) -> usize {
        self.leaves
    }

    fn reserve_leaves(
        &self,
        state: &mut LimitsState,
        call: MemberCall,
        each: &mut dyn FnMut(Decision),
    ) -> Option<Decision> {
        let MemberCall {
            now,
            cost,
            max_wait,
            ..
        } = call;
        Some(self.reserve_each(state, now, cost, max_wait, each).0)
    }

    /// A state made for another set reports nothing, as its
    /// [`reserve_each`](Algorithm::reserve_each) does.
    fn answer_leaves(
        &self,
        state: &LimitsState,
        call: MemberCall,
        _answer: Option<Decision>,
        each: &mut dyn FnMut(Decision),
    ) {
        if !self.fits(state) {
            return;
        }
        for (member, s) in self.members.iter().zip(&state.members) {
            member.answer_leaves_dyn(s, call, None, each);
        }
    }

    fn peek(&self, state: &LimitsState, now: Nanos, cost: u64) -> Decision {
        if !self.fits(state) {
            return foreign();
        }
        let mut tally = Tally::default();
        let mut offset = 0;
        for (index, (member, s)) in self.members.iter().zip(&state.members).enumerate() {
            let answer = member.peek_dyn(s, now, cost);
            tally.add(self.index_of(index, offset, answer), answer);
            offset += self.counts[index];
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
