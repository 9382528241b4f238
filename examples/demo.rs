//! How a bursty and a warming-up limiter pace the same workload.
//!
//! Both run at 2 permits per second on virtual time (a `ManualClock`), so the demo
//! finishes instantly while printing the waits a real program would see. The
//! warming-up limiter has a 4-second warm-up and Guava's default cold factor 3.
//!
//! Run with `cargo run --example demo`.

use sluicegate::algorithms::{SmoothBursty, SmoothWarmingUp};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::CellAlgorithm;
use sluicegate::RateLimiter;
use std::time::Duration;

/// One action of the workload.
enum Action {
    /// Acquire this many permits.
    Acquire(u64),
    /// Do nothing for this long.
    Idle(Duration),
}

/// What one limiter did at each acquire: (start time, permits, wait).
fn run<A: CellAlgorithm>(
    limiter: &RateLimiter<A, ManualClock>,
    workload: &[Action],
) -> Vec<(f64, u64, f64)> {
    let clock = limiter.clock();
    let mut rows = Vec::new();
    for action in workload {
        match action {
            Action::Idle(d) => clock.advance(*d),
            Action::Acquire(n) => {
                let start = clock.now() as f64 / 1e9;
                let waited = limiter.acquire_n(*n).expect("finite rate, positive cost");
                rows.push((start, *n, waited.as_secs_f64()));
            }
        }
    }
    rows
}

fn main() {
    let rate = 2.0;
    let mut workload: Vec<Action> = (0..6).map(|_| Action::Acquire(1)).collect();
    workload.push(Action::Idle(Duration::from_secs(5)));
    workload.extend((0..6).map(|_| Action::Acquire(1)));
    workload.push(Action::Acquire(4));
    workload.push(Action::Acquire(1));

    let bursty = RateLimiter::with_clock(
        SmoothBursty::new(rate).expect("valid rate"),
        ManualClock::new(),
    );
    let warming = RateLimiter::with_clock(
        SmoothWarmingUp::new(rate, Duration::from_secs(4)).expect("valid parameters"),
        ManualClock::new(),
    );
    let bursty_rows = run(&bursty, &workload);
    let warming_rows = run(&warming, &workload);

    println!("Two limiters at {rate} permits/s, same workload, virtual time.");
    println!("A wait pays for the previous request (Guava's pay-later rule).\n");
    println!(
        "{:>3} | {:>7} | {:>18} | {:>18}",
        "#", "permits", "SmoothBursty", "SmoothWarmingUp 4s"
    );
    println!(
        "{:>3} | {:>7} | {:>8} {:>9} | {:>8} {:>9}",
        "", "", "at (s)", "wait (s)", "at (s)", "wait (s)"
    );
    println!("{}", "-".repeat(58));
    for (i, (b, w)) in bursty_rows.iter().zip(&warming_rows).enumerate() {
        println!(
            "{:>3} | {:>7} | {:>8.2} {:>9.3} | {:>8.2} {:>9.3}",
            i + 1,
            b.1,
            b.0,
            b.2,
            w.0,
            w.2
        );
        if i == 5 {
            println!(
                "{:>3} | {:>7} | {:^18} | {:^18}",
                "", "", "idle 5 s", "idle 5 s"
            );
        }
    }
    println!();
    println!("SmoothBursty saves up to 1 s of permits while idle and spends them for free;");
    println!("SmoothWarmingUp starts cold: stored permits are expensive, and it warms up to");
    println!("the stable 0.5 s interval over its warm-up period.");
}
