//! The deny cache over the Redis store, on a server started here: a hammered
//! refused key costs no round trip until its `retry_after` (counted by the server
//! itself), cached answers on a random trace equal the plain store's, and threads
//! hammering a few keys on the real clock never get more than the limit.
#![cfg(feature = "redis")]

mod support;

use sluicegate::algorithms::{
    sliding_window_buckets::OldestBucket, AllOf, FixedWindow, LeakyBucket, SlidingLog,
    SlidingWindowBuckets, SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::stores::deny_cache::DenyCache;
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore, TimeSource};
use sluicegate::stores::{Operation, Store};
use sluicegate::{Decision, DefaultClock, KeyedRateLimiter, Source};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::redis::{
    calls, current_thread_runtime, take, try_take, unique_prefix, RedisServer, SECOND, YEAR,
};
use support::rng::Rng;

/// The Redis store at the caller's time (the trace's), with its own prefix.
fn caller_time<A: RedisAlgorithm>(server: &RedisServer, name: &str) -> RedisStore<String, A> {
    let options = RedisOptions::default()
        .prefix(unique_prefix(name))
        .unwrap()
        .time_source(TimeSource::Caller)
        .expiry_grace(Duration::from_secs(600));
    RedisStore::open_with(server.url(), options).unwrap()
}

#[test]
fn a_hammered_refused_key_makes_no_round_trip_until_its_retry_after() {
    let server = RedisServer::start_own();
    let mut conn = server.connection();
    let window = FixedWindow::new(3, Duration::from_secs(10)).unwrap();
    let store = DenyCache::new(caller_time(&server, "hammered"), &window).unwrap();
    let key = "k".to_owned();
    for _ in 0..3 {
        assert_eq!(try_take(&store, &window, &key, SECOND, 1), None);
    }
    let refusal = try_take(&store, &window, &key, SECOND, 1).unwrap();
    assert_eq!(refusal.retry_after_nanos(), 9 * SECOND);
    let before = calls(&mut conn, "fcall");
    let runtime = current_thread_runtime();
    for i in 0..3_000u64 {
        let now = SECOND + i * 3_000_000; // up to 10 s, not reaching it
        let cached = try_take(&store, &window, &key, now, 1).unwrap();
        assert_eq!(cached.retry_after_nanos(), 10 * SECOND - now);
        let (checked, _) = store.apply_key(&window, &key, now, take(2)).unwrap();
        assert_eq!(checked, cached);
        let pending = store.apply_async(&window, std::slice::from_ref(&key), now, take(1));
        assert_eq!(runtime.block_on(pending).unwrap()[0].0, cached);
    }
    assert_eq!(
        calls(&mut conn, "fcall"),
        before,
        "a cached refusal went to Redis"
    );
    assert_eq!(store.hits(), 9_000);
    // The window ends: one round trip, granted.
    assert_eq!(try_take(&store, &window, &key, 10 * SECOND, 1), None);
    assert_eq!(calls(&mut conn, "fcall"), before + 1);
}

/// What one trace step asks of both stores.
enum Call {
    Try(u64),
    Check(u64),
    Peek(u64),
    Wait(u64, u64),
}

