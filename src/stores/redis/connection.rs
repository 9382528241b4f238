//! Connections and step calls: a pool of blocking connections (each checked before
//! a call, so that one the server closed while idle is replaced rather than written
//! to; on Cluster, one per node the call is [routed](super::cluster_routes) to), a
//! shared multiplexed async connection per tokio runtime that calls (replaced once
//! its reader sees it closed),
//! and the one rule for running a step (`FCALL` of the [library](super::library);
//! only the server's "Function not found" loads it and calls once more, and only a
//! Cluster redirect sends it once more, to the node named) with the one rule for
//! what a failure means ([`Applied::No`] or [`Applied::Unknown`]).

use super::cluster_routes::{host_of, ClusterRoutes, Node, Redirect};
use super::keys::slot_of;
use super::library::{is_already_loaded, is_missing, library};
use super::options::RedisOptions;
use super::reply::Numbers;
use super::socket_connection::SocketConnection;
use crate::error::{Applied, ConfigError, Error, StoreError};
use parking_lot::Mutex;
use redis::aio::MultiplexedConnection;
use redis::aio::{AsyncPushSender, SendError};
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionLike, ErrorKind, ProtocolVersion, PushInfo,
    PushKind, RedisError, RedisResult,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::runtime::{Handle, Id as RuntimeId};

/// Where connections come from.
pub(super) enum Backend {
    /// One server (plain or TLS, as the client's URL says).
    Single(Client),
    /// A Redis Cluster, built with no retries of its own (see [`cluster_client`]).
    /// Blocking calls are routed by the store itself when `routes` is set (node
    /// URLs the store's own sockets serve), else by redis-rs (a cluster client you
    /// built, TLS without feature `redis-tls`).
    Cluster {
        client: Box<ClusterClient>,
        routes: Option<ClusterRoutes>,
    },
}

/// A blocking connection: on our own socket when the server is reached over TCP
/// (TLS too, with feature `redis-tls`) or a Unix socket, else redis-rs's (TLS
/// settings only redis-rs holds, a cluster client you built).
enum Blocking {
    Socket(SocketConnection),
    Single(redis::Connection),
    Cluster(Box<ClusterConnection>),
}

impl Blocking {
    fn as_dyn(&mut self) -> &mut dyn ConnectionLike {
        match self {
            Blocking::Socket(conn) => conn,
            Blocking::Single(conn) => conn,
            Blocking::Cluster(conn) => &mut **conn,
        }
    }

