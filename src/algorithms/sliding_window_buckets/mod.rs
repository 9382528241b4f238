//! A sliding window made of sub-buckets: `limit` permits per `window`, counted in
//! buckets of length `precision` (a window split into, say, 60 one-second buckets:
//! a finer precision tracks the true sliding window more closely).
//!
//! # The model
//!
//! Time is cut into buckets of length `precision`, aligned to the clock's origin:
//! bucket `i` spans `[i·precision, (i+1)·precision)`. Each bucket counts the permits
//! *granted* in it (refused calls are not counted: a client that hammers one limit
//! must not lock itself out of a longer one). The window is
//! the last `window`, and it is made of `B = ⌈window / precision⌉` buckets:
//!
//! ```text
//!   window = 60 s, precision = 15 s, B = 4; a call at now = 12:01:50
//!
//!          window = (now − 60 s, now]
//!        ├──────────────────────────────────────┤
//!   ─────┼─────────┼─────────┼─────────┼─────────┼────→ time
//!   12:00:45  12:01:00  12:01:15  12:01:30  12:01:45
//!   bucket  n−B   n−3        n−2       n−1        n  (n holds now)
//!          ╰partial╯ ╰──────────── counted whole ───────╯
//! ```
//!
//! The oldest bucket the window touches (`n−B` above, or `n−B+1` when `window`
//! is not a multiple of `precision`) lies only partly inside it. We do not know
//! *when* inside that bucket its calls came, so there are two ways to count it,
//! chosen by [`OldestBucket`]:
//!
//! * [`OldestBucket::Drop`]: count the `B` most recent buckets, the current one
//!   included, and nothing older. The bucket that is partly outside is dropped
//!   whole (the usual Redis hash-of-buckets script trims every bucket before
//!   `current − B + 1`). What it costs: at 2:50, a window of 1:50-2:50 in 20-minute
//!   buckets should count 1:50-2:00, but the 1:40-2:00 bucket is ignored.
//!   **Guarantee**: any span of time that lies within `B` consecutive buckets
//!   admits at most `limit`; any span of length `window` (which touches at most
//!   `B + 1` buckets) admits at most `2·limit`: the dropped bucket's calls plus a
//!   full window.
//! * [`OldestBucket::Weighted`]: count the partial bucket in proportion to
//!   the part of it still inside the window, assuming its calls were spread evenly.
//!   The estimate is rounded *up* before comparing with the limit, so rounding
//!   never admits a call. With `precision == window` this is the classic sliding
//!   window counter (previous window weighted by the unelapsed fraction).
//!   **Guarantee**: any span of time that lies within `K = ⌊window / precision⌋`
//!   consecutive buckets admits at most `limit` (those buckets always count
//!   whole). When `window` is a multiple of `precision` (`K = B`, the usual
//!   set-up) it is at least as strict as [`OldestBucket::Drop`], so any span of
//!   length `window` admits at most `2·limit`, and at most `limit` when the
//!   partial bucket's calls were in fact spread evenly over it.
//!
//! A call of cost `c` is granted iff `counted + c ≤ limit`; nothing is taken
//! otherwise. `precision == window` with [`OldestBucket::Drop`] is a fixed window.
//!
//! # Cancelling
//!
//! A grant acts at once, so by the crate's cancel rule ([`Algorithm::cancel`]) it
//! can be given back only at the instant it was made (or up to a set's later time
//! to act, inside a set of limits): its cost then comes off the bucket it was
//! counted in, as long as the ring still holds that bucket, never below zero.
//! Permits granted after it, in that bucket or later ones, stay counted.
//!
//! For example, 240 per hour in one-minute buckets: 20 permits used at 6:05
//! come back at 7:05.
//!
//! ```
//! use sluicegate::{algorithms::SlidingWindowBuckets, clock::ManualClock, RateLimiter};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new(); // 6:00 PM
//! let hour = Duration::from_secs(3600);
//! let window = SlidingWindowBuckets::dropping(240, hour, Duration::from_secs(60)).unwrap();
//! let limiter = RateLimiter::with_clock(window, clock.clone());
//! clock.advance(Duration::from_secs(5 * 60));
//! assert!(limiter.try_acquire_n(20).unwrap()); // 6:05
//! assert!(limiter.try_acquire_n(220).unwrap());
//! let refused = limiter.check(1).unwrap();
//! assert_eq!(refused.retry_after(), hour); // 7:05
//!
//! // 100 per minute in 30 s buckets, the oldest one weighted.
//! let window = SlidingWindowBuckets::weighted(100, Duration::from_secs(60), Duration::from_secs(30)).unwrap();
//! let limiter = RateLimiter::with_clock(window, ManualClock::new());
//! assert!(limiter.try_acquire_n(100).unwrap()); // at 0 s
//! limiter.clock().advance(Duration::from_secs(75)); // half of bucket 0-30 s is in the window
//! assert!(limiter.try_acquire_n(50).unwrap());
//! assert!(!limiter.try_acquire());
//! ```
//!
//! # State and cost
//!
//! A ring of bucket counters, allocated once by
//! [`initial_state`](Algorithm::initial_state): `B + 1` are needed (the window's
//! buckets plus the partial one), rounded up to a power of two so that finding a
//! bucket's slot is a mask rather than a division (8 bytes each: 488 → 512 bytes
//! for 60 one-minute buckets). Plus two words, the newest bucket's
//! number and the ring's total; nothing is allocated afterwards. The state is
//! these words and nothing else, so a direct limiter keeps them as atomics in a
//! lock-free cell.
//!
//! Old buckets are cleared lazily when a granted call moves the ring forward, so
//! an allowed call costs O(1) amortized. The step decides first (its plan): it
//! reads the newest bucket's number, the total and one or two slots, and divides
//! only when the ring moves to a new bucket; a direct limiter's non-blocking try
//! runs the plan alone. Only a caller that reads the decision has it described:
//! a refusal's exact `retry_after` walks the ring from the oldest counted
//! bucket, O(B) at worst. `B` is capped at [`MAX_BUCKETS`].
//!
//! # Edges
//!
//! * `limit = 0`, `window = 0`, `precision = 0`, `precision > window`, more than
//!   [`MAX_BUCKETS`] buckets, or a period beyond about 292 years: typed errors.
//! * A cost above `limit` can never be granted: [`Verdict::Never`](super::Verdict::Never).
//! * Time that goes backwards is read as the start of the newest bucket seen, which
//!   counts at least as much as any later instant: it never grants extra permits.
//! * Counters saturate; they cannot overflow anyway, since a window never holds more
//!   than `limit` granted permits per bucket.

