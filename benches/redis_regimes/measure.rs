//! The server's own µs per call of a row and of the floor interleaved with it,
//! chunk by chunk, each in its own `CONFIG RESETSTAT` ... `INFO commandstats`
//! window.

use crate::redis_server::Server;
use crate::CHUNK;

/// One measurement: the server's µs per call of the row and of the floor
/// interleaved with it (on one key, and for the fresh regime also on a new key
/// each call: what creating a key costs any step), and how many of the row's calls
/// were granted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Measured {
    pub(crate) usec: f64,
    pub(crate) floor: f64,
    /// The floor on new keys; infinite where not measured.
    pub(crate) new_key_floor: f64,
    pub(crate) granted: usize,
}

/// The bench's shared parts: the server, an admin connection, the floor's
/// connection (the floor function loaded), the calls per row.
pub(crate) struct Bench {
    pub(crate) server: Server,
    pub(crate) admin: redis::Connection,
    pub(crate) floor: redis::Connection,
    pub(crate) calls: usize,
    /// Whether the calls keep their receipts (`REGIMES_RECEIPTS`, default yes).
    pub(crate) receipts: bool,
    /// The new keys the floor has created so far.
    pub(crate) new_keys: u64,
}

impl Bench {
    /// The calls of a row, `call(i)` for each (true: granted), in chunks of
    /// [`CHUNK`], each chunk preceded by as many calls of the floor: the floor is
    /// measured under the very load the row meets. Each chunk is its own
    /// `CONFIG RESETSTAT` ... `INFO commandstats` window. With `new_keys`, a chunk
    /// of the floor on a new key each call comes before each of the row's too.
    pub(crate) fn measure(
        &mut self,
        row: &str,
        new_keys: bool,
        mut call: impl FnMut(u64) -> bool,
    ) -> Measured {
        let (mut usec, mut floor, mut new_key_floor, mut granted) = (0, 0, 0, 0);
        let mut i = 0;
        while i < self.calls as u64 {
            let n = (CHUNK as u64).min(self.calls as u64 - i);
            self.reset();
            for _ in 0..n {
                self.floor_call("floor".to_owned());
            }
            floor += self.fcall_usec(FLOOR, n);
            if new_keys {
                self.reset();
                for _ in 0..n {
                    self.new_keys += 1;
                    self.floor_call(format!("floor-new{}", self.new_keys));
                }
                new_key_floor += self.fcall_usec(FLOOR, n);
            }
            self.reset();
            granted += (i..i + n).filter(|&j| call(j)).count();
            usec += self.fcall_usec(row, n);
            i += n;
        }
        let calls = self.calls as f64;
        Measured {
            usec: usec as f64 / calls,
            floor: floor as f64 / calls,
            new_key_floor: if new_keys {
                new_key_floor as f64 / calls
            } else {
                f64::INFINITY
            },
            granted,
        }
    }

    pub(crate) fn floor_call(&mut self, key: String) {
        crate::redis_floor::call(&mut self.floor, &key).unwrap();
    }

    pub(crate) fn reset(&mut self) {
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut self.admin)
            .unwrap();
    }

    /// `cmdstat_fcall`'s total µs since the last reset: panics unless it counted
    /// exactly `calls` `FCALL`s, none failed.
    pub(crate) fn fcall_usec(&mut self, row: &str, calls: u64) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.admin)
            .unwrap();
        let line = info
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_fcall:"))
            .unwrap_or_else(|| panic!("{row}: no cmdstat_fcall in {info}"));
        let field = |name: &str| -> Option<u64> {
            line.split(',')
                .find_map(|f| f.strip_prefix(name))
                .and_then(|v| v.parse().ok())
        };
        let counted = field("calls=").unwrap_or_else(|| panic!("{row}: no calls in {line}"));
        assert_eq!(
            counted, calls,
            "{row}: the server counted {counted} FCALLs for {calls} decisions ({line})"
        );
        assert_eq!(
            field("failed_calls=").unwrap_or(0),
            0,
            "{row}: failed FCALLs ({line})"
        );
        field("usec=").unwrap_or_else(|| panic!("{row}: no usec in {line}"))
    }

    pub(crate) fn flush(&mut self) {
        let () = redis::cmd("FLUSHALL").query(&mut self.admin).unwrap();
    }
}

const FLOOR: &str = "floor (TIME + GET + SET … PX)";
