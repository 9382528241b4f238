//! The sliding window counter's word: how its state packs into one `u64` (see
//! the [module docs](super#the-state-word)) and how its configuration encodes as
//! words.

use super::{Counting, Rounding, SlidingWindowCounter, SlidingWindowState, View, MAX_LIMIT};
use crate::algorithms::divisor::Divisor;
use crate::algorithms::words::{one_word_state, Plan, Settle, Words};
use crate::algorithms::{Decision, WordEncoded};
use crate::clock::Nanos;

impl SlidingWindowCounter {
    /// Bits per count: what the limit needs, plus 8 under [`Counting::Attempts`]
    /// (whose counts may pass the limit), at most 24 (kept: see `derived`).
    #[inline(always)]
    pub(super) fn count_bits(&self) -> u32 {
        self.count_bits
    }

    /// The window index's bits, `k = 64 − 2b`: at least 16.
    #[inline]
    pub(super) fn index_bits(&self) -> u32 {
        u64::BITS - 2 * self.count_bits()
    }

    /// True if every window index the clock can reach fits in the index bits
    /// (`u64::MAX / window < 2ᵏ`), so that indices are stored whole and never wrap.
    #[inline(always)]
    pub(super) fn exact_index(&self) -> bool {
        self.exact_index
    }

    #[inline]
    pub(super) fn pack(&self, index: u64, previous: u64, current: u64) -> SlidingWindowState {
        let b = self.count_bits();
        SlidingWindowState {
            word: index << (2 * b) | previous << b | current,
        }
    }

    /// The state as of `now` (see [`View`]). A later window shifts the counts; an
    /// earlier one is read as the start of the stored window (exactly, or by the
    /// modular rule of the module docs when indices wrap).
    ///
    /// Kept out of line for the cold callers (`counts`, `estimate`, expiry); the
    /// lean take and the full step inline it ([`view_inlined`](Self::view_inlined)).
    #[inline(never)]
    pub(super) fn view(&self, state: &SlidingWindowState, now: Nanos) -> View {
        self.view_inlined(state, now)
    }

    /// [`view`](Self::view), always inlined, for the lean take and the full step:
    /// inlined, the take runs a few more instructions yet finishes sooner, as its
    /// compare-and-swap waits for less; out of line, a `check` runs 30 to 40 more.
    #[inline(always)]
    pub(super) fn view_inlined(&self, state: &SlidingWindowState, now: Nanos) -> View {
        let b = self.count_bits();
        let count_mask = (1 << b) - 1;
        let index = state.word >> (2 * b);
        let previous = state.word >> b & count_mask;
        let current = state.word & count_mask;
        let stored = |elapsed, behind| View {
            index,
            previous,
            current,
            elapsed,
            behind,
        };
        let index_mask = u64::MAX >> (2 * b);
        let (now_index, distance) = if self.exact_index() {
            // index < 2ᵏ ≤ u64::MAX / window + 1; saturate for a word we did not make.
            let start = index.saturating_mul(self.window);
            if now >= start && now - start < self.window {
                // Still the stored window: the common case costs no division.
                return stored(now - start, 0);
            }
            if now < start {
                if previous | current == 0 {
                    return self.fresh(now);
                }
                return stored(0, start - now);
            }
            let now_index = self.window_of(now);
            (now_index, now_index - index)
        } else {
            let now_index = self.window_of(now);
            let distance = now_index.wrapping_sub(index) & index_mask;
            if distance == 0 {
                // Still the stored window: its index and counts as they are, so
                // that the new state waits for nothing read off the clock.
                return stored(now - now_index * self.window, 0);
            }
            if distance > index_mask >> 1 {
                // Backwards by 2ᵏ − distance windows (or an old state whose index
                // wrapped: the same conservative reading).
                if previous | current == 0 {
                    return self.fresh(now);
                }
                let back = index_mask - distance + 1;
                let start = now_index.saturating_add(back).saturating_mul(self.window);
                return stored(0, start.saturating_sub(now));
            }
            (now_index, distance)
        };
        let (previous, current) = match distance {
            0 => (previous, current),
            1 => (current, 0),
            _ => (0, 0),
        };
        View {
            index: now_index & index_mask,
            previous,
            current,
            elapsed: now - now_index * self.window,
            behind: 0,
        }
    }

    /// The window holding `now`, `⌊now / window⌋`, by the kept multiplier (see
    /// `Divisor`): a multiplication and a shift, exact for any `now`.
    #[inline(always)]
    pub(super) fn window_of(&self, now: Nanos) -> u64 {
        Divisor::from_parts(self.window, self.window_multiplier).divide(now)
    }
}

/// Configuration words: the window length in nanoseconds, then the limit (low 32
/// bits) with the rounding (bit 32), counting (bit 33) and whole-index (bit 34)
/// flags and the bits per count (bits 40 to 44), then the multiplier that divides
/// by the length.
impl WordEncoded for SlidingWindowCounter {
    type Config = [u64; 3];
    // Publishes the new state first, then describes the decision.
    one_word_state!(SlidingWindowState { word: u64 }, settled);

    #[inline]
    fn config_words(&self) -> [u64; 3] {
        let floor = u64::from(self.rounding == Rounding::Floor);
        let attempts = u64::from(self.counting == Counting::Attempts);
        let exact = u64::from(self.exact_index);
        let layout = exact << 34 | u64::from(self.count_bits) << 40;
        [
            self.window,
            self.limit | floor << 32 | attempts << 33 | layout,
            self.window_multiplier,
        ]
    }

    /// Words from anywhere: [`from_own_config_words`](Self::from_own_config_words)
    /// with the length and the limit clamped, so that even words this type did not
    /// encode cannot panic later, and the multiplier worked out afresh from the
    /// length, so that `window_of` is exact.
    fn from_config_words(words: [u64; 3]) -> Self {
        let mut counter = Self::from_own_config_words(words);
        counter.window = counter.window.max(1);
        counter.limit = counter.limit.clamp(1, MAX_LIMIT);
        counter.window_multiplier = Divisor::new(counter.window).multiplier();
        counter
    }

    /// Words a constructor encoded (a cell decodes them on every call): their length
    /// and limit are in range already, so only `from_config_words` clamps them.
    #[inline]
    fn from_own_config_words(words: [u64; 3]) -> Self {
        SlidingWindowCounter {
            window: words[0],
            window_multiplier: words[2],
            limit: words[1] & 0xFFFF_FFFF,
            rounding: if words[1] >> 32 & 1 == 1 {
                Rounding::Floor
            } else {
                Rounding::Exact
            },
            counting: if words[1] >> 33 & 1 == 1 {
                Counting::Attempts
            } else {
                Counting::Admitted
            },
            // Five bits: at most 31 per count keeps every shift (by up to 2b) below 64.
            count_bits: (words[1] >> 40 & 0x1F) as u32,
            exact_index: words[1] >> 34 & 1 == 1,
        }
    }

    /// A refusal changes the state too when attempts are counted: it plans a write
    /// whenever the word changed.
    #[inline(always)]
    fn plan_take<W: Words + ?Sized>(
        &self,
        words: &W,
        now: Nanos,
        cost: u64,
    ) -> Plan<SlidingWindowState> {
        let before = self.read_state(words);
        let mut after = before;
        let granted = self.take(&mut after, now, cost);
        (granted, (after != before).then_some(after))
    }
}
