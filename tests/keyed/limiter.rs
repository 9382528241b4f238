//! The keyed limiter's decisions: per-key independence, the new-key rule,
//! all-or-nothing across keys and limits, blocking and async acquires.

use crate::support::virtual_time;

use futures::FutureExt;
use proptest::prelude::*;
use sluicegate::algorithms::{AllOf, FixedWindow, SmoothBursty, SmoothWarmingUp};
use sluicegate::clock::ManualClock;
use sluicegate::stores::MemoryStore;
use sluicegate::{Error, KeyedRateLimiter, RateLimiter, Verdict};
use std::time::Duration;
use virtual_time::{assert_slept, StuckClock};

fn window(limit: u64) -> FixedWindow {
    FixedWindow::new(limit, Duration::from_secs(1)).unwrap()
}

#[test]
fn keys_are_independent() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(window(3), clock.clone());
    for _ in 0..3 {
        assert!(limiter.try_acquire(&"a"));
    }
    assert!(!limiter.try_acquire(&"a"));
    for _ in 0..3 {
        assert!(limiter.try_acquire(&"b"));
    }
    assert!(!limiter.try_acquire(&"b"));
    assert_eq!(limiter.peek(&"c", 3).unwrap().remaining(), 0);
    assert!(limiter.peek(&"c", 3).unwrap().is_allowed());
    clock.advance(Duration::from_secs(1));
    assert!(limiter.try_acquire(&"a"));
}

#[test]
fn a_keyed_bursty_key_runs_guava_exactly_from_the_origin() {
    let clock = ManualClock::new();
    let keyed = KeyedRateLimiter::with_clock(SmoothBursty::new(5.0).unwrap(), clock.clone());
    for _ in 0..3 {
        keyed.acquire(&"k").unwrap();
    }
    assert_slept(&clock, &[0.0, 0.2, 0.2]);
    let warm = KeyedRateLimiter::with_clock(
        SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap(),
        clock.clone(),
    );
    for _ in 0..6 {
        warm.acquire(&"k").unwrap();
    }
    assert_slept(&clock, &[0.0, 1.38, 1.13, 0.88, 0.63, 0.5]);
}

#[test]
fn a_new_bursty_key_starts_with_the_burst_an_idle_client_saved() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(10));
    let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(4.0).unwrap(), clock.clone());
    let first = limiter.check(&"new", 1).unwrap();
    assert!(first.is_allowed());
    assert_eq!(first.remaining(), 3);
    // The direct limiter keeps Guava's empty start.
    let direct = RateLimiter::bursty_with_clock(4.0, clock.clone()).unwrap();
    assert_eq!(direct.check(1).unwrap().remaining(), 0);
}

#[test]
fn several_keys_are_all_or_nothing() {
    let limiter = KeyedRateLimiter::with_clock(window(2), ManualClock::new());
    assert!(limiter.try_acquire(&"ip"));
    assert!(limiter.try_acquire(&"ip"));
    let refused = limiter.check_all(&["user", "ip"], 1).unwrap();
    assert_eq!(refused.verdict(), Verdict::Denied);
    assert_eq!(refused.retry_after(), Duration::from_secs(1));
    // The user was not charged by the refused call.
    assert_eq!(limiter.peek(&"user", 1).unwrap().remaining(), 1);
    let both = limiter.check_all(&["user", "other"], 1).unwrap();
    assert!(both.is_allowed());
    assert_eq!(both.remaining(), 1);
    assert_eq!(limiter.peek(&"user", 1).unwrap().remaining(), 0);
    assert_eq!(limiter.peek(&"other", 1).unwrap().remaining(), 0);
}

#[test]
fn the_tightest_key_decides_an_allowed_call() {
    let limiter = KeyedRateLimiter::with_clock(window(5), ManualClock::new());
    limiter.check(&"busy", 3).unwrap();
    let d = limiter.check_all(&["idle", "busy"], 1).unwrap();
    assert!(d.is_allowed());
    assert_eq!(d.remaining(), 1);
}

#[test]
fn never_wins_over_denied_and_fails_acquires_at_once() {
    let limiter = KeyedRateLimiter::with_clock(window(2), ManualClock::new());
    limiter.check(&"a", 2).unwrap();
    let d = limiter.check_all(&["a", "b"], 3).unwrap();
    assert_eq!(d.verdict(), Verdict::Never);
    assert_eq!(limiter.acquire_n(&"b", 3), Err(Error::Never { cost: 3 }));
    assert_eq!(limiter.peek(&"b", 1).unwrap().remaining(), 1);
}

#[test]
fn a_repeated_key_is_charged_twice() {
    let limiter = KeyedRateLimiter::with_clock(window(3), ManualClock::new());
    assert!(limiter.check_all(&["a", "a"], 1).unwrap().is_allowed());
    assert_eq!(limiter.peek(&"a", 1).unwrap().remaining(), 0);
    assert!(!limiter.check_all(&["a", "a"], 1).unwrap().is_allowed());
    assert_eq!(limiter.peek(&"a", 1).unwrap().remaining(), 0);
}

