//! A sliding window made of sub-buckets: `limit` permits per `duration`, counted in
//! buckets of length `precision` (seed 002's duration/precision, seed 003's 1/60th
//! buckets, seed 000's "tweaking the resolution").
//!
//! # The model
//!
//! Time is cut into buckets of length `precision`, aligned to the clock's origin:
//! bucket `i` spans `[i·precision, (i+1)·precision)`. Each bucket counts the permits
//! *granted* in it (refused calls are not counted, as seed 002 argues). The window is
//! the last `duration`, and it is made of `B = ⌈duration / precision⌉` buckets:
//!
//! ```text
//!   duration = 60 s, precision = 15 s, B = 4; a call at now = 12:01:50
//!
//!          window = (now − 60 s, now]
//!        ├──────────────────────────────────────┤
//!   ─────┼─────────┼─────────┼─────────┼─────────┼────→ time
//!   12:00:45  12:01:00  12:01:15  12:01:30  12:01:45
//!   bucket  n−B   n−3        n−2       n−1        n  (n holds now)
//!          ╰partial╯ ╰──────────── counted whole ───────╯
//! ```
//!
//! The oldest bucket the window touches (`n−B` above, or `n−B+1` when `duration`
//! is not a multiple of `precision`) lies only partly inside it. We do not know
//! *when* inside that bucket its calls came, so there are two ways to count it,
//! chosen by [`OldestBucket`]:
//!
//! * [`OldestBucket::Drop`] (seeds 002 and 003, and seed 001's sliding window
//!   table): count the `B` most recent buckets, the current one included, and
//!   nothing older. The bucket that is partly outside is dropped whole. Seed 002's
//!   Lua script computes exactly this (`trim_before = block_id − blocks + 1`), and
//!   seed 003's note says what it costs: at 2:50 a window of 1:50-2:50 should count
//!   1:50-2:00, but the 1:40-2:00 bucket is ignored.
//!   **Guarantee**: any span of time that lies within `B` consecutive buckets
//!   admits at most `limit`; any span of length `duration` (which touches at most
//!   `B + 1` buckets) admits at most `2·limit`: the dropped bucket's calls plus a
//!   full window.
//! * [`OldestBucket::Weighted`] (seed 000): count the partial bucket in proportion to
//!   the part of it still inside the window, assuming its calls were spread evenly.
//!   The estimate is rounded *up* before comparing with the limit, so rounding
//!   never admits a call. With `precision == duration` this is the classic sliding
//!   window counter (previous window weighted by the unelapsed fraction).
//!   **Guarantee**: any span of time that lies within `K = ⌊duration / precision⌋`
//!   consecutive buckets admits at most `limit` (those buckets always count
//!   whole). When `duration` is a multiple of `precision` (`K = B`, the usual
//!   set-up) it is at least as strict as [`OldestBucket::Drop`], so any span of
//!   length `duration` admits at most `2·limit`, and at most `limit` when the
//!   partial bucket's calls were in fact spread evenly over it.
//!
//! A call of cost `c` is granted iff `counted + c ≤ limit`; nothing is taken
//! otherwise. Seed 002's `precision == duration` with [`OldestBucket::Drop`] is a
//! fixed window.
//!
//! Seed 002's example, 240 per hour in one-minute buckets: 20 permits used at 6:05
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
//! // Seed 000: 100 per minute in 30 s buckets, the oldest one weighted.
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
//! for seed 002's 60 one-minute buckets). Plus two words, the newest bucket's
//! number and the ring's total; nothing is allocated afterwards. The state is
//! these words and nothing else ([`WordEncoded`]), so a direct limiter
//! keeps them as atomics in a lock-free
//! [`WordArrayCell`](crate::stores::WordArrayCell).
//!
//! Old buckets are cleared lazily when a granted call moves the ring forward, so
//! an allowed call costs O(1) amortized. A non-blocking try
//! ([`plan_take`](WordEncoded::plan_take)) reads the newest bucket's number,
//! the total and one or two slots, and divides only when the ring moves to a new
//! bucket. A full decision on a refused call also computes its exact
//! `retry_after` by walking the ring from the oldest counted bucket: O(B) at
//! worst. `B` is capped at [`MAX_BUCKETS`].
//!
//! # Edges
//!
//! * `limit = 0`, `duration = 0`, `precision = 0`, `precision > duration`, more than
//!   [`MAX_BUCKETS`] buckets, or a period beyond about 292 years: typed errors.
//! * A cost above `limit` can never be granted: [`Verdict::Never`](super::Verdict::Never).
//! * Time that goes backwards is read as the start of the newest bucket seen, which
//!   counts at least as much as any later instant: it never grants extra permits.
//! * Counters saturate; they cannot overflow anyway, since a window never holds more
//!   than `limit` granted permits per bucket.

