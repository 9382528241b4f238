//! Threads and tasks sharing a keyed limiter on the real clock, within the bounds
//! its docs state: `check_all` on a shared key, `reserve_all` on key lists, and
//! list waits timed out together giving their turns back, in memory (the same on
//! Redis in `async_on_redis_from_docs`).

use super::async_common::{cadence, ms, secs};

use sluicegate::algorithms::{SlidingLog, SmoothBursty};
use sluicegate::stores::Store;
use sluicegate::{DefaultClock, KeyedRateLimiter};

/// A tokio runtime with `workers` threads.
fn threaded(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

pub(crate) type Owned<A, S> = KeyedRateLimiter<String, A, S, DefaultClock>;

/// 8 threads, each `check_all` on a shared key and its own, 30 times, on a
/// sliding log of 40 an hour: exactly 40 calls pass (a shared limit, atomic and
/// all-or-nothing), and each thread's own key counted exactly its passes.
pub(crate) fn eight_threads_check_all<S>(limiter: Owned<SlidingLog, S>)
where
    S: Store<String, SlidingLog> + 'static,
{
    let shared = "shared".to_string();
    let passes: Vec<u64> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..8)
            .map(|i| {
                let limiter = limiter.clone();
                let keys = [shared.clone(), format!("own-{i}")];
                scope.spawn(move || {
                    (0..30)
                        .filter(|_| limiter.check_all(&keys, 1).unwrap().is_allowed())
                        .count() as u64
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(passes.iter().sum::<u64>(), 40, "{passes:?}");
    for (i, passed) in passes.iter().enumerate() {
        let own = limiter.peek(&format!("own-{i}"), 1).unwrap();
        assert_eq!(
            own.remaining() + 1,
            40 - passed,
            "own-{i}: refused calls count nowhere"
        );
    }
    assert!(!limiter.peek(&shared, 1).unwrap().is_allowed());
}

/// 16 tasks, each `reserve_all` on a shared key and its own, 10 times, on a
/// sliding log of 50 an hour: exactly 50 reservations are ok.
pub(crate) fn sixteen_tasks_reserve_all<S>(limiter: Owned<SlidingLog, S>)
where
    S: Store<String, SlidingLog> + 'static,
{
    let rt = threaded(4);
    let handle = limiter.to_async();
    let passes: Vec<u64> = rt.block_on(async {
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let handle = handle.clone();
                tokio::spawn(async move {
                    let keys = ["shared".to_string(), format!("task-{i}")];
                    let mut ok = 0;
                    for _ in 0..10 {
                        if handle.reserve_all(&keys, 1).await.unwrap().is_ok() {
                            ok += 1;
                        }
                    }
                    ok
                })
            })
            .collect();
        let mut passes = Vec::new();
        for task in tasks {
            passes.push(task.await.unwrap());
        }
        passes
    });
    assert_eq!(passes.iter().sum::<u64>(), 50, "{passes:?}");
    for (i, passed) in passes.iter().enumerate() {
        let own = limiter.peek(&format!("task-{i}"), 1).unwrap();
        assert_eq!(own.remaining() + 1, 50 - passed, "task-{i}");
    }
}

/// 16 tasks each `acquire_all` on two keys under `tokio::time::timeout` of
/// 100 ms, turns 5 s apart: all time out, together, and give their turns back;
/// the next call waits at most for the first turn (not 85 s).
pub(crate) fn sixteen_timed_out_list_waits_give_their_turns_back<S>(limiter: Owned<SmoothBursty, S>)
where
    S: Store<String, SmoothBursty> + 'static,
{
    let keys = ["ip".to_string(), "user".to_string()];
    let rt = threaded(4);
    let handle = limiter.to_async();
    limiter.acquire_all(&keys, 1).unwrap(); // the next turn: 5 s on
    let timed_out = rt.block_on(async {
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (handle, keys) = (handle.clone(), keys.clone());
                tokio::spawn(async move {
                    tokio::time::timeout(ms(100), handle.acquire_all(&keys, 1))
                        .await
                        .is_err()
                })
            })
            .collect();
        let mut timed_out = 0;
        for task in tasks {
            timed_out += u32::from(task.await.unwrap());
        }
        timed_out
    });
    assert_eq!(timed_out, 16);
    let next = limiter.reserve_all(&keys, 1).unwrap();
    assert!(next.is_ok());
    assert!(
        next.delay() <= secs(5),
        "16 turns were kept: {:?}",
        next.delay()
    );
}

#[test]
fn eight_threads_on_a_shared_key_get_exactly_its_limit_in_memory() {
    let log = SlidingLog::new(40, secs(3600)).unwrap();
    eight_threads_check_all(KeyedRateLimiter::with_clock(log, DefaultClock::new()));
}

#[test]
fn sixteen_tasks_reserving_on_key_lists_get_exactly_the_limit_in_memory() {
    let log = SlidingLog::new(50, secs(3600)).unwrap();
    sixteen_tasks_reserve_all(KeyedRateLimiter::with_clock(log, DefaultClock::new()));
}

#[test]
fn sixteen_list_waits_timed_out_together_give_their_turns_back_in_memory() {
    sixteen_timed_out_list_waits_give_their_turns_back(KeyedRateLimiter::with_clock(
        cadence(),
        DefaultClock::new(),
    ));
}
