//! A Redis Cluster node killed or paused, as "Operating the Redis store" and the
//! store's docs describe it: only the calls on its own slots fail, blocking and
//! async, with a typed error that says whether the step may have been applied, and
//! calls that time out on a paused node never land once it resumes.
#![cfg(feature = "redis")]

use super::cluster_common::{keys, multi_thread_runtime, owner, real_time_store, OnRedis, MINUTE};
use crate::support::redis as redis_support;
use redis_support::{current_thread_runtime, RedisCluster};
use sluicegate::algorithms::SlidingLog;
use sluicegate::stores::redis::RedisOptions;
use sluicegate::{Applied, DefaultClock, Error, KeyedRateLimiter};
use std::time::{Duration, Instant};

/// The connect and response timeout of the stores whose nodes fail under them.
const TIMEOUT: Duration = Duration::from_millis(200);
/// What a call may take beyond its timeout on a loaded two-core machine.
const MARGIN: Duration = Duration::from_millis(1500);

fn short_timeouts(prefix: &str) -> RedisOptions {
    RedisOptions::default()
        .prefix(prefix)
        .unwrap()
        .connect_timeout(TIMEOUT)
        .response_timeout(TIMEOUT)
}

/// The first of `candidates` whose server key (by `server_key`) node `node` serves.
fn key_on_node(
    cluster: &RedisCluster,
    node: usize,
    candidates: impl Iterator<Item = String>,
    server_key: impl Fn(&String) -> String,
) -> String {
    candidates
        .take(500)
        .find(|k| owner(cluster, &server_key(k)) == node)
        .unwrap_or_else(|| panic!("no candidate key lives on node {node}"))
}

/// Asserts `result` is a Redis store error of a call on a killed node's
/// connection: unsent (`No`) or written to the dropped socket (`Unknown`).
fn assert_dropped_or_unsent<T: std::fmt::Debug>(what: &str, result: Result<T, Error>) {
    match result {
        Err(Error::Store(e)) => assert!(
            matches!(e.applied(), Applied::No | Applied::Unknown),
            "{what}: {e}"
        ),
        other => panic!("{what}: expected Error::Store, got {other:?}"),
    }
}

/// Asserts `result` is a Redis store error saying `applied`; with `timed_out`,
/// that its source is an I/O error of kind `TimedOut` naming the response timeout.
fn assert_store_error<T: std::fmt::Debug>(
    what: &str,
    result: Result<T, Error>,
    applied: Applied,
    timed_out: bool,
) {
    let err = match result {
        Err(err) => err,
        Ok(v) => panic!("{what}: expected a store error, got {v:?}"),
    };
    match &err {
        Error::Store(e) => {
            assert_eq!(e.applied(), applied, "{what}: {err}");
            assert_eq!(e.store(), "redis", "{what}: {err}");
        }
        other => panic!("{what}: expected Error::Store, got {other:?}"),
    }
    if timed_out {
        let source = std::error::Error::source(&err).expect("a store error has a source");
        let io = source
            .downcast_ref::<std::io::Error>()
            .unwrap_or_else(|| panic!("{what}: source is not an io::Error: {source}"));
        assert_eq!(io.kind(), std::io::ErrorKind::TimedOut, "{what}: {io}");
        assert!(io.to_string().contains("response timeout"), "{what}: {io}");
    }
}

/// Runs `f`, asserting it returned within `TIMEOUT` plus the margin.
fn bounded<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    assert!(
        took <= TIMEOUT + MARGIN,
        "{what} took {took:?}, over the timeout {TIMEOUT:?} plus {MARGIN:?}"
    );
    out
}

/// A Cluster whose node 0 was killed after every connection of two stores was in
/// use, blocking and async: one store per identity, one under a tag node 0
/// serves; an identity on node 0 and one on node 1, each with 2 of its 5 taken.
struct DownNode {
    _cluster: RedisCluster,
    limiter: OnRedis<SlidingLog, DefaultClock>,
    tagged: OnRedis<SlidingLog, DefaultClock>,
    victim: String,
    survivor: String,
    pair: Vec<String>,
    /// A runtime whose workers keep running between calls, as a server's does:
    /// the shared async connection's reader hears a node close its connection.
    runtime: tokio::runtime::Runtime,
}

fn down_node(prefix: &str) -> DownNode {
    let mut cluster = RedisCluster::start();
    let log = SlidingLog::new(5, MINUTE).unwrap();
    let limiter: OnRedis<SlidingLog, DefaultClock> = KeyedRateLimiter::with_store(
        log,
        real_time_store(&cluster, short_timeouts(prefix)),
        DefaultClock::new(),
    );
    let server_key = |k: &String| limiter.store().server_key(k);
    let candidates = || (0..).map(|i| format!("user:{i}"));
    let victim = key_on_node(&cluster, 0, candidates(), server_key);
    let survivor = key_on_node(&cluster, 1, candidates(), server_key);
    // A shared tag whose slot node 0 serves, for multi-key calls.
    let tag = (0..)
        .map(|i| format!("t{i}"))
        .take(500)
        .find(|t| owner(&cluster, &format!("{{{t}}}")) == 0)
        .unwrap();
    let options = short_timeouts(&format!("{prefix}tag:"))
        .shared_tag(&tag)
        .unwrap();
    let tagged: OnRedis<SlidingLog, DefaultClock> =
        KeyedRateLimiter::with_store(log, real_time_store(&cluster, options), DefaultClock::new());
    let pair = keys(&["ip", "user"]);
    let runtime = multi_thread_runtime();
    for key in [&victim, &survivor] {
        assert!(limiter.check(key, 1).unwrap().is_allowed());
        let d = runtime.block_on(limiter.to_async().check(key, 1)).unwrap();
        assert!(d.is_allowed());
    }
    assert!(tagged.check_all(&pair, 1).unwrap().is_allowed());
    let waited = runtime.block_on(tagged.to_async().acquire_all(&pair, 1));
    assert_eq!(waited.unwrap(), Duration::ZERO);
    cluster.kill_node(0);
    DownNode {
        _cluster: cluster,
        limiter,
        tagged,
        victim,
        survivor,
        pair,
        runtime,
    }
}

