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
//! and the running count of permits logged before the oldest) precede a ring of
//! [`capacity`](SlidingLog::capacity) entries of two words each (time, running
//! count after it): `24 + 16 × capacity` bytes. Because the size is fixed by the
//! configuration, a direct limiter keeps these words as atomics in a lock-free
//! [`WordArrayCell`](crate::stores::WordArrayCell) (see
//! [`words`](super::words)).
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
//! * A refused call's exact `retry_after` is another binary search, for the entry
//!   whose expiry makes room. A direct limiter's non-blocking try needs no
//!   `retry_after` and skips it
//!   ([`plan_take`](super::words::WordEncoded::plan_take)): a refusal
//!   costs loads only, a grant (or a recorded refusal) one compare-and-swap.
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
use super::words::{WordEncoded, Words, WordsMut};
use super::{Algorithm, Decision, Receipt, WordArray};
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
/// Word index of the running count just before the oldest entry (see
/// [`LogState`]).
const BASE: usize = 2;
/// The number of header words, before the ring.
const HEADER: usize = 3;

/// The word index of the time of the entry in ring slot `slot`; its running count
/// is the next word. Wrapping: a slot computed from mixed reads gives an index
/// past the end, where reads answer 0 and writes do nothing.
#[inline(always)]
fn at_word(slot: u64) -> usize {
    (slot as usize).wrapping_mul(2).wrapping_add(HEADER)
}

/// `slot` brought back into a ring of `ring` slots, for a slot below twice the
/// ring. A conditional subtract: the capacity is rarely a power of two, and a
/// division would cost more than the rest of a try.
#[inline(always)]
fn wrap(slot: u64, ring: u64) -> u64 {
    if slot >= ring {
        slot.wrapping_sub(ring)
    } else {
        slot
    }
}

/// The state of a [`SlidingLog`]: a fixed array of words, a header (the ring slot
/// of the oldest entry, the number of entries, and a *base*) and a ring of
/// [`capacity`](SlidingLog::capacity) entries `(time, running count)` in time
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
/// A log may step a state made by a log of another capacity (say after its limit
/// was changed inside a set of limits) and decides as it would on its own state
/// holding the same entries. A ring smaller than the log's capacity is first moved
/// into one of that size (an allocation, once); a larger one is used as it is. A
/// log of another *duration* judges the entries held by its own window: an entry
/// that had expired under a shorter window counts again under a longer one if it
/// is still held.
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
    /// `[head, len, base]`, then the ring: `(at, running count)` per slot.
    words: Box<[u64]>,
}

impl LogState {
    /// The number of ring slots these words hold.
    fn ring_capacity(&self) -> u64 {
        (self.words.len().saturating_sub(HEADER) / 2) as u64
    }

    /// The entries held, oldest first, as `(time, cost)`.
    fn entries(&self) -> impl Iterator<Item = (Nanos, u64)> + '_ {
        let ring = self.ring_capacity();
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
    /// Expired entries stay in the ring until a call needs their room (or needs to
    /// count what is live): the log can be non-empty while nothing counts.
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
        self.entries().eq(other.entries())
    }
}

impl Eq for LogState {}

impl std::fmt::Debug for LogState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogState")
            .field("entries", &self.entries().collect::<Vec<_>>())
            .field("capacity", &self.ring_capacity())
            .finish()
    }
}

/// What a non-blocking try of a [`SlidingLog`] writes, planned by
/// [`plan_take`](WordEncoded::plan_take) and written by
/// [`apply_take`](WordEncoded::apply_take): the header after the step (the
/// expired entries dropped if the call needed their room, the oldest evicted if
/// the log was full) and the entry it appends, a grant or, with
/// [`with_rejected_recorded`](SlidingLog::with_rejected_recorded), a refusal.
///
/// ```
/// use sluicegate::algorithms::words::WordEncoded;
/// use sluicegate::algorithms::SlidingLog;
/// use std::time::Duration;
/// let log = SlidingLog::new(1, Duration::from_secs(1)).unwrap().with_rejected_recorded();
/// let mut words = vec![0; log.state_words()];
/// log.init_words(&mut words[..], 0);
/// let (granted, take) = log.plan_take(&words[..], 0, 1);
/// assert!(granted);
/// log.apply_take(&mut words[..], take.unwrap());
/// // Refused, and recorded: there is still something to write.
/// let (granted, take) = log.plan_take(&words[..], 0, 1);
/// assert!(!granted && take.is_some());
/// // A cost above the limit is never granted, and never recorded.
/// assert_eq!(log.plan_take(&words[..], 0, 2), (false, None));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogTake {
    /// The header after the step.
    head: u64,
    len: u64,
    base: u64,
    /// The ring slot of the new entry, and the entry.
    slot: u64,
    at: Nanos,
    count: u64,
}

