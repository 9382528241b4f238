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
//! that it stays all-or-nothing as far as the members allow. Giving back takes the
//! members' receipts, which a set asks its members for only when its caller keeps
//! one (a reservation): a call that keeps none costs no allocation, and leaves what
//! such a member took taken.
//!
//! The set's state lives in one cell of a store, so both passes run under one lock:
//! concurrent callers see a set change all its members at once or not at all.
//!
//! # What a set answers
//!
//! | verdict | `limit_index`, `limit`, `remaining` | `retry_after` | `wait` | `reset_after` |
//! |---|---|---|---|---|
//! | never (some member can never grant the cost) | the first limit that answered never | `u64::MAX` ns | 0 | longest of all members |
//! | denied | the refusing limit with the longest `retry_after` (first on a tie) | that longest one | 0 | longest of all members |
//! | allowed | the limit with the fewest `remaining` (first on a tie) | 0 | longest of the members' | longest of all members |
//!
//! `limit_index` counts the set's *leaf* limits, depth first, from 0: a member
//! that is itself a set counts its own limits in its place, and the index of its
//! answer is that of its deciding limit among them. It is the position of the
//! deciding limit in the set's reports ([`Algorithm::reserve_each`], one per leaf
//! limit, [`Algorithm::limit_count`] in all), the same on every store.
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
//!   (`AllOf<(AllOf<(A, B)>, C, D)>`); a nested set decides as one member, and its
//!   limits are counted and reported in its place: `A` and `B` are limits 0 and 1,
//!   `C` and `D` limits 2 and 3, as if the set were written flat.
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
//!
//! A nested set's limits count in its place, in decisions and in reports:
//!
//! ```
//! use sluicegate::algorithms::{Algorithm, AllOf, FixedWindow, Limits};
//! use sluicegate::Decision;
//! use std::time::Duration;
//! let window = |limit, secs| FixedWindow::new(limit, Duration::from_secs(secs)).unwrap();
//! // Limits 0 and 1 in the nested set, 2 after it, 3 in the nested Limits.
//! let set = AllOf::new((
//!     AllOf::new((window(10, 1), window(2, 60))),
//!     window(5, 10),
//!     Limits::new().with(window(100, 3600)),
//! ));
//! assert_eq!(set.limit_count(), 4);
//! let mut state = set.initial_state(0);
//! let mut each = Vec::new();
//! let (grant, _) = set.reserve_each(&mut state, 0, 2, 0, &mut |d| each.push(d));
//! assert_eq!(grant.limit_index(), 1); // the minute: none left
//! let left: Vec<u64> = each.iter().map(Decision::remaining).collect();
//! assert_eq!(left, [8, 0, 3, 98]);
//! // The minute refuses the next call: limit 1, the nested set's second.
//! assert_eq!(set.peek(&state, 0, 1).limit_index(), 1);
//! ```

mod all_of;
mod dynamic;
mod erased;

pub use all_of::{AllOf, AllOfState};
pub use dynamic::{Limits, LimitsState};
pub(crate) use erased::{DynLimit, DynState};

use super::sealed::MemberCall;
use super::{Algorithm, Decision, Receipt, Verdict};
use crate::clock::Nanos;

/// What a reporting step's nested sets reported as they reserved: their limits'
/// standings after their grants, in the order the members reserved, kept until
/// the set's answer is known (a refused set reports its members' answers
/// instead). Allocates only once a nested set reports.
type Held = Vec<Decision>;

/// Where in [`Held`] one member's reports are (`start`, `end`); `None` for a
/// member that reported nothing there (a single limit, or any member of a step
/// that does not report).
type Span = Option<(usize, usize)>;

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

/// One call to a set, the arguments every member is asked with: the set's step.
impl MemberCall {
    /// Pass 1 for one member: reserve at once if its state is plain data and no
    /// member has refused yet; otherwise only ask. In a reporting step a nested
    /// set reserves reporting its limits (see [`commit`](MemberCall::commit)).
    #[inline(always)]
    fn attempt<A: Algorithm, const REPORT: bool>(
        &self,
        algorithm: &A,
        state: &mut A::State,
        refused: bool,
        held: &mut Held,
        span: &mut Span,
    ) -> Attempt<A::State> {
        if refused || !plain::<A::State>() {
            return Attempt::Looked(self.decide(algorithm, state));
        }
        let saved = state.clone();
        let (grant, receipt) = self.commit::<A, REPORT>(algorithm, state, held, span);
        if grant.is_allowed() {
            Attempt::Taken {
                saved,
                grant,
                receipt,
            }
        } else {
            *state = saved; // the set's refusal records nothing in any member
            *span = None; // nor reports anything it reported
            let unrecorded = algorithm.peek_unrecorded(state, self.now, self.cost);
            Attempt::Looked(unrecorded.unwrap_or(grant))
        }
    }

