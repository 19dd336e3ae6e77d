// Size: one map file, one parser: the collectors, the stores' placements and their validation share
// the raw TOML types and the checks that refer to one another (names, tables, sections, the
// previous map); the tests live in tests.rs.
//! The cluster map of Direct Telemetry Access: which collector owns each key of each store when
//! one collector is not enough ([DTA-draft §3.2] "Supporting Multiple Collectors": collectors
//! are added horizontally and reporters choose among them by stateless rules a central
//! controller recalculates; [DTA-draft §6]: one translator may serve several collectors).
//!
//! A map is one versioned TOML file ([`ClusterMap::load`], [`ClusterMap::parse`]) naming the
//! collectors (the address of the translator that writes each, its HTTP API and region
//! directory, RDMA or shared memory, its NIC's write budget) and, per store, how keys map to
//! collectors:
//!
//! * Key-Write, Key-Increment and Postcarding: **rendezvous hashing** (highest random weight) of
//!   the key ([`rendezvous`]). Every collector scores the key, the highest score owns it. Adding
//!   a collector moves to it only the keys it now wins (about `1/(n+1)` of them) and moves
//!   nothing between the others; removing (draining) any collector moves only its own keys.
//!   Jump consistent hashing would be O(log n) instead of O(n) per key, but it numbers buckets
//!   0..n, so only the last collector can be removed without moving other keys, and a map
//!   naming collectors would have to keep their order forever. With at most
//!   [`MAX_COLLECTORS`] collectors the O(n) scoring costs tens of nanoseconds.
//! * Append: by **table** (list id to collector, with an optional default).
//! * Sketch-Merge: every column of a sketch to **one** collector, or **hierarchically**: each
//!   section's reporters to their section's collector, the network-wide sketch being the merge
//!   of the sections' ones (read by the cluster query, [`SketchPlacement`]).
//!
//! A map has a `version`; a map written for a change (a collector added or drained) may embed
//! the map before it as `[previous]` (whose version must be lower), so readers ask the new
//! owner and then the old one ([`ClusterMap::owners_during_change`]) until data written under
//! the previous map has aged out. The hash is specified byte for byte in `docs/scale-out.md` and
//! checked by the vectors of `spec/vectors/cluster.json`, which the Rust, C and Python tests run.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use dta_store::hash::{fmix64, fnv1a64};
use dta_store::StoreKind;
use dta_wire::Report;
use serde::Deserialize;

/// Most collectors a map names (rendezvous hashing scores each per key).
pub const MAX_COLLECTORS: usize = 256;
/// Most stores a map names.
pub const MAX_STORES: usize = 256;
/// Most list ids an Append table assigns and most sections of a hierarchical sketch.
pub const MAX_TABLE_ENTRIES: usize = 1 << 16;
/// Largest map file read.
pub const MAX_MAP_BYTES: u64 = 1 << 20;
/// Longest collector or store name.
pub const MAX_NAME_LEN: usize = 64;

/// The salt that makes a collector's rendezvous seed differ from a key hash of the same bytes.
pub const COLLECTOR_SALT: u64 = 0xD6E8_FEB8_6659_FD93;

/// A collector's rendezvous seed: `fmix64(fnv1a64(name) ^ COLLECTOR_SALT)`.
pub fn collector_seed(name: &str) -> u64 {
    fmix64(fnv1a64(name.as_bytes()) ^ COLLECTOR_SALT)
}

/// The score of a key (by `fnv1a64(key)`) at a collector (by its seed): `fmix64(h ^ seed)`.
#[inline]
pub fn score(key_hash: u64, seed: u64) -> u64 {
    fmix64(key_hash ^ seed)
}

/// Rendezvous hashing: the index into `seeds` of the collector with the highest score for
/// `key` (the first on a tie). `None` when `seeds` is empty.
#[inline]
pub fn rendezvous(seeds: &[u64], key: &[u8]) -> Option<usize> {
    let h = fnv1a64(key);
    let mut best: Option<(usize, u64)> = None;
    for (i, &s) in seeds.iter().enumerate() {
        let sc = score(h, s);
        if best.is_none_or(|(_, b)| sc > b) {
            best = Some((i, sc));
        }
    }
    best.map(|(i, _)| i)
}

