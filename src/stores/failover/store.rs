//! [`Store`] for [`FailoverStore`]: every step goes to the inner store while it is
//! healthy and to the policy while it is not; cancels go to whichever granted.

use super::backoff::Route;
use super::observe::Count;
use super::policy::{untag_local, Fallback};
use super::{Ctx, FailoverStore};
use crate::algorithms::{Algorithm, Decision, Receipt, Report};
use crate::clock::{Clock, Nanos};
use crate::error::Error;
use crate::stores::store::{blank, check_output};
use crate::stores::{Operation, Reporting, Store};
use futures::future::BoxFuture;
use futures::FutureExt;
use std::borrow::Cow;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

/// A reserve or peek that a future can keep; `None` for a cancel.
fn owned(step: Operation<'_>) -> Option<Operation<'static>> {
    match step {
        Operation::Reserve { cost, max_wait } => Some(Operation::Reserve { cost, max_wait }),
        Operation::Peek { cost } => Some(Operation::Peek { cost }),
        Operation::Cancel { .. } => None,
    }
}

impl<K, A: Algorithm, C: Clock> Ctx<K, A, C> {
    /// Runs `ask` on the inner store or `answer` by the policy, as the back-off
    /// says, and keeps the back-off up to date with what `ask` returned.
    fn run<T>(
        &self,
        ask: impl FnOnce() -> Result<T, Error>,
        answer: impl FnOnce(Nanos) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.run_on(&mut (), |_| ask(), |_, retry_after| answer(retry_after))
    }

    /// [`run`](Self::run), with `state` lent to whichever of `ask` and `answer`
    /// runs (an output buffer both write).
    fn run_on<X: ?Sized, T>(
        &self,
        state: &mut X,
        ask: impl FnOnce(&mut X) -> Result<T, Error>,
        answer: impl FnOnce(&mut X, Nanos) -> Result<T, Error>,
    ) -> Result<T, Error> {
        match self.health.route() {
            Route::Store => match ask(state) {
                Err(Error::Store(e)) => {
                    let retry_after = self.health.failed();
                    self.failed(|r| answer(state, r), retry_after, Error::Store(e))
                }
                other => other,
            },
            Route::Probe(probe) => {
                self.counters.add(Count::Probe);
                match ask(state) {
                    Ok(t) => {
                        probe.succeeded();
                        self.counters.add(Count::Recovery);
                        Ok(t)
                    }
                    Err(Error::Store(e)) => {
                        let retry_after = probe.failed();
                        self.failed(|r| answer(state, r), retry_after, Error::Store(e))
                    }
                    Err(other) => {
                        probe.abandon();
                        Err(other)
                    }
                }
            }
            Route::Policy(retry_after) => self.degrade(|r| answer(state, r), retry_after, None),
        }
    }

    /// [`run`](Self::run) for an inner store's future: the route is taken now
    /// (`ask` is not even called when backed off), the verdict when it resolves.
    fn run_async<T, F>(
        &self,
        ask: impl FnOnce() -> F,
        answer: impl FnOnce(Nanos) -> Result<T, Error> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, Error>>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, Error>> + Send + 'static,
        K: Send + Sync + 'static,
    {
        let probe = match self.health.route() {
            Route::Policy(retry_after) => {
                return futures::future::ready(self.degrade(answer, retry_after, None)).boxed()
            }
            Route::Store => None,
            Route::Probe(probe) => {
                self.counters.add(Count::Probe);
                Some(probe)
            }
        };
        let pending = ask();
        let ctx = self.clone();
        async move {
            match pending.await {
                Ok(t) => {
                    if let Some(probe) = probe {
                        probe.succeeded();
                        ctx.counters.add(Count::Recovery);
                    }
                    Ok(t)
                }
                Err(Error::Store(e)) => {
                    let retry_after = match probe {
                        Some(probe) => probe.failed(),
                        None => ctx.health.failed(),
                    };
                    ctx.failed(answer, retry_after, Error::Store(e))
                }
                Err(other) => {
                    if let Some(probe) = probe {
                        probe.abandon();
                    }
                    Err(other)
                }
            }
        }
        .boxed()
    }

    fn failed<T>(
        &self,
        answer: impl FnOnce(Nanos) -> Result<T, Error>,
        retry_after: Nanos,
        error: Error,
    ) -> Result<T, Error> {
        self.counters.add(Count::Failure);
        self.degrade(answer, retry_after, Some(&error))
    }
}

impl<K: Hash + Eq, A: Algorithm, C: Clock> Ctx<K, A, C> {
    /// Gives the local limit's grants back to it (by `cancel_local`, given the
    /// local receipts), and answers the receipts the inner store should get, or
    /// `None` when there are none or it is backed off.
    fn split_cancel<'r>(
        &self,
        receipts: &'r [Receipt],
        cancel_local: impl FnOnce(&Fallback<K, A>, &[Receipt]),
    ) -> Option<Cow<'r, [Receipt]>> {
        let inner = if receipts.iter().any(|r| untag_local(r).is_some()) {
            let local: Vec<Receipt> = receipts
                .iter()
                .map(|r| untag_local(r).cloned().unwrap_or(Receipt::NONE))
                .collect();
            cancel_local(&self.fallback, &local);
            let rest = receipts.iter().map(|r| match untag_local(r) {
                Some(_) => Receipt::NONE,
                None => r.clone(),
            });
            Cow::Owned(rest.collect())
        } else {
            Cow::Borrowed(receipts)
        };
        if inner.iter().all(Receipt::is_none) {
            return None;
        }
        if self.health.is_degraded() {
            self.counters.add(Count::DroppedCancel);
            return None;
        }
        Some(inner)
    }

    /// A failed cancel leaves the permits taken (the safe direction) and backs
    /// off; nothing else is answered.
    fn cancel_failed(&self, result: Result<(), Error>) -> Result<(), Error> {
        match result {
            Err(Error::Store(_)) => {
                self.health.failed();
                self.counters.add(Count::Failure);
                Ok(())
            }
            other => other,
        }
    }
}

