// Size: one wire format kept in one module: the header, the report views, the datagram builder and
// the NACK share private field offsets that must not leak out of it; about 330 of its lines are
// unit tests.
//! Native protocol version 1 (`docs/protocol.md`, "Native protocol"): a 12-byte datagram header
//! (version, kind, priority, retransmittable, count, reporter id, sequence number) followed by
//! `count` reports packed back to back, each a 4-byte report header and a body. It extends the
//! prototype ([DTA §5.1]) with variable keys (1-16 bytes) and data (4-64 bytes), batching,
//! per-report redundancy and immediate flags, the priorities and NACK-based retransmission of
//! [DTA-draft §3.2] / [DTA §5.2], and Sketch-Merge columns ([DTA-draft §3.1, §4.2]).

use crate::{be_u16, be_u32, be_u64, Error, Opcode, Priority, Report};

/// Length of the datagram header.
pub const HEADER_LEN: usize = 12;
/// Protocol version carried in the top nibble of byte 0.
pub const VERSION: u8 = 1;
/// Length of a report header.
pub const REPORT_HEADER_LEN: usize = 4;
/// Longest key.
pub const MAX_KEY_LEN: usize = 16;
/// Shortest data.
pub const MIN_DATA_LEN: usize = 4;
/// Longest data.
pub const MAX_DATA_LEN: usize = 64;
/// Length of a NACK's Sketch-Merge body.
pub const SKETCH_NACK_LEN: usize = 8;
/// Length of a NACK's missing-datagram bitmap body.
pub const MISSING_NACK_LEN: usize = 8;
/// Datagrams after a NACK's `seq` that its bitmap can name.
pub const MISSING_BITS: u32 = 64;
/// Length of a congestion notice's body.
pub const NOTICE_BODY_LEN: usize = 12;
/// Length of a congestion notice.
pub const NOTICE_LEN: usize = HEADER_LEN + NOTICE_BODY_LEN;
/// Length of a hello's body (the reporter's life).
pub const HELLO_BODY_LEN: usize = 8;
/// Length of a hello (before its authenticator).
pub const HELLO_LEN: usize = HEADER_LEN + HELLO_BODY_LEN;
/// A congestion notice's rate meaning "no limit".
pub const RATE_UNLIMITED: u32 = u32::MAX;
/// Longest report (a Key-Write with a 16-byte key and 64 bytes of data).
pub const MAX_REPORT_LEN: usize = REPORT_HEADER_LEN + MAX_KEY_LEN + MAX_DATA_LEN;

/// Byte offsets and bit masks.
pub mod field {
    use core::ops::Range;

    /// Version (high nibble) and kind (low nibble).
    pub const VERSION_KIND: usize = 0;
    /// Priority (bits 7-6), R (bit 5), reserved (bits 4-0).
    pub const FLAGS: usize = 1;
    /// Report count.
    pub const COUNT: usize = 2;
    /// Reserved byte.
    pub const RESERVED: usize = 3;
    /// Reporter id.
    pub const REPORTER_ID: Range<usize> = 4..8;
    /// Sequence number.
    pub const SEQ: Range<usize> = 8..12;
    /// Priority mask in the flags byte.
    pub const PRIORITY_MASK: u8 = 0xc0;
    /// Priority shift in the flags byte.
    pub const PRIORITY_SHIFT: u32 = 6;
    /// Retransmittable flag.
    pub const FLAG_RETRANSMIT: u8 = 0x20;

    /// Report header: opcode.
    pub const R_OPCODE: usize = 0;
    /// Report header: I (bit 7), reserved (bits 6-2), redundancy - 1 (bits 1-0).
    pub const R_FLAGS: usize = 1;
    /// Report header: key length.
    pub const R_KEY_LEN: usize = 2;
    /// Report header: data length.
    pub const R_DATA_LEN: usize = 3;
    /// Immediate flag in the report flags byte.
    pub const R_FLAG_IMMEDIATE: u8 = 0x80;
    /// Redundancy - 1 in the report flags byte.
    pub const R_REDUNDANCY_MASK: u8 = 0x03;

    /// NACK Sketch-Merge body, relative to the end of the header: sketch id.
    pub const N_SKETCH_ID: Range<usize> = 0..2;
    /// NACK body: column.
    pub const N_COLUMN: Range<usize> = 2..4;
    /// NACK body: epoch.
    pub const N_EPOCH: Range<usize> = 4..8;
    /// NACK missing-datagram bitmap body (count 2), relative to the end of the header.
    pub const N_MISSING: Range<usize> = 0..8;

    /// Congestion notice body, relative to the end of the header: how long it holds, ms.
    pub const C_HOLD_MS: Range<usize> = 0..4;
    /// Congestion notice body: low-priority datagrams per second allowed meanwhile.
    pub const C_LOW_RATE: Range<usize> = 4..8;
    /// Congestion notice body: medium-priority datagrams per second allowed meanwhile.
    pub const C_MEDIUM_RATE: Range<usize> = 8..12;

    /// Hello body, relative to the end of the header: the reporter's life.
    pub const H_LIFE: Range<usize> = 0..8;
}

/// The message kind (low nibble of byte 0).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Reports, reporter to translator.
    Reports = 0,
    /// NACK, translator to reporter.
    Nack = 1,
    /// Congestion notice, translator to reporter.
    Notice = 2,
    /// Hello, reporter to translator: the life its control messages are bound to
    /// (docs/protocol.md "Authenticated NACKs and notices").
    Hello = 3,
}

impl Kind {
    /// "reports", "nack" or "notice".
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Reports => "reports",
            Kind::Nack => "nack",
            Kind::Notice => "notice",
            Kind::Hello => "hello",
        }
    }
}

impl TryFrom<u8> for Kind {
    type Error = Error;
    fn try_from(v: u8) -> Result<Self, Error> {
        match v {
            0 => Ok(Kind::Reports),
            1 => Ok(Kind::Nack),
            2 => Ok(Kind::Notice),
            3 => Ok(Kind::Hello),
            _ => Err(Error::UnknownKind),
        }
    }
}

