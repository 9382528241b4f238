//! [`SlidingWindowBuckets`] on the server: `lua/sliding_window_buckets.lua` (the step)
//! over `lua/sliding_window_buckets_hash.lua` (where its ring is kept).
//!
//! # Why a hash, and copies in its header
//!
//! The Rust state is a ring of `B + 1` bucket counters (rounded up to a power of
//! two) plus the newest bucket's number and the total. On the server it is one
//! hash per key: a header field `H` and one field per non-empty slot, each packed
//! big-endian doubles. The header also keeps `o` (every bucket before it is empty)
//! and copies of the counts of the newest bucket, of the two at the window's far
//! end and of bucket `o`: what a call in the newest bucket needs besides the total
//! (`reset_after`, the bucket leaving a dropping window or a weighted window's
//! partial one, and where a refusal's walk for its exact `retry_after` starts).
//! Whoever writes the header knows them, so a refusal on a hammered key reads one
//! field and a grant in the newest bucket writes the header and one slot, whatever
//! the limit or the number of buckets; reading or rewriting a whole serialized
//! ring (a `GET`/`SET` of up to 64 KB) would grow with the buckets, and even a
//! 512-byte ring costs more to move between Redis and Lua than one field. A hash
//! rather than a string read with `GETRANGE`/`SETRANGE`: empty slots cost nothing (a
//! sparse ring of 4096 buckets with a few busy ones stays a few fields) and one
//! `HSET` writes the header and a slot together. Slots are the Rust ring's slots
//! (`bucket mod ring size`), cleared at the same moments, so the decisions are the
//! same even for rings whose slots alias.
//!
//! Any other slot is read when needed (the buckets leaving the ring when it moves,
//! in one `HMGET`); a refusal on a sparse ring walks its non-empty slots, as in
//! memory. A key in the older layout (decimal fields `n`, `t`, `o` and counts) is
//! refused with a typed error, not read as an empty window.

use super::algorithm::{exact_count, whole_micros, RedisAlgorithm, ServerStep};
use crate::algorithms::sliding_window_buckets::OldestBucket;
use crate::algorithms::SlidingWindowBuckets;
use crate::error::Error;

impl RedisAlgorithm for SlidingWindowBuckets {}

impl ServerStep for SlidingWindowBuckets {
    const NAME: &'static str = "swb";
    const FACTORY: &'static str = "make_sliding_window_buckets";
    const CANCEL_ON_SERVER: bool = true;

    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error> {
        let window = whole_micros("window", self.window().as_nanos() as u64)?;
        let precision = whole_micros("precision", self.precision().as_nanos() as u64)?;
        let limit = exact_count("limit", self.limit())?;
        let weighted = u64::from(self.oldest_bucket() == OldestBucket::Weighted);
        let ring = (self.buckets() + 1).next_power_of_two();
        for word in [limit, window, precision, self.buckets(), weighted, ring] {
            args.push(word.to_string());
        }
        Ok(())
    }
}
