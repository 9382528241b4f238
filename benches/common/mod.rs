//! What the benches share: an interleaved timing harness that stands up to noise.
//! (Each bench uses the part it needs.)
#![allow(dead_code)]

use criterion::black_box;

/// Calls per timed batch.
pub const BATCH: u32 = 20_000;

/// Runs every case round-robin, `rounds` times, in batches of [`BATCH`] calls, and
/// returns each case's fastest batch in nanoseconds per call.
///
/// Criterion runs each case on its own, seconds apart, so a burst of other load
/// lands on some cases and not others. Here every case is timed in every round, and
/// preemption only ever slows a batch down, so the fastest batch is the figure least
/// disturbed by other load, and ratios between cases compare like with like.
pub fn fastest_batches(cases: &[(&str, &dyn Fn() -> bool)], rounds: usize) -> Vec<f64> {
    let mut calls: Vec<Box<dyn FnMut(()) -> bool + '_>> = cases
        .iter()
        .map(|&(_, case)| Box::new(move |()| case()) as Box<dyn FnMut(()) -> bool>)
        .collect();
    fastest_batches_on(&mut calls, rounds, || ())
}

/// [`fastest_batches`] for calls that consume an input (a request): each batch's
/// inputs are made by `input` before its timer starts.
pub fn fastest_batches_on<T>(
    cases: &mut [Box<dyn FnMut(T) -> bool + '_>],
    rounds: usize,
    input: impl Fn() -> T,
) -> Vec<f64> {
    let mut best = vec![f64::MAX; cases.len()];
    for _ in 0..rounds {
        for (slot, case) in best.iter_mut().zip(cases.iter_mut()) {
            let inputs: Vec<T> = (0..BATCH).map(|_| input()).collect();
            let start = std::time::Instant::now();
            for item in inputs {
                black_box(case(item));
            }
            *slot = slot.min(start.elapsed().as_nanos() as f64 / f64::from(BATCH));
        }
    }
    best
}

/// Runs `cases` as [`fastest_batches`] does (200 rounds) and prints each case's
/// fastest batch beside its ratio to governor's: the cases are allowed ones then
/// refused ones, each half led by governor's case, so the ratio is to case 0 in
/// the first half and to the half's first case in the second.
pub fn print_against_governor(cases: &[(&str, &dyn Fn() -> bool)], name_width: usize) {
    let best = fastest_batches(cases, 200);
    let half = cases.len() / 2;
    println!("interleaved, fastest batch of {BATCH} calls:");
    for (index, (name, _)) in cases.iter().enumerate() {
        let governor = if index < half { best[0] } else { best[half] };
        println!(
            "  {name:name_width$} {:6.2} ns  {:4.2}x governor",
            best[index],
            best[index] / governor
        );
    }
}
