// Size: one wire format (both base headers, every opcode's body, the NACK); about 240 of its lines
// are unit tests.
//! The original prototype protocol, byte-exact with the Tofino implementation ([DTA §5.1]: "the
//! two DTA-specific headers where the primitive and its configuration parameters are
//! included"): a 2- or 3-byte base header followed by one primitive sub-header; one report per
//! datagram. See `docs/protocol.md`, "Prototype protocol".

use crate::{be_u32, be_u64, Error, Opcode, Report};

/// The base header format, chosen by configuration (`prototype_header`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BaseFormat {
    /// 2 bytes: `opcode, flags` (flags: I).
    #[default]
    Short,
    /// 3 bytes: `opcode, seqnum, flags` (flags: I, R).
    Long,
}

impl BaseFormat {
    /// Length of the base header in bytes.
    pub const fn header_len(self) -> usize {
        match self {
            BaseFormat::Short => 2,
            BaseFormat::Long => 3,
        }
    }

    /// "short" or "long".
    pub fn name(self) -> &'static str {
        match self {
            BaseFormat::Short => "short",
            BaseFormat::Long => "long",
        }
    }

    /// The inverse of [`BaseFormat::name`].
    pub fn from_name(name: &str) -> Option<BaseFormat> {
        match name {
            "short" => Some(BaseFormat::Short),
            "long" => Some(BaseFormat::Long),
            _ => None,
        }
    }
}

/// Byte offsets. Base header fields are absolute; sub-header fields are relative to the end of
/// the base header.
pub mod field {
    use core::ops::{Range, RangeFrom};

    /// Opcode, both formats.
    pub const OPCODE: usize = 0;
    /// Flags byte of the short format.
    pub const FLAGS_SHORT: usize = 1;
    /// Sequence number of the long format.
    pub const SEQNUM_LONG: usize = 1;
    /// Flags byte of the long format.
    pub const FLAGS_LONG: usize = 2;
    /// Immediate flag (bit 7 of the flags byte).
    pub const FLAG_IMMEDIATE: u8 = 0x80;
    /// Retransmittable flag (bit 6 of the flags byte; long format only).
    pub const FLAG_RETRANSMIT: u8 = 0x40;

    /// Key-Write / Key-Increment: redundancy.
    pub const KW_REDUNDANCY: usize = 0;
    /// Key-Write / Key-Increment: key.
    pub const KW_KEY: Range<usize> = 1..5;
    /// Key-Write: data (4, 12 or 28 bytes).
    pub const KW_DATA: RangeFrom<usize> = 5..;
    /// Key-Increment: counter.
    pub const KI_COUNTER: Range<usize> = 5..13;
    /// Append: list id.
    pub const APPEND_LIST_ID: Range<usize> = 0..4;
    /// Append: data.
    pub const APPEND_DATA: Range<usize> = 4..8;
    /// Postcarding: key.
    pub const PC_KEY: Range<usize> = 0..4;
    /// Postcarding: hop.
    pub const PC_HOP: usize = 4;
    /// Postcarding: data (the hop's value).
    pub const PC_DATA: Range<usize> = 5..9;

    /// Key-Write sub-header lengths (data of 1, 3 or 7 words).
    pub const KW_LENS: [usize; 3] = [9, 17, 33];
    /// Key-Increment sub-header length.
    pub const KI_LEN: usize = 13;
    /// Append sub-header length.
    pub const APPEND_LEN: usize = 8;
    /// Postcarding sub-header length.
    pub const PC_LEN: usize = 9;
}

/// Check a sub-header length for `opcode`: shorter than the minimum is `Truncated`, a Key-Write
/// length that is none of 9/17/33 is `BadLength`, a longer fixed sub-header is `TrailingBytes`.
fn check_sub_len(opcode: Opcode, len: usize) -> Result<(), Error> {
    let fixed = match opcode {
        Opcode::KeyWrite => {
            return if len < field::KW_LENS[0] {
                Err(Error::Truncated)
            } else if field::KW_LENS.contains(&len) {
                Ok(())
            } else {
                Err(Error::BadLength)
            };
        }
        Opcode::KeyIncrement => field::KI_LEN,
        Opcode::Append => field::APPEND_LEN,
        Opcode::Postcarding => field::PC_LEN,
        Opcode::SketchMerge => return Err(Error::UnknownOpcode),
    };
    match len.cmp(&fixed) {
        core::cmp::Ordering::Less => Err(Error::Truncated),
        core::cmp::Ordering::Equal => Ok(()),
        core::cmp::Ordering::Greater => Err(Error::TrailingBytes),
    }
}

