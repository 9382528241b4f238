//! A limit with its types erased: what lets [`Limits`](super::Limits) hold members
//! of any algorithms in one vector.

use super::{member_peek, member_standing, plain};
use crate::algorithms::sealed::MemberCall;
use crate::algorithms::{standing_with, Algorithm, Decision, Pace, Receipt};
use crate::clock::Nanos;
use std::any::Any;
use std::fmt;

/// The state of one member of a [`Limits`](super::Limits) set, with its type erased: any
/// algorithm's `State` in a box.
///
/// Created once per set state (one allocation per member); cloning it clones the
/// boxed state (another allocation), which the set's hot path never does.
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
/// lets a [`Limits`](super::Limits) set hold algorithms of different types.
///
/// Every `Algorithm + Clone` implements it; there is no need to implement it by
/// hand. Each method is the `Algorithm` method of the same name on the state
/// downcast to the algorithm's `State`. A state of another type (one not made by
/// [`initial_dyn_state`](DynLimit::initial_dyn_state) of the same algorithm) never
/// panics: steps answer never (limit 0), `cancel_dyn` does nothing and
/// `is_replenished_dyn` says true, so that a store would start the state afresh.
pub trait DynLimit: Send + Sync + 'static {
    /// [`Algorithm::initial_state`], boxed.
    fn initial_dyn_state(&self, now: Nanos) -> DynState;

    /// [`Algorithm::reserve`], with the grant's receipt if the call keeps one.
    fn reserve_dyn(&self, state: &mut DynState, call: MemberCall) -> (Decision, Receipt);

    /// [`Algorithm::peek`] as a set's member answers it: as if its refusals
    /// recorded nothing ([`Algorithm::peek_unrecorded`]), since a set's refusal
    /// records nothing in any member.
    fn peek_dyn(&self, state: &DynState, now: Nanos, cost: u64) -> Decision;

    /// [`Algorithm::standing`] after a step on `state` at `now` that answered
    /// `answer`, by the member's answers ([`peek_dyn`](DynLimit::peek_dyn)). The
    /// default applies the default rule; every `Algorithm` answers its own.
    fn standing_dyn(&self, state: &DynState, now: Nanos, answer: Decision) -> Decision {
        standing_with(answer, &mut |cost| self.peek_dyn(state, now, cost))
    }

    /// What [`reserve_dyn`](DynLimit::reserve_dyn) would answer, without changing
    /// `state`, as a set's member answers: a [`peek_dyn`](DynLimit::peek_dyn) when
    /// `max_wait` is 0 or the peek admits; otherwise a reserve on a copy of the
    /// (unboxed) state.
    fn decide_dyn(&self, state: &DynState, now: Nanos, cost: u64, max_wait: Nanos) -> Decision;

    /// Pass 1 of a set's call. If no member has `refused` yet and the algorithm's
    /// state is plain data (it owns no heap memory, so copying it cannot allocate),
    /// copies `state` into `backup` and reserves: answers the decision, its receipt
    /// and `taken` if allowed; a refusal leaves `state` as it was and answers the
    /// refusal as a set's member answers it (see [`peek_dyn`](DynLimit::peek_dyn)).
    /// Otherwise answers [`decide_dyn`](DynLimit::decide_dyn), changing nothing.
    /// In a reporting step (`report`), a set that reserves reports its limits
    /// there ([`reserve_leaves_dyn`](DynLimit::reserve_leaves_dyn)), and its grant
    /// says so (`reported`).
    fn attempt_dyn(
        &self,
        state: &mut DynState,
        backup: &mut DynState,
        call: MemberCall,
        refused: bool,
        report: Option<&mut dyn FnMut(Decision)>,
    ) -> Attempted;

    /// [`Algorithm::reserve_leaves`]: `None` for a single limit (or a state of
    /// another type, which [`reserve_dyn`](DynLimit::reserve_dyn) then answers).
    fn reserve_leaves_dyn(
        &self,
        state: &mut DynState,
        call: MemberCall,
        each: &mut dyn FnMut(Decision),
    ) -> Option<Decision>;

    /// [`Algorithm::answer_leaves`]; on a state of another type, `answer` (or
    /// never) reported once.
    fn answer_leaves_dyn(
        &self,
        state: &DynState,
        call: MemberCall,
        answer: Option<Decision>,
        each: &mut dyn FnMut(Decision),
    );

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
    #[cfg(any(test, feature = "redis"))]
    fn as_any(&self) -> &dyn std::any::Any;
}

/// What pass 1 of a set's call did with one boxed member
/// ([`DynLimit::attempt_dyn`]).
pub struct Attempted {
    /// The member's answer to the call.
    pub decision: Decision,
    /// Its grant's receipt, if it reserved ([`Receipt::NONE`] otherwise).
    pub receipt: Receipt,
    /// Whether it reserved already (its state before is in the backup).
    pub taken: bool,
    /// Whether it reserved as a set reporting its limits.
    pub reported: bool,
}

/// The answer to a step on a state of the wrong type.
pub(super) fn foreign() -> Decision {
    Decision::never(0, 0, u64::MAX)
}

impl<A: Algorithm + Clone> DynLimit for A {
    fn initial_dyn_state(&self, now: Nanos) -> DynState {
        DynState::new(self.initial_state(now))
    }

    #[inline]
    fn reserve_dyn(&self, state: &mut DynState, call: MemberCall) -> (Decision, Receipt) {
        match state.downcast_mut::<A::State>() {
            Some(state) => call.reserve(self, state),
            None => (foreign(), Receipt::NONE),
        }
    }

