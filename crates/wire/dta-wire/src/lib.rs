//! Zero-copy wire formats of Direct Telemetry Access ([DTA §3, Figure 4]: a UDP payload made
//! of a DTA header and a primitive sub-header). Two protocols share UDP port [`DTA_PORT`] and are
//! told apart by the first payload byte (see `docs/protocol.md`): the byte-exact
//! [`prototype`] protocol of the Tofino implementation (one report per datagram) and the
//! [`native`] protocol version 1 (many reports per datagram, variable key and data lengths,
//! reporter id, 32-bit sequence numbers, priority and Sketch-Merge). Both parse into the
//! protocol-independent [`Report`] the translator consumes. Views follow smoltcp's `wire` style
//! (`Packet<T: AsRef<[u8]>>` with checked accessors, `Repr` with `parse`/`emit`/`buffer_len`);
//! parsing never allocates and never panics, and every rejection is one [`Error`] whose
//! [`Error::reason`] is the counter name of `docs/protocol.md`. The transports around DTA live
//! in their own crates: RoCEv2 and RDMA CM in `dta-roce`, INT and telemetry reports in
//! `dta-int-wire`.
//!
//! ```
//! use dta_wire::{native::DatagramBuilder, prototype::BaseFormat, Datagram, Priority, Report};
//!
//! let kw = Report::KeyWrite { key: &[10, 0, 0, 1], data: &[1, 2, 3, 4], redundancy: 2, immediate:
//! false }; let mut buf = [0u8; 1500];
//! let mut b = DatagramBuilder::new(&mut buf, Priority::High, true, 7, 1).unwrap();
//! b.push(&kw).unwrap();
//! let len = b.finish();
//! match dta_wire::parse(&buf[..len], BaseFormat::Short).unwrap() {
//!     Datagram::Native(d) => assert_eq!(d.reports().collect::<Vec<_>>(), vec![kw]),
//!     Datagram::Prototype(_) => unreachable!(),
//! }
//! assert_eq!(dta_wire::parse(&[0x20; 12], BaseFormat::Short).unwrap_err().reason(),
//! "unknown_version");
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "json")]
pub mod auth;
mod json;
pub mod native;
pub mod prefix;
pub mod prototype;

#[cfg(feature = "json")]
pub use json::{hello_to_json, nack_to_json, notice_to_json, report_to_json, to_json};

/// UDP destination port of DTA reports (both protocols).
pub const DTA_PORT: u16 = 40040;
/// UDP port reporters receive NACKs on (both protocols).
pub const NACK_PORT: u16 = 40044;
/// Largest datagram a DTA receiver takes (a 9000-byte jumbo frame's UDP payload, rounded up to
/// 9 KiB); a longer one is truncated by the receive buffer and rejected by the parser.
pub const MAX_DATAGRAM: usize = 9216;

/// The most copies a Key-Write or Key-Increment report may name, and so the most a store holds:
/// the native report header carries redundancy − 1 in two bits, the prototype accepts 1..=4
/// (`docs/protocol.md`). Every crate and binding takes its limit from here.
pub const MAX_REDUNDANCY: u8 = 4;
/// The redundancy N a store is created with, and reporters use, when nothing else is said
/// ([DTA A.5]: N = 2 already cuts empty answers about threefold at load 0.1).
pub const DEFAULT_REDUNDANCY: u8 = 2;
/// The size of a Postcarding store's value set V = 0..values when nothing else is said: switch
/// ids of 18 bits, as in `examples/dta.toml` ([DTA §4] "Postcarding").
pub const DEFAULT_POSTCARD_VALUES: u32 = 1 << 18;

/// A DTA primitive ([DTA §4]; Sketch-Merge: [DTA-draft §3.1]). The value is the on-wire opcode,
/// shared by both protocols (the prototype has no Sketch-Merge).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Opcode {
    /// Key-Write ([DTA §4 "Key-Write", A.1]).
    KeyWrite = 1,
    /// Append ([DTA §4] "Append").
    Append = 2,
    /// Key-Increment ([DTA §4 "Key-Increment", A.4]).
    KeyIncrement = 3,
    /// Postcarding ([DTA §4 "Postcarding", A.2]).
    Postcarding = 4,
    /// Sketch-Merge ([DTA-draft §3.1, §4.2]). Native protocol only.
    SketchMerge = 5,
}

