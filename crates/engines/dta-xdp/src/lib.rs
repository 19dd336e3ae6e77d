//! `dta-xdp`: the XDP translator ([DTA §4], [DTA §5.2]). A BPF program in C
//! (`bpf/dta_xdp.bpf.c`, compiled by clang in `build.rs`, loaded with aya) parses DTA reports in
//! the driver and applies Key-Write, Key-Increment and Append directly into `BPF_F_MMAPABLE`
//! array maps that *are* the stores: each map holds a region's header page and data area (one
//! u64 per element), so this crate mmaps it as a [`dta_store::Region`] and `dta query` reads it
//! (pinned in bpffs) exactly as it reads a file-backed region. Reports the program cannot handle
//! (Postcarding, Sketch-Merge, retransmittable datagrams, malformed input, shapes without a store)
//! are passed up the stack (`XDP_PASS`) to the userspace translator, which one
//! builds over the same regions ([`XdpTranslator::fallback_regions`]). The simple translator
//! rules (match -> drop / Append) run in the program too ([`XdpTranslator::install_rules`],
//! docs/rules.md "In the XDP translator"). `docs/xdp.md` describes the design and its limits.

mod allow;
mod drop;
pub mod int;
mod rules;
pub mod xsk;

pub use drop::DropProgram;
pub use int::{IntFlowAgg, IntXdp, IntXdpConfig, IntXdpStats, INT_HIST_BUDGET};
pub use rules::{XdpRuleCounts, XdpRuleStats};

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aya::maps::{Array, Map, PerCpuArray};
use aya::programs::{Xdp, XdpFlags};
use aya::{Ebpf, EbpfLoader};
use dta_store::header::HEADER_LEN;
use dta_store::{Header, Region, StoreKind, StoreSpec};
use dta_translator::rules::PrimitiveName;
use serde::Serialize;

/// Store slots in the BPF program (`NSTORES` in the C source).
pub const MAX_STORES: usize = 6;
/// Reports per native datagram the program applies; longer datagrams go to userspace.
pub const MAX_NATIVE_REPORTS: usize = 8;
/// Largest UDP payload the program looks at; larger ones go to userspace.
pub const MAX_PAYLOAD: usize = 1024;

static PROGRAM: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/dta_xdp.o"));

