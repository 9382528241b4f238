//! A `redis-server` a Redis bench starts itself: on a free port, no persistence,
//! killed (thawed first, if paused) and reaped when dropped.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server, owned from its spawn on, so that every path kills it.
pub struct Server {
    child: Child,
    pub url: String,
    #[allow(dead_code)] // not every bench needs the port itself
    pub port: u16,
}

impl Server {
    /// Starts one with `extra` arguments (e.g. `--loadmodule`), and waits (at most
    /// 20 s) until it answers `PING`.
    pub fn start(name: &str, extra: &[String]) -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir = std::env::temp_dir().join(format!("sluicegate-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--dir", &dir.display().to_string()])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install -y redis-server)");
        let server = Server {
            child,
            url: format!("redis://127.0.0.1:{port}/"),
            port,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ping = redis::Client::open(server.url.as_str())
                .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            if ping.is_ok() {
                return server;
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `signal` (e.g. `-STOP`, `-CONT`) to the server.
    #[allow(dead_code)] // not every bench pauses its server
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} failed");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The name of the step library's function on the server (`sluicegate_<digest>`).
#[allow(dead_code)] // the benches that call the step library by name
pub fn function_name(admin: &mut redis::Connection) -> String {
    fn find(value: &redis::Value) -> Option<String> {
        match value {
            redis::Value::BulkString(bytes) => {
                let text = String::from_utf8_lossy(bytes);
                text.starts_with("sluicegate_").then(|| text.into_owned())
            }
            redis::Value::Array(items) => items.iter().find_map(find),
            redis::Value::Map(pairs) => pairs.iter().find_map(|(_, v)| find(v)),
            _ => None,
        }
    }
    let list: redis::Value = redis::cmd("FUNCTION").arg("LIST").query(admin).unwrap();
    find(&list).expect("the store loaded its library")
}
