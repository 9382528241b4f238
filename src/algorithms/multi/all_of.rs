//! [`AllOf`]: a statically typed set of two or three limits.

use super::{first_refusal, leaf_index, member_peek, member_standing, offsets, Span, Tally};
use crate::algorithms::sealed::MemberCall;
use crate::algorithms::{Algorithm, Decision, Pace, Plain, Receipt, Report};
use crate::clock::Nanos;

/// Two or three limits that must all admit a call: `AllOf<(A, B)>` or
/// `AllOf<(A, B, C)>`, any mix of algorithms. See the [module docs](super) for what a
/// set guarantees and answers.
///
/// A decision's [`limit_index`](Decision::limit_index) is the deciding limit's
/// position in the tuple, a nested set's limits counted in its place, depth
/// first: in `AllOf<(AllOf<(A, B)>, C)>`, `C` is limit 2. The state is the tuple
/// of member states. A call on the allowed path costs each member one reserve
/// (plus one peek for a member whose state owns heap memory), and allocates
/// nothing unless a member's own step does, or the caller asks for the grant's
/// [`Receipt`] (one allocation holding the members' receipts).
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, AllOf, SmoothBursty};
/// let set = AllOf::new((SmoothBursty::new(1.0).unwrap(), SmoothBursty::new(5.0).unwrap()));
/// let mut state = set.initial_state(0);
/// assert!(set.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// let refused = set.reserve::<Decision>(&mut state, 0, 1, 0);
/// assert_eq!(refused.limit_index(), 0); // 1/s needs a second, 5/s only 0.2 s
/// assert_eq!(refused.retry_after_nanos(), 1_000_000_000);
/// ```
///
/// Nested, the outer limit comes after the nested set's two:
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, AllOf, SmoothBursty};
/// let rate = |r| SmoothBursty::new(r).unwrap();
/// let set = AllOf::new((AllOf::new((rate(5.0), rate(4.0))), rate(1.0)));
/// let mut state = set.initial_state(0);
/// assert!(set.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// let refused = set.reserve::<Decision>(&mut state, 0, 1, 0);
/// assert_eq!(refused.limit_index(), 2); // 1/s, after the nested 5/s and 4/s
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AllOf<M> {
    members: M,
}

impl<M> AllOf<M> {
    /// A set of the limits in the tuple `members`, in that order. It implements
    /// [`Algorithm`] for tuples of two and three algorithms.
    ///
    /// ```
    /// use sluicegate::algorithms::{AllOf, SmoothBursty, SmoothWarmingUp};
    /// use std::time::Duration;
    /// let set = AllOf::new((
    ///     SmoothBursty::new(10.0).unwrap(),
    ///     SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap(),
    /// ));
    /// assert_eq!(set.members().0.rate(), 10.0);
    /// ```
    pub fn new(members: M) -> Self {
        AllOf { members }
    }

    /// The member limits: the tuple given to [`new`](AllOf::new), in its order,
    /// which is the order of the set's limit indices.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, AllOf, Decision, FixedWindow};
    /// use std::time::Duration;
    /// let set = AllOf::new((
    ///     FixedWindow::new(5, Duration::from_secs(1)).unwrap(),
    ///     FixedWindow::new(2, Duration::from_secs(60)).unwrap(),
    /// ));
    /// let (second, minute) = set.members();
    /// assert_eq!((second.limit(), minute.limit()), (5, 2));
    /// let mut state = set.initial_state(0);
    /// assert!(set.reserve::<bool>(&mut state, 0, 2, 0));
    /// // The refusing member is named by its place in the tuple.
    /// let refused: Decision = set.reserve(&mut state, 0, 1, 0);
    /// assert_eq!((refused.limit_index(), refused.limit()), (1, minute.limit()));
    /// ```
    pub fn members(&self) -> &M {
        &self.members
    }
}

