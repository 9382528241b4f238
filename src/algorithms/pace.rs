//! An algorithm's steady rate: what a client that must not burst paces itself by.

use crate::clock::{nanos_to_duration, Nanos};
use std::time::Duration;

/// How an algorithm grants once its stored credit is spent: one permit every
/// [`interval`](Pace::interval), and how long it takes, left alone, to store a full
/// burst again ([`refill`](Pace::refill)).
///
/// Every algorithm of the crate answers one from [`Algorithm::pace`](super::Algorithm::pace):
///
/// | algorithm | interval | refill |
/// |---|---|---|
/// | `SmoothBursty`, `SmoothWarmingUp` | `1 / rate` | `max_burst` (bursty), the warm-up period (warming up) |
/// | `LeakyBucket` | the drain interval | `capacity × interval` |
/// | `FixedWindow`, `SlidingWindowCounter`, `SlidingWindowBuckets` | `window / limit` | the window |
/// | `SlidingLog` | `window / limit`, or the minimum spacing if longer | the window |
/// | `AllOf`, `Limits` | the longest of the members' | the longest of the members' |
///
/// The client layer uses it after a server's hold, so that a key resumes at this
/// rate instead of firing the credit its limiter stored while it was held (see
/// `adapters::HoldBack`, feature `tower`). Intervals are whole
/// nanoseconds, rounded up, so a client that keeps to them is never early.
///
/// ```
/// use sluicegate::algorithms::{Algorithm, FixedWindow, Pace};
/// use std::time::Duration;
/// let window = FixedWindow::new(4, Duration::from_secs(2)).unwrap();
/// let pace = window.pace().unwrap();
/// assert_eq!((pace.interval(), pace.refill()), (Duration::from_millis(500), Duration::from_secs(2)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pace {
    interval: Nanos,
    refill: Nanos,
}

impl Pace {
    /// One permit per `interval`, and `refill` to store a full burst again. A
    /// refill shorter than the interval is raised to it (a limit always takes at
    /// least one interval to give back a permit); durations beyond `u64`
    /// nanoseconds (584 years) saturate.
    ///
    /// ```
    /// use sluicegate::algorithms::Pace;
    /// use std::time::Duration;
    /// let pace = Pace::new(Duration::from_millis(100), Duration::ZERO);
    /// assert_eq!(pace.refill(), Duration::from_millis(100));
    /// ```
    pub fn new(interval: Duration, refill: Duration) -> Self {
        Pace::from_nanos(
            crate::clock::duration_to_nanos(interval),
            crate::clock::duration_to_nanos(refill),
        )
    }

    /// `period / permits`, rounded up, refilling in `period`: the pace of a limit of
    /// `permits` per `period`. `None` for 0 permits (such a limit never grants).
    ///
    /// ```
    /// use sluicegate::algorithms::Pace;
    /// use std::time::Duration;
    /// let pace = Pace::per(3, Duration::from_secs(1)).unwrap();
    /// assert_eq!(pace.interval(), Duration::from_nanos(333_333_334));
    /// assert!(Pace::per(0, Duration::from_secs(1)).is_none());
    /// ```
    pub fn per(permits: u64, period: Duration) -> Option<Self> {
        let period = crate::clock::duration_to_nanos(period);
        (permits > 0).then(|| Pace::from_nanos(period.div_ceil(permits), period))
    }

    pub(crate) fn from_nanos(interval: Nanos, refill: Nanos) -> Self {
        Pace {
            interval,
            refill: refill.max(interval),
        }
    }

    /// The time between two permits at the steady rate: whole nanoseconds,
    /// rounded up from the limit's exact spacing, so a client that waits this long
    /// between calls is never early; at most `u64::MAX` nanoseconds (584 years).
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, LeakyBucket, Pace};
    /// use std::time::Duration;
    /// // 3 per second: a third of a second, rounded up to the nanosecond.
    /// let bucket = LeakyBucket::meter(10, 3, Duration::from_secs(1)).unwrap();
    /// let interval = bucket.pace().unwrap().interval();
    /// assert_eq!(interval, Duration::from_nanos(333_333_334));
    /// assert!(interval * 3 >= Duration::from_secs(1));
    /// // Beyond u64 nanoseconds it saturates.
    /// let forever = Pace::new(Duration::MAX, Duration::ZERO);
    /// assert_eq!(forever.interval(), Duration::from_nanos(u64::MAX));
    /// ```
    pub fn interval(&self) -> Duration {
        nanos_to_duration(self.interval)
    }

    /// The time the limit takes, unused, to store a full burst again: never
    /// shorter than [`interval`](Pace::interval), since even a limit that stores
    /// nothing takes one interval to give back a permit.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, SmoothBursty};
    /// use std::time::Duration;
    /// let bursty = SmoothBursty::new(2.0).unwrap();
    /// let saving = bursty.with_max_burst(Duration::from_secs(3)).unwrap().pace().unwrap();
    /// assert_eq!(saving.refill(), Duration::from_secs(3));
    /// // No burst saved: the refill is raised to one interval.
    /// let spacing = bursty.with_max_burst(Duration::ZERO).unwrap().pace().unwrap();
    /// assert_eq!((spacing.interval(), spacing.refill()), (Duration::from_millis(500), Duration::from_millis(500)));
    /// ```
    pub fn refill(&self) -> Duration {
        nanos_to_duration(self.refill)
    }

    #[cfg(feature = "tower")]
    pub(crate) fn interval_nanos(&self) -> Nanos {
        self.interval
    }

    #[cfg(feature = "tower")]
    pub(crate) fn refill_nanos(&self) -> Nanos {
        self.refill
    }

    /// The pace of a set that must satisfy both: the longer interval and the longer
    /// refill. `None` counts as no constraint.
    ///
    /// ```
    /// use sluicegate::algorithms::Pace;
    /// use std::time::Duration;
    /// let second = Pace::per(10, Duration::from_secs(1));
    /// let minute = Pace::per(60, Duration::from_secs(60));
    /// let both = Pace::slowest(second, minute).unwrap();
    /// assert_eq!((both.interval(), both.refill()), (Duration::from_secs(1), Duration::from_secs(60)));
    /// assert_eq!(Pace::slowest(None, second), second);
    /// ```
    pub fn slowest(a: Option<Pace>, b: Option<Pace>) -> Option<Pace> {
        match (a, b) {
            (Some(a), Some(b)) => Some(Pace::from_nanos(
                a.interval.max(b.interval),
                a.refill.max(b.refill),
            )),
            (a, None) => a,
            (None, b) => b,
        }
    }
}
