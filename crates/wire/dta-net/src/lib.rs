//! The network headers every other dta crate carries its protocols in, written once: Ethernet II
//! with up to two 802.1Q / 802.1ad VLAN tags ([`ethernet`]), IPv4 with its header checksum
//! ([`ipv4`], [RFC 791]), the IPv6 fixed header ([`ipv6`]), UDP with its pseudo-header checksum
//! over IPv4 or IPv6 ([`udp`], [RFC 768]) and TCP ([`tcp`]), all as zero-copy views in smoltcp's
//! `wire` style (`Packet<T: AsRef<[u8]>>` with checked accessors; `Repr`s with
//! `parse`/`emit`/`buffer_len` for Ethernet, IPv4 and UDP), one Internet checksum
//! ([`checksum`], RFC 1071), a builder of whole Ethernet/IPv4/UDP frames around a payload
//! ([`udp_frame`], [`ipv4_udp_packet`]), and, on Linux, the namespace's interfaces with their
//! receive drop counters ([`iface`]) and one `AF_PACKET` raw socket bound to an interface
//! ([`raw`]) that sends single frames or batches (`sendmmsg`) and receives with a timeout. Parsing never allocates and never panics; each rejection is one [`Error`]. The
//! protocols on top (DTA, RoCEv2, INT) know nothing of these byte offsets and this crate knows
//! nothing of them.
//!
//! ```
//! use dta_net::{ethernet, ipv4, udp, udp_frame};
//!
//! let eth = ethernet::Repr { dst: [2, 0, 0, 0, 0, 2], src: [2, 0, 0, 0, 0, 1], ..Default::default() };
//! let ip = ipv4::Repr { src: [10, 0, 0, 1], dst: [10, 0, 0, 2], ..Default::default() };
//! let u = udp::Repr { src_port: 40000, dst_port: 40040, checksum: 0 };
//! let frame = udp_frame(&eth, &ip, &u, b"hello").unwrap();
//! assert_eq!(frame.len(), 14 + 20 + 8 + 5);
//! let (ip2, total) = ipv4::Repr::parse(&frame[ethernet::HEADER_LEN..]).unwrap();
//! assert_eq!((ip2, total), (ip, 33));
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(target_os = "linux")]
pub mod cbpf;
pub mod checksum;
pub mod ethernet;
#[cfg(target_os = "linux")]
pub mod iface;
pub mod ipv4;
pub mod ipv6;
#[cfg(target_os = "linux")]
pub mod mmsg;
pub mod port_owner;
#[cfg(target_os = "linux")]
pub mod raw;
pub mod tcp;
pub mod udp;

/// IP protocol number of TCP.
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;

/// Why a header was rejected (or, when emitting, could not be written). [`Error::reason`] is a
/// counter name; protocol crates map these onto their own reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Error {
    /// The buffer ends inside a header (or, when emitting, is too short for it).
    #[error("truncated: the buffer ends inside a header")]
    Truncated,
    /// More VLAN tags than [`ethernet::MAX_VLAN_TAGS`].
    #[error("more than two VLAN tags")]
    TooManyVlanTags,
    /// The IP version nibble is not the one expected (4 or 6).
    #[error("bad IP version")]
    BadIpVersion,
    /// IPv4 IHL below 5 words.
    #[error("IPv4 header length below 20 bytes")]
    BadIpHeaderLen,
    /// IPv4 header with options where a `Repr` (which has none) is parsed.
    #[error("IPv4 header with options")]
    Ipv4Options,
    /// IPv4 fragment (More Fragments set or a non-zero offset) where a `Repr` is parsed.
    #[error("IPv4 fragment")]
    Ipv4Fragment,
    /// The IPv4 header checksum does not verify.
    #[error("bad IPv4 header checksum")]
    BadIpChecksum,
    /// TCP data offset below 5 words.
    #[error("TCP header length below 20 bytes")]
    BadTcpHeaderLen,
    /// Emitting: the lengths do not fit the 16-bit length fields.
    #[error("too long for the length field")]
    TooLong,
    /// Not a UDP datagram over IPv4 or IPv6 (another EtherType or IP protocol).
    #[error("not a UDP datagram over IP")]
    NotUdp,
}

