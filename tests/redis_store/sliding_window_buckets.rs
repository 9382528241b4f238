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
        // A ring of 60 buckets at small limits: one string of its non-empty buckets.
        SlidingWindowBuckets::dropping(10, ms(60_000), ms(1_000)).unwrap(),
        SlidingWindowBuckets::weighted(50, ms(60_000), ms(1_000)).unwrap(),
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
    // A ring that holds few counts is kept as a string: the hash is refused too.
    let small =
        SlidingWindowBuckets::dropping(3, Duration::from_secs(1), Duration::from_millis(100))
            .unwrap();
    assert_an_older_layout_is_refused_and_kept("swb-format-small", &small, &old);
}

/// A ring that holds few counts is one string: a fresh key is one `GET` that finds
/// nothing and one `SET`, and a call that moves the ring several buckets (past
/// buckets that leave it) is one `GET` and, granted, one `SET`: no other command
/// (commands a script runs count in `INFO commandstats`).
#[test]
fn a_small_ring_is_read_and_written_by_one_get_and_one_set() {
    use redis_support::calls;
    let server = RedisServer::start_own();
    let mut admin = server.connection();
    let window =
        SlidingWindowBuckets::dropping(10, Duration::from_secs(60), Duration::from_secs(1))
            .unwrap();
    let store: RedisStore<String, SlidingWindowBuckets> = RedisStore::open_with(
        server.url(),
        caller_time_options(&unique_prefix("small-buckets")),
    )
    .unwrap();
    let memory: MemoryStore<String, SlidingWindowBuckets> = MemoryStore::new();
    let others = ["del", "exists", "hget", "hmget", "hset", "hdel", "pexpire"];
    let counts = |admin: &mut redis::Connection| -> (Vec<u64>, u64, u64) {
        let others = others.iter().map(|name| calls(admin, name)).collect();
        (others, calls(admin, "get"), calls(admin, "set"))
    };
    let before = counts(&mut admin);
    for key in ["a", "b", "c"] {
        let (granted, _) = store
            .apply_key::<(Decision, Receipt)>(&window, &key.to_owned(), NOV_2025, take(1))
            .unwrap();
        assert_eq!(granted.remaining(), 9);
    }
    let fresh = counts(&mut admin);
    assert_eq!(fresh.0, before.0, "{others:?}");
    assert_eq!((fresh.1, fresh.2), (before.1 + 3, before.2 + 3));
    // One key paced at 7 s a call, past its first window: each call moves the ring 7
    // buckets, and some take buckets with a count out of it; granted or refused as
    // in memory.
    let mut at = NOV_2025;
    let (mut granted, mut refused) = (0, 0);
    for _ in 0..30 {
        let on_redis = store
            .apply_key::<Decision>(&window, &"d".to_owned(), at, take(2))
            .unwrap();
        let in_memory = memory
            .apply_key::<Decision>(&window, &"d".to_owned(), at, take(2))
            .unwrap();
        assert_eq!(on_redis, in_memory, "at {at}");
        if on_redis.is_allowed() {
            granted += 1;
        } else {
            refused += 1;
        }
        at += 7 * SECOND;
    }
    assert!(
        granted > 5 && refused > 5,
        "{granted} granted, {refused} refused"
    );
    let paced = counts(&mut admin);
    assert_eq!(paced.0, before.0, "{others:?}");
    assert_eq!(paced.1, fresh.1 + 30, "one GET a call");
    assert_eq!(paced.2, fresh.2 + granted, "one SET a grant");
}

/// One key stepped by each phase's window in turn (`calls` reserves of `cost`, half
/// a second apart), every answer compared with memory's, and the key's layout
/// after each phase compared with the phase's ("string", or the hash's encoding):
/// how many calls were granted and refused, and how many left a string whose
/// counts are doubles.
fn phases(name: &str, phases: &[(&SlidingWindowBuckets, u64, u32, &str)]) -> (u32, u32, u32) {
    let server = RedisServer::start();
    let mut admin = server.connection();
    let store: RedisStore<&str, SlidingWindowBuckets> =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix(name))).unwrap();
    let memory: MemoryStore<&str, SlidingWindowBuckets> = MemoryStore::new();
    let key = store.server_key(&"k");
    let mut at = NOV_2025;
    let (mut granted, mut refused, mut wide) = (0, 0, 0);
    for &(config, cost, calls, stored) in phases {
        for _ in 0..calls {
            let on_redis = store
                .apply_key::<Decision>(config, &"k", at, take(cost))
                .unwrap();
            let in_memory = memory
                .apply_key::<Decision>(config, &"k", at, take(cost))
                .unwrap();
            assert_eq!(
                on_redis,
                in_memory,
                "{name}: limit {} at {at}",
                config.limit()
            );
            if on_redis.is_allowed() {
                granted += 1;
            } else {
                refused += 1;
            }
            // A string's byte after its two leading doubles: 1 while its counts
            // are doubles.
            let kind: String = redis::cmd("TYPE").arg(&key).query(&mut admin).unwrap();
            if kind == "string" {
                let flag: Vec<u8> = redis::cmd("GETRANGE")
                    .arg(&key)
                    .arg(16)
                    .arg(16)
                    .query(&mut admin)
                    .unwrap();
                wide += u32::from(flag == [1]);
            }
            at += SECOND / 2;
        }
        let kind: String = redis::cmd("TYPE").arg(&key).query(&mut admin).unwrap();
        let layout = if kind == "hash" {
            hash_encoding(&mut admin, &key)
        } else {
            kind
        };
        assert_eq!(
            layout,
            stored,
            "{name}: after the phase of limit {}",
            config.limit()
        );
    }
    (granted, refused, wide)
}

