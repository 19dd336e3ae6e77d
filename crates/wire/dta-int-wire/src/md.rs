// Size: INT-MD and INT-MX metadata stacks share the instruction bitmap and the per-hop field table
// ([INT v2.1 §5.8]).
//! The INT headers themselves (INT Dataplane Specification v2.1): the 4-byte TCP/UDP shim
//! (§5.7.3 "INT over TCP/UDP"), the 12-byte INT-MD metadata header and its per-hop metadata
//! stack (§5.8 "INT-MD Metadata Header Format"), and the 12-byte INT-MX header (§5.9 "INT-MX
//! Metadata Header Format"). Bits are numbered from the MSB as in the spec.

use super::Error;
use crate::{be_u16, be_u32, be_u64};

/// Instruction bitmap bits (INT v2.1 §5.8; bit 0 is the MSB of the 16-bit field).
pub mod instr {
    /// bit 0: node (switch) id, 4 bytes.
    pub const NODE_ID: u16 = 0x8000;
    /// bit 1: level 1 ingress port id (2) + egress port id (2).
    pub const L1_PORTS: u16 = 0x4000;
    /// bit 2: hop latency, 4 bytes.
    pub const HOP_LATENCY: u16 = 0x2000;
    /// bit 3: queue id (1) + queue occupancy (3).
    pub const QUEUE: u16 = 0x1000;
    /// bit 4: ingress timestamp, 8 bytes.
    pub const INGRESS_TS: u16 = 0x0800;
    /// bit 5: egress timestamp, 8 bytes.
    pub const EGRESS_TS: u16 = 0x0400;
    /// bit 6: level 2 ingress port id (4) + egress port id (4).
    pub const L2_PORTS: u16 = 0x0200;
    /// bit 7: egress port tx utilization, 4 bytes.
    pub const TX_UTIL: u16 = 0x0100;
    /// bit 8: buffer id (1) + buffer occupancy (3).
    pub const BUFFER: u16 = 0x0080;
    /// bits 9..=14: reserved; a hop fills each with 4 bytes of 0xFF.
    pub const RESERVED: u16 = 0x007e;
    /// bit 15: checksum complement, 4 bytes, last in the hop's metadata.
    pub const CHECKSUM: u16 = 0x0001;
    /// The bits whose metadata is 8 bytes (bits 4, 5, 6).
    pub const EIGHT_BYTE: u16 = INGRESS_TS | EGRESS_TS | L2_PORTS;
}

/// Words (4 bytes) of baseline metadata one hop adds for `bitmap`: 1 per set bit, 2 for bits
/// 4..=6 (INT v2.1 §5.8: "each requires 8 bytes of metadata").
pub const fn baseline_words(bitmap: u16) -> u32 {
    IntVersion::V2.baseline_words(bitmap)
}

/// The INT specification a block follows: the shim, the INT-MD header and the per-hop metadata
/// sizes differ between them (docs/int.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IntVersion {
    /// INT v1.0 ([INT v1.0 §4.6.1, §4.7]): shim `Type (8) | Reserved (8) | Length (8, the shim
    /// included) | DSCP (6) | R R`; 8-byte header `Ver=1 | Rep | C | E | M | R | Hop ML |
    /// RemainingHopCnt`, `Instruction Bitmap | Reserved`; timestamps are 4 bytes, bits 8..=14
    /// reserved.
    V1,
    /// INT v2.x ([INT v2.1 §5.7.3, §5.8]).
    #[default]
    V2,
}

impl IntVersion {
    /// The Ver field of its INT-MD header.
    pub const fn number(self) -> u8 {
        match self {
            IntVersion::V1 => 1,
            IntVersion::V2 => INT_VERSION,
        }
    }

    /// Instruction bits whose metadata is 8 bytes: the L2 port ids in v1.0 (its timestamps are
    /// 4 bytes), bits 4..=6 in v2.x.
    pub const fn eight_byte(self) -> u16 {
        match self {
            IntVersion::V1 => instr::L2_PORTS,
            IntVersion::V2 => instr::EIGHT_BYTE,
        }
    }

    /// Reserved instruction bits (4 bytes each, skipped): 8..=14 in v1.0, 9..=14 in v2.x.
    pub const fn reserved(self) -> u16 {
        match self {
            IntVersion::V1 => instr::RESERVED | instr::BUFFER,
            IntVersion::V2 => instr::RESERVED,
        }
    }

    /// Words of baseline metadata one hop adds for `bitmap`.
    pub const fn baseline_words(self, bitmap: u16) -> u32 {
        bitmap.count_ones() + (bitmap & self.eight_byte()).count_ones()
    }

    /// Bytes of the INT-MD (or MX) header after the shim: 8 in v1.0, 12 in v2.x.
    pub const fn header_len(self) -> usize {
        match self {
            IntVersion::V1 => 8,
            IntVersion::V2 => 12,
        }
    }
}

