//! The seeds' worked examples on a real Redis (the harness starts the server): the
//! tables of seed 001 (written for Redis counters, sorted sets and hashes), seed
//! 000's sliding counter, seed 002's limits, weights, identifiers and server time,
//! and seed 003's queue. Each test names its seed file and quotes what it checks.
//! Time is the caller's virtual time (`TimeSource::Caller`, a `ManualClock` whose
//! origin stands for the seed's first instant), except where the seed is about the
//! server's `TIME`.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;

use redis_support::trace::caller_time_options;
use redis_support::{unique_prefix, RedisServer};
use sluicegate::algorithms::{
    AllOf, Counting, FixedWindow, LeakyBucket, Limits, Rounding, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter,
};
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore};
use sluicegate::{KeyedRateLimiter, Verdict};
use std::time::Duration;

const S: Nanos = 1_000_000_000;
const MS: Nanos = 1_000_000;

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// `h:mm:ss` after the clock's origin, in nanoseconds.
const fn hms(h: u64, m: u64, s: u64) -> u64 {
    ((h * 60 + m) * 60 + s) * S
}

type OnRedis<A> = KeyedRateLimiter<&'static str, A, RedisStore<&'static str, A>, ManualClock>;

/// A keyed limiter over the Redis store at the caller's (virtual) time, its keys
/// under a prefix of its own.
fn on_redis<A>(server: &RedisServer, tag: &str, algorithm: A) -> OnRedis<A>
where
    A: RedisAlgorithm + Clone + Send + Sync,
    A::State: Send,
{
    let store =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix(tag))).unwrap();
    KeyedRateLimiter::with_store(algorithm, store, ManualClock::new())
}

/// Moves `clock` forward to the absolute instant `t` (never back).
fn set(clock: &ManualClock, t: u64) {
    let now = clock.now();
    assert!(t >= now, "the tests only move time forward ({now} -> {t})");
    clock.advance_nanos(t - now);
}

/// Seed 001's request times (12:mm:ss after 12:00:00, the clock's origin), the same
/// in each of its tables.
const SEED_001_TIMES: [u64; 7] = [
    hms(0, 0, 5),
    hms(0, 0, 15),
    hms(0, 1, 1),
    hms(0, 1, 10),
    hms(0, 1, 40),
    hms(0, 1, 50),
    hms(0, 2, 20),
];

/// Seed 001, "Fixed Window Counters", 3 requests per 60 s, keys `user1_<window>`:
/// "12:01:50 user makes request user1_1515120100: 3 → 4 User is rejected as they are
/// over limit" and "12:02:20 [...] Allowed as counter reset". sluicegate counts only
/// admitted calls (its docs: "Only allowed calls are counted"), so the counter stays
/// at 3 and the refusal says when to come back, 12:02:00. Then the boundary burst:
/// "if the user made 3 requests at 12:00:59 and a further 3 requests at 12:01:00,
/// this would allow the user to make 6 requests in a 2 second period."
#[test]
fn seed_001_fixed_window_table_on_redis() {
    let server = RedisServer::start();
    let limiter = on_redis(
        &server,
        "seed001-fw",
        FixedWindow::new(3, secs(60)).unwrap(),
    );
    // (allowed, remaining, retry_after)
    let expected = [
        (true, 2, 0),
        (true, 1, 0),
        (true, 2, 0),
        (true, 1, 0),
        (true, 0, 0),
        (false, 0, 10),
        (true, 2, 0),
    ];
    for (t, (allowed, remaining, retry)) in SEED_001_TIMES.into_iter().zip(expected) {
        set(limiter.clock(), t);
        let d = limiter.check(&"user1", 1).unwrap();
        let got = (d.is_allowed(), d.remaining(), d.retry_after());
        assert_eq!(got, (allowed, remaining, secs(retry)), "at {}s", t / S);
    }

    let clock = ManualClock::new();
    let store =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("burst"))).unwrap();
    let burst =
        KeyedRateLimiter::with_store(FixedWindow::new(3, secs(60)).unwrap(), store, clock.clone());
    let mut granted = 0;
    for t in [hms(0, 0, 59), hms(0, 1, 0)] {
        set(&clock, t);
        for _ in 0..3 {
            granted += u64::from(burst.check(&"user1", 1).unwrap().is_allowed());
        }
    }
    assert_eq!(granted, 6);
}

