//! The keyed limiter's calls over several keys (an IP *and* a user id):
//! all-or-nothing, in one store step over every key.

use super::combine::{combine, with_repeats_of};
use super::direct::nonzero;
use super::KeyedRateLimiter;
use crate::algorithms::{Algorithm, Decision};
use crate::clock::{Clock, Nanos};
use crate::error::Error;
use crate::stores::store::blank;
use crate::stores::{Operation, Store};
use std::time::Duration;

impl<K, A: Algorithm, S: Store<K, A>, C: Clock> KeyedRateLimiter<K, A, S, C> {
    /// Takes `cost` permits from *every* key in `keys`, or from none: allowed only if
    /// each key's limit allows it. Never blocks. See the type docs for which decision
    /// is returned. A key listed twice is charged twice (the store's contract: one
    /// charge per listed key), so `check_all(&[a, a], 1)` needs room for 2 in `a`,
    /// and is never allowed where `a`'s limit could never grant 2 at once; pass
    /// each key once.
    ///
    /// # Errors
    /// [`Error::ZeroCost`] for a cost of 0; [`Error::InvalidCount`] for no keys; the
    /// store's errors. Nothing is consumed on error or refusal.
    ///
    /// ```
    /// use sluicegate::{algorithms::SmoothBursty, clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_secs(1));
    /// let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(2.0).unwrap(), clock);
    /// for _ in 0..3 {
    ///     limiter.check(&"user:alice", 1).unwrap(); // a burst of 2, then debt (pay later)
    /// }
    /// // The IP is fresh but alice is not: refused, and the IP is not charged.
    /// assert!(!limiter.check_all(&["ip:10.0.0.1", "user:alice"], 1).unwrap().is_allowed());
    /// assert_eq!(limiter.peek(&"ip:10.0.0.1", 1).unwrap().remaining(), 1); // 2 - this peek
    /// ```
    pub fn check_all(&self, keys: &[K], cost: u64) -> Result<Decision, Error>
    where
        K: PartialEq,
    {
        let cost = nonzero(cost)?;
        let now = self.clock().now();
        self.step_all(keys, now, Operation::Reserve { cost, max_wait: 0 })
    }

    /// The decision [`check_all`](Self::check_all) would give now, consuming
    /// nothing.
    ///
    /// # Errors
    /// As [`check_all`](Self::check_all).
    ///
    /// ```
    /// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let limiter = KeyedRateLimiter::with_clock(window, ManualClock::new());
    /// limiter.try_acquire(&"user");
    /// let d = limiter.peek_all(&["ip", "user"], 1).unwrap();
    /// assert!(!d.is_allowed()); // the user key refuses
    /// assert!(limiter.peek_all(&[], 1).is_err()); // no keys
    /// assert!(limiter.try_acquire(&"ip")); // nothing was taken from "ip"
    /// ```
    pub fn peek_all(&self, keys: &[K], cost: u64) -> Result<Decision, Error>
    where
        K: PartialEq,
    {
        let cost = nonzero(cost)?;
        let now = self.clock().now();
        self.step_all(keys, now, Operation::Peek { cost })
    }

    /// Takes `cost` permits from every key in `keys` (all-or-nothing), blocking as
    /// long as needed; returns the time waited.
    ///
    /// # Errors
    /// As [`acquire_n`](Self::acquire_n), plus [`Error::InvalidCount`] for no keys.
    ///
    /// ```
    /// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, KeyedRateLimiter};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let limiter = KeyedRateLimiter::with_clock(window, ManualClock::new());
    /// assert_eq!(limiter.acquire_all(&["ip", "alice"], 1).unwrap(), Duration::ZERO);
    /// // "bob" is fresh, but "ip" is spent until the next window: both wait.
    /// assert_eq!(limiter.acquire_all(&["ip", "bob"], 1).unwrap(), Duration::from_secs(1));
    /// assert!(limiter.acquire_all(&[], 1).is_err());
    /// ```
    pub fn acquire_all(&self, keys: &[K], cost: u64) -> Result<Duration, Error>
    where
        K: PartialEq,
    {
        self.acquire_within(cost, u64::MAX, |now, step| self.step_all(keys, now, step))
    }

    /// [`step`](Self::step) for a reserve or peek over `keys`, whose repeated keys
    /// may make it never (see [`with_repeats_of`]).
    fn step_all(&self, keys: &[K], now: Nanos, step: Operation<'_>) -> Result<Decision, Error>
    where
        K: PartialEq,
    {
        let decision = self.step(keys, now, step)?;
        Ok(with_repeats_of(decision, self.algorithm(), keys, now, step))
    }

    /// One store step over `keys`, combined into one decision.
    #[inline]
    pub(crate) fn step(
        &self,
        keys: &[K],
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<Decision, Error> {
        let (algorithm, store, _) = self.shared_parts();
        match keys.len() {
            0 => Err(no_keys()),
            1 => self.step_key(&keys[0], now, step),
            n if n <= STACK_KEYS => {
                // The usual multi-key call (IP and user, a handful of keys) decides
                // without touching the allocator.
                let mut out: [_; STACK_KEYS] = std::array::from_fn(|_| blank());
                let out = &mut out[..n];
                store.apply(algorithm, keys, now, step, out)?;
                Ok(combine(out))
            }
            n => {
                let mut out = vec![blank(); n];
                store.apply(algorithm, keys, now, step, &mut out)?;
                Ok(combine(&out))
            }
        }
    }
}

/// How many keys one call can decide with decisions kept on the stack.
const STACK_KEYS: usize = 8;

pub(crate) fn no_keys() -> Error {
    Error::InvalidCount {
        what: "keys",
        value: 0,
        requirement: "at least 1",
    }
}