/// The BPF programs this binary carries, by name, and whether each was compiled (an empty
/// object: clang was missing at build time, see build.rs).
pub fn programs() -> [(&'static str, bool); 4] {
    [
        ("dta_xdp", !PROGRAM.is_empty()),
        ("int_xdp", !int::INT_PROGRAM.is_empty()),
        ("xsk_redirect", !xsk::PROGRAM.is_empty()),
        ("xdp_drop", !drop::DROP_PROGRAM.is_empty()),
    ]
}

/// The programs left out of this build (none when clang was there at build time).
pub fn missing_programs() -> Vec<&'static str> {
    programs()
        .into_iter()
        .filter(|(_, built)| !built)
        .map(|(n, _)| n)
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    #[error(
        "the XDP program was not compiled (clang missing at build time: run scripts/setup.sh)"
    )]
    NotBuilt,
    #[error("{0} stores the XDP program can hold (Key-Write, Key-Increment, Append); at most {MAX_STORES}")]
    TooManyStores(usize),
    #[error("two Append stores; one Append store holds all lists")]
    TwoAppendStores,
    #[error("store {0}: region of {1} bytes is too large for a BPF array map")]
    TooLarge(String, u64),
    #[error("loading the BPF object: {0}")]
    Load(#[from] aya::EbpfError),
    #[error("BPF program: {0}")]
    Program(#[from] aya::programs::ProgramError),
    #[error("BPF map: {0}")]
    Map(#[from] aya::maps::MapError),
    #[error("pinning: {0}")]
    Pin(#[from] aya::pin::PinError),
    #[error("store {0}: {1}")]
    Store(String, dta_store::StoreError),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("missing map {0} in the BPF object")]
    MissingMap(String),
    #[error("rules: {0}")]
    Rules(String),
}

/// The per-CPU counters of the program (`enum` at the top of the C source), summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct XdpStats {
    /// Frames seen.
    pub packets: u64,
    /// DTA datagrams applied in the driver and consumed (XDP_DROP after applying).
    pub datagrams: u64,
    pub key_write: u64,
    pub append: u64,
    pub key_increment: u64,
    /// Passed: a report flagged immediate (the userspace translator applies and announces it).
    pub pass_immediate: u64,
    /// Passed: not UDP to the DTA port.
    pub pass_other: u64,
    /// Passed: retransmittable datagrams (sequence numbers and NACKs are userspace's).
    pub pass_retransmittable: u64,
    /// Passed: a primitive or shape without an XDP store (Postcarding, Sketch-Merge, no store,
    /// bad list id, wrong Append entry length), or a redundancy the routed store refuses
    /// (Key-Write above the store's N, Key-Increment other than the store's N).
    pub pass_unhandled: u64,
    /// Passed: fails validation; the userspace translator counts the exact reason.
    pub pass_malformed: u64,
    /// Passed: payload over 1024 bytes or more than 8 native reports.
    pub pass_too_big: u64,
    /// Dropped: a store word out of its map (a configuration bug; never seen in tests).
    pub drop_map_error: u64,
    /// 8-byte stores and fetch-adds performed on the stores.
    pub word_writes: u64,
    /// Reports a rule dropped in the driver (not applied; their datagram is consumed).
    pub rule_dropped: u64,
    /// Dropped unparsed: a source outside the allow-list (`[translator] allow`).
    pub source_not_allowed: u64,
    /// Passed: an IPv4 fragment (the stack reassembles it; the userspace half applies it).
    pub pass_fragment: u64,
    /// Passed: a reporter's hello (native kind 3), which the userspace translator takes.
    pub pass_control: u64,
}

const N_COUNTERS: u32 = 17;

impl XdpStats {
    fn from_counters(c: &[u64; N_COUNTERS as usize]) -> Self {
        XdpStats {
            packets: c[0],
            datagrams: c[1],
            key_write: c[2],
            append: c[3],
            key_increment: c[4],
            pass_immediate: c[5],
            pass_other: c[6],
            pass_retransmittable: c[7],
            pass_unhandled: c[8],
            pass_malformed: c[9],
            pass_too_big: c[10],
            drop_map_error: c[11],
            word_writes: c[12],
            rule_dropped: c[13],
            source_not_allowed: c[14],
            pass_fragment: c[15],
            pass_control: c[16],
        }
    }

    /// What the program did with the frames it saw, by action (the `action` label of
    /// `dta_translator_xdp_program_total`): applied in the driver, passed up (`pass_*`: the
    /// userspace translator takes them), dropped.
    pub fn actions(&self) -> [(&'static str, u64); 12] {
        [
            ("applied", self.datagrams),
            ("pass_immediate", self.pass_immediate),
            ("pass_other", self.pass_other),
            ("pass_retransmittable", self.pass_retransmittable),
            ("pass_unhandled", self.pass_unhandled),
            ("pass_malformed", self.pass_malformed),
            ("pass_too_big", self.pass_too_big),
            ("pass_fragment", self.pass_fragment),
            ("pass_control", self.pass_control),
            ("drop_map_error", self.drop_map_error),
            ("rule_dropped", self.rule_dropped),
            ("source_not_allowed", self.source_not_allowed),
        ]
    }

    /// Reports applied in the driver.
    pub fn reports(&self) -> u64 {
        self.key_write + self.append + self.key_increment
    }

    /// DTA-port datagrams passed to userspace.
    pub fn passed(&self) -> u64 {
        self.pass_retransmittable
            + self.pass_unhandled
            + self.pass_malformed
            + self.pass_too_big
            + self.pass_immediate
            + self.pass_control
    }
}

/// `struct store_cfg` of the C source.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct StoreCfg {
    kind: u32,
    hash: u32,
    key_len: u32,
    data_len: u32,
    slot_len: u32,
    lists: u32,
    redundancy: u32,
    pad: u32,
    count: u64,
    rings_offset: u64,
    words: u64,
}
// SAFETY: repr(C), plain integers, no padding (8·4 + 3·8 bytes).
unsafe impl aya::Pod for StoreCfg {}

/// `struct crc_table` of the C source: zlib's CRC-32 table.
#[repr(C)]
#[derive(Clone, Copy)]
struct CrcTable([u32; 256]);
// SAFETY: repr(C), plain integers.
unsafe impl aya::Pod for CrcTable {}

fn crc_table() -> CrcTable {
    let mut t = [0u32; 256];
    for (i, v) in t.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *v = c;
    }
    CrcTable(t)
}

/// `struct global_cfg` of the C source.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct GlobalCfg {
    enabled: u32,
    proto_hdr_len: u32,
    port: u32,
    pad: u32,
}
// SAFETY: repr(C), plain integers, no padding.
unsafe impl aya::Pod for GlobalCfg {}

