//! ACK Extended Transport Header (4 bytes, [IBTA §9.3.5] / §9.7.5.1, Table 43-44): an 8-bit
//! syndrome and the 24-bit Message Sequence Number.
//!
//! ```text
//! syndrome: |0| type(2) |  value(5)  |
//!   type 00 ACK      value = credit count (0x1f: invalid / no end-to-end flow control)
//!   type 01 RNR NAK  value = RNR timer
//!   type 10 reserved
//!   type 11 NAK      value = 0 PSN sequence error, 1 invalid request, 2 remote access error,
//!                            3 remote operational error, 4 invalid RD request (others reserved)
//! ```
//!
//! Bit 7 of the syndrome is reserved: sent as 0 and ignored on receipt.

use super::{fits, rd24, wr24, Error, MAX_U24};

/// Header length.
pub const HEADER_LEN: usize = 4;

/// Byte ranges.
pub mod field {
    use core::ops::Range;
    /// Syndrome.
    pub const SYNDROME: usize = 0;
    /// Message sequence number (24 bits).
    pub const MSN: Range<usize> = 1..4;
}

/// Credit count meaning "invalid" (the responder does no end-to-end flow control).
pub const CREDITS_INVALID: u8 = 0x1f;

dta_net::packet_view!(Error, HEADER_LEN, payload);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Raw syndrome byte.
    pub fn syndrome_raw(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }
    /// MSN.
    pub fn msn(&self) -> u32 {
        rd24(&self.buffer.as_ref()[field::MSN])
    }
}

/// NAK codes (syndrome type 11).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// PSN sequence error: the requester goes back to the expected PSN.
    PsnSequenceError = 0,
    /// Invalid request.
    InvalidRequest = 1,
    /// Remote access error (bad R_Key, out of bounds).
    RemoteAccessError = 2,
    /// Remote operational error.
    RemoteOperationalError = 3,
    /// Invalid RD request.
    InvalidRdRequest = 4,
}

impl NakCode {
    /// Every code.
    pub const ALL: [NakCode; 5] = [
        NakCode::PsnSequenceError,
        NakCode::InvalidRequest,
        NakCode::RemoteAccessError,
        NakCode::RemoteOperationalError,
        NakCode::InvalidRdRequest,
    ];

    /// snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            NakCode::PsnSequenceError => "psn_sequence_error",
            NakCode::InvalidRequest => "invalid_request",
            NakCode::RemoteAccessError => "remote_access_error",
            NakCode::RemoteOperationalError => "remote_operational_error",
            NakCode::InvalidRdRequest => "invalid_rd_request",
        }
    }

    /// The inverse of [`NakCode::name`].
    pub fn from_name(n: &str) -> Option<NakCode> {
        NakCode::ALL.into_iter().find(|c| c.name() == n)
    }
}

/// The meaning of the syndrome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement with a credit count (0..=31; 31 = invalid).
    Ack {
        /// Credit count.
        credits: u8,
    },
    /// Receiver not ready: retry after the encoded timer (0..=31, IBA Table 45).
    RnrNak {
        /// RNR NAK timer field.
        timer: u8,
    },
    /// Negative acknowledgement.
    Nak(NakCode),
}

impl Syndrome {
    /// Decode a syndrome byte; `BadSyndrome` for the reserved type or NAK codes.
    pub fn from_u8(s: u8) -> Result<Syndrome, Error> {
        let v = s & 0x1f;
        match (s >> 5) & 3 {
            0 => Ok(Syndrome::Ack { credits: v }),
            1 => Ok(Syndrome::RnrNak { timer: v }),
            3 => NakCode::ALL
                .get(usize::from(v))
                .map(|c| Syndrome::Nak(*c))
                .ok_or(Error::BadSyndrome),
            _ => Err(Error::BadSyndrome),
        }
    }

    /// Encode; `FieldRange` for credits or a timer above 31.
    pub fn to_u8(self) -> Result<u8, Error> {
        match self {
            Syndrome::Ack { credits } => fits(credits.into(), 0x1f).map(|_| credits),
            Syndrome::RnrNak { timer } => fits(timer.into(), 0x1f).map(|_| 0x20 | timer),
            Syndrome::Nak(c) => Ok(0x60 | c as u8),
        }
    }

    /// "ack", "rnr_nak" or "nak".
    pub fn kind(self) -> &'static str {
        match self {
            Syndrome::Ack { .. } => "ack",
            Syndrome::RnrNak { .. } => "rnr_nak",
            Syndrome::Nak(_) => "nak",
        }
    }
}

/// An AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// What the acknowledgement says.
    pub syndrome: Syndrome,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl Repr {
    /// Parse.
    pub fn parse(buf: &[u8]) -> Result<Repr, Error> {
        let p = Packet::new_checked(buf)?;
        Ok(Repr {
            syndrome: Syndrome::from_u8(p.syndrome_raw())?,
            msn: p.msn(),
        })
    }
    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Emit.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        fits(self.msn, MAX_U24)?;
        let s = self.syndrome.to_u8()?;
        let b = Packet::new_checked(buf)?.into_inner();
        b[field::SYNDROME] = s;
        wr24(&mut b[field::MSN], self.msn);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndromes() {
        assert_eq!(Syndrome::from_u8(0x1f), Ok(Syndrome::Ack { credits: 31 }));
        assert_eq!(Syndrome::from_u8(0x9f), Ok(Syndrome::Ack { credits: 31 }));
        assert_eq!(Syndrome::from_u8(0x2e), Ok(Syndrome::RnrNak { timer: 14 }));
        assert_eq!(
            Syndrome::from_u8(0x60),
            Ok(Syndrome::Nak(NakCode::PsnSequenceError))
        );
        assert_eq!(
            Syndrome::from_u8(0x62),
            Ok(Syndrome::Nak(NakCode::RemoteAccessError))
        );
        assert_eq!(Syndrome::from_u8(0x65), Err(Error::BadSyndrome));
        assert_eq!(Syndrome::from_u8(0x40), Err(Error::BadSyndrome));
        for s in 0..=255u8 {
            if let Ok(x) = Syndrome::from_u8(s) {
                assert_eq!(x.to_u8(), Ok(s & 0x7f));
            }
        }
        assert_eq!(
            Syndrome::Ack { credits: 32 }.to_u8(),
            Err(Error::FieldRange)
        );
        let r = Repr {
            syndrome: Syndrome::Nak(NakCode::InvalidRequest),
            msn: 0x010203,
        };
        let mut b = [0u8; 4];
        r.emit(&mut b).unwrap();
        assert_eq!(b, [0x61, 1, 2, 3]);
        assert_eq!(Repr::parse(&b), Ok(r));
    }
}
