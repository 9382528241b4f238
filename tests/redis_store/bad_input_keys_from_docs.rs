//! The Redis store's documented answers to hostile keys: texts that try to break
//! out of their hash tag, the server key layouts and braces in prefixes and tags,
//! one slot under a shared tag, and server keys holding another type.
#![cfg(feature = "redis")]

use super::bad_input_connections_from_docs::{apply_async_one, secs, store_error, Store1};
use crate::support::redis as redis_support;

use redis_support::trace::caller_time_options;
use redis_support::{take, unique_prefix, window, RedisServer, SECOND};
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket, SlidingLog, SlidingWindowBuckets};
use sluicegate::clock::ManualClock;
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore};
use sluicegate::stores::{Operation, Store};
use sluicegate::{Applied, ConfigError, Decision, Error, KeyedRateLimiter};

/// A blocking call of `step` on `keys`, all or nothing: each key's decision.
fn apply_all<K, A: RedisAlgorithm>(
    store: &RedisStore<K, A>,
    algorithm: &A,
    keys: &[K],
    now: u64,
    step: Operation<'_>,
) -> Result<Vec<Decision>, Error>
where
    RedisStore<K, A>: Store<K, A>,
{
    let mut out = vec![
        (
            Decision::never(0, 0, 0),
            sluicegate::algorithms::Receipt::NONE
        );
        keys.len()
    ];
    store.apply(algorithm, keys, now, step, &mut out)?;
    Ok(out.into_iter().map(|(d, _)| d).collect())
}

#[test]
fn hostile_keys_under_a_shared_tag_and_in_multi_key_calls_address_only_their_own_state() {
    let server = RedisServer::start();
    let fw = window(1);
    let keys: Vec<String> = [
        "",
        "}",
        "{",
        "{}",
        "a}b",
        "a\\]b",
        "\\",
        "x y",
        "ключ",
        "🔑{🔑}",
        "\u{0}",
        "k",
        "kk",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("{}x", "}".repeat(100_000)), "é".repeat(500_000)])
    .collect();
    for (what, options) in [
        ("own tags", caller_time_options(&unique_prefix("hk"))),
        (
            "shared tag",
            caller_time_options(&unique_prefix("hk"))
                .shared_tag("tag with spaces ∂")
                .unwrap(),
        ),
        (
            "unicode prefix",
            caller_time_options(&format!("préfixe ✓ {}:", unique_prefix("hk"))),
        ),
    ] {
        let store: RedisStore<String, FixedWindow> =
            RedisStore::open_with(server.url(), options).unwrap();
        let mut names: Vec<String> = keys.iter().map(|k| store.server_key(k)).collect();
        names.sort();
        names.dedup();
        assert_eq!(
            names.len(),
            keys.len(),
            "{what}: two keys share a server key"
        );
        // Every pair in one all-or-nothing call: both granted, then each refused.
        for pair in keys.chunks(2) {
            let d = apply_all(&store, &fw, pair, SECOND, take(1)).unwrap();
            assert!(
                d.iter().all(Decision::is_allowed),
                "{what}: {:?} limited by another key's state",
                short(pair)
            );
        }
        for key in &keys {
            let d = store
                .apply_key::<Decision>(&fw, key, SECOND, take(1))
                .unwrap();
            assert!(
                !d.is_allowed(),
                "{what}: {:?} lost its own state",
                short(std::slice::from_ref(key))
            );
        }
    }
}

fn short(keys: &[String]) -> Vec<String> {
    keys.iter().map(|k| k.chars().take(12).collect()).collect()
}

#[test]
fn the_documented_server_key_layouts_hold() {
    let store = Store1::open("redis://127.0.0.1/").unwrap();
    assert_eq!(store.server_key(&"user:{7}"), "rl:{kuser:{7\\]}:fw");
    let shared = Store1::open_with(
        "redis://127.0.0.1/",
        RedisOptions::default()
            .prefix("api:")
            .unwrap()
            .shared_tag("checkout")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        shared.server_key(&"user:{7}"),
        "api:{checkout}kuser:{7\\]:fw"
    );
    // A brace anywhere in a prefix or a tag is a configuration error naming it.
    for bad in ["{", "}", "a{b", "a}b", "{}"] {
        assert!(matches!(
            RedisOptions::default().prefix(bad),
            Err(ConfigError::InvalidText {
                what: "Redis key prefix",
                ..
            })
        ));
        assert!(matches!(
            RedisOptions::default().shared_tag(bad),
            Err(ConfigError::InvalidText { .. })
        ));
    }
}

