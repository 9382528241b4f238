//! The one rule every front end follows while a caller waits.
//!
//! A blocking or async acquire is a loop around the core step: reserve for a caller
//! willing to wait the time it has `left`, then either sleep until the grant may act
//! (Guava's limiters and the leaky-bucket queue reserve the future), or sleep the
//! `retry_after` of a refusal and ask again (the window counters cannot reserve the
//! future). A refusal whose `retry_after` does not fit the budget ends the wait with
//! [`Error::Timeout`], a "never" ends it at once with [`Error::Never`]. The direct
//! and keyed front ends, blocking and async, all decide with [`next_move`]; the
//! blocking ones share the whole loop, [`wait_blocking`].

use crate::algorithms::{Decision, Verdict};
use crate::clock::{nanos_to_duration, Clock, Nanos};
use crate::error::Error;
use std::time::Duration;

/// What a waiting caller does after a decision.
pub(crate) enum Move {
    /// Granted: wait this long, then act.
    Act(Nanos),
    /// Refused for now: sleep this long and ask again.
    Retry(Nanos),
}

/// The rule: granted means act after the decision's wait; never means fail now;
/// denied means retry after `retry_after` if that fits in the `left` budget, else
/// time out (having `waited` so far).
#[inline]
pub(crate) fn next_move(
    decision: &Decision,
    cost: u64,
    left: Nanos,
    waited: Nanos,
) -> Result<Move, Error> {
    match decision.verdict() {
        Verdict::Allowed => Ok(Move::Act(decision.wait_nanos())),
        Verdict::Never => Err(Error::Never { cost }),
        Verdict::Denied => {
            let retry = decision.retry_after_nanos();
            if retry > left {
                Err(Error::Timeout {
                    needed: nanos_to_duration(waited.saturating_add(retry)),
                })
            } else {
                Ok(Move::Retry(retry))
            }
        }
    }
}

/// When a wait of `budget` nanoseconds starting now must end. An unbounded budget
/// skips the clock read (the costliest part of an unthrottled acquire):
/// `now + u64::MAX` saturates to `u64::MAX` anyway.
#[inline]
pub(crate) fn deadline<C: Clock>(clock: &C, budget: Nanos) -> Nanos {
    if budget == u64::MAX {
        u64::MAX
    } else {
        clock.now().saturating_add(budget)
    }
}

/// The blocking loop: `reserve(now, left)` until a grant, sleeping on `clock` as
/// [`next_move`] says; returns the total time slept.
pub(crate) fn wait_blocking<C: Clock>(
    clock: &C,
    cost: u64,
    budget: Nanos,
    mut reserve: impl FnMut(Nanos, Nanos) -> Result<Decision, Error>,
) -> Result<Duration, Error> {
    let deadline = deadline(clock, budget);
    let mut waited: Nanos = 0;
    loop {
        let now = clock.now();
        let left = deadline.saturating_sub(now);
        let decision = reserve(now, left)?;
        match next_move(&decision, cost, left, waited)? {
            Move::Act(wait) => {
                clock.sleep(nanos_to_duration(wait));
                return Ok(nanos_to_duration(waited.saturating_add(wait)));
            }
            Move::Retry(retry) => {
                clock.sleep(nanos_to_duration(retry));
                waited = waited.saturating_add(retry);
            }
        }
    }
}

/// A timed try's answer: `true` if granted within the timeout, `false` if the wait
/// would not fit or the cost can never be granted; any other error passes through.
pub(crate) fn granted_within(outcome: Result<Duration, Error>) -> Result<bool, Error> {
    match outcome {
        Ok(_) => Ok(true),
        Err(Error::Timeout { .. } | Error::Never { .. }) => Ok(false),
        Err(other) => Err(other),
    }
}
