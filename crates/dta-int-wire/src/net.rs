//! Minimal zero-copy views of the outer headers that carry INT (Ethernet with up to two VLAN
//! tags, IPv4, IPv6 without extension headers, UDP, TCP), in smoltcp's `wire` style. Private to
//! `dta_int_wire`'s purpose: finding the INT shim and the flow it belongs to.

use super::Error;
use crate::{be_u16, be_u32};

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType of an 802.1Q VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// EtherType of an 802.1ad (QinQ) service tag.
pub const ETHERTYPE_QINQ: u16 = 0x88a8;
/// IP protocol number of TCP.
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;

/// An Ethernet II frame (IEEE 802.3), optionally with up to two VLAN tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

/// Byte ranges of the Ethernet header.
pub mod eth_field {
    use core::ops::Range;
    /// Destination MAC.
    pub const DST: Range<usize> = 0..6;
    /// Source MAC.
    pub const SRC: Range<usize> = 6..12;
    /// EtherType (or TPID of the first VLAN tag).
    pub const ETHERTYPE: Range<usize> = 12..14;
    /// Length without VLAN tags.
    pub const HEADER_LEN: usize = 14;
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wrap without checks; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wrap, checking the header (and any VLAN tags) is complete.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let f = EthernetFrame::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Check the header and the VLAN tags fit in the buffer.
    pub fn check_len(&self) -> Result<(), Error> {
        self.header_len_checked().map(|_| ())
    }

    fn header_len_checked(&self) -> Result<usize, Error> {
        let b = self.buffer.as_ref();
        let mut off = eth_field::ETHERTYPE.start;
        for _ in 0..3 {
            let t = b.get(off..off + 2).ok_or(Error::Truncated)?;
            let t = be_u16(t);
            if t == ETHERTYPE_VLAN || t == ETHERTYPE_QINQ {
                off += 4;
            } else {
                return Ok(off + 2);
            }
        }
        // A third tag: more than we accept.
        Err(Error::BadL2Header)
    }

    /// Destination MAC.
    pub fn dst(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[eth_field::DST]);
        a
    }

    /// Source MAC.
    pub fn src(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[eth_field::SRC]);
        a
    }

    /// Header length including VLAN tags.
    pub fn header_len(&self) -> usize {
        self.header_len_checked().unwrap_or(eth_field::HEADER_LEN)
    }

    /// The EtherType after any VLAN tags.
    pub fn ethertype(&self) -> u16 {
        let off = self.header_len() - 2;
        be_u16(&self.buffer.as_ref()[off..off + 2])
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// An IPv4 header (RFC 791).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// Byte ranges of the IPv4 header.
pub mod ipv4_field {
    use core::ops::Range;
    /// Version (high nibble) and IHL (low nibble).
    pub const VER_IHL: usize = 0;
    /// DSCP (high 6 bits) and ECN.
    pub const DSCP_ECN: usize = 1;
    /// Total length.
    pub const LENGTH: Range<usize> = 2..4;
    /// Flags and fragment offset.
    pub const FRAG: Range<usize> = 6..8;
    /// Protocol.
    pub const PROTOCOL: usize = 9;
    /// Source address.
    pub const SRC: Range<usize> = 12..16;
    /// Destination address.
    pub const DST: Range<usize> = 16..20;
    /// Minimum header length.
    pub const MIN_LEN: usize = 20;
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wrap without checks.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wrap, checking version 4, IHL >= 5 and that the header (options included) fits.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Ipv4Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// See [`Ipv4Packet::new_checked`].
    pub fn check_len(&self) -> Result<(), Error> {
        let b = self.buffer.as_ref();
        if b.len() < ipv4_field::MIN_LEN {
            return Err(Error::Truncated);
        }
        if b[0] >> 4 != 4 || self.header_len() < ipv4_field::MIN_LEN {
            return Err(Error::BadL3Header);
        }
        if b.len() < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[ipv4_field::VER_IHL] & 0x0f) * 4
    }

    /// DSCP (6 bits).
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[ipv4_field::DSCP_ECN] >> 2
    }

    /// Total length field.
    pub fn total_len(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[ipv4_field::LENGTH])
    }

    /// Fragment offset in 8-byte units (0 for the first or only fragment).
    pub fn frag_offset(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[ipv4_field::FRAG]) & 0x1fff
    }

    /// Protocol.
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[ipv4_field::PROTOCOL]
    }

    /// Source address.
    pub fn src(&self) -> u32 {
        be_u32(&self.buffer.as_ref()[ipv4_field::SRC])
    }

    /// Destination address.
    pub fn dst(&self) -> u32 {
        be_u32(&self.buffer.as_ref()[ipv4_field::DST])
    }

    /// Bytes after the header (bounded by the total length when it is consistent).
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let end = usize::from(self.total_len());
        let end = if end >= self.header_len() && end <= b.len() {
            end
        } else {
            b.len()
        };
        &b[self.header_len()..end]
    }
}

