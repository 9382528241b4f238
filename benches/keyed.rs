//! Keyed limiting, side by side with governor's keyed limiter (default DashMap
//! store, default quanta clock), in the same run:
//!
//! * time per check: one hot key, and 100k / 1M keys drawn uniformly from a
//!   pre-generated array (every key is used once before measuring);
//! * the same populations again as interleaved rounds (each side's best round), a
//!   steadier ratio on a noisy machine, printed after criterion's timings;
//! * bytes per key at 1M keys: resident memory growth (`/proc/self/statm`) of a fresh
//!   child process per limiter, printed last.
//!
//! Algorithms: Guava's bursty limiter and the crate's sliding window counter (both
//! keep one 64-bit word per key).
//!
//! `cargo bench --bench keyed`

use criterion::measurement::WallTime;
use criterion::{black_box, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use governor::{Quota, RateLimiter as Governor};
use sluicegate::algorithms::{Algorithm, SlidingWindowCounter, SmoothBursty};
use sluicegate::KeyedRateLimiter;
use std::num::NonZeroU32;
use std::time::Duration;

/// Per-key quota of every limiter here: 1 per second (burst 1). At every population
/// measured, a key's next use comes before it has replenished, so both stores hold
/// every key and the run measures lookups in a table of that many live keys. (Under a
/// quota its traffic stays below, a key is replenished between uses: sluicegate then
/// forgets it and adds it back on its next use, which makes the two incomparable.)
const RATE: u32 = 1;
const DRAWS: usize = 1 << 22;

fn bursty() -> SmoothBursty {
    SmoothBursty::new(f64::from(RATE)).unwrap()
}

fn counter() -> SlidingWindowCounter {
    SlidingWindowCounter::new(u64::from(RATE), Duration::from_secs(1)).unwrap()
}

fn quota() -> Quota {
    Quota::per_second(NonZeroU32::new(RATE).unwrap())
}

/// SplitMix64: distinct, well-spread keys from a counter.
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// `DRAWS` keys drawn uniformly from `keys` distinct keys.
fn draws(keys: u64) -> Vec<u64> {
    (0..DRAWS as u64)
        .map(|i| splitmix(splitmix(i ^ 0xABCD) % keys))
        .collect()
}

fn bench_population(c: &mut Criterion, name: &str, keys: u64) {
    let draws = draws(keys);
    let mut group = c.benchmark_group(format!("keyed/{name}"));
    group
        .throughput(Throughput::Elements(1))
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);

    // Each contender is built and filled right before it is measured, so that no
    // table sits idle (its keys replenishing) while another one runs.
    let mask = DRAWS - 1;
    {
        let governor = Governor::keyed(quota());
        for key in 0..keys {
            let _ = governor.check_key(&splitmix(key));
        }
        group.bench_function(BenchmarkId::new("governor", name), |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                black_box(governor.check_key(&draws[i & mask]).is_ok())
            })
        });
    }
    sluicegate(
        &mut group,
        ("sluicegate_bursty", name),
        bursty(),
        keys,
        &draws,
    );
    sluicegate(
        &mut group,
        ("sluicegate_sliding_counter", name),
        counter(),
        keys,
        &draws,
    );
    group.finish();
}

/// A sluicegate keyed limiter of `algorithm` holding every one of `keys` keys, then
/// measured over `draws`.
fn sluicegate<A: Algorithm>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    (contender, population): (&str, &str),
    algorithm: A,
    keys: u64,
    draws: &[u64],
) {
    let limiter = filled(algorithm, keys);
    let mask = DRAWS - 1;
    group.bench_function(BenchmarkId::new(contender, population), |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            black_box(limiter.try_acquire(&draws[i & mask]))
        })
    });
}

/// A keyed limiter of `algorithm` whose first `keys` keys each took a permit.
fn filled<A: Algorithm>(algorithm: A, keys: u64) -> KeyedRateLimiter<u64, A> {
    let limiter = KeyedRateLimiter::new(algorithm);
    for key in 0..keys {
        limiter.try_acquire(&splitmix(key));
    }
    limiter
}

fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

const MEMORY_KEYS: u64 = 1_000_000;

/// In a fresh child process: resident memory growth for `MEMORY_KEYS` keys, each
/// checked once. The quota (1/s) keeps every key un-replenished during the fill, so
/// every key is held by both stores.
fn memory_child(kind: &str) {
    let one_per_second = SmoothBursty::new(1.0).unwrap();
    let before = resident_bytes();
    let (held, after) = match kind {
        "governor" => {
            let limiter = Governor::keyed(Quota::per_second(NonZeroU32::new(1).unwrap()));
            for key in 0..MEMORY_KEYS {
                let _ = limiter.check_key(&splitmix(key));
            }
            (limiter.len(), resident_bytes())
        }
        "sluicegate_bursty" => {
            let limiter = filled(one_per_second, MEMORY_KEYS);
            (limiter.live_keys(), resident_bytes())
        }
        _ => {
            let window = SlidingWindowCounter::new(1, Duration::from_secs(60)).unwrap();
            let limiter = filled(window, MEMORY_KEYS);
            (limiter.live_keys(), resident_bytes())
        }
    };
    let per_key = after.saturating_sub(before) as f64 / held.max(1) as f64;
    println!("{kind} {held} {per_key:.1}");
}

