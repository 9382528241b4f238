//! [`Limits`]: a set of any number of limits chosen at run time.

use super::{index_u32, plain, Step, Tally};
use crate::algorithms::{standing, standing_with, Algorithm, Decision, Pace, Plain, Receipt};
use crate::clock::Nanos;
use std::any::Any;
use std::fmt;

/// The state of one member of a [`Limits`] set, with its type erased: any
/// algorithm's `State` in a box.
///
/// Created once per set state (one allocation per member); cloning it clones the
/// boxed state (another allocation), which the set's hot path never does.
///
/// ```
/// use sluicegate::algorithms::DynState;
/// let state = DynState::new(7_u64);
/// assert_eq!(state.downcast_ref::<u64>(), Some(&7));
/// assert_eq!(state.downcast_ref::<i32>(), None);
/// ```
pub struct DynState(Box<dyn ErasedState>);

/// What a boxed state must offer: a clone and a view as [`Any`].
trait ErasedState: Send + Sync + 'static {
    fn clone_box(&self) -> Box<dyn ErasedState>;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Clone + Send + Sync + 'static> ErasedState for T {
    fn clone_box(&self) -> Box<dyn ErasedState> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl DynState {
    /// Boxes `state`.
    pub fn new<S: Clone + Send + Sync + 'static>(state: S) -> Self {
        DynState(Box::new(state))
    }

    /// The state, if it is an `S`.
    pub fn downcast_ref<S: 'static>(&self) -> Option<&S> {
        (*self.0).as_any().downcast_ref()
    }

    /// The state, mutably, if it is an `S`.
    ///
    /// ```
    /// use sluicegate::algorithms::DynState;
    /// let mut state = DynState::new(1_u32);
    /// *state.downcast_mut::<u32>().unwrap() += 1;
    /// assert_eq!(state.downcast_ref::<u32>(), Some(&2));
    /// ```
    pub fn downcast_mut<S: 'static>(&mut self) -> Option<&mut S> {
        (*self.0).as_any_mut().downcast_mut()
    }
}

impl Clone for DynState {
    fn clone(&self) -> Self {
        DynState((*self.0).clone_box())
    }
}

impl fmt::Debug for DynState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DynState(..)")
    }
}

/// An [`Algorithm`] behind a trait object, stepping a type-erased [`DynState`]: what
/// lets a [`Limits`] set hold algorithms of different types.
///
/// Every `Algorithm + Clone` implements it; there is no need to implement it by
/// hand. Each method is the `Algorithm` method of the same name on the state
/// downcast to the algorithm's `State`. A state of another type (one not made by
/// [`initial_dyn_state`](DynLimit::initial_dyn_state) of the same algorithm) never
/// panics: steps answer never (limit 0), `cancel_dyn` does nothing and
/// `is_replenished_dyn` says true, so that a store would start the state afresh.
///
/// ```
/// use sluicegate::algorithms::{DynLimit, SmoothBursty};
/// let limit: Box<dyn DynLimit> = Box::new(SmoothBursty::new(1.0).unwrap());
/// let mut state = limit.initial_dyn_state(0);
/// assert!(limit.reserve_dyn(&mut state, 0, 1, 0).0.is_allowed());
/// assert!(!limit.peek_dyn(&state, 0, 1).is_allowed());
/// ```
pub trait DynLimit: Send + Sync + 'static {
    /// [`Algorithm::initial_state`], boxed.
    fn initial_dyn_state(&self, now: Nanos) -> DynState;

    /// [`Algorithm::reserve_with_receipt`].
    fn reserve_dyn(
        &self,
        state: &mut DynState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> (Decision, Receipt);

    /// [`Algorithm::peek`].
    fn peek_dyn(&self, state: &DynState, now: Nanos, cost: u64) -> Decision;

    /// [`Algorithm::standing`] after a step on `state` at `now` that answered
    /// `answer`. The default applies the default rule through
    /// [`peek_dyn`](DynLimit::peek_dyn); every `Algorithm` answers its own.
    ///
    /// ```
    /// use sluicegate::algorithms::{DynLimit, FixedWindow};
    /// use std::time::Duration;
    /// let limit: Box<dyn DynLimit> = Box::new(FixedWindow::new(3, Duration::from_secs(1)).unwrap());
    /// let mut state = limit.initial_dyn_state(0);
    /// let (grant, _) = limit.reserve_dyn(&mut state, 0, 1, 0);
    /// let standing = limit.standing_dyn(&state, 0, grant);
    /// assert_eq!((standing.remaining(), standing.retry_after()), (2, Duration::from_secs(1)));
    /// ```
    fn standing_dyn(&self, state: &DynState, now: Nanos, answer: Decision) -> Decision {
        standing_with(answer, &mut |cost| self.peek_dyn(state, now, cost))
    }

    /// What [`reserve_dyn`](DynLimit::reserve_dyn) would answer, without changing
    /// `state`: a peek when `max_wait` is 0 or the peek admits; otherwise a reserve on
    /// a copy of the (unboxed) state.
    fn decide_dyn(&self, state: &DynState, now: Nanos, cost: u64, max_wait: Nanos) -> Decision;

    /// Pass 1 of a set's call. If no member has `refused` yet and the algorithm's
    /// state is plain data (it owns no heap memory, so copying it cannot allocate),
    /// copies `state` into `backup` and reserves: answers the decision, its receipt
    /// and `true` if allowed; a refusal leaves `state` as it was and answers `false`.
    /// Otherwise answers [`decide_dyn`](DynLimit::decide_dyn) and `false`, changing
    /// nothing.
    fn attempt_dyn(
        &self,
        state: &mut DynState,
        backup: &mut DynState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
        refused: bool,
    ) -> (Decision, Receipt, bool);

    /// Puts back into `state` the copy that [`attempt_dyn`](DynLimit::attempt_dyn)
    /// saved in `backup`, undoing its reservation exactly.
    fn restore_dyn(&self, state: &mut DynState, backup: &DynState);

    /// [`Algorithm::cancel`].
    fn cancel_dyn(&self, state: &mut DynState, now: Nanos, receipt: &Receipt, acts_at: Nanos);

    /// [`Algorithm::is_replenished`].
    fn is_replenished_dyn(&self, state: &DynState, now: Nanos) -> bool;

    /// [`Algorithm::pace`].
    fn pace_dyn(&self) -> Option<Pace>;

    /// A boxed copy of the configuration.
    fn clone_dyn(&self) -> Box<dyn DynLimit>;

    /// The limit itself, to downcast to its concrete type: how a store that runs
    /// known algorithms its own way (the Redis store) recognizes a member.
    ///
    /// ```
    /// use sluicegate::algorithms::{DynLimit, SmoothBursty};
    /// let limit: Box<dyn DynLimit> = Box::new(SmoothBursty::new(1.0).unwrap());
    /// assert!(limit.as_any().downcast_ref::<SmoothBursty>().is_some());
    /// ```
    fn as_any(&self) -> &dyn std::any::Any;
}

