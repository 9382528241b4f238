//! The bursty bucket's words: its state is its one `i64` (the instant `T`), and
//! its configuration encodes as six words.

use super::step::Outcome;
use super::{BurstyState, SmoothBursty};
use crate::algorithms::words::{one_word_state, Plan, Settle, Words};
use crate::algorithms::{signed, Decision, WordEncoded};
use crate::clock::Nanos;

/// One configuration word per field (their bits, exactly; the derived ones as
/// they are); the state is `T` itself.
impl WordEncoded for SmoothBursty {
    type Config = [u64; 6];
    // Publishes the new state first, then describes the decision.
    one_word_state!(BurstyState { tat: i64 }, settled);

    #[inline(always)]
    fn config_words(&self) -> [u64; 6] {
        [
            self.stable_micros.to_bits(),
            self.max_burst_seconds.to_bits(),
            self.whole_burst,
            self.burst_nanos as u64,
            self.one_charge as u64,
            self.one_from_full,
        ]
    }

    /// Words from anywhere: the derived words are derived afresh from the first two.
    fn from_config_words(words: [u64; 6]) -> Self {
        SmoothBursty::with_parts(f64::from_bits(words[0]), f64::from_bits(words[1]))
    }

    #[inline(always)]
    fn from_own_config_words(words: [u64; 6]) -> Self {
        SmoothBursty {
            stable_micros: f64::from_bits(words[0]),
            max_burst_seconds: f64::from_bits(words[1]),
            whole_burst: words[2],
            burst_nanos: words[3] as i64,
            one_charge: words[4] as i64,
            one_from_full: words[5],
        }
    }

    /// The step without building the [`Decision`] (whose `remaining` and `limit`
    /// cost float divisions): the hot path of `try_acquire`.
    #[inline(always)]
    fn plan_take<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> Plan<BurstyState> {
        match self.step(
            words.word(0) as i64,
            signed(now),
            self.burst_nanos(),
            cost,
            0,
        ) {
            Outcome::Allowed { next, .. } => (true, Some(BurstyState { tat: next })),
            Outcome::Never | Outcome::Denied { .. } => (false, None),
        }
    }
}