/// Program settings.
#[derive(Debug, Clone)]
pub struct XdpConfig {
    /// UDP destination port of reports (40040).
    pub port: u16,
    /// Prototype base header: `true` for the long (3-byte) format.
    pub prototype_long: bool,
    /// The sources a datagram is taken from (`[translator] allow`); others are dropped in the
    /// driver before they are parsed and counted [`XdpStats::source_not_allowed`].
    pub allow: dta_wire::prefix::AllowList,
}

impl Default for XdpConfig {
    fn default() -> Self {
        XdpConfig {
            port: 40040,
            prototype_long: false,
            allow: dta_wire::prefix::AllowList::loopback(),
        }
    }
}

/// How the program was attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum AttachMode {
    /// Native (driver) mode.
    Native,
    /// Generic (SKB) mode: the driver has no XDP support.
    Generic,
}

/// Whether the XDP program can hold a store of this spec (Key-Write, Key-Increment without
/// time windows, Append): a windowed Key-Increment store stays with the userspace half, which
/// moves it from window to window.
pub fn handles(spec: &StoreSpec) -> bool {
    match spec {
        StoreSpec::KeyIncrement(s) if s.windows > 0 => false,
        _ => handles_primitive(PrimitiveName::of(spec)),
    }
}

/// Whether the XDP program can hold stores of primitive `p`.
pub fn handles_primitive(p: PrimitiveName) -> bool {
    match p {
        PrimitiveName::KeyWrite | PrimitiveName::KeyIncrement | PrimitiveName::Append => true,
        PrimitiveName::Postcarding | PrimitiveName::SketchMerge => false,
    }
}

/// The primitives whose stores stay in userspace given which stores the program holds
/// (`in_driver`): the starting point of `RuleSet::split_xdp`.
pub fn userspace_primitives(in_driver: &[Header]) -> Vec<PrimitiveName> {
    [
        PrimitiveName::KeyWrite,
        PrimitiveName::KeyIncrement,
        PrimitiveName::Append,
        PrimitiveName::Postcarding,
        PrimitiveName::SketchMerge,
    ]
    .into_iter()
    .filter(|&p| {
        !handles_primitive(p) || !in_driver.iter().any(|h| PrimitiveName::of(&h.spec) == p)
    })
    .collect()
}

fn store_cfg(h: &Header, words: u64) -> StoreCfg {
    let mut c = StoreCfg {
        hash: h.hash as u32,
        words,
        ..Default::default()
    };
    match &h.spec {
        StoreSpec::KeyWrite(s) => {
            c.kind = StoreKind::KeyWrite as u32;
            c.key_len = s.key_len as u32;
            c.data_len = s.data_len as u32;
            c.slot_len = (4 + s.data_len as u32).div_ceil(8) * 8;
            c.count = s.slots;
            c.redundancy = s.redundancy as u32;
        }
        StoreSpec::KeyIncrement(s) => {
            c.kind = StoreKind::KeyIncrement as u32;
            c.key_len = s.key_len as u32;
            c.count = s.counters;
            c.redundancy = s.redundancy as u32;
        }
        StoreSpec::Append(s) => {
            c.kind = StoreKind::Append as u32;
            c.data_len = s.entry_len as u32;
            c.lists = s.lists;
            c.count = s.capacity;
            c.rings_offset = (8 * s.lists as u64).div_ceil(4096) * 4096;
        }
        _ => {}
    }
    c
}

/// One store held in a BPF map.
pub struct MapStore {
    pub name: String,
    /// The map, mapped as a region (header page + data area).
    pub region: Arc<Region>,
    slot: usize,
}

impl MapStore {
    /// The program's store slot (map `dta_st{slot}`).
    pub fn slot(&self) -> usize {
        self.slot
    }
}

/// The loaded XDP translator: the program, its maps (the stores) and its counters.
pub struct XdpTranslator {
    ebpf: Ebpf,
    stores: Vec<MapStore>,
    attached: Option<(String, AttachMode)>,
    rule_slots: rules::RuleSlots,
}

fn map_fd(ebpf: &Ebpf, name: &str) -> Result<OwnedFd, XdpError> {
    let map = ebpf
        .map(name)
        .ok_or_else(|| XdpError::MissingMap(name.into()))?;
    let data = match map {
        Map::Array(d) => d,
        _ => return Err(XdpError::MissingMap(name.into())),
    };
    data.fd()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| XdpError::Io(format!("dup {name}"), e))
}

/// Write the header page into the first 4096 bytes of the map behind `fd`.
fn write_header_page(fd: &OwnedFd, page: &[u8]) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a shared, writable mapping of the map's first page; we copy 4096 bytes into it and
    // unmap it before returning.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            HEADER_LEN,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        );
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        std::ptr::copy_nonoverlapping(page.as_ptr(), p as *mut u8, HEADER_LEN);
        libc::munmap(p, HEADER_LEN);
    }
    Ok(())
}

