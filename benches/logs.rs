//! try_acquire, allowed and denied, for the sliding log and the bucketed sliding
//! window through `RateLimiter`, side by side with governor's `check()` in the same
//! run. Also prints the state sizes quoted in BENCHMARKS.md.
//!
//! Run: `cargo bench --bench logs`

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

    // The floor every LockedCell algorithm pays (clock read + mutex + a trivial
    // step), and the lock-free WordCell's, for reference.
    let floor = RateLimiter::warming_up(1e12, Duration::ZERO).unwrap();
    group.bench_function("floor: LockedCell (warming-up) allowed", |b| {
        b.iter(|| black_box(floor.try_acquire()))
    });
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

criterion_group!(benches, bench);
criterion_main!(benches);
