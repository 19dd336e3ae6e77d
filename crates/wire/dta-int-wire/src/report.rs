// Size: three versions of one format (telemetry report v0.5, v1.0, v2.0 [TR v2.0]) behind one enum,
// so a caller never needs to know which version arrived.
//! Telemetry reports: what INT sinks (and INT-XD/MX hops) send to a collector over UDP.
//! Telemetry Report Format v2.0 (group header, one or more individual reports, RepType 1 INT
//! main contents, TLVs) and the fixed headers of v0.5 and v1.0 that deployed switches still
//! send. Section numbers are those of the v2.0 specification ("§3.2 Telemetry Report Group
//! Header", "§3.3 Individual Report Header", "§3.3.1 Individual Report Main Contents for RepType
//! 1 (INT)", "§3.3.2 Individual Report Inner Contents for InType 1 (TLV)").

use super::md::{baseline_words, instr, Baseline, Cursor, IntVersion, Writer};
use super::{find_int, find_int_ip, Error, IntDetect, IntRepr};
use crate::{be_u16, be_u32};

/// RepMdBits bit 15 (v2.0 §3.3.1): queue id (8) + drop reason (8) + padding (16). Bits 1..=8
/// are those of the INT instruction bitmap ([`instr`]); bit 0 and bits 9..=14 are reserved (4
/// bytes each, skipped).
pub const REP_MD_DROP: u16 = 0x0001;

/// RepType 0: inner only.
pub const REP_TYPE_INNER_ONLY: u8 = 0;
/// RepType 1: INT.
pub const REP_TYPE_INT: u8 = 1;
/// InType 1: TLVs.
pub const IN_TYPE_TLV: u8 = 1;
/// InType 3: Ethernet.
pub const IN_TYPE_ETHERNET: u8 = 3;
/// InType 4: IPv4.
pub const IN_TYPE_IPV4: u8 = 4;
/// InType 5: IPv6.
pub const IN_TYPE_IPV6: u8 = 5;
/// Report Length 0xFF: the report runs to the end of the packet.
pub const REPORT_LENGTH_TO_END: u8 = 0xff;

/// The Telemetry Report Group Header (v2.0 §3.2, 8 bytes):
/// `Ver=2 (4) | hw_id (6) | Sequence Number (22)`, `Node ID (32)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GroupHeader {
    /// Hardware subsystem of the node (6 bits).
    pub hw_id: u8,
    /// Sequence number per (node, hw_id) and destination (22 bits).
    pub sequence: u32,
    /// The reporting node.
    pub node_id: u32,
}

impl GroupHeader {
    /// Length in bytes.
    pub const LEN: usize = 8;

    /// Parse 8 bytes; the version must be 2.
    pub fn parse(b: &[u8]) -> Result<GroupHeader, Error> {
        let b = b.get(..Self::LEN).ok_or(Error::Truncated)?;
        let w = be_u32(&b[0..4]);
        if w >> 28 != 2 {
            return Err(Error::UnknownReportVersion);
        }
        Ok(GroupHeader {
            hw_id: ((w >> 22) & 0x3f) as u8,
            sequence: w & 0x3f_ffff,
            node_id: be_u32(&b[4..8]),
        })
    }

    /// Write 8 bytes (hw_id and sequence are masked to their widths).
    pub fn emit(&self, b: &mut [u8]) -> Result<(), Error> {
        let b = b.get_mut(..Self::LEN).ok_or(Error::Truncated)?;
        let w = (2u32 << 28) | (u32::from(self.hw_id & 0x3f) << 22) | (self.sequence & 0x3f_ffff);
        b[0..4].copy_from_slice(&w.to_be_bytes());
        b[4..8].copy_from_slice(&self.node_id.to_be_bytes());
        Ok(())
    }
}

/// The baseline metadata of an INT individual report, per RepMdBits (v2.0 §3.3.1): the
/// [`Baseline`] fields of bits 1..=8 (bit 0 is reserved in reports: the node id is in the group
/// header) and the drop word of bit 15.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportMetadata {
    /// bits 1..=8.
    pub baseline: Baseline,
    /// bit 15: queue id of the drop.
    pub drop_queue_id: Option<u8>,
    /// bit 15: drop reason.
    pub drop_reason: Option<u8>,
}

