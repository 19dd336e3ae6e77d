//! The monitoring systems of [DTA Table 2] as DTA report producers and queries. Each system is a
//! module that runs the system's switch-side logic over a packet trace ([`trace`]: a pcap, or
//! flows synthesized from the flow-size CDFs of `shared/workloads/` with losses,
//! retransmissions and idle gaps), emits the DTA reports that system sends (the workspace's
//! one report type, [`dta_wire::Report`], handed to an [`Emit`] callback: a `dta_reporter`
//! reporter on the wire, a translator in tests), computes the system's ground truth from the
//! whole trace, and answers the system's queries by reading the collector's stores (regions
//! opened through [`Stores`]). Marple ([`marple`], [DTA §6.1] Fig. 7b), NetSeer, TurboFlow, PINT,
//! Sonata and Trajectory Sampling each map onto one or two primitives; `docs/systems.md` has
//! the table. The store names and shapes every system uses are the constants of its module,
//! and `examples/systems.toml` configures those stores, so that `dta report --workload ...`
//! then `dta query <system> ...` with default options read back what was sent.
//!
//! Routing constraint (docs/architecture.md, "Routing reports to stores"): one collector
//! routes a Key-Write report by (key length, data length), Key-Increment by key length, and
//! holds a single Append store. So every system's keyed stores have distinct shapes (listed
//! below) and every system appends to the one shared store [`APPEND_STORE`], in entries of
//! [`ENTRY_LEN`] bytes (zero padded), on its own range of lists ([`lists`]).
//!
//! | shape | store | system |
//! | --- | --- | --- |
//! | Key-Write key 4, data 8 | `marple_hosts` | Marple host counters (non-merging) |
//! | Key-Write key 13, data 4 | `marple_timeouts` | Marple TCP timeouts |
//! | Key-Increment key 5 | `marple_host_counts` | Marple host counters (addition) |
//! | Append | [`APPEND_STORE`] | every system, lists of [`lists`] |

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::net::Ipv4Addr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use dta_store::Region;
use dta_wire::Report;

pub mod marple;
pub mod netseer;
pub mod pint;
pub mod sonata;
pub mod trace;
pub mod trajectory;
pub mod turboflow;
pub mod workload;

/// `examples/systems.toml`: the stores the systems write, the default configuration of
/// `dta query <system>` and of the benchmark.
pub const STORES_TOML: &str = include_str!("../../../../examples/systems.toml");

/// The one Append store of the systems' configuration (`examples/systems.toml`).
pub const APPEND_STORE: &str = "systems_lists";
/// Bytes of every entry of [`APPEND_STORE`]: the largest system entry (NetSeer's 18-byte loss
/// event, Marple's 13-byte flow with its value) rounded up; shorter entries are zero padded.
pub const ENTRY_LEN: usize = 32;
/// Default most entries a list query prints (all are counted).
pub const DEFAULT_LIST: usize = 1000;

/// Each system's lists in [`APPEND_STORE`] (disjoint ranges; [`lists::TOTAL`] lists in all).
pub mod lists {
    use std::ops::Range;
    /// Marple lossy connections: one list per loss-rate range (`marple::LOSS_RANGES_BP`).
    pub const MARPLE_LOSSY: Range<u32> = 0..8;
    /// Marple flowlet sizes: one list per histogram bin (`marple::FLOWLET_BINS`).
    pub const MARPLE_FLOWLETS: Range<u32> = 8..24;
    /// NetSeer loss events.
    pub const NETSEER: Range<u32> = 24..40;
    /// Sonata raw tuples.
    pub const SONATA: Range<u32> = 40..56;
    /// Lists the store holds (the configuration's `lists`).
    pub const TOTAL: u32 = 64;
}

/// A flow 5-tuple as the stores key it (13 bytes, the order of
/// `dta_collector::query::parse_five_tuple`): source IPv4, destination IPv4, source port,
/// destination port, protocol.
pub type FlowKey = [u8; 13];

/// The 5-tuple key of a flow.
pub fn flow_key(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, proto: u8) -> FlowKey {
    let mut k = [0u8; 13];
    k[0..4].copy_from_slice(&src.octets());
    k[4..8].copy_from_slice(&dst.octets());
    k[8..10].copy_from_slice(&sport.to_be_bytes());
    k[10..12].copy_from_slice(&dport.to_be_bytes());
    k[12] = proto;
    k
}

