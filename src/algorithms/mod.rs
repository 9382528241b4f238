//! The algorithms: pure state machines, one module each.
//!
//! An algorithm is two things: a small immutable *configuration* (the type that
//! implements [`Algorithm`], e.g. "5 permits per second, 1 s of burst") and a small
//! plain-data *state* (a few machine words). Its step functions take the state, the
//! time `now` and a cost, and produce a [`Decision`] and the next state. They take no
//! locks, read no clock, do no I/O and do not allocate on the hot path; everything
//! else in the crate (stores, limiters) is built on them, so this is where exactness
//! is tested.
//!
//! Nothing advances in the background: an algorithm's state moves only when a call
//! arrives, by comparing `now` with what the state remembers (Guava's
//! `nextFreeTicket` resync model). A limiter that is never called costs nothing.
//!
//! # Which one
//!
//! | algorithm | guarantees | state | pick it when |
//! |---|---|---|---|
//! | [`SmoothBursty`] | Guava's token bucket: `rate` per second, up to `max_burst` saved, pay-later reservations | 1 word | Guava's `RateLimiter`: smooth pacing, a bounded burst after idle time |
//! | [`SmoothWarmingUp`] | Guava's warm-up trapezoid: slow when cold, `rate` once warm | 2 words | the protected resource is slow when cold |
//! | [`LeakyBucket`] (meter) | at most `b + r·t` over any span `t`, exact rational rate, no drift | 1 word | smooth traffic, bounded burst, exact long-run accounting |
//! | [`LeakyBucket`] (queue) | callers act one interval apart, in order; at most `b` queued | 1 word | emitting work at a constant rate |
//! | [`FixedWindow`] | at most `limit` per aligned window (up to 2× across an edge) | 1 word | the cheapest check, or the rule really is per calendar window |
//! | [`SlidingWindowCounter`] | weighted two-window estimate within the limit; < 2× limit in any window | 1 word | near-sliding accuracy at constant memory |
//! | [`SlidingWindowBuckets`] | `limit` per `window` in buckets of `precision`, oldest dropped or weighted | 1 word per bucket | rolling windows with large limits at fixed cost |
//! | [`SlidingLog`] | exact; optional minimum spacing and recorded refusals | 2 words per permit | exactness for small limits, spacing, banning hammering clients |
//! | [`AllOf`], [`Limits`] | several limits, all-or-nothing, atomic | the members' | "10/s and 120/min and 240/h" |
//!
//! Each module's docs teach its model, with worked examples.
//!
//! An algorithm is one file, or one folder when it outgrows one: the model and its
//! public types in the module's own file (the folder's `mod.rs`, or
//! `smooth_bursty.rs` beside `smooth_bursty/`), and in the folder its step
//! (`step.rs`, with helpers such as the leaky bucket's tick arithmetic in
//! `ticks.rs`), its word encoding (`word.rs`, or a ring's `ring.rs`) and its unit
//! tests. Adding one touches its own file or folder plus its `mod` and re-export
//! lines; an algorithm defined in another crate needs none of that: it implements
//! [`Algorithm`] with [`Plain`] as its [`Shape`](Algorithm::Shape).
//!
//! # The step
//!
//! The core step is [`Algorithm::reserve`], modelled on Go's `reserveN`: "grant `cost`
//! permits to a caller who is willing to wait up to `max_wait`". Everything else is a
//! thin wrapper: a non-blocking try is `max_wait = 0`; a blocking acquire is
//! `max_wait = ∞`, sleeping for the returned wait (or, for algorithms that cannot
//! reserve the future, sleeping for `retry_after` and trying again). The step is
//! generic over what its caller reads (a [`Report`]): a try that only asks
//! "granted?", a check that reads the [`Decision`], a reservation that keeps the
//! [`Receipt`] to cancel it. It is one function, compiled once per report; a report
//! that does not read a grant's description does not build it.

