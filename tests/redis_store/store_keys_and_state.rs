//! What the Redis store keeps on a real server: peeks and refusals that change
//! nothing and idle keys that expire, a key outliving its window by the expiry
//! grace at the caller's time, hostile key texts addressing only their own state, a
//! prefix or tag with a brace refused, a state in another format refused and kept,
//! and a string-keyed limiter taking `str` for the same server key.
#![cfg(feature = "redis")]

use super::store_common::take_one;
use crate::support::redis as redis_support;

use redis_support::trace::caller_time_options;
use redis_support::{
    assert_unapplied_error, current_thread_runtime, take, unique_prefix, window, RedisServer,
    SECOND, YEAR,
};
use sluicegate::algorithms::FixedWindow;
use sluicegate::algorithms::Receipt;
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::stores::{Operation, Store};
use sluicegate::Decision;
use std::time::{Duration, Instant};

#[test]
fn peeks_and_refusals_change_nothing_and_idle_keys_expire() {
    let server = RedisServer::start_own();
    let mut admin = server.connection();
    let dbsize =
        |admin: &mut redis::Connection| -> u64 { redis::cmd("DBSIZE").query(admin).unwrap() };
    // Server time, windows of 100 ms: keys expire on their own.
    let fw = FixedWindow::new(2, Duration::from_millis(100)).unwrap();
    let store: RedisStore<String, FixedWindow> = RedisStore::open(server.url()).unwrap();
    for i in 0..50 {
        let d = store
            .apply_key::<(Decision, Receipt)>(
                &fw,
                &format!("peek{i}"),
                0,
                Operation::Peek { cost: 1 },
            )
            .map(|(d, _)| d)
            .unwrap();
        assert!(d.is_allowed());
    }
    assert_eq!(dbsize(&mut admin), 0, "a peek creates nothing");
    // A refused call (cost above the limit, or a full window) writes nothing.
    assert!(store
        .apply_key::<(Decision, Receipt)>(&fw, &"big".to_owned(), 0, take(3))
        .map(|(d, _)| d)
        .unwrap()
        .is_never());
    assert_eq!(dbsize(&mut admin), 0);
    // A refused call leaves the state as it was (a year-long window neither turns
    // nor expires between the two reads).
    let year = FixedWindow::new(1, YEAR).unwrap();
    let long: RedisStore<String, FixedWindow> = RedisStore::open(server.url()).unwrap();
    assert!(long
        .apply_key::<(Decision, Receipt)>(&year, &"held".to_owned(), 0, take(1))
        .map(|(d, _)| d)
        .unwrap()
        .is_allowed());
    let key = long.server_key(&"held".to_owned());
    let before: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut admin).unwrap();
    assert!(!long
        .apply_key::<(Decision, Receipt)>(&year, &"held".to_owned(), 0, take(1))
        .map(|(d, _)| d)
        .unwrap()
        .is_allowed());
    let after: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut admin).unwrap();
    assert_eq!(after, before);
    let () = redis::cmd("DEL").arg(&key).query(&mut admin).unwrap();
    // Keys written now exist until their window ends (a write just before a window
    // edge may expire at once, so write until one is seen).
    let mut seen = false;
    for round in 0..5 {
        for i in 0..50 {
            store
                .apply_key::<(Decision, Receipt)>(&fw, &format!("user{round}-{i}"), 0, take(1))
                .map(|(d, _)| d)
                .unwrap();
        }
        if dbsize(&mut admin) > 0 {
            seen = true;
            break;
        }
    }
    assert!(seen, "no key was written");
    // After the idle horizon (one window) the database is empty again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while dbsize(&mut admin) > 0 {
        assert!(Instant::now() < deadline, "keys did not expire");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn hostile_key_texts_address_only_their_own_state() {
    let server = RedisServer::start();
    let fw = window(1);
    let store: RedisStore<String, FixedWindow> =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("hostile")))
            .unwrap();
    let mut keys: Vec<String> = [
        "",
        "}",
        "{",
        "{}",
        "}{",
        "a}b",
        "a\\]b",
        "\\",
        "\\\\]",
        "x:y z",
        "\u{0}\u{1}\u{7f}\u{ff}",
        "{user}",
        "user",
        "k",
        "kuser",
        "rl:{kuser}:fw",
        "\r\n*1\r\n$4\r\nPING\r\n",
        "'; return 1 --",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    keys.push("{".repeat(10_240));
    keys.push("}".repeat(10_240));
    keys.push("é}".repeat(3_000));
    for key in &keys {
        let d = store
            .apply_key::<(Decision, Receipt)>(&fw, key, SECOND, take(1))
            .map(|(d, _)| d)
            .unwrap();
        assert!(d.is_allowed(), "{key:?} was limited by another key's state");
    }
    for key in &keys {
        let d = store
            .apply_key::<(Decision, Receipt)>(&fw, key, SECOND, take(1))
            .map(|(d, _)| d)
            .unwrap();
        assert!(!d.is_allowed(), "{key:?} lost its own state");
    }
}