/// A zero-copy view of a prototype datagram (base header and sub-header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
    format: BaseFormat,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checks; accessors may panic on a short or malformed buffer.
    pub const fn new_unchecked(buffer: T, format: BaseFormat) -> Packet<T> {
        Packet { buffer, format }
    }

    /// Wrap a buffer, checking that every accessor is in bounds ([`Packet::check_len`]).
    pub fn new_checked(buffer: T, format: BaseFormat) -> Result<Packet<T>, Error> {
        let p = Packet::new_unchecked(buffer, format);
        p.check_len()?;
        Ok(p)
    }

    /// Check the base header is present, the opcode known (0x01..=0x04) and the datagram
    /// length exactly that of the opcode's sub-header.
    pub fn check_len(&self) -> Result<(), Error> {
        let buf = self.buffer.as_ref();
        let hl = self.format.header_len();
        let Some(&op) = buf.first() else {
            return Err(Error::Truncated);
        };
        let opcode = Opcode::try_from(op)?;
        if buf.len() < hl {
            return Err(Error::Truncated);
        }
        check_sub_len(opcode, buf.len() - hl)
    }

    /// The base header format.
    pub fn format(&self) -> BaseFormat {
        self.format
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Raw opcode byte.
    pub fn opcode_raw(&self) -> u8 {
        self.buffer.as_ref()[field::OPCODE]
    }

    /// The opcode (SketchMerge is `UnknownOpcode` here: the prototype has none).
    pub fn opcode(&self) -> Result<Opcode, Error> {
        match Opcode::try_from(self.opcode_raw())? {
            Opcode::SketchMerge => Err(Error::UnknownOpcode),
            o => Ok(o),
        }
    }

    fn flags(&self) -> u8 {
        match self.format {
            BaseFormat::Short => self.buffer.as_ref()[field::FLAGS_SHORT],
            BaseFormat::Long => self.buffer.as_ref()[field::FLAGS_LONG],
        }
    }

    /// The sequence number (long format only).
    pub fn seqnum(&self) -> Option<u8> {
        match self.format {
            BaseFormat::Short => None,
            BaseFormat::Long => Some(self.buffer.as_ref()[field::SEQNUM_LONG]),
        }
    }

    /// The immediate flag.
    pub fn immediate(&self) -> bool {
        self.flags() & field::FLAG_IMMEDIATE != 0
    }

    /// The retransmittable flag (always false in the short format, where the bit is reserved).
    pub fn retransmittable(&self) -> bool {
        self.format == BaseFormat::Long && self.flags() & field::FLAG_RETRANSMIT != 0
    }

    /// The sub-header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.format.header_len()..]
    }

    /// Key-Write / Key-Increment redundancy byte, as carried.
    pub fn redundancy(&self) -> u8 {
        self.payload()[field::KW_REDUNDANCY]
    }

    /// The 4 key bytes (Key-Write, Key-Increment, Postcarding), big-endian as carried.
    pub fn key_bytes(&self) -> &[u8] {
        match self.opcode_raw() {
            4 => &self.payload()[field::PC_KEY],
            _ => &self.payload()[field::KW_KEY],
        }
    }

    /// The key as a u32.
    pub fn key(&self) -> u32 {
        be_u32(self.key_bytes())
    }

    /// The data: Key-Write 4/12/28 bytes, Append 4, Postcarding 4.
    pub fn data(&self) -> &[u8] {
        match self.opcode_raw() {
            2 => &self.payload()[field::APPEND_DATA],
            4 => &self.payload()[field::PC_DATA],
            _ => &self.payload()[field::KW_DATA],
        }
    }

    /// Key-Increment counter.
    pub fn counter(&self) -> u64 {
        be_u64(&self.payload()[field::KI_COUNTER])
    }

    /// Append list id.
    pub fn list_id(&self) -> u32 {
        be_u32(&self.payload()[field::APPEND_LIST_ID])
    }

    /// Postcarding hop.
    pub fn hop(&self) -> u8 {
        self.payload()[field::PC_HOP]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the opcode byte.
    pub fn set_opcode(&mut self, opcode: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = opcode as u8;
    }

    /// Set the flags byte (I, and R in the long format) and, in the long format, the seqnum.
    /// Reserved bits are written as 0.
    pub fn set_base(&mut self, seqnum: u8, immediate: bool, retransmittable: bool) {
        let i = if immediate { field::FLAG_IMMEDIATE } else { 0 };
        let buf = self.buffer.as_mut();
        match self.format {
            BaseFormat::Short => buf[field::FLAGS_SHORT] = i,
            BaseFormat::Long => {
                buf[field::SEQNUM_LONG] = seqnum;
                let r = if retransmittable {
                    field::FLAG_RETRANSMIT
                } else {
                    0
                };
                buf[field::FLAGS_LONG] = i | r;
            }
        }
    }

    /// The sub-header, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.format.header_len();
        &mut self.buffer.as_mut()[hl..]
    }
}

