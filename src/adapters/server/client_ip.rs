//! The client's IP behind proxies you control: the right-most address in the
//! forwarding field that is not one of your proxies.

use http::header::{HeaderMap, HeaderName, FORWARDED};
use std::net::{IpAddr, SocketAddr};

/// Which forwarding field the proxies in front of the server write.
///
/// ```
/// use sluicegate::adapters::server::Forwarding;
/// assert_ne!(Forwarding::XForwardedFor, Forwarding::Forwarded);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forwarding {
    /// `X-Forwarded-For: client, proxy1, proxy2`: each proxy appends the address
    /// it received the request from.
    XForwardedFor,
    /// `Forwarded: for=client, for="[2001:db8::1]:4711"` (RFC 7239): the `for`
    /// parameter of each element.
    Forwarded,
}

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// The address to key a request by: its `peer` (the TCP peer, e.g. axum's
/// `ConnectInfo<SocketAddr>`), or, when the peer is one of your proxies
/// (`trusted`), the right-most address in the forwarding `field` that is not one of
/// them.
///
/// A forwarding field is written by whoever sent the request, so only the entries
/// your own proxies appended can be believed: a client can put anything at the left
/// of `X-Forwarded-For`, and a key it chooses escapes its limit. So the peer comes
/// first: a peer that is not trusted is the client, whatever the fields say. Behind
/// trusted proxies the walk goes from the right (the last hop) leftwards, skipping
/// trusted addresses, and stops at the first untrusted one: the address your
/// outermost proxy saw. An entry that is not an address (`unknown`, an obfuscated
/// identifier, garbage) stops the walk at the trusted hop that wrote it, which is
/// then the key (all such clients share it: a limit that errs towards limiting). If
/// every hop is trusted, the left-most is the answer. Every line of the field
/// counts, in order, as one list. Use the field your proxies write and no other:
/// one they do not write is entirely the client's.
///
/// ```
/// use http::HeaderMap;
/// use sluicegate::adapters::server::{client_ip, Forwarding};
/// use std::net::IpAddr;
/// let proxy: IpAddr = "10.0.0.2".parse().unwrap();
/// let ours = |ip: IpAddr| ip == proxy; // our load balancer
/// let mut headers = HeaderMap::new();
/// // "1.2.3.4" is what the client claims; 203.0.113.9 is who reached our proxy.
/// headers.insert("x-forwarded-for", "1.2.3.4, 203.0.113.9".parse().unwrap());
/// assert_eq!(client_ip(proxy, &headers, Forwarding::XForwardedFor, ours), "203.0.113.9".parse::<IpAddr>().unwrap());
/// // A request that did not come through the proxy: its peer, the field ignored.
/// let direct: IpAddr = "198.51.100.7".parse().unwrap();
/// assert_eq!(client_ip(direct, &headers, Forwarding::XForwardedFor, ours), direct);
/// ```
pub fn client_ip(
    peer: IpAddr,
    headers: &HeaderMap,
    field: Forwarding,
    trusted: impl Fn(IpAddr) -> bool,
) -> IpAddr {
    if !trusted(peer) {
        return peer;
    }
    let name = match field {
        Forwarding::XForwardedFor => &X_FORWARDED_FOR,
        Forwarding::Forwarded => &FORWARDED,
    };
    let mut hops: Vec<&str> = Vec::new();
    for line in headers.get_all(name) {
        let Ok(text) = line.to_str() else {
            // A line that is not text: nothing left of it can be believed.
            hops.clear();
            continue;
        };
        hops.extend(text.split(','));
    }
    let mut nearest = peer;
    for hop in hops.iter().rev() {
        let address = match field {
            Forwarding::XForwardedFor => node(hop.trim()),
            Forwarding::Forwarded => forwarded_for(hop),
        };
        let Some(address) = address else {
            return nearest;
        };
        if !trusted(address) {
            return address;
        }
        nearest = address;
    }
    nearest
}

/// The `for` node of one `Forwarded` element (`for=...;by=...;proto=...`).
fn forwarded_for(element: &str) -> Option<IpAddr> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("for") {
            return None;
        }
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        node(value)
    })
}

/// An address with or without a port: `192.0.2.1`, `192.0.2.1:80`, `2001:db8::1`,
/// `[2001:db8::1]`, `[2001:db8::1]:80`.
fn node(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(socket) = text.parse::<SocketAddr>() {
        return Some(socket.ip());
    }
    let bracketed = text.strip_prefix('[')?.strip_suffix(']')?;
    bracketed.parse::<IpAddr>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn headers(name: &'static str, lines: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for line in lines {
            map.append(name, line.parse().unwrap());
        }
        map
    }

    /// Our proxies: 10.0.0.0/8.
    fn ours(address: IpAddr) -> bool {
        matches!(address, IpAddr::V4(v4) if v4.octets()[0] == 10)
    }

    #[test]
    fn the_right_most_untrusted_hop_across_lines() {
        let map = headers(
            "x-forwarded-for",
            &["6.6.6.6, 203.0.113.9", "10.0.0.5, 10.0.0.7"],
        );
        assert_eq!(
            client_ip(ip("10.0.0.2"), &map, Forwarding::XForwardedFor, ours),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn every_hop_trusted_gives_the_left_most() {
        let map = headers("x-forwarded-for", &["10.1.1.1, 10.0.0.7"]);
        assert_eq!(
            client_ip(ip("10.0.0.2"), &map, Forwarding::XForwardedFor, ours),
            ip("10.1.1.1")
        );
        let empty = HeaderMap::new();
        assert_eq!(
            client_ip(ip("10.0.0.2"), &empty, Forwarding::XForwardedFor, ours),
            ip("10.0.0.2")
        );
    }

    #[test]
    fn garbage_stops_at_the_trusted_hop_that_wrote_it() {
        let map = headers("x-forwarded-for", &["203.0.113.9, unknown, 10.0.0.7"]);
        assert_eq!(
            client_ip(ip("10.0.0.2"), &map, Forwarding::XForwardedFor, ours),
            ip("10.0.0.7")
        );
    }

    #[test]
    fn forwarded_elements_with_ports_quotes_and_v6() {
        let map = headers(
            "forwarded",
            &[
                r#"for=192.0.2.60;proto=http, For="[2001:db8:cafe::17]:4711""#,
                "for=10.0.0.9",
            ],
        );
        assert_eq!(
            client_ip(ip("10.0.0.2"), &map, Forwarding::Forwarded, ours),
            ip("2001:db8:cafe::17")
        );
        // The other field is not read.
        assert_eq!(
            client_ip(ip("10.0.0.2"), &map, Forwarding::XForwardedFor, ours),
            ip("10.0.0.2")
        );
        assert_eq!(node("192.0.2.1:80"), Some(ip("192.0.2.1")));
        assert_eq!(node("[2001:db8::1]"), Some(ip("2001:db8::1")));
        assert_eq!(node("_hidden"), None);
    }
}
