//! The one sequence lock every cell that shares several words uses.

use std::sync::atomic::{fence, AtomicU64, Ordering};

/// A sequence lock: a counter that is even while nobody writes and odd while one
/// writer does, guarding words too wide for one atomic.
///
/// ```text
///   read:   s = begin() (even)   load words   unchanged_since(s) ?  use them : retry
///   write:  claim(s) or lock(): s -> s+1   store words   drop: s+2 (s if nothing written)
/// ```
///
/// Readers take no lock: they load the words optimistically and then check that the
/// sequence did not move, retrying if it did, so a reader never sees a torn state.
/// A writer claims the sequence by one compare-and-swap from an even value it saw:
/// [`claim`](Self::claim) from the value a read began under (success proves nothing
/// was written since that read, so a plan made on it still holds), or
/// [`lock`](Self::lock) from whatever value is current. Two writers can never both
/// claim the same even value, so at most one writes at a time. The claim is released
/// when its [`Claim`] is dropped (even by a panic), to `s + 2` if the words may have
/// changed or back to `s` if they certainly did not.
///
/// Waiting (for an odd sequence) spins briefly, then yields the thread: a writer
/// holds the sequence for a handful of stores, but may be descheduled mid-write.
#[derive(Debug, Default)]
pub struct SequenceLock {
    sequence: AtomicU64,
}

/// The right to write under a [`SequenceLock`], released when dropped.
#[derive(Debug)]
pub struct Claim<'a> {
    sequence: &'a AtomicU64,
    seen: u64,
    wrote: bool,
}

impl SequenceLock {
    /// A lock nobody holds.
    pub const fn new() -> Self {
        SequenceLock {
            sequence: AtomicU64::new(0),
        }
    }

    /// Waits until no write is in progress and returns the (even) sequence seen.
    /// Loads made after this are valid only if [`unchanged_since`](Self::unchanged_since)
    /// agrees afterwards.
    #[inline(always)]
    pub fn begin(&self) -> u64 {
        let seen = self.sequence.load(Ordering::Acquire);
        if seen & 1 == 0 {
            return seen;
        }
        self.wait_for_writer()
    }

    /// [`begin`](Self::begin) once a write was found in progress: out of line, so
    /// that every call's inlined fast path carries neither the wait loop nor its
    /// registers (a writer holds the sequence rarely, and only for a few stores).
    #[cold]
    #[inline(never)]
    fn wait_for_writer(&self) -> u64 {
        let mut spins = 0;
        loop {
            backoff(&mut spins);
            let seen = self.sequence.load(Ordering::Acquire);
            if seen & 1 == 0 {
                return seen;
            }
        }
    }

    /// True if nothing was written since `seen` was returned by
    /// [`begin`](Self::begin), so every load made in between saw one consistent state.
    #[inline(always)]
    pub fn unchanged_since(&self, seen: u64) -> bool {
        // Orders the data loads before the second sequence load: if any of them saw
        // a concurrent write, this load sees the sequence moved.
        fence(Ordering::Acquire);
        self.sequence.load(Ordering::Relaxed) == seen
    }

    /// Claims the right to write if the sequence is still `seen` (even), that is if
    /// nothing was written since a read began under it; `None` if another writer got
    /// there first. Needs no [`unchanged_since`](Self::unchanged_since) check of its
    /// own: the swap fails just as the check would.
    #[inline(always)]
    pub fn claim(&self, seen: u64) -> Option<Claim<'_>> {
        // Loads made before the claim are ordered before the swap: if one of them
        // saw a write, that writer's claim precedes the swap, which cannot find `seen`.
        fence(Ordering::Acquire);
        let claimed = self
            .sequence
            .compare_exchange_weak(
                seen,
                seen.wrapping_add(1),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok();
        // Readers that see any store made after a claim must also see the odd sequence.
        fence(Ordering::Release);
        // Built only on success (`then`, not the eager `then_some`): a `Claim`
        // releases the sequence when dropped, so one made for a failed swap would
        // release somebody else's claim.
        claimed.then(|| Claim {
            sequence: &self.sequence,
            seen,
            wrote: false,
        })
    }

    /// Claims the right to write whatever the sequence is now, waiting for a writer
    /// to finish.
    pub fn lock(&self) -> Claim<'_> {
        let mut spins = 0;
        loop {
            let seen = self.sequence.load(Ordering::Relaxed);
            if seen & 1 == 0
                && let Some(claim) = self.claim(seen)
            {
                return claim;
            }
            backoff(&mut spins);
        }
    }
}