/// The base header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseRepr {
    /// The primitive.
    pub opcode: Opcode,
    /// Sequence number, long format only (`None` in the short format).
    pub seqnum: Option<u8>,
    /// Immediate flag.
    pub immediate: bool,
    /// Retransmittable flag (long format only; false in the short format).
    pub retransmittable: bool,
}

/// A parsed prototype datagram: its base header and its one report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr<'a> {
    /// The base header.
    pub base: BaseRepr,
    /// The report (`immediate` mirrors `base.immediate`).
    pub report: Report<'a>,
}

/// Redundancy is carried as a byte; the translator supports 1..=4 copies ([DTA §4] "Key-Write",
/// [DTA A.5] analyses N <= 4), so 0 and > 4 are rejected here, at parse time.
fn check_redundancy(r: u8) -> Result<u8, Error> {
    if (1..=4).contains(&r) {
        Ok(r)
    } else {
        Err(Error::BadRedundancy)
    }
}

impl<'a> Repr<'a> {
    /// Parse and validate a whole prototype datagram.
    pub fn parse(buf: &'a [u8], format: BaseFormat) -> Result<Repr<'a>, Error> {
        let p = Packet::new_checked(buf, format)?;
        let opcode = p.opcode()?;
        let immediate = p.immediate();
        let base = BaseRepr {
            opcode,
            seqnum: p.seqnum(),
            immediate,
            retransmittable: p.retransmittable(),
        };
        let hl = format.header_len();
        let sub = &buf[hl..];
        let report = match opcode {
            Opcode::KeyWrite => Report::KeyWrite {
                redundancy: check_redundancy(sub[field::KW_REDUNDANCY])?,
                key: &sub[field::KW_KEY],
                data: &sub[field::KW_DATA],
                immediate,
            },
            Opcode::KeyIncrement => Report::KeyIncrement {
                redundancy: check_redundancy(sub[field::KW_REDUNDANCY])?,
                key: &sub[field::KW_KEY],
                counter: be_u64(&sub[field::KI_COUNTER]),
                immediate,
            },
            Opcode::Append => Report::Append {
                list_id: be_u32(&sub[field::APPEND_LIST_ID]),
                data: &sub[field::APPEND_DATA],
                immediate,
            },
            Opcode::Postcarding => Report::Postcard {
                key: &sub[field::PC_KEY],
                hop: sub[field::PC_HOP],
                path_len: 0,
                value: be_u32(&sub[field::PC_DATA]),
                immediate,
            },
            Opcode::SketchMerge => return Err(Error::UnknownOpcode),
        };
        Ok(Repr { base, report })
    }

    /// Check the report is expressible in the prototype and return its sub-header length.
    /// Errors: `UnknownOpcode` (Sketch-Merge, or `base.opcode` differing from the report's),
    /// `BadKeyLen` (key not 4 bytes), `BadDataLen` (Key-Write data not 4/12/28, Append data
    /// not 4), `BadRedundancy` (not 1..=4).
    fn sub_len(&self) -> Result<usize, Error> {
        if self.base.opcode != self.report.opcode() {
            return Err(Error::UnknownOpcode);
        }
        match self.report {
            Report::KeyWrite {
                key,
                data,
                redundancy,
                ..
            } => {
                check_redundancy(redundancy)?;
                if key.len() != 4 {
                    return Err(Error::BadKeyLen);
                }
                if !matches!(data.len(), 4 | 12 | 28) {
                    return Err(Error::BadDataLen);
                }
                Ok(5 + data.len())
            }
            Report::KeyIncrement {
                key, redundancy, ..
            } => {
                check_redundancy(redundancy)?;
                if key.len() != 4 {
                    return Err(Error::BadKeyLen);
                }
                Ok(field::KI_LEN)
            }
            Report::Append { data, .. } => {
                if data.len() != 4 {
                    return Err(Error::BadDataLen);
                }
                Ok(field::APPEND_LEN)
            }
            Report::Postcard { key, .. } => {
                if key.len() != 4 {
                    return Err(Error::BadKeyLen);
                }
                Ok(field::PC_LEN)
            }
            Report::SketchColumn { .. } => Err(Error::UnknownOpcode),
        }
    }

    /// Length of the emitted datagram (0 if the report is not expressible in the prototype).
    pub fn buffer_len(&self, format: BaseFormat) -> usize {
        self.sub_len().map_or(0, |l| format.header_len() + l)
    }

    /// Emit into the front of `buf`, returning the length written. Fields the format cannot
    /// carry are dropped: `seqnum` and `retransmittable` in the short format, a Postcard's
    /// `path_len` always. `seqnum: None` in the long format is sent as 0. The flags byte's I
    /// bit is `base.immediate`.
    pub fn emit(&self, buf: &mut [u8], format: BaseFormat) -> Result<usize, Error> {
        let len = format.header_len() + self.sub_len()?;
        let buf = buf.get_mut(..len).ok_or(Error::Truncated)?;
        let mut p = Packet::new_unchecked(&mut *buf, format);
        p.set_opcode(self.base.opcode);
        p.set_base(
            self.base.seqnum.unwrap_or(0),
            self.base.immediate,
            self.base.retransmittable,
        );
        let sub = p.payload_mut();
        match self.report {
            Report::KeyWrite {
                key,
                data,
                redundancy,
                ..
            } => {
                sub[field::KW_REDUNDANCY] = redundancy;
                sub[field::KW_KEY].copy_from_slice(key);
                sub[field::KW_DATA].copy_from_slice(data);
            }
            Report::KeyIncrement {
                key,
                counter,
                redundancy,
                ..
            } => {
                sub[field::KW_REDUNDANCY] = redundancy;
                sub[field::KW_KEY].copy_from_slice(key);
                sub[field::KI_COUNTER].copy_from_slice(&counter.to_be_bytes());
            }
            Report::Append { list_id, data, .. } => {
                sub[field::APPEND_LIST_ID].copy_from_slice(&list_id.to_be_bytes());
                sub[field::APPEND_DATA].copy_from_slice(data);
            }
            Report::Postcard {
                key, hop, value, ..
            } => {
                sub[field::PC_KEY].copy_from_slice(key);
                sub[field::PC_HOP] = hop;
                sub[field::PC_DATA].copy_from_slice(&value.to_be_bytes());
            }
            Report::SketchColumn { .. } => return Err(Error::UnknownOpcode),
        }
        Ok(len)
    }
}

/// The prototype NACK (translator to reporter, UDP 40044): `seqnum u8 | N:1 | reserved:7`.
/// Sent when a retransmittable report's sequence number shows a gap ([DTA §5.2], [DTA-draft §3.2]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NackRepr {
    /// The sequence number the translator expects next.
    pub seqnum: u8,
    /// The N bit (set: resend from `seqnum`).
    pub nack: bool,
}