impl ReportMetadata {
    /// Decode `md` (exactly the baseline words of `bits`, checked by the caller).
    fn decode(md: &[u8], bits: u16) -> ReportMetadata {
        let mut cur = Cursor { bytes: md, off: 0 };
        if bits & instr::NODE_ID != 0 {
            cur.take(4);
        }
        let baseline = Baseline::decode(&mut cur, bits, IntVersion::V2);
        cur.off += 4 * (bits & instr::RESERVED).count_ones() as usize;
        let mut m = ReportMetadata {
            baseline,
            ..ReportMetadata::default()
        };
        if bits & REP_MD_DROP != 0 {
            let w = be_u32(cur.take(4));
            if w != u32::MAX {
                m.drop_queue_id = Some((w >> 24) as u8);
                m.drop_reason = Some((w >> 16) as u8);
            }
        }
        m
    }

    /// Write the baseline metadata of `bits` (`None` as all-ones, reserved bits as all-ones,
    /// the drop word's padding as zero); returns the bytes written.
    pub fn emit(&self, bits: u16, buf: &mut [u8]) -> Result<usize, Error> {
        let n = baseline_words(bits) as usize * 4;
        let buf = buf.get_mut(..n).ok_or(Error::Truncated)?;
        let mut w = Writer { buf, off: 0 };
        if bits & instr::NODE_ID != 0 {
            w.put(&[0xff; 4]);
        }
        self.baseline.emit(&mut w, bits, IntVersion::V2);
        for _ in 0..(bits & instr::RESERVED).count_ones() {
            w.put(&[0xff; 4]);
        }
        if bits & REP_MD_DROP != 0 {
            w.put(&match (self.drop_queue_id, self.drop_reason) {
                (Some(q), Some(r)) => [q, r, 0, 0],
                _ => [0xff; 4],
            });
        }
        Ok(n)
    }
}

/// Individual report main contents for RepType 1, INT (v2.0 §3.3.1):
/// `RepMdBits | Domain Specific ID`, `DSMdBits | DSMdstatus`, baseline then DS metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IntReportMain<'a> {
    /// Which baseline metadata is present.
    pub rep_md_bits: u16,
    /// INT domain.
    pub domain_id: u16,
    /// Which domain specific metadata is present.
    pub ds_md_bits: u16,
    /// Domain specific metadata status.
    pub ds_md_status: u16,
    /// The baseline metadata.
    pub metadata: ReportMetadata,
    /// Domain specific metadata: MD Length words beyond the baseline.
    pub ds_metadata: &'a [u8],
}

impl IntReportMain<'_> {
    /// MD Length in words: baseline + domain specific.
    pub fn md_words(&self) -> usize {
        baseline_words(self.rep_md_bits) as usize + self.ds_metadata.len() / 4
    }
}

/// One TLV of the inner contents (v2.0 §3.3.2): `TLVType (4) | Rsvd (4) | TLVLength (8,
/// words of data) | TLV Data Template (16)`, then the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tlv<'a> {
    /// 0 domain specific extension data, 1 Ethernet, 2 IPv4, 3 IPv6.
    pub tlv_type: u8,
    /// Template of domain specific data.
    pub template: u16,
    /// The data (TLVLength * 4 bytes).
    pub data: &'a [u8],
}

/// Iterator over TLVs; stops at the end or at the first malformed TLV (parsing already
/// rejected those).
#[derive(Debug, Clone)]
pub struct Tlvs<'a> {
    rest: &'a [u8],
}

fn next_tlv(rest: &[u8]) -> Result<Option<(Tlv<'_>, &[u8])>, Error> {
    if rest.is_empty() {
        return Ok(None);
    }
    let h = rest.get(..4).ok_or(Error::BadTlvLength)?;
    let n = usize::from(h[1]) * 4;
    let data = rest.get(4..4 + n).ok_or(Error::BadTlvLength)?;
    Ok(Some((
        Tlv {
            tlv_type: h[0] >> 4,
            template: be_u16(&h[2..4]),
            data,
        },
        &rest[4 + n..],
    )))
}

