//! RoCEv2 (RDMA over Converged Ethernet, routable) wire formats: Ethernet / IPv4 / UDP
//! (destination port [`ROCE_PORT`]; the headers are `dta_net`'s, checked by [`FrameRepr`] for
//! what RoCEv2 allows) carrying an InfiniBand Base Transport Header, the extension
//! headers of the opcodes DTA uses (RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, DETH), the
//! payload padded to 4 bytes, and the invariant CRC ([`icrc`], computed exactly as Linux rxe
//! does). This is the transport the translator writes collector memory with ([DTA §3, §5.2-5.3];
//! the header fields of [P4-RDMA §V]), and [`cm`] holds the RDMA CM MADs that set up
//! the queue pairs. Views follow smoltcp's `wire` style (`Packet<T: AsRef<[u8]>>` with checked
//! accessors, `Repr` with `parse`/`emit`/`buffer_len`); [`FrameRepr`] parses and emits a whole
//! frame. Parsing never allocates and never panics; each rejection is one [`Error`] whose
//! [`Error::reason`] is a counter name (`docs/rdma.md`, "Packet formats").
//!
//! ```
//! use dta_roce::{bth, ethernet, ipv4, reth, udp, FrameRepr, Opcode};
//!
//! // An RDMA WRITE Only of a 5-byte report ([DTA §5.3]: the translator writes collector memory).
//! let eth = ethernet::Repr { dst: [2, 0, 0, 0, 0, 2], src: [2, 0, 0, 0, 0, 1], ..Default::default() };
//! let ip = ipv4::Repr { src: [10, 0, 0, 1], dst: [10, 0, 0, 2], ..Default::default() };
//! let udp = udp::Repr { src_port: 0xc0de, dst_port: dta_roce::ROCE_PORT, checksum: 0 };
//! let bth = bth::Repr { ack_req: true, ..bth::Repr::new(Opcode::RcWriteOnly, 0x11, 0x100) };
//! let write = FrameRepr {
//!     reth: Some(reth::Repr { va: 0x7f00_0000_1000, rkey: 0x1234, dma_len: 5 }),
//!     payload: &[10, 0, 0, 1, 0xee],
//!     ..FrameRepr::new(eth, ip, udp, bth)
//! };
//! let mut buf = [0u8; 128];
//! let n = write.emit(&mut buf).unwrap(); // pads to 8 bytes, fills lengths, checksum, ICRC
//! assert_eq!(n, 14 + 20 + 8 + 12 + 16 + 8 + 4);
//! let parsed = FrameRepr::parse(&buf[..n]).unwrap();
//! assert_eq!((parsed.bth.pad_cnt, parsed.payload), (3, &[10, 0, 0, 1, 0xee][..]));
//! buf[n - 1] ^= 1;
//! assert_eq!(FrameRepr::parse(&buf[..n]).unwrap_err().reason(), "bad_icrc");
//! assert!(!FrameRepr::decode(&buf[..n]).unwrap().icrc_valid);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod aeth;
/// The Ethernet, IPv4 and UDP headers of a RoCEv2 frame: `dta_net`'s, the one implementation;
/// [`FrameRepr`] checks what RoCEv2 restricts (EtherType IPv4, protocol UDP, destination port
/// [`ROCE_PORT`], no IP fragment, [RoCEv2 A17.4]).
pub use dta_net::{ethernet, ipv4, udp};
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod cm;
pub mod deth;
mod frame;
pub mod immdt;
#[cfg(feature = "json")]
mod json;
mod opcode;
pub mod reth;

pub use frame::{icrc, Decoded, FrameRepr, ICRC_LEN};
#[cfg(feature = "json")]
pub use json::{cm_to_json, frame_to_json, to_json};
pub use opcode::{Layout, Opcode};

/// UDP destination port of RoCEv2 (IANA "roce").
pub const ROCE_PORT: u16 = 4791;
/// The queue pair of the General Services Interface, which carries CM MADs.
pub const QP1: u32 = 1;
/// The well-known Q_Key of QP1 (IBA 1.2 §9.6.1.1 / Linux `IB_QP1_QKEY`).
pub const QP1_QKEY: u32 = 0x8001_0000;
/// The payload of a CNP (opcode [`Opcode::Cnp`]): 16 reserved bytes, sent as zeros
/// ([RoCEv2 A17.9.3]).
pub const CNP_PAYLOAD_LEN: usize = 16;
/// The default (full-membership) partition key.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// Why a RoCEv2 frame was rejected (or, when emitting, could not be built). [`Error::reason`] is
/// the counter name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Error {
    /// The frame (or buffer, when emitting) ends inside a header.
    #[error("truncated: the frame ends inside a header")]
    Truncated,
    /// The EtherType is not IPv4 (0x0800).
    #[error("not an IPv4 frame")]
    NotIpv4,
    /// IPv4 version is not 4, the header has options (IHL != 5) or the datagram is a fragment.
    #[error("bad IPv4 header (version, options or fragment)")]
    BadIpHeader,
    /// The IPv4 header checksum does not verify.
    #[error("bad IPv4 header checksum")]
    BadIpChecksum,
    /// The IPv4 protocol is not UDP.
    #[error("not a UDP datagram")]
    NotUdp,
    /// The UDP destination port is not 4791.
    #[error("UDP destination port is not the RoCEv2 port 4791")]
    NotRocePort,
    /// Inconsistent lengths: IPv4 total length, UDP length, a transport length that is not a
    /// multiple of 4, a pad count larger than the payload, or a payload on an opcode that has
    /// none (or, when emitting, a frame longer than IPv4 can carry).
    #[error("bad length")]
    BadLength,
    /// BTH transport header version (TVer) is not 0.
    #[error("bad BTH transport version")]
    BadVersion,
    /// BTH opcode this implementation does not know.
    #[error("unknown or unsupported BTH opcode")]
    BadOpcode,
    /// AETH syndrome of a reserved type or NAK code.
    #[error("reserved AETH syndrome")]
    BadSyndrome,
    /// The invariant CRC does not match.
    #[error("bad ICRC")]
    BadIcrc,
    /// Emitting: the extension headers given do not match the opcode's.
    #[error("extension headers do not match the opcode")]
    HeaderMismatch,
    /// Emitting: a field value does not fit its wire width (24-bit QPN/PSN/MSN, 5-bit credits ...).
    #[error("field value out of range")]
    FieldRange,
    /// CM: a MAD that is not a CM MAD (base version 1, class 0x07, class version 2).
    #[error("not a CM MAD")]
    NotCm,
    /// CM: an attribute id this implementation does not know.
    #[error("unknown CM attribute")]
    UnknownAttribute,
}

