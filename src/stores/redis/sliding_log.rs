//! [`SlidingLog`] on the server: `lua/sliding_log.lua`.
//!
//! # Why a hash
//!
//! The Rust log is a ring of `(time, running count)` entries behind a three-word
//! header. On the server it is one hash per key: the header in one field and one
//! field per ring slot, each packed big-endian doubles (a read is one
//! `struct.unpack`, where decimal text cost a pattern match and a parse per
//! number). A sorted-set log (`ZREMRANGEBYSCORE`, `ZCARD`) costs `O(log n + m)` per call to
//! trim and count, and its size grows with refused attempts; here, as in memory, a
//! call reads the header and the newest entry, and only a call that finds the log
//! full of held entries searches for the first live one (a binary search over the
//! slots, `O(log limit)` field reads); a grant writes the header and one slot. The
//! running counts make the live total one subtraction, never a walk. Times are
//! whole microseconds and the running counts plain integers, all below 2⁵³.

use super::algorithm::{whole_micros, RedisAlgorithm};
use crate::algorithms::SlidingLog;
use crate::error::Error;

impl RedisAlgorithm for SlidingLog {
    const NAME: &'static str = "log";
    const KIND: u8 = 6;
    const CANCEL_ON_SERVER: bool = true;

    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error> {
        let duration = whole_micros("duration", self.duration().as_nanos() as u64)?;
        let spacing = whole_micros("min_spacing", self.min_spacing().as_nanos() as u64)?;
        for word in [
            self.limit(),
            duration,
            spacing,
            u64::from(self.rejected_recorded()),
        ] {
            args.push(word.to_string());
        }
        Ok(())
    }
}