mod adjustable;
mod arith;
mod decision;
mod divisor;
pub mod fixed_window;
pub mod leaky_bucket;
pub mod multi;
mod pace;
mod receipt;
mod report;
pub(crate) mod sealed;
pub mod sliding_log;
pub mod sliding_window_buckets;
pub mod sliding_window_counter;
pub mod smooth_bursty;
pub mod smooth_warming_up;
mod validate;
pub(crate) mod words;

pub use adjustable::AdjustableRate;
pub(crate) use arith::{bits, signed, until};
pub use decision::{Decision, Source, Verdict};
pub use fixed_window::FixedWindow;
pub use leaky_bucket::{LeakyBucket, LeakyMode};
pub use multi::{AllOf, AllOfState, Limits, LimitsState};
pub use pace::Pace;
pub use receipt::Receipt;
pub use report::Report;
pub use sliding_log::SlidingLog;
pub use sliding_window_buckets::SlidingWindowBuckets;
pub use sliding_window_counter::{Counting, Rounding, SlidingWindowCounter};
pub use smooth_bursty::SmoothBursty;
pub use smooth_warming_up::SmoothWarmingUp;
pub use words::{OneWord, Plain, WordArray};
pub(crate) use words::{Shape, WordEncoded};

use crate::clock::Nanos;

