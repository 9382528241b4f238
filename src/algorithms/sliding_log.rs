//! The exact sliding log: `limit` permits in any window of `duration`, checked
//! against the timestamps of past calls (seeds 001 and 004).
//!
//! # The model
//!
//! The log keeps one entry per granted call: its time and its cost. An entry counts
//! while it is younger than `duration`: an entry at `t` counts at every instant
//! before `t + duration` and no longer at `t + duration` itself (seed 000: "it's
//! been exactly one interval since your last request": the new request goes
//! through). A call of cost `c` at `now` is granted iff
//!
//! ```text
//!   Σ cost of entries with now − duration < t ≤ now   +  c   ≤  limit
//!
//!        expired          │◄──────────── duration ────────────►│
//!   ──●────●──────────────┼────●──────●────────────●───────────┼──→ time
//!                    now − duration                           now
//! ```
//!
//! which is exact: no window of length `duration`, wherever it lies, ever holds more
//! than `limit` granted permits, and a call is never refused if it would fit. The
//! price is memory proportional to the limit (seed 001's first con, seed 003's
//! "high memory footprint").
//!
//! Two options from seed 004's description of a Redis sorted-set limiter:
//!
//! * **Minimum spacing** ([`SlidingLog::with_min_spacing`]): a call is also refused
//!   while less than `min_spacing` has passed since the previous entry.
//! * **Recording rejected attempts** ([`SlidingLog::with_rejected_recorded`]): a
//!   refused call is added to the log too, so it counts against later calls like a
//!   granted one. A client that keeps hammering faster than the limit stays blocked
//!   until it slows down (seed 003: "it would just extend a ban on a malicious
//!   user"); seed 001's sliding-log table behaves this way. With this option, and
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
//! # Memory
//!
//! The state is a fixed array of `u64` words, allocated once, at
//! [`initial_state`](Algorithm::initial_state); nothing is allocated afterwards.
//! Three header words (the ring index of the oldest entry, the number of entries,
//! the sum of their costs) precede a ring of [`capacity`](SlidingLog::capacity)
//! entries of two words each (time, cost): `24 + 16 × capacity` bytes. Because the
//! size is fixed by the configuration, a direct limiter keeps these words as
//! atomics in a lock-free [`WordArrayCell`](crate::stores::WordArrayCell) (see
//! [`word_array`](super::word_array)).
//!
//! * Without recorded rejects, the log holds at most `limit` entries: every entry
//!   in the window costs at least 1, and expired ones are dropped before a new one
//!   is added.
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
//! Every call reads the header, the newest entry (time that goes backwards, and
//! the minimum spacing, are judged from it) and the oldest entries while they have
//! expired (with room for the call, the two oldest whether expired or not, judged
//! without branching): in the common cases the oldest is live, or only a few have
//! expired, so that is a handful of words. A granted call drops the expired entries (each entry
//! is dropped once: amortized O(1)) and appends one. A refused call leaves the log
//! as it is (unless it records the attempt), so expired entries it skipped are read
//! again by the next call; for its exact `retry_after` it also walks live entries
//! from the oldest until enough would have expired: O(1) in the common cases,
//! O(limit) at worst. A direct limiter's non-blocking try needs no `retry_after`
//! and skips that walk ([`plan_try`](super::word_array::WordArrayAlgorithm::plan_try)):
//! a refusal costs loads only, a grant one compare-and-swap.
//!
//! # Edges
//!
//! * `limit = 0`, `duration = 0`, `limit` above [`MAX_ENTRIES`], or a period
//!   beyond about 292 years: typed errors.
//! * A cost above `limit`: [`Verdict::Never`](super::Verdict::Never).
//! * Time that goes backwards is read as the time of the newest entry (which is also
//!   where the spacing runs from): an older `now` never expires more than a later
//!   one would have.

use super::validate::validate_positive_period;
use super::word_array::{WordArrayAlgorithm, Words, WordsMut};
use super::{Algorithm, Decision};
use crate::clock::Nanos;
use crate::error::Error;
use std::time::Duration;

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

