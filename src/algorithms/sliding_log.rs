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
//! The log is a ring allocated once, at [`initial_state`](Algorithm::initial_state);
//! nothing is allocated afterwards. Each entry takes 16 bytes.
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
//! A granted call drops the expired entries (amortized O(1)) and appends one. A
//! refused call leaves the log as it is (unless it records the attempt), so it
//! finds the first live entry (at once when the oldest is live, else by binary
//! search), subtracts the expired entries' costs, and walks live entries from the
//! oldest until enough would have expired for its exact `retry_after`: O(1) in
//! the common cases, O(limit) at worst.
//!
//! # Edges
//!
//! * `limit = 0`, `duration = 0`, `limit` above [`MAX_ENTRIES`], or a period
//!   beyond about 292 years: typed errors.
//! * A cost above `limit`: [`Verdict::Never`](super::Verdict::Never).
//! * Time that goes backwards is read as the time of the newest entry (or spacing
//!   mark): an older `now` never expires more than a later one would have.

use super::validate::validate_positive_period;
use super::{Algorithm, Decision};
use crate::clock::Nanos;
use crate::error::Error;
use std::collections::VecDeque;
use std::time::Duration;

/// The largest `limit` of a log: 2²⁰ entries (16 MiB per state; one more entry
/// when rejected attempts are recorded).
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

/// One logged call: when, and how many permits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    at: Nanos,
    cost: u64,
}

/// The state of a [`SlidingLog`]: the entries in time order, their total cost, and
/// the time of the last call that sets the minimum spacing.
///
/// Cloning allocates (a copy of the log).
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogState {
    entries: VecDeque<Entry>,
    /// The sum of the entries' costs; u128 so that `limit + 1` entries of any cost fit.
    total: u128,
    /// The time of the last entry added, even if it has since been dropped.
    last: Option<Nanos>,
}

impl LogState {
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
        self.entries.len()
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
        self.entries.is_empty()
    }

    /// The bytes the log's ring takes on the heap (its allocated capacity).
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SlidingLog};
    /// use std::time::Duration;
    /// let log = SlidingLog::new(100, Duration::from_secs(1)).unwrap();
    /// let state = log.initial_state(0);
    /// assert!(state.heap_bytes() >= 100 * 16); // allocated up front, 16 bytes per entry
    /// ```
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Entry>()
    }
}

