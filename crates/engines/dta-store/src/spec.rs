//! Store specifications: what a collector configuration asks for and what a region header
//! records. [`StoreSpec::validate`] checks parameter sanity and [`StoreSpec::data_len`] gives the
//! size of the data area (`docs/regions.md` describes every layout byte by byte).

use serde::{Deserialize, Serialize};

use crate::{
    HashScheme, StoreError, StoreKind, DEFAULT_REDUNDANCY, MAX_DATA_LEN, MAX_KEY_LEN,
    MAX_REDUNDANCY,
};

/// Most Append lists one store holds ([DTA §6.7] evaluates up to 131 072 lists).
pub const MAX_LISTS: u32 = 131_072;
/// Largest data area a region may have (1 TiB).
pub const MAX_DATA_AREA: u64 = 1 << 40;
/// Upper bound of the translator's per-reporter state for an ApproSync Sketch-Merge store
/// (`reporters × columns × width` u32 values, [`SketchSpec::approsync_state_bytes`]).
pub const MAX_APPROSYNC_STATE: u64 = 256 << 20;

/// What a region stores. Serialized internally tagged (`kind = "key_write"`, ...) so a collector's
/// TOML `[[store]]` table embeds it flat.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StoreSpec {
    KeyWrite(KeyWriteSpec),
    KeyIncrement(KeyIncrementSpec),
    Postcarding(PostcardingSpec),
    Append(AppendSpec),
    SketchMerge(SketchSpec),
}

/// Key-Write ([DTA §4, A.1]): `slots` slots of `[checksum u32][data][pad]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "KeyWriteSpecDe")]
pub struct KeyWriteSpec {
    /// Number of slots M, a power of two.
    pub slots: u64,
    pub key_len: u8,
    pub data_len: u8,
    /// The region's scheme (a configuration that names none gets
    /// `dta_collector::config::DEFAULT_HASH`). `prototype` (byte-compatible with the Tofino
    /// prototype, key_len 4 only) only when asked for: its N copies are correlated
    /// (docs/regions.md "Hash schemes").
    pub hash: HashScheme,
    /// N, the slots a report is written to and a query reads by default (1..=MAX_REDUNDANCY);
    /// a report may use fewer.
    pub redundancy: u8,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyWriteSpecDe {
    slots: u64,
    key_len: u8,
    data_len: u8,
    #[serde(default)]
    hash: Option<HashScheme>,
    #[serde(default = "default_redundancy")]
    redundancy: u8,
}

impl From<KeyWriteSpecDe> for KeyWriteSpec {
    fn from(d: KeyWriteSpecDe) -> Self {
        let mut s = KeyWriteSpec::new(d.slots, d.key_len, d.data_len);
        if let Some(h) = d.hash {
            s.hash = h;
        }
        s.redundancy = d.redundancy;
        s
    }
}

impl KeyWriteSpec {
    /// A spec with the native hash scheme and the default redundancy.
    pub fn new(slots: u64, key_len: u8, data_len: u8) -> Self {
        KeyWriteSpec {
            slots,
            key_len,
            data_len,
            hash: HashScheme::Native,
            redundancy: DEFAULT_REDUNDANCY,
        }
    }

    /// Bytes of one slot: `4 + data_len` rounded up to a multiple of 8.
    pub fn slot_len(&self) -> usize {
        (4 + self.data_len as usize).div_ceil(8) * 8
    }
}

/// Key-Increment ([DTA A.4]): `counters` little-endian u64 counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyIncrementSpec {
    /// Number of counters, a power of two.
    pub counters: u64,
    pub key_len: u8,
    #[serde(default = "native")]
    pub hash: HashScheme,
    /// N, the counters a report adds to and a query takes the minimum of: a report must use
    /// exactly this N (1..=MAX_REDUNDANCY).
    #[serde(default = "default_redundancy")]
    pub redundancy: u8,
    /// Rotating time windows ([`crate::key_increment`] "Windows"): 0, the default, keeps one
    /// cumulative table; 2..=[`MAX_WINDOWS`] keeps that many tables of `counters` counters,
    /// each counting the reports of one `window_ms` of wall-clock time, the oldest reused.
    #[serde(default)]
    pub windows: u32,
    /// Width of a window in milliseconds ([`MIN_WINDOW_MS`]..=[`MAX_WINDOW_MS`]; 0 without
    /// windows).
    #[serde(default)]
    pub window_ms: u64,
}

