//! Sets of limits (AllOf and Limits, mixing algorithms, nested) and multi-key calls
//! on a real Redis: the same decisions as the pure algorithm on random traces; no
//! lost update; multi-limit calls per identity on Redis Cluster.
#![cfg(feature = "redis")]

mod support;

use support::redis as redis_support;

use redis_support::trace::{
    assert_hammer_grants, caller_time_options, differential, Totals, TraceShape, NOV_2025,
};
use redis_support::{assert_unapplied_error, unique_prefix, RedisCluster, RedisServer};
use sluicegate::algorithms::Receipt;
use sluicegate::algorithms::{
    AllOf, Counting, FixedWindow, LeakyBucket, Limits, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::stores::redis::{RedisAlgorithm, RedisStore};
use sluicegate::stores::{Operation, Store};
use sluicegate::Decision;
use std::time::Duration;

const MS: u64 = 1_000;

fn shape(gap_us: u64, start_us: u64) -> TraceShape {
    TraceShape {
        max_cost: 4,
        max_gap_us: gap_us,
        back_percent: 3,
        max_back_us: gap_us,
        multi_percent: 20,
        start_us,
        // A set keeps nothing of its own (its receipts carry its members'), so
        // Redis answers as memory does, receipts included.
        compare_memory: true,
        // Grants of windows and logs act at once: a cancel gives one back only at
        // that very instant (a set's at its own time to act).
        cancel_percent: 5,
    }
}

fn run<A: RedisAlgorithm>(
    server: &RedisServer,
    set: &A,
    seed: u64,
    gap_us: u64,
    start_us: u64,
) -> [usize; 3] {
    let store = RedisStore::open_with(
        server.url(),
        caller_time_options(&unique_prefix("set-diff")),
    )
    .unwrap();
    differential(set, &store, seed, 2_500, &shape(gap_us, start_us))
}

#[test]
fn random_traces_of_sets_decide_as_the_algorithm() {
    let server = RedisServer::start();
    let ms = Duration::from_millis;
    let mut totals = Totals::default();
    // Seed 002's shape: a short and a long window, plus a log with spacing.
    totals.add(run(
        &server,
        &AllOf::new((
            FixedWindow::new(4, ms(10)).unwrap(),
            SlidingLog::new(9, ms(50)).unwrap().with_min_spacing(ms(1)),
        )),
        700,
        4 * MS,
        0,
    ));
    // Reservations (a queue and Guava's bursty) beside a window counter.
    totals.add(run(
        &server,
        &AllOf::new((
            LeakyBucket::queue(4, 3, Duration::from_secs(1)).unwrap(),
            SmoothBursty::new(5.0).unwrap(),
            SlidingWindowCounter::new(6, ms(900)).unwrap(),
        )),
        701,
        250 * MS,
        1_763_900_000_000_000,
    ));
    totals.add(run(
        &server,
        &AllOf::new((
            SlidingWindowBuckets::weighted(7, ms(60), ms(15)).unwrap(),
            SmoothWarmingUp::new(50.0, ms(200)).unwrap(),
        )),
        702,
        15 * MS,
        5,
    ));
    // Nested: a set is a member like any other.
    totals.add(run(
        &server,
        &AllOf::new((
            AllOf::new((
                FixedWindow::new(3, ms(20)).unwrap(),
                LeakyBucket::meter(5, 1, ms(10)).unwrap(),
            )),
            SlidingLog::new(6, ms(40)).unwrap().with_rejected_recorded(),
        )),
        703,
        7 * MS,
        1 << 52,
    ));
    // Members whose refusals count on their own answer a set as if they did not.
    totals.add(run(
        &server,
        &AllOf::new((
            SlidingWindowCounter::new(4, ms(60))
                .unwrap()
                .with_counting(Counting::Attempts),
            SlidingLog::new(5, ms(100))
                .unwrap()
                .with_min_spacing(ms(3))
                .with_rejected_recorded(),
        )),
        704,
        12 * MS,
        1_763_900_000_000_000,
    ));
    totals.assert_each_above(100);
}

#[test]
fn random_traces_of_limits_decide_as_the_algorithm() {
    let server = RedisServer::start();
    let ms = Duration::from_millis;
    let mut totals = Totals::default();
    totals.add(run(
        &server,
        &Limits::new()
            .with(FixedWindow::new(3, ms(10)).unwrap())
            .with(SlidingLog::new(9, ms(50)).unwrap().with_min_spacing(ms(1))),
        710,
        4 * MS,
        0,
    ));
    // Four members of four kinds, one of them a nested Limits.
    totals.add(run(
        &server,
        &Limits::new()
            .with(LeakyBucket::queue(4, 3, Duration::from_secs(1)).unwrap())
            .with(SmoothBursty::new(5.0).unwrap())
            .with(
                Limits::new()
                    .with(SlidingWindowCounter::new(6, ms(900)).unwrap())
                    .with(SlidingWindowBuckets::weighted(7, ms(600), ms(150)).unwrap()),
            )
            .with(SmoothWarmingUp::new(4.0, ms(500)).unwrap()),
        711,
        250 * MS,
        1_763_900_000_000_000,
    ));
    totals.assert_each_above(100);
    // No member: every call fits, as in memory.
    let seen = run(&server, &Limits::new(), 712, 10 * MS, 77);
    assert_eq!(seen[1] + seen[2], 0, "{seen:?}");
}

/// Sets nested in sets, in three shapes of the same four leaves (a recording log,
/// Guava's bursty, a window, a counter of attempts), with reserves that wait and
/// reports of every limit: Redis decides, numbers the deciding leaf and reports
/// each leaf as memory does.
#[test]
fn random_traces_of_nested_sets_decide_and_report_as_the_algorithm() {
    let server = RedisServer::start();
    let ms = Duration::from_millis;
    let log = || {
        SlidingLog::new(3, ms(100))
            .unwrap()
            .with_rejected_recorded()
    };
    let bursty = || SmoothBursty::new(20.0).unwrap();
    let window = || FixedWindow::new(4, ms(50)).unwrap();
    let counter = || {
        SlidingWindowCounter::new(5, ms(80))
            .unwrap()
            .with_counting(Counting::Attempts)
    };
    let mut totals = Totals::default();
    totals.add(run(
        &server,
        &AllOf::new((AllOf::new((log(), bursty())), window(), counter())),
        720,
        20 * MS,
        0,
    ));
    totals.add(run(
        &server,
        &AllOf::new((
            log(),
            Limits::new()
                .with(bursty())
                .with(Limits::new().with(window()).with(counter())),
        )),
        721,
        20 * MS,
        1_763_900_000_000_000,
    ));
    totals.add(run(
        &server,
        &Limits::new()
            .with(Limits::new().with(log()))
            .with(Limits::new())
            .with(Limits::new().with(bursty()).with(window()))
            .with(counter()),
        722,
        20 * MS,
        5,
    ));
    totals.assert_each_above(100);
}

#[test]
fn a_limits_member_the_server_cannot_run_is_a_typed_error_before_sending() {
    let server = RedisServer::start_own();
    let mut admin = server.connection();
    let window = FixedWindow::new(3, Duration::from_secs(1)).unwrap();
    // An AllOf is not one of the members a Limits can hold on the server.
    let limits = Limits::new()
        .with(window)
        .with(AllOf::new((window, window)));
    let store: RedisStore<&str, Limits> =
        RedisStore::open_with(server.url(), caller_time_options("unknown:")).unwrap();
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut admin)
        .unwrap();
    assert_unapplied_error(
        store.apply_key::<(Decision, Receipt)>(
            &limits,
            &"k",
            0,
            Operation::Reserve {
                cost: 1,
                max_wait: 0,
            },
        ),
        "member 1",
    );
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut admin)
        .unwrap();
    assert!(!info.contains("cmdstat_fcall"), "nothing was sent: {info}");
}

