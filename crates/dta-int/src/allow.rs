//! Which sources the INT sink takes telemetry reports from: an allow-list of address prefixes
//! (`10.0.0.0/8`, `2001:db8::/32`, or one address). An empty list allows every source (the
//! sink listens on loopback unless told otherwise); a non-empty one allows a source when any
//! prefix contains it, an IPv4-mapped IPv6 source counting as its IPv4 address.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// An address prefix: the first `len` bits of `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    /// `addr/len`; `len` at most 32 (IPv4) or 128 (IPv6).
    pub fn new(addr: IpAddr, len: u8) -> Result<Prefix, String> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if len > max {
            return Err(format!("prefix length {len} of {addr} is above {max}"));
        }
        Ok(Prefix { addr, len })
    }

    /// Whether `ip` starts with this prefix (same family; IPv4-mapped IPv6 as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let bits = |a: IpAddr| -> u128 {
            match a {
                IpAddr::V4(a) => u128::from(u32::from(a)) << 96,
                IpAddr::V6(a) => u128::from(a),
            }
        };
        if ip.is_ipv4() != self.addr.is_ipv4() {
            return false;
        }
        let mask = u128::MAX
            .checked_shl(128 - u32::from(self.len))
            .unwrap_or(0);
        bits(ip) & mask == bits(self.addr) & mask
    }
}

impl FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Prefix, String> {
        let bad = |why: &str| format!("bad prefix {s:?}: {why} (want ADDR/LEN or ADDR)");
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().map_err(|_| bad("not an IP address"))?;
        let len = match l {
            Some(l) => l.parse().map_err(|_| bad("not a prefix length"))?,
            None if addr.is_ipv4() => 32,
            None => 128,
        };
        Prefix::new(addr, len).map_err(|e| bad(&e))
    }
}

impl TryFrom<String> for Prefix {
    type Error = String;
    fn try_from(s: String) -> Result<Prefix, String> {
        s.parse()
    }
}

impl From<Prefix> for String {
    fn from(p: Prefix) -> String {
        p.to_string()
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// Whether `allow` admits `ip`: empty admits everything, else some prefix contains it.
pub fn allowed(allow: &[Prefix], ip: IpAddr) -> bool {
    allow.is_empty() || allow.iter().any(|p| p.contains(ip))
}

/// Why a source's datagram was dropped before parsing; counted per variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceReject {
    /// The source address is outside the allow-list.
    NotAllowed,
}

impl SourceReject {
    /// Every reason, in counter order.
    pub const ALL: [SourceReject; 1] = [SourceReject::NotAllowed];

    /// The counter name.
    pub fn reason(self) -> &'static str {
        match self {
            SourceReject::NotAllowed => "not_allowed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_contain_what_they_should() {
        let p: Prefix = "10.1.0.0/16".parse().unwrap();
        assert!(p.contains(ip("10.1.255.3")));
        assert!(p.contains(ip("::ffff:10.1.0.9")));
        assert!(!p.contains(ip("10.2.0.1")));
        assert!(!p.contains(ip("::1")));
        let all: Prefix = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("192.0.2.1")) && !all.contains(ip("2001:db8::1")));
        let one: Prefix = "127.0.0.1".parse().unwrap();
        assert_eq!(one.to_string(), "127.0.0.1/32");
        assert!(one.contains(ip("127.0.0.1")) && !one.contains(ip("127.0.0.2")));
        let v6: Prefix = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:1::5")) && !v6.contains(ip("2001:db9::5")));
    }

    #[test]
    fn bad_prefixes_are_errors_with_a_message() {
        for s in ["10.0.0.0/33", "::/129", "10.0.0/8", "10.0.0.0/x", ""] {
            let e = s.parse::<Prefix>().unwrap_err();
            assert!(e.contains("bad prefix"), "{s}: {e}");
        }
    }

    #[test]
    fn empty_allows_all_else_only_the_listed() {
        assert!(allowed(&[], ip("203.0.113.7")));
        let l: Vec<Prefix> = vec!["10.0.0.0/8".parse().unwrap(), "::1".parse().unwrap()];
        assert!(allowed(&l, ip("10.9.9.9")) && allowed(&l, ip("::1")));
        assert!(!allowed(&l, ip("127.0.0.1")));
    }
}