/// The log's header and newest entry at one instant: what every call reads.
#[derive(Clone, Copy)]
struct Header {
    /// The instant used: `now`, or the time of the newest entry if later.
    at: Nanos,
    /// The ring slot of the oldest entry, and the number of entries (at most the
    /// ring's size).
    head: u64,
    len: u64,
    /// The ring's number of slots: the log's capacity, unless the state was made
    /// by a log of a larger one.
    ring: u64,
    /// The running count before the oldest entry, and after the newest.
    base: u64,
    end: u64,
    /// The time of the newest entry (0 when there is none).
    newest: Nanos,
}

impl Header {
    /// The word index of the time of entry `index` (from the oldest); its running
    /// count is the next word.
    #[inline(always)]
    fn at_word(&self, index: u64) -> usize {
        at_word(wrap(self.head.wrapping_add(index), self.ring))
    }

    /// The time of entry `index`.
    #[inline(always)]
    fn time<W: Words + ?Sized>(&self, words: &W, index: u64) -> Nanos {
        words.word(self.at_word(index))
    }

    /// The running count just before entry `index` (after the newest for `len`).
    #[inline(always)]
    fn count_before<W: Words + ?Sized>(&self, words: &W, index: u64) -> u64 {
        if index == 0 {
            self.base
        } else {
            words.word(self.at_word(index - 1).wrapping_add(1))
        }
    }

    /// The permits logged from entry `index` on.
    #[inline(always)]
    fn from<W: Words + ?Sized>(&self, words: &W, index: u64) -> u64 {
        self.end.wrapping_sub(self.count_before(words, index))
    }

    /// The permits of every entry held, expired ones included.
    #[inline(always)]
    fn total(&self) -> u64 {
        self.end.wrapping_sub(self.base)
    }

    /// The time of the newest entry, if any: where the minimum spacing runs from.
    #[inline(always)]
    fn last(&self) -> Option<Nanos> {
        (self.len > 0).then_some(self.newest)
    }
}

