//! Virtual time for tests.

use super::{duration_to_nanos, Clock, Nanos};
use parking_lot::Mutex;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// A clock that moves only when told to: virtual time for tests.
///
/// It starts at 0 ns. [`advance`](ManualClock::advance) moves it forward;
/// [`sleep`](Clock::sleep) and [`sleep_async`](Clock::sleep_async) move it forward by
/// the requested duration at once (without blocking) and record the duration, so a
/// test can assert the exact list of waits a limiter asked for with
/// [`sleeps`](ManualClock::sleeps). Every acquire of this crate calls `sleep`, even for
/// a zero wait, exactly like Guava's `SleepingStopwatch`; so three `acquire()` at 5
/// permits per second record `[0.00, 0.20, 0.20]` seconds.
///
/// Clones share one timeline and one record. Time saturates at `u64::MAX` instead
/// of overflowing.
///
/// ```
/// use sluicegate::clock::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_secs(1));
/// clock.sleep(Duration::from_millis(250));
/// assert_eq!(clock.now(), 1_250_000_000);
/// assert_eq!(clock.sleeps(), vec![Duration::from_millis(250)]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    now: AtomicU64,
    sleeps: Mutex<Vec<Duration>>,
}

impl ManualClock {
    /// A clock at time 0 with no recorded sleeps, on a timeline of its own:
    /// only its clones share it. Allocates one small shared record.
    ///
    /// ```
    /// use sluicegate::clock::{Clock, ManualClock};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// assert_eq!(clock.now(), 0);
    /// assert!(clock.sleeps().is_empty());
    /// let other = ManualClock::new();
    /// other.advance(Duration::from_secs(1));
    /// assert_eq!(clock.now(), 0); // a new clock is not a clone
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves time forward by `duration` (saturating), without recording a sleep.
    ///
    /// ```
    /// use sluicegate::clock::{Clock, ManualClock};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_millis(5));
    /// assert_eq!(clock.now(), 5_000_000);
    /// clock.advance(Duration::MAX); // saturates instead of wrapping
    /// assert_eq!(clock.now(), u64::MAX);
    /// assert!(clock.sleeps().is_empty());
    /// ```
    pub fn advance(&self, duration: Duration) {
        self.advance_nanos(duration_to_nanos(duration));
    }

    /// Moves time forward by `nanos` (saturating), without recording a sleep.
    ///
    /// ```
    /// use sluicegate::clock::{Clock, ManualClock};
    /// let clock = ManualClock::new();
    /// clock.advance_nanos(7);
    /// clock.advance_nanos(u64::MAX);
    /// assert_eq!(clock.now(), u64::MAX);
    /// ```
    pub fn advance_nanos(&self, nanos: Nanos) {
        // fetch_update never fails with a closure that always returns Some.
        let _ = self
            .inner
            .now
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(nanos))
            });
    }

    /// Every sleep recorded so far, in order, including zero-length ones.
    ///
    /// ```
    /// use sluicegate::clock::{Clock, ManualClock};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// clock.sleep(Duration::ZERO);
    /// clock.sleep(Duration::from_millis(200));
    /// assert_eq!(clock.sleeps(), vec![Duration::ZERO, Duration::from_millis(200)]);
    /// assert_eq!(clock.sleeps().len(), 2); // reading does not clear
    /// ```
    pub fn sleeps(&self) -> Vec<Duration> {
        self.inner.sleeps.lock().clone()
    }

    /// Returns the recorded sleeps and clears the record.
    ///
    /// ```
    /// use sluicegate::clock::{Clock, ManualClock};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// clock.sleep(Duration::from_millis(200));
    /// assert_eq!(clock.take_sleeps(), vec![Duration::from_millis(200)]);
    /// assert!(clock.take_sleeps().is_empty());
    /// ```
    pub fn take_sleeps(&self) -> Vec<Duration> {
        std::mem::take(&mut *self.inner.sleeps.lock())
    }

    /// The recorded sleeps in seconds, rounded to two decimals as Guava's tests print
    /// them (`R0.20`), which makes assertions on long schedules readable.
    ///
    /// ```
    /// use sluicegate::clock::{Clock, ManualClock};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// clock.sleep(Duration::from_micros(1_375_000));
    /// assert_eq!(clock.take_sleeps_secs(), vec![1.38]);
    /// ```
    pub fn take_sleeps_secs(&self) -> Vec<f64> {
        self.take_sleeps()
            .into_iter()
            .map(|d| (d.as_secs_f64() * 100.0).round() / 100.0)
            .collect()
    }

    fn record_and_advance(&self, duration: Duration) {
        self.inner.sleeps.lock().push(duration);
        self.advance(duration);
    }
}

impl Clock for ManualClock {
    type Sleep = ManualSleep;

    #[inline]
    fn now(&self) -> Nanos {
        self.inner.now.load(Ordering::Acquire)
    }

    fn sleep(&self, duration: Duration) {
        self.record_and_advance(duration);
    }

    fn sleep_async(&self, duration: Duration) -> ManualSleep {
        ManualSleep {
            clock: self.clone(),
            duration: Some(duration),
        }
    }
}

/// The future of [`ManualClock::sleep_async`]: on first poll it records the sleep,
/// advances virtual time by its duration and completes. A sleep that is dropped
/// before being polled neither advances time nor is recorded.
///
/// ```
/// use sluicegate::clock::{Clock, ManualClock};
/// use std::time::Duration;
/// let clock = ManualClock::new();
/// let unpolled = clock.sleep_async(Duration::from_secs(9));
/// drop(unpolled);
/// futures::executor::block_on(clock.sleep_async(Duration::from_secs(1)));
/// assert_eq!(clock.now(), 1_000_000_000);
/// assert_eq!(clock.sleeps(), vec![Duration::from_secs(1)]);
/// ```
#[derive(Debug)]
pub struct ManualSleep {
    clock: ManualClock,
    duration: Option<Duration>,
}

impl Future for ManualSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if let Some(duration) = self.duration.take() {
            self.clock.record_and_advance(duration);
        }
        Poll::Ready(())
    }
}
