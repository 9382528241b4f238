//! [`Store`] for [`DenyCache`]: zero-wait single-key calls are looked up first
//! and their refusals kept; everything else goes to the inner store, a grant
//! dropping its keys' refusals and a cancel dropping them first.

use super::table::{Hit, Table, Ticket};
use super::{refusals_count, DenyCache};
use crate::algorithms::{Algorithm, Decision, Receipt, Report, Source, Verdict};
use crate::clock::Nanos;
use crate::error::Error;
use crate::stores::store::check_output;
use crate::stores::{Operation, Reporting, Store};
use futures::future::BoxFuture;
use futures::FutureExt;
use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Arc;

/// The cost of a step the cache may answer: a zero-wait reserve or a peek.
fn cacheable(step: Operation<'_>) -> Option<u64> {
    match step {
        Operation::Reserve { cost, max_wait: 0 } | Operation::Peek { cost } => Some(cost),
        _ => None,
    }
}

impl<K: Hash + Eq> Table<K> {
    /// Keeps what the store answered to a step on `key` (`keep`: the cost of a
    /// step the cache answers, `None` for any other): a refusal the store made is
    /// kept, with how every limit of a set stood (`each`, from a reporting call;
    /// one decision or none is the refusal's own and is not kept), a grant drops
    /// the key's refusal.
    fn record<Q>(
        &self,
        key: &Q,
        ticket: Ticket,
        now: Nanos,
        keep: Option<u64>,
        d: Decision,
        each: &[Decision],
    ) where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        if d.is_allowed() {
            self.forget(key);
        } else if let (Some(cost), Verdict::Denied, Source::Store) = (keep, d.verdict(), d.source())
        {
            let each = if each.len() > 1 {
                each.to_vec()
            } else {
                Vec::new()
            };
            self.learn(key.to_owned(), ticket, now, cost, d, each);
        }
    }
}

impl<S, K, A> DenyCache<S, K, A>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm,
{
    /// The cached answer to `step` on `key`, or the ticket to learn the store's
    /// answer with and whether the answer may be kept.
    fn lookup<Q>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<Hit, (Ticket, Option<u64>)>
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        match cacheable(step) {
            Some(cost) => match self.table.lookup(key, now, cost) {
                Ok(hit) => Ok(hit),
                // Checked per call too: `new` saw one configuration, a call
                // may pass another of the same type.
                Err(ticket) => Err((ticket, (!refusals_count(algorithm)).then_some(cost))),
            },
            None => Err((Ticket::NONE, None)),
        }
    }

    /// A multi-key step, or a single-key step past the cache: drops the keys'
    /// refusals a cancel or a grant makes stale.
    fn forget_for<Q>(&self, keys: &[Q], step: Operation<'_>, out: &[(Decision, Receipt)])
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq,
    {
        match step {
            Operation::Cancel { .. } => keys.iter().for_each(|k| self.table.cancelled(k)),
            Operation::Reserve { .. } => {
                for (key, (d, _)) in keys.iter().zip(out) {
                    if d.is_allowed() {
                        self.table.forget(key);
                    }
                }
            }
            Operation::Peek { .. } => {}
        }
    }
}