impl Error {
    /// Every error.
    pub const ALL: [Error; 10] = [
        Error::Truncated,
        Error::TooManyVlanTags,
        Error::BadIpVersion,
        Error::BadIpHeaderLen,
        Error::Ipv4Options,
        Error::Ipv4Fragment,
        Error::BadIpChecksum,
        Error::BadTcpHeaderLen,
        Error::TooLong,
        Error::NotUdp,
    ];

    /// The snake_case counter name.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Truncated => "truncated",
            Error::TooManyVlanTags => "too_many_vlan_tags",
            Error::BadIpVersion => "bad_ip_version",
            Error::BadIpHeaderLen => "bad_ip_header_len",
            Error::Ipv4Options => "ipv4_options",
            Error::Ipv4Fragment => "ipv4_fragment",
            Error::BadIpChecksum => "bad_ip_checksum",
            Error::BadTcpHeaderLen => "bad_tcp_header_len",
            Error::TooLong => "too_long",
            Error::NotUdp => "not_udp",
        }
    }
}

/// The UDP datagram an Ethernet frame carries (VLAN tags stepped over; IPv4 without options and
/// not a fragment, or IPv6 with UDP as its next header): its source, its destination and its
/// payload, trimmed to the lengths the IP and UDP headers give (a short frame's padding is not
/// payload). The UDP checksum is not verified: a frame read below the stack (AF_XDP) may carry
/// a partial one the sending host's offload never completed, as an XDP program sees it; the
/// payload's own format is checked by whoever parses it.
pub fn udp_datagram(
    frame: &[u8],
) -> Result<(std::net::SocketAddr, std::net::SocketAddr, &[u8]), Error> {
    use std::net::{IpAddr, Ipv6Addr, SocketAddr};
    let (ethertype, l3) = ethernet::Packet::new_checked(frame)?.untagged_payload()?;
    let (src, dst, l4) = match ethertype {
        ethernet::ETHERTYPE_IPV4 => {
            let (ip, total) = ipv4::Repr::parse(l3)?;
            if ip.protocol != IPPROTO_UDP {
                return Err(Error::NotUdp);
            }
            let end = usize::from(total).min(l3.len());
            if end < ipv4::HEADER_LEN {
                return Err(Error::Truncated);
            }
            (
                IpAddr::from(ip.src),
                IpAddr::from(ip.dst),
                &l3[ipv4::HEADER_LEN..end],
            )
        }
        ethernet::ETHERTYPE_IPV6 => {
            let p = ipv6::Packet::new_checked(l3)?;
            if p.next_header() != IPPROTO_UDP {
                return Err(Error::NotUdp);
            }
            (
                IpAddr::from(Ipv6Addr::from(p.src())),
                IpAddr::from(Ipv6Addr::from(p.dst())),
                p.into_payload(),
            )
        }
        _ => return Err(Error::NotUdp),
    };
    let (u, len) = udp::Repr::parse(l4)?;
    let len = usize::from(len);
    if len < udp::HEADER_LEN || len > l4.len() {
        return Err(Error::Truncated);
    }
    Ok((
        SocketAddr::new(src, u.src_port),
        SocketAddr::new(dst, u.dst_port),
        &l4[udp::HEADER_LEN..len],
    ))
}

/// Ethernet II + IPv4 + UDP header bytes in front of a payload (no VLAN tag, no IP options).
pub const UDP_FRAME_OVERHEAD: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;