/// How the translator of a collector reaches its memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// RoCEv2 WRITE / FETCH_ADD into the collector's memory.
    Rdma,
    /// The collector's region files mapped by a translator on the same host.
    Shm,
}

/// One collector of the map.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Collector {
    /// Unique name; it seeds the collector's rendezvous score, so renaming moves keys.
    pub name: String,
    /// Where reporters send reports for this collector (its translator's UDP address).
    pub translator: SocketAddr,
    /// The collector's HTTP query API, if it serves one.
    pub http: Option<SocketAddr>,
    /// The collector's region directory (shared memory; readable by co-located tools).
    pub region_dir: Option<PathBuf>,
    /// RDMA or shared memory.
    pub mode: Mode,
    /// Memory writes per second the collector's NIC takes (the translator's write budget for
    /// it, docs/flow-control.md); 0 = unmetered.
    pub nic_budget: u64,
    /// [`collector_seed`] of the name.
    #[serde(skip)]
    pub seed: u64,
}

/// One section of a hierarchically merged sketch.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Section {
    /// The section's name (a rack, a pod).
    pub name: String,
    /// The collector merging the section's reporters (index into the map's collectors).
    pub collector: usize,
    /// Reporter ids in the section.
    pub reporters: Vec<u32>,
}

/// Where a Sketch-Merge store's columns go.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum SketchPlacement {
    /// Every column of every reporter to one collector.
    One(usize),
    /// Each reporter's columns to its section's collector; the network-wide sketch is the merge
    /// of the sections' sketches (Count-Min: the sum; HyperLogLog: the register maximum).
    /// A reporter of no section goes to `default`.
    Hierarchical {
        /// The sections.
        sections: Vec<Section>,
        /// The collector of reporters in no section.
        default: usize,
    },
}

/// How a store's keys map to collectors.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Placement {
    /// Rendezvous hashing of the key over every collector.
    Hash,
    /// Append: list id to collector; lists not in the table go to `default` (an error without).
    Table {
        /// Assigned lists.
        lists: BTreeMap<u32, usize>,
        /// The collector of other lists.
        default: Option<usize>,
    },
    /// Sketch-Merge.
    Sketch(SketchPlacement),
}

impl Placement {
    /// The rule's name as written in the map.
    pub fn name(&self) -> &'static str {
        match self {
            Placement::Hash => "hash",
            Placement::Table { .. } => "table",
            Placement::Sketch(SketchPlacement::One(_)) => "one",
            Placement::Sketch(SketchPlacement::Hierarchical { .. }) => "hierarchical",
        }
    }
}

/// One store's rule.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StoreRule {
    /// The store's name (as in the collectors' configuration).
    pub name: String,
    /// Its primitive.
    pub kind: StoreKind,
    /// The key length the translator routes by (as in the configuration), if several stores
    /// of the kind exist: a report goes to the rule whose key length matches.
    pub key_len: Option<usize>,
    /// A Sketch-Merge store's sketch id, matched against the report's.
    pub sketch_id: Option<u16>,
    /// How its keys map to collectors.
    pub placement: Placement,
}

/// What identifies the owner of data within a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key<'a> {
    /// A Key-Write, Key-Increment or Postcarding key, as carried on the wire.
    Bytes(&'a [u8]),
    /// An Append list id.
    List(u32),
    /// A Sketch-Merge reporter id (its section decides, hierarchically).
    Reporter(u32),
}

