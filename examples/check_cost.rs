//! Instructions per call of the direct limiter's `check(1)` and `try_acquire()`,
//! next to governor's `check()`, counted by valgrind's callgrind: a figure that,
//! unlike wall time, does not move with the load of a shared machine.
//!
//! Run with `cargo run --release --example check_cost` (valgrind must be on the
//! `PATH`); an argument filters the cases by name. Each case runs twice under
//! callgrind, with two iteration counts, counting only the measured loop; the
//! difference divided by the extra iterations is its cost per call. The `harness`
//! case is the loop alone (one indirect call), included in every other figure.
//! Under valgrind both crates' clocks (quanta) read the operating system's clock
//! instead of the TSC, so the `*_clock` cases are not what a clock read costs
//! natively. And a division counts as one instruction here, though it takes tens of
//! cycles: fewer instructions is not always faster.
//!
//! The limits match `benches/direct.rs` and `benches/windows.rs`: "allowed" is a
//! limit so generous every call is granted, "denied" one that is exhausted.

use governor::{Quota, RateLimiter as Governor};
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket, Limits, SlidingWindowCounter};
use sluicegate::CellAlgorithm;
use sluicegate::RateLimiter;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::process::Command;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);
const FEW: u64 = 20_000;
const MANY: u64 = 220_000;

/// One measured call, answering whether it was granted.
type Call = Box<dyn Fn() -> bool>;

/// `check(1)` and `try_acquire()` on `limiter`, exhausted first when `allowed` is
/// false.
fn ours<A: CellAlgorithm>(algorithm: A, allowed: bool, check: bool) -> Call {
    let limiter = RateLimiter::new(algorithm);
    if !allowed {
        while limiter.try_acquire() {}
    }
    assert_eq!(limiter.try_acquire(), allowed);
    if check {
        Box::new(move || black_box(&limiter.check(1)).is_ok())
    } else {
        Box::new(move || limiter.try_acquire())
    }
}

fn governor(allowed: bool) -> Call {
    let governor = if allowed {
        Governor::direct(Quota::per_second(NonZeroU32::MAX))
    } else {
        let governor = Governor::direct(Quota::per_hour(NonZeroU32::MIN));
        while governor.check().is_ok() {}
        governor
    };
    Box::new(move || governor.check().is_ok())
}

/// Every case by name: `ALGORITHM/allowed|denied/check|try`.
fn case(name: &str) -> Option<Call> {
    let parts: Vec<&str> = name.split('/').collect();
    let [algorithm, outcome, call] = parts[..] else {
        return None;
    };
    let allowed = outcome == "allowed";
    let check = call == "check";
    let lots = u64::from(u32::MAX);
    Some(match (algorithm, allowed) {
        ("harness", _) => Box::new(|| black_box(true)),
        ("sluicegate_clock", _) => {
            use sluicegate::clock::Clock as _;
            let clock = sluicegate::clock::DefaultClock::new();
            Box::new(move || black_box(clock.now()) > 0)
        }
        ("governor_clock", _) => {
            use governor::clock::Clock as _;
            let clock = governor::clock::DefaultClock::default();
            Box::new(move || {
                black_box(clock.now());
                true
            })
        }
        ("governor", _) => governor(allowed),
        ("bursty", true) => {
            let call = ours(
                sluicegate::algorithms::SmoothBursty::new(1e9).ok()?,
                true,
                check,
            );
            // The bucket starts empty and fills over its 1-second burst. The benches
            // measure it full (after seconds of calls), where one permit's
            // `remaining` is kept and not divided out, so wait until it is full.
            std::thread::sleep(Duration::from_millis(1100));
            call
        }
        ("bursty", false) => ours(
            sluicegate::algorithms::SmoothBursty::new(1.0 / 3600.0).ok()?,
            false,
            check,
        ),
        ("leaky_whole_ns", true) => ours(
            LeakyBucket::meter(lots, 1, Duration::from_nanos(1)).ok()?,
            true,
            check,
        ),
        ("leaky_whole_ns", false) => ours(LeakyBucket::meter(1, 1, HOUR).ok()?, false, check),
        ("leaky_3_per_s", true) => ours(
            LeakyBucket::meter(lots, 3, Duration::from_secs(1)).ok()?,
            true,
            check,
        ),
        ("leaky_3_per_s", false) => ours(
            LeakyBucket::meter(1, 3, Duration::from_secs(1)).ok()?,
            false,
            check,
        ),
        ("leaky_queue", true) => ours(
            LeakyBucket::queue(lots, 1, Duration::from_nanos(1)).ok()?,
            true,
            check,
        ),
        ("leaky_queue", false) => ours(LeakyBucket::queue(1, 1, HOUR).ok()?, false, check),
        ("fixed_window", true) => ours(FixedWindow::new(1 << 40, HOUR).ok()?, true, check),
        ("fixed_window", false) => ours(FixedWindow::new(1, HOUR).ok()?, false, check),
        ("sliding_window_counter", true) => ours(
            SlidingWindowCounter::new((1 << 24) - 1, Duration::from_millis(10)).ok()?,
            true,
            check,
        ),
        ("sliding_window_counter", false) => {
            ours(SlidingWindowCounter::new(1, HOUR).ok()?, false, check)
        }
        // Sets of three windows, the last one the tightest when denied.
        ("all_of_3", _) => ours(AllOf::new(windows(allowed)?), allowed, check),
        ("limits_3", _) => {
            let (a, b, c) = windows(allowed)?;
            ours(Limits::new().with(a).with(b).with(c), allowed, check)
        }
        _ => return None,
    })
}

