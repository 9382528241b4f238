//! A call on one key: the key's shard locked, the step run on its state in place,
//! and a new key's state kept only if the step granted and left something to
//! remember.

use super::shard::ShardState;
use super::table::Probe;
use super::MemoryStore;
use crate::algorithms::{Algorithm, Decision, Receipt, Report};
use crate::clock::Nanos;
use crate::error::Error;
use crate::stores::store::{self, Operation};
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::Ordering;

impl<K, A: Algorithm, H: BuildHasher> MemoryStore<K, A, H> {
    /// [`Store::apply_key`](crate::stores::Store::apply_key): the algorithm's step
    /// in the caller's report, under the shard's lock.
    #[inline]
    pub(super) fn apply_one<Q: Hash + ?Sized, R: Report>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<R, Error> {
        let reserve =
            |state: &mut A::State, cost, max_wait| algorithm.reserve(state, now, cost, max_wait);
        self.step_one(algorithm, key, now, step, reserve)
    }

    /// [`apply_one`](Self::apply_one) with its receipt, also reporting every
    /// limit to `each` (see [`Algorithm::reserve_each`]) under the same lock.
    #[inline]
    pub(super) fn apply_one_each<Q: Hash + ?Sized>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
        let reserve = |state: &mut A::State, cost, max_wait| {
            algorithm.reserve_each(state, now, cost, max_wait, &mut *each)
        };
        self.step_one(algorithm, key, now, step, reserve)
    }

    /// Runs `f` on the shard of `key` (and the key's hash) under its lock, then
    /// publishes the shard's length.
    #[inline(always)]
    fn locked<Q: Hash + ?Sized, R>(
        &self,
        key: &Q,
        f: impl FnOnce(&mut ShardState<A::State>, u64) -> R,
    ) -> R {
        let hash = self.hash(key);
        let home = &self.shards[self.shard_of(hash)];
        let mut guard = home.inner.lock();
        let result = f(&mut guard, hash);
        home.len.store(guard.table.len(), Ordering::Relaxed);
        result
    }

    /// Runs a reserving `step` on the state of `hash`, or on a new key's initial
    /// state, which is kept only if `step` granted (it answers that beside its
    /// answer) and left something to remember.
    #[inline(always)]
    fn reserve_in<R>(
        &self,
        shard: &mut ShardState<A::State>,
        algorithm: &A,
        hash: u64,
        now: Nanos,
        step: impl FnOnce(&mut A::State) -> (R, bool),
    ) -> Result<R, Error> {
        // One call site for `step`, so that it is inlined.
        let mut fresh = None;
        let state = match shard.table.find(hash) {
            Probe::Found(at) => shard.table.state_mut(at),
            Probe::Absent => fresh.insert(algorithm.initial_state(0)),
        };
        let (answer, granted) = step(state);
        if let Some(state) = fresh
            && granted
            && !algorithm.is_replenished(&state, now)
        {
            if !self.claim(1) {
                self.sweep_for_room(shard, algorithm, now);
                if !self.claim(1) {
                    return Err(self.full());
                }
            }
            self.insert(shard, hash, state, algorithm, now);
        }
        Ok(answer)
    }

    /// Runs `step` on the state of `key` under its shard's lock: a reserve by
    /// `reserve` (given the cost and the wait), a peek or a cancel by the
    /// algorithm's own.
    #[inline(always)]
    fn step_one<Q: Hash + ?Sized, R: Report>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
        reserve: impl FnOnce(&mut A::State, u64, Nanos) -> R,
    ) -> Result<R, Error> {
        self.locked(key, |shard, hash| {
            self.step_in(shard, algorithm, hash, now, step, reserve)
        })
    }

    /// [`step_one`](Self::step_one) on the locked shard, at the key's `hash`.
    #[inline(always)]
    fn step_in<R: Report>(
        &self,
        shard: &mut ShardState<A::State>,
        algorithm: &A,
        hash: u64,
        now: Nanos,
        step: Operation<'_>,
        reserve: impl FnOnce(&mut A::State, u64, Nanos) -> R,
    ) -> Result<R, Error> {
        let answer = match step {
            Operation::Reserve { cost, max_wait } => {
                self.reserve_in(shard, algorithm, hash, now, |state| {
                    let answer = reserve(state, cost, max_wait);
                    let granted = answer.is_granted();
                    (answer, granted)
                })?
            }
            Operation::Peek { cost } => {
                let decision = match shard.table.find(hash) {
                    Probe::Found(at) => algorithm.peek(shard.table.state(at), now, cost),
                    Probe::Absent => algorithm.peek(&algorithm.initial_state(0), now, cost),
                };
                R::decided(decision, Receipt::NONE)
            }
            Operation::Cancel { receipts, acts_at } => {
                let receipt = receipts.first().cloned().unwrap_or(Receipt::NONE);
                if let Probe::Found(at) = shard.table.find(hash) {
                    algorithm.cancel(shard.table.state_mut(at), now, &receipt, acts_at);
                }
                let (decision, receipt) = store::blank();
                R::decided(decision, receipt)
            }
        };
        self.tick(shard, algorithm, now);
        Ok(answer)
    }
}