impl Opcode {
    /// All opcodes, in wire order.
    pub const ALL: [Opcode; 5] = [
        Opcode::KeyWrite,
        Opcode::Append,
        Opcode::KeyIncrement,
        Opcode::Postcarding,
        Opcode::SketchMerge,
    ];

    /// The snake_case name used in JSON, spec vectors and counters.
    pub fn name(&self) -> &'static str {
        match self {
            Opcode::KeyWrite => "key_write",
            Opcode::Append => "append",
            Opcode::KeyIncrement => "key_increment",
            Opcode::Postcarding => "postcarding",
            Opcode::SketchMerge => "sketch_merge",
        }
    }

    /// The inverse of [`Opcode::name`].
    pub fn from_name(name: &str) -> Option<Opcode> {
        Opcode::ALL.into_iter().find(|o| o.name() == name)
    }
}

impl TryFrom<u8> for Opcode {
    type Error = Error;
    #[inline]
    fn try_from(v: u8) -> Result<Self, Error> {
        match v {
            1 => Ok(Opcode::KeyWrite),
            2 => Ok(Opcode::Append),
            3 => Ok(Opcode::KeyIncrement),
            4 => Ok(Opcode::Postcarding),
            5 => Ok(Opcode::SketchMerge),
            _ => Err(Error::UnknownOpcode),
        }
    }
}

/// Report importance ([DTA-draft §3.2] "Telemetry Flow Control & Prioritization"): what the
/// translator
/// drops first under congestion. Native protocol only; the value is the 2-bit wire field.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Priority {
    /// Dropped first.
    #[default]
    Low = 0,
    /// The default of the prototype, which carries no priority.
    Medium = 1,
    /// Kept (and retransmitted, when retransmittable) in preference to everything else.
    High = 2,
}

impl Priority {
    /// All priorities, lowest first.
    pub const ALL: [Priority; 3] = [Priority::Low, Priority::Medium, Priority::High];

    /// "low", "medium" or "high".
    pub fn name(&self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Medium => "medium",
            Priority::High => "high",
        }
    }

    /// The inverse of [`Priority::name`].
    pub fn from_name(name: &str) -> Option<Priority> {
        Priority::ALL.into_iter().find(|p| p.name() == name)
    }
}

impl TryFrom<u8> for Priority {
    type Error = Error;
    fn try_from(v: u8) -> Result<Self, Error> {
        match v {
            0 => Ok(Priority::Low),
            1 => Ok(Priority::Medium),
            2 => Ok(Priority::High),
            _ => Err(Error::BadPriority),
        }
    }
}

/// Why a datagram was rejected. [`Error::reason`] is its counter name (`docs/protocol.md`,
/// "Errors"). Emitting uses the same values for reports the wire cannot express.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Error {
    /// The datagram (or buffer, when emitting) ends before a header or body does.
    #[error("truncated: the datagram ends inside a header or a report")]
    Truncated,
    /// The first byte names neither the prototype nor native version 1.
    #[error("unknown protocol version")]
    UnknownVersion,
    /// Native message kind other than reports (0) or NACK (1).
    #[error("unknown native message kind")]
    UnknownKind,
    /// Opcode not defined for the protocol.
    #[error("unknown opcode")]
    UnknownOpcode,
    /// A prototype Key-Write whose length matches none of the 4/12/28-byte data widths.
    #[error("bad length: no data width fits the datagram length")]
    BadLength,
    /// Redundancy outside 1..=4.
    #[error("bad redundancy: must be 1..=4")]
    BadRedundancy,
    /// Native priority 3.
    #[error("bad priority")]
    BadPriority,
    /// Key length not allowed for the opcode.
    #[error("bad key length for the opcode")]
    BadKeyLen,
    /// Data length not allowed for the opcode.
    #[error("bad data length for the opcode")]
    BadDataLen,
    /// Native report count 0 (or > 1 for a NACK, or 255 reports already pushed).
    #[error("bad report count")]
    BadCount,
    /// Bytes after the last report.
    #[error("trailing bytes after the last report")]
    TrailingBytes,
}

