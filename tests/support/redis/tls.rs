//! TLS for the harness's servers: the tests' certificate authority, made once and
//! trusted by the process, and the arguments that make a server serve TLS with a
//! certificate for `localhost` that it signed.

use super::process::temp_dir;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Makes this process trust the test CA ([`test_ca`]) through `SSL_CERT_FILE`,
/// which rustls-native-certs reads for the store's sockets and redis-rs's alike,
/// with ring as rustls's crypto provider (the crate leaves that choice to the
/// application). Once per process: every TLS test calls it before it connects.
#[cfg(feature = "redis-tls")]
pub fn trust_test_ca() {
    static TRUSTED: std::sync::Once = std::sync::Once::new();
    TRUSTED.call_once(|| {
        // A provider installed already (by the application, here none) is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let file = test_ca().join("ca.crt");
        // SAFETY: every reader of the environment in the test binaries goes through
        // std (`env::var`, `Command::spawn`: rustls-native-certs, this harness),
        // which holds the lock `set_var` takes; no C code in them reads it.
        unsafe { std::env::set_var("SSL_CERT_FILE", file) };
    });
}

/// The tests' certificate authority (`ca.crt` and `ca.key`), whose certificate the
/// TLS tests trust: its directory. Made once and kept in the temporary directory
/// for later runs (valid ten years), so that test processes leave nothing behind;
/// processes that make it at once keep whichever lands first, whole (a rename).
pub fn test_ca() -> &'static Path {
    static CA: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    CA.get_or_init(|| {
        let shared = std::env::temp_dir().join("sluicegate-redis-test-ca");
        if shared.join("ca.crt").exists() && shared.join("ca.key").exists() {
            return shared;
        }
        let dir = temp_dir("ca");
        new_key(&dir, "ca.key");
        let subject = "/CN=sluicegate test CA";
        let args = [
            "-x509", "-new", "-key", "ca.key", "-out", "ca.crt", "-subj", subject,
        ];
        openssl(&dir, &[&["req", "-days", "3650"][..], &args].concat());
        if std::fs::rename(&dir, &shared).is_err() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        shared
    })
}

/// Arguments that make a server serve TLS on `tls_port` too, with a key and a
/// certificate for `localhost` (signed by [`test_ca`]) written into `dir`.
pub(super) fn tls_arguments(tls_port: u16, dir: &Path) -> Vec<String> {
    let ca = test_ca();
    std::fs::write(
        dir.join("server.ext"),
        // Client authentication too: Cluster nodes present it to each other.
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    .unwrap();
    new_key(dir, "server.key");
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-key",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
    );
    let (ca_crt, ca_key) = (ca.join("ca.crt"), ca.join("ca.key"));
    let serial = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |t| t.as_nanos())
        .to_string();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            &ca_crt.display().to_string(),
            "-CAkey",
            &ca_key.display().to_string(),
            // A serial of its own: nothing is written beside the shared CA.
            "-set_serial",
            &serial,
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    );
    let path = |name: &str| dir.join(name).display().to_string();
    vec![
        "--tls-port".to_owned(),
        tls_port.to_string(),
        "--tls-cert-file".to_owned(),
        path("server.crt"),
        "--tls-key-file".to_owned(),
        path("server.key"),
        "--tls-ca-cert-file".to_owned(),
        ca_crt.display().to_string(),
        "--tls-auth-clients".to_owned(),
        "no".to_owned(),
    ]
}

/// Writes a new P-256 private key to `name` in `dir`.
fn new_key(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            name,
        ],
    );
}

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "redis test harness: cannot run `openssl` ({e}) to make test certificates; \
                 install it (Debian: `apt-get install -y openssl`, which .ci/run does)"
            )
        });
    assert!(
        output.status.success(),
        "redis test harness: openssl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}