/// A limit raised past the small rings' and lowered again on one key in use: the
/// key moves between the string and the hash, and every answer is memory's,
/// through buckets holding more than a byte counts (after grants of 300 at a limit
/// of 1,000, kept as doubles) and the ring moving on.
#[test]
fn a_limit_raised_and_lowered_across_the_layouts_decides_as_in_memory() {
    let minute = Duration::from_secs(60);
    let second = Duration::from_secs(1);
    let small = SlidingWindowBuckets::dropping(10, minute, second).unwrap();
    let large = SlidingWindowBuckets::dropping(1_000, minute, second).unwrap();
    let (granted, refused, wide) = phases(
        "swb-sizes",
        &[
            (&small, 1, 60, "string"),
            (&large, 300, 20, "listpack"),
            (&small, 1, 200, "string"),
            (&large, 7, 60, "listpack"),
            (&small, 2, 200, "string"),
        ],
    );
    assert!(
        granted > 50 && refused > 100,
        "{granted} granted, {refused} refused"
    );
    assert!(wide > 0, "no string kept its counts as doubles");
}

/// A limit raised and lowered on a ring of 300 buckets: its hash's header is
/// padded at the larger limit and not at the smaller, and either reads the other's.
#[test]
fn a_limit_raised_and_lowered_across_the_hash_table_size_decides_as_in_memory() {
    let minute = Duration::from_secs(60);
    let fine = Duration::from_millis(200);
    let small = SlidingWindowBuckets::weighted(30, minute, fine).unwrap();
    let large = SlidingWindowBuckets::weighted(1_000, minute, fine).unwrap();
    // The smaller limit refuses until the larger one's grants have all left the
    // ring, reading the padded header; its first grant then writes the key anew,
    // which a listpack holds again.
    let (granted, refused, _) = phases(
        "swb-padding",
        &[
            (&small, 1, 100, "listpack"),
            (&large, 40, 60, "hashtable"),
            (&small, 1, 200, "listpack"),
        ],
    );
    assert!(
        granted > 50 && refused > 50,
        "{granted} granted, {refused} refused"
    );
}

/// A ring that can hold more than 64 non-empty buckets pads its header so that
/// Redis keeps its hash as a hash table; a ring of 60 buckets keeps the listpack,
/// and at a limit of 50 or less is one string. Each decides as memory does while
/// its ring fills and moves.
#[test]
fn each_size_of_ring_keeps_its_layout_and_decides_as_in_memory() {
    let server = RedisServer::start();
    let mut admin = server.connection();
    let minute = Duration::from_secs(60);
    for (buckets, limit, bucket, stored) in [
        ("wide", 1_000, Duration::from_millis(200), "hashtable"),
        ("narrow", 1_000, Duration::from_secs(1), "listpack"),
        ("small", 50, Duration::from_secs(1), "string"),
    ] {
        let ring = SlidingWindowBuckets::dropping(limit, minute, bucket).unwrap();
        let store: RedisStore<&str, SlidingWindowBuckets> =
            RedisStore::open_with(server.url(), caller_time_options(&unique_prefix(buckets)))
                .unwrap();
        let memory: MemoryStore<&str, SlidingWindowBuckets> = MemoryStore::new();
        let mut at = NOV_2025;
        let (mut granted, mut refused) = (0, 0);
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
            if on_redis.is_allowed() {
                granted += 1;
            } else {
                refused += 1;
            }
            at += 3 * SECOND / 10;
        }
        assert!(granted >= 50, "{buckets}: {granted} granted");
        if limit == 1_000 {
            assert_eq!(refused, 0, "{buckets}");
        } else {
            assert!(refused > 100, "{buckets}: {refused} refused");
        }
        let key = store.server_key(&"k");
        let kind: String = redis::cmd("TYPE").arg(&key).query(&mut admin).unwrap();
        let layout = if kind == "hash" {
            hash_encoding(&mut admin, &key)
        } else {
            kind
        };
        assert_eq!(layout, stored, "{buckets}");
    }
}

/// A string that is not a small ring's (too short, of an odd length, a width byte
/// that is neither 0 nor 1, doubles too short for their header) at a small ring's
/// key is refused with the typed "another format" error, applying nothing, and
/// left as it was.
#[test]
fn a_string_of_another_format_at_a_small_ring_is_a_typed_error_and_stays_as_it_was() {
    use redis_support::assert_unapplied_error;
    let server = RedisServer::start();
    let mut admin = server.connection();
    let window =
        SlidingWindowBuckets::dropping(10, Duration::from_secs(60), Duration::from_secs(1))
            .unwrap();
    let store: RedisStore<&str, SlidingWindowBuckets> = RedisStore::open_with(
        server.url(),
        caller_time_options(&unique_prefix("swb-strings")),
    )
    .unwrap();
    let key = store.server_key(&"k");
    let odd = vec![0u8; 23];
    let mut width = vec![0u8; 24];
    width[16] = 5;
    let mut short_doubles = vec![0u8; 40];
    short_doubles[16] = 1;
    for value in [b"12 3".to_vec(), odd, width, short_doubles] {
        let () = redis::cmd("SET")
            .arg(&key)
            .arg(&value)
            .query(&mut admin)
            .unwrap();
        assert_unapplied_error(
            store.apply_key::<(Decision, Receipt)>(&window, &"k", NOV_2025, take(1)),
            "another format",
        );
        let kept: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut admin).unwrap();
        assert_eq!(kept, value);
    }
}
