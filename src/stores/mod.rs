//! Stores: where the state of a limit lives, updated atomically.
//!
//! An [algorithm](crate::algorithms) is pure; a store owns its state and applies one
//! algorithm step to it atomically, so that concurrent callers never lose an update.
//!
//! * [`cell`] holds the state of one limit (a direct limiter's). Algorithms whose
//!   state fits in one word ([`WordAlgorithm`](crate::algorithms::WordAlgorithm))
//!   live in a [`WordCell`]: one atomic load and one compare-and-swap per call, no
//!   lock. Guava's warming-up limiter (two words of state) lives in a
//!   [`WarmingUpCell`] under a sequence number: a refusal costs loads only, a grant
//!   one compare-and-swap. The sliding log and the bucketed window, whose states
//!   are fixed arrays of words (their rings), live in a [`WordArrayCell`] under a
//!   sequence number too: a refusal costs loads only, a grant one
//!   compare-and-swap. Sets of limits live in a [`LockedCell`] behind an
//!   uncontended-fast `parking_lot` mutex. Which one an algorithm uses is fixed by
//!   [`Storable`].
//! * [`store`] is the contract for keyed state: a [`Store`] applies one algorithm
//!   step to the states of one call's keys atomically, in memory or on a server.
//! * [`memory`] is the default [`Store`]: a sharded, compact in-memory table that
//!   forgets idle keys lazily, with an optional cap.
//! * `redis` (feature `redis`) runs the same steps server-side on Redis or Redis
//!   Cluster, one script call per decision, so that many processes share limits.

pub mod cell;
pub mod memory;
#[cfg(feature = "redis")]
pub mod redis;
pub mod store;

pub use cell::{LockedCell, StateCell, Storable, WarmingUpCell, WordArrayCell, WordCell};
pub use memory::MemoryStore;
pub use store::{RenderKey, Step, Store};
