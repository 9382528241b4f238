//! What the store-wrapper tests share (`memory_store_from_docs`,
//! `deny_cache_from_docs`, `leases_from_docs`, `failover_from_docs`,
//! `wrappers_on_the_real_clock_from_docs`): `Probe`, a store of their own that
//! wraps any store behind an `Arc`, so that several wrappers share one inner store,
//! counts the steps it is asked for and the permits its inner store granted, and
//! can be switched to fail or be held mid-step; and the units and the sourceless
//! comparison of two decisions they use.

use futures::future;
use sluicegate::algorithms::{Algorithm, Decision, Receipt, Report};
use sluicegate::clock::Nanos;
use sluicegate::stores::store::Reporting;
use sluicegate::stores::{Operation, Store};
use sluicegate::{Applied, Error, Source, StoreError};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

pub(crate) const MS: Nanos = 1_000_000;
pub(crate) const SEC: Nanos = 1_000_000_000;

// ---------------------------------------------------------------------------
// A store of our own: counts, fails on demand, holds a step mid-way.
// ---------------------------------------------------------------------------

pub(crate) const UP: u8 = 0;
pub(crate) const DOWN: u8 = 1;
pub(crate) const BAD_INPUT: u8 = 2;

const PAUSE_OFF: u8 = 0;
const PAUSE_ARMED: u8 = 1;
const PAUSE_ENTERED: u8 = 2;
const PAUSE_RELEASED: u8 = 3;

#[derive(Default)]
struct Tally {
    /// Steps asked for, cancels included, failed ones included.
    calls: AtomicU64,
    /// Cancels asked for (`Operation::Cancel` and detached cancels).
    cancels: AtomicU64,
    /// Permits the inner store granted to reserves, summed over keys.
    granted: AtomicU64,
    mode: AtomicU8,
    pause: Mutex<u8>,
    paused: Condvar,
}

impl Tally {
    /// Counts a step, holds it while a pause is armed, and fails it as the mode says.
    pub(crate) fn enter(&self, cancel: bool) -> Result<(), Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if cancel {
            self.cancels.fetch_add(1, Ordering::SeqCst);
        }
        let mut pause = self.pause.lock().unwrap();
        if *pause == PAUSE_ARMED {
            *pause = PAUSE_ENTERED;
            self.paused.notify_all();
            while *pause != PAUSE_RELEASED {
                pause = self.paused.wait(pause).unwrap();
            }
            *pause = PAUSE_OFF;
        }
        drop(pause);
        match self.mode.load(Ordering::SeqCst) {
            DOWN => Err(Error::Store(StoreError::new(
                "probe",
                Applied::No,
                "connection refused",
            ))),
            BAD_INPUT => Err(Error::InvalidKeys {
                why: "the probe refuses these keys",
                help: "none",
            }),
            _ => Ok(()),
        }
    }

    pub(crate) fn note<'a>(
        &self,
        reserve_cost: Option<u64>,
        decisions: impl Iterator<Item = &'a Decision>,
    ) {
        if let Some(cost) = reserve_cost {
            let allowed = decisions.filter(|d| d.is_allowed()).count() as u64;
            self.granted.fetch_add(cost * allowed, Ordering::SeqCst);
        }
    }
}

fn reserve_cost(step: &Operation<'_>) -> Option<u64> {
    match step {
        Operation::Reserve { cost, .. } => Some(*cost),
        _ => None,
    }
}

fn is_cancel(step: &Operation<'_>) -> bool {
    matches!(step, Operation::Cancel { .. })
}

pub(crate) struct Probe<S> {
    inner: Arc<S>,
    tally: Arc<Tally>,
}

impl<S> Clone for Probe<S> {
    fn clone(&self) -> Self {
        Probe {
            inner: Arc::clone(&self.inner),
            tally: Arc::clone(&self.tally),
        }
    }
}

