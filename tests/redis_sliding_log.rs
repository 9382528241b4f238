//! The exact sliding log (with minimum spacing and recorded refusals) on a real
//! Redis: the same decisions as memory on random traces; no lost update.
#![cfg(feature = "redis")]

mod redis_support;

use redis_support::trace::{
    caller_time_options, cancel_at_the_instant, differential, hammer, TraceShape,
};
use redis_support::{unique_prefix, RedisServer};
use sluicegate::algorithms::SlidingLog;
use sluicegate::stores::redis::RedisStore;
use std::time::Duration;

#[test]
fn random_traces_decide_as_in_memory() {
    let server = RedisServer::start();
    let ms = Duration::from_millis;
    let configs = [
        SlidingLog::new(5, ms(60)).unwrap(),
        SlidingLog::new(4, ms(20)).unwrap().with_min_spacing(ms(3)),
        SlidingLog::new(3, ms(30)).unwrap().with_rejected_recorded(),
        SlidingLog::new(6, ms(50))
            .unwrap()
            .with_rejected_recorded()
            .with_min_spacing(Duration::from_micros(700)),
        SlidingLog::new(1, Duration::from_micros(13)).unwrap(),
        SlidingLog::new(40, ms(10)).unwrap(),
    ];
    let starts = [0, 1_763_900_000_000_000, 9, 1 << 52];
    let mut totals = [0; 3];
    for (seed, config) in configs.iter().enumerate() {
        let store = RedisStore::open_with(
            server.url(),
            caller_time_options(&unique_prefix("log-diff")),
        )
        .unwrap();
        let duration_us = config.duration().as_micros() as u64;
        let shape = TraceShape {
            max_cost: config.limit().min(5) + 1,
            max_gap_us: 2 * duration_us / config.limit(),
            back_percent: 3,
            max_back_us: duration_us,
            multi_percent: 15,
            start_us: starts[seed % starts.len()],
            compare_memory: true,
            // Grants of windows and logs act at once: a cancel gives one back only at
            // that very instant (a set's at its own time to act).
            cancel_percent: 5,
        };
        let seen = differential(config, &store, 500 + seed as u64, 2_000, &shape);
        for (total, n) in totals.iter_mut().zip(seen) {
            *total += n;
        }
    }
    assert!(totals.iter().all(|&n| n > 100), "{totals:?}");
}

#[test]
fn threads_hammering_one_key_get_exactly_the_limit() {
    let server = RedisServer::start();
    for config in [
        SlidingLog::new(300, Duration::from_secs(60)).unwrap(),
        SlidingLog::new(300, Duration::from_secs(60))
            .unwrap()
            .with_rejected_recorded(),
    ] {
        let granted = hammer(
            server.url(),
            &unique_prefix("log-hammer"),
            &config,
            (1_763_900_000_000_000_000, 0),
            4,
            120,
        );
        assert_eq!(granted, 300, "{config:?}");
    }
}

#[test]
fn a_cancel_at_the_instant_of_a_grant_gives_it_back_on_the_server() {
    let server = RedisServer::start();
    cancel_at_the_instant(
        server.url(),
        &SlidingLog::new(3, Duration::from_secs(1)).unwrap(),
        "log-cancel",
    );
}