/// Write an Ethernet/IPv4/UDP frame carrying `payload` into `buf`: EtherType IPv4 (whatever
/// `eth.ethertype` says), IPv4 protocol UDP (whatever `ip.protocol` says), total and UDP lengths
/// computed, the IPv4 header checksum filled and the UDP checksum as `udp.checksum` says.
/// Returns the frame length.
pub fn emit_udp_frame(
    buf: &mut [u8],
    eth: &ethernet::Repr,
    ip: &ipv4::Repr,
    udp: &udp::Repr,
    payload: &[u8],
) -> Result<usize, Error> {
    let n = UDP_FRAME_OVERHEAD + payload.len();
    if buf.len() < n {
        return Err(Error::Truncated);
    }
    let eth = ethernet::Repr {
        ethertype: ethernet::ETHERTYPE_IPV4,
        ..*eth
    };
    eth.emit(buf)?;
    emit_ipv4_udp(&mut buf[ethernet::HEADER_LEN..n], ip, udp, payload)?;
    Ok(n)
}

fn emit_ipv4_udp(
    buf: &mut [u8],
    ip: &ipv4::Repr,
    udp: &udp::Repr,
    payload: &[u8],
) -> Result<usize, Error> {
    let ip = ipv4::Repr {
        protocol: IPPROTO_UDP,
        ..*ip
    };
    let n = ipv4::HEADER_LEN + udp::HEADER_LEN + payload.len();
    if buf.len() < n {
        return Err(Error::Truncated);
    }
    ip.emit(buf, udp::HEADER_LEN + payload.len())?;
    udp.emit(&mut buf[ipv4::HEADER_LEN..], payload.len())?;
    buf[ipv4::HEADER_LEN + udp::HEADER_LEN..n].copy_from_slice(payload);
    Ok(n)
}

/// [`emit_udp_frame`] into a new vector of exactly the frame's length.
pub fn udp_frame(
    eth: &ethernet::Repr,
    ip: &ipv4::Repr,
    udp: &udp::Repr,
    payload: &[u8],
) -> Result<Vec<u8>, Error> {
    let mut f = vec![0u8; UDP_FRAME_OVERHEAD + payload.len()];
    emit_udp_frame(&mut f, eth, ip, udp, payload)?;
    Ok(f)
}

/// [`udp_frame`] from `src` to `dst` with the default IPv4 header (DF set, TTL 64, DSCP 0,
/// identification 0) and UDP checksum 0: what a sender of prebuilt frames needs.
pub fn udp_frame_between(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: std::net::SocketAddrV4,
    dst: std::net::SocketAddrV4,
    payload: &[u8],
) -> Result<Vec<u8>, Error> {
    let eth = ethernet::Repr {
        dst: dst_mac,
        src: src_mac,
        ethertype: ethernet::ETHERTYPE_IPV4,
    };
    let ip = ipv4::Repr {
        src: src.ip().octets(),
        dst: dst.ip().octets(),
        ..ipv4::Repr::default()
    };
    let u = udp::Repr {
        src_port: src.port(),
        dst_port: dst.port(),
        checksum: 0,
    };
    udp_frame(&eth, &ip, &u, payload)
}

/// An IPv4/UDP packet (no Ethernet header) carrying `payload`, as [`emit_udp_frame`] writes it
/// after the Ethernet header.
pub fn ipv4_udp_packet(ip: &ipv4::Repr, udp: &udp::Repr, payload: &[u8]) -> Result<Vec<u8>, Error> {
    let mut p = vec![0u8; ipv4::HEADER_LEN + udp::HEADER_LEN + payload.len()];
    emit_ipv4_udp(&mut p, ip, udp, payload)?;
    Ok(p)
}