/// The INT header type carried in the shim (INT v2.1 §5.3 "INT Header Types").
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntType {
    /// 1: INT-MD (eMbed Data), hop-by-hop.
    Md = 1,
    /// 2: INT-Destination (source to sink only).
    Destination = 2,
    /// 3: INT-MX (eMbed instructions); each hop exports its own report.
    Mx = 3,
}

impl IntType {
    /// "int_md", "int_dst" or "int_mx".
    pub fn name(self) -> &'static str {
        match self {
            IntType::Md => "int_md",
            IntType::Destination => "int_dst",
            IntType::Mx => "int_mx",
        }
    }
}

impl TryFrom<u8> for IntType {
    type Error = Error;
    fn try_from(v: u8) -> Result<Self, Error> {
        match v {
            1 => Ok(IntType::Md),
            2 => Ok(IntType::Destination),
            3 => Ok(IntType::Mx),
            _ => Err(Error::UnknownIntType),
        }
    }
}

/// Byte ranges of the shim and the MD/MX headers (relative to the shim's first byte).
pub mod field {
    use core::ops::Range;
    /// Type (bits 0..4) | NPT (bits 4..6) | R R.
    pub const SHIM_TYPE_NPT: usize = 0;
    /// Length in 4-byte words, shim excluded (since INT v2.0).
    pub const SHIM_LENGTH: usize = 1;
    /// UDP port (NPT 1), IP proto (NPT 2, low byte) or DSCP (NPT 0, high 6 bits of byte 3).
    pub const SHIM_NEXT: Range<usize> = 2..4;
    /// Shim length.
    pub const SHIM_LEN: usize = 4;
    /// MD/MX: Ver (4) | D | E | M | reserved...
    pub const HDR_VER_FLAGS: usize = 4;
    /// MD: reserved (low 3 bits of byte 6 high part) | Hop ML (low 5 bits).
    pub const HDR_HOP_ML: usize = 6;
    /// MD: remaining hop count.
    pub const HDR_RHC: usize = 7;
    /// Instruction bitmap.
    pub const HDR_INSTRUCTIONS: Range<usize> = 8..10;
    /// Domain specific id.
    pub const HDR_DOMAIN_ID: Range<usize> = 10..12;
    /// DS instruction.
    pub const HDR_DS_INSTRUCTIONS: Range<usize> = 12..14;
    /// DS flags.
    pub const HDR_DS_FLAGS: Range<usize> = 14..16;
    /// Shim + MD/MX header.
    pub const FIXED_LEN: usize = 16;
    /// MD/MX header length in words.
    pub const HDR_WORDS: u8 = 3;
    /// INT v1.0 shim: Length in words, the shim included.
    pub const V1_SHIM_LENGTH: usize = 2;
    /// INT v1.0 shim: DSCP (6) | R R.
    pub const V1_SHIM_DSCP: usize = 3;
    /// INT v1.0 INT-MD header length in words.
    pub const V1_HDR_WORDS: u8 = 2;
}

/// The 4-byte INT shim for TCP/UDP (INT v2.1 §5.7.3):
/// `Type(4) | NPT(2) | R(2) | Length(8) | UDP port, IP proto, or DSCP (16)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShimRepr {
    /// The INT header that follows.
    pub int_type: IntType,
    /// Next Protocol Type: 0 (INT detected by DSCP or probe marker), 1 (original UDP payload
    /// follows; `next` is the original UDP destination port), 2 (the original L4 header follows;
    /// the low byte of `next` is the original IP protocol).
    pub npt: u8,
    /// INT metadata header + stack in 4-byte words, the shim excluded.
    pub length: u8,
    /// The last 16 bits as carried (see `npt`); for NPT 0 and 2 reserved bits are kept as read.
    /// INT v1.0: its last byte (original DSCP in the high 6 bits), as NPT 0.
    pub next: u16,
    /// The INT version of the block, told by the shim's first byte: v1.0's Type is a whole
    /// byte (1 or 2), v2.x's a high nibble (1..=3).
    pub version: IntVersion,
}

impl ShimRepr {
    /// Parse the first 4 bytes of `buf`. A first byte below 0x10 is an INT v1.0 shim ([INT v1.0
    /// §4.6.1]: Type 1 hop-by-hop, 2 destination; its Length counts the shim, so `length` is
    /// kept as the words after the shim, as v2.x carries it).
    #[inline]
    pub fn parse(buf: &[u8]) -> Result<ShimRepr, Error> {
        let b = buf.get(..field::SHIM_LEN).ok_or(Error::Truncated)?;
        if b[0] >> 4 == 0 {
            let int_type = match b[0] {
                1 => IntType::Md,
                2 => IntType::Destination,
                _ => return Err(Error::UnknownIntType),
            };
            let length = b[field::V1_SHIM_LENGTH]
                .checked_sub(1)
                .ok_or(Error::BadIntLength)?;
            return Ok(ShimRepr {
                int_type,
                npt: 0,
                length,
                next: u16::from(b[field::V1_SHIM_DSCP]),
                version: IntVersion::V1,
            });
        }
        let int_type = IntType::try_from(b[0] >> 4)?;
        let npt = (b[0] >> 2) & 3;
        if npt == 3 {
            return Err(Error::BadNpt);
        }
        Ok(ShimRepr {
            int_type,
            npt,
            length: b[field::SHIM_LENGTH],
            next: be_u16(&b[field::SHIM_NEXT]),
            version: IntVersion::V2,
        })
    }