impl XdpTranslator {
    /// Load the program with one map per store in `stores` (only those [`handles`] accepts; at
    /// most [`MAX_STORES`], at most one Append store), write each map's header page and
    /// configure the program. Slots are given in the order of `stores`, which is also the routing
    /// order (the first store matching a report's shape wins, as in the userspace engine).
    /// Nothing is attached yet: see [`XdpTranslator::attach`].
    pub fn load(cfg: &XdpConfig, stores: &[Header]) -> Result<XdpTranslator, XdpError> {
        if PROGRAM.is_empty() {
            return Err(XdpError::NotBuilt);
        }
        let ours: Vec<&Header> = stores.iter().filter(|h| handles(&h.spec)).collect();
        if ours.len() > MAX_STORES {
            return Err(XdpError::TooManyStores(ours.len()));
        }
        if ours.iter().filter(|h| h.kind == StoreKind::Append).count() > 1 {
            return Err(XdpError::TwoAppendStores);
        }
        let names: Vec<String> = (0..MAX_STORES).map(|i| format!("dta_st{i}")).collect();
        let mut words = vec![];
        for h in &ours {
            let bytes = HEADER_LEN as u64 + h.data_len;
            let w = bytes.div_ceil(8);
            if w > u32::MAX as u64 || bytes > isize::MAX as u64 {
                return Err(XdpError::TooLarge(h.name.clone(), bytes));
            }
            words.push(w);
        }
        let mut loader = EbpfLoader::new();
        for (i, w) in words.iter().enumerate() {
            loader.set_max_entries(&names[i], *w as u32);
        }
        let mut ebpf = loader.load(PROGRAM)?;
        let mut out = vec![];
        for (i, h) in ours.iter().enumerate() {
            let fd = map_fd(&ebpf, &names[i])?;
            write_header_page(&fd, &h.to_page())
                .map_err(|e| XdpError::Io(format!("mapping {}", names[i]), e))?;
            let region = Region::from_fd(fd, words[i] * 8, Path::new(&names[i]), true)
                .map_err(|e| XdpError::Store(h.name.clone(), e))?;
            out.push(MapStore {
                name: h.name.clone(),
                region: Arc::new(region),
                slot: i,
            });
        }
        {
            let mut cfgs: Array<_, StoreCfg> = Array::try_from(
                ebpf.map_mut("dta_cfg")
                    .ok_or_else(|| XdpError::MissingMap("dta_cfg".into()))?,
            )?;
            for (i, h) in ours.iter().enumerate() {
                cfgs.set(i as u32, store_cfg(h, words[i]), 0)?;
            }
        }
        {
            let mut t: Array<_, CrcTable> = Array::try_from(
                ebpf.map_mut("dta_crc")
                    .ok_or_else(|| XdpError::MissingMap("dta_crc".into()))?,
            )?;
            t.set(0, crc_table(), 0)?;
        }
        {
            let mut g: Array<_, GlobalCfg> = Array::try_from(
                ebpf.map_mut("dta_global")
                    .ok_or_else(|| XdpError::MissingMap("dta_global".into()))?,
            )?;
            g.set(
                0,
                GlobalCfg {
                    enabled: 1,
                    proto_hdr_len: if cfg.prototype_long { 3 } else { 2 },
                    port: cfg.port as u32,
                    pad: 0,
                },
                0,
            )?;
        }
        allow::install(&mut ebpf, &cfg.allow)?;
        let prog: &mut Xdp = ebpf
            .program_mut("dta_xdp")
            .ok_or_else(|| XdpError::MissingMap("program dta_xdp".into()))?
            .try_into()?;
        prog.load()?;
        Ok(XdpTranslator {
            ebpf,
            stores: out,
            attached: None,
            rule_slots: rules::RuleSlots::default(),
        })
    }

    /// Attach to `iface`: native (driver) mode if the driver supports it, else generic (SKB)
    /// mode. `force_generic` skips the native attempt.
    pub fn attach(&mut self, iface: &str, force_generic: bool) -> Result<AttachMode, XdpError> {
        let mode = attach_program(&mut self.ebpf, "dta_xdp", iface, force_generic)?;
        self.attached = Some((iface.to_string(), mode));
        Ok(mode)
    }

    /// The interface and mode the program is attached with, if any.
    pub fn attached(&self) -> Option<(&str, AttachMode)> {
        self.attached.as_ref().map(|(i, m)| (i.as_str(), *m))
    }

