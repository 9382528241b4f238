//! Time, as the limiters see it: monotonic integer nanoseconds from an origin.
//!
//! Every limiter in this crate is a lazy state machine: it never runs a thread or a
//! timer of its own, and only looks at the clock when a call arrives. So the whole
//! notion of time is this small trait: read "now", and sleep (blocking or async).
//!
//! Two clocks ship with the crate:
//!
//! * [`DefaultClock`] reads [`quanta`], a fast monotonic clock (TSC where the CPU has a
//!   stable one, the OS monotonic clock otherwise). Its origin is the moment it was
//!   created; it sleeps with [`std::thread::sleep`] and, in async code, with
//!   [`futures_timer::Delay`], so it needs no particular async runtime.
//! * [`ManualClock`] is virtual time for tests: it moves only when advanced, and a
//!   sleep under it advances it at once and is recorded, so a test can assert the
//!   exact sequence of waits a limiter asked for, the way Guava's tests do.
//!
//! Time is a plain `u64` of nanoseconds ([`Nanos`]): 2^64 ns is 584 years, so the
//! arithmetic in this crate saturates rather than wraps, and a reading never
//! overflows in practice. Three algorithms reach less far:
//! * Guava's limiters keep their instants as signed nanoseconds: from a reading of
//!   2^63 − 1 ns (292 years from the clock's origin) on, a warming-up limiter, and a
//!   bursty one whose state starts there, answer every call
//!   [never](crate::algorithms::Verdict::Never);
//! * the leaky bucket counts ticks of 0.5-1 ns in 64 bits (at least 292 years), and
//!   answers never a call whose drain would end past its last tick (for a
//!   whole-nanosecond interval, within one interval of the clock's end).
//!
//! A clock counted from the Unix epoch stays below 2^63 ns until 2262;
//! [`DefaultClock`] counts from its own creation.

mod manual;
mod system;

pub use manual::{ManualClock, ManualSleep};
pub use system::{DefaultClock, DefaultSleep};

use std::future::Future;
use std::time::Duration;

/// Nanoseconds since a clock's origin. The unit of every instant and interval inside
/// the crate's algorithms.
///
/// ```
/// use sluicegate::clock::{Clock, ManualClock, Nanos};
/// use std::time::Duration;
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_millis(3));
/// let t: Nanos = clock.now();
/// assert_eq!(t, 3_000_000);
/// ```
pub type Nanos = u64;

/// One second in [`Nanos`].
///
/// ```
/// use sluicegate::clock::{nanos_to_duration, NANOS_PER_SECOND};
/// assert_eq!(nanos_to_duration(NANOS_PER_SECOND).as_secs(), 1);
/// ```
pub const NANOS_PER_SECOND: Nanos = 1_000_000_000;

/// A monotonic clock that can also wait.
///
/// `now()` must never go backwards for a given clock value (clones share a timeline).
/// The limiters read it once per call. `sleep` and `sleep_async` are what the
/// blocking and async front ends use to wait out a delay; a clock may implement them
/// however it likes, as long as `now()` has advanced by at least the duration when
/// they return (the [`ManualClock`] makes them advance time itself).
///
/// ```
/// use sluicegate::clock::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// clock.sleep(Duration::from_millis(200));
/// assert_eq!(clock.now(), 200_000_000);
/// ```
pub trait Clock: Clone + Send + Sync + 'static {
    /// The future returned by [`Clock::sleep_async`].
    type Sleep: Future<Output = ()> + Send + 'static;

    /// Nanoseconds since this clock's origin. Monotonic: never smaller than a
    /// previous reading of the same clock or of a clone of it. Reading it changes
    /// nothing and is cheap: an atomic load for the [`ManualClock`], a few to
    /// about 20 nanoseconds for the [`DefaultClock`].
    ///
    /// ```
    /// use sluicegate::clock::{Clock, DefaultClock, ManualClock};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// assert_eq!(clock.now(), 0); // a manual clock starts at its origin
    /// let twin = clock.clone();
    /// twin.advance(Duration::from_nanos(7));
    /// assert_eq!(clock.now(), 7); // clones share one timeline
    /// assert_eq!(clock.now(), 7); // reading does not move it
    /// let real = DefaultClock::new();
    /// let first = real.now();
    /// assert!(real.now() >= first);
    /// ```
    fn now(&self) -> Nanos;

    /// Blocks the calling thread for `duration`; when it returns, `now()` has moved
    /// on by at least `duration`. A zero duration returns at once (the
    /// [`ManualClock`] still records it). The [`ManualClock`] never blocks: it
    /// advances its time by `duration` (saturating at `u64::MAX`) instead.
    ///
    /// ```
    /// use sluicegate::clock::{Clock, ManualClock};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// clock.sleep(Duration::ZERO);
    /// assert_eq!(clock.now(), 0);
    /// clock.sleep(Duration::from_millis(200));
    /// assert_eq!(clock.now(), 200_000_000);
    /// clock.sleep(Duration::MAX); // saturates instead of overflowing
    /// assert_eq!(clock.now(), u64::MAX);
    /// assert_eq!(clock.sleeps().len(), 3);
    /// ```
    fn sleep(&self, duration: Duration);

    /// A future that completes once `duration` has passed on this clock; when it
    /// completes, `now()` has moved on by at least `duration`. Creating it waits
    /// for nothing: the time is counted while it is awaited. The [`ManualClock`]'s
    /// ([`ManualSleep`]) advances virtual time and completes at its first poll; one
    /// dropped unpolled changes nothing.
    ///
    /// ```
    /// use sluicegate::clock::{Clock, ManualClock};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let sleep = clock.sleep_async(Duration::from_millis(300));
    /// assert_eq!(clock.now(), 0); // nothing happens until it is polled
    /// futures::executor::block_on(sleep);
    /// assert_eq!(clock.now(), 300_000_000);
    /// futures::executor::block_on(clock.sleep_async(Duration::ZERO));
    /// assert_eq!(clock.sleeps(), [Duration::from_millis(300), Duration::ZERO]);
    /// ```
    fn sleep_async(&self, duration: Duration) -> Self::Sleep;
}

/// Converts a [`Duration`] to [`Nanos`], saturating at `u64::MAX` (584 years) instead
/// of overflowing, so `Duration::MAX` means "forever".
///
/// ```
/// use sluicegate::clock::duration_to_nanos;
/// use std::time::Duration;
/// assert_eq!(duration_to_nanos(Duration::from_micros(3)), 3_000);
/// assert_eq!(duration_to_nanos(Duration::MAX), u64::MAX);
/// ```
pub fn duration_to_nanos(duration: Duration) -> Nanos {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Converts [`Nanos`] to a [`Duration`]. Exact: every `u64` of nanoseconds fits.
///
/// ```
/// use sluicegate::clock::nanos_to_duration;
/// assert_eq!(nanos_to_duration(1_500_000_000).as_millis(), 1500);
/// ```
pub fn nanos_to_duration(nanos: Nanos) -> Duration {
    Duration::from_nanos(nanos)
}
