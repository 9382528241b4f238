//! The Redis store (feature `redis`) on a real server the harness starts: the
//! store's own behaviour, each algorithm's decisions against memory on random
//! traces and at each algorithm's documented edges (`algorithm_edges_from_docs`),
//! keyed reservations, abandoned waits, and the limiter API on a Cluster
//! as its docs describe it (`cluster_*_from_docs`); operating the store when Redis
//! is slow, down or hot (`operating_*_from_docs`); the deny cache, leases and
//! failure policies over a Cluster, and TLS with them, as their docs describe them
//! (`wrappers_on_cluster_from_docs`, `failover_on_cluster_from_docs`,
//! `cancels_and_backoff_on_cluster_from_docs`, `tls_from_docs`), and waiting as
//! the docs describe it (`waiting_from_docs`), sets through the keyed limiter as
//! their docs describe them (`sets_from_docs`), sets nested in sets reporting and
//! numbering their leaf limits as memory does (`nested_sets`), and the seeds'
//! worked examples about Redis (`seeds_worked_examples`), and hostile key texts,
//! prefixes, absent servers and configurations past the server's range
//! (`hostile_input_from_docs`). Random traces of sets on Redis, the Cluster's
//! routing and TLS have crates of their own.

mod support;

#[path = "redis_store/abandoned_waits.rs"]
mod abandoned_waits;
#[path = "redis_store/algorithm_edges_from_docs.rs"]
mod algorithm_edges_from_docs;
#[path = "redis_store/bad_input_connections_from_docs.rs"]
mod bad_input_connections_from_docs;
#[path = "redis_store/bad_input_counts_and_time_from_docs.rs"]
mod bad_input_counts_and_time_from_docs;
#[path = "redis_store/bad_input_keys_from_docs.rs"]
mod bad_input_keys_from_docs;
#[path = "redis_store/cancels_and_backoff_on_cluster_from_docs.rs"]
mod cancels_and_backoff_on_cluster_from_docs;
#[path = "redis_store/cluster_all_calls_from_docs.rs"]
mod cluster_all_calls_from_docs;
#[path = "redis_store/cluster_common.rs"]
mod cluster_common;
#[path = "redis_store/cluster_concurrency_from_docs.rs"]
mod cluster_concurrency_from_docs;
#[path = "redis_store/cluster_keys_and_slots_from_docs.rs"]
mod cluster_keys_and_slots_from_docs;
#[path = "redis_store/cluster_node_down_from_docs.rs"]
mod cluster_node_down_from_docs;
#[path = "redis_store/cluster_one_api_from_docs.rs"]
mod cluster_one_api_from_docs;
#[path = "redis_store/configuration.rs"]
mod configuration;
#[path = "redis_store/deadlines.rs"]
mod deadlines;
#[path = "redis_store/failover_on_cluster_from_docs.rs"]
mod failover_on_cluster_from_docs;
#[path = "redis_store/fixed_window.rs"]
mod fixed_window;
#[path = "redis_store/hostile_input_from_docs.rs"]
mod hostile_input_from_docs;
#[path = "redis_store/keyed_reservations.rs"]
mod keyed_reservations;
#[path = "redis_store/leaky_bucket.rs"]
mod leaky_bucket;
#[path = "redis_store/nested_sets.rs"]
mod nested_sets;
#[path = "redis_store/operating_common.rs"]
mod operating_common;
#[path = "redis_store/operating_failures_and_cancels_from_docs.rs"]
mod operating_failures_and_cancels_from_docs;
#[path = "redis_store/operating_plain_store_from_docs.rs"]
mod operating_plain_store_from_docs;
#[path = "redis_store/operating_policies_from_docs.rs"]
mod operating_policies_from_docs;
#[path = "redis_store/operating_sets_from_docs.rs"]
mod operating_sets_from_docs;
#[path = "redis_store/operating_stacked_wrappers_from_docs.rs"]
mod operating_stacked_wrappers_from_docs;
#[path = "redis_store/outages_and_leases.rs"]
mod outages_and_leases;
#[path = "redis_store/runtimes.rs"]
mod runtimes;
#[path = "redis_store/seeds_worked_examples.rs"]
mod seeds_worked_examples;
#[path = "redis_store/sets_from_docs.rs"]
mod sets_from_docs;
#[path = "redis_store/sliding_log.rs"]
mod sliding_log;
#[path = "redis_store/sliding_window_buckets.rs"]
mod sliding_window_buckets;
#[path = "redis_store/sliding_window_counter.rs"]
mod sliding_window_counter;
#[path = "redis_store/smooth_bursty.rs"]
mod smooth_bursty;
#[path = "redis_store/smooth_warming_up.rs"]
mod smooth_warming_up;
#[path = "redis_store/store_common.rs"]
mod store_common;
#[path = "redis_store/store_connections.rs"]
mod store_connections;
#[path = "redis_store/store_decisions.rs"]
mod store_decisions;
#[path = "redis_store/store_keys_and_state.rs"]
mod store_keys_and_state;
#[path = "redis_store/tls_from_docs.rs"]
mod tls_from_docs;
#[path = "redis_store/twin_limiters.rs"]
mod twin_limiters;
#[path = "redis_store/waiting_from_docs.rs"]
mod waiting_from_docs;
#[path = "redis_store/wrappers_on_cluster_from_docs.rs"]
mod wrappers_on_cluster_from_docs;
