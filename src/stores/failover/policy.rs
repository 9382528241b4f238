//! What a failover store answers when its inner store cannot be asked: the
//! [`FailurePolicy`], and how a fallback's grants are told apart when they are
//! cancelled.

use crate::algorithms::{Algorithm, Decision, Receipt, Source};
use crate::clock::Nanos;
use crate::error::Error;
use crate::stores::{MemoryStore, Operation, Store};
use std::hash::Hash;

/// What a [`FailoverStore`](super::FailoverStore) answers while its inner store
/// failed or is backed off.
///
/// | policy | a call is | [`Decision::source`] | what it costs |
/// |---|---|---|---|
/// | `Closed` | refused: denied, `retry_after` the rest of the back-off (the initial back-off while another caller probes), `limit` and `remaining` 0 (no limit was consulted) | [`Source::FailedClosed`] | availability: nothing gets through while the store is down |
/// | `Open` | allowed, with nothing to give back, `limit` and `remaining` 0 | [`Source::Unchecked`] | safety: nothing is limited while the store is down |
/// | `Local(a)` | decided by `a` on an in-memory store of this process | [`Source::Local`] | accuracy: each process limits on its own, with the share of the quota `a` gives it |
///
/// `Local` takes an algorithm of the same type as the limiter's, configured with
/// *this process's share* of the shared limit: with a limit of 100 a minute shared
/// by 4 instances, `FixedWindow::new(25, 60 s)`. Together the instances then admit
/// about what the shared limit would (more if the load is uneven across them, less
/// if fewer are running). The local states live as long as the failover store:
/// they start empty, what one outage spends stays spent in the next while its
/// window or bucket says so (the safe direction: the share is never granted
/// twice), and nothing is merged back into the store when it recovers.
///
/// Which to choose: `Closed` when an excess is worse than a refusal (costly or
/// abusable operations, quotas you pay for); `Open` when the limit only protects
/// capacity and the store is rarely down; `Local` for most front-door limits.
///
/// ```
/// use sluicegate::algorithms::FixedWindow;
/// use sluicegate::stores::failover::FailurePolicy;
/// use std::time::Duration;
/// let shared = 100; // per minute, across the fleet
/// let instances = 4;
/// let share = FixedWindow::new(shared / instances, Duration::from_secs(60)).unwrap();
/// let policy = FailurePolicy::Local(share);
/// assert!(matches!(policy, FailurePolicy::Local(_)));
/// ```
#[derive(Clone, Debug)]
pub enum FailurePolicy<A> {
    /// Refuse every call until the inner store answers again (fail closed).
    Closed,
    /// Allow every call unchecked until the inner store answers again (fail open).
    Open,
    /// Decide by this algorithm on an in-memory store of this process.
    Local(A),
}

/// The policy with what it needs to answer.
pub(super) enum Fallback<K, A: Algorithm> {
    Closed,
    Open,
    Local {
        algorithm: A,
        store: MemoryStore<K, A>,
    },
}

impl<K, A: Algorithm> Fallback<K, A> {
    pub(super) fn new(policy: FailurePolicy<A>) -> Self {
        match policy {
            FailurePolicy::Closed => Fallback::Closed,
            FailurePolicy::Open => Fallback::Open,
            FailurePolicy::Local(algorithm) => Fallback::Local {
                algorithm,
                store: MemoryStore::new(),
            },
        }
    }

    /// The source every decision of this policy names.
    pub(super) fn source(&self) -> Source {
        match self {
            Fallback::Closed => Source::FailedClosed,
            Fallback::Open => Source::Unchecked,
            Fallback::Local { .. } => Source::Local,
        }
    }

    /// Whether answering needs the call's keys (only the local limit reads them).
    pub(super) fn needs_keys(&self) -> bool {
        matches!(self, Fallback::Local { .. })
    }
}

/// The decision of a policy that consults no limit.
fn unconsulted(source: Source, retry_after: Nanos) -> Decision {
    let decision = if source == Source::Unchecked {
        Decision::allowed(0, 0, 0)
    } else {
        Decision::denied(0, 0, retry_after, retry_after)
    };
    decision.with_source(source)
}

