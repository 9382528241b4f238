//! Virtual time that blocks: a clock whose blocking and async sleeps both last until
//! the test has moved time past their end, counting the waiters asleep on it, so a
//! test can start waiters one after another on real threads and tasks, see each
//! one parked, and then release them one turn at a time.
#![allow(dead_code)]

use sluicegate::clock::{duration_to_nanos, Clock, Nanos};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How long (real time) a test waits for a thread or task to reach a state
/// before it fails instead of hanging.
pub const PATIENCE: Duration = Duration::from_secs(10);

#[derive(Default)]
struct State {
    now: Nanos,
    /// Sleeps longer than zero begun and not yet over (blocking or async).
    parked: usize,
    wakers: Vec<Waker>,
    /// Every sleep asked for, zero ones included, in the order asked.
    sleeps: Vec<Duration>,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    moved: Condvar,
}

/// Virtual time starting at 0; clones share it.
#[derive(Clone, Default)]
pub struct GateClock(Arc<Inner>);

impl std::fmt::Debug for GateClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GateClock({})", self.now())
    }
}

impl GateClock {
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves time forward and wakes every sleeper whose end it reaches.
    pub fn advance(&self, by: Duration) {
        let mut state = self.0.state.lock().unwrap();
        state.now = state.now.saturating_add(duration_to_nanos(by));
        for waker in state.wakers.drain(..) {
            waker.wake();
        }
        self.0.moved.notify_all();
    }

    /// How many sleeps longer than zero are under way.
    pub fn parked(&self) -> usize {
        self.0.state.lock().unwrap().parked
    }

    /// Every sleep asked for so far, zero ones included.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.0.state.lock().unwrap().sleeps.clone()
    }

    /// Waits (real time, at most [`PATIENCE`]) until exactly `n` sleeps are under
    /// way; panics if that does not happen.
    #[track_caller]
    pub fn wait_parked(&self, n: usize) {
        let deadline = Instant::now() + PATIENCE;
        let mut state = self.0.state.lock().unwrap();
        while state.parked != n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "expected {n} waiters asleep, saw {}",
                state.parked
            );
            state = self.0.moved.wait_timeout(state, left).unwrap().0;
        }
    }
}

impl Clock for GateClock {
    type Sleep = GateSleep;

    fn now(&self) -> Nanos {
        self.0.state.lock().unwrap().now
    }

    fn sleep(&self, duration: Duration) {
        let mut state = self.0.state.lock().unwrap();
        state.sleeps.push(duration);
        if duration.is_zero() {
            return;
        }
        let until = state.now.saturating_add(duration_to_nanos(duration));
        state.parked += 1;
        self.0.moved.notify_all();
        while state.now < until {
            state = self.0.moved.wait(state).unwrap();
        }
        state.parked -= 1;
        self.0.moved.notify_all();
    }

    fn sleep_async(&self, duration: Duration) -> GateSleep {
        let mut state = self.0.state.lock().unwrap();
        state.sleeps.push(duration);
        GateSleep {
            clock: self.clone(),
            until: state.now.saturating_add(duration_to_nanos(duration)),
            counted: false,
        }
    }
}

/// The async sleep of a [`GateClock`]: ready once the clock reads its end; counted
/// as parked from its first pending poll until it ends or is dropped.
pub struct GateSleep {
    clock: GateClock,
    until: Nanos,
    counted: bool,
}

impl GateSleep {
    fn uncount(&mut self, state: &mut State) {
        if self.counted {
            self.counted = false;
            state.parked -= 1;
            self.clock.0.moved.notify_all();
        }
    }
}

impl Future for GateSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let clock = self.clock.clone();
        let mut state = clock.0.state.lock().unwrap();
        if state.now >= self.until {
            self.uncount(&mut state);
            return Poll::Ready(());
        }
        if !self.counted {
            self.counted = true;
            state.parked += 1;
            clock.0.moved.notify_all();
        }
        state.wakers.push(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for GateSleep {
    fn drop(&mut self) {
        let clock = self.clock.clone();
        let mut state = clock.0.state.lock().unwrap();
        self.uncount(&mut state);
    }
}
