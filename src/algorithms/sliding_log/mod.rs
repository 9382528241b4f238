//! The exact sliding log: `limit` permits in any window of length `window`, checked
//! against the timestamps of past calls.
//!
//! # The model
//!
//! The log keeps one entry per granted call: its time and its cost. An entry counts
//! while it is younger than `window`: an entry at `t` counts at every instant
//! before `t + window` and no longer at `t + window` itself (once exactly
//! one interval has passed since a request, the next one goes through). A call of cost `c` at `now` is granted iff
//!
//! ```text
//!   Σ cost of entries with now − window < t ≤ now   +  c   ≤  limit
//!
//!        expired          │◄──────────── window ────────────►│
//!   ──●────●──────────────┼────●──────●────────────●───────────┼──→ time
//!                    now − window                           now
//! ```
//!
//! which is exact: no window of length `window`, wherever it lies, ever holds more
//! than `limit` granted permits, and a call is never refused if it would fit. The
//! price is memory proportional to the limit (two words per
//! permit of the limit).
//!
//! Two options, as the usual Redis sorted-set limiters offer them:
//!
//! * **Minimum spacing** ([`SlidingLog::with_min_spacing`]): a call is also refused
//!   while less than `min_spacing` has passed since the previous entry.
//! * **Recording rejected attempts** ([`SlidingLog::with_rejected_recorded`]): a
//!   refused call is added to the log too, so it counts against later calls like a
//!   granted one. A client that keeps hammering faster than the limit stays blocked
//!   until it slows down (recording extends
//!   the ban on a client that ignores it). With this option, and
//!   only with it, a refused [`reserve`](Algorithm::reserve) *changes the state*
//!   (that is its purpose); [`peek`](Algorithm::peek) never does. A call whose cost
//!   exceeds the limit ([`Verdict::Never`](super::Verdict::Never)) is not recorded.
//!   The minimum spacing then runs from the last attempt, granted or not.
//!
//! ```
//! use sluicegate::{algorithms::SlidingLog, clock::ManualClock, RateLimiter};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! // 3 calls per minute, at least 1 s apart.
//! let log = SlidingLog::new(3, Duration::from_secs(60))
//!     .unwrap()
//!     .with_min_spacing(Duration::from_secs(1));
//! let limiter = RateLimiter::with_clock(log, clock.clone());
//! assert!(limiter.try_acquire());
//! assert!(!limiter.try_acquire()); // too soon after the previous call
//! clock.advance(Duration::from_secs(1));
//! assert!(limiter.try_acquire());
//! clock.advance(Duration::from_secs(1));
//! assert!(limiter.try_acquire());
//! clock.advance(Duration::from_secs(1));
//! let refused = limiter.check(1).unwrap();
//! assert!(!refused.is_allowed());
//! // Exact: the first call leaves the window at 60 s.
//! assert_eq!(refused.retry_after(), Duration::from_secs(57));
//! ```
//!
//! # Cancelling
//!
//! A grant acts at once, so by the crate's cancel rule ([`Algorithm::cancel`]) it
//! can be given back only at the instant it was made (or up to a set's later time
//! to act, inside a set of limits). Its entry is then removed if it is still the
//! newest one, and with it the spacing it started: the next call is spaced from
//! the entry before. Behind a later entry, nothing comes back: later grants stay
//! where they are, and so does a refused attempt recorded after the grant (with
//! [`with_rejected_recorded`](SlidingLog::with_rejected_recorded)), which keeps
//! counting as it would have. A refusal itself has nothing to give back. After
//! such a cancel, exactness holds for calls whose clock reads no earlier than the
//! cancelled grant's instant: the grant may have dropped entries that had expired
//! by then, which a call reading an earlier time would still have counted.
//!
//! # Memory
//!
//! The state is a fixed array of `u64` words, allocated once, at
//! [`initial_state`](Algorithm::initial_state); nothing is allocated afterwards.
//! Three header words (the ring index of the oldest entry, the number of entries,
//! and the running count of permits logged before the oldest) precede a ring of
//! [`slots`](SlidingLog::slots) entries of two words each (time, running
//! count after it): `24 + 16 × slots` bytes. Because the size is fixed by the
//! configuration, a direct limiter keeps these words as atomics in a lock-free
//! cell.
//!
//! * Without recorded rejects, the log holds at most `limit` entries: every entry
//!   costs at least 1, a call is appended without dropping anything only while the
//!   entries held (expired ones included) leave room for it, and otherwise the
//!   expired ones are dropped first.
//! * With recorded rejects, it holds at most `limit + 1` entries: when an attempt
//!   finds `limit + 1` live entries, the *oldest* is evicted to make room. This
//!   changes no decision, ever, compared with an unbounded log: if an evicted entry
//!   would still be live, then so are the `limit + 1` newer ones kept, whose costs
//!   (at least 1 each) already exceed the limit, so both logs refuse; otherwise
//!   both hold the same live entries. And the entry whose expiry ends a refusal is
//!   always among the newest `limit − cost + 1`, so `retry_after` agrees too. The
//!   cap costs nothing but the memory it saves (tested against an unbounded log).
//!
//! # Cost
//!
//! Entries keep running counts rather than their own costs, so the permits in any
//! run of entries are one subtraction away, and no step walks the log:
//!
//! * Every call reads the header and the newest entry (time that goes backwards,
//!   and the minimum spacing, are judged from it). If the entries held, expired
//!   ones included, leave room for the call, that is all: it is granted (spacing
//!   allowing) and appended, and expired entries stay until their room is needed.
//! * Otherwise the call finds the first live entry: at once when the oldest is
//!   live, else by binary search, O(log limit). A granted call then drops the
//!   expired entries (one header write, however many they are) and appends.
//! * The step decides first (its plan: the verdict and what to write), and only
//!   a caller that reads the decision has it described: a refused call's exact
//!   `retry_after` is another binary search, for the entry whose expiry makes
//!   room. A direct limiter's non-blocking try runs the plan alone, on the
//!   shared words: a refusal costs loads only, a grant (or a recorded refusal)
//!   one compare-and-swap.
//!
//! # Edges
//!
//! * `limit = 0`, `window = 0`, `limit` above [`MAX_ENTRIES`], or a period
//!   beyond about 292 years: typed errors.
//! * A cost above `limit`: [`Verdict::Never`](super::Verdict::Never).
//! * Time that goes backwards is read as the time of the newest entry (which is also
//!   where the spacing runs from): an older `now` never expires more than a later
//!   one would have.

