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
use futures::FutureExt;
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

    fn plan<Q>(&self, key: &Q, now: Nanos, cost: u64) -> Plan
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        let Some(slot) = self.table.slot(key, now) else {
            return Plan::Store;
        };
        let mut lease = lock(&slot);
        if let Some(decision) = lease.spend(now, cost) {
            return Plan::Leased(decision);
        }
        if !lease.begin_taking(now) {
            return Plan::Store;
        }
        drop(lease);
        Plan::Lease(Taking(slot))
    }

    /// Installs the store's answer to a lease: the leased decision if granted,
    /// `None` if refused (the call then asks for its own cost).
    fn settle(
        size: u64,
        period: Nanos,
        taking: Taking,
        now: Nanos,
        cost: u64,
        grant: &Decision,
    ) -> Option<Decision> {
        let mut lease = lock(&taking.0);
        if grant.is_allowed() {
            Some(lease.granted(now, size, cost, period, grant))
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
    /// A zero-wait reserve of `cost` (below the lease size) on `key`.
    fn take_key<Q>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        cost: u64,
    ) -> Result<(Decision, Receipt), Error>
    where
        S: Store<Q, A>,
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        match self.plan(key, now, cost) {
            Plan::Leased(decision) => return Ok((decision, Receipt::NONE)),
            Plan::Store => {}
            Plan::Lease(taking) => {
                let (grant, _) = Store::<Q, A>::apply_key::<(Decision, Receipt)>(
                    &*self.inner,
                    algorithm,
                    key,
                    now,
                    take(self.size),
                )?;
                let settled = Self::settle(self.size, self.period, taking, now, cost, &grant);
                if let Some(decision) = settled {
                    return Ok((decision, Receipt::NONE));
                }
            }
        }
        Store::<Q, A>::apply_key(&*self.inner, algorithm, key, now, take(cost))
    }

    /// [`take_key`](Self::take_key) as a future that borrows nothing.
    fn take_key_async<Q>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        cost: u64,
    ) -> BoxFuture<'static, Result<Vec<(Decision, Receipt)>, Error>>
    where
        S: Store<Q, A>,
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq,
    {
        let keys = std::slice::from_ref(key);
        let taking = match self.plan(key, now, cost) {
            Plan::Leased(decision) => {
                return futures::future::ready(Ok(vec![(decision, Receipt::NONE)])).boxed()
            }
            Plan::Store => {
                return Store::<Q, A>::apply_async(&*self.inner, algorithm, keys, now, take(cost))
                    .boxed()
            }
            Plan::Lease(taking) => taking,
        };
        let lease = Store::<Q, A>::apply_async(&*self.inner, algorithm, keys, now, take(self.size));
        let (inner, algorithm) = (Arc::clone(&self.inner), algorithm.clone());
        let key: K = key.to_owned();
        let (size, period) = (self.size, self.period);
        async move {
            let grant = lease.await?.into_iter().next().map(|(d, _)| d);
            let grant = grant.ok_or(Error::InvalidCount {
                what: "store answers",
                value: 0,
                requirement: "one per key",
            })?;
            if let Some(decision) = Self::settle(size, period, taking, now, cost, &grant) {
                return Ok(vec![(decision, Receipt::NONE)]);
            }
            let keys = std::slice::from_ref(&key);
            Store::<K, A>::apply_async(&*inner, &algorithm, keys, now, take(cost)).await
        }
        .boxed()
    }
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
            out[0] = self.take_key(algorithm, key, now, cost)?;
            return Ok(());
        }
        if let Operation::Cancel { receipts, .. } = step {
            if !gives_back(receipts) {
                return Ok(());
            }
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
            let (decision, receipt) = self.take_key(algorithm, key, now, cost)?;
            return Ok(R::decided(decision, receipt));
        }
        if let Operation::Cancel { receipts, .. } = step {
            if !gives_back(receipts) {
                let (decision, receipt) = crate::stores::store::blank();
                return Ok(R::decided(decision, receipt));
            }
        }
        Store::<Q, A>::apply_key(&*self.inner, algorithm, key, now, step)
    }

    /// The inner store's, so that every limit of a set is reported as the store
    /// has it.
    fn apply_key_each(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
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
            return self.take_key_async(algorithm, key, now, cost);
        }
        if let Operation::Cancel { receipts, .. } = step {
            if !gives_back(receipts) {
                let answers = vec![crate::stores::store::blank(); keys.len()];
                return futures::future::ready(Ok(answers)).boxed();
            }
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