/// A zero-copy view of the datagram header (and the bytes after it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checks; accessors panic on a buffer shorter than [`HEADER_LEN`].
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer, checking it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` if the buffer is shorter than the header.
    pub fn check_len(&self) -> Result<(), Error> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (top nibble of byte 0).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION_KIND] >> 4
    }

    /// Raw kind (low nibble of byte 0).
    pub fn kind_raw(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION_KIND] & 0x0f
    }

    /// Raw 2-bit priority.
    pub fn priority_raw(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] & field::PRIORITY_MASK) >> field::PRIORITY_SHIFT
    }

    /// The R flag.
    pub fn retransmittable(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & field::FLAG_RETRANSMIT != 0
    }

    /// Report count.
    pub fn count(&self) -> u8 {
        self.buffer.as_ref()[field::COUNT]
    }

    /// Reporter id.
    pub fn reporter_id(&self) -> u32 {
        be_u32(&self.buffer.as_ref()[field::REPORTER_ID])
    }

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        be_u32(&self.buffer.as_ref()[field::SEQ])
    }

    /// The bytes after the header (reports, or a NACK body).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set version and kind.
    pub fn set_version_kind(&mut self, version: u8, kind: Kind) {
        self.buffer.as_mut()[field::VERSION_KIND] = (version << 4) | kind as u8;
    }

    /// Set the flags byte (reserved bits 0).
    pub fn set_flags(&mut self, priority: Priority, retransmittable: bool) {
        let r = if retransmittable {
            field::FLAG_RETRANSMIT
        } else {
            0
        };
        self.buffer.as_mut()[field::FLAGS] = ((priority as u8) << field::PRIORITY_SHIFT) | r;
    }

    /// Set the count (and zero the reserved byte after it).
    pub fn set_count(&mut self, count: u8) {
        let b = self.buffer.as_mut();
        b[field::COUNT] = count;
        b[field::RESERVED] = 0;
    }

    /// Set the reporter id.
    pub fn set_reporter_id(&mut self, id: u32) {
        self.buffer.as_mut()[field::REPORTER_ID].copy_from_slice(&id.to_be_bytes());
    }

    /// Set the sequence number.
    pub fn set_seq(&mut self, seq: u32) {
        self.buffer.as_mut()[field::SEQ].copy_from_slice(&seq.to_be_bytes());
    }

    /// The bytes after the header, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// The datagram header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRepr {
    /// Reports, NACK or congestion notice.
    pub kind: Kind,
    /// Priority (NACKs and notices are sent with `Low`).
    pub priority: Priority,
    /// The reporter keeps the datagram for resending on a NACK.
    pub retransmittable: bool,
    /// Number of reports (NACK: 1 when a Sketch-Merge body follows, 2 when a missing-datagram
    /// bitmap does, else 0; notice: 1).
    pub count: u8,
    /// The reporter.
    pub reporter_id: u32,
    /// Per-reporter datagram sequence number (NACK: the one missing; notice: 0, ignored).
    pub seq: u32,
}

impl HeaderRepr {
    /// Parse the header, checking in order: version (`UnknownVersion`), length (`Truncated`),
    /// kind (`UnknownKind`), priority (`BadPriority`). The count is checked by the caller.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<HeaderRepr, Error> {
        match packet.buffer.as_ref().first() {
            None => return Err(Error::Truncated),
            Some(b) if b >> 4 != VERSION => return Err(Error::UnknownVersion),
            Some(_) => {}
        }
        packet.check_len()?;
        Ok(HeaderRepr {
            kind: Kind::try_from(packet.kind_raw())?,
            priority: Priority::try_from(packet.priority_raw())?,
            retransmittable: packet.retransmittable(),
            count: packet.count(),
            reporter_id: packet.reporter_id(),
            seq: packet.seq(),
        })
    }

    /// [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header (version 1, reserved bits 0). The packet must hold [`HEADER_LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_version_kind(VERSION, self.kind);
        packet.set_flags(self.priority, self.retransmittable);
        packet.set_count(self.count);
        packet.set_reporter_id(self.reporter_id);
        packet.set_seq(self.seq);
    }
}

/// A zero-copy view of one report (header and body) at the front of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportPacket<T: AsRef<[u8]>> {
    buffer: T,
}

/// Body length for a report header, checking in order: opcode (`UnknownOpcode`), key length
/// (`BadKeyLen`), data length (`BadDataLen`).
#[inline]
pub fn body_len(opcode: u8, key_len: u8, data_len: u8) -> Result<usize, Error> {
    let op = Opcode::try_from(opcode)?;
    let (k, d) = (key_len as usize, data_len as usize);
    let keyed = (1..=MAX_KEY_LEN).contains(&k);
    let data_ok = (MIN_DATA_LEN..=MAX_DATA_LEN).contains(&d);
    match op {
        Opcode::KeyWrite => {
            if !keyed {
                Err(Error::BadKeyLen)
            } else if !data_ok {
                Err(Error::BadDataLen)
            } else {
                Ok(k + d)
            }
        }
        Opcode::KeyIncrement | Opcode::Postcarding => {
            let want = if op == Opcode::KeyIncrement { 8 } else { 4 };
            if !keyed {
                Err(Error::BadKeyLen)
            } else if d != want {
                Err(Error::BadDataLen)
            } else if op == Opcode::KeyIncrement {
                Ok(k + 8)
            } else {
                Ok(k + 2 + 4)
            }
        }
        Opcode::Append | Opcode::SketchMerge => {
            if k != 0 {
                Err(Error::BadKeyLen)
            } else if !data_ok {
                Err(Error::BadDataLen)
            } else if op == Opcode::Append {
                Ok(4 + d)
            } else {
                Ok(8 + d)
            }
        }
    }
}

impl<T: AsRef<[u8]>> ReportPacket<T> {
    /// Wrap without checks; accessors may panic on a short or malformed buffer.
    pub const fn new_unchecked(buffer: T) -> ReportPacket<T> {
        ReportPacket { buffer }
    }

    /// Wrap, checking the report header is valid and the body in bounds
    /// ([`ReportPacket::check_len`]). The buffer may extend past the report.
    pub fn new_checked(buffer: T) -> Result<ReportPacket<T>, Error> {
        let p = ReportPacket::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Check order: report header present (`Truncated`), [`body_len`]'s checks, body present
    /// (`Truncated`).
    pub fn check_len(&self) -> Result<(), Error> {
        ReportView::parse(self.buffer.as_ref()).map(|_| ())
    }

    /// Raw opcode.
    pub fn opcode_raw(&self) -> u8 {
        self.buffer.as_ref()[field::R_OPCODE]
    }

    /// The I flag.
    pub fn immediate(&self) -> bool {
        self.buffer.as_ref()[field::R_FLAGS] & field::R_FLAG_IMMEDIATE != 0
    }

    /// Redundancy, 1..=4 (the wire carries redundancy - 1).
    pub fn redundancy(&self) -> u8 {
        (self.buffer.as_ref()[field::R_FLAGS] & field::R_REDUNDANCY_MASK) + 1
    }

    /// Key length.
    pub fn key_len(&self) -> u8 {
        self.buffer.as_ref()[field::R_KEY_LEN]
    }

    /// Data length.
    pub fn data_len(&self) -> u8 {
        self.buffer.as_ref()[field::R_DATA_LEN]
    }

    /// Length of header and body (0 if the header is invalid).
    pub fn total_len(&self) -> usize {
        body_len(self.opcode_raw(), self.key_len(), self.data_len())
            .map_or(0, |b| REPORT_HEADER_LEN + b)
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[REPORT_HEADER_LEN..self.total_len()]
    }
}

impl<'a> ReportPacket<&'a [u8]> {
    /// The report, borrowing the buffer. Call on a checked packet.
    pub fn report(&self) -> Result<Report<'a>, Error> {
        parse_report(self.buffer).map(|(r, _)| r)
    }
}

/// A validated, zero-copy view of one native report: the ONE decoder of the report layout.
/// Built only by [`ReportView::parse`], which checks the header and that the body is in
/// bounds, so every accessor is infallible and reads within the report's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportView<'a> {
    /// Exactly the report: header and body.
    buf: &'a [u8],
    opcode: Opcode,
}

impl<'a> ReportView<'a> {
    /// The report at the front of `buf` and the bytes after it. Checks as
    /// [`ReportPacket::check_len`]: header present (`Truncated`), [`body_len`]'s checks, body
    /// present (`Truncated`).
    #[inline]
    pub fn parse(buf: &'a [u8]) -> Result<(ReportView<'a>, &'a [u8]), Error> {
        if buf.len() < REPORT_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let opcode = Opcode::try_from(buf[field::R_OPCODE])?;
        let len = REPORT_HEADER_LEN
            + body_len(
                buf[field::R_OPCODE],
                buf[field::R_KEY_LEN],
                buf[field::R_DATA_LEN],
            )?;
        if buf.len() < len {
            return Err(Error::Truncated);
        }
        let (buf, rest) = buf.split_at(len);
        Ok((ReportView { buf, opcode }, rest))
    }

    /// The primitive.
    #[inline]
    pub fn opcode(&self) -> Opcode {
        self.opcode
    }

    /// The I flag.
    #[inline]
    pub fn immediate(&self) -> bool {
        self.buf[field::R_FLAGS] & field::R_FLAG_IMMEDIATE != 0
    }

    /// Redundancy, 1..=4 (the wire carries redundancy - 1); meaningful for Key-Write and
    /// Key-Increment.
    #[inline]
    pub fn redundancy(&self) -> u8 {
        (self.buf[field::R_FLAGS] & field::R_REDUNDANCY_MASK) + 1
    }