/// For `K` and its borrowed form (`str` for `String` keys), as the inner
/// store and the local limit answer them.
impl<S, K, Q, A, C> Store<Q, A> for FailoverStore<S, K, A, C>
where
    S: Store<Q, A>,
    K: Hash + Eq + Clone + Send + Sync + 'static,
    Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    A: Algorithm,
    C: Clock,
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
        if let Operation::Cancel { receipts, acts_at } = step {
            let local = |fallback: &Fallback<K, A>, local: &[Receipt]| {
                fallback.cancel_local(keys, now, local, acts_at)
            };
            let Some(inner) = self.ctx.split_cancel(receipts, local) else {
                return Ok(());
            };
            let step = Operation::Cancel {
                receipts: &inner,
                acts_at,
            };
            let result = self.inner.apply(algorithm, keys, now, step, out);
            return self.ctx.cancel_failed(result);
        }
        let fallback = &self.ctx.fallback;
        self.ctx.run_on(
            out,
            |out| self.inner.apply(algorithm, keys, now, step, out),
            |out, retry_after| fallback.answer(keys, now, step, retry_after, out),
        )
    }

    fn apply_key<R: Report>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<R, Error> {
        if let Operation::Cancel { receipts, acts_at } = step {
            let local = |fallback: &Fallback<K, A>, local: &[Receipt]| {
                fallback.cancel_local_key(key, now, local, acts_at)
            };
            let Some(inner) = self.ctx.split_cancel(receipts, local) else {
                let (decision, receipt) = blank();
                return Ok(R::decided(decision, receipt));
            };
            let step = Operation::Cancel {
                receipts: &inner,
                acts_at,
            };
            let result = self.inner.apply_key::<R>(algorithm, key, now, step);
            let (decision, receipt) = blank();
            return self
                .ctx
                .cancel_failed(result.map(drop))
                .map(|()| R::decided(decision, receipt));
        }
        let fallback = &self.ctx.fallback;
        self.ctx.run(
            || self.inner.apply_key(algorithm, key, now, step),
            |retry_after| {
                let (decision, receipt) = fallback.answer_key(key, now, step, retry_after)?;
                Ok(R::decided(decision, receipt))
            },
        )
    }

    /// A step that fails with [`Error::Store`] has reported nothing (the store
    /// contract), so one the policy answers reports the policy's decisions alone.
    fn apply_key_each(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
        if let Operation::Cancel { .. } = step {
            let answer: (Decision, Receipt) = self.apply_key(algorithm, key, now, step)?;
            each(answer.0);
            return Ok(answer);
        }
        let fallback = &self.ctx.fallback;
        self.ctx.run_on(
            each,
            |each| self.inner.apply_key_each(algorithm, key, now, step, each),
            |each, retry_after| fallback.answer_each(key, now, step, retry_after, each),
        )
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
        let Some(kept) = owned(step) else {
            let answer = self.apply_key(algorithm, key, now, step);
            return Box::pin(futures::future::ready(answer.map(
                |a: (Decision, Receipt)| {
                    let decision = a.0;
                    (a, vec![decision])
                },
            )));
        };
        let fallback = Arc::clone(&self.ctx.fallback);
        let key_kept: K = key.to_owned();
        let answer = move |retry_after| {
            let mut each = Vec::new();
            let answer =
                fallback
                    .answer_each::<K>(&key_kept, now, kept, retry_after, &mut |d| each.push(d))?;
            Ok((answer, each))
        };
        self.ctx.run_async(
            || self.inner.apply_key_each_async(algorithm, key, now, step),
            answer,
        )
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
        let Some(kept) = owned(step) else {
            let mut out = vec![blank(); keys.len()];
            let result = self.apply(algorithm, keys, now, step, &mut out);
            return futures::future::ready(result.map(|()| out)).boxed();
        };
        let fallback: Arc<Fallback<K, A>> = Arc::clone(&self.ctx.fallback);
        // Only the local limit reads the keys: the others answer by count.
        let kept_keys: Vec<K> = if fallback.needs_keys() {
            keys.iter().map(ToOwned::to_owned).collect()
        } else {
            Vec::new()
        };
        let count = keys.len();
        let answer = move |retry_after| {
            let mut out = vec![blank(); count];
            fallback.answer::<K>(&kept_keys, now, kept, retry_after, &mut out)?;
            Ok(out)
        };
        self.ctx.run_async(
            || self.inner.apply_async(algorithm, keys, now, step),
            answer,
        )
    }

    /// The local limit's grants go back to it; the inner store's to the inner
    /// store while it is healthy, and are dropped while it is backed off (see the
    /// module docs).
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
        let local = |fallback: &Fallback<K, A>, local: &[Receipt]| {
            fallback.cancel_local(keys, now, local, acts_at)
        };
        if let Some(inner) = self.ctx.split_cancel(receipts, local) {
            self.inner
                .cancel_detached(algorithm, keys, now, &inner, acts_at);
        }
    }

    /// The inner store's number for the key, whoever answers its calls.
    fn key_id(&self, key: &Q) -> Option<u64> {
        self.inner.key_id(key)
    }
}
