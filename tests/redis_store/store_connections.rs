//! The Redis store's connections to a real server: the step library reloaded only
//! when the server lacks it, restarts and connections the server closed, typed
//! failures (refused, frozen, timed out) that say whether the step may have been
//! applied, the blocking pool shrinking back after a burst, and async calls after a
//! restart and without a tokio runtime. Cluster is in `redis_cluster.rs`.
#![cfg(feature = "redis")]

use super::store_common::take_one;
use crate::support::redis as redis_support;

use redis_support::trace::caller_time_options;
use redis_support::{
    calls, current_thread_runtime, take, unique_prefix, window, RedisServer, SECOND,
};
use sluicegate::algorithms::FixedWindow;
use sluicegate::algorithms::Receipt;
use sluicegate::stores::redis::RedisStore;
use sluicegate::stores::{Operation, Store};
use sluicegate::{Applied, Decision, Error};
use std::time::{Duration, Instant};

fn applied(result: Result<Decision, Error>) -> Option<Applied> {
    match result {
        Err(Error::Store(e)) => Some(e.applied()),
        Err(other) => panic!("expected a store error, got {other}"),
        Ok(_) => None,
    }
}

/// An own server, its admin connection, and a store of 5-per-minute windows on it
/// (keys under `prefix`) whose first call, which loads the step library, left 4.
fn loaded_own_server(
    prefix: &str,
) -> (
    RedisServer,
    redis::Connection,
    RedisStore<&'static str, FixedWindow>,
) {
    let server = RedisServer::start_own();
    let admin = server.connection();
    let store = store_on(&server, prefix);
    assert_eq!(take_one(&store, &window(5)).remaining(), 4);
    (server, admin, store)
}

/// A store of fixed windows on `server`, its keys under `prefix`, on caller time.
fn store_on(server: &RedisServer, prefix: &str) -> RedisStore<&'static str, FixedWindow> {
    RedisStore::open_with(server.url(), caller_time_options(prefix)).unwrap()
}

/// Zeroes the server's command counts.
fn reset_stats(admin: &mut redis::Connection) {
    let () = redis::cmd("CONFIG").arg("RESETSTAT").query(admin).unwrap();
}

fn flush(admin: &mut redis::Connection, what: &str) {
    let () = redis::cmd(what).arg("FLUSH").query(admin).unwrap();
    reset_stats(admin);
}

#[test]
fn a_flushed_library_costs_one_reload_and_the_call_counts_once() {
    let (_server, mut admin, store) = loaded_own_server("flush:");
    let fw = window(5);
    // The step is a function, not a script: SCRIPT FLUSH leaves it in place.
    flush(&mut admin, "SCRIPT");
    assert_eq!(take_one(&store, &fw).remaining(), 3);
    assert_eq!(calls(&mut admin, "function|load"), 0);
    assert_eq!(calls(&mut admin, "fcall"), 1);
    // FUNCTION FLUSH drops it: FCALL answered "Function not found" once, the
    // library was loaded once, FCALL ran again, and the call counted once.
    flush(&mut admin, "FUNCTION");
    assert_eq!(take_one(&store, &fw).remaining(), 2);
    assert_eq!(calls(&mut admin, "function|load"), 1);
    assert_eq!(calls(&mut admin, "fcall"), 2);
    // From then on one FCALL per call, no load.
    assert_eq!(take_one(&store, &fw).remaining(), 1);
    assert_eq!(calls(&mut admin, "function|load"), 1);
    assert_eq!(calls(&mut admin, "fcall"), 3);
}

#[test]
fn a_library_loaded_by_another_process_is_used_as_it_is() {
    let (server, mut admin, _first) = loaded_own_server("shared:");
    let fw = window(5);
    // A second store (as another process would) finds the library there: no load.
    reset_stats(&mut admin);
    let second = store_on(&server, "shared:");
    assert_eq!(take_one(&second, &fw).remaining(), 3);
    assert_eq!(calls(&mut admin, "function|load"), 0);
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query(&mut admin)
        .unwrap();
    assert_eq!(
        libraries.len(),
        1,
        "one library, whatever the number of stores and algorithms"
    );
}