/// The answer to a step on a state of the wrong type.
fn foreign() -> Decision {
    Decision::never(0, 0, u64::MAX)
}

impl<A: Algorithm + Clone> DynLimit for A {
    fn initial_dyn_state(&self, now: Nanos) -> DynState {
        DynState::new(self.initial_state(now))
    }

    #[inline]
    fn reserve_dyn(
        &self,
        state: &mut DynState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> (Decision, Receipt) {
        match state.downcast_mut::<A::State>() {
            Some(state) => self.reserve_with_receipt(state, now, cost, max_wait),
            None => (foreign(), Receipt::NONE),
        }
    }

    #[inline]
    fn peek_dyn(&self, state: &DynState, now: Nanos, cost: u64) -> Decision {
        match state.downcast_ref::<A::State>() {
            Some(state) => self.peek(state, now, cost),
            None => foreign(),
        }
    }

    fn standing_dyn(&self, state: &DynState, now: Nanos, answer: Decision) -> Decision {
        match state.downcast_ref::<A::State>() {
            Some(state) => standing(self, state, now, answer),
            None => answer,
        }
    }

    #[inline]
    fn decide_dyn(&self, state: &DynState, now: Nanos, cost: u64, max_wait: Nanos) -> Decision {
        match state.downcast_ref::<A::State>() {
            Some(state) => Step {
                now,
                cost,
                max_wait,
                receipts: false,
            }
            .decide(self, state),
            None => foreign(),
        }
    }

    #[inline]
    fn attempt_dyn(
        &self,
        state: &mut DynState,
        backup: &mut DynState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
        refused: bool,
    ) -> (Decision, Receipt, bool) {
        if refused || !plain::<A::State>() {
            let decision = self.decide_dyn(state, now, cost, max_wait);
            return (decision, Receipt::NONE, false);
        }
        let (Some(state), Some(backup)) = (
            state.downcast_mut::<A::State>(),
            backup.downcast_mut::<A::State>(),
        ) else {
            return (foreign(), Receipt::NONE, false);
        };
        backup.clone_from(state);
        let (decision, receipt) = self.reserve_with_receipt(state, now, cost, max_wait);
        if decision.is_allowed() {
            (decision, receipt, true)
        } else {
            state.clone_from(backup); // a refusal changes nothing; this makes sure of it
            (decision, Receipt::NONE, false)
        }
    }

    #[inline]
    fn restore_dyn(&self, state: &mut DynState, backup: &DynState) {
        if let (Some(state), Some(backup)) = (
            state.downcast_mut::<A::State>(),
            backup.downcast_ref::<A::State>(),
        ) {
            state.clone_from(backup);
        }
    }

    fn cancel_dyn(&self, state: &mut DynState, now: Nanos, receipt: &Receipt, acts_at: Nanos) {
        if let Some(state) = state.downcast_mut::<A::State>() {
            self.cancel(state, now, receipt, acts_at);
        }
    }

    fn is_replenished_dyn(&self, state: &DynState, now: Nanos) -> bool {
        state
            .downcast_ref::<A::State>()
            .is_none_or(|state| self.is_replenished(state, now))
    }

    fn pace_dyn(&self) -> Option<Pace> {
        self.pace()
    }

    fn clone_dyn(&self) -> Box<dyn DynLimit> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

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
/// use sluicegate::algorithms::{Algorithm, Limits, SmoothBursty, SmoothWarmingUp};
/// use std::time::Duration;
/// let limits = Limits::new()
///     .with(SmoothBursty::new(10.0).unwrap())
///     .with(SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap());
/// assert_eq!(limits.len(), 2);
/// let mut state = limits.initial_state(0);
/// assert!(limits.reserve(&mut state, 0, 1, 0).is_allowed());
/// let refused = limits.reserve(&mut state, 0, 1, 0);
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
    /// use sluicegate::algorithms::{Algorithm, Limits};
    /// let empty = Limits::new();
    /// let mut state = empty.initial_state(0);
    /// let d = empty.reserve(&mut state, 0, 1_000_000, 0);
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
    /// different set: steps on them answer never (see [`DynLimit`]).
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Limits, SmoothBursty};
    /// let mut limits = Limits::new();
    /// let mut stale = limits.initial_state(0);
    /// limits.push(SmoothBursty::new(1.0).unwrap());
    /// assert!(limits.reserve(&mut stale, 0, 1, 0).is_never()); // made for the empty set
    /// let mut fresh = limits.initial_state(0);
    /// assert!(limits.reserve(&mut fresh, 0, 1, 0).is_allowed());
    /// ```
    pub fn push<A: Algorithm + Clone>(&mut self, limit: A) {
        self.members.push(Box::new(limit));
    }

