//! The failover store over the Redis store, on servers started here that are
//! frozen (SIGSTOP), killed (SIGKILL) and restarted: each failure policy answers
//! within the store's timeout with its own source, no call reaches the server
//! while the store is backed off (counted by the server itself), and decisions
//! come from Redis again once it answers.
#![cfg(feature = "redis")]

mod support;

use sluicegate::algorithms::FixedWindow;
use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy};
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::{Decision, DefaultClock, KeyedRateLimiter, Source};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::redis::{calls, RedisServer, YEAR};

/// The Redis store's connect and response timeouts.
const TIMEOUT: Duration = Duration::from_millis(300);
/// Far above any call's own time on a loaded machine, far below a test's length.
const MARGIN: Duration = Duration::from_secs(3);
/// The back-off: long enough for a phase of calls to run inside it.
const BACKOFF: Duration = Duration::from_millis(2500);
const THREADS: usize = 8;

type Limiter = KeyedRateLimiter<
    String,
    FixedWindow,
    FailoverStore<RedisStore<String, FixedWindow>, String, FixedWindow>,
>;

fn limiter(server: &RedisServer, limit: u64, policy: FailurePolicy<FixedWindow>) -> Arc<Limiter> {
    let options = RedisOptions::default()
        .prefix(support::redis::unique_prefix("failover"))
        .unwrap()
        .connect_timeout(TIMEOUT)
        .response_timeout(TIMEOUT);
    let redis = RedisStore::open_with(server.url(), options).unwrap();
    let store = FailoverStore::new(redis, policy).with_backoff(Backoff::fixed(BACKOFF));
    let window = FixedWindow::new(limit, YEAR).unwrap();
    Arc::new(KeyedRateLimiter::with_store(
        window,
        store,
        DefaultClock::new(),
    ))
}

/// One check of `key`, timed; it must answer (never an error) within the timeout
/// and a margin.
fn timed_check(limiter: &Limiter, key: &str) -> (Decision, Duration) {
    let started = Instant::now();
    let decision = limiter
        .check(&key.to_owned(), 1)
        .expect("a policy answers, never an error");
    let took = started.elapsed();
    assert!(took < TIMEOUT + MARGIN, "a call waited {took:?}");
    (decision, took)
}