    /// Write the 4 bytes (reserved bits zero), in the layout of `version`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), Error> {
        if self.npt > 2 {
            return Err(Error::BadNpt);
        }
        let b = buf.get_mut(..field::SHIM_LEN).ok_or(Error::Truncated)?;
        match self.version {
            IntVersion::V1 => {
                if self.npt != 0 || self.int_type == IntType::Mx || self.next > 0xff {
                    return Err(Error::BadNpt);
                }
                b[0] = self.int_type as u8;
                b[1] = 0;
                b[field::V1_SHIM_LENGTH] = self.length.checked_add(1).ok_or(Error::BadIntLength)?;
                b[field::V1_SHIM_DSCP] = self.next as u8;
            }
            IntVersion::V2 => {
                b[0] = ((self.int_type as u8) << 4) | (self.npt << 2);
                b[1] = self.length;
                b[2..4].copy_from_slice(&self.next.to_be_bytes());
            }
        }
        Ok(())
    }

    /// Bytes of the whole INT block: shim plus `length` words.
    pub fn total_len(&self) -> usize {
        field::SHIM_LEN + 4 * usize::from(self.length)
    }

    /// NPT 1: the original UDP destination port.
    pub fn original_udp_port(&self) -> Option<u16> {
        (self.npt == 1).then_some(self.next)
    }

    /// NPT 2: the original IP protocol (the second byte).
    pub fn original_ip_proto(&self) -> Option<u8> {
        (self.npt == 2).then_some(self.next as u8)
    }

    /// NPT 0: the original DSCP optionally carried in the first 6 bits of the second byte.
    pub fn original_dscp(&self) -> Option<u8> {
        (self.npt == 0).then_some((self.next as u8) >> 2)
    }
}

/// The INT-MD metadata header (INT v2.1 §5.8):
/// `Ver=2 | D | E | M | R(12) | Hop ML(5) | Remaining Hop Count(8)`,
/// `Instruction Bitmap(16) | Domain Specific ID(16)`, `DS Instruction(16) | DS Flags(16)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MdHeader {
    /// D: discard (the sink drops the packet after extracting INT).
    pub discard: bool,
    /// E: max hop count exceeded.
    pub hop_count_exceeded: bool,
    /// M: MTU exceeded.
    pub mtu_exceeded: bool,
    /// Per-hop metadata length in words (0..=31).
    pub hop_ml: u8,
    /// Remaining hop count.
    pub remaining_hop_count: u8,
    /// Instruction bitmap (see [`instr`]).
    pub instructions: u16,
    /// Domain specific id (0 = default domain).
    pub domain_id: u16,
    /// Domain specific instructions.
    pub ds_instructions: u16,
    /// Domain specific flags.
    pub ds_flags: u16,
}

/// The INT version this crate parses (INT v2.x: "Ver ... Should be 2").
pub const INT_VERSION: u8 = 2;

fn flags_byte(d: bool, e: bool, m: bool) -> u8 {
    (INT_VERSION << 4) | (u8::from(d) << 3) | (u8::from(e) << 2) | (u8::from(m) << 1)
}

impl MdHeader {
    /// Parse 12 bytes (the header after the shim).
    pub fn parse(h: &[u8]) -> Result<MdHeader, Error> {
        let h = h.get(..12).ok_or(Error::Truncated)?;
        if h[0] >> 4 != INT_VERSION {
            return Err(Error::BadIntVersion);
        }
        Ok(MdHeader {
            discard: h[0] & 0x08 != 0,
            hop_count_exceeded: h[0] & 0x04 != 0,
            mtu_exceeded: h[0] & 0x02 != 0,
            hop_ml: h[2] & 0x1f,
            remaining_hop_count: h[3],
            instructions: be_u16(&h[4..6]),
            domain_id: be_u16(&h[6..8]),
            ds_instructions: be_u16(&h[8..10]),
            ds_flags: be_u16(&h[10..12]),
        })
    }