use super::validate::validate_positive_period;
use super::words::{WordEncoded, Words, WordsMut};
use super::{Algorithm, Decision, Receipt, WordArray};
use crate::clock::Nanos;
use crate::error::Error;
use std::time::Duration;

/// The largest number of buckets in a window (`⌈duration / precision⌉`): 4096,
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
    /// Not at all: only the `⌈duration / precision⌉` newest buckets count (seeds 002
    /// and 003). Permissive by up to one bucket's worth of calls.
    Drop,
    /// In proportion to the part of it inside the window, rounded up (seed 000).
    Weighted,
}

/// A sliding window of `limit` permits per `duration`, kept in buckets of
/// `precision`. See the [module docs](self) for the model and its guarantees.
///
/// ```
/// use sluicegate::algorithms::{Algorithm, SlidingWindowBuckets};
/// use std::time::Duration;
/// // Seed 001: 3 requests per 60 s, in 15 s buckets.
/// let window = SlidingWindowBuckets::dropping(3, Duration::from_secs(60), Duration::from_secs(15)).unwrap();
/// let mut state = window.initial_state(0);
/// let s = 1_000_000_000;
/// assert!(window.reserve(&mut state, 5 * s, 1, 0).is_allowed());
/// assert!(window.reserve(&mut state, 15 * s, 1, 0).is_allowed());
/// assert!(window.reserve(&mut state, 20 * s, 1, 0).is_allowed());
/// let refused = window.reserve(&mut state, 21 * s, 1, 0);
/// assert!(!refused.is_allowed());
/// // The 12:00:05 call's bucket (0-15 s) leaves the window at 60 s.
/// assert_eq!(refused.retry_after(), Duration::from_secs(39));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindowBuckets {
    limit: u64,
    duration: Nanos,
    precision: Nanos,
    /// `B = ⌈duration / precision⌉`, at most [`MAX_BUCKETS`].
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
/// use sluicegate::algorithms::{Algorithm, SlidingWindowBuckets};
/// use std::time::Duration;
/// let w = SlidingWindowBuckets::dropping(1, Duration::from_secs(60), Duration::from_secs(15)).unwrap();
/// let mut state = w.initial_state(0);
/// assert!(w.reserve(&mut state, 0, 1, 0).is_allowed());
/// let full = state.clone();
/// assert!(!w.reserve(&mut state, 0, 1, 0).is_allowed());
/// assert_eq!(state, full); // a refusal leaves the ring as it was
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketsState {
    /// `[newest, total, slot 0, slot 1, ...]`.
    words: Box<[u64]>,
}

/// Word 0: the number of the newest bucket the ring holds.
const NEWEST: usize = 0;
/// Word 1: the sum of every slot (of buckets `newest − B ..= newest`).
const TOTAL: usize = 1;
/// Words 2..: the ring of counters.
const SLOTS: usize = 2;

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

/// What a granted lean try of a [`SlidingWindowBuckets`] writes, planned by
/// [`WordEncoded::plan_take`]: where the ring moves and the cost to count.
/// Opaque; it is only handed back to
/// [`apply_take`](WordEncoded::apply_take).
///
/// ```
/// use sluicegate::algorithms::{words::WordEncoded, SlidingWindowBuckets};
/// use std::time::Duration;
/// let w = SlidingWindowBuckets::dropping(1, Duration::from_secs(60), Duration::from_secs(15)).unwrap();
/// let mut words = vec![0; w.state_words()];
/// w.init_words(&mut words[..], 0);
/// let (granted, take) = w.plan_take(&words[..], 0, 1);
/// assert!(granted && take.is_some());
/// w.apply_take(&mut words[..], take.unwrap());
/// assert_eq!(w.plan_take(&words[..], 0, 1), (false, None));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketsTake {
    view: View,
    cost: u64,
}

