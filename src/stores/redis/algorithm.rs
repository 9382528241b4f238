//! How an algorithm runs on the server: [`RedisAlgorithm`], the request it becomes
//! (`KEYS`, `ARGV`) and the reply it comes back as (one [`Decision`] per key).

use super::reply::Layout;
use crate::algorithms::Algorithm;
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
///     ["rl:{kk}:set.0.fw", "rl:{kk}:set.1.log"]
/// );
/// ```
///
/// An algorithm of another crate cannot implement it (the library has no step for
/// it):
///
/// ```compile_fail,E0277
/// use sluicegate::algorithms::{Algorithm, Decision, Plain, Receipt, Report};
/// use sluicegate::stores::redis::RedisAlgorithm;
/// struct Always;
/// impl Algorithm for Always {
///     type State = ();
///     type Shape = Plain;
///     fn initial_state(&self, _now: u64) {}
///     fn reserve<R: Report>(&self, _: &mut (), _now: u64, _cost: u64, _max_wait: u64) -> R {
///         R::granted(|| Decision::allowed(u64::MAX, u64::MAX, 0), || Receipt::NONE)
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
    /// algorithm; its members' keys for a set.
    fn key_suffixes(&self, out: &mut Vec<String>) {
        out.push(Self::NAME.to_owned());
    }

    /// Where a key's receipt is in a reply and a cancel: a single algorithm's in
    /// its decision; a set's after it, member by member.
    fn layout(&self) -> Layout {
        Layout::One
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
