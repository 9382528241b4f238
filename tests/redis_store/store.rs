//! The Redis store's own behaviour, on a real server: the step library reloaded
//! only when the server lacks it, typed failures (refused, timed out, restarted),
//! expiry, peeks that create nothing, hostile key texts, the async path. Cluster is
//! in `redis_cluster.rs`.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;

use redis_support::trace::caller_time_options;
use redis_support::{
    assert_unapplied_error, calls, current_thread_runtime, take, unique_prefix, window,
    RedisServer, SECOND,
};
use sluicegate::algorithms::FixedWindow;
use sluicegate::algorithms::Receipt;
use sluicegate::stores::redis::{RedisOptions, RedisStore};
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

/// One reserve of 1 on `k` at 1 s: its decision.
fn take_one(store: &RedisStore<&str, FixedWindow>, fw: &FixedWindow) -> Decision {
    store
        .apply_key::<(Decision, Receipt)>(fw, &"k", SECOND, take(1))
        .map(|(d, _)| d)
        .unwrap()
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
fn configurations_the_server_cannot_hold_exactly_are_refused_before_sending() {
    // No server at all: the error comes before any connection is tried.
    let store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with("redis://127.0.0.1:1/", caller_time_options("cfg:")).unwrap();
    let odd = FixedWindow::new(1, Duration::from_nanos(1_500)).unwrap();
    assert!(matches!(
        store
            .apply_key::<(Decision, Receipt)>(&odd, &"k", 0, take(1))
            .map(|(d, _)| d),
        Err(Error::InvalidDuration { .. })
    ));
}

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
    // A refused call leaves the state as it was (a minute-long window, so the key
    // cannot expire between the two reads).
    let minute = window(1);
    let long: RedisStore<String, FixedWindow> = RedisStore::open(server.url()).unwrap();
    assert!(long
        .apply_key::<(Decision, Receipt)>(&minute, &"held".to_owned(), 0, take(1))
        .map(|(d, _)| d)
        .unwrap()
        .is_allowed());
    let key = long.server_key(&"held".to_owned());
    let before: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut admin).unwrap();
    assert!(!long
        .apply_key::<(Decision, Receipt)>(&minute, &"held".to_owned(), 0, take(1))
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
fn async_calls_decide_like_blocking_ones_and_lose_no_update() {
    let server = RedisServer::start();
    let prefix = unique_prefix("async");
    let fw = window(100);
    let store: RedisStore<String, FixedWindow> =
        RedisStore::open_with(server.url(), caller_time_options(&prefix)).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let granted = runtime.block_on(async {
        let calls: Vec<_> = (0..300)
            .map(|_| {
                let pending = store.apply_async(&fw, &["hot".to_owned()], SECOND, take(1));
                tokio::spawn(pending)
            })
            .collect();
        let mut granted = 0;
        for call in calls {
            let decisions = call.await.unwrap().unwrap();
            granted += u64::from(decisions[0].0.is_allowed());
        }
        granted
    });
    assert_eq!(granted, 100);
    // The blocking side sees the same state.
    let d = store
        .apply_key::<(Decision, Receipt)>(
            &fw,
            &"hot".to_owned(),
            SECOND,
            Operation::Peek { cost: 1 },
        )
        .map(|(d, _)| d)
        .unwrap();
    assert!(!d.is_allowed());
    assert_eq!(d.remaining(), 0);
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
fn the_keyed_limiters_run_over_the_redis_store() {
    use sluicegate::algorithms::{AllOf, LeakyBucket, SmoothBursty};
    use sluicegate::{KeyedRateLimiter, ManualClock};
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(5));
    // Blocking acquire over a queue: the caller sleeps (virtually) for its turn.
    let queue = LeakyBucket::queue(3, 1, Duration::from_secs(1)).unwrap();
    let store =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("kl"))).unwrap();
    let limiter = KeyedRateLimiter::with_store(queue, store, clock.clone());
    for _ in 0..3 {
        limiter.acquire(&"job").unwrap();
    }
    assert_eq!(
        clock.sleeps(),
        [
            Duration::ZERO,
            Duration::from_secs(1),
            Duration::from_secs(1)
        ]
    );
    // All-or-nothing over two keys, and a set per key, on one store each.
    let set = AllOf::new((window(2), SmoothBursty::new(100.0).unwrap()));
    let store =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("kl"))).unwrap();
    let limiter = KeyedRateLimiter::with_store(set, store, clock.clone());
    assert!(limiter
        .check_all(&["ip:1", "user:a"], 2)
        .unwrap()
        .is_allowed());
    let refused = limiter.check_all(&["ip:2", "user:a"], 1).unwrap();
    assert!(!refused.is_allowed());
    // ip:2 was not charged by the refused call.
    assert_eq!(limiter.peek(&"ip:2", 2).unwrap().remaining(), 0);
    assert!(limiter.peek(&"ip:2", 2).unwrap().is_allowed());
    // The async front end under tokio: 5 acquires of a 1-per-second queue, each
    // sleeping (virtually) for its turn; a dropped wait gives its turn back.
    let queue = LeakyBucket::queue(10, 1, Duration::from_secs(1)).unwrap();
    let store =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("kl"))).unwrap();
    let handle = KeyedRateLimiter::with_store(queue, store, clock.clone()).to_async();
    let runtime = current_thread_runtime();
    let waited = runtime.block_on(async {
        let mut waited = Vec::new();
        for _ in 0..5 {
            waited.push(handle.acquire(&"k").await.unwrap());
        }
        waited
    });
    assert_eq!(waited[0], Duration::ZERO);
    assert!(
        waited[1..].iter().all(|w| *w > Duration::ZERO),
        "{waited:?}"
    );
}