    /// A set of already boxed limits, in order.
    ///
    /// ```
    /// use sluicegate::algorithms::{DynLimit, Limits, SmoothBursty};
    /// let boxed: Vec<Box<dyn DynLimit>> = vec![Box::new(SmoothBursty::new(1.0).unwrap())];
    /// assert_eq!(Limits::from_boxed(boxed).len(), 1);
    /// ```
    pub fn from_boxed(members: Vec<Box<dyn DynLimit>>) -> Self {
        Limits { members }
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
    ///
    /// ```
    /// use sluicegate::algorithms::{Limits, SmoothBursty};
    /// let limits = Limits::new().with(SmoothBursty::new(1.0).unwrap());
    /// let mut state = limits.members()[0].initial_dyn_state(0);
    /// assert!(limits.members()[0].reserve_dyn(&mut state, 0, 1, 0).0.is_allowed());
    /// ```
    pub fn members(&self) -> &[Box<dyn DynLimit>] {
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
        Step {
            now,
            cost,
            max_wait,
            receipts,
        }: Step,
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

/// The state of a [`Limits`] set: one [`DynState`] per member, and the scratch
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
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Limits, SmoothBursty};
    /// let limits = Limits::new()
    ///     .with(SmoothBursty::new(1.0).unwrap())
    ///     .with(SmoothBursty::new(2.0).unwrap());
    /// assert_eq!(limits.initial_state(0).members().len(), 2);
    /// ```
    pub fn members(&self) -> &[DynState] {
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
    fn reserve(&self, state: &mut LimitsState, now: Nanos, cost: u64, max_wait: Nanos) -> Decision {
        let step = Step {
            now,
            cost,
            max_wait,
            receipts: false,
        };
        self.step::<false>(state, step, &mut |_| {}).0
    }

    fn reserve_with_receipt(
        &self,
        state: &mut LimitsState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> (Decision, Receipt) {
        let step = Step {
            now,
            cost,
            max_wait,
            receipts: true,
        };
        self.step::<false>(state, step, &mut |_| {})
    }

    fn reserve_each(
        &self,
        state: &mut LimitsState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
        each: &mut dyn FnMut(Decision),
    ) -> (Decision, Receipt) {
        let step = Step {
            now,
            cost,
            max_wait,
            receipts: true,
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
