//! The shards and the upkeep every call pays for: the shard a key's hash picks,
//! the cap's count of held keys, adding a key, and the lazy sweeps that forget
//! replenished keys (see the [module docs](super)).

use super::table::Table;
use super::MemoryStore;
use crate::algorithms::Algorithm;
use crate::clock::Nanos;
use crate::error::Error;
use parking_lot::Mutex;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Every this many calls on a shard, the sweep looks at one slot. Rare enough that
/// a key used steadily below its rate (so replenished between calls) is seldom
/// forgotten and re-added; frequent enough that a shard whose keys went idle
/// shrinks after a few passes of ordinary traffic.
const TICK_SWEEP_EVERY: u32 = 16;
/// Slots the sweep looks at on a refusal of a full store between two full sweeps.
const REFUSAL_SWEEP: usize = 4;

/// One shard, alone on its cache lines so that two shards' locks never share one.
#[repr(align(128))]
pub(super) struct Shard<S> {
    pub(super) inner: Mutex<ShardState<S>>,
    /// The table's length, published after each call for [`MemoryStore::live_keys`]
    /// (a plain store under the lock, not a shared counter every call would contend on).
    pub(super) len: AtomicUsize,
}

pub(super) struct ShardState<S> {
    pub(super) table: Table<S>,
    /// Calls since the shard was created (wrapping), to pace the sweep.
    ticks: u32,
    /// New keys refused since the last full sweep done to make room.
    refused: usize,
}

impl<S: Clone> Shard<S> {
    pub(super) fn new() -> Self {
        Shard {
            inner: Mutex::new(ShardState {
                table: Table::new(),
                ticks: 0,
                refused: 0,
            }),
            len: AtomicUsize::new(0),
        }
    }
}

pub(super) fn default_shards() -> usize {
    let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
    (cores * 8).next_power_of_two().clamp(16, 4096)
}

impl<K, A: Algorithm, H> MemoryStore<K, A, H> {
    /// Claims room for `count` new keys under the cap. Uncapped stores keep no
    /// global count, so adding a key touches no shared counter.
    pub(super) fn claim(&self, count: usize) -> bool {
        if self.max_keys == usize::MAX {
            return true;
        }
        self.live
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
                live.checked_add(count)
                    .filter(|&total| total <= self.max_keys)
            })
            .is_ok()
    }

    fn release(&self, count: usize) {
        if count > 0 && self.max_keys != usize::MAX {
            self.live.fetch_sub(count, Ordering::Relaxed);
        }
    }
}

impl<K, A: Algorithm, H: BuildHasher> MemoryStore<K, A, H> {
    #[inline]
    pub(super) fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        // 0 marks an empty slot.
        self.hasher.hash_one(key).max(1)
    }

    #[inline]
    pub(super) fn shard_of(&self, hash: u64) -> usize {
        // Low bits pick the shard; the table's home slot comes from the high bits.
        (hash as usize) & (self.shards.len() - 1)
    }

    /// Forgets replenished keys of a shard to make room under the cap: all of them
    /// on the first refusal since a key was last added to the shard and once per
    /// quarter of the shard's size in further refusals; the next few slots of the
    /// sweep cursor on the refusals in between. A flood of new keys into a full
    /// store thus costs O(1) amortized per call, never a scan each, and room that
    /// time has made is still found within a quarter-shard of refusals.
    pub(super) fn sweep_for_room(
        &self,
        shard: &mut ShardState<A::State>,
        algorithm: &A,
        now: Nanos,
    ) {
        let empty = algorithm.initial_state(0);
        let forget = |state: &A::State| algorithm.is_replenished(state, now);
        let freed = if shard.refused > 0 && shard.refused < shard.table.len() / 4 {
            shard.refused += 1;
            shard.table.sweep(REFUSAL_SWEEP, &empty, forget)
        } else {
            shard.refused = 1;
            shard.table.sweep_all(&empty, forget)
        };
        self.release(freed);
        shard.table.maybe_shrink(&empty);
    }

    /// Adds a key whose room under the cap is already claimed.
    pub(super) fn insert(
        &self,
        shard: &mut ShardState<A::State>,
        hash: u64,
        state: A::State,
        algorithm: &A,
        now: Nanos,
    ) {
        shard.refused = 0;
        let empty = algorithm.initial_state(0);
        let forget = |state: &A::State| algorithm.is_replenished(state, now);
        if !shard.table.has_room() {
            let freed = shard.table.sweep_all(&empty, forget);
            self.release(freed);
            if shard.table.is_crowded() {
                shard.table.grow(&empty);
            } else {
                shard.table.maybe_shrink(&empty);
            }
        }
        shard.table.insert(hash, state, &empty);
    }

    /// The pacing sweep every call pays for.
    #[inline]
    pub(super) fn tick(&self, shard: &mut ShardState<A::State>, algorithm: &A, now: Nanos) {
        shard.ticks = shard.ticks.wrapping_add(1);
        if shard.ticks % TICK_SWEEP_EVERY != 0 {
            return;
        }
        let empty = algorithm.initial_state(0);
        let freed = shard
            .table
            .sweep(1, &empty, |state| algorithm.is_replenished(state, now));
        self.release(freed);
        // Halves a table below 1/4 full (a check of two numbers otherwise), also
        // one that a sweep for room emptied: shrinking a step per tick keeps the
        // rebuilds' cost proportional to what they save.
        shard.table.maybe_shrink(&empty);
    }

    pub(super) fn full(&self) -> Error {
        Error::StoreFull {
            max_keys: self.max_keys as u64,
        }
    }
}
