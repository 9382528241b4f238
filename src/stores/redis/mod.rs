//! The Redis store (feature `redis`): keyed limits shared by every process that
//! talks to one Redis or Redis Cluster, each decision one function call, one round
//! trip, whatever the number of keys.
//!
//! ```no_run
//! use sluicegate::algorithms::FixedWindow;
//! use sluicegate::stores::redis::RedisStore;
//! use sluicegate::KeyedRateLimiter;
//! use std::time::Duration;
//! let window = FixedWindow::new(100, Duration::from_secs(60)).unwrap();
//! let store = RedisStore::open("redis://127.0.0.1/").unwrap();
//! let limiter = KeyedRateLimiter::with_store(window, store, sluicegate::DefaultClock::new());
//! let decision = limiter.check(&"alice", 1)?; // one round trip
//! println!("allowed: {}, remaining: {}", decision.is_allowed(), decision.remaining());
//! # Ok::<(), sluicegate::Error>(())
//! ```
//!
//! # The model
//!
//! [`RedisStore`] implements the [store contract](super::store) by running each
//! algorithm's step *on the server*, in one Lua library of Redis Functions that
//! holds every algorithm's step ([`RedisAlgorithm`] turns a configuration into the
//! call's arguments). It is loaded once per server (`FUNCTION LOAD`; Redis 7.0 or
//! later, or Valkey), and a call is one `FCALL`:
//!
//! ```text
//!   KEYS  the server keys of each key of the call, in order (one per key; a set:
//!         its members' keys)
//!   ARGV  the call: expiry grace in ms, the algorithm's kind and its words, then
//!         ';', the step ('r' reserve, 'p' peek, 'c' cancel; 'e' a reserve on one
//!         key that also reports each limit; 'k' a reserve on one key whose caller
//!         keeps no receipt), the cost and the max wait in µs (-1: for ever), one
//!         string · the deadline in µs since 1970 (empty: none) · now in µs (left
//!         off for the server's TIME) [· a cancel's grants]
//!   reply 16 integers per key: verdict · wait, retry_after, reset_after (each as µs
//!         and a ns remainder) · remaining · limit · limit index · the grant's mark,
//!         charge and stored permits (each as two 32-bit halves); after an 'e'
//!         step, 16 more per limit: how it stands after the step
//!         ([`Store::apply_key_each`], what the server layer's `RateLimit` lists).
//!         One key of a single algorithm, without 'e': the short form, 5 integers
//!         for a refusal (verdict, retry_after and reset_after in ns, remaining,
//!         limit) and 9 for a grant (wait instead of retry_after, then mark and
//!         charge; 11 with stored permits); the full 16 when a duration passes
//!         9 × 10¹² µs. A 'k' step answers no receipt: a grant's short form ends
//!         after the limit, and a set's answer (short: the 5 and the deciding
//!         limit's index; or its 16) leaves its members' receipts off
//! ```
//!
//! The library is a shared prelude, each algorithm's step as a factory
//! (`lua/<algorithm>.lua`: `make_<name>(config)` returns its `load`, `save` and
//! `reserve`, and `cancel` where it gives permits back) and a shared driver
//! (`lua/driver.lua`). The driver builds an algorithm once per configuration and
//! keeps it between calls; it reads each key once, steps the keys in order (a
//! repeated key again on its updated copy), and only if every key allowed the call
//! writes every changed state, with an expiry equal to the key's `reset_after` (a
//! state that has fully replenished is deleted instead). A refused call writes
//! nothing; a peek writes and creates nothing. This is the in-memory store's
//! multi-key rule, written once for all.
//!
//! What a call costs the server is mostly fixed: running a function, building its
//! arguments, `TIME`, `GET` and turning the reply into text. So the call's constant
//! part is one argument (the driver parses a text it has not seen and finds it by a
//! table lookup afterwards), the usual reply is the short form, and the steps are
//! written for the Lua interpreter Redis embeds, where a table, a function call or
//! a global lookup costs more than the arithmetic: states are packed binary (no
//! text to format or parse), library functions are bound once, and the time-based
//! steps run on plain doubles relative to now whenever every quantity stays below 2⁵²,
//! falling back to exact limb arithmetic otherwise (see *Exactness*).
//!
//! | algorithm | server state per key | server work per call |
//! |---|---|---|
//! | [`FixedWindow`](crate::algorithms::FixedWindow), [`SlidingWindowCounter`](crate::algorithms::SlidingWindowCounter) | a string: two or three packed doubles | `GET`, `SET … PX` on a grant |
//! | [`LeakyBucket`](crate::algorithms::LeakyBucket), [`SmoothBursty`](crate::algorithms::SmoothBursty), [`SmoothWarmingUp`](crate::algorithms::SmoothWarmingUp) | a string: a packed u64 (and an f64) | the same |
//! | [`SlidingWindowBuckets`](crate::algorithms::SlidingWindowBuckets) | up to 63 buckets and a limit of at most 50: one string, header and one entry per non-empty bucket (22 bytes and 2 a bucket); otherwise a hash: header and non-empty ring slots, packed doubles (a hash table, by a padded header, when more than 64 slots can hold a count) | the string: one `GET` and, on a grant, one `SET ... PX`, whatever the ring moved (the work grows with the buckets leaving it, not with the ring); a key holding the hash (the same window kept with a larger limit) is read whole once and rewritten as the string, and the other way round. The hash: `HGET` of the header (on a key without one, `EXISTS`, so that a hash in an older layout is refused); a ring that moves up to 8 buckets reads the counts its header lacks in one `HMGET` (further, its non-empty slots in one `HGETALL`), any other slot is an `HGET`; a refusal walks the non-empty buckets from the oldest a grant recorded, and only on a sparse ring (or after a long gap) reads every non-empty slot (`HGETALL`); a grant writes the header and the changed slots in one `HSET` (an `HDEL` for slots it empties) and sets the expiry (`PEXPIRE`) |
//! | [`SlidingLog`](crate::algorithms::SlidingLog) | a hash: header and ring slots, packed doubles (above 64 entries a padded header keeps it a hash table rather than a listpack, whose lookups scan it) | `HGET` of the header (on a key without one, `EXISTS`, so that a hash in an older layout is refused); a grant that drops the oldest entry reads the next one's slot (`HGET`); a refusal whose answer is not the oldest entry's adds a galloping search (`O(log limit)` `HGET`s; none on a hammered log, which the header's copies answer); a grant writes the header and one slot in one `HSET` and sets the expiry (`PEXPIRE`) |
//! | [`AllOf`](crate::algorithms::AllOf) or [`Limits`](crate::algorithms::Limits) of any of these (nested too) | each member's own keys | the members' work, in the same call |
//!
//! A [`Limits`](crate::algorithms::Limits) set (members chosen at run time) runs
//! like an `AllOf` when each member is one of the crate's algorithms or a `Limits`
//! of them (recognized by type); a member of any other type is a typed error,
//! before anything is sent.
//!
//! # Cancel
//!
//! A cancel ([`Operation::Cancel`]) runs on the server by the Rust rules, for every
//! algorithm and set: Go's rule (a grant gives back what it took up to the instant
//! it acts; for the windows and the log, whose grants act at once, only a cancel
//! at that very instant gives anything back), and a set hands each member its own
//! receipt. A receipt is what the memory store's is (a bucket or window number, a
//! running count, a time; a set's, its members'), carried in the reply after the
//! decision and sent back with the cancel. The time to act is sent relative to
//! now, so it means the same at the server's time.
//!
//! # Exactness: what differs from memory
//!
//! Lua numbers are IEEE doubles, exact only for integers below 2⁵³, while the Rust
//! steps count `u64` nanoseconds (2⁵³ ns is only 104 days since an origin; the
//! server's `TIME` since 1970 is 1.7 × 10¹⁸ ns). So the server counts time in
//! whole **microseconds** (2⁵³ µs is 285 years), and:
//!
//! * every number a script computes stays an integer below 2⁵³: absolute times in
//!   µs, differences and counts bounded by the configuration; configurations that
//!   would break this are refused with a typed error before anything is sent
//!   (durations that are not whole microseconds, counts from 2⁵³ up);
//! * durations come back as whole µs plus a ns remainder, so a decision whose Rust
//!   value is not a whole µs is still returned exactly, up to `u64::MAX` ns (past
//!   2⁵³ µs, e.g. the reset of a rate so small that one grant saturates the state,
//!   as a multiple of 4 µs and a remainder below 4,000 ns);
//! * with [`TimeSource::Caller`], `now` is rounded down to a whole microsecond and
//!   `max_wait` too. Driven with whole-microsecond times and waits, every decision is
//!   identical, field by field, to the in-memory store's (the differential tests
//!   check this on random traces); with other times the server's answer is the one
//!   for the microsecond below.
//! * Forgetting differs, as the store contract allows: the memory store forgets a
//!   key once it is replenished at the latest time it has seen; Redis expires a key
//!   by *its own* clock, `reset_after` (plus [`RedisOptions::expiry_grace`]) after
//!   the last write. With [`TimeSource::Caller`] that grace is required (a store
//!   is not built without it), since a caller's clock that runs slower than the
//!   server's, or lags another caller's, would otherwise see its keys expire while
//!   they still matter. Both are invisible while time runs forward, with two
//!   exceptions that only a virtual caller's clock can produce: a call that steps
//!   back in time (memory may find fresh a key it forgot at a later time, Redis
//!   still holds it), and a sliding window counter whose 16-bit window index wraps
//!   while its key idles (memory has forgotten it; a key Redis still holds reads as
//!   recent, exactly as the Rust state word would). The differential tests compare
//!   the Redis store with the memory store while time runs forward, and with a
//!   reference that never forgets (the pure algorithm) throughout.
//! * The caller's time is capped just below 2⁵³ µs (285 years after its clock's
//!   origin).
//! * The cost is sent exactly and read by the script as the double nearest to it,
//!   as Rust's `cost as f64` does; above 2⁵³ every exact-count algorithm answers
//!   never, as in memory.
//! * Floats (Guava's limiters) are not approximated: the configuration's `f64`
//!   words travel as their bits or in shortest round-trip decimal, and the script
//!   evaluates the Rust formulas operation for operation on IEEE doubles, so the
//!   results are bit-identical.
//! * Limits on sizes: a leaky bucket's full span (`capacity × interval`) and a
//!   bursty limiter's burst must be below 2⁵³ ns (104 days); counts and limits
//!   below 2⁵³; durations whole microseconds. Anything else is a typed error.
//!
//! # Keys
//!
//! `<prefix>{k<escaped key text>}:<algorithm>` (a set: `…:set.<index>.<member>`
//! for each member; an empty set, which keeps nothing, `…:set`); see [`keys`] for why the escaping
//! makes any text (braces, colons, spaces, 10 KB) address only its own state and
//! keeps all states of one key on one Cluster slot. A multi-key call on Cluster whose
//! keys fall in different slots is refused before anything is sent
//! ([`Error::InvalidKeys`]); [`RedisOptions::shared_tag`] puts a store's keys on
//! one slot.
//!
//! # The library and failures
//!
//! The library is named by the digest of its source (see `library.rs`), so
//! versions of this crate never run each other's code on one server. A call names
//! the function; only the server's explicit "Function not found" (after `FUNCTION
//! FLUSH`, a restart without persistence, a new Cluster node) loads the library
//! and calls once more. Functions are part of the data set: replicated, persisted,
//! untouched by `SCRIPT FLUSH`. Nothing else is ever sent twice, but for a call a
//! Cluster node redirected (below), which it did not run. A failure is
//! [`Error::Store`] with the redis error as its source and [`Applied::No`] when
//! the step certainly did not run (no connection, a refused connection, an error
//! reply: the steps check everything before their first write) or
//! [`Applied::Unknown`] when it was sent and no usable reply came (a timeout, a
//! dropped connection). A timeout reads the same blocking or async: its source is
//! a [`std::io::Error`] of kind `TimedOut` that names the timeout and its length,
//! e.g. `timed out after 250ms waiting for the step's reply (the response
//! timeout)`, with [`Applied::Unknown`] (the server may still run the step once
//! it answers again), or `… connecting (the connect timeout)` with
//! [`Applied::No`]. That server never runs it late: every reserve and peek
//! carries a deadline (this host's wall clock at sending, plus the response
//! timeout and [`RedisOptions::deadline_slack`]), and the server refuses a call
//! that reaches it after its deadline, before reading anything, with an `EXPIRED`
//! error ([`Applied::No`]). So the calls that time out while a server is paused are
//! not applied when it resumes; see `deadline_slack` for the clock rule and the
//! skew it tolerates. A server restart between calls loses no call: a blocking
//! connection over TCP (TLS too, with feature `redis-tls`: `tls.rs`) or a Unix
//! socket is the store's own socket, read without blocking before each call (see
//! `socket_connection.rs`; on a Cluster opened from node URLs, plain or TLS, the
//! store routes blocking calls itself, see `cluster_routes.rs`), and async
//! connections speak RESP3, over which redis-rs reports a closed connection at
//! once, so either is replaced before the call is written. Blocking calls on
//! connections only redis-rs can open (TLS with a client's own certificates or
//! without verification, or without `redis-tls`; a cluster client you built) are
//! the exception: redis-rs holds those sockets, and the first call on each
//! connection opened before a restart fails with `Unknown` (a dead connection and
//! a lost reply look the same there). A Cluster redirect (`MOVED`, `ASK`) means
//! the node did not run the call, so the call follows one, to the node named (a
//! second fails the call with [`Applied::No`]); only a blocking call through a
//! cluster client you built fails with the first. Connect and response timeouts
//! are [`RedisOptions`] (250 ms by default). A step made while cancels given to
//! the store before it ([`Store::cancel_detached`](crate::stores::Store::cancel_detached),
//! e.g. abandoned async waits) are still on their way first waits for them, at most
//! the response timeout (then it fails unsent, [`Applied::No`]): it must not
//! overtake them, or they would give back nothing. State formats are not versioned:
//! after an upgrade that changes one, clear the limiter's keys or give the new version its own
//! [`RedisOptions::prefix`]. A packed state of the wrong size is refused
//! ([`Applied::No`], the key left as it is), never misread.
//!
//! # TLS
//!
//! With feature `redis-tls`, a `rediss://` URL is served on the store's own
//! sockets over rustls, for blocking and async calls alike, verifying the server
//! against the system's roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured). As
//! with redis-rs's own rustls, the application installs a crypto provider (e.g.
//! `rustls::crypto::ring::default_provider().install_default()`); without one a
//! connection fails with a typed error that says so. Or enable redis-rs's TLS
//! features yourself and hand the store a client you built
//! ([`RedisStore::from_client`]).
//!
//! # Blocking and async
//!
//! Blocking calls ([`Store::apply`]) take a connection from a pool (opening one when
//! none is idle, so each thread in flight has its own, and keeping at most 16 idle
//! after a burst); async calls
//! ([`Store::apply_async`]) share one multiplexed connection per tokio runtime
//! that calls (at most 8, the oldest dropped first), which speaks RESP3 so
//! that redis-rs tells the store when it closes. That connection is tokio's
//! (redis-rs's `tokio-comp`), driven by a task of the runtime that opened it, so
//! each runtime has its own: a call never waits on a runtime that is idle (a
//! current-thread runtime between its `block_on`s) or dropped. No runtime is
//! required of the caller: a call made inside a tokio runtime runs there; one made
//! outside (a bare `futures::executor::block_on`, async-std, smol) runs on the
//! store's own runtime, one thread started by the first such call and shared by
//! the process's stores, and is awaited from the caller's executor (see
//! `runtime.rs`). The same thread sends the detached cancels given on a
//! current-thread runtime (abandoned async waits there), so that a blocking call
//! made on that runtime's thread never waits for a task that cannot run.
//!
//! [`Applied::No`]: crate::Applied::No
//! [`Applied::Unknown`]: crate::Applied::Unknown
//! [`Store::apply`]: super::Store::apply
//! [`Store::apply_async`]: super::Store::apply_async
//! [`Store::apply_key_each`]: super::Store::apply_key_each