/// Runs one random trace of calls of costs `1..=costs` on a few keys, at the
/// caller's time, on the plain store and on the cache over a second store, and
/// compares each answer with `compare(cached, plain, at)`. Returns the cache's
/// hits.
fn trace<A: RedisAlgorithm + Clone>(
    server: &RedisServer,
    algorithm: A,
    costs: u64,
    seed: u64,
    compare: impl Fn(Decision, Decision, &str),
) -> u64 {
    let plain: RedisStore<String, A> = caller_time(server, "trace-plain");
    let cached = DenyCache::new(caller_time(server, "trace-cached"), &algorithm).unwrap();
    let mut rng = Rng::new(seed);
    let mut now = SECOND;
    for step in 0..1_500 {
        // Whole microseconds: the store's resolution at the caller's time.
        now += rng.below(150_000) * 1_000;
        let key = format!("key{}", rng.below(3));
        let cost = 1 + rng.below(costs);
        let call = match rng.below(20) {
            0 => Call::Peek(cost),
            1 => Call::Wait(cost, rng.below(SECOND)),
            n if n < 11 => Call::Try(cost),
            _ => Call::Check(cost),
        };
        let ask = |store: &dyn Fn(Operation<'_>) -> Decision,
                   try_take: &dyn Fn(u64) -> Decision| match call {
            Call::Try(cost) => try_take(cost),
            Call::Check(cost) => store(take(cost)),
            Call::Peek(cost) => store(Operation::Peek { cost }),
            Call::Wait(cost, max_wait) => store(Operation::Reserve { cost, max_wait }),
        };
        let granted = Decision::allowed(0, 0, 0);
        let a = ask(
            &|step| {
                cached
                    .apply_key::<Decision>(&algorithm, &key, now, step)
                    .unwrap()
            },
            &|cost| {
                let refusal = try_take(&cached, &algorithm, &key, now, cost);
                refusal.unwrap_or(granted)
            },
        );
        let b = ask(
            &|step| {
                plain
                    .apply_key::<Decision>(&algorithm, &key, now, step)
                    .unwrap()
            },
            &|cost| {
                let refusal = try_take(&plain, &algorithm, &key, now, cost);
                refusal.unwrap_or(granted)
            },
        );
        compare(a, b, &format!("step {step}, {key}, cost {cost}, at {now}"));
    }
    cached.hits()
}

/// The same answer; a cached one says so ([`Source::Cached`]).
fn equal(cached: Decision, plain: Decision, at: &str) {
    assert!(
        matches!(cached.source(), Source::Store | Source::Cached),
        "{at}"
    );
    assert_eq!(cached.with_source(Source::Store), plain, "{at}");
}

/// A refusal may say less `remaining` and, for a larger cost than the one
/// cached, an earlier `retry_after` (the module's documented bounds).
fn within_bounds(cached: Decision, plain: Decision, at: &str) {
    assert!(
        matches!(cached.source(), Source::Store | Source::Cached),
        "{at}"
    );
    let cached = cached.with_source(Source::Store);
    assert_eq!(cached.verdict(), plain.verdict(), "{at}");
    if cached == plain || cached.is_allowed() {
        assert_eq!(cached, plain, "{at}");
        return;
    }
    assert_eq!(
        (cached.limit(), cached.limit_index(), cached.source()),
        (plain.limit(), plain.limit_index(), plain.source()),
        "{at}"
    );
    assert!(
        cached.remaining() <= plain.remaining(),
        "{at}: {cached:?} {plain:?}"
    );
    assert!(
        cached.retry_after() <= plain.retry_after(),
        "{at}: {cached:?} {plain:?}"
    );
    assert_eq!(
        cached.reset_after(),
        plain.reset_after(),
        "{at}: {cached:?} {plain:?}"
    );
}

#[test]
fn on_a_random_trace_cached_answers_equal_the_plain_stores() {
    let server = RedisServer::start();
    let window = FixedWindow::new(4, Duration::from_secs(1)).unwrap();
    let bursty = SmoothBursty::new(4.0)
        .and_then(|b| b.with_max_burst(Duration::from_millis(500)))
        .unwrap();
    let warming = SmoothWarmingUp::new(4.0, Duration::from_secs(1)).unwrap();
    // A larger cost may be refused by another member than the one cached: a
    // set's answers are equal at the cached cost.
    let set = AllOf::new((
        FixedWindow::new(3, Duration::from_millis(400)).unwrap(),
        FixedWindow::new(6, Duration::from_secs(2)).unwrap(),
    ));
    let hits = [
        trace(&server, window, 3, 1, equal),
        trace(&server, bursty, 3, 2, equal),
        trace(&server, warming, 3, 3, equal),
        trace(&server, set, 1, 5, equal),
    ];
    assert!(hits.iter().all(|&h| h > 50), "hits {hits:?}");
}

#[test]
fn on_a_random_trace_refilling_limits_stay_within_the_documented_bounds() {
    let server = RedisServer::start();
    let meter = LeakyBucket::meter(4, 4, Duration::from_secs(1)).unwrap();
    let queue = LeakyBucket::queue(3, 4, Duration::from_secs(1)).unwrap();
    let log = SlidingLog::new(4, Duration::from_secs(1)).unwrap();
    let counter = SlidingWindowCounter::new(4, Duration::from_secs(1)).unwrap();
    let buckets = SlidingWindowBuckets::new(
        4,
        Duration::from_secs(1),
        Duration::from_millis(100),
        OldestBucket::Weighted,
    )
    .unwrap();
    let hits = [
        trace(&server, meter, 3, 6, within_bounds),
        trace(&server, queue, 3, 4, within_bounds),
        trace(&server, log, 3, 7, within_bounds),
        trace(&server, counter, 3, 8, within_bounds),
        trace(&server, buckets, 3, 9, within_bounds),
    ];
    assert!(hits.iter().all(|&h| h > 50), "hits {hits:?}");
}

#[test]
fn threads_hammering_a_few_keys_on_the_real_clock_get_no_more_than_the_limit() {
    const THREADS: usize = 8;
    const LIMIT: u64 = 20;
    const KEYS: usize = 3;
    let server = RedisServer::start_own();
    let mut conn = server.connection();
    // A log longer than the test: every grant of a key counts against one limit.
    let log = SlidingLog::new(LIMIT, Duration::from_secs(600)).unwrap();
    let options = RedisOptions::default()
        .prefix(unique_prefix("threads"))
        .unwrap();
    let redis = RedisStore::open_with(server.url(), options).unwrap();
    let store = DenyCache::new(redis, &log).unwrap();
    let limiter = Arc::new(KeyedRateLimiter::with_store(
        log,
        store,
        DefaultClock::new(),
    ));
    let before = calls(&mut conn, "fcall");
    let started = Instant::now();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let limiter = Arc::clone(&limiter);
            std::thread::spawn(move || {
                let mut granted = [0u64; KEYS];
                let mut calls = 0u64;
                // At least 30 calls each (80 a key in all), however late the
                // thread starts: every key's limit is spent.
                while calls < 30 || started.elapsed() < Duration::from_secs(1) {
                    let k = (calls as usize + t) % KEYS;
                    let key = format!("user:{k}");
                    let allowed = if calls.is_multiple_of(2) {
                        limiter.try_acquire(&key)
                    } else {
                        limiter.check(&key, 1).unwrap().is_allowed()
                    };
                    granted[k] += u64::from(allowed);
                    calls += 1;
                }
                (granted, calls)
            })
        })
        .collect();
    let mut granted = [0u64; KEYS];
    let mut total_calls = 0;
    for thread in threads {
        let (g, c) = thread.join().unwrap();
        granted.iter_mut().zip(g).for_each(|(sum, g)| *sum += g);
        total_calls += c;
    }
    assert_eq!(granted, [LIMIT; KEYS], "grants per key");
    let round_trips = calls(&mut conn, "fcall") - before;
    // Each key: its grants, and about one refusal per thread before the cache
    // has it; every other call is answered here.
    assert!(
        round_trips <= KEYS as u64 * (LIMIT + 4 * THREADS as u64),
        "{round_trips} round trips for {total_calls} calls"
    );
    assert!(limiter.store().hits() + round_trips >= total_calls);
}

/// The async keyed path's single-key calls are cached as the blocking ones.
#[test]
fn async_checks_of_a_refused_key_make_no_round_trip() {
    let server = RedisServer::start_own();
    let mut conn = server.connection();
    // A year, so that the refused key stays refused for the whole test.
    let window = FixedWindow::new(1, YEAR).unwrap();
    let redis = RedisStore::open_with(server.url(), RedisOptions::default()).unwrap();
    let store = DenyCache::new(redis, &window).unwrap();
    let limiter = KeyedRateLimiter::with_store(window, store, DefaultClock::new()).to_async();
    let runtime = current_thread_runtime();
    let key = "k".to_owned();
    assert!(runtime
        .block_on(limiter.check(&key, 1))
        .unwrap()
        .is_allowed());
    assert!(!runtime
        .block_on(limiter.check(&key, 1))
        .unwrap()
        .is_allowed());
    let before = calls(&mut conn, "fcall");
    for _ in 0..100 {
        assert!(!runtime
            .block_on(limiter.check(&key, 1))
            .unwrap()
            .is_allowed());
    }
    assert_eq!(calls(&mut conn, "fcall"), before);
}
