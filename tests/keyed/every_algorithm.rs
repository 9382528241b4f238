//! The keyed limiter runs every algorithm of the crate, and sets of them: for each,
//! one key decides exactly as a direct limiter of the same algorithm would, keys are
//! independent, and a refused multi-key call moves no key.

use sluicegate::algorithms::{
    AllOf, FixedWindow, LeakyBucket, Limits, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::CellAlgorithm;
use sluicegate::{Decision, KeyedRateLimiter, RateLimiter};
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A fixed, irregular trace: (idle before the call in ms, key 0 or 1, cost).
fn trace() -> Vec<(u64, usize, u64)> {
    let mut steps = Vec::new();
    let mut x: u64 = 0x9E37_79B9;
    for i in 0..400u64 {
        // A small xorshift: deterministic, no dependency on a random source.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let gap = [0, 0, 0, 1, 7, 50, 230, 900, 4_000][(x % 9) as usize];
        steps.push((gap, (i % 3 == 0) as usize, 1 + (x >> 8) % 3));
    }
    steps
}

/// Runs the trace on a keyed limiter and on one direct limiter per key, all on one
/// virtual clock, and asserts every decision is the same. Returns how many calls
/// were allowed, so that a trivially permissive or refusing run shows up.
fn keyed_matches_direct<A: CellAlgorithm + std::fmt::Debug>(algorithm: A) -> (usize, usize) {
    let clock = ManualClock::new();
    let keyed = KeyedRateLimiter::with_clock(algorithm.clone(), clock.clone());
    let direct = [
        RateLimiter::with_clock(algorithm.clone(), clock.clone()),
        RateLimiter::with_clock(algorithm.clone(), clock.clone()),
    ];
    let (mut allowed, mut denied) = (0, 0);
    for (gap, key, cost) in trace() {
        clock.advance(ms(gap));
        let expected: Decision = direct[key].check(cost).unwrap();
        let actual = keyed.check(&key, cost).unwrap();
        assert_eq!(
            (actual.verdict(), actual.remaining(), actual.retry_after()),
            (
                expected.verdict(),
                expected.remaining(),
                expected.retry_after()
            ),
            "{algorithm:?}, key {key}, cost {cost}, at {} ns",
            clock.now()
        );
        if actual.is_allowed() {
            allowed += 1;
        } else {
            denied += 1;
        }
    }
    (allowed, denied)
}

fn assert_mixed((allowed, denied): (usize, usize)) {
    assert!(
        allowed > 20 && denied > 20,
        "allowed {allowed}, denied {denied}"
    );
}

#[test]
fn fixed_window_per_key() {
    assert_mixed(keyed_matches_direct(
        FixedWindow::new(5, Duration::from_secs(1)).unwrap(),
    ));
}

#[test]
fn sliding_window_counter_per_key() {
    let counter = SlidingWindowCounter::new(5, Duration::from_secs(1)).unwrap();
    assert_mixed(keyed_matches_direct(counter));
}

#[test]
fn sliding_window_buckets_per_key() {
    let weighted = SlidingWindowBuckets::weighted(6, Duration::from_secs(1), ms(250)).unwrap();
    assert_mixed(keyed_matches_direct(weighted));
    let dropping = SlidingWindowBuckets::dropping(6, Duration::from_secs(1), ms(250)).unwrap();
    assert_mixed(keyed_matches_direct(dropping));
}

#[test]
fn sliding_log_per_key() {
    let log = SlidingLog::new(5, Duration::from_secs(1))
        .unwrap()
        .with_min_spacing(ms(1));
    assert_mixed(keyed_matches_direct(log));
}

#[test]
fn leaky_bucket_meter_per_key() {
    assert_mixed(keyed_matches_direct(
        LeakyBucket::meter(4, 3, Duration::from_secs(1)).unwrap(),
    ));
}

#[test]
fn warming_up_per_key() {
    // A keyed warming-up key starts cold, as the direct limiter does.
    let warming = SmoothWarmingUp::new(5.0, Duration::from_secs(2)).unwrap();
    assert_mixed(keyed_matches_direct(warming));
}

#[test]
fn sets_of_limits_per_key() {
    let pair = AllOf::new((
        FixedWindow::new(4, Duration::from_secs(1)).unwrap(),
        SlidingLog::new(20, Duration::from_secs(10)).unwrap(),
    ));
    assert_mixed(keyed_matches_direct(pair));

    let mut limits = Limits::new();
    limits.push(SlidingWindowCounter::new(6, Duration::from_secs(1)).unwrap());
    limits.push(LeakyBucket::meter(3, 4, Duration::from_secs(1)).unwrap());
    assert_mixed(keyed_matches_direct(limits));
}

#[test]
fn a_refused_multi_key_call_moves_no_key_under_a_set() {
    // IP and user together, each under "3 per second and 5 per 10 s".
    let clock = ManualClock::new();
    let set = AllOf::new((
        FixedWindow::new(3, Duration::from_secs(1)).unwrap(),
        SlidingLog::new(5, Duration::from_secs(10)).unwrap(),
    ));
    let keyed = KeyedRateLimiter::with_clock(set, clock.clone());
    assert!(keyed.check(&"user", 3).unwrap().is_allowed()); // the user alone used its second
    let before_ip = keyed.peek(&"ip", 1).unwrap();
    let refused = keyed.check_all(&["ip", "user"], 1).unwrap();
    assert!(!refused.is_allowed());
    assert_eq!(
        keyed.peek(&"ip", 1).unwrap(),
        before_ip,
        "the IP was not charged"
    );
    clock.advance(Duration::from_secs(1));
    assert!(keyed.check_all(&["ip", "user"], 2).unwrap().is_allowed());
    // The user's 10 s log now holds 5: refused for both, the IP still has room.
    assert!(!keyed.check_all(&["ip", "user"], 1).unwrap().is_allowed());
    assert_eq!(keyed.peek(&"ip", 1).unwrap().remaining(), 0); // 2 of 3 this second, after the call
    assert!(keyed.check(&"ip", 1).unwrap().is_allowed());
}

#[test]
fn bursty_keys_start_with_their_burst_and_are_independent() {
    // The keyed rule: a new key behaves as if idle since the clock's origin.
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(10));
    let keyed = KeyedRateLimiter::with_clock(SmoothBursty::new(2.0).unwrap(), clock.clone());
    for key in ["a", "b"] {
        // Two stored permits, then the pay-later one, then refused.
        for _ in 0..3 {
            assert!(keyed.try_acquire(&key));
        }
        assert!(!keyed.try_acquire(&key));
    }
    assert_eq!(keyed.live_keys(), 2);
}