/// A flow key as `dta query` takes it: `SRC:SPORT-DST:DPORT/PROTO`.
pub fn flow_string(k: &FlowKey) -> String {
    let ip = |b: &[u8]| Ipv4Addr::new(b[0], b[1], b[2], b[3]);
    format!(
        "{}:{}-{}:{}/{}",
        ip(&k[0..4]),
        u16::from_be_bytes([k[8], k[9]]),
        ip(&k[4..8]),
        u16::from_be_bytes([k[10], k[11]]),
        k[12]
    )
}

/// Parse `SRC:SPORT-DST:DPORT/PROTO` (the one parser: `dta_collector::query`).
pub fn parse_flow(s: &str) -> Result<FlowKey, SystemError> {
    dta_collector::query::parse_five_tuple(s.trim()).ok_or_else(|| {
        SystemError::BadRequest(format!(
            "bad flow {s:?}: expected SRC_IP:SPORT-DST_IP:DPORT/PROTO, e.g. 10.0.0.1:1234-10.0.0.2:80/6"
        ))
    })
}

/// Where a system's reports go: called once per report, in the order the switch sends them.
/// An error stops the run and is returned by the producer.
pub type Emit<'a> = dyn FnMut(&Report<'_>) -> Result<(), SystemError> + 'a;

/// Errors of the systems: the trace, the request, the stores.
#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    /// The trace could not be read or synthesized (the message says why).
    #[error("trace: {0}")]
    Trace(String),
    /// The request cannot be answered as asked (bad range, flow, parameter).
    #[error("{0}")]
    BadRequest(String),
    /// A store the query needs is missing or not of the expected shape.
    #[error("store {store}: {msg}")]
    Store {
        /// The store's name.
        store: String,
        /// What is wrong.
        msg: String,
    },
    /// The stores hold nothing that answers the request (the message says what was looked for).
    #[error("{0}")]
    NotFound(String),
    /// Sending a report failed.
    #[error("sending reports: {0}")]
    Send(String),
}

/// The collector's stores, opened read-only by name from its region directory.
#[derive(Debug, Clone)]
pub struct Stores {
    dir: PathBuf,
}

impl Stores {
    /// The stores of region directory `dir`.
    pub fn new(dir: &Path) -> Stores {
        Stores {
            dir: dir.to_path_buf(),
        }
    }

    /// The region directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Open store `name` read-only.
    pub fn open(&self, name: &str) -> Result<Region, SystemError> {
        let path = dta_collector::region_path(&self.dir, name);
        Region::open_read_only(&path).map_err(|e| SystemError::Store {
            store: name.to_owned(),
            msg: format!(
                "cannot open {} ({e}); is the collector running with examples/systems.toml?",
                path.display()
            ),
        })
    }
}

/// The entries of one list of [`APPEND_STORE`] still held, oldest first.
#[derive(Debug, Clone, Default)]
pub struct ListEntries {
    /// The entries, [`ENTRY_LEN`] bytes each.
    pub entries: Vec<[u8; ENTRY_LEN]>,
    /// Entries ever appended to the list (its head).
    pub appended: u64,
    /// Entries appended but no longer held (overwritten by newer ones): an answer built from
    /// `entries` misses them.
    pub overwritten: u64,
}

/// Read every entry list `list` of the Append store `region` still holds (at most its capacity),
/// checking that the store is the systems' one (entries of [`ENTRY_LEN`] bytes).
pub fn read_list(region: &Region, list: u32) -> Result<ListEntries, SystemError> {
    let h = region.header();
    let store_err = |msg: String| SystemError::Store {
        store: h.name.clone(),
        msg,
    };
    let layout = dta_store::AppendLayout::new(h).map_err(|e| store_err(e.to_string()))?;
    if layout.entry_len() != ENTRY_LEN {
        return Err(store_err(format!(
            "entries of {} bytes, the systems write {ENTRY_LEN} (examples/systems.toml)",
            layout.entry_len()
        )));
    }
    let reader = dta_store::ListReader::new(layout.clone(), list, 0, 1)
        .map_err(|e| store_err(e.to_string()))?;
    let mut reader = reader.with_tail(0);
    let mut buf = Vec::with_capacity(layout.capacity().min(1 << 20) as usize * ENTRY_LEN);
    let polled = reader.poll(region.mem(), layout.capacity() as usize, &mut buf);
    region.check().map_err(|e| store_err(e.to_string()))?;
    Ok(ListEntries {
        entries: buf
            .chunks_exact(ENTRY_LEN)
            .map(|c| c.try_into().expect("chunks of ENTRY_LEN"))
            .collect(),
        appended: reader.tail(),
        overwritten: polled.missed,
    })
}