impl Claim<'_> {
    /// Records that the words may have changed, so that the release moves the
    /// sequence on and readers that overlapped the write retry.
    #[inline(always)]
    pub fn wrote(&mut self) {
        self.wrote = true;
    }
}

impl Drop for Claim<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let released = if self.wrote {
            self.seen.wrapping_add(2)
        } else {
            self.seen
        };
        self.sequence.store(released, Ordering::Release);
    }
}

/// Waits a little for a writer to finish: spin first (a write takes nanoseconds),
/// then give the processor away in case the writer was descheduled mid-write.
#[inline]
fn backoff(spins: &mut u32) {
    if *spins < 64 {
        *spins += 1;
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// Two words that writers keep equal: a reader whose read validates must never
    /// see them differ (a torn state), however the threads interleave.
    #[test]
    fn readers_never_see_a_torn_state() {
        struct Pair {
            lock: SequenceLock,
            words: [AtomicU64; 2],
        }
        let pair = Arc::new(Pair {
            lock: SequenceLock::new(),
            words: [AtomicU64::new(0), AtomicU64::new(0)],
        });
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let pair = Arc::clone(&pair);
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut claim = pair.lock.lock();
                        let next = pair.words[0].load(Ordering::Relaxed) + 1;
                        pair.words[0].store(next, Ordering::Relaxed);
                        std::hint::spin_loop();
                        pair.words[1].store(next, Ordering::Relaxed);
                        claim.wrote();
                    }
                })
            })
            .collect();
        let mut validated = 0u64;
        while !writers.iter().all(|w| w.is_finished()) || validated == 0 {
            let seen = pair.lock.begin();
            let a = pair.words[0].load(Ordering::Relaxed);
            let b = pair.words[1].load(Ordering::Relaxed);
            if pair.lock.unchanged_since(seen) {
                assert_eq!(a, b, "a validated read saw a torn state");
                validated += 1;
            }
        }
        for writer in writers {
            writer.join().unwrap();
        }
        // Every write was counted once: writers never overlapped.
        assert_eq!(pair.words[0].load(Ordering::Relaxed), 40_000);
        assert_eq!(pair.words[1].load(Ordering::Relaxed), 40_000);
    }

    /// Writers that each read a counter under the sequence and claim from the value
    /// their read began under: if two could both win, increments would be lost.
    /// Losers retry, so every increment lands exactly once.
    #[test]
    fn writers_never_both_win() {
        const THREADS: u64 = 4;
        const EACH: u64 = 20_000;
        let lock = SequenceLock::new();
        let counter = AtomicU64::new(0);
        let inside = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..THREADS {
                scope.spawn(|| {
                    for _ in 0..EACH {
                        loop {
                            let seen = lock.begin();
                            let value = counter.load(Ordering::Relaxed);
                            let Some(mut claim) = lock.claim(seen) else {
                                continue;
                            };
                            assert_eq!(
                                inside.fetch_add(1, Ordering::SeqCst),
                                0,
                                "two writers inside"
                            );
                            // A write that takes a while, as a real step does: the
                            // window in which a broken claim would let a second in.
                            for _ in 0..32 {
                                std::hint::spin_loop();
                            }
                            counter.store(value + 1, Ordering::Relaxed);
                            inside.fetch_sub(1, Ordering::SeqCst);
                            claim.wrote();
                            break;
                        }
                    }
                });
            }
        });
        assert_eq!(counter.load(Ordering::Relaxed), THREADS * EACH);
        // Each write moved the sequence on by exactly two.
        assert_eq!(lock.begin(), 2 * THREADS * EACH);
    }

    /// A claim that fails must leave the holder's claim alone: a second try from
    /// the same value fails too, and no reader gets in while the holder writes.
    #[test]
    fn a_failed_claim_leaves_the_holders_claim_alone() {
        let lock = SequenceLock::new();
        let seen = lock.begin();
        let held = lock.claim(seen).unwrap();
        assert!(lock.claim(seen).is_none());
        assert!(lock.claim(seen).is_none());
        assert!(!lock.unchanged_since(seen));
        drop(held);
    }

    #[test]
    fn a_claim_that_wrote_nothing_invalidates_no_reader() {
        let lock = SequenceLock::new();
        let seen = lock.begin();
        drop(lock.claim(seen).unwrap());
        assert!(lock.unchanged_since(seen));
        assert!(lock.claim(seen).is_some());
    }
}