impl<'a> Iterator for Tlvs<'a> {
    type Item = Tlv<'a>;
    fn next(&mut self) -> Option<Tlv<'a>> {
        match next_tlv(self.rest) {
            Ok(Some((t, rest))) => {
                self.rest = rest;
                Some(t)
            }
            _ => None,
        }
    }
}

/// An individual report (v2.0 §3.3): `RepType (4) | InType (4) | Report Length (8) | MD Length
/// (8) | D | Q | F | I | Rsvd (4)`, the main contents and the inner contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndividualReport<'a> {
    /// 0 inner only, 1 INT, 2 IOAM (main contents not defined yet: kept in `inner`).
    pub rep_type: u8,
    /// 0 none, 1 TLV, 2 domain specific extension data, 3 Ethernet, 4 IPv4, 5 IPv6.
    pub in_type: u8,
    /// As carried: words after the first, or 0xFF "to the end of the packet".
    pub report_length: u8,
    /// As carried: metadata words (RepType 1).
    pub md_length: u8,
    /// D: a packet was dropped.
    pub dropped: bool,
    /// Q: congested queue association.
    pub congested_queue: bool,
    /// F: tracked flow association.
    pub tracked_flow: bool,
    /// I: intermediate report (sent by a transit node).
    pub intermediate: bool,
    /// RepType 1 main contents.
    pub main: Option<IntReportMain<'a>>,
    /// Inner contents (for RepType other than 0 and 1, everything after the first word).
    pub inner: &'a [u8],
}

impl<'a> IndividualReport<'a> {
    /// Parse one report at the start of `buf`; returns it and the bytes it took.
    pub fn parse(buf: &'a [u8]) -> Result<(IndividualReport<'a>, usize), Error> {
        let h = buf.get(..4).ok_or(Error::Truncated)?;
        let report_length = h[1];
        let body_len = if report_length == REPORT_LENGTH_TO_END {
            buf.len() - 4
        } else {
            usize::from(report_length) * 4
        };
        let body = buf.get(4..4 + body_len).ok_or(Error::Truncated)?;
        let mut r = IndividualReport {
            rep_type: h[0] >> 4,
            in_type: h[0] & 0x0f,
            report_length,
            md_length: h[2],
            dropped: h[3] & 0x80 != 0,
            congested_queue: h[3] & 0x40 != 0,
            tracked_flow: h[3] & 0x20 != 0,
            intermediate: h[3] & 0x10 != 0,
            main: None,
            inner: body,
        };
        if r.rep_type == REP_TYPE_INT {
            let md_end = 8 + usize::from(r.md_length) * 4;
            if body.len() < md_end {
                return Err(Error::BadReportLength);
            }
            let rep_md_bits = be_u16(&body[0..2]);
            let base = baseline_words(rep_md_bits) as usize * 4;
            if base > md_end - 8 {
                return Err(Error::BadMdLength);
            }
            r.main = Some(IntReportMain {
                rep_md_bits,
                domain_id: be_u16(&body[2..4]),
                ds_md_bits: be_u16(&body[4..6]),
                ds_md_status: be_u16(&body[6..8]),
                metadata: ReportMetadata::decode(&body[8..8 + base], rep_md_bits),
                ds_metadata: &body[8 + base..md_end],
            });
            r.inner = &body[md_end..];
        }
        if r.in_type == IN_TYPE_TLV && r.rep_type <= REP_TYPE_INT {
            let mut rest = r.inner;
            while let Some((_, next)) = next_tlv(rest)? {
                rest = next;
            }
        }
        Ok((r, 4 + body_len))
    }