/// A map that does not validate; each reason one variant.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Larger than [`MAX_MAP_BYTES`].
    #[error("the map is {0} bytes, more than the {MAX_MAP_BYTES} read")]
    TooLarge(u64),
    /// Not TOML of the map's schema.
    #[error("{0}")]
    Syntax(String),
    /// No collector.
    #[error("the map names no collector")]
    Empty,
    /// More than [`MAX_COLLECTORS`], [`MAX_STORES`] or [`MAX_TABLE_ENTRIES`].
    #[error("{what}: {n}, more than the {max} allowed")]
    TooMany {
        /// What.
        what: &'static str,
        /// How many.
        n: usize,
        /// The limit.
        max: usize,
    },
    /// A name empty, too long or with characters other than `[A-Za-z0-9_.-]`.
    #[error("name {0:?}: 1..={MAX_NAME_LEN} characters of A-Z a-z 0-9 _ . -")]
    BadName(String),
    /// Two collectors of one name.
    #[error("collector {0:?} is named twice")]
    DuplicateCollector(String),
    /// Two stores of one name.
    #[error("store {0:?} is named twice")]
    DuplicateStore(String),
    /// Two collectors at one HTTP address or one region directory: whichever starts second
    /// cannot bind or lock it, and every key placed on it would be answered by the other. (One
    /// translator address may serve several collectors: reporters send to it once.)
    #[error(
        "collectors {first:?} and {second:?} share one {what} ({value}): give each collector \
         its own"
    )]
    SharedPlace {
        /// `HTTP address` or `region directory`.
        what: &'static str,
        /// The address or directory.
        value: String,
        /// The collector listed first.
        first: String,
        /// The collector listed second.
        second: String,
    },
    /// A store's rule names a collector the map does not.
    #[error("store {store:?} names collector {collector:?}, which the map does not")]
    UnknownCollector {
        /// The store.
        store: String,
        /// The name.
        collector: String,
    },
    /// `kind` is not one of the five primitives.
    #[error(
        "store {store:?}: kind {kind:?} is none of key-write, key-increment, postcarding, \
         append, sketch-merge"
    )]
    UnknownKind {
        /// The store.
        store: String,
        /// What was written.
        kind: String,
    },
    /// A placement the store's primitive does not take, or its fields missing or extra.
    #[error("store {store:?} ({kind}): {reason}")]
    BadPlacement {
        /// The store.
        store: String,
        /// Its primitive.
        kind: StoreKind,
        /// What is wrong.
        reason: String,
    },
    /// An Append list or a sketch reporter assigned twice.
    #[error("store {store:?}: {what} {id} is assigned twice")]
    AssignedTwice {
        /// The store.
        store: String,
        /// "list" or "reporter".
        what: &'static str,
        /// The id.
        id: u32,
    },
    /// `version` 0, or the embedded previous map's version not lower.
    #[error("version {version} must be above the previous map's {previous} (and above 0)")]
    VersionNotIncreasing {
        /// This map's.
        version: u64,
        /// The previous map's.
        previous: u64,
    },
    /// The embedded previous map is itself invalid.
    #[error("previous map: {0}")]
    Previous(Box<MapError>),
}

/// Why a report or key has no owner.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The map has no rule for the store.
    #[error("the cluster map has no store {0:?}")]
    UnknownStore(String),
    /// The map has no store of the report's primitive and shape.
    #[error("the cluster map has no {kind} store for keys of {key_len} bytes")]
    NoStoreFor {
        /// The report's primitive.
        kind: StoreKind,
        /// Its key length (list ids and sketch ids: 4 and 2).
        key_len: usize,
    },
    /// The key's kind does not suit the store's rule (a list id for a hashed store, ...).
    #[error("store {store:?} ({rule}) is not addressed by {key}")]
    WrongKey {
        /// The store.
        store: String,
        /// Its rule.
        rule: &'static str,
        /// What was given.
        key: &'static str,
    },
    /// An Append list neither in the table nor covered by a default.
    #[error("store {store:?}: list {list} is in no collector's table and there is no default")]
    UnassignedList {
        /// The store.
        store: String,
        /// The list.
        list: u32,
    },
}

/// A validated cluster map.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ClusterMap {
    /// Raised with every change; a previous map embedded has a lower one.
    pub version: u64,
    /// The collectors, in the map's order (indices used everywhere).
    pub collectors: Vec<Collector>,
    /// The stores' rules.
    pub stores: Vec<StoreRule>,
    /// The map before the change this one makes, if embedded.
    pub previous: Option<Box<ClusterMap>>,
    /// The collectors' seeds, in order (the hot path scores these).
    #[serde(skip)]
    seeds: Vec<u64>,
}