use super::validate::validate_positive_period;
use super::words::WordEncoded;
use super::{Algorithm, Decision, Pace, Receipt, Report, WordArray};
use crate::clock::Nanos;
use crate::error::ConfigError;
use std::time::Duration;

mod ring;

/// The largest number of buckets in a window (`⌈window / precision⌉`): 4096,
/// i.e. at most 64 KiB of counters per state (a ring of 8192).
///
/// ```
/// use sluicegate::algorithms::sliding_window_buckets::{SlidingWindowBuckets, MAX_BUCKETS};
/// use std::time::Duration;
/// let ms = Duration::from_millis(1);
/// assert!(SlidingWindowBuckets::dropping(10, ms * MAX_BUCKETS as u32, ms).is_ok());
/// assert!(SlidingWindowBuckets::dropping(10, ms * (MAX_BUCKETS as u32 + 1), ms).is_err());
/// ```
pub const MAX_BUCKETS: u64 = 4096;

/// How the oldest bucket, the one only partly inside the window, is counted.
///
/// ```
/// use sluicegate::algorithms::sliding_window_buckets::OldestBucket;
/// assert_ne!(OldestBucket::Drop, OldestBucket::Weighted);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OldestBucket {
    /// Not at all: only the `⌈window / precision⌉` newest buckets count.
    /// Permissive by up to one bucket's worth of calls.
    Drop,
    /// In proportion to the part of it inside the window, rounded up.
    Weighted,
}

/// A sliding window of `limit` permits per `window`, kept in buckets of
/// `precision`. See the [module docs](self) for the model and its guarantees.
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, SlidingWindowBuckets};
/// use std::time::Duration;
/// // 3 requests per 60 s, in 15 s buckets.
/// let window = SlidingWindowBuckets::dropping(3, Duration::from_secs(60), Duration::from_secs(15)).unwrap();
/// let mut state = window.initial_state(0);
/// let s = 1_000_000_000;
/// assert!(window.reserve::<Decision>(&mut state, 5 * s, 1, 0).is_allowed());
/// assert!(window.reserve::<Decision>(&mut state, 15 * s, 1, 0).is_allowed());
/// assert!(window.reserve::<Decision>(&mut state, 20 * s, 1, 0).is_allowed());
/// let refused = window.reserve::<Decision>(&mut state, 21 * s, 1, 0);
/// assert!(!refused.is_allowed());
/// // The 12:00:05 call's bucket (0-15 s) leaves the window at 60 s.
/// assert_eq!(refused.retry_after(), Duration::from_secs(39));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindowBuckets {
    limit: u64,
    window: Nanos,
    precision: Nanos,
    /// `B = ⌈window / precision⌉`, at most [`MAX_BUCKETS`].
    buckets: u64,
    oldest: OldestBucket,
}

