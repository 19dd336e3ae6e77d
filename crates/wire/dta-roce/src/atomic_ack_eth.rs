//! Atomic Acknowledge Extended Transport Header (8 bytes, [IBTA §9.5.3]): the original value
//! of the target before the atomic operation.

use super::{rd64, wr64, Error};

/// Header length.
pub const HEADER_LEN: usize = 8;

/// Byte ranges.
pub mod field {
    use core::ops::Range;
    /// Original remote data.
    pub const ORIG: Range<usize> = 0..8;
}

dta_net::packet_view!(Error, HEADER_LEN, payload);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Original value.
    pub fn original(&self) -> u64 {
        rd64(&self.buffer.as_ref()[field::ORIG])
    }
}

/// An AtomicAckETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// The value at the target before the operation.
    pub original: u64,
}

impl Repr {
    /// Parse.
    pub fn parse(buf: &[u8]) -> Result<Repr, Error> {
        Ok(Repr {
            original: Packet::new_checked(buf)?.original(),
        })
    }
    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Emit.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let b = Packet::new_checked(buf)?.into_inner();
        wr64(&mut b[field::ORIG], self.original);
        Ok(HEADER_LEN)
    }
}
