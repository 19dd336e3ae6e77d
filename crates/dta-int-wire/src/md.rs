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
    bitmap.count_ones() + (bitmap & instr::EIGHT_BYTE).count_ones()
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
    pub next: u16,
}

impl ShimRepr {
    /// Parse the first 4 bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<ShimRepr, Error> {
        let b = buf.get(..field::SHIM_LEN).ok_or(Error::Truncated)?;
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
        })
    }

    /// Write the 4 bytes (reserved bits zero).
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), Error> {
        if self.npt > 2 {
            return Err(Error::BadNpt);
        }
        let b = buf.get_mut(..field::SHIM_LEN).ok_or(Error::Truncated)?;
        b[0] = ((self.int_type as u8) << 4) | (self.npt << 2);
        b[1] = self.length;
        b[2..4].copy_from_slice(&self.next.to_be_bytes());
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

/// One hop's metadata, decoded per instruction bit. `None` is "not requested" (bit clear) or
/// "not available" (INT v2.1 §5.8: the hop wrote the all-ones reserved value, 4 or 8 bytes of
/// 0xFF); a 4-byte word that packs two values (ports, queue, buffer) is all-ones as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HopMetadata<'a> {
    /// bit 0: node id.
    pub node_id: Option<u32>,
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
    /// bit 15: checksum complement.
    pub checksum_complement: Option<u32>,
    /// Domain specific metadata: the words of Hop ML beyond the baseline, between the baseline
    /// metadata and the checksum complement (INT v2.1 §5.8 "DS Instruction").
    pub domain_specific: &'a [u8],
}

/// Reads fixed-size fields in order; the caller has checked the total length.
struct Cursor<'a> {
    bytes: &'a [u8],
    off: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> &'a [u8] {
        let s = &self.bytes[self.off..self.off + n];
        self.off += n;
        s
    }
}

fn opt32(v: u32) -> Option<u32> {
    (v != u32::MAX).then_some(v)
}