/// Most windows of a Key-Increment store: one 8-byte entry each in the window table's page.
pub const MAX_WINDOWS: u32 = 512;
/// Narrowest window: the translator moves to the next window at its timer tick, every few
/// milliseconds, so a window is at least this wide.
pub const MIN_WINDOW_MS: u64 = 100;
/// Widest window: a day.
pub const MAX_WINDOW_MS: u64 = 86_400_000;
/// Bytes in front of a windowed Key-Increment store's tables: the window table (one u64 per
/// window), a page.
pub const WINDOW_TABLE_LEN: u64 = 4096;

impl KeyIncrementSpec {
    /// A cumulative (unwindowed) spec with the native hash scheme and the default redundancy.
    pub fn new(counters: u64, key_len: u8) -> Self {
        KeyIncrementSpec {
            counters,
            key_len,
            hash: HashScheme::Native,
            redundancy: DEFAULT_REDUNDANCY,
            windows: 0,
            window_ms: 0,
        }
    }
}

fn native() -> HashScheme {
    HashScheme::Native
}

/// Postcarding ([DTA §4 "Postcarding", A.6]): `chunks` chunks of B slots of b bits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostcardingSpec {
    /// Number of chunks C, a power of two.
    pub chunks: u64,
    /// B, the bound on the path length (slots per chunk).
    #[serde(default = "default_hops")]
    pub hops: u8,
    /// b, bits per slot: 8, 16 or 32.
    #[serde(default = "default_slot_bits")]
    pub slot_bits: u8,
    /// N, chunks written per path.
    #[serde(default = "default_redundancy")]
    pub redundancy: u8,
    pub key_len: u8,
}

impl PostcardingSpec {
    /// Bytes of one chunk: B slots of b/8 bytes, then the 4-byte check over key and slots
    /// (`docs/regions.md` §2.3).
    pub fn chunk_len(&self) -> usize {
        self.hops as usize * (self.slot_bits as usize / 8) + crate::postcard::CHUNK_CHECK_LEN
    }
}

fn default_hops() -> u8 {
    5
}
fn default_slot_bits() -> u8 {
    32
}
fn default_redundancy() -> u8 {
    DEFAULT_REDUNDANCY
}

fn redundancy(v: u8) -> Result<(), StoreError> {
    if !(1..=MAX_REDUNDANCY).contains(&v) {
        return Err(bad(format!(
            "redundancy = {v} must be 1..={MAX_REDUNDANCY}"
        )));
    }
    Ok(())
}

/// Append ([DTA A.3]): `lists` ring buffers of `capacity` entries of `entry_len` bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppendSpec {
    /// Number of lists, 1..=131072.
    pub lists: u32,
    /// Entries per list: a power of two, a multiple of `batch` and at least `2·batch`.
    pub capacity: u64,
    /// Bytes per entry, 4..=64.
    pub entry_len: u8,
    /// B, entries the translator batches into one write.
    #[serde(default = "default_batch")]
    pub batch: u32,
    /// How the entries read back: raw bytes, or a record layout queries decode.
    #[serde(default, skip_serializing_if = "AppendRecord::is_raw")]
    pub record: AppendRecord,
}

/// The record layout of an Append store's entries (region header byte 97, `docs/regions.md`
/// §1): what every reader (HTTP, CLI, Python, the console, exports) decodes them as.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AppendRecord {
    /// Opaque bytes, shown as hex.
    #[default]
    Raw,
    /// The INT sink's events and flow summaries (`docs/int-sink.md`, "Events"; 32 bytes), told
    /// apart by their kind byte.
    IntEvent,
}

impl AppendRecord {
    pub const ALL: [AppendRecord; 2] = [AppendRecord::Raw, AppendRecord::IntEvent];

    pub fn is_raw(&self) -> bool {
        *self == AppendRecord::Raw
    }

    /// Its code in the region header.
    pub fn code(self) -> u8 {
        match self {
            AppendRecord::Raw => 0,
            AppendRecord::IntEvent => 1,
        }
    }

    pub fn from_code(c: u8) -> Option<AppendRecord> {
        AppendRecord::ALL.into_iter().find(|r| r.code() == c)
    }

