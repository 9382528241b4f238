//! The Redis store's documented answers to connections it cannot make: unusable
//! URLs (their reasons never repeat a password), URLs that cannot serve, wrong or
//! needless passwords, an AUTH that never answers, a zero response timeout and a
//! deadline slack of `Duration::MAX`. It holds what the other `bad_input_*` files
//! share: the store type, `secs`, a typed store error and one async call.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;

use redis_support::trace::caller_time_options;
use redis_support::{take, unique_prefix, window, RedisServer, SECOND, YEAR};
use sluicegate::algorithms::FixedWindow;
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore};
use sluicegate::stores::{Operation, Store};
use sluicegate::{Applied, ConfigError, Decision, Error, KeyedRateLimiter};
use std::time::{Duration, Instant};

pub(crate) type Store1 = RedisStore<&'static str, FixedWindow>;

pub(crate) fn secs(n: u64) -> Duration {
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
pub(crate) fn store_error<T: std::fmt::Debug>(result: Result<T, Error>) -> sluicegate::StoreError {
    match result {
        Err(Error::Store(e)) => e,
        other => panic!("expected Error::Store, got {other:?}"),
    }
}

/// The async call of `step` on `key`, awaited on a bare executor: its decision.
pub(crate) fn apply_async_one<K: Clone, A: RedisAlgorithm>(
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
    let year = FixedWindow::new(2, YEAR).unwrap();
    let limiter = KeyedRateLimiter::with_store(year, store, sluicegate::DefaultClock::new());
    assert_eq!(limiter.check(&"k", 1).unwrap().remaining(), 1);
    assert_eq!(limiter.check(&"k", 1).unwrap().remaining(), 0);
    assert!(!limiter.check(&"k", 1).unwrap().is_allowed());
}
