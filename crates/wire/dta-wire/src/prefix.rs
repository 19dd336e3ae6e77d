//! Address prefixes (CIDR, IPv4 and IPv6) and allow-lists of them: who may send to a DTA
//! receiver. The translator and the INT sink take a datagram only from a source inside their
//! allow-list; everything else is dropped before it is parsed.
//!
//! Kept by hand (a mask compare) rather than a CIDR crate: the same prefixes are compiled into
//! the XDP programs' LPM tries (`bpf/allow.h`), so their parsing and matching rules must be
//! this crate's, with the IPv4-mapped IPv6 rule below, in one place both sides read.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An address prefix: `addr/len`. A bare address is a host prefix (`/32`, `/128`).
/// IPv4-mapped IPv6 sources (`::ffff:a.b.c.d`, as a dual-stack socket reports IPv4 peers) are
/// matched as the IPv4 address they carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

/// A prefix string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad address prefix {text:?}: {why}")]
pub struct PrefixError {
    text: String,
    why: &'static str,
}

impl Prefix {
    /// `addr/len`, with the host bits cleared; `None` if `len` exceeds the address width.
    pub fn new(addr: IpAddr, len: u8) -> Option<Prefix> {
        let width = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        (len <= width).then(|| Prefix {
            addr: mask(addr, len),
            len,
        })
    }

    /// The network address (host bits zero).
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length in bits.
    pub fn len(&self) -> u8 {
        self.len
    }

    /// True for `/0` (every address of its family).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `ip` is inside this prefix (same family; IPv4-mapped IPv6 counts as IPv4).
    #[inline]
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match (self.addr, ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
                mask(ip, self.len) == self.addr
            }
            _ => false,
        }
    }
}

/// `ip` as IPv4 if it is IPv4-mapped IPv6.
#[inline]
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

#[inline]
fn mask(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - len as u32).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - len as u32).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

impl FromStr for Prefix {
    type Err = PrefixError;

    fn from_str(s: &str) -> Result<Prefix, PrefixError> {
        let err = |why| PrefixError {
            text: s.into(),
            why,
        };
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.trim().parse().map_err(|_| err("not an IP address"))?;
        let width = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => width,
            Some(l) => l.trim().parse().map_err(|_| err("length not a number"))?,
        };
        if len > width {
            return Err(err("length beyond the address width"));
        }
        let p = Prefix::new(addr, len).ok_or(err("length beyond the address width"))?;
        if p.addr != addr {
            return Err(err("host bits set (write the network address)"));
        }
        Ok(p)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl serde::Serialize for Prefix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Prefix {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Prefix, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Most prefixes an allow-list holds: a source is matched against each in turn, and the XDP
/// programs hold the list in an LPM trie of this many entries (crates/engines/dta-xdp/build.rs reads
/// this line).
pub const MAX_PREFIXES: usize = 1024;

/// A set of prefixes a source must fall in. An empty list allows nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct AllowList(Vec<Prefix>);

impl AllowList {
    /// The list of `prefixes`.
    pub fn new(prefixes: Vec<Prefix>) -> AllowList {
        AllowList(prefixes)
    }

    /// Loopback only: `127.0.0.0/8` and `::1/128`.
    pub fn loopback() -> AllowList {
        AllowList(vec![
            Prefix::new(IpAddr::from([127, 0, 0, 0]), 8).expect("/8 fits IPv4"),
            Prefix::new(std::net::Ipv6Addr::LOCALHOST.into(), 128).expect("/128 fits IPv6"),
        ])
    }

    /// Every address, IPv4 and IPv6.
    pub fn any() -> AllowList {
        AllowList(vec![
            Prefix::new(IpAddr::from([0, 0, 0, 0]), 0).expect("/0"),
            Prefix::new(std::net::Ipv6Addr::UNSPECIFIED.into(), 0).expect("/0"),
        ])
    }

    /// [`MAX_PREFIXES`] at most; the message names the setting.
    pub fn validate(&self, setting: &str) -> Result<(), String> {
        if self.0.len() > MAX_PREFIXES {
            return Err(format!(
                "{setting}: {} prefixes, at most {MAX_PREFIXES}",
                self.0.len()
            ));
        }
        Ok(())
    }

    /// The prefixes.
    pub fn prefixes(&self) -> &[Prefix] {
        &self.0
    }

    /// Whether `ip` is inside one of the prefixes.
    #[inline]
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|p| p.contains(ip))
    }
}

impl fmt::Display for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn parses_cidr_and_host_prefixes_and_rejects_the_rest() {
        assert_eq!(
            "10.1.0.0/16".parse::<Prefix>().unwrap().to_string(),
            "10.1.0.0/16"
        );
        assert_eq!("127.0.0.1".parse::<Prefix>().unwrap().len(), 32);
        assert_eq!("::1".parse::<Prefix>().unwrap().len(), 128);
        assert_eq!(
            "fd00::/8".parse::<Prefix>().unwrap().to_string(),
            "fd00::/8"
        );
        for bad in [
            "10.0.0.0/33",
            "::/129",
            "10.0.0.1/8",
            "nope/8",
            "10.0.0.0/x",
            "",
        ] {
            assert!(bad.parse::<Prefix>().is_err(), "{bad}");
        }
    }

    #[test]
    fn contains_by_family_and_length() {
        let p: Prefix = "127.0.0.1/32".parse().unwrap();
        assert!(p.contains(ip("127.0.0.1")));
        assert!(!p.contains(ip("127.0.0.2")));
        assert!(p.contains(ip("::ffff:127.0.0.1")), "IPv4-mapped is IPv4");
        let n: Prefix = "10.128.0.0/9".parse().unwrap();
        assert!(n.contains(ip("10.255.1.1")));
        assert!(!n.contains(ip("10.127.1.1")));
        let v6: Prefix = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:ffff::1")));
        assert!(!v6.contains(ip("2001:db9::1")));
        assert!(!v6.contains(ip("10.0.0.1")), "families never match");
        let all4: Prefix = "0.0.0.0/0".parse().unwrap();
        assert!(all4.contains(ip("1.2.3.4")) && !all4.contains(ip("::2")));
    }

    #[test]
    fn allow_lists() {
        let l = AllowList::loopback();
        assert!(l.allows(ip("127.9.9.9")) && l.allows(ip("::1")));
        assert!(!l.allows(ip("10.0.0.1")) && !l.allows(ip("::2")));
        assert!(
            !AllowList::default().allows(ip("127.0.0.1")),
            "empty allows nothing"
        );
        assert!(AllowList::any().allows(ip("8.8.8.8")) && AllowList::any().allows(ip("::2")));
    }
}