/// An exact sliding log: at most `limit` permits in any window of `duration`. See
/// the [module docs](self).
///
/// ```
/// use sluicegate::algorithms::{Algorithm, SlidingLog};
/// use std::time::Duration;
/// let log = SlidingLog::new(3, Duration::from_secs(60)).unwrap();
/// let mut state = log.initial_state(0);
/// let s = 1_000_000_000;
/// for t in [5, 15, 61] {
///     assert!(log.reserve(&mut state, t * s, 1, 0).is_allowed());
/// }
/// let refused = log.reserve(&mut state, 62 * s, 1, 0);
/// assert!(!refused.is_allowed());
/// // The 5 s entry expires at 65 s.
/// assert_eq!(refused.retry_after(), Duration::from_secs(3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingLog {
    limit: u64,
    duration: Nanos,
    min_spacing: Nanos,
    /// Refused attempts are logged too (seed 004).
    record_rejected: bool,
}

/// Word index of the ring slot that holds the oldest entry.
const HEAD: usize = 0;
/// Word index of the number of entries held.
const LEN: usize = 1;
/// Word index of the sum of the held entries' costs.
const TOTAL: usize = 2;
/// The number of header words, before the ring.
const HEADER: usize = 3;

/// The word index of the time of the entry in ring slot `slot`; its cost is the
/// next word. Wrapping: a slot computed from mixed reads gives an index past the
/// end, where reads answer 0 and writes do nothing.
#[inline(always)]
fn at_word(slot: u64) -> usize {
    (slot as usize).wrapping_mul(2).wrapping_add(HEADER)
}

/// `slot` brought back into a ring of `capacity` slots, for a slot below twice the
/// capacity. A conditional subtract: the capacity is rarely a power of two, and a
/// division would cost more than the rest of a try.
#[inline(always)]
fn wrap(slot: u64, capacity: u64) -> u64 {
    if slot >= capacity {
        slot.wrapping_sub(capacity)
    } else {
        slot
    }
}

/// The state of a [`SlidingLog`]: a fixed array of words, a header (the ring slot
/// of the oldest entry, the number of entries, their total cost) and a ring of
/// [`capacity`](SlidingLog::capacity) entries `(time, cost)` in time order. The
/// time of the newest entry is also where the minimum spacing runs from.
///
/// Cloning allocates (a copy of the words). Two states are equal when they hold the
/// same entries, wherever they sit in their rings.
///
/// A log may step a state made by a log of another capacity (say after its limit
/// was changed inside a set of limits) and decides as it would on its own state
/// holding the same entries. A ring smaller than the log's capacity is first moved
/// into one of that size (an allocation, once); a larger one is used as it is.
///
/// ```
/// use sluicegate::algorithms::{Algorithm, SlidingLog};
/// use std::time::Duration;
/// let log = SlidingLog::new(2, Duration::from_secs(1)).unwrap();
/// let mut state = log.initial_state(0);
/// log.reserve(&mut state, 0, 2, 0);
/// let copy = state.clone(); // a second ring
/// assert!(!log.reserve(&mut state, 0, 1, 0).is_allowed());
/// assert_eq!(state, copy); // not recording rejects: a refusal changes nothing
/// ```
#[derive(Clone)]
pub struct LogState {
    /// `[head, len, total]`, then the ring: `(at, cost)` per slot.
    words: Box<[u64]>,
}

impl LogState {
    /// The number of ring slots these words hold.
    fn ring_capacity(&self) -> u64 {
        (self.words.len().saturating_sub(HEADER) / 2) as u64
    }

    /// The entries held, oldest first, as `(time, cost)`.
    fn entries(&self) -> impl Iterator<Item = (Nanos, u64)> + '_ {
        let capacity = self.ring_capacity();
        let head = self.words.word(HEAD);
        let len = self.words.word(LEN).min(capacity);
        (0..len).map(move |index| {
            let at = at_word(wrap(head.wrapping_add(index), capacity));
            (self.words.word(at), self.words.word(at.wrapping_add(1)))
        })
    }

    /// The number of entries held, live or expired (at most `limit`, or `limit + 1`
    /// when rejected attempts are recorded).
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SlidingLog};
    /// use std::time::Duration;
    /// let log = SlidingLog::new(2, Duration::from_secs(1)).unwrap();
    /// let mut state = log.initial_state(0);
    /// log.reserve(&mut state, 0, 1, 0);
    /// assert_eq!(state.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.words.word(LEN).min(self.ring_capacity()) as usize
    }

    /// True if the log holds no entry.
    ///
    /// Expired entries stay in the ring until a later call appends: the log can be
    /// non-empty while nothing counts.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SlidingLog};
    /// use std::time::Duration;
    /// let log = SlidingLog::new(2, Duration::from_secs(1)).unwrap();
    /// let mut state = log.initial_state(0);
    /// assert!(state.is_empty());
    /// log.reserve(&mut state, 0, 1, 0);
    /// assert!(!state.is_empty());
    /// assert_eq!(log.live_entries(&state, 5_000_000_000).count(), 0);
    /// assert!(!state.is_empty()); // expired, but still held
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        self.words.word(TOTAL) == other.words.word(TOTAL) && self.entries().eq(other.entries())
    }
}

