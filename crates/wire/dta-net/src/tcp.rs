//! TCP header (RFC 9293); options are counted in the header length and skipped.

use crate::{rd16, Error};

/// Header length without options.
pub const HEADER_LEN: usize = 20;

/// Byte ranges.
pub mod field {
    use core::ops::Range;
    /// Source port.
    pub const SRC_PORT: Range<usize> = 0..2;
    /// Destination port.
    pub const DST_PORT: Range<usize> = 2..4;
    /// Sequence number.
    pub const SEQ: Range<usize> = 4..8;
    /// Data offset (high nibble, in 32-bit words).
    pub const DATA_OFFSET: usize = 12;
    /// Control bits (CWR ECE URG ACK PSH RST SYN FIN, high to low).
    pub const FLAGS: usize = 13;
}

/// FIN control bit of [`Packet::flags`].
pub const FLAG_FIN: u8 = 0x01;
/// SYN control bit of [`Packet::flags`].
pub const FLAG_SYN: u8 = 0x02;
/// RST control bit of [`Packet::flags`].
pub const FLAG_RST: u8 = 0x04;
/// ACK control bit of [`Packet::flags`].
pub const FLAG_ACK: u8 = 0x10;

crate::packet_view!(
    "A zero-copy view of a TCP header and the bytes after it.",
    Error
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// `Truncated` or `BadTcpHeaderLen`.
    pub fn check_len(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.header_len() < HEADER_LEN {
            return Err(Error::BadTcpHeaderLen);
        }
        if len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Header length in bytes (data offset * 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::DATA_OFFSET] >> 4) * 4
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        rd16(&self.buffer.as_ref()[field::SRC_PORT])
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        rd16(&self.buffer.as_ref()[field::DST_PORT])
    }

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::SEQ];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The eight control bits ([`FLAG_FIN`], [`FLAG_SYN`], ...).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The bytes after the header and its options.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<'a> Packet<&'a [u8]> {
    /// [`Packet::payload`], borrowing the underlying buffer rather than the view.
    pub fn into_payload(self) -> &'a [u8] {
        let n = self.header_len();
        &self.buffer[n..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_skipped_and_errors() {
        let mut b = [0u8; 26];
        b[0..4].copy_from_slice(&[0x1f, 0x90, 0x00, 0x50]);
        b[4..8].copy_from_slice(&0x0102_0304u32.to_be_bytes());
        b[12] = 6 << 4;
        b[13] = FLAG_SYN | FLAG_ACK;
        b[24..26].copy_from_slice(&[7, 8]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.header_len()), (8080, 80, 24));
        assert_eq!((p.seq(), p.flags()), (0x0102_0304, FLAG_SYN | FLAG_ACK));
        assert_eq!(p.into_payload(), &[7, 8]);
        assert_eq!(Packet::new_checked(&b[..23]), Err(Error::Truncated));
        assert_eq!(Packet::new_checked(&b[..19]), Err(Error::Truncated));
        b[12] = 4 << 4;
        assert_eq!(Packet::new_checked(&b[..]), Err(Error::BadTcpHeaderLen));
    }
}
