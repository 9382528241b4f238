//! The one decision of a call over several keys.

use crate::algorithms::{Decision, Receipt, Verdict};
use crate::stores::store::blank;

/// The one decision of a multi-key call: any never wins; else the denial with the
/// longest `retry_after`; else (all allowed) the key with the fewest permits left,
/// with the longest wait and reset of all keys.
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
    Decision::allowed_after(wait, tightest.limit(), tightest.remaining(), reset)
        .with_limit_index(tightest.limit_index())
}
