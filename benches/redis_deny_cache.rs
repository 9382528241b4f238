//! A hot refused key, against a `redis-server` this bench starts itself (on a
//! free port, no persistence): decisions per second from the plain Redis store
//! (one round trip each) and from the deny cache over it (a lookup under a
//! shard lock), in the same run, and their ratio; and, for scale, the in-memory
//! store on the same key.
//!
//! `cargo bench --bench redis_deny_cache --features redis`

use sluicegate::algorithms::{Decision, FixedWindow, Receipt};
use sluicegate::stores::deny_cache::DenyCache;
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::stores::{MemoryStore, Operation, Store};
use sluicegate::{Clock, DefaultClock};
use std::time::{Duration, Instant};

mod redis_server;

use redis_server::Server;

/// How long each store is timed.
const SPAN: Duration = Duration::from_secs(3);

fn redis_store(server: &Server, prefix: &str) -> RedisStore<String, FixedWindow> {
    let options = RedisOptions::default()
        .prefix(prefix)
        .expect("a valid prefix");
    RedisStore::open_with(&server.url, options).expect("a valid URL")
}

/// Decisions per second of `store` on `key`, refused every time, over `SPAN`.
fn refused_per_second<S: Store<String, FixedWindow>>(
    store: &S,
    window: &FixedWindow,
    key: &String,
    clock: &DefaultClock,
) -> f64 {
    let step = Operation::Reserve {
        cost: 1,
        max_wait: 0,
    };
    // The key spent, and the refusal seen once, before timing.
    while store
        .apply_key::<(Decision, Receipt)>(window, key, clock.now(), step)
        .expect("Redis answers")
        .0
        .is_allowed()
    {}
    let started = Instant::now();
    let mut decisions = 0u64;
    while started.elapsed() < SPAN {
        for _ in 0..64 {
            let (decision, _) = store
                .apply_key::<(Decision, Receipt)>(window, key, clock.now(), step)
                .expect("Redis answers");
            assert!(!decision.is_allowed(), "the key must stay refused");
            std::hint::black_box(decision);
        }
        decisions += 64;
    }
    decisions as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let server = Server::start("redis-deny-cache-bench", &[]);
    // 10 an hour: refused for the rest of the hour once spent.
    let window = FixedWindow::new(10, Duration::from_secs(3600)).unwrap();
    let clock = DefaultClock::new();
    let key = "hot".to_owned();
    let plain = redis_store(&server, "plain:");
    let cached = DenyCache::new(redis_store(&server, "cached:"), &window).unwrap();
    let plain_rate = refused_per_second(&plain, &window, &key, &clock);
    let cached_rate = refused_per_second(&cached, &window, &key, &clock);
    let memory: MemoryStore<String, FixedWindow> = MemoryStore::new();
    let memory_rate = refused_per_second(&memory, &window, &key, &clock);
    println!("a hot refused key, one thread ({SPAN:?} each):");
    println!("  redis store:             {plain_rate:>14.0} decisions/s");
    println!("  deny cache over it:      {cached_rate:>14.0} decisions/s");
    println!(
        "  ratio:                   {:>14.0}x",
        cached_rate / plain_rate
    );
    println!("  answered from the cache: {}", cached.hits());
    println!("  memory store, for scale: {memory_rate:>14.0} decisions/s");
}