mod algorithm;
mod all_of;
mod cancels;
mod cluster_routes;
mod connection;
mod fixed_window;
pub mod keys;
mod leaky_bucket;
mod library;
mod options;
mod reply;
mod runtime;
mod sliding_log;
mod sliding_window_buckets;
mod sliding_window_counter;
mod smooth_bursty;
mod smooth_warming_up;
mod socket_connection;
mod step;
mod store_url;
#[cfg(feature = "redis-tls")]
mod tls;

pub use algorithm::RedisAlgorithm;
pub use options::{RedisOptions, TimeSource};

use self::cancels::Cancels;
use self::cluster_routes::ClusterRoutes;
use self::connection::{cluster_client, Backend, Connections};
use super::store::{Operation, RenderKey};
use crate::clock::Nanos;
use crate::error::{ConfigError, Error};
use std::collections::hash_map::RandomState;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// A [`Store`](super::Store) on Redis or Redis Cluster for keys that
/// [render](RenderKey) and algorithms that implement [`RedisAlgorithm`]. See the
/// [module docs](self) for the protocol, the key layout, exactness and failures.
/// Cloning shares the connections.
///
/// ```no_run
/// use sluicegate::algorithms::FixedWindow;
/// use sluicegate::stores::redis::{RedisOptions, RedisStore};
/// let store: RedisStore<u64, FixedWindow> =
///     RedisStore::open_with("redis://127.0.0.1/", RedisOptions::default().prefix("api:")?)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedisStore<K, A> {
    connections: Arc<Connections>,
    /// Detached cancels, sent in order.
    cancels: Arc<Cancels>,
    /// Keys' numbers for [`Store::key_id`](super::Store::key_id): a hash of their text.
    ids: RandomState,
    options: RedisOptions,
    cluster: bool,
    _types: PhantomData<fn(&K, &A)>,
}

