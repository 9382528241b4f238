//! Sets on the server: `lua/set.lua`, one step for every set, [`AllOf`] (members
//! fixed by type) and [`Limits`] (members chosen at run time) alike.
//!
//! A set's step is its members' steps composed in one call: the library holds
//! every algorithm's step (as a factory, `make_<name>(config)`) and builds the set's
//! members from the configuration words, so one step serves every combination and
//! nesting. Each member keeps its own server key (all under the identity's hash
//! tag, so a set for one identity runs on one Cluster slot) with its own expiry;
//! the set keeps nothing of its own. Its receipt travels with its decision, one
//! leaf per member (see [`Layout`]), as the Rust set's receipt carries its
//! members'.
//!
//! A [`Limits`] member runs on the server if it is one of the crate's algorithms
//! (or a `Limits` of them), recognized by its type (`DynLimit::as_any`); any
//! other member makes the call a typed error before anything is sent.

use super::algorithm::{RedisAlgorithm, ServerStep};
use super::connection::failure;
use super::reply::Layout;
use crate::algorithms::multi::DynLimit;
use crate::algorithms::{
    AllOf, FixedWindow, LeakyBucket, Limits, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use crate::error::{Applied, Error};

/// What a set's configuration needs of one member, whatever its type.
trait Member {
    /// Appends the member: its kind, the number of its words, its words.
    fn push_config(&self, args: &mut Vec<String>) -> Result<(), Error>;
    /// Appends the member's key suffixes, under the set's own, as member `index`.
    fn push_suffixes(&self, index: usize, out: &mut Vec<String>);
    /// [`ServerStep::cancel_route`].
    fn route(&self) -> Result<bool, Error>;
    /// [`ServerStep::layout`].
    fn member_layout(&self) -> Layout;
}

impl<M: ServerStep> Member for M {
    fn push_config(&self, args: &mut Vec<String>) -> Result<(), Error> {
        let mut words = Vec::new();
        self.config_args(&mut words)?;
        args.push(M::KIND.to_string());
        args.push(words.len().to_string());
        args.extend(words);
        Ok(())
    }

    fn push_suffixes(&self, index: usize, out: &mut Vec<String>) {
        let mut mine = Vec::new();
        self.key_suffixes(&mut mine);
        out.extend(
            mine.into_iter()
                .map(|suffix| format!("set.{index}.{suffix}")),
        );
    }

    fn route(&self) -> Result<bool, Error> {
        self.cancel_route()
    }

    fn member_layout(&self) -> Layout {
        self.layout()
    }
}

/// A set's layout: its members', in order.
fn set_layout<'a>(members: impl IntoIterator<Item = &'a dyn Member>) -> Layout {
    Layout::Set(members.into_iter().map(Member::member_layout).collect())
}

/// A set's cancel route from its members': no round trip if none gives anything
/// back; refused if one gives back what the server cannot (the set's cancel would
/// restore less than memory does); otherwise on the server.
fn set_route<'a>(members: impl IntoIterator<Item = &'a dyn Member>) -> Result<bool, Error> {
    let mut any = false;
    for member in members {
        any |= member.route()?;
    }
    Ok(any)
}

/// The config and key suffixes of a set of `members`, in order.
fn set_config<'a>(
    members: impl ExactSizeIterator<Item = &'a dyn Member>,
    args: &mut Vec<String>,
) -> Result<(), Error> {
    args.push(members.len().to_string());
    members.into_iter().try_for_each(|m| m.push_config(args))
}

/// The members' keys; a set with none has one key, never read or written, so that
/// every identity has a key.
fn set_suffixes<'a>(members: impl IntoIterator<Item = &'a dyn Member>, out: &mut Vec<String>) {
    let first = out.len();
    for (index, member) in members.into_iter().enumerate() {
        member.push_suffixes(index, out);
    }
    if out.len() == first {
        out.push("set".to_owned());
    }
}

impl<A: RedisAlgorithm, B: RedisAlgorithm> RedisAlgorithm for AllOf<(A, B)> {}

impl<A: RedisAlgorithm, B: RedisAlgorithm> ServerStep for AllOf<(A, B)> {
    const NAME: &'static str = "set";
    const FACTORY: &'static str = "make_set";
    const CANCEL_RESTORES: bool = A::CANCEL_RESTORES || B::CANCEL_RESTORES;
    // Every member must give back on the server, or the set's cancel would restore
    // less than memory does: it is refused instead.
    const CANCEL_ON_SERVER: bool = A::CANCEL_ON_SERVER && B::CANCEL_ON_SERVER;

    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error> {
        let (a, b) = self.members();
        set_config([a as &dyn Member, b].into_iter(), args)
    }

