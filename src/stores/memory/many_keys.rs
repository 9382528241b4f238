//! A call on several keys: their shards locked in shard order, every key's step
//! run on a working copy, and the copies written back only once all of them are
//! granted and the new keys fit under the cap.

use super::shard::ShardState;
use super::table::Probe;
use super::MemoryStore;
use crate::algorithms::{Algorithm, Decision, Receipt};
use crate::clock::Nanos;
use crate::error::Error;
use crate::stores::store::Operation;
use parking_lot::MutexGuard;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::Ordering;

impl<K, A: Algorithm, H: BuildHasher> MemoryStore<K, A, H> {
    pub(super) fn apply_many<Q: Hash>(
        &self,
        algorithm: &A,
        keys: &[Q],
        now: Nanos,
        step: Operation<'_>,
        out: &mut [(Decision, Receipt)],
    ) -> Result<(), Error> {
        let hashes: Vec<u64> = keys.iter().map(|key| self.hash(key)).collect();
        let mut shard_ids: Vec<usize> = hashes.iter().map(|&h| self.shard_of(h)).collect();
        shard_ids.sort_unstable();
        shard_ids.dedup();
        // Locks are taken in shard order, so two multi-key calls never deadlock.
        let mut guards: Vec<MutexGuard<'_, ShardState<A::State>>> = shard_ids
            .iter()
            .map(|&id| self.shards[id].inner.lock())
            .collect();
        let lock_of: Vec<usize> = hashes
            .iter()
            .map(|&h| shard_ids.binary_search(&self.shard_of(h)).unwrap_or(0))
            .collect();
        let result = match step {
            Operation::Reserve { cost, max_wait } => self.reserve_many(
                algorithm,
                &hashes,
                &lock_of,
                &mut guards,
                now,
                (cost, max_wait),
                out,
            ),
            Operation::Peek { cost } => {
                let work = working_states(algorithm, &hashes, &lock_of, &guards);
                run_reserves(algorithm, work, &hashes, now, (cost, 0), out);
                for (_, receipt) in out.iter_mut() {
                    *receipt = Receipt::NONE;
                }
                Ok(())
            }
            Operation::Cancel { receipts, acts_at } => {
                for (index, &hash) in hashes.iter().enumerate() {
                    let receipt = receipts.get(index).cloned().unwrap_or(Receipt::NONE);
                    let table = &mut guards[lock_of[index]].table;
                    if let Probe::Found(at) = table.find(hash) {
                        algorithm.cancel(table.state_mut(at), now, &receipt, acts_at);
                    }
                }
                Ok(())
            }
        };
        for (guard, &id) in guards.iter_mut().zip(&shard_ids) {
            self.tick(guard, algorithm, now);
            self.shards[id]
                .len
                .store(guard.table.len(), Ordering::Relaxed);
        }
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn reserve_many(
        &self,
        algorithm: &A,
        hashes: &[u64],
        lock_of: &[usize],
        guards: &mut [MutexGuard<'_, ShardState<A::State>>],
        now: Nanos,
        request: (u64, Nanos),
        out: &mut [(Decision, Receipt)],
    ) -> Result<(), Error> {
        let mut swept = false;
        loop {
            let work = working_states(algorithm, hashes, lock_of, guards);
            let work = run_reserves(algorithm, work, hashes, now, request, out);
            if !out.iter().all(|(decision, _)| decision.is_allowed()) {
                return Ok(());
            }
            let new = work
                .iter()
                .filter(|w| !w.held && !algorithm.is_replenished(&w.state, now))
                .count();
            if new > 0 && !self.claim(new) {
                if swept {
                    return Err(self.full());
                }
                // Making room may forget keys this call read: start again from the
                // tables (forgetting changed no decision, only what is held).
                for guard in guards.iter_mut() {
                    self.sweep_for_room(guard, algorithm, now);
                }
                swept = true;
                continue;
            }
            // Existing keys first: inserting may move entries around.
            for w in work.iter().filter(|w| w.held) {
                let table = &mut guards[w.lock].table;
                if let Probe::Found(at) = table.find(w.hash) {
                    *table.state_mut(at) = w.state.clone();
                }
            }
            for w in work {
                if !w.held && !algorithm.is_replenished(&w.state, now) {
                    self.insert(&mut guards[w.lock], w.hash, w.state, algorithm, now);
                }
            }
            return Ok(());
        }
    }
}

/// The working copy of one distinct key's state during a multi-key call.
struct Work<S> {
    hash: u64,
    lock: usize,
    state: S,
    held: bool,
}

/// One working state per distinct hash, copied from the tables or fresh.
fn working_states<A: Algorithm>(
    algorithm: &A,
    hashes: &[u64],
    lock_of: &[usize],
    guards: &[MutexGuard<'_, ShardState<A::State>>],
) -> Vec<Work<A::State>> {
    let mut work: Vec<Work<A::State>> = Vec::with_capacity(hashes.len());
    for (index, &hash) in hashes.iter().enumerate() {
        if work.iter().any(|w| w.hash == hash) {
            continue;
        }
        let table = &guards[lock_of[index]].table;
        let (state, held) = match table.find(hash) {
            Probe::Found(at) => (table.state(at).clone(), true),
            Probe::Absent => (algorithm.initial_state(0), false),
        };
        work.push(Work {
            hash,
            lock: lock_of[index],
            state,
            held,
        });
    }
    work
}

/// Reserves on the working states in key order (a repeated key is charged again on
/// its updated copy), writing each key's decision and receipt.
fn run_reserves<A: Algorithm>(
    algorithm: &A,
    mut work: Vec<Work<A::State>>,
    hashes: &[u64],
    now: Nanos,
    (cost, max_wait): (u64, Nanos),
    out: &mut [(Decision, Receipt)],
) -> Vec<Work<A::State>> {
    for (index, &hash) in hashes.iter().enumerate() {
        if let Some(w) = work.iter_mut().find(|w| w.hash == hash) {
            out[index] = algorithm.reserve(&mut w.state, now, cost, max_wait);
        }
    }
    work
}
