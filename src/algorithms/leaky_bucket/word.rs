//! The leaky bucket's words: its state is its one `u64` (the theoretical arrival
//! time in ticks), and its configuration encodes as three words.

use super::{LeakyBucket, LeakyMode, LeakyState};
use crate::algorithms::words::{one_word_state, Plan, Words};
use crate::algorithms::{Algorithm, WordEncoded};
use crate::clock::Nanos;

const QUEUE_BIT: u64 = 1 << 63;

impl WordEncoded for LeakyBucket {
    type Config = [u64; 3];
    one_word_state!(LeakyState { tat: u64 });

    #[inline(always)]
    fn config_words(&self) -> [u64; 3] {
        let mode = match self.mode {
            LeakyMode::Meter => 0,
            LeakyMode::Queue => QUEUE_BIT,
        };
        [
            self.period | mode,
            u64::from(self.count) << 32 | u64::from(self.capacity),
            self.per_permit,
        ]
    }

    #[inline(always)]
    fn from_config_words(words: [u64; 3]) -> Self {
        // Clamped to what the steps need: every field at least 1, and ticks at
        // least as fine as nanoseconds (count × per_permit ≥ period, else
        // whole-nanosecond ticks); the step saturates whatever else they hold.
        let mut bucket = Self::from_own_config_words(words);
        bucket.period = bucket.period.max(1);
        bucket.per_permit = bucket.per_permit.max(1);
        bucket.capacity = bucket.capacity.max(1);
        bucket.count = match u64::from(bucket.count).checked_mul(bucket.per_permit) {
            Some(num) if num >= bucket.period => bucket.count,
            _ => 1,
        };
        bucket
    }

    #[inline(always)]
    fn from_own_config_words(words: [u64; 3]) -> Self {
        LeakyBucket {
            period: words[0] & !QUEUE_BIT,
            count: (words[1] >> 32) as u32,
            per_permit: words[2],
            capacity: words[1] as u32,
            mode: if words[0] & QUEUE_BIT == 0 {
                LeakyMode::Meter
            } else {
                LeakyMode::Queue
            },
        }
    }

    /// The step on a copy, in the report that reads nothing but "granted".
    #[inline(always)]
    fn plan_take<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> Plan<LeakyState> {
        let mut state = self.read_state(words);
        let granted: bool = self.reserve(&mut state, now, cost, 0);
        (granted, granted.then_some(state))
    }
}