    /// The TLVs of the inner contents (InType 1).
    pub fn tlvs(&self) -> Tlvs<'a> {
        Tlvs {
            rest: if self.in_type == IN_TYPE_TLV {
                self.inner
            } else {
                &[]
            },
        }
    }

    /// The truncated packet of the inner contents, with the type of its first header as an
    /// InType (3 Ethernet, 4 IPv4, 5 IPv6): directly (InType 3..=5) or the first packet TLV.
    pub fn inner_packet(&self) -> Option<(u8, &'a [u8])> {
        match self.in_type {
            IN_TYPE_ETHERNET | IN_TYPE_IPV4 | IN_TYPE_IPV6 => Some((self.in_type, self.inner)),
            IN_TYPE_TLV => self
                .tlvs()
                .find(|t| (1..=3).contains(&t.tlv_type))
                .map(|t| (t.tlv_type + 2, t.data)),
            _ => None,
        }
    }

    /// Parse the INT block of the inner packet (an INT-MD sink's stacked report), if any.
    pub fn inner_int(&self, detect: &IntDetect) -> Result<Option<IntRepr<'a>>, Error> {
        match self.inner_packet() {
            Some((IN_TYPE_ETHERNET, p)) => find_int(p, detect),
            Some((_, p)) => find_int_ip(p, detect),
            None => Ok(None),
        }
    }

    /// Bytes [`IndividualReport::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        4 + self.main.map_or(0, |m| 8 + m.md_words() * 4) + self.inner.len()
    }

    /// Write the report. Report Length and (RepType 1) MD Length are computed from the
    /// contents, except that a `report_length` of 0xFF is kept ("to the end"; the caller makes
    /// it the last report). A non-0xFF report's inner contents must be whole words.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let n = self.buffer_len();
        let buf = buf.get_mut(..n).ok_or(Error::Truncated)?;
        let (md_length, report_length) = match self.main {
            Some(m) => {
                if m.ds_metadata.len() % 4 != 0 {
                    return Err(Error::BadMdLength);
                }
                let md = u8::try_from(m.md_words()).map_err(|_| Error::BadMdLength)?;
                (md, n - 4)
            }
            None => (self.md_length, n - 4),
        };
        let report_length = if self.report_length == REPORT_LENGTH_TO_END {
            REPORT_LENGTH_TO_END
        } else {
            if report_length % 4 != 0 {
                return Err(Error::BadReportLength);
            }
            match u8::try_from(report_length / 4) {
                Ok(v) if v != REPORT_LENGTH_TO_END => v,
                _ => return Err(Error::BadReportLength),
            }
        };
        if self.rep_type > 15
            || self.in_type > 15
            || (self.main.is_some() != (self.rep_type == REP_TYPE_INT))
        {
            return Err(Error::BadReportLength);
        }
        buf[0] = (self.rep_type << 4) | self.in_type;
        buf[1] = report_length;
        buf[2] = md_length;
        buf[3] = (u8::from(self.dropped) << 7)
            | (u8::from(self.congested_queue) << 6)
            | (u8::from(self.tracked_flow) << 5)
            | (u8::from(self.intermediate) << 4);
        let mut off = 4;
        if let Some(m) = self.main {
            buf[4..6].copy_from_slice(&m.rep_md_bits.to_be_bytes());
            buf[6..8].copy_from_slice(&m.domain_id.to_be_bytes());
            buf[8..10].copy_from_slice(&m.ds_md_bits.to_be_bytes());
            buf[10..12].copy_from_slice(&m.ds_md_status.to_be_bytes());
            off = 12;
            off += m.metadata.emit(m.rep_md_bits, &mut buf[off..])?;
            buf[off..off + m.ds_metadata.len()].copy_from_slice(m.ds_metadata);
            off += m.ds_metadata.len();
        }
        buf[off..].copy_from_slice(self.inner);
        Ok(n)
    }
}

/// A v2.0 telemetry report: the group header and its (validated) individual reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportV2<'a> {
    /// The group header.
    pub group: GroupHeader,
    reports: &'a [u8],
    count: usize,
    /// The first individual report and its length, kept from validation so that iterating
    /// does not parse it twice (most reports carry one).
    first: (IndividualReport<'a>, usize),
}

impl<'a> ReportV2<'a> {
    /// Parse a UDP payload: the group header and every individual report (at least one); a
    /// report with Report Length 0xFF takes the rest of the packet.
    pub fn parse(buf: &'a [u8]) -> Result<ReportV2<'a>, Error> {
        let group = GroupHeader::parse(buf)?;
        let reports = &buf[GroupHeader::LEN..];
        if reports.is_empty() {
            return Err(Error::NoReports);
        }
        let first = IndividualReport::parse(reports)?;
        let mut rest = &reports[first.1..];
        let mut count = 1;
        while !rest.is_empty() {
            let (_, n) = IndividualReport::parse(rest)?;
            rest = &rest[n..];
            count += 1;
        }
        Ok(ReportV2 {
            group,
            reports,
            count,
            first,
        })
    }

    /// The first individual report (parsed once, at validation; borrowed, not copied).
    pub fn first(&self) -> &IndividualReport<'a> {
        &self.first.0
    }