impl Eq for LogState {}

impl std::fmt::Debug for LogState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogState")
            .field("entries", &self.entries().collect::<Vec<_>>())
            .field("total", &self.words.word(TOTAL))
            .field("capacity", &self.ring_capacity())
            .finish()
    }
}

/// What a non-blocking try of a [`SlidingLog`] writes, planned by
/// [`plan_try`](WordArrayAlgorithm::plan_try) and written by
/// [`apply_try`](WordArrayAlgorithm::apply_try): the header after the step (the
/// expired entries dropped, the oldest evicted if the log was full) and the entry
/// it appends, a grant or, with [`with_rejected_recorded`](SlidingLog::with_rejected_recorded),
/// a refusal.
///
/// ```
/// use sluicegate::algorithms::word_array::WordArrayAlgorithm;
/// use sluicegate::algorithms::SlidingLog;
/// use std::time::Duration;
/// let log = SlidingLog::new(1, Duration::from_secs(1)).unwrap().with_rejected_recorded();
/// let mut words = vec![0; log.state_words()];
/// log.init_words(&mut words[..], 0);
/// let (granted, take) = log.plan_try(&words[..], 0, 1);
/// assert!(granted);
/// log.apply_try(&mut words[..], take.unwrap());
/// // Refused, and recorded: there is still something to write.
/// let (granted, take) = log.plan_try(&words[..], 0, 1);
/// assert!(!granted && take.is_some());
/// // A cost above the limit is never granted, and never recorded.
/// assert_eq!(log.plan_try(&words[..], 0, 2), (false, None));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogTake {
    /// The header after the step.
    head: u64,
    len: u64,
    total: u64,
    /// The ring slot of the new entry, and the entry.
    slot: u64,
    at: Nanos,
    cost: u64,
}

/// The log as seen at one instant, computed without touching the state.
#[derive(Clone, Copy)]
struct View {
    /// The instant used: `now`, or the time of the newest entry if later.
    at: Nanos,
    /// The header: the ring slot of the oldest entry, the number of entries (at
    /// most the ring's size).
    head: u64,
    len: u64,
    /// The ring's number of slots: the log's capacity, unless the state was made
    /// by a log of a larger one.
    ring: u64,
    /// The time of the newest entry (0 when there is none).
    newest: Nanos,
    /// Index (from the oldest) of the first live entry: those before have expired.
    first_live: u64,
    /// The sum of the live entries' costs.
    live: u64,
}

impl View {
    /// The entry `index` places after the oldest, as `(time, cost)`.
    #[inline(always)]
    fn entry<W: Words + ?Sized>(&self, words: &W, index: u64) -> (Nanos, u64) {
        let at = at_word(wrap(self.head.wrapping_add(index), self.ring));
        (words.word(at), words.word(at.wrapping_add(1)))
    }

    /// The time of the newest entry, if any: where the minimum spacing runs from.
    #[inline(always)]
    fn last(&self) -> Option<Nanos> {
        (self.len > 0).then_some(self.newest)
    }
}

impl SlidingLog {
    /// At most `limit` permits in any window of `duration`, no spacing, refused
    /// calls not recorded.
    ///
    /// # Errors
    /// [`Error::InvalidCount`] for a zero `limit` or one above [`MAX_ENTRIES`];
    /// [`Error::InvalidDuration`] for a zero `duration` or one beyond about 292 years.
    ///
    /// ```
    /// use sluicegate::{algorithms::SlidingLog, Error};
    /// use std::time::Duration;
    /// assert!(SlidingLog::new(100, Duration::from_secs(60)).is_ok());
    /// assert!(matches!(SlidingLog::new(0, Duration::from_secs(60)), Err(Error::InvalidCount { .. })));
    /// assert!(matches!(SlidingLog::new(1, Duration::ZERO), Err(Error::InvalidDuration { .. })));
    /// ```
    pub fn new(limit: u64, duration: Duration) -> Result<Self, Error> {
        if limit == 0 || limit > MAX_ENTRIES {
            return Err(Error::InvalidCount {
                what: "limit",
                value: limit,
                requirement: "between 1 and 2^20 (one log entry per permit)",
            });
        }
        let nanos = validate_positive_period("duration", duration)?;
        Ok(SlidingLog {
            limit,
            duration: nanos,
            min_spacing: 0,
            record_rejected: false,
        })
    }

