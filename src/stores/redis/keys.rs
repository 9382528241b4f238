//! Server key names: `<prefix>{k<escaped identity>}:<algorithm>`.
//!
//! Redis Cluster places a key by the text between its first `{` and the first `}`
//! after it (the *hash tag*). The identity (a key's rendered text) goes inside the
//! tag with its `}` escaped, so:
//!
//! * the tag is always the whole identity, whatever it contains: a `}` in the text
//!   cannot end the tag early and a `{` inside a tag is plain text to Redis;
//! * the escaping is injective (`\` → `\\`, `}` → `\]`): two identities that differ
//!   give different key names, so no key can read or write another's state;
//! * the tag is never empty (the leading `k`): Redis hashes the *whole* key name when
//!   the tag is `{}`, which would put one identity's states on different slots;
//! * the prefix may not contain a brace, so it cannot open a tag of its own.
//!
//! Escaping keeps key names readable in `MONITOR` and `SCAN` (hex would double every
//! key's length). All states of one identity (one per algorithm) share its tag, so a
//! multi-limit call for one identity always runs on one Cluster slot.
//!
//! A store configured with a [shared tag](super::RedisOptions::shared_tag) puts the
//! identity outside the tag instead (`<prefix>{<tag>}k<escaped identity>:<algorithm>`):
//! every key of that store is on one slot, so multi-key calls work on Cluster too.

use crate::error::{ConfigError, Error};

/// Appends `identity`, escaped so that it contains no `}` and decodes uniquely.
fn escape_into(identity: &str, out: &mut String) {
    out.reserve(identity.len() + 1);
    out.push('k');
    for c in identity.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '}' => out.push_str("\\]"),
            c => out.push(c),
        }
    }
}

/// Checks a namespace prefix or shared tag: no braces, which would open or close a
/// hash tag of their own.
pub(super) fn check_part(what: &'static str, text: &str) -> Result<(), ConfigError> {
    if text.contains(['{', '}']) {
        return Err(ConfigError::InvalidText {
            what,
            why: "may not contain '{' or '}' (it would change the keys' hash tag, and with it their Cluster slot)",
        });
    }
    Ok(())
}

/// Builds the server key of `identity` for the algorithm named `algorithm`.
pub(super) fn server_key(
    prefix: &str,
    shared_tag: Option<&str>,
    identity: &str,
    algorithm: &str,
) -> String {
    let mut key = String::with_capacity(prefix.len() + identity.len() + algorithm.len() + 8);
    key.push_str(prefix);
    match shared_tag {
        None => {
            key.push('{');
            escape_into(identity, &mut key);
            key.push('}');
        }
        Some(tag) => {
            key.push('{');
            key.push_str(tag);
            key.push('}');
            escape_into(identity, &mut key);
        }
    }
    key.push(':');
    key.push_str(algorithm);
    key
}

/// The number of Redis Cluster hash slots.
pub(super) const SLOTS: u16 = 16384;

/// The Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag (the text
/// between its first `{` and the first `}` after it, when not empty), else of
/// the whole key, modulo [`SLOTS`]. (redis-rs computes the same but does not
/// expose the number, which the store's own blocking routing needs.)
pub(super) fn slot_of(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let tag = &key[open + 1..];
            tag.iter()
                .position(|&b| b == b'}')
                .map(|close| &tag[..close])
        })
        .filter(|tag| !tag.is_empty())
        .unwrap_or(key);
    let mut crc: u16 = 0;
    for &byte in hashed {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % SLOTS
}

/// Refuses a multi-key call whose keys fall in different Cluster slots.
pub(super) fn check_one_slot(keys: &[String]) -> Result<(), Error> {
    let Some(first) = keys.first() else {
        return Ok(());
    };
    let slot = slot_of(first.as_bytes());
    if keys.iter().all(|key| slot_of(key.as_bytes()) == slot) {
        return Ok(());
    }
    Err(Error::InvalidKeys {
        why: "the keys of this call fall in different Redis Cluster hash slots, and one \
              atomic script can touch only one slot",
        help: "give the store a shared hash tag (RedisOptions::shared_tag) so that the keys \
               that are limited together share a slot, or make one call per key",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::cluster_routing::Slot;

    #[test]
    fn hostile_identities_stay_inside_their_own_tag() {
        let hostile = [
            "",
            "}",
            "{",
            "{}",
            "a}b",
            "a\\]b",
            "a}b\\",
            "\\",
            "\\\\]",
            "x:y z",
            "\u{0}\u{1}\u{ff}",
        ];
        let keys: Vec<String> = hostile
            .iter()
            .map(|id| server_key("rl:", None, id, "fw"))
            .collect();
        for (i, a) in keys.iter().enumerate() {
            // The tag Redis sees is exactly the escaped identity.
            let open = a.find('{').unwrap();
            let close = open + a[open..].find('}').unwrap();
            assert_eq!(&a[close..], "}:fw", "{a}");
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // Every state of one identity shares a slot.
        let id = "user:{42}";
        assert_eq!(
            Slot::for_key(server_key("rl:", None, id, "fw")),
            Slot::for_key(server_key("rl:", None, id, "lb"))
        );
    }

    #[test]
    fn slots_are_redis_clusters() {
        // Slots `CLUSTER KEYSLOT` gives, and the CRC16/XMODEM check value.
        assert_eq!(slot_of(b"foo"), 12182);
        assert_eq!(slot_of(b"bar"), 5061);
        assert_eq!(slot_of(b"123456789"), 0x31c3);
        assert_eq!(slot_of(b"{user1000}.following"), slot_of(b"user1000"));
        assert_ne!(slot_of(b"foo{}{bar}"), slot_of(b"bar"));
        assert_eq!(slot_of(b"foo{{bar}}zap"), slot_of(b"{bar"));
        for key in ["", "{", "}{", "a{b}c", "x{}y", "\u{0}", "user:{42}"] {
            assert_eq!(
                Slot::new(slot_of(key.as_bytes())),
                Some(Slot::for_key(key)),
                "{key}"
            );
        }
    }

    #[test]
    fn a_shared_tag_puts_every_identity_on_one_slot() {
        let a = server_key("rl:", Some("shop"), "alice", "fw");
        let b = server_key("rl:", Some("shop"), "bob}", "fw");
        assert!(check_one_slot(&[a.clone(), b]).is_ok());
        let c = server_key("rl:", None, "alice", "fw");
        let d = server_key("rl:", None, "bob", "fw");
        assert!(matches!(
            check_one_slot(&[c, d]),
            Err(Error::InvalidKeys { .. })
        ));
        assert!(check_part("prefix", "a{b").is_err());
        assert!(check_part("shared tag", "a}").is_err());
        assert!(check_part("prefix", "rl:").is_ok());
        assert_ne!(a, server_key("rl:", Some("shop"), "alice", "lb"));
    }
}
