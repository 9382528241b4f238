//! Virtual time for the tests that read exact waits: a bursty limiter on a manual
//! clock, and a clock whose async sleeps never end.
#![allow(dead_code)]

use futures::future::{Either, Pending, Ready};
use sluicegate::algorithms::SmoothBursty;
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::CellAlgorithm;
use sluicegate::RateLimiter;
use std::time::Duration;

/// A Guava-style bursty limiter of `rate` permits a second and the manual clock it
/// reads, which records every sleep it is asked for.
pub fn bursty(rate: f64) -> (RateLimiter<SmoothBursty, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    (
        RateLimiter::bursty_with_clock(rate, clock.clone()).unwrap(),
        clock,
    )
}

/// Virtual time whose async sleeps never end (unless zero): a future that had to
/// wait stays mid-wait for as long as the test likes, deterministically.
#[derive(Clone, Debug, Default)]
pub struct StuckClock(pub ManualClock);

impl Clock for StuckClock {
    type Sleep = Either<Ready<()>, Pending<()>>;

    fn now(&self) -> Nanos {
        self.0.now()
    }

    fn sleep(&self, duration: Duration) {
        self.0.sleep(duration);
    }

    fn sleep_async(&self, duration: Duration) -> Self::Sleep {
        if duration.is_zero() {
            Either::Left(futures::future::ready(()))
        } else {
            Either::Right(futures::future::pending())
        }
    }
}

/// Asserts the sleeps `clock` recorded since it was last asked, in seconds rounded
/// to hundredths as Guava's tests print them, and forgets them.
#[track_caller]
pub fn assert_slept(clock: &ManualClock, secs: &[f64]) {
    assert_eq!(clock.take_sleeps_secs(), secs);
}

/// Guava's acquire-then-read-the-log step: one blocking `acquire()` per entry of
/// `secs`, then [`assert_slept`] on the limiter's own clock, so the count of
/// acquires cannot drift from the sleeps expected of them.
#[track_caller]
pub fn assert_acquires_slept<A: CellAlgorithm>(
    limiter: &RateLimiter<A, ManualClock>,
    secs: &[f64],
) {
    for _ in secs {
        limiter.acquire().unwrap();
    }
    assert_slept(limiter.clock(), secs);
}