use super::validate::validate_positive_period;
use super::words::{WordEncoded, Words};
use super::{Algorithm, Decision, Pace, Receipt, Report, WordArray};
use crate::clock::Nanos;
use crate::error::ConfigError;
use ring::{at_word, wrap, BASE, HEAD, HEADER, LEN};
use std::time::Duration;

mod answer;
mod ring;

/// The largest `limit` of a log: 2²⁰ entries (16 MiB of ring per state, plus a
/// 24-byte header; one more entry when rejected attempts are recorded).
///
/// ```
/// use sluicegate::algorithms::sliding_log::{SlidingLog, MAX_ENTRIES};
/// use std::time::Duration;
/// assert!(SlidingLog::new(MAX_ENTRIES, Duration::from_secs(60)).is_ok());
/// assert!(SlidingLog::new(MAX_ENTRIES + 1, Duration::from_secs(60)).is_err());
/// ```
pub const MAX_ENTRIES: u64 = 1 << 20;

/// An exact sliding log: at most `limit` permits in any window of length `window`. See
/// the [module docs](self).
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, SlidingLog};
/// use std::time::Duration;
/// let log = SlidingLog::new(3, Duration::from_secs(60)).unwrap();
/// let mut state = log.initial_state(0);
/// let s = 1_000_000_000;
/// for t in [5, 15, 61] {
///     assert!(log.reserve::<Decision>(&mut state, t * s, 1, 0).is_allowed());
/// }
/// let refused = log.reserve::<Decision>(&mut state, 62 * s, 1, 0);
/// assert!(!refused.is_allowed());
/// // The 5 s entry expires at 65 s.
/// assert_eq!(refused.retry_after(), Duration::from_secs(3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingLog {
    limit: u64,
    window: Nanos,
    min_spacing: Nanos,
    /// Refused attempts are logged too.
    record_rejected: bool,
}

