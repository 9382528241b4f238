//! The driftless leaky bucket: the generic cell rate algorithm (GCRA), computed
//! from a *theoretical arrival time*, never from a drip thread.
//!
//! # The model
//!
//! A bucket of capacity `b` drains at a constant rate of `count` permits per
//! `period`, one permit every `interval = period / count`. A call of cost `c` pours
//! `c` permits in; it fits if the bucket then holds at most `b`. Rather than a level
//! that a thread decrements, the state is one instant, the theoretical arrival time
//! `TAT`: when the bucket will be empty if nothing more arrives. The level at `now` is
//! `(TAT − now) / interval`, and a call is one comparison and one addition:
//!
//! ```text
//!   start = max(TAT, now)                 the bucket drained while idle
//!   end   = start + c × interval          pour the call in
//!   fits  ⇔  end − now ≤ b × interval     the level stays within the capacity
//!   then  TAT ← end
//!
//!          level = (end − now) / interval, at most b
//!    ──────┼──────────────┼──────────────────┼─────────→ time
//!         now           start               end
//!          └── wait ──────┘  (queue use: the caller acts at `start`)
//! ```
//!
//! The same bucket serves two uses:
//!
//! * [`meter`](LeakyBucket::meter): the call goes at once; up to `b` permits can pass
//!   in a burst, then one per interval. Above the capacity a call is denied with the
//!   exact `retry_after` at which the bucket will have drained enough.
//! * [`queue`](LeakyBucket::queue): callers line up and act at a constant output rate.
//!   A call is granted at once with a *time to act* (`Decision::wait` = `start − now`),
//!   and a call that would overfill the queue (`b` permits, the one being served
//!   included) is denied at once instead of waiting; its wait is thus at most
//!   `(b − c) × interval`. A granted turn that is not taken can be given back with
//!   [`cancel`](Algorithm::cancel).
//!
//! Either way no more than `b + r × t` permits are granted over any span `t` (for
//! the queue, counted at the time each caller acts). When the interval is not a whole
//! number of nanoseconds the bound is `b + r × (t + 1 ns)`: `now` is read to the tick
//! below it (under a nanosecond), an error that never accumulates.
//!
//! # Driftless
//!
//! An interval such as 1/3 s is not a whole number of nanoseconds. Rounding it to
//! 333 333 333 ns loses a third of a nanosecond per permit: over 3 × 10⁹ permits (a
//! billion seconds at 3 per second) the bucket drains one full second early and grants
//! 3 permits too many; truncating to whole microseconds, as Guava does to each
//! reservation, gains 3 permits in every million seconds. Here the rate is kept as the exact
//! fraction `count / period` (reduced), and time inside the state is counted in
//! *ticks*: each interval is split into `K = ⌈interval⌉` equal ticks, so a tick is a
//! little under one nanosecond (between 0.5 and 1 ns) and one permit is exactly `K`
//! ticks. `TAT` only ever moves by whole permits, exactly; only `now` is converted
//! (rounded down to a tick, so a reading never gains a tick). At 3 per second for a
//! million seconds, exactly `3 × 10⁶ + b` permits are granted. When the interval is a
//! whole number of nanoseconds (100 per minute, 1 per 20 s, ...) a tick *is* a
//! nanosecond and no conversion happens at all.
//!
//! The state is that one tick count: a `u64`, updated by one compare-and-swap in a
//! `WordCell`. 2⁶⁴ ticks span at least 292 years.
//!
//! Converting `now` into ticks divides: `now` nanoseconds are
//! `⌊now · K · count / period⌋` ticks. A non-blocking try avoids it: a tick count
//! `t` has been reached iff `t · period ≤ now · K · count`, one multiplication each
//! side, so only a call that finds the bucket drained empty (and so starts at `now`)
//! converts. The decision's durations go the other way: each is the first
//! nanosecond at which the clock reaches an instant of the state (`TAT`, or `TAT`
//! plus the call), less `now`, so its division needs the state alone and runs
//! while the clock is being read.
//!
//! # Edges
//!
//! * A cost above the capacity is answered [`Verdict::Never`](super::Verdict::Never).
//! * At most one permit per nanosecond (`count ≤ period` in ns), a capacity and a
//!   reduced `count` of at most `u32::MAX` (so the configuration packs into two
//!   words), a period of at most about 292 years, and a full bucket that drains
//!   within about 292 years (`capacity × ⌈interval⌉ ≤ i64::MAX` ticks, so that a
//!   fresh bucket can always grant its whole capacity at once); anything else is a
//!   typed error.
//! * Time that appears to go backwards grants nothing: the bucket never drains
//!   below what it held at the latest time seen.
//! * A call whose drain would end past the last tick the state counts is answered
//!   never: 2⁶⁴ ticks, at least 292 years, and for a whole-nanosecond interval the
//!   clock's last reading (see [`clock`](crate::clock)).

