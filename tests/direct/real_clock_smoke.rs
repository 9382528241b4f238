//! The one test on real time: two threads share one limiter on the default clock
//! for about a second, one blocking and one async. Only generous bounds are
//! asserted; the upper one is the limiter's guarantee, not a timing guess.

use sluicegate::RateLimiter;
use std::thread;
use std::time::{Duration, Instant};

#[test]
fn two_threads_on_the_real_clock_share_the_rate() {
    let rate = 50.0;
    let run_for = Duration::from_millis(1_000);
    let start = Instant::now();
    let limiter = RateLimiter::bursty(rate).unwrap();
    let handle = limiter.to_async();
    let deadline = start + run_for;
    let (blocking, asynchronous) = thread::scope(|scope| {
        let blocking = scope.spawn(|| {
            let mut granted = 0u32;
            while Instant::now() < deadline {
                limiter.acquire().unwrap();
                granted += 1;
            }
            granted
        });
        let asynchronous = scope.spawn(|| {
            futures::executor::block_on(async {
                let mut granted = 0u32;
                while Instant::now() < deadline {
                    handle.acquire().await.unwrap();
                    granted += 1;
                }
                granted
            })
        });
        (blocking.join().unwrap(), asynchronous.join().unwrap())
    });
    let elapsed = start.elapsed().as_secs_f64();
    let total = f64::from(blocking + asynchronous);
    // A new bursty limiter stores nothing, so at most rate × elapsed plus the
    // pay-later request (and one in flight per thread as the deadline passes).
    assert!(
        total <= rate * elapsed + 3.0,
        "{total} grants in {elapsed} s"
    );
    // Both made progress, and together got a fair share of the rate even on a
    // loaded machine.
    assert!(
        blocking >= 1 && asynchronous >= 1,
        "{blocking} + {asynchronous}"
    );
    assert!(total >= rate * 0.2, "{total} grants in {elapsed} s");
}