    /// The same log, also refusing a call that comes less than `min_spacing` after
    /// the previous one (seed 004's "minimum distance"). Zero means no spacing;
    /// a spacing beyond 584 years saturates (one call, ever).
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SlidingLog};
    /// use std::time::Duration;
    /// let log = SlidingLog::new(100, Duration::from_secs(60)).unwrap()
    ///     .with_min_spacing(Duration::from_millis(500));
    /// let mut state = log.initial_state(0);
    /// assert!(log.reserve(&mut state, 0, 1, 0).is_allowed());
    /// let refused = log.reserve(&mut state, 200_000_000, 1, 0);
    /// assert_eq!(refused.retry_after(), Duration::from_millis(300));
    /// ```
    pub fn with_min_spacing(mut self, min_spacing: Duration) -> Self {
        self.min_spacing = crate::clock::duration_to_nanos(min_spacing);
        self
    }

    /// The same log, also recording refused attempts (seed 004), in at most
    /// `limit + 1` entries (see the [module docs](self#memory): the bound changes no
    /// decision).
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SlidingLog};
    /// use std::time::Duration;
    /// let log = SlidingLog::new(1, Duration::from_secs(10)).unwrap().with_rejected_recorded();
    /// let mut state = log.initial_state(0);
    /// let s = 1_000_000_000;
    /// assert!(log.reserve(&mut state, 0, 1, 0).is_allowed());
    /// assert!(!log.reserve(&mut state, 9 * s, 1, 0).is_allowed()); // recorded at 9 s
    /// assert!(!log.reserve(&mut state, 10 * s, 1, 0).is_allowed()); // still banned
    /// assert!(log.reserve(&mut state, 20 * s, 1, 0).is_allowed());
    /// ```
    pub fn with_rejected_recorded(mut self) -> Self {
        self.record_rejected = true;
        self
    }

    /// The most permits any window of `duration` holds.
    ///
    /// ```
    /// use sluicegate::algorithms::SlidingLog;
    /// use std::time::Duration;
    /// let log = SlidingLog::new(3, Duration::from_secs(60)).unwrap();
    /// assert_eq!((log.limit(), log.duration()), (3, Duration::from_secs(60)));
    /// ```
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window's length (see [`limit`](SlidingLog::limit) for an example).
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.duration)
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

    /// The most entries the log can hold: `limit`, or `limit + 1` when rejected
    /// attempts are recorded. The state allocates this many once.
    ///
    /// ```
    /// use sluicegate::algorithms::SlidingLog;
    /// use std::time::Duration;
    /// let log = SlidingLog::new(3, Duration::from_secs(60)).unwrap();
    /// assert_eq!(log.capacity(), 3);
    /// assert_eq!(log.with_rejected_recorded().capacity(), 4);
    /// ```
    #[inline]
    pub fn capacity(&self) -> u64 {
        self.limit + u64::from(self.record_rejected)
    }

    /// The entries that count at `now`, oldest first, as `(time in clock
    /// nanoseconds, cost)`: the set seed 001's table draws. Reads without changing
    /// anything.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SlidingLog};
    /// use std::time::Duration;
    /// let log = SlidingLog::new(3, Duration::from_secs(60)).unwrap();
    /// let mut state = log.initial_state(0);
    /// let s = 1_000_000_000;
    /// log.reserve(&mut state, 5 * s, 1, 0);
    /// log.reserve(&mut state, 15 * s, 2, 0);
    /// assert_eq!(log.live_entries(&state, 70 * s).collect::<Vec<_>>(), vec![(15 * s, 2)]);
    /// ```
    pub fn live_entries<'a>(
        &self,
        state: &'a LogState,
        now: Nanos,
    ) -> impl Iterator<Item = (Nanos, u64)> + 'a {
        let view = self.view(&state.words[..], state.ring_capacity(), now, 1);
        (view.first_live..view.len).map(move |index| view.entry(&state.words[..], index))
    }

    /// The log at `now`, in a ring of `ring` slots, for a call of `cost`: the newest
    /// entry, the two oldest, and the next ones while they have expired. Total on any
    /// words: at most `8 + 2 × min(len, ring)` reads.
    #[inline(always)]
    fn view<W: Words + ?Sized>(&self, words: &W, ring: u64, now: Nanos, cost: u64) -> View {
        let len = words.word(LEN).min(ring);
        let total = words.word(TOTAL);
        let mut view = View {
            at: now,
            head: words.word(HEAD),
            len,
            ring,
            newest: 0,
            first_live: 0,
            live: total,
        };
        if len > 0 {
            view.newest = view.entry(words, len - 1).0;
            view.at = now.max(view.newest);
        }
        let is_expired = |at: Nanos| at.saturating_add(self.duration) <= view.at;
        // Entries are in time order, so the expired ones come first.
        let mut expired: u64 = 0;
        if total.saturating_add(cost) <= self.limit {
            // Room whatever has expired: the call is granted (spacing allowing) and
            // drops the expired entries. In a log in steady use 0, 1 or 2 of them
            // expire at each call, in no pattern, so the two oldest are judged
            // without branching (a branch on it, which waits for the clock, was
            // mispredicted often enough to cost 4 of 22 ns, measured).
            let (oldest, oldest_cost) = view.entry(words, 0);
            let (second, second_cost) = view.entry(words, 1);
            let first = (len > 0) & is_expired(oldest);
            let both = first & (len > 1) & is_expired(second);
            view.first_live = u64::from(first) + u64::from(both);
            expired = (oldest_cost & 0u64.wrapping_sub(u64::from(first)))
                .saturating_add(second_cost & 0u64.wrapping_sub(u64::from(both)));
            if !both {
                view.live = total.saturating_sub(expired);
                return view;
            }
        }
        // Near the limit (usually the oldest is live: one read), or more than two
        // expired.
        while view.first_live < len {
            let at = at_word(wrap(view.head.wrapping_add(view.first_live), ring));
            if !is_expired(words.word(at)) {
                break;
            }
            expired = expired.saturating_add(words.word(at.wrapping_add(1)));
            view.first_live += 1;
        }
        view.live = total.saturating_sub(expired);
        view
    }

    /// When the minimum spacing after the last call ends (0 when there is none).
    #[inline(always)]
    fn spaced_at(&self, last: Option<Nanos>) -> Nanos {
        match last {
            Some(last) if self.min_spacing > 0 => last.saturating_add(self.min_spacing),
            _ => 0,
        }
    }

    /// The first instant at which the entries from `from` on (oldest first, then
    /// `attempt` if given), whose costs sum to `live`, have expired enough that
    /// `cost` more fits the limit.
    fn fits_at<W: Words + ?Sized>(
        &self,
        words: &W,
        view: &View,
        from: u64,
        attempt: Option<(Nanos, u64)>,
        live: u64,
        cost: u64,
    ) -> Nanos {
        let allowed = self.limit.saturating_sub(cost);
        let mut live = live;
        if live <= allowed {
            return 0;
        }
        let entries = (from..view.len).map(|index| view.entry(words, index));
        for (at, entry_cost) in entries.chain(attempt) {
            live = live.saturating_sub(entry_cost);
            if live <= allowed {
                return at.saturating_add(self.duration);
            }
        }
        // Unreachable while cost <= limit: every entry eventually expires.
        Nanos::MAX
    }

    /// When everything that blocks a call has gone.
    fn reset_at(&self, newest: Option<Nanos>, last: Option<Nanos>) -> Nanos {
        let expired = newest.map_or(0, |at| at.saturating_add(self.duration));
        expired.max(self.spaced_at(last))
    }

    fn remaining(&self, live: u64) -> u64 {
        self.limit.saturating_sub(live)
    }

    /// What appending the entry `(view.at, cost)` writes: the expired entries
    /// dropped, then the oldest evicted if the log is still full. Total on any view;
    /// room for the entry needs a ring of at least the log's capacity.
    #[inline(always)]
    fn plan_append<W: Words + ?Sized>(&self, words: &W, view: &View, cost: u64) -> LogTake {
        let mut dropped = view.first_live;
        let mut total = view.live;
        if view.len.wrapping_sub(dropped) >= self.capacity() {
            total = total.saturating_sub(view.entry(words, dropped).1);
            dropped = dropped.wrapping_add(1);
        }
        LogTake {
            head: wrap(view.head.wrapping_add(dropped), view.ring),
            len: view.len.wrapping_sub(dropped).wrapping_add(1),
            total: total.saturating_add(cost),
            // Just after the newest entry, whatever was dropped (the new head plus
            // the new length less one comes to the same slot). Computed from the
            // header alone, the address of the entry's stores is known before the
            // decision, which waits for the clock: a later call's loads need not
            // wait to learn whether they read what these stores write.
            slot: wrap(view.head.wrapping_add(view.len), view.ring),
            at: view.at,
            cost,
        }
    }

    /// The decision at `view`, without recording a refused attempt.
    fn judge<W: Words + ?Sized>(
        &self,
        words: &W,
        view: &View,
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, Decision> {
        let last = view.last();
        let reset = self.reset_at(last, last).saturating_sub(now);
        let remaining = self.remaining(view.live);
        if cost > self.limit {
            return Err(Decision::never(self.limit, remaining, reset));
        }
        let fits = view.live.saturating_add(cost) <= self.limit;
        let spaced = view.at >= self.spaced_at(last);
        if fits && spaced {
            let reset = self
                .reset_at(Some(view.at), Some(view.at))
                .saturating_sub(now);
            let remaining = self.remaining(view.live.saturating_add(cost));
            return Ok(Decision::allowed(self.limit, remaining, reset));
        }
        let at = self
            .fits_at(words, view, view.first_live, None, view.live, cost)
            .max(self.spaced_at(last));
        Err(Decision::denied(
            self.limit,
            remaining,
            at.saturating_sub(now),
            reset,
        ))
    }

    /// The decision a recorded refusal gives: as if the attempt were already in the
    /// log, so that a retry at `retry_after` succeeds.
    fn recorded_refusal<W: Words + ?Sized>(
        &self,
        words: &W,
        view: &View,
        now: Nanos,
        cost: u64,
    ) -> Decision {
        // The entries that would stay after dropping the expired and evicting for room.
        let held = view.len - view.first_live;
        let evicted = u64::from(held >= self.capacity());
        let evicted_cost = if evicted == 1 {
            view.entry(words, view.first_live).1
        } else {
            0
        };
        let live = view.live.saturating_sub(evicted_cost).saturating_add(cost);
        let at = self
            .fits_at(
                words,
                view,
                view.first_live + evicted,
                Some((view.at, cost)),
                live,
                cost,
            )
            .max(self.spaced_at(Some(view.at)));
        let reset = self
            .reset_at(Some(view.at), Some(view.at))
            .saturating_sub(now);
        Decision::denied(
            self.limit,
            self.remaining(live),
            at.saturating_sub(now),
            reset,
        )
    }

    /// `state`'s entries in a ring of this log's capacity, for a state whose ring is
    /// smaller (so all its entries fit).
    #[cold]
    fn grown(&self, state: &LogState) -> LogState {
        let mut words = vec![0; self.state_words()].into_boxed_slice();
        let mut len = 0;
        for (at, cost) in state.entries() {
            let index = at_word(len);
            words.set_word(index, at);
            words.set_word(index + 1, cost);
            len += 1;
        }
        words.set_word(LEN, len);
        words.set_word(TOTAL, state.words.word(TOTAL));
        LogState { words }
    }

    /// [`Algorithm::reserve`] on words holding a ring of `ring` slots.
    fn reserve_in<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        ring: u64,
        now: Nanos,
        cost: u64,
    ) -> Decision {
        let view = self.view(&*words, ring, now, cost);
        match self.judge(&*words, &view, now, cost) {
            Ok(granted) => {
                let take = self.plan_append(&*words, &view, cost);
                self.apply_try(words, take);
                granted
            }
            Err(refused) if refused.is_never() || !self.record_rejected => refused,
            Err(_) => {
                let decision = self.recorded_refusal(&*words, &view, now, cost);
                let take = self.plan_append(&*words, &view, cost);
                self.apply_try(words, take);
                decision
            }
        }
    }

    /// [`Algorithm::peek`] on words holding a ring of `ring` slots.
    fn peek_in<W: Words + ?Sized>(&self, words: &W, ring: u64, now: Nanos, cost: u64) -> Decision {
        let view = self.view(words, ring, now, cost);
        match self.judge(words, &view, now, cost) {
            Ok(decision) => decision,
            Err(refused) if refused.is_never() || !self.record_rejected => refused,
            Err(_) => self.recorded_refusal(words, &view, now, cost),
        }
    }
}

