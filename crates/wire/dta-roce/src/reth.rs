//! RDMA Extended Transport Header (16 bytes, [IBTA §9.3.3], [P4-RDMA Figure 2] "RETH"): the
//! virtual address, R_Key and DMA length of an RDMA WRITE (First / Only) or READ request.

use super::{rd32, rd64, wr32, wr64, Error};

/// Header length.
pub const HEADER_LEN: usize = 16;

/// Byte ranges.
pub mod field {
    use core::ops::Range;
    /// Virtual address.
    pub const VA: Range<usize> = 0..8;
    /// Remote key.
    pub const RKEY: Range<usize> = 8..12;
    /// DMA length (of the whole message).
    pub const DMA_LEN: Range<usize> = 12..16;
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
    /// DMA length.
    pub fn dma_len(&self) -> u32 {
        rd32(&self.buffer.as_ref()[field::DMA_LEN])
    }
}

/// A RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Virtual address of the first byte.
    pub va: u64,
    /// Remote key of the memory region.
    pub rkey: u32,
    /// Length of the whole message in bytes.
    pub dma_len: u32,
}

impl Repr {
    /// Parse.
    pub fn parse(buf: &[u8]) -> Result<Repr, Error> {
        let p = Packet::new_checked(buf)?;
        Ok(Repr {
            va: p.va(),
            rkey: p.rkey(),
            dma_len: p.dma_len(),
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
        wr32(&mut b[field::DMA_LEN], self.dma_len);
        Ok(HEADER_LEN)
    }
}
