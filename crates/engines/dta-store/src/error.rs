//! Errors: [`SinkError`] (a memory operation failed), [`ApplyError`] (a report could not be
//! translated; counted by the caller under [`ApplyError::reason`]) and [`StoreError`] (region
//! and layout set-up).

use std::path::PathBuf;

use crate::StoreKind;

/// A memory operation on a region's data area failed. Nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    #[error("out of bounds: {len} bytes at offset {offset}")]
    OutOfBounds { offset: u64, len: u64 },
    #[error("misaligned: offset {offset} is not 8-byte aligned")]
    Misaligned { offset: u64 },
    #[error("region is mapped read-only")]
    ReadOnly,
    #[error("region lost: its file was truncated under the mapping")]
    RegionLost,
    #[error("{0}")]
    Other(String),
}

/// A report could not be translated into memory operations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("key length does not match the store")]
    BadKeyLen,
    #[error("data length does not match the store")]
    BadDataLen,
    #[error("redundancy out of range")]
    BadRedundancy,
    #[error("Key-Increment redundancy differs from the store's N")]
    RedundancyMismatch,
    #[error("list id out of range")]
    BadListId,
    #[error("hop out of range or wrong number of hop values")]
    BadHop,
    #[error("sketch column out of range")]
    BadColumn,
    #[error("memory operation failed: {0}")]
    Sink(#[from] SinkError),
}

impl ApplyError {
    /// The counter name the translator files this error under.
    pub fn reason(&self) -> &'static str {
        match self {
            ApplyError::BadKeyLen => "bad_key_len",
            ApplyError::BadDataLen => "bad_data_len",
            ApplyError::BadRedundancy => "bad_redundancy",
            ApplyError::RedundancyMismatch => "redundancy_mismatch",
            ApplyError::BadListId => "bad_list_id",
            ApplyError::BadHop => "bad_hop",
            ApplyError::BadColumn => "bad_column",
            ApplyError::Sink(_) => "sink_error",
        }
    }
}

/// A query that cannot be answered: an error with a message, never an `empty` or a 0.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("key is {got} bytes, the store's keys are {want}")]
    BadKeyLen { got: usize, want: usize },
    #[error("redundancy {got} is outside 1..={store} (the store's N)")]
    BadRedundancy { got: u8, store: u8 },
    #[error("threshold {got} is more than the {n} copies read: no answer could reach it")]
    BadThreshold { got: u8, n: u8 },
    #[error("{got} values in the value set, at most {max}")]
    TooManyValues { got: usize, max: usize },
    #[error("the value table is for {got}-bit slots, the store's are {want}-bit")]
    BadValueBits { got: u8, want: u8 },
    #[error("{got} keys need {need} output bytes and answers, got {have}")]
    BadBatch {
        got: usize,
        need: usize,
        have: usize,
    },
    /// The windows a query of a Key-Increment store named cannot be read.
    #[error("{0}")]
    Window(String),
}

impl QueryError {
    /// Check an explicit redundancy (or take the store's `store` N when `None`).
    pub fn redundancy(asked: Option<u8>, store: u8) -> Result<u8, QueryError> {
        match asked {
            None => Ok(store),
            Some(n) if (1..=store).contains(&n) => Ok(n),
            Some(got) => Err(QueryError::BadRedundancy { got, store }),
        }
    }

    /// Check a consensus threshold against the `n` copies a query reads (0 counts as 1).
    pub fn threshold(threshold: u8, n: u8) -> Result<(), QueryError> {
        if threshold > n {
            return Err(QueryError::BadThreshold { got: threshold, n });
        }
        Ok(())
    }

    /// Check a key's length against the store's.
    pub fn key(key: &[u8], want: usize) -> Result<(), QueryError> {
        if key.len() != want {
            return Err(QueryError::BadKeyLen {
                got: key.len(),
                want,
            });
        }
        Ok(())
    }
}

/// Setting up a region or a layout failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("not a DTA region (bad magic)")]
    BadMagic,
    #[error("unsupported region layout version {0} (this build reads version {v}; recreate the region)", v = crate::header::VERSION)]
    BadVersion(u16),
    #[error("unknown store kind {0}")]
    BadKind(u16),
    #[error("unknown hash scheme {0}")]
    BadHashScheme(u32),
    #[error(
        "header CRC mismatch: stored {stored:#010x}, computed {computed:#010x} (corrupt header)"
    )]
    BadHeaderCrc { stored: u32, computed: u32 },
    #[error("bad header geometry: {0}")]
    BadGeometry(String),
    #[error("file is {file_len} bytes but the header needs {needed} (truncated region)")]
    Truncated { file_len: u64, needed: u64 },
    #[error("{path}: region lost: {why} (repair or recreate it, then restart)")]
    RegionLost { path: PathBuf, why: String },
    #[error(
        "{path}: a region of {} does not fit: its filesystem has {} free (make room, shrink the \
         store or move region_dir)",
        crate::space::human(*size),
        crate::space::human(*free)
    )]
    NoSpace { path: PathBuf, size: u64, free: u64 },
    #[error("bad store name: {0}")]
    BadName(String),
    #[error("invalid store parameters: {0}")]
    BadSpec(String),
    #[error("{path} exists with a different store (name {existing_name:?}, spec {existing}); use force to recreate")]
    SpecMismatch {
        path: PathBuf,
        existing_name: String,
        existing: String,
    },
    #[error("layout for a {expected} store built from a {found} header")]
    WrongKind {
        expected: StoreKind,
        found: StoreKind,
    },
    #[error("list id {list} out of range (store has {lists} lists)")]
    BadListId { list: u32, lists: u32 },
    #[error("bad shard {shard} of {shards}")]
    BadShard { shard: u32, shards: u32 },
}

impl StoreError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> StoreError {
        StoreError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
