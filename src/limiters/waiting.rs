//! The one rule every front end follows while a caller waits.
//!
//! A blocking or async acquire is a loop around the core step: reserve for a caller
//! willing to wait the time it has `left`, then either sleep until the grant may act
//! (Guava's limiters and the leaky-bucket queue reserve the future), or sleep the
//! `retry_after` of a refusal and ask again (the window counters cannot reserve the
//! future, and a full queue must drain first).
//!
//! The rule: a refusal's `retry_after` is measured against the caller's deadline
//! ([`Decision::retry_after`]), so a retry before the deadline can succeed exactly
//! when `retry_after <= left`. Then the loop sleeps it and asks again; otherwise it
//! ends at once, without sleeping, with [`Error::Timeout`] (a timed try answers
//! false). A turn to act past the deadline is such a refusal: Guava's `canAcquire`
//! rule. A "never" ends the wait at once with [`Error::Never`]. The direct and keyed
//! front ends, blocking and async, all decide with [`next_move`]; the blocking ones
//! share the whole loop, [`wait_blocking`]. Each attempt reads the clock once; the
//! first reading also fixes the deadline.
//!
//! An async caller holds its grant while it sleeps ([`Held`]): dropped mid-sleep,
//! it gives the grant back through the limiter's [ledger](super::ledger), which
//! orders the cancels of waits dropped together.

use crate::algorithms::{Decision, Verdict};
use crate::clock::{nanos_to_duration, Clock, Nanos};
use crate::error::Error;
use std::future::Future;
use std::time::Duration;

/// What a waiting caller does after a decision.
pub(crate) enum Move {
    /// Granted: wait this long, then act.
    Act(Nanos),
    /// Refused for now: sleep this long and ask again.
    Retry(Nanos),
}

/// The rule: granted means act after the decision's wait; never means fail now;
/// denied means retry after `retry_after` if that fits in the `left` budget (the
/// decision was asked with `max_wait = left`), else time out at once (having
/// `waited` so far). A deadline at the clock's last reading (`deadline`
/// `Nanos::MAX`: a wait without a timeout, or one that reaches the clock's end)
/// leaves no later reading at which a retry past it could act, so such a refusal
/// is never granted: [`Error::Never`], not a timeout.
#[inline]
pub(crate) fn next_move(
    decision: &Decision,
    cost: u64,
    left: Nanos,
    deadline: Nanos,
    waited: Nanos,
) -> Result<Move, Error> {
    match decision.verdict() {
        Verdict::Allowed => Ok(Move::Act(decision.wait_nanos())),
        Verdict::Never => Err(Error::Never { cost }),
        Verdict::Denied => {
            let retry = decision.retry_after_nanos();
            if retry <= left {
                Ok(Move::Retry(retry))
            } else if deadline == Nanos::MAX {
                // No later reading of the clock ends the wait.
                Err(Error::Never { cost })
            } else {
                Err(Error::Timeout {
                    needed: nanos_to_duration(waited.saturating_add(retry)),
                })
            }
        }
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
    // One clock read per attempt: the first also fixes the deadline.
    let mut now = clock.now();
    let deadline = now.saturating_add(budget);
    let mut waited: Nanos = 0;
    loop {
        let left = deadline.saturating_sub(now);
        let decision = reserve(now, left)?;
        match next_move(&decision, cost, left, deadline, waited)? {
            Move::Act(wait) => {
                clock.sleep(nanos_to_duration(wait));
                return Ok(nanos_to_duration(waited.saturating_add(wait)));
            }
            Move::Retry(retry) => {
                clock.sleep(nanos_to_duration(retry));
                waited = waited.saturating_add(retry);
                now = clock.now();
            }
        }
    }
}

/// A grant held while an async caller sleeps until it may act: dropping it (the
/// future was abandoned mid-sleep) gives the grant back; [`keep`](Self::keep) once
/// the sleep is over.
pub(crate) trait Held {
    /// The caller acts on the grant: nothing is given back.
    fn keep(self);
}

/// The async loop, as [`wait_blocking`]: `reserve(&keys, now, left)` answers a
/// decision and what it takes to give the grant back, and `hold(keys, decision,
/// that, now)` holds the grant for the sleep before acting. The loop owns what the
/// grant was asked for (`keys`: a keyed call's keys, `()` for a direct limiter),
/// lends it to every attempt and hands it to the held grant, which may have to
/// give the grant back after the future is gone.
pub(crate) async fn wait_async<C, K, T, F, H>(
    clock: &C,
    cost: u64,
    budget: Nanos,
    keys: K,
    mut reserve: impl FnMut(&K, Nanos, Nanos) -> F,
    hold: impl FnOnce(K, Decision, T, Nanos) -> H,
) -> Result<Duration, Error>
where
    C: Clock,
    F: Future<Output = Result<(Decision, T), Error>>,
    H: Held,
{
    // One clock read per attempt: the first also fixes the deadline.
    let mut now = clock.now();
    let deadline = now.saturating_add(budget);
    let mut waited: Nanos = 0;
    loop {
        let left = deadline.saturating_sub(now);
        let (decision, grant) = reserve(&keys, now, left).await?;
        match next_move(&decision, cost, left, deadline, waited)? {
            Move::Act(wait) => {
                let held = hold(keys, decision, grant, now);
                clock.sleep_async(nanos_to_duration(wait)).await;
                held.keep();
                return Ok(nanos_to_duration(waited.saturating_add(wait)));
            }
            Move::Retry(retry) => {
                clock.sleep_async(nanos_to_duration(retry)).await;
                waited = waited.saturating_add(retry);
                now = clock.now();
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
