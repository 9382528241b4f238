//! Seed 001's leaky-bucket table (a bucket of 3, 1 per 20 s), seed 003's queue, and
//! the driftless property: exact admissions over a million virtual seconds.

use sluicegate::algorithms::Decision;
use sluicegate::algorithms::{Algorithm, LeakyBucket, LeakyMode};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{Error, RateLimiter, Verdict};
use std::time::Duration;

const SECOND: u64 = 1_000_000_000;

const fn at(minutes: u64, seconds: u64) -> u64 {
    (minutes * 60 + seconds) * SECOND
}

/// Seed 001, bucket of 3 draining 1 per 20 s: (time, level after the call rounded
/// up, remaining, reset_after in s = the exact time until the bucket is empty).
///
/// Every call is allowed, as in the seed. The levels differ at two steps, because
/// the seed drains in whole 20-second steps counted from a `ts` that it rounds down
/// to the minute (12:01:01 is stored as 12:01:00): at 12:01:40 it drains "up to 2"
/// tokens although the two in the bucket were poured at 12:01:01 and 12:01:10, only
/// 39 s and 30 s earlier. Continuously, the bucket still holds 1/20 of a token
/// then, so the level is 1.05 (the seed says 1) and 1 more call fits, not 2. The
/// same happens at 12:02:20 (1.05 here, 1 in the seed). We assert the exact values.
const SEED_001: [(u64, u64, u64, u64); 7] = [
    (at(0, 5), 1, 2, 20),
    (at(0, 15), 2, 1, 30), // 0.5 left from 12:00:05, plus 1
    (at(1, 1), 1, 2, 20),  // drained at 12:00:45
    (at(1, 10), 2, 1, 31), // 0.55 + 1
    (at(1, 40), 2, 1, 21), // 0.05 + 1 (the seed: 1)
    (at(1, 50), 2, 1, 31), // 0.55 + 1 (the seed: 2)
    (at(2, 20), 2, 1, 21), // 0.05 + 1 (the seed: 1)
];

fn seed_meter() -> LeakyBucket {
    LeakyBucket::meter(3, 1, Duration::from_secs(20)).unwrap()
}

#[test]
fn seed_001_leaky_bucket_table() {
    let meter = seed_meter();
    let mut state = meter.initial_state(0);
    for (now, level, remaining, reset) in SEED_001 {
        let decision = meter.reserve::<Decision>(&mut state, now, 1, 0);
        assert!(decision.is_allowed(), "at {}s", now / SECOND);
        assert_eq!(decision.wait_nanos(), 0);
        assert_eq!(meter.level(&state, now), level, "at {}s", now / SECOND);
        assert_eq!(decision.remaining(), remaining, "at {}s", now / SECOND);
        assert_eq!(
            decision.reset_after(),
            Duration::from_secs(reset),
            "at {}s",
            now / SECOND
        );
        assert_eq!(decision.limit(), 3);
    }
    // Two more at 12:02:20: the first raises the level from 1.05 to 2.05 (no whole
    // permit left), the second would make 3.05 > 3: refused until 1/20 of a permit
    // has drained, 1 s later.
    let now = at(2, 20);
    let filled = meter.reserve::<Decision>(&mut state, now, 1, 0);
    assert!(filled.is_allowed());
    assert_eq!(filled.remaining(), 0);
    let refused = meter.reserve::<Decision>(&mut state, now, 1, 0);
    assert_eq!(refused.verdict(), Verdict::Denied);
    assert_eq!(refused.retry_after(), Duration::from_secs(1));
    assert_eq!(refused.reset_after(), Duration::from_secs(41));
    assert!(meter
        .reserve::<Decision>(&mut state, now + SECOND, 1, 0)
        .is_allowed());
    assert!(!meter.is_replenished(&state, at(3, 21) - 1));
    assert!(meter.is_replenished(&state, at(3, 21)));
}

#[test]
fn seed_001_table_through_the_limiter() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(seed_meter(), clock.clone());
    for (now, _, remaining, _) in SEED_001 {
        clock.advance_nanos(now - clock.now());
        let peeked = limiter.peek(1).unwrap();
        let decision = limiter.check(1).unwrap();
        assert_eq!(peeked, decision);
        assert!(decision.is_allowed());
        assert_eq!(decision.remaining(), remaining);
    }
}

#[test]
fn the_meter_lets_a_burst_of_its_capacity_through_then_one_per_interval() {
    let meter = seed_meter();
    let mut state = meter.initial_state(0);
    assert!(meter.reserve::<Decision>(&mut state, 0, 3, 0).is_allowed());
    let refused = meter.reserve::<Decision>(&mut state, 0, 1, u64::MAX);
    // A meter never makes a caller wait: max_wait does not change its answer.
    assert_eq!(refused.verdict(), Verdict::Denied);
    assert_eq!(refused.retry_after(), Duration::from_secs(20));
    assert_eq!(
        meter
            .reserve::<Decision>(&mut state, 0, 4, u64::MAX)
            .verdict(),
        Verdict::Never
    );
    assert!(meter
        .reserve::<Decision>(&mut state, 20 * SECOND, 1, 0)
        .is_allowed());
    assert!(!meter
        .reserve::<Decision>(&mut state, 39 * SECOND, 1, 0)
        .is_allowed());
    assert!(meter
        .reserve::<Decision>(&mut state, 40 * SECOND, 1, 0)
        .is_allowed());
}

