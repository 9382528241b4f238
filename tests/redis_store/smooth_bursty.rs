//! Guava's bursty limiter on a real Redis: the same decisions as memory on random
//! traces (pay-later debt, fractional intervals, waits, never), today's absolute
//! time included; no lost update under threads.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;
use sluicegate::algorithms::{Decision, Receipt};

use redis_support::trace::{
    assert_hammer_grants, caller_time_options, traces, TraceShape, NOV_2025,
};
use redis_support::{unique_prefix, RedisServer};
use sluicegate::algorithms::SmoothBursty;
use sluicegate::stores::redis::RedisStore;
use std::time::Duration;

#[test]
fn random_traces_decide_as_in_memory() {
    let server = RedisServer::start();
    // (limiter, typical gap between calls in µs)
    let configs = [
        (SmoothBursty::new(5.0).unwrap(), 200_000),
        (
            SmoothBursty::new(3.0)
                .unwrap()
                .with_max_burst(Duration::from_millis(2_500))
                .unwrap(),
            300_000,
        ),
        (SmoothBursty::new(1e6 / 7.0).unwrap(), 10),
        (
            SmoothBursty::new(0.37)
                .unwrap()
                .with_max_burst(Duration::from_secs(9))
                .unwrap(),
            2_000_000,
        ),
        (SmoothBursty::new(f64::INFINITY).unwrap(), 1_000),
        (SmoothBursty::new(1e-9).unwrap(), 1_000_000),
    ];
    let starts = [0, 1_763_900_000_000_000, 3, 1 << 52];
    let cases = configs
        .iter()
        .enumerate()
        .map(|(i, (limiter, gap))| (limiter, TraceShape::new(4, *gap, starts[i % starts.len()])));
    traces(server.url(), 300, 2_000, cases).assert_each_above(50);
}

#[test]
fn threads_hammering_one_key_get_exactly_the_burst() {
    let server = RedisServer::start();
    // 100 per second with a 3 s burst, idle for long: 300 stored permits, then the
    // pay-later rule grants one more (its cost is paid by the next caller).
    let limiter = SmoothBursty::new(100.0)
        .unwrap()
        .with_max_burst(Duration::from_secs(3))
        .unwrap();
    assert_hammer_grants(&server, "sb-hammer", &limiter, ((NOV_2025, 0), 120), 301);
}

#[test]
fn cancels_that_take_the_state_below_the_origin_match_memory() {
    use sluicegate::stores::{MemoryStore, Operation, Store};
    let server = RedisServer::start();
    let limiter = SmoothBursty::new(5.0).unwrap();
    let redis: RedisStore<&str, SmoothBursty> =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("sb-neg"))).unwrap();
    let memory: MemoryStore<&str, SmoothBursty> = MemoryStore::new();
    let both = |now: u64, step: Operation<'_>| {
        let a = memory
            .apply_key::<(Decision, Receipt)>(&limiter, &"k", now, step)
            .unwrap();
        let b = redis
            .apply_key::<(Decision, Receipt)>(&limiter, &"k", now, step)
            .unwrap();
        assert_eq!(b, a, "{step:?} at {now}");
        a
    };
    // Near the origin (now < max_burst), cancelling one grant three times rolls
    // the state back below zero (i64), which later decisions must see the same.
    let reserve = Operation::Reserve {
        cost: 2,
        max_wait: u64::MAX,
    };
    let (_, grant) = both(1_000, reserve);
    for _ in 0..3 {
        both(
            2_000,
            Operation::Cancel {
                receipts: std::slice::from_ref(&grant),
                acts_at: 5_000_000_000,
            },
        );
    }
    for now in [3_000, 400_000_000, 900_000_000, 1_500_000_000] {
        both(now, reserve);
        both(now, Operation::Peek { cost: 1 });
    }
}
