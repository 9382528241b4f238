//! One API from memory to a Redis Cluster, as the README ("Across servers: Redis")
//! promises it: the same limiter code on random traces decides alike in memory, on
//! one server and on a Cluster of three masters this test starts, on virtual time.
#![cfg(feature = "redis")]

use super::cluster_common::{cluster_store, s, tagged_store, Redis};
use crate::support::redis as redis_support;
use crate::support::rng::Rng;
use redis_support::trace::caller_time_options;
use redis_support::{RedisCluster, RedisServer};
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket, SlidingLog, SmoothBursty};
use sluicegate::stores::redis::{RedisAlgorithm, RedisStore};
use sluicegate::stores::Store;
use sluicegate::{Clock, KeyedRateLimiter, ManualClock};
use std::time::Duration;

/// One call of a trace, on the keys' indices into [`TRACE_KEYS`].
#[derive(Clone, Copy, Debug)]
enum Op {
    /// The clocks move on by this many µs.
    Gap(u64),
    Check(usize, u64),
    Peek(usize, u64),
    Acquire(usize, u64),
    CheckAll(usize, usize, u64),
    PeekAll(usize, usize, u64),
    /// `reserve_all`, then `cancel` at once.
    ReserveAllCancel(usize, usize, u64),
}

/// Ordinary and hostile key texts.
const TRACE_KEYS: [&str; 6] = ["alice", "bob", "}{", "a b:c", "\\]", "{user:7}"];

fn trace_ops(seed: u64, len: usize, multi: bool) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    let mut ops = Vec::with_capacity(2 * len);
    let key = |rng: &mut Rng| rng.below(TRACE_KEYS.len() as u64) as usize;
    for _ in 0..len {
        if rng.chance(60) {
            ops.push(Op::Gap(rng.below(600_000)));
        }
        let (a, b, cost) = (key(&mut rng), key(&mut rng), 1 + rng.below(3));
        let pick = rng.below(if multi { 100 } else { 60 });
        ops.push(match pick {
            0..=34 => Op::Check(a, cost),
            35..=44 => Op::Peek(a, cost),
            45..=59 => Op::Acquire(a, 1 + rng.below(2)),
            60..=79 => Op::CheckAll(a, b, cost),
            80..=89 => Op::PeekAll(a, b, cost),
            _ => Op::ReserveAllCancel(a, b, cost),
        });
    }
    ops
}

/// What `limiter` answers to each of `ops`, as text. After an acquire, which
/// sleeps on the manual clock, the clock is moved on to a whole microsecond, so
/// that every call runs at whole microseconds (where the docs promise the Redis
/// store's decisions equal memory's field by field).
fn run_trace<A, S>(limiter: &KeyedRateLimiter<String, A, S, ManualClock>, ops: &[Op]) -> Vec<String>
where
    A: sluicegate::algorithms::Algorithm,
    S: Store<String, A>,
{
    let clock = limiter.clock();
    let key = |i: usize| s(TRACE_KEYS[i]);
    ops.iter()
        .map(|op| match *op {
            Op::Gap(us) => {
                clock.advance(Duration::from_micros(us));
                format!("gap {us}")
            }
            Op::Check(a, cost) => format!("{:?}", limiter.check(&key(a), cost)),
            Op::Peek(a, cost) => format!("{:?}", limiter.peek(&key(a), cost)),
            Op::Acquire(a, cost) => {
                let waited = limiter.acquire_n(&key(a), cost);
                clock.advance_nanos((1000 - clock.now() % 1000) % 1000);
                format!("{waited:?}")
            }
            Op::CheckAll(a, b, cost) => {
                format!("{:?}", limiter.check_all(&[key(a), key(b)], cost))
            }
            Op::PeekAll(a, b, cost) => format!("{:?}", limiter.peek_all(&[key(a), key(b)], cost)),
            Op::ReserveAllCancel(a, b, cost) => {
                match limiter.reserve_all(&[key(a), key(b)], cost) {
                    Ok(r) => {
                        let (delay, decision) = (r.delay(), r.decision());
                        format!("{delay:?} {decision:?} {:?}", r.cancel())
                    }
                    Err(e) => format!("{e:?}"),
                }
            }
        })
        .collect()
}

fn assert_same_trace(what: &str, ops: &[Op], expected: &[String], got: &[String]) {
    assert_eq!(expected.len(), got.len());
    if let Some(i) = (0..expected.len()).find(|&i| expected[i] != got[i]) {
        panic!(
            "{what}: call {i} ({:?}) differs from memory:\n memory: {}\n   here: {}\n(the calls before: {:?})",
             ops[i],
            expected[i],
            got[i],
            &ops[i.saturating_sub(6)..i]
        );
    }
}

/// The same trace on a memory store, on one server, and on the Cluster (with a
/// shared tag when the trace has multi-key calls, per identity otherwise): every
/// answer equal.
fn same_everywhere<A: RedisAlgorithm + Clone>(
    name: &str,
    algorithm: A,
    server: &RedisServer,
    cluster: &RedisCluster,
    seed: u64,
) {
    // Virtual time starts where a real clock would be: 2023 in ns since 1970.
    let start = Duration::from_secs(1_700_000_000);
    for multi in [true, false] {
        let ops = trace_ops(seed, 250, multi);
        let prefix = format!("{name}-{multi}:");
        let memory = KeyedRateLimiter::with_clock(algorithm.clone(), ManualClock::new());
        let one: Redis<A> =
            RedisStore::open_with(server.url(), caller_time_options(&prefix)).unwrap();
        let one = KeyedRateLimiter::with_store(algorithm.clone(), one, ManualClock::new());
        let many: Redis<A> = if multi {
            tagged_store(cluster, &prefix, "trace")
        } else {
            cluster_store(cluster, &prefix)
        };
        let many = KeyedRateLimiter::with_store(algorithm.clone(), many, ManualClock::new());
        memory.clock().advance(start);
        one.clock().advance(start);
        many.clock().advance(start);
        let expected = run_trace(&memory, &ops);
        // The trace reaches every verdict and, when multi-key, both outcomes of
        // the `_all` calls.
        for needle in ["Allowed", "Denied"] {
            assert!(
                expected.iter().any(|line| line.contains(needle)),
                "{name}: no {needle}"
            );
        }
        assert_same_trace(
            &format!("{name} on one server"),
            &ops,
            &expected,
            &run_trace(&one, &ops),
        );
        assert_same_trace(
            &format!("{name} on the Cluster (multi-key: {multi})"),
            &ops,
            &expected,
            &run_trace(&many, &ops),
        );
    }
}

#[test]
fn the_same_limiter_code_decides_alike_in_memory_on_one_server_and_on_a_cluster_on_virtual_time() {
    let server = RedisServer::start_own();
    let cluster = RedisCluster::start();
    same_everywhere(
        "fw",
        FixedWindow::new(5, Duration::from_secs(1)).unwrap(),
        &server,
        &cluster,
        11,
    );
    same_everywhere(
        "bursty",
        SmoothBursty::new(4.0).unwrap(),
        &server,
        &cluster,
        12,
    );
    let set = AllOf::new((
        LeakyBucket::meter(4, 2, Duration::from_secs(1)).unwrap(),
        SlidingLog::new(3, Duration::from_secs(1)).unwrap(),
    ));
    same_everywhere("set", set, &server, &cluster, 13);
}
