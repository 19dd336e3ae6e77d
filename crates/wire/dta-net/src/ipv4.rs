//! IPv4 header ([RFC 791]) and its header checksum (RFC 1071, [`crate::checksum`]). The view
//! accepts options (IHL above 5); the [`Repr`] is the 20-byte header without options of an
//! unfragmented datagram, which is all dta sends.

use crate::checksum::checksum;
use crate::{rd16, wr16, Error, IPPROTO_UDP};

/// Header length without options.
pub const HEADER_LEN: usize = 20;

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
    /// ECN bits of the DSCP/ECN byte ([RFC 3168 §5]).
    pub const ECN_MASK: u8 = 0x03;
    /// ECN codepoint "Congestion Experienced" (CE), set by a congested router ([RFC 3168 §5]).
    pub const ECN_CE: u8 = 0x03;
}

crate::packet_view!(
    "A zero-copy view of an IPv4 header (options included) and the bytes after it.",
    Error
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// See [`Packet::new_checked`]: `Truncated`, `BadIpVersion` or `BadIpHeaderLen`.
    pub fn check_len(&self) -> Result<(), Error> {
        let len = self.b().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::BadIpVersion);
        }
        if self.header_len() < HEADER_LEN {
            return Err(Error::BadIpHeaderLen);
        }
        if len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

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
    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.ihl()) * 4
    }
    /// DSCP and ECN.
    pub fn dscp_ecn(&self) -> u8 {
        self.b()[field::DSCP_ECN]
    }
    /// DSCP (6 bits).
    pub fn dscp(&self) -> u8 {
        self.dscp_ecn() >> 2
    }
    /// ECN (2 bits; [`field::ECN_CE`] is Congestion Experienced).
    pub fn ecn(&self) -> u8 {
        self.dscp_ecn() & field::ECN_MASK
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
    /// Fragment offset in 8-byte units (0 for the first or only fragment).
    pub fn frag_offset(&self) -> u16 {
        rd16(&self.b()[field::FLG_OFF]) & field::FRAG_OFFSET
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
    /// The bytes the header checksum covers: the header and its options, at least the
    /// 20-byte fixed header, at most the buffer (so a bad IHL never reads past it).
    fn checksum_len(&self) -> usize {
        self.header_len().max(HEADER_LEN).min(self.b().len())
    }
    /// True if the header checksum (over the header and its options) verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum(&self.b()[..self.checksum_len()]) == 0
    }

    fn payload_range(&self) -> core::ops::Range<usize> {
        let len = self.b().len();
        let end = usize::from(self.total_len());
        let end = if end >= self.header_len() && end <= len {
            end
        } else {
            len
        };
        self.header_len()..end
    }

    /// The bytes after the header and its options, up to the total length when it is
    /// consistent with the buffer (else to the end of the buffer: Ethernet padding or a
    /// truncated capture is the caller's to judge from [`Packet::total_len`]).
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.payload_range()]
    }
}

impl<'a> Packet<&'a [u8]> {
    /// [`Packet::payload`], borrowing the underlying buffer rather than the view.
    pub fn into_payload(self) -> &'a [u8] {
        let r = self.payload_range();
        &self.buffer[r]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Recompute and store the header checksum (over the header and its options).
    pub fn fill_checksum(&mut self) {
        let n = self.checksum_len();
        let b = self.buffer.as_mut();
        wr16(&mut b[field::CHECKSUM], 0);
        let c = checksum(&b[..n]);
        wr16(&mut b[field::CHECKSUM], c);
    }
}

/// An IPv4 header without options of an unfragmented datagram. The total length and the
/// checksum are computed when emitting.
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
    /// Don't Fragment.
    pub dont_fragment: bool,
    /// Time to live.
    pub ttl: u8,
    /// Protocol of the payload.
    pub protocol: u8,
}

impl Default for Repr {
    /// Zero addresses, DF set, TTL 64, protocol UDP.
    fn default() -> Repr {
        Repr {
            src: [0; 4],
            dst: [0; 4],
            dscp_ecn: 0,
            ident: 0,
            dont_fragment: true,
            ttl: 64,
            protocol: IPPROTO_UDP,
        }
    }
}

impl Repr {
    /// The ECN field says Congestion Experienced: a router on the path was congested
    /// ([RFC 3168 §5]; a RoCEv2 receiver answers with a CNP, [RoCEv2 A17.9.3]).
    pub const fn congestion_experienced(&self) -> bool {
        self.dscp_ecn & field::ECN_MASK == field::ECN_CE
    }

