//! try_acquire and check(1) through `RateLimiter` for the fixed window, the leaky
//! bucket (meter and queue) and the sliding window counter, side by side with
//! governor's `check()` in the same run, allowed and denied. `check(1)` answers the
//! full `Decision` (`remaining`, `retry_after`, `reset_after`), what a server
//! sending `RateLimit` headers needs; it is black-boxed by reference, so every field
//! is computed and stored (see `benches/direct.rs`, which has the bursty pair).
//!
//! `cargo bench --bench windows`

mod common;

use common::print_against_governor;
use criterion::measurement::WallTime;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkGroup, Criterion};
use governor::{Quota, RateLimiter as Governor};
use sluicegate::algorithms::{FixedWindow, LeakyBucket, SlidingWindowCounter, SmoothBursty};
use sluicegate::CellAlgorithm;
use sluicegate::RateLimiter;
use std::num::NonZeroU32;
use std::time::Duration;

type Group<'a> = BenchmarkGroup<'a, WallTime>;

const HOUR: Duration = Duration::from_secs(3600);
/// The sliding window counter's largest limit (its state is one word) over a window
/// short enough that the allowed benches never run out: 1.7e9 permits per second.
const MAX_SLIDING: u64 = (1 << 24) - 1;
const TEN_MS: Duration = Duration::from_millis(10);

/// `try_acquire()` as `name`, then `check(1)` as `name_check`, on one limiter.
fn bench_ours<A: CellAlgorithm>(c: &mut Group<'_>, name: &str, algorithm: A, expect: bool) {
    let limiter = RateLimiter::new(algorithm);
    if !expect {
        // Exhaust the limit first.
        while limiter.try_acquire() {}
    }
    assert_eq!(limiter.try_acquire(), expect, "{name}");
    c.bench_function(name, |b| b.iter(|| black_box(limiter.try_acquire())));
    if !expect {
        // A fast refilling limit (3 per second) has refilled during the first run.
        while limiter.try_acquire() {}
    }
    assert_eq!(
        limiter.check(1).map(|d| d.is_allowed()),
        Ok(expect),
        "{name}"
    );
    c.bench_function(format!("{name}_check"), |b| {
        b.iter(|| black_box(&limiter.check(1)).is_ok())
    });
}

/// The group `name`, with governor's `check()` on `governor` measured first.
fn governor_first<'a>(
    c: &'a mut Criterion,
    name: &str,
    governor: &governor::DefaultDirectRateLimiter,
) -> Group<'a> {
    let mut group = c.benchmark_group(name);
    group
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1));
    group.bench_function("governor", |b| {
        b.iter(|| black_box(governor.check().is_ok()))
    });
    group
}

fn allowed(c: &mut Criterion) {
    let governor = Governor::direct(Quota::per_second(NonZeroU32::MAX));
    assert!(governor.check().is_ok());
    let mut group = governor_first(c, "allowed", &governor);
    let lots = u64::from(u32::MAX);
    bench_ours(&mut group, "bursty", SmoothBursty::new(1e9).unwrap(), true);
    bench_ours(
        &mut group,
        "fixed_window",
        FixedWindow::new(1 << 40, HOUR).unwrap(),
        true,
    );
    bench_ours(
        &mut group,
        "leaky_meter_whole_ns",
        LeakyBucket::meter(lots, 1, Duration::from_nanos(1)).unwrap(),
        true,
    );
    bench_ours(
        &mut group,
        "leaky_meter_3_per_s",
        LeakyBucket::meter(lots, 3, Duration::from_secs(1)).unwrap(),
        true,
    );
    bench_ours(
        &mut group,
        "leaky_queue",
        LeakyBucket::queue(lots, 1, Duration::from_nanos(1)).unwrap(),
        true,
    );
    bench_ours(
        &mut group,
        "sliding_window_counter",
        SlidingWindowCounter::new(MAX_SLIDING, TEN_MS).unwrap(),
        true,
    );
    group.finish();
}

fn denied(c: &mut Criterion) {
    let governor = Governor::direct(Quota::per_hour(NonZeroU32::MIN));
    while governor.check().is_ok() {}
    let mut group = governor_first(c, "denied", &governor);
    bench_ours(
        &mut group,
        "bursty",
        SmoothBursty::new(1.0 / 3600.0).unwrap(),
        false,
    );
    bench_ours(
        &mut group,
        "fixed_window",
        FixedWindow::new(1, HOUR).unwrap(),
        false,
    );
    bench_ours(
        &mut group,
        "leaky_meter_whole_ns",
        LeakyBucket::meter(1, 1, HOUR).unwrap(),
        false,
    );
    bench_ours(
        &mut group,
        "leaky_meter_3_per_s",
        LeakyBucket::meter(1, 3, Duration::from_secs(1)).unwrap(),
        false,
    );
    bench_ours(
        &mut group,
        "leaky_queue",
        LeakyBucket::queue(1, 1, HOUR).unwrap(),
        false,
    );
    bench_ours(
        &mut group,
        "sliding_window_counter",
        SlidingWindowCounter::new(1, HOUR).unwrap(),
        false,
    );
    group.finish();
}