/// The log at one instant with what counts: the header, and where the live
/// entries start.
#[derive(Clone, Copy)]
struct View {
    header: Header,
    /// Index (from the oldest) of the first live entry: those before have expired.
    first_live: u64,
    /// The sum of the live entries' costs.
    live: u64,
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
        let view = self.view(&state.words[..], state.ring_capacity(), now);
        state.entries().skip(view.first_live as usize)
    }

    /// The header and the newest entry at `now`, in a ring of `ring` slots: five
    /// reads.
    #[inline(always)]
    fn header<W: Words + ?Sized>(&self, words: &W, ring: u64, now: Nanos) -> Header {
        let mut header = Header {
            at: now,
            head: words.word(HEAD),
            len: words.word(LEN).min(ring),
            ring,
            base: words.word(BASE),
            end: 0,
            newest: 0,
        };
        header.end = header.base;
        if header.len > 0 {
            let newest = header.at_word(header.len - 1);
            header.newest = words.word(newest);
            header.end = words.word(newest.wrapping_add(1));
            header.at = now.max(header.newest);
        }
        header
    }

    /// True if the entries held, expired ones included, leave room for `cost`: the
    /// call then needs neither to count what is live nor to drop anything.
    #[inline(always)]
    fn roomy(&self, header: &Header, cost: u64) -> bool {
        // Every entry costs at least 1, so a total within the limit also means a
        // free slot; the length is checked all the same, should a caller break that.
        header.total().saturating_add(cost) <= self.limit && header.len < self.capacity()
    }

    /// The index of the first live entry: the oldest, at once, in the common case,
    /// else a binary search (entries are in time order). Total on any words: at
    /// most 2 + log₂(len) reads.
    #[inline(always)]
    fn first_live<W: Words + ?Sized>(&self, words: &W, header: &Header) -> u64 {
        let expired =
            |index: u64| header.time(words, index).saturating_add(self.duration) <= header.at;
        if header.len == 0 || !expired(0) {
            return 0;
        }
        // Entry `low` has expired; the first live one is in (low, high].
        let (mut low, mut high) = (0, header.len);
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            if expired(middle) {
                low = middle;
            } else {
                high = middle;
            }
        }
        high
    }

    /// The log at `now` with its live entries found.
    fn view<W: Words + ?Sized>(&self, words: &W, ring: u64, now: Nanos) -> View {
        let header = self.header(words, ring, now);
        let first_live = self.first_live(words, &header);
        View {
            header,
            first_live,
            live: header.from(words, first_live),
        }
    }

    /// When the minimum spacing after the last call ends (0 when there is none).
    #[inline(always)]
    fn spaced_at(&self, last: Option<Nanos>) -> Nanos {
        match last {
            Some(last) if self.min_spacing > 0 => last.saturating_add(self.min_spacing),
            _ => 0,
        }
    }

    /// The first instant at which the entries from `from` on, plus `attempt` (a
    /// recorded refusal's own entry) if given, have expired enough that `cost` more
    /// fits the limit. A binary search on the running counts: O(log len).
    fn fits_at<W: Words + ?Sized>(
        &self,
        words: &W,
        header: &Header,
        from: u64,
        attempt: Option<(Nanos, u64)>,
        cost: u64,
    ) -> Nanos {
        let allowed = self.limit.saturating_sub(cost);
        let extra = attempt.map_or(0, |(_, cost)| cost);
        // Permits still logged once entries `from ..= index` have expired (the
        // attempt is entry `len`).
        let after = |index: u64| {
            if index >= header.len {
                0
            } else {
                header.from(words, index + 1).saturating_add(extra)
            }
        };
        let live = header.from(words, from).saturating_add(extra);
        if live <= allowed {
            return 0;
        }
        // The first index whose expiry brings the count within `allowed`: in
        // [from, last], where `last` (the newest, or the attempt) always does.
        let last = if attempt.is_some() {
            header.len
        } else {
            header.len.saturating_sub(1)
        };
        let (mut low, mut high) = (from, last);
        while low < high {
            let middle = low + (high - low) / 2;
            if after(middle) <= allowed {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        let at = match attempt {
            Some((at, _)) if low >= header.len => at,
            _ => header.time(words, low),
        };
        at.saturating_add(self.duration)
    }

    /// When everything that blocks a call has gone.
    fn reset_at(&self, newest: Option<Nanos>, last: Option<Nanos>) -> Nanos {
        let expired = newest.map_or(0, |at| at.saturating_add(self.duration));
        expired.max(self.spaced_at(last))
    }

    fn remaining(&self, live: u64) -> u64 {
        self.limit.saturating_sub(live)
    }

    /// What appending the entry `(header.at, cost)` writes, after dropping the
    /// first `dropped` entries (the expired ones, when the call had to find them;
    /// none otherwise), and then the oldest if the log is still full. Total on any
    /// header; room for the entry needs a ring of at least the log's capacity.
    #[inline(always)]
    fn plan_append<W: Words + ?Sized>(
        &self,
        words: &W,
        header: &Header,
        dropped: u64,
        cost: u64,
    ) -> LogTake {
        let mut dropped = dropped;
        if header.len.wrapping_sub(dropped) >= self.capacity() {
            dropped = dropped.wrapping_add(1);
        }
        LogTake {
            head: wrap(header.head.wrapping_add(dropped), header.ring),
            len: header.len.wrapping_sub(dropped).wrapping_add(1),
            base: if dropped == 0 {
                header.base
            } else {
                header.count_before(words, dropped)
            },
            // Just after the newest entry, whatever was dropped.
            slot: wrap(header.head.wrapping_add(header.len), header.ring),
            at: header.at,
            count: header.end.wrapping_add(cost),
        }
    }

    /// The entries a call drops before appending: none when the entries held leave
    /// room for it (it did not look for the live ones), else the expired ones.
    #[inline(always)]
    fn dropped(&self, view: &View, cost: u64) -> u64 {
        if self.roomy(&view.header, cost) {
            0
        } else {
            view.first_live
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
        let header = &view.header;
        let last = header.last();
        let reset = self.reset_at(last, last).saturating_sub(now);
        let remaining = self.remaining(view.live);
        if cost > self.limit {
            return Err(Decision::never(self.limit, remaining, reset));
        }
        let fits = view.live.saturating_add(cost) <= self.limit;
        let spaced = header.at >= self.spaced_at(last);
        if fits && spaced {
            let reset = self
                .reset_at(Some(header.at), Some(header.at))
                .saturating_sub(now);
            let remaining = self.remaining(view.live.saturating_add(cost));
            return Ok(Decision::allowed(self.limit, remaining, reset));
        }
        let at = self
            .fits_at(words, header, view.first_live, None, cost)
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
        let header = &view.header;
        // The entries that stay after dropping the expired and evicting for room.
        let held = header.len - view.first_live;
        let kept = view.first_live + u64::from(held >= self.capacity());
        let live = header.from(words, kept).saturating_add(cost);
        let at = self
            .fits_at(words, header, kept, Some((header.at, cost)), cost)
            .max(self.spaced_at(Some(header.at)));
        let reset = self
            .reset_at(Some(header.at), Some(header.at))
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
        let mut count = state.words.word(BASE);
        for (at, cost) in state.entries() {
            count = count.wrapping_add(cost);
            let index = at_word(len);
            words.set_word(index, at);
            words.set_word(index + 1, count);
            len += 1;
        }
        words.set_word(LEN, len);
        words.set_word(BASE, state.words.word(BASE));
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
        let view = self.view(&*words, ring, now);
        let decision = match self.judge(&*words, &view, now, cost) {
            Ok(granted) => granted,
            Err(refused) if refused.is_never() || !self.record_rejected => return refused,
            Err(_) => self.recorded_refusal(&*words, &view, now, cost),
        };
        let take = self.plan_append(&*words, &view.header, self.dropped(&view, cost), cost);
        self.apply_take(words, take);
        decision
    }

    /// [`Algorithm::peek`] on words holding a ring of `ring` slots.
    fn peek_in<W: Words + ?Sized>(&self, words: &W, ring: u64, now: Nanos, cost: u64) -> Decision {
        let view = self.view(words, ring, now);
        match self.judge(words, &view, now, cost) {
            Ok(decision) => decision,
            Err(refused) if refused.is_never() || !self.record_rejected => refused,
            Err(_) => self.recorded_refusal(words, &view, now, cost),
        }
    }
}

impl Algorithm for SlidingLog {
    type State = LogState;
    type Shape = WordArray;

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
        let view = self.view(&state.words[..], state.ring_capacity(), now);
        view.live == 0 && view.header.at >= self.spaced_at(view.header.last())
    }
}

impl WordEncoded for SlidingLog {
    type Config = [u64; 4];
    type Take = LogTake;

    /// A 3-word header, then 2 words per entry of [`capacity`](SlidingLog::capacity).
    #[inline]
    fn state_words(&self) -> usize {
        HEADER + 2 * self.capacity() as usize
    }

    /// An empty log: the header is all 0 (the words are 0 already; time plays no part).
    fn init_words<W: WordsMut + ?Sized>(&self, words: &mut W, _now: Nanos) {
        for index in [HEAD, LEN, BASE] {
            words.set_word(index, 0);
        }
    }

    fn reserve_words<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        now: Nanos,
        cost: u64,
        _max_wait: Nanos,
    ) -> (Decision, Receipt) {
        (
            self.reserve_in(words, self.capacity(), now, cost),
            Receipt::NONE,
        )
    }

    /// A log's grants act at once: cancelling restores nothing.
    fn cancel_words<W: WordsMut + ?Sized>(&self, _: &mut W, _: Nanos, _: &Receipt, _: Nanos) {}

    fn peek_words<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> Decision {
        self.peek_in(words, self.capacity(), now, cost)
    }

    /// The verdict `reserve_words` gives, without its `retry_after`: reads the
    /// header and the newest entry, and only when the entries held (expired ones
    /// included) leave no room, searches for the first live one.
    #[inline(always)]
    fn plan_take<W: Words + ?Sized>(
        &self,
        words: &W,
        now: Nanos,
        cost: u64,
    ) -> (bool, Option<LogTake>) {
        if cost > self.limit {
            // Never: refused, and not recorded.
            return (false, None);
        }
        let header = self.header(words, self.capacity(), now);
        let spaced = header.at >= self.spaced_at(header.last());
        let (granted, dropped) = if self.roomy(&header, cost) {
            (spaced, 0)
        } else {
            let first_live = self.first_live(words, &header);
            let live = header.from(words, first_live);
            (
                live.saturating_add(cost) <= self.limit && spaced,
                first_live,
            )
        };
        if granted || self.record_rejected {
            (
                granted,
                Some(self.plan_append(words, &header, dropped, cost)),
            )
        } else {
            (false, None)
        }
    }

    #[inline(always)]
    fn apply_take<W: WordsMut + ?Sized>(&self, words: &mut W, take: LogTake) {
        let at = at_word(take.slot);
        words.set_word(at, take.at);
        words.set_word(at.wrapping_add(1), take.count);
        words.set_word(HEAD, take.head);
        words.set_word(LEN, take.len);
        words.set_word(BASE, take.base);
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

    fn read_state<W: Words + ?Sized>(&self, words: &W) -> LogState {
        LogState {
            words: (0..self.state_words()).map(|i| words.word(i)).collect(),
        }
    }

    fn write_state<W: WordsMut + ?Sized>(&self, state: &LogState, words: &mut W) {
        for (index, word) in state.words.iter().enumerate() {
            words.set_word(index, *word);
        }
    }
}
