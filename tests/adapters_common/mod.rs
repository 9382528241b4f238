//! Shared by the adapter tests: a virtual clock whose async sleeps wait for the test
//! to move time, and polling helpers.
#![allow(dead_code)]

use futures::task::noop_waker_ref;
use sluicegate::clock::{duration_to_nanos, Clock, ManualClock, Nanos};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// Virtual time whose async sleeps do not move time: a sleep stays pending until the
/// test advances the clock past its end (a zero sleep is ready at once). So a future
/// that had to wait is observably mid-wait, deterministically.
#[derive(Clone, Debug, Default)]
pub struct HeldClock(pub ManualClock);

impl HeldClock {
    pub fn advance(&self, by: Duration) {
        self.0.advance(by);
    }
}

/// The sleep of a [`HeldClock`].
pub struct HeldSleep {
    clock: ManualClock,
    until: Nanos,
}

impl Future for HeldSleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.clock.now() >= self.until {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Clock for HeldClock {
    type Sleep = HeldSleep;

    fn now(&self) -> Nanos {
        self.0.now()
    }

    fn sleep(&self, duration: Duration) {
        self.0.sleep(duration);
    }

    fn sleep_async(&self, duration: Duration) -> HeldSleep {
        HeldSleep {
            clock: self.0.clone(),
            until: self.0.now().saturating_add(duration_to_nanos(duration)),
        }
    }
}

/// Polls once with a waker that does nothing.
pub fn poll_once<F: Future + ?Sized>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(noop_waker_ref()))
}

/// Polls a stream once with a waker that does nothing.
pub fn poll_next<S: futures::Stream + ?Sized>(stream: Pin<&mut S>) -> Poll<Option<S::Item>> {
    stream.poll_next(&mut Context::from_waker(noop_waker_ref()))
}

/// Seconds as f64, two decimals, for readable schedules.
pub fn secs(nanos: Nanos) -> f64 {
    (nanos as f64 / 1e7).round() / 100.0
}