/// Seed 001, "Sliding Tail", 3 requests per 60 s: the table's weighted counts
/// ("(2 * ((60-1)/60)) + 1 = 2.9", "... + 2 = 3.6", "... + 3 = 3.6" allowed;
/// "(2 * ((60-50)/60)) + 4 = 4.3 User is above threshold so rejected"; at 12:02:20
/// "(4 * ((60-20)/60)) + 1 = 3.6" allowed, the refused call counted in the 4) and
/// "if the user sent any more requests before 12:02:31, they would be rejected."
/// The seed allows at 3.6 and counts its `INCR`ed refusals: sluicegate's
/// `Rounding::Floor` and `Counting::Attempts`, whose docs describe exactly that.
#[test]
fn seed_001_sliding_tail_table_on_redis() {
    let server = RedisServer::start();
    let counter = SlidingWindowCounter::new(3, secs(60))
        .unwrap()
        .with_rounding(Rounding::Floor)
        .with_counting(Counting::Attempts);
    let limiter = on_redis(&server, "seed001-tail", counter);
    let allowed = [true, true, true, true, true, false, true];
    for (t, allowed) in SEED_001_TIMES.into_iter().zip(allowed) {
        set(limiter.clock(), t);
        assert_eq!(
            limiter.check(&"user1", 1).unwrap().is_allowed(),
            allowed,
            "at {}s",
            t / S
        );
    }
    // A peek answers what a check would: refused, and under `Counting::Attempts`
    // that refused check would itself count, so the next call would pass only once
    // ⌊4 × (60 − e)/60⌋ + 2 + 1 ≤ 3, just after 12:02:45. The peek records nothing,
    // so the seed's own rule still holds for the next real call: refused until
    // 12:02:30 included, allowed just after it and at 12:02:31.
    let d = limiter.peek(&"user1", 1).unwrap();
    assert!(!d.is_allowed());
    assert_eq!(d.retry_after(), secs(25) + Duration::from_nanos(1));
    set(limiter.clock(), hms(0, 2, 30));
    assert!(!limiter.peek(&"user1", 1).unwrap().is_allowed());
    set(limiter.clock(), hms(0, 2, 31));
    assert!(limiter.peek(&"user1", 1).unwrap().is_allowed());
}

/// Seed 001, "Sliding Log", 3 per 60 s in a sorted set: "12:01:10 [...] User is still
/// under threshold as the initial request [...] was more than 60 seconds ago",
/// "12:01:50 [...] User is rejected as they have had 4 request in the last 60
/// seconds" (the refused request is in the set: "Failed requests may still be added
/// to the set"), "12:02:20 [...] Request is allowed as user is below threshold" with
/// 12:01:40, 12:01:50 and 12:02:20 in the set. And seed 004's Redis sorted-set
/// limiter: "if an action is blocked, it is still added to the set. This means that
/// if a user is continually attempting actions more quickly than the allowed rate,
/// all of their actions will be blocked until they pause or slow their requests."
/// That is `SlidingLog::with_rejected_recorded`.
#[test]
fn seed_001_sliding_log_table_and_seed_004_hammering_on_redis() {
    let server = RedisServer::start();
    let log = SlidingLog::new(3, secs(60))
        .unwrap()
        .with_rejected_recorded();
    let limiter = on_redis(&server, "seed001-log", log);
    // (allowed, remaining, retry_after)
    let expected = [
        (true, 2, 0),
        (true, 1, 0),
        (true, 0, 0),
        (true, 0, 0),
        (true, 0, 0),
        // The refused attempt is recorded, so 12:01:01 and 12:01:10 must both leave
        // the window: at 12:02:10.
        (false, 0, 20),
        (true, 0, 0), // the set holds 12:01:40, 12:01:50 (refused) and 12:02:20
    ];
    for (t, (allowed, remaining, retry)) in SEED_001_TIMES.into_iter().zip(expected) {
        set(limiter.clock(), t);
        let d = limiter.check(&"user1", 1).unwrap();
        let got = (d.is_allowed(), d.remaining(), d.retry_after());
        assert_eq!(got, (allowed, remaining, secs(retry)), "at {}s", t / S);
    }
    // Hammering every 10 s (faster than 3 per minute) keeps the user out, each
    // attempt extending the ban, for as long as it goes on...
    for k in 1..=12 {
        set(limiter.clock(), hms(0, 2, 20) + k * 10 * S);
        assert!(
            !limiter.check(&"user1", 1).unwrap().is_allowed(),
            "attempt {k}"
        );
    }
    // ...and a pause of one window lets them back in.
    set(limiter.clock(), hms(0, 4, 20) + 60 * S);
    assert!(limiter.check(&"user1", 1).unwrap().is_allowed());
}