/// What the window looks like at some instant, computed without touching the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct View {
    /// The instant used (`now`, or the start of the newest bucket if `now` is older).
    at: Nanos,
    /// The newest bucket the ring holds.
    newest: u64,
    /// The bucket holding `at`.
    current: u64,
    /// The sum of buckets `current − B ..= current` (the ring moved to `current`).
    total: u64,
}

impl SlidingWindowBuckets {
    /// `limit` permits per `duration`, in buckets of `precision`, dropping the partial
    /// oldest bucket ([`OldestBucket::Drop`], seeds 002 and 003).
    ///
    /// # Errors
    /// [`Error::InvalidCount`] for a zero `limit` or more than [`MAX_BUCKETS`]
    /// buckets; [`Error::InvalidDuration`] for a zero `duration` or `precision`, a
    /// `precision` longer than `duration`, or a period beyond about 292 years.
    ///
    /// ```
    /// use sluicegate::{algorithms::SlidingWindowBuckets, Error};
    /// use std::time::Duration;
    /// let hour = Duration::from_secs(3600);
    /// assert!(SlidingWindowBuckets::dropping(100, hour, Duration::from_secs(60)).is_ok());
    /// assert!(matches!(
    ///     SlidingWindowBuckets::dropping(100, hour, Duration::from_millis(1)),
    ///     Err(Error::InvalidCount { .. }) // 3.6 million buckets
    /// ));
    /// ```
    pub fn dropping(limit: u64, duration: Duration, precision: Duration) -> Result<Self, Error> {
        Self::new(limit, duration, precision, OldestBucket::Drop)
    }

    /// `limit` permits per `duration`, in buckets of `precision`, weighting the
    /// partial oldest bucket ([`OldestBucket::Weighted`], seed 000).
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
    pub fn weighted(limit: u64, duration: Duration, precision: Duration) -> Result<Self, Error> {
        Self::new(limit, duration, precision, OldestBucket::Weighted)
    }

    /// `limit` permits per `duration`, in buckets of `precision`, counting the
    /// partial oldest bucket as `oldest` says.
    ///
    /// # Errors
    /// As [`dropping`](Self::dropping).
    ///
    /// ```
    /// use sluicegate::{algorithms::sliding_window_buckets::{OldestBucket, SlidingWindowBuckets}, Error};
    /// use std::time::Duration;
    /// let err = SlidingWindowBuckets::new(10, Duration::from_secs(1), Duration::from_secs(2), OldestBucket::Drop);
    /// assert!(matches!(err, Err(Error::InvalidDuration { what: "precision", .. })));
    /// ```
    pub fn new(
        limit: u64,
        duration: Duration,
        precision: Duration,
        oldest: OldestBucket,
    ) -> Result<Self, Error> {
        if limit == 0 {
            return Err(Error::InvalidCount {
                what: "limit",
                value: 0,
                requirement: "at least 1",
            });
        }
        let duration_nanos = validate_positive_period("duration", duration)?;
        let precision_nanos = validate_positive_period("precision", precision)?;
        if precision_nanos > duration_nanos {
            return Err(Error::InvalidDuration {
                what: "precision",
                value: precision,
                requirement: "at most the window's duration",
            });
        }
        let buckets = duration_nanos.div_ceil(precision_nanos);
        if buckets > MAX_BUCKETS {
            return Err(Error::InvalidCount {
                what: "buckets per window (duration / precision, rounded up)",
                value: buckets,
                requirement: "at most 4096",
            });
        }
        Ok(SlidingWindowBuckets {
            limit,
            duration: duration_nanos,
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
    /// assert_eq!((w.duration(), w.precision()), (Duration::from_secs(60), Duration::from_secs(15)));
    /// ```
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window's length (see [`limit`](SlidingWindowBuckets::limit) for an
    /// example).
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.duration)
    }

    /// The length of one bucket (see [`limit`](SlidingWindowBuckets::limit) for an
    /// example).
    pub fn precision(&self) -> Duration {
        Duration::from_nanos(self.precision)
    }

    /// The number of buckets in a window, `⌈duration / precision⌉`. The state holds
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

    /// How the partial oldest bucket is counted.
    pub fn oldest_bucket(&self) -> OldestBucket {
        self.oldest
    }

    /// The buckets that count at `now`, oldest first, as `(start of the bucket in
    /// clock nanoseconds, permits granted in it)`, leaving out empty ones: the
    /// picture seed 001's table draws. With [`OldestBucket::Weighted`] the first may
    /// be the partial bucket, which counts only in part. Reads without changing
    /// anything; O(B).
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SlidingWindowBuckets};
    /// use std::time::Duration;
    /// let w = SlidingWindowBuckets::dropping(3, Duration::from_secs(60), Duration::from_secs(15)).unwrap();
    /// let mut state = w.initial_state(0);
    /// let s = 1_000_000_000;
    /// w.reserve(&mut state, 5 * s, 1, 0);
    /// w.reserve(&mut state, 15 * s, 1, 0);
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

