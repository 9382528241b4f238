//! The one decision of a call over several keys.

use crate::algorithms::{Algorithm, Decision, Receipt, Source, Verdict};
use crate::clock::Nanos;
use crate::stores::store::blank;
use crate::stores::Operation;

/// The one decision of a multi-key call: any never wins; else the denial with the
/// longest `retry_after`; else (all allowed) the key with the fewest permits left,
/// with the longest wait and reset of all keys, and the source of the least
/// checked grant (see [`least_checked`]).
pub(crate) fn combine(answers: &[(Decision, Receipt)]) -> Decision {
    let decisions = answers.iter().map(|(decision, _)| decision);
    if let [(one, _)] = answers {
        return *one;
    }
    if let Some(never) = decisions.clone().find(|d| d.is_never()) {
        return *never;
    }
    let mut denied: Option<&Decision> = None;
    for d in decisions.clone().filter(|d| d.verdict() == Verdict::Denied) {
        if denied.is_none_or(|best| d.retry_after_nanos() > best.retry_after_nanos()) {
            denied = Some(d);
        }
    }
    if let Some(denied) = denied {
        return *denied;
    }
    let Some(tightest) = decisions.clone().min_by_key(|d| d.remaining()) else {
        return blank().0;
    };
    let wait = decisions
        .clone()
        .map(Decision::wait_nanos)
        .max()
        .unwrap_or(0);
    let reset = decisions
        .map(Decision::reset_after_nanos)
        .max()
        .unwrap_or(0);
    let source = answers
        .iter()
        .map(|(decision, _)| decision.source())
        .fold(Source::Store, least_checked);
    Decision::allowed_after(wait, tightest.limit(), tightest.remaining(), reset)
        .with_limit_index(tightest.limit_index())
        .with_source(source)
}

/// Of two grants' sources, the one a caller must trust less: a call granted on
/// several keys is only as checked as its least checked key, so one key let
/// through unchecked (`Open`) makes the call unchecked, and one decided by the
/// local share makes it local, whatever the others' sources. A leased grant is
/// the limit's own, taken earlier: it outranks only the store.
fn least_checked(a: Source, b: Source) -> Source {
    let rank = |source: Source| match source {
        Source::Store => 0,
        Source::Leased | Source::Cached => 1,
        Source::Local => 2,
        Source::Unchecked | Source::FailedClosed => 3,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// Whether a call that charges `cost` on each of `keys` at `now` can never be
/// granted for its repeated keys. A store steps a key listed twice twice, the
/// second time on the state the first left, so a key listed m times is charged m ×
/// `cost`: when `algorithm` could never grant that much at once (a window of 3 and
/// `[a, a]` at 2 need 4), no wait lets the call through. Costs one comparison per
/// pair of keys, and a peek on a new state per repeated key.
pub(crate) fn repeats_never<K: PartialEq, A: Algorithm>(
    algorithm: &A,
    keys: &[K],
    now: Nanos,
    cost: u64,
) -> bool {
    keys.iter().enumerate().any(|(index, key)| {
        if keys[..index].contains(key) {
            return false;
        }
        let listed = keys[index..].iter().filter(|other| *other == key).count() as u64;
        listed > 1
            && cost.checked_mul(listed).is_none_or(|charge| {
                algorithm
                    .peek(&algorithm.initial_state(now), now, charge)
                    .is_never()
            })
    })
}

/// The combined `decision` of a `step` over `keys` at `now`, a reserve's or a
/// peek's denial made never where the repeated keys can never be granted
/// ([`repeats_never`], asked only then; see [`with_repeats`]).
pub(crate) fn with_repeats_of<K: PartialEq, A: Algorithm>(
    decision: Decision,
    algorithm: &A,
    keys: &[K],
    now: Nanos,
    step: Operation<'_>,
) -> Decision {
    match step {
        Operation::Reserve { cost, .. } | Operation::Peek { cost } => {
            with_repeats(decision, || repeats_never(algorithm, keys, now, cost))
        }
        Operation::Cancel { .. } => decision,
    }
}

/// A multi-key call's combined `decision`, a denial made never if `never` (asked
/// only of a denial) says the call's repeated keys can never be granted (see
/// [`repeats_never`]): with the denial's limit, remaining, reset, index and
/// source.
pub(crate) fn with_repeats(decision: Decision, never: impl FnOnce() -> bool) -> Decision {
    if decision.verdict() != Verdict::Denied || !never() {
        return decision;
    }
    Decision::never(
        decision.limit(),
        decision.remaining(),
        decision.reset_after_nanos(),
    )
    .with_limit_index(decision.limit_index())
    .with_source(decision.source())
}
