//! The fixed window on a real Redis: the same decisions as memory on random traces,
//! no lost update under threads.
#![cfg(feature = "redis")]

mod redis_support;

use redis_support::trace::{
    caller_time_options, cancel_at_the_instant, differential, hammer, TraceShape,
};
use redis_support::{unique_prefix, RedisServer};
use sluicegate::algorithms::FixedWindow;
use sluicegate::stores::redis::RedisStore;
use std::time::Duration;

#[test]
fn random_traces_decide_as_in_memory() {
    let server = RedisServer::start();
    let configs = [
        FixedWindow::new(3, Duration::from_millis(7)).unwrap(),
        FixedWindow::new(10, Duration::from_micros(1_500)).unwrap(),
        FixedWindow::new(1, Duration::from_micros(1)).unwrap(),
    ];
    let mut totals = [0; 3];
    for (seed, window) in configs.iter().enumerate() {
        let store =
            RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("fw-diff")))
                .unwrap();
        let shape = TraceShape {
            max_cost: window.limit() + 1,
            max_gap_us: 3 * window.window().as_micros() as u64 / window.limit(),
            back_percent: 3,
            compare_memory: true,
            // A grant acts at once: a cancel gives it back only at that very instant.
            cancel_percent: 5,
            max_back_us: window.window().as_micros() as u64,
            multi_percent: 15,
            start_us: [0, 1_763_900_000_000_000, 1 << 52][seed],
        };
        let seen = differential(window, &store, seed as u64, 4_000, &shape);
        for (total, n) in totals.iter_mut().zip(seen) {
            *total += n;
        }
    }
    // The traces exercised grants, refusals and "never".
    assert!(totals.iter().all(|&n| n > 100), "{totals:?}");
}

#[test]
fn threads_hammering_one_key_get_exactly_the_limit() {
    let server = RedisServer::start();
    let window = FixedWindow::new(500, Duration::from_secs(60)).unwrap();
    let granted = hammer(
        server.url(),
        &unique_prefix("fw-hammer"),
        &window,
        (7_000_000_000, 0),
        4,
        200,
    );
    assert_eq!(granted, 500);
}

#[test]
fn a_cancel_at_the_instant_of_a_grant_gives_it_back_on_the_server() {
    let server = RedisServer::start();
    cancel_at_the_instant(
        server.url(),
        &FixedWindow::new(3, Duration::from_secs(1)).unwrap(),
        "fw-cancel",
    );
}
