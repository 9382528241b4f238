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

/// The library's factories, in kind order: an algorithm's kind
/// ([`ServerStep::KIND`](super::algorithm::ServerStep::KIND), the number a call
/// names it by) is its factory's position here, from 1 as Lua counts. The
/// library's `FACTORIES` table is written from this list (see [`library`]), so the
/// numbers and the table cannot disagree.
pub(super) const FACTORIES: [&str; 8] = [
    "make_fixed_window",
    "make_leaky_bucket",
    "make_sliding_window_counter",
    "make_smooth_bursty",
    "make_sliding_window_buckets",
    "make_sliding_log",
    "make_smooth_warming_up",
    "make_set",
];

/// The kind of the algorithm whose step `factory` builds: its position in
/// [`FACTORIES`], from 1. A name not in the list fails the build (the panic is
/// raised in constant evaluation).
pub(super) const fn kind(factory: &str) -> u8 {
    let mut index = 0;
    while index < FACTORIES.len() {
        if same(FACTORIES[index].as_bytes(), factory.as_bytes()) {
            return index as u8 + 1;
        }
        index += 1;
    }
    panic!("not a factory of the step library")
}

/// Byte-wise equality, in a `const fn`.
const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The library's Lua chunk up to the factories' table: the shared prelude and
/// every algorithm's factory (`make_<name>`, with `set.lua`'s forward declaration
/// of `FACTORIES`).
const STEPS: &str = concat!(
    include_str!("lua/prelude.lua"),
    include_str!("lua/exact.lua"),
    include_str!("lua/fixed_window.lua"),
    include_str!("lua/leaky_bucket.lua"),
    include_str!("lua/sliding_window_counter.lua"),
    include_str!("lua/smooth_bursty.lua"),
    include_str!("lua/sliding_window_buckets_hash.lua"),
    include_str!("lua/sliding_window_buckets_entries.lua"),
    include_str!("lua/sliding_window_buckets.lua"),
    include_str!("lua/sliding_log.lua"),
    include_str!("lua/smooth_warming_up.lua"),
    include_str!("lua/set.lua"),
);

/// The rest of the chunk, after the factories' table: the driver (`call`).
const DRIVER: &str = include_str!("lua/driver.lua");

/// The library's Lua chunk, without its header line and its registration:
/// [`STEPS`], the factories' table written from [`FACTORIES`], [`DRIVER`]. The same
/// text on every build of the same source, so its digest names it.
fn body() -> String {
    format!(
        "{STEPS}\nFACTORIES = {{{}}}\n\n{DRIVER}",
        FACTORIES.join(", ")
    )
}

/// The library as loaded: its name (also its function's) and its full source.
pub(super) struct Library {
    name: String,
    source: String,
}

/// The library, built once per process.
pub(super) fn library() -> &'static Library {
    static LIBRARY: OnceLock<Library> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        let body = body();
        // redis-rs computes a script's SHA-1; the digest names the code.
        let digest = redis::Script::new(&body).get_hash().to_owned();
        let name = format!("sluicegate_{}", &digest[..16]);
        let source =
            format!("#!lua name={name}\n{body}\nredis.register_function('{name}', call)\n");
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

#[cfg(test)]
mod tests {
    use super::super::algorithm::ServerStep;
    use super::{body, library, FACTORIES};
    use crate::algorithms::{
        AllOf, FixedWindow, LeakyBucket, Limits, SlidingLog, SlidingWindowBuckets,
        SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
    };
    use std::path::Path;

    /// A type's kind, its factory, and the Lua file that must define that factory.
    fn step<A: ServerStep>(file: &'static str) -> (u8, &'static str, &'static str) {
        (A::KIND, A::FACTORY, file)
    }

