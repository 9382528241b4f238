//! Several limits at once ("10 per second, 120 per minute, 240 per hour"; or a
//! minimum distance between calls as a second, tight limit), as one algorithm.
//!
//! # The model
//!
//! A *set* holds several member limits, each any [`Algorithm`], and keeps all their
//! states together in one state. A call is admitted only if **every** member admits
//! it, and then it is counted by every member; a refused call is counted by none.
//! What is counted matters: counting refused calls in the
//! per-hour counter (or stopping half-way through the counters) lets a client that
//! hammers the per-second limit lock itself out of the hour, and makes the outcome
//! depend on the order the limits are listed in. Here the order changes nothing but
//! the indices.
//!
//! Each call runs in two passes over the members, at one `now`:
//!
//! ```text
//!   call(cost, max_wait)
//!     │
//!     ├─ 1. try each member in turn:
//!     │       plain-data state: save a copy, reserve        ──► taken (or refused)
//!     │       state that owns memory, or after a refusal: look ──► would allow / refuses
//!     │        #0 10/s   taken        #1 120/min  denied, retry in 48 s
//!     │        #2 240/h  looked: would allow
//!     │
//!     ├─ any refusal? ──yes──► put the saved copies back; answer the refusal:
//!     │   (never beats denied; among denials, the longest retry_after)   no state moved
//!     │
//!     └─ 2. reserve in the members that were only looked at ──► answer the grant
//! ```
//!
//! Putting a saved copy back undoes a reservation exactly, whatever the algorithm;
//! copying a state that owns heap memory (a sliding log) would allocate on every
//! call, so such members are looked at first and reserved only once every member has
//! allowed. "Plain data" is decided at compile time: a state type with no drop glue
//! ([`std::mem::needs_drop`]) owns no heap memory, and copying it is a memcpy. The
//! answer is the same either way; trying first only saves asking a plain member
//! twice on the common, allowed path.
//!
//! Why pass 2 cannot refuse: a member's answer is a pure function of its state,
//! `now`, the cost and `max_wait`. Pass 1 asked exactly that question on the state
//! pass 2 sees (a zero-wait [`Algorithm::peek`] *is* a zero-wait reserve; a caller
//! willing to wait is asked on a scratch copy), and a member that admits a caller who
//! will not wait also admits one who would. Should a member break that contract, the
//! set puts back the saved copies, gives back what the looked-at members took (with
//! [`Algorithm::cancel`], as grants not yet acted on) and answers the refusal, so
//! that it stays all-or-nothing as far as the members allow.
//!
//! The set's state lives in one cell of a store, so both passes run under one lock:
//! concurrent callers see a set change all its members at once or not at all.
//!
//! # What a set answers
//!
//! | verdict | `limit_index`, `limit`, `remaining` | `retry_after` | `wait` | `reset_after` |
//! |---|---|---|---|---|
//! | never (some member can never grant the cost) | the first member that answered never | `u64::MAX` ns | 0 | longest of all members |
//! | denied | the refusing member with the longest `retry_after` (first on a tie) | that longest one | 0 | longest of all members |
//! | allowed | the member with the fewest `remaining` (first on a tie) | 0 | longest of the members' | longest of all members |
//!
//! A set with no member limits nothing: every call is allowed, with `u64::MAX`
//! remaining.
//!
//! A refused set records nothing in any member, also in one whose own refusals
//! count (a [`SlidingLog`](crate::algorithms::SlidingLog) recording refusals, a
//! [`SlidingWindowCounter`](crate::algorithms::SlidingWindowCounter) counting
//! attempts). Such a member answers the set as its refusals recorded nothing
//! ([`Algorithm::peek_unrecorded`]), in its decisions and in how it stands after a
//! grant: its `retry_after` is the first instant its limit admits the call. Inside
//! a set it acts as the same limit without recorded refusals.
//!
//! # Reservations (Guava's limiters, the leaky-bucket queue)
//!
//! A caller willing to wait (`max_wait > 0`, e.g. a blocking `acquire`) is granted
//! only if *every* member can grant within `max_wait`; the grant's wait is the longest
//! of the members' waits, and each member that reserves future capacity books its own
//! slot. A member that cannot reserve the future (a window counter) refuses with its
//! `retry_after`, so the set refuses too and a blocking caller sleeps that long and
//! tries again; the members that *could* have reserved are not touched meanwhile.
//!
//! A set's grant answers a [`Receipt`] that carries every member's own receipt
//! ([`Receipt::members`]); the set remembers nothing of its grants. Cancelling it
//! ([`Algorithm::cancel`], e.g. [`Reservation::cancel`](crate::Reservation::cancel))
//! hands each member its receipt with the set's time to act, so each gives back what
//! Go's rule lets it, for any grant of the set, not only its latest: waits abandoned
//! together, cancelled latest first, give all their permits back, as they do on one
//! limit. Building that receipt allocates once per grant, and only when the receipt
//! is asked for (a [`Report`](crate::algorithms::Report) that keeps it); a try, a
//! check and a blocking acquire never ask.
//!
//! # Two shapes
//!
//! * [`AllOf`]: a tuple of two or three concrete algorithms,
//!   `AllOf<(SmoothBursty, FixedWindow, FixedWindow)>`. Statically typed, no
//!   dynamic dispatch, no heap: its state is the tuple of member states. Pick it when the limits are known when you write the
//!   code. A set is itself an algorithm, so more than three members nest
//!   (`AllOf<(AllOf<(A, B)>, C, D)>`); a nested set then counts as one member and its
//!   index is its position in the outer tuple.
//! * [`Limits`]: any number of limits chosen at run time (e.g. read from a
//!   configuration file), each boxed behind an object-safe trait that every
//!   `Algorithm + Clone` implements. Its state is a vector of type-erased member
//!   states and their saved copies, allocated once when the state is
//!   created; a call allocates nothing. It costs a virtual call or two per member.
//!
//! Both implement [`Algorithm`], so they run under [`RateLimiter`](crate::RateLimiter)
//! (in a `LockedCell`) like any single limit.
//!
//! ```
//! use sluicegate::algorithms::{AllOf, SmoothBursty};
//! use sluicegate::{clock::ManualClock, RateLimiter};
//! use std::time::Duration;
//!
//! // 2 per second with no saved burst (a minimum distance of 0.5 s) and, on top,
//! // 10 per second saved up to 1 s.
//! let cadence = SmoothBursty::new(2.0).unwrap().with_max_burst(Duration::ZERO).unwrap();
//! let limiter = RateLimiter::with_clock(
//!     AllOf::new((cadence, SmoothBursty::new(10.0).unwrap())),
//!     ManualClock::new(),
//! );
//! assert!(limiter.try_acquire());
//! let refused = limiter.check(1).unwrap();
//! assert_eq!(refused.limit_index(), 0); // the cadence refused
//! assert_eq!(refused.retry_after(), Duration::from_millis(500));
//! ```

