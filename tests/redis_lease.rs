//! The leased store over the Redis store, on a server started here: four
//! processes' worth of leased stores (each with its own connections) on one key
//! never admit more than a fixed window's limit, and strand at most `N·(L−1)`;
//! with a lease of 1 the decisions are the plain store's; the round trips the
//! server counts are one per lease; and eight threads on the real clock never
//! exceed the limit.
#![cfg(feature = "redis")]

mod support;

use sluicegate::algorithms::FixedWindow;
use sluicegate::algorithms::Receipt;
use sluicegate::stores::lease::LeasedStore;
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::stores::Store;
use sluicegate::{Decision, DefaultClock, KeyedRateLimiter, Source};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::redis::trace::{caller_time_options, Rng};
use support::redis::{calls, take, try_take, unique_prefix, RedisServer, SECOND};

type Redis = RedisStore<String, FixedWindow>;
type Leased = LeasedStore<Redis, String, FixedWindow>;

/// A store of its own (its own connections) at the caller's time, on `prefix`.
fn redis(server: &RedisServer, prefix: &str) -> Redis {
    RedisStore::open_with(server.url(), caller_time_options(prefix)).unwrap()
}

fn leased(server: &RedisServer, prefix: &str, size: u64, period: Duration) -> Leased {
    LeasedStore::new(redis(server, prefix), size, period).unwrap()
}

/// When the trace starts: a whole window after the stores' origin.
const START: u64 = 1_000 * SECOND;

/// Four leased stores over one key, on a random trace whose calls come `max_gap`
/// apart at most, for `calls` calls: the calls admitted in each whole window are
/// at most the limit and at least the limit less `N·(L−1)`.
fn four_processes_on_a_trace(seed: u64, max_gap: u64, calls: usize) {
    let server = RedisServer::start_own();
    let prefix = unique_prefix("lease-bounds");
    let (n, size, limit) = (4u64, 10u64, 150u64);
    let window = FixedWindow::new(limit, Duration::from_secs(10)).unwrap();
    let stores: Vec<Leased> = (0..n)
        .map(|_| leased(&server, &prefix, size, Duration::from_secs(60)))
        .collect();
    let key = "hot".to_owned();
    let mut rng = Rng::new(seed);
    let mut now = START;
    let mut admitted: HashMap<u64, u64> = HashMap::new();
    let mut demand: HashMap<u64, u64> = HashMap::new();
    for _ in 0..calls {
        now += rng.below(max_gap);
        let store = &stores[rng.below(n) as usize];
        *demand.entry(now / (10 * SECOND)).or_default() += 1;
        if try_take(store, &window, &key, now, 1).is_none() {
            *admitted.entry(now / (10 * SECOND)).or_default() += 1;
        }
    }
    let last = now / (10 * SECOND);
    let full: Vec<_> = (START / (10 * SECOND)..last).collect();
    assert!(
        full.len() >= 4,
        "the trace covers {} whole windows",
        full.len()
    );
    for w in full {
        let count = admitted.get(&w).copied().unwrap_or(0);
        assert!(
            count <= limit,
            "window {w}: {count} admitted, above {limit}"
        );
        let floor = limit - n * (size - 1);
        if demand[&w] > limit {
            assert!(
                count >= floor,
                "window {w}: {count} admitted, below {floor}"
            );
        }
    }
}

#[test]
fn four_processes_under_a_demand_far_above_the_limit_stay_within_the_bounds() {
    // About 400 calls a window: the limit is spent early in every window.
    four_processes_on_a_trace(0x1ea5e, SECOND / 20, 2400);
}

#[test]
fn four_processes_under_a_demand_near_the_limit_stay_within_the_bounds() {
    // About 160 calls a window: leases are still live when a window ends.
    four_processes_on_a_trace(0x5eed, SECOND / 8, 1000);
}

#[test]
fn with_a_lease_of_one_the_decisions_are_the_plain_stores() {
    let server = RedisServer::start_own();
    let plain = redis(&server, &unique_prefix("lease-plain"));
    let store = leased(
        &server,
        &unique_prefix("lease-one"),
        1,
        Duration::from_secs(1),
    );
    let window = FixedWindow::new(20, Duration::from_secs(2)).unwrap();
    let keys = ["a", "b", "c"].map(str::to_owned);
    let mut rng = Rng::new(0x0e1);
    let mut now = START;
    for call in 0..600 {
        now += rng.below(SECOND / 25);
        let key = &keys[rng.below(3) as usize];
        let cost = 1 + rng.below(4);
        let want = plain.apply_key(&window, key, now, take(cost)).unwrap();
        let got = store
            .apply_key::<(Decision, Receipt)>(&window, key, now, take(cost))
            .unwrap();
        assert_eq!(got.0.source(), Source::Store, "call {call}");
        assert_eq!(got, want, "call {call}");
    }
}

