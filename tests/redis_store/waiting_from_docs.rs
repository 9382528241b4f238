//! Waiting over the Redis store, as the docs describe it, on a server the harness
//! starts: waiters on threads and tasks served one slot each in the order they
//! asked, and refused timed tries taking no turn (on the caller's virtual time);
//! threads and tasks on the server's time admitted no more than the rate allows;
//! a fresh key's saved burst and a cold key's single permit; costs no wait can
//! grant failing at once; reservations made at once by eight threads, cancelled
//! latest first, giving every turn back; and a blocking call made on a tokio
//! runtime's thread right after waits were dropped there.

use crate::support::adapters::unbursting;
use crate::support::gate_clock::GateClock;
use crate::support::redis::{unique_prefix, RedisServer};
use crate::support::waiting::{
    answered_at_once, current_thread, eight_threads, eight_threads_until_the_end, hammer, in_order,
    ms, serve_in_turn, sixteen_tasks_until_the_end,
};

use sluicegate::algorithms::{Algorithm, FixedWindow, LeakyBucket, SmoothBursty, SmoothWarmingUp};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore, TimeSource};
use sluicegate::{DefaultClock, Error, KeyedRateLimiter};
use std::time::{Duration, Instant};

type OnRedis<A, C> = KeyedRateLimiter<&'static str, A, RedisStore<&'static str, A>, C>;

/// A limiter on `server` at the server's time (the default), keys under a prefix
/// of the test's own.
fn at_server_time<A: RedisAlgorithm>(
    server: &RedisServer,
    test: &str,
    algorithm: A,
) -> OnRedis<A, DefaultClock> {
    let options = RedisOptions::default().prefix(unique_prefix(test)).unwrap();
    let store = RedisStore::open_with(server.url(), options).unwrap();
    KeyedRateLimiter::with_store(algorithm, store, DefaultClock::new())
}

/// A limiter on `server` at the caller's time, read from `clock`, with an hour of
/// expiry grace (a virtual clock falls behind the server's).
fn at_caller_time<A: RedisAlgorithm, C: Clock>(
    server: &RedisServer,
    test: &str,
    algorithm: A,
    clock: C,
) -> OnRedis<A, C> {
    let options = RedisOptions::default()
        .prefix(unique_prefix(test))
        .unwrap()
        .time_source(TimeSource::Caller)
        .expiry_grace(Duration::from_secs(3600));
    let store = RedisStore::open_with(server.url(), options).unwrap();
    KeyedRateLimiter::with_store(algorithm, store, clock)
}

#[test]
fn waiters_over_redis_are_served_one_slot_each_in_the_order_they_asked() {
    // The adapters' docs: "a bursty or leaky-bucket queue limiter books each waiter
    // its own slot in the order they asked"; the Redis store decides as memory
    // does. Blocking acquires, async ones under tokio and under a bare
    // block_on (the store's own runtime), and key lists, on one key's turns.
    let server = RedisServer::start();
    let clock = GateClock::new();
    let limiter = at_caller_time(&server, "order", unbursting(10.0), clock.clone());
    let handle = limiter.to_async();
    let waiter = |i: usize| match i % 4 {
        0 => limiter.acquire(&"k").unwrap(),
        1 => current_thread().block_on(handle.acquire(&"k")).unwrap(),
        2 => futures::executor::block_on(handle.acquire_n(&"k", 1)).unwrap(),
        _ => limiter.acquire_n(&"k", 1).unwrap(),
    };
    assert_eq!(
        serve_in_turn(&clock, 8, ms(100), &waiter, &|_| {}),
        in_order()
    );

    let clock = GateClock::new();
    let queue = LeakyBucket::queue(10, 1, ms(100)).unwrap();
    let limiter = at_caller_time(&server, "order-lists", queue, clock.clone());
    let handle = limiter.to_async();
    let waiter = |i: usize| {
        if i.is_multiple_of(2) {
            limiter.acquire_all(&["ip", "user"], 1).unwrap()
        } else {
            current_thread()
                .block_on(handle.acquire_all(&["ip", "user"], 1))
                .unwrap()
        }
    };
    assert_eq!(
        serve_in_turn(&clock, 8, ms(100), &waiter, &|_| {}),
        in_order()
    );
}