    /// Parse the header, checking (in this order) length, version, that there are no options
    /// (`Ipv4Options`; IHL below 5 is `BadIpHeaderLen`), that it is not a fragment, and the
    /// checksum. Returns the header and the total length it claims (not checked here).
    pub fn parse(buf: &[u8]) -> Result<(Repr, u16), Error> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let p = Packet::new_unchecked(buf);
        if p.version() != 4 {
            return Err(Error::BadIpVersion);
        }
        if p.header_len() < HEADER_LEN {
            return Err(Error::BadIpHeaderLen);
        }
        if p.header_len() != HEADER_LEN {
            return Err(Error::Ipv4Options);
        }
        if p.is_fragment() {
            return Err(Error::Ipv4Fragment);
        }
        if !p.verify_checksum() {
            return Err(Error::BadIpChecksum);
        }
        Ok((
            Repr {
                src: p.src(),
                dst: p.dst(),
                dscp_ecn: p.dscp_ecn(),
                ident: p.ident(),
                dont_fragment: p.dont_fragment(),
                ttl: p.ttl(),
                protocol: p.protocol(),
            },
            p.total_len(),
        ))
    }

    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit with the given payload length and a correct checksum; returns the header length.
    /// `TooLong` if the total length does not fit 16 bits.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) -> Result<usize, Error> {
        let total = HEADER_LEN
            .checked_add(payload_len)
            .and_then(|t| u16::try_from(t).ok())
            .ok_or(Error::TooLong)?;
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let b = &mut buf[..HEADER_LEN];
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
        b[field::PROTOCOL] = self.protocol;
        b[field::SRC].copy_from_slice(&self.src);
        b[field::DST].copy_from_slice(&self.dst);
        Packet::new_unchecked(b).fill_checksum();
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header checksummed by hand (the classic example; 192.168.0.1 -> 192.168.0.199, UDP,
    /// total length 0x73, DF, TTL 64): the words sum to 0x2_479c, fold to 0x479e, complement
    /// 0xb861.
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn hand_computed_header_round_trips() {
        let mut zeroed = HDR;
        zeroed[10..12].fill(0);
        assert_eq!(checksum(&zeroed), 0xb861);
        assert!(Packet::new_unchecked(&HDR[..]).verify_checksum());
        let (r, len) = Repr::parse(&HDR).unwrap();
        assert_eq!(len, 0x73);
        assert_eq!(r.src, [192, 168, 0, 1]);
        assert_eq!(r.dst, [192, 168, 0, 199]);
        assert_eq!(
            (r.dont_fragment, r.ttl, r.protocol),
            (true, 64, IPPROTO_UDP)
        );
        let mut out = [0u8; 20];
        assert_eq!(r.emit(&mut out, 0x73 - 20), Ok(20));
        assert_eq!(out, HDR);
    }

    #[test]
    fn rejections_in_order() {
        assert_eq!(Repr::parse(&HDR[..19]), Err(Error::Truncated));
        let mut h = HDR;
        h[11] ^= 1;
        assert_eq!(Repr::parse(&h), Err(Error::BadIpChecksum));
        h = HDR;
        h[6] |= 0x20; // MF
        assert_eq!(Repr::parse(&h), Err(Error::Ipv4Fragment));
        h = HDR;
        h[0] = 0x46;
        assert_eq!(Repr::parse(&h), Err(Error::Ipv4Options));
        h[0] = 0x44;
        assert_eq!(Repr::parse(&h), Err(Error::BadIpHeaderLen));
        h[0] = 0x65;
        assert_eq!(Repr::parse(&h), Err(Error::BadIpVersion));
        assert_eq!(
            Repr::default().emit(&mut [0u8; 19], 0),
            Err(Error::Truncated)
        );
        assert_eq!(
            Repr::default().emit(&mut [0u8; 20], 65_516),
            Err(Error::TooLong)
        );
    }

    #[test]
    fn view_with_options_and_padding() {
        // IHL 6 (one option word), total length 28, then 2 bytes of Ethernet padding.
        let mut b = vec![
            0x46, 0, 0, 28, 0, 0, 0, 0, 64, 6, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8,
        ];
        b.extend_from_slice(&[1, 1, 1, 1, 0xaa, 0xbb, 0xcc, 0xdd, 0, 0]);
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.fill_checksum();
        assert!(p.verify_checksum());
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.into_payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(Packet::new_checked(&b[..23]), Err(Error::Truncated));
        b[0] = 0x44;
        assert_eq!(Packet::new_checked(&b[..]), Err(Error::BadIpHeaderLen));
        b[0] = 0x66;
        assert_eq!(Packet::new_checked(&b[..]), Err(Error::BadIpVersion));
    }
}