impl Algorithm for SlidingLog {
    type State = LogState;

    /// An empty log with room for [`capacity`](SlidingLog::capacity) entries (the
    /// one allocation this algorithm makes).
    fn initial_state(&self, now: Nanos) -> LogState {
        let mut words = vec![0; self.state_words()].into_boxed_slice();
        self.init_words(&mut words[..], now);
        LogState { words }
    }

    /// Grants `cost` now if the window has room (and the spacing has passed), else
    /// denies with the exact `retry_after`. It never reserves future capacity, so
    /// `max_wait` is unused. With recorded rejects, a denial appends the attempt.
    fn reserve(&self, state: &mut LogState, now: Nanos, cost: u64, _max_wait: Nanos) -> Decision {
        if state.ring_capacity() < self.capacity() {
            *state = self.grown(state);
        }
        let ring = state.ring_capacity();
        self.reserve_in(&mut state.words[..], ring, now, cost)
    }

    fn peek(&self, state: &LogState, now: Nanos, cost: u64) -> Decision {
        self.peek_in(&state.words[..], state.ring_capacity(), now, cost)
    }

    fn is_replenished(&self, state: &LogState, now: Nanos) -> bool {
        let view = self.view(&state.words[..], state.ring_capacity(), now, 1);
        view.live == 0 && view.at >= self.spaced_at(view.last())
    }
}

