//! The Redis store over TLS when the application installed no rustls crypto
//! provider: a blocking call fails with a typed error that says what to do, and
//! never panics (rustls's own builder would). A file of its own: every other TLS
//! test installs a provider, for the whole process.
#![cfg(feature = "redis-tls")]

mod support;

use sluicegate::algorithms::{Decision, Receipt};
use support::redis as redis_support;

use redis_support::trace::caller_time_options;
use redis_support::{take, window, RedisServer, SECOND};
use sluicegate::algorithms::FixedWindow;
use sluicegate::stores::redis::RedisStore;
use sluicegate::stores::Store;
use sluicegate::{Applied, Error};

#[test]
fn without_a_crypto_provider_a_tls_call_is_a_typed_error() {
    assert!(rustls::crypto::CryptoProvider::get_default().is_none());
    let server = RedisServer::start_own_tls();
    let store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with(server.tls_url(), caller_time_options("no-provider:")).unwrap();
    match store.apply_key::<(Decision, Receipt)>(&window(10), &"k", SECOND, take(1)) {
        Err(Error::Store(e)) => {
            assert_eq!(e.applied(), Applied::No, "nothing was sent");
            assert!(e.to_string().contains("crypto provider"), "{e}");
        }
        other => panic!("expected a typed store error, got {other:?}"),
    }
}