use super::validate::validate_positive_period;
use super::{Algorithm, Decision, OneWord, Pace, Receipt, Report};
use crate::clock::Nanos;
use crate::error::ConfigError;
use std::time::Duration;

mod step;
mod ticks;
mod word;

/// Whether the caller acts at once (meter) or waits its turn (queue).
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, LeakyBucket, LeakyMode};
/// use std::time::Duration;
/// let queue = LeakyBucket::queue(2, 1, Duration::from_secs(1)).unwrap();
/// assert_eq!(queue.mode(), LeakyMode::Queue);
/// let mut state = queue.initial_state(0);
/// queue.reserve::<Decision>(&mut state, 0, 1, u64::MAX);
/// // A queue makes the second caller wait its turn; a meter would let it act at once.
/// assert_eq!(queue.reserve::<Decision>(&mut state, 0, 1, u64::MAX).wait_nanos(), 1_000_000_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeakyMode {
    /// Leaky bucket as a meter: allowed calls act at once, bursts up to the capacity.
    Meter,
    /// Leaky bucket as a queue: allowed calls act at their turn, at a constant rate.
    Queue,
}

/// A driftless leaky bucket of `capacity` permits draining `count` permits per
/// `period`, as a meter or as a queue. See the [module docs](self) for the model.
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, LeakyBucket};
/// use std::time::Duration;
/// // A bucket of 3, draining 1 per 20 s (3 requests per minute, smoothed).
/// let meter = LeakyBucket::meter(3, 1, Duration::from_secs(20)).unwrap();
/// let mut state = meter.initial_state(0);
/// for _ in 0..3 {
///     assert!(meter.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// }
/// let refused = meter.reserve::<Decision>(&mut state, 0, 1, 0);
/// assert_eq!(refused.retry_after(), Duration::from_secs(20));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeakyBucket {
    /// The period, in ns, of the reduced fraction `count / period`.
    period: u64,
    /// The reduced count: permits per `period`.
    count: u32,
    /// Ticks per permit, `⌈period / count⌉`: kept, so that no call divides for it.
    per_permit: u64,
    capacity: u32,
    mode: LeakyMode,
}

