//! The back-off: after a failure the inner store is left alone for a while, then
//! one caller at a time probes it, all in the callers' own calls (no thread).
//!
//! ```text
//!   healthy ──a call fails──▶ backed off (until = now + period)
//!      ▲                         │ now ≥ until
//!      │                         ▼
//!      └──probe succeeds── probe due ──one caller wins the flag──▶ probing
//!                                ▲                                   │
//!                                └──probe fails: period doubled, ────┘
//!                                   until = now + period
//! ```
//!
//! The state is three atomics: `until` (0 while healthy, so that the healthy path
//! is one load), the current `period`, and the `probing` flag. A healthy call that
//! fails backs off for the current period (concurrent failures of calls sent
//! together extend it, they do not double it); only a failed probe doubles it, up
//! to the maximum; a probe that succeeds resets it.

use crate::clock::{Clock, Nanos};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a [`FailoverStore`](super::FailoverStore) leaves its inner store alone
/// after a failure: `initial` after the first failure, doubled after each failed
/// probe up to `max`, back to `initial` once a probe succeeds. The default is 1 s
/// doubling up to 30 s.
///
/// A zero `initial` is raised to 1 ms (a zero back-off would send every call to a
/// server that just failed), and a `max` below `initial` is raised to it.
///
/// ```
/// use sluicegate::stores::failover::Backoff;
/// use std::time::Duration;
/// let backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(8));
/// assert_eq!((backoff.initial(), backoff.max()), (Duration::from_millis(500), Duration::from_secs(8)));
/// assert_eq!(Backoff::default().initial(), Duration::from_secs(1));
/// assert_eq!(Backoff::new(Duration::ZERO, Duration::ZERO).initial(), Duration::from_millis(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
}

impl Backoff {
    /// A back-off of `initial`, doubling after each failed probe up to `max`.
    ///
    /// ```
    /// use sluicegate::stores::failover::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::new(Duration::from_secs(2), Duration::from_secs(1));
    /// assert_eq!(b.max(), Duration::from_secs(2)); // raised to `initial`
    /// ```
    pub fn new(initial: Duration, max: Duration) -> Self {
        let initial = initial.max(Duration::from_millis(1));
        Backoff {
            initial,
            max: max.max(initial),
        }
    }

    /// A back-off that stays `period`, failure after failure.
    ///
    /// ```
    /// use sluicegate::stores::failover::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::fixed(Duration::from_millis(200));
    /// assert_eq!(b.initial(), b.max());
    /// ```
    pub fn fixed(period: Duration) -> Self {
        Self::new(period, period)
    }

    /// The back-off after the first failure.
    ///
    /// ```
    /// use sluicegate::stores::failover::Backoff;
    /// assert_eq!(Backoff::default().initial().as_secs(), 1);
    /// ```
    pub fn initial(&self) -> Duration {
        self.initial
    }

    /// The longest back-off, reached by doubling.
    ///
    /// ```
    /// use sluicegate::stores::failover::Backoff;
    /// assert_eq!(Backoff::default().max().as_secs(), 30);
    /// ```
    pub fn max(&self) -> Duration {
        self.max
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(Duration::from_secs(1), Duration::from_secs(30))
    }
}

fn nanos(duration: Duration) -> Nanos {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The back-off's state, shared by the store and its calls' futures.
pub(super) struct Health<C> {
    clock: C,
    initial: Nanos,
    max: Nanos,
    /// When the back-off ends, on `clock`; 0 while healthy.
    until: AtomicU64,
    /// The back-off a failure starts now.
    period: AtomicU64,
    /// A caller is probing the inner store.
    probing: AtomicBool,
}

/// Where one call goes.
pub(super) enum Route<C: Clock> {
    /// Healthy: to the inner store.
    Store,
    /// The back-off has ended and this call won the probe: to the inner store,
    /// reporting back through the guard.
    Probe(Probe<C>),
    /// Backed off, or another caller is probing: to the policy, which may refuse
    /// for this long.
    Policy(Nanos),
}

impl<C: Clock> Health<C> {
    pub(super) fn new(clock: C, backoff: Backoff) -> Self {
        let initial = nanos(backoff.initial).max(1);
        Health {
            clock,
            initial,
            max: nanos(backoff.max).max(initial),
            until: AtomicU64::new(0),
            period: AtomicU64::new(initial),
            probing: AtomicBool::new(false),
        }
    }

    pub(super) fn backoff(&self) -> Backoff {
        Backoff::new(
            Duration::from_nanos(self.initial),
            Duration::from_nanos(self.max),
        )
    }

    pub(super) fn clock(&self) -> &C {
        &self.clock
    }

    /// True while the inner store is not asked (backed off or being probed).
    pub(super) fn is_degraded(&self) -> bool {
        self.until.load(Ordering::Acquire) != 0
    }

    /// Where a call made now goes.
    pub(super) fn route(self: &Arc<Self>) -> Route<C> {
        let until = self.until.load(Ordering::Acquire);
        if until == 0 {
            return Route::Store;
        }
        let now = self.clock.now();
        if now < until {
            return Route::Policy(until - now);
        }
        if self
            .probing
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            // A probe that succeeded between the load and the flag: healthy again.
            if self.until.load(Ordering::Acquire) == 0 {
                self.probing.store(false, Ordering::Release);
                return Route::Store;
            }
            return Route::Probe(Probe {
                health: Arc::clone(self),
                done: false,
            });
        }
        // Another caller's probe is under way: its answer comes within the inner
        // store's timeout; a refusal meanwhile names the initial back-off.
        Route::Policy(self.initial)
    }

    /// A call sent while healthy failed: back off for the current period (from
    /// now, or longer if already backed off). Returns how long.
    pub(super) fn failed(&self) -> Nanos {
        let period = self.period.load(Ordering::Acquire);
        let until = self.clock.now().saturating_add(period).max(1);
        self.until.fetch_max(until, Ordering::AcqRel);
        period
    }
}