    /// What `algorithm` would answer to this call on `state`, without changing it.
    /// A zero-wait question is a peek (no copy); a caller willing to wait is asked on
    /// a scratch copy, but only when the peek refused (a member that admits a caller
    /// who will not wait admits one who would). A never is asked again too: a
    /// nested set that can never grant answers with the longest `reset_after` of
    /// its members, whose answers to a caller who waits are their grants.
    /// A member whose refusals would be recorded answers as if they were not (a
    /// set's refusal records nothing): its zero-wait answer stands for a refusal
    /// whatever the wait.
    #[inline]
    fn decide<A: Algorithm + ?Sized>(&self, algorithm: &A, state: &A::State) -> Decision {
        let unrecorded = algorithm.peek_unrecorded(state, self.now, self.cost);
        let peeked = unrecorded.unwrap_or_else(|| algorithm.peek(state, self.now, self.cost));
        if self.max_wait == 0 || peeked.is_allowed() {
            return peeked;
        }
        let mut scratch = state.clone();
        let waited: Decision = algorithm.reserve(&mut scratch, self.now, self.cost, self.max_wait);
        if unrecorded.is_some() && !waited.is_allowed() {
            return peeked;
        }
        waited
    }

    /// Reserves in `algorithm`, with its receipt if the caller wants one. In a
    /// reporting step (`REPORT`, which keeps no receipt) a member that is a set
    /// reserves reporting its limits ([`Algorithm::reserve_leaves`]): their
    /// reports go to `held`, and `span` says where.
    #[inline(always)]
    fn commit<A: Algorithm, const REPORT: bool>(
        &self,
        algorithm: &A,
        state: &mut A::State,
        held: &mut Held,
        span: &mut Span,
    ) -> (Decision, Receipt) {
        if REPORT {
            let start = held.len();
            let reported = algorithm.reserve_leaves(state, *self, &mut |d| held.push(d));
            if let Some(decision) = reported {
                *span = Some((start, held.len()));
                return (decision, Receipt::NONE);
            }
        }
        self.reserve(algorithm, state)
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
    fn finish<A: Algorithm, const REPORT: bool>(
        &self,
        algorithm: &A,
        state: &mut A::State,
        attempt: &Attempt<A::State>,
        held: &mut Held,
        span: &mut Span,
    ) -> (Decision, Receipt) {
        match attempt {
            Attempt::Taken { grant, receipt, .. } => (*grant, receipt.clone()),
            Attempt::Looked(_) => self.commit::<A, REPORT>(algorithm, state, held, span),
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

/// A member's answer to a set's call on `state` without changing it, as pass 1
/// has it (see [`MemberCall::decide`]): what [`Algorithm::answer_leaves`] reports for a
/// limit of a nested set when the set refuses.
pub(crate) fn member_answer<A: Algorithm + ?Sized>(
    algorithm: &A,
    state: &A::State,
    now: Nanos,
    cost: u64,
    max_wait: Nanos,
) -> Decision {
    let call = MemberCall {
        now,
        cost,
        max_wait,
        receipts: false,
    };
    call.decide(algorithm, state)
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

/// The first refusal among pass-2 grants, with its limit index (`index` of the
/// member's position and decision): a member broke its contract.
#[inline]
fn first_refusal(
    grants: &[(Decision, Receipt)],
    index: impl Fn(usize, Decision) -> u32,
) -> Option<Decision> {
    let (member, (refusal, _)) = grants.iter().enumerate().find(|(_, g)| !g.0.is_allowed())?;
    Some(refusal.with_limit_index(index(member, *refusal)))
}

/// The limit index, in a set, of a member's decision: `offset`, the number of
/// leaf limits before the member, plus, for a member that is itself a set of
/// `count` limits, the index its decision names among them. A single limit's
/// decision counts as its one limit, whatever index it carries.
#[inline(always)]
fn leaf_index(offset: usize, count: usize, decision: Decision) -> u32 {
    let inner = (decision.limit_index() as usize).min(count.saturating_sub(1));
    index_u32(offset.saturating_add(inner))
}

/// The leaf limits before each of a static set's members, from the members'
/// [`limit_count`](Algorithm::limit_count)s.
#[inline(always)]
fn offsets<const N: usize>(counts: [usize; N]) -> [usize; N] {
    let mut offsets = [0; N];
    let mut before = 0_usize;
    for (offset, count) in offsets.iter_mut().zip(counts) {
        *offset = before;
        before = before.saturating_add(count);
    }
    offsets
}

/// Folds the members' answers into the set's answer (see the table in the module
/// docs), each with its limit index ([`leaf_index`]). Feeding the members in
/// order makes "first on a tie" hold. Keeps only the few words it needs, not
/// whole decisions: this runs on every call.
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
    fn add(&mut self, index: u32, decision: Decision) {
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
