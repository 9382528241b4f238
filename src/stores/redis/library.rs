//! The step library: every algorithm's server-side step in one Redis Functions
//! library (`FUNCTION LOAD`), called as one `FCALL` per decision.
//!
//! Why a library and not `EVALSHA` scripts: a script's body runs from the top on
//! every call, so a step that defines its helpers and builds its algorithm from the
//! configuration pays for that on every decision (most of the server's CPU per
//! call for the simpler algorithms). A library's chunk runs once, at load; a call
//! runs only `call` (`lua/driver.lua`), which finds the algorithm already built for
//! its configuration text. It needs Redis 7.0 or later (or Valkey).
//!
//! The library's name and its one function's name are `sluicegate_` and the first
//! 16 hex digits of the SHA-1 of its source, so two versions of this crate on one
//! server never run each other's code, and a library of the same name is the same
//! code (loading it again is harmless). Functions live with the data set: they are
//! replicated and persisted, and survive `SCRIPT FLUSH`; `FUNCTION FLUSH` or a
//! restart without persistence drops them, and the next call loads the library
//! once more (only on the server's explicit "Function not found").

use redis::Cmd;
use std::sync::OnceLock;

/// The library's Lua chunk, without its header line and its registration.
const BODY: &str = concat!(
    include_str!("lua/prelude.lua"),
    include_str!("lua/exact.lua"),
    include_str!("lua/fixed_window.lua"),
    include_str!("lua/leaky_bucket.lua"),
    include_str!("lua/sliding_window_counter.lua"),
    include_str!("lua/smooth_bursty.lua"),
    include_str!("lua/sliding_window_buckets.lua"),
    include_str!("lua/sliding_log.lua"),
    include_str!("lua/smooth_warming_up.lua"),
    include_str!("lua/set.lua"),
    include_str!("lua/driver.lua"),
);

/// The library as loaded: its name (also its function's) and its full source.
pub(super) struct Library {
    name: String,
    source: String,
}

/// The library, built once per process.
pub(super) fn library() -> &'static Library {
    static LIBRARY: OnceLock<Library> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        // redis-rs computes a script's SHA-1; the digest names the code.
        let digest = redis::Script::new(BODY).get_hash().to_owned();
        let name = format!("sluicegate_{}", &digest[..16]);
        let source =
            format!("#!lua name={name}\n{BODY}\nredis.register_function('{name}', call)\n");
        Library { name, source }
    })
}

impl Library {
    /// `FCALL` of the step function with `keys` and `args`.
    pub(super) fn call(&self, keys: &[String], args: &[String]) -> Cmd {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(&self.name).arg(keys.len()).arg(keys).arg(args);
        cmd
    }

    /// `FUNCTION LOAD` of the library (on Cluster, redis-rs sends it to every master).
    pub(super) fn load(&self) -> Cmd {
        let mut cmd = redis::cmd("FUNCTION");
        cmd.arg("LOAD").arg(&self.source);
        cmd
    }
}

/// Whether the server refused a call because it does not hold the library (after
/// `FUNCTION FLUSH`, a restart, or on a new node): the call did not run.
pub(super) fn is_missing(error: &redis::RedisError) -> bool {
    error.code() == Some("ERR") && error.detail() == Some("Function not found")
}

/// Whether a load failed only because the library is already there (another
/// process loaded it first; the same name is the same code).
pub(super) fn is_already_loaded(error: &redis::RedisError) -> bool {
    error
        .detail()
        .is_some_and(|detail| detail.contains("already exists"))
}
