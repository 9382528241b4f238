//! The one test on real time: two threads share one limiter on the default clock
//! for about a second, one blocking and one async. Only generous bounds are
//! asserted; the upper one is the limiter's guarantee, not a timing guess.

use sluicegate::RateLimiter;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

#[test]
fn two_threads_on_the_real_clock_share_the_rate() {
    let rate = 50.0;
    let run_for = Duration::from_millis(1_000);
    // The grants both threads need before they stop, past the run's end if a
    // loaded machine runs them late: a fifth of a second at the rate.
    let least = 10;
    let start = Instant::now();
    let limiter = RateLimiter::bursty(rate).unwrap();
    let handle = limiter.to_async();
    let deadline = start + run_for;
    let total = AtomicU32::new(0);
    let going =
        |mine: u32| mine == 0 || Instant::now() < deadline || total.load(Ordering::Relaxed) < least;
    let (blocking, asynchronous) = thread::scope(|scope| {
        let blocking = scope.spawn(|| {
            let mut granted = 0u32;
            while going(granted) {
                limiter.acquire().unwrap();
                granted += 1;
                total.fetch_add(1, Ordering::Relaxed);
            }
            granted
        });
        let asynchronous = scope.spawn(|| {
            futures::executor::block_on(async {
                let mut granted = 0u32;
                while going(granted) {
                    handle.acquire().await.unwrap();
                    granted += 1;
                    total.fetch_add(1, Ordering::Relaxed);
                }
                granted
            })
        });
        (blocking.join().unwrap(), asynchronous.join().unwrap())
    });
    let took = start.elapsed();
    let elapsed = took.as_secs_f64();
    let total = f64::from(blocking + asynchronous);
    // A new bursty limiter stores nothing, so at most rate × elapsed plus the
    // pay-later request (and one in flight per thread as the deadline passes).
    assert!(
        total <= rate * elapsed + 3.0,
        "{total} grants in {elapsed} s"
    );
    // Both made progress, and together got their share of the rate within
    // generous bounds even on a loaded machine.
    assert!(
        blocking >= 1 && asynchronous >= 1,
        "{blocking} + {asynchronous}"
    );
    assert!(total >= f64::from(least), "{total} grants in {elapsed} s");
    assert!(
        took < run_for + Duration::from_secs(5),
        "{total} grants took {took:?}"
    );
}
