//! The client's address, as far as it can be trusted: the connection's peer, or, when the peer
//! is a trusted proxy (a load balancer in front of the replicas), the nearest address in
//! `X-Forwarded-For` that is not itself a trusted proxy.
//!
//! `X-Forwarded-For` is read from the right: each proxy appends the address it saw, so the
//! rightmost entries are the ones written by our own proxies, and anything left of the first
//! untrusted address may have been made up by the client. Without trusted proxies the header is
//! ignored, so a client cannot pick an address to spread its sign-in failures over.

use std::net::{IpAddr, SocketAddr};

use axum::http::HeaderMap;
use ipnet::IpNet;

/// Entries of `X-Forwarded-For` read at most, from the right: a longer chain of trusted proxies
/// ends at the last one read.
const MAX_HOPS: usize = 32;

/// The client's address for a connection from `peer` with `headers`, trusting `X-Forwarded-For`
/// entries only as far as they were written by addresses in `trusted`.
pub(crate) fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    let mut client = peer.to_canonical();
    if !is_trusted(&client) {
        return client;
    }
    let lines: Vec<&[u8]> = headers
        .get_all("x-forwarded-for")
        .iter()
        .map(|line| line.as_bytes())
        .collect();
    // Split as bytes: a byte the client wrote that is not text spoils only its own entry, not
    // the ones our proxies appended to the same line.
    let hops = lines
        .into_iter()
        .rev()
        .flat_map(|line| line.rsplit(|byte| *byte == b','));
    for hop in hops.take(MAX_HOPS) {
        // What a trusted proxy passed on but cannot be read stops the walk at that proxy.
        let Some(ip) = std::str::from_utf8(hop).ok().and_then(parse_hop) else {
            break;
        };
        client = ip;
        if !is_trusted(&client) {
            break;
        }
    }
    client
}

/// What the per-address sign-in limit counts `ip` under: the address itself for IPv4, its /64
/// network for IPv6 (one host usually holds a whole /64, and could pick a new address for every
/// attempt).
pub(crate) fn limit_key(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            ipnet::Ipv6Net::new(v6, 64).map_or_else(|_| v6.to_string(), |net| net.trunc().to_string())
        }
    }
}

/// One `X-Forwarded-For` entry: an address, perhaps with a port (`198.51.100.7:4711`,
/// `[2001:db8::1]:4711`).
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    let ip = hop
        .parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<SocketAddr>().ok().map(|addr| addr.ip()))?;
    Some(ip.to_canonical())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use axum::http::HeaderValue;

    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append("x-forwarded-for", HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn without_trusted_proxies_the_header_is_ignored() {
        let headers = forwarded(&["198.51.100.7"]);
        assert_eq!(client_ip(ip("10.0.0.2"), &headers, &[]), ip("10.0.0.2"));
    }

    #[test]
    fn an_untrusted_peer_cannot_name_another_address() {
        let headers = forwarded(&["198.51.100.7"]);
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(
            client_ip(ip("203.0.113.9"), &headers, &trusted),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn a_trusted_peer_names_the_address_it_saw() {
        let headers = forwarded(&["198.51.100.7"]);
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(client_ip(ip("10.0.0.2"), &headers, &trusted), ip("198.51.100.7"));
    }

    #[test]
    fn entries_a_client_made_up_left_of_its_address_are_not_read() {
        // The client sent "1.2.3.4" itself; the balancer appended the address it saw.
        let headers = forwarded(&["1.2.3.4, 198.51.100.7"]);
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(client_ip(ip("10.0.0.2"), &headers, &trusted), ip("198.51.100.7"));
    }

    #[test]
    fn chains_of_trusted_proxies_are_walked_over_every_header_line() {
        let headers = forwarded(&["1.2.3.4, 198.51.100.7", "10.1.0.5:4711", "[fd00::3]:80"]);
        let trusted = nets(&["10.0.0.0/8", "fd00::/8"]);
        assert_eq!(client_ip(ip("10.0.0.2"), &headers, &trusted), ip("198.51.100.7"));
    }

    #[test]
    fn an_unreadable_entry_stops_at_the_proxy_that_wrote_it() {
        let headers = forwarded(&["198.51.100.7, unknown"]);
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(client_ip(ip("10.0.0.2"), &headers, &trusted), ip("10.0.0.2"));
    }

    #[test]
    fn only_trusted_proxies_leave_the_farthest_one() {
        let headers = forwarded(&["10.9.9.9, 10.1.1.1"]);
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(client_ip(ip("10.0.0.2"), &headers, &trusted), ip("10.9.9.9"));
    }

    #[test]
    fn a_client_entry_that_is_not_text_does_not_hide_the_balancers_entry() {
        // nginx and AWS ALB append their entry to the client's own line.
        let mut headers = HeaderMap::new();
        let line = HeaderValue::from_bytes(b"\xff\xfe, 198.51.100.7").unwrap();
        headers.insert("x-forwarded-for", line);
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(client_ip(ip("10.0.0.2"), &headers, &trusted), ip("198.51.100.7"));
    }

    #[test]
    fn a_long_chain_is_read_only_so_far() {
        let chain = vec!["10.0.0.9"; 1000].join(", ");
        let headers = forwarded(&[&format!("198.51.100.7, {chain}")]);
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(client_ip(ip("10.0.0.2"), &headers, &trusted), ip("10.0.0.9"));
    }

    #[test]
    fn ipv6_clients_are_limited_per_64() {
        assert_eq!(limit_key(ip("198.51.100.7")), "198.51.100.7");
        assert_eq!(limit_key(ip("2001:db8:1:2:aaaa::1")), "2001:db8:1:2::/64");
        assert_eq!(limit_key(ip("2001:db8:1:2:bbbb::9")), "2001:db8:1:2::/64");
    }

    #[test]
    fn ipv4_mapped_addresses_count_as_ipv4() {
        let headers = forwarded(&["::ffff:198.51.100.7"]);
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(
            client_ip(ip("::ffff:10.0.0.2"), &headers, &trusted),
            ip("198.51.100.7")
        );
    }
}