#[test]
fn a_limits_set_cancels_on_the_server_when_every_member_can() {
    let server = RedisServer::start();
    let store: RedisStore<&str, Limits> = RedisStore::open_with(
        server.url(),
        caller_time_options(&unique_prefix("lim-cancel")),
    )
    .unwrap();
    let queue = Limits::new()
        .with(LeakyBucket::queue(3, 1, Duration::from_secs(1)).unwrap())
        .with(SmoothBursty::new(1.0).unwrap());
    let take = Operation::Reserve {
        cost: 1,
        max_wait: u64::MAX,
    };
    let first = store
        .apply_key::<(Decision, Receipt)>(&queue, &"k", 0, take)
        .unwrap();
    let (second, receipt) = store
        .apply_key::<(Decision, Receipt)>(&queue, &"k", 0, take)
        .unwrap();
    assert!(first.0.is_allowed() && second.is_allowed());
    assert_eq!(second.wait_nanos(), 1_000_000_000);
    // Cancelled before it acts: the turn comes back, as in memory.
    let mut out = [(Decision::never(0, 0, 0), Receipt::NONE)];
    let cancel = Operation::Cancel {
        receipts: &[receipt],
        acts_at: second.wait_nanos(),
    };
    store.apply(&queue, &["k"], 0, cancel, &mut out).unwrap();
    let (third, _) = store
        .apply_key::<(Decision, Receipt)>(&queue, &"k", 0, take)
        .unwrap();
    assert_eq!(third.wait_nanos(), 1_000_000_000);
}