    /// Every algorithm the store runs, with the file of its step.
    fn every_step() -> Vec<(u8, &'static str, &'static str)> {
        vec![
            step::<FixedWindow>("fixed_window.lua"),
            step::<LeakyBucket>("leaky_bucket.lua"),
            step::<SlidingWindowCounter>("sliding_window_counter.lua"),
            step::<SmoothBursty>("smooth_bursty.lua"),
            step::<SmoothWarmingUp>("smooth_warming_up.lua"),
            step::<SlidingWindowBuckets>("sliding_window_buckets.lua"),
            step::<SlidingLog>("sliding_log.lua"),
            step::<AllOf<(FixedWindow, SlidingLog)>>("set.lua"),
            step::<AllOf<(FixedWindow, SlidingLog, LeakyBucket)>>("set.lua"),
            step::<Limits>("set.lua"),
        ]
    }

    /// The factories' table as the library's Lua assigns it (the entries of its one
    /// `FACTORIES = {...}` statement), read back from the library's text.
    fn lua_factories(text: &str) -> Vec<String> {
        let assignments: Vec<&str> = text
            .match_indices("FACTORIES = {")
            .map(|(at, _)| &text[at + "FACTORIES = {".len()..])
            .filter(|rest| !rest.starts_with('}'))
            .collect();
        assert_eq!(
            assignments.len(),
            1,
            "the library assigns the factories' table once (the `local FACTORIES = {{}}` \
             declaration aside)"
        );
        let rest = assignments[0];
        let entries = &rest[..rest.find('}').expect("the table closes")];
        entries
            .split(',')
            .map(|entry| entry.trim().to_owned())
            .collect()
    }

    #[test]
    fn every_kind_names_its_own_factory_in_the_lua_table() {
        let text = &library().source;
        let table = lua_factories(text);
        assert_eq!(table, FACTORIES);
        let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/stores/redis/lua");
        for (kind, factory, file) in every_step() {
            let index = usize::from(kind) - 1;
            assert_eq!(
                table.get(index).map(String::as_str),
                Some(factory),
                "kind {kind}"
            );
            // The factory at that position is the one this algorithm's Lua file
            // defines, and the library holds that file.
            let source = std::fs::read_to_string(lua.join(file)).unwrap();
            let definition = format!("local function {factory}(");
            assert!(source.contains(&definition), "{file} defines {factory}");
            assert!(text.contains(&source), "the library holds {file}");
        }
        // Each kind is one factory, and every factory is some algorithm's.
        for (position, factory) in FACTORIES.iter().enumerate() {
            assert_eq!(usize::from(super::kind(factory)), position + 1);
            assert!(every_step().iter().any(|&(_, f, _)| f == *factory));
        }
    }

    #[test]
    fn the_library_text_is_the_same_on_every_build() {
        assert_eq!(body(), body());
        let text = &library().source;
        let name = &library().name;
        assert!(text.starts_with(&format!("#!lua name={name}\n")));
        assert!(text.ends_with(&format!("redis.register_function('{name}', call)\n")));
    }

    /// The `src/...` paths a Lua file's header (its first comment block) names.
    fn header_paths(source: &str) -> Vec<String> {
        source
            .lines()
            .take_while(|line| line.starts_with("--"))
            .flat_map(|line| {
                line.split(|c: char| !(c.is_ascii_alphanumeric() || "_/.".contains(c)))
                    .filter(|word| word.starts_with("src/"))
                    .map(|word| word.trim_end_matches('.').to_owned())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn every_lua_header_names_rust_files_that_exist() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = 0;
        for entry in std::fs::read_dir(root.join("src/stores/redis/lua")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("lua") {
                continue;
            }
            files += 1;
            let source = std::fs::read_to_string(&path).unwrap();
            let paths = header_paths(&source);
            // A file holding an algorithm's step names the Rust it transcribes.
            if source.contains("local function make_") {
                assert!(
                    !paths.is_empty(),
                    "{} names its Rust source",
                    path.display()
                );
            }
            for named in paths {
                assert!(
                    named.ends_with(".rs") && root.join(&named).is_file(),
                    "{} names {named}, which is not a file of the crate",
                    path.display()
                );
            }
        }
        assert_eq!(files, 13, "every Lua file of the library is checked");
    }
}
