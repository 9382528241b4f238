//! The exact sliding log (with minimum spacing and recorded refusals) on a real
//! Redis: the same decisions as memory on random traces; no lost update.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;

use redis_support::trace::{
    assert_an_older_layout_is_refused_and_kept, assert_hammer_grants, cancel_at_the_instant,
    traces, TraceShape, NOV_2025,
};
use redis_support::RedisServer;
use sluicegate::algorithms::SlidingLog;
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
    let cases = configs.iter().enumerate().map(|(i, config)| {
        let window_us = config.window().as_micros() as u64;
        let start = starts[i % starts.len()];
        (
            config,
            TraceShape::window(config.limit().min(5) + 1, config.limit(), window_us, start),
        )
    });
    traces(server.url(), 500, 2_000, cases).assert_each_above(100);
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
        assert_hammer_grants(&server, "log-hammer", &config, ((NOV_2025, 0), 120), 300);
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

/// Big-endian doubles, as the server's `struct.pack('>d...')` writes them.
fn doubles(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_be_bytes()).collect()
}

/// The text layout of earlier builds: fields `h`, `l`, `b`, `r` and
/// `"<time> <count>"` slots.
#[test]
fn a_log_in_the_older_text_layout_is_a_typed_error_and_stays_as_it_was() {
    let old: [(&[u8], &[u8]); 5] = [
        (b"h", b"0"),
        (b"l", b"1"),
        (b"b", b"0"),
        (b"r", b"3"),
        (b"0", b"5 1"),
    ];
    assert_an_older_layout_is_refused_and_kept(
        "log-format",
        &SlidingLog::new(3, Duration::from_secs(1)).unwrap(),
        &old,
    );
}

/// The packed layout before the header kept copies of the oldest and newest
/// entries: a 32-byte `H` (head, length, base, ring) and slots named in decimal.
#[test]
fn a_log_in_the_older_packed_layout_is_a_typed_error_and_stays_as_it_was() {
    let header = doubles(&[0.0, 1.0, 0.0, 3.0]);
    let slot = doubles(&[5.0, 1.0]);
    let old: [(&[u8], &[u8]); 2] = [(b"H", &header), (b"0", &slot)];
    assert_an_older_layout_is_refused_and_kept(
        "log-packed",
        &SlidingLog::new(3, Duration::from_secs(1)).unwrap(),
        &old,
    );
}
