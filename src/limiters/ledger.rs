//! The record of async waits that reserved the future, which lets waits abandoned
//! together give all their permits back.
//!
//! A grant is cancelled by Go's rule ([`Algorithm::cancel`]): its permits come back
//! only as far as grants made after it allow. Waits dropped together (equal
//! timeouts) are dropped in whatever order their tasks run; cancelled in that order,
//! each one that still has a later grant behind it gives back nothing. So the
//! waits of one limit, in the order they act (`acts_at`, ties in the order they
//! were recorded), are kept here while they sleep, and a dropped one is cancelled
//! only once no wait after it is still pending:
//!
//! * a dropped wait with a pending wait after it is marked abandoned, and its grant
//!   kept;
//! * a dropped wait with none after it is cancelled now, then every abandoned wait
//!   just before it, latest first, up to the first pending one;
//! * a wait that acts leaves, with the abandoned ones just before it; abandoned
//!   entries whose time to act has passed leave too. By the cancel rule, nothing
//!   would come back for them.
//!
//! So the last entry of a group is always a pending wait, and every abandoned
//! entry waits on a pending wait after it, which leaves by acting or by being
//! dropped: nothing stays once its waits have ended, and a group with no entry
//! leaves the map. Cancels run under the ledger's lock, so two cascades never
//! interleave.
//!
//! The direct limiter keeps one group; the keyed one a group per key, or per key
//! list for `acquire_all`. Only a wait that sleeps is recorded: a grant that acts
//! at once, a try or a check never touches the ledger.
//!
//! [`Algorithm::cancel`]: crate::algorithms::Algorithm::cancel

use crate::clock::Nanos;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};

/// The waits of one limiter, grouped by the state they reserved on; `T` is what a
/// cancel needs (a receipt, or the keys and receipts of a keyed grant).
pub(crate) struct Ledger<T> {
    books: Mutex<Books<T>>,
}

struct Books<T> {
    /// The next entry's number: ties in `acts_at` keep the order of recording.
    next: u64,
    groups: HashMap<u64, VecDeque<Entry<T>>>,
}

struct Entry<T> {
    acts_at: Nanos,
    number: u64,
    /// The grant of a wait that was dropped and not yet cancelled; `None` while the
    /// wait is pending.
    abandoned: Option<T>,
}

/// A recorded wait: where its entry is.
#[derive(Debug)]
pub(crate) struct Ticket {
    group: u64,
    acts_at: Nanos,
    number: u64,
}

/// The map keeps its table while empty unless it grew past this many groups.
const KEPT_GROUPS: usize = 64;

impl<T> Default for Ledger<T> {
    fn default() -> Self {
        Ledger {
            books: Mutex::new(Books {
                next: 0,
                groups: HashMap::new(),
            }),
        }
    }
}

impl<T> Ledger<T> {
    /// Records a pending wait on `group` that acts at `acts_at`.
    pub(crate) fn enter(&self, group: u64, acts_at: Nanos) -> Ticket {
        let mut books = self.books.lock();
        let number = books.next;
        books.next = number.wrapping_add(1);
        let entries = books.groups.entry(group).or_default();
        let at = entries.partition_point(|e| (e.acts_at, e.number) < (acts_at, number));
        entries.insert(
            at,
            Entry {
                acts_at,
                number,
                abandoned: None,
            },
        );
        Ticket {
            group,
            acts_at,
            number,
        }
    }

    /// The wait acted: its entry leaves, with the abandoned entries before it
    /// (their time to act has come too, so nothing would come back for them).
    pub(crate) fn act(&self, ticket: Ticket) {
        let mut books = self.books.lock();
        let Some(entries) = books.groups.get_mut(&ticket.group) else {
            return;
        };
        if let Some(mut at) = find(entries, &ticket) {
            entries.remove(at);
            while at > 0 && entries[at - 1].abandoned.is_some() {
                entries.remove(at - 1);
                at -= 1;
            }
        }
        prune(entries, ticket.acts_at);
        books.forget_if_empty(ticket.group);
    }

    /// The wait was dropped at `now`, holding `grant`. `cancel(grant, acts_at)` is
    /// called for every grant given back now (this one and the abandoned ones it
    /// frees), latest first, under the ledger's lock.
    pub(crate) fn abandon(
        &self,
        ticket: Ticket,
        grant: T,
        now: Nanos,
        mut cancel: impl FnMut(T, Nanos),
    ) {
        let mut books = self.books.lock();
        let Some(entries) = books.groups.get_mut(&ticket.group) else {
            // Not recorded (cannot happen): Go's rule, at once.
            cancel(grant, ticket.acts_at);
            return;
        };
        prune(entries, now);
        let Some(at) = find(entries, &ticket) else {
            cancel(grant, ticket.acts_at);
            return;
        };
        if ticket.acts_at < now {
            // Its time to act has passed: by the cancel rule nothing comes back.
            entries.remove(at);
        } else if at + 1 < entries.len() {
            // A later wait is pending: give back once it has gone.
            entries[at].abandoned = Some(grant);
        } else {
            entries.pop_back();
            cancel(grant, ticket.acts_at);
            while let Some(entry) = entries.back_mut() {
                let Some(earlier) = entry.abandoned.take() else {
                    break;
                };
                let acts_at = entry.acts_at;
                entries.pop_back();
                cancel(earlier, acts_at);
            }
        }
        books.forget_if_empty(ticket.group);
    }