/// The state of a [`SlidingWindowBuckets`] limit: the newest bucket's number, the
/// ring's total, and a ring of bucket counters (`B + 1` rounded up to a power of
/// two `L`), in `L + 2` words.
///
/// Bucket number `i` lives in slot `i mod L`; only buckets `newest − B ..= newest`
/// may be non-zero. Cloning allocates (a copy of the ring).
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, SlidingWindowBuckets};
/// use std::time::Duration;
/// let w = SlidingWindowBuckets::dropping(1, Duration::from_secs(60), Duration::from_secs(15)).unwrap();
/// let mut state = w.initial_state(0);
/// assert!(w.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// let full = state.clone();
/// assert!(!w.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// assert_eq!(state, full); // a refusal leaves the ring as it was
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketsState {
    /// `[newest, total, slot 0, slot 1, ...]`.
    words: Box<[u64]>,
}

impl BucketsState {
    /// The bytes the state takes on the heap: 8 per slot, plus 16 for the newest
    /// bucket's number and the total.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SlidingWindowBuckets};
    /// use std::time::Duration;
    /// let w = SlidingWindowBuckets::dropping(240, Duration::from_secs(3600), Duration::from_secs(60)).unwrap();
    /// assert_eq!(w.initial_state(0).heap_bytes(), 16 + 64 * 8); // 61 slots needed, 64 kept
    /// ```
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.words)
    }
}

impl SlidingWindowBuckets {
    /// `limit` permits per `window`, in buckets of `precision`, dropping the partial
    /// oldest bucket ([`OldestBucket::Drop`]).
    ///
    /// # Errors
    /// [`ConfigError::InvalidCount`] for a zero `limit` or more than [`MAX_BUCKETS`]
    /// buckets; [`ConfigError::InvalidDuration`] for a zero `window` or `precision`, a
    /// `precision` longer than `window`, or a period beyond about 292 years.
    ///
    /// ```
    /// use sluicegate::{algorithms::SlidingWindowBuckets, ConfigError};
    /// use std::time::Duration;
    /// let hour = Duration::from_secs(3600);
    /// assert!(SlidingWindowBuckets::dropping(100, hour, Duration::from_secs(60)).is_ok());
    /// assert!(matches!(
    ///     SlidingWindowBuckets::dropping(100, hour, Duration::from_millis(1)),
    ///     Err(ConfigError::InvalidCount { .. }) // 3.6 million buckets
    /// ));
    /// ```
    pub fn dropping(
        limit: u64,
        window: Duration,
        precision: Duration,
    ) -> Result<Self, ConfigError> {
        Self::new(limit, window, precision, OldestBucket::Drop)
    }

    /// `limit` permits per `window`, in buckets of `precision`, weighting the
    /// partial oldest bucket ([`OldestBucket::Weighted`]).
    ///
    /// # Errors
    /// As [`dropping`](Self::dropping).
    ///
    /// ```
    /// use sluicegate::algorithms::{sliding_window_buckets::OldestBucket, SlidingWindowBuckets};
    /// use std::time::Duration;
    /// let w = SlidingWindowBuckets::weighted(100, Duration::from_secs(60), Duration::from_secs(30)).unwrap();
    /// assert_eq!(w.oldest_bucket(), OldestBucket::Weighted);
    /// assert_eq!(w.buckets(), 2);
    /// ```
    pub fn weighted(
        limit: u64,
        window: Duration,
        precision: Duration,
    ) -> Result<Self, ConfigError> {
        Self::new(limit, window, precision, OldestBucket::Weighted)
    }