fn memory_report() {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    println!(
        "\nkeyed/memory: resident growth per key held, {MEMORY_KEYS} keys, fresh process each"
    );
    let mut governor = None;
    for kind in [
        "governor",
        "sluicegate_bursty",
        "sluicegate_sliding_counter",
    ] {
        let Ok(output) = std::process::Command::new(&exe)
            .env("SLUICEGATE_KEYED_MEMORY_CHILD", kind)
            .output()
        else {
            continue;
        };
        let line = String::from_utf8_lossy(&output.stdout);
        let mut fields = line.split_whitespace();
        let (Some(_), Some(held), Some(bytes)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let bytes: f64 = bytes.parse().unwrap_or(f64::NAN);
        let ratio = governor.map_or(String::new(), |g: f64| {
            format!("  ({:.2}x governor)", bytes / g)
        });
        if kind == "governor" {
            governor = Some(bytes);
        }
        println!("  {kind:<28} {held:>8} keys held  {bytes:>6.1} B/key{ratio}");
    }
}

/// Ratios from interleaved rounds: governor and sluicegate take turns over the same
/// draws, and each side keeps its best round. On a shared, noisy machine this is
/// steadier than comparing two criterion runs taken seconds apart.
fn interleaved_report() {
    const ROUND: usize = 500_000;
    const ROUNDS: usize = 7;
    println!(
        "\nkeyed/interleaved: best of {ROUNDS} alternating rounds of {ROUND} checks, ns per check"
    );
    for (name, keys) in [("hot", 1u64), ("100k", 100_000), ("1M", 1_000_000)] {
        let draws = draws(keys);
        let governor = Governor::keyed(quota());
        let sluice_bursty: KeyedRateLimiter<u64, _> = KeyedRateLimiter::new(bursty());
        let sluice_counter: KeyedRateLimiter<u64, _> = KeyedRateLimiter::new(counter());
        for key in 0..keys {
            let key = splitmix(key);
            let _ = governor.check_key(&key);
            sluice_bursty.try_acquire(&key);
            sluice_counter.try_acquire(&key);
        }
        let mut best = [f64::MAX; 3];
        let mut offset = 0;
        for _ in 0..ROUNDS {
            let contenders: [&dyn Fn(&u64) -> bool; 3] = [
                &|k| governor.check_key(k).is_ok(),
                &|k| sluice_bursty.try_acquire(k),
                &|k| sluice_counter.try_acquire(k),
            ];
            for (slot, check) in contenders.iter().enumerate() {
                let start = std::time::Instant::now();
                for i in 0..ROUND {
                    black_box(check(&draws[(offset + i) & (DRAWS - 1)]));
                }
                let per_check = start.elapsed().as_nanos() as f64 / ROUND as f64;
                best[slot] = best[slot].min(per_check);
            }
            offset += ROUND;
        }
        println!(
            "  {name:<5} governor {:>6.1}  sluicegate_bursty {:>6.1} ({:.2}x)  sluicegate_sliding_counter {:>6.1} ({:.2}x)",
            best[0],
            best[1],
            best[1] / best[0],
            best[2],
            best[2] / best[0]
        );
    }
}

fn main() {
    if let Ok(kind) = std::env::var("SLUICEGATE_KEYED_MEMORY_CHILD") {
        memory_child(&kind);
        return;
    }
    // `SLUICEGATE_KEYED_ONLY=hot|100k|1M|interleaved|memory` runs one part (e.g.
    // under a profiler).
    let only = std::env::var("SLUICEGATE_KEYED_ONLY").ok();
    let wanted = |part: &str| only.as_deref().is_none_or(|o| o == part);
    let mut c = Criterion::default().configure_from_args();
    for (name, keys) in [("hot", 1), ("100k", 100_000), ("1M", 1_000_000)] {
        if wanted(name) {
            bench_population(&mut c, name, keys);
        }
    }
    c.final_summary();
    // `cargo test --benches` runs each benchmark once, without `--bench`: skip the
    // reports, which take tens of seconds.
    let measuring = std::env::args().any(|arg| arg == "--bench");
    if measuring && wanted("interleaved") {
        interleaved_report();
    }
    if measuring && wanted("memory") {
        memory_report();
    }
}
