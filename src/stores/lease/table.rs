//! The lease table: at most one lease per key in this process, a cap on keys, and
//! leases that have ended forgotten lazily, in callers' calls.

use crate::algorithms::{Decision, Source};
use crate::clock::Nanos;
use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// One key's lease in this process.
#[derive(Debug, Default)]
pub(super) struct Lease {
    /// Permits left to spend.
    left: u64,
    /// The store's `remaining` right after it granted the lease.
    store_remaining: u64,
    /// The grant's `limit` and `limit_index`, which every leased decision repeats.
    limit: u64,
    limit_index: u32,
    /// The source every decision from this lease names: `Leased`, or the grant's
    /// own when a failure policy made it (no limit was consulted for the lease,
    /// or only a local one, and its decisions say so).
    source: Source,
    /// When the state the lease came from is replenished, on the callers' time.
    reset_at: Nanos,
    /// When the lease was granted, on the callers' time.
    granted_at: Nanos,
    /// How every limit stood right after the store granted the lease, when the
    /// call that took it asked (a reporting call); empty otherwise.
    each: Vec<Decision>,
    /// When the lease ends: its period after the grant, or the grant's reset if
    /// that comes first. Zero (the default) for no lease.
    expires_at: Nanos,
    /// Until when no lease is asked for, as the store refused the last one.
    refused_until: Nanos,
    /// A call is asking the store for a lease of this key now.
    taking: bool,
}

impl Lease {
    /// Spends `cost` from a live lease holding at least that much: the decision,
    /// or `None` (the lease has ended or holds too little).
    pub(super) fn spend(&mut self, now: Nanos, cost: u64) -> Option<Decision> {
        if now >= self.expires_at || self.left < cost {
            return None;
        }
        self.left -= cost;
        Some(self.decision(now))
    }

    /// How every limit stands after a spend at `now`, into `each`: each limit as
    /// the store reported it with the lease, with what is left of the lease added
    /// to its `remaining` and its durations counted down, as the leased decision
    /// is; that decision alone if the lease was taken without a report.
    pub(super) fn report(&self, now: Nanos, each: &mut Vec<Decision>) {
        if self.each.is_empty() {
            each.push(self.decision(now));
            return;
        }
        let elapsed = now.saturating_sub(self.granted_at);
        let later = |d: &Decision| d.later(elapsed, self.left, self.source);
        each.extend(self.each.iter().map(later));
    }

    /// A leased grant: allowed at once, `remaining` the store's remaining at the
    /// grant plus what is left here.
    fn decision(&self, now: Nanos) -> Decision {
        let remaining = self.store_remaining.saturating_add(self.left);
        Decision::allowed(self.limit, remaining, self.reset_at.saturating_sub(now))
            .with_limit_index(self.limit_index)
            .with_source(self.source)
    }

    /// True, and marked as taking, if a call should ask the store for a lease now:
    /// no other call is, and the store did not refuse the last one too recently.
    pub(super) fn begin_taking(&mut self, now: Nanos) -> bool {
        if self.taking || now < self.refused_until {
            return false;
        }
        self.taking = true;
        true
    }

    /// Installs the store's grant of a lease of `size` at `now` (whatever is left
    /// of the previous lease is dropped), with how every limit stood after it
    /// (`each`, empty if not reported), and spends `cost` from it.
    pub(super) fn granted(
        &mut self,
        now: Nanos,
        size: u64,
        cost: u64,
        period: Nanos,
        grant: &Decision,
        each: Vec<Decision>,
    ) -> Decision {
        let reset_after = grant.reset_after_nanos();
        self.taking = false;
        self.left = size - cost;
        self.store_remaining = grant.remaining();
        self.limit = grant.limit();
        self.limit_index = grant.limit_index();
        self.source = if grant.source().is_degraded() {
            grant.source()
        } else {
            Source::Leased
        };
        self.reset_at = now.saturating_add(reset_after);
        self.granted_at = now;
        self.each = each;
        self.expires_at = now.saturating_add(period.min(reset_after));
        self.decision(now)
    }