/// The log as seen at one instant, computed without touching the state.
struct View {
    /// The instant used: `now`, or the newest time the state remembers if later.
    at: Nanos,
    /// Index of the first live entry (those before it have expired).
    first_live: usize,
    /// The sum of the live entries' costs.
    live: u128,
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
        let view = self.view(state, now);
        state
            .entries
            .range(view.first_live..)
            .map(|entry| (entry.at, entry.cost))
    }

    fn view(&self, state: &LogState, now: Nanos) -> View {
        let newest = state.entries.back().map_or(0, |entry| entry.at);
        let at = now.max(newest).max(state.last.unwrap_or(0));
        let expired = |entry: &Entry| entry.at.saturating_add(self.duration) <= at;
        // Usually the oldest entry is still live, or only it has expired: skip the
        // binary search then.
        let first_live = match (state.entries.front(), state.entries.get(1)) {
            (Some(oldest), _) if !expired(oldest) => 0,
            (Some(_), Some(next)) if !expired(next) => 1,
            (Some(_), None) => 1,
            (None, _) => 0,
            _ => state.entries.partition_point(expired),
        };
        let expired: u128 = state
            .entries
            .range(..first_live)
            .map(|entry| u128::from(entry.cost))
            .sum();
        View {
            at,
            first_live,
            live: state.total.saturating_sub(expired),
        }
    }

    /// When the minimum spacing after the last call ends (0 when there is none).
    fn spaced_at(&self, last: Option<Nanos>) -> Nanos {
        match last {
            Some(last) if self.min_spacing > 0 => last.saturating_add(self.min_spacing),
            _ => 0,
        }
    }

    /// The first instant at which the `live` entries, oldest first, have expired
    /// enough that `cost` more fits the limit.
    fn fits_at<'a>(
        &self,
        live_entries: impl Iterator<Item = &'a Entry>,
        live: u128,
        cost: u64,
    ) -> Nanos {
        let allowed = u128::from(self.limit - cost);
        let mut live = live;
        if live <= allowed {
            return 0;
        }
        for entry in live_entries {
            live = live.saturating_sub(u128::from(entry.cost));
            if live <= allowed {
                return entry.at.saturating_add(self.duration);
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

    fn remaining(&self, live: u128) -> u64 {
        u64::try_from(u128::from(self.limit).saturating_sub(live)).unwrap_or(0)
    }

    /// Drops the expired entries, then appends `entry`, evicting the oldest entry if
    /// the log is full.
    fn append(&self, state: &mut LogState, view: &View, entry: Entry) {
        for _ in 0..view.first_live {
            if let Some(old) = state.entries.pop_front() {
                state.total = state.total.saturating_sub(u128::from(old.cost));
            }
        }
        if state.entries.len() as u64 >= self.capacity() {
            if let Some(old) = state.entries.pop_front() {
                state.total = state.total.saturating_sub(u128::from(old.cost));
            }
        }
        state.entries.push_back(entry);
        state.total = state.total.saturating_add(u128::from(entry.cost));
        state.last = Some(entry.at);
    }

    /// The decision at `view`, without recording a refused attempt.
    fn judge(
        &self,
        state: &LogState,
        view: &View,
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, Decision> {
        let newest = state.entries.back().map(|entry| entry.at);
        let reset = self.reset_at(newest, state.last).saturating_sub(now);
        let remaining = self.remaining(view.live);
        if cost > self.limit {
            return Err(Decision::never(self.limit, remaining, reset));
        }
        let fits = view.live.saturating_add(u128::from(cost)) <= u128::from(self.limit);
        let spaced = view.at >= self.spaced_at(state.last);
        if fits && spaced {
            let reset = self
                .reset_at(Some(view.at), Some(view.at))
                .saturating_sub(now);
            let remaining = self.remaining(view.live.saturating_add(u128::from(cost)));
            return Ok(Decision::allowed(self.limit, remaining, reset));
        }
        let live_entries = state.entries.range(view.first_live..);
        let at = self
            .fits_at(live_entries, view.live, cost)
            .max(self.spaced_at(state.last));
        Err(Decision::denied(
            self.limit,
            remaining,
            at.saturating_sub(now),
            reset,
        ))
    }

    /// The decision a recorded refusal gives: as if the attempt were already in the
    /// log, so that a retry at `retry_after` succeeds.
    fn recorded_refusal(&self, state: &LogState, view: &View, now: Nanos, cost: u64) -> Decision {
        let attempt = Entry { at: view.at, cost };
        // The entries that would stay after dropping the expired and evicting for room.
        let held = state.entries.len() - view.first_live;
        let evicted = usize::from(held as u64 >= self.capacity());
        let kept = state.entries.range(view.first_live + evicted..);
        let evicted_cost: u128 = state
            .entries
            .range(view.first_live..view.first_live + evicted)
            .map(|entry| u128::from(entry.cost))
            .sum();
        let live = view
            .live
            .saturating_sub(evicted_cost)
            .saturating_add(u128::from(cost));
        let at = self
            .fits_at(kept.chain(std::iter::once(&attempt)), live, cost)
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
}

impl Algorithm for SlidingLog {
    type State = LogState;

    /// An empty log with room for [`capacity`](SlidingLog::capacity) entries (the
    /// one allocation this algorithm makes).
    fn initial_state(&self, _now: Nanos) -> LogState {
        LogState {
            // capacity() <= 2^20 + 1, so it fits any usize.
            entries: VecDeque::with_capacity(self.capacity() as usize),
            total: 0,
            last: None,
        }
    }

    /// Grants `cost` now if the window has room (and the spacing has passed), else
    /// denies with the exact `retry_after`. It never reserves future capacity, so
    /// `max_wait` is unused. With recorded rejects, a denial appends the attempt.
    fn reserve(&self, state: &mut LogState, now: Nanos, cost: u64, _max_wait: Nanos) -> Decision {
        let view = self.view(state, now);
        match self.judge(state, &view, now, cost) {
            Ok(granted) => {
                self.append(state, &view, Entry { at: view.at, cost });
                granted
            }
            Err(refused) if refused.is_never() || !self.record_rejected => refused,
            Err(_) => {
                let decision = self.recorded_refusal(state, &view, now, cost);
                self.append(state, &view, Entry { at: view.at, cost });
                decision
            }
        }
    }

    fn peek(&self, state: &LogState, now: Nanos, cost: u64) -> Decision {
        let view = self.view(state, now);
        match self.judge(state, &view, now, cost) {
            Ok(decision) => decision,
            Err(refused) if refused.is_never() || !self.record_rejected => refused,
            Err(_) => self.recorded_refusal(state, &view, now, cost),
        }
    }

    fn is_replenished(&self, state: &LogState, now: Nanos) -> bool {
        let view = self.view(state, now);
        view.live == 0 && view.at >= self.spaced_at(state.last)
    }
}
