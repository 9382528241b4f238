//! [`SlidingLog`] on the server: `lua/sliding_log.lua`.
//!
//! # Why a hash, and copies in its header
//!
//! The Rust log is a ring of `(time, running count)` entries behind a three-word
//! header. On the server it is one hash per key: the header in one field (`H`) and
//! one field per ring slot (named by the slot as 4 big-endian bytes), each packed
//! big-endian doubles (a read is one `struct.unpack`, where decimal text cost a
//! pattern match and a parse per number). The header also keeps copies of the
//! oldest and the newest entry, which whoever writes it knows: every call needs
//! the newest, and a refusal on a full log needs the oldest (is it live, and when
//! does its count leave?), so a hammered refusal reads one field and a grant that
//! drops the oldest entry one slot more (the next oldest, the header's new copy).
//! A sorted-set log (`ZREMRANGEBYSCORE`, `ZCARD`) costs `O(log n + m)` per call to
//! trim and count, and its size grows with refused attempts; here any other entry
//! is found by a galloping search from the front (`O(log d)` slot reads for an
//! answer `d` entries in), and a grant writes the header and one slot in one
//! `HSET`. The running counts make the live total one subtraction, never a walk.
//! Times are whole microseconds and the running counts plain integers, all below
//! 2⁵³. A key in an older layout (decimal text, or the packed header without the
//! copies) is refused with a typed error, not read as an empty log.

use super::algorithm::{whole_micros, RedisAlgorithm, ServerStep};
use crate::algorithms::SlidingLog;
use crate::error::Error;

impl RedisAlgorithm for SlidingLog {}

impl ServerStep for SlidingLog {
    const NAME: &'static str = "log";
    const FACTORY: &'static str = "make_sliding_log";
    const CANCEL_ON_SERVER: bool = true;

    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error> {
        let window = whole_micros("window", self.window().as_nanos() as u64)?;
        let spacing = whole_micros("min_spacing", self.min_spacing().as_nanos() as u64)?;
        for word in [
            self.limit(),
            window,
            spacing,
            u64::from(self.rejected_recorded()),
        ] {
            args.push(word.to_string());
        }
        Ok(())
    }
}
