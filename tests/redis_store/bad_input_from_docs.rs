//! The Redis store's documented answers to bad input and edges, read from its
//! module and option docs and the error types' docs: URLs that cannot be used,
//! hostile keys, prefixes and tags, counts and durations at and past what the
//! server counts exactly, costs of 0 and above capacity, the caller's clock, and
//! server keys holding something else. Each answer is a typed error or the memory
//! store's decision, never a panic.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;

use redis_support::trace::caller_time_options;
use redis_support::{take, unique_prefix, window, RedisServer, SECOND};
use sluicegate::algorithms::{
    AllOf, FixedWindow, LeakyBucket, SlidingLog, SlidingWindowBuckets, SlidingWindowCounter,
    SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::ManualClock;
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore, TimeSource};
use sluicegate::stores::{MemoryStore, Operation, Store};
use sluicegate::{Applied, ConfigError, Decision, Error, KeyedRateLimiter};
use std::time::{Duration, Instant};

type Store1 = RedisStore<&'static str, FixedWindow>;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// What an `open` refused, or a panic naming what it returned instead.
fn invalid_url(result: Result<Store1, ConfigError>) -> String {
    match result {
        Err(ConfigError::InvalidUrl { why }) => why,
        Err(other) => panic!("expected InvalidUrl, got {other:?}"),
        Ok(_) => panic!("expected InvalidUrl, got a store"),
    }
}

/// The store error of `result`: panics on anything else.
fn store_error<T: std::fmt::Debug>(result: Result<T, Error>) -> sluicegate::StoreError {
    match result {
        Err(Error::Store(e)) => e,
        other => panic!("expected Error::Store, got {other:?}"),
    }
}

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

/// The async call of `step` on `key`, awaited on a bare executor: its decision.
fn apply_async_one<K: Clone, A: RedisAlgorithm>(
    store: &RedisStore<K, A>,
    algorithm: &A,
    key: &K,
    now: u64,
    step: Operation<'_>,
) -> Result<Decision, Error>
where
    RedisStore<K, A>: Store<K, A>,
{
    let pending = store.apply_async(algorithm, std::slice::from_ref(key), now, step);
    futures::executor::block_on(pending).map(|out| out[0].0)
}

#[test]
fn urls_that_cannot_be_used_are_refused_without_repeating_a_password() {
    for url in [
        "",
        " ",
        "redis://:hunter2@127.0.0.1:99999/",
        "redis://user:hunter2@127.0.0.1:-1/",
        "redis://user:hunter2@[::1/",
        "http://user:hunter2@127.0.0.1/",
        "redis://user:hunter2@127.0.0.1/db-hunter2",
        "unix:hunter2",
    ] {
        let why = invalid_url(Store1::open(url));
        assert!(!why.is_empty(), "{url:?}: an empty reason");
        assert!(!why.contains("hunter2"), "{url:?}: {why}");
    }
    // A Cluster needs nodes, and nodes that go together; the reasons name no
    // password either.
    let none: [&str; 0] = [];
    let why = match Store1::open_cluster(none, RedisOptions::default()) {
        Err(ConfigError::InvalidUrl { why }) => why,
        other => panic!("no nodes: {:?}", other.err()),
    };
    assert!(!why.is_empty());
    for nodes in [
        [
            "redis://ann:hunter2@127.0.0.1:7000/",
            "redis://bob:swordfish@127.0.0.1:7001/",
        ],
        [
            "redis://:hunter2@127.0.0.1:7000/",
            "redis://127.0.0.1:7001/",
        ],
        ["redis://127.0.0.1:7000/", "rediss://127.0.0.1:7001/"],
    ] {
        let why = match Store1::open_cluster(nodes, RedisOptions::default()) {
            Err(ConfigError::InvalidUrl { why }) => why,
            other => panic!("{nodes:?}: {:?}", other.err()),
        };
        assert!(
            !why.contains("hunter2") && !why.contains("swordfish"),
            "{why}"
        );
    }
}

