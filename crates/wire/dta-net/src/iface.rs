//! The network interfaces of the calling thread's namespace as `getifaddrs(3)` lists them: the
//! interfaces an address receives on ([`receiving`]), an interface's first IPv4 address
//! ([`ipv4_of`]), and the frames the kernel dropped on receive there before any socket or XDP
//! program of ours saw them ([`RxDrops`]).
//!
//! glibc's `getifaddrs` asks the kernel over netlink, so it answers for the namespace the
//! calling thread is in (unlike `/sys/class/net`, which shows the namespace sysfs was mounted
//! in). The counters it gives are `struct rtnl_link_stats` (linux/if_link.h): 32 bits each, so a
//! difference is taken modulo 2^32 ([`RxDrops::since`]).

#![allow(unsafe_code)]

use std::ffi::CStr;
use std::io;
use std::net::IpAddr;

/// The most interfaces [`receiving`] names (a wildcard address on a host with more gives the
/// first ones, by name).
pub const MAX_INTERFACES: usize = 64;

/// Frames an interface dropped on receive, as the kernel counts them (`struct
/// rtnl_link_stats`; what each means is documented in linux/if_link.h and
/// Documentation/networking/statistics.rst).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxDrops {
    /// `rx_dropped`: received but dropped by the stack or the driver (no buffer, a full
    /// queue between the driver and the stack, an XDP ring full on a veth).
    pub dropped: u32,
    /// `rx_missed_errors`: missed by the host, the device's receive ring being full.
    pub missed: u32,
    /// `rx_fifo_errors`: the device's receive FIFO overflowed.
    pub fifo: u32,
    /// `rx_over_errors`: the device ran out of receive buffers.
    pub over: u32,
}

impl RxDrops {
    /// The counters by the reason label `/metrics` gives them.
    pub fn by_reason(&self) -> [(&'static str, u32); 4] {
        [
            ("dropped", self.dropped),
            ("missed", self.missed),
            ("fifo", self.fifo),
            ("over", self.over),
        ]
    }

    /// All of them.
    pub fn total(&self) -> u64 {
        self.by_reason().iter().map(|(_, n)| u64::from(*n)).sum()
    }

    /// What was counted after `base` was read (modulo 2^32 per counter: right across one wrap).
    pub fn since(&self, base: &RxDrops) -> RxDrops {
        RxDrops {
            dropped: self.dropped.wrapping_sub(base.dropped),
            missed: self.missed.wrapping_sub(base.missed),
            fifo: self.fifo.wrapping_sub(base.fifo),
            over: self.over.wrapping_sub(base.over),
        }
    }

    /// Interface `name`'s counters now.
    pub fn read(name: &str) -> io::Result<RxDrops> {
        check_name(name)?;
        Self::read_each(&[name])?.remove(0).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface {name} in this network namespace"),
            )
        })
    }

    /// The counters of each of `names` now, in their order (`None`: no such interface), from
    /// one listing of the namespace's interfaces.
    pub fn read_each(names: &[&str]) -> io::Result<Vec<Option<RxDrops>>> {
        let mut found = vec![None; names.len()];
        each(|e| {
            if let Some(d) = e.drops {
                for (n, f) in names.iter().zip(found.iter_mut()) {
                    if e.name == n.as_bytes() {
                        *f = Some(d);
                    }
                }
            }
        })?;
        Ok(found)
    }
}

/// Refuse what cannot be an interface name (empty, longer than `IFNAMSIZ - 1`, a NUL, `/` or
/// white space), before it is looked up.
pub fn check_name(name: &str) -> io::Result<()> {
    let b = name.as_bytes();
    let bad = b.is_empty()
        || b.len() >= libc::IFNAMSIZ
        || b.iter()
            .any(|c| *c == 0 || *c == b'/' || c.is_ascii_whitespace());
    if bad {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {name:?}"),
        ));
    }
    Ok(())
}

/// The interfaces a socket bound to `addr` receives on, sorted by name, at most
/// [`MAX_INTERFACES`]: those holding the address, or for a wildcard address every interface that
/// is up.
pub fn receiving(addr: IpAddr) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    each(|e| {
        let wanted = if addr.is_unspecified() {
            e.up && e.drops.is_some()
        } else {
            e.addr == Some(addr)
        };
        if wanted {
            names.push(String::from_utf8_lossy(e.name).into_owned());
        }
    })?;
    names.sort();
    names.dedup();
    names.truncate(MAX_INTERFACES);
    Ok(names)
}

/// The first IPv4 address of interface `name`.
pub fn ipv4_of(name: &str) -> io::Result<[u8; 4]> {
    check_name(name)?;
    let mut found = None;
    each(|e| {
        if let (None, Some(IpAddr::V4(a))) = (found, e.addr) {
            if e.name == name.as_bytes() {
                found = Some(a.octets());
            }
        }
    })?;
    found.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("interface {name} has no IPv4 address (give one with --ip)"),
        )
    })
}