    /// The ring's length: `B + 1` rounded up to a power of two, so that a bucket's
    /// slot is a mask, not a division.
    fn ring_len(&self) -> usize {
        // B + 1 <= 4097, so this is at most 8192.
        (self.buckets + 1).next_power_of_two() as usize
    }

    /// The word holding `bucket`'s counter.
    #[inline(always)]
    fn slot(&self, bucket: u64) -> usize {
        // ring_len is a power of two at most 8192: the masked value fits any usize.
        SLOTS + (bucket & (self.ring_len() as u64 - 1)) as usize
    }

    /// The count of `bucket`. Valid for buckets in `current − B ..= current` of a
    /// view: the slots hold non-zero counts only for `newest − B ..= newest`.
    #[inline(always)]
    fn count<W: Words + ?Sized>(&self, words: &W, view: &View, bucket: u64) -> u64 {
        if bucket > view.newest {
            0
        } else {
            words.word(self.slot(bucket))
        }
    }

    /// The buckets that leave the window when the ring moves from `newest` to
    /// `current`: `newest − B ..= current − B − 1` (none below 0), or `None` if
    /// every bucket leaves.
    #[inline(always)]
    fn leaving(&self, newest: u64, current: u64) -> Option<std::ops::Range<u64>> {
        if current.saturating_sub(newest) > self.buckets {
            return None;
        }
        let end = current.saturating_sub(self.buckets);
        Some(newest.saturating_sub(self.buckets).min(end)..end)
    }

    /// The window at `now`. Total on any words: at most `B` slots are read, and the
    /// arithmetic saturates.
    #[inline(always)]
    fn view<W: Words + ?Sized>(&self, words: &W, now: Nanos) -> View {
        let newest = words.word(NEWEST);
        let start = newest.saturating_mul(self.precision);
        let at = now.max(start);
        // Most calls land in the newest bucket: no division then.
        let current = if at - start < self.precision {
            newest
        } else {
            at / self.precision
        };
        let total = match self.leaving(newest, current) {
            // The usual case, kept apart so that it costs one load.
            _ if current == newest => words.word(TOTAL),
            None => 0,
            Some(leaving) => {
                let gone = leaving.fold(0u64, |gone, bucket| {
                    gone.saturating_add(words.word(self.slot(bucket)))
                });
                words.word(TOTAL).saturating_sub(gone)
            }
        };
        View {
            at,
            newest,
            current,
            total,
        }
    }

    /// The oldest bucket that counts whole: `current − B + 1` if dropping; for the
    /// weighted variant, the one after the bucket holding `at − duration`. Returns
    /// `(first whole bucket, partial bucket and the nanoseconds of it inside the
    /// window)`; the partial bucket is `None` when dropping or before the origin.
    #[inline(always)]
    fn bounds(&self, view: &View) -> (u64, Option<(u64, Nanos)>) {
        let next = view.current.saturating_add(1).saturating_sub(self.buckets);
        match self.oldest {
            OldestBucket::Drop => (next, None),
            OldestBucket::Weighted => match view.at.checked_sub(self.duration) {
                // The window starts before the clock's origin: every bucket is whole.
                None => (0, None),
                Some(start) => {
                    // `at` lies in bucket `current` and (B − 1)·precision < duration
                    // <= B·precision, so `start` lies in bucket current − B or the
                    // one after: one multiplication finds which, where a division
                    // would cost several times more on every call.
                    let boundary = next.saturating_mul(self.precision);
                    let (partial, end) = if start >= boundary {
                        (next, boundary.saturating_add(self.precision))
                    } else {
                        (next.saturating_sub(1), boundary)
                    };
                    (partial + 1, Some((partial, end.saturating_sub(start))))
                }
            },
        }
    }