#[test]
fn threads_hammering_a_set_get_exactly_its_tightest_limit() {
    let server = RedisServer::start();
    let set = AllOf::new((
        SlidingLog::new(1_000, Duration::from_secs(60)).unwrap(),
        FixedWindow::new(300, Duration::from_secs(60)).unwrap(),
    ));
    assert_hammer_grants(&server, "set-hammer", &set, ((NOV_2025, 0), 120), 300);
}

#[test]
fn a_refused_set_call_changes_no_member() {
    let server = RedisServer::start_own();
    let mut admin = server.connection();
    let set = AllOf::new((
        FixedWindow::new(10, Duration::from_secs(60)).unwrap(),
        FixedWindow::new(1, Duration::from_secs(60)).unwrap(),
    ));
    let store: RedisStore<&str, _> =
        RedisStore::open_with(server.url(), caller_time_options("r:")).unwrap();
    let take = Operation::Reserve {
        cost: 1,
        max_wait: 0,
    };
    assert!(store
        .apply_key::<(Decision, Receipt)>(&set, &"k", 0, take)
        .map(|(d, _)| d)
        .unwrap()
        .is_allowed());
    // Values are bytes: some states are binary.
    let dump = |admin: &mut redis::Connection| -> Vec<(String, Vec<u8>)> {
        let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(admin).unwrap();
        keys.sort();
        keys.into_iter()
            .map(|k| {
                let v: Vec<u8> = redis::cmd("GET").arg(&k).query(admin).unwrap();
                (k, v)
            })
            .collect()
    };
    let before = dump(&mut admin);
    assert_eq!(before.len(), 2, "{before:?}"); // one key per member, none of the set's own
    let refused = store
        .apply_key::<(Decision, Receipt)>(&set, &"k", 0, take)
        .map(|(d, _)| d)
        .unwrap();
    assert!(!refused.is_allowed());
    assert_eq!(refused.limit_index(), 1);
    assert_eq!(dump(&mut admin), before);
    // A peek creates nothing for a new identity.
    store
        .apply_key::<(Decision, Receipt)>(&set, &"fresh", 0, Operation::Peek { cost: 1 })
        .map(|(d, _)| d)
        .unwrap();
    assert_eq!(dump(&mut admin), before);
}