#[test]
fn a_restart_between_calls_costs_one_reload_and_loses_no_call() {
    let mut server = RedisServer::start_own();
    let fw = window(10);
    let store = store_on(&server, "restart:");
    assert!(take_one(&store, &fw).is_allowed());
    server.restart();
    // The pooled connection died with the old server before anything was written
    // to it: the store sees that, and the call goes out on a fresh connection. The
    // new, empty server lacks the library: one load, and each call counts once.
    let mut admin = server.connection();
    for expected in [9, 8, 7] {
        assert_eq!(take_one(&store, &fw).remaining(), expected);
    }
    assert_eq!(calls(&mut admin, "function|load"), 1);
    assert_eq!(
        calls(&mut admin, "fcall"),
        4,
        "3 calls and the one that found no library"
    );
}

#[test]
fn a_connection_the_server_closed_while_idle_is_replaced_before_the_call() {
    let (_server, mut admin, store) = loaded_own_server("killed:");
    let fw = window(5);
    // The server drops every other client (as its idle `timeout` would): the
    // store's pooled connection is closed under it.
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
        .query(&mut admin)
        .unwrap();
    assert_eq!(killed, 1, "the store's one pooled connection");
    reset_stats(&mut admin);
    assert_eq!(take_one(&store, &fw).remaining(), 3);
    assert_eq!(calls(&mut admin, "fcall"), 1);
}

#[test]
fn an_async_call_after_a_restart_goes_out_on_a_fresh_connection() {
    let mut server = RedisServer::start_own();
    let fw = window(10);
    let store = store_on(&server, "restart-async:");
    let runtime = current_thread_runtime();
    let remaining = |store: &RedisStore<&str, FixedWindow>| {
        let pending = store.apply_async(&fw, &["k"], SECOND, take(1));
        runtime.block_on(pending).unwrap()[0].0.remaining()
    };
    assert_eq!(remaining(&store), 9);
    server.restart();
    // Between calls the runtime runs the connection's driver, which sees the old
    // server close the socket (here the runtime runs only inside `block_on`).
    runtime.block_on(async { tokio::time::sleep(Duration::from_millis(200)).await });
    let mut admin = server.connection();
    assert_eq!(remaining(&store), 9, "the new server is empty");
    assert_eq!(remaining(&store), 8);
    assert_eq!(calls(&mut admin, "function|load"), 1);
    assert_eq!(calls(&mut admin, "fcall"), 3);
}

#[test]
fn a_refused_connection_is_not_applied() {
    // A port nothing listens on: the server we started and then killed.
    let mut server = RedisServer::start_own();
    let url = server.url().to_owned();
    server.kill();
    let store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with(&url, caller_time_options("refused:")).unwrap();
    assert_eq!(
        applied(
            store
                .apply_key::<(Decision, Receipt)>(&window(1), &"k", SECOND, take(1))
                .map(|(d, _)| d)
        ),
        Some(Applied::No)
    );
}

#[test]
fn a_frozen_server_times_out_as_unknown_and_the_store_recovers() {
    let mut server = RedisServer::start_own();
    let fw = window(10);
    let options = caller_time_options("frozen:").response_timeout(Duration::from_millis(200));
    let store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with(server.url(), options).unwrap();
    assert!(take_one(&store, &fw).is_allowed());
    server.pause();
    let started = Instant::now();
    let result = store
        .apply_key::<(Decision, Receipt)>(&fw, &"k", SECOND, take(1))
        .map(|(d, _)| d);
    let waited = started.elapsed();
    server.resume();
    assert_eq!(applied(result), Some(Applied::Unknown));
    // Bounded by the response timeout (a generous bound: the machine is loaded).
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    // The timed-out call was sent, and reached the server once it thawed, past its
    // deadline: it did not count.
    let after = take_one(&store, &fw);
    assert!(after.is_allowed());
    assert_eq!(after.remaining(), 8);
}

