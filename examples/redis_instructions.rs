//! The measurement harness for the Redis store's server cost per refused call of
//! the ring-keeping algorithms, in instructions (repeatable on a loaded machine,
//! unlike `INFO commandstats`): a `redis-server` under callgrind, counting only
//! inside `fcallCommand`, zeroed after the fill.
//!
//! ```text
//! cargo build --release --example redis_instructions --features redis
//! valgrind --tool=callgrind --toggle-collect=fcallCommand --collect-atstart=no \
//!     redis-server --port 7790 --save '' --appendonly no &
//! B=target/release/examples/redis_instructions
//! REDIS_URL=redis://127.0.0.1:7790/ $B buckets 1000 fill
//! REDIS_URL=redis://127.0.0.1:7790/ $B buckets 1000 hammer 10    # loads the library
//! callgrind_control -z redis-server
//! REDIS_URL=redis://127.0.0.1:7790/ $B buckets 1000 hammer 2000
//! callgrind_control -d redis-server    # then callgrind_annotate: total / 2000
//! ```
//!
//! `buckets` is `SlidingWindowBuckets::dropping(limit, 60 s, 1 s)`, `log` is
//! `SlidingLog::new(limit, 60 s)`, one key at the caller's (virtual) time: `fill`
//! grants `limit` calls spread over the first 30 s, `hammer` then makes calls 1 µs
//! apart, all refused.

use sluicegate::algorithms::{Receipt, SlidingLog, SlidingWindowBuckets};
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore, TimeSource};
use sluicegate::stores::{Step, Store};
use sluicegate::Decision;
use std::time::Duration;

/// 2025-11-23 in ns: a realistic caller time.
const START: u64 = 1_763_900_000_000_000_000;
const HALF_WINDOW: u64 = 30_000_000_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: redis_instructions buckets|log <limit> fill | hammer <calls>";
    let (Some(kind), Some(limit), Some(phase)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let limit: u64 = limit.parse().expect("the limit is a whole number");
    let calls: u64 = args.get(4).map_or(0, |n| n.parse().expect("calls"));
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:7790/".into());
    let minute = Duration::from_secs(60);
    match kind.as_str() {
        "buckets" => {
            let buckets = SlidingWindowBuckets::dropping(limit, minute, Duration::from_secs(1));
            run(&url, buckets.expect("a valid limit"), limit, phase, calls);
        }
        "log" => run(
            &url,
            SlidingLog::new(limit, minute).expect("a valid limit"),
            limit,
            phase,
            calls,
        ),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}

fn run<A: RedisAlgorithm>(url: &str, algorithm: A, limit: u64, phase: &str, calls: u64) {
    let options = RedisOptions::default()
        .prefix("instructions:")
        .expect("no braces")
        .time_source(TimeSource::Caller)
        .expiry_grace(Duration::from_secs(3600))
        .response_timeout(Duration::from_secs(60));
    let store: RedisStore<String, A> = RedisStore::open_with(url, options).expect("a Redis URL");
    let key = ["hot".to_owned()];
    let mut out = [(Decision::never(0, 0, 0), Receipt::NONE)];
    let step = Step::Reserve {
        cost: 1,
        max_wait: 0,
    };
    let mut apply = |now: u64| {
        store
            .apply(&algorithm, &key, now, step, &mut out)
            .unwrap_or_else(|e| panic!("{e} (is a redis-server at {url}?)"));
        out[0].0.is_allowed()
    };
    if phase == "fill" {
        let granted = (0..limit)
            .filter(|&i| apply(START + i * HALF_WINDOW / limit))
            .count();
        println!("filled: {granted} of {limit} granted");
    } else {
        let refused = (0..calls)
            .filter(|&i| !apply(START + HALF_WINDOW + i * 1_000))
            .count();
        println!("hammered: {refused} of {calls} refused");
    }
}
