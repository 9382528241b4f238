//! Seed 001's fixed-window table (3 requests per 60 s), replayed step by step, and
//! the boundary burst that seeds 001 and 003 warn about.

use sluicegate::algorithms::Decision;
use sluicegate::algorithms::{Algorithm, FixedWindow};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{RateLimiter, Verdict};
use std::time::Duration;

const SECOND: u64 = 1_000_000_000;

/// 12:mm:ss as nanoseconds since 12:00:00, the clock's origin (the seed's windows
/// `1515120000`, `1515120100`, ... start on the minute, as ours do).
const fn at(minutes: u64, seconds: u64) -> u64 {
    (minutes * 60 + seconds) * SECOND
}

/// (time, allowed, counter after the call, remaining, retry_after in s if refused)
const TABLE: [(u64, bool, u64, u64, u64); 7] = [
    (at(0, 5), true, 1, 2, 0),
    (at(0, 15), true, 2, 1, 0),
    // A new window: the seed's key moves to 1515120100 and the counter restarts.
    (at(1, 1), true, 1, 2, 0),
    (at(1, 10), true, 2, 1, 0),
    (at(1, 40), true, 3, 0, 0),
    // The seed writes "3 → 4": its INCR counts the refused call. Only admitted calls
    // count here (design §3, seed 002), so the counter stays at 3; the outcome is the
    // same, and the caller learns when to come back: 12:02:00.
    (at(1, 50), false, 3, 0, 10),
    (at(2, 20), true, 1, 2, 0),
];

#[test]
fn seed_001_table_on_the_algorithm() {
    let window = FixedWindow::new(3, Duration::from_secs(60)).unwrap();
    let mut state = window.initial_state(0);
    for (now, allowed, counter, remaining, retry_secs) in TABLE {
        let decision = window.reserve::<Decision>(&mut state, now, 1, 0);
        assert_eq!(decision.is_allowed(), allowed, "at {}s", now / SECOND);
        assert_eq!(window.count(&state, now), counter, "at {}s", now / SECOND);
        assert_eq!(decision.remaining(), remaining, "at {}s", now / SECOND);
        assert_eq!(decision.limit(), 3);
        assert_eq!(decision.retry_after_nanos(), retry_secs * SECOND);
        // Reset: the end of the current window, which holds at least this call.
        assert_eq!(
            decision.reset_after_nanos(),
            (now / (60 * SECOND) + 1) * 60 * SECOND - now
        );
    }
}

#[test]
fn seed_001_table_through_the_limiter() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(
        FixedWindow::new(3, Duration::from_secs(60)).unwrap(),
        clock.clone(),
    );
    for (now, allowed, _, remaining, _) in TABLE {
        clock.advance_nanos(now - clock.now());
        let peeked = limiter.peek(1).unwrap();
        let decision = limiter.check(1).unwrap();
        assert_eq!(peeked.is_allowed(), allowed);
        assert_eq!(decision.is_allowed(), allowed);
        assert_eq!(decision.remaining(), remaining);
    }
}

#[test]
fn the_boundary_burst_lets_twice_the_limit_through_in_a_nanosecond() {
    // Seed 001: "3 requests at 12:00:59 and a further 3 at 12:01:00 ... 6 requests
    // in a 2 second period". Pushed to the edge: 6 within one nanosecond.
    let window = FixedWindow::new(3, Duration::from_secs(60)).unwrap();
    let mut state = window.initial_state(0);
    for _ in 0..3 {
        assert!(window
            .reserve::<Decision>(&mut state, at(1, 0) - 1, 1, 0)
            .is_allowed());
    }
    assert!(!window
        .reserve::<Decision>(&mut state, at(1, 0) - 1, 1, 0)
        .is_allowed());
    for _ in 0..3 {
        assert!(window
            .reserve::<Decision>(&mut state, at(1, 0), 1, 0)
            .is_allowed());
    }
    assert!(!window
        .reserve::<Decision>(&mut state, at(1, 0), 1, 0)
        .is_allowed());
}

#[test]
fn seed_003_five_per_minute_at_eleven() {
    // Seed 003: 5 requests per minute; 5 at 11:00:59 and 5 more at 11:01:00.
    let window = FixedWindow::new(5, Duration::from_secs(60)).unwrap();
    let eleven = 11 * 3600 * SECOND;
    let mut state = window.initial_state(eleven);
    assert!(window
        .reserve::<Decision>(&mut state, eleven + 59 * SECOND, 5, 0)
        .is_allowed());
    assert!(window
        .reserve::<Decision>(&mut state, eleven + 60 * SECOND, 5, 0)
        .is_allowed());
    let refused = window.reserve::<Decision>(&mut state, eleven + 60 * SECOND, 1, 0);
    assert_eq!(refused.verdict(), Verdict::Denied);
    assert_eq!(refused.retry_after(), Duration::from_secs(60));
}

#[test]
fn costs_and_never() {
    let window = FixedWindow::new(3, Duration::from_secs(60)).unwrap();
    let mut state = window.initial_state(0);
    // Seed 001: POST /user costs 2 tokens where GET costs 1.
    assert_eq!(
        window.reserve::<Decision>(&mut state, 0, 2, 0).remaining(),
        1
    );
    let refused = window.reserve::<Decision>(&mut state, 0, 2, 0);
    assert_eq!(refused.verdict(), Verdict::Denied);
    assert_eq!(refused.remaining(), 1);
    assert!(window.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
    let never = window.reserve::<Decision>(&mut state, 0, 4, u64::MAX);
    assert_eq!(never.verdict(), Verdict::Never);
    assert_eq!(never.retry_after_nanos(), u64::MAX);
    assert!(!window.is_replenished(&state, 59 * SECOND));
    assert!(window.is_replenished(&state, 60 * SECOND));
}

#[test]
fn blocking_and_async_acquire_wait_for_the_next_window() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(5));
    let limiter = RateLimiter::with_clock(
        FixedWindow::new(3, Duration::from_secs(60)).unwrap(),
        clock.clone(),
    );
    for _ in 0..3 {
        assert_eq!(limiter.acquire().unwrap(), Duration::ZERO);
    }
    assert_eq!(limiter.acquire().unwrap(), Duration::from_secs(55));
    assert_eq!(clock.now(), 60 * SECOND);
    assert!(limiter.try_acquire());
    assert!(limiter.try_acquire());
    assert!(!limiter.try_acquire());
    assert!(matches!(
        limiter.acquire_n(4),
        Err(sluicegate::Error::Never { cost: 4 })
    ));
    assert!(!limiter.try_acquire_timeout(Duration::from_secs(59)));
    assert_eq!(clock.now(), 60 * SECOND); // refused at once, without waiting
    assert!(limiter.try_acquire_timeout(Duration::from_secs(60)));
    let handle = limiter.to_async();
    futures::executor::block_on(async {
        assert_eq!(handle.acquire().await.unwrap(), Duration::ZERO);
        assert_eq!(handle.acquire().await.unwrap(), Duration::ZERO);
        assert_eq!(handle.acquire().await.unwrap(), Duration::from_secs(60));
    });
    assert_eq!(clock.now(), 180 * SECOND);
}