    /// Length of header and body.
    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Never true: a report has at least its header.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The report's bytes, header and body.
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }

    /// The key (empty for Append and Sketch-Merge).
    #[inline]
    pub fn key(&self) -> &'a [u8] {
        let k = self.buf[field::R_KEY_LEN] as usize;
        &self.buf[REPORT_HEADER_LEN..REPORT_HEADER_LEN + k]
    }

    /// The body after the key.
    #[inline]
    fn after_key(&self) -> &'a [u8] {
        let k = self.buf[field::R_KEY_LEN] as usize;
        &self.buf[REPORT_HEADER_LEN + k..]
    }

    /// The report, borrowing the datagram.
    #[inline]
    pub fn report(&self) -> Report<'a> {
        let immediate = self.immediate();
        let rest = self.after_key();
        match self.opcode {
            Opcode::KeyWrite => Report::KeyWrite {
                key: self.key(),
                data: rest,
                redundancy: self.redundancy(),
                immediate,
            },
            Opcode::KeyIncrement => Report::KeyIncrement {
                key: self.key(),
                counter: be_u64(rest),
                redundancy: self.redundancy(),
                immediate,
            },
            Opcode::Append => Report::Append {
                list_id: be_u32(&rest[..4]),
                data: &rest[4..],
                immediate,
            },
            Opcode::Postcarding => Report::Postcard {
                key: self.key(),
                hop: rest[0],
                path_len: rest[1],
                value: be_u32(&rest[2..6]),
                immediate,
            },
            Opcode::SketchMerge => Report::SketchColumn {
                sketch_id: be_u16(&rest[0..2]),
                column: be_u16(&rest[2..4]),
                epoch: be_u32(&rest[4..8]),
                data: &rest[8..],
                immediate,
            },
        }
    }
}

/// Parse one report at the front of `buf`; returns it and its length.
#[inline]
fn parse_report(buf: &[u8]) -> Result<(Report<'_>, usize), Error> {
    ReportView::parse(buf).map(|(v, _)| (v.report(), v.len()))
}

/// Validate a report for emission; returns `(key_len, data_len, redundancy bits)`.
fn check_report(report: &Report<'_>) -> Result<(usize, usize, u8), Error> {
    let key_ok = |k: &[u8]| {
        if (1..=MAX_KEY_LEN).contains(&k.len()) {
            Ok(k.len())
        } else {
            Err(Error::BadKeyLen)
        }
    };
    let data_ok = |d: &[u8]| {
        if (MIN_DATA_LEN..=MAX_DATA_LEN).contains(&d.len()) {
            Ok(d.len())
        } else {
            Err(Error::BadDataLen)
        }
    };
    let red = |r: u8| {
        if (1..=4).contains(&r) {
            Ok(r - 1)
        } else {
            Err(Error::BadRedundancy)
        }
    };
    match *report {
        Report::KeyWrite {
            key,
            data,
            redundancy,
            ..
        } => Ok((key_ok(key)?, data_ok(data)?, red(redundancy)?)),
        Report::KeyIncrement {
            key, redundancy, ..
        } => Ok((key_ok(key)?, 8, red(redundancy)?)),
        Report::Append { data, .. } => Ok((0, data_ok(data)?, 0)),
        Report::Postcard { key, .. } => Ok((key_ok(key)?, 4, 0)),
        Report::SketchColumn { data, .. } => Ok((0, data_ok(data)?, 0)),
    }
}

/// Encoded length of a report (header and body), computed from its slices' lengths.
pub fn report_len(report: &Report<'_>) -> usize {
    REPORT_HEADER_LEN
        + match *report {
            Report::KeyWrite { key, data, .. } => key.len() + data.len(),
            Report::KeyIncrement { key, .. } => key.len() + 8,
            Report::Append { data, .. } => 4 + data.len(),
            Report::Postcard { key, .. } => key.len() + 6,
            Report::SketchColumn { data, .. } => 8 + data.len(),
        }
}

/// Emit one report at the front of `buf`, returning its length. Errors: the report's
/// `BadKeyLen`/`BadDataLen`/`BadRedundancy`, then `Truncated` if `buf` is too short.
pub fn emit_report(report: &Report<'_>, buf: &mut [u8]) -> Result<usize, Error> {
    let (k, d, red) = check_report(report)?;
    let len = report_len(report);
    let b = buf.get_mut(..len).ok_or(Error::Truncated)?;
    let i = if report.immediate() {
        field::R_FLAG_IMMEDIATE
    } else {
        0
    };
    b[field::R_OPCODE] = report.opcode() as u8;
    b[field::R_FLAGS] = i | red;
    b[field::R_KEY_LEN] = k as u8;
    b[field::R_DATA_LEN] = d as u8;
    let body = &mut b[REPORT_HEADER_LEN..];
    match *report {
        Report::KeyWrite { key, data, .. } => {
            body[..k].copy_from_slice(key);
            body[k..].copy_from_slice(data);
        }
        Report::KeyIncrement { key, counter, .. } => {
            body[..k].copy_from_slice(key);
            body[k..].copy_from_slice(&counter.to_be_bytes());
        }
        Report::Append { list_id, data, .. } => {
            body[..4].copy_from_slice(&list_id.to_be_bytes());
            body[4..].copy_from_slice(data);
        }
        Report::Postcard {
            key,
            hop,
            path_len,
            value,
            ..
        } => {
            body[..k].copy_from_slice(key);
            body[k] = hop;
            body[k + 1] = path_len;
            body[k + 2..].copy_from_slice(&value.to_be_bytes());
        }
        Report::SketchColumn {
            sketch_id,
            column,
            epoch,
            data,
            ..
        } => {
            body[0..2].copy_from_slice(&sketch_id.to_be_bytes());
            body[2..4].copy_from_slice(&column.to_be_bytes());
            body[4..8].copy_from_slice(&epoch.to_be_bytes());
            body[8..].copy_from_slice(data);
        }
    }
    Ok(len)
}

/// The column a reporter must resend from (Sketch-Merge NACK body, [DTA-draft §4.2]: "An incoming
/// Sketch-Merge operation with a non-sequential column index ... is used to craft the NACK").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SketchNack {
    /// The sketch.
    pub sketch_id: u16,
    /// The column expected next.
    pub column: u16,
    /// The epoch.
    pub epoch: u32,
}

/// What follows a NACK's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NackBody {
    None,
    Sketch(SketchNack),
    Missing(u64),
}

/// Validate a NACK's count and body: count 0 (no body), 1 (Sketch-Merge column) or 2
/// (missing-datagram bitmap), exact length.
fn parse_nack_body(count: u8, body: &[u8]) -> Result<NackBody, Error> {
    let want = match count {
        0 => 0,
        1 => SKETCH_NACK_LEN,
        2 => MISSING_NACK_LEN,
        _ => return Err(Error::BadCount),
    };
    match body.len().cmp(&want) {
        core::cmp::Ordering::Less => Err(Error::Truncated),
        core::cmp::Ordering::Greater => Err(Error::TrailingBytes),
        core::cmp::Ordering::Equal => Ok(match count {
            0 => NackBody::None,
            1 => NackBody::Sketch(SketchNack {
                sketch_id: be_u16(&body[field::N_SKETCH_ID]),
                column: be_u16(&body[field::N_COLUMN]),
                epoch: be_u32(&body[field::N_EPOCH]),
            }),
            _ => NackBody::Missing(be_u64(&body[field::N_MISSING])),
        }),
    }
}

