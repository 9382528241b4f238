//! Guava's warming-up limiter on a real Redis: the same decisions, bit for bit in
//! the stored permits a grant spent, as memory on random traces; no lost update.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;

use redis_support::trace::{assert_hammer_grants, hammer, traces, TraceShape, NOV_2025};
use redis_support::{unique_prefix, RedisServer};
use sluicegate::algorithms::SmoothWarmingUp;
use std::time::Duration;

#[test]
fn random_traces_decide_as_in_memory() {
    let server = RedisServer::start();
    let configs = [
        (
            SmoothWarmingUp::new(5.0, Duration::from_secs(2)).unwrap(),
            150_000,
        ),
        (
            SmoothWarmingUp::new(3.0, Duration::from_millis(1_500))
                .unwrap()
                .with_cold_factor(7.5)
                .unwrap(),
            250_000,
        ),
        (
            SmoothWarmingUp::new(1e5 / 3.0, Duration::from_millis(40)).unwrap(),
            25,
        ),
        (SmoothWarmingUp::new(2.0, Duration::ZERO).unwrap(), 400_000),
        (
            SmoothWarmingUp::new(f64::INFINITY, Duration::from_secs(1)).unwrap(),
            1_000,
        ),
        (
            SmoothWarmingUp::new(0.5, Duration::from_secs(10)).unwrap(),
            3_000_000,
        ),
    ];
    let starts = [0, 1_763_900_000_000_000, 17, 1 << 52];
    let cases = configs
        .iter()
        .enumerate()
        .map(|(i, (limiter, gap))| (limiter, TraceShape::new(4, *gap, starts[i % starts.len()])));
    let seen = traces(server.url(), 600, 2_000, cases).seen();
    assert!(seen[0] > 1_000 && seen[1] > 1_000, "{seen:?}");
}

#[test]
fn threads_hammering_one_key_get_exactly_what_memory_grants() {
    let server = RedisServer::start();
    // Frozen time, no waiting: a cold limiter grants its first call, then every
    // later one would have to wait for the trapezoid's charge: exactly one.
    let limiter = SmoothWarmingUp::new(100.0, Duration::from_secs(3)).unwrap();
    assert_hammer_grants(&server, "wu-hammer", &limiter, ((NOV_2025, 0), 120), 1);
    // Willing to wait 10 s: every reservation whose wait fits is granted, once.
    let limiter = SmoothWarmingUp::new(10.0, Duration::from_secs(1)).unwrap();
    let mut memory = sluicegate::algorithms::Algorithm::initial_state(&limiter, 0);
    let now = 1_763_900_000_000_000_000;
    let expected = (0..480)
        .filter(|_| {
            sluicegate::algorithms::Algorithm::reserve::<sluicegate::Decision>(
                &limiter,
                &mut memory,
                now,
                1,
                10_000_000_000,
            )
            .is_allowed()
        })
        .count() as u64;
    let granted = hammer(
        server.url(),
        &unique_prefix("wu-hammer"),
        &limiter,
        (now, 10_000_000_000),
        4,
        120,
    );
    assert_eq!(granted, expected);
    assert!(expected > 50, "{expected}");
}
