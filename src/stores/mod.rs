//! Stores: where the state of a limit lives, updated atomically.
//!
//! An [algorithm](crate::algorithms) is pure; a store owns its state and applies one
//! algorithm step to it atomically, so that concurrent callers never lose an update.
//!
//! * [`cell`] holds the state of one limit (a direct limiter's). Algorithms whose
//!   state fits in one word ([`WordAlgorithm`](crate::algorithms::WordAlgorithm))
//!   live in a [`WordCell`]: one atomic load and one compare-and-swap per call, no
//!   lock. The others live in a [`LockedCell`] behind an uncontended-fast
//!   `parking_lot` mutex. Which one an algorithm uses is fixed by [`Storable`].

pub mod cell;

pub use cell::{LockedCell, StateCell, Storable, WordCell};