#[test]
fn the_blocking_pool_shrinks_back_after_a_burst_of_threads() {
    let server = RedisServer::start_own();
    let mut admin = server.connection();
    let store = store_on(&server, "pool:");
    let fw = window(1_000);
    let clients = |admin: &mut redis::Connection| -> usize {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(admin).unwrap();
        list.lines().count()
    };
    // 40 threads in flight at once: each needs a connection of its own.
    let barrier = std::sync::Barrier::new(40);
    std::thread::scope(|scope| {
        for _ in 0..40 {
            scope.spawn(|| {
                barrier.wait();
                for _ in 0..5 {
                    store
                        .apply_key::<(Decision, Receipt)>(&fw, &"k", SECOND, take(1))
                        .unwrap();
                }
            });
        }
    });
    // Every call counted; the pool kept at most 16 of the connections it opened
    // (and the server sees the others closed), plus this admin connection.
    assert_eq!(
        store
            .apply_key::<Decision>(&fw, &"k", SECOND, Operation::Peek { cost: 1 })
            .unwrap()
            .remaining(),
        1_000 - 200 - 1
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while clients(&mut admin) > 17 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(clients(&mut admin) <= 17, "{} clients", clients(&mut admin));
}

#[test]
fn a_timeout_is_one_error_blocking_or_async_that_names_it_and_may_have_applied() {
    let mut server = RedisServer::start_own();
    let fw = window(10);
    let options = caller_time_options("timeouts:").response_timeout(Duration::from_millis(200));
    let store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with(server.url(), options).unwrap();
    let runtime = current_thread_runtime();
    let by_async = || {
        runtime
            .block_on(store.apply_async(&fw, &["k"], SECOND, take(1)))
            .map(|out| out[0].0)
    };
    // Both kinds of connection open and in use before the server freezes.
    assert_eq!(take_one(&store, &fw).remaining(), 9);
    assert_eq!(by_async().unwrap().remaining(), 8);
    server.pause();
    let blocking = store
        .apply_key::<(Decision, Receipt)>(&fw, &"k", SECOND, take(1))
        .map(|(d, _)| d);
    let asynchronous = by_async();
    server.resume();
    for result in [&blocking, &asynchronous] {
        let Err(Error::Store(e)) = result else {
            panic!("expected a store error, got {result:?}");
        };
        assert_eq!(e.applied(), Applied::Unknown);
        assert_eq!(
            e.to_string(),
            "the redis store failed and it may have been applied: timed out after 200ms \
             waiting for the step's reply (the response timeout)"
        );
        let io = std::error::Error::source(e)
            .and_then(|source| source.downcast_ref::<std::io::Error>())
            .expect("an io::Error source");
        assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
    }
    assert_eq!(blocking, asynchronous);
    // The server found both past their deadline once it thawed: neither counted.
    assert_eq!(take_one(&store, &fw).remaining(), 7);
}

#[test]
fn async_calls_run_without_a_tokio_runtime() {
    use sluicegate::algorithms::LeakyBucket;
    use sluicegate::{KeyedRateLimiter, ManualClock};
    // A bare executor, no tokio runtime anywhere on this thread: the calls must
    // still be answered (a first one also opens the async connection).
    let server = RedisServer::start();
    let fw = window(5);
    let store: RedisStore<&str, FixedWindow> = RedisStore::open_with(
        server.url(),
        caller_time_options(&unique_prefix("no-tokio")),
    )
    .unwrap();
    for remaining in [4, 3] {
        let out = futures::executor::block_on(store.apply_async(&fw, &["k"], SECOND, take(1)));
        assert_eq!(out.unwrap()[0].0.remaining(), remaining);
    }
    // The same from another thread, and through the keyed limiter's async front
    // end, whose second acquire waits (virtually) for its turn.
    let other = store.clone();
    let out = std::thread::spawn(move || {
        futures::executor::block_on(other.apply_async(&fw, &["k"], SECOND, take(1)))
    })
    .join()
    .unwrap();
    assert_eq!(out.unwrap()[0].0.remaining(), 2);
    let queue = LeakyBucket::queue(3, 1, Duration::from_secs(1)).unwrap();
    let store = RedisStore::open_with(
        server.url(),
        caller_time_options(&unique_prefix("no-tokio")),
    )
    .unwrap();
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_store(queue, store, clock.clone()).to_async();
    let waited = futures::executor::block_on(async {
        [limiter.acquire(&"job").await, limiter.acquire(&"job").await]
    });
    assert_eq!(waited, [Ok(Duration::ZERO), Ok(Duration::from_secs(1))]);
}