/// A native NACK (kind 1, translator to reporter on UDP 40044): the translator is missing
/// datagram `seq` of this reporter, and every datagram `seq + 1 + i` whose bit `1 << i` is set
/// in `missing`; the reporter resends each it still keeps ([DTA-draft §3.2]: "A detected loss
/// will trigger NACK-generation at the translator, which informs the reporter that the data
/// should be re-sent"). For Sketch-Merge, `sketch` names the column to resend from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NackRepr {
    /// The reporter being NACKed.
    pub reporter_id: u32,
    /// The (first) sequence number missing.
    pub seq: u32,
    /// The Sketch-Merge column to resend from, if any.
    pub sketch: Option<SketchNack>,
    /// Further missing datagrams after `seq`: bit i set = `seq + 1 + i` is missing (0: none,
    /// no bitmap body). Never together with `sketch`.
    pub missing: u64,
}

impl NackRepr {
    /// A NACK for `seq` alone.
    pub const fn new(reporter_id: u32, seq: u32) -> NackRepr {
        NackRepr {
            reporter_id,
            seq,
            sketch: None,
            missing: 0,
        }
    }

    /// Parse a whole NACK datagram (header checks as [`HeaderRepr::parse`], then kind must be
    /// NACK (`UnknownKind`), count 0, 1 or 2 (`BadCount`), exact length).
    pub fn parse(buf: &[u8]) -> Result<NackRepr, Error> {
        let p = Packet::new_unchecked(buf);
        let h = HeaderRepr::parse(&p)?;
        if h.kind != Kind::Nack {
            return Err(Error::UnknownKind);
        }
        Ok(NackRepr::from_body(
            h.reporter_id,
            h.seq,
            parse_nack_body(h.count, p.payload())?,
        ))
    }

    fn from_body(reporter_id: u32, seq: u32, body: NackBody) -> NackRepr {
        let (sketch, missing) = match body {
            NackBody::None => (None, 0),
            NackBody::Sketch(s) => (Some(s), 0),
            NackBody::Missing(m) => (None, m),
        };
        NackRepr {
            reporter_id,
            seq,
            sketch,
            missing,
        }
    }

    /// Every sequence number this NACK names, `seq` first, then the bitmap's in increasing
    /// order (wrapping in the 32-bit space; a prototype-sized space takes them modulo its own).
    pub fn missing_seqs(&self) -> impl Iterator<Item = u32> + '_ {
        core::iter::once(self.seq).chain(
            (0..MISSING_BITS)
                .filter(|i| self.missing >> i & 1 == 1)
                .map(|i| self.seq.wrapping_add(1 + i)),
        )
    }

    /// The body's count: 0, 1 (Sketch-Merge) or 2 (bitmap).
    const fn count(&self) -> u8 {
        if self.sketch.is_some() {
            1
        } else if self.missing != 0 {
            2
        } else {
            0
        }
    }

    /// 12, or 20 with a Sketch-Merge or bitmap body.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
            + match self.count() {
                0 => 0,
                1 => SKETCH_NACK_LEN,
                _ => MISSING_NACK_LEN,
            }
    }

    /// Emit into the front of `buf` (priority low, R clear); returns the length. A NACK with
    /// both a Sketch-Merge body and a bitmap is `BadCount` (the wire carries one body).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        if self.sketch.is_some() && self.missing != 0 {
            return Err(Error::BadCount);
        }
        let len = self.buffer_len();
        let b = buf.get_mut(..len).ok_or(Error::Truncated)?;
        let mut p = Packet::new_unchecked(b);
        HeaderRepr {
            kind: Kind::Nack,
            priority: Priority::Low,
            retransmittable: false,
            count: self.count(),
            reporter_id: self.reporter_id,
            seq: self.seq,
        }
        .emit(&mut p);
        let body = p.payload_mut();
        if let Some(s) = self.sketch {
            body[field::N_SKETCH_ID].copy_from_slice(&s.sketch_id.to_be_bytes());
            body[field::N_COLUMN].copy_from_slice(&s.column.to_be_bytes());
            body[field::N_EPOCH].copy_from_slice(&s.epoch.to_be_bytes());
        } else if self.missing != 0 {
            body[field::N_MISSING].copy_from_slice(&self.missing.to_be_bytes());
        }
        Ok(len)
    }
}

/// A congestion notice (kind 2, translator to reporter on UDP 40044, [DTA-draft §3.2]: the
/// translator "informs reporters about the congestion so to prevent the reception of
/// non-critical telemetry data"): for `hold_ms` from receipt the reporter sends at most
/// `low_rate` low-priority and `medium_rate` medium-priority datagrams per second (0: pause,
/// [`RATE_UNLIMITED`]: no limit). High priority is never limited; a newer notice replaces an
/// older one; `hold_ms` 0 lifts the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoticeRepr {
    /// The reporter addressed.
    pub reporter_id: u32,
    /// How long the limits hold, milliseconds.
    pub hold_ms: u32,
    /// Low-priority datagrams per second allowed meanwhile.
    pub low_rate: u32,
    /// Medium-priority datagrams per second allowed meanwhile.
    pub medium_rate: u32,
}

impl NoticeRepr {
    /// The limit for datagrams of `priority` (high: [`RATE_UNLIMITED`]).
    pub const fn rate(&self, priority: Priority) -> u32 {
        match priority {
            Priority::Low => self.low_rate,
            Priority::Medium => self.medium_rate,
            Priority::High => RATE_UNLIMITED,
        }
    }

    fn from_body(reporter_id: u32, body: &[u8]) -> NoticeRepr {
        NoticeRepr {
            reporter_id,
            hold_ms: be_u32(&body[field::C_HOLD_MS]),
            low_rate: be_u32(&body[field::C_LOW_RATE]),
            medium_rate: be_u32(&body[field::C_MEDIUM_RATE]),
        }
    }

    /// Parse a whole notice (header checks as [`HeaderRepr::parse`], then kind must be notice
    /// (`UnknownKind`), count 1 (`BadCount`), exactly [`NOTICE_LEN`] bytes).
    pub fn parse(buf: &[u8]) -> Result<NoticeRepr, Error> {
        let p = Packet::new_unchecked(buf);
        let h = HeaderRepr::parse(&p)?;
        if h.kind != Kind::Notice {
            return Err(Error::UnknownKind);
        }
        check_notice_body(h.count, p.payload())?;
        Ok(NoticeRepr::from_body(h.reporter_id, p.payload()))
    }

    /// [`NOTICE_LEN`].
    pub const fn buffer_len(&self) -> usize {
        NOTICE_LEN
    }

    /// Emit into the front of `buf` (priority low, R clear, seq 0); returns the length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let b = buf.get_mut(..NOTICE_LEN).ok_or(Error::Truncated)?;
        let mut p = Packet::new_unchecked(b);
        HeaderRepr {
            kind: Kind::Notice,
            priority: Priority::Low,
            retransmittable: false,
            count: 1,
            reporter_id: self.reporter_id,
            seq: 0,
        }
        .emit(&mut p);
        let body = p.payload_mut();
        body[field::C_HOLD_MS].copy_from_slice(&self.hold_ms.to_be_bytes());
        body[field::C_LOW_RATE].copy_from_slice(&self.low_rate.to_be_bytes());
        body[field::C_MEDIUM_RATE].copy_from_slice(&self.medium_rate.to_be_bytes());
        Ok(NOTICE_LEN)
    }
}

/// A hello (kind 3, reporter to translator on the translator's port): the reporter's `life`, a
/// random number drawn when it starts. Sent sealed ([`crate::auth::seal`]) by a reporter with a
/// control key, when it starts and once a second; the translator then binds every NACK and
/// notice to this reporter to the life ([`crate::auth::seal_bound`]), so messages recorded in
/// an earlier life of the reporter are not obeyed by this one. Sent with priority high, so that
/// a classifier in front of the translator keeps it under the overload its notices are about;
/// priority, R and seq are ignored on receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelloRepr {
    /// The reporter announcing itself.
    pub reporter_id: u32,
    /// Its life: random, drawn when it starts.
    pub life: u64,
}

