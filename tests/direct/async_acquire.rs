//! `limiter.to_async().acquire().await`: under tokio and under
//! `futures::executor::block_on`, on virtual time, and cancelled when dropped
//! before its wait ends.

use crate::support::virtual_time;

use futures::task::noop_waker_ref;
use sluicegate::clock::{Clock, DefaultClock, ManualClock};
use sluicegate::{AsyncRateLimiter, Error, RateLimiter};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::Duration;
use virtual_time::{assert_slept, bursty, StuckClock};

fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(noop_waker_ref()))
}

#[tokio::test]
async fn acquire_under_tokio_on_virtual_time() {
    let (limiter, clock) = bursty(5.0);
    let handle = limiter.to_async();
    for _ in 0..3 {
        handle.acquire().await.unwrap();
    }
    assert_slept(&clock, &[0.00, 0.20, 0.20]);
    assert_eq!(
        handle.acquire_n(4).await.unwrap(),
        Duration::from_millis(200)
    );
    assert_eq!(handle.acquire().await.unwrap(), Duration::from_millis(800));
}

// `tokio::spawn` needs `Send + 'static` futures whatever the flavor. A current-thread
// runtime runs the tasks one after another (a virtual sleep is ready at once), so
// the virtual clock moves exactly as the grants say; two worker threads could
// both sleep their waits on the one shared clock and move it twice as far.
#[tokio::test(flavor = "current_thread")]
async fn acquire_futures_can_be_spawned() {
    let (limiter, clock) = bursty(5.0);
    let handle = limiter.to_async();
    let tasks: Vec<_> = (0..10).map(|_| tokio::spawn(handle.acquire())).collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(clock.sleeps().len(), 10);
    // Ten grants at 5/s: the eleventh must wait.
    assert!(!handle.try_acquire());
}

#[test]
fn acquire_under_block_on_on_virtual_time() {
    let (limiter, clock) = bursty(5.0);
    let handle = AsyncRateLimiter::from(limiter.clone());
    futures::executor::block_on(async {
        for _ in 0..3 {
            handle.acquire().await.unwrap();
        }
    });
    assert_slept(&clock, &[0.00, 0.20, 0.20]);
    assert_eq!(clock.now(), 400_000_000);
}

#[test]
fn warming_up_async_follows_guavas_schedule() {
    let clock = ManualClock::new();
    let limiter =
        RateLimiter::warming_up_with_clock(2.0, Duration::from_secs(4), clock.clone()).unwrap();
    let handle = limiter.to_async();
    futures::executor::block_on(async {
        for _ in 0..6 {
            handle.acquire().await.unwrap();
        }
    });
    assert_slept(&clock, &[0.00, 1.38, 1.13, 0.88, 0.63, 0.50]);
}

#[test]
fn async_and_blocking_share_one_state() {
    let (limiter, clock) = bursty(1.0);
    let handle = limiter.to_async();
    futures::executor::block_on(handle.acquire()).unwrap();
    assert!(!limiter.try_acquire());
    assert!(!handle.blocking().try_acquire());
    assert_eq!(limiter.acquire().unwrap(), Duration::from_secs(1));
    assert_eq!(clock.now(), 1_000_000_000);
}

#[test]
fn async_timed_try_uses_guavas_rule_and_changes_nothing_when_refused() {
    let (limiter, clock) = bursty(5.0);
    let handle = limiter.to_async();
    futures::executor::block_on(async {
        assert!(handle
            .try_acquire_n_timeout(50, Duration::ZERO)
            .await
            .unwrap());
        assert!(!handle
            .try_acquire_n_timeout(1, Duration::from_millis(9_999))
            .await
            .unwrap());
        assert!(handle
            .try_acquire_n_timeout(1, Duration::from_secs(10))
            .await
            .unwrap());
        assert!(handle
            .try_acquire_n_timeout(1, Duration::MAX)
            .await
            .unwrap());
    });
    assert_slept(&clock, &[0.00, 10.00, 0.20]);
}

#[test]
fn async_acquire_on_an_exhausted_limiter_fails_at_once() {
    let (limiter, clock) = bursty(5e-324);
    let handle = limiter.to_async();
    futures::executor::block_on(async {
        handle.acquire().await.unwrap();
        assert_eq!(handle.acquire().await, Err(Error::Never { cost: 1 }));
        assert!(!handle
            .try_acquire_n_timeout(1, Duration::MAX)
            .await
            .unwrap());
    });
    assert_eq!(clock.now(), 0);
}

#[test]
fn dropping_an_acquire_mid_wait_gives_its_permits_back() {
    let clock = StuckClock::default();
    let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    let handle = limiter.to_async();
    limiter.acquire().unwrap();
    {
        let mut waiting = pin!(handle.acquire_n(5));
        assert!(poll_once(waiting.as_mut()).is_pending()); // reserved, waiting 1 s
                                                           // Its 5 permits are taken: a newcomer would wait 1 s + 5 s.
        assert_eq!(
            limiter.peek(1).unwrap().retry_after(),
            Duration::from_secs(6)
        );
        clock.0.advance(Duration::from_millis(500)); // still before its time to act
    }
    // Dropped: the 5 permits are back, the next caller waits only for the first.
    assert_eq!(
        limiter.reserve(1).unwrap().delay(),
        Duration::from_millis(500)
    );
}

#[test]
fn dropping_an_acquire_before_its_first_poll_reserves_nothing() {
    let (limiter, clock) = bursty(1.0);
    let handle = limiter.to_async();
    drop(handle.acquire_n(100));
    assert!(limiter.try_acquire());
    assert!(clock.sleeps().is_empty());
}

#[test]
fn dropping_a_finished_acquire_keeps_its_permits() {
    let (limiter, _clock) = bursty(1.0);
    let handle = limiter.to_async();
    let mut done = pin!(handle.acquire_n(3));
    assert_eq!(poll_once(done.as_mut()), Poll::Ready(Ok(Duration::ZERO)));
    assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::from_secs(3));
}

#[tokio::test]
async fn an_acquire_losing_a_select_under_tokio_is_cancelled() {
    let clock = StuckClock::default();
    let limiter = RateLimiter::bursty_with_clock(2.0, clock.clone()).unwrap();
    let handle = limiter.to_async();
    limiter.acquire().unwrap(); // next free at 0.5 s
    tokio::select! {
        biased;
        _ = handle.acquire_n(10) => panic!("the stuck sleep cannot finish"),
        _ = async {} => {}
    }
    assert_eq!(
        limiter.reserve(1).unwrap().delay(),
        Duration::from_millis(500)
    );
}

#[test]
fn dropping_an_acquire_on_the_real_clock_cancels_it() {
    // The real clock's sleep is polled once and abandoned, so no real time passes
    // waiting. At 1 permit per 1000 s, jitter between these lines cannot matter.
    let limiter = RateLimiter::bursty_with_clock(0.001, DefaultClock::new()).unwrap();
    let handle = limiter.to_async();
    limiter.acquire().unwrap(); // free (pay later); the next waits 1000 s
    {
        let mut waiting = pin!(handle.acquire());
        assert!(poll_once(waiting.as_mut()).is_pending());
    }
    let delay = limiter.reserve(1).unwrap().delay();
    assert!(delay <= Duration::from_secs(1000), "{delay:?}");
    assert!(delay > Duration::from_secs(900), "{delay:?}");
}
