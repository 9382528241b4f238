//! try_acquire, allowed and denied, for the sliding log and the bucketed sliding
//! window through `RateLimiter`, side by side with governor's `check()` in the same
//! run. Also prints the state sizes quoted in BENCHMARKS.md.
//!
//! Run: `cargo bench --bench logs`

mod common;

use common::print_against_governor;
use criterion::measurement::WallTime;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkGroup, Criterion};
use governor::{Quota, RateLimiter as Governor};
use sluicegate::algorithms::{Algorithm, Decision, SlidingLog, SlidingWindowBuckets};
use sluicegate::CellAlgorithm;
use sluicegate::RateLimiter;
use std::num::NonZeroU32;
use std::time::Duration;

type Group<'a> = BenchmarkGroup<'a, WallTime>;

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
fn pair<A: CellAlgorithm>(allowed: A, denied: A) -> (RateLimiter<A>, RateLimiter<A>) {
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
    print_against_governor(&cases, 34);
}

/// `try_acquire` on a limiter of `algorithm` that was first granted `spent` permits.
fn try_acquire<A: CellAlgorithm>(group: &mut Group, name: &str, algorithm: A, spent: u64) {
    let limiter = RateLimiter::new(algorithm);
    if spent > 0 {
        assert!(limiter.try_acquire_n(spent).unwrap());
    }
    group.bench_function(name, |b| b.iter(|| black_box(limiter.try_acquire())));
}

/// A reserve of 1 at 5 ns on a state that reserved `spent` permits at 0.
fn pure_step<A: Algorithm>(group: &mut Group, name: &str, algorithm: A, spent: u64) {
    let mut state = algorithm.initial_state(0);
    algorithm.reserve::<Decision>(&mut state, 0, spent, 0);
    group.bench_function(name, |b| {
        b.iter(|| black_box(algorithm.reserve::<Decision>(&mut state, black_box(5), 1, 0)))
    });
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
    let (second, tenth) = (Duration::from_secs(1), Duration::from_millis(100));
    let w = SlidingWindowBuckets::dropping(u64::MAX / 2, second, tenth).unwrap();
    try_acquire(&mut group, "buckets (drop, 10) allowed", w, 0);
    let w = SlidingWindowBuckets::weighted(u64::MAX / 2, second, tenth).unwrap();
    try_acquire(&mut group, "buckets (weighted, 10) allowed", w, 0);

    // Denied: one permit per hour, spent; each refusal computes an exact retry_after.
    let hour = Duration::from_secs(3600);
    for (name, precision) in [("10", 360), ("60", 60)] {
        for weighted in [false, true] {
            let p = Duration::from_secs(precision);
            let w = if weighted {
                SlidingWindowBuckets::weighted(1, hour, p)
            } else {
                SlidingWindowBuckets::dropping(1, hour, p)
            }
            .unwrap();
            let label = format!(
                "buckets ({}, {name}) denied",
                if weighted { "weighted" } else { "drop" }
            );
            try_acquire(&mut group, &label, w, 1);
        }
    }

    // Allowed: a log whose entries expire within a microsecond, so it stays short.
    let log = SlidingLog::new(1 << 20, Duration::from_micros(1)).unwrap();
    try_acquire(&mut group, "sliding log allowed", log, 0);
    let log = SlidingLog::new(100, hour).unwrap();
    try_acquire(&mut group, "sliding log (100) denied", log, 100);
    let log = SlidingLog::new(100, hour).unwrap().with_rejected_recorded();
    try_acquire(&mut group, "sliding log (100, recording) denied", log, 100);

    // The pure step, no clock and no lock, for comparison.
    let minute = Duration::from_secs(60);
    let w = SlidingWindowBuckets::dropping(1, hour, minute).unwrap();
    pure_step(&mut group, "pure buckets (drop, 60) denied", w, 1);
    let w = SlidingWindowBuckets::weighted(1, hour, minute).unwrap();
    pure_step(&mut group, "pure buckets (weighted, 60) denied", w, 1);
    let log = SlidingLog::new(100, hour).unwrap();
    pure_step(&mut group, "pure sliding log (100) denied", log, 100);
    let bursty = sluicegate::algorithms::SmoothBursty::new(1.0).unwrap();
    pure_step(
        &mut group,
        "pure SmoothBursty denied (reference)",
        bursty,
        1,
    );
    let clock = sluicegate::DefaultClock::new();
    group.bench_function("clock read", |b| {
        b.iter(|| black_box(sluicegate::Clock::now(&clock)))
    });
    group.finish();
}

criterion_group!(benches, interleaved_ratios, bench);
criterion_main!(benches);
