//! [`SlidingWindowBuckets`] on the server: `lua/sliding_window_buckets.lua`.
//!
//! # Why a hash
//!
//! The Rust state is a ring of `B + 1` bucket counters (rounded up to a power of
//! two) plus the newest bucket's number and the total. On the server it is one
//! hash per key: the header fields `n` and `t` and one field per non-empty slot.
//! A call reads the header with one `HMGET` and then only the slots it needs
//! (usually the current one, and the one or two at the window's oldest edge); a
//! grant writes back only the slots it changed. So the server's work per allowed
//! call does not grow with the limit or the number of buckets, where reading or
//! rewriting a whole serialized ring (a `GET`/`SET` of up to 64 KB) would. A
//! binary string read with `GETRANGE`/`SETRANGE` would do the same with fixed-size
//! slots; a hash was chosen because empty slots cost nothing (a sparse ring of 4096
//! buckets with a few busy ones stays a few fields, in Redis's compact listpack
//! encoding) and its fields are readable when inspecting a server. Slots are the
//! Rust ring's slots (`bucket mod ring size`), cleared at the same moments, so the
//! decisions are the same even for rings whose slots alias.
//!
//! A refused call walks the ring for its exact `retry_after`, as in memory: O(B)
//! slot reads at worst.

use super::algorithm::{exact_count, whole_micros, RedisAlgorithm};
use crate::algorithms::sliding_window_buckets::OldestBucket;
use crate::algorithms::SlidingWindowBuckets;
use crate::error::Error;

impl RedisAlgorithm for SlidingWindowBuckets {
    const NAME: &'static str = "swb";
    const KIND: u8 = 5;
    const CANCEL_ON_SERVER: bool = true;

    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error> {
        let duration = whole_micros("duration", self.duration().as_nanos() as u64)?;
        let precision = whole_micros("precision", self.precision().as_nanos() as u64)?;
        let limit = exact_count("limit", self.limit())?;
        let weighted = u64::from(self.oldest_bucket() == OldestBucket::Weighted);
        let ring = (self.buckets() + 1).next_power_of_two();
        for word in [limit, duration, precision, self.buckets(), weighted, ring] {
            args.push(word.to_string());
        }
        Ok(())
    }
}