    /// Parse the 8-byte INT v1.0 header ([INT v1.0 §4.7]): `Ver=1 (4) | Rep (2) | C | E | M |
    /// Reserved (10) | Hop ML (5) | RemainingHopCnt (8)`, `Instruction Bitmap (16) | Reserved
    /// (16)`. v1.0 has no D flag and no domain specific fields (they read 0); Rep and C
    /// (replication) are not kept.
    pub fn parse_v1(h: &[u8]) -> Result<MdHeader, Error> {
        let h = h.get(..8).ok_or(Error::Truncated)?;
        if h[0] >> 4 != IntVersion::V1.number() {
            return Err(Error::BadIntVersion);
        }
        Ok(MdHeader {
            discard: false,
            hop_count_exceeded: h[0] & 0x01 != 0,
            mtu_exceeded: h[1] & 0x80 != 0,
            hop_ml: h[2] & 0x1f,
            remaining_hop_count: h[3],
            instructions: be_u16(&h[4..6]),
            ..MdHeader::default()
        })
    }

    /// Write the 8-byte INT v1.0 header (Rep, C and reserved bits zero; D and the domain
    /// specific fields have no place in it).
    pub fn emit_v1(&self, h: &mut [u8]) -> Result<(), Error> {
        if self.hop_ml > 31 {
            return Err(Error::BadHopMl);
        }
        let h = h.get_mut(..8).ok_or(Error::Truncated)?;
        h[0] = (IntVersion::V1.number() << 4) | u8::from(self.hop_count_exceeded);
        h[1] = u8::from(self.mtu_exceeded) << 7;
        h[2] = self.hop_ml;
        h[3] = self.remaining_hop_count;
        h[4..6].copy_from_slice(&self.instructions.to_be_bytes());
        h[6..8].fill(0);
        Ok(())
    }

    /// Parse the header of `version` (12 or 8 bytes).
    pub fn parse_as(version: IntVersion, h: &[u8]) -> Result<MdHeader, Error> {
        match version {
            IntVersion::V1 => MdHeader::parse_v1(h),
            IntVersion::V2 => MdHeader::parse(h),
        }
    }

    /// Write the header of `version` (12 or 8 bytes).
    pub fn emit_as(&self, version: IntVersion, h: &mut [u8]) -> Result<(), Error> {
        match version {
            IntVersion::V1 => self.emit_v1(h),
            IntVersion::V2 => self.emit(h),
        }
    }

    /// Write 12 bytes (reserved bits zero).
    pub fn emit(&self, h: &mut [u8]) -> Result<(), Error> {
        if self.hop_ml > 31 {
            return Err(Error::BadHopMl);
        }
        let h = h.get_mut(..12).ok_or(Error::Truncated)?;
        h[0] = flags_byte(self.discard, self.hop_count_exceeded, self.mtu_exceeded);
        h[1] = 0;
        h[2] = self.hop_ml;
        h[3] = self.remaining_hop_count;
        h[4..6].copy_from_slice(&self.instructions.to_be_bytes());
        h[6..8].copy_from_slice(&self.domain_id.to_be_bytes());
        h[8..10].copy_from_slice(&self.ds_instructions.to_be_bytes());
        h[10..12].copy_from_slice(&self.ds_flags.to_be_bytes());
        Ok(())
    }
}

/// The INT-MX header (INT v2.1 §5.9): `Ver=2 | D | E | M | R(25)`, then the same three
/// 16-bit pairs as INT-MD. No metadata stack follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MxHeader {
    /// D.
    pub discard: bool,
    /// E (not applicable to INT-MX; carried as read).
    pub hop_count_exceeded: bool,
    /// M (not applicable to INT-MX; carried as read).
    pub mtu_exceeded: bool,
    /// Instruction bitmap: what each hop exports in its telemetry report.
    pub instructions: u16,
    /// Domain specific id.
    pub domain_id: u16,
    /// Domain specific instructions.
    pub ds_instructions: u16,
    /// Domain specific flags.
    pub ds_flags: u16,
}

impl MxHeader {
    /// Parse 12 bytes.
    pub fn parse(h: &[u8]) -> Result<MxHeader, Error> {
        let md = MdHeader::parse(h)?;
        Ok(MxHeader {
            discard: md.discard,
            hop_count_exceeded: md.hop_count_exceeded,
            mtu_exceeded: md.mtu_exceeded,
            instructions: md.instructions,
            domain_id: md.domain_id,
            ds_instructions: md.ds_instructions,
            ds_flags: md.ds_flags,
        })
    }

    /// Write 12 bytes (reserved bits zero).
    pub fn emit(&self, h: &mut [u8]) -> Result<(), Error> {
        MdHeader {
            discard: self.discard,
            hop_count_exceeded: self.hop_count_exceeded,
            mtu_exceeded: self.mtu_exceeded,
            hop_ml: 0,
            remaining_hop_count: 0,
            instructions: self.instructions,
            domain_id: self.domain_id,
            ds_instructions: self.ds_instructions,
            ds_flags: self.ds_flags,
        }
        .emit(h)
    }
}

