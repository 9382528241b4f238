//! What other crates cannot name: public items in a module private to the crate.

use crate::clock::Nanos;

/// The seal of [`AdjustableRate`](super::AdjustableRate): only the crate's
/// rate-based algorithms implement it.
pub trait Sealed {}
impl Sealed for super::SmoothBursty {}
impl Sealed for super::SmoothWarmingUp {}

/// One call to a set: the arguments every member is asked with (the sets' step,
/// in `multi`, is its methods), and what a set passes a member that reports each
/// limit ([`Algorithm::reserve_leaves`](super::Algorithm::reserve_leaves),
/// [`answer_leaves`](super::Algorithm::answer_leaves)). Taking it seals those
/// two methods: code outside the crate can neither make one (to call them) nor
/// name it (to implement them), so they are not part of the public surface.
///
/// ```compile_fail
/// use sluicegate::algorithms::{Algorithm, FixedWindow};
/// let window = FixedWindow::new(1, std::time::Duration::from_secs(1)).unwrap();
/// let mut state = window.initial_state(0);
/// // No crate but this one can name or build the call.
/// window.reserve_leaves(&mut state, sluicegate::algorithms::sealed::MemberCall {
///     now: 0, cost: 1, max_wait: 0, receipts: false,
/// }, &mut |_| {});
/// ```
#[derive(Clone, Copy, Debug)]
pub struct MemberCall {
    pub(crate) now: Nanos,
    pub(crate) cost: u64,
    pub(crate) max_wait: Nanos,
    /// Whether the caller keeps the grant's receipt: without it a member that
    /// is a set builds none either, so it allocates nothing.
    pub(crate) receipts: bool,
}

impl MemberCall {
    /// Reserves in `algorithm`, with the grant's receipt only if the caller
    /// keeps one.
    #[inline]
    pub(crate) fn reserve<A: super::Algorithm + ?Sized>(
        self,
        algorithm: &A,
        state: &mut A::State,
    ) -> (super::Decision, super::Receipt) {
        let MemberCall {
            now,
            cost,
            max_wait,
            receipts,
        } = self;
        if receipts {
            algorithm.reserve(state, now, cost, max_wait)
        } else {
            (
                algorithm.reserve(state, now, cost, max_wait),
                super::Receipt::NONE,
            )
        }
    }
}