    /// The counts of buckets `first ..= last` (all within the ring at `view`),
    /// oldest first, stopping at the newest bucket written (later ones are empty).
    fn counts<'a, W: Words + ?Sized>(
        &'a self,
        words: &'a W,
        view: &View,
        first: u64,
        last: u64,
    ) -> impl Iterator<Item = u64> + 'a {
        (first..=last.min(view.newest)).map(move |bucket| words.word(self.slot(bucket)))
    }

    /// The sum of the whole buckets at `view`: the ring's total less the one or two
    /// buckets before `first_whole`.
    #[inline(always)]
    fn whole<W: Words + ?Sized>(&self, words: &W, view: &View, first_whole: u64) -> u64 {
        // `first_whole` is at most two buckets past the oldest the ring holds
        // (see `bounds`), so this loop runs at most twice.
        let mut whole = view.total;
        let mut bucket = view.current.saturating_sub(self.buckets);
        while bucket < first_whole {
            whole = whole.saturating_sub(self.count(words, view, bucket));
            bucket += 1;
        }
        whole
    }

    /// The permits counted at `view`, scaled by `precision` (so the weighted part
    /// stays exact: `Σ whole · precision + partial · inside`).
    #[inline(always)]
    fn used_scaled<W: Words + ?Sized>(&self, words: &W, view: &View) -> u128 {
        let (first_whole, partial) = self.bounds(view);
        let whole = self.whole(words, view, first_whole);
        let scaled = u128::from(whole) * u128::from(self.precision);
        match partial {
            Some((bucket, inside)) => {
                scaled + u128::from(self.count(words, view, bucket)) * u128::from(inside)
            }
            None => scaled,
        }
    }

    /// A scaled count in permits, rounded up.
    fn permits(&self, scaled: u128) -> u64 {
        // Most values fit a u64, whose division is much cheaper than a u128's.
        match u64::try_from(scaled) {
            Ok(small) => small.div_ceil(self.precision),
            Err(_) => {
                u64::try_from(scaled.div_ceil(u128::from(self.precision))).unwrap_or(u64::MAX)
            }
        }
    }

    /// True if `cost` (at most `limit`) fits at `view`: counted + cost <= limit,
    /// compared scaled, so that no division is needed.
    #[inline(always)]
    fn fits(&self, scaled: u128, cost: u64) -> bool {
        scaled <= u128::from(self.limit - cost) * u128::from(self.precision)
    }

    /// [`fits`](Self::fits) for the weighted variant, multiplying only when the
    /// partial bucket's count could matter: `whole + count · inside / precision +
    /// cost <= limit`, and `inside <= precision`, so a count within the room left
    /// by the whole buckets fits whatever part of the bucket is inside.
    #[inline(always)]
    fn fits_weighted<W: Words + ?Sized>(&self, words: &W, view: &View, cost: u64) -> bool {
        let (first_whole, partial) = self.bounds(view);
        let whole = self.whole(words, view, first_whole);
        let Some(room) = (self.limit - cost).checked_sub(whole) else {
            return false;
        };
        let Some((bucket, inside)) = partial else {
            return true;
        };
        let count = self.count(words, view, bucket);
        count <= room
            || u128::from(count) * u128::from(inside)
                <= u128::from(room) * u128::from(self.precision)
    }

    /// The newest non-empty bucket among `current − B ..= current`, if any.
    fn newest_nonempty<W: Words + ?Sized>(&self, words: &W, view: &View) -> Option<u64> {
        let oldest = view.current.saturating_sub(self.buckets);
        let newest = view.current.min(view.newest);
        (oldest..=newest)
            .rev()
            .find(|&bucket| self.count(words, view, bucket) > 0)
    }

    /// Nanoseconds from `now` until nothing counted remains.
    fn reset_after<W: Words + ?Sized>(&self, words: &W, view: &View, now: Nanos) -> Nanos {
        self.newest_nonempty(words, view)
            .map_or(0, |bucket| self.gone_at(bucket).saturating_sub(now))
    }

    /// When `bucket` stops counting at all.
    fn gone_at(&self, bucket: u64) -> Nanos {
        match self.oldest {
            // Dropped once it is B buckets old.
            OldestBucket::Drop => bucket
                .saturating_add(self.buckets)
                .saturating_mul(self.precision),
            // Gone once the window's start passes its end.
            OldestBucket::Weighted => bucket
                .saturating_add(1)
                .saturating_mul(self.precision)
                .saturating_add(self.duration),
        }
    }

    /// The first instant at which `excess` (scaled by precision; `excess_permits`
    /// unscaled, used when dropping) has left the window.
    fn retry_at<W: Words + ?Sized>(
        &self,
        words: &W,
        view: &View,
        excess: u128,
        excess_permits: u64,
    ) -> Nanos {
        let (first_whole, partial) = self.bounds(view);
        match self.oldest {
            OldestBucket::Drop => {
                // Bucket b stops counting at (b + B) · precision.
                let mut excess = excess_permits;
                let mut bucket = first_whole;
                for count in self.counts(words, view, first_whole, view.current) {
                    if count >= excess {
                        break;
                    }
                    excess -= count;
                    bucket = bucket.saturating_add(1);
                }
                self.gone_at(bucket)
            }
            OldestBucket::Weighted => {
                // The window's start sweeps forward; while it crosses bucket b, the
                // estimate falls by count(b) per nanosecond (scaled).
                let mut excess = excess;
                let mut start = match partial {
                    Some((partial, inside)) => {
                        let start = view.at.saturating_sub(self.duration);
                        let count = u128::from(self.count(words, view, partial));
                        if count * u128::from(inside) >= excess {
                            return self.crossed(start, excess, count);
                        }
                        excess -= count * u128::from(inside);
                        start.saturating_add(inside)
                    }
                    // Before the origin: nothing leaves until the start reaches 0.
                    None => 0,
                };
                for count in self.counts(words, view, first_whole, view.current) {
                    let count = u128::from(count);
                    if count * u128::from(self.precision) >= excess {
                        return self.crossed(start, excess, count);
                    }
                    excess -= count * u128::from(self.precision);
                    start = start.saturating_add(self.precision);
                }
                // Unreachable while cost <= limit: everything counted leaves.
                start.saturating_add(self.duration)
            }
        }
    }

    /// The instant at which a window start at `start`, moving over a bucket holding
    /// `count` (> 0, since `excess` > 0), has freed `excess`.
    fn crossed(&self, start: Nanos, excess: u128, count: u128) -> Nanos {
        let nanos = u64::try_from(excess.div_ceil(count.max(1))).unwrap_or(u64::MAX);
        start.saturating_add(nanos).saturating_add(self.duration)
    }

    fn decide<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> (Decision, View) {
        let view = self.view(words, now);
        let scaled = self.used_scaled(words, &view);
        let used = self.permits(scaled);
        if cost > self.limit {
            let reset = self.reset_after(words, &view, now);
            return (
                Decision::never(self.limit, self.limit.saturating_sub(used), reset),
                view,
            );
        }
        if self.fits(scaled, cost) {
            let remaining = self.limit - cost - used;
            // The grant lands in the current bucket, the newest one.
            let reset = self.gone_at(view.current).saturating_sub(now);
            return (Decision::allowed(self.limit, remaining, reset), view);
        }
        let reset = self.reset_after(words, &view, now);
        let allowed_scaled = u128::from(self.limit - cost) * u128::from(self.precision);
        let excess_permits = used.saturating_add(cost) - self.limit;
        let at = self.retry_at(words, &view, scaled - allowed_scaled, excess_permits);
        let decision = Decision::denied(
            self.limit,
            self.limit.saturating_sub(used),
            at.saturating_sub(now),
            reset,
        );
        (decision, view)
    }

    /// Moves the ring to `view.current` (clearing the buckets that left) and counts
    /// `cost` in the current bucket.
    #[inline(always)]
    fn commit<W: WordsMut + ?Sized>(&self, words: &mut W, view: &View, cost: u64) {
        let mut total = words.word(TOTAL);
        if view.current > view.newest {
            match self.leaving(view.newest, view.current) {
                None => {
                    for slot in SLOTS..SLOTS + self.ring_len() {
                        words.set_word(slot, 0);
                    }
                }
                Some(leaving) => {
                    for bucket in leaving {
                        words.set_word(self.slot(bucket), 0);
                    }
                }
            }
            words.set_word(NEWEST, view.current);
            total = view.total;
        }
        let slot = self.slot(view.current);
        words.set_word(slot, words.word(slot).saturating_add(cost));
        words.set_word(TOTAL, total.saturating_add(cost));
    }
}