/// The state of a [`SlidingLog`]: a fixed array of words, a header (the ring slot
/// of the oldest entry, the number of entries, and a *base*) and a ring of
/// [`slots`](SlidingLog::slots) entries `(time, running count)` in time
/// order.
///
/// An entry keeps, instead of its own cost, the running count of permits logged
/// up to and including it; the base is the running count just before the oldest
/// entry. The cost of any run of entries is then one subtraction, so the permits
/// still live are found by a binary search for the first live entry, and the
/// instant a refused call would fit by another, without walking the log. Running
/// counts wrap around 2⁶⁴ and only their differences are used.
///
/// Expired entries are dropped lazily: only when a call needs their room, or
/// needs to know how many permits are live because the entries held, expired ones
/// included, would not leave room for it. The time of the newest entry is also
/// where the minimum spacing runs from.
///
/// Cloning allocates (a copy of the words). Two states are equal when they hold the
/// same entries, wherever they sit in their rings.
///
/// A log may step a state made by a log with another number of slots (say after its limit
/// was changed inside a set of limits) and decides as it would on its own state
/// holding the same entries. A ring with fewer slots than the log's is first moved
/// into one of that size (an allocation, once); a larger one is used as it is. A
/// log of another window length judges the entries held by its own window: an entry
/// that had expired under a shorter window counts again under a longer one if it
/// is still held.
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, SlidingLog};
/// use std::time::Duration;
/// let log = SlidingLog::new(2, Duration::from_secs(1)).unwrap();
/// let mut state = log.initial_state(0);
/// log.reserve::<Decision>(&mut state, 0, 2, 0);
/// let copy = state.clone(); // a second ring
/// assert!(!log.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// assert_eq!(state, copy); // not recording rejects: a refusal changes nothing
/// ```
#[derive(Clone)]
pub struct LogState {
    /// `[head, len, base]`, then the ring: `(at, running count)` per slot.
    words: Box<[u64]>,
}

impl LogState {
    /// The number of ring slots these words hold.
    fn ring_slots(&self) -> u64 {
        (self.words.len().saturating_sub(HEADER) / 2) as u64
    }

    /// The entries held, oldest first, as `(time, cost)`.
    fn entries(&self) -> impl Iterator<Item = (Nanos, u64)> + '_ {
        let ring = self.ring_slots();
        let head = self.words.word(HEAD);
        let len = self.words.word(LEN).min(ring);
        let mut before = self.words.word(BASE);
        (0..len).map(move |index| {
            let at = at_word(wrap(head.wrapping_add(index), ring));
            let count = self.words.word(at.wrapping_add(1));
            let cost = count.wrapping_sub(before);
            before = count;
            (self.words.word(at), cost)
        })
    }

    /// The number of entries held, live or expired (at most `limit`, or `limit + 1`
    /// when rejected attempts are recorded).
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, SlidingLog};
    /// use std::time::Duration;
    /// let log = SlidingLog::new(2, Duration::from_secs(1)).unwrap();
    /// let mut state = log.initial_state(0);
    /// log.reserve::<Decision>(&mut state, 0, 1, 0);
    /// assert_eq!(state.entry_count(), 1);
    /// ```
    pub fn entry_count(&self) -> usize {
        self.words.word(LEN).min(self.ring_slots()) as usize
    }

    /// True if the log holds no entry.
    ///
    /// Expired entries stay in the ring until a call needs their room (or needs to
    /// count what is live): the log can be non-empty while nothing counts.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, SlidingLog};
    /// use std::time::Duration;
    /// let log = SlidingLog::new(2, Duration::from_secs(1)).unwrap();
    /// let mut state = log.initial_state(0);
    /// assert!(state.is_empty());
    /// log.reserve::<Decision>(&mut state, 0, 1, 0);
    /// assert!(!state.is_empty());
    /// assert_eq!(log.live_entries(&state, 5_000_000_000).count(), 0);
    /// assert!(!state.is_empty()); // expired, but still held
    /// ```
    pub fn is_empty(&self) -> bool {
        self.entry_count() == 0
    }

    /// The bytes the state's words take on the heap: 24 for the header and 16 per
    /// entry of the ring, all allocated up front.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SlidingLog};
    /// use std::time::Duration;
    /// let log = SlidingLog::new(100, Duration::from_secs(1)).unwrap();
    /// let state = log.initial_state(0);
    /// assert_eq!(state.heap_bytes(), 24 + 100 * 16); // a header, then 16 bytes per entry
    /// let recording = log.with_rejected_recorded().initial_state(0);
    /// assert_eq!(recording.heap_bytes(), 24 + 101 * 16);
    /// ```
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.words)
    }
}