    /// Its name, as the configuration spells it.
    pub fn name(self) -> &'static str {
        match self {
            AppendRecord::Raw => "raw",
            AppendRecord::IntEvent => "int-event",
        }
    }

    /// The entry length the layout needs (`None`: any).
    pub fn entry_len(self) -> Option<u8> {
        match self {
            AppendRecord::Raw => None,
            AppendRecord::IntEvent => Some(32),
        }
    }
}

fn default_batch() -> u32 {
    16
}

/// Sketch-Merge ([DTA-draft §3.1] "Sketch-Merge", §4.2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SketchSpec {
    pub sketch_id: u16,
    #[serde(flatten)]
    pub kind: SketchKind,
    /// Reporters expected per epoch: in order, a column is written once all of them contributed
    /// it; with ApproSync, at most this many reporters are merged.
    pub reporters: u32,
    /// How reporters send their columns.
    #[serde(default)]
    pub sync: SketchSync,
}

/// How a Sketch-Merge store's reporters send their sketches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SketchSync {
    /// Every reporter streams its whole sketch, column by column in order, per epoch; the
    /// translator NACKs a column that skips ahead ([DTA-draft §3.1] "Sketch-Merge", §4.2).
    #[default]
    InOrder,
    /// ApproSync ([InvisiFlow §6.1] "Sources"): a reporter sends one column, with its current
    /// (cumulative) values, whenever one of its counters has diverged from the value last sent
    /// by more than a threshold. Columns come in any order, may be lost or reordered; the
    /// translator keeps each reporter's last values and merges only what grew (Count-Min: the
    /// increase is added; HyperLogLog: registers are max-merged), so a later column heals a lost
    /// one and a stale or repeated one changes nothing.
    Approsync,
}

impl SketchSpec {
    /// Bytes of the translator's per-reporter state of an ApproSync store (0 in order): each
    /// reporter's last values (`columns × width` u32) and a bit per column it has sent.
    pub fn approsync_state_bytes(&self) -> u64 {
        match self.sync {
            SketchSync::InOrder => 0,
            SketchSync::Approsync => {
                let columns = self.kind.columns() as u64;
                self.reporters as u64
                    * (columns * self.kind.width() as u64 * 4 + columns.div_ceil(64) * 8)
            }
        }
    }
}

/// The sketch being merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "sketch", rename_all = "snake_case")]
pub enum SketchKind {
    /// Count-Min: `rows` × `columns` counters; a column is `rows` counters (summed).
    CountMin { rows: u32, columns: u32 },
    /// HyperLogLog: `registers` u8 registers, `registers_per_column` per column (max-merged).
    HyperLogLog {
        registers: u32,
        registers_per_column: u32,
    },
}

impl SketchKind {
    /// Columns the sketch is sent and stored as.
    pub fn columns(&self) -> u32 {
        match *self {
            SketchKind::CountMin { columns, .. } => columns,
            SketchKind::HyperLogLog {
                registers,
                registers_per_column,
            } => registers / registers_per_column.max(1),
        }
    }

    /// Values in one column.
    pub fn width(&self) -> u32 {
        match *self {
            SketchKind::CountMin { rows, .. } => rows,
            SketchKind::HyperLogLog {
                registers_per_column,
                ..
            } => registers_per_column,
        }
    }

    /// Bytes of one merged-column record in the region: `[epoch u32][reporters u32][values]`,
    /// padded to 8 (CM values are u64, HLL values u8).
    pub fn record_len(&self) -> usize {
        let values = match *self {
            SketchKind::CountMin { rows, .. } => rows as usize * 8,
            SketchKind::HyperLogLog {
                registers_per_column,
                ..
            } => registers_per_column as usize,
        };
        (8 + values).div_ceil(8) * 8
    }
}

fn bad(msg: impl Into<String>) -> StoreError {
    StoreError::BadSpec(msg.into())
}

fn pow2(name: &str, v: u64) -> Result<(), StoreError> {
    if v == 0 || !v.is_power_of_two() {
        return Err(bad(format!("{name} = {v} must be a non-zero power of two")));
    }
    Ok(())
}

fn key_len(v: u8) -> Result<(), StoreError> {
    if v == 0 || v > MAX_KEY_LEN {
        return Err(bad(format!("key_len = {v} must be 1..={MAX_KEY_LEN}")));
    }
    Ok(())
}