impl<K, A> Clone for RedisStore<K, A> {
    fn clone(&self) -> Self {
        RedisStore {
            connections: Arc::clone(&self.connections),
            cancels: Arc::clone(&self.cancels),
            ids: self.ids.clone(),
            options: self.options.clone(),
            cluster: self.cluster,
            _types: PhantomData,
        }
    }
}

impl<K, A> fmt::Debug for RedisStore<K, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("options", &self.options)
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

impl<K, A> RedisStore<K, A> {
    /// A store on the server at `url` (`redis://`, `redis+unix://`, or
    /// `rediss://` with feature `redis-tls` or redis-rs's own TLS features) with
    /// the default [`RedisOptions`]. Connects lazily: the first call opens the
    /// first connection, so a URL that parses but names no server shows at the
    /// first call ([`Error::Store`], [`Applied::No`](crate::Applied::No)).
    ///
    /// # Errors
    /// [`ConfigError::InvalidUrl`] if the URL cannot be used: it does not parse,
    /// its scheme is not one redis-rs reads, or a part of it is invalid (a port, a
    /// database number, TLS without a TLS feature). The error says which.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::redis::RedisStore;
    /// use sluicegate::ConfigError;
    /// let err = RedisStore::<&str, FixedWindow>::open("http://127.0.0.1/").unwrap_err();
    /// assert!(matches!(err, ConfigError::InvalidUrl { .. }));
    /// assert!(err.to_string().contains("scheme"), "{err}");
    /// ```
    pub fn open(url: &str) -> Result<Self, ConfigError> {
        Self::open_with(url, RedisOptions::default())
    }

