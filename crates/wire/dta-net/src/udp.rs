//! UDP header (8 bytes, [RFC 768]) and its checksum over the IPv4 or IPv6 pseudo-header. A
//! checksum of 0 over IPv4 means "none"; a computed 0 is sent as 0xffff.

use crate::checksum::{finish, pseudo_header_v4, pseudo_header_v6, sum};
use crate::{rd16, wr16, Error, IPPROTO_UDP};

/// Header length.
pub const HEADER_LEN: usize = 8;

/// Byte ranges.
pub mod field {
    use core::ops::Range;
    /// Source port.
    pub const SRC_PORT: Range<usize> = 0..2;
    /// Destination port.
    pub const DST_PORT: Range<usize> = 2..4;
    /// Length (header and payload).
    pub const LENGTH: Range<usize> = 4..6;
    /// Checksum.
    pub const CHECKSUM: Range<usize> = 6..8;
}

crate::packet_view!(
    "A zero-copy view of a UDP header and the bytes after it.",
    Error,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Source port.
    pub fn src_port(&self) -> u16 {
        rd16(&self.buffer.as_ref()[field::SRC_PORT])
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        rd16(&self.buffer.as_ref()[field::DST_PORT])
    }
    /// Length field (header and payload).
    pub fn len(&self) -> u16 {
        rd16(&self.buffer.as_ref()[field::LENGTH])
    }
    /// True when the length field is 0 (never valid).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Checksum as carried.
    pub fn checksum(&self) -> u16 {
        rd16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    /// The bytes after the header (to the end of the buffer; compare [`Packet::len`]).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// The datagram the length field covers; `Truncated` if the buffer is shorter or the length
    /// is below the header's.
    fn datagram(&self) -> Result<&[u8], Error> {
        let n = usize::from(self.len());
        if n < HEADER_LEN {
            return Err(Error::Truncated);
        }
        self.buffer.as_ref().get(..n).ok_or(Error::Truncated)
    }

    /// True if the checksum verifies over the IPv4 pseudo-header, or is 0 (none). `Truncated`
    /// if the length field exceeds the buffer or is below 8.
    pub fn verify_checksum_v4(&self, src: [u8; 4], dst: [u8; 4]) -> Result<bool, Error> {
        let d = self.datagram()?;
        if self.checksum() == 0 {
            return Ok(true);
        }
        let s = pseudo_header_v4(src, dst, IPPROTO_UDP, self.len());
        Ok(finish(sum(s, d)) == 0)
    }

    /// True if the checksum verifies over the IPv6 pseudo-header (where it is mandatory: 0 does
    /// not verify).
    pub fn verify_checksum_v6(&self, src: [u8; 16], dst: [u8; 16]) -> Result<bool, Error> {
        let d = self.datagram()?;
        let s = pseudo_header_v6(src, dst, IPPROTO_UDP, u32::from(self.len()));
        Ok(self.checksum() != 0 && finish(sum(s, d)) == 0)
    }
}

impl<'a> Packet<&'a [u8]> {
    /// [`Packet::payload`], borrowing the underlying buffer rather than the view.
    pub fn into_payload(self) -> &'a [u8] {
        &self.buffer[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the source port.
    pub fn set_src_port(&mut self, v: u16) {
        wr16(&mut self.buffer.as_mut()[field::SRC_PORT], v);
    }
    /// Set the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        wr16(&mut self.buffer.as_mut()[field::DST_PORT], v);
    }
    /// Set the length.
    pub fn set_len(&mut self, v: u16) {
        wr16(&mut self.buffer.as_mut()[field::LENGTH], v);
    }
    /// Set the checksum.
    pub fn set_checksum(&mut self, v: u16) {
        wr16(&mut self.buffer.as_mut()[field::CHECKSUM], v);
    }

    fn fill(&mut self, pseudo: u32) -> Result<(), Error> {
        self.set_checksum(0);
        let c = finish(sum(pseudo, self.datagram()?));
        self.set_checksum(if c == 0 { 0xffff } else { c });
        Ok(())
    }

    /// Compute and store the checksum over the IPv4 pseudo-header and the datagram the length
    /// field covers.
    pub fn fill_checksum_v4(&mut self, src: [u8; 4], dst: [u8; 4]) -> Result<(), Error> {
        let s = pseudo_header_v4(src, dst, IPPROTO_UDP, self.len());
        self.fill(s)
    }

    /// Compute and store the checksum over the IPv6 pseudo-header and the datagram.
    pub fn fill_checksum_v6(&mut self, src: [u8; 16], dst: [u8; 16]) -> Result<(), Error> {
        let s = pseudo_header_v6(src, dst, IPPROTO_UDP, u32::from(self.len()));
        self.fill(s)
    }
}

/// A UDP header. The length is computed when emitting; the checksum is carried as is (0 =
/// none; fill it with [`Packet::fill_checksum_v4`] once the payload is in place).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Checksum as carried.
    pub checksum: u16,
}