mod all_of;
mod dynamic;
mod erased;

pub use all_of::{AllOf, AllOfState};
pub use dynamic::{Limits, LimitsState};
pub(crate) use erased::{DynLimit, DynState};

use super::{Algorithm, Decision, Receipt, Verdict};
use crate::clock::Nanos;

/// One call to a set: the arguments every member is asked with.
#[derive(Clone, Copy)]
struct Call {
    now: Nanos,
    cost: u64,
    max_wait: Nanos,
    /// Whether the caller wants the grant's receipt: without it the members are
    /// asked for none either, so a nested set allocates nothing.
    receipts: bool,
}

/// How pass 1 went for one member of a static set.
enum Attempt<S> {
    /// Reserved already, with a copy of the state from before, to put back if
    /// another member refuses.
    Taken {
        saved: S,
        grant: Decision,
        receipt: Receipt,
    },
    /// Asked without changing anything: its answer.
    Looked(Decision),
}

impl<S> Attempt<S> {
    /// The member's pass-1 answer.
    #[inline(always)]
    fn decision(&self) -> Decision {
        match self {
            Attempt::Taken { grant, .. } => *grant,
            Attempt::Looked(decision) => *decision,
        }
    }

    /// On a refusal of the set: puts back what pass 1 took.
    #[inline(always)]
    fn restore(self, state: &mut S) {
        if let Attempt::Taken { saved, .. } = self {
            *state = saved;
        }
    }
}

