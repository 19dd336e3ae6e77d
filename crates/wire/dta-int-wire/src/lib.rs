//! In-band Network Telemetry (INT) and telemetry reports on the wire, the input of dta's INT
//! sink ([INT-NIC §III]; DTA's headline workload, [DTA §6.1]). Zero-copy parsing of INT v2.1 over
//! TCP and UDP (shim, INT-MD header and per-hop stack, INT-MX; [INT v2.1 §5]) and of INT v1.0
//! INT-MD ([INT v1.0 §4.6.1, §4.7]) into the same types, configurable INT
//! detection in Ethernet frames ([`find_int`]; the Ethernet, VLAN, IP and L4 headers around INT are
//! `dta_net`'s views), and telemetry reports v2.0 plus the older v0.5
//! and v1.0 ([`report::parse_report`], [TR v2.0 §3]); emitters for INT-MD, INT-MX and report
//! v2.0; a JSON rendering for `dta decode` (feature `json`). Nothing here allocates on the parse
//! path: stacks and report groups are borrowed and decoded on access, and every rejection is one
//! [`Error`]. Byte layouts and how they map onto DTA primitives: `docs/int.md`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod md;
pub mod report;

#[cfg(feature = "json")]
mod json;

pub use md::{
    baseline_words, emit_md, emit_md_as, emit_mx, field, instr, Baseline, HopMetadata, HopStack,
    IntHeader, IntRepr, IntType, IntVersion, MdHeader, MxHeader, ShimRepr, INT_VERSION,
};
pub use report::{
    parse_report, GroupHeader, IndividualReport, IntReportMain, LegacyReport, LegacySubHeader,
    ReportBuilder, ReportMetadata, ReportV2, TelemetryReport, Tlv,
};

#[cfg(feature = "json")]
pub use json::{decode, hop_to_json, int_to_json, report_to_json, to_json, Decoded};

use dta_net::{ethernet, ipv4, ipv6, tcp, udp, IPPROTO_TCP, IPPROTO_UDP};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The UDP port telemetry reports are sent to by default (the INT sink's default listening
/// port, `dta int-sink`).
pub const REPORT_PORT: u16 = 32766;

/// Why an INT packet or a telemetry report was rejected. [`Error::reason`] is the counter name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Error {
    /// The buffer ends inside a header, the INT block or a report.
    #[error("truncated")]
    Truncated,
    /// More than two VLAN tags.
    #[error("bad Ethernet header")]
    BadL2Header,
    /// IP version or header length inconsistent.
    #[error("bad IP header")]
    BadL3Header,
    /// TCP data offset below 5.
    #[error("bad TCP header")]
    BadL4Header,
    /// Shim type other than 1 (INT-MD), 2 (INT-Destination), 3 (INT-MX); v1.0: other than 1
    /// (hop-by-hop) or 2 (destination).
    #[error("unknown INT header type")]
    UnknownIntType,
    /// Shim NPT 3.
    #[error("bad next protocol type")]
    BadNpt,
    /// Shim Length too short for the header (v1.0: 0, as it counts the shim), not a whole number
    /// of hops, or INT-MX with a stack.
    #[error("bad INT length")]
    BadIntLength,
    /// INT-MD/MX header version other than its shim's (2 for a v2.x shim, 1 for a v1.0 one).
    #[error("bad INT version")]
    BadIntVersion,
    /// Hop ML smaller than the instruction bitmap's baseline metadata (or 0 with a stack).
    #[error("bad hop metadata length")]
    BadHopMl,
    /// Telemetry report version other than 0 (v0.5), 1 (v1.0) or 2 (v2.0).
    #[error("unknown telemetry report version")]
    UnknownReportVersion,
    /// An individual report's Report Length is shorter than its main contents.
    #[error("bad report length")]
    BadReportLength,
    /// MD Length shorter than the metadata RepMdBits asks for.
    #[error("bad metadata length")]
    BadMdLength,
    /// A TLV runs past its report.
    #[error("bad TLV length")]
    BadTlvLength,
    /// A v2.0 report with no individual report.
    #[error("no individual reports")]
    NoReports,
    /// v0.5/v1.0 NProto not 0 (Ethernet), 1 (drop report) or 2 (switch-local report).
    #[error("unknown next protocol")]
    UnknownNextProto,
}

impl Error {
    /// Every error, in declaration order.
    pub const ALL: [Error; 15] = [
        Error::Truncated,
        Error::BadL2Header,
        Error::BadL3Header,
        Error::BadL4Header,
        Error::UnknownIntType,
        Error::BadNpt,
        Error::BadIntLength,
        Error::BadIntVersion,
        Error::BadHopMl,
        Error::UnknownReportVersion,
        Error::BadReportLength,
        Error::BadMdLength,
        Error::BadTlvLength,
        Error::NoReports,
        Error::UnknownNextProto,
    ];