#[test]
fn seed_003_queue_serves_in_order_at_a_constant_rate_and_rejects_when_full() {
    // Seed 003: requests are appended to a queue, the first item is processed at a
    // regular interval, and when the queue is full additional requests are discarded.
    let queue = LeakyBucket::queue(3, 1, Duration::from_secs(1)).unwrap();
    assert_eq!(queue.mode(), LeakyMode::Queue);
    let mut state = queue.initial_state(0);
    let grants: Vec<_> = (0..3)
        .map(|_| queue.reserve::<Decision>(&mut state, 0, 1, u64::MAX))
        .collect();
    let waits: Vec<_> = grants.iter().map(|d| d.wait()).collect();
    assert_eq!(waits, [0, 1, 2].map(Duration::from_secs));
    let remaining: Vec<_> = grants.iter().map(|d| d.remaining()).collect();
    assert_eq!(remaining, [2, 1, 0]);
    // Full: refused at once, not queued, and told when a slot frees up.
    let full = queue.reserve::<Decision>(&mut state, 0, 1, u64::MAX);
    assert_eq!(full.verdict(), Verdict::Denied);
    assert_eq!(full.retry_after(), Duration::from_secs(1));
    assert_eq!(full.reset_after(), Duration::from_secs(3));
    // One second later the first has been served: the newcomer waits behind two.
    let later = queue.reserve::<Decision>(&mut state, SECOND, 1, u64::MAX);
    assert!(later.is_allowed());
    assert_eq!(later.wait(), Duration::from_secs(2));
    // A caller that will not wait (try_acquire) only passes when the queue is empty...
    assert!(!queue
        .reserve::<Decision>(&mut state, 2 * SECOND, 1, 0)
        .is_allowed());
    let at_empty = queue
        .reserve::<Decision>(&mut state, 2 * SECOND, 1, 0)
        .retry_after();
    assert_eq!(at_empty, Duration::from_secs(2));
    assert!(queue
        .reserve::<Decision>(&mut state, 4 * SECOND, 1, 0)
        .is_allowed());
    // ...and a caller that accepts only 0.5 s of waiting is refused: the queue holds
    // the one served until 5 s, so 2 more fit but would start in 1 s, past its
    // deadline. No retry before that deadline can help, so it is told when a caller
    // who does not wait passes: at 5 s, when the queue is empty.
    let impatient = queue.reserve::<Decision>(&mut state, 4 * SECOND, 2, SECOND / 2);
    assert_eq!(impatient.verdict(), Verdict::Denied);
    assert_eq!(impatient.retry_after(), Duration::from_secs(1));
    assert_eq!(
        queue
            .reserve::<Decision>(&mut state, 4 * SECOND, 4, u64::MAX)
            .verdict(),
        Verdict::Never
    );
}

#[test]
fn queue_grants_can_be_cancelled_before_their_turn() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(
        LeakyBucket::queue(3, 1, Duration::from_secs(1)).unwrap(),
        clock.clone(),
    );
    let first = limiter.reserve(1).unwrap();
    let second = limiter.reserve(1).unwrap();
    let third = limiter.reserve(1).unwrap();
    assert_eq!(third.delay(), Duration::from_secs(2));
    assert!(!limiter.reserve(1).unwrap().is_ok());
    clock.advance(Duration::from_millis(500));
    // The last in line steps out: its slot is free again.
    third.cancel();
    let replacement = limiter.reserve(1).unwrap();
    assert!(replacement.is_ok());
    assert_eq!(replacement.delay(), Duration::from_millis(1500));
    // Someone in the middle steps out: Go's rule keeps the later grant where it is and
    // restores only what nobody reserved after it, which is nothing.
    second.cancel();
    assert!(!limiter.reserve(1).unwrap().is_ok());
    // A grant whose turn has passed is used: cancelling restores nothing.
    first.cancel();
    assert!(!limiter.reserve(1).unwrap().is_ok());
    drop(replacement);
}

#[test]
fn cancelling_a_meter_grant_restores_it_only_at_its_instant() {
    // A meter's grant acts at once: cancelled at that very instant it comes back
    // (Go's rule, as for any reservation); a moment later it has been used.
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(seed_meter(), clock.clone());
    let grant = limiter.reserve(3).unwrap();
    assert!(grant.is_ok());
    grant.cancel();
    assert!(limiter.try_acquire_n(3).unwrap());
    clock.advance(Duration::from_secs(20)); // one permit has drained
    let grant = limiter.reserve(1).unwrap();
    assert!(grant.is_ok());
    clock.advance(Duration::from_nanos(1));
    grant.cancel();
    assert!(!limiter.try_acquire());
}

