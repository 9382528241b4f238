//! The direct limiter's hot paths, each side by side with `governor` 0.10's
//! `RateLimiter::direct(..).check()` on its default (quanta) clock, in the same run.
//!
//! Run: `cargo bench --bench direct`. Each group holds one comparable pair, so read
//! the ratio within a group; absolute figures move with the machine's load.
//!
//! * `clock_read`: one read of each default clock, the floor under all the rest.
//! * `allowed`: a limit so generous every call is granted (1e9 permits/s, a
//!   1-second burst: one nanosecond of budget per permit, while a call takes tens of
//!   nanoseconds), so each call does the full grant: clock read, state update, CAS.
//!   `check(1)` (the full `Decision`) is measured next to `try_acquire`; it is
//!   black-boxed by reference, so every field is computed and stored, because
//!   moving the `Result<Decision, Error>` by value into `black_box` compiles
//!   to a byte-by-byte copy that would measure the harness, not the limiter.
//! * `denied`: a limit that granted its one permit and refuses for the next hour.
//! * `unlimited_acquire`: `acquire()` on an infinite rate; governor has no infinite
//!   quota, so its side is `check()` on the huge quota of `allowed`.
//! * `warming_up_allowed` / `warming_up_denied`: `SmoothWarmingUp` (a locked
//!   two-word state) against the same governor checks.
//! * `two_threads`: two scoped threads each making `iters` allowed checks on one
//!   shared limiter; the figure is wall time per check, both threads together
//!   (aggregate throughput is its inverse).

use criterion::measurement::WallTime;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkGroup, Criterion};
use governor::{Quota, RateLimiter as Governor};
use sluicegate::algorithms::SmoothBursty;
use sluicegate::RateLimiter;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

/// Permits per second of the "always allowed" limits: 1 ns of budget per permit.
const HUGE_RATE: u32 = 1_000_000_000;

fn huge_quota() -> Quota {
    Quota::per_second(NonZeroU32::new(HUGE_RATE).expect("non-zero"))
}

/// One permit an hour, burst 1: after the first permit every check is refused.
fn exhausted_governor() -> governor::DefaultDirectRateLimiter {
    let governor = Governor::direct(Quota::per_hour(NonZeroU32::MIN));
    while governor.check().is_ok() {}
    governor
}

fn short(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
}

/// The floor under every figure: one read of each crate's default clock (both read
/// quanta's TSC counter and scale it to nanoseconds).
fn clock_read(c: &mut Criterion) {
    use governor::clock::Clock as _;
    use sluicegate::clock::Clock as _;
    let mut group = c.benchmark_group("clock_read");
    short(&mut group);
    let clock = sluicegate::clock::DefaultClock::new();
    group.bench_function("sluicegate_default_clock", |b| {
        b.iter(|| black_box(clock.now()))
    });
    let clock = governor::clock::DefaultClock::default();
    group.bench_function("governor_default_clock", |b| {
        b.iter(|| black_box(clock.now()))
    });
    group.finish();
}

fn allowed(c: &mut Criterion) {
    let limiter = RateLimiter::bursty(f64::from(HUGE_RATE)).expect("valid rate");
    decide(c, "allowed", &limiter, &Governor::direct(huge_quota()));
}

fn denied(c: &mut Criterion) {
    let limiter = RateLimiter::bursty(1.0 / 3600.0).expect("valid rate");
    while limiter.try_acquire() {}
    decide(c, "denied", &limiter, &exhausted_governor());
}

/// The same calls on a limiter that grants every one or refuses every one:
/// sluicegate's lean try and full check beside governor's check.
fn decide(
    c: &mut Criterion,
    name: &str,
    limiter: &RateLimiter<SmoothBursty>,
    governor: &governor::DefaultDirectRateLimiter,
) {
    let mut group = c.benchmark_group(name);
    short(&mut group);
    group.bench_function("sluicegate_try_acquire", |b| {
        b.iter(|| black_box(limiter.try_acquire()))
    });
    group.bench_function("sluicegate_check", |b| {
        b.iter(|| black_box(&limiter.check(1)).is_ok())
    });
    group.bench_function("governor_check", |b| b.iter(|| black_box(governor.check())));
    group.finish();
}

fn unlimited_acquire(c: &mut Criterion) {
    let mut group = c.benchmark_group("unlimited_acquire");
    short(&mut group);
    let limiter = RateLimiter::bursty(f64::INFINITY).expect("valid rate");
    group.bench_function("sluicegate_acquire", |b| {
        b.iter(|| black_box(limiter.acquire()))
    });
    // governor has no infinite quota: the closest is a check on a huge one.
    let governor = Governor::direct(huge_quota());
    group.bench_function("governor_check_huge_quota", |b| {
        b.iter(|| black_box(governor.check()))
    });
    group.finish();
}

fn warming_up(c: &mut Criterion) {
    let mut group = c.benchmark_group("warming_up_allowed");
    short(&mut group);
    let limiter = RateLimiter::warming_up(f64::from(HUGE_RATE), Duration::from_secs(1))
        .expect("valid warming-up limiter");
    group.bench_function("sluicegate_try_acquire", |b| {
        b.iter(|| black_box(limiter.try_acquire()))
    });
    let governor = Governor::direct(huge_quota());
    group.bench_function("governor_check", |b| b.iter(|| black_box(governor.check())));
    group.finish();

    let mut group = c.benchmark_group("warming_up_denied");
    short(&mut group);
    let limiter = RateLimiter::warming_up(1.0 / 3600.0, Duration::from_secs(1))
        .expect("valid warming-up limiter");
    while limiter.try_acquire() {}
    group.bench_function("sluicegate_try_acquire", |b| {
        b.iter(|| black_box(limiter.try_acquire()))
    });
    let governor = exhausted_governor();
    group.bench_function("governor_check", |b| b.iter(|| black_box(governor.check())));
    group.finish();
}

/// Wall time for two threads to make `iters` checks each on one shared limiter,
/// halved: criterion then reports time per check with both threads running.
fn two_threads_per_check(iters: u64, check: impl Fn() -> bool + Sync) -> Duration {
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                for _ in 0..iters {
                    black_box(check());
                }
            });
        }
    });
    start.elapsed() / 2
}

fn two_threads(c: &mut Criterion) {
    let mut group = c.benchmark_group("two_threads");
    short(&mut group);
    let limiter = RateLimiter::bursty(f64::from(HUGE_RATE)).expect("valid rate");
    group.bench_function("sluicegate_try_acquire", |b| {
        b.iter_custom(|iters| two_threads_per_check(iters, || limiter.try_acquire()))
    });
    let governor = Governor::direct(huge_quota());
    group.bench_function("governor_check", |b| {
        b.iter_custom(|iters| two_threads_per_check(iters, || governor.check().is_ok()))
    });
    group.finish();
}

criterion_group!(
    benches,
    clock_read,
    allowed,
    denied,
    unlimited_acquire,
    warming_up,
    two_threads
);
criterion_main!(benches);
