//! A tower layer for HTTP servers: each request is charged to its key and refused
//! with `429 Too Many Requests` when over the limit (feature `tower`).
//!
//! ```text
//!   request ─► weigh: (key, cost) ─► limiter.check_each(key, cost)
//!        cost 0  ─► inner service ─► response, no fields (free, uncounted)
//!        allowed ─► inner service ─► response + RateLimit, RateLimit-Policy
//!        denied  ─► 429 + Retry-After, RateLimit, RateLimit-Policy  (inner not called)
//!                   or, with delay_up_to(max) and a wait within max:
//!                   wait for the permits ─► inner service ─► response + RateLimit-Policy
//!        never   ─► 400 (or the status set) + RateLimit, RateLimit-Policy, no Retry-After
//! ```
//!
//! The check never waits for permits unless told to
//! ([`delay_up_to`](ServerLayer::delay_up_to)): a server answers at once. With a
//! limiter whose state is in this process (a direct limiter, the in-memory store)
//! it runs in `call` (allocating nothing without fields; a described grant boxes
//! its description for the response future); with a remote
//! store (Redis) the response future awaits the store's reply
//! ([`Store::apply_async`](crate::stores::Store::apply_async)), so no thread
//! blocks on the round trip. The inner service is `Clone` for that: the future
//! carries the readied service to call once the reply allows it (tower's pattern
//! for services that call later). A layer that sends no fields
//! ([`RateLimitHeaders::none`]) runs the lean check
//! ([`Permits::try_take`](crate::adapters::Permits::try_take)): a grant is not
//! described, a refusal is, in full.
//!
//! **A cost that can never be granted** (above the capacity of a limit: a request
//! that weighs more than the whole quota) is not a `429`: RFC 6585 defines `429` as
//! too many requests in a given time, answered so that the client waits, but no
//! wait will let this one through, and a client that retries a `429` (most do, with
//! or without `Retry-After`) would retry for ever. Nor is it `413 Content Too
//! Large` in general: RFC 9110 defines `413` for request *content* larger than the
//! server will process, which misleads when the cost is not the body's size. It is
//! answered `400 Bad Request` by default (RFC 9110: the server will not process the
//! request because of something perceived as a client error; the request must
//! change before it can succeed), without `Retry-After`, with the policy fields
//! showing the quota the request exceeds (draft-10 ties no status to its fields).
//! [`never_status`](ServerLayer::never_status) picks another: `413` when the cost
//! *is* the content's size (`qu="content-bytes"`), `403` for an API that answers
//! quota exhaustion so.
//!
//! A cost of 0 is free: let through at once, uncounted, without fields (the rule of
//! every adapter, see [`adapters`](crate::adapters)). A store that fails
//! (unreachable Redis) is answered `503 Service Unavailable` (fail closed) unless
//! [`fail_open`](ServerLayer::fail_open) lets such requests through. Over a
//! [`FailoverStore`](crate::stores::failover::FailoverStore), whose policy answers
//! without waiting on the store, the layer answers the same way but at once: an
//! unchecked grant ([`Source::Unchecked`](crate::Source::Unchecked)) goes through
//! without fields, and a failed-closed refusal
//! ([`Source::FailedClosed`](crate::Source::FailedClosed)) is a `503` whose
//! `Retry-After` is how long the store is left alone, never held back. Neither
//! consulted a limit, so no `RateLimit` field would be true of it. A local
//! fallback's decisions ([`Source::Local`](crate::Source::Local)) are described
//! like any others, by the share of the quota they enforce.
//!
//! **Stacked layers** (a per-client limit over a global one, a per-route limit
//! inside both) each add their own fields: `RateLimit` and `RateLimit-Policy` go on
//! separate field lines, one per layer (the draft lets a list span lines), so a
//! client sees every limit that applies and the one that refused (`r=0`, its `t`
//! the `Retry-After`). Name each layer's policies apart. An outer layer never
//! shortens a `Retry-After` an inner one wrote, and the legacy `X-RateLimit-*`
//! trio, which can describe one limit only, stays the inner refusal's (or, between
//! grants, the one with the fewest remaining). See [`RateLimitHeaders`].

mod client_ip;
mod future;
mod headers;
mod layer;
mod partition;
mod policy;
mod quotas;
mod service;

pub use client_ip::{client_ip, Forwarding};
pub use future::ResponseFuture;
pub use headers::RateLimitHeaders;
pub use layer::{KeyOnly, ServerLayer};
pub use policy::{Legacy, Policy};
pub use quotas::Quotas;
pub use service::Server;
