//! The collector handle: the node embedded in the calling program
//! (`dta_node::embedded::EmbeddedNode`: the stores' regions as `dta collector` creates them and
//! a co-located translator over them under the node's one ingress policy).

use std::collections::HashMap;
use std::ffi::{c_char, c_int};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use dta_collector::Collector;
use dta_store::lock::InstanceLock;
use dta_store::{PostcardingLayout, ValueTable};
use dta_translator::{Reason, RegionSinks, Stats, Translator};

use crate::{guard, non_null, now, put, string, Code, Error, Result};

/// Reject reasons counted by the translator (`DTA_REJECT_REASONS` of dta.h).
pub const REJECT_REASONS: usize = Reason::COUNT;
/// Primitives counted in [`DtaStats::reports`], in opcode order (`DTA_PRIMITIVES`).
pub const PRIMITIVES: usize = dta_translator::stats::PRIMITIVES.len();

/// An open collector (`dta_collector` of dta.h, opaque to C).
pub struct DtaCollector {
    // Field order is drop order: the translator (which writes into the regions) goes first, the
    // locks last.
    translator: Translator<RegionSinks>,
    stats: Arc<Stats>,
    /// Lookup tables of the Postcarding stores, built on their first query.
    pub(crate) value_tables: HashMap<String, (PostcardingLayout, ValueTable)>,
    pub(crate) collector: Collector,
    _writer: InstanceLock,
}

/// Counters of an open collector (`dta_stats` of dta.h).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DtaStats {
    /// Datagrams handed to the translator.
    pub datagrams: u64,
    /// Reports parsed, by primitive in opcode order (key-write, append, key-increment,
    /// postcarding, sketch-merge).
    pub reports: [u64; PRIMITIVES],
    /// Datagrams and reports rejected, in total.
    pub rejected: u64,
    /// Rejects by reason, indexed as [`dta_reject_reason_name`] names them.
    pub rejects: [u64; REJECT_REASONS],
    /// Postcarding paths written complete, written at a timeout or flush with hops missing, and
    /// written early because another path needed the cache line (`postcard_cache_entries`).
    pub postcard_chunks_complete: u64,
    pub postcard_chunks_timeout: u64,
    pub postcard_chunks_collision: u64,
    /// Sketch-Merge columns written.
    pub sketch_columns_written: u64,
    /// Append batches written (full and partial).
    pub append_batches: u64,
    /// Sequence numbers the translator gave up as never received (out of its window, or given
    /// up by its timer), all priorities: loss as the sequence tracker sees it.
    pub lost: u64,
    /// Sequenced datagrams received again.
    pub duplicates: u64,
}

impl DtaCollector {
    /// Open as `dta collector --config path` then `dta translator --config path` would: the
    /// collector lock and the regions, then the writer lock and one translator over them.
    /// `region_dir`, when given, overrides the configuration's (as `--region-dir` does).
    pub fn open(config_path: &str, region_dir: Option<&str>) -> Result<DtaCollector> {
        use dta_node::embedded::{EmbeddedNode, OpenError};
        let node = EmbeddedNode::open(
            crate::path_arg(config_path),
            region_dir.map(std::path::Path::new),
        )
        .map_err(|e| match e {
            OpenError::Config(e) => Error::new(Code::Config, format!("{e:#}")),
            OpenError::Io(e) => Error::new(Code::Io, format!("{e:#}")),
        })?;
        Ok(DtaCollector {
            translator: node.translator,
            stats: node.stats,
            value_tables: HashMap::new(),
            collector: node.collector,
            _writer: node.writer,
        })
    }

    fn rejected(&self) -> u64 {
        self.stats.total_rejected()
    }

    /// Apply one datagram received from `src`. [`Code::Rejected`], naming the reasons, when the
    /// translator rejected it or any of its reports (every reject is also counted).
    pub fn ingest(&mut self, datagram: &[u8], src: SocketAddr) -> Result<()> {
        let before: [u64; REJECT_REASONS] =
            std::array::from_fn(|i| self.stats.rejects[i].load(Relaxed));
        let total = self.rejected();
        self.translator.handle_datagram(datagram, src, now());
        // NACKs and notices go back to reporters over UDP; an embedding program has none.
        self.translator.drain_nacks().for_each(drop);
        if self.rejected() == total {
            return Ok(());
        }
        let why: Vec<String> = Reason::ALL
            .iter()
            .filter_map(|r| {
                let n = self.stats.rejects[r.index()].load(Relaxed) - before[r.index()];
                (n > 0).then(|| format!("{} x{n}", r.name()))
            })
            .collect();
        Err(Error::new(
            Code::Rejected,
            format!(
                "{}-byte datagram from {src} rejected by the translator: {}",
                datagram.len(),
                why.join(", ")
            ),
        ))
    }