#[test]
fn refused_timed_tries_over_redis_take_no_turn_from_the_waiters_behind_them() {
    // try_acquire_n_timeout: "answers false at once, consuming nothing, if they
    // cannot", blocking and async, from one thread between the waiters and from
    // eight threads at once.
    let server = RedisServer::start();
    let clock = GateClock::new();
    let limiter = at_caller_time(&server, "tries", unbursting(10.0), clock.clone());
    let handle = limiter.to_async();
    let between = |i: usize| {
        let short = ms(100) * (i as u32 + 1) - Duration::from_micros(1);
        let tried = answered_at_once(&clock, "a timed try", || {
            [
                limiter.try_acquire_n_timeout(&"k", 1, short).unwrap(),
                current_thread()
                    .block_on(handle.try_acquire_n_timeout(&"k", 2, short))
                    .unwrap(),
                limiter.try_acquire(&"k"),
            ]
        });
        assert_eq!(tried, [false; 3], "after waiter {i}");
        assert_eq!(clock.parked(), i, "a refused try does not wait");
    };
    let got = serve_in_turn(
        &clock,
        8,
        ms(100),
        &|_| limiter.acquire(&"k").unwrap(),
        &between,
    );
    assert_eq!(got, in_order());

    let clock = ManualClock::new();
    let limiter = at_caller_time(&server, "tries-threads", unbursting(1.0), clock.clone());
    let handle = limiter.to_async();
    limiter.acquire(&"k").unwrap();
    let almost = ms(999);
    let granted = eight_threads(10, &|| {
        limiter.try_acquire_n_timeout(&"k", 1, almost).unwrap()
            || futures::executor::block_on(handle.try_acquire_n_timeout(&"k", 1, almost)).unwrap()
    });
    assert_eq!(granted, 0);
    assert_eq!(clock.now(), 0, "no refusal waited");
    assert_eq!(
        limiter.reserve(&"k", 1).unwrap().delay(),
        Duration::from_secs(1)
    );
}

const RATE: f64 = 50.0;
const RUN: Duration = Duration::from_millis(400);

/// What a loaded machine may add to a run by starting its waiters late.
const STALLS: Duration = Duration::from_secs(5);

/// No more admitted by the run's end than the rate allows, and the waiters made
/// progress: the loops, which go on until a few calls have returned, stopped
/// well within a loaded machine's delays of the run's end.
#[track_caller]
fn assert_within_the_rate((admitted, took): (usize, Duration), what: &str) {
    let bound = 1 + (RATE * RUN.as_secs_f64()).floor() as usize;
    assert!(
        admitted <= bound,
        "{what}: {admitted} admitted in {RUN:?} at {RATE}/s, bound {bound}"
    );
    assert!(
        took < RUN + STALLS,
        "{what}: the loops stopped after {took:?}"
    );
}

#[test]
fn threads_and_tasks_over_redis_on_the_servers_time_are_admitted_no_more_than_the_rate_allows() {
    // At the server's time the store answers each wait relative to it; a waiter
    // acts no earlier than its turn, so by the end of a run of RUN no more than
    // one at once and one per interval after it have returned.
    let server = RedisServer::start();
    let started = Instant::now();
    let limiter = at_server_time(&server, "rate-threads", unbursting(RATE));
    let admitted = eight_threads_until_the_end(started, RUN, &|| {
        limiter.acquire(&"k").unwrap();
    });
    assert_within_the_rate(admitted, "eight threads blocking");

    let started = Instant::now();
    let limiter = at_server_time(&server, "rate-tasks", unbursting(RATE));
    let handle = limiter.to_async();
    let admitted = sixteen_tasks_until_the_end(
        started,
        RUN,
        move || {
            let wait = handle.acquire_all(&["ip", "user"], 1);
            async move {
                wait.await.unwrap();
            }
        },
        move || {
            limiter.acquire_all(&["ip", "user"], 1).unwrap();
        },
    );
    assert_within_the_rate(admitted, "sixteen tasks, async and blocking");
}

