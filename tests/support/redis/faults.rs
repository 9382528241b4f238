//! Fault control of the servers and Cluster nodes the harness started (never of one it
//! was given): kill, pause (SIGSTOP), resume and restart, and the check that a
//! restarted Cluster node loses no call.

use super::cluster::RedisCluster;
use super::process::{respawn, signal, spawn_server};
use super::server::RedisServer;
use super::store_calls::{take, window, SECOND};
use sluicegate::algorithms::{Decision, Receipt};
use std::process::Child;

impl RedisServer {
    fn own_child(&mut self) -> &mut Child {
        self.child
            .as_mut()
            .expect("fault helpers act only on a server the harness started (use start_own)")
    }

    /// Kills the server (SIGKILL): connections drop, state is gone.
    pub fn kill(&mut self) {
        self.resume_if_paused();
        let child = self.own_child();
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&mut self) {
        let pid = self.own_child().id();
        signal(pid, "-STOP");
        self.paused = true;
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&mut self) {
        let pid = self.own_child().id();
        signal(pid, "-CONT");
        self.paused = false;
    }

    fn resume_if_paused(&mut self) {
        if self.paused {
            self.resume();
        }
    }

    /// Kills the server and starts a new, empty one on the same port.
    pub fn restart(&mut self) {
        self.kill();
        let dir = self.dir.clone().expect("own server has a directory");
        let (port, extra) = (self.port, &self.extra);
        self.child = Some(respawn(port, || spawn_server(port, &dir, extra)));
    }
}

impl RedisCluster {
    /// Kills node `index` and starts it again on its port with its cluster config
    /// (its slots, no data), then waits until the cluster is ok again.
    pub fn restart_node(&mut self, index: usize) {
        let child = &mut self.children[index];
        let _ = child.kill();
        let _ = child.wait();
        let (port, dir) = (self.ports[index], self.dirs[index].clone());
        let extra = self.tls.get(index).map_or(&[][..], |(_, extra)| extra);
        self.children[index] = respawn(port, || Self::spawn_node(port, &dir, extra));
        self.wait_ok();
    }

    /// Kills node `index` (SIGKILL) and leaves it down: its port refuses
    /// connections. The others serve their slots until they agree the node
    /// failed (the cluster node timeout, 5 s).
    pub fn kill_node(&mut self, index: usize) {
        let child = &mut self.children[index];
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Freezes node `index` (SIGSTOP): its connections stay open, nothing answers.
    pub fn pause_node(&mut self, index: usize) {
        signal(self.children[index].id(), "-STOP");
    }

    /// Thaws a node [`pause_node`](Self::pause_node) froze (SIGCONT).
    pub fn resume_node(&mut self, index: usize) {
        signal(self.children[index].id(), "-CONT");
    }
}

/// One reserve of 1 (10 a minute) on each of 30 identities, spread over the
/// cluster's masters; node 0 restarted; and again. Asserts that every call
/// succeeds, and that identities on the restarted node start afresh (it keeps its
/// slots, not its data) while the others count on.
pub fn a_restarted_node_loses_no_call(
    cluster: &mut RedisCluster,
    store: &sluicegate::stores::redis::RedisStore<String, sluicegate::algorithms::FixedWindow>,
) {
    use sluicegate::stores::Store;
    let keys: Vec<String> = (0..30).map(|i| format!("user:{i}")).collect();
    let remaining = || -> Vec<u64> {
        keys.iter()
            .map(|key| {
                let (d, _) = store
                    .apply_key::<(Decision, Receipt)>(&window(10), key, SECOND, take(1))
                    .unwrap();
                d.remaining()
            })
            .collect()
    };
    assert!(remaining().iter().all(|&r| r == 9));
    cluster.restart_node(0);
    let after = remaining();
    assert!(after.iter().all(|&r| r == 9 || r == 8), "{after:?}");
    assert!(after.contains(&9) && after.contains(&8), "{after:?}");
}
