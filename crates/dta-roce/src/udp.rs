//! UDP header (8 bytes). RoCEv2 uses destination port [`super::ROCE_PORT`]; the source port is
//! flow entropy, and the checksum is usually 0 (unused; the ICRC protects the packet, and the
//! ICRC masks the UDP checksum, IBA Annex A17.4.3).

use super::{header_view, rd16, wr16, Error, ROCE_PORT};

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

header_view!(HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Source port.
    pub fn src_port(&self) -> u16 {
        rd16(&self.buffer.as_ref()[field::SRC_PORT])
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        rd16(&self.buffer.as_ref()[field::DST_PORT])
    }
    /// Length.
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
}

/// A UDP header to the RoCEv2 port. The length is computed when emitting; the checksum is
/// carried as is (not verified: RoCEv2 senders put 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Source port (flow entropy).
    pub src_port: u16,
    /// Checksum as carried (0 = none).
    pub checksum: u16,
}

impl Repr {
    /// Parse; `NotRocePort` unless the destination is 4791. Returns the header and its length
    /// field (not checked here).
    pub fn parse(buf: &[u8]) -> Result<(Repr, u16), Error> {
        let p = Packet::new_checked(buf)?;
        if p.dst_port() != ROCE_PORT {
            return Err(Error::NotRocePort);
        }
        Ok((
            Repr {
                src_port: p.src_port(),
                checksum: p.checksum(),
            },
            p.len(),
        ))
    }

    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit to port 4791 with the given payload length.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) -> Result<usize, Error> {
        let len = u16::try_from(HEADER_LEN + payload_len).map_err(|_| Error::BadLength)?;
        let mut p = Packet::new_checked(buf)?;
        p.set_src_port(self.src_port);
        p.set_dst_port(ROCE_PORT);
        p.set_len(len);
        p.set_checksum(self.checksum);
        Ok(HEADER_LEN)
    }
}