/// Three fixed windows for the set cases: generous enough that every call is
/// granted, or with the third exhausted by the time the count starts.
fn windows(allowed: bool) -> Option<(FixedWindow, FixedWindow, FixedWindow)> {
    let last = if allowed { 1 << 40 } else { 1 };
    Some((
        FixedWindow::new(1 << 40, HOUR).ok()?,
        FixedWindow::new(1 << 40, HOUR).ok()?,
        FixedWindow::new(last, HOUR).ok()?,
    ))
}

fn names() -> Vec<String> {
    let mut names = vec![
        "harness/allowed/try".to_owned(),
        "sluicegate_clock/allowed/try".to_owned(),
        "governor_clock/allowed/try".to_owned(),
    ];
    for outcome in ["allowed", "denied"] {
        names.push(format!("governor/{outcome}/check"));
        for algorithm in [
            "bursty",
            "leaky_whole_ns",
            "leaky_3_per_s",
            "leaky_queue",
            "fixed_window",
            "sliding_window_counter",
            "all_of_3",
            "limits_3",
        ] {
            for call in ["check", "try"] {
                names.push(format!("{algorithm}/{outcome}/{call}"));
            }
        }
    }
    names
}

/// The loop callgrind counts (and nothing else: the setup, such as the clocks'
/// calibration, varies from run to run).
#[inline(never)]
fn measured(call: &Call, iterations: u64) {
    for _ in 0..iterations {
        black_box(call());
    }
}

/// Instructions callgrind counted inside [`measured`] for `iterations` calls of
/// `name`.
fn counted(name: &str, iterations: u64) -> Result<u64, String> {
    let this = std::env::current_exe().map_err(|e| e.to_string())?;
    let output = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            "--toggle-collect=check_cost::measured",
        ])
        .arg(this)
        .args([name, &iterations.to_string()])
        .output()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    stderr
        .lines()
        .find_map(|line| line.split("Collected :").nth(1))
        .and_then(|count| count.trim().parse().ok())
        .ok_or_else(|| format!("no count from callgrind for {name}:\n{stderr}"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [name, iterations] = &args[..] {
        // The measured child: run one case.
        let call = case(name).unwrap_or_else(|| panic!("unknown case {name}"));
        let iterations: u64 = iterations.parse().expect("an iteration count");
        measured(&call, iterations);
        return;
    }
    let filter = args.first().map(String::as_str).unwrap_or("");
    println!("instructions per call (callgrind, {} calls):", MANY - FEW);
    for name in names().iter().filter(|name| name.contains(filter)) {
        match (counted(name, FEW), counted(name, MANY)) {
            (Ok(few), Ok(many)) => {
                let per_call = (many as f64 - few as f64) / (MANY - FEW) as f64;
                println!("  {name:40} {per_call:7.1}");
            }
            (Err(error), _) | (_, Err(error)) => {
                eprintln!("{error}");
                std::process::exit(1);
            }
        }
    }
}