/// Seed 001, "Sliding Window", 3 per 60 s in 15 s buckets of a hash: "12:01:01 [...]
/// Timestamp for 1515120000 is expired so is deleted", "12:01:40 [...] Timestamp for
/// 1515120015 expires", "12:01:50 [...] User is rejected as they have had 4 request
/// in the last 60 seconds", "12:02:20 [...] Timestamp for 1515120100 expires. Request
/// is allowed". Dropping the bucket that is partly out of the window, as the seed's
/// table does. sluicegate counts granted calls only (seed 002's rule, in its docs),
/// so the refused 12:01:50 leaves no bucket behind.
#[test]
fn seed_001_sliding_window_in_15_s_buckets_on_redis() {
    let server = RedisServer::start();
    let window = SlidingWindowBuckets::dropping(3, secs(60), secs(15)).unwrap();
    let limiter = on_redis(&server, "seed001-buckets", window);
    // (allowed, remaining, retry_after)
    let expected = [
        (true, 2, 0),
        (true, 1, 0),
        (true, 1, 0),   // {12:00:15: 1, 12:01:00: 1}
        (true, 0, 0),   // {12:00:15: 1, 12:01:00: 2}
        (true, 0, 0),   // {12:01:00: 2, 12:01:30: 1}
        (false, 0, 10), // the 12:01:00 bucket leaves at 12:02:00
        (true, 1, 0),   // {12:01:30: 1, 12:02:15: 1}
    ];
    for (t, (allowed, remaining, retry)) in SEED_001_TIMES.into_iter().zip(expected) {
        set(limiter.clock(), t);
        let d = limiter.check(&"user1", 1).unwrap();
        let got = (d.is_allowed(), d.remaining(), d.retry_after());
        assert_eq!(got, (allowed, remaining, secs(retry)), "at {}s", t / S);
    }
}

/// Seed 001, "Leaky Bucket", "a bucket size of 3 and a refresh rate of 1 per 20
/// seconds": every request of the table is allowed. The seed drains in whole
/// 20-second steps from a rounded-down `ts` (its levels read 1, 2, 1, 2, 1, 2, 1);
/// sluicegate's meter is driftless (its docs: "computed from a theoretical arrival
/// time, never from a drip thread"), so its levels are exact: 1, 1.5, 1, 1.55, 1.05,
/// 1.55, 1.05, read here as whole permits remaining and the time to drain empty.
#[test]
fn seed_001_leaky_bucket_table_on_redis() {
    let server = RedisServer::start();
    let limiter = on_redis(
        &server,
        "seed001-leaky",
        LeakyBucket::meter(3, 1, secs(20)).unwrap(),
    );
    // (remaining, reset_after in s)
    let expected = [
        (2, 20),
        (1, 30),
        (2, 20),
        (1, 31),
        (1, 21),
        (1, 31),
        (1, 21),
    ];
    for (t, (remaining, reset)) in SEED_001_TIMES.into_iter().zip(expected) {
        set(limiter.clock(), t);
        let d = limiter.check(&"user1", 1).unwrap();
        let got = (d.is_allowed(), d.remaining(), d.reset_after());
        assert_eq!(got, (true, remaining, secs(reset)), "at {}s", t / S);
    }
    // At 1.05 one more fits (2.05); the next would make 3.05 > 3 and waits 1 s.
    assert!(limiter.check(&"user1", 1).unwrap().is_allowed());
    let d = limiter.check(&"user1", 1).unwrap();
    assert_eq!((d.is_allowed(), d.retry_after()), (false, secs(1)));
}

