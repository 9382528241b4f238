//! One shard's table: Robin Hood open addressing over `(hash, state)` slots.
//!
//! ```text
//!   slots:  [ (h₁,s₁) | (0,·) | (h₂,s₂) | (h₃,s₃) | (0,·) | … ]   one Vec, 8 + size_of(State) bytes each
//!            hash 0 marks an empty slot (a real hash of 0 is stored as 1)
//!   home(h) = (h × capacity) >> 64      any capacity, not only powers of two
//! ```
//!
//! A key is represented by its 64-bit hash alone: no key is stored, no control
//! bytes, no per-entry allocation, which is what keeps a Guava bursty key at 16 bytes
//! per slot (see the store's docs for why two keys sharing a hash is safe). Robin Hood
//! probing keeps probe sequences short at a high load factor (7/8), and lets a lookup
//! for an absent key stop early; deletion shifts the following run back by one, so
//! there are no tombstones. A lookup in a small table compares the four slots from
//! the key's home without branching (see `WINDOW`), because *where* in its run a key
//! sits is unpredictable; large tables, whose lookups wait on memory anyway, use the
//! plain probe loop (see `WINDOW_MAX_SLOTS` for the measurements). Capacity grows by
//! half (not doubling) and the table shrinks when it falls below a quarter full, so
//! memory tracks the live keys closely.

/// How many slots a partial sweep may pass over per entry it looks at. The table
/// shrinks when it falls below a quarter full, so a run of this many empty slots is
/// all but impossible while it holds entries; a nearly empty small table costs a
/// walk of at most this many slots per step.
const SKIP_PER_STEP: usize = 16;

/// The most a table is filled before it grows: 7/8.
const MAX_LOAD_NUM: usize = 7;
const MAX_LOAD_DEN: usize = 8;
/// The smallest table allocated.
pub(crate) const MIN_CAPACITY: usize = 8;
/// Slots from a key's home that a lookup compares at once, without branching: four
/// 16-byte slots, one cache line or two adjacent ones. Tables are never smaller
/// (`MIN_CAPACITY`), so the window never laps the table.
const WINDOW: usize = 4;
/// Tables above this many slots (256 KiB of 16-byte slots; 4 MiB over 16 shards)
/// skip the window. Their first probe usually misses the cache, and then the plain
/// loop measured faster (about 105 vs 145 ns per check at 1M keys, 39 vs 40-80 at
/// 300k): its branch, predicted "found at home", lets the CPU run ahead while the
/// line arrives, where the window's compare-and-select chain waits for every slot it
/// reads, sometimes on a second line. Below it, lookups mostly hit the cache and the
/// window's saved mispredictions win (21 vs 28 ns at 10k keys, 29 vs 35 at 100k).
const WINDOW_MAX_SLOTS: usize = 1 << 14;
/// Probes the loop makes before it starts checking the Robin Hood early exit.
const EARLY_PROBES: usize = 3;

/// Where a lookup ended.
pub(crate) enum Probe {
    /// The hash is stored at this slot.
    Found(usize),
    /// The hash is absent.
    Absent,
}

/// A Robin Hood hash table of states keyed by a non-zero 64-bit hash.
#[derive(Debug)]
pub(crate) struct Table<S> {
    slots: Vec<(u64, S)>,
    len: usize,
    /// The next slot the incremental sweep looks at.
    cursor: usize,
}