/// A rate-limiting algorithm: an immutable configuration whose methods step a
/// separate, plain-data [`State`](Algorithm::State).
///
/// Contract for implementors:
/// * [`reserve`](Algorithm::reserve) changes the state
///   only when it returns an allowed decision; a denied or never decision leaves it
///   untouched. The one exception is an algorithm *configured* to record refused
///   attempts (the sliding log's recorded refusals, the counter's counted attempts),
///   whose denials are meant to count; such an algorithm says so in its docs. Every
///   cell and store keeps whatever the step left, denied or not, and sets of limits
///   restore every member on a refusal, so inside a set only admitted calls count.
/// * Costs are at least 1 (the front ends reject 0 with
///   [`Error::ZeroCost`](crate::Error::ZeroCost) before calling in).
/// * Arithmetic saturates; nothing panics for any input.
/// * `now` may be smaller than a value seen before (another thread read the clock
///   earlier, or a remote store's clock stepped back): time that appears to go
///   backwards must never grant extra permits.
///
/// An algorithm also says where a direct limiter keeps its state, with its
/// [`Shape`](Algorithm::Shape): that is all it takes for
/// [`RateLimiter`](crate::RateLimiter) to hold it. An algorithm of your own names
/// [`Plain`] (its state then lives behind a mutex); the crate's own algorithms keep
/// theirs in atomic words ([`OneWord`], [`WordArray`]) through an encoding that is
/// not public.
///
/// ```
/// use sluicegate::algorithms::{Algorithm, Decision, SmoothBursty};
/// let bursty = SmoothBursty::new(5.0).unwrap();
/// let mut state = bursty.initial_state(0);
/// // Guava's pay-later rule: the first call is free, the next one pays for it.
/// let first: Decision = bursty.reserve(&mut state, 0, 1, u64::MAX);
/// let second: Decision = bursty.reserve(&mut state, 0, 1, u64::MAX);
/// assert_eq!((first.wait_nanos(), second.wait_nanos()), (0, 200_000_000));
/// ```
///
/// An algorithm of your own is its state, its initial state, its one step and
/// when it is replenished; everything else has a default. Here, one call per
/// `gap`, which the limiters, the stores and the sets then run as they run the
/// crate's own:
///
/// ```
/// use sluicegate::algorithms::{Algorithm, Decision, Plain, Receipt, Report};
/// use sluicegate::clock::{ManualClock, Nanos};
/// use sluicegate::RateLimiter;
/// use std::time::Duration;
///
/// #[derive(Clone)]
/// struct Spacing {
///     gap: Nanos,
/// }
///
/// impl Algorithm for Spacing {
///     type State = Nanos; // when the next call may go
///     type Shape = Plain;
///
///     fn initial_state(&self, _now: Nanos) -> Nanos {
///         0
///     }
///
///     fn reserve<R: Report>(&self, next: &mut Nanos, now: Nanos, cost: u64, max_wait: Nanos) -> R {
///         if cost > 1 {
///             return R::refused(|| Decision::never(1, 0, 0));
///         }
///         let wait = next.saturating_sub(now);
///         if wait > max_wait {
///             return R::refused(|| Decision::denied(1, 0, wait - max_wait, wait));
///         }
///         *next = now.max(*next) + self.gap;
///         // Built only for a caller that reads the grant.
///         R::granted(|| Decision::allowed_after(wait, 1, 0, *next - now), || Receipt::NONE)
///     }
///
///     fn is_replenished(&self, next: &Nanos, now: Nanos) -> bool {
///         *next <= now
///     }
/// }
///
/// let limiter = RateLimiter::with_clock(Spacing { gap: 100_000_000 }, ManualClock::new());
/// assert!(limiter.try_acquire());
/// assert!(!limiter.try_acquire());
/// assert_eq!(limiter.check(1).unwrap().retry_after(), Duration::from_millis(100));
/// ```
pub trait Algorithm: Send + Sync + 'static {
    /// The mutable part: what a store keeps per key.
    type State: Clone + Send + Sync + 'static;

    /// Where a direct limiter keeps the state: [`Plain`] (behind a mutex), what an
    /// algorithm outside the crate names; or, for the crate's own algorithms,
    /// [`OneWord`] or [`WordArray`] (atomic words, through the crate's private word
    /// encoding).
    type Shape: Shape;

    /// The state of a limit first used at `now`: a direct limiter makes it at its
    /// creation, a store makes a new key's at the clock's zero
    /// (`initial_state(0)`). Time before `now` does not count as idle: a
    /// [`SmoothBursty`] made at `now` has saved nothing, one made at 0 has saved a
    /// full burst once `max_burst` has passed.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SmoothBursty};
    /// let bursty = SmoothBursty::new(1.0).unwrap(); // saves up to 1 s: one permit
    /// let s = 1_000_000_000;
    /// let mut fresh = bursty.initial_state(5 * s); // nothing saved: one call, paid later
    /// assert!(bursty.reserve::<bool>(&mut fresh, 5 * s, 1, 0));
    /// assert!(!bursty.reserve::<bool>(&mut fresh, 5 * s, 1, 0));
    /// let mut idle = bursty.initial_state(0); // by 5 s a full burst is saved
    /// assert!(bursty.reserve::<bool>(&mut idle, 5 * s, 1, 0));
    /// assert!(bursty.reserve::<bool>(&mut idle, 5 * s, 1, 0));
    /// ```
    fn initial_state(&self, now: Nanos) -> Self::State;

    /// The one step, modelled on Go's `reserveN`: grants `cost` permits if the
    /// caller would have to wait at most `max_wait` nanoseconds, updating `state`;
    /// otherwise answers denied (or never, when no amount of waiting would do) and
    /// leaves `state` untouched, unless configured to record refused attempts (see
    /// the trait docs). A denial's `retry_after` follows the rule of
    /// [`Decision::retry_after`]: relative to the caller's deadline
    /// `now + max_wait`, not to a `max_wait` that stays the same.
    ///
    /// The step is written once and answers in the caller's [`Report`]: a direct
    /// try reads `bool` (nothing described), a keyed try `Result<(), Decision>`
    /// (the refusal in full, a grant not described), a check the [`Decision`], a
    /// reservation the decision with the [`Receipt`] that
    /// [`cancel`](Algorithm::cancel) needs to give it back. A grant is reported with
    /// [`Report::granted`] and a refusal with [`Report::refused`], whose closures
    /// run only for a report that reads them; an algorithm whose grants cannot be
    /// given back answers [`Receipt::NONE`]. Whatever the report, the state moves
    /// the same way.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Decision, SmoothBursty};
    /// let bursty = SmoothBursty::new(5.0).unwrap();
    /// let mut state = bursty.initial_state(0);
    /// let granted: bool = bursty.reserve(&mut state, 0, 1, 0);
    /// assert!(granted);
    /// let taken: Result<(), Decision> = bursty.reserve(&mut state, 0, 1, 0);
    /// assert!(taken.is_err()); // the next permit is 0.2 s away
    /// let next: Decision = bursty.reserve(&mut state, 0, 1, u64::MAX);
    /// assert_eq!(next.wait_nanos(), 200_000_000);
    /// ```
    fn reserve<R: Report>(
        &self,
        state: &mut Self::State,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> R;

    /// [`reserve`](Algorithm::reserve) with its receipt, also telling
    /// `each` how every limit stands after the step: one decision per limit, in
    /// order (what an HTTP server lists as one `RateLimit` item per limit). A single
    /// limit reports its own answer; a set ([`AllOf`], [`Limits`]) reports each of
    /// its leaf limits, depth first: a set nested inside a set reports its own
    /// limits in its place, as [`limit_count`](Algorithm::limit_count) counts them
    /// and [`limit_index`](Decision::limit_index) numbers them, and as the server
    /// layer's `Policy::describe` lists them.
    ///
    /// * A grant reports each limit's [`standing`](Algorithm::standing): a limit
    ///   left with fewer permits than it holds when whole reports, with its
    ///   `remaining`, `limit` and `reset_after`, a refusal whose `retry_after` is
    ///   when more than `remaining` permits are there (what an HTTP server sends as
    ///   the `RateLimit` item's `t`); a whole limit reports its grant.
    /// * A refusal reports each limit's answer to the refused call: the refusing
    ///   limits their refusal, the others the grant they would have made (nothing
    ///   was taken from them, so their `remaining` is after a grant that did not
    ///   happen).
    ///
    /// The step is the same as `reserve`'s; reporting costs one more
    /// [`peek`](Algorithm::peek) per limit that is not whole after a grant. A set
    /// nested in a set costs the reporting step a buffer on the heap, which holds
    /// the nested limits' reports until the set's answer is known, and after a
    /// refusal one more question per nested limit (its answer to the call). The
    /// receipt is the same as `reserve`'s too, but for a set: reporting serves
    /// checks (a server's, a limiter's `check_each`), which give nothing back, so
    /// a set answers [`Receipt::NONE`] here rather than build its members' receipt
    /// (one allocation a call). Reserve with [`reserve`](Algorithm::reserve) to
    /// keep one.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, AllOf, FixedWindow, SmoothBursty};
    /// use std::time::Duration;
    /// let set = AllOf::new((
    ///     FixedWindow::new(2, Duration::from_secs(1)).unwrap(),
    ///     FixedWindow::new(10, Duration::from_secs(60)).unwrap(),
    /// ));
    /// let mut state = set.initial_state(0);
    /// let mut each = Vec::new();
    /// let (grant, _) = set.reserve_each(&mut state, 0, 2, 0, &mut |d| each.push(d));
    /// assert_eq!(grant.remaining(), 0); // the tightest member's
    /// // The second's window is spent: its next permit is 1 s away.
    /// assert_eq!((each[0].remaining(), each[0].retry_after()), (0, Duration::from_secs(1)));
    /// // The minute has 8 left; a 9th comes when its window ends.
    /// assert_eq!((each[1].remaining(), each[1].retry_after()), (8, Duration::from_secs(60)));
    /// ```
    fn reserve_each(
        &self,
        state: &mut Self::State,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
        each: &mut dyn FnMut(Decision),
    ) -> (Decision, Receipt) {
        let answer: (Decision, Receipt) = self.reserve(state, now, cost, max_wait);
        each(standing(self, state, now, answer.0));
        answer
    }

    /// How many limits this algorithm is: the decisions
    /// [`reserve_each`](Algorithm::reserve_each) reports, one per limit, and the
    /// limits a set's [`limit_index`](Decision::limit_index) counts. 1 for a single
    /// limit, the default; a set ([`AllOf`], [`Limits`]) counts its leaf limits, a
    /// nested set's in its place (an empty [`Limits`] has none). An algorithm of
    /// your own that reports several limits says how many here.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, AllOf, FixedWindow, Limits};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(5, Duration::from_secs(1)).unwrap();
    /// assert_eq!(window.limit_count(), 1);
    /// let nested = AllOf::new((AllOf::new((window, window)), window));
    /// assert_eq!(nested.limit_count(), 3);
    /// assert_eq!(Limits::new().with(nested).with(window).limit_count(), 4);
    /// assert_eq!(Limits::new().limit_count(), 0);
    /// ```
    fn limit_count(&self) -> usize {
        1
    }

    /// A set's reserve as a member of another set's reporting step (see
    /// [`reserve_each`](Algorithm::reserve_each)): it reserves as its
    /// `reserve_each` does, telling `each` how each of its limits stands, and
    /// answers its decision. A single limit answers `None` and changes nothing:
    /// the enclosing set reserves and reports it itself. What lets a nested set's
    /// limits be reported in its place; the crate's sets implement it.
    ///
    /// Its `call` is a type no other crate can name, so only the crate's own code
    /// calls or implements it; an algorithm of your own keeps the default.
    #[doc(hidden)]
    fn reserve_leaves(
        &self,
        state: &mut Self::State,
        call: sealed::MemberCall,
        each: &mut dyn FnMut(Decision),
    ) -> Option<Decision> {
        let _ = (state, call, each);
        None
    }

    /// What a set reports of a member when it refuses a call (see
    /// [`reserve_each`](Algorithm::reserve_each)), on the member's state as the
    /// refusal left it: each of its limits' answer to the call, as a set's member
    /// answers. A single limit reports `answer`, its answer as the set has it, or
    /// without one asks itself; a set asks each of its limits. The crate's sets
    /// implement it.
    ///
    /// Sealed as [`reserve_leaves`](Algorithm::reserve_leaves) is.
    #[doc(hidden)]
    fn answer_leaves(
        &self,
        state: &Self::State,
        call: sealed::MemberCall,
        answer: Option<Decision>,
        each: &mut dyn FnMut(Decision),
    ) {
        let sealed::MemberCall {
            now,
            cost,
            max_wait,
            ..
        } = call;
        each(answer.unwrap_or_else(|| multi::member_answer(self, state, now, cost, max_wait)));
    }

    /// How this limit stands after a step that answered `answer`, as
    /// [`reserve_each`](Algorithm::reserve_each) reports it: `peek(cost)` is the
    /// zero-wait decision for `cost` on the state the step left.
    ///
    /// A grant that left fewer permits than the limit holds when whole
    /// (`remaining < limit`) becomes a refusal with the grant's `limit`,
    /// `remaining` and `reset_after`, whose `retry_after` is the time until more
    /// than `remaining` permits are there: for a fixed window the window's end, for
    /// a sliding window or log when enough of the oldest counted permits have left
    /// it, for a leaky bucket or Guava's limiters when the next permit comes. A
    /// whole limit's grant, a refusal and a never answer are reported as they
    /// are.
    ///
    /// The default asks `peek` for `remaining + 1` permits: its refusal's
    /// `retry_after` is that time. A peek that would grant them (a pay-later
    /// limiter with no debt lets any cost through at once) leaves `answer`
    /// as it is; [`SmoothBursty`] therefore says when its stored permits next
    /// grow instead.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Decision, FixedWindow};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(5, Duration::from_secs(10)).unwrap();
    /// let mut state = window.initial_state(0);
    /// let grant: Decision = window.reserve(&mut state, 4_000_000_000, 2, 0);
    /// let standing = window.standing(grant, &mut |cost| window.peek(&state, 4_000_000_000, cost));
    /// // 3 left; a 4th comes when the window ends, 6 s later.
    /// assert_eq!((standing.remaining(), standing.retry_after()), (3, Duration::from_secs(6)));
    /// ```
    fn standing(&self, answer: Decision, peek: &mut dyn FnMut(u64) -> Decision) -> Decision {
        standing_with(answer, peek)
    }

    /// The decision a zero-wait [`reserve`](Algorithm::reserve) would give now,
    /// without consuming anything (nor recording a refusal, for an algorithm whose
    /// refusals count). The default reserves on a copy of the state.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Decision, FixedWindow};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    /// let mut state = window.initial_state(0);
    /// let look = window.peek(&state, 0, 2);
    /// assert!(look.is_allowed());
    /// assert_eq!(window.peek(&state, 0, 2), look); // looking took nothing
    /// assert_eq!(window.reserve::<Decision>(&mut state, 0, 2, 0), look);
    /// assert!(!window.peek(&state, 0, 1).is_allowed());
    /// assert!(window.peek(&state, 0, 3).is_never()); // above the limit
    /// ```
    fn peek(&self, state: &Self::State, now: Nanos, cost: u64) -> Decision {
        let mut scratch = state.clone();
        self.reserve::<Decision>(&mut scratch, now, cost, 0)
    }

    /// For an algorithm whose refusals change its state (a
    /// [`SlidingLog`] recording rejected attempts, a
    /// [`SlidingWindowCounter`] counting attempts): the decision a zero-wait
    /// [`reserve`](Algorithm::reserve) would give now if its refusal recorded
    /// nothing, without changing anything. `None`, the default, for an algorithm
    /// whose refusals change nothing, where [`peek`](Algorithm::peek) is that
    /// answer.
    ///
    /// A set ([`AllOf`], [`Limits`]) asks its members this: a refused set records
    /// nothing in any member, so a member's `retry_after` is the first instant its
    /// limit admits the call, not the later one at which a recorded attempt would
    /// have left. A grant is the same either way.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Decision, SlidingLog};
    /// use std::time::Duration;
    /// let s = 1_000_000_000;
    /// let log = SlidingLog::new(1, Duration::from_secs(10)).unwrap();
    /// let recording = log.with_rejected_recorded();
    /// let mut state = recording.initial_state(0);
    /// assert!(recording.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
    /// // At 4 s the entry of 0 s leaves at 10 s; a recorded attempt would stay until 14 s.
    /// assert_eq!(recording.peek(&state, 4 * s, 1).retry_after_nanos(), 10 * s);
    /// let unrecorded = recording.peek_unrecorded(&state, 4 * s, 1).unwrap();
    /// assert_eq!(unrecorded.retry_after_nanos(), 6 * s);
    /// assert_eq!(log.peek_unrecorded(&log.initial_state(0), 0, 1), None);
    /// ```
    fn peek_unrecorded(&self, state: &Self::State, now: Nanos, cost: u64) -> Option<Decision> {
        let _ = (state, now, cost);
        None
    }

    /// Gives back the permits of a grant whose caller has not acted on it, given
    /// its `receipt` and the time `acts_at` it was to act, by Go's
    /// `Reservation.Cancel` rule (the crate's one cancel rule): up to `acts_at`,
    /// *that instant included* (`now <= acts_at`, so a grant with no wait can be
    /// cancelled at the instant it was made), its permits come back as far as later
    /// grants allow (what was granted after it stays granted); once `acts_at` has
    /// passed nothing comes back, as the permits were presumably used. Every
    /// algorithm of the crate restores so, sets of limits through every member. A
    /// grant that acts at once (a window's, the sliding log's, a leaky-bucket
    /// meter's) can be cancelled only at the instant it was made, and comes back
    /// only from where it was counted, if that still counts: a window's cost from
    /// its window or bucket, the log's entry if it is still the newest. Callers
    /// cancel a receipt at most once (as
    /// [`Reservation::cancel`](crate::Reservation::cancel), which consumes the
    /// reservation): a second cancel may give back again. The default restores
    /// nothing, right for an algorithm whose grants answer [`Receipt::NONE`].
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Decision, Receipt, SmoothBursty};
    /// let bursty = SmoothBursty::new(5.0).unwrap();
    /// let (mut state, ms) = (bursty.initial_state(0), 1_000_000);
    /// assert!(bursty.reserve::<bool>(&mut state, 0, 1, 0)); // free; the next pays 200 ms
    /// let (grant, receipt): (Decision, Receipt) = bursty.reserve(&mut state, 0, 1, u64::MAX);
    /// let acts_at = grant.wait_nanos(); // 200 ms
    /// let mut late = state;
    /// bursty.cancel(&mut late, acts_at + 1, &receipt, acts_at);
    /// assert_eq!(late, state); // past its time to act: nothing comes back
    /// bursty.cancel(&mut state, 100 * ms, &receipt, acts_at);
    /// // Given back in time: the next caller goes at 200 ms, not 400 ms.
    /// assert_eq!(bursty.reserve::<Decision>(&mut state, 100 * ms, 1, u64::MAX).wait_nanos(), 100 * ms);
    /// ```
    fn cancel(&self, state: &mut Self::State, now: Nanos, receipt: &Receipt, acts_at: Nanos) {
        let _ = (state, now, receipt, acts_at);
    }

    /// The algorithm's steady rate (see [`Pace`]): how far apart it grants once
    /// its stored credit is spent, and how long it takes to store a full burst
    /// again. The client layer paces a key by it after a server's hold, so that the
    /// credit stored during the hold is not fired at once. The default, `None`, says
    /// no steady rate is known: after a hold the client then goes by the limiter
    /// alone. An unlimited limit answers `None`.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SmoothBursty};
    /// use std::time::Duration;
    /// let pace = SmoothBursty::new(5.0).unwrap().pace().unwrap();
    /// assert_eq!((pace.interval(), pace.refill()), (Duration::from_millis(200), Duration::from_secs(1)));
    /// assert!(SmoothBursty::new(f64::INFINITY).unwrap().pace().is_none());
    /// ```
    fn pace(&self) -> Option<Pace> {
        None
    }

    /// True if `state` at `now` has fully replenished, so that dropping it and starting
    /// again from [`initial_state`](Algorithm::initial_state) would change no future
    /// decision. Stores use this to forget idle keys, which they start again from
    /// `initial_state(0)`.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SmoothBursty};
    /// let bursty = SmoothBursty::new(1.0).unwrap(); // a full burst: 1 s of permits
    /// let (mut state, s) = (bursty.initial_state(0), 1_000_000_000);
    /// assert!(bursty.reserve::<bool>(&mut state, 0, 1, 0)); // the next permit is at 1 s
    /// assert!(!bursty.is_replenished(&state, s)); // nothing saved yet
    /// assert!(bursty.is_replenished(&state, 2 * s)); // a full burst saved
    /// // From then on a state made afresh answers the same.
    /// let fresh = bursty.initial_state(0);
    /// assert_eq!(bursty.peek(&state, 2 * s, 2), bursty.peek(&fresh, 2 * s, 2));
    /// ```
    fn is_replenished(&self, state: &Self::State, now: Nanos) -> bool;
}

