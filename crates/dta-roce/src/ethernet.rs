//! Ethernet II header (14 bytes, no VLAN tag): destination MAC, source MAC, EtherType. RoCEv2
//! frames carry IPv4 ([`ETHERTYPE_IPV4`]).

use super::{header_view, rd16, wr16, Error};

/// Header length.
pub const HEADER_LEN: usize = 14;
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;

/// Byte ranges.
pub mod field {
    use core::ops::Range;
    /// Destination MAC.
    pub const DST: Range<usize> = 0..6;
    /// Source MAC.
    pub const SRC: Range<usize> = 6..12;
    /// EtherType.
    pub const ETHERTYPE: Range<usize> = 12..14;
}

header_view!(HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Destination MAC.
    pub fn dst(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        a
    }
    /// Source MAC.
    pub fn src(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        a
    }
    /// EtherType.
    pub fn ethertype(&self) -> u16 {
        rd16(&self.buffer.as_ref()[field::ETHERTYPE])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the destination MAC.
    pub fn set_dst(&mut self, mac: [u8; 6]) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&mac);
    }
    /// Set the source MAC.
    pub fn set_src(&mut self, mac: [u8; 6]) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&mac);
    }
    /// Set the EtherType.
    pub fn set_ethertype(&mut self, t: u16) {
        wr16(&mut self.buffer.as_mut()[field::ETHERTYPE], t);
    }
}

/// An Ethernet header carrying IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Destination MAC.
    pub dst: [u8; 6],
    /// Source MAC.
    pub src: [u8; 6],
}

impl Repr {
    /// Parse; `NotIpv4` unless the EtherType is IPv4.
    pub fn parse(buf: &[u8]) -> Result<Repr, Error> {
        let p = Packet::new_checked(buf)?;
        if p.ethertype() != ETHERTYPE_IPV4 {
            return Err(Error::NotIpv4);
        }
        Ok(Repr {
            dst: p.dst(),
            src: p.src(),
        })
    }

    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit (EtherType IPv4).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let mut p = Packet::new_checked(buf)?;
        p.set_dst(self.dst);
        p.set_src(self.src);
        p.set_ethertype(ETHERTYPE_IPV4);
        Ok(HEADER_LEN)
    }
}
