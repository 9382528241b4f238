//! A tower layer for HTTP servers: each request is charged to its key and refused
//! with `429 Too Many Requests` when over the limit (feature `tower`).
//!
//! ```text
//!   request ─► meter: (key, cost) ─► limiter.check(key, cost)
//!        allowed ─► inner service ─► response + RateLimit, RateLimit-Policy
//!        denied  ─► 429 + Retry-After, RateLimit, RateLimit-Policy  (inner not called)
//!        never   ─► 413 (or the status set) + RateLimit, RateLimit-Policy, no Retry-After
//! ```
//!
//! The check never waits for permits: a server answers at once. With a limiter
//! whose state is in this process (a direct limiter, the in-memory store) it runs
//! in `call`, allocation-free; with a remote store (Redis) the response future
//! awaits the store's reply ([`Store::apply_async`](crate::stores::Store::apply_async)),
//! so no thread blocks on the round trip. The inner service is `Clone` for that:
//! the future carries the readied service to call once the reply allows it (tower's
//! pattern for services that call later). A layer that sends no fields
//! ([`RateLimitHeaders::none`]) runs the lean check
//! ([`Permits::try_take`](crate::adapters::Permits::try_take)): a grant is not
//! described, a refusal is, in full.
//!
//! **A cost that can never be granted** (above the capacity of a limit: a request
//! that weighs more than the whole quota) is not a `429`: no retry time exists, and a
//! client that honours `Retry-After` would retry for ever. It is answered
//! `413 Content Too Large` by default, without `Retry-After`, with the policy fields
//! showing the quota the request exceeds
//! ([`never_status`](ServerLayer::never_status) picks another status, e.g. `400`).
//! A cost of 0 is let through uncounted, without fields. A store that fails
//! (unreachable Redis) is answered `503 Service Unavailable` (fail closed) unless
//! [`fail_open`](ServerLayer::fail_open) lets such requests through.

mod headers;
mod layer;
mod quotas;
mod service;

pub use headers::{Legacy, Policy, RateLimitHeaders};
pub use layer::ServerLayer;
pub use quotas::Quotas;
pub use service::{ResponseFuture, Server};