impl NackRepr {
    /// Length of a prototype NACK.
    pub const LEN: usize = 2;
    /// The N flag (bit 7 of byte 1).
    pub const FLAG_NACK: u8 = 0x80;

    /// Parse exactly 2 bytes (reserved bits ignored).
    pub fn parse(buf: &[u8]) -> Result<NackRepr, Error> {
        match buf.len() {
            n if n < Self::LEN => Err(Error::Truncated),
            Self::LEN => Ok(NackRepr {
                seqnum: buf[0],
                nack: buf[1] & Self::FLAG_NACK != 0,
            }),
            _ => Err(Error::TrailingBytes),
        }
    }

    /// [`NackRepr::LEN`].
    pub const fn buffer_len(&self) -> usize {
        Self::LEN
    }

    /// Emit into the front of `buf`; returns 2.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let b = buf.get_mut(..Self::LEN).ok_or(Error::Truncated)?;
        b[0] = self.seqnum;
        b[1] = if self.nack { Self::FLAG_NACK } else { 0 };
        Ok(Self::LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Hand-assembled, independent of `emit`: the worked examples of docs/protocol.md.
    const KW_SHORT: [u8; 11] = [
        0x01, 0x80, // Key-Write, I=1
        0x02, // redundancy 2
        0x0a, 0x00, 0x00, 0x01, // key 10.0.0.1
        0xde, 0xad, 0xbe, 0xef, // data
    ];

    #[test]
    fn parse_key_write_short() {
        let r = Repr::parse(&KW_SHORT, BaseFormat::Short).unwrap();
        assert_eq!(
            r.base,
            BaseRepr {
                opcode: Opcode::KeyWrite,
                seqnum: None,
                immediate: true,
                retransmittable: false
            }
        );
        assert_eq!(
            r.report,
            Report::KeyWrite {
                key: &[0x0a, 0, 0, 1],
                data: &[0xde, 0xad, 0xbe, 0xef],
                redundancy: 2,
                immediate: true
            }
        );
        let mut out = [0u8; 64];
        assert_eq!(r.buffer_len(BaseFormat::Short), 11);
        assert_eq!(r.emit(&mut out, BaseFormat::Short), Ok(11));
        assert_eq!(&out[..11], &KW_SHORT);
        // The same bytes read with the long header leave an 8-byte sub-header.
        assert_eq!(
            Repr::parse(&KW_SHORT, BaseFormat::Long),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn parse_long_header_fields() {
        // Key-Increment, seqnum 7, I=0 R=1, redundancy 4, key 0x01020304, counter 1000.
        let b = [
            0x03, 0x07, 0x40, 0x04, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0x03, 0xe8,
        ];
        let r = Repr::parse(&b, BaseFormat::Long).unwrap();
        assert_eq!(r.base.seqnum, Some(7));
        assert!(r.base.retransmittable);
        assert!(!r.base.immediate);
        assert_eq!(
            r.report,
            Report::KeyIncrement {
                key: &[1, 2, 3, 4],
                counter: 1000,
                redundancy: 4,
                immediate: false
            }
        );
        let p = Packet::new_checked(&b[..], BaseFormat::Long).unwrap();
        assert_eq!(p.key(), 0x01020304);
        assert_eq!(p.counter(), 1000);
        assert_eq!(p.redundancy(), 4);
    }

    #[test]
    fn short_format_ignores_reserved_r_bit() {
        // Append with flags 0x7f: I clear, every reserved bit (including bit 6) set.
        let b = [0x02, 0x7f, 0, 0, 0, 9, 1, 2, 3, 4];
        let r = Repr::parse(&b, BaseFormat::Short).unwrap();
        assert!(!r.base.retransmittable);
        assert!(!r.base.immediate);
        assert_eq!(
            r.report,
            Report::Append {
                list_id: 9,
                data: &[1, 2, 3, 4],
                immediate: false
            }
        );
    }

    #[test]
    fn postcard_has_unknown_path_len() {
        let b = [0x04, 0x00, 0xc0, 0xa8, 0, 1, 3, 0, 0, 0x01, 0x00];
        let r = Repr::parse(&b, BaseFormat::Short).unwrap();
        assert_eq!(
            r.report,
            Report::Postcard {
                key: &[0xc0, 0xa8, 0, 1],
                hop: 3,
                path_len: 0,
                value: 256,
                immediate: false
            }
        );
    }

    #[test]
    fn key_write_widths_and_lengths() {
        for (width, ok) in [
            (4usize, true),
            (12, true),
            (28, true),
            (8, false),
            (29, false),
        ] {
            let mut b = vec![0x01, 0x00, 0x01, 0, 0, 0, 1];
            b.extend(vec![0xab; width]);
            let r = Repr::parse(&b, BaseFormat::Short);
            if ok {
                match r.unwrap().report {
                    Report::KeyWrite { data, .. } => assert_eq!(data.len(), width),
                    other => panic!("{other:?}"),
                }
            } else {
                assert_eq!(r, Err(Error::BadLength), "width {width}");
            }
        }
        // Shorter than the smallest Key-Write.
        assert_eq!(
            Repr::parse(&KW_SHORT[..10], BaseFormat::Short),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn rejections() {
        use BaseFormat::*;
        assert_eq!(Repr::parse(&[], Short), Err(Error::Truncated));
        assert_eq!(Repr::parse(&[0x02], Short), Err(Error::Truncated));
        assert_eq!(Repr::parse(&[0x00, 0, 0], Short), Err(Error::UnknownOpcode));
        assert_eq!(Repr::parse(&[0x05, 0, 0], Long), Err(Error::UnknownOpcode));
        // Append one byte long / short.
        assert_eq!(
            Repr::parse(&[0x02, 0, 0, 0, 0, 1, 1, 2, 3, 4, 5], Short),
            Err(Error::TrailingBytes)
        );
        assert_eq!(
            Repr::parse(&[0x02, 0, 0, 0, 0, 1, 1, 2, 3], Short),
            Err(Error::Truncated)
        );
        // Redundancy 0 and 5.
        for red in [0u8, 5, 255] {
            let mut b = KW_SHORT;
            b[2] = red;
            assert_eq!(Repr::parse(&b, Short), Err(Error::BadRedundancy));
        }
    }

    #[test]
    fn emit_rejects_inexpressible_reports() {
        let base = |opcode| BaseRepr {
            opcode,
            seqnum: Some(1),
            immediate: false,
            retransmittable: true,
        };
        let mut out = [0u8; 64];
        let kw = |key: &'static [u8], data: &'static [u8], redundancy| Repr {
            base: base(Opcode::KeyWrite),
            report: Report::KeyWrite {
                key,
                data,
                redundancy,
                immediate: false,
            },
        };
        assert_eq!(
            kw(&[1, 2, 3], &[0; 4], 1).emit(&mut out, BaseFormat::Long),
            Err(Error::BadKeyLen)
        );
        assert_eq!(
            kw(&[1, 2, 3, 4], &[0; 8], 1).emit(&mut out, BaseFormat::Long),
            Err(Error::BadDataLen)
        );
        assert_eq!(
            kw(&[1, 2, 3, 4], &[0; 4], 0).emit(&mut out, BaseFormat::Long),
            Err(Error::BadRedundancy)
        );
        assert_eq!(
            kw(&[1, 2, 3, 4], &[0; 28], 1).emit(&mut out[..35], BaseFormat::Long),
            Err(Error::Truncated)
        );
        assert_eq!(
            kw(&[1, 2, 3, 4], &[0; 28], 1).emit(&mut out[..36], BaseFormat::Long),
            Ok(36)
        );
        let mismatched = Repr {
            base: base(Opcode::Append),
            ..kw(&[1, 2, 3, 4], &[0; 4], 1)
        };
        assert_eq!(
            mismatched.emit(&mut out, BaseFormat::Long),
            Err(Error::UnknownOpcode)
        );
        let sketch = Repr {
            base: base(Opcode::SketchMerge),
            report: Report::SketchColumn {
                sketch_id: 1,
                column: 0,
                epoch: 0,
                data: &[0; 4],
                immediate: false,
            },
        };
        assert_eq!(
            sketch.emit(&mut out, BaseFormat::Long),
            Err(Error::UnknownOpcode)
        );
        assert_eq!(sketch.buffer_len(BaseFormat::Long), 0);
    }

    #[test]
    fn nack() {
        let n = NackRepr::parse(&[0x2a, 0x80]).unwrap();
        assert_eq!(
            n,
            NackRepr {
                seqnum: 42,
                nack: true
            }
        );
        assert_eq!(
            NackRepr::parse(&[0x2a, 0x7f]),
            Ok(NackRepr {
                seqnum: 42,
                nack: false
            })
        );
        assert_eq!(NackRepr::parse(&[0x2a]), Err(Error::Truncated));
        assert_eq!(NackRepr::parse(&[0x2a, 0, 0]), Err(Error::TrailingBytes));
        let mut b = [0xffu8; 3];
        assert_eq!(n.emit(&mut b), Ok(2));
        assert_eq!(b, [0x2a, 0x80, 0xff]);
        assert_eq!(n.emit(&mut b[..1]), Err(Error::Truncated));
    }
}