impl HelloRepr {
    /// Parse a whole hello (header checks as [`HeaderRepr::parse`], then kind must be hello
    /// (`UnknownKind`), count 0 (`BadCount`), exactly [`HELLO_LEN`] bytes).
    pub fn parse(buf: &[u8]) -> Result<HelloRepr, Error> {
        let p = Packet::new_unchecked(buf);
        let h = HeaderRepr::parse(&p)?;
        if h.kind != Kind::Hello {
            return Err(Error::UnknownKind);
        }
        check_hello_body(h.count, p.payload())?;
        Ok(HelloRepr {
            reporter_id: h.reporter_id,
            life: be_u64(&p.payload()[field::H_LIFE]),
        })
    }

    /// [`HELLO_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HELLO_LEN
    }

    /// Emit into the front of `buf` (priority high, R clear, count 0, seq 0); returns the
    /// length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let b = buf.get_mut(..HELLO_LEN).ok_or(Error::Truncated)?;
        let mut p = Packet::new_unchecked(b);
        HeaderRepr {
            kind: Kind::Hello,
            priority: Priority::High,
            retransmittable: false,
            count: 0,
            reporter_id: self.reporter_id,
            seq: 0,
        }
        .emit(&mut p);
        p.payload_mut()[field::H_LIFE].copy_from_slice(&self.life.to_be_bytes());
        Ok(HELLO_LEN)
    }
}

/// Validate a hello's count (0) and body length.
fn check_hello_body(count: u8, body: &[u8]) -> Result<(), Error> {
    if count != 0 {
        return Err(Error::BadCount);
    }
    match body.len().cmp(&HELLO_BODY_LEN) {
        core::cmp::Ordering::Less => Err(Error::Truncated),
        core::cmp::Ordering::Greater => Err(Error::TrailingBytes),
        core::cmp::Ordering::Equal => Ok(()),
    }
}

/// Validate a notice's count (1) and body length.
fn check_notice_body(count: u8, body: &[u8]) -> Result<(), Error> {
    if count != 1 {
        return Err(Error::BadCount);
    }
    match body.len().cmp(&NOTICE_BODY_LEN) {
        core::cmp::Ordering::Less => Err(Error::Truncated),
        core::cmp::Ordering::Greater => Err(Error::TrailingBytes),
        core::cmp::Ordering::Equal => Ok(()),
    }
}

/// A whole, validated native datagram: a report datagram (kind 0), a NACK (kind 1), a
/// congestion notice (kind 2) or a hello (kind 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// The header.
    pub header: HeaderRepr,
    buf: &'a [u8],
    nack: NackBody,
    /// Every report's length when the reports share one shape ([`Datagram::one_shape`]), else 0.
    stride: u16,
}

impl<'a> Datagram<'a> {
    /// Parse validates the WHOLE datagram (every report) before returning, so a caller never
    /// applies half a malformed datagram. Check order: header ([`HeaderRepr::parse`]); for
    /// kind 0, count >= 1 (`BadCount`), then each report in turn ([`ReportPacket::check_len`]),
    /// then no bytes left (`TrailingBytes`); for kind 1, as [`NackRepr::parse`]; for kind 2, as
    /// [`NoticeRepr::parse`]; for kind 3, as [`HelloRepr::parse`].
    #[inline]
    pub fn parse(buf: &'a [u8]) -> Result<Datagram<'a>, Error> {
        let p = Packet::new_unchecked(buf);
        let mut header = HeaderRepr::parse(&p)?;
        let mut nack = NackBody::None;
        let mut stride = 0;
        match header.kind {
            Kind::Nack | Kind::Notice | Kind::Hello => {
                match header.kind {
                    Kind::Nack => nack = parse_nack_body(header.count, p.payload())?,
                    Kind::Notice => check_notice_body(header.count, p.payload())?,
                    _ => check_hello_body(header.count, p.payload())?,
                }
                if header.kind != Kind::Nack {
                    header.seq = 0;
                }
                // Pri and R (and a notice's seq) are sent as 0 and ignored on receipt (a Pri of
                // 3 is still `BadPriority`: the header is checked before the kind's body).
                header.priority = Priority::Low;
                header.retransmittable = false;
            }
            Kind::Reports => {
                if header.count == 0 {
                    return Err(Error::BadCount);
                }
                stride = one_shape(&buf[HEADER_LEN..], header.count);
                if stride == 0 {
                    let mut rest = &buf[HEADER_LEN..];
                    for _ in 0..header.count {
                        rest = ReportView::parse(rest)?.1;
                    }
                    if !rest.is_empty() {
                        return Err(Error::TrailingBytes);
                    }
                }
            }
        }
        Ok(Datagram {
            header,
            buf,
            nack,
            stride,
        })
    }

    /// The reports, if they all share one shape (opcode, key length and data length: every
    /// report the same length), as the common reporter sends them: the translator's lean path
    /// reads them at a fixed stride without decoding each report's header again.
    #[inline]
    pub fn one_shape(&self) -> Option<OneShape<'a>> {
        if self.stride == 0 {
            return None;
        }
        let body = &self.buf[HEADER_LEN..];
        Some(OneShape {
            opcode: Opcode::try_from(body[field::R_OPCODE]).ok()?,
            stride: self.stride as usize,
            body,
        })
    }

    /// The reports, in order (none for a NACK). Infallible and allocation-free: `parse` has
    /// validated them.
    #[inline]
    pub fn reports(&self) -> Reports<'a> {
        Reports {
            views: self.views(),
        }
    }

    /// The reports as validated views, in order (none for a NACK): the zero-copy iterator the
    /// translator's fast path and every other consumer use.
    #[inline]
    pub fn views(&self) -> ReportViews<'a> {
        ReportViews {
            buf: &self.buf[HEADER_LEN..],
            remaining: match self.header.kind {
                Kind::Reports => self.header.count,
                Kind::Nack | Kind::Notice | Kind::Hello => 0,
            },
        }
    }

    /// The NACK, if this is one.
    pub fn nack(&self) -> Option<NackRepr> {
        (self.header.kind == Kind::Nack)
            .then(|| NackRepr::from_body(self.header.reporter_id, self.header.seq, self.nack))
    }

    /// The congestion notice, if this is one.
    pub fn notice(&self) -> Option<NoticeRepr> {
        (self.header.kind == Kind::Notice)
            .then(|| NoticeRepr::from_body(self.header.reporter_id, &self.buf[HEADER_LEN..]))
    }

    /// The hello, if this is one.
    pub fn hello(&self) -> Option<HelloRepr> {
        (self.header.kind == Kind::Hello).then(|| HelloRepr {
            reporter_id: self.header.reporter_id,
            life: be_u64(&self.buf[HEADER_LEN..][field::H_LIFE]),
        })
    }

    /// The whole datagram's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }
}

/// The length of each report of `body` (`count` reports) when they all share the first one's
/// shape and exactly fill it, else 0. A fast acceptance only: the first report passes
/// [`ReportView::parse`], whose checks read nothing but the opcode, key length and data length
/// bytes and the length left, so reports with the same three bytes at the same stride pass it
/// too. Anything else (and every error) is left to the report-by-report loop.
#[inline]
fn one_shape(body: &[u8], count: u8) -> u16 {
    let Ok((first, _)) = ReportView::parse(body) else {
        return 0;
    };
    let stride = first.len();
    if body.len() != stride * count as usize || stride > u16::MAX as usize {
        return 0;
    }
    let shape = |r: &[u8]| {
        (
            r[field::R_OPCODE],
            r[field::R_KEY_LEN],
            r[field::R_DATA_LEN],
        )
    };
    let want = shape(body);
    if body.chunks_exact(stride).all(|r| shape(r) == want) {
        stride as u16
    } else {
        0
    }
}