    /// Run the translator's timers (partial Append batches, expired Postcarding paths, ...).
    pub fn tick(&mut self) {
        self.translator.tick(now());
        self.translator.drain_nacks().for_each(drop);
    }

    /// Write out everything the translator holds, then flush the regions to their files.
    pub fn flush(&mut self) -> Result<()> {
        self.translator.flush_all();
        self.translator.drain_nacks().for_each(drop);
        for r in self.collector.regions() {
            r.flush().map_err(|e| {
                Error::new(Code::Io, format!("flushing {}: {e}", r.path().display()))
            })?;
        }
        Ok(())
    }

    pub fn stats(&self) -> DtaStats {
        let s = &self.stats;
        DtaStats {
            datagrams: s.datagrams.load(Relaxed),
            reports: std::array::from_fn(|i| s.reports[i].load(Relaxed)),
            rejected: s.total_rejected(),
            rejects: std::array::from_fn(|i| s.rejects[i].load(Relaxed)),
            postcard_chunks_complete: s.postcard_chunks_complete.load(Relaxed),
            postcard_chunks_timeout: s.postcard_chunks_timeout.load(Relaxed),
            postcard_chunks_collision: s.postcard_chunks_collision.load(Relaxed),
            sketch_columns_written: s.sketch_columns_written.load(Relaxed),
            append_batches: s.append_batches.load(Relaxed),
            lost: s.lost.iter().map(|c| c.load(Relaxed)).sum(),
            duplicates: s.duplicates.load(Relaxed),
        }
    }
}

/// Handle from a C pointer.
///
/// # Safety
/// `c` is NULL or a pointer [`dta_collector_open`] returned and not yet closed, used by one
/// thread at a time.
pub(crate) unsafe fn handle<'a>(c: *mut DtaCollector) -> Result<&'a mut DtaCollector> {
    non_null(c, "collector")?;
    // SAFETY: the caller's contract.
    Ok(unsafe { &mut *c })
}

/// Open the collector of the configuration at `config_toml_path` (a `dta.toml`): create or
/// reopen its stores' region files and a co-located translator over them. `*out` is set on
/// success. The handle holds the region directory's collector and writer locks until closed.
///
/// # Safety
/// `config_toml_path` is a NUL-terminated string; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn dta_collector_open(
    config_toml_path: *const c_char,
    out: *mut *mut DtaCollector,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { dta_collector_open_dir(config_toml_path, std::ptr::null(), out) }
}

/// As [`dta_collector_open`], with the regions in `region_dir` instead of the configuration's
/// `region_dir` (NULL: the configuration's), as `dta collector --region-dir` does.
///
/// # Safety
/// `config_toml_path` a NUL-terminated string; `region_dir` NULL or one; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn dta_collector_open_dir(
    config_toml_path: *const c_char,
    region_dir: *const c_char,
    out: *mut *mut DtaCollector,
) -> c_int {
    guard("dta_collector_open", || {
        non_null(out, "out")?;
        // SAFETY: the caller's contract.
        let path = unsafe { string(config_toml_path, "config_toml_path") }?;
        let dir = if region_dir.is_null() {
            None
        } else {
            // SAFETY: the caller's contract.
            Some(unsafe { string(region_dir, "region_dir") }?)
        };
        let c = DtaCollector::open(path, dir)
            .map_err(|e| Error::new(e.code, format!("{path}: {}", e.msg)))?;
        // SAFETY: checked non-NULL above; writable by the caller's contract.
        unsafe { put(out, Box::into_raw(Box::new(c)), "out") }
    })
}

/// Apply one native (or prototype) DTA datagram, exactly the UDP payload a reporter sends, as
/// received from 127.0.0.1. `DTA_E_REJECTED` if the translator rejected it or some of its
/// reports (the others are applied; every reject is counted in [`dta_collector_stats`]).
///
/// # Safety
/// `c` is an open handle; `datagram` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn dta_collector_ingest(
    c: *mut DtaCollector,
    datagram: *const u8,
    len: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        dta_collector_ingest_from(
            c,
            datagram,
            len,
            u32::from(Ipv4Addr::LOCALHOST),
            dta_wire::NACK_PORT,
        )
    }
}