impl WordEncoded for SlidingWindowBuckets {
    type Config = [u64; 4];
    type Take = BucketsTake;

    fn state_words(&self) -> usize {
        SLOTS + self.ring_len()
    }

    fn init_words<W: WordsMut + ?Sized>(&self, words: &mut W, now: Nanos) {
        words.set_word(NEWEST, now / self.precision);
    }

    fn reserve_words<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        now: Nanos,
        cost: u64,
        _max_wait: Nanos,
    ) -> (Decision, Receipt) {
        let (decision, view) = self.decide(words, now, cost);
        if decision.is_allowed() {
            self.commit(words, &view, cost);
        }
        (decision, Receipt::NONE)
    }

    /// A window's grants act at once: cancelling restores nothing.
    fn cancel_words<W: WordsMut + ?Sized>(&self, _: &mut W, _: Nanos, _: &Receipt, _: Nanos) {}

    fn peek_words<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> Decision {
        self.decide(words, now, cost).0
    }

    /// Decides from the newest bucket's number, the total and at most two slots
    /// (more only when the ring moves to a new bucket, once per bucket): no
    /// division in the common case, and no `retry_after`.
    #[inline(always)]
    fn plan_take<W: Words + ?Sized>(
        &self,
        words: &W,
        now: Nanos,
        cost: u64,
    ) -> (bool, Option<BucketsTake>) {
        if cost > self.limit {
            return (false, None);
        }
        let view = self.view(words, now);
        let fits = match self.oldest {
            // Whole buckets only: no scaling needed.
            OldestBucket::Drop => {
                let (first_whole, _) = self.bounds(&view);
                self.whole(words, &view, first_whole).saturating_add(cost) <= self.limit
            }
            OldestBucket::Weighted => self.fits_weighted(words, &view, cost),
        };
        if fits {
            (true, Some(BucketsTake { view, cost }))
        } else {
            (false, None)
        }
    }

    #[inline(always)]
    fn apply_take<W: WordsMut + ?Sized>(&self, words: &mut W, take: BucketsTake) {
        self.commit(words, &take.view, take.cost);
    }

    fn config_words(&self) -> [u64; 4] {
        let oldest = match self.oldest {
            OldestBucket::Drop => 0,
            OldestBucket::Weighted => 1,
        };
        [
            self.limit,
            self.duration,
            self.precision,
            self.buckets << 1 | oldest,
        ]
    }

    /// The inverse of [`config_words`](WordEncoded::config_words). Words this
    /// type did not encode are brought into range (a precision of at least 1 ns,
    /// 1 to [`MAX_BUCKETS`] buckets), so that no step on them divides by zero or
    /// sizes an absurd ring.
    fn from_config_words(words: [u64; 4]) -> Self {
        SlidingWindowBuckets {
            limit: words[0],
            duration: words[1],
            precision: words[2].max(1),
            buckets: (words[3] >> 1).clamp(1, MAX_BUCKETS),
            oldest: if words[3] & 1 == 0 {
                OldestBucket::Drop
            } else {
                OldestBucket::Weighted
            },
        }
    }

    fn read_state<W: Words + ?Sized>(&self, words: &W) -> BucketsState {
        BucketsState {
            words: (0..self.state_words()).map(|i| words.word(i)).collect(),
        }
    }

    fn write_state<W: WordsMut + ?Sized>(&self, state: &BucketsState, words: &mut W) {
        for (index, word) in state.words.iter().enumerate() {
            words.set_word(index, *word);
        }
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
    fn reserve(
        &self,
        state: &mut BucketsState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> Decision {
        self.reserve_words(&mut state.words[..], now, cost, max_wait)
            .0
    }

    fn peek(&self, state: &BucketsState, now: Nanos, cost: u64) -> Decision {
        self.peek_words(&state.words[..], now, cost)
    }

    fn is_replenished(&self, state: &BucketsState, now: Nanos) -> bool {
        let view = self.view(&state.words[..], now);
        self.used_scaled(&state.words[..], &view) == 0
    }
}