    /// Number of individual reports.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Never true for a parsed report.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The individual reports, in order.
    pub fn iter(&self) -> impl Iterator<Item = IndividualReport<'a>> + 'a {
        let (first, n) = self.first;
        let mut rest = &self.reports[n..];
        core::iter::once(first).chain(core::iter::from_fn(move || {
            let (r, n) = IndividualReport::parse(rest).ok()?;
            rest = &rest[n..];
            Some(r)
        }))
    }
}

/// Writes a v2.0 telemetry report: the group header, then individual reports pushed in order.
#[derive(Debug)]
pub struct ReportBuilder<'b> {
    buf: &'b mut [u8],
    len: usize,
    count: usize,
    closed: bool,
}

impl<'b> ReportBuilder<'b> {
    /// Start a report in `buf` with `group`.
    pub fn new(buf: &'b mut [u8], group: &GroupHeader) -> Result<ReportBuilder<'b>, Error> {
        group.emit(buf)?;
        Ok(ReportBuilder {
            buf,
            len: GroupHeader::LEN,
            count: 0,
            closed: false,
        })
    }

    /// Append one individual report (see [`IndividualReport::emit`]). After a report with
    /// Report Length 0xFF nothing more can be pushed.
    pub fn push(&mut self, r: &IndividualReport<'_>) -> Result<(), Error> {
        if self.closed {
            return Err(Error::BadReportLength);
        }
        self.len += r.emit(&mut self.buf[self.len..])?;
        self.count += 1;
        self.closed = r.report_length == REPORT_LENGTH_TO_END;
        Ok(())
    }

    /// The report's length; at least one individual report is required.
    pub fn finish(self) -> Result<usize, Error> {
        if self.count == 0 {
            return Err(Error::NoReports);
        }
        Ok(self.len)
    }
}

/// The v0.5/v1.0 sub-header selected by NProto 1 or 2 (as in ONOS fabric.p4 and the p4lang
/// switch: the drop report and the switch-local report headers), before the Ethernet frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacySubHeader {
    /// NProto 0: the Ethernet frame follows the fixed header directly.
    None,
    /// NProto 1, 12 bytes: `switch_id (32) | ingress port (16) | egress port (16) | queue id
    /// (8) | drop reason (8) | pad (16)`.
    Drop {
        /// Switch id.
        switch_id: u32,
        /// Ingress port.
        ingress_port: u16,
        /// Egress port.
        egress_port: u16,
        /// Queue id.
        queue_id: u8,
        /// Drop reason.
        drop_reason: u8,
    },
    /// NProto 2, 16 bytes: `switch_id (32) | ingress port (16) | egress port (16) | queue id
    /// (8) | queue occupancy (24) | egress timestamp (32)`.
    Local {
        /// Switch id.
        switch_id: u32,
        /// Ingress port.
        ingress_port: u16,
        /// Egress port.
        egress_port: u16,
        /// Queue id.
        queue_id: u8,
        /// Queue occupancy (24 bits).
        queue_occupancy: u32,
        /// Egress timestamp.
        egress_timestamp: u32,
    },
}

/// A v0.5 or v1.0 telemetry report.
///
/// v0.5 (12 bytes): `Ver=0 (4) | NProto (4) | D | Q | F | reserved (15) | hw_id (6)`,
/// `sequence (32)`, `ingress timestamp (32)`.
///
/// v1.0 (16 bytes): `Ver=1 (4) | Len (4) | NProto (3) | RepMdBits (6) | reserved (6) | D | Q |
/// F | hw_id (6)`, `switch id (32)`, `sequence (32)`, `ingress timestamp (32)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegacyReport<'a> {
    /// 0 (v0.5) or 1 (v1.0).
    pub version: u8,
    /// v1.0 Len (header length in words, as carried); 0 for v0.5.
    pub length: u8,
    /// NProto: 0 Ethernet, 1 drop report, 2 switch-local report.
    pub next_proto: u8,
    /// v1.0 RepMdBits (6 bits, as carried); 0 for v0.5.
    pub rep_md_bits: u8,
    /// D: dropped.
    pub dropped: bool,
    /// Q: congested queue.
    pub congested_queue: bool,
    /// F: tracked flow.
    pub tracked_flow: bool,
    /// Hardware id (6 bits).
    pub hw_id: u8,
    /// v1.0 switch id.
    pub switch_id: Option<u32>,
    /// Sequence number.
    pub sequence: u32,
    /// Ingress timestamp.
    pub ingress_timestamp: u32,
    /// The NProto sub-header.
    pub sub: LegacySubHeader,
    /// The Ethernet frame of the reported packet.
    pub inner: &'a [u8],
}

