//! The fixed window on a real Redis: the same decisions as memory on random traces,
//! no lost update under threads.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;

use redis_support::trace::{assert_hammer_grants, cancel_at_the_instant, traces, TraceShape};
use redis_support::RedisServer;
use sluicegate::algorithms::FixedWindow;
use std::time::Duration;

#[test]
fn random_traces_decide_as_in_memory() {
    let server = RedisServer::start();
    let configs = [
        FixedWindow::new(3, Duration::from_millis(7)).unwrap(),
        FixedWindow::new(10, Duration::from_micros(1_500)).unwrap(),
        FixedWindow::new(1, Duration::from_micros(1)).unwrap(),
    ];
    let starts = [0, 1_763_900_000_000_000, 1 << 52];
    let cases = configs.iter().zip(starts).map(|(window, start)| {
        let len_us = window.window().as_micros() as u64;
        let shape = TraceShape {
            // A grant acts at once: a cancel gives it back only at that very instant.
            max_back_us: len_us,
            ..TraceShape::new(window.limit() + 1, 3 * len_us / window.limit(), start)
        };
        (window, shape)
    });
    // The traces exercised grants, refusals and "never".
    traces(server.url(), 0, 4_000, cases).assert_each_above(100);
}

#[test]
fn threads_hammering_one_key_get_exactly_the_limit() {
    let server = RedisServer::start();
    let window = FixedWindow::new(500, Duration::from_secs(60)).unwrap();
    assert_hammer_grants(
        &server,
        "fw-hammer",
        &window,
        ((7_000_000_000, 0), 200),
        500,
    );
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
