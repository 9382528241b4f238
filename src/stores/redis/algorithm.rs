//! How an algorithm runs on the server: [`RedisAlgorithm`], the request it becomes
//! (`KEYS`, `ARGV`) and the reply it comes back as (one [`Decision`] per key).

use crate::algorithms::{Algorithm, Decision, Receipt};
use crate::clock::Nanos;
use crate::error::{Applied, Error};
use std::time::Duration;

/// The largest integer every number in a script's arguments and replies stays
/// below: Lua numbers are doubles, exact up to 2⁵³.
pub(super) const EXACT: u64 = 1 << 53;

/// An [`Algorithm`] the [Redis store](super::RedisStore) can run server-side: the
/// bound on a `RedisStore`'s algorithm.
///
/// It is sealed: the store's step library holds a server-side step for each of the
/// crate's algorithms and for nothing else, so only they implement it:
/// [`FixedWindow`](crate::algorithms::FixedWindow),
/// [`LeakyBucket`](crate::algorithms::LeakyBucket),
/// [`SlidingWindowCounter`](crate::algorithms::SlidingWindowCounter),
/// [`SmoothBursty`](crate::algorithms::SmoothBursty),
/// [`SmoothWarmingUp`](crate::algorithms::SmoothWarmingUp),
/// [`SlidingWindowBuckets`](crate::algorithms::SlidingWindowBuckets),
/// [`SlidingLog`](crate::algorithms::SlidingLog), an
/// [`AllOf`](crate::algorithms::AllOf) of two or three of them and
/// [`Limits`](crate::algorithms::Limits) (a `Limits` member of another type makes
/// its call a typed error). Each step reproduces the algorithm's Rust step exactly,
/// at whole microseconds (see the [module docs](super) for the protocol and what
/// differs from memory).
///
/// ```
/// use sluicegate::algorithms::{AllOf, FixedWindow, SlidingLog};
/// use sluicegate::stores::redis::{RedisAlgorithm, RedisStore};
/// use std::time::Duration;
/// fn on_redis<A: RedisAlgorithm>(_: &A) -> RedisStore<&'static str, A> {
///     RedisStore::open("redis://127.0.0.1/").unwrap()
/// }
/// let window = FixedWindow::new(3, Duration::from_secs(60)).unwrap();
/// let log = SlidingLog::new(2, Duration::from_secs(1)).unwrap();
/// let store = on_redis(&AllOf::new((window, log)));
/// assert_eq!(
///     store.server_keys(&AllOf::new((window, log)), &"k"),
///     ["rl:{kk}:set", "rl:{kk}:set.0.fw", "rl:{kk}:set.1.log"]
/// );
/// ```
///
/// An algorithm of another crate cannot implement it (the library has no step for
/// it):
///
/// ```compile_fail,E0277
/// use sluicegate::algorithms::{Algorithm, Decision, Plain};
/// use sluicegate::stores::redis::RedisAlgorithm;
/// struct Always;
/// impl Algorithm for Always {
///     type State = ();
///     type Shape = Plain;
///     fn initial_state(&self, _now: u64) {}
///     fn reserve(&self, _: &mut (), _now: u64, _cost: u64, _max_wait: u64) -> Decision {
///         Decision::allowed(u64::MAX, u64::MAX, 0)
///     }
///     fn is_replenished(&self, _: &(), _now: u64) -> bool {
///         true
///     }
/// }
/// impl RedisAlgorithm for Always {} // the trait bound `Always: ServerStep` is not satisfied
/// ```
pub trait RedisAlgorithm: Algorithm + ServerStep {}

/// How an algorithm runs in the step library: the sealed half of
/// [`RedisAlgorithm`], reachable only inside the crate (it is public in a private
/// module, so no other crate can name it, let alone implement it).
pub trait ServerStep {
    /// A short name: the suffix of this algorithm's server keys, so that two
    /// algorithms never read each other's state.
    const NAME: &'static str;

    /// The name of the library's Lua factory that builds this algorithm's step
    /// (`make_<name>` in `lua/<name>.lua`).
    const FACTORY: &'static str;

    /// The algorithm's kind in a call: its factory's position in the library's
    /// factory table, from the one list of [`FACTORIES`](super::library::FACTORIES).
    const KIND: u8 = super::library::kind(Self::FACTORY);

    /// Appends the configuration words to the call's arguments.
    ///
    /// # Errors
    /// A typed error for a configuration the server cannot run exactly (e.g. a
    /// duration that is not a whole number of microseconds, or a count above 2⁵³).
    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error>;

    /// The suffixes of the server keys one rendered key uses (in the order the
    /// library reads them): one, [`NAME`](ServerStep::NAME), for a single
    /// algorithm; a set's serial key and its members' keys for a set.
    fn key_suffixes(&self, out: &mut Vec<String>) {
        out.push(Self::NAME.to_owned());
    }

    /// Whether [`Algorithm::cancel`] can give anything back: true for every one
    /// of the crate's algorithms (at least at the very instant of a grant); a set
    /// says whether one of its members does. False would make a cancel cost no
    /// round trip.
    const CANCEL_RESTORES: bool = true;

    /// Whether the library runs the cancel step (`ALG.cancel`): true for every
    /// one of the crate's algorithms; a set says whether all of its members do.
    const CANCEL_ON_SERVER: bool = false;

    /// Where a cancel of this configuration goes: `Ok(false)` when it restores
    /// nothing (as the default [`Algorithm::cancel`] does in memory, so no round trip
    /// is needed), `Ok(true)` when the library runs it, and an error for one that
    /// restores permits with no server-side step (saying so rather than silently
    /// restoring nothing). From the two constants above; a set whose members are
    /// chosen at run time ([`Limits`](crate::algorithms::Limits)) asks its members.
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
                "the Redis store cannot cancel a reservation of this algorithm",
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

/// A duration sent back as whole microseconds and a nanosecond remainder (from
/// 2⁵³ µs on, a multiple of 4 µs and a remainder below 4,000 ns: exact up to
/// `u64::MAX` ns, see `us_ns` in `lua/exact.lua`); -1 µs stands for `u64::MAX` ns
/// (for ever).
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
