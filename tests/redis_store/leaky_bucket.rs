//! The leaky bucket (meter and queue) on a real Redis: the same decisions as memory
//! on random traces, fractional intervals and today's absolute time included; no
//! lost update under threads.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;

use redis_support::trace::{assert_hammer_grants, traces, TraceShape, NOV_2025};
use redis_support::RedisServer;
use sluicegate::algorithms::LeakyBucket;
use std::time::Duration;

#[test]
fn random_traces_decide_as_in_memory() {
    let server = RedisServer::start();
    let second = Duration::from_secs(1);
    // (bucket, typical gap between calls in µs)
    let configs = [
        // A third of a second: ticks are not nanoseconds.
        (LeakyBucket::meter(3, 3, second).unwrap(), 300_000),
        (LeakyBucket::queue(3, 3, second).unwrap(), 300_000),
        // Whole-nanosecond interval: ticks are nanoseconds.
        (
            LeakyBucket::queue(4, 1, Duration::from_millis(20)).unwrap(),
            15_000,
        ),
        (
            LeakyBucket::meter(5, 100, Duration::from_secs(60)).unwrap(),
            500_000,
        ),
        // 7 per minute and nearly one per microsecond: large and odd fractions.
        (
            LeakyBucket::meter(5, 7, Duration::from_secs(60)).unwrap(),
            7_000_000,
        ),
        (LeakyBucket::queue(2, 999_999, second).unwrap(), 1),
        // Odd counts over an hour and a day: ticks of 1/37 and 1/7 ns, a bucket's
        // span near 2^51 ticks, still on the script's doubles.
        (
            LeakyBucket::meter(333, 333, Duration::from_secs(3_600)).unwrap(),
            10_810_811,
        ),
        (
            LeakyBucket::queue(12, 7, Duration::from_secs(86_400)).unwrap(),
            12_342_857_143,
        ),
    ];
    let starts = [0, 1_763_900_000_000_000, (1 << 52) + 12_345, 77];
    let cases = configs.iter().enumerate().map(|(i, (bucket, gap))| {
        (
            bucket,
            TraceShape::new(bucket.capacity() + 1, *gap, starts[i % starts.len()]),
        )
    });
    traces(server.url(), 100, 2_000, cases).assert_each_above(100);
}

#[test]
fn threads_hammering_one_key_get_exactly_the_capacity() {
    let server = RedisServer::start();
    for bucket in [
        LeakyBucket::meter(300, 3, Duration::from_secs(1)).unwrap(),
        LeakyBucket::queue(300, 1, Duration::from_secs(1)).unwrap(),
    ] {
        // A queue's callers wait their turn: willing to wait for ever, exactly
        // `capacity` of them get one.
        assert_hammer_grants(
            &server,
            "lb-hammer",
            &bucket,
            ((NOV_2025, u64::MAX), 120),
            300,
        );
    }
}