/// The metadata of instruction bits 1..=8 (ports, hop latency, queue, timestamps, egress
/// utilisation, buffer): the one table of the per-bit fields, shared by a hop's metadata
/// (INT v2.1 §5.8, [`HopMetadata`]) and an individual report's (TR v2.0 §3.3.1,
/// [`crate::ReportMetadata`]), decoded and written by one function each. `None` is "not
/// requested" (bit clear) or "not available" (the all-ones reserved value, 4 or 8 bytes of 0xFF);
/// a 4-byte word that packs two values (ports, queue, buffer) is all-ones as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Baseline {
    /// bit 1: level 1 ingress port id.
    pub l1_ingress_port: Option<u16>,
    /// bit 1: level 1 egress port id.
    pub l1_egress_port: Option<u16>,
    /// bit 2: hop latency.
    pub hop_latency: Option<u32>,
    /// bit 3: queue id.
    pub queue_id: Option<u8>,
    /// bit 3: queue occupancy (24 bits).
    pub queue_occupancy: Option<u32>,
    /// bit 4: ingress timestamp.
    pub ingress_timestamp: Option<u64>,
    /// bit 5: egress timestamp.
    pub egress_timestamp: Option<u64>,
    /// bit 6: level 2 ingress port id.
    pub l2_ingress_port: Option<u32>,
    /// bit 6: level 2 egress port id.
    pub l2_egress_port: Option<u32>,
    /// bit 7: egress port tx utilization.
    pub egress_tx_util: Option<u32>,
    /// bit 8: buffer id.
    pub buffer_id: Option<u8>,
    /// bit 8: buffer occupancy (24 bits).
    pub buffer_occupancy: Option<u32>,
}

/// Reads fixed-size fields in order; the caller has checked the total length.
pub(crate) struct Cursor<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) off: usize,
}

impl<'a> Cursor<'a> {
    #[inline(always)]
    pub(crate) fn take(&mut self, n: usize) -> &'a [u8] {
        let s = &self.bytes[self.off..self.off + n];
        self.off += n;
        s
    }

    /// A 4-byte field, `None` when all-ones.
    #[inline(always)]
    pub(crate) fn opt32(&mut self) -> Option<u32> {
        let v = be_u32(self.take(4));
        (v != u32::MAX).then_some(v)
    }

    /// An 8-byte field, `None` when all-ones.
    #[inline(always)]
    pub(crate) fn opt64(&mut self) -> Option<u64> {
        let v = be_u64(self.take(8));
        (v != u64::MAX).then_some(v)
    }

    /// A word of an 8-bit id and a 24-bit value (queue, buffer), `None` when all-ones.
    #[inline(always)]
    fn id24(&mut self) -> Option<(u8, u32)> {
        let w = be_u32(self.take(4));
        (w != u32::MAX).then_some(((w >> 24) as u8, w & 0x00ff_ffff))
    }
}

/// Writes fields in order into a buffer of the right length.
pub(crate) struct Writer<'a> {
    pub(crate) buf: &'a mut [u8],
    pub(crate) off: usize,
}

impl Writer<'_> {
    pub(crate) fn put(&mut self, b: &[u8]) {
        self.buf[self.off..self.off + b.len()].copy_from_slice(b);
        self.off += b.len();
    }

    /// A 4-byte field, all-ones for `None`.
    pub(crate) fn w32(&mut self, v: Option<u32>) {
        self.put(&v.unwrap_or(u32::MAX).to_be_bytes());
    }

    /// An 8-bit id and a 24-bit value in one word, all-ones unless both are known.
    fn id24(&mut self, id: Option<u8>, v: Option<u32>) {
        self.put(&match (id, v) {
            (Some(a), Some(b)) => ((u32::from(a) << 24) | (b & 0x00ff_ffff)).to_be_bytes(),
            _ => [0xff; 4],
        });
    }
}

