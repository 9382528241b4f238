//! Which Cluster node serves each hash slot, for the blocking calls the store routes
//! itself.
//!
//! Why route at all, when redis-rs's blocking cluster connection does: it holds its
//! sockets, so a node restarted between two calls shows only once the next call is
//! written to the dead socket, and that call's outcome is then unknown. Routing on
//! the store's own [`SocketConnection`](super::socket_connection::SocketConnection)s
//! lets every blocking call on Cluster check its connection before writing, as on a
//! standalone server. That needs each node's address and the URLs' credentials, so
//! only a store opened from node URLs over TCP (TLS too, with feature `redis-tls`)
//! routes itself; one over a cluster client you built keeps redis-rs's connection.
//!
//! The map is learned lazily, the way Redis Cluster clients are meant to learn it:
//! `CLUSTER SLOTS` from a known node the first time a slot has no owner, then one
//! slot at a time from `MOVED` replies (the node did not run the call, so the call
//! goes once more to the node named). A node that refuses connections clears the
//! map, so the next call reads it afresh (after a failover, say).

use super::keys::SLOTS;
use super::socket_connection::tcp_kind;
use parking_lot::RwLock;
use redis::{ConnectionAddr, ConnectionInfo, ErrorKind, RedisError, RedisResult, Value};
use std::sync::Arc;

/// A node's address; shared, since every slot it serves names it.
pub(super) type Node = Arc<ConnectionAddr>;

/// The slot map and what a connection to any node is opened with.
pub(super) struct ClusterRoutes {
    /// A node URL's settings (credentials, TCP options), for any node's address.
    template: ConnectionInfo,
    /// The nodes the store was opened with: where a map is read when none is known.
    seeds: Vec<Node>,
    map: RwLock<SlotMap>,
}

/// `owner[slot]` indexes `nodes`; [`UNKNOWN`] until learned.
struct SlotMap {
    nodes: Vec<Node>,
    owner: Vec<u16>,
}

const UNKNOWN: u16 = u16::MAX;

impl SlotMap {
    fn empty() -> Self {
        SlotMap {
            nodes: Vec::new(),
            owner: vec![UNKNOWN; usize::from(SLOTS)],
        }
    }

    fn index_of(&mut self, node: &ConnectionAddr) -> u16 {
        match self.nodes.iter().position(|known| **known == *node) {
            // A cluster has at most 16384 masters, so an index always fits.
            Some(i) => i as u16,
            None => {
                self.nodes.push(Arc::new(node.clone()));
                (self.nodes.len() - 1) as u16
            }
        }
    }
}

impl ClusterRoutes {
    /// Routes for a cluster reached through `seeds`, or `None` unless every seed is
    /// an address the store's own sockets serve, all of one kind: plain TCP, or TLS
    /// with verification and no certificates of the client's own (feature
    /// `redis-tls`).
    pub(super) fn new(seeds: &[ConnectionInfo]) -> Option<Self> {
        let kind = |info: &ConnectionInfo| tcp_kind(info.addr());
        let template = seeds.first()?;
        let tls = kind(template)?;
        if seeds.iter().any(|seed| kind(seed) != Some(tls)) {
            return None;
        }
        let template = template.clone();
        Some(ClusterRoutes {
            template,
            seeds: seeds
                .iter()
                .map(|info| Arc::new(info.addr().clone()))
                .collect(),
            map: RwLock::new(SlotMap::empty()),
        })
    }

    /// The node serving `slot`, if known.
    pub(super) fn node_of(&self, slot: u16) -> Option<Node> {
        let map = self.map.read();
        let index = *map.owner.get(usize::from(slot))?;
        map.nodes.get(usize::from(index)).cloned()
    }

    /// What to connect to `node` with: the seeds' settings at its address.
    pub(super) fn connection_info(&self, node: &ConnectionAddr) -> ConnectionInfo {
        self.template.clone().set_addr(node.clone())
    }