impl<'a> HopMetadata<'a> {
    /// Decode one hop of exactly `hop_ml * 4` bytes per `bitmap`. The caller has checked
    /// `baseline_words(bitmap) <= hop_ml` and the length.
    fn decode(bytes: &'a [u8], bitmap: u16) -> HopMetadata<'a> {
        let mut h = HopMetadata::default();
        let mut cur = Cursor { bytes, off: 0 };
        let has = |bit: u16| bitmap & bit != 0;
        if has(instr::NODE_ID) {
            h.node_id = opt32(be_u32(cur.take(4)));
        }
        if has(instr::L1_PORTS) {
            let w = be_u32(cur.take(4));
            if w != u32::MAX {
                h.l1_ingress_port = Some((w >> 16) as u16);
                h.l1_egress_port = Some(w as u16);
            }
        }
        if has(instr::HOP_LATENCY) {
            h.hop_latency = opt32(be_u32(cur.take(4)));
        }
        if has(instr::QUEUE) {
            let w = be_u32(cur.take(4));
            if w != u32::MAX {
                h.queue_id = Some((w >> 24) as u8);
                h.queue_occupancy = Some(w & 0x00ff_ffff);
            }
        }
        if has(instr::INGRESS_TS) {
            let v = be_u64(cur.take(8));
            h.ingress_timestamp = (v != u64::MAX).then_some(v);
        }
        if has(instr::EGRESS_TS) {
            let v = be_u64(cur.take(8));
            h.egress_timestamp = (v != u64::MAX).then_some(v);
        }
        if has(instr::L2_PORTS) {
            h.l2_ingress_port = opt32(be_u32(cur.take(4)));
            h.l2_egress_port = opt32(be_u32(cur.take(4)));
        }
        if has(instr::TX_UTIL) {
            h.egress_tx_util = opt32(be_u32(cur.take(4)));
        }
        if has(instr::BUFFER) {
            let w = be_u32(cur.take(4));
            if w != u32::MAX {
                h.buffer_id = Some((w >> 24) as u8);
                h.buffer_occupancy = Some(w & 0x00ff_ffff);
            }
        }
        // Reserved bits 9..=14: 4 bytes each, skipped.
        for _ in 0..(bitmap & instr::RESERVED).count_ones() {
            cur.take(4);
        }
        let cs = usize::from(has(instr::CHECKSUM)) * 4;
        let ds_len = bytes.len().saturating_sub(cur.off + cs);
        h.domain_specific = cur.take(ds_len);
        if has(instr::CHECKSUM) {
            h.checksum_complement = opt32(be_u32(cur.take(4)));
        }
        h
    }

    /// Bytes this hop occupies for `bitmap`: baseline plus its domain specific metadata.
    pub fn wire_len(&self, bitmap: u16) -> usize {
        baseline_words(bitmap) as usize * 4 + self.domain_specific.len()
    }

    /// Write this hop per `bitmap` (`None` as all-ones, reserved bits as 0xFFFFFFFF) into
    /// exactly [`HopMetadata::wire_len`] bytes at the start of `buf`.
    pub fn emit(&self, bitmap: u16, buf: &mut [u8]) -> Result<usize, Error> {
        let n = self.wire_len(bitmap);
        if self.domain_specific.len() % 4 != 0 {
            return Err(Error::BadHopMl);
        }
        let buf = buf.get_mut(..n).ok_or(Error::Truncated)?;
        let mut off = 0usize;
        let mut put = |b: &[u8]| {
            buf[off..off + b.len()].copy_from_slice(b);
            off += b.len();
        };
        let w32 = |v: Option<u32>| v.unwrap_or(u32::MAX).to_be_bytes();
        let w64 = |v: Option<u64>| v.unwrap_or(u64::MAX).to_be_bytes();
        let pair16 = |a: Option<u16>, b: Option<u16>| match (a, b) {
            (Some(a), Some(b)) => ((u32::from(a) << 16) | u32::from(b)).to_be_bytes(),
            _ => [0xff; 4],
        };
        let id24 = |a: Option<u8>, b: Option<u32>| match (a, b) {
            (Some(a), Some(b)) => ((u32::from(a) << 24) | (b & 0x00ff_ffff)).to_be_bytes(),
            _ => [0xff; 4],
        };
        let has = |bit: u16| bitmap & bit != 0;
        if has(instr::NODE_ID) {
            put(&w32(self.node_id));
        }
        if has(instr::L1_PORTS) {
            put(&pair16(self.l1_ingress_port, self.l1_egress_port));
        }
        if has(instr::HOP_LATENCY) {
            put(&w32(self.hop_latency));
        }
        if has(instr::QUEUE) {
            put(&id24(self.queue_id, self.queue_occupancy));
        }
        if has(instr::INGRESS_TS) {
            put(&w64(self.ingress_timestamp));
        }
        if has(instr::EGRESS_TS) {
            put(&w64(self.egress_timestamp));
        }
        if has(instr::L2_PORTS) {
            put(&w32(self.l2_ingress_port));
            put(&w32(self.l2_egress_port));
        }
        if has(instr::TX_UTIL) {
            put(&w32(self.egress_tx_util));
        }
        if has(instr::BUFFER) {
            put(&id24(self.buffer_id, self.buffer_occupancy));
        }
        for _ in 0..(bitmap & instr::RESERVED).count_ones() {
            put(&[0xff; 4]);
        }
        put(self.domain_specific);
        if has(instr::CHECKSUM) {
            put(&w32(self.checksum_complement));
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
}

impl<'a> HopStack<'a> {
    /// Check and wrap a stack: `hop_ml` must hold the baseline metadata of `instructions`, and
    /// the stack must be a whole number of hops (`bad_hop_ml`, `bad_int_length`).
    pub fn new(bytes: &'a [u8], instructions: u16, hop_ml: u8) -> Result<HopStack<'a>, Error> {
        if baseline_words(instructions) > u32::from(hop_ml) {
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
        })
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
    pub fn get(&self, i: usize) -> Option<HopMetadata<'a>> {
        let w = usize::from(self.hop_ml) * 4;
        let s = self.bytes.get(i.checked_mul(w)?..(i + 1).checked_mul(w)?)?;
        if w == 0 {
            return None;
        }
        Some(HopMetadata::decode(s, self.instructions))
    }

    /// The hops, newest first.
    pub fn iter(&self) -> impl Iterator<Item = HopMetadata<'a>> + '_ {
        (0..self.len()).filter_map(move |i| self.get(i))
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
        let header = match shim.int_type {
            IntType::Md | IntType::Mx if shim.length < field::HDR_WORDS => {
                return Err(Error::BadIntLength)
            }
            IntType::Md => {
                let header = MdHeader::parse(body)?;
                let stack = HopStack::new(&body[12..], header.instructions, header.hop_ml)?;
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
        let body_len = match self.header {
            IntHeader::Md { stack, .. } => 12 + stack.as_bytes().len(),
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
                header.emit(&mut buf[4..16])?;
                buf[16..].copy_from_slice(stack.as_bytes());
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
    let hop_len = usize::from(header.hop_ml) * 4;
    let words = 3 + hops.len() * usize::from(header.hop_ml);
    let length = u8::try_from(words).map_err(|_| Error::BadIntLength)?;
    if baseline_words(header.instructions) > u32::from(header.hop_ml) {
        return Err(Error::BadHopMl);
    }
    let shim = ShimRepr {
        int_type: IntType::Md,
        npt,
        length,
        next,
    };
    let n = shim.total_len();
    if buf.len() < n {
        return Err(Error::Truncated);
    }
    shim.emit(buf)?;
    header.emit(&mut buf[4..16])?;
    let mut off = field::FIXED_LEN;
    for h in hops {
        if h.wire_len(header.instructions) != hop_len {
            return Err(Error::BadHopMl);
        }
        off += h.emit(header.instructions, &mut buf[off..])?;
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
    };
    if buf.len() < field::FIXED_LEN {
        return Err(Error::Truncated);
    }
    shim.emit(buf)?;
    header.emit(&mut buf[4..16])?;
    Ok(field::FIXED_LEN)
}