/// The state of an [`AllOf`] set: the tuple `S` of member states.
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, AllOf, SmoothBursty};
/// let set = AllOf::new((SmoothBursty::new(1.0).unwrap(), SmoothBursty::new(2.0).unwrap()));
/// let mut state = set.initial_state(0);
/// set.reserve::<Decision>(&mut state, 0, 1, 0);
/// let (one, two) = state.members();
/// assert!(!set.members().0.peek(one, 0, 1).is_allowed());
/// assert!(!set.members().1.peek(two, 0, 1).is_allowed());
/// ```
#[derive(Clone, Debug)]
pub struct AllOfState<S> {
    members: S,
}

impl<S> AllOfState<S> {
    /// The member states, in the order of the set's members, each as the set's
    /// steps left it: a grant counted in every member, a refusal in none.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, AllOf, FixedWindow};
    /// use std::time::Duration;
    /// let window = |limit| FixedWindow::new(limit, Duration::from_secs(1)).unwrap();
    /// let set = AllOf::new((window(1), window(5)));
    /// let mut state = set.initial_state(0);
    /// assert!(set.reserve::<bool>(&mut state, 0, 1, 0));
    /// assert!(!set.reserve::<bool>(&mut state, 0, 1, 0)); // the first member is full
    /// let (first, second) = state.members();
    /// // The refused call was counted by neither member.
    /// assert_eq!((window(1).count(first, 0), window(5).count(second, 0)), (1, 1));
    /// ```
    pub fn members(&self) -> &S {
        &self.members
    }
}