/// Seed 003, "Leaky Bucket": "When a request is registered, it is appended to the
/// end of the queue. At a regular interval, the first item on the queue is
/// processed. [...] If the queue is full, then additional requests are discarded."
/// A queue of 3, one served per second: three requests at once are served at 0, 1
/// and 2 s, a fourth is discarded at once, and a request after the first one's turn
/// takes the freed place.
#[test]
fn seed_003_leaky_bucket_queue_on_redis() {
    let server = RedisServer::start();
    let limiter = on_redis(
        &server,
        "seed003-queue",
        LeakyBucket::queue(3, 1, secs(1)).unwrap(),
    );
    // A turn is a reservation (`check` takes only what needs no waiting).
    let turns: Vec<Duration> = (0..3)
        .map(|_| limiter.reserve(&"user1", 1).unwrap().delay())
        .collect();
    assert_eq!(turns, [secs(0), secs(1), secs(2)]);
    let full = limiter.reserve(&"user1", 1).unwrap();
    assert!(!full.is_ok());
    assert_eq!(
        (full.decision().verdict(), full.decision().retry_after()),
        (Verdict::Denied, secs(1))
    );
    set(limiter.clock(), S);
    let next = limiter.reserve(&"user1", 1).unwrap();
    assert_eq!((next.is_ok(), next.delay()), (true, secs(2)));
}