impl Error {
    /// Every error, in the order of `docs/protocol.md` (counter arrays index by this).
    pub const ALL: [Error; 11] = [
        Error::Truncated,
        Error::UnknownVersion,
        Error::UnknownKind,
        Error::UnknownOpcode,
        Error::BadLength,
        Error::BadRedundancy,
        Error::BadPriority,
        Error::BadKeyLen,
        Error::BadDataLen,
        Error::BadCount,
        Error::TrailingBytes,
    ];

    /// The snake_case counter name (`"truncated"`, `"unknown_version"`, ...).
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Truncated => "truncated",
            Error::UnknownVersion => "unknown_version",
            Error::UnknownKind => "unknown_kind",
            Error::UnknownOpcode => "unknown_opcode",
            Error::BadLength => "bad_length",
            Error::BadRedundancy => "bad_redundancy",
            Error::BadPriority => "bad_priority",
            Error::BadKeyLen => "bad_key_len",
            Error::BadDataLen => "bad_data_len",
            Error::BadCount => "bad_count",
            Error::TrailingBytes => "trailing_bytes",
        }
    }

    /// The inverse of [`Error::reason`].
    pub fn from_reason(reason: &str) -> Option<Error> {
        Error::ALL.into_iter().find(|e| e.reason() == reason)
    }
}

/// The unified, protocol-independent view of one report the translator consumes. Slices borrow
/// the datagram; keys are in wire order (prototype u32 keys are their 4 big-endian bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report<'a> {
    /// Store `data` under `key` in `redundancy` slots ([DTA §4 "Key-Write", A.1]).
    KeyWrite {
        /// Key bytes as carried (1..=16 native, 4 prototype).
        key: &'a [u8],
        /// Value bytes (4..=64 native; 4, 12 or 28 prototype).
        data: &'a [u8],
        /// Number of copies, 1..=4.
        redundancy: u8,
        /// Write with immediate (notify the collector).
        immediate: bool,
    },
    /// Add `counter` to `redundancy` counters of `key` ([DTA §4 "Key-Increment", A.4]).
    KeyIncrement {
        /// Key bytes as carried.
        key: &'a [u8],
        /// The increment.
        counter: u64,
        /// Number of counters, 1..=4.
        redundancy: u8,
        /// Write with immediate.
        immediate: bool,
    },
    /// Append `data` to list `list_id` ([DTA §4] "Append").
    Append {
        /// The list.
        list_id: u32,
        /// The entry (4..=64 bytes native, 4 prototype).
        data: &'a [u8],
        /// Write with immediate.
        immediate: bool,
    },
    /// One hop's postcard of a flow ([DTA §4 "Postcarding", A.2]).
    Postcard {
        /// Flow key bytes as carried.
        key: &'a [u8],
        /// Hop index on the path.
        hop: u8,
        /// Path length, 0 = unknown; always 0 from the prototype.
        path_len: u8,
        /// The hop's value.
        value: u32,
        /// Write with immediate.
        immediate: bool,
    },
    /// One column of a reporter's sketch ([DTA-draft §3.1] "Sketch-Merge", §4.2).
    SketchColumn {
        /// The sketch.
        sketch_id: u16,
        /// Column index, sent in order per reporter.
        column: u16,
        /// Sketch epoch.
        epoch: u32,
        /// The column's counters.
        data: &'a [u8],
        /// Write with immediate.
        immediate: bool,
    },
}

impl Report<'_> {
    /// The report's primitive.
    pub fn opcode(&self) -> Opcode {
        match self {
            Report::KeyWrite { .. } => Opcode::KeyWrite,
            Report::KeyIncrement { .. } => Opcode::KeyIncrement,
            Report::Append { .. } => Opcode::Append,
            Report::Postcard { .. } => Opcode::Postcarding,
            Report::SketchColumn { .. } => Opcode::SketchMerge,
        }
    }

    /// The immediate flag.
    pub fn immediate(&self) -> bool {
        match *self {
            Report::KeyWrite { immediate, .. }
            | Report::KeyIncrement { immediate, .. }
            | Report::Append { immediate, .. }
            | Report::Postcard { immediate, .. }
            | Report::SketchColumn { immediate, .. } => immediate,
        }
    }
}