    /// The stores held in maps, in slot order.
    pub fn stores(&self) -> &[MapStore] {
        &self.stores
    }

    /// The map-backed region of store `name`.
    pub fn region(&self, name: &str) -> Option<&Arc<Region>> {
        self.stores
            .iter()
            .find(|s| s.name == name)
            .map(|s| &s.region)
    }

    /// Pin every store map in `dir` (on a bpffs mount) as `dir/NAME`, replacing stale pins, so
    /// that `dta query --region dir/NAME` reads it. Returns the pinned paths.
    pub fn pin(&self, dir: &Path) -> Result<Vec<PathBuf>, XdpError> {
        std::fs::create_dir_all(dir).map_err(|e| XdpError::Io(dir.display().to_string(), e))?;
        let mut out = vec![];
        for s in &self.stores {
            let p = dir.join(&s.name);
            let _ = std::fs::remove_file(&p);
            let map = self
                .ebpf
                .map(&format!("dta_st{}", s.slot))
                .ok_or_else(|| XdpError::MissingMap(s.name.clone()))?;
            map.pin(&p)?;
            out.push(p);
        }
        Ok(out)
    }

    /// The program's run time and run count as the kernel accounts them (zero unless run-time
    /// statistics are on: [`enable_run_time_stats`]): its CPU cost, for benchmarks.
    pub fn run_time(&self) -> Result<(std::time::Duration, u64), XdpError> {
        let info = self
            .ebpf
            .program("dta_xdp")
            .ok_or_else(|| XdpError::MissingMap("program dta_xdp".into()))?
            .info()?;
        Ok((info.run_time(), info.run_count()))
    }

    /// The program's counters, summed over CPUs.
    pub fn stats(&self) -> Result<XdpStats, XdpError> {
        let arr: PerCpuArray<_, u64> = PerCpuArray::try_from(
            self.ebpf
                .map("dta_stats")
                .ok_or_else(|| XdpError::MissingMap("dta_stats".into()))?,
        )?;
        let mut c = [0u64; N_COUNTERS as usize];
        for (i, v) in c.iter_mut().enumerate() {
            *v = arr.get(&(i as u32), 0)?.iter().sum();
        }
        Ok(XdpStats::from_counters(&c))
    }

    /// Regions for the userspace fallback translator, one per entry of `stores` (as given to
    /// [`XdpTranslator::load`]): the map-backed region for stores the program holds, else
    /// `file_region(header)` (e.g. the collector's region file).
    pub fn fallback_regions(
        &self,
        stores: &[Header],
        mut file_region: impl FnMut(&Header) -> Option<Arc<Region>>,
    ) -> Vec<Arc<Region>> {
        stores
            .iter()
            .filter_map(|h| match self.region(&h.name) {
                Some(r) if handles(&h.spec) => Some(r.clone()),
                _ => file_region(h),
            })
            .collect()
    }
}

/// Turn on the kernel's per-program run-time statistics (`BPF_ENABLE_STATS`) while the
/// returned descriptor is open.
pub fn enable_run_time_stats() -> Result<OwnedFd, XdpError> {
    aya::sys::enable_stats(aya::sys::Stats::RunTime)
        .map_err(|e| XdpError::Io("BPF_ENABLE_STATS".into(), e.io_error))
}

/// Copy the data area of `from` into `to` (same layout), e.g. to seed a map store from the
/// collector's region file at start and write it back at exit.
pub fn copy_data(from: &Region, to: &Region) -> Result<(), dta_store::SinkError> {
    let len = from.mem().len().min(to.mem().len());
    let mut buf = vec![0u8; 1 << 16];
    let mut off = 0u64;
    while off < len {
        let n = ((len - off) as usize).min(buf.len());
        from.mem().read(off, &mut buf[..n])?;
        to.mem().write(off, &buf[..n])?;
        off += n as u64;
    }
    Ok(())
}

/// Attach program `name` of `ebpf` to `iface`: native (driver) mode if the driver supports it
/// and `force_generic` is false, else generic (SKB) mode.
pub(crate) fn attach_program(
    ebpf: &mut Ebpf,
    name: &str,
    iface: &str,
    force_generic: bool,
) -> Result<AttachMode, XdpError> {
    let prog: &mut Xdp = ebpf
        .program_mut(name)
        .ok_or_else(|| XdpError::MissingMap(format!("program {name}")))?
        .try_into()?;
    if !force_generic && prog.attach(iface, XdpFlags::DRV_MODE).is_ok() {
        return Ok(AttachMode::Native);
    }
    prog.attach(iface, XdpFlags::SKB_MODE)?;
    Ok(AttachMode::Generic)
}
