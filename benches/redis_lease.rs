//! Decisions per second on one hot, allowed key through a keyed limiter, against
//! a `redis-server` this bench starts itself (on a free port, no persistence):
//! the plain Redis store (one round trip per decision) and the same store behind
//! a leased store with leases of 100 (one round trip per 100 decisions), in the
//! same run, with the ratio.
//!
//! `cargo bench --bench redis_lease --features redis`

use sluicegate::algorithms::FixedWindow;
use sluicegate::stores::lease::LeasedStore;
use sluicegate::stores::redis::RedisStore;
use sluicegate::{DefaultClock, KeyedRateLimiter, Source};
use std::time::{Duration, Instant};

mod redis_server;

use redis_server::Server;

/// The lease size measured.
const LEASE: u64 = 100;
/// How long each side is timed, per round.
const ROUND: Duration = Duration::from_secs(2);
/// Rounds per side, alternated; the best is kept (the VM's noise).
const ROUNDS: u32 = 3;

/// Decisions per second of `check` over `ROUND`, every one allowed.
fn rate(check: &dyn Fn() -> sluicegate::Decision) -> f64 {
    let started = Instant::now();
    let mut decisions = 0u64;
    while started.elapsed() < ROUND {
        for _ in 0..64 {
            let decision = check();
            assert!(decision.is_allowed(), "the hot key must stay allowed");
            decisions += 1;
        }
    }
    decisions as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let server = Server::start("redis-lease-bench", &[]);
    // Far above what a run can spend: every decision is a grant.
    let window = FixedWindow::new(1_000_000_000_000, Duration::from_secs(3600)).unwrap();
    let redis = || -> RedisStore<String, FixedWindow> {
        RedisStore::open(&server.url).expect("a valid URL")
    };
    let plain = KeyedRateLimiter::with_store(window, redis(), DefaultClock::new());
    let store = LeasedStore::new(redis(), LEASE, Duration::from_secs(1)).expect("a valid lease");
    let leased = KeyedRateLimiter::with_store(window, store, DefaultClock::new());
    let key = "hot".to_owned();
    // Both connected and the step library loaded before timing.
    assert_eq!(plain.check(&key, 1).unwrap().source(), Source::Store);
    assert_eq!(leased.check(&key, 1).unwrap().source(), Source::Leased);
    let (mut best_plain, mut best_leased) = (0f64, 0f64);
    for _ in 0..ROUNDS {
        best_plain = best_plain.max(rate(&|| plain.check(&key, 1).unwrap()));
        best_leased = best_leased.max(rate(&|| leased.check(&key, 1).unwrap()));
    }
    println!("one hot allowed key, one thread, best of {ROUNDS} rounds of {ROUND:?}:");
    println!("  redis store:                {best_plain:>12.0} decisions/s");
    println!("  leased store (L = {LEASE}):     {best_leased:>12.0} decisions/s");
    println!(
        "  ratio:                      {:>12.1}x",
        best_leased / best_plain
    );
}