#[test]
fn a_cancel_at_the_servers_time_gives_the_turn_back() {
    use sluicegate::algorithms::LeakyBucket;
    let server = RedisServer::start();
    let queue = LeakyBucket::queue(5, 1, Duration::from_secs(10)).unwrap();
    let store: RedisStore<String, LeakyBucket> = RedisStore::open_with(
        server.url(),
        RedisOptions::default()
            .prefix(unique_prefix("cancel-server"))
            .unwrap(),
    )
    .unwrap();
    let key = ["turns".to_owned()];
    let reserve = Operation::Reserve {
        cost: 1,
        max_wait: u64::MAX,
    };
    // The caller's clock is unrelated to the server's: only differences matter.
    let now = 42;
    let blank = [(Decision::never(0, 0, 0), Receipt::NONE)];
    let mut first = blank.clone();
    store.apply(&queue, &key, now, reserve, &mut first).unwrap();
    let mut second = blank.clone();
    store
        .apply(&queue, &key, now, reserve, &mut second)
        .unwrap();
    let wait = second[0].0.wait_nanos();
    assert!(wait > 9_000_000_000, "{wait}");
    // Cancel the second turn (it acts ~10 s from now): the next caller gets it.
    let cancel = Operation::Cancel {
        receipts: std::slice::from_ref(&second[0].1),
        acts_at: now + wait,
    };
    let mut out = blank.clone();
    store.apply(&queue, &key, now, cancel, &mut out).unwrap();
    assert_eq!(out, blank); // a cancel answers nothing
    let mut third = blank;
    store.apply(&queue, &key, now, reserve, &mut third).unwrap();
    let third = third[0].0;
    assert!(third.wait_nanos() <= wait, "{third:?} vs {wait}");
    assert!(third.wait_nanos() > 9_000_000_000);
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
fn long_durations_come_back_exact_in_either_reply_form() {
    // A lone key's reply carries durations as whole ns while they fit a double
    // exactly (the short form) and falls back to microseconds and a remainder past
    // 9 x 10^12 us (the full form): both must decode to the memory store's answer.
    use sluicegate::algorithms::LeakyBucket;
    use sluicegate::stores::MemoryStore;
    let server = RedisServer::start();
    let day = Duration::from_secs(86_400);
    let check = |limit: u64, period: Duration, at: u64| {
        let fw = FixedWindow::new(limit, period).unwrap();
        let store: RedisStore<&str, FixedWindow> =
            RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("long")))
                .unwrap();
        let memory: MemoryStore<&str, FixedWindow> = MemoryStore::new();
        for step in [take(1), take(1), take(limit + 1)] {
            let on_redis = store.apply_key::<Decision>(&fw, &"k", at, step).unwrap();
            let in_memory = memory.apply_key::<Decision>(&fw, &"k", at, step).unwrap();
            assert_eq!(on_redis, in_memory, "{period:?}");
        }
    };
    // Reset 30 days away (short form), then 300 days and 142 years away (full form,
    // the latter's ns beyond what a double holds exactly); the server counts whole
    // microseconds, so both sides run at one.
    check(1, 30 * day, SECOND + 1_234_000);
    check(1, 300 * day, SECOND + 1_234_000);
    check(1, Duration::from_micros((1 << 52) - 1), SECOND + 1_234_000);
    // The leaky bucket's own short replies (built by its step), at 3 per second:
    // waits and resets with a nanosecond remainder.
    let lb = LeakyBucket::queue(2, 3, Duration::from_secs(1)).unwrap();
    let store: RedisStore<&str, LeakyBucket> =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("lb"))).unwrap();
    let memory: MemoryStore<&str, LeakyBucket> = MemoryStore::new();
    let wait = Operation::Reserve {
        cost: 1,
        max_wait: 10 * SECOND,
    };
    for step in [wait, wait, wait] {
        let on_redis = store
            .apply_key::<(Decision, Receipt)>(&lb, &"k", SECOND + 7_000, step)
            .unwrap();
        let in_memory = memory
            .apply_key::<(Decision, Receipt)>(&lb, &"k", SECOND + 7_000, step)
            .unwrap();
        assert_eq!(on_redis, in_memory);
    }
}

