//! The bucketed sliding window (dropping and weighted) on a real Redis: the same
//! decisions as memory on random traces; no lost update; the server's work per
//! allowed call does not grow with the number of buckets.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;
use sluicegate::algorithms::{Decision, Receipt};

use redis_support::trace::{
    assert_an_older_layout_is_refused_and_kept, assert_hammer_grants, caller_time_options,
    cancel_at_the_instant, hash_encoding, traces, TraceShape, NOV_2025,
};
use redis_support::{take, unique_prefix, RedisServer, SECOND};
use sluicegate::algorithms::SlidingWindowBuckets;
use sluicegate::stores::redis::RedisStore;
use sluicegate::stores::{MemoryStore, Store};
use std::time::Duration;

#[test]
fn random_traces_decide_as_in_memory() {
    let server = RedisServer::start();
    let ms = Duration::from_millis;
    let us = Duration::from_micros;
    let configs = [
        SlidingWindowBuckets::dropping(5, ms(60), ms(15)).unwrap(),
        SlidingWindowBuckets::weighted(5, ms(60), ms(15)).unwrap(),
        // Duration not a multiple of precision: a partial bucket at both ends.
        SlidingWindowBuckets::weighted(7, us(1_000), us(300)).unwrap(),
        SlidingWindowBuckets::dropping(4, us(1_000), us(300)).unwrap(),
        SlidingWindowBuckets::weighted(3, ms(10), ms(10)).unwrap(),
        SlidingWindowBuckets::dropping(6, us(4_096), us(1)).unwrap(),
        // Limits and windows users pick: the server's steps on doubles.
        SlidingWindowBuckets::dropping(100_000, ms(3_600_000), ms(60_000)).unwrap(),
        SlidingWindowBuckets::weighted(100_000, ms(3_600_000), ms(60_000)).unwrap(),
        SlidingWindowBuckets::weighted(1_000_000, ms(86_400_000), ms(600_000)).unwrap(),
        SlidingWindowBuckets::dropping(1_000_000, ms(86_400_000), ms(3_600_000)).unwrap(),
        SlidingWindowBuckets::weighted(1_000_000, ms(86_400_000), ms(3_600_000)).unwrap(),
        // Scaled counts past 2^53 us: the server's exact (limb) arithmetic, not
        // its doubles.
        SlidingWindowBuckets::weighted(3_000_000, ms(86_400_000), ms(3_600_000)).unwrap(),
        SlidingWindowBuckets::dropping(3_000_000, ms(86_400_000), ms(3_600_000)).unwrap(),
    ];
    let starts = [0, 1_763_900_000_000_000, 11, 1 << 52];
    let cases = configs.iter().enumerate().map(|(i, config)| {
        let window_us = config.window().as_micros() as u64;
        let start = starts[i % starts.len()];
        (
            config,
            TraceShape::window(config.limit() + 1, config.limit(), window_us, start),
        )
    });
    traces(server.url(), 400, 2_000, cases).assert_each_above(100);
}

#[test]
fn threads_hammering_one_key_get_exactly_the_limit() {
    let server = RedisServer::start();
    for config in [
        SlidingWindowBuckets::dropping(300, Duration::from_secs(60), Duration::from_secs(1))
            .unwrap(),
        SlidingWindowBuckets::weighted(300, Duration::from_secs(60), Duration::from_millis(15))
            .unwrap(),
    ] {
        assert_hammer_grants(&server, "swb-hammer", &config, ((NOV_2025, 0), 120), 300);
    }
}

#[test]
fn a_cancel_at_the_instant_of_a_grant_gives_it_back_on_the_server() {
    let server = RedisServer::start();
    cancel_at_the_instant(
        server.url(),
        &SlidingWindowBuckets::dropping(3, Duration::from_secs(1), Duration::from_millis(100))
            .unwrap(),
        "swb-cancel",
    );
}

