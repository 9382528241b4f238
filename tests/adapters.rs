//! The adapters: the client layer (pacing, holds, back-off), the server layer (its
//! fields in every form, delays, stacking, recipes, over the Redis store), each
//! algorithm's standing as the server reports it, the Stream and Sink adapters, and
//! a real loopback between the two layers, and the two layers as a service uses
//! them over every store (`service_*`); the outbound adapters and `Jitter` as their
//! documentation alone describes them (`streams_from_docs*`), and a set's
//! per-limit fields over real HTTP (`sets_headers_from_docs`), a nested set's
//! fields named after its leaf limits (`nested_sets_headers`), and hostile input
//! to the layers and `HoldBack` (`hostile_input_from_docs`). Modules gate
//! themselves on `tower` (and `redis`) where they need it.

mod support;

#[path = "adapters/backoff.rs"]
mod backoff;
#[path = "adapters/client.rs"]
mod client;
#[path = "adapters/client_common.rs"]
mod client_common;
#[path = "adapters/client_concurrency_from_docs.rs"]
mod client_concurrency_from_docs;
#[path = "adapters/client_given_back_turns_from_docs.rs"]
mod client_given_back_turns_from_docs;
#[path = "adapters/client_hold_turns.rs"]
mod client_hold_turns;
#[path = "adapters/client_holds.rs"]
mod client_holds;
#[path = "adapters/client_holds_from_docs.rs"]
mod client_holds_from_docs;
#[path = "adapters/client_remote_store_from_docs.rs"]
mod client_remote_store_from_docs;
#[path = "adapters/client_requests_from_docs.rs"]
mod client_requests_from_docs;
#[path = "adapters/hostile_input_from_docs.rs"]
mod hostile_input_from_docs;
#[path = "adapters/loopback.rs"]
mod loopback;
#[path = "adapters/nested_sets_headers.rs"]
mod nested_sets_headers;
#[path = "adapters/server.rs"]
mod server;
#[path = "adapters/server_concurrency_from_docs.rs"]
mod server_concurrency_from_docs;
#[path = "adapters/server_delay.rs"]
mod server_delay;
#[path = "adapters/server_draft.rs"]
mod server_draft;
#[path = "adapters/server_failover.rs"]
mod server_failover;
#[path = "adapters/server_failover_on_redis_from_docs.rs"]
mod server_failover_on_redis_from_docs;
#[path = "adapters/server_fields_from_docs.rs"]
mod server_fields_from_docs;
#[path = "adapters/server_fields_read_back.rs"]
mod server_fields_read_back;
#[path = "adapters/server_http.rs"]
mod server_http;
#[path = "adapters/server_keys_from_docs.rs"]
mod server_keys_from_docs;
#[path = "adapters/server_legacy.rs"]
mod server_legacy;
#[path = "adapters/server_on_redis.rs"]
mod server_on_redis;
#[path = "adapters/server_over_redis_from_docs.rs"]
mod server_over_redis_from_docs;
#[path = "adapters/server_recipes.rs"]
mod server_recipes;
#[path = "adapters/server_redis_common.rs"]
mod server_redis_common;
#[path = "adapters/server_stacked.rs"]
mod server_stacked;
#[path = "adapters/service_memory.rs"]
mod service_memory;
#[path = "adapters/service_stores.rs"]
mod service_stores;
#[path = "adapters/sets_headers_from_docs.rs"]
mod sets_headers_from_docs;
#[path = "adapters/standing_per_algorithm.rs"]
mod standing_per_algorithm;
#[path = "adapters/stream_sink.rs"]
mod stream_sink;
#[path = "adapters/stream_sink_edges_from_docs.rs"]
mod stream_sink_edges_from_docs;
#[path = "adapters/streams_from_docs.rs"]
mod streams_from_docs;
#[path = "adapters/streams_from_docs_client.rs"]
mod streams_from_docs_client;
#[path = "adapters/streams_from_docs_real_clock.rs"]
mod streams_from_docs_real_clock;
#[path = "adapters/zero_cost.rs"]
mod zero_cost;
