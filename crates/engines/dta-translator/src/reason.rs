//! Why a datagram or a report was dropped: ONE enum for the parser's reasons and the
//! translator's, matched exhaustively, each named once ([`Reason::name`]). [`crate::Stats`]
//! counts by it, the Prometheus exporter labels by it, and docs/protocol.md's reason table
//! lists the same names.

use dta_store::ApplyError;
use dta_wire::Error as WireError;

/// A reject reason. `Wire` reasons drop a whole datagram (the parser's); the others drop one
/// report (or, for `SourceNotAllowed`, one datagram) at the translator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The parser rejected the datagram ([`dta_wire::Error`]).
    Wire(WireError),
    /// The datagram's source address is outside the translator's (or the store's) allow-list.
    SourceNotAllowed,
    /// No store of the report's primitive and shape (key and data lengths, sketch id).
    NoStore,
    /// Append list id beyond the store's lists.
    BadListId,
    /// Postcarding hop beyond the store's path length.
    BadHop,
    /// Key length the store cannot hold.
    BadKeyLen,
    /// Data length the store cannot hold.
    BadDataLen,
    /// Key-Write redundancy outside 1..=store N, or Key-Increment's outside
    /// 1..=[`dta_store::MAX_REDUNDANCY`].
    BadRedundancy,
    /// A Key-Increment report whose N differs from the store's (a minimum over counters that
    /// were not all added to would read 0).
    RedundancyMismatch,
    /// Sketch-Merge column beyond the store's columns.
    BadColumn,
    /// A Sketch-Merge column that skips ahead (dropped; the reporter is NACKed for the missing
    /// one).
    OutOfOrder,
    /// A sketch column of an epoch already retired.
    StaleEpoch,
    /// A Sketch-Merge reporter beyond the number the store was created for.
    UnknownReporter,
    /// The memory operation failed (sink).
    SinkError,
}

impl Reason {
    /// Number of reasons; counter arrays have this many slots.
    pub const COUNT: usize = WireError::ALL.len() + 13;

    /// Every reason, in counter order: the wire reasons in [`WireError::ALL`]'s order, then the
    /// translator's.
    pub const ALL: [Reason; Reason::COUNT] = [
        Reason::Wire(WireError::Truncated),
        Reason::Wire(WireError::UnknownVersion),
        Reason::Wire(WireError::UnknownKind),
        Reason::Wire(WireError::UnknownOpcode),
        Reason::Wire(WireError::BadLength),
        Reason::Wire(WireError::BadRedundancy),
        Reason::Wire(WireError::BadPriority),
        Reason::Wire(WireError::BadKeyLen),
        Reason::Wire(WireError::BadDataLen),
        Reason::Wire(WireError::BadCount),
        Reason::Wire(WireError::TrailingBytes),
        Reason::SourceNotAllowed,
        Reason::NoStore,
        Reason::BadListId,
        Reason::BadHop,
        Reason::BadKeyLen,
        Reason::BadDataLen,
        Reason::BadRedundancy,
        Reason::RedundancyMismatch,
        Reason::BadColumn,
        Reason::OutOfOrder,
        Reason::StaleEpoch,
        Reason::UnknownReporter,
        Reason::SinkError,
    ];

    /// The counter slot of this reason (its position in [`Reason::ALL`]).
    #[inline]
    pub const fn index(self) -> usize {
        match self {
            Reason::Wire(e) => match e {
                WireError::Truncated => 0,
                WireError::UnknownVersion => 1,
                WireError::UnknownKind => 2,
                WireError::UnknownOpcode => 3,
                WireError::BadLength => 4,
                WireError::BadRedundancy => 5,
                WireError::BadPriority => 6,
                WireError::BadKeyLen => 7,
                WireError::BadDataLen => 8,
                WireError::BadCount => 9,
                WireError::TrailingBytes => 10,
            },
            Reason::SourceNotAllowed => 11,
            Reason::NoStore => 12,
            Reason::BadListId => 13,
            Reason::BadHop => 14,
            Reason::BadKeyLen => 15,
            Reason::BadDataLen => 16,
            Reason::BadRedundancy => 17,
            Reason::RedundancyMismatch => 18,
            Reason::BadColumn => 19,
            Reason::OutOfOrder => 20,
            Reason::StaleEpoch => 21,
            Reason::UnknownReporter => 22,
            Reason::SinkError => 23,
        }
    }

