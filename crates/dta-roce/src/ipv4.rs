//! The IPv4 header of a RoCEv2 frame: [`dta_net::ipv4`] without options, carrying UDP, never a
//! fragment ([RoCEv2 A17.4.2]: RoCEv2 packets are not fragmented).

use super::Error;
pub use dta_net::checksum::checksum;
pub use dta_net::ipv4::{field, Packet, HEADER_LEN};

/// IP protocol number of UDP.
pub const PROTOCOL_UDP: u8 = dta_net::IPPROTO_UDP;

/// An IPv4 header carrying UDP. The total length and the checksum are computed when emitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// DSCP (bits 7-2) and ECN (bits 1-0).
    pub dscp_ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment (Linux rxe sets it).
    pub dont_fragment: bool,
    /// Time to live.
    pub ttl: u8,
}

impl Default for Repr {
    fn default() -> Repr {
        Repr {
            src: [0; 4],
            dst: [0; 4],
            dscp_ecn: 0,
            ident: 0,
            dont_fragment: true,
            ttl: 64,
        }
    }
}

impl Repr {
    /// Parse the header, checking version, IHL, fragmentation, checksum and protocol (in that
    /// order). Returns the header and the total length it claims (not checked here).
    pub fn parse(buf: &[u8]) -> Result<(Repr, u16), Error> {
        let (r, total) = dta_net::ipv4::Repr::parse(buf)?;
        if r.protocol != PROTOCOL_UDP {
            return Err(Error::NotUdp);
        }
        Ok((
            Repr {
                src: r.src,
                dst: r.dst,
                dscp_ecn: r.dscp_ecn,
                ident: r.ident,
                dont_fragment: r.dont_fragment,
                ttl: r.ttl,
            },
            total,
        ))
    }

    /// The ECN field says Congestion Experienced: a router on the path was congested
    /// ([RFC 3168 §5]); a RoCEv2 receiver answers with a CNP ([RoCEv2 A17.9.3]).
    pub const fn congestion_experienced(&self) -> bool {
        self.dscp_ecn & field::ECN_MASK == field::ECN_CE
    }

    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit with protocol UDP, the given payload length and a correct checksum.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) -> Result<usize, Error> {
        let r = dta_net::ipv4::Repr {
            src: self.src,
            dst: self.dst,
            dscp_ecn: self.dscp_ecn,
            ident: self.ident,
            dont_fragment: self.dont_fragment,
            ttl: self.ttl,
            protocol: PROTOCOL_UDP,
        };
        Ok(r.emit(buf, payload_len)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example_and_round_trip() {
        // The classic example header (Wikipedia "IPv4 header checksum"): checksum 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert!(Packet::new_unchecked(&h[..]).verify_checksum());
        let (r, len) = Repr::parse(&h).unwrap();
        assert_eq!(len, 0x73);
        assert_eq!(r.src, [192, 168, 0, 1]);
        assert!(r.dont_fragment);
        let mut out = [0u8; 20];
        r.emit(&mut out, 0x73 - 20).unwrap();
        assert_eq!(out, h);
        h[11] ^= 1;
        assert_eq!(Repr::parse(&h), Err(Error::BadIpChecksum));
        assert!(!r.congestion_experienced());
        for (ecn, ce) in [(0, false), (1, false), (2, false), (3, true)] {
            let r = Repr {
                dscp_ecn: (46 << 2) | ecn,
                ..r
            };
            assert_eq!(r.congestion_experienced(), ce);
        }
        h[11] ^= 1;
        h[6] |= 0x20; // MF
        assert_eq!(Repr::parse(&h), Err(Error::BadIpHeader));
    }
}