impl Baseline {
    /// Decode bits 1..=8 of `bitmap` at `cur`, in the layout of `version` (v1.0: 4-byte
    /// timestamps, bit 8 reserved).
    #[inline]
    pub(crate) fn decode(cur: &mut Cursor<'_>, bitmap: u16, version: IntVersion) -> Baseline {
        let mut b = Baseline::default();
        let has = |bit: u16| bitmap & bit != 0;
        if has(instr::L1_PORTS) {
            let w = be_u32(cur.take(4));
            if w != u32::MAX {
                b.l1_ingress_port = Some((w >> 16) as u16);
                b.l1_egress_port = Some(w as u16);
            }
        }
        if has(instr::HOP_LATENCY) {
            b.hop_latency = cur.opt32();
        }
        if has(instr::QUEUE) {
            (b.queue_id, b.queue_occupancy) = cur.id24().unzip();
        }
        // v2.x timestamps are 8 bytes, v1.0's 4 ([INT v1.0 §4.7]).
        let ts = |cur: &mut Cursor<'_>| match version {
            IntVersion::V1 => cur.opt32().map(u64::from),
            IntVersion::V2 => cur.opt64(),
        };
        if has(instr::INGRESS_TS) {
            b.ingress_timestamp = ts(cur);
        }
        if has(instr::EGRESS_TS) {
            b.egress_timestamp = ts(cur);
        }
        if has(instr::L2_PORTS) {
            b.l2_ingress_port = cur.opt32();
            b.l2_egress_port = cur.opt32();
        }
        if has(instr::TX_UTIL) {
            b.egress_tx_util = cur.opt32();
        }
        if has(instr::BUFFER) && version == IntVersion::V2 {
            (b.buffer_id, b.buffer_occupancy) = cur.id24().unzip();
        }
        b
    }

    /// Write bits 1..=8 of `bitmap` (`None` as all-ones) in the layout of `version`.
    pub(crate) fn emit(&self, w: &mut Writer<'_>, bitmap: u16, version: IntVersion) {
        let has = |bit: u16| bitmap & bit != 0;
        if has(instr::L1_PORTS) {
            w.put(&match (self.l1_ingress_port, self.l1_egress_port) {
                (Some(a), Some(b)) => ((u32::from(a) << 16) | u32::from(b)).to_be_bytes(),
                _ => [0xff; 4],
            });
        }
        if has(instr::HOP_LATENCY) {
            w.w32(self.hop_latency);
        }
        if has(instr::QUEUE) {
            w.id24(self.queue_id, self.queue_occupancy);
        }
        for (bit, v) in [
            (instr::INGRESS_TS, self.ingress_timestamp),
            (instr::EGRESS_TS, self.egress_timestamp),
        ] {
            if has(bit) {
                match version {
                    IntVersion::V1 => w.w32(v.map(|t| t as u32)),
                    IntVersion::V2 => w.put(&v.unwrap_or(u64::MAX).to_be_bytes()),
                }
            }
        }
        if has(instr::L2_PORTS) {
            w.w32(self.l2_ingress_port);
            w.w32(self.l2_egress_port);
        }
        if has(instr::TX_UTIL) {
            w.w32(self.egress_tx_util);
        }
        if has(instr::BUFFER) && version == IntVersion::V2 {
            w.id24(self.buffer_id, self.buffer_occupancy);
        }
    }
}

/// One hop's metadata, decoded per instruction bit: the node id (bit 0), the [`Baseline`]
/// fields (bits 1..=8), the checksum complement (bit 15) and the domain specific words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HopMetadata<'a> {
    /// bit 0: node id.
    pub node_id: Option<u32>,
    /// bits 1..=8.
    pub baseline: Baseline,
    /// bit 15: checksum complement.
    pub checksum_complement: Option<u32>,
    /// Domain specific metadata: the words of Hop ML beyond the baseline, between the baseline
    /// metadata and the checksum complement (INT v2.1 §5.8 "DS Instruction").
    pub domain_specific: &'a [u8],
}

impl<'a> HopMetadata<'a> {
    /// Decode one hop of exactly `hop_ml * 4` bytes per `bitmap` in the layout of `version`.
    /// The caller has checked `version.baseline_words(bitmap) <= hop_ml` and the length.
    #[inline]
    fn decode(bytes: &'a [u8], bitmap: u16, version: IntVersion) -> HopMetadata<'a> {
        let mut cur = Cursor { bytes, off: 0 };
        let has = |bit: u16| bitmap & bit != 0;
        let node_id = if has(instr::NODE_ID) {
            cur.opt32()
        } else {
            None
        };
        let baseline = Baseline::decode(&mut cur, bitmap, version);
        // Reserved bits: 4 bytes each, skipped.
        cur.off += 4 * (bitmap & version.reserved()).count_ones() as usize;
        let cs = usize::from(has(instr::CHECKSUM)) * 4;
        let ds_len = bytes.len().saturating_sub(cur.off + cs);
        let domain_specific = cur.take(ds_len);
        let checksum_complement = if has(instr::CHECKSUM) {
            cur.opt32()
        } else {
            None
        };
        HopMetadata {
            node_id,
            baseline,
            checksum_complement,
            domain_specific,
        }
    }

    /// Bytes this hop occupies for `bitmap`: baseline plus its domain specific metadata.
    pub fn wire_len(&self, bitmap: u16) -> usize {
        self.wire_len_as(IntVersion::V2, bitmap)
    }

    /// [`HopMetadata::wire_len`] in the layout of `version`.
    pub fn wire_len_as(&self, version: IntVersion, bitmap: u16) -> usize {
        version.baseline_words(bitmap) as usize * 4 + self.domain_specific.len()
    }

    /// Write this hop per `bitmap` (`None` as all-ones, reserved bits as 0xFFFFFFFF) into
    /// exactly [`HopMetadata::wire_len`] bytes at the start of `buf`.
    pub fn emit(&self, bitmap: u16, buf: &mut [u8]) -> Result<usize, Error> {
        self.emit_as(IntVersion::V2, bitmap, buf)
    }

    /// [`HopMetadata::emit`] in the layout of `version` (v1.0: 4-byte timestamps, their low 32
    /// bits; bit 8 reserved).
    pub fn emit_as(
        &self,
        version: IntVersion,
        bitmap: u16,
        buf: &mut [u8],
    ) -> Result<usize, Error> {
        let n = self.wire_len_as(version, bitmap);
        if self.domain_specific.len() % 4 != 0 {
            return Err(Error::BadHopMl);
        }
        let buf = buf.get_mut(..n).ok_or(Error::Truncated)?;
        let mut w = Writer { buf, off: 0 };
        if bitmap & instr::NODE_ID != 0 {
            w.w32(self.node_id);
        }
        self.baseline.emit(&mut w, bitmap, version);
        for _ in 0..(bitmap & version.reserved()).count_ones() {
            w.put(&[0xff; 4]);
        }
        w.put(self.domain_specific);
        if bitmap & instr::CHECKSUM != 0 {
            w.w32(self.checksum_complement);
        }
        Ok(n)
    }
}

/// The INT-MD metadata stack, newest hop first (INT v2.1 §5.8: "the most recently added
/// metadata appears at the top of the stack"). Borrowed; hops are decoded on access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HopStack<'a> {
    bytes: &'a [u8],
    instructions: u16,
    hop_ml: u8,
    version: IntVersion,
}

