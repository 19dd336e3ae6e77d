//! `dta-store`: the collector-side memory of Direct Telemetry Access ([DTA §4, A.1-A.6];
//! Sketch-Merge from [DTA-draft §3.1]). A *region* is one file — a 4096-byte self-describing
//! header page followed by a page-aligned data area — mapped shared so that the translator (or an
//! RDMA NIC) writes into it while queries read it. This crate owns the region header
//! (`docs/regions.md` is its byte-by-byte description), the [`MemSink`] seam through which the
//! translator emits RDMA-like WRITE and FETCH_ADD operations, the pure layout arithmetic of the
//! five stores (Key-Write, Key-Increment, Postcarding, Append, Sketch-Merge: where a report's
//! bytes go), their queries, and the reporter-side sketch builders that hash exactly like the
//! store. It knows nothing of the network.

pub mod append;
mod bpffs;
pub mod confidence;
pub mod error;
pub mod guard;
pub mod hash;
pub mod header;
pub mod info;
pub mod key_increment;
pub mod key_write;
pub mod lock;
pub mod notify;
pub mod postcard;
pub mod region;
pub mod sketch;
pub mod sketch_store;
pub mod space;
pub mod spec;

pub use append::{AppendLayout, ListReader, PollResult};
pub use confidence::{Confidence, CountBound};
pub use error::{ApplyError, QueryError, SinkError, StoreError};
pub use header::Header;
pub use info::StoreInfo;
pub use key_increment::{Coverage, KeyIncrementLayout, WindowSel, WindowSpan};
pub use key_write::{KeyTag, KeyWriteAnswer, KeyWriteLayout, Lookup};
pub use postcard::{EncodedChunk, PostcardAnswer, PostcardingLayout, ValueTable};
pub use region::{
    prefetch_for_write, MemSink, Pages, Region, RegionMem, RegionSink, Tally, VecSink,
};
pub use sketch_store::{ColumnEpoch, SketchLayout};
pub use spec::{
    AppendRecord, AppendSpec, KeyIncrementSpec, KeyWriteSpec, PostcardingSpec, SketchKind,
    SketchSpec, SketchSync, StoreSpec, MAX_APPROSYNC_STATE, MAX_WINDOWS, MAX_WINDOW_MS,
    MIN_WINDOW_MS,
};

use serde::{Deserialize, Serialize};

/// N of a store whose configuration does not say: the wire's default.
pub use dta_wire::DEFAULT_REDUNDANCY;
/// Largest redundancy N a Key-Write, Key-Increment or Postcarding store accepts: the wire's.
pub use dta_wire::MAX_REDUNDANCY;
/// Longest key (bytes) of Key-Write, Key-Increment and Postcarding (the native protocol's bound).
pub const MAX_KEY_LEN: u8 = 16;
/// Longest Key-Write data (bytes).
pub const MAX_DATA_LEN: u8 = 64;

/// The checks a Key-Write or Key-Increment report shares: its key has the store's length and
/// its N is in 1..=store N (Key-Increment further requires N = store N).
#[inline]
pub(crate) fn check_report(
    key: &[u8],
    key_len: usize,
    redundancy: u8,
    store: u8,
) -> Result<(), ApplyError> {
    if key.len() != key_len {
        return Err(ApplyError::BadKeyLen);
    }
    if redundancy == 0 || redundancy > store {
        return Err(ApplyError::BadRedundancy);
    }
    Ok(())
}

/// Which hash functions a region's indices and checksums use (`docs/architecture.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u32)]
pub enum HashScheme {
    Prototype = 0,
    Native = 1,
    /// One XXH3-128 of the key gives every index and the check's seed ([`hash`]).
    Xxh3 = 2,
}

impl HashScheme {
    pub fn from_u32(v: u32) -> Option<HashScheme> {
        match v {
            0 => Some(HashScheme::Prototype),
            1 => Some(HashScheme::Native),
            2 => Some(HashScheme::Xxh3),
            _ => None,
        }
    }
}

/// The five stores; the numbers are the wire opcodes (`docs/protocol.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u16)]
pub enum StoreKind {
    KeyWrite = 1,
    Append = 2,
    KeyIncrement = 3,
    Postcarding = 4,
    SketchMerge = 5,
}

impl StoreKind {
    pub fn from_u16(v: u16) -> Option<StoreKind> {
        match v {
            1 => Some(StoreKind::KeyWrite),
            2 => Some(StoreKind::Append),
            3 => Some(StoreKind::KeyIncrement),
            4 => Some(StoreKind::Postcarding),
            5 => Some(StoreKind::SketchMerge),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StoreKind::KeyWrite => "key_write",
            StoreKind::Append => "append",
            StoreKind::KeyIncrement => "key_increment",
            StoreKind::Postcarding => "postcarding",
            StoreKind::SketchMerge => "sketch_merge",
        }
    }
}

impl std::fmt::Display for StoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