/// The state of a [`LeakyBucket`]: its theoretical arrival time, in ticks since the
/// clock's origin (a tick is the bucket's interval divided into `⌈interval⌉` parts).
///
/// ```
/// use sluicegate::Decision;
/// use sluicegate::algorithms::{Algorithm, LeakyBucket};
/// use std::time::Duration;
/// let meter = LeakyBucket::meter(1, 1, Duration::from_secs(1)).unwrap();
/// let mut state = meter.initial_state(0);
/// assert!(meter.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// let full = state;
/// assert!(!meter.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
/// assert_eq!(state, full); // a refusal leaves the state untouched
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeakyState {
    tat: u64,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl LeakyBucket {
    /// A leaky bucket *as a meter*: holds up to `capacity` permits, drains `count`
    /// permits every `period`; an allowed call acts at once.
    ///
    /// # Errors
    /// [`ConfigError::InvalidCount`] for a zero `capacity` or `count`, a capacity above
    /// `u32::MAX`, more than one permit per nanosecond, a reduced count above
    /// `u32::MAX`, or a capacity whose full bucket would take more than about 292
    /// years (`i64::MAX` ns, counted in whole ticks) to drain, which the state could
    /// not hold; [`ConfigError::InvalidDuration`] for a zero period or one above about 292
    /// years.
    ///
    /// ```
    /// use sluicegate::algorithms::LeakyBucket;
    /// use std::time::Duration;
    /// let meter = LeakyBucket::meter(10, 3, Duration::from_secs(1)).unwrap();
    /// assert_eq!(meter.capacity(), 10);
    /// assert!(LeakyBucket::meter(0, 3, Duration::from_secs(1)).is_err());
    /// assert!(LeakyBucket::meter(10, 3, Duration::ZERO).is_err());
    /// ```
    pub fn meter(capacity: u64, count: u64, period: Duration) -> Result<Self, ConfigError> {
        Self::build(LeakyMode::Meter, capacity, count, period)
    }

    /// A leaky bucket *as a queue*: callers are granted a turn to act at one permit
    /// every `period / count`; at most `capacity` permits are queued (the one being
    /// served included), and a call that would overfill the queue is denied at once.
    ///
    /// # Errors
    /// As [`meter`](LeakyBucket::meter).
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, LeakyBucket};
    /// use std::time::Duration;
    /// let queue = LeakyBucket::queue(3, 1, Duration::from_secs(1)).unwrap();
    /// let mut state = queue.initial_state(0);
    /// let waits: Vec<u64> = (0..3)
    ///     .map(|_| queue.reserve::<Decision>(&mut state, 0, 1, u64::MAX).wait_nanos())
    ///     .collect();
    /// assert_eq!(waits, [0, 1_000_000_000, 2_000_000_000]);
    /// assert!(!queue.reserve::<Decision>(&mut state, 0, 1, u64::MAX).is_allowed()); // full
    /// ```
    pub fn queue(capacity: u64, count: u64, period: Duration) -> Result<Self, ConfigError> {
        Self::build(LeakyMode::Queue, capacity, count, period)
    }

    fn build(
        mode: LeakyMode,
        capacity: u64,
        count: u64,
        period: Duration,
    ) -> Result<Self, ConfigError> {
        let period_nanos = validate_positive_period("period", period)?;
        let capacity =
            u32::try_from(capacity)
                .ok()
                .filter(|&c| c > 0)
                .ok_or(ConfigError::InvalidCount {
                    what: "capacity",
                    value: capacity,
                    requirement: "between 1 and u32::MAX",
                })?;
        if count == 0 || count > period_nanos {
            return Err(ConfigError::InvalidCount {
                what: "count",
                value: count,
                requirement:
                    "between 1 and the period in nanoseconds (at most one permit per nanosecond)",
            });
        }
        let common = gcd(count, period_nanos);
        let reduced = u32::try_from(count / common).map_err(|_| ConfigError::InvalidCount {
            what: "count",
            value: count,
            requirement: "at most u32::MAX once the fraction count/period is reduced",
        })?;
        let period = period_nanos / common;
        let per_permit = period.div_ceil(u64::from(reduced));
        // A full bucket spans capacity × per_permit ticks past `now`; at most 2⁶³ − 1
        // of them leaves room in the u64 state for every reading of the first 2⁶³
        // ticks (at least 146 years), so a fresh bucket can always grant its capacity.
        if u128::from(capacity) * u128::from(per_permit) > i64::MAX as u128 {
            return Err(ConfigError::InvalidCount {
                what: "capacity",
                value: u64::from(capacity),
                requirement: "small enough that a full bucket drains within i64::MAX nanoseconds (about 292 years)",
            });
        }
        Ok(LeakyBucket {
            period,
            count: reduced,
            per_permit,
            capacity,
            mode,
        })
    }

    /// The capacity, in permits.
    ///
    /// ```
    /// use sluicegate::algorithms::{LeakyBucket, LeakyMode};
    /// use std::time::Duration;
    /// let queue = LeakyBucket::queue(5, 2, Duration::from_secs(1)).unwrap();
    /// assert_eq!((queue.capacity(), queue.mode()), (5, LeakyMode::Queue));
    /// ```
    pub fn capacity(&self) -> u64 {
        u64::from(self.capacity)
    }

    /// Meter or queue, as the bucket was built ([`meter`](LeakyBucket::meter) or
    /// [`queue`](LeakyBucket::queue)): whether a grant acts at once, up to the
    /// capacity in a burst, or waits its turn at the drain rate.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Decision, LeakyBucket, LeakyMode};
    /// use std::time::Duration;
    /// let meter = LeakyBucket::meter(2, 1, Duration::from_secs(1)).unwrap();
    /// let queue = LeakyBucket::queue(2, 1, Duration::from_secs(1)).unwrap();
    /// assert_eq!((meter.mode(), queue.mode()), (LeakyMode::Meter, LeakyMode::Queue));
    /// // Of two calls at once, the meter lets the second act at once, the queue 1 s later.
    /// for (bucket, second_wait) in [(meter, 0), (queue, 1_000_000_000)] {
    ///     let mut state = bucket.initial_state(0);
    ///     assert!(bucket.reserve::<bool>(&mut state, 0, 1, u64::MAX));
    ///     let second: Decision = bucket.reserve(&mut state, 0, 1, u64::MAX);
    ///     assert_eq!(second.wait_nanos(), second_wait);
    /// }
    /// ```
    pub fn mode(&self) -> LeakyMode {
        self.mode
    }

    /// The rate in permits per second (for display: the bucket itself computes
    /// with the exact fraction).
    ///
    /// ```
    /// use sluicegate::algorithms::LeakyBucket;
    /// use std::time::Duration;
    /// let meter = LeakyBucket::meter(1, 100, Duration::from_secs(60)).unwrap();
    /// assert!((meter.rate() - 100.0 / 60.0).abs() < 1e-12);
    /// ```
    pub fn rate(&self) -> f64 {
        f64::from(self.count) * 1e9 / self.period as f64
    }

    /// The drain interval as an exact fraction of nanoseconds: `(numerator,
    /// denominator)`, reduced.
    ///
    /// ```
    /// use sluicegate::algorithms::LeakyBucket;
    /// use std::time::Duration;
    /// let third = LeakyBucket::meter(1, 3, Duration::from_secs(1)).unwrap();
    /// assert_eq!(third.interval(), (1_000_000_000, 3));
    /// let whole = LeakyBucket::meter(1, 100, Duration::from_secs(60)).unwrap();
    /// assert_eq!(whole.interval(), (600_000_000, 1));
    /// ```
    pub fn interval(&self) -> (u64, u64) {
        (self.period, u64::from(self.count))
    }

    /// How many permits the bucket holds at `now` (its level), rounded up; 0 once it
    /// has drained.
    ///
    /// ```
    /// use sluicegate::Decision;
    /// use sluicegate::algorithms::{Algorithm, LeakyBucket};
    /// use std::time::Duration;
    /// let meter = LeakyBucket::meter(3, 1, Duration::from_secs(20)).unwrap();
    /// let mut state = meter.initial_state(0);
    /// meter.reserve::<Decision>(&mut state, 0, 2, 0);
    /// assert_eq!(meter.level(&state, 10_000_000_000), 2); // 1.5 permits left
    /// assert_eq!(meter.level(&state, 40_000_000_000), 0);
    /// ```
    pub fn level(&self, state: &LeakyState, now: Nanos) -> u64 {
        let ticks = self.ticks();
        let backlog = state.tat.saturating_sub(ticks.reading(now));
        backlog.div_ceil(ticks.per_permit)
    }
}