#[test]
fn a_url_that_parses_but_cannot_serve_fails_at_the_first_call_unapplied() {
    let server = RedisServer::start_own();
    let port = server
        .url()
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let fw = window(5);
    for url in [
        // A database the server does not have (16 by default).
        format!("redis://127.0.0.1:{port}/99"),
        // A Unix socket nobody listens on.
        "redis+unix:///nonexistent/sluicegate.sock".to_owned(),
    ] {
        let store: RedisStore<&str, FixedWindow> =
            RedisStore::open_with(&url, caller_time_options("url:")).unwrap();
        let result = store.apply_key::<Decision>(&fw, &"k", SECOND, take(1));
        assert!(matches!(result, Err(Error::Store(_))), "{url}: {result:?}");
        let e = store_error(result);
        assert_eq!(e.applied(), Applied::No, "{url}: {e}");
        let result = apply_async_one(&store, &fw, &"k", SECOND, take(1));
        assert!(
            matches!(result, Err(Error::Store(_))),
            "{url}, async: {result:?}"
        );
        let e = store_error(result);
        assert_eq!(e.applied(), Applied::No, "{url}, async: {e}");
    }
    let dbsize: u64 = redis::cmd("DBSIZE")
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(dbsize, 0);
}

#[test]
fn a_password_for_a_server_without_one_connects_blocking_and_async_alike() {
    // Both connections authenticate as the `default` user when the URL names
    // none; a server without a password lets that user in with any.
    let server = RedisServer::start_own();
    let url = server.url().replacen("redis://", "redis://:secret@", 1);
    let fw = window(5);
    let store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with(&url, caller_time_options(&unique_prefix("auth"))).unwrap();
    let blocking = store.apply_key::<Decision>(&fw, &"k", SECOND, take(1));
    assert_eq!(blocking.map(|d| d.remaining()).ok(), Some(4), "{url}");
    let async_call = apply_async_one(&store, &fw, &"k", SECOND, take(1));
    assert_eq!(async_call.map(|d| d.remaining()).ok(), Some(3), "{url}");
}

#[test]
fn a_server_with_a_password_takes_the_right_one_and_refuses_others_unapplied() {
    let server = RedisServer::start_own();
    let () = redis::cmd("CONFIG")
        .arg(&["SET", "requirepass", "secret"])
        .query(&mut server.connection())
        .unwrap();
    let fw = window(5);
    let with = |auth: &str| {
        let url = server
            .url()
            .replacen("redis://", &format!("redis://{auth}"), 1);
        let options = caller_time_options(&unique_prefix("password"));
        let store: RedisStore<&str, FixedWindow> = RedisStore::open_with(&url, options).unwrap();
        let blocking = store.apply_key::<Decision>(&fw, &"k", SECOND, take(1));
        let async_call = apply_async_one(&store, &fw, &"k", SECOND, take(1));
        (blocking, async_call)
    };
    for auth in [":secret@", "default:secret@"] {
        let (blocking, async_call) = with(auth);
        assert_eq!(blocking.map(|d| d.remaining()).ok(), Some(4), "{auth}");
        assert_eq!(async_call.map(|d| d.remaining()).ok(), Some(3), "{auth}");
    }
    for auth in [":wrong@", ""] {
        let (blocking, async_call) = with(auth);
        assert_eq!(store_error(blocking).applied(), Applied::No, "{auth}");
        assert_eq!(
            store_error(async_call).applied(),
            Applied::No,
            "{auth}, async"
        );
    }
}

/// A TCP listener that accepts connections and never answers: the port.
fn silent_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    port
}

