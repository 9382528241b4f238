//! What is wrong with a Redis URL, said when a store is built
//! ([`ConfigError::InvalidUrl`]) rather than when a call first needs a connection.

use crate::error::ConfigError;
use redis::RedisError;

/// The schemes redis-rs reads (its `parse_redis_url`), and the same as text.
const SCHEMES: [&str; 7] = [
    "redis",
    "rediss",
    "redis+unix",
    "unix",
    "valkey",
    "valkeys",
    "valkey+unix",
];
const SCHEMES_TEXT: &str = "redis, rediss, redis+unix, unix, valkey, valkeys or valkey+unix";

/// The client for `url`, or what is wrong with the URL.
pub(super) fn client(url: &str) -> Result<redis::Client, ConfigError> {
    redis::Client::open(url).map_err(|e| invalid(Some(url), &e))
}

/// The configuration error for a URL redis-rs refused with `error`. When the URL's
/// text is at hand, the `url` crate (redis-rs's own parser) says what kept it from
/// parsing, or which scheme it has; otherwise redis-rs's reason is all there is.
/// The URL itself is never repeated: it may hold a password.
pub(super) fn invalid(text: Option<&str>, error: &RedisError) -> ConfigError {
    let why = match text.map(url::Url::parse) {
        Some(Err(e)) => format!("it does not parse as a URL such as redis://host:6379/0 ({e})"),
        Some(Ok(url)) if !SCHEMES.contains(&url.scheme()) => {
            format!("its scheme must be {SCHEMES_TEXT}, got {:?}", url.scheme())
        }
        _ => {
            // redis-rs displays "<reason> - InvalidClientConfig".
            let reason = error.to_string();
            let reason = reason.trim_end_matches(" - InvalidClientConfig");
            if reason == "Redis URL did not parse" {
                format!("it does not parse as a URL whose scheme is {SCHEMES_TEXT}")
            } else {
                reason.to_owned()
            }
        }
    };
    ConfigError::InvalidUrl { why }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(url: &str) -> String {
        match client(url) {
            Err(ConfigError::InvalidUrl { why }) => why,
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn each_kind_of_bad_url_says_what_is_wrong_and_hides_the_url() {
        assert!(why("http://u:secret@h/").contains("got \"http\""));
        assert!(why("or://h/").contains("got \"or\""));
        assert_eq!(
            why("127.0.0.1:6379"),
            "it does not parse as a URL such as redis://host:6379/0 (relative URL without a base)"
        );
        assert!(why("redis://h:99999/").contains("invalid port number"));
        assert!(why("redis://h/x").contains("Invalid database number"));
        assert!(!why("http://u:secret@h/").contains("secret"));
        let bad = RedisError::from((
            redis::ErrorKind::InvalidClientConfig,
            "Redis URL did not parse",
        ));
        let ConfigError::InvalidUrl { why } = invalid(None, &bad) else {
            unreachable!()
        };
        assert_eq!(
            why,
            "it does not parse as a URL whose scheme is redis, rediss, redis+unix, unix, \
             valkey, valkeys or valkey+unix"
        );
        for good in [
            "redis://h/",
            "redis+unix:///tmp/r.sock",
            "valkey://h:7000/2",
        ] {
            assert!(client(good).is_ok(), "{good}");
        }
    }
}