impl<'a> LegacyReport<'a> {
    /// Parse a v0.5 or v1.0 report.
    pub fn parse(buf: &'a [u8]) -> Result<LegacyReport<'a>, Error> {
        let w = be_u32(buf.get(..4).ok_or(Error::Truncated)?);
        let version = (w >> 28) as u8;
        let mut r = LegacyReport {
            version,
            length: 0,
            next_proto: 0,
            rep_md_bits: 0,
            dropped: false,
            congested_queue: false,
            tracked_flow: false,
            hw_id: (w & 0x3f) as u8,
            switch_id: None,
            sequence: 0,
            ingress_timestamp: 0,
            sub: LegacySubHeader::None,
            inner: &[],
        };
        let fixed = match version {
            0 => {
                let b = buf.get(..12).ok_or(Error::Truncated)?;
                r.next_proto = ((w >> 24) & 0xf) as u8;
                r.dropped = w & (1 << 23) != 0;
                r.congested_queue = w & (1 << 22) != 0;
                r.tracked_flow = w & (1 << 21) != 0;
                r.sequence = be_u32(&b[4..8]);
                r.ingress_timestamp = be_u32(&b[8..12]);
                12
            }
            1 => {
                let b = buf.get(..16).ok_or(Error::Truncated)?;
                r.length = ((w >> 24) & 0xf) as u8;
                r.next_proto = ((w >> 21) & 0x7) as u8;
                r.rep_md_bits = ((w >> 15) & 0x3f) as u8;
                r.dropped = w & (1 << 8) != 0;
                r.congested_queue = w & (1 << 7) != 0;
                r.tracked_flow = w & (1 << 6) != 0;
                r.switch_id = Some(be_u32(&b[4..8]));
                r.sequence = be_u32(&b[8..12]);
                r.ingress_timestamp = be_u32(&b[12..16]);
                16
            }
            _ => return Err(Error::UnknownReportVersion),
        };
        let rest = &buf[fixed..];
        let (sub, n) = match r.next_proto {
            0 => (LegacySubHeader::None, 0),
            1 => {
                let s = rest.get(..12).ok_or(Error::Truncated)?;
                (
                    LegacySubHeader::Drop {
                        switch_id: be_u32(&s[0..4]),
                        ingress_port: be_u16(&s[4..6]),
                        egress_port: be_u16(&s[6..8]),
                        queue_id: s[8],
                        drop_reason: s[9],
                    },
                    12,
                )
            }
            2 => {
                let s = rest.get(..16).ok_or(Error::Truncated)?;
                (
                    LegacySubHeader::Local {
                        switch_id: be_u32(&s[0..4]),
                        ingress_port: be_u16(&s[4..6]),
                        egress_port: be_u16(&s[6..8]),
                        queue_id: s[8],
                        queue_occupancy: be_u32(&s[8..12]) & 0xff_ffff,
                        egress_timestamp: be_u32(&s[12..16]),
                    },
                    16,
                )
            }
            _ => return Err(Error::UnknownNextProto),
        };
        r.sub = sub;
        r.inner = &rest[n..];
        Ok(r)
    }

    /// Bytes [`LegacyReport::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        let fixed = if self.version == 0 { 12 } else { 16 };
        let sub = match self.sub {
            LegacySubHeader::None => 0,
            LegacySubHeader::Drop { .. } => 12,
            LegacySubHeader::Local { .. } => 16,
        };
        fixed + sub + self.inner.len()
    }