/// Parse a range `A..B` of fractions (A inclusive, B exclusive; `A..` is open above, `..B`
/// starts at 0) into basis points (1/10 000), rounded to the nearest.
pub fn parse_fraction_range(s: &str) -> Result<Range<u32>, SystemError> {
    let bad = |m: &str| SystemError::BadRequest(format!("bad range {s:?}: {m}"));
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| bad("expected A..B (fractions, e.g. 0.01..0.05)"))?;
    let frac = |t: &str, dflt: u32| -> Result<u32, SystemError> {
        let t = t.trim();
        if t.is_empty() {
            return Ok(dflt);
        }
        let v: f64 = t
            .parse()
            .map_err(|_| bad("bounds are fractions in 0..=1"))?;
        if !(0.0..=1.0).contains(&v) {
            return Err(bad("bounds are fractions in 0..=1"));
        }
        Ok((v * 10_000.0).round() as u32)
    };
    let (lo, hi) = (frac(a, 0)?, frac(b, 10_001)?);
    if lo >= hi {
        return Err(bad("empty: A must be below B"));
    }
    Ok(lo..hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_print_and_parse_back() {
        let k = flow_key(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 1, 2),
            1234,
            80,
            6,
        );
        assert_eq!(flow_string(&k), "10.0.0.1:1234-10.0.1.2:80/6");
        assert_eq!(parse_flow(&flow_string(&k)).unwrap(), k);
        assert!(parse_flow("10.0.0.1-10.0.0.2").is_err());
    }

    #[test]
    fn ranges() {
        assert_eq!(parse_fraction_range("0.01..0.05").unwrap(), 100..500);
        assert_eq!(parse_fraction_range("0.2..").unwrap(), 2000..10_001);
        assert_eq!(parse_fraction_range("..0.1").unwrap(), 0..1000);
        for bad in ["0.05..0.01", "x..1", "0.1", "0..2"] {
            assert!(parse_fraction_range(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn list_ranges_are_disjoint_and_inside_the_store() {
        let all = [
            lists::MARPLE_LOSSY,
            lists::MARPLE_FLOWLETS,
            lists::NETSEER,
            lists::SONATA,
        ];
        for (i, a) in all.iter().enumerate() {
            assert!(a.end <= lists::TOTAL);
            for b in &all[i + 1..] {
                assert!(a.end <= b.start || b.end <= a.start, "{a:?} {b:?}");
            }
        }
    }
}

#[cfg(test)]
mod stores_toml_tests {
    use dta_collector::StoreConfig;
    use dta_store::StoreSpec;

    #[derive(serde::Deserialize)]
    struct Stores {
        store: Vec<StoreConfig>,
    }

    #[test]
    fn the_systems_configuration_has_the_stores_the_systems_write() {
        // Only the [[store]] tables: the rest of the file is the node's.
        let cfg: Stores = toml::from_str(super::STORES_TOML).expect("examples/systems.toml parses");
        let spec = |name: &str| {
            cfg.store
                .iter()
                .find(|s| s.name == name)
                .unwrap_or_else(|| panic!("examples/systems.toml has no store {name}"))
                .spec()
                .unwrap()
        };
        use super::marple;
        match spec(marple::STORE_HOSTS) {
            StoreSpec::KeyWrite(s) => assert_eq!(
                (s.key_len, s.data_len, s.redundancy),
                (4, 8, marple::REDUNDANCY)
            ),
            s => panic!("{s:?}"),
        }
        match spec(marple::STORE_TIMEOUTS) {
            StoreSpec::KeyWrite(s) => assert_eq!(
                (s.key_len, s.data_len, s.redundancy),
                (13, 4, marple::REDUNDANCY)
            ),
            s => panic!("{s:?}"),
        }
        match spec(marple::STORE_HOST_COUNTS) {
            StoreSpec::KeyIncrement(s) => {
                assert_eq!((s.key_len, s.redundancy), (5, marple::REDUNDANCY))
            }
            s => panic!("{s:?}"),
        }
        match spec(super::APPEND_STORE) {
            StoreSpec::Append(s) => assert_eq!(
                (s.entry_len as usize, s.lists),
                (super::ENTRY_LEN, super::lists::TOTAL)
            ),
            s => panic!("{s:?}"),
        }
    }
}
