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
        ("127.0.0.1:6379", "does not parse as a URL such as redis://"),
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
