//! Every algorithm's documented edges on a real Redis, through the keyed limiter a
//! user calls, against the same limiter over the in-memory store on the same
//! virtual clock (the store's docs: "Driven with whole-microsecond times and waits,
//! every decision is identical, field by field, to the in-memory store's"): a
//! window's last nanosecond, a log entry's expiry, the minimum spacing, recorded
//! refusals and counted attempts, both roundings, dropped and weighted buckets, the
//! driftless meter and the queue's turns, Guava's limiters from a fresh key, tiny
//! rates, never costs, a set's table and each member's standing; a peek creates
//! no key on the server.
#![cfg(feature = "redis")]

use super::twin_limiters::{secs, Twin, S};
use crate::support::redis as redis_support;

use redis_support::RedisServer;
use sluicegate::algorithms::{
    AllOf, Counting, FixedWindow, LeakyBucket, Limits, Rounding, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::Nanos;
use sluicegate::stores::redis::RedisAlgorithm;
use sluicegate::{Decision, Error, Verdict};
use std::time::Duration;

const MS: Nanos = 1_000_000;

fn fields(d: &Decision) -> (Verdict, u64, u64, Nanos, Nanos, Nanos) {
    (
        d.verdict(),
        d.limit(),
        d.remaining(),
        d.wait_nanos(),
        d.retry_after_nanos(),
        d.reset_after_nanos(),
    )
}

#[test]
fn a_fixed_window_to_its_last_nanosecond_and_never_costs_decide_as_in_memory() {
    use Verdict::*;
    let server = RedisServer::start();
    let twin = Twin::new(
        &server,
        "fixed 3/min",
        FixedWindow::new(3, secs(60)).unwrap(),
    );
    twin.to(5 * S);
    assert_eq!(fields(&twin.check(1)), (Allowed, 3, 2, 0, 0, 55 * S));
    assert_eq!(fields(&twin.check(2)), (Allowed, 3, 0, 0, 0, 55 * S));
    assert_eq!(fields(&twin.check(1)), (Denied, 3, 0, 0, 55 * S, 55 * S));
    assert_eq!(fields(&twin.check(4)), (Never, 3, 0, 0, u64::MAX, 55 * S));
    twin.check(u64::MAX);
    twin.peek(u64::MAX);
    // The last microsecond of the window (the server counts whole microseconds).
    twin.to(60 * S - 1_000);
    assert_eq!(fields(&twin.check(1)), (Denied, 3, 0, 0, 1_000, 1_000));
    twin.to(60 * S);
    assert_eq!(fields(&twin.peek(3)), (Allowed, 3, 0, 0, 0, 60 * S));
    assert_eq!(fields(&twin.check(3)), (Allowed, 3, 0, 0, 0, 60 * S));
    assert!(matches!(twin.acquire(4), Err(Error::Never { .. })));
    assert_eq!(twin.acquire(1).unwrap(), secs(60));
}

#[test]
fn the_counter_in_both_roundings_and_counting_attempts_decides_as_in_memory() {
    let server = RedisServer::start();
    let exact = SlidingWindowCounter::new(3, secs(60)).unwrap();
    for (label, counter) in [
        ("exact", exact),
        ("floor", exact.with_rounding(Rounding::Floor)),
        ("attempts", exact.with_counting(Counting::Attempts)),
    ] {
        let twin = Twin::new(&server, label, counter);
        assert!(twin.check(3).is_allowed());
        let first = twin.check(1);
        twin.check(4); // never: not counted, even counting attempts
        for t in [
            60 * S,
            60 * S + 1_000,
            80 * S - 1_000,
            80 * S,
            100 * S,
            119 * S,
        ] {
            twin.to(t);
            twin.peek(1);
            twin.check(1);
        }
        if label == "exact" {
            assert_eq!(first.retry_after_nanos(), 80 * S);
        }
    }
    // The approximation's worst case, and the whole limit two windows away.
    let twin = Twin::new(
        &server,
        "2/min at 59 s",
        SlidingWindowCounter::new(2, secs(60)).unwrap(),
    );
    twin.to(59 * S);
    assert!(twin.check(2).is_allowed());
    assert_eq!(twin.check(1).retry_after_nanos(), 31 * S);
    assert_eq!(twin.check(2).retry_after_nanos(), 61 * S);
}

#[test]
fn log_expiry_spacing_and_recorded_refusals_decide_as_in_memory_and_peeks_write_nothing() {
    let server = RedisServer::start();
    let twin = Twin::new(&server, "log 1/10 s", SlidingLog::new(1, secs(10)).unwrap());
    assert_eq!(twin.peek(1).verdict(), Verdict::Allowed);
    assert_eq!(twin.server_keys(), 0, "a peek created a key");
    assert!(twin.check(1).is_allowed());
    twin.to(10 * S - 1_000);
    assert_eq!(twin.check(1).retry_after_nanos(), 1_000);
    twin.to(10 * S);
    assert!(twin.check(1).is_allowed());

    let spaced = SlidingLog::new(100, secs(60))
        .unwrap()
        .with_min_spacing(Duration::from_millis(500));
    let twin = Twin::new(&server, "spaced", spaced);
    assert!(twin.check(1).is_allowed());
    twin.to(500 * MS - 1_000);
    assert_eq!(twin.check(1).retry_after_nanos(), 1_000);
    twin.to(500 * MS);
    assert_eq!(twin.check(1).remaining(), 98);

    let recorded = SlidingLog::new(1, secs(10))
        .unwrap()
        .with_rejected_recorded();
    let twin = Twin::new(&server, "recorded", recorded);
    assert!(twin.check(1).is_allowed());
    twin.to(4 * S);
    // `peek_unrecorded`'s example: a recorded attempt at 4 s would stay until 14 s.
    assert_eq!(twin.peek(1).retry_after_nanos(), 10 * S);
    twin.to(9 * S);
    assert_eq!(twin.check(1).retry_after_nanos(), 10 * S); // recorded at 9 s
    twin.to(19 * S - 1_000);
    assert!(!twin.peek(1).is_allowed());
    twin.to(19 * S);
    assert!(twin.check(1).is_allowed());

    let both = SlidingLog::new(10, secs(60))
        .unwrap()
        .with_rejected_recorded()
        .with_min_spacing(secs(1));
    let twin = Twin::new(&server, "recorded and spaced", both);
    assert!(twin.check(1).is_allowed());
    twin.to(500 * MS);
    assert_eq!(twin.check(1).retry_after_nanos(), S);
    twin.to(1_500 * MS);
    assert!(twin.check(1).is_allowed());
    twin.check(11);

    let set = AllOf::new((both, FixedWindow::new(100, secs(3600)).unwrap()));
    let twin = Twin::new(&server, "recorded log in a set", set);
    assert!(twin.check(1).is_allowed());
    twin.to(500 * MS);
    let refused = twin.check(1);
    assert_eq!(
        (refused.limit_index(), refused.retry_after_nanos()),
        (0, 500 * MS)
    );
    twin.to(S);
    assert!(twin.check(1).is_allowed());

    // A spacing the server cannot count in microseconds is a typed error there
    // ("Anything else is a typed error"), and nothing is written.
    let once = SlidingLog::new(100, secs(1))
        .unwrap()
        .with_min_spacing(Duration::MAX);
    let twin = Twin::new(&server, "spacing Duration::MAX", once);
    let refused = twin.redis.check(&"k", 1);
    assert!(
        matches!(
            refused,
            Err(Error::InvalidDuration {
                what: "min_spacing",
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(twin.server_keys(), 0);
}

#[test]
fn dropped_and_weighted_buckets_at_their_instants_decide_as_in_memory() {
    let server = RedisServer::start();
    let dropping = SlidingWindowBuckets::dropping(3, secs(60), secs(15)).unwrap();
    let twin = Twin::new(&server, "dropping 3/60 s in 15 s", dropping);
    for t in [5, 15, 20] {
        twin.to(t * S);
        assert!(twin.check(1).is_allowed(), "{t} s");
    }
    twin.to(21 * S);
    let refused = twin.check(1);
    assert_eq!(
        (refused.retry_after_nanos(), refused.reset_after_nanos()),
        (39 * S, 54 * S)
    );
    twin.to(60 * S - 1_000);
    assert_eq!(twin.check(1).retry_after_nanos(), 1_000);
    twin.to(60 * S);
    assert!(twin.check(1).is_allowed());
    for (label, weighted) in [
        (
            "weighted 100/60 s in 30 s",
            SlidingWindowBuckets::weighted(100, secs(60), secs(30)).unwrap(),
        ),
        (
            "weighted 100/60 s in 25 s",
            SlidingWindowBuckets::weighted(100, secs(60), secs(25)).unwrap(),
        ),
    ] {
        let twin = Twin::new(&server, label, weighted);
        assert!(twin.check(100).is_allowed());
        for t in [
            60 * S,
            60_300 * MS - 1_000,
            60_300 * MS,
            75 * S,
            89 * S,
            90 * S,
        ] {
            twin.to(t);
            twin.peek(1);
            twin.check(1);
            twin.check(40);
        }
    }
}

#[test]
fn the_meter_and_the_queue_at_whole_microseconds_decide_as_in_memory() {
    let server = RedisServer::start();
    let twin = Twin::new(
        &server,
        "meter 3 per 20 s",
        LeakyBucket::meter(3, 1, secs(20)).unwrap(),
    );
    for _ in 0..4 {
        twin.check(1);
    }
    twin.check(4);
    twin.to(20 * S - 1_000);
    assert_eq!(twin.check(1).retry_after_nanos(), 1_000);
    twin.to(20 * S);
    assert!(twin.check(1).is_allowed());
    // 3 per second, an interval of no whole nanoseconds: each refusal waited out
    // to the next whole microsecond, then granted.
    for capacity in [1, 2] {
        let twin = Twin::new(
            &server,
            "meter 3/s",
            LeakyBucket::meter(capacity, 3, secs(1)).unwrap(),
        );
        for k in 0..30 {
            let refused = twin.check(1);
            if !refused.is_allowed() {
                twin.wait_out(&refused);
                assert!(twin.check(1).is_allowed(), "permit {k}");
            }
        }
    }
    // The queue: turns 1 s apart, the non-waiting caller's retry when idle, a
    // blocking acquire that waits for room and then for its turn.
    let twin = Twin::new(
        &server,
        "queue 3",
        LeakyBucket::queue(3, 1, secs(1)).unwrap(),
    );
    twin.check(4);
    assert_eq!(twin.acquire(1).unwrap(), Duration::ZERO);
    assert_eq!(twin.acquire(1).unwrap(), secs(1));
    let refused = twin.check(1);
    assert_eq!(
        (refused.retry_after_nanos(), refused.reset_after_nanos()),
        (S, S)
    );
    assert_eq!(twin.acquire(2).unwrap(), secs(1));
    assert!(matches!(twin.acquire(4), Err(Error::Never { .. })));
}

#[test]
fn guava_limiters_from_a_fresh_key_and_tiny_rates_decide_as_in_memory() {
    let server = RedisServer::start();
    let bursty = |rate: f64| SmoothBursty::new(rate).unwrap();
    for (label, algorithm) in [
        ("bursty 5/s", bursty(5.0)),
        ("bursty 3/s", bursty(3.0)),
        (
            "bursty, no burst",
            bursty(4.0).with_max_burst(Duration::ZERO).unwrap(),
        ),
        ("bursty 0.5/s", bursty(0.5)),
    ] {
        let twin = Twin::new(&server, label, algorithm);
        twin.to(S);
        twin.peek(u64::MAX);
        for t in [S, S, S, S, 1_200 * MS, 3 * S, 3 * S, 10 * S] {
            twin.to(t);
            twin.check(1);
            twin.check(3);
        }
    }
    // The keyed example: a fresh key at 1 s holds a full burst.
    let twin = Twin::new(&server, "bursty 4/s", bursty(4.0));
    twin.to(S);
    let burst = twin.check(4);
    assert_eq!((burst.is_allowed(), burst.remaining()), (true, 0));
    assert!(twin.check(1).is_allowed());
    assert_eq!(twin.check(1).retry_after_nanos(), 250 * MS);
    // The smallest rate: one grant, then never, at once.
    let twin = Twin::new(&server, "bursty 5e-324", bursty(5e-324));
    assert!(twin.check(1).is_allowed());
    assert_eq!(twin.check(1).verdict(), Verdict::Never);
    assert!(matches!(twin.acquire(1), Err(Error::Never { .. })));
    for (label, algorithm) in [
        (
            "warming 2/s, 4 s",
            SmoothWarmingUp::new(2.0, secs(4)).unwrap(),
        ),
        (
            "warming, no warm-up",
            SmoothWarmingUp::new(2.0, Duration::ZERO).unwrap(),
        ),
        (
            "warming 5/s, cold 10",
            SmoothWarmingUp::new(5.0, secs(4))
                .unwrap()
                .with_cold_factor(10.0)
                .unwrap(),
        ),
    ] {
        let twin = Twin::new(&server, label, algorithm);
        for _ in 0..6 {
            let d = twin.check(1);
            twin.peek(2);
            twin.wait_out(&d);
        }
        twin.to(twin.now() + 10 * S);
        twin.check(1);
        twin.check(1);
    }
}

#[test]
fn a_sets_table_and_each_members_standing_decide_as_in_memory() {
    use Verdict::*;
    let server = RedisServer::start();
    let set = AllOf::new((
        FixedWindow::new(2, secs(1)).unwrap(),
        FixedWindow::new(10, secs(60)).unwrap(),
        SlidingLog::new(2, secs(10)).unwrap(),
    ));
    let twin = Twin::new(&server, "a set of three", set);
    let row = |d: Decision| {
        (
            d.verdict(),
            d.limit_index(),
            d.limit(),
            d.remaining(),
            d.retry_after_nanos(),
        )
    };
    assert_eq!(row(twin.check(1)), (Allowed, 0, 2, 1, 0));
    assert_eq!(row(twin.check(1)), (Allowed, 0, 2, 0, 0));
    assert_eq!(row(twin.check(1)), (Denied, 2, 2, 0, 10 * S));
    assert_eq!(row(twin.check(3)), (Never, 0, 2, 0, u64::MAX));
    twin.to(S);
    assert_eq!(row(twin.check(1)), (Denied, 2, 2, 0, 9 * S));

    let limits = Limits::new()
        .with(FixedWindow::new(2, secs(1)).unwrap())
        .with(SlidingLog::new(3, secs(10)).unwrap())
        .with(LeakyBucket::meter(2, 1, secs(1)).unwrap());
    let twin = Twin::new(&server, "standing of three", limits);
    let (d, each) = twin.check_each(1);
    assert_eq!((d.remaining(), d.reset_after_nanos()), (1, 10 * S));
    let retries: Vec<Nanos> = each.iter().map(Decision::retry_after_nanos).collect();
    assert_eq!(retries, [S, 10 * S, S]);
    twin.to(500 * MS);
    twin.check_each(1);
    twin.check_each(1);
    twin.check_each(3);
    twin.check_each(u64::MAX);
    twin.to(10 * S);
    twin.check_each(2);

    let twin = Twin::new(&server, "an empty set", Limits::new());
    let all = twin.check(u64::MAX);
    assert_eq!((all.limit(), all.remaining()), (u64::MAX, u64::MAX));
    assert_eq!(twin.acquire(u64::MAX).unwrap(), Duration::ZERO);
}

/// A trace that hammers, idles and comes back at window edges (20 s windows), at
/// whole microseconds.
fn trace() -> Vec<(Nanos, u64)> {
    let instants = [
        0,
        1_000,
        2 * S,
        5 * S - 1_000,
        5 * S,
        7 * S,
        20 * S - 1_000,
        20 * S,
        33 * S,
        40 * S,
        61 * S,
    ];
    let mut calls = Vec::new();
    for (i, &t) in instants.iter().enumerate() {
        for k in 0..4 {
            calls.push((t + 3 * S, 1 + ((i + k) % 3) as u64));
        }
    }
    calls
}

fn replay<A: RedisAlgorithm + Clone + Send + Sync>(server: &RedisServer, label: &str, algorithm: A)
where
    A::State: Send,
{
    let twin = Twin::new(server, label, algorithm);
    let mut refusals = 0;
    for (t, cost) in trace() {
        twin.to(t);
        twin.peek(cost);
        refusals += usize::from(!twin.check(cost).is_allowed());
        twin.check_each(cost);
    }
    assert!(refusals >= 3, "{label}: only {refusals} refusals");
}

#[test]
fn a_trace_at_window_edges_decides_as_in_memory_for_every_configuration() {
    let server = RedisServer::start();
    let w = secs(20);
    replay(&server, "fixed", FixedWindow::new(4, w).unwrap());
    replay(
        &server,
        "counter, floor",
        SlidingWindowCounter::new(4, w)
            .unwrap()
            .with_rounding(Rounding::Floor),
    );
    replay(
        &server,
        "counter, attempts",
        SlidingWindowCounter::new(4, w)
            .unwrap()
            .with_counting(Counting::Attempts),
    );
    replay(
        &server,
        "buckets, weighted 7 s",
        SlidingWindowBuckets::weighted(4, w, secs(7)).unwrap(),
    );
    replay(
        &server,
        "buckets, dropped 7 s",
        SlidingWindowBuckets::dropping(4, w, secs(7)).unwrap(),
    );
    replay(
        &server,
        "log, recorded and spaced",
        SlidingLog::new(4, w)
            .unwrap()
            .with_rejected_recorded()
            .with_min_spacing(secs(2)),
    );
    replay(
        &server,
        "meter, 1/3 s",
        LeakyBucket::meter(3, 3, secs(1)).unwrap(),
    );
    replay(&server, "queue", LeakyBucket::queue(4, 1, secs(5)).unwrap());
    replay(&server, "bursty", SmoothBursty::new(0.5).unwrap());
    replay(
        &server,
        "warming up",
        SmoothWarmingUp::new(0.5, secs(8)).unwrap(),
    );
    replay(
        &server,
        "a set with a recording log",
        AllOf::new((
            FixedWindow::new(4, w).unwrap(),
            SlidingLog::new(3, secs(10))
                .unwrap()
                .with_rejected_recorded(),
        )),
    );
}
