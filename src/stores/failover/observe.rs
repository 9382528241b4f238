//! Seeing degradation without a metrics framework: counters read with
//! [`FailoverStore::stats`](super::FailoverStore::stats), and a callback for each
//! degraded decision ([`FailoverStore::on_degraded`](super::FailoverStore::on_degraded)).

use crate::algorithms::Source;
use crate::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One call a [`FailoverStore`](super::FailoverStore) answered by its failure
/// policy, as its [`on_degraded`](super::FailoverStore::on_degraded) callback sees
/// it.
///
/// ```
/// use sluicegate::algorithms::FixedWindow;
/// use sluicegate::stores::failover::{Event, FailoverStore, FailurePolicy, Unreachable};
/// use sluicegate::stores::Store;
/// use sluicegate::{Decision, Source};
/// use std::sync::{Arc, Mutex};
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = Arc::clone(&seen);
/// let store: FailoverStore<_, &str, FixedWindow> =
///     FailoverStore::new(Unreachable, FailurePolicy::Open).on_degraded(move |event: &Event<'_>| {
///         log.lock().unwrap().push((event.source, event.error.is_some()));
///     });
/// let window = FixedWindow::new(5, std::time::Duration::from_secs(1)).unwrap();
/// let step = sluicegate::stores::Operation::Reserve { cost: 1, max_wait: 0 };
/// let _: Decision = store.apply_key(&window, &"k", 0, step).unwrap(); // asks, fails, fails open
/// let _: Decision = store.apply_key(&window, &"k", 0, step).unwrap(); // backed off: not asked
/// assert_eq!(*seen.lock().unwrap(), [(Source::Unchecked, true), (Source::Unchecked, false)]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Event<'a> {
    /// Who answered the call instead of the inner store.
    pub source: Source,
    /// The inner store's failure, when this call asked it and it failed; `None`
    /// when the call was answered without asking (backed off, or another caller
    /// probing).
    pub error: Option<&'a Error>,
}

/// A snapshot of a [`FailoverStore`](super::FailoverStore)'s counters, each counted
/// since it was built. Decisions the inner store made are not counted (its hot
/// path touches no shared counter).
///
/// ```
/// use sluicegate::algorithms::FixedWindow;
/// use sluicegate::stores::failover::{FailoverStore, FailurePolicy, Unreachable};
/// use sluicegate::stores::{Operation, Store};
/// use sluicegate::Decision;
/// let store: FailoverStore<_, &str, FixedWindow> = FailoverStore::new(Unreachable, FailurePolicy::Closed);
/// let window = FixedWindow::new(5, std::time::Duration::from_secs(1)).unwrap();
/// let take = Operation::Reserve { cost: 1, max_wait: 0 };
/// for _ in 0..3 {
///     let _: Decision = store.apply_key(&window, &"k", 0, take).unwrap();
/// }
/// let stats = store.stats();
/// assert_eq!((stats.failures, stats.failed_closed, stats.unchecked), (1, 3, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Calls on which the inner store failed ([`Error::Store`]).
    pub failures: u64,
    /// Calls the local limit decided ([`Source::Local`]).
    pub local: u64,
    /// Calls let through unchecked ([`Source::Unchecked`]).
    pub unchecked: u64,
    /// Calls refused unchecked ([`Source::FailedClosed`]).
    pub failed_closed: u64,
    /// Probes sent to the inner store after a back-off.
    pub probes: u64,
    /// Probes that found the inner store answering again.
    pub recoveries: u64,
    /// Cancels of the inner store's grants dropped because it was backed off
    /// (their permits stay taken there).
    pub dropped_cancels: u64,
}

/// The live counters behind [`Stats`].
#[derive(Default)]
pub(super) struct Counters {
    failures: AtomicU64,
    local: AtomicU64,
    unchecked: AtomicU64,
    failed_closed: AtomicU64,
    probes: AtomicU64,
    recoveries: AtomicU64,
    dropped_cancels: AtomicU64,
}

/// What a counter counts.
#[derive(Clone, Copy)]
pub(super) enum Count {
    Failure,
    Probe,
    Recovery,
    DroppedCancel,
}

impl Counters {
    pub(super) fn add(&self, count: Count) {
        let counter = match count {
            Count::Failure => &self.failures,
            Count::Probe => &self.probes,
            Count::Recovery => &self.recoveries,
            Count::DroppedCancel => &self.dropped_cancels,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn add_decision(&self, source: Source) {
        let counter = match source {
            Source::Local => &self.local,
            Source::Unchecked => &self.unchecked,
            Source::FailedClosed => &self.failed_closed,
            Source::Store | Source::Leased | Source::Cached => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> Stats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Stats {
            failures: read(&self.failures),
            local: read(&self.local),
            unchecked: read(&self.unchecked),
            failed_closed: read(&self.failed_closed),
            probes: read(&self.probes),
            recoveries: read(&self.recoveries),
            dropped_cancels: read(&self.dropped_cancels),
        }
    }
}

/// The user's callback.
pub(super) type Observer = Arc<dyn Fn(&Event<'_>) + Send + Sync>;

/// Counts a degraded decision and tells the observer, if any.
pub(super) fn degraded(
    counters: &Counters,
    observer: Option<&Observer>,
    source: Source,
    error: Option<&Error>,
) {
    counters.add_decision(source);
    if let Some(observer) = observer {
        observer(&Event { source, error });
    }
}
