//! Who the client is, for the per-client rate limit: the peer address, or — when the peer is
//! one of `http.trusted_proxies` — the address its `X-Forwarded-For` names. Every line of the
//! header is joined and walked right to left, skipping trusted proxies; the first other
//! address is the client. An entry that is not an address before that point means the chain
//! cannot be trusted: the request is refused (`None`), never attributed to whoever is left.

use std::net::IpAddr;

use axum::http::HeaderMap;

/// The client's address, or `None` when a trusted proxy forwarded an unreadable chain.
pub fn address(peer: IpAddr, headers: &HeaderMap, trusted: &[(IpAddr, u8)]) -> Option<IpAddr> {
    let peer = canonical(peer);
    if !is_trusted(peer, trusted) {
        return Some(peer);
    }
    let mut client = peer;
    let values: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .map(|v| v.to_str().ok())
        .collect::<Option<Vec<_>>>()?;
    let joined = values.join(",");
    for entry in joined.rsplit(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let ip = canonical(parse_entry(entry)?);
        client = ip;
        if !is_trusted(ip, trusted) {
            return Some(ip);
        }
    }
    // Every hop was a trusted proxy: the left-most one is as far as the chain goes.
    Some(client)
}

/// The key a client's bucket is kept under: an IPv4 address, or an IPv6 address's /64 (one
/// subscriber's network: a client owning a /64 must not get 2^64 buckets).
pub fn key(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
    }
}

fn is_trusted(ip: IpAddr, trusted: &[(IpAddr, u8)]) -> bool {
    trusted
        .iter()
        .any(|(net, len)| ankusa_config::cidr_contains(*net, *len, ip))
}

/// An IPv4-mapped IPv6 address is the IPv4 address it carries.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// An address as proxies write it: `1.2.3.4`, `2001:db8::1`, `[2001:db8::1]`, or either with
/// a port (`1.2.3.4:5678`, `[2001:db8::1]:5678`).
fn parse_entry(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(sa) = s.parse::<std::net::SocketAddr>() {
        return Some(sa.ip());
    }
    s.strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|r| r.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted() -> Vec<(IpAddr, u8)> {
        ["10.0.0.0/8", "2001:db8:ffff::/48"]
            .iter()
            .filter_map(|c| ankusa_config::parse_cidr(c))
            .collect()
    }

    fn xff(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append("x-forwarded-for", v.parse().unwrap());
        }
        h
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_claims() {
        let ip = address(
            "203.0.113.9".parse().unwrap(),
            &xff(&["1.1.1.1"]),
            &trusted(),
        );
        assert_eq!(ip, Some("203.0.113.9".parse().unwrap()));
    }

    #[test]
    fn a_trusted_chain_is_walked_right_to_left_across_lines() {
        let h = xff(&["198.51.100.7, 10.1.1.1", "10.2.2.2"]);
        assert_eq!(
            address("10.9.9.9".parse().unwrap(), &h, &trusted()),
            Some("198.51.100.7".parse().unwrap())
        );
        // A client-supplied entry left of the real client is never believed.
        let h = xff(&["6.6.6.6, 198.51.100.7, 10.1.1.1"]);
        assert_eq!(
            address("10.9.9.9".parse().unwrap(), &h, &trusted()),
            Some("198.51.100.7".parse().unwrap())
        );
        let h = xff(&["[2001:db8::5]:443, [2001:db8:ffff::1]"]);
        assert_eq!(
            address("::ffff:10.0.0.1".parse().unwrap(), &h, &trusted()),
            Some("2001:db8::5".parse().unwrap())
        );
    }

    #[test]
    fn an_unreadable_entry_before_the_client_refuses() {
        let h = xff(&["198.51.100.7, garbage, 10.1.1.1"]);
        assert_eq!(address("10.9.9.9".parse().unwrap(), &h, &trusted()), None);
        // Beyond the client it is never read.
        let h = xff(&["garbage, 198.51.100.7, 10.1.1.1"]);
        assert_eq!(
            address("10.9.9.9".parse().unwrap(), &h, &trusted()),
            Some("198.51.100.7".parse().unwrap())
        );
    }

    #[test]
    fn no_header_from_a_trusted_proxy_is_the_proxy() {
        assert_eq!(
            address("10.9.9.9".parse().unwrap(), &HeaderMap::new(), &trusted()),
            Some("10.9.9.9".parse().unwrap())
        );
    }

    #[test]
    fn ipv6_clients_share_their_64() {
        assert_eq!(
            key("2001:db8:1:2:3:4:5:6".parse().unwrap()),
            key("2001:db8:1:2:ffff::1".parse().unwrap())
        );
        assert_ne!(
            key("2001:db8:1:2::1".parse().unwrap()),
            key("2001:db8:1:3::1".parse().unwrap())
        );
        assert_eq!(key("192.0.2.1".parse().unwrap()), "192.0.2.1");
    }
}
