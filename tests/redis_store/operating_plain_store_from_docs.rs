//! The plain Redis store's failures and deadlines, as `RedisOptions` and the README
//! ("Operating the Redis store") describe them: a killed server's calls fail at
//! once with nothing applied, a paused server's within the response timeout and
//! none lands after it resumes, a zero response timeout, a fresh store on a paused
//! server, the deadline check turned off, and the caller's clock without an expiry
//! grace refused. Time bounds are only "within the timeout plus a margin".
#![cfg(feature = "redis")]

use super::operating_common::{
    assert_store_error, bounded, options, redis, remaining_on_redis, year_window, Fw, Redis,
    TIMEOUT,
};
use crate::support::redis as redis_support;
use redis_support::{unique_prefix, RedisServer};
use sluicegate::stores::redis::{RedisOptions, RedisStore, TimeSource};
use sluicegate::{Applied, ConfigError, DefaultClock, Error, KeyedRateLimiter};
use std::time::Duration;

#[test]
fn a_plain_store_fails_a_killed_server_s_calls_at_once_with_nothing_applied_blocking_and_async() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("plain-killed");
    let limiter = KeyedRateLimiter::with_store(
        year_window(10),
        redis(&server, &prefix),
        DefaultClock::new(),
    );
    assert!(limiter.try_acquire("k"));
    server.kill();
    let err = bounded("check", TIMEOUT, || limiter.check("k", 1)).unwrap_err();
    assert_store_error(&err, Applied::No, false);
    assert!(!bounded("try_acquire", TIMEOUT, || limiter.try_acquire("k")));
    let handle = limiter.to_async();
    let err = bounded("async check", TIMEOUT, || {
        redis_support::current_thread_runtime().block_on(handle.check("k", 1))
    })
    .unwrap_err();
    assert_store_error(&err, Applied::No, false);

    // A restart between calls loses no call, blocking or async.
    server.restart();
    let d = limiter.check("k", 1).unwrap();
    assert_eq!(d.remaining(), 9);
    let d = redis_support::current_thread_runtime()
        .block_on(handle.check("k", 1))
        .unwrap();
    assert_eq!(d.remaining(), 8);
}

#[test]
fn a_plain_store_fails_a_paused_server_s_calls_within_the_response_timeout_and_none_lands_after() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("plain-paused");
    let limiter = KeyedRateLimiter::with_store(
        year_window(10),
        redis(&server, &prefix),
        DefaultClock::new(),
    );
    let handle = limiter.to_async();
    let rt = redis_support::current_thread_runtime();
    assert!(limiter.try_acquire("k"));
    assert!(rt.block_on(handle.check("k", 1)).unwrap().is_allowed());

    server.pause();
    let expected = "timed out after 200ms waiting for the step's reply (the response timeout)";
    let err = bounded("check", TIMEOUT, || limiter.check("k", 1)).unwrap_err();
    assert_store_error(&err, Applied::Unknown, true);
    assert!(err.to_string().contains(expected), "{err}");
    assert!(!bounded("try_acquire", TIMEOUT, || limiter.try_acquire("k")));
    let err = bounded("async check", TIMEOUT, || rt.block_on(handle.check("k", 1))).unwrap_err();
    assert_store_error(&err, Applied::Unknown, true);
    assert!(err.to_string().contains(expected), "{err}");
    // The async connection that timed out is not reused: the next async call
    // opens another and meets the connect timeout (nothing applied), or is sent
    // and meets the response timeout.
    let err = bounded("async reserve", TIMEOUT, || {
        rt.block_on(handle.reserve("k", 1))
    })
    .err()
    .unwrap();
    match &err {
        Error::Store(e) if e.applied() == Applied::No => {
            assert_store_error(&err, Applied::No, true)
        }
        _ => assert_store_error(&err, Applied::Unknown, true),
    }
    server.resume();

    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        remaining_on_redis(&server, &prefix, 10, "k"),
        8,
        "a call that gave up landed"
    );
}

#[test]
fn a_zero_response_timeout_is_one_millisecond_not_for_ever() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("zero-timeout");
    let store: Redis = RedisStore::open_with(
        server.url(),
        options(&prefix).response_timeout(Duration::ZERO),
    )
    .unwrap();
    let limiter = KeyedRateLimiter::with_store(year_window(10), store, DefaultClock::new());
    // Opens the connection. A deadline 1 ms after sending may pass even on a
    // healthy server, so the answer may be an `EXPIRED` refusal.
    let _ = limiter.check("k", 1);
    server.pause();
    let err = bounded("check", Duration::from_millis(1), || limiter.check("k", 1)).unwrap_err();
    server.resume();
    assert_store_error(&err, Applied::Unknown, true);
    assert!(err.to_string().contains("timed out after 1ms"), "{err}");
}

#[test]
fn a_fresh_store_on_a_paused_server_fails_within_its_connect_and_response_timeouts() {
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("fresh-paused");
    server.pause();
    let limiter = KeyedRateLimiter::with_store(
        year_window(10),
        redis(&server, &prefix),
        DefaultClock::new(),
    );
    let err = bounded("first call", TIMEOUT * 2, || limiter.check("k", 1)).unwrap_err();
    server.resume();
    match &err {
        Error::Store(_) => {}
        other => panic!("expected Error::Store, got {other:?}"),
    }
    let source = std::error::Error::source(&err).unwrap();
    let io = source.downcast_ref::<std::io::Error>().unwrap();
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut, "{io}");
}

#[test]
fn with_the_deadline_check_turned_off_a_call_that_gave_up_does_land() {
    // The control for the deadline tests: `deadline_slack(Duration::MAX)` turns
    // the check off, and the call that timed out during the pause is applied.
    let mut server = RedisServer::start_own();
    let prefix = unique_prefix("no-deadline");
    let store: Redis =
        RedisStore::open_with(server.url(), options(&prefix).deadline_slack(Duration::MAX))
            .unwrap();
    let limiter = KeyedRateLimiter::with_store(year_window(10), store, DefaultClock::new());
    assert!(limiter.try_acquire("k"));
    server.pause();
    let err = limiter.check("k", 1).unwrap_err();
    assert_store_error(&err, Applied::Unknown, true);
    server.resume();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(remaining_on_redis(&server, &prefix, 10, "k"), 8);
}

#[test]
fn the_caller_s_clock_without_an_expiry_grace_is_refused_by_every_constructor() {
    let caller = RedisOptions::default().time_source(TimeSource::Caller);
    let client = redis::Client::open("redis://127.0.0.1:1/").unwrap();
    let err = Redis::<Fw>::from_client(client, caller.clone())
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            ConfigError::MissingSetting {
                what: "expiry_grace",
                ..
            }
        ),
        "{err:?}"
    );
    let err = Redis::<Fw>::open_cluster(["redis://127.0.0.1:1/"], caller.clone())
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            ConfigError::MissingSetting {
                what: "expiry_grace",
                ..
            }
        ),
        "{err:?}"
    );
    let graced = caller.expiry_grace(Duration::ZERO);
    let client = redis::Client::open("redis://127.0.0.1:1/").unwrap();
    assert!(Redis::<Fw>::from_client(client, graced).is_ok());
}
