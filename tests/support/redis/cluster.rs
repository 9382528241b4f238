//! A Redis Cluster for a test: three masters the harness starts (on free ports, TLS
//! too if asked, the cluster bus with it) and joins with `redis-cli --cluster create`,
//! killed on drop. Its fault control is in `faults`.

use super::process::{free_port, spawn_server, temp_dir, wait_ready, START_TIMEOUT};
use super::tls::{test_ca, tls_arguments};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Three Redis Cluster masters started here, joined with `redis-cli --cluster
/// create`, killed on drop.
pub struct RedisCluster {
    pub(super) ports: Vec<u16>,
    pub(super) children: Vec<Child>,
    pub(super) dirs: Vec<PathBuf>,
    /// Each node's TLS port and arguments, for a cluster started with TLS.
    pub(super) tls: Vec<(u16, Vec<String>)>,
}

impl RedisCluster {
    /// Starts three masters and waits until every node says `cluster_state:ok`.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// [`start`](Self::start), each node also serving TLS on a second port (the
    /// cluster bus too), with certificates as [`RedisServer::start_own_tls`]'s.
    pub fn start_tls() -> Self {
        Self::start_with(true)
    }

    fn start_with(tls: bool) -> Self {
        let mut cluster = RedisCluster {
            ports: Vec::new(),
            children: Vec::new(),
            dirs: Vec::new(),
            tls: Vec::new(),
        };
        for _ in 0..3 {
            let (port, child, dir, tls) = Self::start_node(tls);
            cluster.ports.push(port);
            cluster.children.push(child);
            cluster.dirs.push(dir);
            cluster.tls.extend(tls);
        }
        // With TLS the nodes meet over their TLS ports: the cluster bus speaks TLS.
        let mut create = Command::new("redis-cli");
        let ports = if tls {
            let ca = test_ca().join("ca.crt");
            create.arg("--tls").arg("--cacert").arg(ca);
            cluster.tls.iter().map(|(port, _)| *port).collect()
        } else {
            cluster.ports.clone()
        };
        create.arg("--cluster").arg("create");
        for port in ports {
            create.arg(format!("127.0.0.1:{port}"));
        }
        // redis-cli waits for the nodes to join for as long as it takes: bounded
        // here, so that a cluster that cannot form fails the test instead of
        // hanging it. Its output goes to a file, read when it ends either way.
        let log = cluster.dirs[0].join("create.log");
        let file = std::fs::File::create(&log).unwrap();
        let mut child = create
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "redis test harness: cannot run `redis-cli` ({e}); install it (Debian: \
                     `apt-get install -y redis-tools`, which .ci/run does)"
                )
            });
        let deadline = Instant::now() + START_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            status.is_some_and(|status| status.success()),
            "redis test harness: redis-cli --cluster create {}: {}",
            if status.is_some() {
                "failed"
            } else {
                "did not finish within the start timeout"
            },
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        cluster.wait_ok();
        cluster
    }

    fn start_node(tls: bool) -> (u16, Child, PathBuf, Option<(u16, Vec<String>)>) {
        let dir = temp_dir("cluster");
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let tls = tls.then(|| {
                let tls_port = free_port();
                let mut extra = tls_arguments(tls_port, &dir);
                // The bus port is named: the default (the port + 10000) would be
                // the plain port's, while the nodes meet over their TLS ports.
                let bus = free_port().to_string();
                extra.extend(["--tls-cluster", "yes", "--cluster-port", &bus].map(String::from));
                (tls_port, extra)
            });
            let extra = tls.as_ref().map_or(&[][..], |(_, extra)| extra);
            let mut child = Self::spawn_node(port, &dir, extra);
            match wait_ready(port, &mut child) {
                Ok(()) => return (port, child, dir, tls),
                Err(why) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    last = why;
                }
            }
        }
        panic!("redis test harness: could not start a cluster node: {last}");
    }

    pub(super) fn spawn_node(port: u16, dir: &Path, extra: &[String]) -> Child {
        let config = format!("nodes-{port}.conf");
        let mut args = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            &config,
            "--cluster-node-timeout",
            "5000",
        ];
        args.extend(extra.iter().map(String::as_str));
        spawn_server(port, dir, &args)
    }

    pub(super) fn wait_ok(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let all_ok = self.ports.iter().all(|port| {
                let url = format!("redis://127.0.0.1:{port}/");
                redis::Client::open(url.as_str())
                    .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
                    .and_then(|mut conn| {
                        redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut conn)
                    })
                    .is_ok_and(|info| info.contains("cluster_state:ok"))
            });
            if all_ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis test harness: the cluster did not reach cluster_state:ok within {START_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// An admin connection to node `index`.
    pub fn connection(&self, index: usize) -> redis::Connection {
        let url = format!("redis://127.0.0.1:{}/", self.ports[index]);
        redis::Client::open(url).unwrap().get_connection().unwrap()
    }

    /// Node `index`'s port.
    pub fn port(&self, index: usize) -> u16 {
        self.ports[index]
    }

    /// The nodes' TLS URLs (a cluster from [`start_tls`](Self::start_tls)).
    pub fn tls_urls(&self) -> Vec<String> {
        assert!(!self.tls.is_empty(), "a cluster started with TLS");
        self.tls
            .iter()
            .map(|(port, _)| format!("rediss://127.0.0.1:{port}/"))
            .collect()
    }

    /// The nodes' URLs, to build a cluster client from.
    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|port| format!("redis://127.0.0.1:{port}/"))
            .collect()
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for dir in &self.dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