/// A noise-resistant summary for a shared machine: every case runs in short batches,
/// interleaved round-robin with governor, and keeps its fastest batch; the ratios to
/// governor's fastest batch are printed. Preemption only ever slows a batch down, so
/// the minimum is the figure least disturbed by other load.
fn interleaved_ratios(_: &mut Criterion) {
    let lots = u64::from(u32::MAX);
    let allowed_governor = Governor::direct(Quota::per_second(NonZeroU32::MAX));
    let denied_governor = Governor::direct(Quota::per_hour(NonZeroU32::MIN));
    while denied_governor.check().is_ok() {}
    let exhausted = |limiter: &dyn Fn() -> bool| while limiter() {};
    let fixed = (
        RateLimiter::new(FixedWindow::new(1 << 40, HOUR).unwrap()),
        RateLimiter::new(FixedWindow::new(1, HOUR).unwrap()),
    );
    let meter = (
        RateLimiter::new(LeakyBucket::meter(lots, 1, Duration::from_nanos(1)).unwrap()),
        RateLimiter::new(LeakyBucket::meter(1, 1, HOUR).unwrap()),
    );
    let third = (
        RateLimiter::new(LeakyBucket::meter(lots, 3, Duration::from_secs(1)).unwrap()),
        RateLimiter::new(LeakyBucket::meter(1, 3, Duration::from_secs(1)).unwrap()),
    );
    let queue = (
        RateLimiter::new(LeakyBucket::queue(lots, 1, Duration::from_nanos(1)).unwrap()),
        RateLimiter::new(LeakyBucket::queue(1, 1, HOUR).unwrap()),
    );
    let sliding = (
        RateLimiter::new(SlidingWindowCounter::new(MAX_SLIDING, TEN_MS).unwrap()),
        RateLimiter::new(SlidingWindowCounter::new(1, HOUR).unwrap()),
    );
    exhausted(&|| fixed.1.try_acquire());
    exhausted(&|| meter.1.try_acquire());
    exhausted(&|| third.1.try_acquire());
    exhausted(&|| queue.1.try_acquire());
    exhausted(&|| sliding.1.try_acquire());
    let bursty = (
        RateLimiter::new(SmoothBursty::new(1e9).unwrap()),
        RateLimiter::new(SmoothBursty::new(1.0 / 3600.0).unwrap()),
    );
    exhausted(&|| bursty.1.try_acquire());
    // The full decision, computed and stored (black-boxed by reference).
    fn check<A: CellAlgorithm>(limiter: &RateLimiter<A>) -> bool {
        black_box(&limiter.check(1)).is_ok()
    }
    let cases: [(&str, &dyn Fn() -> bool); 26] = [
        ("allowed/governor", &|| allowed_governor.check().is_ok()),
        ("allowed/bursty", &|| bursty.0.try_acquire()),
        ("allowed/fixed_window", &|| fixed.0.try_acquire()),
        ("allowed/leaky_meter_whole_ns", &|| meter.0.try_acquire()),
        ("allowed/leaky_meter_3_per_s", &|| third.0.try_acquire()),
        ("allowed/leaky_queue", &|| queue.0.try_acquire()),
        ("allowed/sliding_window_counter", &|| {
            sliding.0.try_acquire()
        }),
        ("allowed/bursty_check", &|| check(&bursty.0)),
        ("allowed/fixed_window_check", &|| check(&fixed.0)),
        ("allowed/leaky_meter_whole_ns_check", &|| check(&meter.0)),
        ("allowed/leaky_meter_3_per_s_check", &|| check(&third.0)),
        ("allowed/leaky_queue_check", &|| check(&queue.0)),
        ("allowed/sliding_window_counter_check", &|| {
            check(&sliding.0)
        }),
        ("denied/governor", &|| denied_governor.check().is_ok()),
        ("denied/bursty", &|| bursty.1.try_acquire()),
        ("denied/fixed_window", &|| fixed.1.try_acquire()),
        ("denied/leaky_meter_whole_ns", &|| meter.1.try_acquire()),
        ("denied/leaky_meter_3_per_s", &|| third.1.try_acquire()),
        ("denied/leaky_queue", &|| queue.1.try_acquire()),
        ("denied/sliding_window_counter", &|| sliding.1.try_acquire()),
        ("denied/bursty_check", &|| check(&bursty.1)),
        ("denied/fixed_window_check", &|| check(&fixed.1)),
        ("denied/leaky_meter_whole_ns_check", &|| check(&meter.1)),
        ("denied/leaky_meter_3_per_s_check", &|| check(&third.1)),
        ("denied/leaky_queue_check", &|| check(&queue.1)),
        ("denied/sliding_window_counter_check", &|| check(&sliding.1)),
    ];
    print_against_governor(&cases, 38);
}

/// The state each algorithm keeps per limit, for BENCHMARKS.md.
fn state_sizes(_: &mut Criterion) {
    use sluicegate::algorithms::{fixed_window, leaky_bucket, sliding_window_counter};
    println!(
        "state sizes (bytes): fixed_window {}, leaky_bucket {}, sliding_window_counter {}",
        std::mem::size_of::<fixed_window::FixedWindowState>(),
        std::mem::size_of::<leaky_bucket::LeakyState>(),
        std::mem::size_of::<sliding_window_counter::SlidingWindowState>(),
    );
}

criterion_group!(benches, state_sizes, interleaved_ratios, allowed, denied);
criterion_main!(benches);
