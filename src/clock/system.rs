//! The default, real clock.

use super::{Clock, Nanos};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// The real monotonic clock, read through [`quanta`].
///
/// Its origin is the instant it was created; clones share that origin, so limiters
/// built from clones of one `DefaultClock` share a timeline. Reading it costs a
/// few nanoseconds where the CPU has an invariant TSC and about 20 ns otherwise (the OS
/// monotonic clock). `sleep` is [`std::thread::sleep`]; `sleep_async` is a
/// [`futures_timer::Delay`] ([`DefaultSleep`], ready at once for a zero wait), which
/// works under any executor (tokio,
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
    type Sleep = DefaultSleep;

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
        DefaultSleep {
            delay: (!duration.is_zero()).then(|| futures_timer::Delay::new(duration)),
        }
    }
}

/// The future of [`DefaultClock::sleep_async`]: a [`futures_timer::Delay`], except
/// that a zero duration is ready at its first poll. (A zero `Delay` waits for the
/// timer thread to fire it, a thread hop on every async acquire that needs no wait.)
///
/// ```
/// use sluicegate::clock::{Clock, DefaultClock};
/// use std::time::Duration;
/// use futures::FutureExt;
/// let clock = DefaultClock::new();
/// assert!(clock.sleep_async(Duration::ZERO).now_or_never().is_some());
/// futures::executor::block_on(clock.sleep_async(Duration::from_millis(1)));
/// ```
#[derive(Debug)]
pub struct DefaultSleep {
    delay: Option<futures_timer::Delay>,
}

impl Future for DefaultSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.delay.as_mut() {
            Some(delay) => Pin::new(delay).poll(cx),
            None => Poll::Ready(()),
        }
    }
}