#[test]
fn durations_past_2_53_microseconds_come_back_as_in_memory() {
    // A tiny rate saturates Guava's state on the first grant: its reset_after is
    // then about i64::MAX ns (292 years), past the 2^53 us (285 years) a Lua double
    // counts exactly, and it must still come back as the memory store's value, for
    // a single algorithm and inside a set.
    use sluicegate::algorithms::{AllOf, SmoothBursty, SmoothWarmingUp};
    use sluicegate::stores::redis::RedisAlgorithm;
    use sluicegate::stores::MemoryStore;
    fn check<A: RedisAlgorithm + Send + Sync>(url: &str, algorithm: &A, name: &str)
    where
        A::State: Send,
    {
        let store: RedisStore<&str, A> =
            RedisStore::open_with(url, caller_time_options(&unique_prefix("huge"))).unwrap();
        let memory: MemoryStore<&str, A> = MemoryStore::new();
        let forever = Operation::Reserve {
            cost: 1,
            max_wait: u64::MAX,
        };
        let mut past_2_53 = false;
        for step in [
            Operation::Peek { cost: 1 },
            take(1),
            take(1),
            forever,
            take(5),
        ] {
            let on_redis = store
                .apply_key::<Decision>(algorithm, &"k", SECOND, step)
                .unwrap();
            let in_memory = memory
                .apply_key::<Decision>(algorithm, &"k", SECOND, step)
                .unwrap();
            assert_eq!(on_redis, in_memory, "{name}, {step:?}");
            past_2_53 |= in_memory.reset_after_nanos() > (1 << 53) * 1_000;
        }
        assert!(past_2_53, "{name}: no duration past 2^53 us was compared");
    }
    let server = RedisServer::start();
    let bursty = SmoothBursty::new(1e-10).unwrap();
    let warming = SmoothWarmingUp::new(1e-10, Duration::from_secs(10)).unwrap();
    check(server.url(), &bursty, "bursty");
    check(
        server.url(),
        &SmoothBursty::new(5e-324).unwrap(),
        "bursty, 5e-324",
    );
    check(server.url(), &warming, "warming up");
    check(server.url(), &AllOf::new((bursty, window(3))), "a set");
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
    assert!((4_000..=5_100).contains(&ttl), "{ttl} ms");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!take_one(&store, &fw).is_allowed(), "the key expired early");
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

#[test]
fn windows_just_below_2_53_microseconds_decide_as_in_memory() {
    // A window just below the longest the server holds (2^53 us): the end of an
    // entry's or a window's span, an absolute time plus the window, passes 2^53 us,
    // where a double skips odd integers; durations must still come out exact.
    use sluicegate::algorithms::sliding_window_buckets::OldestBucket;
    use sluicegate::algorithms::{SlidingLog, SlidingWindowBuckets};
    use sluicegate::stores::redis::RedisAlgorithm;
    use sluicegate::stores::MemoryStore;
    fn check<A: RedisAlgorithm + Send + Sync>(url: &str, algorithm: &A, name: &str)
    where
        A::State: Send,
    {
        for at in [4_000, 5_000, SECOND, 3 * SECOND + 7_000] {
            let store: RedisStore<&str, A> =
                RedisStore::open_with(url, caller_time_options(&unique_prefix("edge"))).unwrap();
            let memory: MemoryStore<&str, A> = MemoryStore::new();
            for step in [
                Operation::Peek { cost: 1 },
                take(1),
                take(1),
                take(1),
                take(3),
            ] {
                let on_redis = store
                    .apply_key::<Decision>(algorithm, &"k", at, step)
                    .unwrap();
                let in_memory = memory
                    .apply_key::<Decision>(algorithm, &"k", at, step)
                    .unwrap();
                assert_eq!(on_redis, in_memory, "{name} at {at} ns, {step:?}");
            }
        }
    }
    let server = RedisServer::start();
    for micros in [(1u64 << 53) - 1, (1 << 53) - 3, (1 << 53) - 1_000_001] {
        let long = Duration::from_micros(micros);
        check(server.url(), &SlidingLog::new(2, long).unwrap(), "log");
        let log = SlidingLog::new(2, long).unwrap();
        let spaced = log.with_min_spacing(Duration::from_micros(micros - 2));
        check(server.url(), &spaced, "spaced log");
        check(
            server.url(),
            &log.with_rejected_recorded(),
            "log recording refusals",
        );
        check(
            server.url(),
            &FixedWindow::new(2, long).unwrap(),
            "fixed window",
        );
        let buckets = SlidingWindowBuckets::new(2, long, long, OldestBucket::Drop).unwrap();
        check(server.url(), &buckets, "buckets");
    }
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