#[test]
fn the_server_runs_one_step_per_lease() {
    let server = RedisServer::start_own();
    let prefix = unique_prefix("lease-trips");
    let (n, size) = (4u64, 100u64);
    let window = FixedWindow::new(1_000_000, Duration::from_secs(3600)).unwrap();
    let stores: Vec<Leased> = (0..n)
        .map(|_| leased(&server, &prefix, size, Duration::from_secs(3600)))
        .collect();
    let key = "hot".to_owned();
    let mut conn = server.connection();
    let before = calls(&mut conn, "fcall");
    let mut rng = Rng::new(0x7219);
    let mut leased_grants = 0;
    let admitted = 5_000u64;
    for t in 0..admitted {
        let store = &stores[rng.below(n) as usize];
        let decision = store
            .apply_key::<Decision>(&window, &key, START + t, take(1))
            .unwrap();
        assert!(decision.is_allowed());
        leased_grants += u64::from(decision.source() == Source::Leased);
    }
    let trips = calls(&mut conn, "fcall") - before;
    assert_eq!(leased_grants, admitted);
    // Each process takes a lease per 100 of its calls, the last one partly spent.
    assert!(trips >= admitted / size, "{trips} round trips");
    assert!(trips <= admitted / size + n, "{trips} round trips");
}

#[test]
fn eight_threads_on_the_real_clock_never_exceed_the_limit() {
    let server = RedisServer::start_own();
    let prefix = unique_prefix("lease-threads");
    let (processes, per_process, size, limit) = (2usize, 4usize, 20u64, 300u64);
    let window = FixedWindow::new(limit, Duration::from_secs(3600)).unwrap();
    let limiters: Vec<_> = (0..processes)
        .map(|_| {
            let options = RedisOptions::default().prefix(&prefix).unwrap();
            let redis: Redis = RedisStore::open_with(server.url(), options).unwrap();
            let store = LeasedStore::new(redis, size, Duration::from_secs(5)).unwrap();
            Arc::new(KeyedRateLimiter::with_store(
                window,
                store,
                DefaultClock::new(),
            ))
        })
        .collect();
    // Each process's first call takes its lease alone. Once the threads race, a
    // lease asked for while others spend the key one call at a time may find
    // fewer than `size` left and be refused, as the docs allow.
    let firsts: Vec<(Decision, SystemTime)> = limiters
        .iter()
        .map(|limiter| {
            let first = limiter.check(&"hot".to_owned(), 1).unwrap();
            assert_eq!(first.source(), Source::Leased, "{first:?}");
            (first, SystemTime::now())
        })
        .collect();
    let threads: Vec<_> = (0..processes * per_process)
        .map(|i| {
            let limiter = Arc::clone(&limiters[i % processes]);
            std::thread::spawn(move || {
                let key = "hot".to_owned();
                (0..150)
                    .map(|_| (limiter.check(&key, 1).unwrap(), SystemTime::now()))
                    .collect::<Vec<(Decision, SystemTime)>>()
            })
        })
        .collect();
    // Admissions by the window they were counted in: its end, to the second.
    let mut admitted: HashMap<u64, u64> = HashMap::new();
    let decisions = threads.into_iter().flat_map(|t| t.join().unwrap());
    for (decision, at) in firsts.into_iter().chain(decisions) {
        if decision.is_allowed() {
            let end = at + decision.reset_after();
            let end = end.duration_since(UNIX_EPOCH).unwrap().as_millis() + 500;
            *admitted.entry((end / 1000) as u64).or_default() += 1;
        }
    }
    for (&end, &count) in &admitted {
        assert!(count <= limit, "window ending at {end}: {count} admitted");
    }
    if admitted.len() == 1 {
        let floor = limit - processes as u64 * (size - 1);
        let count = admitted.values().sum::<u64>();
        assert!(count >= floor, "{count} admitted, below {floor}");
    }
}

#[test]
fn async_calls_take_leases_in_one_round_trip_each() {
    let server = RedisServer::start_own();
    let store = leased(
        &server,
        &unique_prefix("lease-async"),
        10,
        Duration::from_secs(60),
    );
    let window = FixedWindow::new(25, Duration::from_secs(60)).unwrap();
    let keys = ["hot".to_owned()];
    let runtime = support::redis::current_thread_runtime();
    // The step library loaded (a first call finds it missing and calls again).
    let warm = store.apply_async(&window, &["warm".to_owned()], START, take(10));
    runtime.block_on(warm).unwrap();
    let mut conn = server.connection();
    let before = calls(&mut conn, "fcall");
    let answers: Vec<Decision> = runtime.block_on(async {
        let mut answers = Vec::new();
        for t in 0..30 {
            let pending = store.apply_async(&window, &keys, START + t, take(1));
            answers.push(pending.await.unwrap()[0].0);
        }
        answers
    });
    let sources: Vec<_> = answers
        .iter()
        .map(|d| (d.is_allowed(), d.source()))
        .collect();
    assert!(sources[..20].iter().all(|&s| s == (true, Source::Leased)));
    assert!(sources[20..25].iter().all(|&s| s == (true, Source::Store)));
    assert!(sources[25..].iter().all(|&s| s == (false, Source::Store)));
    // Two leases, one refused, then the last 5 and 5 refusals one at a time.
    assert_eq!(calls(&mut conn, "fcall") - before, 2 + 1 + 10);
}
