//! Keyed reservations over the Redis store, on the harness's own server: the same
//! random traces as in memory (`keyed/reservations.rs`), one key and two, blocking
//! and async, give the same observations call for call on the caller's time; a
//! failed cancel says whether it may have been applied; and on the real clock,
//! tasks reserving and cancelling at once on a few keys never act on more permits
//! than the limit allows (the same test runs in memory too).
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;
use crate::support::reservation_trace;

use redis_support::trace::caller_time_options;
use redis_support::{current_thread_runtime, unique_prefix, RedisServer};
use reservation_trace::{assert_same, run_keyed, trace, Mode, Rng};
use sluicegate::algorithms::{
    AllOf, FixedWindow, LeakyBucket, SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::{ManualClock, Nanos};
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore};
use sluicegate::stores::{MemoryStore, Store};
use sluicegate::{Applied, DefaultClock, Error, KeyedRateLimiter};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type OnRedis<A, C = ManualClock> =
    KeyedRateLimiter<&'static str, A, RedisStore<&'static str, A>, C>;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A limiter over a new store on `url`, on the caller's (virtual) time.
fn on_redis<A: RedisAlgorithm>(url: &str, algorithm: A, options: RedisOptions) -> OnRedis<A> {
    let store = RedisStore::open_with(url, options).unwrap();
    KeyedRateLimiter::with_store(algorithm, store, ManualClock::new())
}