/// One entry of the list `getifaddrs` gives: an interface with one of its addresses, or (family
/// `AF_PACKET`) with its counters.
struct Entry<'a> {
    name: &'a [u8],
    up: bool,
    addr: Option<IpAddr>,
    drops: Option<RxDrops>,
}

/// Call `f` on every entry of `getifaddrs`.
fn each(mut f: impl FnMut(&Entry<'_>)) -> io::Result<()> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs hands us a list we free with freeifaddrs below; we only read through
    // it, and no reference into it outlives this function (`Entry` borrows for the call of `f`).
    unsafe {
        if libc::getifaddrs(&mut head) != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut p = head;
        while !p.is_null() {
            let a = &*p;
            p = a.ifa_next;
            if a.ifa_name.is_null() {
                continue;
            }
            let family = if a.ifa_addr.is_null() {
                None
            } else {
                Some(i32::from((*a.ifa_addr).sa_family))
            };
            let addr = match family {
                Some(libc::AF_INET) => {
                    let s = &*(a.ifa_addr as *const libc::sockaddr_in);
                    Some(IpAddr::from(u32::from_be(s.sin_addr.s_addr).to_be_bytes()))
                }
                Some(libc::AF_INET6) => {
                    let s = &*(a.ifa_addr as *const libc::sockaddr_in6);
                    Some(IpAddr::from(s.sin6_addr.s6_addr))
                }
                _ => None,
            };
            // glibc gives an AF_PACKET entry's ifa_data as its struct rtnl_link_stats.
            let drops = (family == Some(libc::AF_PACKET) && !a.ifa_data.is_null()).then(|| {
                let s = &*(a.ifa_data as *const LinkStats);
                RxDrops {
                    dropped: s.rx_dropped,
                    missed: s.rx_missed_errors,
                    fifo: s.rx_fifo_errors,
                    over: s.rx_over_errors,
                }
            });
            f(&Entry {
                name: CStr::from_ptr(a.ifa_name).to_bytes(),
                up: a.ifa_flags & libc::IFF_UP as u32 != 0,
                addr,
                drops,
            });
        }
        libc::freeifaddrs(head);
    }
    Ok(())
}

/// `struct rtnl_link_stats` (linux/if_link.h), up to the last counter read here.
#[repr(C)]
struct LinkStats {
    rx_packets: u32,
    tx_packets: u32,
    rx_bytes: u32,
    tx_bytes: u32,
    rx_errors: u32,
    tx_errors: u32,
    rx_dropped: u32,
    tx_dropped: u32,
    multicast: u32,
    collisions: u32,
    rx_length_errors: u32,
    rx_over_errors: u32,
    rx_crc_errors: u32,
    rx_frame_errors: u32,
    rx_fifo_errors: u32,
    rx_missed_errors: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_receives_its_address_and_has_counters() {
        assert_eq!(receiving("127.0.0.1".parse().unwrap()).unwrap(), ["lo"]);
        let all = receiving("0.0.0.0".parse().unwrap()).unwrap();
        assert!(all.iter().any(|n| n == "lo"), "{all:?}");
        assert!(all.len() <= MAX_INTERFACES);
        RxDrops::read("lo").unwrap();
        let each = RxDrops::read_each(&["dta-none0", "lo"]).unwrap();
        assert!(each[0].is_none() && each[1].is_some(), "{each:?}");
        assert_eq!(ipv4_of("lo").unwrap(), [127, 0, 0, 1]);
    }

    #[test]
    fn an_address_no_interface_holds_receives_nowhere() {
        assert!(receiving("192.0.2.77".parse().unwrap()).unwrap().is_empty());
    }

    #[test]
    fn hostile_and_missing_names_are_errors() {
        for bad in ["", "../etc", "a b", "x\0", "sixteen-chars-xx"] {
            assert_eq!(
                RxDrops::read(bad).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
        assert_eq!(
            RxDrops::read("dta-none0").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert!(ipv4_of("dta-none0").is_err());
    }

    #[test]
    fn differences_are_taken_modulo_two_to_the_32() {
        let base = RxDrops {
            dropped: u32::MAX - 1,
            missed: 5,
            fifo: 0,
            over: 7,
        };
        let now = RxDrops {
            dropped: 3,
            missed: 9,
            fifo: 0,
            over: 7,
        };
        let d = now.since(&base);
        assert_eq!((d.dropped, d.missed, d.fifo, d.over), (5, 4, 0, 0));
        assert_eq!(d.total(), 9);
    }
}