#[test]
fn all_or_nothing_across_keys_and_limits() {
    // Per key: 3 per second and 4 per ten seconds, both charged or neither.
    let limits = AllOf::new((
        window(3),
        FixedWindow::new(4, Duration::from_secs(10)).unwrap(),
    ));
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(limits, clock.clone());
    for _ in 0..3 {
        assert!(limiter.check_all(&["ip", "user"], 1).unwrap().is_allowed());
    }
    let per_second = limiter.check_all(&["ip", "user"], 1).unwrap();
    assert!(!per_second.is_allowed());
    assert_eq!(per_second.limit_index(), 0);
    clock.advance(Duration::from_secs(1));
    // The user's per-10s limit has 1 left; a call of 2 is refused by it, and the
    // IP's counters (fresh second) do not move.
    limiter.check(&"ip2", 1).unwrap();
    let refused = limiter.check_all(&["ip2", "user"], 2).unwrap();
    assert!(!refused.is_allowed());
    assert_eq!(refused.limit_index(), 1);
    let ip2 = limiter.peek(&"ip2", 1).unwrap();
    assert_eq!(ip2.remaining(), 1); // 3 - 1 (its own call) - 1 (this peek's cost)
}

#[test]
fn bad_input_is_a_typed_error() {
    let limiter = KeyedRateLimiter::with_clock(window(3), ManualClock::new());
    assert_eq!(limiter.check(&"a", 0), Err(Error::ZeroCost));
    assert!(matches!(
        limiter.check_all(&[], 1),
        Err(Error::InvalidCount { what: "keys", .. })
    ));
    assert!(!limiter
        .try_acquire_n_timeout(&"a", 4, Duration::MAX)
        .unwrap());
}

#[test]
fn blocking_acquire_waits_for_a_window_to_roll() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(window(1), clock.clone());
    limiter.acquire(&"a").unwrap();
    assert_eq!(limiter.acquire(&"a").unwrap(), Duration::from_secs(1));
    assert!(!limiter
        .try_acquire_n_timeout(&"a", 1, Duration::from_millis(999))
        .unwrap());
    assert!(limiter
        .try_acquire_n_timeout(&"a", 1, Duration::from_secs(1))
        .unwrap());
    let both = limiter.acquire_all(&["a", "b"], 1).unwrap();
    assert_eq!(both, Duration::from_secs(1));
}

#[test]
fn a_dropped_async_acquire_gives_its_grant_back_on_every_key() {
    let clock = StuckClock::default();
    let limiter = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), clock.clone());
    let handle = limiter.to_async();
    // Time 0: both keys empty (as if created at the origin). The first acquire is
    // free, the second must wait 1 s: poll it once, then abandon it.
    assert!(handle.acquire_all(&["a", "b"], 1).now_or_never().is_some());
    let waiting = handle.acquire_all(&["a", "b"], 1).now_or_never();
    assert!(waiting.is_none());
    // Cancelled: the next caller waits 1 s (the first grant's debt), not 2 s.
    assert_eq!(
        limiter.check(&"a", 1).unwrap().retry_after(),
        Duration::from_secs(1)
    );
    limiter.clock().0.advance(Duration::from_secs(1));
    assert!(limiter.check(&"a", 1).unwrap().is_allowed());
    assert!(limiter.check(&"b", 1).unwrap().is_allowed());
}

#[test]
fn async_and_blocking_share_keys() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(window(2), clock.clone());
    let handle = limiter.to_async();
    futures::executor::block_on(async {
        assert!(handle.check(&"k", 1).await.unwrap().is_allowed());
        assert!(handle
            .try_acquire_n_timeout(&"k", 1, Duration::ZERO)
            .await
            .unwrap());
        assert!(!handle
            .try_acquire_n_timeout(&"k", 1, Duration::ZERO)
            .await
            .unwrap());
        assert_eq!(handle.acquire(&"k").await.unwrap(), Duration::from_secs(1));
    });
    // The async acquire took the new window's first permit; one is left.
    assert!(limiter.try_acquire(&"k"));
    assert!(!limiter.try_acquire(&"k"));
}

#[derive(Clone, Debug)]
enum Op {
    Advance(u64),
    Key(u16, u64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            2 => (0u64..400_000_000).prop_map(Op::Advance),
            1 => (1u64..4).prop_map(|c| Op::Key(0, c)),
            2 => (1u16..300, 1u64..4).prop_map(|(k, c)| Op::Key(k, c)),
        ],
        1..200,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Key 0 of a keyed limiter answers exactly what a direct limiter created at the
    /// clock origin answers, whatever happens to the other keys, and however often
    /// the store forgets key 0 once it has replenished (one shard and many other keys
    /// make the sweeps frequent).
    #[test]
    fn each_key_is_its_own_guava_limiter(ops in ops()) {
        let clock = ManualClock::new();
        let store = MemoryStore::new().with_shards(1).unwrap();
        let keyed = KeyedRateLimiter::with_store(SmoothBursty::new(3.0).unwrap(), store, clock.clone());
        let direct = RateLimiter::bursty_with_clock(3.0, clock.clone()).unwrap();
        for op in ops {
            match op {
                Op::Advance(nanos) => clock.advance_nanos(nanos),
                Op::Key(0, cost) => {
                    prop_assert_eq!(keyed.check(&0u16, cost).unwrap(), direct.check(cost).unwrap());
                }
                Op::Key(key, cost) => {
                    keyed.check(&key, cost).unwrap();
                }
            }
        }
    }
}