    /// The address of the node at `host:port`, reached as the seeds are (plain or
    /// TLS).
    pub(super) fn node_at(&self, host: String, port: u16) -> ConnectionAddr {
        match self.template.addr() {
            ConnectionAddr::TcpTls { .. } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: false,
                tls_params: None,
            },
            _ => ConnectionAddr::Tcp(host, port),
        }
    }

    /// Nodes to read a map from: the known ones, then the seeds.
    pub(super) fn candidates(&self) -> Vec<Node> {
        let mut nodes = self.map.read().nodes.clone();
        nodes.extend(self.seeds.iter().cloned());
        nodes
    }

    /// Takes `reply`, the `CLUSTER SLOTS` that `asked` gave, as the whole map.
    pub(super) fn learn(&self, reply: &Value, asked: &ConnectionAddr) -> RedisResult<()> {
        let mut map = SlotMap::empty();
        let Value::Array(ranges) = reply else {
            return Err(malformed("not an array"));
        };
        for range in ranges {
            let (start, end, host, port) = parse_range(range, host_of(asked))?;
            let index = map.index_of(&self.node_at(host, port));
            map.owner[usize::from(start)..=usize::from(end)].fill(index);
        }
        *self.map.write() = map;
        Ok(())
    }

    /// Records a `MOVED` reply: `slot` is now served by `host:port`.
    pub(super) fn moved(&self, slot: u16, host: String, port: u16) -> Node {
        let node = self.node_at(host, port);
        let mut map = self.map.write();
        let index = map.index_of(&node);
        map.owner[usize::from(slot)] = index;
        map.nodes[usize::from(index)].clone()
    }

    /// Forgets the map, so the next call reads it afresh.
    pub(super) fn forget(&self) {
        *self.map.write() = SlotMap::empty();
    }
}

/// Where a call a node redirected goes once more (the node did not run it).
pub(super) struct Redirect {
    /// The node the reply names.
    pub(super) host: String,
    pub(super) port: u16,
    /// An `ASK` (the slot is being migrated): this one call goes to the node,
    /// after `ASKING`. A `MOVED` names the slot's new owner.
    pub(super) asking: bool,
}

impl Redirect {
    /// The redirect `error` is, if it is a `MOVED` or `ASK` reply from a node at
    /// `asked_host` (`host:port`; an empty host is the asked node's, so without
    /// `asked_host` it is none).
    pub(super) fn of(error: &RedisError, asked_host: Option<&str>) -> Option<Self> {
        let (addr, _slot) = error.redirect_node()?;
        let (host, port) = addr.rsplit_once(':')?;
        let host = match (host, asked_host) {
            ("", Some(asked)) => asked.to_owned(),
            ("", None) => return None,
            _ => host.to_owned(),
        };
        Some(Redirect {
            host,
            port: port.parse().ok()?,
            asking: error.kind() == ErrorKind::Server(redis::ServerErrorKind::Ask),
        })
    }
}

/// The host of a TCP address, plain or TLS.
pub(super) fn host_of(addr: &ConnectionAddr) -> Option<&str> {
    match addr {
        ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => Some(host),
        _ => None,
    }
}

/// One `CLUSTER SLOTS` entry: `[start, end, [host, port, ...], replicas...]`. An
/// empty host means the node that answered; `?` is refused (Redis does not know
/// the master's address yet).
fn parse_range(range: &Value, asked_host: Option<&str>) -> RedisResult<(u16, u16, String, u16)> {
    let slot = |value: &Value| match value {
        Value::Int(n) => u16::try_from(*n).ok().filter(|n| *n < SLOTS),
        _ => None,
    };
    let Value::Array(fields) = range else {
        return Err(malformed("a range is not an array"));
    };
    let (Some(start), Some(end), Some(Value::Array(master))) = (
        fields.first().and_then(slot),
        fields.get(1).and_then(slot),
        fields.get(2),
    ) else {
        return Err(malformed("a range lacks its slots or master"));
    };
    let host = match master.first() {
        Some(Value::BulkString(host)) => String::from_utf8_lossy(host).into_owned(),
        Some(Value::SimpleString(host)) => host.clone(),
        _ => return Err(malformed("a master has no host")),
    };
    let Some(Value::Int(port)) = master.get(1) else {
        return Err(malformed("a master has no port"));
    };
    let port = u16::try_from(*port).map_err(|_| malformed("a port is out of range"))?;
    let host = match (host.as_str(), asked_host) {
        ("", Some(asked)) => asked.to_owned(),
        ("" | "?", _) => return Err(malformed("a master's address is unknown")),
        _ => host,
    };
    if start > end {
        return Err(malformed("a range ends before it starts"));
    }
    Ok((start, end, host, port))
}