/// What one limit reports after a step on `state` (see [`Algorithm::standing`]).
#[inline]
pub(crate) fn standing<A: Algorithm + ?Sized>(
    algorithm: &A,
    state: &A::State,
    now: Nanos,
    answer: Decision,
) -> Decision {
    algorithm.standing(answer, &mut |cost| algorithm.peek(state, now, cost))
}

/// The rule of [`Algorithm::standing`]'s default: a grant that left the limit
/// short of whole becomes the refusal `peek(remaining + 1)` answers, with the
/// grant's `limit`, `remaining` and `reset_after`; anything else stays as it is.
#[inline]
pub(crate) fn standing_with(answer: Decision, peek: &mut dyn FnMut(u64) -> Decision) -> Decision {
    if answer.is_allowed() && answer.remaining() < answer.limit() {
        let next = peek(answer.remaining() + 1);
        if next.verdict() == Verdict::Denied {
            return short_of_whole(answer, next.retry_after_nanos());
        }
    }
    answer
}

/// The standing of a grant `answer` whose next permit beyond its `remaining` is
/// `retry` nanoseconds away: a refusal with the grant's `limit`, `remaining`,
/// `reset_after` and `limit_index`.
#[inline]
pub(crate) fn short_of_whole(answer: Decision, retry: Nanos) -> Decision {
    Decision::denied(
        answer.limit(),
        answer.remaining(),
        retry,
        answer.reset_after_nanos(),
    )
    .with_limit_index(answer.limit_index())
}