#[test]
fn blocking_and_async_acquire_through_the_limiter() {
    let clock = ManualClock::new();
    let meter = RateLimiter::with_clock(seed_meter(), clock.clone());
    let waited: Vec<_> = (0..5).map(|_| meter.acquire().unwrap()).collect();
    assert_eq!(waited, [0, 0, 0, 20, 20].map(Duration::from_secs));
    assert_eq!(clock.now(), 40 * SECOND);
    assert!(matches!(meter.acquire_n(4), Err(Error::Never { cost: 4 })));
    assert!(!meter.try_acquire_timeout(Duration::from_secs(19)));
    assert!(meter.try_acquire_timeout(Duration::from_secs(20)));

    // The queue paces one caller at its output rate: each acquire waits its turn.
    let clock = ManualClock::new();
    let queue = RateLimiter::with_clock(
        LeakyBucket::queue(3, 2, Duration::from_secs(1)).unwrap(),
        clock.clone(),
    );
    let waited: Vec<_> = (0..4).map(|_| queue.acquire().unwrap()).collect();
    assert_eq!(waited, [0, 500, 500, 500].map(Duration::from_millis));
    let handle = queue.to_async();
    let waited = futures::executor::block_on(async {
        let a = handle.acquire_n(3).await.unwrap();
        let b = handle.acquire().await.unwrap();
        (a, b)
    });
    // The 3 permits wait for the previous one (0.5 s); the next waits out all 3.
    assert_eq!(
        waited,
        (Duration::from_millis(500), Duration::from_millis(1500))
    );
}

/// Runs a saturating caller against `step` (which answers `Some(retry_after)` when
/// refused, `None` when admitted) from time 0 to `horizon` inclusive, retrying at
/// exactly the advertised time; returns the admissions.
fn saturate(horizon: u64, mut step: impl FnMut(u64) -> Option<u64>) -> u64 {
    let (mut now, mut admitted) = (0, 0);
    while now <= horizon {
        match step(now) {
            None => admitted += 1,
            Some(retry) => now += retry,
        }
    }
    admitted
}

/// The naive leaky bucket that the driftless one replaces: a theoretical arrival
/// time in nanoseconds advanced by an interval rounded to a whole number of units.
fn naive(interval: u64, capacity: u64) -> impl FnMut(u64) -> Option<u64> {
    let mut tat = 0u64;
    move |now| {
        let end = tat.max(now) + interval;
        if end - now <= capacity * interval {
            tat = end;
            None
        } else {
            Some(end - now - capacity * interval)
        }
    }
}

#[test]
fn driftless_three_per_second_for_a_million_seconds() {
    const HORIZON: u64 = 1_000_000 * SECOND;
    let meter = LeakyBucket::meter(3, 3, Duration::from_secs(1)).unwrap();
    let mut state = meter.initial_state(0);
    let exact = saturate(HORIZON, |now| {
        let decision = meter.reserve::<Decision>(&mut state, now, 1, 0);
        (!decision.is_allowed()).then(|| decision.retry_after_nanos())
    });
    assert_eq!(exact, 3 * 1_000_000 + 3);

    // The same caller against an interval truncated to whole microseconds (333 333
    // µs, as Guava truncates each reservation) drifts: a third of a microsecond
    // per permit is one second, 3 permits, gained per million seconds.
    assert_eq!(
        saturate(HORIZON, naive(333_333_000, 3)),
        3 * 1_000_000 + 3 + 3
    );
    // Rounded to whole nanoseconds the gain is a third of a nanosecond per permit:
    // 1 ms over these million seconds, not yet a whole permit, but 3 permits per
    // billion seconds (closed form: b + ⌊10⁹ s / 333 333 333 ns⌋).
    assert_eq!(saturate(HORIZON, naive(333_333_333, 3)), 3 * 1_000_000 + 3);
    assert_eq!(
        3 + 1_000_000_000 * SECOND / 333_333_333,
        3_000_000_000 + 3 + 3
    );
}

#[test]
fn driftless_over_a_billion_seconds() {
    // A bucket of a million seconds' worth of permits at 3 per second, emptied 1000
    // times: each refill takes exactly 10⁶ s, to the nanosecond, so after 10⁹ s the
    // bucket has drained exactly 3 × 10⁹ permits (the naive ns interval above would
    // have drained 3 more).
    let capacity = 3_000_000;
    let meter = LeakyBucket::meter(capacity, 3, Duration::from_secs(1)).unwrap();
    let mut state = meter.initial_state(0);
    let mut now = 0;
    for _ in 0..1000 {
        assert!(meter
            .reserve::<Decision>(&mut state, now, capacity, 0)
            .is_allowed());
        let refused = meter.reserve::<Decision>(&mut state, now, capacity, 0);
        assert_eq!(refused.retry_after_nanos(), 1_000_000 * SECOND);
        now += refused.retry_after_nanos();
        assert!(!meter.peek(&state, now - 1, capacity).is_allowed());
    }
    assert_eq!(now, 1_000_000_000 * SECOND);
    assert!(meter
        .reserve::<Decision>(&mut state, now, capacity, 0)
        .is_allowed());
}