#[test]
fn a_connection_whose_auth_never_answers_fails_within_the_connect_timeout_unapplied() {
    // Opening a connection includes AUTH: a server that never answers it fails
    // the call by the connect timeout, before the step is sent.
    let port = silent_server();
    let options = RedisOptions::default().connect_timeout(Duration::from_millis(300));
    let store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with(&format!("redis://:pw@127.0.0.1:{port}/"), options).unwrap();
    let started = Instant::now();
    let e = store_error(store.apply_key::<Decision>(&window(5), &"k", 0, take(1)));
    assert!(
        started.elapsed() < Duration::from_millis(300) + secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(e.applied(), Applied::No, "{e}");
    let source = std::error::Error::source(&e).expect("a source").to_string();
    assert!(
        source.contains("timed out after 300ms connecting (the connect timeout)"),
        "{source}"
    );
}

#[test]
fn a_zero_response_timeout_is_one_millisecond_not_for_ever() {
    let mut server = RedisServer::start_own();
    let options = caller_time_options("zero:").response_timeout(Duration::ZERO);
    let store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with(server.url(), options).unwrap();
    // Connect first, so that the pause meets a sent call.
    let _ = store.apply_key::<Decision>(&window(5), &"warm", SECOND, take(1));
    server.pause();
    let started = Instant::now();
    let e = store_error(store.apply_key::<Decision>(&window(5), &"k", SECOND, take(1)));
    let elapsed = started.elapsed();
    server.resume();
    assert!(elapsed < secs(3), "{elapsed:?}");
    assert_eq!(e.applied(), Applied::Unknown, "{e}");
    let source = std::error::Error::source(&e).unwrap().to_string();
    assert!(source.contains("timed out after 1ms"), "{source}");
}

#[test]
fn a_deadline_slack_of_duration_max_turns_the_check_off_and_calls_still_count() {
    let server = RedisServer::start();
    let options = RedisOptions::default()
        .prefix(unique_prefix("slack"))
        .unwrap()
        .deadline_slack(Duration::MAX)
        .response_timeout(Duration::MAX);
    let store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with(server.url(), options).unwrap();
    let limiter = KeyedRateLimiter::with_store(window(2), store, sluicegate::DefaultClock::new());
    assert_eq!(limiter.check(&"k", 1).unwrap().remaining(), 1);
    assert_eq!(limiter.check(&"k", 1).unwrap().remaining(), 0);
    assert!(!limiter.check(&"k", 1).unwrap().is_allowed());
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

/// A store that can reach no server: an answer from it other than a connection
/// failure was decided before anything was sent.
fn nowhere<A>() -> RedisStore<&'static str, A> {
    RedisStore::open_with("redis://127.0.0.1:1/", caller_time_options("nowhere:")).unwrap()
}

#[test]
fn counts_and_durations_the_server_cannot_count_exactly_are_typed_errors_before_sending() {
    let big = 1u64 << 53;
    let day = secs(86_400);
    // Counts from 2^53 up.
    let e = nowhere::<FixedWindow>()
        .apply_key::<Decision>(
            &FixedWindow::new(big, 300 * day).unwrap(),
            &"k",
            SECOND,
            take(1),
        )
        .unwrap_err();
    assert!(matches!(e, Error::InvalidCount { .. }), "{e:?}");
    assert!(!e.to_string().is_empty());
    if let Ok(log) = SlidingLog::new(big, secs(60)) {
        let e = nowhere::<SlidingLog>()
            .apply_key::<Decision>(&log, &"k", SECOND, take(1))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidCount { .. }), "{e:?}");
    }
    // (A sliding window counter packs its count beside a window index in 64 bits,
    // so memory refuses such limits itself.)
    assert!(SlidingWindowCounter::new(big, 300 * day).is_err());
    // Durations that are not whole microseconds, for each algorithm that has one.
    let odd = Duration::from_nanos(1_500_000_500);
    let dur = |e: Error| assert!(matches!(e, Error::InvalidDuration { .. }), "{e:?}");
    dur(nowhere::<FixedWindow>()
        .apply_key::<Decision>(&FixedWindow::new(1, odd).unwrap(), &"k", SECOND, take(1))
        .unwrap_err());
    dur(nowhere::<SlidingWindowCounter>()
        .apply_key::<Decision>(
            &SlidingWindowCounter::new(1, odd).unwrap(),
            &"k",
            SECOND,
            take(1),
        )
        .unwrap_err());
    dur(nowhere::<SlidingLog>()
        .apply_key::<Decision>(&SlidingLog::new(1, odd).unwrap(), &"k", SECOND, take(1))
        .unwrap_err());
    dur(nowhere::<SlidingLog>()
        .apply_key::<Decision>(
            &SlidingLog::new(5, secs(10)).unwrap().with_min_spacing(odd),
            &"k",
            SECOND,
            take(1),
        )
        .unwrap_err());
    dur(nowhere::<SlidingWindowBuckets>()
        .apply_key::<Decision>(
            &SlidingWindowBuckets::dropping(5, secs(10), odd).unwrap(),
            &"k",
            SECOND,
            take(1),
        )
        .unwrap_err());
    // A window at 2^53 us, which memory keeps (292 years), is past the server's.
    let e = nowhere::<FixedWindow>()
        .apply_key::<Decision>(
            &FixedWindow::new(1, Duration::from_micros(big)).unwrap(),
            &"k",
            SECOND,
            take(1),
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidDuration { .. } | Error::InvalidCount { .. }
        ),
        "{e:?}"
    );
    // A leaky bucket whose full span, and a bursty limiter whose burst, reach
    // 2^53 ns (104 days).
    let e = nowhere::<LeakyBucket>()
        .apply_key::<Decision>(
            &LeakyBucket::meter(105, 1, day).unwrap(),
            &"k",
            SECOND,
            take(1),
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidDuration { .. } | Error::InvalidCount { .. }
        ),
        "{e:?}"
    );
    let e = nowhere::<SmoothBursty>()
        .apply_key::<Decision>(
            &SmoothBursty::new(1.0)
                .unwrap()
                .with_max_burst(105 * day)
                .unwrap(),
            &"k",
            SECOND,
            take(1),
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidDuration { .. } | Error::InvalidCount { .. }
        ),
        "{e:?}"
    );
    // Cost 0 is refused by the limiters before anything is sent, blocking and async.
    let limiter =
        KeyedRateLimiter::with_store(window(5), nowhere::<FixedWindow>(), ManualClock::new());
    assert_eq!(limiter.check(&"k", 0), Err(Error::ZeroCost));
    assert_eq!(
        futures::executor::block_on(limiter.to_async().check(&"k", 0)),
        Err(Error::ZeroCost)
    );
    // No keys at all.
    assert!(matches!(
        limiter.check_all(&[], 1),
        Err(Error::InvalidCount { .. })
    ));
}

