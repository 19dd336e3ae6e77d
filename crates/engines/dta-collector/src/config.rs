//! Store configuration: the `[[store]]` tables of `dta.toml`, validated into `StoreSpec`s.

use serde::{Deserialize, Serialize};

use dta_store::{
    AppendSpec, HashScheme, KeyIncrementSpec, KeyWriteSpec, PostcardingSpec, SketchKind,
    SketchSpec, SketchSync, StoreSpec, DEFAULT_REDUNDANCY,
};

/// The collector's own settings (the `[collector]` table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CollectorConfig {
    /// Address of the HTTP query API; empty to disable it. A non-loopback address needs a token.
    pub http: String,
    /// File holding the bearer token the HTTP API requires (`Authorization: Bearer TOKEN`);
    /// unset: the environment's (`DTA_HTTP_TOKEN_FILE`, `DTA_HTTP_TOKEN`), else no token.
    pub token_file: Option<std::path::PathBuf>,
    /// Recreate a region whose file exists with different parameters (its data is lost).
    pub force: bool,
    /// The translator's metrics address (`dta translator --metrics`), whose counters the web
    /// console shows; empty: not shown.
    pub translator_metrics: String,
    /// The INT sink's metrics address (`dta int-sink --metrics`), likewise.
    pub int_sink_metrics: String,
    /// Region directories of other writers (an INT sink's own `region_dir`) whose stores this
    /// collector also serves, read-only, beside its own: their regions are opened without a
    /// lock and never created, resized or written here. Store names must differ from the
    /// collector's own.
    pub serve_read_only: Vec<std::path::PathBuf>,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        CollectorConfig {
            http: "127.0.0.1:40080".into(),
            token_file: None,
            force: false,
            translator_metrics: String::new(),
            int_sink_metrics: String::new(),
            serve_read_only: vec![],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKindName {
    // The configuration's spelling; the labels' and the JSON's (`key_write`, ...) is accepted.
    #[serde(alias = "key_write")]
    KeyWrite,
    #[serde(alias = "key_increment")]
    KeyIncrement,
    Postcarding,
    Append,
    #[serde(alias = "sketch_merge")]
    SketchMerge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SketchName {
    CountMin,
    Hyperloglog,
}

/// One `[[store]]` table. Which keys apply depends on `kind`; unknown keys are an error, keys of
/// another kind are an error too (so a typo never silently falls back to a default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    pub name: String,
    /// Reporter source prefixes (CIDR) this store's reports are accepted from, on top of the
    /// translator's `allow` (any kind of store; unset: whatever the translator allows).
    pub allow: Option<dta_wire::prefix::AllowList>,
    pub kind: Option<StoreKindName>,
    // Key-Write
    pub slots: Option<u64>,
    pub key_len: Option<u8>,
    pub data_len: Option<u8>,
    /// "prototype", "native" or "xxh3".
    pub hash: Option<String>,
    // Key-Increment
    pub counters: Option<u64>,
    /// Rotating time windows (2..=512; unset: one cumulative table) and their width.
    pub windows: Option<u32>,
    pub window_ms: Option<u64>,
    // Postcarding
    pub chunks: Option<u64>,
    pub hops: Option<u8>,
    pub slot_bits: Option<u8>,
    pub redundancy: Option<u8>,
    /// Size of the value set V = 0..values, used by queries to build the lookup table.
    pub values: Option<u32>,
    // Append
    pub lists: Option<u32>,
    pub capacity: Option<u64>,
    pub entry_len: Option<u8>,
    pub batch: Option<u32>,
    /// How the entries read back: `raw` (default) or `int-event` (the INT sink's events).
    pub record: Option<dta_store::AppendRecord>,
    // Sketch-Merge
    pub sketch_id: Option<u16>,
    pub sketch: Option<SketchName>,
    pub rows: Option<u32>,
    pub columns: Option<u32>,
    pub registers: Option<u32>,
    pub registers_per_column: Option<u32>,
    pub reporters: Option<u32>,
    /// "in-order" (default: whole sketches streamed column by column) or "approsync" (one
    /// column at a time, any order, cumulative values).
    pub sync: Option<SketchSync>,
}

#[derive(Debug, thiserror::Error)]
#[error("store {store:?}: {msg}")]
pub struct ConfigError {
    pub store: String,
    pub msg: String,
}

/// The hash scheme of a Key-Write or Key-Increment store whose configuration names none
/// (docs/architecture.md "Hashing"): xxh3, one XXH3-128 of the key for the N indices and the
/// check, handled by every mode (userspace, XDP, RoCEv2) and reader (C, Python). A region made
/// before with another scheme keeps it ([`StoreConfig::spec_over`]).
pub const DEFAULT_HASH: HashScheme = HashScheme::Xxh3;

impl StoreConfig {
    /// The spec of this store where a region of spec `existing` already lies at its path: a
    /// configuration that names no `hash` keeps the region's scheme when the scheme is all that
    /// differs (a region made under an earlier default keeps its data); anything else is
    /// [`StoreConfig::spec`].
    pub fn spec_over(&self, existing: Option<&StoreSpec>) -> Result<StoreSpec, ConfigError> {
        let spec = self.spec()?;
        Ok(match existing {
            Some(old) if self.hash.is_none() && spec.with_hash(old.hash()) == *old => old.clone(),
            _ => spec,
        })
    }

    /// Validate into the store's spec.
    pub fn spec(&self) -> Result<StoreSpec, ConfigError> {
        let err = |msg: String| ConfigError {
            store: self.name.clone(),
            msg,
        };
        if self.name.is_empty()
            || self.name.len() > 31
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(err("name must be 1-31 characters of [A-Za-z0-9_-]".into()));
        }
        if let Some(a) = &self.allow {
            a.validate("allow").map_err(err)?;
        }
        let kind = self.kind.ok_or_else(|| {
            err(
                "missing `kind` (key-write, key-increment, postcarding, append, sketch-merge)"
                    .into(),
            )
        })?;
        let allowed: &[&str] = match kind {
            StoreKindName::KeyWrite => &["slots", "key_len", "data_len", "hash", "redundancy"],
            StoreKindName::KeyIncrement => &[
                "counters",
                "key_len",
                "hash",
                "redundancy",
                "windows",
                "window_ms",
            ],
            StoreKindName::Postcarding => &[
                "chunks",
                "hops",
                "slot_bits",
                "redundancy",
                "key_len",
                "values",
            ],
            StoreKindName::Append => &["lists", "capacity", "entry_len", "batch", "record"],
            StoreKindName::SketchMerge => &[
                "sketch_id",
                "sketch",
                "rows",
                "columns",
                "registers",
                "registers_per_column",
                "reporters",
                "sync",
            ],
        };
        for (field, set) in self.fields_set() {
            if set && !allowed.contains(&field) {
                let kind = serde_json::to_value(kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                return Err(err(format!("`{field}` does not apply to a {kind} store")));
            }
        }
        let hash = match self.hash.as_deref() {
            None => None,
            Some("prototype") => Some(HashScheme::Prototype),
            Some("native") => Some(HashScheme::Native),
            Some("xxh3") => Some(HashScheme::Xxh3),
            Some(other) => {
                return Err(err(format!(
                    "hash {other:?}: expected \"prototype\", \"native\" or \"xxh3\""
                )))
            }
        };
        Ok(match kind {
            StoreKindName::KeyWrite => StoreSpec::KeyWrite(KeyWriteSpec {
                slots: self.slots.unwrap_or(1 << 20),
                key_len: self.key_len.unwrap_or(4),
                data_len: self.data_len.unwrap_or(4),
                hash: hash.unwrap_or(DEFAULT_HASH),
                redundancy: self.redundancy.unwrap_or(DEFAULT_REDUNDANCY),
            }),
            StoreKindName::KeyIncrement => StoreSpec::KeyIncrement(KeyIncrementSpec {
                counters: self.counters.unwrap_or(1 << 20),
                key_len: self.key_len.unwrap_or(4),
                hash: hash.unwrap_or(DEFAULT_HASH),
                redundancy: self.redundancy.unwrap_or(DEFAULT_REDUNDANCY),
                windows: self.windows.unwrap_or(0),
                window_ms: self.window_ms.unwrap_or(0),
            }),
            StoreKindName::Postcarding => StoreSpec::Postcarding(PostcardingSpec {
                chunks: self.chunks.unwrap_or(1 << 18),
                hops: self.hops.unwrap_or(5),
                slot_bits: self.slot_bits.unwrap_or(32),
                redundancy: self.redundancy.unwrap_or(DEFAULT_REDUNDANCY),
                key_len: self.key_len.unwrap_or(4),
            }),
            StoreKindName::Append => StoreSpec::Append(AppendSpec {
                lists: self.lists.unwrap_or(16),
                capacity: self.capacity.unwrap_or(1 << 16),
                entry_len: self.entry_len.unwrap_or(4),
                batch: self.batch.unwrap_or(16),
                record: self.record.unwrap_or_default(),
            }),
            StoreKindName::SketchMerge => {
                let kind = match self.sketch.unwrap_or(SketchName::CountMin) {
                    SketchName::CountMin => SketchKind::CountMin {
                        rows: self.rows.unwrap_or(4),
                        columns: self.columns.unwrap_or(4096),
                    },
                    SketchName::Hyperloglog => SketchKind::HyperLogLog {
                        registers: self.registers.unwrap_or(4096),
                        registers_per_column: self.registers_per_column.unwrap_or(64),
                    },
                };
                StoreSpec::SketchMerge(SketchSpec {
                    sketch_id: self.sketch_id.unwrap_or(0),
                    kind,
                    reporters: self.reporters.unwrap_or(1),
                    sync: self.sync.unwrap_or_default(),
                })
            }
        })
    }

    fn fields_set(&self) -> [(&'static str, bool); 25] {
        [
            ("windows", self.windows.is_some()),
            ("window_ms", self.window_ms.is_some()),
            ("slots", self.slots.is_some()),
            ("key_len", self.key_len.is_some()),
            ("data_len", self.data_len.is_some()),
            ("hash", self.hash.is_some()),
            ("counters", self.counters.is_some()),
            ("chunks", self.chunks.is_some()),
            ("hops", self.hops.is_some()),
            ("slot_bits", self.slot_bits.is_some()),
            ("redundancy", self.redundancy.is_some()),
            ("values", self.values.is_some()),
            ("lists", self.lists.is_some()),
            ("capacity", self.capacity.is_some()),
            ("entry_len", self.entry_len.is_some()),
            ("batch", self.batch.is_some()),
            ("record", self.record.is_some()),
            ("sketch_id", self.sketch_id.is_some()),
            ("sketch", self.sketch.is_some()),
            ("rows", self.rows.is_some()),
            ("columns", self.columns.is_some()),
            ("registers", self.registers.is_some()),
            ("registers_per_column", self.registers_per_column.is_some()),
            ("reporters", self.reporters.is_some()),
            ("sync", self.sync.is_some()),
        ]
    }
}
