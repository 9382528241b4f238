//! The cache's table: refusals by key, in a fixed number of shards, each a
//! `HashMap` behind its own lock and holding at most its share of the entries.

use crate::algorithms::{Decision, Source};
use crate::clock::Nanos;
use parking_lot::Mutex;
use std::borrow::Borrow;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

/// Shards at most: enough that threads refused on different keys rarely meet on
/// one lock, few enough that a small table still gives each shard some room.
const SHARDS: usize = 16;

/// One cached refusal.
struct Entry {
    /// The store's refusal, as it answered it.
    decision: Decision,
    /// The cost it refused: the least cost the entry answers.
    cost: u64,
    /// When it was refused, in the callers' time.
    at: Nanos,
    /// When a retry could first succeed (`at + retry_after`): the entry answers
    /// only before it.
    until: Nanos,
    /// How every limit of a set stood with the refusal, when the call that got it
    /// asked (a reporting call). Shared, so that a hit takes it without a copy.
    each: Option<Arc<[Decision]>>,
}

/// A cached refusal found for a call: the refusal counted down to the call's time,
/// and how every limit stood with it, if that was kept.
pub(super) struct Hit {
    pub(super) refusal: Decision,
    each: Option<Arc<[Decision]>>,
    elapsed: Nanos,
}

impl Hit {
    /// Reports how every limit stands to `each`: as the store reported them with
    /// the refusal, counted down alike, or the refusal alone if that was not kept.
    pub(super) fn report(&self, each: &mut dyn FnMut(Decision)) {
        match &self.each {
            Some(limits) => {
                for d in limits.iter() {
                    each(d.later(self.elapsed, 0, Source::Cached));
                }
            }
            None => each(self.refusal),
        }
    }
}

struct Shard<K> {
    map: HashMap<K, Entry, RandomState>,
    /// No entry expires before this (a lower bound: removals leave it as it is),
    /// so that a full shard is searched for expired entries only when some may be.
    soonest: Nanos,
    /// Counts cancels of this shard's keys: a refusal learned across one is not
    /// kept, as the cancel may have given its permits back.
    cancels: u64,
    /// Calls this shard's entries answered.
    hits: u64,
}

/// What a lookup that found no answer returns, to pass back to
/// [`Table::learn`]: the shard's cancels at the time of the lookup.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ticket(u64);

impl Ticket {
    /// The ticket of a call whose answer is not to be kept.
    pub(super) const NONE: Ticket = Ticket(0);
}

pub(super) struct Table<K> {
    shards: Box<[Mutex<Shard<K>>]>,
    hasher: RandomState,
    per_shard: usize,
}

impl<K: Hash + Eq> Table<K> {
    /// A table of at most `max_entries` (at least 1) entries.
    pub(super) fn new(max_entries: usize) -> Self {
        let count = max_entries.clamp(1, SHARDS);
        let hasher = RandomState::new();
        let shards = (0..count)
            .map(|_| {
                Mutex::new(Shard {
                    map: HashMap::with_hasher(hasher.clone()),
                    soonest: Nanos::MAX,
                    cancels: 0,
                    hits: 0,
                })
            })
            .collect();
        Table {
            shards,
            hasher,
            per_shard: max_entries / count,
        }
    }

    /// The most entries the table holds.
    pub(super) fn max_entries(&self) -> usize {
        self.per_shard * self.shards.len()
    }

    /// The entries held now, expired ones not yet dropped included.
    pub(super) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map.len()).sum()
    }

    /// The calls answered from the table so far.
    pub(super) fn hits(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().hits).sum()
    }

    fn shard<Q: Hash + ?Sized>(&self, key: &Q) -> &Mutex<Shard<K>> {
        let index = self.hasher.hash_one(key) as usize % self.shards.len();
        &self.shards[index]
    }

    /// The cached refusal of `cost` on `key` at `now`, counted down to `now`;
    /// otherwise the ticket to learn the store's answer with. An entry answers a
    /// cost from its own up to its limit (a larger one may be refused as never).
    pub(super) fn lookup<Q>(&self, key: &Q, now: Nanos, cost: u64) -> Result<Hit, Ticket>
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        let mut shard = self.shard(key).lock();
        if let Some(entry) = shard.map.get(key) {
            if now >= entry.until {
                shard.map.remove(key);
            } else if cost >= entry.cost && cost <= entry.decision.limit() {
                let elapsed = now.saturating_sub(entry.at);
                let hit = Hit {
                    refusal: entry.decision.later(elapsed, 0, Source::Cached),
                    each: entry.each.clone(),
                    elapsed,
                };
                shard.hits += 1;
                return Ok(hit);
            }
        }
        Err(Ticket(shard.cancels))
    }

    /// Keeps `refusal` of `cost` on `key`, made at `now`, with how every limit
    /// stood (`each`: a set's report, or empty), unless a cancel of one of the
    /// shard's keys came since `ticket` was taken, or the shard is full of entries
    /// that have not expired (the refusal is then asked of the store next time, as
    /// it would be without the cache).
    pub(super) fn learn(
        &self,
        key: K,
        ticket: Ticket,
        now: Nanos,
        cost: u64,
        refusal: Decision,
        each: Vec<Decision>,
    ) {
        let until = now.saturating_add(refusal.retry_after_nanos());
        let mut shard = self.shard(&key).lock();
        if shard.cancels != ticket.0 {
            return;
        }
        if shard.map.len() >= self.per_shard && !shard.map.contains_key(&key) {
            if now < shard.soonest {
                return;
            }
            shard.map.retain(|_, entry| entry.until > now);
            shard.soonest = shard
                .map
                .values()
                .map(|e| e.until)
                .min()
                .unwrap_or(Nanos::MAX);
            if shard.map.len() >= self.per_shard {
                return;
            }
        }
        shard.soonest = shard.soonest.min(until);
        let entry = Entry {
            decision: refusal,
            cost,
            at: now,
            until,
            each: (!each.is_empty()).then(|| Arc::from(each)),
        };
        shard.map.insert(key, entry);
    }

    /// Drops `key`'s entry: a grant took more of its limit, so the entry's
    /// `remaining` no longer holds.
    pub(super) fn forget<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        let mut shard = self.shard(key).lock();
        if !shard.map.is_empty() {
            shard.map.remove(key);
        }
    }

    /// Drops `key`'s entry and any refusal of the shard's keys being learned: a
    /// cancel may give permits back.
    pub(super) fn cancelled<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        let mut shard = self.shard(key).lock();
        shard.cancels = shard.cancels.wrapping_add(1);
        shard.map.remove(key);
    }
}