/// Runs `steps` on `algorithm` on Redis and in memory, at the caller's time `at`,
/// and asserts the decisions agree field by field.
fn agrees_with_memory<A: RedisAlgorithm + Send + Sync>(
    url: &str,
    algorithm: &A,
    name: &str,
    at: u64,
    steps: &[Operation<'static>],
) where
    A::State: Send,
{
    let store: RedisStore<&str, A> =
        RedisStore::open_with(url, caller_time_options(&unique_prefix("edge"))).unwrap();
    let memory: MemoryStore<&str, A> = MemoryStore::new();
    for step in steps {
        let on_redis = store.apply_key::<Decision>(algorithm, &"k", at, *step);
        let in_memory = memory.apply_key::<Decision>(algorithm, &"k", at, *step);
        assert_eq!(on_redis, in_memory, "{name}, {step:?}");
    }
}

#[test]
fn limits_just_inside_the_servers_range_and_huge_costs_decide_as_in_memory() {
    let server = RedisServer::start();
    let url = server.url();
    let big = (1u64 << 53) - 1;
    let day = secs(86_400);
    let huge = [
        take(u64::MAX),
        take((1 << 53) + 1),
        take(1 << 53),
        take(big),
        take(1),
        take(2),
    ];
    agrees_with_memory(
        url,
        &FixedWindow::new(big, 300 * day).unwrap(),
        "window 2^53-1",
        SECOND,
        &huge,
    );
    agrees_with_memory(url, &window(3), "window 3", SECOND, &huge);
    agrees_with_memory(
        url,
        &SlidingWindowCounter::new(3, secs(60)).unwrap(),
        "counter 3",
        SECOND,
        &huge,
    );
    agrees_with_memory(
        url,
        &SlidingLog::new(3, secs(60)).unwrap(),
        "log",
        SECOND,
        &huge,
    );
    agrees_with_memory(
        url,
        &SlidingWindowBuckets::dropping(3, secs(60), secs(1)).unwrap(),
        "buckets",
        SECOND,
        &huge,
    );
    agrees_with_memory(
        url,
        &LeakyBucket::meter(104, 1, day).unwrap(),
        "meter of 104 days",
        SECOND,
        &huge,
    );
    agrees_with_memory(
        url,
        &LeakyBucket::queue(3, 1, secs(1)).unwrap(),
        "queue",
        SECOND,
        &huge,
    );
    // Cost 0 is outside the store contract ("at least 1"), but bad input never
    // panics: each store answers it with a decision or a typed error.
    for step in [take(0), Operation::Peek { cost: 0 }] {
        let store: RedisStore<&str, FixedWindow> =
            RedisStore::open_with(url, caller_time_options(&unique_prefix("zero"))).unwrap();
        let _ = store.apply_key::<Decision>(&window(3), &"k", SECOND, step);
        let _ = apply_async_one(&store, &window(3), &"k", SECOND, step);
    }
    let forever = Operation::Reserve {
        cost: u64::MAX,
        max_wait: u64::MAX,
    };
    let bursty_steps = [
        take(u64::MAX),
        forever,
        take(1),
        Operation::Peek { cost: u64::MAX },
        take(1),
    ];
    agrees_with_memory(
        url,
        &SmoothBursty::new(5.0).unwrap(),
        "bursty",
        SECOND,
        &bursty_steps,
    );
    agrees_with_memory(
        url,
        &SmoothBursty::new(1.0)
            .unwrap()
            .with_max_burst(104 * day)
            .unwrap(),
        "bursty, 104 days' burst",
        SECOND,
        &bursty_steps,
    );
    agrees_with_memory(
        url,
        &SmoothWarmingUp::new(5.0, secs(10)).unwrap(),
        "warming up",
        SECOND,
        &bursty_steps,
    );
    agrees_with_memory(
        url,
        &AllOf::new((window(3), SmoothBursty::new(5.0).unwrap())),
        "a set",
        SECOND,
        &huge,
    );
}

#[test]
fn the_callers_time_past_2_53_microseconds_is_capped_and_still_decides() {
    let server = RedisServer::start();
    let store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("late"))).unwrap();
    let fw = window(1);
    for at in [
        u64::MAX,
        u64::MAX - 1,
        (1 << 53) * 1_000,
        (1 << 53) * 1_000 - 1,
    ] {
        let key: &'static str = Box::leak(format!("k{at}").into_boxed_str());
        let first = store.apply_key::<Decision>(&fw, &key, at, take(1)).unwrap();
        assert!(first.is_allowed(), "{at}: {first:?}");
        let second = store.apply_key::<Decision>(&fw, &key, at, take(1)).unwrap();
        assert!(!second.is_allowed(), "{at}: {second:?}");
        assert!(second.retry_after() <= secs(60), "{at}: {second:?}");
    }
}

#[test]
fn the_callers_clock_needs_a_grace_from_every_constructor() {
    let caller = RedisOptions::default().time_source(TimeSource::Caller);
    let missing = |r: Result<Store1, ConfigError>| {
        assert!(
            matches!(
                r,
                Err(ConfigError::MissingSetting {
                    what: "expiry_grace",
                    ..
                })
            ),
            "{:?}",
            r.err()
        )
    };
    missing(Store1::open_with("redis://127.0.0.1/", caller.clone()));
    missing(Store1::open_cluster(
        ["redis://127.0.0.1:7000/"],
        caller.clone(),
    ));
    let cluster = redis::cluster::ClusterClient::builder(["redis://127.0.0.1:7000/"])
        .retries(0)
        .build()
        .unwrap();
    missing(Store1::from_cluster_client(cluster, caller.clone()));
    // The message says what to set.
    let Err(e) = Store1::open_with("redis://127.0.0.1/", caller) else {
        unreachable!()
    };
    assert!(e.to_string().contains("expiry_grace"), "{e}");
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