impl<K: Hash + Eq, A: Algorithm> Fallback<K, A> {
    /// Answers a reserve or peek on `keys` into `out`, as the policy says.
    /// `retry_after` is how long the inner store will not be asked.
    pub(super) fn answer<Q>(
        &self,
        keys: &[Q],
        now: Nanos,
        step: Operation<'_>,
        retry_after: Nanos,
        out: &mut [(Decision, Receipt)],
    ) -> Result<(), Error>
    where
        Q: ToOwned<Owned = K> + Hash + Eq,
    {
        match self {
            Fallback::Local { algorithm, store } => {
                store.apply(algorithm, keys, now, step, out)?;
                for (decision, receipt) in out.iter_mut() {
                    *decision = decision.with_source(Source::Local);
                    *receipt = tag_local(std::mem::take(receipt));
                }
            }
            _ => out.fill((unconsulted(self.source(), retry_after), Receipt::NONE)),
        }
        Ok(())
    }

    /// [`answer`](Self::answer) for one key, which may be unsized, with its
    /// receipt (a local grant's, tagged as the local limit's).
    pub(super) fn answer_key<Q>(
        &self,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
        retry_after: Nanos,
    ) -> Result<(Decision, Receipt), Error>
    where
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        match self {
            Fallback::Local { algorithm, store } => {
                let (decision, receipt): (Decision, Receipt) =
                    store.apply_key(algorithm, key, now, step)?;
                Ok((decision.with_source(Source::Local), tag_local(receipt)))
            }
            _ => Ok((unconsulted(self.source(), retry_after), Receipt::NONE)),
        }
    }

    /// [`answer`](Self::answer) for one key, telling `each` how every limit stands
    /// (the local limit's members; otherwise the one decision).
    pub(super) fn answer_each<Q>(
        &self,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
        retry_after: Nanos,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error>
    where
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        match self {
            Fallback::Local { algorithm, store } => {
                let mut local = |d: Decision| each(d.with_source(Source::Local));
                let (decision, receipt) =
                    store.apply_key_each(algorithm, key, now, step, &mut local)?;
                Ok((decision.with_source(Source::Local), tag_local(receipt)))
            }
            _ => {
                let decision = unconsulted(self.source(), retry_after);
                each(decision);
                Ok((decision, Receipt::NONE))
            }
        }
    }

    /// Gives the local limit's grants back to it: `local` holds, per key, the
    /// local receipt or none.
    pub(super) fn cancel_local<Q>(&self, keys: &[Q], now: Nanos, local: &[Receipt], acts_at: Nanos)
    where
        Q: ToOwned<Owned = K> + Hash + Eq,
    {
        if let Fallback::Local { algorithm, store } = self
            && local.iter().any(|r| !r.is_none())
        {
            store.cancel_detached(algorithm, keys, now, local, acts_at);
        }
    }

    /// [`cancel_local`](Self::cancel_local) on one key, which may be unsized.
    pub(super) fn cancel_local_key<Q>(&self, key: &Q, now: Nanos, local: &[Receipt], acts_at: Nanos)
    where
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        if let Fallback::Local { algorithm, store } = self
            && local.iter().any(|r| !r.is_none())
        {
            let step = Operation::Cancel {
                receipts: local,
                acts_at,
            };
            // A cancel inserts nothing, so the in-memory store cannot fail it.
            let _: Result<Decision, Error> = store.apply_key(algorithm, key, now, step);
        }
    }
}

/// What marks a receipt as the local limit's: the second of its two members.
/// Charge `u64::MAX` at mark `i64::MIN` is no grant any algorithm of the crate
/// makes, and a set's own receipts carry the grant's cost (at least 1) as charge,
/// where a tagged receipt carries 0.
const LOCAL_TAG: Receipt = Receipt::new(i64::MIN, u64::MAX);

/// A local grant's receipt, marked so that its cancel goes back to the local
/// limit and never to the inner store. A receipt with nothing to give back stays
/// [`Receipt::NONE`].
pub(super) fn tag_local(receipt: Receipt) -> Receipt {
    if receipt.is_none() {
        return receipt;
    }
    Receipt::of_members(0, [receipt, LOCAL_TAG])
}

/// The local limit's own receipt, if `receipt` is one of its marked grants.
pub(super) fn untag_local(receipt: &Receipt) -> Option<&Receipt> {
    match receipt.members() {
        [local, tag] if receipt.charge() == 0 && *tag == LOCAL_TAG => Some(local),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tagged_receipt_is_told_apart_from_the_store_s_own() {
        let own = Receipt::new(7, 3);
        let tagged = tag_local(own.clone());
        assert_eq!(untag_local(&tagged), Some(&own));
        assert_eq!(untag_local(&own), None);
        let set = Receipt::of_members(1, [own.clone(), Receipt::new(1, 1)]);
        assert_eq!(untag_local(&set), None);
        assert!(tag_local(Receipt::NONE).is_none());
    }
}