/// Random traces on one key and on two: the Redis store, blocking and async (on a
/// runtime of its own, where its async connection lives), sees what memory sees.
fn same_as_memory<A: RedisAlgorithm + Clone>(server: &RedisServer, algorithm: A, max_cost: u64) {
    let one: &[&'static str] = &["k"];
    let two: &[&'static str] = &["alice", "}{ b"];
    for (keys, seeds) in [(one, 0..5), (two, 5..10)] {
        for seed in seeds {
            let ops = trace(seed, 100, max_cost);
            let memory = KeyedRateLimiter::with_clock(algorithm.clone(), ManualClock::new());
            let expected = run_keyed(&memory, keys, &ops, Mode::Blocking);
            let options = || caller_time_options(&unique_prefix("keyed-reservations"));
            let blocking = on_redis(server.url(), algorithm.clone(), options());
            let seen = run_keyed(&blocking, keys, &ops, Mode::Blocking);
            assert_same(&format!("blocking, seed {seed}"), &ops, &expected, &seen);
            let runtime = current_thread_runtime();
            let asynchronous = on_redis(server.url(), algorithm.clone(), options());
            let seen = run_keyed(&asynchronous, keys, &ops, Mode::Async(&runtime));
            assert_same(&format!("async, seed {seed}"), &ops, &expected, &seen);
        }
    }
}

#[test]
fn redis_reservations_are_memorys_for_every_kind_of_algorithm() {
    let server = RedisServer::start();
    let queue = |capacity| LeakyBucket::queue(capacity, 1, ms(250)).unwrap();
    let window = |limit| FixedWindow::new(limit, Duration::from_secs(1)).unwrap();
    let bursty = |rate| SmoothBursty::new(rate).unwrap();
    same_as_memory(&server, bursty(4.0), 6);
    let warming_up = SmoothWarmingUp::new(2.0, Duration::from_secs(2)).unwrap();
    same_as_memory(&server, warming_up, 4);
    same_as_memory(&server, queue(4), 5);
    same_as_memory(&server, window(3), 4);
    let sliding = SlidingWindowCounter::new(5, Duration::from_secs(1)).unwrap();
    same_as_memory(&server, sliding, 6);
    same_as_memory(&server, AllOf::new((bursty(5.0), queue(6))), 4);
    same_as_memory(&server, AllOf::new((bursty(3.0), window(4))), 5);
}

/// What a failed store call says about whether it ran.
fn applied<T>(result: Result<T, Error>) -> Applied {
    match result {
        Err(Error::Store(e)) => e.applied(),
        Err(other) => panic!("expected a store error, got {other}"),
        Ok(_) => panic!("expected a store error"),
    }
}

#[test]
fn a_cancel_to_a_frozen_server_may_have_been_applied_and_was() {
    // 1 a second: after a first request, the reservation acts at 1 s.
    let mut server = RedisServer::start_own();
    let options = caller_time_options(&unique_prefix("frozen-cancel")).response_timeout(ms(200));
    let limiter = on_redis(server.url(), SmoothBursty::new(1.0).unwrap(), options);
    limiter.acquire(&"k").unwrap();
    let r = limiter.reserve(&"k", 1).unwrap();
    assert_eq!(r.delay(), Duration::from_secs(1));
    server.pause();
    let result = r.cancel();
    server.resume();
    assert_eq!(applied(result), Applied::Unknown);
    // It was sent, and ran once the server thawed: the next turn is at 1 s again.
    assert_eq!(
        limiter.reserve(&"k", 1).unwrap().delay(),
        Duration::from_secs(1)
    );
}

#[test]
fn a_cancel_to_a_dead_server_was_not_applied() {
    let mut server = RedisServer::start_own();
    let options = caller_time_options(&unique_prefix("dead-cancel"));
    let limiter = on_redis(server.url(), SmoothBursty::new(1.0).unwrap(), options);
    let runtime = current_thread_runtime();
    let handle = limiter.to_async();
    let blocking = limiter.reserve(&"k", 1).unwrap();
    let asynchronous = runtime.block_on(handle.reserve(&"k", 1)).unwrap();
    assert!(blocking.is_ok() && asynchronous.is_ok());
    server.kill();
    // The blocking socket is read before each call, so the closed connection is
    // seen and the new one refused. The async connection learns of the closing
    // once its runtime runs: let it, or the cancel is written to a dead socket and
    // answered as Unknown (it may have been sent).
    runtime.block_on(async { tokio::time::sleep(ms(200)).await });
    assert_eq!(applied(blocking.cancel()), Applied::No);
    assert_eq!(
        applied(runtime.block_on(asynchronous.cancel_async())),
        Applied::No
    );
    assert_eq!(applied(limiter.reserve(&"k", 1)), Applied::No);
}

/// Twelve tasks on a four-thread runtime, for about 1.5 s, on six keys, two tasks
/// to a key (every fourth task on two keys at once, `reserve_all`), each
/// reserving 1 again and again: a turn more than 250 ms away is cancelled at once;
/// of the others, one in four is cancelled a few milliseconds later, before or
/// after its turn, and the rest are acted on at their turn and then cancelled too,
/// after it (which must give nothing back). The other task's grants come in
/// between, so cancels meet later grants, and give back only what those leave.
///
/// Per key, the turns acted on must fit the limit: 20 a second with 2 saved, plus
/// the one a pay-later grant lends, plus 100 ms of slack, since a store that
/// decides at its own time has the turns placed on the caller's clock within a
/// request's travel time. A cancel that gave back a permit already used, or more
/// than later grants leave, would let more turns in: one that ignored the time
/// to act would let in more than twice the bound.
fn concurrent_reservations_stay_within_the_limit<S>(store: S)
where
    S: Store<String, SmoothBursty> + 'static,
{
    const RATE: f64 = 20.0;
    const KEYS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
    let bursty = SmoothBursty::new(RATE)
        .unwrap()
        .with_max_burst(ms(100))
        .unwrap();
    let limiter = KeyedRateLimiter::with_store(bursty, store, DefaultClock::new());
    let handle = limiter.to_async();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    // The turns acted on, per key, on the limiter's clock; and the cancels made
    // before a turn.
    let acted = Arc::new(Mutex::new(Vec::<(usize, Nanos)>::new()));
    let early_cancels = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + ms(1500);
    runtime.block_on(async {
        let tasks: Vec<_> = (0..12u64)
            .map(|task| {
                let (handle, acted) = (handle.clone(), acted.clone());
                let early_cancels = early_cancels.clone();
                tokio::spawn(async move {
                    let mine = match task % 4 {
                        3 => vec![task as usize % KEYS.len(), (task as usize + 1) % KEYS.len()],
                        _ => vec![task as usize % KEYS.len()],
                    };
                    let keys: Vec<String> = mine.iter().map(|k| KEYS[*k].to_owned()).collect();
                    let mut rng = Rng::new(task);
                    // At least 12 rounds each, however late a loaded machine
                    // starts the task: enough turns and cancels for the counts
                    // below.
                    let mut rounds = 0;
                    while rounds < 12 || Instant::now() < deadline {
                        rounds += 1;
                        let r = handle.reserve_all(&keys, 1).await.unwrap();
                        assert!(r.is_ok());
                        let delay = r.delay();
                        if delay > ms(250) {
                            r.cancel_async().await.unwrap();
                            early_cancels.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(ms(20 + rng.below(40))).await;
                        } else if rng.below(4) == 0 {
                            tokio::time::sleep(ms(rng.below(6))).await;
                            if r.delay() > Duration::ZERO {
                                early_cancels.fetch_add(1, Ordering::Relaxed);
                            }
                            r.cancel_async().await.unwrap();
                        } else {
                            tokio::time::sleep(delay).await;
                            let turn = r.acts_at();
                            acted
                                .lock()
                                .unwrap()
                                .extend(mine.iter().map(|&k| (k, turn)));
                            tokio::time::sleep(ms(1 + rng.below(3))).await;
                            r.cancel_async().await.unwrap();
                            tokio::time::sleep(ms(rng.below(20))).await;
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
    let acted = acted.lock().unwrap();
    for key in 0..KEYS.len() {
        let mut turns: Vec<Nanos> = acted
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, t)| *t)
            .collect();
        turns.sort_unstable();
        let span = Duration::from_nanos(turns[turns.len() - 1] - turns[0]) + ms(100);
        let bound = RATE * span.as_secs_f64() + 2.0 + 1.0;
        let count = turns.len();
        assert!(count >= 5, "key {key}: only {count} turns acted on");
        assert!(
            count as f64 <= bound,
            "key {key}: {count} turns in {span:?}, at most {bound}"
        );
    }
    assert!(
        early_cancels.load(Ordering::Relaxed) > 10,
        "the tasks contended"
    );
}

#[test]
fn concurrent_reservations_and_cancels_stay_within_the_limit_over_redis() {
    // The server's own time, as on the real clock.
    let server = RedisServer::start();
    let options = RedisOptions::default()
        .prefix(unique_prefix("concurrent-reservations"))
        .unwrap();
    concurrent_reservations_stay_within_the_limit(
        RedisStore::open_with(server.url(), options).unwrap(),
    );
}

#[test]
fn concurrent_reservations_and_cancels_stay_within_the_limit_in_memory() {
    concurrent_reservations_stay_within_the_limit(MemoryStore::<String, SmoothBursty>::new());
}