#[test]
fn a_prefix_or_tag_with_a_brace_is_a_configuration_error() {
    let err = RedisOptions::default().prefix("rl:{x").unwrap_err();
    assert!(
        matches!(err, sluicegate::ConfigError::InvalidText { .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "a Redis key prefix may not contain '{' or '}' (it would change the keys' hash tag, and with it their Cluster slot)"
    );
    let err = RedisOptions::default().shared_tag("}").unwrap_err();
    assert!(matches!(
        err,
        sluicegate::ConfigError::InvalidText {
            what: "shared hash tag",
            ..
        }
    ));
}

#[test]
fn a_state_in_another_format_is_a_typed_error_and_stays_as_it_was() {
    let server = RedisServer::start();
    let mut admin = server.connection();
    let store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("format"))).unwrap();
    // What an older build kept at the key: text, not packed doubles.
    let key = store.server_key(&"k");
    let () = redis::cmd("SET")
        .arg(&key)
        .arg("12 3")
        .query(&mut admin)
        .unwrap();
    assert_unapplied_error(
        store.apply_key::<(Decision, Receipt)>(&window(5), &"k", SECOND, take(1)),
        "another format",
    );
    let kept: String = redis::cmd("GET").arg(&key).query(&mut admin).unwrap();
    assert_eq!(kept, "12 3");
}

#[test]
fn at_the_callers_time_a_key_outlives_its_window_by_the_expiry_grace() {
    use sluicegate::stores::redis::TimeSource;
    // The caller's clock stands still (a virtual clock in a test) while the
    // server's runs: the 100 ms window has not ended for the caller, so its key
    // must still be there once 100 ms have passed on the server.
    let server = RedisServer::start();
    let fw = FixedWindow::new(1, Duration::from_millis(100)).unwrap();
    let options = RedisOptions::default()
        .prefix(unique_prefix("grace"))
        .unwrap()
        .time_source(TimeSource::Caller)
        .expiry_grace(Duration::from_secs(5));
    let store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with(server.url(), options).unwrap();
    assert!(take_one(&store, &fw).is_allowed());
    let ttl: i64 = redis::cmd("PTTL")
        .arg(store.server_key(&"k"))
        .query(&mut server.connection())
        .unwrap();
    // The grace and the window's 100 ms, less the server's time since the write:
    // a loaded machine may stall between the two, so only seconds are asked.
    assert!((2_000..=5_100).contains(&ttl), "{ttl} ms");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!take_one(&store, &fw).is_allowed(), "the key expired early");
}

#[test]
fn a_string_keyed_limiter_on_redis_takes_str_for_the_same_server_key() {
    let server = RedisServer::start();
    let store: RedisStore<String, FixedWindow> = RedisStore::open_with(
        server.url(),
        caller_time_options(&unique_prefix("borrowed")),
    )
    .unwrap();
    assert_eq!(store.server_key("k"), store.server_key(&String::from("k")));
    let clock = sluicegate::clock::ManualClock::new();
    let limiter = sluicegate::KeyedRateLimiter::with_store(window(3), store, clock);
    assert!(limiter.try_acquire("k"));
    assert!(limiter.try_acquire(&String::from("k")));
    assert_eq!(limiter.check("k", 1).unwrap().remaining(), 0);
    assert!(!limiter.try_acquire(&String::from("k")));
    let mut each = Vec::new();
    let refused = limiter
        .check_each("k", 1, &mut |d| each.push(d.remaining()))
        .unwrap();
    assert!(!refused.is_allowed());
    assert_eq!(each, [0]);
    assert_eq!(limiter.peek("other", 1).unwrap().remaining(), 2);
    let runtime = current_thread_runtime();
    let handle = limiter.to_async();
    let d = runtime.block_on(handle.check("other", 1)).unwrap();
    assert_eq!(d.remaining(), 2);
    assert_eq!(
        limiter.peek(&String::from("other"), 1).unwrap().remaining(),
        1
    );
}