/// Redis Cluster's slot of a key name: CRC16 (XMODEM) of its hash tag, or of the
/// whole name when it has no tag (no `{`, no `}` after it, or `{}`).
pub(crate) fn slot(name: &str) -> u16 {
    let bytes = name.as_bytes();
    let mut hashed = bytes;
    if let Some(open) = bytes.iter().position(|&b| b == b'{')
        && let Some(len) = bytes[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        hashed = &bytes[open + 1..open + 1 + len];
    }
    let mut crc: u16 = 0;
    for &b in hashed {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

#[test]
fn every_key_of_a_store_with_a_shared_tag_is_on_one_slot() {
    assert_eq!(slot("123456789"), 12739, "the CRC16 of the Cluster spec");
    for tag in ["checkout", "x", " ", "∂ é"] {
        let options = RedisOptions::default().shared_tag(tag).unwrap();
        let store = Store1::open_with("redis://127.0.0.1/", options).unwrap();
        let slots: Vec<u16> = ["alice", "bob", "ip:203.0.113.7", "", "}"]
            .iter()
            .map(|k| slot(&store.server_key(k)))
            .collect();
        assert!(
            slots.iter().all(|&s| s == slots[0]),
            "tag {tag:?}: slots {slots:?}"
        );
    }
    // Without one, all states of one identity share a slot.
    let store: RedisStore<&str, AllOf<(FixedWindow, SlidingLog)>> =
        RedisStore::open("redis://127.0.0.1/").unwrap();
    let set = AllOf::new((window(1), SlidingLog::new(1, secs(1)).unwrap()));
    for key in ["alice", "", "}", "{}", "a}b{c"] {
        let slots: Vec<u16> = store
            .server_keys(&set, &key)
            .iter()
            .map(|n| slot(n))
            .collect();
        assert_eq!(slots.len(), 2);
        assert_eq!(slots[0], slots[1], "{key:?}");
    }
}

#[test]
fn a_server_key_holding_another_type_is_a_typed_error_and_stays_as_it_was() {
    let server = RedisServer::start_own();
    let mut admin = server.connection();
    let prefix = unique_prefix("wrongtype");
    let fw_store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with(server.url(), caller_time_options(&prefix)).unwrap();
    let log_store: RedisStore<&str, SlidingLog> =
        RedisStore::open_with(server.url(), caller_time_options(&prefix)).unwrap();
    let bucket_store: RedisStore<&str, SlidingWindowBuckets> =
        RedisStore::open_with(server.url(), caller_time_options(&prefix)).unwrap();
    let lb_store: RedisStore<&str, LeakyBucket> =
        RedisStore::open_with(server.url(), caller_time_options(&prefix)).unwrap();
    let log = SlidingLog::new(3, secs(60)).unwrap();
    let buckets = SlidingWindowBuckets::dropping(3, secs(60), secs(1)).unwrap();
    let lb = LeakyBucket::meter(3, 1, secs(1)).unwrap();

    // A list where a window keeps a string; a string where a log keeps a hash; a
    // set where the buckets keep a hash; three bytes where a bucket keeps eight.
    let fw_key = fw_store.server_key(&"list");
    let () = redis::cmd("RPUSH")
        .arg(&fw_key)
        .arg("x")
        .query(&mut admin)
        .unwrap();
    let log_key = log_store.server_key(&"string");
    let () = redis::cmd("SET")
        .arg(&log_key)
        .arg("hello")
        .query(&mut admin)
        .unwrap();
    let bucket_key = bucket_store.server_key(&"set");
    let () = redis::cmd("SADD")
        .arg(&bucket_key)
        .arg("m")
        .query(&mut admin)
        .unwrap();
    let lb_key = lb_store.server_key(&"short");
    let () = redis::cmd("SET")
        .arg(&lb_key)
        .arg("abc")
        .query(&mut admin)
        .unwrap();

    let dump = |admin: &mut redis::Connection, key: &str| -> Vec<u8> {
        redis::cmd("DUMP").arg(key).query(admin).unwrap()
    };
    let before: Vec<Vec<u8>> = [&fw_key, &log_key, &bucket_key, &lb_key]
        .iter()
        .map(|k| dump(&mut admin, k))
        .collect();

    for op in [take(1), Operation::Peek { cost: 1 }] {
        let errors = [
            store_error(fw_store.apply_key::<Decision>(&window(3), &"list", SECOND, op)),
            store_error(log_store.apply_key::<Decision>(&log, &"string", SECOND, op)),
            store_error(bucket_store.apply_key::<Decision>(&buckets, &"set", SECOND, op)),
            store_error(lb_store.apply_key::<Decision>(&lb, &"short", SECOND, op)),
            store_error(apply_async_one(&fw_store, &window(3), &"list", SECOND, op)),
        ];
        for e in errors {
            assert_eq!(e.applied(), Applied::No, "{e}");
        }
    }
    // An all-or-nothing call with one such key grants on none.
    let e = store_error(apply_all(
        &fw_store,
        &window(3),
        &["fresh", "list"],
        SECOND,
        take(1),
    ));
    assert_eq!(e.applied(), Applied::No);
    let exists: u64 = redis::cmd("EXISTS")
        .arg(fw_store.server_key(&"fresh"))
        .query(&mut admin)
        .unwrap();
    assert_eq!(exists, 0, "the other key of a failed call was written");
    let after: Vec<Vec<u8>> = [&fw_key, &log_key, &bucket_key, &lb_key]
        .iter()
        .map(|k| dump(&mut admin, k))
        .collect();
    assert_eq!(before, after, "a key of another type was changed");
    // The keyed limiter reports the same error, and try_acquire answers false.
    let limiter = KeyedRateLimiter::with_store(window(3), fw_store, ManualClock::new());
    assert!(matches!(limiter.check(&"list", 1), Err(Error::Store(_))));
    assert!(!limiter.try_acquire(&"list"));
}
