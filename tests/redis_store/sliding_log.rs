//! The exact sliding log (with minimum spacing and recorded refusals) on a real
//! Redis: the same decisions as memory on random traces; no lost update.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;

use redis_support::trace::{
    assert_an_older_layout_is_refused_and_kept, assert_hammer_grants, caller_time_options,
    cancel_at_the_instant, hash_encoding, traces, TraceShape, NOV_2025,
};
use redis_support::{take, unique_prefix, RedisServer, SECOND};
use sluicegate::algorithms::SlidingLog;
use sluicegate::stores::redis::RedisStore;
use sluicegate::stores::{MemoryStore, Store};
use sluicegate::Decision;
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

/// One key stepped by a log of 20 and a log of 100 in turn, each phase past its
/// limit (so that entries leave and refusals come): a ring of more than 64 slots
/// pads its header so that Redis keeps the hash as a hash table, and the answers
/// are memory's through every change of limit and of encoding.
#[test]
fn a_limit_raised_and_lowered_across_the_hash_table_size_decides_as_in_memory() {
    let server = RedisServer::start();
    let mut admin = server.connection();
    let store: RedisStore<&str, SlidingLog> = RedisStore::open_with(
        server.url(),
        caller_time_options(&unique_prefix("log-sizes")),
    )
    .unwrap();
    let memory: MemoryStore<&str, SlidingLog> = MemoryStore::new();
    let minute = Duration::from_secs(60);
    let small = SlidingLog::new(20, minute).unwrap();
    let large = SlidingLog::new(100, minute).unwrap();
    let key = store.server_key(&"k");
    let mut at = NOV_2025;
    let (mut granted, mut refused) = (0, 0);
    // A hash table never turns back into a listpack, so the last two phases read
    // a hash table whatever the ring.
    for (config, calls, stored) in [
        (&small, 60, "listpack"),
        (&large, 240, "hashtable"),
        (&small, 90, "hashtable"),
        (&large, 60, "hashtable"),
    ] {
        for _ in 0..calls {
            let on_redis = store
                .apply_key::<Decision>(config, &"k", at, take(1))
                .unwrap();
            let in_memory = memory
                .apply_key::<Decision>(config, &"k", at, take(1))
                .unwrap();
            assert_eq!(on_redis, in_memory, "limit {} at {at}", config.limit());
            if on_redis.is_allowed() {
                granted += 1;
            } else {
                refused += 1;
            }
            at += SECOND / 2;
        }
        assert_eq!(
            hash_encoding(&mut admin, &key),
            stored,
            "after the phase of limit {}",
            config.limit()
        );
    }
    assert!(
        granted > 100 && refused > 100,
        "{granted} granted, {refused} refused"
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