    /// The snake_case counter name.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Truncated => "truncated",
            Error::BadL2Header => "bad_l2_header",
            Error::BadL3Header => "bad_l3_header",
            Error::BadL4Header => "bad_l4_header",
            Error::UnknownIntType => "unknown_int_type",
            Error::BadNpt => "bad_npt",
            Error::BadIntLength => "bad_int_length",
            Error::BadIntVersion => "bad_int_version",
            Error::BadHopMl => "bad_hop_ml",
            Error::UnknownReportVersion => "unknown_report_version",
            Error::BadReportLength => "bad_report_length",
            Error::BadMdLength => "bad_md_length",
            Error::BadTlvLength => "bad_tlv_length",
            Error::NoReports => "no_reports",
            Error::UnknownNextProto => "unknown_next_proto",
        }
    }

    /// The inverse of [`Error::reason`].
    pub fn from_reason(reason: &str) -> Option<Error> {
        Error::ALL.into_iter().find(|e| e.reason() == reason)
    }
}

/// The original packet's flow: the 5-tuple after undoing the INT source's changes (NPT 1: the
/// original UDP destination port from the shim; NPT 2: the original IP protocol from the shim
/// and the ports of the original L4 header after the INT block).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port (0 for protocols without ports).
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// IP protocol.
    pub protocol: u8,
}

impl FlowKey {
    /// The 13-byte IPv4 key DTA uses for INT path traces ([DTA Table 2]: Key-Write with 13-byte
    /// keys): `src(4) dst(4) sport(2) dport(2) proto(1)`, big-endian. `None` for IPv6.
    pub fn key13(&self) -> Option<[u8; 13]> {
        let (IpAddr::V4(s), IpAddr::V4(d)) = (self.src, self.dst) else {
            return None;
        };
        let mut k = [0u8; 13];
        k[0..4].copy_from_slice(&s.octets());
        k[4..8].copy_from_slice(&d.octets());
        k[8..10].copy_from_slice(&self.src_port.to_be_bytes());
        k[10..12].copy_from_slice(&self.dst_port.to_be_bytes());
        k[12] = self.protocol;
        Some(k)
    }

    /// The key bytes in the same layout for either family: 13 bytes for IPv4, 37 for IPv6.
    pub fn key_bytes<'b>(&self, out: &'b mut [u8; 37]) -> &'b [u8] {
        let mut n = 0;
        for a in [self.src, self.dst] {
            match a {
                IpAddr::V4(v) => {
                    out[n..n + 4].copy_from_slice(&v.octets());
                    n += 4;
                }
                IpAddr::V6(v) => {
                    out[n..n + 16].copy_from_slice(&v.octets());
                    n += 16;
                }
            }
        }
        out[n..n + 2].copy_from_slice(&self.src_port.to_be_bytes());
        out[n + 2..n + 4].copy_from_slice(&self.dst_port.to_be_bytes());
        out[n + 4] = self.protocol;
        &out[..n + 5]
    }
}

/// How INT is recognised in a packet (INT v2.1 §5.7.3 lists three ways; a domain should use
/// one). Checked in this order: UDP destination port, DSCP, probe marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IntDetect {
    /// UDP destination port announcing a shim right after the UDP header.
    pub udp_port: Option<u16>,
    /// `(value, mask)`: INT when `dscp & mask == value & mask` (a DSCP value, mask 0x3F, or a
    /// single DSCP bit); the shim follows the TCP (after options) or UDP header.
    pub dscp: Option<(u8, u8)>,
    /// 64-bit probe marker right after the TCP/UDP header, followed by the shim.
    pub probe_marker: Option<u64>,
}

impl IntDetect {
    /// Detection by UDP destination port only.
    pub fn udp_port(port: u16) -> IntDetect {
        IntDetect {
            udp_port: Some(port),
            ..IntDetect::default()
        }
    }
}

/// Find and parse the INT block of an Ethernet frame. `Ok(None)`: not IP, not TCP/UDP, a
/// non-first fragment, or no detection rule matched. An error: the headers are malformed or
/// the INT block matched but is malformed.
pub fn find_int<'a>(frame: &'a [u8], detect: &IntDetect) -> Result<Option<IntRepr<'a>>, Error> {
    let (ethertype, l3) = ethernet::Packet::new_checked(frame)?.untagged_payload()?;
    match ethertype {
        ethernet::ETHERTYPE_IPV4 | ethernet::ETHERTYPE_IPV6 => find_int_ip(l3, detect),
        _ => Ok(None),
    }
}