impl Algorithm for LeakyBucket {
    type State = LeakyState;
    type Shape = OneWord;

    fn initial_state(&self, now: Nanos) -> LeakyState {
        LeakyState {
            tat: self.ticks().reading(now),
        }
    }

    #[inline(always)]
    fn reserve<R: Report>(
        &self,
        state: &mut LeakyState,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> R {
        // One step, compiled twice: ticks that are nanoseconds convert nothing.
        if self.count == 1 {
            self.reserve_in::<true, R>(state, now, cost, max_wait)
        } else {
            self.reserve_in::<false, R>(state, now, cost, max_wait)
        }
    }

    /// Go's rule, as [`Algorithm::cancel`] states it: until its time to act, that
    /// instant included, a grant gives back its permits minus whatever later grants
    /// poured in behind it (a meter's grant acts at once, so only a cancel at that
    /// same instant restores it); the bucket never drains below `now`.
    fn cancel(&self, state: &mut LeakyState, now: Nanos, receipt: &Receipt, acts_at: Nanos) {
        if acts_at < now {
            return;
        }
        let queued_after = state.tat.saturating_sub(receipt.mark() as u64);
        let restore = receipt.charge().saturating_sub(queued_after);
        if restore == 0 {
            return;
        }
        let now_ticks = self.ticks().reading(now);
        state.tat = state.tat.saturating_sub(restore).max(now_ticks);
    }

    /// The default rule, without its peek when ticks are nanoseconds: after a grant
    /// the bucket holds `reset_after` of backlog, and `remaining + 1` more permits
    /// fit once it has drained to the capacity less their charge (`reset_after +
    /// (remaining + 1) × interval − capacity × interval` away); a queue's caller who
    /// does not wait fits only once it is idle, `reset_after` away, if that is later.
    fn standing(&self, answer: Decision, peek: &mut dyn FnMut(u64) -> Decision) -> Decision {
        let remaining = answer.remaining();
        if !answer.is_allowed() || remaining >= answer.limit() || self.count != 1 {
            return super::standing_with(answer, peek);
        }
        let interval = self.ticks().per_permit;
        let capacity = u64::from(self.capacity) * interval;
        let reset = answer.reset_after_nanos();
        // Both terms are at most the capacity, which fits an i64.
        let drained = reset + (remaining + 1) * interval - capacity;
        let retry = match self.mode {
            LeakyMode::Meter => drained,
            LeakyMode::Queue => drained.max(reset),
        };
        super::short_of_whole(answer, retry)
    }

    fn pace(&self) -> Option<Pace> {
        let interval = self.period.div_ceil(u64::from(self.count));
        Some(Pace::from_nanos(
            interval,
            interval.saturating_mul(self.capacity()),
        ))
    }

    fn is_replenished(&self, state: &LeakyState, now: Nanos) -> bool {
        state.tat <= self.ticks().reading(now)
    }
}

#[cfg(test)]
mod tests;