// ---- the file's schema ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMap {
    version: u64,
    #[serde(default)]
    collector: Vec<RawCollector>,
    #[serde(default)]
    store: Vec<RawStore>,
    previous: Option<Box<RawMap>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCollector {
    name: String,
    translator: SocketAddr,
    http: Option<SocketAddr>,
    region_dir: Option<PathBuf>,
    mode: Mode,
    #[serde(default)]
    nic_budget: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStore {
    name: String,
    kind: String,
    placement: Option<String>,
    key_len: Option<usize>,
    sketch_id: Option<u16>,
    /// Append: collector name to its lists.
    table: Option<BTreeMap<String, Vec<u32>>>,
    /// Append: the collector of lists in no table; Sketch-Merge `one`: the collector.
    collector: Option<String>,
    /// Sketch-Merge `hierarchical`.
    #[serde(default)]
    section: Vec<RawSection>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSection {
    name: String,
    collector: String,
    reporters: Vec<u32>,
}

/// The configuration's spelling of a primitive (as in the collectors' `[[store]] kind`).
pub fn kind_from_config(s: &str) -> Option<StoreKind> {
    Some(match s {
        "key-write" => StoreKind::KeyWrite,
        "key-increment" => StoreKind::KeyIncrement,
        "postcarding" => StoreKind::Postcarding,
        "append" => StoreKind::Append,
        "sketch-merge" => StoreKind::SketchMerge,
        _ => return None,
    })
}

fn check_name(n: &str) -> Result<(), MapError> {
    let ok = !n.is_empty()
        && n.len() <= MAX_NAME_LEN
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(MapError::BadName(n.to_string()))
    }
}

fn too_many(what: &'static str, n: usize, max: usize) -> Result<(), MapError> {
    if n > max {
        Err(MapError::TooMany { what, n, max })
    } else {
        Ok(())
    }
}

/// Refuse two collectors at one HTTP address or one region directory.
fn shared_places(collectors: &[Collector]) -> Result<(), MapError> {
    for (j, b) in collectors.iter().enumerate() {
        for a in &collectors[..j] {
            let shared = if let Some(h) = a.http.filter(|h| b.http == Some(*h)) {
                Some(("HTTP address", h.to_string()))
            } else {
                a.region_dir
                    .as_ref()
                    .filter(|d| b.region_dir.as_ref() == Some(*d))
                    .map(|d| ("region directory", d.display().to_string()))
            };
            if let Some((what, value)) = shared {
                return Err(MapError::SharedPlace {
                    what,
                    value,
                    first: a.name.clone(),
                    second: b.name.clone(),
                });
            }
        }
    }
    Ok(())
}

impl ClusterMap {
    /// Read and validate the map in `path`.
    pub fn load(path: &Path) -> Result<ClusterMap, MapError> {
        let io = |source| MapError::Io {
            path: path.to_path_buf(),
            source,
        };
        // Bounded by what is read, not by what the file claims (a device, a growing file).
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut std::io::Read::take(std::fs::File::open(path).map_err(io)?, MAX_MAP_BYTES + 1),
            &mut text,
        )
        .map_err(io)?;
        let mut m = ClusterMap::parse(&text)?;
        // A relative region directory is relative to the map's directory, like every path of
        // a configuration file.
        if let Some(parent) = path.parent() {
            let fix = |m: &mut ClusterMap| {
                for c in &mut m.collectors {
                    if let Some(d) = c.region_dir.as_mut().filter(|d| d.is_relative()) {
                        *d = parent.join(&*d);
                    }
                }
            };
            fix(&mut m);
            if let Some(p) = m.previous.as_deref_mut() {
                fix(p);
            }
        }
        Ok(m)
    }

    /// Parse and validate a map from TOML text.
    pub fn parse(text: &str) -> Result<ClusterMap, MapError> {
        if text.len() as u64 > MAX_MAP_BYTES {
            return Err(MapError::TooLarge(text.len() as u64));
        }
        let raw: RawMap =
            toml::from_str(text).map_err(|e| MapError::Syntax(dta_log::elide(&e.to_string())))?;
        ClusterMap::from_raw(raw, true)
    }

    fn from_raw(raw: RawMap, top: bool) -> Result<ClusterMap, MapError> {
        if raw.collector.is_empty() {
            return Err(MapError::Empty);
        }
        too_many("collectors", raw.collector.len(), MAX_COLLECTORS)?;
        too_many("stores", raw.store.len(), MAX_STORES)?;
        let mut names = HashSet::new();
        let mut collectors = Vec::with_capacity(raw.collector.len());
        for c in raw.collector {
            check_name(&c.name)?;
            if !names.insert(c.name.clone()) {
                return Err(MapError::DuplicateCollector(c.name));
            }
            collectors.push(Collector {
                seed: collector_seed(&c.name),
                name: c.name,
                translator: c.translator,
                http: c.http,
                region_dir: c.region_dir,
                mode: c.mode,
                nic_budget: c.nic_budget,
            });
        }
        shared_places(&collectors)?;
        let index = |store: &str, name: &str| {
            collectors
                .iter()
                .position(|c| c.name == name)
                .ok_or_else(|| MapError::UnknownCollector {
                    store: store.to_string(),
                    collector: name.to_string(),
                })
        };
        let mut store_names = HashSet::new();
        let mut stores = Vec::with_capacity(raw.store.len());
        for s in raw.store {
            check_name(&s.name)?;
            if !store_names.insert(s.name.clone()) {
                return Err(MapError::DuplicateStore(s.name));
            }
            let kind = kind_from_config(&s.kind).ok_or_else(|| MapError::UnknownKind {
                store: s.name.clone(),
                kind: s.kind.clone(),
            })?;
            let bad = |reason: String| MapError::BadPlacement {
                store: s.name.clone(),
                kind,
                reason,
            };
            let hashed = matches!(
                kind,
                StoreKind::KeyWrite | StoreKind::KeyIncrement | StoreKind::Postcarding
            );
            let default_rule = match kind {
                StoreKind::Append => "table",
                StoreKind::SketchMerge if !s.section.is_empty() => "hierarchical",
                StoreKind::SketchMerge => "one",
                _ => "hash",
            };
            let rule = s.placement.as_deref().unwrap_or(default_rule);
            if s.sketch_id.is_some() && kind != StoreKind::SketchMerge {
                return Err(bad("sketch_id is for Sketch-Merge stores".into()));
            }
            if s.key_len.is_some() && !hashed {
                return Err(bad(
                    "key_len is for Key-Write, Key-Increment and Postcarding".into(),
                ));
            }
            if s.table.is_some() && kind != StoreKind::Append {
                return Err(bad("table is for Append stores".into()));
            }
            if !s.section.is_empty() && rule != "hierarchical" {
                return Err(bad("section is for the hierarchical placement".into()));
            }
            let placement = match (kind, rule) {
                (_, "hash") if hashed => {
                    if s.collector.is_some() {
                        return Err(bad("a hashed store names no collector".into()));
                    }
                    Placement::Hash
                }
                (StoreKind::Append, "table") => {
                    let mut lists = BTreeMap::new();
                    for (cname, ids) in s.table.unwrap_or_default() {
                        let ci = index(&s.name, &cname)?;
                        for id in ids {
                            if lists.insert(id, ci).is_some() {
                                return Err(MapError::AssignedTwice {
                                    store: s.name.clone(),
                                    what: "list",
                                    id,
                                });
                            }
                            too_many("table entries", lists.len(), MAX_TABLE_ENTRIES)?;
                        }
                    }
                    let default = s
                        .collector
                        .as_deref()
                        .map(|n| index(&s.name, n))
                        .transpose()?;
                    if lists.is_empty() && default.is_none() {
                        return Err(bad("the table assigns no list and there is no default \
                                        `collector`"
                            .into()));
                    }
                    Placement::Table { lists, default }
                }
                (StoreKind::SketchMerge, "one") => {
                    let name = s
                        .collector
                        .as_deref()
                        .ok_or_else(|| bad("placement \"one\" needs `collector`".into()))?;
                    Placement::Sketch(SketchPlacement::One(index(&s.name, name)?))
                }
                (StoreKind::SketchMerge, "hierarchical") => {
                    if s.section.is_empty() {
                        return Err(bad(
                            "placement \"hierarchical\" needs [[store.section]]".into()
                        ));
                    }
                    too_many("sections", s.section.len(), MAX_TABLE_ENTRIES)?;
                    let default = match s.collector.as_deref() {
                        Some(n) => index(&s.name, n)?,
                        None => {
                            return Err(bad("placement \"hierarchical\" needs a default \
                                            `collector` for reporters of no section"
                                .into()))
                        }
                    };
                    let mut seen = HashSet::new();
                    let mut sections = Vec::with_capacity(s.section.len());
                    for sec in s.section {
                        check_name(&sec.name)?;
                        too_many("section reporters", sec.reporters.len(), MAX_TABLE_ENTRIES)?;
                        for &r in &sec.reporters {
                            if !seen.insert(r) {
                                return Err(MapError::AssignedTwice {
                                    store: s.name.clone(),
                                    what: "reporter",
                                    id: r,
                                });
                            }
                        }
                        sections.push(Section {
                            collector: index(&s.name, &sec.collector)?,
                            name: sec.name,
                            reporters: sec.reporters,
                        });
                    }
                    Placement::Sketch(SketchPlacement::Hierarchical { sections, default })
                }
                (_, other) => {
                    return Err(bad(format!(
                        "placement {other:?} does not apply (this primitive takes {default_rule:?})"
                    )))
                }
            };
            stores.push(StoreRule {
                name: s.name,
                kind,
                key_len: s.key_len,
                sketch_id: s.sketch_id,
                placement,
            });
        }
        let previous = match raw.previous {
            None => None,
            Some(_) if !top => {
                return Err(MapError::Syntax(
                    "a previous map embeds no previous map of its own".into(),
                ))
            }
            Some(p) => Some(Box::new(
                ClusterMap::from_raw(*p, false).map_err(|e| MapError::Previous(Box::new(e)))?,
            )),
        };
        let version = raw.version;
        let prev_version = previous.as_ref().map_or(0, |p| p.version);
        if version == 0 || (previous.is_some() && version <= prev_version) {
            return Err(MapError::VersionNotIncreasing {
                version,
                previous: prev_version,
            });
        }
        let seeds = collectors.iter().map(|c| c.seed).collect();
        Ok(ClusterMap {
            version,
            collectors,
            stores,
            previous,
            seeds,
        })
    }

    /// The rule of the store named `store`.
    pub fn store(&self, store: &str) -> Result<&StoreRule, RouteError> {
        self.stores
            .iter()
            .find(|s| s.name == store)
            .ok_or_else(|| RouteError::UnknownStore(store.to_string()))
    }

    /// The collector named `name`.
    pub fn collector(&self, name: &str) -> Option<&Collector> {
        self.collectors.iter().find(|c| c.name == name)
    }

    /// The collectors' rendezvous seeds, in order.
    pub fn seeds(&self) -> &[u64] {
        &self.seeds
    }

    /// Index (into [`ClusterMap::collectors`]) of the collector owning `key` of `rule`.
    pub fn owner_index_of(&self, rule: &StoreRule, key: Key<'_>) -> Result<usize, RouteError> {
        let wrong = |k: &'static str| RouteError::WrongKey {
            store: rule.name.clone(),
            rule: rule.placement.name(),
            key: k,
        };
        match (&rule.placement, key) {
            (Placement::Hash, Key::Bytes(k)) => {
                Ok(rendezvous(&self.seeds, k).expect("a map has collectors"))
            }
            (Placement::Table { lists, default }, Key::List(l)) => lists
                .get(&l)
                .copied()
                .or(*default)
                .ok_or_else(|| RouteError::UnassignedList {
                    store: rule.name.clone(),
                    list: l,
                }),
            (Placement::Sketch(SketchPlacement::One(c)), Key::Reporter(_)) => Ok(*c),
            (
                Placement::Sketch(SketchPlacement::Hierarchical { sections, default }),
                Key::Reporter(r),
            ) => Ok(sections
                .iter()
                .find(|s| s.reporters.contains(&r))
                .map_or(*default, |s| s.collector)),
            (_, Key::Bytes(_)) => Err(wrong("a key")),
            (_, Key::List(_)) => Err(wrong("a list id")),
            (_, Key::Reporter(_)) => Err(wrong("a reporter id")),
        }
    }

    /// Index of the collector owning `key` of the store named `store`.
    pub fn owner_index(&self, store: &str, key: Key<'_>) -> Result<usize, RouteError> {
        self.owner_index_of(self.store(store)?, key)
    }

    /// The collector owning `key` of the store named `store`.
    pub fn owner(&self, store: &str, key: Key<'_>) -> Result<&Collector, RouteError> {
        Ok(&self.collectors[self.owner_index(store, key)?])
    }

    /// Who may hold `key` while a change is under way: this map's owner first, then the
    /// previous map's owner when it differs (by name). A store the previous map does not have
    /// (or whose rule there cannot place the key) adds nobody.
    pub fn owners_during_change(
        &self,
        store: &str,
        key: Key<'_>,
    ) -> Result<Vec<&Collector>, RouteError> {
        let mut v = vec![self.owner(store, key)?];
        if let Some(p) = &self.previous {
            if let Ok(old) = p.owner(store, key) {
                if old.name != v[0].name {
                    v.push(old);
                }
            }
        }
        Ok(v)
    }

    /// The store rule a report goes to, found as the translator finds its store: by primitive,
    /// then key length (when the rule names one) or sketch id.
    pub fn rule_for(&self, report: &Report<'_>) -> Result<&StoreRule, RouteError> {
        let (kind, key_len, sketch) = match report {
            Report::KeyWrite { key, .. } => (StoreKind::KeyWrite, key.len(), None),
            Report::KeyIncrement { key, .. } => (StoreKind::KeyIncrement, key.len(), None),
            Report::Postcard { key, .. } => (StoreKind::Postcarding, key.len(), None),
            Report::Append { .. } => (StoreKind::Append, 4, None),
            Report::SketchColumn { sketch_id, .. } => (StoreKind::SketchMerge, 2, Some(*sketch_id)),
        };
        self.stores
            .iter()
            .find(|s| {
                s.kind == kind
                    && s.key_len.is_none_or(|l| l == key_len)
                    && (sketch.is_none() || s.sketch_id.is_none() || s.sketch_id == sketch)
            })
            .ok_or(RouteError::NoStoreFor { kind, key_len })
    }

    /// Index of the collector a report of reporter `reporter_id` goes to.
    pub fn route(&self, report: &Report<'_>, reporter_id: u32) -> Result<usize, RouteError> {
        let rule = self.rule_for(report)?;
        let key = match report {
            Report::KeyWrite { key, .. }
            | Report::KeyIncrement { key, .. }
            | Report::Postcard { key, .. } => Key::Bytes(key),
            Report::Append { list_id, .. } => Key::List(*list_id),
            Report::SketchColumn { .. } => Key::Reporter(reporter_id),
        };
        self.owner_index_of(rule, key)
    }

    /// The collectors a network-wide answer of `store` is read from: the owner of a sketch
    /// placed on one collector, every section's collector of a hierarchical one, every
    /// collector for other stores (list and range queries merge them).
    pub fn readers(&self, store: &str) -> Result<Vec<usize>, RouteError> {
        let rule = self.store(store)?;
        Ok(match &rule.placement {
            Placement::Sketch(SketchPlacement::One(c)) => vec![*c],
            Placement::Sketch(SketchPlacement::Hierarchical { sections, default }) => {
                let mut v: Vec<usize> = sections.iter().map(|s| s.collector).collect();
                v.push(*default);
                v.sort_unstable();
                v.dedup();
                v
            }
            _ => (0..self.collectors.len()).collect(),
        })
    }

    /// How `keys` of a hashed store spread over the collectors: count per collector index.
    pub fn shares<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) -> Vec<u64> {
        let mut n = vec![0u64; self.collectors.len()];
        for k in keys {
            n[rendezvous(&self.seeds, k).expect("a map has collectors")] += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests;
