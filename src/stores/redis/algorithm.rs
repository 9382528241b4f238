//! How an algorithm runs on the server: [`RedisAlgorithm`], the request it becomes
//! (`KEYS`, `ARGV`) and the reply it comes back as (one [`Decision`] per key).

use crate::algorithms::{Algorithm, Decision, Receipt};
use crate::clock::Nanos;
use crate::error::{Applied, Error};
use std::time::Duration;

/// The largest integer every number in a script's arguments and replies stays
/// below: Lua numbers are doubles, exact up to 2⁵³.
pub(super) const EXACT: u64 = 1 << 53;

/// An [`Algorithm`] the [Redis store](super::RedisStore) can run server-side: its
/// kind in the step library and how its configuration becomes the call's arguments.
///
/// The crate implements it for its algorithms (in `src/stores/redis/`); the
/// library's step of each reproduces the algorithm's Rust step exactly, at whole microseconds (see
/// the [module docs](super) for the protocol and what differs from memory).
///
/// ```
/// use sluicegate::algorithms::FixedWindow;
/// use sluicegate::stores::redis::RedisAlgorithm;
/// use std::time::Duration;
/// let window = FixedWindow::new(3, Duration::from_secs(60)).unwrap();
/// let mut args = Vec::new();
/// window.config_args(&mut args).unwrap();
/// assert_eq!(args, ["60000000", "3"]); // the window in microseconds, the limit
/// assert_eq!(FixedWindow::NAME, "fw");
/// ```
pub trait RedisAlgorithm: Algorithm {
    /// A short name: the suffix of this algorithm's server keys, so that two
    /// algorithms never read each other's state.
    const NAME: &'static str;

    /// Appends the configuration words to the call's arguments.
    ///
    /// # Errors
    /// A typed error for a configuration the server cannot run exactly (e.g. a
    /// duration that is not a whole number of microseconds, or a count above 2⁵³).
    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error>;

    /// The library's factory that runs this algorithm, alone or inside a set (an
    /// index into `FACTORIES`, see `lua/set.lua`).
    #[doc(hidden)]
    const KIND: u8;

    /// The suffixes of the server keys one rendered key uses (in the order the
    /// library reads them): one, [`NAME`](RedisAlgorithm::NAME), for a single
    /// algorithm; a set's serial key and its members' keys for a set.
    fn key_suffixes(&self, out: &mut Vec<String>) {
        out.push(Self::NAME.to_owned());
    }

    /// Whether [`Algorithm::cancel`] can give anything back. Every algorithm of the
    /// crate's can (at least at the very instant of a grant); an algorithm of yours
    /// whose cancel restores nothing may say false, and a cancel then costs no round
    /// trip.
    const CANCEL_RESTORES: bool = true;

    /// Whether the library runs the cancel step (`ALG.cancel`): true for every
    /// algorithm of the crate's. One whose cancel restores permits but has no
    /// server-side step refuses a cancel with an error rather than silently
    /// restoring nothing.
    #[doc(hidden)]
    const CANCEL_ON_SERVER: bool = false;

    /// Where a cancel of this configuration goes: `Ok(false)` when it restores
    /// nothing (as the default [`Algorithm::cancel`] does in memory, so no round trip
    /// is needed), `Ok(true)` when the library runs it, and an error for one that
    /// restores permits with no server-side step yet (saying so rather than
    /// silently restoring nothing). From the two constants above; a set whose
    /// members are chosen at run time ([`Limits`](crate::algorithms::Limits)) asks
    /// its members.
    #[doc(hidden)]
    fn cancel_route(&self) -> Result<bool, Error> {
        if !Self::CANCEL_RESTORES {
            return Ok(false);
        }
        if Self::CANCEL_ON_SERVER {
            return Ok(true);
        }
        Err(super::connection::failure(
            Applied::No,
            redis::RedisError::from((
                redis::ErrorKind::Client,
                "the Redis store cannot cancel a reservation of this algorithm yet",
            )),
        ))
    }
}

