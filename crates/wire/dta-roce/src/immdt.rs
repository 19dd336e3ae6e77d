//! Immediate Data Extended Transport Header (4 bytes, [IBTA §9.3.5]): the 32-bit immediate
//! value of a SEND or RDMA WRITE with immediate, delivered in the responder's completion (DTA's
//! "immediate" flag, [DTA §4]: notify the collector).

use super::{rd32, wr32, Error};

/// Header length.
pub const HEADER_LEN: usize = 4;

/// Byte ranges.
pub mod field {
    use core::ops::Range;
    /// Immediate data.
    pub const IMM: Range<usize> = 0..4;
}

dta_net::packet_view!(Error, HEADER_LEN, payload);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Immediate data.
    pub fn imm(&self) -> u32 {
        rd32(&self.buffer.as_ref()[field::IMM])
    }
}

/// An ImmDt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Immediate data (big-endian on the wire).
    pub imm: u32,
}

impl Repr {
    /// Parse.
    pub fn parse(buf: &[u8]) -> Result<Repr, Error> {
        Ok(Repr {
            imm: Packet::new_checked(buf)?.imm(),
        })
    }
    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Emit.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let b = Packet::new_checked(buf)?.into_inner();
        wr32(&mut b[field::IMM], self.imm);
        Ok(HEADER_LEN)
    }
}
