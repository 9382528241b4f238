//! Connections and step calls: a pool of blocking connections (each checked before
//! a call, so that one the server closed while idle is replaced rather than written
//! to), one shared multiplexed async connection (replaced once its reader sees it
//! closed), and the one rule for running a step (`FCALL` of
//! the [library](super::library); only the server's "Function not found" loads it
//! and calls once more) with the one rule for what a failure means
//! ([`Applied::No`] or [`Applied::Unknown`]).

use super::library::{is_already_loaded, is_missing, library};
use super::options::RedisOptions;
use super::plain_connection::PlainConnection;
use crate::error::{Applied, Error, StoreError};
use parking_lot::Mutex;
use redis::aio::MultiplexedConnection;
use redis::aio::{AsyncPushSender, SendError};
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionLike, ErrorKind, ProtocolVersion, PushInfo,
    PushKind, RedisError,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Where connections come from.
pub(super) enum Backend {
    /// One server (plain or TLS, as the client's URL says).
    Single(Client),
    /// A Redis Cluster, built with no retries of its own (see [`cluster_client`]).
    Cluster(Box<ClusterClient>),
}

/// A blocking connection: on our own socket when the server is reached over plain
/// TCP or a Unix socket, else redis-rs's (TLS, Cluster).
enum Blocking {
    Plain(PlainConnection),
    Single(redis::Connection),
    Cluster(Box<ClusterConnection>),
}

impl Blocking {
    fn as_dyn(&mut self) -> &mut dyn ConnectionLike {
        match self {
            Blocking::Plain(conn) => conn,
            Blocking::Single(conn) => conn,
            Blocking::Cluster(conn) => &mut **conn,
        }
    }

    /// Whether the server is known to have closed this idle connection. Only our
    /// own socket can tell; redis-rs's connections find out on their next call.
    fn closed_while_idle(&self) -> bool {
        match self {
            Blocking::Plain(conn) => conn.closed_while_idle(),
            Blocking::Single(_) | Blocking::Cluster(_) => false,
        }
    }
}