/// The right to probe the inner store, held by the one caller that won it. Dropped
/// without a verdict (an abandoned async call), it lets the next caller probe.
pub(super) struct Probe<C: Clock> {
    health: Arc<Health<C>>,
    done: bool,
}

impl<C: Clock> Probe<C> {
    /// The inner store answered: healthy again, the back-off reset.
    pub(super) fn succeeded(mut self) {
        let health = &self.health;
        health.period.store(health.initial, Ordering::Release);
        health.until.store(0, Ordering::Release);
        self.release();
    }

    /// The inner store failed again: the period doubles (up to the maximum) and
    /// a new back-off starts now. Returns how long.
    pub(super) fn failed(mut self) -> Nanos {
        let health = &self.health;
        let period = health
            .period
            .load(Ordering::Acquire)
            .saturating_mul(2)
            .min(health.max);
        health.period.store(period, Ordering::Release);
        let until = health.clock.now().saturating_add(period).max(1);
        health.until.store(until, Ordering::Release);
        self.release();
        period
    }

    /// The probe told nothing about the store's health (an error of the call
    /// itself): the next caller probes again.
    pub(super) fn abandon(mut self) {
        self.release();
    }

    fn release(&mut self) {
        if !self.done {
            self.done = true;
            self.health.probing.store(false, Ordering::Release);
        }
    }
}

impl<C: Clock> Drop for Probe<C> {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    const MS: Nanos = 1_000_000;

    fn health(clock: &ManualClock) -> Arc<Health<ManualClock>> {
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(350));
        Arc::new(Health::new(clock.clone(), backoff))
    }

    fn policy(route: Route<ManualClock>) -> Nanos {
        match route {
            Route::Policy(retry) => retry,
            Route::Store => panic!("expected the policy, got the store"),
            Route::Probe(_) => panic!("expected the policy, got a probe"),
        }
    }

    fn probe(route: Route<ManualClock>) -> Probe<ManualClock> {
        match route {
            Route::Probe(probe) => probe,
            _ => panic!("expected a probe"),
        }
    }

    #[test]
    fn healthy_calls_go_to_the_store() {
        let clock = ManualClock::new();
        let health = health(&clock);
        assert!(matches!(health.route(), Route::Store));
        assert!(!health.is_degraded());
    }

    #[test]
    fn a_failure_backs_off_for_the_initial_period_counted_from_the_failure() {
        let clock = ManualClock::new();
        let health = health(&clock);
        clock.advance_nanos(5 * MS);
        assert_eq!(health.failed(), 100 * MS);
        assert!(health.is_degraded());
        assert_eq!(policy(health.route()), 100 * MS);
        clock.advance_nanos(99 * MS);
        assert_eq!(policy(health.route()), MS);
    }

    #[test]
    fn concurrent_failures_extend_the_back_off_without_doubling_it() {
        let clock = ManualClock::new();
        let health = health(&clock);
        health.failed();
        clock.advance_nanos(30 * MS);
        assert_eq!(health.failed(), 100 * MS);
        assert_eq!(policy(health.route()), 100 * MS);
    }

    #[test]
    fn once_the_back_off_ends_one_caller_probes_and_the_others_use_the_policy() {
        let clock = ManualClock::new();
        let health = health(&clock);
        health.failed();
        clock.advance_nanos(100 * MS);
        let probing = probe(health.route());
        // Everyone else keeps to the policy while the probe is out.
        for _ in 0..10 {
            assert_eq!(policy(health.route()), 100 * MS);
        }
        probing.succeeded();
        assert!(!health.is_degraded());
        assert!(matches!(health.route(), Route::Store));
    }

    #[test]
    fn failed_probes_double_the_period_up_to_the_maximum_and_success_resets_it() {
        let clock = ManualClock::new();
        let health = health(&clock);
        health.failed();
        let mut periods = Vec::new();
        for _ in 0..4 {
            let wait = match health.route() {
                Route::Policy(wait) => wait,
                _ => panic!("expected a back-off"),
            };
            clock.advance_nanos(wait);
            periods.push(probe(health.route()).failed() / MS);
        }
        assert_eq!(periods, [200, 350, 350, 350]);
        clock.advance_nanos(350 * MS);
        probe(health.route()).succeeded();
        assert_eq!(health.failed(), 100 * MS);
    }

    #[test]
    fn an_abandoned_probe_lets_the_next_caller_probe() {
        let clock = ManualClock::new();
        let health = health(&clock);
        health.failed();
        clock.advance_nanos(100 * MS);
        drop(probe(health.route()));
        probe(health.route()).abandon();
        let again = probe(health.route());
        assert!(health.is_degraded());
        again.failed();
        assert_eq!(policy(health.route()), 200 * MS);
    }
}