impl<S> Probe<S> {
    pub(crate) fn new(inner: S) -> Self {
        Probe {
            inner: Arc::new(inner),
            tally: Arc::new(Tally::default()),
        }
    }
    pub(crate) fn calls(&self) -> u64 {
        self.tally.calls.load(Ordering::SeqCst)
    }
    pub(crate) fn cancels(&self) -> u64 {
        self.tally.cancels.load(Ordering::SeqCst)
    }
    pub(crate) fn granted(&self) -> u64 {
        self.tally.granted.load(Ordering::SeqCst)
    }
    pub(crate) fn set(&self, mode: u8) {
        self.tally.mode.store(mode, Ordering::SeqCst);
    }
    /// The next step to arrive stops until `release`.
    pub(crate) fn arm_pause(&self) {
        *self.tally.pause.lock().unwrap() = PAUSE_ARMED;
    }
    pub(crate) fn wait_until_paused(&self) {
        let mut pause = self.tally.pause.lock().unwrap();
        while *pause != PAUSE_ENTERED {
            pause = self.tally.paused.wait(pause).unwrap();
        }
    }
    pub(crate) fn release(&self) {
        *self.tally.pause.lock().unwrap() = PAUSE_RELEASED;
        self.tally.paused.notify_all();
    }
}

type Boxed = Pin<Box<dyn Future<Output = Result<Vec<(Decision, Receipt)>, Error>> + Send>>;

impl<Q, A, S> Store<Q, A> for Probe<S>
where
    Q: ?Sized,
    A: Algorithm,
    S: Store<Q, A> + 'static,
{
    type Pending = Boxed;

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
        self.tally.enter(is_cancel(&step))?;
        self.inner.apply(algorithm, keys, now, step, out)?;
        self.tally
            .note(reserve_cost(&step), out.iter().map(|(d, _)| d));
        Ok(())
    }

    fn apply_key<R: Report>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<R, Error> {
        self.tally.enter(is_cancel(&step))?;
        let (decision, receipt): (Decision, Receipt) =
            self.inner.apply_key(algorithm, key, now, step)?;
        self.tally
            .note(reserve_cost(&step), std::iter::once(&decision));
        Ok(R::decided(decision, receipt))
    }

    fn apply_key_each(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
        self.tally.enter(is_cancel(&step))?;
        let answer = self.inner.apply_key_each(algorithm, key, now, step, each)?;
        self.tally
            .note(reserve_cost(&step), std::iter::once(&answer.0));
        Ok(answer)
    }

    fn apply_async(&self, algorithm: &A, keys: &[Q], now: Nanos, step: Operation<'_>) -> Boxed
    where
        Q: Sized,
    {
        if let Err(error) = self.tally.enter(is_cancel(&step)) {
            return Box::pin(future::ready(Err(error)));
        }
        let pending = self.inner.apply_async(algorithm, keys, now, step);
        let tally = Arc::clone(&self.tally);
        let cost = reserve_cost(&step);
        Box::pin(async move {
            let out = pending.await?;
            tally.note(cost, out.iter().map(|(d, _)| d));
            Ok(out)
        })
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
        if let Err(error) = self.tally.enter(is_cancel(&step)) {
            return Box::pin(future::ready(Err(error)));
        }
        let pending = self.inner.apply_key_each_async(algorithm, key, now, step);
        let tally = Arc::clone(&self.tally);
        let cost = reserve_cost(&step);
        Box::pin(async move {
            let out = pending.await?;
            tally.note(cost, std::iter::once(&out.0 .0));
            Ok(out)
        })
    }

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
        if self.tally.enter(true).is_ok() {
            self.inner
                .cancel_detached(algorithm, keys, now, receipts, acts_at);
        }
    }

    fn key_id(&self, key: &Q) -> Option<u64> {
        self.inner.key_id(key)
    }
}

/// A decision with its source set aside, to compare what two stores decided.
pub(crate) fn unsourced(d: Decision) -> Decision {
    d.with_source(Source::Store)
}

pub(crate) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

pub(crate) fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}
