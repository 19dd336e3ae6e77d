//! The Ethernet II header of a RoCEv2 frame: [`dta_net::ethernet`] (no VLAN tag) carrying IPv4.

use super::Error;
pub use dta_net::ethernet::{field, Packet, ETHERTYPE_IPV4, HEADER_LEN};

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
        let r = dta_net::ethernet::Repr::parse(buf)?;
        if r.ethertype != ETHERTYPE_IPV4 {
            return Err(Error::NotIpv4);
        }
        Ok(Repr {
            dst: r.dst,
            src: r.src,
        })
    }

    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit (EtherType IPv4).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let r = dta_net::ethernet::Repr {
            dst: self.dst,
            src: self.src,
            ethertype: ETHERTYPE_IPV4,
        };
        Ok(r.emit(buf)?)
    }
}