/// An async connection of either kind; cloning shares it (both multiplex).
#[derive(Clone)]
enum Multiplexed {
    Single(MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

/// Builds a cluster client that never retries a command by itself: a retry after a
/// dropped connection or a timeout could count a call twice. (A redirect is then
/// an error too, [`Applied::No`]: the node refused the call without running it.)
pub(super) fn cluster_client<I: redis::IntoConnectionInfo>(
    nodes: impl IntoIterator<Item = I>,
    options: &RedisOptions,
) -> Result<ClusterClient, Error> {
    ClusterClient::builder(nodes)
        .retries(0)
        // Over RESP3 the async cluster connection hears that a node's connection
        // closed and reconnects it before the next call, instead of failing it.
        .use_protocol(ProtocolVersion::RESP3)
        .connection_timeout(options.connect_timeout)
        .response_timeout(options.response_timeout)
        .build()
        .map_err(|e| failure(Applied::No, e))
}

/// The most idle blocking connections a store keeps.
const MAX_IDLE: usize = 16;

/// The connections of one store.
pub(super) struct Connections {
    backend: Backend,
    options: RedisOptions,
    /// Idle blocking connections. A call takes one (or opens one) and puts it back
    /// only if it ended cleanly: a connection whose reply may still be in flight is
    /// dropped, so no later call can read a stale reply.
    idle: Mutex<Vec<Blocking>>,
    /// The shared async connection, opened by the first async call and dropped after
    /// an I/O failure, or once it is known closed, so the next call opens a fresh one.
    multiplexed: tokio::sync::Mutex<Option<(Multiplexed, Closed)>>,
}

/// Whether a multiplexed connection has ended. Its driver task reads the socket all
/// the time, so it sees a server close the connection (a restart) while no call is
/// in flight and says so through redis-rs's push channel; the next call then opens
/// a fresh connection instead of writing to a dead one, and is not lost. A Cluster
/// connection is never marked: over RESP3 it reconnects a closed node's connection
/// itself (see [`cluster_client`]).
#[derive(Clone, Default)]
struct Closed(Arc<AtomicBool>);

impl Closed {
    fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

impl AsyncPushSender for Closed {
    fn send(&self, info: PushInfo) -> Result<(), SendError> {
        if info.kind == PushKind::Disconnection {
            self.0.store(true, Ordering::Release);
        }
        Ok(())
    }
}

pub(super) fn failure(applied: Applied, source: RedisError) -> Error {
    Error::Store(StoreError::new("redis", applied, source))
}

/// What a failed call means: a server's error reply (a script error, a missing
/// function after a reload, a Cluster redirect) means the step did not run; a refused
/// connection means it was never sent; anything else after sending (a timeout, a
/// dropped connection, an unreadable reply) may have run.
fn applied_of(error: &RedisError) -> Applied {
    match error.kind() {
        ErrorKind::Server(_) | ErrorKind::Extension => Applied::No,
        _ if error.is_connection_refusal() => Applied::No,
        _ => Applied::Unknown,
    }
}

/// A load's outcome: a library already there is the same code, so that is success.
fn loaded(result: Result<redis::Value, RedisError>) -> Result<(), RedisError> {
    match result {
        Err(e) if !is_already_loaded(&e) => Err(e),
        _ => Ok(()),
    }
}

impl Connections {
    pub(super) fn new(backend: Backend, options: RedisOptions) -> Self {
        Connections {
            backend,
            options,
            idle: Mutex::new(Vec::new()),
            multiplexed: tokio::sync::Mutex::new(None),
        }
    }

    fn open_blocking(&self) -> Result<Blocking, RedisError> {
        let timeout = Some(self.options.response_timeout);
        match &self.backend {
            Backend::Single(client) => {
                let info = client.get_connection_info();
                let (connect, response) =
                    (self.options.connect_timeout, self.options.response_timeout);
                if let Some(conn) = PlainConnection::open(info, connect, response)? {
                    return Ok(Blocking::Plain(conn));
                }
                let conn = client.get_connection_with_timeout(connect)?;
                conn.set_read_timeout(timeout)?;
                conn.set_write_timeout(timeout)?;
                Ok(Blocking::Single(conn))
            }
            Backend::Cluster(client) => {
                let conn = client.get_connection()?;
                conn.set_read_timeout(timeout)?;
                conn.set_write_timeout(timeout)?;
                Ok(Blocking::Cluster(Box::new(conn)))
            }
        }
    }

    /// Keeps a connection for the next blocking call, unless [`MAX_IDLE`] are
    /// kept already: a burst of threads opens one connection each, and the pool
    /// shrinks back to that many as they finish.
    fn put_back(&self, conn: Blocking) {
        let mut idle = self.idle.lock();
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }

    /// Runs a step on a blocking connection, loading the library and trying once
    /// more only when the server says it does not hold it.
    pub(super) fn run_blocking(&self, keys: &[String], args: &[String]) -> Result<Vec<i64>, Error> {
        let mut conn = loop {
            let taken = self.idle.lock().pop();
            match taken {
                // Closed by the server while idle (a restart): nothing was sent on
                // it, so the call goes out on another one and is not lost.
                Some(conn) if conn.closed_while_idle() => continue,
                Some(conn) => break conn,
                // Not connected: nothing was sent.
                None => break self.open_blocking().map_err(|e| failure(Applied::No, e))?,
            }
        };
        let cmd = library().call(keys, args);
        let result = match cmd.query::<Vec<i64>>(conn.as_dyn()) {
            Err(e) if is_missing(&e) => loaded(library().load().query(conn.as_dyn()))
                .and_then(|()| cmd.query::<Vec<i64>>(conn.as_dyn())),
            other => other,
        };
        match result {
            Ok(reply) => {
                self.put_back(conn);
                Ok(reply)
            }
            Err(e) => {
                let applied = applied_of(&e);
                if applied == Applied::No && e.kind() != ErrorKind::Io {
                    // The server answered: the connection is in step.
                    self.put_back(conn);
                }
                Err(failure(applied, e))
            }
        }
    }

    async fn multiplexed(&self) -> Result<Multiplexed, RedisError> {
        let mut slot = self.multiplexed.lock().await;
        match slot.as_ref() {
            Some((conn, closed)) if !closed.is_set() => return Ok(conn.clone()),
            _ => {}
        }
        let closed = Closed::default();
        let conn = match &self.backend {
            Backend::Single(client) => {
                // redis-rs passes on the disconnection notice only to RESP3
                // connections; every reply a step gives is the same in RESP3.
                let info = client.get_connection_info().clone();
                let settings = info.redis_settings().clone();
                let info = info.set_redis_settings(settings.set_protocol(ProtocolVersion::RESP3));
                let client = Client::open(info)?;
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(self.options.connect_timeout))
                    .set_response_timeout(Some(self.options.response_timeout))
                    .set_push_sender(closed.clone());
                Multiplexed::Single(
                    client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await?,
                )
            }
            Backend::Cluster(client) => Multiplexed::Cluster(client.get_async_connection().await?),
        };
        *slot = Some((conn.clone(), closed));
        Ok(conn)
    }

    /// [`run_blocking`](Connections::run_blocking) on the shared async connection.
    pub(super) async fn run_async(
        self: Arc<Self>,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<i64>, Error> {
        let mut conn = self
            .multiplexed()
            .await
            .map_err(|e| failure(Applied::No, e))?;
        let cmd = library().call(&keys, &args);
        let result = match query_async(&cmd, &mut conn).await {
            Err(e) if is_missing(&e) => {
                match loaded(query_async(&library().load(), &mut conn).await) {
                    Ok(()) => query_async(&cmd, &mut conn).await,
                    Err(e) => Err(e),
                }
            }
            other => other,
        };
        result.map_err(|e| {
            let applied = applied_of(&e);
            if applied == Applied::Unknown || e.kind() == ErrorKind::Io {
                // Open a fresh connection for the next call: this one may be dead.
                if let Ok(mut slot) = self.multiplexed.try_lock() {
                    *slot = None;
                }
            }
            failure(applied, e)
        })
    }
}

async fn query_async<T: redis::FromRedisValue>(
    cmd: &Cmd,
    conn: &mut Multiplexed,
) -> Result<T, RedisError> {
    match conn {
        Multiplexed::Single(conn) => cmd.query_async(conn).await,
        Multiplexed::Cluster(conn) => cmd.query_async(conn).await,
    }
}
