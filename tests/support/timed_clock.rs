//! Virtual time whose async sleeps end once the clock has reached their end, for
//! tests that keep async waits mid-wait and then let them act.
#![allow(dead_code)]

use sluicegate::clock::{duration_to_nanos, Clock, ManualClock, Nanos};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::adapters::HeldSleep;

/// A [`ManualClock`] whose async sleeps last until the clock has been moved past
/// their end (a waiter stays mid-wait until the test moves time past its turn),
/// counting the sleeps it has begun. Blocking sleeps advance it at once and are
/// recorded, as a [`ManualClock`]'s.
#[derive(Clone, Debug, Default)]
pub struct Timed {
    pub clock: ManualClock,
    begun: Arc<AtomicUsize>,
}

impl Timed {
    /// How many async sleeps longer than zero have begun.
    pub fn sleeps_begun(&self) -> usize {
        self.begun.load(Ordering::Acquire)
    }
}

impl Clock for Timed {
    type Sleep = HeldSleep;

    fn now(&self) -> Nanos {
        self.clock.now()
    }

    fn sleep(&self, duration: Duration) {
        self.clock.sleep(duration);
    }

    fn sleep_async(&self, duration: Duration) -> HeldSleep {
        if !duration.is_zero() {
            self.begun.fetch_add(1, Ordering::AcqRel);
        }
        HeldSleep {
            clock: self.clock.clone(),
            until: self.clock.now().saturating_add(duration_to_nanos(duration)),
        }
    }
}