#[test]
fn cluster_multi_limit_calls_per_identity() {
    let cluster = RedisCluster::start();
    let set = AllOf::new((
        FixedWindow::new(3, Duration::from_secs(1)).unwrap(),
        SlidingLog::new(5, Duration::from_secs(60)).unwrap(),
        LeakyBucket::meter(4, 1, Duration::from_secs(1)).unwrap(),
    ));
    let store: RedisStore<String, _> =
        RedisStore::open_cluster(cluster.urls(), caller_time_options("cl-set:")).unwrap();
    let take = Operation::Reserve {
        cost: 1,
        max_wait: 0,
    };
    for i in 0..150 {
        let id = format!("ip:10.0.{}.{}", i / 250, i % 250);
        for expected_remaining in [2, 1, 0] {
            let d = store
                .apply_key::<(Decision, Receipt)>(&set, &id, 0, take)
                .map(|(d, _)| d)
                .unwrap();
            assert!(d.is_allowed(), "{id}");
            assert_eq!(d.remaining(), expected_remaining, "{id}");
        }
        let refused = store
            .apply_key::<(Decision, Receipt)>(&set, &id, 0, take)
            .map(|(d, _)| d)
            .unwrap();
        assert!(!refused.is_allowed());
        assert_eq!(refused.limit_index(), 0);
    }
    // Two identities in one call: refused before sending unless they share a slot.
    let mut out: [_; 2] = std::array::from_fn(|_| (Decision::never(0, 0, 0), Receipt::NONE));
    let pair = ["user:alice".to_owned(), "user:bob".to_owned()];
    assert!(store.apply(&set, &pair, 0, take, &mut out).is_err());
}

/// Eight threads on the real clock, each with its own limiter and connection over
/// one server, call `try_acquire` and `check` on one key of a set: calls that keep
/// no receipt, which the server answers without one. Together they are granted
/// exactly the tightest member's limit, and a reservation (which keeps its receipt)
/// made after them is refused, its retry no later than a `check`'s before it.
#[test]
fn threads_trying_a_set_without_receipts_get_exactly_its_tightest_limit() {
    let server = RedisServer::start();
    let hour = Duration::from_secs(3600);
    let set = AllOf::new((
        SlidingLog::new(200, hour).unwrap(),
        SlidingWindowBuckets::dropping(500, hour, Duration::from_secs(60)).unwrap(),
    ));
    let prefix = unique_prefix("set-bare");
    // A limiter of its own (its own connection) on the real clock.
    let limiter = || {
        let options = sluicegate::stores::redis::RedisOptions::default()
            .prefix(&prefix)
            .unwrap();
        let store: RedisStore<String, _> = RedisStore::open_with(server.url(), options).unwrap();
        sluicegate::KeyedRateLimiter::with_store(set, store, sluicegate::clock::DefaultClock::new())
    };
    let granted: u64 = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let limiter = limiter();
                scope.spawn(move || {
                    (0..50u64)
                        .filter(|i| {
                            if (i + t) % 2 == 0 {
                                limiter.try_acquire("hot")
                            } else {
                                limiter.check("hot", 1).unwrap().is_allowed()
                            }
                        })
                        .count() as u64
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    assert_eq!(granted, 200);
    let limiter = limiter();
    let checked = limiter.check("hot", 1).unwrap();
    assert!(!checked.is_allowed());
    assert_eq!((checked.limit(), checked.remaining()), (200, 0));
    // Later on the real clock: its retry comes no later than the check's.
    let refused = limiter.reserve("hot", 1).unwrap();
    assert!(!refused.is_ok());
    assert_eq!(refused.decision().limit(), 200);
    let retry = refused.decision().retry_after();
    assert!(retry > Duration::ZERO && retry <= checked.retry_after());
}