/// A datagram of either protocol, told apart by the first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datagram<'a> {
    /// The prototype protocol (first byte 0x01..=0x04).
    Prototype(prototype::Repr<'a>),
    /// Native protocol version 1 (first byte 0x1_): a report datagram or a NACK.
    Native(native::Datagram<'a>),
}

/// Which protocol a UDP payload belongs to, from its first byte (`docs/protocol.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// First byte 0x01..=0x04.
    Prototype,
    /// Top nibble 0x1.
    Native,
}

/// Tell the protocols apart by the first byte: 0x01..=0x04 is a prototype opcode, a top nibble
/// of 1 is native version 1; anything else is [`Error::UnknownVersion`], an empty buffer
/// [`Error::Truncated`].
pub fn protocol_of(buf: &[u8]) -> Result<Protocol, Error> {
    match buf.first() {
        None => Err(Error::Truncated),
        Some(0x01..=0x04) => Ok(Protocol::Prototype),
        Some(b) if b >> 4 == native::VERSION => Ok(Protocol::Native),
        Some(_) => Err(Error::UnknownVersion),
    }
}

/// Parse a UDP payload received on [`DTA_PORT`]: dispatch on the first byte, then validate the
/// whole datagram. `prototype_format` is the configured prototype base header.
#[inline]
pub fn parse(buf: &[u8], prototype_format: prototype::BaseFormat) -> Result<Datagram<'_>, Error> {
    match protocol_of(buf)? {
        Protocol::Prototype => {
            prototype::Repr::parse(buf, prototype_format).map(Datagram::Prototype)
        }
        Protocol::Native => native::Datagram::parse(buf).map(Datagram::Native),
    }
}

pub(crate) use dta_net::be::{rd16 as be_u16, rd32 as be_u32, rd64 as be_u64};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_reasons_are_distinct_and_round_trip() {
        for (i, e) in Error::ALL.iter().enumerate() {
            assert_eq!(Error::from_reason(e.reason()), Some(*e));
            for f in &Error::ALL[i + 1..] {
                assert_ne!(e.reason(), f.reason());
            }
        }
        assert_eq!(Error::BadKeyLen.reason(), "bad_key_len");
        assert_eq!(Error::from_reason("no_store"), None);
    }

    #[test]
    fn opcodes_and_priorities() {
        for o in Opcode::ALL {
            assert_eq!(Opcode::try_from(o as u8), Ok(o));
            assert_eq!(Opcode::from_name(o.name()), Some(o));
        }
        assert_eq!(Opcode::try_from(0), Err(Error::UnknownOpcode));
        assert_eq!(Opcode::try_from(6), Err(Error::UnknownOpcode));
        assert_eq!(Opcode::SketchMerge.name(), "sketch_merge");
        for p in Priority::ALL {
            assert_eq!(Priority::try_from(p as u8), Ok(p));
            assert_eq!(Priority::from_name(p.name()), Some(p));
        }
        assert_eq!(Priority::try_from(3), Err(Error::BadPriority));
    }

    #[test]
    fn first_byte_dispatch() {
        assert_eq!(protocol_of(&[]), Err(Error::Truncated));
        assert_eq!(protocol_of(&[0x00]), Err(Error::UnknownVersion));
        for b in 1..=4u8 {
            assert_eq!(protocol_of(&[b]), Ok(Protocol::Prototype));
        }
        assert_eq!(protocol_of(&[0x05]), Err(Error::UnknownVersion));
        assert_eq!(protocol_of(&[0x0f]), Err(Error::UnknownVersion));
        assert_eq!(protocol_of(&[0x10]), Ok(Protocol::Native));
        assert_eq!(protocol_of(&[0x1f]), Ok(Protocol::Native));
        assert_eq!(protocol_of(&[0x20]), Err(Error::UnknownVersion));
        assert_eq!(protocol_of(&[0xff]), Err(Error::UnknownVersion));
        // Version 2 native header is rejected at dispatch.
        assert_eq!(
            parse(&[0x20; 16], prototype::BaseFormat::Short),
            Err(Error::UnknownVersion)
        );
    }
}
