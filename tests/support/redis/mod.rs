//! A real Redis for the Redis store's tests: a `redis-server` the harness starts
//! itself (on a free port, no persistence, its own temporary directory), or the one
//! `REDIS_URL` names. Nothing here skips: a test that cannot get a server panics and
//! says why.
//!
//! Fault helpers (kill, pause, resume, restart) act only on a server this harness
//! started, never on one it was given: [`RedisServer::start_own`] always starts one.
//! [`RedisCluster::start`] starts three Cluster masters and joins them.
#![allow(dead_code)]

mod cluster;
mod faults;
mod process;
mod server;
mod store_calls;
mod tls;
pub mod trace;

// The helpers, under the paths the tests use. No test crate uses all of them: as with
// dead code above, an unused one is no error.
#[allow(unused_imports)]
pub use self::{
    cluster::RedisCluster,
    faults::a_restarted_node_loses_no_call,
    server::RedisServer,
    store_calls::{
        assert_unapplied_error, calls, current_thread_runtime, take, try_take, unique_prefix,
        unreachable_store, window, SECOND, YEAR,
    },
    tls::test_ca,
};
#[cfg(feature = "redis-tls")]
#[allow(unused_imports)]
pub use tls::trust_test_ca;