impl PartialEq for LogState {
    fn eq(&self, other: &Self) -> bool {
        self.entries().eq(other.entries())
    }
}

impl Eq for LogState {}

impl std::fmt::Debug for LogState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogState")
            .field("entries", &self.entries().collect::<Vec<_>>())
            .field("slots", &self.ring_slots())
            .finish()
    }
}

impl SlidingLog {
    /// At most `limit` permits in any window of length `window`, no spacing, refused
    /// calls not recorded.
    ///
    /// # Errors
    /// [`ConfigError::InvalidCount`] for a zero `limit` or one above [`MAX_ENTRIES`];
    /// [`ConfigError::InvalidDuration`] for a zero `window` or one beyond about 292 years.
    ///
    /// ```
    /// use sluicegate::{algorithms::SlidingLog, ConfigError};
    /// use std::time::Duration;
    /// assert!(SlidingLog::new(100, Duration::from_secs(60)).is_ok());
    /// assert!(matches!(SlidingLog::new(0, Duration::from_secs(60)), Err(ConfigError::InvalidCount { .. })));
    /// assert!(matches!(SlidingLog::new(1, Duration::ZERO), Err(ConfigError::InvalidDuration { .. })));
    /// ```
    pub fn new(limit: u64, window: Duration) -> Result<Self, ConfigError> {
        if limit == 0 || limit > MAX_ENTRIES {
            return Err(ConfigError::InvalidCount {
                what: "limit",
                value: limit,
                requirement: "between 1 and 2^20 (one log entry per permit)",
            });
        }
        let nanos = validate_positive_period("window", window)?;
        Ok(SlidingLog {
            limit,
            window: nanos,
            min_spacing: 0,
            record_rejected: false,
        })
    }

    /// The same log, also refusing a call that comes less than `min_spacing` after
    /// the previous one (a "minimum distance" between calls). Zero means no spacing.
    /// A spacing whose end would reach the clock's last reading (`u64::MAX` ns, 584
    /// years after its zero, which stands for "for ever") never ends: every call
    /// after the one it follows is refused for good
    /// ([`Verdict::Never`](crate::Verdict::Never), so acquires fail at once), and
    /// `Duration::MAX` allows one call, ever.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, SlidingLog};
    /// use std::time::Duration;
    /// let log = SlidingLog::new(100, Duration::from_secs(60)).unwrap()
    ///     .with_min_spacing(Duration::from_millis(500));
    /// let mut state = log.initial_state(0);
    /// assert!(log.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
    /// let refused = log.reserve::<Decision>(&mut state, 200_000_000, 1, 0);
    /// assert_eq!(refused.retry_after(), Duration::from_millis(300));
    ///
    /// let once = SlidingLog::new(100, Duration::from_secs(60)).unwrap()
    ///     .with_min_spacing(Duration::MAX);
    /// let mut state = once.initial_state(0);
    /// assert!(once.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
    /// assert!(once.reserve::<Decision>(&mut state, 1_000_000_000, 1, 0).is_never());
    /// ```
    pub fn with_min_spacing(mut self, min_spacing: Duration) -> Self {
        self.min_spacing = crate::clock::duration_to_nanos(min_spacing);
        self
    }