#[test]
fn a_fresh_key_over_redis_has_its_saved_burst_and_a_fresh_warming_up_key_is_cold() {
    // "A new key starts with a full burst once the clock has run for max_burst"
    // (the server's clock has run since 1970): 10 saved and one more (pay later),
    // then 10 a second. A warming-up key starts cold: one at once, and the next
    // only after the first cold permit's cost, 1.375 s at 2 qps with a 4 s warm-up.
    let server = RedisServer::start();
    let bursty = at_server_time(&server, "burst", SmoothBursty::new(10.0).unwrap());
    let (granted, took) = hammer(ms(150), &|| bursty.try_acquire(&"k"));
    let most = 11 + (10.0 * took.as_secs_f64()).ceil() as usize;
    assert!(
        (11..=most).contains(&granted),
        "{granted} granted in {took:?}, at most {most}"
    );

    let warming = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    let cold = at_server_time(&server, "cold", warming);
    let (granted, took) = hammer(ms(150), &|| cold.try_acquire(&"k"));
    let most = 1 + (took.as_secs_f64() / 1.375).floor() as usize;
    assert!(
        (1..=most).contains(&granted),
        "{granted} granted in {took:?} from cold, at most {most}"
    );
}

#[track_caller]
fn assert_never(result: Result<Duration, Error>, cost: u64) {
    match result {
        Err(Error::Never { cost: c }) => assert_eq!(c, cost),
        other => panic!("expected Error::Never for {cost}, got {other:?}"),
    }
}

/// Every waiting call of `limiter` with a cost of 4, above what its limit can
/// ever hold, fails at once or answers false, and takes nothing.
fn never_at_once<A: RedisAlgorithm + Algorithm>(limiter: &OnRedis<A, ManualClock>) {
    let handle = limiter.to_async();
    assert_never(limiter.acquire_n(&"k", 4), 4);
    assert_never(limiter.acquire_all(&["k", "j"], 4), 4);
    assert!(!limiter
        .try_acquire_n_timeout(&"k", 4, Duration::MAX)
        .unwrap());
    current_thread().block_on(async {
        assert_never(handle.acquire_n(&"k", 4).await, 4);
        assert_never(handle.acquire_all(&["k", "j"], 4).await, 4);
        let tried = handle.try_acquire_n_timeout(&"k", 4, Duration::MAX).await;
        assert!(!tried.unwrap());
    });
    assert_never(futures::executor::block_on(handle.acquire_n(&"k", 4)), 4);
    assert_eq!(limiter.clock().now(), 0, "nothing waited");
    assert!(
        limiter.check(&"k", 3).unwrap().is_allowed(),
        "nothing taken"
    );
}

#[test]
fn costs_no_wait_can_grant_fail_at_once_over_redis() {
    // "A cost above a limit's capacity is answered Verdict::Never, and acquires
    // fail at once with Error::Never instead of hanging" (README).
    let server = RedisServer::start();
    let window = FixedWindow::new(3, Duration::from_secs(1)).unwrap();
    never_at_once(&at_caller_time(
        &server,
        "never-window",
        window,
        ManualClock::new(),
    ));
    let queue = LeakyBucket::queue(3, 1, Duration::from_secs(1)).unwrap();
    never_at_once(&at_caller_time(
        &server,
        "never-queue",
        queue,
        ManualClock::new(),
    ));
}

#[test]
fn reservations_made_at_once_by_eight_threads_over_redis_take_a_turn_each_and_come_back_latest_first(
) {
    // "cancel a group latest first to give all of it back" (KeyedReservation::cancel),
    // at the server's time: eight reservations made at once hold eight turns 100
    // ms apart; cancelled latest first, all but the one whose time has come give
    // their turns back, so the next caller waits at most one turn, not eight.
    let server = RedisServer::start();
    let limiter = at_server_time(&server, "reserve-threads", unbursting(10.0));
    let start = std::sync::Barrier::new(8);
    let mut held: Vec<_> = std::thread::scope(|s| {
        let taken: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    limiter.reserve(&"k", 1).unwrap()
                })
            })
            .collect();
        taken.into_iter().map(|t| t.join().unwrap()).collect()
    });
    held.sort_by_key(|r| r.acts_at());
    let turns: Vec<u128> = held
        .windows(2)
        .map(|pair| (pair[1].acts_at() - pair[0].acts_at()) as u128 / 1_000_000)
        .collect();
    assert!(
        turns.iter().all(|&gap| (50..=150).contains(&gap)),
        "one turn each, 100 ms apart: {turns:?} ms"
    );
    for r in held.into_iter().rev() {
        r.cancel().unwrap();
    }
    let next = limiter.reserve(&"k", 1).unwrap().delay();
    assert!(next <= ms(100), "the next caller waits {next:?}");

    let limiter = at_server_time(&server, "reserve-tasks", unbursting(10.0)).to_async();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let next = runtime.block_on(async {
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let reserve = limiter.reserve(&"k", 1);
                tokio::spawn(reserve)
            })
            .collect();
        let mut held = Vec::new();
        for task in tasks {
            held.push(task.await.unwrap().unwrap());
        }
        held.sort_by_key(|r| r.acts_at());
        for r in held.into_iter().rev() {
            r.cancel_async().await.unwrap();
        }
        limiter.reserve(&"k", 1).await.unwrap().delay()
    });
    assert!(next <= ms(100), "the next task waits {next:?}");
}

