//! Limits shared by every process that talks to one Redis: "10 per second and 120
//! per minute", per client, plus one global limit for the whole
//! service, each decision one round trip, at the Redis server's clock.
//!
//! `cargo run --example redis --features redis` (uses `REDIS_URL`, or a Redis on
//! 127.0.0.1 at its default port). Run it twice at once: the two processes share
//! the limits.

use sluicegate::algorithms::{AllOf, FixedWindow, SlidingWindowCounter};
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::{Applied, DefaultClock, Error, KeyedRateLimiter};
use std::time::Duration;

fn main() {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".to_owned());
    if let Err(e) = run(&url) {
        eprintln!("error: {e}");
        if let Some(Error::Store(store)) = e.downcast_ref::<Error>()
            && store.applied() == Applied::No
        {
            eprintln!(
                    "No Redis answered at {url}. Start one (`redis-server`) or point REDIS_URL at one, e.g. \
                     REDIS_URL=redis://my-host:6380/ cargo run --example redis --features redis"
                );
        }
        std::process::exit(1);
    }
}

fn run(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let options = RedisOptions::default().prefix("sluicegate-example:")?;
    // Per client: 10 per second and 120 per minute, all-or-nothing.
    let per_client = AllOf::new((
        SlidingWindowCounter::new(10, Duration::from_secs(1))?,
        SlidingWindowCounter::new(120, Duration::from_secs(60))?,
    ));
    let clients = KeyedRateLimiter::with_store(
        per_client,
        RedisStore::open_with(url, options.clone())?,
        DefaultClock::new(),
    );
    // One limit for the whole service: one key, one line.
    let service = KeyedRateLimiter::with_store(
        FixedWindow::new(1_000, Duration::from_secs(1))?,
        RedisStore::open_with(url, options)?,
        DefaultClock::new(),
    );

    for (i, client) in ["ip:10.0.0.1", "ip:10.0.0.2", "user:alice"]
        .iter()
        .cycle()
        .take(36)
        .enumerate()
    {
        if !service.check(&"all", 1)?.is_allowed() {
            println!("{i:2} {client:12} refused: the service is at its global limit");
            continue;
        }
        let decision = clients.check(client, 1)?;
        if decision.is_allowed() {
            println!(
                "{i:2} {client:12} allowed, {} left in the tightest window",
                decision.remaining()
            );
        } else {
            println!(
                "{i:2} {client:12} 429, retry after {:?} (limit #{} of the set)",
                decision.retry_after(),
                decision.limit_index()
            );
        }
    }
    Ok(())
}