/// The reports of a validated datagram that all share one shape ([`Datagram::one_shape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OneShape<'a> {
    opcode: Opcode,
    stride: usize,
    body: &'a [u8],
}

impl<'a> OneShape<'a> {
    /// Every report's primitive.
    #[inline]
    pub fn opcode(&self) -> Opcode {
        self.opcode
    }

    /// Every report's key length.
    #[inline]
    pub fn key_len(&self) -> usize {
        self.body[field::R_KEY_LEN] as usize
    }

    /// Every report's data length field (Key-Write: the data's bytes).
    #[inline]
    pub fn data_len(&self) -> usize {
        self.body[field::R_DATA_LEN] as usize
    }

    /// The number of reports.
    #[inline]
    pub fn len(&self) -> usize {
        self.body.len() / self.stride
    }

    /// Never true: a report datagram holds at least one report.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.body.is_empty()
    }

    /// The reports as views, in order, at the fixed stride (no header decoded again).
    #[inline]
    pub fn views(&self) -> impl ExactSizeIterator<Item = ReportView<'a>> + Clone + 'a {
        let opcode = self.opcode;
        self.body
            .chunks_exact(self.stride)
            .map(move |buf| ReportView { buf, opcode })
    }

    /// Whether every report carries redundancy `redundancy`, no I flag and no other flag bit
    /// (the flags byte `redundancy - 1`): one compare per report.
    #[inline]
    pub fn plain_at(&self, redundancy: u8) -> bool {
        let want = redundancy.wrapping_sub(1);
        want & !field::R_REDUNDANCY_MASK == 0
            && self
                .body
                .chunks_exact(self.stride)
                .all(|r| r[field::R_FLAGS] == want)
    }
}

/// Iterator over a validated datagram's reports as [`ReportView`]s.
#[derive(Debug, Clone)]
pub struct ReportViews<'a> {
    buf: &'a [u8],
    remaining: u8,
}

impl<'a> Iterator for ReportViews<'a> {
    type Item = ReportView<'a>;

    #[inline]
    fn next(&mut self) -> Option<ReportView<'a>> {
        if self.remaining == 0 {
            return None;
        }
        // A `ReportViews` is only made by `Datagram::views` over bytes `Datagram::parse`
        // validated report by report with this same `ReportView::parse`, so this re-check
        // (a few compares) holds; were it ever to fail, iteration ends rather than panics.
        match ReportView::parse(self.buf) {
            Ok((view, rest)) => {
                self.buf = rest;
                self.remaining -= 1;
                Some(view)
            }
            Err(_) => {
                debug_assert!(false, "a validated datagram's report failed to parse");
                self.remaining = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining as usize, Some(self.remaining as usize))
    }
}

impl ExactSizeIterator for ReportViews<'_> {}

/// Iterator over a validated datagram's reports as [`Report`]s.
#[derive(Debug, Clone)]
pub struct Reports<'a> {
    views: ReportViews<'a>,
}

impl<'a> Iterator for Reports<'a> {
    type Item = Report<'a>;

    #[inline]
    fn next(&mut self) -> Option<Report<'a>> {
        self.views.next().map(|v| v.report())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.views.size_hint()
    }
}

impl ExactSizeIterator for Reports<'_> {}

/// Builds a report datagram in a caller buffer, without allocating.
#[derive(Debug)]
pub struct DatagramBuilder<'b> {
    buf: &'b mut [u8],
    len: usize,
    count: u8,
}

impl<'b> DatagramBuilder<'b> {
    /// Start a datagram: writes the header with count 0. `Truncated` if `buf` cannot hold it.
    pub fn new(
        buf: &'b mut [u8],
        priority: Priority,
        retransmittable: bool,
        reporter_id: u32,
        seq: u32,
    ) -> Result<Self, Error> {
        let h = buf.get_mut(..HEADER_LEN).ok_or(Error::Truncated)?;
        HeaderRepr {
            kind: Kind::Reports,
            priority,
            retransmittable,
            count: 0,
            reporter_id,
            seq,
        }
        .emit(&mut Packet::new_unchecked(h));
        Ok(DatagramBuilder {
            buf,
            len: HEADER_LEN,
            count: 0,
        })
    }

    /// Append a report. Errors (the datagram is left unchanged): `BadKeyLen`, `BadDataLen`,
    /// `BadRedundancy` for an invalid report, `BadCount` after 255 reports, `Truncated` when
    /// it does not fit.
    pub fn push(&mut self, report: &Report<'_>) -> Result<(), Error> {
        check_report(report)?;
        if self.count == u8::MAX {
            return Err(Error::BadCount);
        }
        let n = emit_report(report, &mut self.buf[self.len..])?;
        self.len += n;
        self.count += 1;
        Ok(())
    }