fn prototype_key(hash: HashScheme, key_len: u8) -> Result<(), StoreError> {
    if hash == HashScheme::Prototype && key_len != 4 {
        return Err(bad("the prototype hash scheme needs key_len = 4"));
    }
    Ok(())
}

impl StoreSpec {
    /// N of a Key-Write, Key-Increment or Postcarding store (from its header); `None` for the
    /// others.
    pub fn redundancy(&self) -> Option<u8> {
        match self {
            StoreSpec::KeyWrite(s) => Some(s.redundancy),
            StoreSpec::KeyIncrement(s) => Some(s.redundancy),
            StoreSpec::Postcarding(s) => Some(s.redundancy),
            StoreSpec::Append(_) | StoreSpec::SketchMerge(_) => None,
        }
    }

    pub fn kind(&self) -> StoreKind {
        match self {
            StoreSpec::KeyWrite(_) => StoreKind::KeyWrite,
            StoreSpec::KeyIncrement(_) => StoreKind::KeyIncrement,
            StoreSpec::Postcarding(_) => StoreKind::Postcarding,
            StoreSpec::Append(_) => StoreKind::Append,
            StoreSpec::SketchMerge(_) => StoreKind::SketchMerge,
        }
    }

    /// The hash scheme recorded in the header (only Key-Write and Key-Increment may use the
    /// prototype's).
    pub fn hash(&self) -> HashScheme {
        match self {
            StoreSpec::KeyWrite(s) => s.hash,
            StoreSpec::KeyIncrement(s) => s.hash,
            _ => HashScheme::Native,
        }
    }

    /// This spec with hash scheme `hash` where the kind has a choice (Key-Write and
    /// Key-Increment); the others unchanged.
    pub fn with_hash(&self, hash: HashScheme) -> StoreSpec {
        let mut s = self.clone();
        match &mut s {
            StoreSpec::KeyWrite(k) => k.hash = hash,
            StoreSpec::KeyIncrement(k) => k.hash = hash,
            _ => {}
        }
        s
    }

