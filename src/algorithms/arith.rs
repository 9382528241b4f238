//! Time arithmetic on `i64` nanoseconds, and bit widths, shared by the algorithms.

use crate::clock::Nanos;

/// `now` as an `i64`, saturating at `i64::MAX`. By a branch rather than a
/// conditional move: every step's arithmetic waits for this value, and a predicted
/// branch delays none of it (a reading past `i64::MAX` is 292 years away).
#[inline(always)]
pub(crate) fn signed(now: Nanos) -> i64 {
    match i64::try_from(now) {
        Ok(now) => now,
        Err(_) => end_of_signed_time(),
    }
}

#[cold]
#[inline(never)]
fn end_of_signed_time() -> i64 {
    i64::MAX
}

/// The non-negative distance from `from` to `to`, in nanoseconds (0 if `to <= from`).
pub(crate) fn until(from: i64, to: i64) -> Nanos {
    if to <= from {
        0
    } else {
        to.abs_diff(from)
    }
}

/// Bits needed to write `value`: what a count packed into a state word takes.
#[inline(always)]
pub(crate) fn bits(value: u64) -> u32 {
    u64::BITS - value.leading_zeros()
}
