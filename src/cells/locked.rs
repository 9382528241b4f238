//! A cell behind a mutex, for any algorithm.

use super::{Reconfiguration, StateCell};
use crate::algorithms::{Algorithm, Decision, Receipt};
use crate::clock::Nanos;
use crate::error::ConfigError;
use parking_lot::Mutex;

/// A cell behind a mutex: for a [`Plain`](crate::algorithms::Plain) algorithm (sets
/// of limits, or any algorithm of yours).
///
/// Each step takes an uncontended `parking_lot` mutex (two atomic operations), runs
/// the algorithm, and releases it.
#[derive(Debug)]
pub struct LockedCell<A: Algorithm> {
    inner: Mutex<(A, A::State)>,
}

impl<A: Algorithm + Clone> StateCell<A> for LockedCell<A> {
    fn new(algorithm: A, now: Nanos) -> Self {
        let state = algorithm.initial_state(now);
        LockedCell {
            inner: Mutex::new((algorithm, state)),
        }
    }

    #[inline]
    fn reserve(&self, now: Nanos, cost: u64, max_wait: Nanos) -> (Decision, Receipt) {
        let mut guard = self.inner.lock();
        let (algorithm, state) = &mut *guard;
        algorithm.reserve(state, now, cost, max_wait)
    }

    /// A check gives nothing back, so it asks for no receipt (a set's would
    /// allocate).
    #[inline]
    fn check(&self, now: Nanos, cost: u64) -> Decision {
        let mut guard = self.inner.lock();
        let (algorithm, state) = &mut *guard;
        algorithm.reserve(state, now, cost, 0)
    }

    #[inline]
    fn try_take(&self, now: Nanos, cost: u64) -> bool {
        let mut guard = self.inner.lock();
        let (algorithm, state) = &mut *guard;
        algorithm.reserve::<bool>(state, now, cost, 0)
    }

    fn check_each(&self, now: Nanos, cost: u64, each: &mut dyn FnMut(Decision)) -> Decision {
        let mut guard = self.inner.lock();
        let (algorithm, state) = &mut *guard;
        algorithm.reserve_each(state, now, cost, 0, each).0
    }

    fn peek(&self, now: Nanos, cost: u64) -> Decision {
        let guard = self.inner.lock();
        guard.0.peek(&guard.1, now, cost)
    }

    fn cancel(&self, now: Nanos, receipt: &Receipt, acts_at: Nanos) {
        let mut guard = self.inner.lock();
        let (algorithm, state) = &mut *guard;
        algorithm.cancel(state, now, receipt, acts_at);
    }

    fn algorithm(&self) -> A {
        self.inner.lock().0.clone()
    }

    fn reconfigure(&self, change: &Reconfiguration<'_, A>) -> Result<(), ConfigError> {
        let mut guard = self.inner.lock();
        let (mut algorithm, mut state) = (guard.0.clone(), guard.1.clone());
        change(&mut algorithm, &mut state)?;
        *guard = (algorithm, state);
        Ok(())
    }
}
