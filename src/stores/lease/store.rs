//! [`Store`] for [`LeasedStore`]: a zero-wait reserve of one key below the lease
//! size is granted from the key's lease, taking a new lease when need be; every
//! other step goes to the inner store.

use super::table::{lock, Slot};
use super::LeasedStore;
use crate::algorithms::{Algorithm, Decision, Receipt, Report};
use crate::clock::Nanos;
use crate::error::Error;
use crate::stores::store::check_output;
use crate::stores::{Operation, Reporting, Store};
use futures::future::BoxFuture;
use futures::{FutureExt, TryFutureExt};
use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Arc;

/// A zero-wait reserve of one call's cost.
fn take(cost: u64) -> Operation<'static> {
    Operation::Reserve { cost, max_wait: 0 }
}

/// A call that is taking a key's lease: if it ends without an answer (an error,
/// a dropped future), the lease is free to be taken again.
struct Taking(Slot);

impl Drop for Taking {
    fn drop(&mut self) {
        lock(&self.0).abandon();
    }
}

/// What a call does after looking at its key's lease.
enum Plan {
    /// Granted from the lease.
    Leased(Decision),
    /// Ask the store for a lease, then spend from it.
    Lease(Taking),
    /// Ask the store for the call's own cost.
    Store,
}

impl<S, K: Hash + Eq + Clone, A> LeasedStore<S, K, A> {
    /// The cost of a step a lease can answer: a zero-wait reserve of less than
    /// the lease size (so never with a lease of 1).
    fn leasable(&self, step: Operation<'_>) -> Option<u64> {
        match step {
            Operation::Reserve { cost, max_wait: 0 } if cost >= 1 && cost < self.size => Some(cost),
            _ => None,
        }
    }

    /// What a call of `cost` on `key` does; a call granted from the lease also
    /// reports into `report`, if given, how every limit stands.
    fn plan<Q>(&self, key: &Q, now: Nanos, cost: u64, report: Option<&mut Vec<Decision>>) -> Plan
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        let Some(slot) = self.table.slot(key, now) else {
            return Plan::Store;
        };
        let mut lease = lock(&slot);
        if let Some(decision) = lease.spend(now, cost) {
            if let Some(report) = report {
                lease.report(now, report);
            }
            return Plan::Leased(decision);
        }
        if !lease.begin_taking(now) {
            return Plan::Store;
        }
        drop(lease);
        Plan::Lease(Taking(slot))
    }

    /// Installs the store's answer to a lease, with how every limit stood after
    /// it (`each`, empty if not asked): the leased decision if granted (reported
    /// into `report`, if given), `None` if refused (the call then asks for its
    /// own cost).
    fn settle(
        (size, period): (u64, Nanos),
        taking: Taking,
        now: Nanos,
        cost: u64,
        grant: &Decision,
        each: Vec<Decision>,
        report: Option<&mut Vec<Decision>>,
    ) -> Option<Decision> {
        let mut lease = lock(&taking.0);
        if grant.is_allowed() {
            let decision = lease.granted(now, size, cost, period, grant, each);
            if let Some(report) = report {
                lease.report(now, report);
            }
            Some(decision)
        } else {
            lease.refused(now, period, grant);
            None
        }
    }
}

impl<S, K, A> LeasedStore<S, K, A>
where
    S: Store<K, A> + 'static,
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm + Clone,
{
    /// A zero-wait reserve of `cost` (below the lease size) on `key`; with
    /// `report`, also how every limit stands after it (the lease is then taken
    /// with the store's report, which leased grants repeat).
    fn take_key<Q>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        cost: u64,
        mut report: Option<&mut Vec<Decision>>,
    ) -> Result<(Decision, Receipt), Error>
    where
        S: Store<Q, A>,
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        let inner = &*self.inner;
        match self.plan(key, now, cost, report.as_deref_mut()) {
            Plan::Leased(decision) => return Ok((decision, Receipt::NONE)),
            Plan::Store => {}
            Plan::Lease(taking) => {
                let mut each = Vec::new();
                let into = report.is_some().then_some(&mut each);
                let (grant, _) = ask_blocking(inner, algorithm, key, now, take(self.size), into)?;
                let sizes = (self.size, self.period);
                let settled = Self::settle(
                    sizes,
                    taking,
                    now,
                    cost,
                    &grant,
                    each,
                    report.as_deref_mut(),
                );
                if let Some(decision) = settled {
                    return Ok((decision, Receipt::NONE));
                }
            }
        }
        ask_blocking(inner, algorithm, key, now, take(cost), report)
    }

    /// [`take_key`](Self::take_key) as a future that borrows nothing: the answer
    /// and, if `reporting`, how every limit stands (else nothing).
    fn take_key_async<Q>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        cost: u64,
        reporting: bool,
    ) -> Reporting
    where
        S: Store<Q, A>,
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq,
    {
        let mut report = Vec::new();
        let taking = match self.plan(key, now, cost, reporting.then_some(&mut report)) {
            Plan::Leased(decision) => {
                return futures::future::ready(Ok(((decision, Receipt::NONE), report))).boxed()
            }
            Plan::Store => return ask(&*self.inner, algorithm, key, now, take(cost), reporting),
            Plan::Lease(taking) => taking,
        };
        let lease = ask(
            &*self.inner,
            algorithm,
            key,
            now,
            take(self.size),
            reporting,
        );
        let (inner, algorithm) = (Arc::clone(&self.inner), algorithm.clone());
        let key: K = key.to_owned();
        let sizes = (self.size, self.period);
        async move {
            let ((grant, _), each) = lease.await?;
            let mut report = Vec::new();
            let asked = reporting.then_some(&mut report);
            if let Some(decision) = Self::settle(sizes, taking, now, cost, &grant, each, asked) {
                return Ok(((decision, Receipt::NONE), report));
            }
            ask(&*inner, &algorithm, &key, now, take(cost), reporting).await
        }
        .boxed()
    }
}