impl<S: Clone> Table<S> {
    pub(crate) const fn new() -> Self {
        Table {
            slots: Vec::new(),
            len: 0,
            cursor: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Bytes held by the slot array (what a key costs, before allocator overhead).
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<(u64, S)>()
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        ((u128::from(hash) * self.slots.len() as u128) >> 64) as usize
    }

    /// How far slot `index` is from the home of the hash stored there.
    #[inline]
    fn distance(&self, index: usize, hash: u64) -> usize {
        let home = self.home(hash);
        if index >= home {
            index - home
        } else {
            index + self.slots.len() - home
        }
    }

    #[inline]
    fn next(&self, index: usize) -> usize {
        if index + 1 == self.slots.len() {
            0
        } else {
            index + 1
        }
    }

    /// Finds `hash` (non-zero).
    #[inline]
    pub(crate) fn find(&self, hash: u64) -> Probe {
        if self.len == 0 {
            return Probe::Absent;
        }
        let home = self.home(hash);
        // Most keys sit within a few slots of their home, but *which* slot is a coin
        // toss per key: a probe loop that exits on the first match mispredicts its
        // exit about once a call. So the first `WINDOW` slots from home are compared
        // without branching (hashes are unique in the table, so any match is the
        // entry), and the loop below only runs for the few keys displaced further,
        // or absent ones.
        let capacity = self.slots.len();
        if capacity > WINDOW_MAX_SLOTS {
            return self.probe(home, 0, hash);
        }
        let mut found = usize::MAX;
        for step in (0..WINDOW).rev() {
            let at = home + step;
            let at = if at >= capacity { at - capacity } else { at };
            found = if self.slots[at].0 == hash { at } else { found };
        }
        if found != usize::MAX {
            return Probe::Found(found);
        }
        // Not in the window: probe on after it.
        let after = if home + WINDOW >= capacity {
            home + WINDOW - capacity
        } else {
            home + WINDOW
        };
        self.probe(after, WINDOW, hash)
    }

    /// The probe loop, from slot `index`, `probed` slots past the home of `hash`.
    #[inline]
    fn probe(&self, mut index: usize, mut probed: usize, hash: u64) -> Probe {
        loop {
            let stored = self.slots[index].0;
            if stored == hash {
                return Probe::Found(index);
            }
            if stored == 0 {
                return Probe::Absent;
            }
            // Robin Hood invariant: had `hash` been inserted, it would sit before any
            // entry closer to its own home than we are to ours. Most keys are found
            // within a few probes, so the check (a multiply) waits until then; it
            // stays true once true, so checking late only costs those few probes.
            if probed >= EARLY_PROBES && self.distance(index, stored) < probed {
                return Probe::Absent;
            }
            index = self.next(index);
            probed += 1;
        }
    }

    #[inline]
    pub(crate) fn state(&self, index: usize) -> &S {
        &self.slots[index].1
    }

    #[inline]
    pub(crate) fn state_mut(&mut self, index: usize) -> &mut S {
        &mut self.slots[index].1
    }

    /// True if one more entry fits without growing.
    pub(crate) fn has_room(&self) -> bool {
        (self.len + 1) * MAX_LOAD_DEN <= self.slots.len() * MAX_LOAD_NUM
    }

    /// Inserts an absent `hash` (non-zero), growing first if needed; `empty` fills
    /// new slots.
    pub(crate) fn insert(&mut self, hash: u64, state: S, empty: &S) {
        if !self.has_room() {
            self.grow(empty);
        }
        self.place(hash, state);
        self.len += 1;
    }

    /// Grows the capacity by half: a smaller step than doubling keeps the average
    /// load (and so the bytes per key) high.
    pub(crate) fn grow(&mut self, empty: &S) {
        let grown = (self.slots.len() + self.slots.len() / 2).max(MIN_CAPACITY);
        self.rebuild(grown, empty);
    }

    /// True if the table is more than three quarters full.
    pub(crate) fn is_crowded(&self) -> bool {
        self.len * 4 > self.slots.len() * 3
    }

    /// Robin Hood placement into a table with room.
    fn place(&mut self, hash: u64, state: S) {
        let mut carried = (hash, state);
        let mut index = self.home(carried.0);
        let mut probed = 0;
        loop {
            let stored = self.slots[index].0;
            if stored == 0 {
                self.slots[index] = carried;
                return;
            }
            let theirs = self.distance(index, stored);
            if theirs < probed {
                std::mem::swap(&mut self.slots[index], &mut carried);
                probed = theirs;
            }
            index = self.next(index);
            probed += 1;
        }
    }

    /// Removes the entry at `index`, shifting the run after it back by one so no
    /// tombstone is left. `empty` replaces the state, so that a state owning memory
    /// (a log) releases it.
    pub(crate) fn remove(&mut self, index: usize, empty: &S) {
        let mut hole = index;
        let mut next = self.next(hole);
        loop {
            let stored = self.slots[next].0;
            if stored == 0 || self.distance(next, stored) == 0 {
                break;
            }
            self.slots.swap(hole, next);
            hole = next;
            next = self.next(next);
        }
        self.slots[hole] = (0, empty.clone());
        self.len -= 1;
    }

    /// Looks at up to `steps` entries from the sweep cursor (passing over empty
    /// slots, at most [`SKIP_PER_STEP`] of them per step, so that a sparse table
    /// costs a bounded walk) and removes those `forget` says are done with; returns
    /// how many were removed. A removal shifts a later entry into the slot, so the
    /// cursor stays to look at it again. Counting entries rather than slots is what
    /// lets a full store find a replenished key at once: a few slots may all be
    /// empty, a few entries cannot.
    pub(crate) fn sweep(
        &mut self,
        steps: usize,
        empty: &S,
        mut forget: impl FnMut(&S) -> bool,
    ) -> usize {
        let mut removed = 0;
        let mut entries = 0;
        let limit = steps.saturating_mul(SKIP_PER_STEP).min(self.slots.len());
        for _ in 0..limit {
            if entries == steps {
                break;
            }
            if self.cursor >= self.slots.len() {
                self.cursor = 0;
            }
            let (hash, ref state) = self.slots[self.cursor];
            if hash == 0 {
                self.cursor += 1;
                continue;
            }
            entries += 1;
            if forget(state) {
                self.remove(self.cursor, empty);
                removed += 1;
            } else {
                self.cursor += 1;
            }
        }
        removed
    }

    /// Removes every entry `forget` says is done with; returns how many.
    pub(crate) fn sweep_all(&mut self, empty: &S, mut forget: impl FnMut(&S) -> bool) -> usize {
        let before = self.len;
        let mut index = 0;
        // A removal can pull an entry from the start of the table into the last slot
        // (runs wrap around); one extra lap over the first run catches those.
        let mut budget = self.slots.len() * 2;
        while index < self.slots.len() && budget > 0 {
            budget -= 1;
            let (hash, ref state) = self.slots[index];
            if hash != 0 && forget(state) {
                self.remove(index, empty);
            } else {
                index += 1;
            }
        }
        before - self.len
    }

    /// Shrinks a table that fell below a quarter full to half its capacity.
    pub(crate) fn maybe_shrink(&mut self, empty: &S) {
        let capacity = self.slots.len();
        if capacity > MIN_CAPACITY && self.len * 4 < capacity {
            let target = if self.len == 0 {
                0
            } else {
                (capacity / 2).max(MIN_CAPACITY)
            };
            self.rebuild(target, empty);
        }
    }

    /// Moves every entry into a fresh slot array of `capacity` slots.
    fn rebuild(&mut self, capacity: usize, empty: &S) {
        let mut fresh = Vec::new();
        // Exact reservation: `Vec` growth would round up and waste the memory this
        // table exists to save.
        fresh.reserve_exact(capacity);
        fresh.resize(capacity, (0, empty.clone()));
        let old = std::mem::replace(&mut self.slots, fresh);
        self.cursor = 0;
        for (hash, state) in old {
            if hash != 0 {
                self.place(hash, state);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(i: u64) -> u64 {
        // A cheap mixer so that consecutive integers land all over the table.
        (i.wrapping_add(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
    }

    #[test]
    fn insert_find_remove_round_trip() {
        let mut table: Table<u64> = Table::new();
        for i in 0..1000 {
            table.insert(spread(i), i, &0);
        }
        assert_eq!(table.len(), 1000);
        for i in 0..1000 {
            match table.find(spread(i)) {
                Probe::Found(at) => assert_eq!(*table.state(at), i),
                Probe::Absent => panic!("lost {i}"),
            }
        }
        for i in (0..1000).step_by(2) {
            if let Probe::Found(at) = table.find(spread(i)) {
                table.remove(at, &0);
            }
        }
        for i in 0..1000 {
            let found = matches!(table.find(spread(i)), Probe::Found(_));
            assert_eq!(found, i % 2 == 1, "key {i}");
        }
    }

    #[test]
    fn sweeps_remove_exactly_what_is_forgotten_and_shrink() {
        let mut table: Table<u64> = Table::new();
        for i in 0..5000 {
            table.insert(spread(i), i, &0);
        }
        let grown = table.capacity();
        assert_eq!(table.sweep_all(&0, |s| *s >= 100), 4900);
        assert_eq!(table.len(), 100);
        for i in 0..100 {
            assert!(matches!(table.find(spread(i)), Probe::Found(_)));
        }
        table.maybe_shrink(&0);
        assert!(table.capacity() < grown);
        let mut swept = 0;
        // A removal does not advance the cursor, so a full lap takes capacity + removals.
        for _ in 0..table.capacity() + 100 {
            swept += table.sweep(1, &0, |_| true);
        }
        assert_eq!(swept, 100);
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn lookups_agree_with_a_set_in_long_runs_and_after_removals() {
        // Homes squeezed into a few slots make runs far longer than the branch-free
        // window, so lookups go through the window, the probe loop after it and the
        // Robin Hood early exit, for present and absent keys, across the wrap.
        let clustered = |i: u64| (spread(i) >> 62 << 62) | (i + 1);
        let mut table: Table<u64> = Table::new();
        let mut model = std::collections::HashSet::new();
        for round in 0..3u64 {
            for i in 0..200 {
                let hash = clustered(round * 1000 + i);
                if !model.contains(&hash) {
                    table.insert(hash, i, &0);
                    model.insert(hash);
                }
            }
            for i in (0..200).step_by(3) {
                let hash = clustered(round * 1000 + i);
                if let Probe::Found(at) = table.find(hash) {
                    table.remove(at, &0);
                    model.remove(&hash);
                }
            }
            for i in 0..4000 {
                let hash = clustered(i);
                let found = matches!(table.find(hash), Probe::Found(_));
                assert_eq!(found, model.contains(&hash), "hash {hash:#x}");
            }
        }
        assert_eq!(table.len(), model.len());
    }

    #[test]
    fn tables_too_large_for_the_window_find_the_same_keys() {
        let mut table: Table<u64> = Table::new();
        let keys = 20_000;
        for i in 0..keys {
            table.insert(spread(i), i, &0);
        }
        assert!(table.capacity() > WINDOW_MAX_SLOTS);
        for i in 0..2 * keys {
            match table.find(spread(i)) {
                Probe::Found(at) => assert_eq!(*table.state(at), i),
                Probe::Absent => assert!(i >= keys, "lost {i}"),
            }
        }
    }

    #[test]
    fn colliding_homes_wrap_around() {
        let mut table: Table<u64> = Table::new();
        // Hashes near u64::MAX all have their home in the last slot.
        for i in 0..7u64 {
            table.insert(u64::MAX - i, i, &0);
        }
        for i in 0..7u64 {
            assert!(matches!(table.find(u64::MAX - i), Probe::Found(_)));
        }
        assert_eq!(table.sweep_all(&0, |s| *s % 2 == 0), 4);
        for i in 0..7u64 {
            let found = matches!(table.find(u64::MAX - i), Probe::Found(_));
            assert_eq!(found, i % 2 == 1);
        }
    }
}