/// As [`dta_collector_ingest`], received from `src_ipv4:src_port` (host byte order): the
/// translator's allow-lists and sequence spaces see that source.
///
/// # Safety
/// As [`dta_collector_ingest`].
#[no_mangle]
pub unsafe extern "C" fn dta_collector_ingest_from(
    c: *mut DtaCollector,
    datagram: *const u8,
    len: usize,
    src_ipv4: u32,
    src_port: u16,
) -> c_int {
    guard("dta_collector_ingest", || {
        // SAFETY: the caller's contract.
        let (c, d) = unsafe { (handle(c)?, crate::bytes(datagram, len, "datagram")?) };
        if d.is_empty() {
            return Err(Error::new(Code::Invalid, "empty datagram"));
        }
        // What the UDP translator would see: its receive buffers hold MAX_DATAGRAM bytes, the
        // rest of a longer datagram is cut off (and the parser rejects what remains).
        let d = &d[..d.len().min(dta_wire::MAX_DATAGRAM)];
        c.ingest(d, SocketAddr::from((Ipv4Addr::from(src_ipv4), src_port)))
    })
}

/// Run the translator's timers against the wall clock: write Append batches older than
/// `append_flush_ms`, Postcarding paths older than `postcard_timeout_ms`, and so on. Call it
/// now and then while ingesting; [`dta_collector_flush`] writes everything regardless of age.
///
/// # Safety
/// `c` is an open handle.
#[no_mangle]
pub unsafe extern "C" fn dta_collector_tick(c: *mut DtaCollector) -> c_int {
    guard("dta_collector_tick", || {
        // SAFETY: the caller's contract.
        unsafe { handle(c) }?.tick();
        Ok(())
    })
}

/// Write out everything the translator holds (partial Append batches and Postcarding paths,
/// Sketch-Merge columns not yet merged from every reporter) and flush the region files. Query
/// after this to see every report ingested so far.
///
/// # Safety
/// `c` is an open handle.
#[no_mangle]
pub unsafe extern "C" fn dta_collector_flush(c: *mut DtaCollector) -> c_int {
    guard("dta_collector_flush", || {
        // SAFETY: the caller's contract.
        unsafe { handle(c) }?.flush()
    })
}

/// The translator's counters.
///
/// # Safety
/// `c` is an open handle; `out` is valid for a write of `dta_stats`.
#[no_mangle]
pub unsafe extern "C" fn dta_collector_stats(c: *mut DtaCollector, out: *mut DtaStats) -> c_int {
    guard("dta_collector_stats", || {
        // SAFETY: the caller's contract.
        let s = unsafe { handle(c) }?.stats();
        // SAFETY: the caller's contract.
        unsafe { put(out, s, "out") }
    })
}

/// The name of reject reason `i` (0..`DTA_REJECT_REASONS`), as the translator's counters and
/// metrics name it; NULL for an `i` out of range.
#[no_mangle]
pub extern "C" fn dta_reject_reason_name(i: usize) -> *const c_char {
    REASON_NAMES.get(i).map_or(std::ptr::null(), |n| n.as_ptr())
}

/// [`Reason::name`] of each reason, NUL-terminated, in counter order.
static REASON_NAMES: std::sync::LazyLock<Vec<std::ffi::CString>> = std::sync::LazyLock::new(|| {
    Reason::ALL
        .iter()
        .map(|r| std::ffi::CString::new(r.name()).expect("reason names have no NUL"))
        .collect()
});

/// Flush (as [`dta_collector_flush`]) and close the handle, releasing its locks. NULL is
/// accepted and ignored. Returns the flush's status; the handle is freed either way.
///
/// # Safety
/// `c` is NULL or an open handle, not used again after this call.
#[no_mangle]
pub unsafe extern "C" fn dta_collector_close(c: *mut DtaCollector) -> c_int {
    if c.is_null() {
        return Code::Ok as c_int;
    }
    // SAFETY: the caller's contract: an open handle, given up here.
    let mut b = unsafe { Box::from_raw(c) };
    let rc = guard("dta_collector_close", || b.flush());
    // Dropping unmaps the regions; a panic there must not cross the boundary either.
    let _ = std::panic::catch_unwind(AssertUnwindSafe(move || drop(b)));
    rc
}

use std::panic::AssertUnwindSafe;

/// `Code` of a status, for the tests.
#[cfg(test)]
pub(crate) fn code_of(rc: c_int) -> Code {
    *Code::ALL
        .iter()
        .find(|c| **c as c_int == rc)
        .expect("a known code")
}