    /// Records the store's refusal of a lease at `now`: none is asked for again
    /// until the refusal's `retry_after` (one `period` for a never).
    pub(super) fn refused(&mut self, now: Nanos, period: Nanos, refusal: &Decision) {
        self.taking = false;
        let wait = if refusal.is_never() {
            period
        } else {
            refusal.retry_after_nanos()
        };
        self.refused_until = now.saturating_add(wait);
    }

    /// Ends the taking of a lease that got no answer.
    pub(super) fn abandon(&mut self) {
        self.taking = false;
    }

    /// When this entry stops mattering: its lease has ended and a refusal no
    /// longer holds, so forgetting it changes no decision; `None` while a call is
    /// taking a lease.
    fn ends_at(&self) -> Option<Nanos> {
        (!self.taking).then(|| self.expires_at.max(self.refused_until))
    }

    /// The permits left to spend.
    pub(super) fn left(&self) -> u64 {
        self.left
    }
}

/// One key's entry, shared by the calls that use it.
pub(super) type Slot = Arc<Mutex<Lease>>;

/// Locks a lease; a poisoned lock still holds a consistent lease (every change
/// is a few assignments that cannot panic).
pub(super) fn lock(slot: &Mutex<Lease>) -> MutexGuard<'_, Lease> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The leases of this process, one per key, at most `max_keys` of them.
pub(super) struct Table<K> {
    keys: Mutex<Keys<K>>,
    max_keys: usize,
}

struct Keys<K> {
    slots: HashMap<K, Slot>,
    /// No entry can be forgotten before this time: a full table is swept only
    /// once it has come.
    sweep_at: Nanos,
}

impl<K: Hash + Eq + Clone> Table<K> {
    /// An empty table of at most `max_keys` keys.
    pub(super) fn new(max_keys: usize) -> Self {
        Table {
            keys: Mutex::new(Keys {
                slots: HashMap::new(),
                sweep_at: 0,
            }),
            max_keys,
        }
    }

    /// `key`'s entry, made if need be; `None` if the table is full of entries
    /// that still matter (the call then goes to the store).
    pub(super) fn slot<Q>(&self, key: &Q, now: Nanos) -> Option<Slot>
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = keys.slots.get(key) {
            return Some(Arc::clone(slot));
        }
        if keys.slots.len() >= self.max_keys {
            keys.sweep(now);
            if keys.slots.len() >= self.max_keys {
                return None;
            }
        }
        let slot = Slot::default();
        keys.slots.insert(key.to_owned(), Arc::clone(&slot));
        // A new entry may end before anything the last sweep saw (after a sweep
        // that left the table empty, nothing at all was due): as the sweep rules
        // for an entry without a lease, the next full table looks again.
        keys.sweep_at = keys.sweep_at.min(now.saturating_add(1));
        Some(slot)
    }

    /// The cap on keys.
    pub(super) fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// The number of keys held now.
    pub(super) fn len(&self) -> usize {
        let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        keys.slots.len()
    }

    /// The permits left in `key`'s lease, if it has one live at `now`.
    pub(super) fn left<Q>(&self, key: &Q, now: Nanos) -> u64
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        keys.slots.get(key).map_or(0, |slot| {
            let lease = lock(slot);
            if now < lease.expires_at {
                lease.left()
            } else {
                0
            }
        })
    }
}

impl<K> Keys<K> {
    /// Forgets every entry that no call holds and that no longer matters at
    /// `now`, unless none can have ended since the last sweep.
    fn sweep(&mut self, now: Nanos) {
        if now < self.sweep_at {
            return;
        }
        let mut next = Nanos::MAX;
        self.slots.retain(|_, slot| {
            if Arc::strong_count(slot) > 1 {
                next = next.min(now.saturating_add(1));
                return true;
            }
            match lock(slot).ends_at() {
                Some(end) if end <= now => false,
                Some(end) => {
                    next = next.min(end);
                    true
                }
                None => {
                    next = next.min(now.saturating_add(1));
                    true
                }
            }
        });
        self.sweep_at = next;
    }
}
