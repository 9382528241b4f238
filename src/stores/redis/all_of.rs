//! [`AllOf`] sets on the server: `lua/set.lua`, one script for every set.
//!
//! A set's step is its members' steps composed in one script call: the script holds
//! every algorithm's step (as a factory, `make_<name>(config)`) and builds the set's
//! members from the configuration words, so one script serves every combination and
//! nesting. Each member keeps its own server key (all under the identity's hash
//! tag, so a set for one identity runs on one Cluster slot) with its own expiry,
//! and the set keeps a serial key: the counter whose value marks each grant, as
//! the Rust set's `LastGrant` does.

use super::algorithm::RedisAlgorithm;
use crate::algorithms::AllOf;
use crate::error::Error;

/// Appends one member: its kind, the number of its words, its words.
fn member<M: RedisAlgorithm>(member: &M, args: &mut Vec<String>) -> Result<(), Error> {
    let mut words = Vec::new();
    member.config_args(&mut words)?;
    args.push(M::KIND.to_string());
    args.push(words.len().to_string());
    args.extend(words);
    Ok(())
}

/// Appends the key suffixes of member `index`, under the set's own.
fn member_suffixes<M: RedisAlgorithm>(index: usize, out: &mut Vec<String>) {
    let mut mine = Vec::new();
    M::key_suffixes(&mut mine);
    out.extend(
        mine.into_iter()
            .map(|suffix| format!("set.{index}.{suffix}")),
    );
}

impl<A: RedisAlgorithm, B: RedisAlgorithm> RedisAlgorithm for AllOf<(A, B)> {
    const NAME: &'static str = "set";
    const KIND: u8 = 8;
    const CANCEL_RESTORES: bool = A::CANCEL_RESTORES || B::CANCEL_RESTORES;
    // Every member must give back on the server, or the set's cancel would restore
    // less than memory does: it is refused instead.
    const CANCEL_ON_SERVER: bool = A::CANCEL_ON_SERVER && B::CANCEL_ON_SERVER;

    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error> {
        let (a, b) = self.members();
        args.push("2".to_owned());
        member(a, args)?;
        member(b, args)
    }

    fn key_suffixes(out: &mut Vec<String>) {
        out.push(Self::NAME.to_owned());
        member_suffixes::<A>(0, out);
        member_suffixes::<B>(1, out);
    }
}

impl<A: RedisAlgorithm, B: RedisAlgorithm, C: RedisAlgorithm> RedisAlgorithm for AllOf<(A, B, C)> {
    const NAME: &'static str = "set";
    const KIND: u8 = 8;
    const CANCEL_RESTORES: bool = A::CANCEL_RESTORES || B::CANCEL_RESTORES || C::CANCEL_RESTORES;
    const CANCEL_ON_SERVER: bool =
        A::CANCEL_ON_SERVER && B::CANCEL_ON_SERVER && C::CANCEL_ON_SERVER;

    fn config_args(&self, args: &mut Vec<String>) -> Result<(), Error> {
        let (a, b, c) = self.members();
        args.push("3".to_owned());
        member(a, args)?;
        member(b, args)?;
        member(c, args)
    }

    fn key_suffixes(out: &mut Vec<String>) {
        out.push(Self::NAME.to_owned());
        member_suffixes::<A>(0, out);
        member_suffixes::<B>(1, out);
        member_suffixes::<C>(2, out);
    }
}