    /// Check parameter sanity.
    pub fn validate(&self) -> Result<(), StoreError> {
        match self {
            StoreSpec::KeyWrite(s) => {
                pow2("slots", s.slots)?;
                key_len(s.key_len)?;
                if !(4..=MAX_DATA_LEN).contains(&s.data_len) {
                    return Err(bad(format!(
                        "data_len = {} must be 4..={MAX_DATA_LEN}",
                        s.data_len
                    )));
                }
                prototype_key(s.hash, s.key_len)?;
                redundancy(s.redundancy)?;
            }
            StoreSpec::KeyIncrement(s) => {
                pow2("counters", s.counters)?;
                key_len(s.key_len)?;
                prototype_key(s.hash, s.key_len)?;
                redundancy(s.redundancy)?;
                match (s.windows, s.window_ms) {
                    (0, 0) => {}
                    (0, ms) => {
                        return Err(bad(format!(
                            "window_ms = {ms} without windows: set windows (2..={MAX_WINDOWS}) \
                             too, or neither"
                        )))
                    }
                    (w, _) if !(2..=MAX_WINDOWS).contains(&w) => {
                        return Err(bad(format!("windows = {w} must be 2..={MAX_WINDOWS}")))
                    }
                    (_, ms) if !(MIN_WINDOW_MS..=MAX_WINDOW_MS).contains(&ms) => {
                        return Err(bad(format!(
                            "window_ms = {ms} must be {MIN_WINDOW_MS}..={MAX_WINDOW_MS} \
                             (with windows)"
                        )))
                    }
                    _ => {}
                }
            }
            StoreSpec::Postcarding(s) => {
                pow2("chunks", s.chunks)?;
                key_len(s.key_len)?;
                if !(1..=16).contains(&s.hops) {
                    return Err(bad(format!("hops = {} must be 1..=16", s.hops)));
                }
                if ![8, 16, 32].contains(&s.slot_bits) {
                    return Err(bad(format!(
                        "slot_bits = {} must be 8, 16 or 32",
                        s.slot_bits
                    )));
                }
                redundancy(s.redundancy)?;
            }
            StoreSpec::Append(s) => {
                if !(1..=MAX_LISTS).contains(&s.lists) {
                    return Err(bad(format!("lists = {} must be 1..={MAX_LISTS}", s.lists)));
                }
                pow2("capacity", s.capacity)?;
                if !(4..=64).contains(&s.entry_len) {
                    return Err(bad(format!("entry_len = {} must be 4..=64", s.entry_len)));
                }
                if let Some(n) = s.record.entry_len().filter(|&n| n != s.entry_len) {
                    return Err(bad(format!(
                        "record = \"{}\" needs entry_len = {n}, not {}",
                        s.record.name(),
                        s.entry_len
                    )));
                }
                if s.batch == 0
                    || s.capacity % s.batch as u64 != 0
                    || s.capacity < 2 * s.batch as u64
                {
                    // A reader stays one batch clear of the overwrite frontier (append.rs), so a
                    // ring of a single batch could never be read safely.
                    return Err(bad(format!(
                        "capacity = {} must be a multiple of batch = {} (> 0) and at least two batches",
                        s.capacity, s.batch
                    )));
                }
            }
            StoreSpec::SketchMerge(s) => {
                if s.reporters == 0 {
                    return Err(bad("reporters must be > 0"));
                }
                let state = s.approsync_state_bytes();
                if state > MAX_APPROSYNC_STATE {
                    return Err(bad(format!(
                        "sync = \"approsync\" keeps reporters x columns x width values (and a bit \
                         per column) per store: {state} bytes, more than {MAX_APPROSYNC_STATE}"
                    )));
                }
                match s.kind {
                    SketchKind::CountMin { rows, columns } => {
                        if !(1..=32).contains(&rows) {
                            return Err(bad(format!("rows = {rows} must be 1..=32")));
                        }
                        pow2("columns", columns as u64)?;
                        if columns > 65_536 {
                            return Err(bad("columns must be <= 65536 (u16 on the wire)"));
                        }
                    }
                    SketchKind::HyperLogLog {
                        registers,
                        registers_per_column,
                    } => {
                        pow2("registers", registers as u64)?;
                        if !(16..=1 << 24).contains(&registers) {
                            return Err(bad("registers must be 16..=2^24"));
                        }
                        if !(1..=64).contains(&registers_per_column)
                            || registers % registers_per_column != 0
                        {
                            return Err(bad(format!(
                                "registers_per_column = {registers_per_column} must be 1..=64 and divide registers"
                            )));
                        }
                        if registers / registers_per_column > 65_536 {
                            return Err(bad("more than 65536 columns (u16 on the wire)"));
                        }
                    }
                }
            }
        }
        let len = self.data_len_unchecked();
        match len {
            Some(l) if l > 0 && l <= MAX_DATA_AREA => Ok(()),
            _ => Err(bad("data area larger than 1 TiB")),
        }
    }

    /// Offset of the Append rings in the data area (after the head pointers, page aligned).
    pub(crate) fn append_rings_offset(lists: u32) -> u64 {
        (lists as u64 * 8).div_ceil(4096) * 4096
    }

    fn data_len_unchecked(&self) -> Option<u64> {
        let round8 = |v: u64| v.checked_add(7).map(|v| v & !7);
        match self {
            StoreSpec::KeyWrite(s) => s.slots.checked_mul(s.slot_len() as u64),
            StoreSpec::KeyIncrement(s) if s.windows == 0 => s.counters.checked_mul(8),
            StoreSpec::KeyIncrement(s) => s
                .counters
                .checked_mul(8)?
                .checked_mul(s.windows as u64)?
                .checked_add(WINDOW_TABLE_LEN),
            StoreSpec::Postcarding(s) => {
                s.chunks.checked_mul(s.chunk_len() as u64).and_then(round8)
            }
            StoreSpec::Append(s) => (s.lists as u64)
                .checked_mul(s.capacity)?
                .checked_mul(s.entry_len as u64)?
                .checked_add(Self::append_rings_offset(s.lists))
                .and_then(round8),
            StoreSpec::SketchMerge(s) => {
                (s.kind.columns() as u64).checked_mul(s.kind.record_len() as u64)
            }
        }
    }

    /// Bytes of the data area. Call after [`validate`](Self::validate).
    pub fn data_len(&self) -> Result<u64, StoreError> {
        self.validate()?;
        Ok(self.data_len_unchecked().unwrap_or(0))
    }
}