    /// How many waits `group` holds, pending or abandoned (for tests).
    #[cfg(test)]
    fn len(&self, group: u64) -> usize {
        self.books
            .lock()
            .groups
            .get(&group)
            .map_or(0, VecDeque::len)
    }
}

impl<T> Books<T> {
    fn forget_if_empty(&mut self, group: u64) {
        if self.groups.get(&group).is_some_and(VecDeque::is_empty) {
            self.groups.remove(&group);
            if self.groups.is_empty() && self.groups.capacity() > KEPT_GROUPS {
                self.groups = HashMap::new();
            }
        }
    }
}

/// Where `ticket`'s entry is.
fn find<T>(entries: &VecDeque<Entry<T>>, ticket: &Ticket) -> Option<usize> {
    entries
        .binary_search_by(|e| (e.acts_at, e.number).cmp(&(ticket.acts_at, ticket.number)))
        .ok()
}

/// Drops the abandoned entries whose time to act is before `now`: by the cancel
/// rule nothing would come back for them. They are at the front.
fn prune<T>(entries: &mut VecDeque<Entry<T>>, now: Nanos) {
    let mut at = 0;
    while at < entries.len() && entries[at].acts_at < now {
        if entries[at].abandoned.is_some() {
            entries.remove(at);
        } else {
            at += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ledger of labelled grants, and the labels cancelled so far.
    fn cancels(
        ledger: &Ledger<&'static str>,
        ticket: Ticket,
        label: &'static str,
        now: Nanos,
    ) -> Vec<&'static str> {
        let mut out = Vec::new();
        ledger.abandon(ticket, label, now, |g, _| out.push(g));
        out
    }

    #[test]
    fn waits_dropped_first_to_last_are_cancelled_latest_first() {
        let ledger = Ledger::default();
        let a = ledger.enter(0, 10);
        let b = ledger.enter(0, 20);
        let c = ledger.enter(0, 30);
        assert!(cancels(&ledger, a, "a", 0).is_empty());
        assert!(cancels(&ledger, b, "b", 0).is_empty());
        assert_eq!(cancels(&ledger, c, "c", 0), ["c", "b", "a"]);
        assert_eq!(ledger.len(0), 0);
        assert!(ledger.books.lock().groups.is_empty());
    }

    #[test]
    fn a_pending_wait_stops_the_cascade_and_its_acting_clears_the_ones_before() {
        let ledger = Ledger::default();
        let a = ledger.enter(0, 10);
        let p = ledger.enter(0, 20);
        let c = ledger.enter(0, 30);
        assert!(cancels(&ledger, a, "a", 0).is_empty());
        assert_eq!(cancels(&ledger, c, "c", 0), ["c"]);
        assert_eq!(ledger.len(0), 2);
        ledger.act(p);
        assert_eq!(ledger.len(0), 0);
    }

    #[test]
    fn a_wait_past_its_time_gives_nothing_and_passed_abandoned_ones_leave() {
        let ledger = Ledger::default();
        let a = ledger.enter(0, 10);
        let b = ledger.enter(0, 20);
        let c = ledger.enter(0, 30);
        assert!(cancels(&ledger, a, "a", 5).is_empty());
        assert!(cancels(&ledger, b, "b", 25).is_empty()); // passed: gone, and so is a
        assert_eq!(ledger.len(0), 1);
        assert_eq!(cancels(&ledger, c, "c", 25), ["c"]);
    }

    #[test]
    fn groups_leave_once_their_waits_have_ended_and_a_large_table_goes_with_them() {
        let ledger = Ledger::<&str>::default();
        let tickets: Vec<Ticket> = (0..1000).map(|group| ledger.enter(group, 10)).collect();
        assert!(ledger.books.lock().groups.capacity() >= 1000);
        for ticket in tickets {
            ledger.act(ticket);
        }
        let books = ledger.books.lock();
        assert!(books.groups.is_empty());
        assert_eq!(books.groups.capacity(), 0);
    }

    #[test]
    fn ties_keep_the_order_of_recording_and_groups_are_apart() {
        let ledger = Ledger::default();
        let a = ledger.enter(0, 10);
        let other = ledger.enter(1, 50);
        let b = ledger.enter(0, 10);
        assert!(cancels(&ledger, a, "a", 0).is_empty());
        assert_eq!(cancels(&ledger, b, "b", 0), ["b", "a"]);
        assert_eq!(cancels(&ledger, other, "other", 0), ["other"]);
    }
}
