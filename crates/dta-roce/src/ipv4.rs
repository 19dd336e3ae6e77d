//! IPv4 header without options (20 bytes, RFC 791) and its header checksum (RFC 1071). RoCEv2
//! carries UDP; fragments are not allowed (IBA Annex A17.4.2: RoCEv2 packets are not fragmented).

use super::{header_view, rd16, wr16, Error};

/// Header length (IHL 5; options are rejected).
pub const HEADER_LEN: usize = 20;
/// IP protocol number of UDP.
pub const PROTOCOL_UDP: u8 = 17;

/// Byte ranges and masks.
pub mod field {
    use core::ops::Range;
    /// Version (high nibble) and IHL (low nibble).
    pub const VER_IHL: usize = 0;
    /// DSCP (bits 7-2) and ECN (bits 1-0), the old ToS byte.
    pub const DSCP_ECN: usize = 1;
    /// Total length.
    pub const LENGTH: Range<usize> = 2..4;
    /// Identification.
    pub const IDENT: Range<usize> = 4..6;
    /// Flags (bits 15-13) and fragment offset (bits 12-0).
    pub const FLG_OFF: Range<usize> = 6..8;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol.
    pub const PROTOCOL: usize = 9;
    /// Header checksum.
    pub const CHECKSUM: Range<usize> = 10..12;
    /// Source address.
    pub const SRC: Range<usize> = 12..16;
    /// Destination address.
    pub const DST: Range<usize> = 16..20;
    /// Don't Fragment flag.
    pub const FLAG_DF: u16 = 0x4000;
    /// More Fragments flag.
    pub const FLAG_MF: u16 = 0x2000;
    /// Fragment offset mask.
    pub const FRAG_OFFSET: u16 = 0x1fff;
}

/// The Internet checksum (RFC 1071) of `data`: the ones' complement of the ones' complement sum.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        sum += u32::from(*b) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

header_view!(HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Version.
    pub fn version(&self) -> u8 {
        self.b()[field::VER_IHL] >> 4
    }
    /// Header length in 32-bit words.
    pub fn ihl(&self) -> u8 {
        self.b()[field::VER_IHL] & 0x0f
    }
    /// DSCP and ECN.
    pub fn dscp_ecn(&self) -> u8 {
        self.b()[field::DSCP_ECN]
    }
    /// Total length (header and payload).
    pub fn total_len(&self) -> u16 {
        rd16(&self.b()[field::LENGTH])
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        rd16(&self.b()[field::IDENT])
    }
    /// Don't Fragment.
    pub fn dont_fragment(&self) -> bool {
        rd16(&self.b()[field::FLG_OFF]) & field::FLAG_DF != 0
    }
    /// More Fragments set or a non-zero fragment offset.
    pub fn is_fragment(&self) -> bool {
        rd16(&self.b()[field::FLG_OFF]) & (field::FLAG_MF | field::FRAG_OFFSET) != 0
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }
    /// Protocol.
    pub fn protocol(&self) -> u8 {
        self.b()[field::PROTOCOL]
    }
    /// Header checksum as carried.
    pub fn checksum(&self) -> u16 {
        rd16(&self.b()[field::CHECKSUM])
    }
    /// Source address.
    pub fn src(&self) -> [u8; 4] {
        let mut a = [0; 4];
        a.copy_from_slice(&self.b()[field::SRC]);
        a
    }
    /// Destination address.
    pub fn dst(&self) -> [u8; 4] {
        let mut a = [0; 4];
        a.copy_from_slice(&self.b()[field::DST]);
        a
    }
    /// True if the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum(&self.b()[..HEADER_LEN]) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Recompute and store the header checksum.
    pub fn fill_checksum(&mut self) {
        let b = self.buffer.as_mut();
        wr16(&mut b[field::CHECKSUM], 0);
        let c = checksum(&b[..HEADER_LEN]);
        wr16(&mut b[field::CHECKSUM], c);
    }
}

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
        let p = Packet::new_checked(buf)?;
        if p.version() != 4 || p.ihl() != 5 || p.is_fragment() {
            return Err(Error::BadIpHeader);
        }
        if !p.verify_checksum() {
            return Err(Error::BadIpChecksum);
        }
        if p.protocol() != PROTOCOL_UDP {
            return Err(Error::NotUdp);
        }
        Ok((
            Repr {
                src: p.src(),
                dst: p.dst(),
                dscp_ecn: p.dscp_ecn(),
                ident: p.ident(),
                dont_fragment: p.dont_fragment(),
                ttl: p.ttl(),
            },
            p.total_len(),
        ))
    }

    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit with protocol UDP, the given payload length and a correct checksum.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) -> Result<usize, Error> {
        let total = u16::try_from(HEADER_LEN + payload_len).map_err(|_| Error::BadLength)?;
        let b = Packet::new_checked(buf)?.into_inner();
        b[field::VER_IHL] = 0x45;
        b[field::DSCP_ECN] = self.dscp_ecn;
        wr16(&mut b[field::LENGTH], total);
        wr16(&mut b[field::IDENT], self.ident);
        let flags = if self.dont_fragment {
            field::FLAG_DF
        } else {
            0
        };
        wr16(&mut b[field::FLG_OFF], flags);
        b[field::TTL] = self.ttl;
        b[field::PROTOCOL] = PROTOCOL_UDP;
        b[field::SRC].copy_from_slice(&self.src);
        b[field::DST].copy_from_slice(&self.dst);
        Packet::new_unchecked(b).fill_checksum();
        Ok(HEADER_LEN)
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
        h[11] ^= 1;
        h[6] |= 0x20; // MF
        assert_eq!(Repr::parse(&h), Err(Error::BadIpHeader));
    }
}
