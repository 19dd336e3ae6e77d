//! Atomic Extended Transport Header (28 bytes, [IBTA §9.3.4]): virtual address, R_Key, the
//! swap (CmpSwap) or add (FetchAdd) operand and the compare operand. DTA's Key-Increment is a
//! FetchAdd ([DTA §4] "Key-Increment").

use super::{rd32, rd64, wr32, wr64, Error};

/// Header length.
pub const HEADER_LEN: usize = 28;

/// Byte ranges.
pub mod field {
    use core::ops::Range;
    /// Virtual address (8-byte aligned).
    pub const VA: Range<usize> = 0..8;
    /// Remote key.
    pub const RKEY: Range<usize> = 8..12;
    /// Swap (CmpSwap) or add (FetchAdd) data.
    pub const SWAP_ADD: Range<usize> = 12..20;
    /// Compare data (CmpSwap; 0 for FetchAdd).
    pub const COMPARE: Range<usize> = 20..28;
}

dta_net::packet_view!(Error, HEADER_LEN, payload);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Virtual address.
    pub fn va(&self) -> u64 {
        rd64(&self.buffer.as_ref()[field::VA])
    }
    /// Remote key.
    pub fn rkey(&self) -> u32 {
        rd32(&self.buffer.as_ref()[field::RKEY])
    }
    /// Swap or add data.
    pub fn swap_add(&self) -> u64 {
        rd64(&self.buffer.as_ref()[field::SWAP_ADD])
    }
    /// Compare data.
    pub fn compare(&self) -> u64 {
        rd64(&self.buffer.as_ref()[field::COMPARE])
    }
}

/// An AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Virtual address of the 8-byte target.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap (CmpSwap) or add (FetchAdd) operand.
    pub swap_add: u64,
    /// Compare operand (CmpSwap).
    pub compare: u64,
}

impl Repr {
    /// Parse.
    pub fn parse(buf: &[u8]) -> Result<Repr, Error> {
        let p = Packet::new_checked(buf)?;
        Ok(Repr {
            va: p.va(),
            rkey: p.rkey(),
            swap_add: p.swap_add(),
            compare: p.compare(),
        })
    }
    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Emit.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let b = Packet::new_checked(buf)?.into_inner();
        wr64(&mut b[field::VA], self.va);
        wr32(&mut b[field::RKEY], self.rkey);
        wr64(&mut b[field::SWAP_ADD], self.swap_add);
        wr64(&mut b[field::COMPARE], self.compare);
        Ok(HEADER_LEN)
    }
}