    /// The same log, also recording refused attempts, in at most
    /// `limit + 1` entries (see the [module docs](self#memory): the bound changes no
    /// decision). Inside a set of limits ([`AllOf`](super::AllOf),
    /// [`Limits`](super::Limits)) a refused call records nothing in any member, so
    /// there the log answers as it would without recording.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, SlidingLog};
    /// use std::time::Duration;
    /// let log = SlidingLog::new(1, Duration::from_secs(10)).unwrap().with_rejected_recorded();
    /// let mut state = log.initial_state(0);
    /// let s = 1_000_000_000;
    /// assert!(log.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
    /// assert!(!log.reserve::<Decision>(&mut state, 9 * s, 1, 0).is_allowed()); // recorded at 9 s
    /// assert!(!log.reserve::<Decision>(&mut state, 10 * s, 1, 0).is_allowed()); // still banned
    /// assert!(log.reserve::<Decision>(&mut state, 20 * s, 1, 0).is_allowed());
    /// ```
    pub fn with_rejected_recorded(mut self) -> Self {
        self.record_rejected = true;
        self
    }

    /// The most permits any window of length `window` holds.
    ///
    /// ```
    /// use sluicegate::algorithms::SlidingLog;
    /// use std::time::Duration;
    /// let log = SlidingLog::new(3, Duration::from_secs(60)).unwrap();
    /// assert_eq!((log.limit(), log.window()), (3, Duration::from_secs(60)));
    /// ```
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window's length: an entry made at `t` counts at every instant before
    /// `t + window`, and no longer at `t + window` itself.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SlidingLog};
    /// use std::time::Duration;
    /// let log = SlidingLog::new(1, Duration::from_secs(10)).unwrap();
    /// assert_eq!(log.window(), Duration::from_secs(10));
    /// let (mut state, s) = (log.initial_state(0), 1_000_000_000);
    /// assert!(log.reserve::<bool>(&mut state, 3 * s, 1, 0));
    /// // The entry of 3 s counts up to 13 s, that instant excluded.
    /// assert!(!log.reserve::<bool>(&mut state, 13 * s - 1, 1, 0));
    /// assert!(log.reserve::<bool>(&mut state, 13 * s, 1, 0));
    /// ```
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// The minimum time between two calls (zero if none).
    ///
    /// ```
    /// use sluicegate::algorithms::SlidingLog;
    /// use std::time::Duration;
    /// let log = SlidingLog::new(3, Duration::from_secs(60)).unwrap();
    /// assert_eq!(log.min_spacing(), Duration::ZERO);
    /// let spaced = log.with_min_spacing(Duration::from_secs(1));
    /// assert_eq!(spaced.min_spacing(), Duration::from_secs(1));
    /// ```
    pub fn min_spacing(&self) -> Duration {
        Duration::from_nanos(self.min_spacing)
    }

    /// True if refused attempts are recorded.
    ///
    /// ```
    /// use sluicegate::algorithms::SlidingLog;
    /// use std::time::Duration;
    /// let log = SlidingLog::new(3, Duration::from_secs(60)).unwrap();
    /// assert!(!log.rejected_recorded());
    /// assert!(log.with_rejected_recorded().rejected_recorded());
    /// ```
    pub fn rejected_recorded(&self) -> bool {
        self.record_rejected
    }