    /// Whether the server is known to have closed this idle connection. Only our
    /// own socket can tell; redis-rs's connections find out on their next call.
    fn closed_while_idle(&mut self) -> bool {
        match self {
            Blocking::Socket(conn) => conn.closed_while_idle(),
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
/// dropped connection or a timeout could count a call twice. (It then returns a
/// redirect as an error too; the store follows one itself, since a redirected call
/// did not run.)
pub(super) fn cluster_client<I: redis::IntoConnectionInfo>(
    nodes: impl IntoIterator<Item = I>,
    options: &RedisOptions,
) -> Result<ClusterClient, ConfigError> {
    ClusterClient::builder(nodes)
        .retries(0)
        // Over RESP3 the async cluster connection hears that a node's connection
        // closed and reconnects it before the next call, instead of failing it.
        .use_protocol(ProtocolVersion::RESP3)
        .connection_timeout(options.connect_timeout)
        .response_timeout(options.response_timeout)
        .build()
        .map_err(|e| super::store_url::invalid(None, &e))
}

/// The most idle blocking connections a store keeps.
const MAX_IDLE: usize = 16;

/// The most async connections a store keeps, one per runtime that called it.
const MAX_RUNTIMES: usize = 8;

/// The connections of one store.
pub(super) struct Connections {
    backend: Backend,
    options: RedisOptions,
    /// Idle blocking connections, each with the Cluster node it is connected to
    /// when the store routes calls itself. A call takes one (or opens one) and puts
    /// it back only if it ended cleanly: a connection whose reply may still be in
    /// flight is dropped, so no later call can read a stale reply.
    idle: Mutex<Vec<(Option<Node>, Blocking)>>,
    /// The shared async connections, one per tokio runtime that has called, each
    /// opened by that runtime's first async call and dropped after an I/O failure,
    /// or once it is known closed, so the next call opens a fresh one. Per
    /// runtime, because a connection is driven by a task of the runtime that
    /// opened it: a call from another runtime would wait on one that may be idle
    /// (a current-thread runtime between its `block_on`s) or gone (dropped). The
    /// oldest is dropped past [`MAX_RUNTIMES`].
    multiplexed: tokio::sync::Mutex<Vec<(RuntimeId, Multiplexed, Closed)>>,
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
/// connection, or a Cluster client with no connection to the slot's node (a node
/// that is down: found before anything is sent), means it was never sent; anything
/// else after sending (a timeout, a dropped connection, an unreadable reply) may
/// have run.
fn applied_of(error: &RedisError) -> Applied {
    match error.kind() {
        ErrorKind::Server(_) | ErrorKind::Extension => Applied::No,
        ErrorKind::ClusterConnectionNotFound => Applied::No,
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

/// One step on `conn` (after `ASKING` when `asking`), loading the library and
/// calling once more only when the server says it does not hold it.
fn step(conn: &mut dyn ConnectionLike, cmd: &Cmd, asking: bool) -> RedisResult<Vec<i64>> {
    let once = |conn: &mut dyn ConnectionLike| {
        if asking {
            let mut packed = redis::cmd("ASKING").get_packed_command();
            packed.extend(cmd.get_packed_command());
            // Only the step's reply (ASKING answers OK), its error reply as an error.
            let reply = conn.req_packed_commands(&packed, 1, 1)?.pop();
            let reply = reply.unwrap_or(redis::Value::Nil).extract_error()?;
            Ok(redis::from_redis_value::<Numbers>(reply)?.0)
        } else {
            cmd.query::<Numbers>(conn).map(|numbers| numbers.0)
        }
    };
    match once(conn) {
        Err(e) if is_missing(&e) => loaded(library().load().query(conn)).and_then(|()| once(conn)),
        other => other,
    }
}

/// What a call was doing when it failed: a timeout's error says which timeout
/// fired, and after how long.
#[derive(Clone, Copy)]
enum Phase {
    /// Opening a connection (nothing of the step was sent).
    Connecting,
    /// Finding a Cluster slot's node (nothing of the step was sent).
    Routing,
    /// Waiting for the step's reply (it was sent).
    Replying,
}

impl Connections {
    /// The error of a call that failed while `phase` with `error`. A timeout is
    /// one error, blocking or async, whatever the socket layer reported (a
    /// blocking read says "Resource temporarily unavailable", an async one "timed
    /// out"): an [`io::ErrorKind::TimedOut`](std::io::ErrorKind::TimedOut) that
    /// names the timeout and how long it was. Anything else keeps the redis error.
    fn failed(&self, phase: Phase, error: RedisError) -> Error {
        let applied = match phase {
            Phase::Connecting | Phase::Routing => Applied::No,
            Phase::Replying => applied_of(&error),
        };
        if !error.is_timeout() {
            return failure(applied, error);
        }
        let (connect, response) = (self.options.connect_timeout, self.options.response_timeout);
        let text = match phase {
            Phase::Connecting => {
                format!("timed out after {connect:?} connecting (the connect timeout)")
            }
            Phase::Routing => format!(
                "timed out finding the Cluster node of the key's slot (the connect timeout, \
                 {connect:?}, or the response timeout, {response:?})"
            ),
            Phase::Replying => format!(
                "timed out after {response:?} waiting for the step's reply (the response timeout)"
            ),
        };
        let source = std::io::Error::new(std::io::ErrorKind::TimedOut, text);
        Error::Store(StoreError::new("redis", applied, source))
    }

    /// A blocking step's outcome from [`Connections::on_node`]'s.
    fn outcome(
        &self,
        result: Result<RedisResult<Vec<i64>>, RedisError>,
    ) -> Result<Vec<i64>, Error> {
        match result {
            // Not connected: nothing was sent.
            Err(e) => Err(self.failed(Phase::Connecting, e)),
            Ok(Err(e)) => Err(self.failed(Phase::Replying, e)),
            Ok(Ok(reply)) => Ok(reply),
        }
    }
}

impl Connections {
    pub(super) fn new(backend: Backend, options: RedisOptions) -> Self {
        Connections {
            backend,
            options,
            idle: Mutex::new(Vec::new()),
            multiplexed: tokio::sync::Mutex::new(Vec::new()),
        }
    }

    /// Opens a blocking connection: to `node` when the store routes Cluster calls
    /// itself, else to the server or cluster the backend names.
    fn open_blocking(&self, node: Option<&Node>) -> Result<Blocking, RedisError> {
        let (connect, response) = (self.options.connect_timeout, self.options.response_timeout);
        match (&self.backend, node) {
            (
                Backend::Cluster {
                    routes: Some(routes),
                    ..
                },
                Some(node),
            ) => {
                let info = routes.connection_info(node);
                SocketConnection::open(&info, connect, response)?
                    .map(Blocking::Socket)
                    .ok_or_else(|| {
                        let why = "a Cluster node the store routes to is not an address \
                                   its own sockets serve";
                        RedisError::from((ErrorKind::InvalidClientConfig, why))
                    })
            }
            (Backend::Single(client), _) => {
                let info = client.get_connection_info();
                if let Some(conn) = SocketConnection::open(info, connect, response)? {
                    return Ok(Blocking::Socket(conn));
                }
                let conn = client.get_connection_with_timeout(connect)?;
                conn.set_read_timeout(Some(response))?;
                conn.set_write_timeout(Some(response))?;
                Ok(Blocking::Single(conn))
            }
            (Backend::Cluster { client, .. }, _) => {
                let conn = client.get_connection()?;
                conn.set_read_timeout(Some(response))?;
                conn.set_write_timeout(Some(response))?;
                Ok(Blocking::Cluster(Box::new(conn)))
            }
        }
    }

    /// An idle connection to `node` (the most recently used), or a new one.
    fn take(&self, node: Option<&Node>) -> Result<Blocking, RedisError> {
        loop {
            let taken = {
                let mut idle = self.idle.lock();
                let at = idle
                    .iter()
                    .rposition(|(n, _)| n.as_deref() == node.map(|n| &**n));
                at.map(|at| idle.remove(at).1)
            };
            let Some(mut conn) = taken else {
                return self.open_blocking(node);
            };
            // Closed by the server while idle (a restart): nothing was sent on it,
            // so the call goes out on another one and is not lost.
            if !conn.closed_while_idle() {
                return Ok(conn);
            }
        }
    }

    /// Keeps a connection for the next blocking call, unless [`MAX_IDLE`] are
    /// kept already: a burst of threads opens one connection each, and the pool
    /// shrinks back to that many as they finish.
    fn put_back(&self, node: Option<&Node>, conn: Blocking) {
        let mut idle = self.idle.lock();
        if idle.len() < MAX_IDLE {
            idle.push((node.cloned(), conn));
        }
    }

    /// Runs `request` on a blocking connection to `node`, keeping the connection
    /// if it is still in step afterwards. The outer error is a failure to connect
    /// (nothing was sent); the inner result is the request's.
    fn on_node<T>(
        &self,
        node: Option<&Node>,
        request: impl FnOnce(&mut dyn ConnectionLike) -> RedisResult<T>,
    ) -> Result<RedisResult<T>, RedisError> {
        let mut conn = self.take(node)?;
        let result = request(conn.as_dyn());
        let in_step = match &result {
            Ok(_) => true,
            // The server answered: the connection is in step.
            Err(e) => applied_of(e) == Applied::No && e.kind() != ErrorKind::Io,
        };
        if in_step {
            self.put_back(node, conn);
        }
        Ok(result)
    }

    /// Runs a step on a blocking connection, loading the library and trying once
    /// more only when the server says it does not hold it. On a Cluster the store
    /// routes itself, the step goes to its slot's node, and once more to the node
    /// a `MOVED` or `ASK` reply names (the node did not run it).
    pub(super) fn run_blocking(&self, keys: &[String], args: &[String]) -> Result<Vec<i64>, Error> {
        let cmd = library().call(keys, args);
        let Backend::Cluster {
            routes: Some(routes),
            ..
        } = &self.backend
        else {
            return self.outcome(self.on_node(None, |conn| step(conn, &cmd, false)));
        };
        // Every key of a call on Cluster is on one slot (checked before).
        let slot = keys.first().map_or(0, |key| slot_of(key.as_bytes()));
        let mut node = self
            .owner(routes, slot)
            .map_err(|e| self.failed(Phase::Routing, e))?;
        let (mut asking, mut redirected) = (false, false);
        loop {
            let result = self.on_node(Some(&node), |conn| step(conn, &cmd, asking));
            match &result {
                // A node that does not answer may have failed over: read the map
                // afresh next time.
                Err(_) => routes.forget(),
                Ok(Err(e)) if !redirected => {
                    if let Some(redirect) = Redirect::of(e, host_of(&node)) {
                        asking = redirect.asking;
                        let (host, port) = (redirect.host, redirect.port);
                        node = if asking {
                            // A slot being migrated: this one call goes there.
                            Arc::new(routes.node_at(host, port))
                        } else {
                            routes.moved(slot, host, port)
                        };
                        redirected = true;
                        continue;
                    }
                }
                _ => {}
            }
            return self.outcome(result);
        }
    }

    /// The node serving `slot`, reading the map (`CLUSTER SLOTS`) from the first
    /// node that answers when it is not known.
    fn owner(&self, routes: &ClusterRoutes, slot: u16) -> RedisResult<Node> {
        if let Some(node) = routes.node_of(slot) {
            return Ok(node);
        }
        let mut last = None;
        for node in routes.candidates() {
            let read = self.on_node(Some(&node), |conn| {
                redis::cmd("CLUSTER")
                    .arg("SLOTS")
                    .query::<redis::Value>(conn)
            });
            match read.and_then(|reply| reply) {
                Ok(reply) => {
                    routes.learn(&reply, &node)?;
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        routes.node_of(slot).ok_or_else(|| {
            last.unwrap_or_else(|| {
                RedisError::from((
                    ErrorKind::ClusterConnectionNotFound,
                    "no Cluster node serves the slot",
                ))
            })
        })
    }

    /// The calling runtime's async connection, opened if it has none open.
    async fn multiplexed(&self, runtime: RuntimeId) -> Result<Multiplexed, RedisError> {
        let mut connections = self.multiplexed.lock().await;
        if let Some(at) = connections.iter().position(|(id, ..)| *id == runtime) {
            let (_, conn, closed) = &connections[at];
            if !closed.is_set() {
                return Ok(conn.clone());
            }
            connections.remove(at);
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
            Backend::Cluster { client, .. } => {
                Multiplexed::Cluster(client.get_async_connection().await?)
            }
        };
        if connections.len() >= MAX_RUNTIMES {
            connections.remove(0);
        }
        connections.push((runtime, conn.clone(), closed));
        Ok(conn)
    }

    /// [`run_blocking`](Connections::run_blocking) on the shared async connection,
    /// inside the caller's tokio runtime or, outside one, on the store's own (see
    /// [`runtime`](super::runtime)).
    pub(super) async fn run_async(
        self: Arc<Self>,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<i64>, Error> {
        super::runtime::in_tokio(self.run_in_tokio(keys, args)).await
    }

    /// [`run_async`](Connections::run_async) inside a tokio runtime.
    async fn run_in_tokio(
        self: Arc<Self>,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<i64>, Error> {
        let runtime = Handle::current().id();
        let mut conn = self
            .multiplexed(runtime)
            .await
            .map_err(|e| self.failed(Phase::Connecting, e))?;
        let cmd = library().call(&keys, &args);
        let mut result = step_async(&mut conn, &cmd, None).await;
        // A Cluster node that redirects did not run the call: it goes once more to
        // the node named (redis-rs's own follow-up would be a retry, which the
        // store's cluster client never makes).
        if let (Multiplexed::Cluster(_), Err(e)) = (&conn, &result)
            && let Some(redirect) = Redirect::of(e, None)
        {
            result = step_async(&mut conn, &cmd, Some(&redirect)).await;
        }
        result.map_err(|e| {
            if applied_of(&e) == Applied::Unknown || e.kind() == ErrorKind::Io {
                // Open a fresh connection for the next call: this one may be dead.
                if let Ok(mut connections) = self.multiplexed.try_lock() {
                    connections.retain(|(id, ..)| *id != runtime);
                }
            }
            self.failed(Phase::Replying, e)
        })
    }
}

/// [`step`] on the shared async connection, sent to `redirect`'s node when set.
async fn step_async(
    conn: &mut Multiplexed,
    cmd: &Cmd,
    redirect: Option<&Redirect>,
) -> RedisResult<Vec<i64>> {
    match step_once_async(conn, cmd, redirect).await {
        Err(e) if is_missing(&e) => {
            // The cluster client loads a library on every master.
            loaded(query_async(&library().load(), conn).await)?;
            step_once_async(conn, cmd, redirect).await
        }
        other => other,
    }
}

async fn step_once_async(
    conn: &mut Multiplexed,
    cmd: &Cmd,
    redirect: Option<&Redirect>,
) -> RedisResult<Vec<i64>> {
    let (Multiplexed::Cluster(cluster), Some(redirect)) = (&mut *conn, redirect) else {
        return query_async::<Numbers>(cmd, conn)
            .await
            .map(|numbers| numbers.0);
    };
    let route = SingleNodeRoutingInfo::ByAddress {
        host: redirect.host.clone(),
        port: redirect.port,
    };
    let reply = if redirect.asking {
        let mut pipe = redis::pipe();
        pipe.cmd("ASKING").add_command(cmd.clone());
        let replies = cluster.route_pipeline(pipe, 1, 1, route).await?;
        replies.into_iter().next().unwrap_or(redis::Value::Nil)
    } else {
        let route = RoutingInfo::SingleNode(route);
        cluster.route_command(cmd.clone(), route).await?
    };
    Ok(redis::from_redis_value::<Numbers>(reply.extract_error()?)?.0)
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