/// True if copying an `S` cannot allocate: it owns no heap memory (see the module
/// docs), so pass 1 may reserve on it and put a copy back.
#[inline]
fn plain<S>() -> bool {
    !std::mem::needs_drop::<S>()
}

impl Call {
    /// Pass 1 for one member: reserve at once if its state is plain data and no
    /// member has refused yet; otherwise only ask.
    #[inline(always)]
    fn attempt<A: Algorithm>(
        &self,
        algorithm: &A,
        state: &mut A::State,
        refused: bool,
    ) -> Attempt<A::State> {
        if refused || !plain::<A::State>() {
            return Attempt::Looked(self.decide(algorithm, state));
        }
        let saved = state.clone();
        let (grant, receipt) = self.commit(algorithm, state);
        if grant.is_allowed() {
            Attempt::Taken {
                saved,
                grant,
                receipt,
            }
        } else {
            *state = saved; // the set's refusal records nothing in any member
            let unrecorded = algorithm.peek_unrecorded(state, self.now, self.cost);
            Attempt::Looked(unrecorded.unwrap_or(grant))
        }
    }

    /// What `algorithm` would answer to this call on `state`, without changing it.
    /// A zero-wait question is a peek (no copy); a caller willing to wait is asked on
    /// a scratch copy, but only when the peek refused (a member that admits a caller
    /// who will not wait admits one who would).
    /// A member whose refusals would be recorded answers as if they were not (a
    /// set's refusal records nothing): its zero-wait answer stands for a refusal
    /// whatever the wait.
    #[inline]
    fn decide<A: Algorithm>(&self, algorithm: &A, state: &A::State) -> Decision {
        let unrecorded = algorithm.peek_unrecorded(state, self.now, self.cost);
        let peeked = unrecorded.unwrap_or_else(|| algorithm.peek(state, self.now, self.cost));
        if self.max_wait == 0 || peeked.verdict() != Verdict::Denied {
            return peeked;
        }
        let mut scratch = state.clone();
        let waited: Decision = algorithm.reserve(&mut scratch, self.now, self.cost, self.max_wait);
        if unrecorded.is_some() && !waited.is_allowed() {
            return peeked;
        }
        waited
    }

    /// Reserves in `algorithm`, with its receipt if the caller wants one.
    #[inline(always)]
    fn commit<A: Algorithm>(&self, algorithm: &A, state: &mut A::State) -> (Decision, Receipt) {
        if self.receipts {
            algorithm.reserve(state, self.now, self.cost, self.max_wait)
        } else {
            let decision: Decision = algorithm.reserve(state, self.now, self.cost, self.max_wait);
            (decision, Receipt::NONE)
        }
    }

    /// The set's receipt for a grant whose members' receipts are `members`.
    #[inline]
    fn receipt(&self, members: impl IntoIterator<Item = Receipt>) -> Receipt {
        if self.receipts {
            Receipt::of_members(self.cost, members)
        } else {
            Receipt::NONE
        }
    }

    /// Pass 2 for one member: its grant, taken in pass 1 or reserved now.
    #[inline(always)]
    fn finish<A: Algorithm>(
        &self,
        algorithm: &A,
        state: &mut A::State,
        attempt: &Attempt<A::State>,
    ) -> (Decision, Receipt) {
        match attempt {
            Attempt::Taken { grant, receipt, .. } => (*grant, receipt.clone()),
            Attempt::Looked(_) => self.commit(algorithm, state),
        }
    }

