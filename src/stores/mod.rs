//! Stores: where the states of *many* keys live (a keyed limiter's), each call
//! applied atomically.
//!
//! * [`store`] is the contract: a [`Store`] applies one algorithm step to the states
//!   of one call's keys atomically, in memory or on a server, and gives grants back
//!   without blocking.
//! * [`memory`] is the default [`Store`]: a sharded, compact in-memory table that
//!   forgets idle keys lazily, with an optional cap.
//! * [`failover`] wraps a store that can fail (Redis) with a failure policy: fail
//!   closed, fail open, or a local in-memory limit, with a back-off so that a store
//!   that is down costs no round trip.
//! * [`deny_cache`] wraps a remote store with a local cache of its refusals, so
//!   that a key over its limit is refused without a round trip until its
//!   `retry_after`.
//! * [`lease`] takes permits from a shared store (Redis) in leases of many, and
//!   grants a key's calls from its lease in this process: one round trip per
//!   lease instead of one per call, never admitting more than the shared limit.
//! * `redis` (feature `redis`) runs the same steps server-side on Redis or Redis
//!   Cluster, one script call per decision, so that many processes share limits.
//!
//! One limit's state (a direct limiter's) lives in a cell instead.
//!
//! Each store is one folder under `stores/`; adding a store touches nothing else.

pub mod deny_cache;
pub mod failover;
pub mod lease;
pub mod memory;
#[cfg(feature = "redis")]
pub mod redis;
pub mod store;

pub use memory::MemoryStore;
pub use store::{Operation, RenderKey, Reporting, Store};
