//! The async and keyed front ends' scenarios on a Redis server this test starts, on
//! the caller's time ("every decision is identical, field by field, to the
//! in-memory store's"): a set's answer, when async calls read the time, abandoned
//! waits, bad input, threads and tasks on the real clock, and random traces of
//! multi-key calls on sets deciding on Redis as in memory.
#![cfg(feature = "redis")]

use super::async_bad_input_from_docs::{bad_input_is_typed, guarded};
use super::async_common::{cadence, ms, runtime, secs, Keyed};
use super::async_on_the_real_clock_from_docs::{
    eight_threads_check_all, sixteen_tasks_reserve_all,
    sixteen_timed_out_list_waits_give_their_turns_back, Owned,
};
use super::async_waits_from_docs::{
    a_list_wait_and_a_key_wait_are_recorded_apart,
    a_wait_that_acts_keeps_the_abandoned_ones_before_it,
    an_async_cancel_reads_the_time_when_called, an_async_reserve_reads_the_time_when_first_polled,
};
use super::keyed_answers_from_docs::{a_sets_answers_follow_the_table, two_windows};
use crate::support::redis::trace::caller_time_options;
use crate::support::redis::{unique_prefix, RedisServer};
use crate::support::rng::Rng;
use crate::support::timed_clock::Timed;

use sluicegate::algorithms::{
    Algorithm, AllOf, FixedWindow, LeakyBucket, Limits, SlidingLog, SlidingWindowCounter,
    SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore};
use sluicegate::stores::MemoryStore;
use sluicegate::stores::Store;
use sluicegate::{DefaultClock, KeyedRateLimiter};

fn caller<A: RedisAlgorithm, C: Clock>(
    server: &RedisServer,
    algorithm: A,
    clock: C,
) -> Keyed<A, RedisStore<&'static str, A>, C> {
    let options = caller_time_options(&unique_prefix("async-from-docs"));
    let store = RedisStore::open_with(server.url(), options).unwrap();
    KeyedRateLimiter::with_store(algorithm, store, clock)
}

fn server_time<A: RedisAlgorithm>(
    server: &RedisServer,
    algorithm: A,
) -> Owned<A, RedisStore<String, A>> {
    let options = RedisOptions::default()
        .prefix(unique_prefix("async-from-docs-real"))
        .unwrap()
        .response_timeout(secs(5))
        .connect_timeout(secs(5));
    let store = RedisStore::open_with(server.url(), options).unwrap();
    KeyedRateLimiter::with_store(algorithm, store, DefaultClock::new())
}

#[test]
fn a_sets_answers_through_a_keyed_limiter_follow_the_table_on_redis() {
    let server = RedisServer::start();
    a_sets_answers_follow_the_table(caller(&server, two_windows(), ManualClock::new()));
}

#[test]
fn async_reserves_and_cancels_read_the_time_as_documented_on_redis() {
    let server = RedisServer::start();
    let rt = runtime();
    let bursty = || SmoothBursty::new(1.0).unwrap();
    an_async_reserve_reads_the_time_when_first_polled(
        caller(&server, bursty(), ManualClock::new()),
        &rt,
    );
    an_async_cancel_reads_the_time_when_called(caller(&server, bursty(), ManualClock::new()), &rt);
}

#[test]
fn abandoned_waits_on_keys_and_lists_on_redis() {
    let server = RedisServer::start();
    let rt = runtime();
    let bursty = || caller(&server, SmoothBursty::new(1.0).unwrap(), Timed::default());
    a_list_wait_and_a_key_wait_are_recorded_apart(bursty(), &rt);
    a_wait_that_acts_keeps_the_abandoned_ones_before_it(bursty, &rt);
}

#[test]
fn bad_input_to_the_async_keyed_calls_is_a_typed_error_on_redis() {
    let server = RedisServer::start();
    bad_input_is_typed(
        caller(&server, guarded(), ManualClock::new()),
        caller(&server, Limits::new(), ManualClock::new()),
        &runtime(),
    );
}

#[test]
fn threads_and_tasks_on_the_real_clock_stay_within_the_limit_on_redis() {
    let server = RedisServer::start();
    eight_threads_check_all(server_time(
        &server,
        SlidingLog::new(40, secs(3600)).unwrap(),
    ));
    sixteen_tasks_reserve_all(server_time(
        &server,
        SlidingLog::new(50, secs(3600)).unwrap(),
    ));
    sixteen_timed_out_list_waits_give_their_turns_back(server_time(&server, cadence()));
}