    /// [`open`](RedisStore::open) with `options`.
    ///
    /// # Errors
    /// As [`open`](RedisStore::open).
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::redis::{RedisOptions, RedisStore};
    /// let options = RedisOptions::default().prefix("api:")?;
    /// let store: RedisStore<&str, FixedWindow> =
    ///     RedisStore::open_with("redis://127.0.0.1:6380/2", options)?;
    /// assert_eq!(store.options().get_prefix(), "api:");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_with(url: &str, options: RedisOptions) -> Result<Self, ConfigError> {
        Self::from_client(store_url::client(url)?, options)
    }

    /// A store over a client you built (TLS settings, credentials, ...). Blocking
    /// calls run on the store's own sockets whenever the client's address allows
    /// (TCP, a Unix socket, or TLS with verification and no client certificates,
    /// with feature `redis-tls`); otherwise on redis-rs's connection, which sees a
    /// restart only after writing the next call (see the module docs).
    ///
    /// # Errors
    /// [`ConfigError::MissingSetting`] for [`TimeSource::Caller`] without
    /// [`RedisOptions::expiry_grace`].
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::redis::{RedisOptions, RedisStore};
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let store: RedisStore<&str, FixedWindow> =
    ///     RedisStore::from_client(client, RedisOptions::default())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_client(client: redis::Client, options: RedisOptions) -> Result<Self, ConfigError> {
        Self::build(Backend::Single(client), options, false)
    }

    /// A store on a Redis Cluster reached through any of `nodes`. The cluster
    /// client is built with no retries of its own (a retry after a timeout could
    /// count a call twice) and speaks RESP3 (see the module docs on restarts).
    /// When the node URLs are all `redis://`, or all `rediss://` with feature
    /// `redis-tls`, blocking calls are routed by the store itself with the first
    /// URL's credentials: the slot map is read (`CLUSTER SLOTS`) at the first
    /// call. Blocking or async, a `MOVED` or `ASK` reply sends the call once more,
    /// to the node it names.
    ///
    /// # Errors
    /// [`ConfigError::InvalidUrl`] if a node URL cannot be used (as
    /// [`open`](RedisStore::open)'s), or the nodes do not go together (different
    /// credentials, databases or TLS modes; none at all);
    /// [`ConfigError::MissingSetting`] as [`from_client`](RedisStore::from_client).
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::redis::{RedisOptions, RedisStore};
    /// use sluicegate::ConfigError;
    /// let nodes = ["redis://127.0.0.1:7000/", "rediss://127.0.0.1:7001/"];
    /// let err = RedisStore::<&str, FixedWindow>::open_cluster(nodes, RedisOptions::default())
    ///     .unwrap_err();
    /// assert!(matches!(err, ConfigError::InvalidUrl { .. }));
    /// ```
    pub fn open_cluster<I: redis::IntoConnectionInfo>(
        nodes: impl IntoIterator<Item = I>,
        options: RedisOptions,
    ) -> Result<Self, ConfigError> {
        let nodes = nodes
            .into_iter()
            .map(redis::IntoConnectionInfo::into_connection_info)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| store_url::invalid(None, &e))?;
        let backend = Backend::Cluster {
            client: Box::new(cluster_client(nodes.clone(), &options)?),
            routes: ClusterRoutes::new(&nodes),
        };
        Self::build(backend, options, true)
    }

    /// A store over a cluster client you built; redis-rs routes its blocking
    /// calls too (a client does not reveal its nodes' credentials), so prefer
    /// [`open_cluster`](RedisStore::open_cluster) unless you need TLS settings or
    /// options only the builder has. Build it with `.retries(0)`: the
    /// store's rule is that nothing is retried after a timeout or a dropped
    /// connection, and the cluster client's own retries would break it. Build it
    /// with `.use_protocol(redis::ProtocolVersion::RESP3)` too, as
    /// [`open_cluster`](RedisStore::open_cluster) does, so that the async side
    /// reconnects a restarted node before the next call instead of failing it.
    ///
    /// # Errors
    /// As [`from_client`](RedisStore::from_client).
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::redis::{RedisOptions, RedisStore};
    /// let client = redis::cluster::ClusterClient::builder(["redis://127.0.0.1:7000/"])
    ///     .retries(0)
    ///     .use_protocol(redis::ProtocolVersion::RESP3)
    ///     .build()?;
    /// let store: RedisStore<&str, FixedWindow> =
    ///     RedisStore::from_cluster_client(client, RedisOptions::default())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_cluster_client(
        client: redis::cluster::ClusterClient,
        options: RedisOptions,
    ) -> Result<Self, ConfigError> {
        let backend = Backend::Cluster {
            client: Box::new(client),
            routes: None,
        };
        Self::build(backend, options, true)
    }

    fn build(backend: Backend, options: RedisOptions, cluster: bool) -> Result<Self, ConfigError> {
        options.check()?;
        Ok(RedisStore {
            connections: Arc::new(Connections::new(backend, options.clone())),
            cancels: Arc::default(),
            ids: RandomState::new(),
            options,
            cluster,
            _types: PhantomData,
        })
    }

    /// The store's options, as given when it was built (clones share them).
    /// Opening does not connect, so they read the same with no server.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::redis::{RedisOptions, RedisStore};
    /// type Store = RedisStore<&'static str, FixedWindow>;
    /// let url = "redis+unix:///nonexistent/redis.sock"; // nothing listens there
    /// assert_eq!(Store::open(url)?.options().get_prefix(), "rl:"); // the default
    /// let store = Store::open_with(url, RedisOptions::default().prefix("api:")?)?;
    /// assert_eq!(store.clone().options().get_prefix(), "api:");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn options(&self) -> &RedisOptions {
        &self.options
    }

    /// The (first) server key holding the state of `key` for the algorithm `A`
    /// (for inspecting a server; see [`keys`] for the layout; a set also has one
    /// key per member, `…:set.<index>.<member>`).
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::redis::RedisStore;
    /// let store: RedisStore<&str, FixedWindow> = RedisStore::open("redis://127.0.0.1/").unwrap();
    /// assert_eq!(store.server_key(&"user:{7}"), "rl:{kuser:{7\\]}:fw");
    /// ```
    pub fn server_key<Q>(&self, key: &Q) -> String
    where
        Q: ToOwned<Owned = K> + RenderKey + ?Sized,
        A: RedisAlgorithm,
    {
        let mut text = String::new();
        key.render_key(&mut text);
        keys::server_key(
            &self.options.prefix,
            self.options.shared_tag.as_deref(),
            &text,
            A::NAME,
        )
    }

    /// Every server key a call on `key` passes to the server, in order: one for a
    /// single algorithm; its members' keys for a set. (What
    /// `KEYS` holds for that key; for tools that replay a call, e.g.
    /// `redis-benchmark`.)
    ///
    /// ```
    /// use sluicegate::algorithms::{AllOf, FixedWindow};
    /// use sluicegate::stores::redis::RedisStore;
    /// type Set = AllOf<(FixedWindow, FixedWindow)>;
    /// let store: RedisStore<&str, Set> = RedisStore::open("redis://127.0.0.1/").unwrap();
    /// let window = FixedWindow::new(10, std::time::Duration::from_secs(1)).unwrap();
    /// let set = AllOf::new((window, window));
    /// assert_eq!(
    ///     store.server_keys(&set, &"k"),
    ///     ["rl:{kk}:set.0.fw", "rl:{kk}:set.1.fw"]
    /// );
    /// ```
    pub fn server_keys<Q>(&self, algorithm: &A, key: &Q) -> Vec<String>
    where
        Q: ToOwned<Owned = K> + RenderKey + ?Sized,
        A: RedisAlgorithm,
    {
        let mut suffixes = Vec::new();
        algorithm.key_suffixes(&mut suffixes);
        let mut out = Vec::with_capacity(suffixes.len());
        self.push_server_keys(key, &suffixes, &mut String::new(), &mut out);
        out
    }

    /// The `KEYS` and `ARGV` of the `FCALL` this store sends for `step` on `key` at
    /// `now` (ns, read only at the caller's time), both empty when it sends nothing,
    /// with no deadline: for replaying the very call elsewhere (`benches/redis.rs` hands it to
    /// `redis-benchmark`). Not a stable interface: the arguments are the step
    /// library's, which changes with the crate.
    #[doc(hidden)]
    pub fn step_call<Q>(
        &self,
        algorithm: &A,
        key: &Q,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<(Vec<String>, Vec<String>), Error>
    where
        Q: ToOwned<Owned = K> + RenderKey + ?Sized,
        A: RedisAlgorithm,
    {
        let request = self.request(algorithm, [key], now, step, step::Answer::Receipt)?;
        Ok(request.map_or_else(Default::default, |mut r| {
            // A replay runs long after now: no deadline.
            r.args[1].clear();
            (r.keys, r.args)
        }))
    }

    /// The integers of a reply to a [`step_call`](Self::step_call) replayed
    /// elsewhere (an array, or a lone key's short reply packed as doubles), as the
    /// store reads them. Not a stable interface, as `step_call` is not.
    #[doc(hidden)]
    pub fn step_reply(reply: redis::Value) -> Result<Vec<i64>, redis::ParsingError> {
        redis::from_redis_value::<reply::Numbers>(reply).map(|numbers| numbers.0)
    }

    /// Appends the server keys of `key` under each of `suffixes`.
    fn push_server_keys<Q: RenderKey + ?Sized>(
        &self,
        key: &Q,
        suffixes: &[String],
        text: &mut String,
        out: &mut Vec<String>,
    ) {
        text.clear();
        key.render_key(text);
        for suffix in suffixes {
            out.push(keys::server_key(
                &self.options.prefix,
                self.options.shared_tag.as_deref(),
                text,
                suffix,
            ));
        }
    }
}