impl Error {
    /// Every error, in check order (counter arrays index by this).
    pub const ALL: [Error; 15] = [
        Error::Truncated,
        Error::NotIpv4,
        Error::BadIpHeader,
        Error::BadIpChecksum,
        Error::NotUdp,
        Error::NotRocePort,
        Error::BadLength,
        Error::BadVersion,
        Error::BadOpcode,
        Error::BadSyndrome,
        Error::BadIcrc,
        Error::HeaderMismatch,
        Error::FieldRange,
        Error::NotCm,
        Error::UnknownAttribute,
    ];

    /// The snake_case counter name.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Truncated => "truncated",
            Error::NotIpv4 => "not_ipv4",
            Error::BadIpHeader => "bad_ip_header",
            Error::BadIpChecksum => "bad_ip_checksum",
            Error::NotUdp => "not_udp",
            Error::NotRocePort => "not_roce_port",
            Error::BadLength => "bad_length",
            Error::BadVersion => "bad_version",
            Error::BadOpcode => "bad_opcode",
            Error::BadSyndrome => "bad_syndrome",
            Error::BadIcrc => "bad_icrc",
            Error::HeaderMismatch => "header_mismatch",
            Error::FieldRange => "field_range",
            Error::NotCm => "not_cm",
            Error::UnknownAttribute => "unknown_attribute",
        }
    }

    /// The inverse of [`Error::reason`].
    pub fn from_reason(reason: &str) -> Option<Error> {
        Error::ALL.into_iter().find(|e| e.reason() == reason)
    }
}

/// The Ethernet, IPv4 and UDP rejections, as the RoCEv2 counter names have always told them:
/// the IPv4 version, IHL and fragment checks are one `BadIpHeader`, a length that does not fit
/// 16 bits is `BadLength`. The VLAN and TCP errors cannot come from the untagged Ethernet, IPv4
/// and UDP parsers used here; a tagged frame would be `NotIpv4`, a TCP header `NotUdp`.
impl From<dta_net::Error> for Error {
    fn from(e: dta_net::Error) -> Error {
        match e {
            dta_net::Error::Truncated => Error::Truncated,
            dta_net::Error::TooManyVlanTags => Error::NotIpv4,
            dta_net::Error::BadIpVersion
            | dta_net::Error::BadIpHeaderLen
            | dta_net::Error::Ipv4Options
            | dta_net::Error::Ipv4Fragment => Error::BadIpHeader,
            dta_net::Error::BadIpChecksum => Error::BadIpChecksum,
            dta_net::Error::BadTcpHeaderLen | dta_net::Error::NotUdp => Error::NotUdp,
            dta_net::Error::TooLong => Error::BadLength,
        }
    }
}

/// The largest value of a 24-bit field (QPN, PSN, MSN).
pub const MAX_U24: u32 = 0x00ff_ffff;

pub(crate) use dta_net::be::{rd16, rd24, rd32, rd64, wr16, wr24, wr32, wr64};

/// `FieldRange` unless `v <= max`.
#[inline]
pub(crate) fn fits(v: u32, max: u32) -> Result<(), Error> {
    if v <= max {
        Ok(())
    } else {
        Err(Error::FieldRange)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_reasons_distinct_and_round_trip() {
        for (i, e) in Error::ALL.iter().enumerate() {
            assert_eq!(Error::from_reason(e.reason()), Some(*e));
            for f in &Error::ALL[i + 1..] {
                assert_ne!(e.reason(), f.reason());
            }
        }
        assert_eq!(Error::from_reason("bad_icrc"), Some(Error::BadIcrc));
        assert_eq!(Error::from_reason("nope"), None);
    }

    #[test]
    fn byte_helpers() {
        let mut b = [0u8; 8];
        wr24(&mut b, 0x123456);
        assert_eq!(&b[..3], &[0x12, 0x34, 0x56]);
        assert_eq!(rd24(&b), 0x123456);
        wr64(&mut b, 0x0102030405060708);
        assert_eq!(rd64(&b), 0x0102030405060708);
        assert_eq!(fits(MAX_U24 + 1, MAX_U24), Err(Error::FieldRange));
    }
}
