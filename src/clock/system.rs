//! The default, real clock.

use super::{Clock, Nanos};
use std::time::Duration;

/// The real monotonic clock, read through [`quanta`].
///
/// Its origin is the instant it was created; clones share that origin, so limiters
/// built from clones of one `DefaultClock` share a timeline. Reading it costs a
/// few nanoseconds where the CPU has an invariant TSC and about 20 ns otherwise (the OS
/// monotonic clock). `sleep` is [`std::thread::sleep`]; `sleep_async` is a
/// [`futures_timer::Delay`], which works under any executor (tokio,
/// `futures::executor::block_on`, ...) because it runs its own timer thread, created
/// lazily on first use.
///
/// ```
/// use sluicegate::clock::{Clock, DefaultClock};
/// let clock = DefaultClock::new();
/// let a = clock.now();
/// assert!(clock.now() >= a);
/// ```
#[derive(Clone, Debug)]
pub struct DefaultClock {
    clock: quanta::Clock,
    origin: u64,
}

impl DefaultClock {
    /// A clock whose origin is now.
    ///
    /// ```
    /// use sluicegate::clock::{Clock, DefaultClock};
    /// let clock = DefaultClock::new();
    /// let twin = clock.clone(); // same origin, same timeline
    /// let a = clock.now();
    /// assert!(twin.now() >= a);
    /// ```
    pub fn new() -> Self {
        let clock = quanta::Clock::new();
        let origin = clock.raw();
        DefaultClock { clock, origin }
    }
}

impl Default for DefaultClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for DefaultClock {
    type Sleep = futures_timer::Delay;

    #[inline]
    fn now(&self) -> Nanos {
        self.clock.delta_as_nanos(self.origin, self.clock.raw())
    }

    fn sleep(&self, duration: Duration) {
        if !duration.is_zero() {
            std::thread::sleep(duration);
        }
    }

    fn sleep_async(&self, duration: Duration) -> Self::Sleep {
        futures_timer::Delay::new(duration)
    }
}
