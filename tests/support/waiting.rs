//! Waiters for the waiting tests: serving waiters one turn at a time on a
//! [`GateClock`], and threads and tasks looping on a limit for a bounded run.
#![allow(dead_code)]

use super::gate_clock::{GateClock, PATIENCE};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// Moves the clock far ahead if the test fails while waiters still sleep on it, so
/// that the scope joining them ends and the failure is reported, not a hang.
pub struct ReleaseOnPanic<'a>(&'a GateClock);

impl Drop for ReleaseOnPanic<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            self.0.advance(Duration::from_secs(1 << 30));
        }
    }
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Waiter `i` of eight, each asking after the one before, served `i` steps of
/// 100 ms later.
pub fn in_order() -> Vec<(usize, Duration)> {
    (0..8).map(|i| (i, ms(100) * i as u32)).collect()
}

/// Starts `n` waiters on threads of their own, one after another, each once the
/// ones before it are asleep (waiter 0 must act at once), calling `between(i)` once
/// waiter `i` has its turn; then moves time one `step` at a time, taking the one
/// waiter each step releases. Answers each waiter's index and the wait it returned,
/// in the order they returned.
pub fn serve_in_turn(
    clock: &GateClock,
    n: usize,
    step: Duration,
    waiter: &(dyn Fn(usize) -> Duration + Sync),
    between: &dyn Fn(usize),
) -> Vec<(usize, Duration)> {
    let (tx, rx) = mpsc::channel();
    thread::scope(|s| {
        let _release = ReleaseOnPanic(clock);
        let mut served = Vec::new();
        for i in 0..n {
            let tx = tx.clone();
            s.spawn(move || tx.send((i, waiter(i))).unwrap());
            if i == 0 {
                served.push(rx.recv_timeout(PATIENCE).expect("waiter 0 acts at once"));
            } else {
                clock.wait_parked(i);
            }
            between(i);
        }
        for turn in 1..n {
            clock.advance(step);
            served.push(rx.recv_timeout(PATIENCE).expect("a waiter whose turn came"));
            clock.wait_parked(n - 1 - turn);
        }
        served
    })
}

/// Runs `tries` calls of `attempt` on each of eight threads at once and counts
/// the ones that answered true.
pub fn eight_threads(tries: usize, attempt: &(dyn Fn() -> bool + Sync)) -> usize {
    let granted = AtomicUsize::new(0);
    let start = std::sync::Barrier::new(8);
    thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                start.wait();
                for _ in 0..tries {
                    if attempt() {
                        granted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    granted.into_inner()
}

/// How many acquires a bounded run has returned, in all, before its loops stop:
/// they go on past the run's end until then, so that a loaded machine that starts
/// the waiters late still shows they make progress.
pub const PROGRESS: usize = 3;

/// Eight threads loop on `acquire` until `run` after `started` has passed and
/// [`PROGRESS`] acquires have returned in all. Answers the acquires that returned
/// by the run's end, and how long after `started` the loops stopped.
pub fn eight_threads_until_the_end(
    started: Instant,
    run: Duration,
    acquire: &(dyn Fn() + Sync),
) -> (usize, Duration) {
    let admitted = AtomicUsize::new(0);
    let returned = AtomicUsize::new(0);
    let start = Barrier::new(8);
    thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                start.wait();
                while started.elapsed() < run || returned.load(Ordering::Relaxed) < PROGRESS {
                    acquire();
                    returned.fetch_add(1, Ordering::Relaxed);
                    if started.elapsed() <= run {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    (admitted.into_inner(), started.elapsed())
}

/// Sixteen tasks on a four-thread runtime: even ones await `wait()`, odd ones run
/// `block()` on the runtime's blocking pool; each loops until `run` after
/// `started` has passed and [`PROGRESS`] calls have returned in all. Answers the
/// calls that returned by the run's end, and how long after `started` the loops
/// stopped.
pub fn sixteen_tasks_until_the_end<W, F, B>(
    started: Instant,
    run: Duration,
    wait: W,
    block: B,
) -> (usize, Duration)
where
    W: Fn() -> F + Send + Sync + 'static,
    F: std::future::Future<Output = ()> + Send + 'static,
    B: Fn() + Send + Sync + 'static,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let admitted = Arc::new(AtomicUsize::new(0));
    let returned = Arc::new(AtomicUsize::new(0));
    let (wait, block) = (Arc::new(wait), Arc::new(block));
    let going = {
        let returned = returned.clone();
        move || started.elapsed() < run || returned.load(Ordering::Relaxed) < PROGRESS
    };
    runtime.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..16 {
            let (admitted, returned, going) = (admitted.clone(), returned.clone(), going.clone());
            if i % 2 == 0 {
                let wait = wait.clone();
                tasks.push(tokio::spawn(async move {
                    while going() {
                        wait().await;
                        returned.fetch_add(1, Ordering::Relaxed);
                        if started.elapsed() <= run {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }));
            } else {
                let block = block.clone();
                tasks.push(tokio::task::spawn_blocking(move || {
                    while going() {
                        block();
                        returned.fetch_add(1, Ordering::Relaxed);
                        if started.elapsed() <= run {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }));
            }
        }
        for task in tasks {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("a task that ends")
                .unwrap();
        }
    });
    (admitted.load(Ordering::Relaxed), started.elapsed())
}

/// How many tries each thread of [`hammer`] makes at least, however late it
/// starts: eight threads then try at least 64 times in all.
pub const LEAST_TRIES: usize = 8;

/// Eight threads try at once for `span`, each at least [`LEAST_TRIES`] times (a
/// thread a loaded machine starts late still tries); answers how many tries were
/// granted and how long the hammering took.
pub fn hammer(span: Duration, attempt: &(dyn Fn() -> bool + Sync)) -> (usize, Duration) {
    let granted = AtomicUsize::new(0);
    let start = Barrier::new(8);
    let began = Instant::now();
    thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                start.wait();
                let mut tries = 0;
                while tries < LEAST_TRIES || began.elapsed() < span {
                    if attempt() {
                        granted.fetch_add(1, Ordering::Relaxed);
                    }
                    tries += 1;
                }
            });
        }
    });
    (granted.into_inner(), began.elapsed())
}

/// Runs `f` on a thread of its own and answers what it returns, failing if it
/// has not returned within [`PATIENCE`]: a call that should answer at once but
/// sleeps on `clock`, which only the test moves, is then released (the clock is
/// moved far ahead) and reported instead of hanging the test.
#[track_caller]
pub fn answered_at_once<T: Send>(clock: &GateClock, what: &str, f: impl FnOnce() -> T + Send) -> T {
    let (tx, rx) = mpsc::channel();
    thread::scope(|s| {
        s.spawn(move || tx.send(f()).unwrap());
        match rx.recv_timeout(PATIENCE) {
            Ok(answer) => answer,
            Err(_) => {
                clock.advance(Duration::from_secs(1 << 30));
                panic!("{what} did not answer at once: it waits on the clock");
            }
        }
    })
}
