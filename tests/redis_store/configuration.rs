//! What a Redis store refuses when it is built, before any server is involved.
#![cfg(feature = "redis")]

use sluicegate::algorithms::FixedWindow;
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::ConfigError;

type Store = RedisStore<&'static str, FixedWindow>;

/// What `result` says is wrong with a URL; panics on anything but
/// [`ConfigError::InvalidUrl`].
fn why_invalid(result: Result<Store, ConfigError>) -> String {
    match result {
        Err(ConfigError::InvalidUrl { why }) => why,
        Err(other) => panic!("expected InvalidUrl, got {other}"),
        Ok(_) => panic!("expected InvalidUrl, got a store"),
    }
}

#[test]
fn a_bad_url_is_a_configuration_error_that_says_what_is_wrong() {
    for (url, says) in [
        ("http://127.0.0.1/", "scheme must be redis, rediss,"),
        ("127.0.0.1:7001", "does not parse as a URL such as redis://"),
        ("not a url", "does not parse as a URL"),
        ("redis://127.0.0.1:99999/", "invalid port number"),
        ("redis://127.0.0.1/not-a-db", "Invalid database number"),
    ] {
        let why = why_invalid(Store::open(url));
        assert!(why.contains(says), "{url}: {why}");
        let why = why_invalid(Store::open_with(url, RedisOptions::default()));
        assert!(why.contains(says), "{url}: {why}");
    }
    // A password in a refused URL is not repeated.
    let why = why_invalid(Store::open("http://user:hunter2@127.0.0.1/"));
    assert!(!why.contains("hunter2"), "{why}");
    // A Cluster's node URLs, one at a time and together.
    let why = why_invalid(Store::open_cluster(
        ["redis://127.0.0.1:7000/", "http://127.0.0.1:7001/"],
        RedisOptions::default(),
    ));
    assert!(why.contains("does not parse"), "{why}");
    let why = why_invalid(Store::open_cluster(
        ["redis://127.0.0.1:7000/0", "redis://127.0.0.1:7001/1"],
        RedisOptions::default(),
    ));
    assert!(why.contains("different database"), "{why}");
}

#[test]
fn the_callers_clock_without_an_expiry_grace_is_refused() {
    use sluicegate::stores::redis::TimeSource;
    use std::time::Duration;
    let url = "redis://127.0.0.1/";
    let caller = RedisOptions::default().time_source(TimeSource::Caller);
    let missing = |result: Result<Store, ConfigError>| match result {
        Err(ConfigError::MissingSetting { what, why }) => {
            assert_eq!(what, "expiry_grace");
            assert!(why.contains("server's clock"), "{why}");
        }
        Err(other) => panic!("expected MissingSetting, got {other}"),
        Ok(_) => panic!("expected MissingSetting, got a store"),
    };
    missing(Store::open_with(url, caller.clone()));
    missing(Store::from_client(
        redis::Client::open(url).unwrap(),
        caller.clone(),
    ));
    missing(Store::open_cluster([url], caller.clone()));
    // Any grace said out loud is taken, zero too (one clock that keeps pace with
    // the server's); the server's clock needs none.
    for grace in [Duration::ZERO, Duration::from_secs(3600)] {
        assert!(Store::open_with(url, caller.clone().expiry_grace(grace)).is_ok());
    }
    assert!(Store::open_with(url, RedisOptions::default()).is_ok());
}