/// [`find_int`] for a packet starting at its IPv4 or IPv6 header (as telemetry reports carry
/// them with InType 4 and 5).
pub fn find_int_ip<'a>(packet: &'a [u8], detect: &IntDetect) -> Result<Option<IntRepr<'a>>, Error> {
    let (src, dst, proto, dscp, l4): (IpAddr, IpAddr, u8, u8, &'a [u8]) =
        match packet.first().map(|b| b >> 4) {
            None => return Err(Error::Truncated),
            Some(4) => {
                let ip = ipv4::Packet::new_checked(packet)?;
                if ip.frag_offset() != 0 {
                    return Ok(None);
                }
                (
                    IpAddr::V4(Ipv4Addr::from(ip.src())),
                    IpAddr::V4(Ipv4Addr::from(ip.dst())),
                    ip.protocol(),
                    ip.dscp(),
                    ip.into_payload(),
                )
            }
            Some(6) => {
                let ip = ipv6::Packet::new_checked(packet)?;
                (
                    IpAddr::V6(Ipv6Addr::from(ip.src())),
                    IpAddr::V6(Ipv6Addr::from(ip.dst())),
                    ip.next_header(),
                    ip.dscp(),
                    ip.into_payload(),
                )
            }
            Some(_) => return Err(Error::BadL3Header),
        };
    let (sport, dport, payload, is_udp) = match proto {
        IPPROTO_UDP => {
            let u = udp::Packet::new_checked(l4)?;
            (u.src_port(), u.dst_port(), u.into_payload(), true)
        }
        IPPROTO_TCP => {
            let t = tcp::Packet::new_checked(l4)?;
            (t.src_port(), t.dst_port(), t.into_payload(), false)
        }
        _ => return Ok(None),
    };
    let by_port = is_udp && detect.udp_port == Some(dport);
    let by_dscp = detect
        .dscp
        .is_some_and(|(v, m)| dscp & m & 0x3f == v & m & 0x3f);
    let int_bytes = if by_port || by_dscp {
        payload
    } else if let Some(marker) = detect.probe_marker {
        match payload.get(..8) {
            Some(m) if m == marker.to_be_bytes() => &payload[8..],
            _ => return Ok(None),
        }
    } else {
        return Ok(None);
    };
    let mut repr = IntRepr::parse(int_bytes)?;
    let mut flow = FlowKey {
        src,
        dst,
        src_port: sport,
        dst_port: dport,
        protocol: proto,
    };
    if let Some(p) = repr.shim.original_udp_port() {
        flow.dst_port = p;
    }
    if let Some(p) = repr.shim.original_ip_proto() {
        // The INT source inserted a UDP header: the original L4 header follows the INT block.
        flow.protocol = p;
        let inner = &int_bytes[repr.buffer_len()..];
        if p == IPPROTO_TCP || p == IPPROTO_UDP {
            let ports = inner.get(..4).ok_or(Error::Truncated)?;
            flow.src_port = crate::be_u16(&ports[0..2]);
            flow.dst_port = crate::be_u16(&ports[2..4]);
        } else {
            flow.src_port = 0;
            flow.dst_port = 0;
        }
    }
    repr.flow = Some(flow);
    Ok(Some(repr))
}

/// The outer headers' rejections as INT counter names: a VLAN stack too deep is `BadL2Header`,
/// any IP header fault `BadL3Header`, a TCP data offset below 5 `BadL4Header`. (`TooLong` is an
/// emitter's error and never comes from the views used here.)
impl From<dta_net::Error> for Error {
    fn from(e: dta_net::Error) -> Error {
        match e {
            dta_net::Error::Truncated => Error::Truncated,
            dta_net::Error::TooManyVlanTags => Error::BadL2Header,
            dta_net::Error::BadIpVersion
            | dta_net::Error::BadIpHeaderLen
            | dta_net::Error::Ipv4Options
            | dta_net::Error::Ipv4Fragment
            | dta_net::Error::BadIpChecksum
            | dta_net::Error::TooLong => Error::BadL3Header,
            dta_net::Error::BadTcpHeaderLen | dta_net::Error::NotUdp => Error::BadL4Header,
        }
    }
}

pub(crate) use dta_net::be::{rd16 as be_u16, rd32 as be_u32, rd64 as be_u64};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_distinct_and_round_trip() {
        for (i, e) in Error::ALL.iter().enumerate() {
            assert_eq!(Error::from_reason(e.reason()), Some(*e));
            for f in &Error::ALL[i + 1..] {
                assert_ne!(e.reason(), f.reason());
            }
        }
    }

    #[test]
    fn baseline_words_per_spec() {
        assert_eq!(baseline_words(0), 0);
        assert_eq!(baseline_words(instr::NODE_ID), 1);
        assert_eq!(baseline_words(instr::INGRESS_TS), 2);
        // All nine baseline bits + checksum: 1+1+1+1+2+2+2+1+1+1 = 13.
        assert_eq!(baseline_words(0xff81), 13);
    }

    #[test]
    fn key13_layout() {
        let f = FlowKey {
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            src_port: 1234,
            dst_port: 80,
            protocol: 6,
        };
        assert_eq!(
            f.key13().unwrap(),
            [10, 0, 0, 1, 10, 0, 0, 2, 0x04, 0xd2, 0x00, 0x50, 6]
        );
        let mut b = [0u8; 37];
        assert_eq!(f.key_bytes(&mut b), &f.key13().unwrap()[..]);
    }
}