    /// Takes back a member's pass-2 grant when some member broke its contract and
    /// refused in pass 2: the saved copy if there is one, else a cancel as a grant
    /// that has not acted yet (`acts_at` = the end of time).
    fn undo<A: Algorithm>(
        &self,
        algorithm: &A,
        state: &mut A::State,
        attempt: Attempt<A::State>,
        (grant, receipt): &(Decision, Receipt),
    ) {
        match attempt {
            Attempt::Taken { saved, .. } => *state = saved,
            Attempt::Looked(_) => {
                if grant.is_allowed() {
                    algorithm.cancel(state, self.now, receipt, Nanos::MAX);
                }
            }
        }
    }
}

/// What a member answers a set's zero-wait question: its answer as if its
/// refusals recorded nothing (see [`Algorithm::peek_unrecorded`]).
#[inline]
fn member_peek<A: Algorithm + ?Sized>(
    algorithm: &A,
    state: &A::State,
    now: Nanos,
    cost: u64,
) -> Decision {
    algorithm
        .peek_unrecorded(state, now, cost)
        .unwrap_or_else(|| algorithm.peek(state, now, cost))
}

/// How a member stands after the set's grant (see [`Algorithm::standing`]), by
/// its answers as a member: a later refusal of the set records nothing in it.
#[inline]
fn member_standing<A: Algorithm + ?Sized>(
    algorithm: &A,
    state: &A::State,
    now: Nanos,
    answer: Decision,
) -> Decision {
    algorithm.standing(answer, &mut |cost| member_peek(algorithm, state, now, cost))
}

/// The first refusal among pass-2 grants, with its index: a member broke its
/// contract.
#[inline]
fn first_refusal(grants: &[(Decision, Receipt)]) -> Option<Decision> {
    let (index, (refusal, _)) = grants.iter().enumerate().find(|(_, g)| !g.0.is_allowed())?;
    Some(refusal.with_limit_index(index_u32(index)))
}

/// Folds the members' answers into the set's answer (see the table in the module
/// docs). Feeding the members in index order makes "first on a tie" hold. Keeps
/// only the few words it needs, not whole decisions: this runs on every call.
#[derive(Default)]
struct Tally {
    reset_after: Nanos,
    wait: Nanos,
    /// The allowed member with the fewest remaining: (remaining, limit, index).
    tightest: Option<(u64, u64, u32)>,
    /// The refusal to answer, if any: its verdict and (retry_after, remaining, limit,
    /// index).
    refusal: Option<(Verdict, Nanos, u64, u64, u32)>,
}

impl Tally {
    #[inline]
    fn add(&mut self, index: usize, decision: Decision) {
        let index = index_u32(index);
        self.reset_after = self.reset_after.max(decision.reset_after_nanos());
        let verdict = decision.verdict();
        if verdict == Verdict::Allowed {
            self.wait = self.wait.max(decision.wait_nanos());
            let remaining = decision.remaining();
            if self.tightest.is_none_or(|(least, ..)| remaining < least) {
                self.tightest = Some((remaining, decision.limit(), index));
            }
            return;
        }
        let retry = decision.retry_after_nanos();
        let replace = match self.refusal {
            None => true,
            Some((Verdict::Never, ..)) => false,
            Some((_, current, ..)) => verdict == Verdict::Never || retry > current,
        };
        if replace {
            self.refusal = Some((
                verdict,
                retry,
                decision.remaining(),
                decision.limit(),
                index,
            ));
        }
    }

    /// The set's answer.
    #[inline]
    fn decision(&self) -> Decision {
        match self.refusal {
            Some((Verdict::Never, _, remaining, limit, index)) => {
                Decision::never(limit, remaining, self.reset_after).with_limit_index(index)
            }
            Some((_, retry, remaining, limit, index)) => {
                Decision::denied(limit, remaining, retry, self.reset_after).with_limit_index(index)
            }
            // A set with no member limits nothing.
            None => {
                let (remaining, limit, index) = self.tightest.unwrap_or((u64::MAX, u64::MAX, 0));
                Decision::allowed_after(self.wait, limit, remaining, self.reset_after)
                    .with_limit_index(index)
            }
        }
    }
}

fn index_u32(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX)
}