/// On `runtime`, one acquire at once and then five waits for turns 1 to 5 s away,
/// timed out together after 200 ms and dropped there; then, on the same thread
/// and without yielding, a blocking reserve: what it answers.
fn blocking_reserve_right_after_dropped_waits(
    runtime: &tokio::runtime::Runtime,
    limiter: &OnRedis<SmoothBursty, DefaultClock>,
) -> Result<Duration, Error> {
    let handle = limiter.to_async();
    runtime.block_on(async {
        assert_eq!(handle.acquire(&"k").await.unwrap(), Duration::ZERO);
        let waits: Vec<_> = (0..5).map(|_| handle.acquire(&"k")).collect();
        let timed_out = tokio::time::timeout(ms(200), futures::future::join_all(waits)).await;
        assert!(timed_out.is_err(), "every wait is still waiting");
        limiter.reserve(&"k", 1).map(|r| r.delay())
    })
}

#[test]
fn a_blocking_call_on_a_tokio_runtimes_thread_right_after_dropped_waits_takes_one_of_their_turns() {
    // AsyncKeyedRateLimiter: "the Redis store sends them one after another ...
    // and its later calls wait for them (so a request made right after a group
    // timed out takes one of their turns)". A blocking call may be made from
    // async code ("With a remote store this blocks the thread for one round
    // trip"); made on a worker of a multi-thread runtime or on the only thread of
    // a current-thread one, it takes the first abandoned turn (about 0.8 s away),
    // not the sixth.
    let server = RedisServer::start();
    let one_a_second = unbursting(1.0);
    let threaded = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let limiter = at_server_time(&server, "blocking-threaded", one_a_second);
    let next = blocking_reserve_right_after_dropped_waits(&threaded, &limiter);
    assert!(
        matches!(next, Ok(d) if d <= Duration::from_secs(1)),
        "on a multi-thread runtime: {next:?}"
    );

    let limiter = at_server_time(&server, "blocking-current", one_a_second);
    let next = blocking_reserve_right_after_dropped_waits(&current_thread(), &limiter);
    assert!(
        matches!(next, Ok(d) if d <= Duration::from_secs(1)),
        "on a current-thread runtime: {next:?}"
    );
}

#[test]
fn a_blocking_call_between_block_ons_right_after_waits_dropped_on_a_current_thread_runtime_takes_one_of_their_turns(
) {
    // The store docs: "a call never waits on a runtime that is idle (a
    // current-thread runtime between its block_ons)". Waits dropped inside a
    // block_on leave their cancels with the store; a blocking reserve made once
    // that block_on has returned, with the runtime idle, takes the first abandoned
    // turn (about 0.8 s away), not the sixth.
    let server = RedisServer::start();
    let limiter = at_server_time(&server, "between-block-ons", unbursting(1.0));
    let handle = limiter.to_async();
    let runtime = current_thread();
    runtime.block_on(async {
        assert_eq!(handle.acquire(&"k").await.unwrap(), Duration::ZERO);
        let waits: Vec<_> = (0..5).map(|_| handle.acquire(&"k")).collect();
        let timed_out = tokio::time::timeout(ms(200), futures::future::join_all(waits)).await;
        assert!(timed_out.is_err(), "every wait is still waiting");
    });
    let next = limiter.reserve(&"k", 1).map(|r| r.delay());
    assert!(
        matches!(next, Ok(d) if d <= Duration::from_secs(1)),
        "with the runtime idle: {next:?}"
    );
}