    /// `limit` permits per `window`, in buckets of `precision`, counting the
    /// partial oldest bucket as `oldest` says.
    ///
    /// # Errors
    /// As [`dropping`](Self::dropping).
    ///
    /// ```
    /// use sluicegate::{algorithms::sliding_window_buckets::{OldestBucket, SlidingWindowBuckets}, ConfigError};
    /// use std::time::Duration;
    /// let err = SlidingWindowBuckets::new(10, Duration::from_secs(1), Duration::from_secs(2), OldestBucket::Drop);
    /// assert!(matches!(err, Err(ConfigError::InvalidDuration { what: "precision", .. })));
    /// ```
    pub fn new(
        limit: u64,
        window: Duration,
        precision: Duration,
        oldest: OldestBucket,
    ) -> Result<Self, ConfigError> {
        if limit == 0 {
            return Err(ConfigError::InvalidCount {
                what: "limit",
                value: 0,
                requirement: "at least 1",
            });
        }
        let duration_nanos = validate_positive_period("window", window)?;
        let precision_nanos = validate_positive_period("precision", precision)?;
        if precision_nanos > duration_nanos {
            return Err(ConfigError::InvalidDuration {
                what: "precision",
                value: precision,
                requirement: "at most the window",
            });
        }
        let buckets = duration_nanos.div_ceil(precision_nanos);
        if buckets > MAX_BUCKETS {
            return Err(ConfigError::InvalidCount {
                what: "buckets per window (window / precision, rounded up)",
                value: buckets,
                requirement: "at most 4096",
            });
        }
        Ok(SlidingWindowBuckets {
            limit,
            window: duration_nanos,
            precision: precision_nanos,
            buckets,
            oldest,
        })
    }

    /// The most permits a window grants.
    ///
    /// ```
    /// use sluicegate::algorithms::SlidingWindowBuckets;
    /// use std::time::Duration;
    /// let w = SlidingWindowBuckets::dropping(3, Duration::from_secs(60), Duration::from_secs(15)).unwrap();
    /// assert_eq!(w.limit(), 3);
    /// assert_eq!((w.window(), w.precision()), (Duration::from_secs(60), Duration::from_secs(15)));
    /// ```
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window's length: the span whose granted permits count, covered by
    /// [`buckets`](SlidingWindowBuckets::buckets) buckets of
    /// [`precision`](SlidingWindowBuckets::precision), as the
    /// [module docs](self) describe.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Decision, SlidingWindowBuckets};
    /// use std::time::Duration;
    /// let w = SlidingWindowBuckets::dropping(2, Duration::from_secs(60), Duration::from_secs(15)).unwrap();
    /// assert_eq!(w.window(), Duration::from_secs(60));
    /// let (mut state, s) = (w.initial_state(0), 1_000_000_000);
    /// assert!(w.reserve::<bool>(&mut state, 5 * s, 2, 0));
    /// // The bucket of 5 s (0-15 s) leaves the window at 60 s.
    /// let refused: Decision = w.reserve(&mut state, 5 * s, 1, 0);
    /// assert_eq!(refused.retry_after(), w.window() - Duration::from_secs(5));
    /// assert!(w.reserve::<bool>(&mut state, 60 * s, 2, 0));
    /// ```
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// The length of one bucket, buckets aligned to the clock's origin. A grant is
    /// counted in the bucket holding its instant and leaves the window with that
    /// bucket, whenever in it the grant came: the coarser the precision, the
    /// further the answers are from an exact sliding window's.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Decision, SlidingWindowBuckets};
    /// use std::time::Duration;
    /// let s = 1_000_000_000;
    /// // A call at 19 s leaves the window with its bucket: 0-20 s at 60 s, 19-20 s at 79 s.
    /// for (precision, retry) in [(20, 41), (1, 60)] {
    ///     let w = SlidingWindowBuckets::dropping(1, Duration::from_secs(60), Duration::from_secs(precision)).unwrap();
    ///     assert_eq!(w.precision(), Duration::from_secs(precision));
    ///     let mut state = w.initial_state(0);
    ///     assert!(w.reserve::<bool>(&mut state, 19 * s, 1, 0));
    ///     let refused: Decision = w.reserve(&mut state, 19 * s, 1, 0);
    ///     assert_eq!(refused.retry_after_nanos(), retry * s);
    /// }
    /// ```
    pub fn precision(&self) -> Duration {
        Duration::from_nanos(self.precision)
    }

    /// The number of buckets in a window, `⌈window / precision⌉`. The state holds
    /// one more.
    ///
    /// ```
    /// use sluicegate::algorithms::SlidingWindowBuckets;
    /// use std::time::Duration;
    /// let w = SlidingWindowBuckets::dropping(3, Duration::from_secs(60), Duration::from_secs(25)).unwrap();
    /// assert_eq!(w.buckets(), 3); // ⌈60 / 25⌉
    /// ```
    pub fn buckets(&self) -> u64 {
        self.buckets
    }