fn malformed(what: &'static str) -> RedisError {
    RedisError::from((
        ErrorKind::Parse,
        "unexpected CLUSTER SLOTS reply",
        what.to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::IntoConnectionInfo;

    fn routes() -> ClusterRoutes {
        let seed = "redis://:secret@10.0.0.1:7000/"
            .into_connection_info()
            .unwrap();
        ClusterRoutes::new(&[seed]).unwrap()
    }

    fn master(host: &str, port: i64) -> Value {
        Value::Array(vec![Value::BulkString(host.into()), Value::Int(port)])
    }

    fn range(start: i64, end: i64, host: &str, port: i64) -> Value {
        Value::Array(vec![Value::Int(start), Value::Int(end), master(host, port)])
    }

    fn tcp(host: &str, port: u16) -> ConnectionAddr {
        ConnectionAddr::Tcp(host.to_owned(), port)
    }

    #[test]
    fn a_map_is_learned_whole_and_then_one_moved_slot_at_a_time() {
        let routes = routes();
        assert!(routes.node_of(0).is_none());
        let asked = tcp("10.0.0.1", 7000);
        let reply = Value::Array(vec![
            range(0, 8191, "", 7000),
            range(8192, 16383, "10.0.0.2", 7001),
        ]);
        routes.learn(&reply, &asked).unwrap();
        assert_eq!(*routes.node_of(0).unwrap(), asked);
        assert_eq!(*routes.node_of(8191).unwrap(), asked);
        assert_eq!(*routes.node_of(16383).unwrap(), tcp("10.0.0.2", 7001));
        assert_eq!(
            *routes.moved(5, "10.0.0.2".to_owned(), 7001),
            tcp("10.0.0.2", 7001)
        );
        assert_eq!(*routes.node_of(5).unwrap(), tcp("10.0.0.2", 7001));
        assert_eq!(*routes.node_of(6).unwrap(), asked);
        assert_eq!(routes.candidates().len(), 3, "two known nodes and the seed");
        routes.forget();
        assert!(routes.node_of(6).is_none());
    }

    #[test]
    fn a_redirect_names_its_node() {
        use redis::ServerErrorKind::{Ask, Moved};
        let asked = tcp("10.0.0.1", 7000);
        let reply = |kind, detail: &str| {
            RedisError::from((ErrorKind::Server(kind), "redirect", detail.to_owned()))
        };
        let target =
            |error, asked| Redirect::of(&error, asked).map(|r| (tcp(&r.host, r.port), r.asking));
        let moved = reply(Moved, "3999 10.0.0.2:7001");
        assert_eq!(target(moved, None), Some((tcp("10.0.0.2", 7001), false)));
        let ask = reply(Ask, "3999 :7002");
        assert_eq!(
            target(ask, host_of(&asked)),
            Some((tcp("10.0.0.1", 7002), true))
        );
        assert_eq!(target(reply(Ask, "3999 :7002"), None), None, "whose host?");
        let ipv6 = reply(Moved, "3999 ::1:7003");
        assert_eq!(target(ipv6, None), Some((tcp("::1", 7003), false)));
        assert_eq!(target(reply(Moved, "3999 host"), host_of(&asked)), None);
        assert_eq!(target(malformed("not a redirect"), host_of(&asked)), None);
    }

    #[test]
    fn a_node_is_reached_with_the_seeds_credentials() {
        let info = routes().connection_info(&tcp("10.0.0.9", 7005));
        assert_eq!(*info.addr(), tcp("10.0.0.9", 7005));
        assert_eq!(info.redis_settings().password(), Some("secret"));
    }

    #[test]
    fn a_malformed_map_is_an_error_and_keeps_the_old_one() {
        let routes = routes();
        let asked = tcp("10.0.0.1", 7000);
        routes
            .learn(&Value::Array(vec![range(0, 16383, "", 7000)]), &asked)
            .unwrap();
        for bad in [
            Value::Int(1),
            Value::Array(vec![range(0, 16384, "a", 1)]),
            Value::Array(vec![range(9, 8, "a", 1)]),
            Value::Array(vec![range(0, 1, "a", 70000)]),
            Value::Array(vec![range(0, 1, "?", 1)]),
            Value::Array(vec![Value::Array(vec![Value::Int(0), Value::Int(1)])]),
        ] {
            assert_eq!(
                routes.learn(&bad, &asked).unwrap_err().kind(),
                ErrorKind::Parse
            );
        }
        assert_eq!(*routes.node_of(16383).unwrap(), asked);
    }

    #[test]
    fn seeds_of_one_kind_the_stores_sockets_serve_are_routed_here() {
        let plain = "redis://10.0.0.1:7000/".into_connection_info().unwrap();
        let tls = plain.clone().set_addr(ConnectionAddr::TcpTls {
            host: "10.0.0.2".to_owned(),
            port: 7000,
            insecure: false,
            tls_params: None,
        });
        assert!(ClusterRoutes::new(std::slice::from_ref(&plain)).is_some());
        // Mixed kinds are not routed here.
        assert!(ClusterRoutes::new(&[plain, tls.clone()]).is_none());
        assert!(ClusterRoutes::new(&[]).is_none());
        // TLS seeds are, with feature `redis-tls`, and so are the nodes they name.
        let routes = ClusterRoutes::new(std::slice::from_ref(&tls));
        assert_eq!(routes.is_some(), cfg!(feature = "redis-tls"));
        if let Some(routes) = routes {
            let node = routes.node_at("10.0.0.3".to_owned(), 7003);
            assert!(
                matches!(node, ConnectionAddr::TcpTls { port: 7003, .. }),
                "{node:?}"
            );
        }
    }
}