#[test]
fn a_killed_node_fails_only_its_own_slots_blocking_calls_with_nothing_applied() {
    let down = down_node("down-b:");
    let (limiter, victim) = (&down.limiter, &down.victim);
    let no = Applied::No;
    let check = bounded("check", || limiter.check(victim, 1));
    assert_store_error("check", check, no, false);
    assert!(!bounded("try_acquire", || limiter.try_acquire(victim)));
    let reserve = bounded("reserve", || limiter.reserve(victim, 1));
    assert_store_error("reserve", reserve, no, false);
    let all = bounded("check_all", || down.tagged.check_all(&down.pair, 1));
    assert_store_error("check_all", all, no, false);
    // The other nodes' slots keep counting: 5 - 2 before - this one.
    let d = limiter.check(&down.survivor, 1).unwrap();
    assert!(d.is_allowed() && d.remaining() == 2, "{d:?}");
}

#[test]
fn a_killed_node_fails_only_its_own_slots_async_calls_with_nothing_applied() {
    let down = down_node("down-a:");
    let (handle, victim) = (down.limiter.to_async(), &down.victim);
    let runtime = &down.runtime;
    let no = Applied::No;
    let tagged = down.tagged.to_async();
    // A connection opened before the kill may not be known closed yet: the first
    // call on it may be written to the dropped socket, which the docs answer
    // with `Unknown` (a dropped connection); once the client has seen it closed,
    // nothing is sent and every call says `No`.
    let first = bounded("async check", || runtime.block_on(handle.check(victim, 1)));
    assert_dropped_or_unsent("async check in tokio, first", first);
    let first = bounded("async acquire_all", || {
        runtime.block_on(tagged.acquire_all(&down.pair, 1))
    });
    assert_dropped_or_unsent("async acquire_all in tokio, first", first);
    let in_tokio = bounded("async check", || runtime.block_on(handle.check(victim, 1)));
    assert_store_error("async check in tokio", in_tokio, no, false);
    let all = bounded("async acquire_all", || {
        runtime.block_on(tagged.acquire_all(&down.pair, 1))
    });
    assert_store_error("async acquire_all in tokio", all, no, false);
    let outside = bounded("async check", || {
        futures::executor::block_on(handle.check(victim, 1))
    });
    assert_store_error("async check outside tokio", outside, no, false);
    // The other nodes' slots keep counting: 5 - 2 before - this one.
    let d = runtime.block_on(handle.check(&down.survivor, 1)).unwrap();
    assert!(d.is_allowed() && d.remaining() == 2, "{d:?}");
    let d = futures::executor::block_on(handle.check(&down.survivor, 1)).unwrap();
    assert!(d.is_allowed() && d.remaining() == 1, "{d:?}");
}

#[test]
fn a_paused_node_s_calls_time_out_as_unknown_and_none_lands_when_it_resumes() {
    let mut cluster = RedisCluster::start();
    let log = SlidingLog::new(5, MINUTE).unwrap();
    let limiter: OnRedis<SlidingLog, DefaultClock> = KeyedRateLimiter::with_store(
        log,
        real_time_store(&cluster, short_timeouts("paused:")),
        DefaultClock::new(),
    );
    let server_key = |k: &String| limiter.store().server_key(k);
    let candidates = || (0..).map(|i| format!("user:{i}"));
    let victim = key_on_node(&cluster, 1, candidates(), server_key);
    let survivor = key_on_node(&cluster, 2, candidates(), server_key);
    let handle = limiter.to_async();
    let runtime = current_thread_runtime();
    for key in [&victim, &survivor] {
        assert!(limiter.check(key, 1).unwrap().is_allowed());
        assert!(runtime.block_on(handle.check(key, 1)).unwrap().is_allowed());
    }
    let expired_before = expired_errors(&cluster, 1);
    cluster.pause_node(1);
    let unknown = Applied::Unknown;
    let blocking = bounded("check", || limiter.check(&victim, 1));
    let in_tokio = bounded("async check", || runtime.block_on(handle.check(&victim, 1)));
    // Another node answers meanwhile.
    let other = limiter.check(&survivor, 1);
    cluster.resume_node(1);
    assert_store_error("check", blocking, unknown, true);
    assert_store_error("async check in tokio", in_tokio, unknown, true);
    assert_eq!(other.unwrap().remaining(), 2);
    // The node takes in the two calls it was sent while paused and refuses
    // each as past its deadline.
    let deadline = Instant::now() + Duration::from_secs(5);
    while expired_errors(&cluster, 1) < expired_before + 2 {
        assert!(
            Instant::now() < deadline,
            "the resumed node refused {} late calls as EXPIRED, not 2",
            expired_errors(&cluster, 1) - expired_before
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // None of them landed: 5 - the 2 before - the peek's 1.
    assert_eq!(limiter.peek(&victim, 1).unwrap().remaining(), 2);
}

/// Node `node`'s count of error replies beginning `EXPIRED` (`INFO errorstats`).
fn expired_errors(cluster: &RedisCluster, node: usize) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query(&mut cluster.connection(node))
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("errorstat_EXPIRED:count="))
        .map_or(0, |n| n.trim().parse().unwrap())
}
