//! Base Transport Header (12 bytes, [IBTA §9.2], [P4-RDMA Figure 2] "BTH"):
//!
//! ```text
//!  0               1               2               3
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    OpCode     |S|M|Pad| TVer  |            P_Key              |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |F|B|  resv6    |                 Destination QP                |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |A|  resv7      |                 PSN                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! S solicited event, M migration state, Pad pad count, F FECN, B BECN, A acknowledge request
//! ```
//!
//! Byte 4 (FECN, BECN, reserved) is masked to ones by the ICRC. Reserved bits are sent as 0 and
//! ignored on receipt.

use super::{fits, rd16, rd24, wr16, wr24, Error, Opcode, MAX_U24};

/// Header length.
pub const HEADER_LEN: usize = 12;

/// Byte ranges and masks.
pub mod field {
    use core::ops::Range;
    /// Opcode.
    pub const OPCODE: usize = 0;
    /// SE, M, PadCnt, TVer.
    pub const FLAGS: usize = 1;
    /// Partition key.
    pub const PKEY: Range<usize> = 2..4;
    /// FECN, BECN, reserved (resv8a in Linux).
    pub const RESV8A: usize = 4;
    /// Destination QP (24 bits).
    pub const DEST_QP: Range<usize> = 5..8;
    /// AckReq and reserved.
    pub const ACK: usize = 8;
    /// PSN (24 bits).
    pub const PSN: Range<usize> = 9..12;
    /// Solicited event.
    pub const SE: u8 = 0x80;
    /// Migration request.
    pub const MIG: u8 = 0x40;
    /// Pad count mask (shift 4).
    pub const PAD: u8 = 0x30;
    /// Transport header version mask.
    pub const TVER: u8 = 0x0f;
    /// FECN in byte 4.
    pub const FECN: u8 = 0x80;
    /// BECN in byte 4.
    pub const BECN: u8 = 0x40;
    /// AckReq in byte 8.
    pub const ACKREQ: u8 = 0x80;
}

dta_net::packet_view!(Error, HEADER_LEN, payload);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Raw opcode.
    pub fn opcode_raw(&self) -> u8 {
        self.b()[field::OPCODE]
    }
    /// Solicited event.
    pub fn solicited(&self) -> bool {
        self.b()[field::FLAGS] & field::SE != 0
    }
    /// Migration request.
    pub fn migreq(&self) -> bool {
        self.b()[field::FLAGS] & field::MIG != 0
    }
    /// Pad count (0..=3).
    pub fn pad_cnt(&self) -> u8 {
        (self.b()[field::FLAGS] & field::PAD) >> 4
    }
    /// Transport header version.
    pub fn tver(&self) -> u8 {
        self.b()[field::FLAGS] & field::TVER
    }
    /// Partition key.
    pub fn pkey(&self) -> u16 {
        rd16(&self.b()[field::PKEY])
    }
    /// FECN.
    pub fn fecn(&self) -> bool {
        self.b()[field::RESV8A] & field::FECN != 0
    }
    /// BECN.
    pub fn becn(&self) -> bool {
        self.b()[field::RESV8A] & field::BECN != 0
    }
    /// Destination QP.
    pub fn dest_qp(&self) -> u32 {
        rd24(&self.b()[field::DEST_QP])
    }
    /// Acknowledge request.
    pub fn ack_req(&self) -> bool {
        self.b()[field::ACK] & field::ACKREQ != 0
    }
    /// PSN.
    pub fn psn(&self) -> u32 {
        rd24(&self.b()[field::PSN])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the pad count (0..=3) leaving the other flag bits.
    pub fn set_pad_cnt(&mut self, pad: u8) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = (*b & !field::PAD) | ((pad & 3) << 4);
    }
}

/// A BTH. TVer is always 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Opcode.
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited: bool,
    /// Migration request ([P4-RDMA §V]: "the migrate request flag in the BTH is set").
    pub migreq: bool,
    /// Pad count: bytes of padding after the payload. [`super::FrameRepr::emit`] computes it.
    pub pad_cnt: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward ECN.
    pub fecn: bool,
    /// Backward ECN.
    pub becn: bool,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
}

impl Repr {
    /// A BTH with defaults (no flags, P_Key 0xffff, pad 0).
    pub const fn new(opcode: Opcode, dest_qp: u32, psn: u32) -> Repr {
        Repr {
            opcode,
            solicited: false,
            migreq: false,
            pad_cnt: 0,
            pkey: super::DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp,
            ack_req: false,
            psn,
        }
    }

    /// Parse: `BadVersion` if TVer is not 0, `BadOpcode` for an unknown opcode.
    pub fn parse(buf: &[u8]) -> Result<Repr, Error> {
        let p = Packet::new_checked(buf)?;
        if p.tver() != 0 {
            return Err(Error::BadVersion);
        }
        Ok(Repr {
            opcode: Opcode::from_u8(p.opcode_raw())?,
            solicited: p.solicited(),
            migreq: p.migreq(),
            pad_cnt: p.pad_cnt(),
            pkey: p.pkey(),
            fecn: p.fecn(),
            becn: p.becn(),
            dest_qp: p.dest_qp(),
            ack_req: p.ack_req(),
            psn: p.psn(),
        })
    }

    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit; `FieldRange` for a QP or PSN above 24 bits or a pad count above 3.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        fits(self.dest_qp, MAX_U24)?;
        fits(self.psn, MAX_U24)?;
        fits(self.pad_cnt.into(), 3)?;
        let b = Packet::new_checked(buf)?.into_inner();
        b[field::OPCODE] = self.opcode as u8;
        b[field::FLAGS] = (if self.solicited { field::SE } else { 0 })
            | (if self.migreq { field::MIG } else { 0 })
            | (self.pad_cnt << 4);
        wr16(&mut b[field::PKEY], self.pkey);
        b[field::RESV8A] =
            (if self.fecn { field::FECN } else { 0 }) | (if self.becn { field::BECN } else { 0 });
        wr24(&mut b[field::DEST_QP], self.dest_qp);
        b[field::ACK] = if self.ack_req { field::ACKREQ } else { 0 };
        wr24(&mut b[field::PSN], self.psn);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_positions() {
        let r = Repr {
            opcode: Opcode::RcWriteOnly,
            solicited: true,
            migreq: true,
            pad_cnt: 3,
            pkey: 0xffff,
            fecn: true,
            becn: false,
            dest_qp: 0x000011,
            ack_req: true,
            psn: 0xabcdef,
        };
        let mut b = [0u8; 12];
        r.emit(&mut b).unwrap();
        assert_eq!(
            b,
            [0x0a, 0xf0, 0xff, 0xff, 0x80, 0, 0, 0x11, 0x80, 0xab, 0xcd, 0xef]
        );
        assert_eq!(Repr::parse(&b), Ok(r));
        // Reserved bits are ignored on receipt.
        b[4] |= 0x3f;
        b[8] |= 0x7f;
        assert_eq!(Repr::parse(&b), Ok(r));
        b[1] |= 1;
        assert_eq!(Repr::parse(&b), Err(Error::BadVersion));
        assert_eq!(Repr::parse(&b[..11]), Err(Error::Truncated));
        let big = Repr { psn: 1 << 24, ..r };
        assert_eq!(big.emit(&mut b), Err(Error::FieldRange));
    }
}
