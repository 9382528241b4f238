//! A set of three limits against one limit, and against governor's `check()`, in one
//! run. Every limiter reads the real clock (quanta, as governor does).
//!
//! * allowed: every call is admitted (rates of 1e9 per second, whose 1 ns per call
//!   is repaid long before the next call).
//! * denied: every call is refused (a member that granted its one permit and then
//!   needs 1000 s for the next); for a set, the refusing member is the middle one,
//!   so every member is still asked.
//!
//! Run: `cargo bench --bench multi`.

use criterion::measurement::WallTime;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkGroup, Criterion};
use governor::{Quota, RateLimiter as Governor};
use sluicegate::algorithms::{AllOf, Limits, SmoothBursty, SmoothWarmingUp};
use sluicegate::CellAlgorithm;
use sluicegate::RateLimiter;
use std::num::NonZeroU32;
use std::time::Duration;

const FAST: f64 = 1e9;
const SLOW: f64 = 1e-3;

fn bursty(rate: f64) -> SmoothBursty {
    SmoothBursty::new(rate).unwrap()
}

fn warming(rate: f64) -> SmoothWarmingUp {
    SmoothWarmingUp::new(rate, Duration::from_secs(1)).unwrap()
}

fn trio(middle: f64) -> (SmoothBursty, SmoothBursty, SmoothWarmingUp) {
    (bursty(FAST), bursty(middle), warming(FAST))
}

fn set(middle: f64) -> RateLimiter<AllOf<(SmoothBursty, SmoothBursty, SmoothWarmingUp)>> {
    RateLimiter::new(AllOf::new(trio(middle)))
}

fn limits(middle: f64) -> RateLimiter<Limits> {
    let (a, b, c) = trio(middle);
    RateLimiter::new(Limits::new().with(a).with(b).with(c))
}

/// Spends the one free permit of a slow limiter, so that every later call is refused.
fn exhausted(try_acquire: impl Fn() -> bool) {
    assert!(try_acquire());
    assert!((0..100).all(|_| !try_acquire()));
}

fn always(try_acquire: impl Fn() -> bool) {
    assert!((0..10_000).all(|_| try_acquire()));
}

/// `try_acquire` on `limiter(FAST)`, which admits every call, then on
/// `limiter(SLOW)` once it refuses every call.
fn allowed_then_denied<A: CellAlgorithm>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    limiter: impl Fn(f64) -> RateLimiter<A>,
) {
    let open = limiter(FAST);
    always(|| open.try_acquire());
    group.bench_function(format!("{name} try_acquire allowed"), |b| {
        b.iter(|| black_box(open.try_acquire()))
    });
    let shut = limiter(SLOW);
    exhausted(|| shut.try_acquire());
    group.bench_function(format!("{name} try_acquire denied"), |b| {
        b.iter(|| black_box(shut.try_acquire()))
    });
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("multi");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));

    let open = Governor::direct(Quota::per_second(NonZeroU32::new(1_000_000_000).unwrap()));
    always(|| open.check().is_ok());
    group.bench_function("governor check allowed", |b| {
        b.iter(|| black_box(open.check().is_ok()))
    });
    let shut = Governor::direct(Quota::per_hour(NonZeroU32::new(1).unwrap()));
    exhausted(|| shut.check().is_ok());
    group.bench_function("governor check denied", |b| {
        b.iter(|| black_box(shut.check().is_ok()))
    });

    let one = |rate| RateLimiter::new(bursty(rate));
    allowed_then_denied(&mut group, "one SmoothBursty", one);
    allowed_then_denied(&mut group, "AllOf 3", set);
    allowed_then_denied(&mut group, "Limits 3", limits);

    group.finish();
}

criterion_group!(multi, benches);
criterion_main!(multi);