impl<'a> HopStack<'a> {
    /// Check and wrap a stack: `hop_ml` must hold the baseline metadata of `instructions`, and
    /// the stack must be a whole number of hops (`bad_hop_ml`, `bad_int_length`).
    pub fn new(bytes: &'a [u8], instructions: u16, hop_ml: u8) -> Result<HopStack<'a>, Error> {
        HopStack::new_as(IntVersion::V2, bytes, instructions, hop_ml)
    }

    /// [`HopStack::new`] for a stack of `version` (its per-hop metadata sizes).
    pub fn new_as(
        version: IntVersion,
        bytes: &'a [u8],
        instructions: u16,
        hop_ml: u8,
    ) -> Result<HopStack<'a>, Error> {
        if version.baseline_words(instructions) > u32::from(hop_ml) {
            return Err(Error::BadHopMl);
        }
        if hop_ml == 0 {
            if !bytes.is_empty() {
                return Err(Error::BadHopMl);
            }
        } else if bytes.len() % (usize::from(hop_ml) * 4) != 0 {
            return Err(Error::BadIntLength);
        }
        Ok(HopStack {
            bytes,
            instructions,
            hop_ml,
            version,
        })
    }

    /// The INT version whose layout the hops follow.
    pub fn version(&self) -> IntVersion {
        self.version
    }

    /// Number of hops (derived from the shim Length and Hop ML).
    pub fn len(&self) -> usize {
        if self.hop_ml == 0 {
            0
        } else {
            self.bytes.len() / (usize::from(self.hop_ml) * 4)
        }
    }

    /// No hop has pushed metadata yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The raw stack.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Hop `i`, 0 being the newest (the last switch before the sink).
    #[inline]
    pub fn get(&self, i: usize) -> Option<HopMetadata<'a>> {
        let w = usize::from(self.hop_ml) * 4;
        if w == 0 {
            return None;
        }
        let s = self.bytes.get(i.checked_mul(w)?..(i + 1).checked_mul(w)?)?;
        Some(HopMetadata::decode(s, self.instructions, self.version))
    }

    /// The hops, newest first (one pass over whole hops, no per-hop range check).
    pub fn iter(&self) -> impl Iterator<Item = HopMetadata<'a>> + 'a {
        let (instructions, version) = (self.instructions, self.version);
        self.bytes
            .chunks_exact(usize::from(self.hop_ml).max(1) * 4)
            .take(self.len())
            .map(move |s| HopMetadata::decode(s, instructions, version))
    }
}

/// What follows the shim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntHeader<'a> {
    /// INT-MD header and its metadata stack.
    Md {
        /// The header.
        header: MdHeader,
        /// The stack, newest hop first.
        stack: HopStack<'a>,
    },
    /// INT-MX header.
    Mx(MxHeader),
    /// INT-Destination: its body, not interpreted.
    Destination(&'a [u8]),
}

/// A parsed INT block (shim + header [+ stack]) and, when found in a packet, its flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntRepr<'a> {
    /// The shim.
    pub shim: ShimRepr,
    /// The INT header.
    pub header: IntHeader<'a>,
    /// The original packet's 5-tuple ([`super::find_int`] fills it; `None` from
    /// [`IntRepr::parse`]).
    pub flow: Option<super::FlowKey>,
}

