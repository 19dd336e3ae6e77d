//! Datagram Extended Transport Header (8 bytes, [IBTA §9.3.2]): Q_Key and source QP of an
//! Unreliable Datagram. CM MADs travel to QP1 with Q_Key [`super::QP1_QKEY`].

use super::{fits, rd24, rd32, wr24, wr32, Error, MAX_U24};

/// Header length.
pub const HEADER_LEN: usize = 8;

/// Byte ranges.
pub mod field {
    use core::ops::Range;
    /// Queue key.
    pub const QKEY: Range<usize> = 0..4;
    /// Reserved.
    pub const RESERVED: usize = 4;
    /// Source QP (24 bits).
    pub const SRC_QP: Range<usize> = 5..8;
}

dta_net::packet_view!(Error, HEADER_LEN, payload);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Queue key.
    pub fn qkey(&self) -> u32 {
        rd32(&self.buffer.as_ref()[field::QKEY])
    }
    /// Source QP.
    pub fn src_qp(&self) -> u32 {
        rd24(&self.buffer.as_ref()[field::SRC_QP])
    }
}

/// A DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Queue key.
    pub qkey: u32,
    /// Source QP (24 bits).
    pub src_qp: u32,
}

impl Repr {
    /// Parse (the reserved byte is ignored).
    pub fn parse(buf: &[u8]) -> Result<Repr, Error> {
        let p = Packet::new_checked(buf)?;
        Ok(Repr {
            qkey: p.qkey(),
            src_qp: p.src_qp(),
        })
    }
    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Emit; `FieldRange` for a source QP above 24 bits.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        fits(self.src_qp, MAX_U24)?;
        let b = Packet::new_checked(buf)?.into_inner();
        wr32(&mut b[field::QKEY], self.qkey);
        b[field::RESERVED] = 0;
        wr24(&mut b[field::SRC_QP], self.src_qp);
        Ok(HEADER_LEN)
    }
}
