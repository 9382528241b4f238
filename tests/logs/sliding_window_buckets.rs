//! The seeds' worked examples for the bucketed sliding window, replayed step by step
//! on virtual time. The clock's origin stands for the first instant of each example
//! (12:00:00 in seed 001, 2:00 AM in seed 003 minus the offset noted there).

use sluicegate::algorithms::Decision;
use sluicegate::algorithms::{Algorithm, SlidingWindowBuckets};
use sluicegate::clock::ManualClock;
use sluicegate::{Clock, Error, RateLimiter, Verdict};
use std::time::Duration;

const S: u64 = 1_000_000_000;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Seed 001, "Sliding Window": 3 requests per 60 s in 15 s buckets. The table shows
/// the buckets after each request; bucket keys are the bucket's start.
#[test]
fn seed_001_sliding_window_table() {
    let w = SlidingWindowBuckets::dropping(3, secs(60), secs(15)).unwrap();
    let mut state = w.initial_state(0);
    // (time, allowed, remaining, buckets that count after the call)
    type Step = (u64, bool, u64, &'static [(u64, u64)]);
    let steps: [Step; 7] = [
        (5, true, 2, &[(0, 1)]),           // 12:00:05
        (15, true, 1, &[(0, 1), (15, 1)]), // 12:00:15
        // 12:01:01: bucket 12:00:00 is expired and dropped.
        (61, true, 1, &[(15, 1), (60, 1)]),
        (70, true, 0, &[(15, 1), (60, 2)]), // 12:01:10
        // 12:01:40: bucket 12:00:15 expires.
        (100, true, 0, &[(60, 2), (90, 1)]),
        // 12:01:50: rejected. The seed's table also adds this request to a bucket
        // 12:01:45 ("4 requests in the last 60 seconds"), i.e. counts refused calls;
        // we count only granted calls (seed 002), so 12:01:45 stays empty.
        (110, false, 0, &[(60, 2), (90, 1)]),
        // 12:02:20: bucket 12:01:00 expires; allowed. The seed shows
        // {12:01:30: 1, 12:01:45: 1, 12:02:15: 1}: without the refused call, the
        // 12:01:45 bucket is absent.
        (140, true, 1, &[(90, 1), (135, 1)]),
    ];
    for (t, allowed, remaining, buckets) in steps {
        let d = w.reserve::<Decision>(&mut state, t * S, 1, 0);
        assert_eq!(d.is_allowed(), allowed, "at {t} s");
        assert_eq!(d.remaining(), remaining, "remaining at {t} s");
        assert_eq!(d.limit(), 3);
        let held: Vec<(u64, u64)> = w
            .counted_buckets(&state, t * S)
            .map(|(start, count)| (start / S, count))
            .collect();
        assert_eq!(held, buckets, "buckets at {t} s");
    }
}

/// The refusal at 12:01:50 in seed 001's window: the first bucket to leave is
/// 12:01:00 (2 calls) at 12:02:00, which frees room.
#[test]
fn seed_001_refusal_carries_exact_retry_after() {
    let w = SlidingWindowBuckets::dropping(3, secs(60), secs(15)).unwrap();
    let mut state = w.initial_state(0);
    for t in [5, 15, 61, 70, 100] {
        assert!(w.reserve::<Decision>(&mut state, t * S, 1, 0).is_allowed());
    }
    let d = w.reserve::<Decision>(&mut state, 110 * S, 1, 0);
    assert_eq!(d.verdict(), Verdict::Denied);
    assert_eq!(d.retry_after(), secs(10)); // 12:02:00
    assert_eq!(d.reset_after(), secs(60 + 90 - 110)); // bucket 12:01:30 leaves at 12:02:30
    assert!(!w
        .reserve::<Decision>(&mut state, 120 * S - 1, 1, 0)
        .is_allowed());
    assert!(w
        .reserve::<Decision>(&mut state, 120 * S, 1, 0)
        .is_allowed());
}

/// Seed 000's 100 per minute in weighted 30 s buckets, on a manual clock.
fn seed_000_limiter() -> (RateLimiter<SlidingWindowBuckets, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let w = SlidingWindowBuckets::weighted(100, secs(60), secs(30)).unwrap();
    (RateLimiter::with_clock(w, clock.clone()), clock)
}

/// Seed 000 with 30 s sub-intervals: 100 per minute, the oldest bucket weighted by
/// the unelapsed fraction of the current one. 100 requests in the first 0.25 min;
/// at 1.25 min, 50 are allowed.
#[test]
fn seed_000_thirty_second_buckets_allow_fifty_at_one_and_a_quarter_minutes() {
    let (limiter, clock) = seed_000_limiter();
    // 100 requests spread over the first 15 s.
    for i in 0..100u64 {
        let target = i * 150_000_000;
        clock.advance_nanos(target - clock.now());
        assert!(limiter.try_acquire(), "request {i}");
    }
    assert!(!limiter.try_acquire());
    clock.advance_nanos(75 * S - clock.now());
    // Bucket 0-30 s is half outside the window (15-75 s): it counts 50.
    let mut allowed = 0;
    while limiter.try_acquire() {
        allowed += 1;
    }
    assert_eq!(allowed, 50);
    let d = limiter.check(1).unwrap();
    assert_eq!(d.remaining(), 0);
    // 100 calls leave the window over 30 s: one per 0.3 s.
    assert_eq!(d.retry_after(), Duration::from_millis(300));
}

/// Seed 000: the same 100 requests at 0.99 min land in the 30-60 s bucket, which
/// counts whole at 1.25 min: everything is blocked.
#[test]
fn seed_000_thirty_second_buckets_block_all_when_the_burst_came_at_0_99_min() {
    let (limiter, clock) = seed_000_limiter();
    clock.advance_nanos(59_400_000_000);
    assert!(limiter.try_acquire_n(100).unwrap());
    clock.advance_nanos(75 * S - clock.now());
    let d = limiter.check(1).unwrap();
    assert_eq!(d.verdict(), Verdict::Denied);
    assert_eq!(d.remaining(), 0);
    // Bucket 30-60 s starts leaving the window at 90 s; one call's worth is gone
    // after 0.3 s more.
    assert_eq!(d.retry_after(), Duration::from_millis(15_300));
}

/// Seed 000's first example with one bucket per window (precision = duration): the
/// classic sliding window counter. 25 allowed at 1.25 min, 75 at 1.75 min; and when
/// the 100 came at 0.99 min, still 25 at 1.25 min (the low resolution the seed
/// warns about).
#[test]
fn seed_000_one_bucket_per_window_is_the_sliding_window_counter() {
    let w = SlidingWindowBuckets::weighted(100, secs(60), secs(60)).unwrap();
    let drain = |state: &mut _, at: u64| {
        let mut n = 0;
        while w.reserve::<Decision>(state, at, 1, 0).is_allowed() {
            n += 1;
        }
        n
    };
    let mut state = w.initial_state(0);
    assert_eq!(
        w.reserve::<Decision>(&mut state, 10 * S, 100, 0)
            .remaining(),
        0
    );
    assert_eq!(drain(&mut state, 75 * S), 25);

    let mut state = w.initial_state(0);
    assert!(w
        .reserve::<Decision>(&mut state, 10 * S, 100, 0)
        .is_allowed());
    assert_eq!(drain(&mut state, 105 * S), 75);

    let mut state = w.initial_state(0);
    assert!(w
        .reserve::<Decision>(&mut state, 59_400_000_000, 100, 0)
        .is_allowed());
    assert_eq!(drain(&mut state, 75 * S), 25);
}

/// Seed 003: 100 requests per hour in 20-minute buckets. Buckets 2:00-2:20,
/// 2:20-2:40 and 2:40-3:00 hold 10, 20, 30; a request at 2:50 sees 60 (< 100), is
/// allowed, and its bucket becomes 31.
#[test]
fn seed_003_hundred_per_hour_in_twenty_minute_buckets() {
    let minute = 60 * S;
    let two_am = 120 * minute; // any multiple of 20 minutes keeps the buckets aligned
    let w = SlidingWindowBuckets::dropping(100, secs(3600), secs(1200)).unwrap();
    let mut state = w.initial_state(0);
    for (at, n) in [(5, 10), (25, 20), (45, 30)] {
        assert!(w
            .reserve::<Decision>(&mut state, two_am + at * minute, n, 0)
            .is_allowed());
    }
    let at = two_am + 50 * minute;
    let d = w.reserve::<Decision>(&mut state, at, 1, 0);
    assert!(d.is_allowed());
    assert_eq!(d.remaining(), 100 - 61);
    let held: Vec<(u64, u64)> = w
        .counted_buckets(&state, at)
        .map(|(start, count)| ((start - two_am) / minute, count))
        .collect();
    assert_eq!(held, vec![(0, 10), (20, 20), (40, 31)]);
}

/// Seed 003's note: at 2:50 the window is 1:50-2:50, but the dropping variant ignores
/// 1:50-2:00 with the rest of the 1:40-2:00 bucket. 100 requests at 1:55 are
/// forgotten at 2:50; the weighted variant still counts half of them.
#[test]
fn seed_003_note_the_dropped_ten_minutes() {
    let minute = 60 * S;
    let two_am = 120 * minute;
    let dropping = SlidingWindowBuckets::dropping(100, secs(3600), secs(1200)).unwrap();
    let weighted = SlidingWindowBuckets::weighted(100, secs(3600), secs(1200)).unwrap();
    let mut d_state = dropping.initial_state(0);
    let mut w_state = weighted.initial_state(0);
    assert!(dropping
        .reserve::<Decision>(&mut d_state, two_am - 5 * minute, 100, 0)
        .is_allowed());
    assert!(weighted
        .reserve::<Decision>(&mut w_state, two_am - 5 * minute, 100, 0)
        .is_allowed());
    // At 2:05 both still count the 1:40 bucket whole.
    assert!(!dropping.peek(&d_state, two_am + 5 * minute, 1).is_allowed());
    assert!(!weighted.peek(&w_state, two_am + 5 * minute, 1).is_allowed());
    // At 2:50 the dropping window has forgotten them: a burst of 100 goes through.
    let at = two_am + 50 * minute;
    assert!(dropping
        .reserve::<Decision>(&mut d_state, at, 100, 0)
        .is_allowed());
    // The weighted window counts half of the 1:40-2:00 bucket: 50 left.
    let d = weighted.reserve::<Decision>(&mut w_state, at, 50, 0);
    assert!(d.is_allowed());
    assert_eq!(d.remaining(), 0);
    assert!(!weighted
        .reserve::<Decision>(&mut w_state, at, 1, 0)
        .is_allowed());
}

#[test]
fn bad_parameters_are_typed_errors() {
    let m = secs(60);
    assert!(matches!(
        SlidingWindowBuckets::dropping(0, m, secs(1)),
        Err(sluicegate::ConfigError::InvalidCount { what: "limit", .. })
    ));
    assert!(matches!(
        SlidingWindowBuckets::dropping(1, Duration::ZERO, Duration::ZERO),
        Err(sluicegate::ConfigError::InvalidDuration { what: "window", .. })
    ));
    assert!(matches!(
        SlidingWindowBuckets::weighted(1, m, Duration::ZERO),
        Err(sluicegate::ConfigError::InvalidDuration {
            what: "precision",
            ..
        })
    ));
    assert!(matches!(
        SlidingWindowBuckets::weighted(1, m, secs(61)),
        Err(sluicegate::ConfigError::InvalidDuration {
            what: "precision",
            ..
        })
    ));
    assert!(matches!(
        SlidingWindowBuckets::dropping(1, m, Duration::from_millis(14)),
        Err(sluicegate::ConfigError::InvalidCount { value: 4286, .. })
    ));
    assert!(SlidingWindowBuckets::dropping(1, m, Duration::from_micros(14_649)).is_ok()); // 4096 buckets
    assert!(matches!(
        SlidingWindowBuckets::dropping(1, Duration::MAX, secs(1)),
        Err(sluicegate::ConfigError::InvalidDuration { .. })
    ));
}

#[test]
fn cost_above_the_limit_is_never_and_fails_blocking_calls_at_once() {
    let clock = ManualClock::new();
    let w = SlidingWindowBuckets::dropping(5, secs(10), secs(1)).unwrap();
    let limiter = RateLimiter::with_clock(w, clock.clone());
    assert_eq!(limiter.check(6).unwrap().verdict(), Verdict::Never);
    assert_eq!(limiter.acquire_n(6), Err(Error::Never { cost: 6 }));
    let waited = futures::executor::block_on(limiter.to_async().acquire_n(6));
    assert_eq!(waited, Err(Error::Never { cost: 6 }));
    assert!(clock.sleeps().is_empty());
    assert!(limiter.try_acquire_n(5).unwrap());
}

#[test]
fn blocking_acquire_sleeps_exactly_until_a_bucket_leaves() {
    let clock = ManualClock::new();
    let w = SlidingWindowBuckets::dropping(2, secs(10), secs(5)).unwrap();
    let limiter = RateLimiter::with_clock(w, clock.clone());
    clock.advance(secs(1));
    limiter.acquire().unwrap();
    clock.advance(secs(5)); // 6 s: bucket 5-10
    limiter.acquire().unwrap();
    // Full; bucket 0-5 leaves at 10 s.
    assert_eq!(limiter.acquire().unwrap(), secs(4));
    assert_eq!(clock.now(), 10 * S);
    // Full again (buckets 5-10 and 10-15); bucket 5-10 leaves at 15 s.
    assert_eq!(
        futures::executor::block_on(limiter.to_async().acquire()).unwrap(),
        secs(5)
    );
    assert_eq!(clock.take_sleeps_secs(), vec![0.0, 0.0, 4.0, 0.0, 5.0, 0.0]);
}

#[test]
fn variable_cost_and_every_decision_field() {
    let w = SlidingWindowBuckets::dropping(10, secs(4), secs(1)).unwrap();
    let mut state = w.initial_state(0);
    let d = w.reserve::<Decision>(&mut state, 500_000_000, 7, 0);
    assert!(d.is_allowed());
    assert_eq!((d.limit(), d.remaining()), (10, 3));
    assert_eq!(d.reset_after(), Duration::from_millis(3500)); // bucket 0-1 leaves at 4 s
    let d = w.reserve::<Decision>(&mut state, 2 * S, 4, 0);
    assert_eq!(d.verdict(), Verdict::Denied);
    assert_eq!((d.remaining(), d.retry_after()), (3, secs(2)));
    assert!(w.reserve::<Decision>(&mut state, 2 * S, 3, 0).is_allowed());
    assert_eq!(w.peek(&state, 2 * S, 1).reset_after(), secs(4)); // bucket 2-3 leaves at 6 s
    assert!(!w.is_replenished(&state, 6 * S - 1));
    assert!(w.is_replenished(&state, 6 * S));
}

#[test]
fn time_going_backwards_grants_nothing_extra() {
    let w = SlidingWindowBuckets::weighted(2, secs(10), secs(1)).unwrap();
    let mut state = w.initial_state(0);
    assert!(w.reserve::<Decision>(&mut state, 20 * S, 2, 0).is_allowed());
    // A stale reading from before the grant must not see an empty window.
    assert!(!w.reserve::<Decision>(&mut state, 5 * S, 1, 0).is_allowed());
    assert!(!w.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
}

#[test]
fn extreme_times_and_costs_do_not_panic() {
    let (d, p) = (Duration::from_nanos(3), Duration::from_nanos(1));
    for w in [
        SlidingWindowBuckets::dropping(u64::MAX, d, p).unwrap(),
        SlidingWindowBuckets::weighted(u64::MAX, d, p).unwrap(),
    ] {
        let mut state = w.initial_state(u64::MAX - 5);
        assert!(w
            .reserve::<Decision>(&mut state, u64::MAX - 5, u64::MAX / 2, 0)
            .is_allowed());
        assert!(!w
            .reserve::<Decision>(&mut state, u64::MAX - 4, u64::MAX, 0)
            .is_allowed());
        for now in [u64::MAX - 1, u64::MAX, 0] {
            let d = w.reserve::<Decision>(&mut state, now, u64::MAX, 0);
            let _ = (d.retry_after(), d.reset_after(), d.remaining());
            let _ = w.peek(&state, now, 1);
            let _ = w.is_replenished(&state, now);
        }
    }
}

/// Seed 002: "if you have 240 tokens that can be used in an hour, and you used 20
/// tokens at 6:05PM, you would only be able to make up to another 220 requests until
/// 7:04PM. At 7:05PM, you would get those 20 tokens back". One-minute buckets.
#[test]
fn seed_002_tokens_come_back_an_hour_later() {
    let clock = ManualClock::new();
    let hour = secs(3600);
    let w = SlidingWindowBuckets::dropping(240, hour, secs(60)).unwrap();
    let limiter = RateLimiter::with_clock(w, clock.clone());
    clock.advance(secs(5 * 60)); // 6:05 PM, with 6:00 PM at the origin
    assert!(limiter.try_acquire_n(20).unwrap());
    clock.advance(secs(30 * 60)); // 6:35
    let d = limiter.check(220).unwrap();
    assert!(d.is_allowed());
    assert_eq!(d.remaining(), 0);
    let refused = limiter.check(1).unwrap();
    assert_eq!(refused.retry_after(), secs(30 * 60)); // 7:05
    clock.advance(secs(29 * 60 + 59)); // 7:04:59
    assert!(!limiter.try_acquire());
    clock.advance(secs(1)); // 7:05
    assert!(limiter.try_acquire_n(20).unwrap());
    assert!(!limiter.try_acquire());
}