/// An IPv6 fixed header (RFC 8200); extension headers are not followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// Byte ranges of the IPv6 header.
pub mod ipv6_field {
    use core::ops::Range;
    /// Payload length.
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    /// Next header.
    pub const NEXT_HEADER: usize = 6;
    /// Source address.
    pub const SRC: Range<usize> = 8..24;
    /// Destination address.
    pub const DST: Range<usize> = 24..40;
    /// Header length.
    pub const HEADER_LEN: usize = 40;
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wrap without checks.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wrap, checking version 6 and the 40-byte header.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Ipv6Packet::new_unchecked(buffer);
        let b = p.buffer.as_ref();
        if b.len() < ipv6_field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        if b[0] >> 4 != 6 {
            return Err(Error::BadL3Header);
        }
        Ok(p)
    }

    /// Traffic class (8 bits).
    pub fn traffic_class(&self) -> u8 {
        let b = self.buffer.as_ref();
        (b[0] << 4) | (b[1] >> 4)
    }

    /// DSCP: the high 6 bits of the traffic class.
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[ipv6_field::NEXT_HEADER]
    }

    /// Source address.
    pub fn src(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[ipv6_field::SRC]);
        a
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[ipv6_field::DST]);
        a
    }

    /// Bytes after the fixed header (bounded by the payload length when consistent).
    pub fn payload(&self) -> &[u8] {
        let b = &self.buffer.as_ref()[ipv6_field::HEADER_LEN..];
        let n = usize::from(be_u16(&self.buffer.as_ref()[ipv6_field::PAYLOAD_LEN]));
        if n <= b.len() {
            &b[..n]
        } else {
            b
        }
    }
}

/// A UDP header (RFC 768).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

/// Byte ranges of the UDP header.
pub mod udp_field {
    use core::ops::Range;
    /// Source port.
    pub const SRC_PORT: Range<usize> = 0..2;
    /// Destination port.
    pub const DST_PORT: Range<usize> = 2..4;
    /// Length.
    pub const LENGTH: Range<usize> = 4..6;
    /// Header length.
    pub const HEADER_LEN: usize = 8;
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wrap without checks.
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wrap, checking the 8-byte header.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        if buffer.as_ref().len() < udp_field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(UdpPacket { buffer })
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[udp_field::SRC_PORT])
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[udp_field::DST_PORT])
    }

    /// Bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[udp_field::HEADER_LEN..]
    }
}

/// A TCP header (RFC 9293), options included in the header length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

/// Byte ranges of the TCP header.
pub mod tcp_field {
    use core::ops::Range;
    /// Source port.
    pub const SRC_PORT: Range<usize> = 0..2;
    /// Destination port.
    pub const DST_PORT: Range<usize> = 2..4;
    /// Data offset (high nibble, in words).
    pub const DATA_OFFSET: usize = 12;
    /// Minimum header length.
    pub const MIN_LEN: usize = 20;
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wrap without checks.
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wrap, checking data offset >= 5 and that the header with options fits.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = TcpPacket::new_unchecked(buffer);
        let b = p.buffer.as_ref();
        if b.len() < tcp_field::MIN_LEN {
            return Err(Error::Truncated);
        }
        if p.header_len() < tcp_field::MIN_LEN {
            return Err(Error::BadL4Header);
        }
        if b.len() < p.header_len() {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    /// Header length in bytes (data offset * 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[tcp_field::DATA_OFFSET] >> 4) * 4
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[tcp_field::SRC_PORT])
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[tcp_field::DST_PORT])
    }

    /// Bytes after the header and its options.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

macro_rules! into_payload {
    ($t:ident) => {
        impl<'a> $t<&'a [u8]> {
            /// The payload, borrowing the underlying buffer rather than the view.
            pub fn into_payload(self) -> &'a [u8] {
                let b: &'a [u8] = self.buffer;
                let p = self.payload();
                let start = p.as_ptr() as usize - b.as_ptr() as usize;
                &b[start..start + p.len()]
            }
        }
    };
}

into_payload!(EthernetFrame);
into_payload!(Ipv4Packet);
into_payload!(Ipv6Packet);
into_payload!(UdpPacket);
into_payload!(TcpPacket);
