//! The sliding window counter on a real Redis, with both roundings and both
//! countings: the same decisions as memory on random traces; no lost update.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;

use redis_support::trace::{
    assert_hammer_grants, cancel_at_the_instant, traces, TraceShape, NOV_2025,
};
use redis_support::RedisServer;
use sluicegate::algorithms::{Counting, Rounding, SlidingWindowCounter};
use std::time::Duration;

fn counter(
    limit: u64,
    len: Duration,
    rounding: Rounding,
    counting: Counting,
) -> SlidingWindowCounter {
    SlidingWindowCounter::new(limit, len)
        .unwrap()
        .with_rounding(rounding)
        .with_counting(counting)
}

#[test]
fn random_traces_decide_as_in_memory() {
    let server = RedisServer::start();
    let us = Duration::from_micros;
    let ms = Duration::from_millis;
    let secs = Duration::from_secs;
    // The largest limit a counter takes: 24 count bits.
    let largest = (1 << 24) - 1;
    let configs = [
        (3, ms(10), Rounding::Exact, Counting::Admitted),
        (5, us(1_700), Rounding::Floor, Counting::Admitted),
        (4, ms(3), Rounding::Exact, Counting::Attempts),
        (7, secs(60), Rounding::Floor, Counting::Attempts),
        // 24 count bits leave a 16-bit window index that wraps every 65,536 windows
        // of 1 µs.
        (largest, us(1), Rounding::Exact, Counting::Admitted),
        (100, us(3), Rounding::Floor, Counting::Attempts),
        // limit x window beyond 2^52 ns: the script's exact (limb) path throughout.
        (largest, secs(600), Rounding::Exact, Counting::Attempts),
    ]
    .map(|(limit, len, rounding, counting)| counter(limit, len, rounding, counting));
    let starts = [0, 1_763_900_000_000_000, 5, 1 << 52];
    let cases = configs.iter().enumerate().map(|(i, config)| {
        let len_us = config.window().as_micros() as u64;
        let gap = if config.limit() > 1000 {
            70_000
        } else {
            2 * len_us / config.limit().min(6) + 1
        };
        let shape = TraceShape {
            compare_memory: config.limit() < 1000,
            max_back_us: 2 * len_us,
            ..TraceShape::new(config.limit().min(6) + 1, gap, starts[i % starts.len()])
        };
        (config, shape)
    });
    traces(server.url(), 200, 2_000, cases).assert_each_above(100);
}

/// Limits and windows users pick (up to 10^6 a day): the script's steps on doubles,
/// with costs up to the limit so that counts near the limit decide refusals.
#[test]
fn large_limits_decide_as_in_memory() {
    let server = RedisServer::start();
    let secs = Duration::from_secs;
    let configs = [
        (10_000, secs(3_600), Rounding::Exact, Counting::Admitted),
        (10_000, secs(3_600), Rounding::Floor, Counting::Attempts),
        (100_000, secs(60), Rounding::Floor, Counting::Admitted),
        (100_000, secs(60), Rounding::Exact, Counting::Attempts),
        (1_000_000, secs(86_400), Rounding::Floor, Counting::Admitted),
        (1_000_000, secs(86_400), Rounding::Exact, Counting::Admitted),
    ]
    .map(|(limit, len, rounding, counting)| counter(limit, len, rounding, counting));
    let starts = [1_763_900_000_000_000, 0, 1 << 52];
    let cases = configs.iter().enumerate().map(|(i, config)| {
        let len_us = config.window().as_micros() as u64;
        let shape = TraceShape {
            max_back_us: len_us / 4,
            ..TraceShape::new(
                config.limit() + config.limit() / 8,
                len_us / 8,
                starts[i % starts.len()],
            )
        };
        (config, shape)
    });
    traces(server.url(), 700, 1_000, cases).assert_each_above(100);
}

#[test]
fn threads_hammering_one_key_get_exactly_the_limit() {
    let server = RedisServer::start();
    for counting in [Counting::Admitted, Counting::Attempts] {
        let config = counter(300, Duration::from_secs(60), Rounding::Exact, counting);
        assert_hammer_grants(&server, "swc-hammer", &config, ((NOV_2025, 0), 120), 300);
    }
}

#[test]
fn a_cancel_at_the_instant_of_a_grant_gives_it_back_on_the_server() {
    let server = RedisServer::start();
    cancel_at_the_instant(
        server.url(),
        &SlidingWindowCounter::new(3, Duration::from_secs(1)).unwrap(),
        "swc-cancel",
    );
}