/// The [`Algorithm`] impl of an [`AllOf`] of one tuple size, written once: `$T`
/// are the member types, `$m` the members, `$s` their states, `$g` their grants.
macro_rules! all_of {
    ($(($T:ident, $m:ident, $s:ident, $g:ident, $i:literal)),+) => {
        impl<$($T: Algorithm),+> AllOf<($($T,)+)> {
            /// The set's step (see the module docs); with `REPORT`, also tells
            /// `each` how every limit stands (see [`Algorithm::reserve_each`]), a
            /// nested set's limits in its place. Without it the reporting compiles
            /// away.
            #[inline(always)]
            fn step<const REPORT: bool>(
                &self,
                state: &mut <Self as Algorithm>::State,
                step: MemberCall,
                each: &mut dyn FnMut(Decision),
            ) -> (Decision, Receipt) {
                let ($($m,)+) = &self.members;
                let ($($s,)+) = &mut state.members;
                // Limit indices count leaf limits: a nested set's in its place.
                let counts = [$($m.limit_count()),+];
                let offsets = offsets(counts);
                let index = |member: usize, decision| {
                    leaf_index(offsets[member], counts[member], decision)
                };
                // What nested sets report as they reserve, held until the answer
                // is known (see `MemberCall::commit`).
                let mut held = Vec::new();
                let mut spans: [Span; 3] = [None; 3];
                // Pass 1: once a member refuses, the rest are only looked at.
                let mut refused = false;
                $(
                    let $g = step.attempt::<$T, REPORT>($m, $s, refused, &mut held, &mut spans[$i]);
                    refused |= !$g.decision().is_allowed();
                )+
                let mut tally = Tally::default();
                $( tally.add(index($i, $g.decision()), $g.decision()); )+
                if refused {
                    let answers = [$($g.decision()),+];
                    $( $g.restore($s); )+
                    if REPORT {
                        $( $m.answer_leaves($s, step, Some(answers[$i]), each); )+
                    }
                    return (tally.decision(), Receipt::NONE);
                }
                // Pass 2 (the attempts become the members' grants).
                let grants = [$(
                    step.finish::<$T, REPORT>($m, $s, &$g, &mut held, &mut spans[$i])
                ),+];
                if let Some(refusal) = first_refusal(&grants, index) {
                    $( step.undo($m, $s, $g, &grants[$i]); )+
                    if REPORT {
                        $( $m.answer_leaves($s, step, Some(grants[$i].0), each); )+
                    }
                    return (refusal, Receipt::NONE);
                }
                if REPORT {
                    $(
                        match spans[$i] {
                            Some((start, end)) => held[start..end].iter().for_each(|d| each(*d)),
                            None => each(member_standing($m, $s, step.now, grants[$i].0)),
                        }
                    )+
                }
                let [$($g),+] = grants;
                (tally.decision(), step.receipt([$($g.1),+]))
            }
        }

        impl<$($T: Algorithm),+> Algorithm for AllOf<($($T,)+)> {
            type State = AllOfState<($($T::State,)+)>;
            type Shape = Plain;

            fn initial_state(&self, now: Nanos) -> Self::State {
                let ($($m,)+) = &self.members;
                AllOfState { members: ($($m.initial_state(now),)+) }
            }

            #[inline]
            fn reserve<R: Report>(
                &self,
                state: &mut Self::State,
                now: Nanos,
                cost: u64,
                max_wait: Nanos,
            ) -> R {
                let step = MemberCall { now, cost, max_wait, receipts: R::KEEPS_RECEIPT };
                let (decision, receipt) = self.step::<false>(state, step, &mut |_| {});
                R::decided(decision, receipt)
            }

            fn reserve_each(
                &self,
                state: &mut Self::State,
                now: Nanos,
                cost: u64,
                max_wait: Nanos,
                each: &mut dyn FnMut(Decision),
            ) -> (Decision, Receipt) {
                // Reporting serves checks, which give nothing back: no receipt.
                let step = MemberCall { now, cost, max_wait, receipts: false };
                self.step::<true>(state, step, each)
            }

            #[inline]
            fn limit_count(&self) -> usize {
                let ($($m,)+) = &self.members;
                0 $( + $m.limit_count() )+
            }

            fn reserve_leaves(
                &self,
                state: &mut Self::State,
                call: MemberCall,
                each: &mut dyn FnMut(Decision),
            ) -> Option<Decision> {
                let MemberCall { now, cost, max_wait, .. } = call;
                Some(self.reserve_each(state, now, cost, max_wait, each).0)
            }

            fn answer_leaves(
                &self,
                state: &Self::State,
                call: MemberCall,
                _answer: Option<Decision>,
                each: &mut dyn FnMut(Decision),
            ) {
                let ($($m,)+) = &self.members;
                let ($($s,)+) = &state.members;
                $( $m.answer_leaves($s, call, None, each); )+
            }

            #[inline]
            fn peek(&self, state: &Self::State, now: Nanos, cost: u64) -> Decision {
                let ($($m,)+) = &self.members;
                let ($($s,)+) = &state.members;
                let counts = [$($m.limit_count()),+];
                let offsets = offsets(counts);
                let mut tally = Tally::default();
                $(
                    let answer = member_peek($m, $s, now, cost);
                    tally.add(leaf_index(offsets[$i], counts[$i], answer), answer);
                )+
                tally.decision()
            }

            /// Hands each member its receipt from the set's (see the module docs).
            fn cancel(&self, state: &mut Self::State, now: Nanos, receipt: &Receipt, acts_at: Nanos) {
                if let [$($g),+] = receipt.members() {
                    let ($($m,)+) = &self.members;
                    let ($($s,)+) = &mut state.members;
                    $( $m.cancel($s, now, $g, acts_at); )+
                }
            }

            fn pace(&self) -> Option<Pace> {
                let ($($m,)+) = &self.members;
                let mut pace = None;
                $( pace = Pace::slowest(pace, $m.pace()); )+
                pace
            }

            fn is_replenished(&self, state: &Self::State, now: Nanos) -> bool {
                let ($($m,)+) = &self.members;
                let ($($s,)+) = &state.members;
                true $( && $m.is_replenished($s, now) )+
            }
        }
    };
}

all_of!((A, a, sa, ga, 0), (B, b, sb, gb, 1));
all_of!((A, a, sa, ga, 0), (B, b, sb, gb, 1), (C, c, sc, gc, 2));