impl<'a> IntRepr<'a> {
    /// Parse an INT block starting at the shim. Bytes after `4 + Length * 4` are the payload
    /// and are not looked at.
    pub fn parse(buf: &'a [u8]) -> Result<IntRepr<'a>, Error> {
        let shim = ShimRepr::parse(buf)?;
        let body = buf
            .get(field::SHIM_LEN..shim.total_len())
            .ok_or(Error::Truncated)?;
        let v = shim.version;
        let header = match shim.int_type {
            IntType::Md | IntType::Mx if usize::from(shim.length) * 4 < v.header_len() => {
                return Err(Error::BadIntLength)
            }
            IntType::Md => {
                let header = MdHeader::parse_as(v, body)?;
                let stack = HopStack::new_as(
                    v,
                    &body[v.header_len()..],
                    header.instructions,
                    header.hop_ml,
                )?;
                IntHeader::Md { header, stack }
            }
            IntType::Mx => {
                if shim.length != field::HDR_WORDS {
                    return Err(Error::BadIntLength);
                }
                IntHeader::Mx(MxHeader::parse(body)?)
            }
            IntType::Destination => IntHeader::Destination(body),
        };
        Ok(IntRepr {
            shim,
            header,
            flow: None,
        })
    }

    /// Bytes of the INT block (shim included).
    pub fn buffer_len(&self) -> usize {
        self.shim.total_len()
    }

    /// Re-emit the block as parsed (reserved bits zero); the stack is copied as is.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let n = self.buffer_len();
        let v = self.shim.version;
        let body_len = match self.header {
            IntHeader::Md { stack, .. } => v.header_len() + stack.as_bytes().len(),
            IntHeader::Mx(_) => 12,
            IntHeader::Destination(b) => b.len(),
        };
        if body_len != n - field::SHIM_LEN {
            return Err(Error::BadIntLength);
        }
        let buf = buf.get_mut(..n).ok_or(Error::Truncated)?;
        self.shim.emit(buf)?;
        match self.header {
            IntHeader::Md { header, stack } => {
                let h = field::SHIM_LEN + v.header_len();
                header.emit_as(v, &mut buf[field::SHIM_LEN..h])?;
                buf[h..].copy_from_slice(stack.as_bytes());
            }
            IntHeader::Mx(h) => h.emit(&mut buf[4..16])?,
            IntHeader::Destination(b) => buf[4..].copy_from_slice(b),
        }
        Ok(n)
    }

    /// The INT-MD stack, if this is INT-MD.
    pub fn stack(&self) -> Option<HopStack<'a>> {
        match self.header {
            IntHeader::Md { stack, .. } => Some(stack),
            _ => None,
        }
    }
}

/// Emit an INT-MD block from hop values (newest first): the shim's Length is computed, each hop
/// written per `header.instructions` and `header.hop_ml` (domain specific bytes must make each
/// hop exactly Hop ML words). Returns the bytes written. For the load generator.
pub fn emit_md(
    npt: u8,
    next: u16,
    header: &MdHeader,
    hops: &[HopMetadata<'_>],
    buf: &mut [u8],
) -> Result<usize, Error> {
    emit_md_as(IntVersion::V2, npt, next, header, hops, buf)
}

/// [`emit_md`] in the layout of `version`; INT v1.0 takes NPT 0 only, `next` being its DSCP
/// byte (the original DSCP in the high 6 bits).
pub fn emit_md_as(
    version: IntVersion,
    npt: u8,
    next: u16,
    header: &MdHeader,
    hops: &[HopMetadata<'_>],
    buf: &mut [u8],
) -> Result<usize, Error> {
    let hop_len = usize::from(header.hop_ml) * 4;
    let words = version.header_len() / 4 + hops.len() * usize::from(header.hop_ml);
    let length = u8::try_from(words).map_err(|_| Error::BadIntLength)?;
    if version.baseline_words(header.instructions) > u32::from(header.hop_ml) {
        return Err(Error::BadHopMl);
    }
    let shim = ShimRepr {
        int_type: IntType::Md,
        npt,
        length,
        next,
        version,
    };
    let n = shim.total_len();
    if buf.len() < n {
        return Err(Error::Truncated);
    }
    shim.emit(buf)?;
    let mut off = field::SHIM_LEN + version.header_len();
    header.emit_as(version, &mut buf[field::SHIM_LEN..off])?;
    for h in hops {
        if h.wire_len_as(version, header.instructions) != hop_len {
            return Err(Error::BadHopMl);
        }
        off += h.emit_as(version, header.instructions, &mut buf[off..])?;
    }
    Ok(n)
}

/// Emit an INT-MX block (shim Length 3).
pub fn emit_mx(npt: u8, next: u16, header: &MxHeader, buf: &mut [u8]) -> Result<usize, Error> {
    let shim = ShimRepr {
        int_type: IntType::Mx,
        npt,
        length: field::HDR_WORDS,
        next,
        version: IntVersion::V2,
    };
    if buf.len() < field::FIXED_LEN {
        return Err(Error::Truncated);
    }
    shim.emit(buf)?;
    header.emit(&mut buf[4..16])?;
    Ok(field::FIXED_LEN)
}