/// A window in the layout of earlier builds (decimal fields `n`, `t`, `o` and one
/// decimal count per non-empty slot) is refused with a typed error and left as it
/// was, not read as an empty window that would grant its whole limit again.
#[test]
fn a_window_in_the_older_decimal_layout_is_a_typed_error_and_stays_as_it_was() {
    let old: [(&[u8], &[u8]); 4] = [(b"n", b"1000"), (b"t", b"3"), (b"o", b"1000"), (b"8", b"3")];
    let window =
        SlidingWindowBuckets::dropping(3, Duration::from_secs(1), Duration::from_millis(1))
            .unwrap();
    assert_an_older_layout_is_refused_and_kept("swb-format", &window, &old);
}

#[test]
fn a_fresh_key_is_written_without_deleting_it_first() {
    // A first grant moves the ring from bucket 0 to now's, which clears every slot:
    // on a key the server does not hold there is nothing to delete, and the server
    // runs no DEL (commands a script runs count in `INFO commandstats`).
    use redis_support::{calls, take, unique_prefix};
    use sluicegate::stores::redis::{RedisOptions, RedisStore, TimeSource};
    use sluicegate::stores::Store;
    let server = RedisServer::start_own();
    let mut admin = server.connection();
    let window =
        SlidingWindowBuckets::dropping(10, Duration::from_secs(60), Duration::from_secs(1))
            .unwrap();
    let options = RedisOptions::default()
        .prefix(unique_prefix("fresh-buckets"))
        .unwrap()
        .time_source(TimeSource::Caller)
        .expiry_grace(Duration::from_secs(3600));
    let store: RedisStore<String, SlidingWindowBuckets> =
        RedisStore::open_with(server.url(), options).unwrap();
    let before = calls(&mut admin, "del");
    for key in ["a", "b", "c"] {
        let (granted, _) = store
            .apply_key::<(Decision, Receipt)>(&window, &key.to_owned(), NOV_2025, take(1))
            .unwrap();
        assert_eq!(granted.remaining(), 9);
    }
    assert_eq!(calls(&mut admin, "del"), before);
    assert_eq!(calls(&mut admin, "hset"), 3, "one write per fresh key");
}

/// A ring that can hold more than 64 non-empty buckets pads its header so that
/// Redis keeps its hash as a hash table; a ring of 60 buckets keeps the listpack.
/// Both decide as memory does while their rings fill and move.
#[test]
fn a_ring_of_many_buckets_is_kept_as_a_hash_table_and_decides_as_in_memory() {
    let server = RedisServer::start();
    let mut admin = server.connection();
    let minute = Duration::from_secs(60);
    for (buckets, bucket, stored) in [
        ("wide", Duration::from_millis(200), "hashtable"),
        ("narrow", Duration::from_secs(1), "listpack"),
    ] {
        let ring = SlidingWindowBuckets::dropping(1_000, minute, bucket).unwrap();
        let store: RedisStore<&str, SlidingWindowBuckets> =
            RedisStore::open_with(server.url(), caller_time_options(&unique_prefix(buckets)))
                .unwrap();
        let memory: MemoryStore<&str, SlidingWindowBuckets> = MemoryStore::new();
        let mut at = NOV_2025;
        // One call every 0.3 s for 75 s: a new bucket for almost every call, and a
        // ring that moves once the window is full.
        for _ in 0..250 {
            let on_redis = store
                .apply_key::<Decision>(&ring, &"k", at, take(1))
                .unwrap();
            let in_memory = memory
                .apply_key::<Decision>(&ring, &"k", at, take(1))
                .unwrap();
            assert_eq!(on_redis, in_memory, "{buckets} at {at}");
            assert!(on_redis.is_allowed(), "{buckets} at {at}");
            at += 3 * SECOND / 10;
        }
        let encoding = hash_encoding(&mut admin, &store.server_key(&"k"));
        assert_eq!(encoding, stored, "{buckets}");
    }
}