    #[inline]
    fn peek_dyn(&self, state: &DynState, now: Nanos, cost: u64) -> Decision {
        match state.downcast_ref::<A::State>() {
            Some(state) => member_peek(self, state, now, cost),
            None => foreign(),
        }
    }

    fn standing_dyn(&self, state: &DynState, now: Nanos, answer: Decision) -> Decision {
        match state.downcast_ref::<A::State>() {
            Some(state) => member_standing(self, state, now, answer),
            None => answer,
        }
    }

    #[inline]
    fn decide_dyn(&self, state: &DynState, now: Nanos, cost: u64, max_wait: Nanos) -> Decision {
        match state.downcast_ref::<A::State>() {
            Some(state) => MemberCall {
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
        call: MemberCall,
        refused: bool,
        report: Option<&mut dyn FnMut(Decision)>,
    ) -> Attempted {
        let MemberCall {
            now,
            cost,
            max_wait,
            ..
        } = call;
        let looked = |decision| Attempted {
            decision,
            receipt: Receipt::NONE,
            taken: false,
            reported: false,
        };
        if refused || !plain::<A::State>() {
            return looked(self.decide_dyn(state, now, cost, max_wait));
        }
        let (Some(state), Some(backup)) = (
            state.downcast_mut::<A::State>(),
            backup.downcast_mut::<A::State>(),
        ) else {
            return looked(foreign());
        };
        backup.clone_from(state);
        let leaves = report.and_then(|each| self.reserve_leaves(state, call, each));
        let reported = leaves.is_some();
        let (decision, receipt) = match leaves {
            Some(decision) => (decision, Receipt::NONE),
            None => call.reserve(self, state),
        };
        if decision.is_allowed() {
            Attempted {
                decision,
                receipt,
                taken: true,
                reported,
            }
        } else {
            state.clone_from(backup); // the set's refusal records nothing in any member
            let unrecorded = self.peek_unrecorded(state, now, cost);
            looked(unrecorded.unwrap_or(decision))
        }
    }

    fn reserve_leaves_dyn(
        &self,
        state: &mut DynState,
        call: MemberCall,
        each: &mut dyn FnMut(Decision),
    ) -> Option<Decision> {
        let state = state.downcast_mut::<A::State>()?;
        self.reserve_leaves(state, call, each)
    }

    fn answer_leaves_dyn(
        &self,
        state: &DynState,
        call: MemberCall,
        answer: Option<Decision>,
        each: &mut dyn FnMut(Decision),
    ) {
        match state.downcast_ref::<A::State>() {
            Some(state) => self.answer_leaves(state, call, answer, each),
            None => each(answer.unwrap_or_else(foreign)),
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

    #[cfg(any(test, feature = "redis"))]
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::{DynLimit, DynState, MemberCall};
    use crate::algorithms::{FixedWindow, Limits, SmoothBursty};
    use std::time::Duration;

    #[test]
    fn a_boxed_state_downcasts_to_its_own_type_only() {
        let state = DynState::new(7_u64);
        assert_eq!(state.downcast_ref::<u64>(), Some(&7));
        assert_eq!(state.downcast_ref::<i32>(), None);
        let mut state = DynState::new(1_u32);
        *state.downcast_mut::<u32>().unwrap() += 1;
        assert_eq!(state.downcast_ref::<u32>(), Some(&2));
    }

    /// One permit at instant 0, no wait, the receipt kept.
    const ONE_AT_ZERO: MemberCall = MemberCall {
        now: 0,
        cost: 1,
        max_wait: 0,
        receipts: true,
    };

    #[test]
    fn a_boxed_limit_steps_its_boxed_state() {
        let limit: Box<dyn DynLimit> = Box::new(SmoothBursty::new(1.0).unwrap());
        let mut state = limit.initial_dyn_state(0);
        assert!(limit.reserve_dyn(&mut state, ONE_AT_ZERO).0.is_allowed());
        assert!(!limit.peek_dyn(&state, 0, 1).is_allowed());
        assert!(limit.as_any().downcast_ref::<SmoothBursty>().is_some());
    }

    #[test]
    fn a_boxed_limit_reports_its_standing() {
        let limit: Box<dyn DynLimit> =
            Box::new(FixedWindow::new(3, Duration::from_secs(1)).unwrap());
        let mut state = limit.initial_dyn_state(0);
        let (grant, _) = limit.reserve_dyn(&mut state, ONE_AT_ZERO);
        let standing = limit.standing_dyn(&state, 0, grant);
        assert_eq!(
            (standing.remaining(), standing.retry_after()),
            (2, Duration::from_secs(1))
        );
    }

    #[test]
    fn a_set_of_boxed_limits_holds_them_in_order() {
        let limits = Limits::new().with(SmoothBursty::new(1.0).unwrap());
        let mut state = limits.members()[0].initial_dyn_state(0);
        assert!(limits.members()[0]
            .reserve_dyn(&mut state, ONE_AT_ZERO)
            .0
            .is_allowed());
    }

    #[test]
    fn a_boxed_member_on_a_foreign_state_answers_never() {
        use crate::algorithms::Algorithm;
        let two = Limits::new()
            .with(SmoothBursty::new(1.0).unwrap())
            .with(FixedWindow::new(1, Duration::from_secs(1)).unwrap());
        let foreign = two.initial_state(0);
        let swapped = Limits::new()
            .with(FixedWindow::new(1, Duration::from_secs(1)).unwrap())
            .with(SmoothBursty::new(1.0).unwrap());
        let member: &dyn DynLimit = &*swapped.members()[0];
        assert!(member.peek_dyn(&foreign.members()[0], 0, 1).is_never());
    }
}