/// The smoltcp-style `Packet<T>` wrapper of a header module, for every wire crate (`dta-net`'s
/// headers, `dta-roce`'s): the struct and its constructors, with `$err`'s `Truncated` for a
/// short buffer. With a length, also `check_len` for a fixed-length header (otherwise the module
/// writes its own: options, versions); with `payload`, also the bytes after a fixed header
/// (without a doc: a view of the header of the module it is invoked in).
#[macro_export]
macro_rules! packet_view {
    ($err:ty, $len:expr, payload) => {
        $crate::packet_view!(
            "A zero-copy view of this module's header and the bytes after it.",
            $err,
            $len,
            payload
        );
    };
    ($doc:literal, $err:ty, $len:expr, payload) => {
        $crate::packet_view!($doc, $err, $len);

        impl<T: AsRef<[u8]>> Packet<T> {
            /// The bytes after the header.
            pub fn payload(&self) -> &[u8] {
                &self.buffer.as_ref()[$len..]
            }
        }
    };
    ($doc:literal, $err:ty, $len:expr) => {
        $crate::packet_view!($doc, $err);

        impl<T: AsRef<[u8]>> Packet<T> {
            /// `Truncated` if the buffer is shorter than the header.
            pub fn check_len(&self) -> Result<(), $err> {
                if self.buffer.as_ref().len() < $len {
                    Err(<$err>::Truncated)
                } else {
                    Ok(())
                }
            }
        }
    };
    ($doc:literal, $err:ty) => {
        #[doc = $doc]
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Packet<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Wrap a buffer without checks; accessors panic on a buffer shorter than the
            /// header.
            pub const fn new_unchecked(buffer: T) -> Packet<T> {
                Packet { buffer }
            }

            /// Wrap a buffer, checking it as [`Packet::check_len`] says.
            pub fn new_checked(buffer: T) -> Result<Packet<T>, $err> {
                let p = Packet::new_unchecked(buffer);
                p.check_len()?;
                Ok(p)
            }

            /// The underlying buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}

/// Big-endian fields (network byte order) read from and written to the start of a slice: the
/// one reader of every wire crate. Each panics on a slice shorter than the field, as the
/// `Packet<T>` accessors' callers have checked the length first.
pub mod be {
    /// The 16-bit field at the start of `b`.
    #[inline]
    pub fn rd16(b: &[u8]) -> u16 {
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The 24-bit field at the start of `b`.
    #[inline]
    pub fn rd24(b: &[u8]) -> u32 {
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }

    /// The 32-bit field at the start of `b`.
    #[inline]
    pub fn rd32(b: &[u8]) -> u32 {
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The 64-bit field at the start of `b`.
    #[inline]
    pub fn rd64(b: &[u8]) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        u64::from_be_bytes(a)
    }

    /// Write `v` as the 16-bit field at the start of `b`.
    #[inline]
    pub fn wr16(b: &mut [u8], v: u16) {
        b[..2].copy_from_slice(&v.to_be_bytes());
    }

    /// Write the low 24 bits of `v` at the start of `b`.
    #[inline]
    pub fn wr24(b: &mut [u8], v: u32) {
        b[..3].copy_from_slice(&v.to_be_bytes()[1..]);
    }

    /// Write `v` as the 32-bit field at the start of `b`.
    #[inline]
    pub fn wr32(b: &mut [u8], v: u32) {
        b[..4].copy_from_slice(&v.to_be_bytes());
    }

    /// Write `v` as the 64-bit field at the start of `b`.
    #[inline]
    pub fn wr64(b: &mut [u8], v: u64) {
        b[..8].copy_from_slice(&v.to_be_bytes());
    }
}
pub(crate) use be::{rd16, wr16};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_reasons_distinct() {
        for (i, e) in Error::ALL.iter().enumerate() {
            for f in &Error::ALL[i + 1..] {
                assert_ne!(e.reason(), f.reason());
            }
        }
    }

    #[test]
    fn a_frame_gives_its_udp_datagram_trimmed_to_its_lengths() {
        let src: std::net::SocketAddrV4 = "10.0.0.1:4000".parse().unwrap();
        let dst: std::net::SocketAddrV4 = "10.0.0.2:40040".parse().unwrap();
        let mut f = udp_frame_between([2; 6], [4; 6], src, dst, b"abc").unwrap();
        // Ethernet pads a short frame to 60 bytes: padding is not payload.
        f.resize(60, 0xee);
        let (s, d, p) = udp_datagram(&f).unwrap();
        assert_eq!((s, d, p), (src.into(), dst.into(), &b"abc"[..]));
        // Behind a VLAN tag.
        let mut tagged = f[..12].to_vec();
        tagged.extend([0x81, 0x00, 0x00, 0x05]);
        tagged.extend(&f[12..]);
        assert_eq!(udp_datagram(&tagged).unwrap().2, b"abc");
        // IPv6.
        let mut v6 = f[..12].to_vec();
        v6.extend(ethernet::ETHERTYPE_IPV6.to_be_bytes());
        let mut h = [0u8; 40];
        h[0] = 0x60;
        h[4..6].copy_from_slice(&11u16.to_be_bytes());
        h[6] = IPPROTO_UDP;
        h[23] = 1;
        h[39] = 2;
        v6.extend(h);
        v6.extend([0x0f, 0xa0, 0x9c, 0x68, 0, 11, 0, 0, b'x', b'y', b'z']);
        let (s, d, p) = udp_datagram(&v6).unwrap();
        assert_eq!(
            (s.to_string(), d.to_string(), p),
            ("[::1]:4000".into(), "[::2]:40040".into(), &b"xyz"[..])
        );
        // Truncated, a UDP length beyond the packet, not IP.
        assert_eq!(udp_datagram(&f[..20]), Err(Error::Truncated));
        let mut long = f.clone();
        long[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(udp_datagram(&long), Err(Error::Truncated));
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(udp_datagram(&arp), Err(Error::NotUdp));
    }

    #[test]
    fn udp_frame_layout_by_hand() {
        let eth = ethernet::Repr {
            dst: [2, 0, 0, 0, 0, 1],
            src: [2, 0, 0, 0, 0, 2],
            ethertype: 0x1234, // overridden: the frame carries IPv4
        };
        let ip = ipv4::Repr {
            src: [10, 1, 2, 3],
            dst: [10, 1, 2, 4],
            protocol: 6, // overridden: UDP
            ..Default::default()
        };
        let u = udp::Repr {
            src_port: 5000,
            dst_port: 40040,
            checksum: 0,
        };
        let f = udp_frame(&eth, &ip, &u, &[1, 2, 3, 4, 5]).unwrap();
        assert_eq!(f.len(), UDP_FRAME_OVERHEAD + 5);
        assert_eq!(&f[0..14], &[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00]);
        // Checksum by hand: 4500+0021+0000+4000+4011+0a01+0203+0a01+0204 = 0xdd3b (no carry),
        // complement 0x22c4.
        assert_eq!(
            &f[14..34],
            &[0x45, 0, 0, 0x21, 0, 0, 0x40, 0, 64, 17, 0x22, 0xc4, 10, 1, 2, 3, 10, 1, 2, 4]
        );
        assert_eq!(&f[34..42], &[0x13, 0x88, 0x9c, 0x68, 0, 13, 0, 0]);
        assert_eq!(&f[42..], &[1, 2, 3, 4, 5]);
        let mut short = [0u8; 46];
        assert_eq!(
            emit_udp_frame(&mut short, &eth, &ip, &u, &[1, 2, 3, 4, 5]),
            Err(Error::Truncated)
        );
        assert_eq!(
            udp_frame(&eth, &ip, &u, &vec![0; 65_536]),
            Err(Error::TooLong)
        );
        let p = ipv4_udp_packet(&ip, &u, &[1, 2, 3, 4, 5]).unwrap();
        assert_eq!(&p[..], &f[14..]);
        let g = udp_frame_between(
            [2, 0, 0, 0, 0, 2],
            [2, 0, 0, 0, 0, 1],
            "10.1.2.3:5000".parse().unwrap(),
            "10.1.2.4:40040".parse().unwrap(),
            &[1, 2, 3, 4, 5],
        )
        .unwrap();
        assert_eq!(g, f);
    }
}