impl Repr {
    /// Parse the header. Returns it and its length field (not checked here).
    pub fn parse(buf: &[u8]) -> Result<(Repr, u16), Error> {
        let p = Packet::new_checked(buf)?;
        Ok((
            Repr {
                src_port: p.src_port(),
                dst_port: p.dst_port(),
                checksum: p.checksum(),
            },
            p.len(),
        ))
    }

    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit with the given payload length; returns the header length. `TooLong` if the length
    /// does not fit 16 bits.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) -> Result<usize, Error> {
        let len = HEADER_LEN
            .checked_add(payload_len)
            .and_then(|l| u16::try_from(l).ok())
            .ok_or(Error::TooLong)?;
        let mut p = Packet::new_checked(buf)?;
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(len);
        p.set_checksum(self.checksum);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_emit_and_truncation() {
        let r = Repr {
            src_port: 0xc0de,
            dst_port: 4791,
            checksum: 0,
        };
        let mut b = [0u8; 8];
        assert_eq!(r.emit(&mut b, 4), Ok(8));
        assert_eq!(b, [0xc0, 0xde, 0x12, 0xb7, 0, 12, 0, 0]);
        assert_eq!(Repr::parse(&b), Ok((r, 12)));
        assert_eq!(Repr::parse(&b[..7]), Err(Error::Truncated));
        assert_eq!(r.emit(&mut b[..7], 0), Err(Error::Truncated));
        assert_eq!(r.emit(&mut b, 65_528), Err(Error::TooLong));
    }

    #[test]
    fn checksum_by_hand_v4_and_v6() {
        // 10.0.0.1:1 -> 10.0.0.2:2, payload 01 02 03 04, length 12. Pseudo-header sum 0x1420
        // (see checksum::tests), header 0001+0002+000c, payload 0102+0304: 0x1835, checksum
        // 0xe7ca.
        let mut d = [0, 1, 0, 2, 0, 12, 0, 0, 1, 2, 3, 4];
        let mut p = Packet::new_unchecked(&mut d[..]);
        p.fill_checksum_v4([10, 0, 0, 1], [10, 0, 0, 2]).unwrap();
        assert_eq!(p.checksum(), 0xe7ca);
        let p = Packet::new_unchecked(&d[..]);
        assert_eq!(p.verify_checksum_v4([10, 0, 0, 1], [10, 0, 0, 2]), Ok(true));
        assert_eq!(
            p.verify_checksum_v4([10, 0, 0, 1], [10, 0, 0, 3]),
            Ok(false)
        );
        // Over IPv6 ::1 -> ::2 the pseudo-header sums to 1+2+12+17 = 0x20: 0x20+0x0f+0x0406 =
        // 0x0435, checksum 0xfbca.
        let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
        a[15] = 1;
        b[15] = 2;
        let mut p = Packet::new_unchecked(&mut d[..]);
        p.fill_checksum_v6(a, b).unwrap();
        assert_eq!(p.checksum(), 0xfbca);
        assert_eq!(
            Packet::new_unchecked(&d[..]).verify_checksum_v6(a, b),
            Ok(true)
        );
        // A length field beyond the buffer.
        d[5] = 13;
        assert_eq!(
            Packet::new_unchecked(&d[..]).verify_checksum_v4([0; 4], [0; 4]),
            Err(Error::Truncated)
        );
    }
}