    /// Whether `report` would fit (ignoring its validity).
    pub fn fits(&self, report: &Report<'_>) -> bool {
        self.count < u8::MAX && self.len + report_len(report) <= self.buf.len()
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no report has been pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Reports pushed so far.
    pub fn count(&self) -> u8 {
        self.count
    }

    /// Write the count and return the datagram's length. A datagram with no report is not
    /// valid on the wire (`BadCount`); check [`DatagramBuilder::is_empty`] before sending.
    pub fn finish(self) -> usize {
        self.buf[field::COUNT] = self.count;
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Hand-assembled (independent of the emitter): the worked example of docs/protocol.md.
    #[rustfmt::skip]
    const TWO_REPORTS: [u8; 40] = [
        0x10, 0xa0, 0x02, 0x00, // v1 reports, priority high, R, count 2
        0x00, 0x00, 0x00, 0x07, // reporter 7
        0x00, 0x00, 0x01, 0x00, // seq 256
        0x01, 0x81, 0x04, 0x04, // Key-Write, I, redundancy 2, key 4, data 4
        0x0a, 0x00, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef,
        0x05, 0x00, 0x00, 0x04, // Sketch-Merge, data 4
        0x00, 0x03, 0x00, 0x10, 0x00, 0x00, 0x00, 0x02, // sketch 3, column 16, epoch 2
        0x00, 0x00, 0x00, 0x2a,
    ];

    #[test]
    fn parse_hand_assembled() {
        let d = Datagram::parse(&TWO_REPORTS).unwrap();
        assert_eq!(
            d.header,
            HeaderRepr {
                kind: Kind::Reports,
                priority: Priority::High,
                retransmittable: true,
                count: 2,
                reporter_id: 7,
                seq: 256
            }
        );
        let r: Vec<_> = d.reports().collect();
        assert_eq!(
            r,
            vec![
                Report::KeyWrite {
                    key: &[10, 0, 0, 1],
                    data: &[0xde, 0xad, 0xbe, 0xef],
                    redundancy: 2,
                    immediate: true
                },
                Report::SketchColumn {
                    sketch_id: 3,
                    column: 16,
                    epoch: 2,
                    data: &[0, 0, 0, 42],
                    immediate: false
                }
            ]
        );
        assert_eq!(d.nack(), None);
        assert_eq!(d.reports().len(), 2);

        let mut out = [0u8; 64];
        let mut b = DatagramBuilder::new(&mut out, Priority::High, true, 7, 256).unwrap();
        for rep in &r {
            b.push(rep).unwrap();
        }
        assert_eq!(b.count(), 2);
        let n = b.finish();
        assert_eq!(&out[..n], &TWO_REPORTS);
    }

    #[test]
    fn every_truncation_is_rejected() {
        for n in 0..TWO_REPORTS.len() {
            assert_eq!(
                Datagram::parse(&TWO_REPORTS[..n]),
                Err(Error::Truncated),
                "{n}"
            );
        }
        let mut long = TWO_REPORTS.to_vec();
        long.push(0);
        assert_eq!(Datagram::parse(&long), Err(Error::TrailingBytes));
    }

    #[test]
    fn header_rejections_in_order() {
        let mut b = TWO_REPORTS;
        b[0] = 0x14;
        assert_eq!(Datagram::parse(&b), Err(Error::UnknownKind));
        b[0] = 0x20;
        assert_eq!(Datagram::parse(&b), Err(Error::UnknownVersion));
        assert_eq!(Datagram::parse(&[0x20]), Err(Error::UnknownVersion));
        let mut b = TWO_REPORTS;
        b[1] = 0xc0;
        assert_eq!(Datagram::parse(&b), Err(Error::BadPriority));
        let mut b = TWO_REPORTS;
        b[2] = 0;
        assert_eq!(Datagram::parse(&b), Err(Error::BadCount));
        // Count 1 leaves the Sketch-Merge report as trailing bytes; count 3 runs out.
        b[2] = 1;
        assert_eq!(Datagram::parse(&b), Err(Error::TrailingBytes));
        b[2] = 3;
        assert_eq!(Datagram::parse(&b), Err(Error::Truncated));
        // Reserved bits are ignored.
        let mut b = TWO_REPORTS;
        b[1] |= 0x1f;
        b[3] = 0xff;
        b[13] |= 0x7c;
        let d = Datagram::parse(&b).unwrap();
        assert_eq!(
            d.reports().collect::<Vec<_>>(),
            Datagram::parse(&TWO_REPORTS)
                .unwrap()
                .reports()
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn report_length_rules() {
        let ok = |op, k, d| body_len(op, k, d);
        assert_eq!(ok(1, 1, 4), Ok(5));
        assert_eq!(ok(1, 16, 64), Ok(80));
        assert_eq!(ok(1, 0, 4), Err(Error::BadKeyLen));
        assert_eq!(ok(1, 17, 4), Err(Error::BadKeyLen));
        assert_eq!(ok(1, 4, 3), Err(Error::BadDataLen));
        assert_eq!(ok(1, 4, 65), Err(Error::BadDataLen));
        assert_eq!(ok(2, 0, 64), Ok(68));
        assert_eq!(ok(2, 1, 4), Err(Error::BadKeyLen));
        assert_eq!(ok(3, 13, 8), Ok(21));
        assert_eq!(ok(3, 13, 4), Err(Error::BadDataLen));
        assert_eq!(ok(4, 13, 4), Ok(19));
        assert_eq!(ok(4, 13, 8), Err(Error::BadDataLen));
        assert_eq!(ok(5, 0, 4), Ok(12));
        assert_eq!(ok(5, 2, 4), Err(Error::BadKeyLen));
        assert_eq!(ok(0, 4, 4), Err(Error::UnknownOpcode));
        assert_eq!(ok(6, 4, 4), Err(Error::UnknownOpcode));
    }

    #[test]
    fn builder_errors_leave_datagram_intact() {
        let mut out = [0u8; HEADER_LEN + 20];
        let mut b = DatagramBuilder::new(&mut out, Priority::Low, false, 1, 2).unwrap();
        let kw = Report::KeyWrite {
            key: &[1; 17],
            data: &[0; 4],
            redundancy: 1,
            immediate: false,
        };
        assert_eq!(b.push(&kw), Err(Error::BadKeyLen));
        let kw = Report::KeyWrite {
            key: &[1; 2],
            data: &[0; 4],
            redundancy: 5,
            immediate: false,
        };
        assert_eq!(b.push(&kw), Err(Error::BadRedundancy));
        let app = Report::Append {
            list_id: 1,
            data: &[0; 2],
            immediate: false,
        };
        assert_eq!(b.push(&app), Err(Error::BadDataLen));
        let app = Report::Append {
            list_id: 1,
            data: &[0; 4],
            immediate: false,
        };
        assert!(b.fits(&app));
        assert_eq!(b.push(&app), Ok(()));
        assert!(!b.fits(&app));
        assert_eq!(b.push(&app), Err(Error::Truncated));
        assert_eq!(b.len(), HEADER_LEN + 12);
        let n = b.finish();
        let d = Datagram::parse(&out[..n]).unwrap();
        assert_eq!(d.reports().collect::<Vec<_>>(), vec![app]);
        assert!(DatagramBuilder::new(&mut [0u8; 11], Priority::Low, false, 0, 0).is_err());
    }

    #[test]
    fn builder_caps_at_255_reports() {
        let mut out = vec![0u8; HEADER_LEN + 256 * 12];
        let mut b = DatagramBuilder::new(&mut out, Priority::Medium, false, 9, 0).unwrap();
        let app = Report::Append {
            list_id: 3,
            data: &[1, 2, 3, 4],
            immediate: true,
        };
        for _ in 0..255 {
            b.push(&app).unwrap();
        }
        assert_eq!(b.push(&app), Err(Error::BadCount));
        let n = b.finish();
        let d = Datagram::parse(&out[..n]).unwrap();
        assert_eq!(d.header.count, 255);
        assert!(d.reports().all(|r| r == app));
        assert_eq!(d.reports().count(), 255);
    }

    #[test]
    fn nacks() {
        #[rustfmt::skip]
        let plain = [0x11, 0x00, 0x00, 0x00, 0, 0, 0, 7, 0, 0, 1, 1];
        let n = NackRepr::parse(&plain).unwrap();
        assert_eq!(
            n,
            NackRepr {
                reporter_id: 7,
                seq: 257,
                sketch: None,
                missing: 0,
            }
        );
        let mut out = [0u8; 32];
        assert_eq!(n.emit(&mut out), Ok(12));
        assert_eq!(&out[..12], &plain);
        let with = NackRepr {
            sketch: Some(SketchNack {
                sketch_id: 3,
                column: 16,
                epoch: 2,
            }),
            ..n
        };
        assert_eq!(with.buffer_len(), 20);
        assert_eq!(with.emit(&mut out), Ok(20));
        assert_eq!(out[2], 1);
        assert_eq!(&out[12..20], &[0, 3, 0, 0x10, 0, 0, 0, 2]);
        assert_eq!(NackRepr::parse(&out[..20]), Ok(with));
        assert_eq!(NackRepr::parse(&out[..19]), Err(Error::Truncated));
        assert_eq!(with.emit(&mut out[..19]), Err(Error::Truncated));
        let d = Datagram::parse(&out[..20]).unwrap();
        assert_eq!(d.nack(), Some(with));
        assert_eq!(d.reports().count(), 0);
        let header = d.header;
        // Priority and R of a NACK are ignored on receipt.
        out[1] = 0xa0;
        let d2 = Datagram::parse(&out[..20]).unwrap();
        assert_eq!(d2.header, header);
        assert_eq!(d2.header.priority, Priority::Low);
        assert_eq!(NackRepr::parse(&out[..20]), Ok(with));
        out[1] = 0xc0;
        assert_eq!(NackRepr::parse(&out[..20]), Err(Error::BadPriority));
        out[1] = 0;
        out[2] = 3;
        assert_eq!(NackRepr::parse(&out[..20]), Err(Error::BadCount));
        assert_eq!(NackRepr::parse(&TWO_REPORTS), Err(Error::UnknownKind));
        let mut extra = plain.to_vec();
        extra.push(0);
        assert_eq!(NackRepr::parse(&extra), Err(Error::TrailingBytes));
    }

    #[test]
    fn selective_nacks_name_every_missing_datagram() {
        let n = NackRepr {
            missing: 0b101 | 1 << 63,
            ..NackRepr::new(5, u32::MAX - 1)
        };
        assert_eq!(n.buffer_len(), 20);
        let mut out = [0u8; 24];
        assert_eq!(n.emit(&mut out), Ok(20));
        #[rustfmt::skip]
        assert_eq!(
            &out[..20],
            &[0x11, 0, 2, 0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xfe,
              0x80, 0, 0, 0, 0, 0, 0, 0x05]
        );
        assert_eq!(NackRepr::parse(&out[..20]), Ok(n));
        assert_eq!(Datagram::parse(&out[..20]).unwrap().nack(), Some(n));
        // seq, then seq+1 (bit 0), seq+3 (bit 2), seq+64 (bit 63), wrapping.
        let seqs: Vec<u32> = n.missing_seqs().collect();
        assert_eq!(seqs, vec![u32::MAX - 1, u32::MAX, 1, 62]);
        assert_eq!(
            NackRepr::new(1, 9).missing_seqs().collect::<Vec<_>>(),
            vec![9]
        );
        assert_eq!(NackRepr::parse(&out[..19]), Err(Error::Truncated));
        // One body only.
        let both = NackRepr {
            sketch: Some(SketchNack {
                sketch_id: 1,
                column: 2,
                epoch: 3,
            }),
            ..n
        };
        assert_eq!(both.emit(&mut out), Err(Error::BadCount));
    }

    #[test]
    fn congestion_notices() {
        let c = NoticeRepr {
            reporter_id: 0x0102_0304,
            hold_ms: 200,
            low_rate: 0,
            medium_rate: RATE_UNLIMITED,
        };
        let mut out = [0u8; 32];
        assert_eq!(c.emit(&mut out), Ok(NOTICE_LEN));
        #[rustfmt::skip]
        assert_eq!(
            &out[..NOTICE_LEN],
            &[0x12, 0, 1, 0, 1, 2, 3, 4, 0, 0, 0, 0,
              0, 0, 0, 200, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(NoticeRepr::parse(&out[..NOTICE_LEN]), Ok(c));
        let d = Datagram::parse(&out[..NOTICE_LEN]).unwrap();
        assert_eq!(d.notice(), Some(c));
        assert_eq!(d.nack(), None);
        assert_eq!(d.reports().count(), 0);
        assert_eq!(d.header.kind, Kind::Notice);
        assert_eq!(c.rate(Priority::Low), 0);
        assert_eq!(c.rate(Priority::High), RATE_UNLIMITED);
        assert_eq!(
            NoticeRepr::parse(&out[..NOTICE_LEN - 1]),
            Err(Error::Truncated)
        );
        assert_eq!(
            NoticeRepr::parse(&out[..NOTICE_LEN + 1]),
            Err(Error::TrailingBytes)
        );
        assert_eq!(c.emit(&mut out[..NOTICE_LEN - 1]), Err(Error::Truncated));
        // Pri, R and seq are ignored on receipt; the count must be 1.
        out[1] = 0xa0;
        out[11] = 9;
        assert_eq!(NoticeRepr::parse(&out[..NOTICE_LEN]), Ok(c));
        assert_eq!(Datagram::parse(&out[..NOTICE_LEN]).unwrap().header.seq, 0);
        out[2] = 0;
        assert_eq!(NoticeRepr::parse(&out[..NOTICE_LEN]), Err(Error::BadCount));
        assert_eq!(Datagram::parse(&out[..NOTICE_LEN]), Err(Error::BadCount));
        // Not a NACK, and a NACK is not a notice.
        out[2] = 1;
        assert_eq!(NackRepr::parse(&out[..NOTICE_LEN]), Err(Error::UnknownKind));
        let mut nack = [0u8; 12];
        NackRepr::new(1, 2).emit(&mut nack).unwrap();
        assert_eq!(NoticeRepr::parse(&nack), Err(Error::UnknownKind));
        // Kind 4 is unknown.
        out[0] = 0x14;
        assert_eq!(Datagram::parse(&out[..NOTICE_LEN]), Err(Error::UnknownKind));
    }

    #[test]
    fn hellos() {
        let h = HelloRepr {
            reporter_id: 0x0102_0304,
            life: 0x1122_3344_5566_7788,
        };
        let mut out = [0u8; 32];
        assert_eq!(h.emit(&mut out), Ok(HELLO_LEN));
        assert_eq!(
            &out[..HELLO_LEN],
            &[
                0x13, 0x80, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                0x88
            ]
        );
        assert_eq!(HelloRepr::parse(&out[..HELLO_LEN]), Ok(h));
        let d = Datagram::parse(&out[..HELLO_LEN]).unwrap();
        assert_eq!((d.hello(), d.views().count(), d.nack()), (Some(h), 0, None));
        assert_eq!(h.emit(&mut out[..HELLO_LEN - 1]), Err(Error::Truncated));
        assert_eq!(
            HelloRepr::parse(&out[..HELLO_LEN - 1]),
            Err(Error::Truncated)
        );
        assert_eq!(
            HelloRepr::parse(&out[..HELLO_LEN + 1]),
            Err(Error::TrailingBytes)
        );
        out[2] = 1;
        assert_eq!(HelloRepr::parse(&out[..HELLO_LEN]), Err(Error::BadCount));
        assert_eq!(Datagram::parse(&out[..HELLO_LEN]), Err(Error::BadCount));
        out[2] = 0;
        out[0] = 0x12;
        assert_eq!(HelloRepr::parse(&out[..HELLO_LEN]), Err(Error::UnknownKind));
    }

    #[test]
    fn views_decode_every_primitive_in_order_and_bound_each_report() {
        let reports = [
            Report::KeyWrite {
                key: &[1, 2, 3],
                data: &[9; 8],
                redundancy: 3,
                immediate: true,
            },
            Report::KeyIncrement {
                key: &[4; 16],
                counter: 0x0102_0304_0506_0708,
                redundancy: 4,
                immediate: false,
            },
            Report::Append {
                list_id: 77,
                data: &[5; 64],
                immediate: false,
            },
            Report::Postcard {
                key: &[6; 13],
                hop: 2,
                path_len: 5,
                value: 0xdead_beef,
                immediate: true,
            },
            Report::SketchColumn {
                sketch_id: 3,
                column: 9,
                epoch: 11,
                data: &[7; 12],
                immediate: false,
            },
        ];
        let mut buf = [0u8; 512];
        let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 1, 0).unwrap();
        for r in &reports {
            b.push(r).unwrap();
        }
        let n = b.finish();
        let d = Datagram::parse(&buf[..n]).unwrap();
        let views: Vec<_> = d.views().collect();
        assert_eq!(views.len(), reports.len());
        let mut total = HEADER_LEN;
        for (v, r) in views.iter().zip(&reports) {
            assert_eq!(v.report(), *r);
            assert_eq!(v.opcode(), r.opcode());
            assert_eq!(v.immediate(), r.immediate());
            assert_eq!(v.len(), report_len(r));
            total += v.len();
        }
        assert_eq!(total, n);
        assert_eq!(views[0].key(), &[1, 2, 3]);
        assert_eq!(views[0].redundancy(), 3);
        assert!(views[2].key().is_empty());
        assert_eq!(d.reports().collect::<Vec<_>>(), reports);
    }

    #[test]
    fn a_view_never_reaches_past_its_report_or_its_buffer() {
        // Every prefix of a valid report is rejected (Truncated), never read past.
        let mut buf = [0u8; MAX_REPORT_LEN];
        let r = Report::KeyWrite {
            key: &[1; 16],
            data: &[2; 64],
            redundancy: 1,
            immediate: false,
        };
        let len = emit_report(&r, &mut buf).unwrap();
        for cut in 0..len {
            assert_eq!(
                ReportView::parse(&buf[..cut]).unwrap_err(),
                Error::Truncated,
                "{cut}"
            );
        }
        let mut longer = buf.to_vec();
        longer.extend_from_slice(&[0xff; 7]);
        let (v, rest) = ReportView::parse(&longer).unwrap();
        assert_eq!(v.len(), len);
        assert_eq!(rest.len(), longer.len() - len);
    }
}
