//! The Redis store fed hostile input through the keyed limiter, as the store's
//! module docs, its options' docs and `Error`/`Applied` describe the answers:
//! key texts that try to break out of their hash tag or collide after escaping
//! ("any key text addressing only its own state"), prefixes with odd but legal
//! text, every call on a server that is not there (`Error::Store` with
//! `Applied::No`, within the connect timeout, blocking and async), a zero connect
//! timeout, and configurations past what the server counts exactly (typed errors
//! naming the parameter, or memory's answer).
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;

use redis_support::trace::caller_time_options;
use redis_support::{unique_prefix, unreachable_store, window, RedisServer};
use sluicegate::algorithms::{FixedWindow, SlidingLog};
use sluicegate::clock::ManualClock;
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::{Applied, Error, KeyedRateLimiter};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

type Limiter<A> = KeyedRateLimiter<String, A, RedisStore<String, A>, ManualClock>;

fn limiter_on<A: sluicegate::stores::redis::RedisAlgorithm>(
    server: &RedisServer,
    algorithm: A,
    options: RedisOptions,
) -> Limiter<A> {
    let store = RedisStore::open_with(server.url(), options).unwrap();
    KeyedRateLimiter::with_store(algorithm, store, ManualClock::new())
}

/// Keys that open, close or fake a hash tag, are empty or blank, hold control
/// characters, collide with another after a naive escaping, or are long.
fn hostile_keys() -> Vec<String> {
    let mut keys: Vec<String> = [
        "",
        " ",
        "{",
        "}",
        "{}",
        "}{",
        "{k}",
        "k",
        "a}",
        "a\\]",
        "a\\}",
        "\\",
        "\\\\",
        "\\]",
        "]",
        ":",
        "k:fixed",
        "k}:fixed",
        "\n",
        "\r\n",
        "\0",
        "\0\0",
        "\u{7f}",
        "\u{feff}",
        "😀",
        "é",
        "e\u{301}",
        "rl:{kx}:fixed",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    keys.push("x".repeat(100_000));
    keys.push("x".repeat(99_999) + "y");
    keys.push("}".repeat(10_000));
    keys
}

#[test]
fn hostile_key_texts_each_address_only_their_own_state() {
    let server = RedisServer::start();
    let options = caller_time_options(&unique_prefix("hostile-keys"));
    let limiter = limiter_on(&server, window(2), options);
    let keys = hostile_keys();
    for key in &keys {
        let input = format!("key {:?}", key.chars().take(20).collect::<String>());
        let first = limiter
            .check(key.as_str(), 1)
            .unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(
            first.remaining(),
            1,
            "{input}: shares a state with an earlier key"
        );
        assert!(
            limiter.check(key.as_str(), 1).unwrap().is_allowed(),
            "{input}"
        );
        assert!(
            !limiter.check(key.as_str(), 1).unwrap().is_allowed(),
            "{input}: a third call"
        );
    }
    // Each pair of keys in one multi-key call: both spent, refused whole.
    for pair in keys.windows(2) {
        let d = limiter.check_all(pair, 1).unwrap();
        assert!(
            !d.is_allowed(),
            "{:?}",
            pair.iter().map(|k| k.len()).collect::<Vec<_>>()
        );
    }
    // And fresh texts right beside them are fresh.
    for key in &keys {
        let twin = format!("{key}\u{1}");
        assert_eq!(
            limiter.peek(twin.as_str(), 1).unwrap().remaining(),
            1,
            "{twin:?}"
        );
    }
}

#[test]
fn prefixes_without_braces_are_any_text_and_keep_stores_apart() {
    // prefix: "ConfigError::InvalidText if it contains { or }": nothing else.
    let server = RedisServer::start();
    let base = unique_prefix("odd-prefixes");
    let mut stores = Vec::new();
    for odd in ["", ":", "\n", " ", "\0", "\\", "]", "é"] {
        let prefix = format!("{base}{odd}");
        let options = caller_time_options(&base).prefix(prefix.clone());
        let options = options.unwrap_or_else(|e| panic!("prefix {prefix:?}: {e}"));
        stores.push((prefix, limiter_on(&server, window(1), options)));
    }
    for (prefix, limiter) in &stores {
        assert!(
            limiter.try_acquire("k"),
            "prefix {prefix:?}: shares a state with another"
        );
    }
    for (prefix, limiter) in &stores {
        assert!(
            !limiter.try_acquire("k"),
            "prefix {prefix:?}: its state was not kept"
        );
    }
    for bad in ["{", "}", "a{b}", "}{"] {
        match RedisOptions::default().prefix(bad) {
            Err(sluicegate::ConfigError::InvalidText { what, why }) => {
                assert!(what.contains("prefix"), "{bad:?}: {what}");
                assert!(!why.is_empty());
            }
            other => panic!(
                "prefix {bad:?}: {:?}",
                other.map(|o| o.get_prefix().to_owned())
            ),
        }
    }
}

/// Asserts `result` failed in the store, certainly unapplied, in words that say so.
fn unapplied<T: std::fmt::Debug>(input: &str, result: Result<T, Error>) {
    match result {
        Err(Error::Store(e)) => {
            assert_eq!(e.store(), "redis", "{input}: {e}");
            assert_eq!(e.applied(), Applied::No, "{input}: {e}");
            assert!(e.to_string().contains("it was not applied"), "{input}: {e}");
            assert!(
                std::error::Error::source(&e).is_some(),
                "{input}: no source"
            );
        }
        other => panic!("{input}: expected a store error, got {other:?}"),
    }
}

#[test]
fn every_call_on_a_server_that_is_not_there_fails_unapplied_within_the_connect_timeout() {
    let store: RedisStore<String, FixedWindow> = unreachable_store("absent");
    let limiter = KeyedRateLimiter::with_store(window(3), store, ManualClock::new());
    let keys = ["a".to_owned(), "b".to_owned()];
    let started = Instant::now();
    unapplied("check", limiter.check("a", 1));
    unapplied("peek", limiter.peek("a", 1));
    unapplied("check_each", limiter.check_each("a", 1, &mut |_| {}));
    unapplied("check_all", limiter.check_all(&keys, 1));
    unapplied("peek_all", limiter.peek_all(&keys, 1));
    unapplied("acquire", limiter.acquire("a"));
    unapplied("acquire_n", limiter.acquire_n("a", 2));
    unapplied("acquire_all", limiter.acquire_all(&keys, 1));
    unapplied(
        "try_acquire_n_timeout",
        limiter.try_acquire_n_timeout("a", 1, Duration::MAX),
    );
    unapplied("reserve", limiter.reserve("a", 1).map(|r| r.is_ok()));
    unapplied(
        "reserve_all",
        limiter.reserve_all(&keys, 1).map(|r| r.is_ok()),
    );
    assert!(
        !limiter.try_acquire("a"),
        "try_acquire on a failed store fails closed"
    );
    let handle = limiter.to_async();
    futures::executor::block_on(async {
        unapplied("async check", handle.check("a", 1).await);
        unapplied("async acquire", handle.acquire("a").await);
        unapplied("async acquire_all", handle.acquire_all(&keys, 1).await);
        unapplied(
            "async reserve",
            handle.reserve("a", 1).await.map(|r| r.is_ok()),
        );
    });
    // 17 calls, each given up after at most the 200 ms connect timeout.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(17), "took {took:?}");
    assert!(
        limiter.clock().sleeps().iter().all(|s| s.is_zero()),
        "a failed call slept"
    );
    // Bad costs are refused before anything is tried: not a store error.
    assert_eq!(limiter.check("a", 0), Err(Error::ZeroCost));
    assert!(matches!(
        limiter.check_all(&[], 1),
        Err(Error::InvalidCount { .. })
    ));
}

#[test]
fn a_zero_connect_timeout_connects_or_fails_unapplied_at_once() {
    // connect_timeout's docs: a zero duration is raised to 1 ms. On loopback the
    // call connects, or fails unapplied as a timeout, never waiting for ever and
    // never refused as a zero timeout the socket cannot take.
    let server = RedisServer::start();
    let options = RedisOptions::default()
        .prefix(unique_prefix("zero-connect"))
        .unwrap()
        .connect_timeout(Duration::ZERO);
    let store: RedisStore<String, FixedWindow> =
        RedisStore::open_with(server.url(), options).unwrap();
    let limiter = KeyedRateLimiter::with_store(window(3), store, ManualClock::new());
    let started = Instant::now();
    let got = catch_unwind(AssertUnwindSafe(|| limiter.check("k", 1)))
        .unwrap_or_else(|_| panic!("a zero connect timeout panicked"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    match got {
        Ok(d) => assert!(d.is_allowed(), "{d:?}"),
        Err(e) => {
            assert!(e.to_string().contains("timed out"), "{e}");
            unapplied("zero connect timeout", Err::<(), _>(e));
        }
    }
    let started = Instant::now();
    let got = futures::executor::block_on(limiter.to_async().check("k", 1));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "async took {:?}",
        started.elapsed()
    );
    if let Err(e) = got {
        unapplied("zero connect timeout, async", Err::<(), _>(e));
    }
}

#[test]
fn a_spacing_that_never_ends_is_memorys_answer_or_a_typed_error_naming_it() {
    // Memory: Duration::MAX "allows one call, ever". Redis: "durations whole
    // microseconds ... Anything else is a typed error", nothing applied.
    let server = RedisServer::start();
    for spacing in [
        Duration::MAX,
        Duration::from_micros(1 << 53),
        Duration::from_secs(300 * 365 * 86_400),
    ] {
        let input = format!("spacing {spacing:?}");
        let log = SlidingLog::new(5, Duration::from_secs(60))
            .unwrap()
            .with_min_spacing(spacing);
        let options = caller_time_options(&unique_prefix("spacing"));
        let limiter = limiter_on(&server, log, options);
        let first = catch_unwind(AssertUnwindSafe(|| limiter.check("k", 1)))
            .unwrap_or_else(|_| panic!("{input}: panicked"));
        match first {
            Ok(d) => {
                assert!(d.is_allowed(), "{input}: the first call {d:?}");
                limiter.clock().advance(Duration::from_secs(3600));
                let next = limiter.check("k", 1).unwrap();
                assert!(
                    next.is_never(),
                    "{input}: memory refuses for good; Redis {next:?}"
                );
                assert_eq!(
                    limiter.acquire("k"),
                    Err(Error::Never { cost: 1 }),
                    "{input}"
                );
            }
            Err(Error::InvalidDuration { what, value, .. }) => {
                assert!(what.contains("spacing"), "{input}: names {what:?}");
                // The spacing as the crate keeps it: nanoseconds, Duration::MAX saturated.
                assert_eq!(
                    value,
                    spacing.min(Duration::from_nanos(u64::MAX)),
                    "{input}"
                );
                let peeked = limiter.peek("k", 1);
                assert!(
                    matches!(peeked, Err(Error::InvalidDuration { .. })),
                    "{input}: {peeked:?}"
                );
            }
            Err(other) => panic!("{input}: {other:?}"),
        }
    }
}

#[test]
fn windows_past_the_servers_microseconds_are_typed_errors_naming_the_window() {
    // "every number a script computes stays an integer below 2^53 ... configurations
    // that would break this are refused with a typed error before anything is sent".
    let server = RedisServer::start();
    let past = Duration::from_micros((1 << 53) + 1);
    let fw = FixedWindow::new(1, past).unwrap();
    let options = caller_time_options(&unique_prefix("past-2-53"));
    let limiter = limiter_on(&server, fw, options);
    for (call, got) in [
        ("check", limiter.check("k", 1).map(drop)),
        ("peek", limiter.peek("k", 1).map(drop)),
        ("acquire", limiter.acquire("k").map(drop)),
    ] {
        match got {
            Err(Error::InvalidDuration {
                what,
                value,
                requirement,
            }) => {
                assert!(what.contains("window"), "{call}: names {what:?}");
                assert_eq!(value, past, "{call}");
                assert!(!requirement.is_empty(), "{call}");
            }
            other => panic!("{call}: {other:?}"),
        }
    }
    assert!(
        limiter.clock().sleeps().is_empty(),
        "a refused configuration slept"
    );
}