/// For `K` and its borrowed form (`str` for `String` keys), as the inner
/// store answers them.
impl<S, K, Q, A> Store<Q, A> for DenyCache<S, K, A>
where
    S: Store<Q, A>,
    K: Hash + Eq + Clone + Send + Sync + 'static,
    K: Borrow<Q>,
    Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    A: Algorithm,
{
    type Pending = BoxFuture<'static, Result<Vec<(Decision, Receipt)>, Error>>;

    fn apply(
        &self,
        algorithm: &A,
        keys: &[Q],
        now: Nanos,
        step: Operation<'_>,
        out: &mut [(Decision, Receipt)],
    ) -> Result<(), Error>
    where
        Q: Sized,
    {
        check_output(keys.len(), out.len())?;
        if let ([key], [slot]) = (keys, &mut *out)
            && !matches!(step, Operation::Cancel { .. })
        {
            *slot = self.apply_key::<(Decision, Receipt)>(algorithm, key, now, step)?;
            return Ok(());
        }
        if let Operation::Cancel { .. } = step {
            self.forget_for(keys, step, out);
        }
        self.inner.apply(algorithm, keys, now, step, out)?;
        if let Operation::Reserve { .. } = step {
            self.forget_for(keys, step, out);
        }
        Ok(())
    }

    fn apply_key<R: Report>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<R, Error> {
        if let Operation::Cancel { .. } = step {
            self.table.cancelled(key);
            return self.inner.apply_key(algorithm, key, now, step);
        }
        match self.lookup(algorithm, key, now, step) {
            Ok(hit) => Ok(R::refused(|| hit.refusal)),
            Err((ticket, keep)) => {
                // The decision even for a report that reads less (a `bool`): a
                // refusal is recorded from it. A report keeping receipts gets its own.
                let (decision, receipt) = if R::KEEPS_RECEIPT {
                    self.inner
                        .apply_key::<(Decision, Receipt)>(algorithm, key, now, step)?
                } else {
                    let decision: Decision = self.inner.apply_key(algorithm, key, now, step)?;
                    (decision, Receipt::NONE)
                };
                self.table.record(key, ticket, now, keep, decision, &[]);
                Ok(R::decided(decision, receipt))
            }
        }
    }

    /// A cached refusal reports every limit as the store did with it, counted
    /// down (see the module docs).
    fn apply_key_each(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
        if let Operation::Cancel { .. } = step {
            self.table.cancelled(key);
            return self.inner.apply_key_each(algorithm, key, now, step, each);
        }
        let (ticket, keep) = match self.lookup(algorithm, key, now, step) {
            Ok(hit) => {
                hit.report(each);
                return Ok((hit.refusal, Receipt::NONE));
            }
            Err(miss) => miss,
        };
        // The store's report is kept with a refusal: collected, then passed on.
        let mut report = Vec::new();
        let inner = &self.inner;
        let answer = inner.apply_key_each(algorithm, key, now, step, &mut |d| report.push(d))?;
        self.table.record(key, ticket, now, keep, answer.0, &report);
        report.into_iter().for_each(each);
        Ok(answer)
    }

    fn apply_key_each_async(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
    ) -> Reporting
    where
        Q: Sized,
    {
        if let Operation::Cancel { .. } = step {
            self.table.cancelled(key);
            return self.inner.apply_key_each_async(algorithm, key, now, step);
        }
        match self.lookup(algorithm, key, now, step) {
            Ok(hit) => {
                let mut report = Vec::new();
                hit.report(&mut |d| report.push(d));
                Box::pin(futures::future::ready(Ok((
                    (hit.refusal, Receipt::NONE),
                    report,
                ))))
            }
            Err((ticket, keep)) => {
                let pending = self.inner.apply_key_each_async(algorithm, key, now, step);
                let table = Arc::clone(&self.table);
                let key = key.to_owned();
                Box::pin(async move {
                    let (answer, each) = pending.await?;
                    table.record::<K>(&key, ticket, now, keep, answer.0, &each);
                    Ok((answer, each))
                })
            }
        }
    }

    const ANSWERS_AT_ONCE: bool = S::ANSWERS_AT_ONCE;

    fn apply_async(
        &self,
        algorithm: &A,
        keys: &[Q],
        now: Nanos,
        step: Operation<'_>,
    ) -> Self::Pending
    where
        Q: Sized,
    {
        if let Operation::Cancel { .. } = step {
            keys.iter().for_each(|k| self.table.cancelled(k));
            return self.inner.apply_async(algorithm, keys, now, step).boxed();
        }
        let (ticket, keep) = match keys {
            [key] => match self.lookup(algorithm, key, now, step) {
                Ok(hit) => {
                    return futures::future::ready(Ok(vec![(hit.refusal, Receipt::NONE)])).boxed()
                }
                Err(miss) => miss,
            },
            _ => (Ticket::NONE, None),
        };
        let pending = self.inner.apply_async(algorithm, keys, now, step);
        let table = Arc::clone(&self.table);
        let keys: Vec<K> = keys.iter().map(ToOwned::to_owned).collect();
        let reserve = matches!(step, Operation::Reserve { .. });
        async move {
            let answers = pending.await?;
            if let ([key], [(d, _)]) = (keys.as_slice(), answers.as_slice()) {
                table.record::<K>(key, ticket, now, keep, *d, &[]);
            } else if reserve {
                for (key, (d, _)) in keys.iter().zip(&answers) {
                    if d.is_allowed() {
                        table.forget::<K>(key);
                    }
                }
            }
            Ok(answers)
        }
        .boxed()
    }

    /// Drops the keys' refusals first: the cancel may give permits back.
    fn cancel_detached(
        &self,
        algorithm: &A,
        keys: &[Q],
        now: Nanos,
        receipts: &[Receipt],
        acts_at: Nanos,
    ) where
        Q: Sized,
    {
        keys.iter().for_each(|k| self.table.cancelled(k));
        self.inner
            .cancel_detached(algorithm, keys, now, receipts, acts_at);
    }

    /// The inner store's number for the key.
    fn key_id(&self, key: &Q) -> Option<u64> {
        self.inner.key_id(key)
    }
}