    /// The entry slots of the log's ring, the most entries it can hold: `limit`, or
    /// `limit + 1` when rejected attempts are recorded. The state allocates this many
    /// once.
    ///
    /// ```
    /// use sluicegate::algorithms::SlidingLog;
    /// use std::time::Duration;
    /// let log = SlidingLog::new(3, Duration::from_secs(60)).unwrap();
    /// assert_eq!(log.slots(), 3);
    /// assert_eq!(log.with_rejected_recorded().slots(), 4);
    /// ```
    #[inline]
    pub fn slots(&self) -> u64 {
        self.limit + u64::from(self.record_rejected)
    }

    /// The entries that count at `now`, oldest first, as `(time in clock
    /// nanoseconds, cost)`: the set a table of the log draws. Reads without changing
    /// anything.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, SlidingLog};
    /// use std::time::Duration;
    /// let log = SlidingLog::new(3, Duration::from_secs(60)).unwrap();
    /// let mut state = log.initial_state(0);
    /// let s = 1_000_000_000;
    /// log.reserve::<Decision>(&mut state, 5 * s, 1, 0);
    /// log.reserve::<Decision>(&mut state, 15 * s, 2, 0);
    /// assert_eq!(log.live_entries(&state, 70 * s).collect::<Vec<_>>(), vec![(15 * s, 2)]);
    /// ```
    pub fn live_entries<'a>(
        &self,
        state: &'a LogState,
        now: Nanos,
    ) -> impl Iterator<Item = (Nanos, u64)> + 'a + use<'a> {
        let view = self.view(&state.words[..], state.ring_slots(), now);
        state.entries().skip(view.first_live as usize)
    }
}

impl Algorithm for SlidingLog {
    type State = LogState;
    type Shape = WordArray;

    /// An empty log with room for [`slots`](SlidingLog::slots) entries (the
    /// one allocation this algorithm makes).
    fn initial_state(&self, now: Nanos) -> LogState {
        let mut words = vec![0; self.state_words()].into_boxed_slice();
        self.init_words(&mut words[..], now);
        LogState { words }
    }

    /// Grants `cost` now if the window has room (and the spacing has passed), else
    /// denies with the exact `retry_after`. It never reserves future capacity, so
    /// `max_wait` is unused. With recorded rejects, a denial appends the attempt. A
    /// grant's receipt names its entry.
    fn reserve<R: Report>(
        &self,
        state: &mut LogState,
        now: Nanos,
        cost: u64,
        _max_wait: Nanos,
    ) -> R {
        if state.ring_slots() < self.slots() {
            *state = self.grown(state);
        }
        let ring = state.ring_slots();
        self.reserve_in(&mut state.words[..], ring, now, cost)
    }

    /// Removes the grant's entry if it is still the newest (see the
    /// [module docs](self#cancelling)).
    fn cancel(&self, state: &mut LogState, now: Nanos, receipt: &Receipt, acts_at: Nanos) {
        let ring = state.ring_slots();
        self.cancel_in(&mut state.words[..], ring, now, receipt, acts_at);
    }

    fn peek(&self, state: &LogState, now: Nanos, cost: u64) -> Decision {
        self.peek_in(&state.words[..], state.ring_slots(), (now, cost), true)
    }

    /// With recorded rejects, a refusal described as if the attempt were not
    /// logged: the same log without them; `None` without.
    fn peek_unrecorded(&self, state: &LogState, now: Nanos, cost: u64) -> Option<Decision> {
        let ring = state.ring_slots();
        self.record_rejected
            .then(|| self.peek_in(&state.words[..], ring, (now, cost), false))
    }

    fn pace(&self) -> Option<Pace> {
        let window = Pace::per(self.limit(), self.window())?;
        let spacing = Pace::new(self.min_spacing(), self.window());
        Pace::slowest(Some(window), Some(spacing))
    }

    fn is_replenished(&self, state: &LogState, now: Nanos) -> bool {
        let view = self.view(&state.words[..], state.ring_slots(), now);
        view.live == 0
            && self
                .spacing_end(view.header.last())
                .is_some_and(|end| view.header.at >= end)
    }
}

#[cfg(test)]
mod tests;