    /// The snake_case name counters and metrics carry. A wire reason and a translator reason
    /// may share a name (`bad_data_len`: a malformed report, or a well-formed one no store can
    /// hold); [`Reason::stage`] tells them apart.
    pub const fn name(self) -> &'static str {
        match self {
            Reason::Wire(e) => match e {
                WireError::Truncated => "truncated",
                WireError::UnknownVersion => "unknown_version",
                WireError::UnknownKind => "unknown_kind",
                WireError::UnknownOpcode => "unknown_opcode",
                WireError::BadLength => "bad_length",
                WireError::BadRedundancy => "bad_redundancy",
                WireError::BadPriority => "bad_priority",
                WireError::BadKeyLen => "bad_key_len",
                WireError::BadDataLen => "bad_data_len",
                WireError::BadCount => "bad_count",
                WireError::TrailingBytes => "trailing_bytes",
            },
            Reason::SourceNotAllowed => "source_not_allowed",
            Reason::NoStore => "no_store",
            Reason::BadListId => "bad_list_id",
            Reason::BadHop => "bad_hop",
            Reason::BadKeyLen => "bad_key_len",
            Reason::BadDataLen => "bad_data_len",
            Reason::BadRedundancy => "bad_redundancy",
            Reason::RedundancyMismatch => "redundancy_mismatch",
            Reason::BadColumn => "bad_column",
            Reason::OutOfOrder => "out_of_order",
            Reason::StaleEpoch => "stale_epoch",
            Reason::UnknownReporter => "unknown_reporter",
            Reason::SinkError => "sink_error",
        }
    }

    /// `"wire"` for the parser's reasons, `"translator"` for the rest.
    pub const fn stage(self) -> &'static str {
        match self {
            Reason::Wire(_) => "wire",
            _ => "translator",
        }
    }
}

impl From<WireError> for Reason {
    fn from(e: WireError) -> Reason {
        Reason::Wire(e)
    }
}

impl From<&ApplyError> for Reason {
    fn from(e: &ApplyError) -> Reason {
        match e {
            ApplyError::BadKeyLen => Reason::BadKeyLen,
            ApplyError::BadDataLen => Reason::BadDataLen,
            ApplyError::BadRedundancy => Reason::BadRedundancy,
            ApplyError::RedundancyMismatch => Reason::RedundancyMismatch,
            ApplyError::BadListId => Reason::BadListId,
            ApplyError::BadHop => Reason::BadHop,
            ApplyError::BadColumn => Reason::BadColumn,
            ApplyError::Sink(_) => Reason::SinkError,
        }
    }
}

impl From<ApplyError> for Reason {
    fn from(e: ApplyError) -> Reason {
        Reason::from(&e)
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_index_order_and_complete() {
        for (i, r) in Reason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i, "{r}");
        }
        for e in WireError::ALL {
            assert_eq!(Reason::from(e).name(), e.reason(), "wire names agree");
            assert_eq!(Reason::from(e).stage(), "wire");
        }
    }

    #[test]
    fn names_are_unique_within_a_stage() {
        let mut seen = std::collections::HashSet::new();
        for r in Reason::ALL {
            assert!(seen.insert((r.stage(), r.name())), "{r} twice");
        }
    }

    #[test]
    fn every_apply_error_has_its_store_name() {
        use dta_store::SinkError;
        let all = [
            ApplyError::BadKeyLen,
            ApplyError::BadDataLen,
            ApplyError::BadRedundancy,
            ApplyError::RedundancyMismatch,
            ApplyError::BadListId,
            ApplyError::BadHop,
            ApplyError::BadColumn,
            ApplyError::Sink(SinkError::ReadOnly),
        ];
        for e in &all {
            assert_eq!(Reason::from(e).name(), e.reason());
            assert_eq!(Reason::from(e).stage(), "translator");
        }
    }
}