/// One call of a differential trace.
#[derive(Clone, Debug)]
enum Op {
    Advance(u64),
    CheckAll(Vec<&'static str>, u64),
    PeekAll(Vec<&'static str>, u64),
    CheckEach(&'static str, u64),
    ReserveAll(Vec<&'static str>, u64, bool),
    Cancel(usize, bool),
    AcquireAll(Vec<&'static str>, u64),
}

const KEYS: [&str; 3] = ["alice", "bob", "}{ x"];

/// Multi-key calls (a repeated key among them), reservations and cancels
/// (blocking and async), and, with `acquires`, async acquires of distinct keys.
fn ops(seed: u64, steps: usize, acquires: bool) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    let mut held = 0usize;
    let mut out = Vec::new();
    let pick = |rng: &mut Rng, distinct: bool| -> Vec<&'static str> {
        let n = 1 + rng.below(3) as usize;
        if distinct {
            let first = rng.below(3) as usize;
            (0..n).map(|i| KEYS[(first + i) % 3]).collect()
        } else {
            (0..n).map(|_| KEYS[rng.below(3) as usize]).collect()
        }
    };
    for _ in 0..steps {
        let cost = 1 + rng.below(3);
        let op = match rng.below(10) {
            0 | 1 => Op::Advance(rng.below(400)),
            2 | 3 => Op::CheckAll(pick(&mut rng, false), cost),
            4 => Op::PeekAll(pick(&mut rng, false), cost),
            5 => Op::CheckEach(KEYS[rng.below(3) as usize], cost),
            6 | 7 => {
                held += 1;
                Op::ReserveAll(pick(&mut rng, true), cost, rng.chance(50))
            }
            8 if held > 0 => {
                held -= 1;
                Op::Cancel(rng.below(held as u64 + 1) as usize, rng.chance(50))
            }
            _ if acquires => Op::AcquireAll(pick(&mut rng, true), 1),
            _ => Op::Advance(rng.below(400)),
        };
        out.push(op);
    }
    out
}

/// Runs `ops` on `limiter` (on a manual clock from 0), one line per call.
fn run<A, S>(
    limiter: &Keyed<A, S, ManualClock>,
    ops: &[Op],
    rt: &tokio::runtime::Runtime,
) -> Vec<String>
where
    A: Algorithm,
    S: Store<&'static str, A> + 'static,
{
    let handle = limiter.to_async();
    let mut held = Vec::new();
    let mut seen = Vec::new();
    for op in ops {
        let line = match op {
            Op::Advance(n) => {
                limiter.clock().advance(ms(*n));
                format!("now {}", limiter.clock().now())
            }
            Op::CheckAll(keys, cost) => format!("{:?}", limiter.check_all(keys, *cost)),
            Op::PeekAll(keys, cost) => format!("{:?}", limiter.peek_all(keys, *cost)),
            Op::CheckEach(key, cost) => {
                let mut each = Vec::new();
                let d = limiter.check_each(key, *cost, &mut |d| each.push(d));
                format!("{d:?} {each:?}")
            }
            Op::ReserveAll(keys, cost, asynchronous) => {
                let r = if *asynchronous {
                    rt.block_on(handle.reserve_all(keys, *cost)).unwrap()
                } else {
                    limiter.reserve_all(keys, *cost).unwrap()
                };
                let line = format!(
                    "{} {} {:?} {:?}",
                    r.is_ok(),
                    r.acts_at(),
                    r.delay(),
                    r.decision()
                );
                held.push(r);
                line
            }
            Op::Cancel(index, asynchronous) => {
                let r = held.remove(*index);
                if *asynchronous {
                    rt.block_on(r.cancel_async()).unwrap();
                } else {
                    r.cancel().unwrap();
                }
                "cancelled".to_string()
            }
            Op::AcquireAll(keys, cost) => {
                let waited = rt.block_on(handle.acquire_all(keys, *cost));
                let line = format!("{waited:?} now {}", limiter.clock().now());
                // A wait need not be whole microseconds (a warming-up one);
                // the Redis store matches memory on whole-microsecond times.
                let now = limiter.clock().now();
                limiter.clock().advance_nanos((1_000 - now % 1_000) % 1_000);
                line
            }
        };
        seen.push(line);
    }
    seen
}

/// Redis decides as memory on random traces. `acquires` only for limits whose
/// waits are whole microseconds: an acquire sleeps its waits and retries at
/// the time it reaches, and the store's answers are identical to memory's on
/// whole-microsecond times ("with other times the server's answer is the one
/// for the microsecond below").
fn same_as_memory<A: RedisAlgorithm + Clone>(server: &RedisServer, algorithm: A, acquires: bool) {
    let rt = runtime();
    for seed in 0..3 {
        let ops = ops(seed, 150, acquires);
        let memory: Keyed<A, MemoryStore<&'static str, A>, ManualClock> =
            KeyedRateLimiter::with_clock(algorithm.clone(), ManualClock::new());
        let expected = run(&memory, &ops, &rt);
        let redis = caller(server, algorithm.clone(), ManualClock::new());
        let got = run(&redis, &ops, &rt);
        for (i, (want, saw)) in expected.iter().zip(&got).enumerate() {
            assert_eq!(saw, want, "seed {seed}, call {i}: {:?}", ops[i]);
        }
    }
}

#[test]
fn multi_key_calls_on_sets_decide_on_redis_as_in_memory() {
    let server = RedisServer::start();
    same_as_memory(
        &server,
        AllOf::new((
            SmoothBursty::new(4.0).unwrap(),
            FixedWindow::new(5, secs(1)).unwrap(),
            SlidingLog::new(8, secs(3)).unwrap(),
        )),
        true,
    );
    same_as_memory(
        &server,
        Limits::new()
            .with(LeakyBucket::queue(3, 1, ms(100)).unwrap())
            .with(SlidingWindowCounter::new(6, secs(2)).unwrap())
            .with(
                Limits::new()
                    .with(SmoothWarmingUp::new(2.0, secs(2)).unwrap())
                    .with(FixedWindow::new(10, secs(5)).unwrap()),
            ),
        false,
    );
}
