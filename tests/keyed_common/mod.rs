//! Test-only algorithms for the keyed tests: a fixed window (a window algorithm that
//! does not exist in this branch yet) and an all-or-nothing pair of limits (a
//! stand-in for the multi-limit sets).
#![allow(dead_code)]

use sluicegate::algorithms::{Algorithm, Decision, Plain};
use sluicegate::clock::Nanos;

/// `limit` permits per window of `period` ns, windows aligned to the clock origin.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub limit: u64,
    pub period: Nanos,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowState {
    pub window: u64,
    pub count: u64,
}

impl Window {
    fn current(&self, state: &WindowState, now: Nanos) -> WindowState {
        let window = now / self.period;
        if window > state.window {
            WindowState { window, count: 0 }
        } else {
            *state
        }
    }
}

impl Algorithm for Window {
    type State = WindowState;
    type Shape = Plain;

    fn initial_state(&self, now: Nanos) -> WindowState {
        WindowState {
            window: now / self.period,
            count: 0,
        }
    }

    fn reserve(
        &self,
        state: &mut WindowState,
        now: Nanos,
        cost: u64,
        _max_wait: Nanos,
    ) -> Decision {
        let current = self.current(state, now);
        let reset =
            (current.window + 1) * self.period - now.min((current.window + 1) * self.period);
        if cost > self.limit {
            return Decision::never(self.limit, self.limit - current.count, reset);
        }
        if current.count + cost > self.limit {
            return Decision::denied(self.limit, self.limit - current.count, reset, reset);
        }
        *state = WindowState {
            window: current.window,
            count: current.count + cost,
        };
        Decision::allowed(self.limit, self.limit - state.count, reset)
    }

    fn is_replenished(&self, state: &WindowState, now: Nanos) -> bool {
        self.current(state, now).count == 0
    }
}

/// Two limits on one key, all-or-nothing: a call is charged to both or neither.
#[derive(Clone, Copy, Debug)]
pub struct Both<A, B>(pub A, pub B);

impl<A: Algorithm, B: Algorithm> Algorithm for Both<A, B> {
    type State = (A::State, B::State);
    type Shape = Plain;

    fn initial_state(&self, now: Nanos) -> Self::State {
        (self.0.initial_state(now), self.1.initial_state(now))
    }

    fn reserve(&self, state: &mut Self::State, now: Nanos, cost: u64, max_wait: Nanos) -> Decision {
        let mut scratch = state.clone();
        let first = self.0.reserve(&mut scratch.0, now, cost, max_wait);
        if !first.is_allowed() {
            return first;
        }
        let second = self
            .1
            .reserve(&mut scratch.1, now, cost, max_wait)
            .with_limit_index(1);
        if !second.is_allowed() {
            return second;
        }
        *state = scratch;
        if second.remaining() < first.remaining() {
            second
        } else {
            first
        }
    }

    fn is_replenished(&self, state: &Self::State, now: Nanos) -> bool {
        self.0.is_replenished(&state.0, now) && self.1.is_replenished(&state.1, now)
    }
}

pub const SECOND: Nanos = 1_000_000_000;

/// Resident memory of this process in bytes (Linux `/proc/self/statm`), if known.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}