/// `THREADS` threads each make one call that meets the frozen server (or the
/// policy, if another thread's failure came first), then `calls` more at once,
/// which the back-off answers. Returns every decision and the longest time the
/// later calls of one thread took together.
fn frozen_phase(limiter: &Arc<Limiter>, key: &str, calls: usize) -> (Vec<Decision>, Duration) {
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let limiter = Arc::clone(limiter);
            let key = key.to_owned();
            std::thread::spawn(move || {
                let (first, _) = timed_check(&limiter, &key);
                let started = Instant::now();
                let mut decisions = vec![first];
                decisions.extend((0..calls).map(|_| timed_check(&limiter, &key).0));
                (decisions, started.elapsed())
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut slowest = Duration::ZERO;
    for thread in threads {
        let (decisions, took) = thread.join().unwrap();
        all.extend(decisions);
        slowest = slowest.max(took);
    }
    (all, slowest)
}

/// Calls until a decision comes from Redis again (the back-off must end, one
/// probe find the server), each call bounded; returns that decision.
fn until_the_store_decides(limiter: &Limiter, key: &str) -> Decision {
    let deadline = Instant::now() + BACKOFF + MARGIN;
    loop {
        let (decision, _) = timed_check(limiter, key);
        if decision.source() == Source::Store {
            return decision;
        }
        assert!(
            Instant::now() < deadline,
            "no decision from Redis after it came back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `FCALL`s the server has run, once it has run what it was sent.
fn fcalls(admin: &mut redis::Connection) -> u64 {
    std::thread::sleep(Duration::from_millis(200));
    calls(admin, "fcall")
}

/// Runs a frozen phase under `policy` and checks what every policy guarantees:
/// bounded calls, the policy's source, no round trip while backed off, decisions
/// from Redis after the thaw. Returns the phase's decisions.
fn frozen_server_under(
    policy: FailurePolicy<FixedWindow>,
    limit: u64,
    expected: Source,
) -> Vec<Decision> {
    let mut server = RedisServer::start_own();
    let mut admin = server.connection();
    let limiter = limiter(&server, limit, policy);
    let (first, _) = timed_check(&limiter, "k");
    assert_eq!(first.source(), Source::Store);
    let before = fcalls(&mut admin);
    server.pause();
    let (decisions, slowest) = frozen_phase(&limiter, "k", 100);
    server.resume();
    assert!(
        decisions.iter().all(|d| d.source() == expected),
        "{decisions:?}"
    );
    // 100 calls answered by the back-off take far less than one timeout each.
    assert!(slowest < TIMEOUT, "100 backed-off calls took {slowest:?}");
    let stats = limiter.store().stats();
    // Only the calls that met the frozen server were sent (at most one a thread);
    // the other 100 a thread never reached it.
    let sent = fcalls(&mut admin) - before;
    assert!(
        stats.failures >= 1 && stats.failures <= THREADS as u64,
        "{stats:?}"
    );
    assert!(
        sent <= stats.failures,
        "{sent} calls reached the server, {stats:?}"
    );
    assert_eq!(
        stats.probes, 0,
        "the back-off outlasts the phase: {stats:?}"
    );
    let back = until_the_store_decides(&limiter, "k");
    assert_eq!(back.source(), Source::Store);
    let stats = limiter.store().stats();
    assert_eq!(stats.recoveries, 1, "{stats:?}");
    assert!(!limiter.store().is_degraded());
    decisions
}

#[test]
fn fail_closed_refuses_a_frozen_server_s_calls_at_once_and_never_admits_over_the_limit() {
    let decisions = frozen_server_under(FailurePolicy::Closed, 20, Source::FailedClosed);
    assert!(decisions.iter().all(|d| !d.is_allowed()));
    // Refusals say when to come back: within the back-off.
    assert!(decisions
        .iter()
        .all(|d| d.retry_after() > Duration::ZERO && d.retry_after() <= BACKOFF));
}

#[test]
fn fail_closed_over_a_whole_outage_admits_at_most_the_limit() {
    let mut server = RedisServer::start_own();
    let limiter = limiter(&server, 20, FailurePolicy::Closed);
    let allowed = |decisions: &[Decision]| decisions.iter().filter(|d| d.is_allowed()).count();
    let mut admitted = allowed(
        &(0..10)
            .map(|_| timed_check(&limiter, "k").0)
            .collect::<Vec<_>>(),
    );
    server.pause();
    let (frozen, _) = frozen_phase(&limiter, "k", 20);
    server.resume();
    admitted += allowed(&frozen);
    until_the_store_decides(&limiter, "k");
    let (after, _) = frozen_phase(&limiter, "k", 20);
    admitted += allowed(&after);
    // The check that found Redis again took a permit too.
    assert!(admitted < 20, "{admitted} admitted under a limit of 20");
}

#[test]
fn fail_open_lets_a_frozen_server_s_calls_through_unchecked() {
    let decisions = frozen_server_under(FailurePolicy::Open, 1, Source::Unchecked);
    assert!(decisions.iter().all(Decision::is_allowed));
}

#[test]
fn a_local_share_limits_each_process_while_the_server_is_frozen() {
    let share = FixedWindow::new(5, Duration::from_secs(60)).unwrap();
    let decisions = frozen_server_under(FailurePolicy::Local(share), 1000, Source::Local);
    let admitted = decisions.iter().filter(|d| d.is_allowed()).count();
    assert_eq!(
        admitted,
        5,
        "the local share, 5, across {} calls",
        decisions.len()
    );
    assert!(decisions.iter().all(|d| d.limit() == 5));
}

#[test]
fn a_killed_server_fails_fast_to_the_policy_and_a_restarted_one_decides_again() {
    let mut server = RedisServer::start_own();
    let limiter = limiter(&server, 100, FailurePolicy::Open);
    assert_eq!(timed_check(&limiter, "k").0.source(), Source::Store);
    server.kill();
    let (decisions, _) = frozen_phase(&limiter, "k", 50);
    assert!(decisions.iter().all(|d| d.source() == Source::Unchecked));
    let failures = limiter.store().stats().failures;
    assert!((1..=THREADS as u64).contains(&failures), "{failures}");
    server.restart();
    let back = until_the_store_decides(&limiter, "k");
    // A restarted server starts empty: the key's window starts again.
    assert_eq!(back.remaining(), 99);
}

#[test]
fn async_calls_on_a_frozen_server_answer_by_the_policy_and_recover() {
    use sluicegate::stores::{Operation, Store};
    let mut server = RedisServer::start_own();
    let mut admin = server.connection();
    let limiter = limiter(&server, 10, FailurePolicy::Closed);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let window = FixedWindow::new(10, YEAR).unwrap();
    let step = Operation::Reserve {
        cost: 1,
        max_wait: 0,
    };
    let check = move |limiter: Arc<Limiter>| async move {
        let started = Instant::now();
        let keys = ["k".to_owned()];
        let answer = limiter.store().apply_async(&window, &keys, 0, step).await;
        let took = started.elapsed();
        assert!(took < TIMEOUT + MARGIN, "an async call waited {took:?}");
        answer.expect("a policy answers, never an error")[0].0
    };
    // The first call opens the connection: on a loaded machine it may pass the
    // response timeout, so it is asked until the store answers.
    runtime.block_on(async {
        let deadline = Instant::now() + BACKOFF + MARGIN;
        while check(Arc::clone(&limiter)).await.source() != Source::Store {
            assert!(Instant::now() < deadline, "no decision from Redis");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let failed_before = limiter.store().stats().failures;
    let before = fcalls(&mut admin);
    server.pause();
    let tasks: Vec<_> = (0..THREADS)
        .map(|_| {
            let limiter = Arc::clone(&limiter);
            runtime.spawn(async move {
                let mut decisions = Vec::new();
                for _ in 0..50 {
                    decisions.push(check(Arc::clone(&limiter)).await);
                }
                decisions
            })
        })
        .collect();
    let decisions: Vec<Decision> = tasks
        .into_iter()
        .flat_map(|task| runtime.block_on(task).unwrap())
        .collect();
    server.resume();
    assert!(decisions.iter().all(|d| d.source() == Source::FailedClosed));
    let stats = limiter.store().stats();
    let failures = stats.failures - failed_before;
    // At most each task's first call met the frozen server; the other 49 a task
    // were answered by the back-off and never sent.
    assert!(failures <= THREADS as u64, "{failures} failures, {stats:?}");
    let sent = fcalls(&mut admin) - before;
    assert!(
        sent <= failures,
        "{sent} calls reached the server, {failures} failures, {stats:?}"
    );
    std::thread::sleep(BACKOFF);
    let back = runtime.block_on(check(Arc::clone(&limiter)));
    assert_eq!(back.source(), Source::Store);
}

/// The port of a server started here, from its URL.
fn port_of(server: &RedisServer) -> String {
    let url = server.url().trim_end_matches('/');
    url.rsplit(':').next().unwrap().to_owned()
}

/// Counts the decisions each source made.
fn by_source(decisions: &[Decision], source: Source) -> usize {
    decisions.iter().filter(|d| d.source() == source).count()
}

/// A limiter pointed at a replica (as a proxy or DNS name still is, just after a
/// failover) meets a server that holds no library and refuses to load one: its
/// calls fail fast to the policy. Once the replica is promoted, a probe loads the
/// library and decisions come from it, starting from a key nothing counted.
#[test]
fn a_replica_promoted_without_the_library_decides_once_promoted() {
    let primary = RedisServer::start_own();
    let replica = RedisServer::start_own();
    // A diskless sync waits 5 s for more replicas by default: start it at once.
    let () = redis::cmd("CONFIG")
        .arg(&["SET", "repl-diskless-sync-delay", "0"])
        .query(&mut primary.connection())
        .unwrap();
    let mut admin = replica.connection();
    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(port_of(&primary))
        .query(&mut admin)
        .unwrap();
    let synced = Instant::now() + MARGIN;
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut admin)
            .unwrap();
        if info.contains("master_link_status:up") {
            break;
        }
        assert!(Instant::now() < synced, "the replica never synced: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let limit = 5;
    let limiter = limiter(&replica, limit, FailurePolicy::Closed);
    let (decisions, _) = frozen_phase(&limiter, "k", 10);
    assert_eq!(
        by_source(&decisions, Source::FailedClosed),
        decisions.len(),
        "{decisions:?}"
    );
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query(&mut admin)
        .unwrap();
    assert!(libraries.is_empty(), "the replica holds no library");
    let () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut admin)
        .unwrap();
    let back = until_the_store_decides(&limiter, "k");
    assert_eq!(back.remaining(), limit - 1, "nothing counted before");
    // From here the promoted server decides, exactly: threads share what is left.
    let (after, _) = frozen_phase(&limiter, "k", 5);
    assert_eq!(by_source(&after, Source::Store), after.len());
    let admitted = after.iter().filter(|d| d.is_allowed()).count() as u64;
    assert_eq!(admitted, limit - 1, "{after:?}");
}

/// `SCRIPT FLUSH`, `FUNCTION FLUSH` and `CLIENT KILL` while 8 threads call, under
/// each policy: every call answers within the timeout, the server counts each
/// grant it made once (a call whose connection was killed may have counted
/// without an answer, never twice), and a fail-closed limiter admits at most the
/// limit.
#[test]
fn flushes_and_killed_connections_mid_run_count_nothing_twice_under_every_policy() {
    let limit = 300;
    let share = FixedWindow::new(10, Duration::from_secs(60)).unwrap();
    for (name, policy) in [
        ("closed", FailurePolicy::Closed),
        ("open", FailurePolicy::Open),
        ("local", FailurePolicy::Local(share)),
    ] {
        let server = RedisServer::start_own();
        let mut admin = server.connection();
        let limiter = limiter(&server, limit, policy);
        // The connection is open and the library loaded before the disturbances
        // begin, so the run's first calls are the store's however slowly a loaded
        // machine made the first one (on a key of its own: not counted below).
        until_the_store_decides(&limiter, &format!("{name}-warm"));
        let disturb = std::thread::spawn(move || {
            for what in ["SCRIPT", "FUNCTION", "CLIENT", "FUNCTION", "CLIENT"] {
                std::thread::sleep(Duration::from_millis(60));
                if what == "CLIENT" {
                    let _: i64 = redis::cmd("CLIENT")
                        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
                        .query(&mut admin)
                        .unwrap();
                } else {
                    let () = redis::cmd(what).arg("FLUSH").query(&mut admin).unwrap();
                }
            }
            admin
        });
        let (decisions, _) = frozen_phase(&limiter, &format!("{name}-k"), 40);
        let mut admin = disturb.join().unwrap();
        let granted = decisions
            .iter()
            .filter(|d| d.source() == Source::Store && d.is_allowed())
            .count() as u64;
        let failures = limiter.store().stats().failures;
        if name == "closed" {
            let admitted = decisions.iter().filter(|d| d.is_allowed()).count() as u64;
            assert!(admitted <= limit, "{name}: {admitted} admitted");
        }
        // What the server counted: a check from Redis after the run reads it.
        let back = until_the_store_decides(&limiter, &format!("{name}-k"));
        let counted = limit - back.remaining() - u64::from(back.is_allowed());
        assert!(
            granted <= counted && counted <= granted + failures,
            "{name}: the server counted {counted}, the store granted {granted}, \
             {failures} calls failed"
        );
        assert!(granted > 0, "{name}: the store decided some calls");
        // The disturbances reached the server: the library was loaded again.
        assert!(calls(&mut admin, "function|load") >= 1, "{name}");
    }
}