impl WordArrayAlgorithm for SlidingLog {
    type Take = LogTake;

    /// A 3-word header, then 2 words per entry of [`capacity`](SlidingLog::capacity).
    #[inline]
    fn state_words(&self) -> usize {
        HEADER + 2 * self.capacity() as usize
    }

    /// An empty log: the header is all 0 (the words are 0 already; time plays no part).
    fn init_words<W: WordsMut + ?Sized>(&self, words: &mut W, _now: Nanos) {
        for index in [HEAD, LEN, TOTAL] {
            words.set_word(index, 0);
        }
    }

    fn reserve_words<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        now: Nanos,
        cost: u64,
        _max_wait: Nanos,
    ) -> Decision {
        self.reserve_in(words, self.capacity(), now, cost)
    }

    fn peek_words<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> Decision {
        self.peek_in(words, self.capacity(), now, cost)
    }

    /// The verdict `reserve_words` gives, without its `retry_after` walk: reads the
    /// header, the newest entry and the oldest ones while they have expired.
    #[inline(always)]
    fn plan_try<W: Words + ?Sized>(
        &self,
        words: &W,
        now: Nanos,
        cost: u64,
    ) -> (bool, Option<LogTake>) {
        if cost > self.limit {
            // Never: refused, and not recorded.
            return (false, None);
        }
        let view = self.view(words, self.capacity(), now, cost);
        let granted =
            view.live.saturating_add(cost) <= self.limit && view.at >= self.spaced_at(view.last());
        if granted || self.record_rejected {
            (granted, Some(self.plan_append(words, &view, cost)))
        } else {
            (false, None)
        }
    }

    #[inline(always)]
    fn apply_try<W: WordsMut + ?Sized>(&self, words: &mut W, take: LogTake) {
        let at = at_word(take.slot);
        words.set_word(at, take.at);
        words.set_word(at.wrapping_add(1), take.cost);
        words.set_word(HEAD, take.head);
        words.set_word(LEN, take.len);
        words.set_word(TOTAL, take.total);
    }

    /// `[limit, duration, min_spacing, record_rejected]`.
    fn config_words(&self) -> [u64; 4] {
        [
            self.limit,
            self.duration,
            self.min_spacing,
            u64::from(self.record_rejected),
        ]
    }

    /// The inverse of [`config_words`](Self::config_words). A limit above
    /// [`MAX_ENTRIES`] is read as `MAX_ENTRIES`, so that no words make a log whose
    /// capacity overflows.
    #[inline(always)]
    fn from_config_words(words: [u64; 4]) -> Self {
        SlidingLog {
            limit: words[0].min(MAX_ENTRIES),
            duration: words[1],
            min_spacing: words[2],
            record_rejected: words[3] != 0,
        }
    }

    fn state_to_words(state: &LogState) -> Box<[u64]> {
        state.words.clone()
    }

    fn state_from_words(words: Box<[u64]>) -> LogState {
        LogState { words }
    }
}
