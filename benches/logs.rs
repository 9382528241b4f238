//! try_acquire, allowed and denied, for the sliding log and the bucketed sliding
//! window through `RateLimiter`, side by side with governor's `check()` in the same
//! run. Also prints the state sizes quoted in BENCHMARKS.md.
//!
//! Run: `cargo bench --bench logs`

mod common;

use common::{fastest_batches, BATCH};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use governor::{Quota, RateLimiter as Governor};
use sluicegate::algorithms::{Algorithm, SlidingLog, SlidingWindowBuckets};
use sluicegate::RateLimiter;
use std::num::NonZeroU32;
use std::time::Duration;

fn governor_allowed() -> impl Fn() -> bool {
    let quota = Quota::per_second(NonZeroU32::MAX);
    let limiter = Governor::direct(quota);
    move || limiter.check().is_ok()
}

fn governor_denied() -> impl Fn() -> bool {
    let limiter = Governor::direct(Quota::per_hour(NonZeroU32::MIN));
    assert!(limiter.check().is_ok());
    move || limiter.check().is_ok()
}

fn print_state_sizes() {
    let hour = Duration::from_secs(3600);
    let minute = Duration::from_secs(60);
    let windows = [
        (
            "SlidingWindowBuckets 100/min, 10 x 6 s",
            SlidingWindowBuckets::dropping(100, minute, Duration::from_secs(6)).unwrap(),
        ),
        (
            "SlidingWindowBuckets 240/h, 60 x 1 min (seed 002)",
            SlidingWindowBuckets::dropping(240, hour, minute).unwrap(),
        ),
    ];
    for (name, w) in windows {
        let state = w.initial_state(0);
        println!(
            "state size: {name}: {} B inline + {} B heap",
            std::mem::size_of_val(&state),
            state.heap_bytes()
        );
    }
    for (name, log) in [
        ("SlidingLog 100/min", SlidingLog::new(100, minute).unwrap()),
        (
            "SlidingLog 100/min, rejects recorded",
            SlidingLog::new(100, minute)
                .unwrap()
                .with_rejected_recorded(),
        ),
    ] {
        let state = log.initial_state(0);
        println!(
            "state size: {name}: {} B inline + {} B heap",
            std::mem::size_of_val(&state),
            state.heap_bytes()
        );
    }
}

/// A limiter that grants every call (a limit never reached, with entries or buckets
/// that keep expiring) and one that refuses every call (its limit spent for an hour).
fn pair<A: sluicegate::cells::CellAlgorithm>(
    allowed: A,
    denied: A,
) -> (RateLimiter<A>, RateLimiter<A>) {
    let denied = RateLimiter::new(denied);
    while denied.try_acquire() {}
    (RateLimiter::new(allowed), denied)
}

/// Every case of this bench round-robin with governor, each case's fastest batch
/// (see `common::fastest_batches`), as ratios to governor's.
fn interleaved_ratios(_: &mut Criterion) {
    let second = Duration::from_secs(1);
    let hour = Duration::from_secs(3600);
    let lots = u64::MAX / 2;
    let (tenth, sixtieth) = (Duration::from_millis(100), Duration::from_secs(60));
    let drop = pair(
        SlidingWindowBuckets::dropping(lots, second, tenth).unwrap(),
        SlidingWindowBuckets::dropping(1, hour, sixtieth).unwrap(),
    );
    let weighted = pair(
        SlidingWindowBuckets::weighted(lots, second, tenth).unwrap(),
        SlidingWindowBuckets::weighted(1, hour, sixtieth).unwrap(),
    );
    let log = pair(
        SlidingLog::new(1 << 20, Duration::from_micros(1)).unwrap(),
        SlidingLog::new(100, hour).unwrap(),
    );
    let recording = pair(
        SlidingLog::new(1 << 20, Duration::from_micros(1))
            .unwrap()
            .with_rejected_recorded(),
        SlidingLog::new(100, hour).unwrap().with_rejected_recorded(),
    );
    let allowed_governor = governor_allowed();
    let denied_governor = governor_denied();
    let cases: [(&str, &dyn Fn() -> bool); 10] = [
        ("allowed/governor", &allowed_governor),
        ("allowed/buckets_drop_10", &|| drop.0.try_acquire()),
        ("allowed/buckets_weighted_10", &|| weighted.0.try_acquire()),
        ("allowed/sliding_log", &|| log.0.try_acquire()),
        ("allowed/sliding_log_recording", &|| {
            recording.0.try_acquire()
        }),
        ("denied/governor", &denied_governor),
        ("denied/buckets_drop_60", &|| drop.1.try_acquire()),
        ("denied/buckets_weighted_60", &|| weighted.1.try_acquire()),
        ("denied/sliding_log_100", &|| log.1.try_acquire()),
        ("denied/sliding_log_100_recording", &|| {
            recording.1.try_acquire()
        }),
    ];
    let best = fastest_batches(&cases, 200);
    println!("interleaved, fastest batch of {BATCH} calls:");
    for (index, (name, _)) in cases.iter().enumerate() {
        let governor = if index < 5 { best[0] } else { best[5] };
        println!(
            "  {name:34} {:6.2} ns  {:4.2}x governor",
            best[index],
            best[index] / governor
        );
    }
}