/// `step` on `key` from `store`, blocking: the answer, and with `report` how every
/// limit stands after it, pushed into it.
fn ask_blocking<S, K, A>(
    store: &S,
    algorithm: &A,
    key: &K,
    now: Nanos,
    step: Operation<'_>,
    report: Option<&mut Vec<Decision>>,
) -> Result<(Decision, Receipt), Error>
where
    S: Store<K, A>,
    K: ?Sized,
    A: Algorithm,
{
    match report {
        Some(report) => store.apply_key_each(algorithm, key, now, step, &mut |d| report.push(d)),
        None => store.apply_key(algorithm, key, now, step),
    }
}

/// `step` on `key` from `store`, as a future that borrows nothing: the answer
/// and, if `reporting`, how every limit stands after it (else nothing).
fn ask<S, K, A>(
    store: &S,
    algorithm: &A,
    key: &K,
    now: Nanos,
    step: Operation<'_>,
    reporting: bool,
) -> Reporting
where
    S: Store<K, A>,
    A: Algorithm,
{
    if reporting {
        return store.apply_key_each_async(algorithm, key, now, step);
    }
    let pending = store.apply_async(algorithm, std::slice::from_ref(key), now, step);
    async move {
        let answer = pending
            .await?
            .into_iter()
            .next()
            .ok_or(Error::InvalidCount {
                what: "store answers",
                value: 0,
                requirement: "one per key",
            })?;
        Ok((answer, Vec::new()))
    }
    .boxed()
}

/// True for a cancel that has something to give back: not only leased grants.
fn gives_back(receipts: &[Receipt]) -> bool {
    receipts.iter().any(|r| !r.is_none())
}

/// For `K` and its borrowed form (`str` for `String` keys), as the inner
/// store answers them.
impl<S, K, Q, A> Store<Q, A> for LeasedStore<S, K, A>
where
    S: Store<Q, A> + Store<K, A> + 'static,
    K: Hash + Eq + Clone + Send + Sync + 'static,
    K: Borrow<Q>,
    Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    A: Algorithm + Clone,
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
        if let ([key], Some(cost)) = (keys, self.leasable(step)) {
            out[0] = self.take_key(algorithm, key, now, cost, None)?;
            return Ok(());
        }
        if let Operation::Cancel { receipts, .. } = step
            && !gives_back(receipts)
        {
            return Ok(());
        }
        Store::<Q, A>::apply(&*self.inner, algorithm, keys, now, step, out)
    }

    fn apply_key<R: Report>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<R, Error> {
        if let Some(cost) = self.leasable(step) {
            let (decision, receipt) = self.take_key(algorithm, key, now, cost, None)?;
            return Ok(R::decided(decision, receipt));
        }
        if let Operation::Cancel { receipts, .. } = step
            && !gives_back(receipts)
        {
            let (decision, receipt) = crate::stores::store::blank();
            return Ok(R::decided(decision, receipt));
        }
        Store::<Q, A>::apply_key(&*self.inner, algorithm, key, now, step)
    }

    /// A leasable step as [`apply_key`](Store::apply_key) takes it, reporting
    /// every limit as the store reported it with the lease (see the module docs);
    /// any other step the inner store's.
    fn apply_key_each(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
        if let Some(cost) = self.leasable(step) {
            let mut report = Vec::new();
            let answer = self.take_key(algorithm, key, now, cost, Some(&mut report))?;
            report.into_iter().for_each(each);
            return Ok(answer);
        }
        Store::<Q, A>::apply_key_each(&*self.inner, algorithm, key, now, step, each)
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
        if let Some(cost) = self.leasable(step) {
            return self.take_key_async(algorithm, key, now, cost, true);
        }
        Store::<Q, A>::apply_key_each_async(&*self.inner, algorithm, key, now, step)
    }

    const ANSWERS_AT_ONCE: bool = <S as Store<Q, A>>::ANSWERS_AT_ONCE;

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
        if let ([key], Some(cost)) = (keys, self.leasable(step)) {
            let answer = self.take_key_async(algorithm, key, now, cost, false);
            return answer.map_ok(|(answer, _)| vec![answer]).boxed();
        }
        if let Operation::Cancel { receipts, .. } = step
            && !gives_back(receipts)
        {
            let answers = vec![crate::stores::store::blank(); keys.len()];
            return futures::future::ready(Ok(answers)).boxed();
        }
        Store::<Q, A>::apply_async(&*self.inner, algorithm, keys, now, step).boxed()
    }

    /// Leased grants give back nothing; the inner store's grants go back to it.
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
        if gives_back(receipts) {
            Store::<Q, A>::cancel_detached(&*self.inner, algorithm, keys, now, receipts, acts_at);
        }
    }

    fn key_id(&self, key: &Q) -> Option<u64> {
        Store::<Q, A>::key_id(&*self.inner, key)
    }
}