/// Admitted calls of cost 1 at `when` for `key` (stops at the first refusal).
fn admitted_at<A>(limiter: &OnRedis<A>, key: &'static str, when: u64) -> u64
where
    A: RedisAlgorithm + Clone + Send + Sync,
    A::State: Send,
{
    set(limiter.clock(), when);
    let mut n = 0;
    while limiter.check(&key, 1).unwrap().is_allowed() {
        n += 1;
        assert!(n <= 100, "more than the limit at {when}");
    }
    n
}

/// 100 calls of each of `keys`, the k-th at `from + k × step`.
fn burst<A>(limiter: &OnRedis<A>, keys: &[&'static str], from: u64, step: u64)
where
    A: RedisAlgorithm + Clone + Send + Sync,
    A::State: Send,
{
    for i in 0..100 {
        set(limiter.clock(), from + i * step);
        for key in keys {
            assert!(
                limiter.check(key, 1).unwrap().is_allowed(),
                "{key}: burst call {i}"
            );
        }
    }
}

/// Seed 000, 100 requests per minute, `1.2.3.4:/api/widgets-T0` and `-T1` in Redis:
/// "a user made 100 requests in the first 0.25 minutes of an interval [...] At 1.25
/// minutes [...] We would only allow the user to make 24 more requests (and the
/// current one would succeed, so 25 in total)", "If the user waited until the 1.75
/// minutes, the math would be 1 + (0.25*100) and we would allow 74 (plus the 1
/// current) requests", and "Let's say those initial 100 requests had come in right at
/// the end of the first interval, say, at 0.99 minutes. At 1.25 minutes [...] we'd
/// still allow 25 requests." Three users, one per example.
#[test]
fn seed_000_sliding_counter_examples_on_redis() {
    let server = RedisServer::start();
    let limiter = on_redis(
        &server,
        "seed000-counter",
        SlidingWindowCounter::new(100, secs(60)).unwrap(),
    );
    // Each example on a key of its own: two bursts within the first 15 s, one at
    // 0.99 min (within 0.5 s of it).
    burst(
        &limiter,
        &["1.2.3.4:/api/widgets", "5.6.7.8:/api/widgets"],
        0,
        150 * MS,
    );
    burst(&limiter, &["9.9.9.9:/api/widgets"], 59_400 * MS, 5 * MS);
    assert_eq!(admitted_at(&limiter, "1.2.3.4:/api/widgets", 75 * S), 25);
    assert_eq!(admitted_at(&limiter, "9.9.9.9:/api/widgets", 75 * S), 25);
    assert_eq!(admitted_at(&limiter, "5.6.7.8:/api/widgets", 105 * S), 75);
}

/// Seed 000, "Tweaking the Resolution": "If your limit is 100 requests per 1 minute,
/// you could track intervals of 30 seconds [...] and weight the n-2 count in the same
/// way. Try this math with the first example above, and you'll see that at 1.25
/// minutes, we would allow 50 requests instead of just 25." and "if those 100 request
/// came in at 0.99 minutes, we would still be blocking all requests at 1.25 minutes."
#[test]
fn seed_000_thirty_second_buckets_on_redis() {
    let server = RedisServer::start();
    let window = SlidingWindowBuckets::weighted(100, secs(60), secs(30)).unwrap();
    let limiter = on_redis(&server, "seed000-buckets", window);
    burst(&limiter, &["1.2.3.4:/api/widgets"], 0, 150 * MS);
    burst(&limiter, &["9.9.9.9:/api/widgets"], 59_400 * MS, 5 * MS);
    assert_eq!(admitted_at(&limiter, "1.2.3.4:/api/widgets", 75 * S), 50);
    assert_eq!(admitted_at(&limiter, "9.9.9.9:/api/widgets", 75 * S), 0);
}

/// Seed 000, "What about minimum distance?": "just add a second limit! For example,
/// a given endpoint might have limits of 100 requests per minute, and 2 requests per
/// second." A client calling every 100 ms for a minute gets 2 calls each second
/// until the minute's 100 are used, 50 s in; the refusals name the limit that
/// refused: the second's (index 1) first, the minute's (index 0) once its 100 are
/// used (it then refuses for longer than the second does).
#[test]
fn seed_000_minimum_distance_as_a_second_limit_on_redis() {
    let server = RedisServer::start();
    let set_of_two = AllOf::new((
        SlidingWindowCounter::new(100, secs(60)).unwrap(),
        FixedWindow::new(2, secs(1)).unwrap(),
    ));
    let limiter = on_redis(&server, "seed000-distance", set_of_two);
    let mut per_second = [0u64; 60];
    let mut admitted = 0;
    for i in 0..600 {
        let t = i * 100 * MS;
        set(limiter.clock(), t);
        let d = limiter.check(&"1.2.3.4:/api/widgets", 1).unwrap();
        if d.is_allowed() {
            per_second[(t / S) as usize] += 1;
            admitted += 1;
        } else if admitted < 100 {
            let to_next_second = Duration::from_nanos(S - t % S);
            assert_eq!(
                (d.limit_index(), d.retry_after()),
                (1, to_next_second),
                "at {t}"
            );
        } else {
            assert_eq!(d.limit_index(), 0, "at {t}");
        }
    }
    assert!(per_second[..50].iter().all(|&n| n == 2), "{per_second:?}");
    assert!(per_second[50..].iter().all(|&n| n == 0), "{per_second:?}");
}

/// Seed 002's sliding-window limits, `limits=[(1, 10), (60, 120), (3600, 240, 60)]`
/// (10 per second, 120 per minute, 240 per hour in one-minute buckets), with
/// "variable-cost requests": "if tonumber(cur or '0') + weight > limit[2] then return
/// 1", and "With this new version, we are going to only count successful requests."
#[test]
fn seed_002_sliding_window_limits_with_weights_on_redis() {
    let server = RedisServer::start();
    let limits = Limits::new()
        .with(FixedWindow::new(10, secs(1)).unwrap())
        .with(FixedWindow::new(120, secs(60)).unwrap())
        .with(SlidingWindowBuckets::dropping(240, secs(3600), secs(60)).unwrap());
    let limiter = on_redis(&server, "seed002-limits", limits);
    let id = "ip:1.2.3.4";
    assert!(limiter.check(&id, 6).unwrap().is_allowed());
    // 6 + 5 > 10: refused by the per-second limit, nothing counted anywhere.
    let d = limiter.check(&id, 5).unwrap();
    assert_eq!(
        (d.is_allowed(), d.limit_index(), d.retry_after()),
        (false, 0, secs(1))
    );
    assert!(limiter.check(&id, 4).unwrap().is_allowed());
    // A client hammering the per-second limit uses up none of its minute or hour.
    set(limiter.clock(), 500 * MS);
    for _ in 0..50 {
        assert_eq!(limiter.check(&id, 1).unwrap().limit_index(), 0);
    }
    set(limiter.clock(), S);
    let mut left = Vec::new();
    let d = limiter
        .check_each(&id, 1, &mut |d| left.push(d.remaining()))
        .unwrap();
    assert!(d.is_allowed());
    assert_eq!(left, [9, 109, 229]);
    assert!(limiter.check(&id, 9).unwrap().is_allowed());
    // Seconds 2..=11 take 10 each: the minute's 120 are used at 11 s.
    for s in 2..=11 {
        set(limiter.clock(), s * S);
        assert!(limiter.check(&id, 10).unwrap().is_allowed(), "second {s}");
    }
    set(limiter.clock(), 12 * S);
    let d = limiter.check(&id, 1).unwrap();
    assert_eq!(
        (d.is_allowed(), d.limit_index(), d.retry_after()),
        (false, 1, secs(48))
    );
    // The next minute's 120 use up the hour's 240.
    for s in 60..=71 {
        set(limiter.clock(), s * S);
        assert!(limiter.check(&id, 10).unwrap().is_allowed(), "second {s}");
    }
    set(limiter.clock(), 72 * S);
    let d = limiter.check(&id, 1).unwrap();
    // Refused by the minute (until 2:00) and the hour (until the first minute's
    // bucket leaves, at 1:00:00): the longest wait answers.
    assert_eq!(
        (d.is_allowed(), d.limit_index(), d.retry_after()),
        (false, 2, secs(3600 - 72))
    );
    set(limiter.clock(), 3600 * S);
    let mut left = Vec::new();
    assert!(limiter
        .check_each(&id, 1, &mut |d| left.push(d.remaining()))
        .unwrap()
        .is_allowed());
    assert_eq!(left, [9, 119, 119]);
}

/// Seed 002: "we still support multiple identifiers for non-clustered cases" (the
/// script loops over `KEYS`, an IP and a user id, and returns 1 if any is over its
/// limit, before incrementing anything). With 3 calls per minute on each: a user's
/// call from an IP that other users have used up is refused and uses none of the
/// user's own calls.
#[test]
fn seed_002_an_ip_and_a_user_all_or_nothing_on_redis() {
    let server = RedisServer::start();
    let limiter = on_redis(
        &server,
        "seed002-ids",
        FixedWindow::new(3, secs(60)).unwrap(),
    );
    assert!(limiter
        .check_all(&["ip:1.2.3.4", "user:42"], 2)
        .unwrap()
        .is_allowed());
    assert!(limiter
        .check_all(&["ip:1.2.3.4", "user:43"], 1)
        .unwrap()
        .is_allowed());
    let d = limiter.check_all(&["ip:1.2.3.4", "user:42"], 1).unwrap();
    assert_eq!(
        (d.is_allowed(), d.remaining(), d.retry_after()),
        (false, 0, secs(60))
    );
    // user:42 still has its third call, from another IP.
    let d = limiter.check_all(&["ip:5.6.7.8", "user:42"], 1).unwrap();
    assert_eq!((d.is_allowed(), d.remaining()), (true, 0));
    assert_eq!(limiter.peek(&"ip:5.6.7.8", 1).unwrap().remaining(), 1);
}

/// Seed 002, "Sliding Windows": "if you have 240 tokens that can be used in an hour,
/// and you used 20 tokens at 6:05PM, you would only be able to make up to another
/// 220 requests until 7:04PM. At 7:05PM, you would get those 20 tokens back (and if
/// you made any other requests between 6:06PM and 7:05PM, those tokens would be
/// restored later)." In one-minute buckets; the clock's origin is 6:00 PM.
#[test]
fn seed_002_twenty_tokens_come_back_at_7_05_on_redis() {
    let server = RedisServer::start();
    let window = SlidingWindowBuckets::dropping(240, secs(3600), secs(60)).unwrap();
    let limiter = on_redis(&server, "seed002-tokens", window);
    let id = "user:42";
    set(limiter.clock(), hms(0, 5, 0));
    assert!(limiter.check(&id, 20).unwrap().is_allowed());
    set(limiter.clock(), hms(0, 30, 0));
    let d = limiter.check(&id, 220).unwrap();
    assert_eq!((d.is_allowed(), d.remaining()), (true, 0));
    set(limiter.clock(), hms(1, 4, 59));
    let d = limiter.check(&id, 1).unwrap();
    assert_eq!((d.is_allowed(), d.retry_after()), (false, secs(1)));
    set(limiter.clock(), hms(1, 5, 0));
    let d = limiter.check(&id, 20).unwrap();
    assert_eq!((d.is_allowed(), d.remaining()), (true, 0));
    // The 6:30 requests come back later, at 7:30.
    let d = limiter.check(&id, 1).unwrap();
    assert_eq!((d.is_allowed(), d.retry_after()), (false, secs(25 * 60)));
}

/// Seed 002, "Optional fix: use Redis time": "if every client uses the time returned
/// by the TIME command from the same Redis server, then we can be reasonably assured
/// that clients will have fairly consistent behavior". Two clients whose clocks are
/// three hours apart share one exact limit of 3 per minute: on the server's time
/// (the store's default) they agree, and together get 3; on their own clocks
/// (`TimeSource::Caller`, whose docs say "Clients with skewed clocks then disagree")
/// the client ahead finds the other's calls expired and gets 3 more.
#[test]
fn seed_002_server_time_makes_skewed_clients_agree_on_redis() {
    let server = RedisServer::start();
    let log = SlidingLog::new(3, secs(60)).unwrap();
    let two_clients = |options: RedisOptions| {
        let clients = [0, 3 * 3600 * S].map(|skew| {
            let clock = ManualClock::new();
            clock.advance_nanos(skew);
            let store = RedisStore::open_with(server.url(), options.clone()).unwrap();
            KeyedRateLimiter::with_store(log, store, clock)
        });
        let behind = (0..2)
            .filter(|_| clients[0].check(&"user:42", 1).unwrap().is_allowed())
            .count();
        let ahead = (0..3)
            .filter(|_| clients[1].check(&"user:42", 1).unwrap().is_allowed())
            .count();
        let refused = clients[0].check(&"user:42", 1).unwrap();
        (behind, ahead, refused)
    };

    let server_time = RedisOptions::default()
        .prefix(unique_prefix("seed002-time"))
        .unwrap()
        .connect_timeout(secs(5))
        .response_timeout(secs(5));
    let (behind, ahead, refused) = two_clients(server_time);
    assert_eq!((behind, ahead), (2, 1));
    assert!(!refused.is_allowed());
    // The first call leaves the window a minute after it, on the server's clock
    // (the test's own calls take well under the 10 s allowed here).
    assert!(refused.retry_after() > secs(50) && refused.retry_after() <= secs(60));

    let (behind, ahead, refused) = two_clients(caller_time_options(&unique_prefix("seed002-own")));
    assert_eq!((behind, ahead), (2, 3));
    assert!(!refused.is_allowed());
}
