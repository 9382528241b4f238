//! Random traces of reservations, checks and cancels, run on the direct limiter and
//! on keyed limiters over any store, so that their observations can be compared:
//! given the same calls on one key, a keyed reservation must decide and give back
//! exactly what a direct one does, and every store must agree with memory.
#![allow(dead_code)]

use sluicegate::algorithms::Algorithm;
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::stores::Store;
use sluicegate::CellAlgorithm;
use sluicegate::{Decision, KeyedRateLimiter, RateLimiter};
use std::time::Duration;

/// One call of a trace. Reservations are named by their place among those still
/// held, oldest first.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// Moves the clock on by this many milliseconds.
    Advance(u64),
    /// Reserves this cost (on every key of the trace).
    Reserve(u64),
    /// Cancels the held reservation at this place.
    Cancel(usize),
    /// Drops the held reservation at this place: its permits stay taken.
    Drop(usize),
    /// Checks this cost on every key.
    Check(u64),
    /// Checks this cost on the first key alone, so that keys differ.
    CheckFirst(u64),
}

/// What a trace saw: every reservation's decision, time to act and delay, every
/// check's decision, and after every call a peek of 1 on each key.
#[derive(Clone, Debug, PartialEq)]
pub enum Seen {
    Reserved {
        decision: Decision,
        acts_at: Nanos,
        delay: Duration,
    },
    Checked(Decision),
    Peeked(Decision),
}

pub use crate::support::rng::Rng;

/// A trace of `steps` calls with costs from 1 to `max_cost` (pass one above the
/// limit's capacity to meet refusals that are never): time moves by 0 (a third of
/// the moves, so that cancels land at the very instant of a grant) to 400 ms;
/// cancels take the latest held reservation half the time, any other otherwise.
pub fn trace(seed: u64, steps: usize, max_cost: u64) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    let mut held = 0usize;
    let mut ops = Vec::with_capacity(steps);
    for _ in 0..steps {
        let roll = rng.below(100);
        let op = if roll < 25 {
            Op::Advance(if rng.below(3) == 0 {
                0
            } else {
                1 + rng.below(400)
            })
        } else if roll < 55 {
            held += 1;
            Op::Reserve(1 + rng.below(max_cost))
        } else if roll < 80 && held > 0 {
            let at = if rng.below(2) == 0 {
                held - 1
            } else {
                rng.below(held as u64) as usize
            };
            held -= 1;
            Op::Cancel(at)
        } else if roll < 85 && held > 0 {
            held -= 1;
            Op::Drop(rng.below(held as u64 + 1) as usize)
        } else if roll < 93 {
            Op::Check(1 + rng.below(max_cost))
        } else {
            Op::CheckFirst(1)
        };
        ops.push(op);
    }
    ops
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Runs `ops` on a direct limiter over `algorithm`, on a manual clock from 0.
pub fn run_direct<A: CellAlgorithm>(algorithm: A, ops: &[Op]) -> Vec<Seen> {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(algorithm, clock.clone());
    let mut held = Vec::new();
    let mut seen = Vec::new();
    for op in ops {
        match *op {
            Op::Advance(n) => clock.advance(ms(n)),
            Op::Reserve(cost) => {
                let r = limiter.reserve(cost).unwrap();
                seen.push(Seen::Reserved {
                    decision: r.decision(),
                    acts_at: r.acts_at(),
                    delay: r.delay(),
                });
                held.push(r);
            }
            Op::Cancel(at) => held.remove(at).cancel(),
            Op::Drop(at) => drop(held.remove(at)),
            Op::Check(cost) | Op::CheckFirst(cost) => {
                seen.push(Seen::Checked(limiter.check(cost).unwrap()));
            }
        }
        seen.push(Seen::Peeked(limiter.peek(1).unwrap()));
    }
    seen
}

/// How a keyed trace reserves and cancels: blocking, or through the async handle
/// (`reserve`/`reserve_all` and `cancel_async`) on `runtime`.
pub enum Mode<'a> {
    Blocking,
    Async(&'a tokio::runtime::Runtime),
}

/// Runs `ops` on `limiter` (whose manual clock starts at 0) over `keys`: a
/// reservation is `reserve` for one key, `reserve_all` for several.
pub fn run_keyed<A, S>(
    limiter: &KeyedRateLimiter<&'static str, A, S, ManualClock>,
    keys: &[&'static str],
    ops: &[Op],
    mode: Mode<'_>,
) -> Vec<Seen>
where
    A: Algorithm,
    S: Store<&'static str, A> + 'static,
{
    assert_eq!(limiter.clock().now(), 0);
    let handle = limiter.to_async();
    let mut held = Vec::new();
    let mut seen = Vec::new();
    for op in ops {
        match *op {
            Op::Advance(n) => limiter.clock().advance(ms(n)),
            Op::Reserve(cost) => {
                let r = match (&mode, keys) {
                    (Mode::Blocking, [key]) => limiter.reserve(key, cost),
                    (Mode::Blocking, _) => limiter.reserve_all(keys, cost),
                    (Mode::Async(rt), [key]) => rt.block_on(handle.reserve(key, cost)),
                    (Mode::Async(rt), _) => rt.block_on(handle.reserve_all(keys, cost)),
                }
                .unwrap();
                seen.push(Seen::Reserved {
                    decision: r.decision(),
                    acts_at: r.acts_at(),
                    delay: r.delay(),
                });
                held.push(r);
            }
            Op::Cancel(at) => {
                let r = held.remove(at);
                match &mode {
                    Mode::Blocking => r.cancel().unwrap(),
                    Mode::Async(rt) => rt.block_on(r.cancel_async()).unwrap(),
                }
            }
            Op::Drop(at) => drop(held.remove(at)),
            Op::Check(cost) => seen.push(Seen::Checked(limiter.check_all(keys, cost).unwrap())),
            Op::CheckFirst(cost) => {
                seen.push(Seen::Checked(limiter.check(&keys[0], cost).unwrap()));
            }
        }
        for key in keys {
            seen.push(Seen::Peeked(limiter.peek(key, 1).unwrap()));
        }
    }
    seen
}

/// Asserts two runs saw the same, naming the first call where they part.
#[track_caller]
pub fn assert_same(what: &str, ops: &[Op], expected: &[Seen], got: &[Seen]) {
    let first = expected.iter().zip(got).position(|(e, g)| e != g);
    if let Some(at) = first {
        panic!(
            "{what}: observation {at} differs\n expected {:?}\n      got {:?}\nops: {ops:?}",
            expected[at], got[at]
        );
    }
    assert_eq!(expected.len(), got.len(), "{what}");
}

/// How many of `ops` are reservations and cancels (a trace must exercise both).
pub fn counts(ops: &[Op]) -> (usize, usize) {
    let reserves = ops.iter().filter(|o| matches!(o, Op::Reserve(_))).count();
    let cancels = ops.iter().filter(|o| matches!(o, Op::Cancel(_))).count();
    (reserves, cancels)
}