    /// Write the report as parsed: the fixed header of `version` (reserved bits zero; v1.0's
    /// Len as carried), the sub-header `sub` selects (its NProto), the frame.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let n = self.buffer_len();
        let buf = buf.get_mut(..n).ok_or(Error::Truncated)?;
        let next_proto: u32 = match self.sub {
            LegacySubHeader::None => 0,
            LegacySubHeader::Drop { .. } => 1,
            LegacySubHeader::Local { .. } => 2,
        };
        let flags =
            |d: bool, q: bool, f: bool| (u32::from(d) << 2) | (u32::from(q) << 1) | u32::from(f);
        let dqf = flags(self.dropped, self.congested_queue, self.tracked_flow);
        let hw = u32::from(self.hw_id & 0x3f);
        let fixed = match self.version {
            0 => {
                let w = (next_proto << 24) | (dqf << 21) | hw;
                buf[0..4].copy_from_slice(&w.to_be_bytes());
                buf[4..8].copy_from_slice(&self.sequence.to_be_bytes());
                buf[8..12].copy_from_slice(&self.ingress_timestamp.to_be_bytes());
                12
            }
            1 => {
                let len = self.length & 0xf;
                let w = (1 << 28)
                    | (u32::from(len) << 24)
                    | (next_proto << 21)
                    | (u32::from(self.rep_md_bits & 0x3f) << 15)
                    | (dqf << 6)
                    | hw;
                buf[0..4].copy_from_slice(&w.to_be_bytes());
                buf[4..8].copy_from_slice(&self.switch_id.unwrap_or(0).to_be_bytes());
                buf[8..12].copy_from_slice(&self.sequence.to_be_bytes());
                buf[12..16].copy_from_slice(&self.ingress_timestamp.to_be_bytes());
                16
            }
            _ => return Err(Error::UnknownReportVersion),
        };
        let rest = &mut buf[fixed..];
        let sub = match self.sub {
            LegacySubHeader::None => 0,
            LegacySubHeader::Drop {
                switch_id,
                ingress_port,
                egress_port,
                queue_id,
                drop_reason,
            } => {
                rest[0..4].copy_from_slice(&switch_id.to_be_bytes());
                rest[4..6].copy_from_slice(&ingress_port.to_be_bytes());
                rest[6..8].copy_from_slice(&egress_port.to_be_bytes());
                rest[8] = queue_id;
                rest[9] = drop_reason;
                rest[10..12].fill(0);
                12
            }
            LegacySubHeader::Local {
                switch_id,
                ingress_port,
                egress_port,
                queue_id,
                queue_occupancy,
                egress_timestamp,
            } => {
                rest[0..4].copy_from_slice(&switch_id.to_be_bytes());
                rest[4..6].copy_from_slice(&ingress_port.to_be_bytes());
                rest[6..8].copy_from_slice(&egress_port.to_be_bytes());
                let q = (u32::from(queue_id) << 24) | (queue_occupancy & 0xff_ffff);
                rest[8..12].copy_from_slice(&q.to_be_bytes());
                rest[12..16].copy_from_slice(&egress_timestamp.to_be_bytes());
                16
            }
        };
        rest[sub..].copy_from_slice(self.inner);
        Ok(n)
    }

    /// Parse the INT block of the reported Ethernet frame, if any.
    pub fn inner_int(&self, detect: &IntDetect) -> Result<Option<IntRepr<'a>>, Error> {
        if self.inner.is_empty() {
            return Ok(None);
        }
        find_int(self.inner, detect)
    }
}

/// A telemetry report of any supported version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TelemetryReport<'a> {
    /// Version 2.0.
    V2(ReportV2<'a>),
    /// Version 0.5 or 1.0.
    Legacy(LegacyReport<'a>),
}

/// Parse a telemetry report (a UDP payload), dispatching on the version nibble: 0 (v0.5), 1
/// (v1.0), 2 (v2.0).
pub fn parse_report(buf: &[u8]) -> Result<TelemetryReport<'_>, Error> {
    match buf.first().map(|b| b >> 4) {
        None => Err(Error::Truncated),
        Some(0 | 1) => LegacyReport::parse(buf).map(TelemetryReport::Legacy),
        Some(2) => ReportV2::parse(buf).map(TelemetryReport::V2),
        Some(_) => Err(Error::UnknownReportVersion),
    }
}