    /// How the partial oldest bucket, the one only partly inside the window, is
    /// counted: not at all ([`OldestBucket::Drop`]) or in proportion to the part
    /// of it still inside, rounded up ([`OldestBucket::Weighted`]).
    ///
    /// ```
    /// use sluicegate::algorithms::{sliding_window_buckets::OldestBucket, Algorithm, SlidingWindowBuckets};
    /// use std::time::Duration;
    /// let (minute, half, s) = (Duration::from_secs(60), Duration::from_secs(30), 1_000_000_000);
    /// let dropping = SlidingWindowBuckets::dropping(100, minute, half).unwrap();
    /// let weighted = SlidingWindowBuckets::weighted(100, minute, half).unwrap();
    /// assert_eq!((dropping.oldest_bucket(), weighted.oldest_bucket()), (OldestBucket::Drop, OldestBucket::Weighted));
    /// // 100 at 0 s; at 75 s half of the bucket 0-30 s is still inside the window.
    /// for (w, room) in [(dropping, 100), (weighted, 50)] {
    ///     let mut state = w.initial_state(0);
    ///     assert!(w.reserve::<bool>(&mut state, 0, 100, 0));
    ///     assert!(!w.reserve::<bool>(&mut state, 75 * s, room + 1, 0));
    ///     assert!(w.reserve::<bool>(&mut state, 75 * s, room, 0));
    /// }
    /// ```
    pub fn oldest_bucket(&self) -> OldestBucket {
        self.oldest
    }

    /// The buckets that count at `now`, oldest first, as `(start of the bucket in
    /// clock nanoseconds, permits granted in it)`, leaving out empty ones: the
    /// picture a table of the window's buckets draws. With [`OldestBucket::Weighted`] the first may
    /// be the partial bucket, which counts only in part. Reads without changing
    /// anything; O(B).
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, SlidingWindowBuckets};
    /// use std::time::Duration;
    /// let w = SlidingWindowBuckets::dropping(3, Duration::from_secs(60), Duration::from_secs(15)).unwrap();
    /// let mut state = w.initial_state(0);
    /// let s = 1_000_000_000;
    /// w.reserve::<Decision>(&mut state, 5 * s, 1, 0);
    /// w.reserve::<Decision>(&mut state, 15 * s, 1, 0);
    /// assert_eq!(w.counted_buckets(&state, 61 * s).collect::<Vec<_>>(), vec![(15 * s, 1)]);
    /// ```
    pub fn counted_buckets<'a>(
        &'a self,
        state: &'a BucketsState,
        now: Nanos,
    ) -> impl Iterator<Item = (Nanos, u64)> + 'a {
        let words = &state.words[..];
        let view = self.view(words, now);
        let (first_whole, partial) = self.bounds(&view);
        let first = partial.map_or(first_whole, |(bucket, _)| bucket);
        (first..=view.current)
            .map(move |bucket| {
                (
                    bucket.saturating_mul(self.precision),
                    self.count(words, &view, bucket),
                )
            })
            .filter(|&(_, count)| count > 0)
    }
}

impl Algorithm for SlidingWindowBuckets {
    type State = BucketsState;
    type Shape = WordArray;

    /// An empty ring of `B + 1` counters rounded up to a power of two, plus two
    /// words (the one allocation this algorithm makes).
    fn initial_state(&self, now: Nanos) -> BucketsState {
        let mut words = vec![0; self.state_words()].into_boxed_slice();
        self.init_words(&mut words[..], now);
        BucketsState { words }
    }

    /// Grants `cost` now if the window has room, else denies with the exact
    /// `retry_after` (it never reserves future capacity, so `max_wait` is unused).
    /// A grant's receipt names the bucket it was counted in and its cost.
    fn reserve<R: Report>(
        &self,
        state: &mut BucketsState,
        now: Nanos,
        cost: u64,
        _max_wait: Nanos,
    ) -> R {
        self.reserve_in(&mut state.words[..], now, cost)
    }

    /// Gives the grant's cost back from its bucket while the ring still holds it
    /// (see the [module docs](self#cancelling)).
    fn cancel(&self, state: &mut BucketsState, now: Nanos, receipt: &Receipt, acts_at: Nanos) {
        self.cancel_words(&mut state.words[..], now, receipt, acts_at);
    }

    fn peek(&self, state: &BucketsState, now: Nanos, cost: u64) -> Decision {
        self.peek_words(&state.words[..], now, cost)
    }

    fn pace(&self) -> Option<Pace> {
        Pace::per(self.limit(), self.window())
    }

    fn is_replenished(&self, state: &BucketsState, now: Nanos) -> bool {
        let view = self.view(&state.words[..], now);
        self.used_scaled(&state.words[..], &view) == 0
    }
}

#[cfg(test)]
mod tests;