/// A duration the server must hold exactly: whole microseconds below 2⁵³ µs.
pub(super) fn whole_micros(what: &'static str, nanos: Nanos) -> Result<u64, Error> {
    if !nanos.is_multiple_of(1_000) || nanos / 1_000 >= EXACT {
        return Err(Error::InvalidDuration {
            what,
            value: Duration::from_nanos(nanos),
            requirement: "a whole number of microseconds below 2^53 us for the Redis store \
                          (its clock counts microseconds in Lua doubles)",
        });
    }
    Ok(nanos / 1_000)
}

/// A count the server must hold exactly: below 2⁵³.
pub(super) fn exact_count(what: &'static str, count: u64) -> Result<u64, Error> {
    if count >= EXACT {
        return Err(Error::InvalidCount {
            what,
            value: count,
            requirement: "below 2^53 for the Redis store (Lua numbers are doubles)",
        });
    }
    Ok(count)
}

/// Numbers per key in a script's reply (see `lua/prelude.lua`).
pub(super) const REPLY_WIDTH: usize = 16;

/// Widens a lone key's short reply (`short` in `lua/driver.lua`: 5 integers for a
/// refusal, 9 or 11 for a grant, durations as whole ns, -1 for ever, no limit
/// index) to the full 16; `None` for any other length.
pub(super) fn widen(reply: &[i64]) -> Option<[i64; REPLY_WIDTH]> {
    if !matches!(reply.len(), 5 | 9 | 11) {
        return None;
    }
    let split = |ns: i64| {
        if ns < 0 {
            (-1, 0)
        } else {
            (ns / 1_000, ns % 1_000)
        }
    };
    let mut wide = [0; REPLY_WIDTH];
    wide[0] = reply[0];
    let duration = if reply[0] == 0 { 1 } else { 3 };
    (wide[duration], wide[duration + 1]) = split(reply[1]);
    (wide[5], wide[6]) = split(reply[2]);
    wide[7..9].copy_from_slice(&reply[3..5]);
    wide[10..10 + reply.len() - 5].copy_from_slice(&reply[5..]);
    Some(wide)
}

/// A duration sent back as whole microseconds and a nanosecond remainder; -1 µs
/// stands for `u64::MAX` ns (for ever).
fn nanos_of(micros: i64, rest: i64) -> Nanos {
    if micros < 0 {
        return u64::MAX;
    }
    let micros = micros as u64;
    let rest = u64::try_from(rest).unwrap_or(0);
    micros.saturating_mul(1_000).saturating_add(rest)
}

/// A count; -1 stands for `u64::MAX` (unlimited).
fn count_of(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A 64-bit word sent back as its high and low 32-bit halves.
fn word_of(hi: i64, lo: i64) -> u64 {
    (hi as u64) << 32 | (lo as u64 & 0xffff_ffff)
}

/// Decodes one key's reply into the decision and receipt the memory store would give.
pub(super) fn decode(reply: &[i64]) -> Option<(Decision, Receipt)> {
    let [verdict, wait_us, wait_ns, retry_us, retry_ns, reset_us, reset_ns, remaining, limit, index, mark_hi, mark_lo, charge_hi, charge_lo, spent_hi, spent_lo] =
        *reply
    else {
        return None;
    };
    let reset = nanos_of(reset_us, reset_ns);
    let (decision, receipt) = match verdict {
        0 => (
            Decision::allowed_after(
                nanos_of(wait_us, wait_ns),
                count_of(limit),
                count_of(remaining),
                reset,
            ),
            Receipt::new(
                word_of(mark_hi, mark_lo) as i64,
                word_of(charge_hi, charge_lo),
            )
            .with_stored_spent(f64::from_bits(word_of(spent_hi, spent_lo))),
        ),
        1 => (
            Decision::denied(
                count_of(limit),
                count_of(remaining),
                nanos_of(retry_us, retry_ns),
                reset,
            ),
            Receipt::NONE,
        ),
        2 => (
            Decision::never(count_of(limit), count_of(remaining), reset),
            Receipt::NONE,
        ),
        _ => return None,
    };
    Some((
        decision.with_limit_index(u32::try_from(index).unwrap_or(0)),
        receipt,
    ))
}
