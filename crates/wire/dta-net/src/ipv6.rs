//! IPv6 fixed header (40 bytes, RFC 8200); extension headers are not followed.

use crate::{rd16, Error};

/// Header length.
pub const HEADER_LEN: usize = 40;

/// Byte ranges.
pub mod field {
    use core::ops::Range;
    /// Version (4 bits), traffic class (8), flow label (20).
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    /// Payload length.
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    /// Next header.
    pub const NEXT_HEADER: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source address.
    pub const SRC: Range<usize> = 8..24;
    /// Destination address.
    pub const DST: Range<usize> = 24..40;
}

crate::packet_view!(
    "A zero-copy view of an IPv6 fixed header and the bytes after it.",
    Error
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// `Truncated` or `BadIpVersion`.
    pub fn check_len(&self) -> Result<(), Error> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if b[0] >> 4 != 6 {
            return Err(Error::BadIpVersion);
        }
        Ok(())
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

    /// Payload length.
    pub fn payload_len(&self) -> u16 {
        rd16(&self.buffer.as_ref()[field::PAYLOAD_LEN])
    }

    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        a
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        a
    }

    fn payload_range(&self) -> core::ops::Range<usize> {
        let len = self.buffer.as_ref().len();
        let n = usize::from(self.payload_len());
        if n <= len - HEADER_LEN {
            HEADER_LEN..HEADER_LEN + n
        } else {
            HEADER_LEN..len
        }
    }

    /// The bytes after the fixed header, up to the payload length when it is consistent with
    /// the buffer (else to the end of the buffer).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.payload_range()]
    }
}

impl<'a> Packet<&'a [u8]> {
    /// [`Packet::payload`], borrowing the underlying buffer rather than the view.
    pub fn into_payload(self) -> &'a [u8] {
        let r = self.payload_range();
        &self.buffer[r]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_errors() {
        let mut b = vec![0x6b, 0x80, 0, 0, 0, 4, 17, 9];
        b.extend((0..32).map(|i| i as u8));
        b.extend_from_slice(&[1, 2, 3, 4, 0, 0]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.traffic_class(), p.dscp()), (0xb8, 0x2e));
        assert_eq!(
            (p.next_header(), p.hop_limit(), p.payload_len()),
            (17, 9, 4)
        );
        assert_eq!(p.src()[0], 0);
        assert_eq!(p.dst()[15], 31);
        assert_eq!(p.into_payload(), &[1, 2, 3, 4]);
        assert_eq!(Packet::new_checked(&b[..39]), Err(Error::Truncated));
        b[0] = 0x4b;
        assert_eq!(Packet::new_checked(&b[..]), Err(Error::BadIpVersion));
    }
}