fn bench(c: &mut Criterion) {
    print_state_sizes();
    let mut group = c.benchmark_group("logs");
    group
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1));

    let allowed = governor_allowed();
    group.bench_function("governor check allowed", |b| {
        b.iter(|| black_box(allowed()))
    });
    let denied = governor_denied();
    group.bench_function("governor check denied", |b| b.iter(|| black_box(denied())));

    // The floor: a clock read and a one-word compare-and-swap, for reference.
    let floor = RateLimiter::bursty(1e12).unwrap();
    group.bench_function("floor: WordCell (bursty) allowed", |b| {
        b.iter(|| black_box(floor.try_acquire()))
    });

    // Allowed: a limit never reached, so every call is granted (and the ring rolls).
    let w = SlidingWindowBuckets::dropping(
        u64::MAX / 2,
        Duration::from_secs(1),
        Duration::from_millis(100),
    )
    .unwrap();
    let limiter = RateLimiter::new(w);
    group.bench_function("buckets (drop, 10) allowed", |b| {
        b.iter(|| black_box(limiter.try_acquire()))
    });
    let w = SlidingWindowBuckets::weighted(
        u64::MAX / 2,
        Duration::from_secs(1),
        Duration::from_millis(100),
    )
    .unwrap();
    let limiter = RateLimiter::new(w);
    group.bench_function("buckets (weighted, 10) allowed", |b| {
        b.iter(|| black_box(limiter.try_acquire()))
    });

    // Denied: one permit per hour, spent; each refusal computes an exact retry_after.
    for (name, precision) in [("10", 360), ("60", 60)] {
        for weighted in [false, true] {
            let d = Duration::from_secs(3600);
            let p = Duration::from_secs(precision);
            let w = if weighted {
                SlidingWindowBuckets::weighted(1, d, p)
            } else {
                SlidingWindowBuckets::dropping(1, d, p)
            }
            .unwrap();
            let limiter = RateLimiter::new(w);
            assert!(limiter.try_acquire());
            let label = format!(
                "buckets ({}, {name}) denied",
                if weighted { "weighted" } else { "drop" }
            );
            group.bench_function(label, |b| b.iter(|| black_box(limiter.try_acquire())));
        }
    }

    // Allowed: a log whose entries expire within a microsecond, so it stays short.
    let log = SlidingLog::new(1 << 20, Duration::from_micros(1)).unwrap();
    let limiter = RateLimiter::new(log);
    group.bench_function("sliding log allowed", |b| {
        b.iter(|| black_box(limiter.try_acquire()))
    });
    let log = SlidingLog::new(100, Duration::from_secs(3600)).unwrap();
    let limiter = RateLimiter::new(log);
    assert!(limiter.try_acquire_n(100).unwrap());
    group.bench_function("sliding log (100) denied", |b| {
        b.iter(|| black_box(limiter.try_acquire()))
    });
    let log = SlidingLog::new(100, Duration::from_secs(3600))
        .unwrap()
        .with_rejected_recorded();
    let limiter = RateLimiter::new(log);
    assert!(limiter.try_acquire_n(100).unwrap());
    group.bench_function("sliding log (100, recording) denied", |b| {
        b.iter(|| black_box(limiter.try_acquire()))
    });

    // The pure step, no clock and no lock, for comparison.
    let w = SlidingWindowBuckets::dropping(1, Duration::from_secs(3600), Duration::from_secs(60))
        .unwrap();
    let mut state = w.initial_state(0);
    w.reserve(&mut state, 0, 1, 0);
    group.bench_function("pure buckets (drop, 60) denied", |b| {
        b.iter(|| black_box(w.reserve(&mut state, black_box(5), 1, 0)))
    });
    let w = SlidingWindowBuckets::weighted(1, Duration::from_secs(3600), Duration::from_secs(60))
        .unwrap();
    let mut state = w.initial_state(0);
    w.reserve(&mut state, 0, 1, 0);
    group.bench_function("pure buckets (weighted, 60) denied", |b| {
        b.iter(|| black_box(w.reserve(&mut state, black_box(5), 1, 0)))
    });
    let log = SlidingLog::new(100, Duration::from_secs(3600)).unwrap();
    let mut state = log.initial_state(0);
    log.reserve(&mut state, 0, 100, 0);
    group.bench_function("pure sliding log (100) denied", |b| {
        b.iter(|| black_box(log.reserve(&mut state, black_box(5), 1, 0)))
    });
    let bursty = sluicegate::algorithms::SmoothBursty::new(1.0).unwrap();
    let mut state = bursty.initial_state(0);
    bursty.reserve(&mut state, 0, 1, 0);
    group.bench_function("pure SmoothBursty denied (reference)", |b| {
        b.iter(|| black_box(bursty.reserve(&mut state, black_box(5), 1, 0)))
    });
    let clock = sluicegate::DefaultClock::new();
    group.bench_function("clock read", |b| {
        b.iter(|| black_box(sluicegate::Clock::now(&clock)))
    });
    group.finish();
}

criterion_group!(benches, interleaved_ratios, bench);
criterion_main!(benches);