    fn key_suffixes(&self, out: &mut Vec<String>) {
        let (a, b) = self.members();
        set_suffixes([a as &dyn Member, b], out);
    }

    fn layout(&self) -> Layout {
        let (a, b) = self.members();
        set_layout([a as &dyn Member, b])
    }
}

impl<A: RedisAlgorithm, B: RedisAlgorithm, C: RedisAlgorithm> RedisAlgorithm for AllOf<(A, B, C)> {}

impl<A: RedisAlgorithm, B: RedisAlgorithm, C: RedisAlgorithm> ServerStep for AllOf<(A, B, C)> {
    const NAME: &'static str = "set";
    const FACTORY: &'static str = "make_set";
    const CANCEL_RESTORES: bool = A::CANCEL_RESTORES || B::CANCEL_RESTORES || C::CANCEL_RESTORES;
    const CANCEL_ON_SERVER: bool =
        A::CANCEL_ON_SERVER && B::CANCEL_ON_SERVER && C::CANCEL_ON_SERVER;

    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error> {
        let (a, b, c) = self.members();
        set_config([a as &dyn Member, b, c].into_iter(), args)
    }

    fn key_suffixes(&self, out: &mut Vec<String>) {
        let (a, b, c) = self.members();
        set_suffixes([a as &dyn Member, b, c], out);
    }

    fn layout(&self) -> Layout {
        let (a, b, c) = self.members();
        set_layout([a as &dyn Member, b, c])
    }
}

/// A [`Limits`] member as the server runs it: one of the crate's algorithms (or a
/// nested `Limits`), found by its type.
fn known(limit: &dyn DynLimit) -> Option<&dyn Member> {
    let any = limit.as_any();
    macro_rules! first_of {
        ($($kind:ty),*) => {
            $(if let Some(member) = any.downcast_ref::<$kind>() {
                return Some(member);
            })*
        };
    }
    first_of!(
        FixedWindow,
        LeakyBucket,
        SlidingWindowCounter,
        SmoothBursty,
        SmoothWarmingUp,
        SlidingWindowBuckets,
        SlidingLog,
        Limits
    );
    None
}

impl Limits {
    /// Every member as the server runs it, or the typed error that names the first
    /// one it cannot run.
    fn server_members(&self) -> Result<Vec<&dyn Member>, Error> {
        self.members()
            .iter()
            .enumerate()
            .map(|(index, limit)| {
                known(&**limit).ok_or_else(|| {
                    failure(
                        Applied::No,
                        redis::RedisError::from((
                            redis::ErrorKind::Client,
                            "a Limits member the Redis store cannot run",
                            format!(
                                "member {index} is not one of the crate's algorithms (FixedWindow, \
                                 LeakyBucket, SlidingWindowCounter, SmoothBursty, SmoothWarmingUp, \
                                 SlidingWindowBuckets, SlidingLog, or a Limits of them)"
                            ),
                        )),
                    )
                })
            })
            .collect()
    }
}

/// A set whose members are chosen at run time (a member that is not one of the
/// crate's algorithms makes its call a typed error). The empty set answers as in
/// memory (its step admits everything).
impl RedisAlgorithm for Limits {}

/// Its consts describe the set's own step; whether a cancel goes to the server is
/// asked of its members ([`cancel_route`](ServerStep::cancel_route)).
impl ServerStep for Limits {
    const NAME: &'static str = "set";
    const FACTORY: &'static str = "make_set";
    const CANCEL_ON_SERVER: bool = true;

    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error> {
        set_config(self.server_members()?.into_iter(), args)
    }

    /// A member the server cannot run has no keys; the call is refused by
    /// [`config_args`](ServerStep::config_args) before anything is sent.
    fn key_suffixes(&self, out: &mut Vec<String>) {
        set_suffixes(self.members().iter().filter_map(|m| known(&**m)), out);
    }

    fn layout(&self) -> Layout {
        set_layout(self.members().iter().filter_map(|m| known(&**m)))
    }

    fn cancel_route(&self) -> Result<bool, Error> {
        set_route(self.server_members()?)
    }
}
