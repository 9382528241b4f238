//! A call on one key: the key's shard locked, the step run on its state in place,
//! and a new key's state kept only if the step granted and left something to
//! remember.

use super::shard::ShardState;
use super::table::Probe;
use super::MemoryStore;
use crate::algorithms::{Algorithm, Decision, Receipt};
use crate::clock::Nanos;
use crate::error::Error;
use crate::stores::store::{self, Operation};
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::Ordering;

impl<K, A: Algorithm, H: BuildHasher> MemoryStore<K, A, H> {
    #[inline]
    pub(super) fn apply_one(
        &self,
        algorithm: &A,
        key: &K,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<(Decision, Receipt), Error>
    where
        K: Hash,
    {
        self.apply_one_with::<false>(algorithm, key, now, step, &mut |_| {})
    }

    /// [`apply_one`](Self::apply_one), also reporting every limit to `each` when
    /// `EACH` (see [`Algorithm::reserve_each`]); without it, the plain step.
    #[inline(always)]
    pub(super) fn apply_one_with<const EACH: bool>(
        &self,
        algorithm: &A,
        key: &K,
        now: Nanos,
        step: Operation<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error>
    where
        K: Hash,
    {
        self.locked(key, |shard, hash| {
            self.step_one::<EACH>(shard, algorithm, hash, now, step, each)
        })
    }

    /// [`Store::try_take_key`](crate::stores::Store::try_take_key): the algorithm's
    /// lean step under the shard's lock.
    #[inline]
    pub(super) fn try_take_one(
        &self,
        algorithm: &A,
        key: &K,
        now: Nanos,
        cost: u64,
    ) -> Result<Option<Decision>, Error>
    where
        K: Hash,
    {
        self.locked(key, |shard, hash| {
            let refusal = self.reserve_in(shard, algorithm, hash, now, |state| {
                let taken: Result<(), Decision> = algorithm.reserve(state, now, cost, 0);
                (taken.err(), taken.is_ok())
            })?;
            self.tick(shard, algorithm, now);
            Ok(refusal)
        })
    }

    /// Runs `f` on the shard of `key` (and the key's hash) under its lock, then
    /// publishes the shard's length.
    #[inline(always)]
    fn locked<R>(&self, key: &K, f: impl FnOnce(&mut ShardState<A::State>, u64) -> R) -> R
    where
        K: Hash,
    {
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
        if let Some(state) = fresh {
            if granted && !algorithm.is_replenished(&state, now) {
                if !self.claim(1) {
                    self.sweep_for_room(shard, algorithm, now);
                    if !self.claim(1) {
                        return Err(self.full());
                    }
                }
                self.insert(shard, hash, state, algorithm, now);
            }
        }
        Ok(answer)
    }

    #[inline]
    fn step_one<const EACH: bool>(
        &self,
        shard: &mut ShardState<A::State>,
        algorithm: &A,
        hash: u64,
        now: Nanos,
        step: Operation<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
        let answer = match step {
            Operation::Reserve { cost, max_wait } => {
                self.reserve_in(shard, algorithm, hash, now, |state| {
                    let answer = if EACH {
                        algorithm.reserve_each(state, now, cost, max_wait, &mut *each)
                    } else {
                        algorithm.reserve(state, now, cost, max_wait)
                    };
                    let allowed = answer.0.is_allowed();
                    (answer, allowed)
                })?
            }
            Operation::Peek { cost } => {
                let decision = match shard.table.find(hash) {
                    Probe::Found(at) => algorithm.peek(shard.table.state(at), now, cost),
                    Probe::Absent => algorithm.peek(&algorithm.initial_state(0), now, cost),
                };
                (decision, Receipt::NONE)
            }
            Operation::Cancel { receipts, acts_at } => {
                let receipt = receipts.first().cloned().unwrap_or(Receipt::NONE);
                if let Probe::Found(at) = shard.table.find(hash) {
                    algorithm.cancel(shard.table.state_mut(at), now, &receipt, acts_at);
                }
                store::blank()
            }
        };
        self.tick(shard, algorithm, now);
        Ok(answer)
    }
}
