//! Queries: the functions `dta query` answers with (`dta_collector::query`), over the handle's
//! stores. Each answers from the regions as they are; [`crate::dta_collector_flush`] first to
//! see reports the translator still holds.

use std::ffi::{c_char, c_int};

use dta_collector::query::{self, QueryError};
use dta_store::{hash, HashScheme};
use dta_store::{PostcardingLayout, Region, ValueTable};

use crate::handle::{handle, DtaCollector};
use crate::{guard, put, string, Code, Error, Result};

fn query_error(e: QueryError) -> Error {
    let code = match &e {
        QueryError::WrongKind { .. } => Code::WrongKind,
        QueryError::BadKey { .. } | QueryError::Invalid(_) => Code::Invalid,
        QueryError::Store(_) => Code::Io,
        QueryError::NotMerged(_) => Code::NotMerged,
    };
    Error::new(code, e.to_string())
}

impl DtaCollector {
    /// The region of store `name`, checked whole.
    fn region(&self, name: &str) -> Result<&Region> {
        match self.collector.store(name) {
            Ok(s) => Ok(&s.region),
            Err(dta_collector::CollectorError::NoSuchStore { .. }) => {
                let names: Vec<&str> = self
                    .collector
                    .stores()
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect();
                Err(Error::new(
                    Code::UnknownStore,
                    format!("no store named {name:?} (stores: {})", names.join(", ")),
                ))
            }
            Err(e) => Err(Error::new(Code::Io, e.to_string())),
        }
    }

    /// An answer read from `region`, unless the region was found lost meanwhile.
    fn answered<T>(region: &Region, r: std::result::Result<T, QueryError>) -> Result<T> {
        region
            .check()
            .map_err(|e| Error::new(Code::Io, e.to_string()))?;
        r.map_err(query_error)
    }

    /// The Postcarding lookup table of store `name`, over the store's configured value set
    /// (else [`dta_wire::DEFAULT_POSTCARD_VALUES`], as `dta query postcard`), built once.
    fn value_table(&mut self, name: &str) -> Result<()> {
        if self.value_tables.contains_key(name) {
            return Ok(());
        }
        let region = self.region(name)?;
        let layout = PostcardingLayout::new(region.header()).map_err(|e| {
            if region.header().kind != dta_store::StoreKind::Postcarding {
                Error::new(
                    Code::WrongKind,
                    format!(
                        "store {name:?} is a {:?} store, not a Postcarding store",
                        region.header().kind
                    ),
                )
            } else {
                Error::new(Code::Io, e.to_string())
            }
        })?;
        let values = self
            .collector
            .stores()
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.config.as_ref())
            .and_then(|c| c.values)
            .unwrap_or(dta_wire::DEFAULT_POSTCARD_VALUES);
        let table = ValueTable::range(&layout, values)
            .map_err(|e| Error::new(Code::Invalid, e.to_string()))?;
        self.value_tables.insert(name.to_owned(), (layout, table));
        Ok(())
    }
}

fn status_error(status: &str, store: &str, key: &[u8]) -> Error {
    let code = if status == "ambiguous" {
        Code::Ambiguous
    } else {
        Code::Empty
    };
    Error::new(
        code,
        format!(
            "store {store:?}, key {}: {status} (the stored copies {})",
            hex::encode(key),
            if code == Code::Ambiguous {
                "disagree"
            } else {
                "hold nothing for the key"
            }
        ),
    )
}

/// Key-Write query ([DTA A.1]): the value stored for `key`, by plurality vote over the store's N
/// slots with `threshold` (>= 1) agreeing copies, into `data_out[..cap]` (its length into
/// `*data_len`). `DTA_E_EMPTY` / `DTA_E_AMBIGUOUS` when there is no answer.
///
/// # Safety
/// `c` an open handle; `store` a NUL-terminated string; `key` `key_len` readable bytes;
/// `data_out` `cap` writable bytes; `data_len` writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn dta_query_key_write(
    c: *mut DtaCollector,
    store: *const c_char,
    key: *const u8,
    key_len: usize,
    threshold: u8,
    data_out: *mut u8,
    cap: usize,
    data_len: *mut usize,
) -> c_int {
    guard("dta_query_key_write", || {
        // SAFETY: the caller's contract.
        let (c, name, key) = unsafe {
            (
                handle(c)?,
                string(store, "store")?,
                crate::bytes(key, key_len, "key")?,
            )
        };
        let region = c.region(name)?;
        let r = DtaCollector::answered(region, query::key_write(region, key, None, threshold))?;
        let Some(data) = r.data.as_deref().filter(|_| r.status == "found") else {
            return Err(status_error(r.status, name, key));
        };
        let data = hex::decode(data).map_err(|e| Error::new(Code::Internal, e.to_string()))?;
        // SAFETY: the caller's contract.
        let out = unsafe { crate::bytes_mut(data_out, cap, "data_out") }?;
        let dst = out.get_mut(..data.len()).ok_or_else(|| {
            Error::new(
                Code::NoSpace,
                format!("{} data bytes, the buffer holds {cap}", data.len()),
            )
        })?;
        dst.copy_from_slice(&data);
        // SAFETY: the caller's contract.
        unsafe { put(data_len, data.len(), "data_len") }
    })
}

/// Key-Increment query ([DTA A.4]): `key`'s count-min estimate over the store's N counters
/// (never below the true count) into `*count`.
///
/// # Safety
/// `c` an open handle; `store` a NUL-terminated string; `key` `key_len` readable bytes;
/// `count` writable.
#[no_mangle]
pub unsafe extern "C" fn dta_query_key_increment(
    c: *mut DtaCollector,
    store: *const c_char,
    key: *const u8,
    key_len: usize,
    count: *mut u64,
) -> c_int {
    guard("dta_query_key_increment", || {
        // SAFETY: the caller's contract.
        let (c, name, key) = unsafe {
            (
                handle(c)?,
                string(store, "store")?,
                crate::bytes(key, key_len, "key")?,
            )
        };
        let region = c.region(name)?;
        let r = DtaCollector::answered(region, query::key_increment(region, key, None))?;
        // SAFETY: the caller's contract.
        unsafe { put(count, r.count, "count") }
    })
}

/// Key-Increment query over the time windows `window` selects (`"current"`, `"all"`,
/// `"last:5m"`, `"at:UNIX_MS"`; NULL: the current window of a windowed store, the one table of a
/// cumulative store), the sum of each window's count into `*count` and the number of windows it
/// covers into `*windows` (0 for a cumulative store). A window a store cannot answer (anything
/// but `"all"` on a cumulative store, a malformed one) is `DTA_E_INVALID` with the reason; a
/// `last:` longer than the store keeps is answered with what it holds and `DTA_E_PARTIAL`
/// (both outputs written; the message says what was asked and what is held).
///
/// # Safety
/// `c` an open handle; `store` and `window` (unless NULL) NUL-terminated strings; `key`
/// `key_len` readable bytes; `count` and `windows` writable.
#[no_mangle]
pub unsafe extern "C" fn dta_query_key_increment_window(
    c: *mut DtaCollector,
    store: *const c_char,
    key: *const u8,
    key_len: usize,
    window: *const c_char,
    count: *mut u64,
    windows: *mut u32,
) -> c_int {
    guard("dta_query_key_increment_window", || {
        // SAFETY: the caller's contract.
        let (c, name, key) = unsafe {
            (
                handle(c)?,
                string(store, "store")?,
                crate::bytes(key, key_len, "key")?,
            )
        };
        let window = if window.is_null() {
            None
        } else {
            // SAFETY: the caller's contract.
            let w = unsafe { string(window, "window")? };
            Some(
                dta_store::WindowSel::parse(w)
                    .map_err(|m| crate::Error::new(crate::Code::Invalid, m))?,
            )
        };
        let region = c.region(name)?;
        let r = DtaCollector::answered(region, query::key_increment_in(region, key, None, window))?;
        let n = r.windows.as_ref().map_or(0, |w| w.len() as u32);
        // SAFETY: the caller's contract.
        unsafe {
            put(count, r.count, "count")?;
            put(windows, n, "windows")?;
        }
        match r.coverage.note {
            Some(note) if !r.coverage.complete => {
                Err(crate::Error::new(crate::Code::Partial, note))
            }
            _ => Ok(()),
        }
    })
}

/// Postcarding query ([DTA §4] "Postcarding"): the per-hop values of flow `key`, hop 0 first,
/// into `path_out[..cap]` (the hop count into `*hops`), decoded over the store's value set.
/// `DTA_E_EMPTY` / `DTA_E_AMBIGUOUS` when there is no answer.
///
/// # Safety
/// `c` an open handle; `store` a NUL-terminated string; `key` `key_len` readable bytes;
/// `path_out` `cap` writable u32s; `hops` writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn dta_query_postcard_path(
    c: *mut DtaCollector,
    store: *const c_char,
    key: *const u8,
    key_len: usize,
    path_out: *mut u32,
    cap: usize,
    hops: *mut usize,
) -> c_int {
    guard("dta_query_postcard_path", || {
        // SAFETY: the caller's contract.
        let (c, name, key) = unsafe {
            (
                handle(c)?,
                string(store, "store")?,
                crate::bytes(key, key_len, "key")?,
            )
        };
        c.value_table(name)?;
        let region = c.region(name)?;
        let (layout, table) = &c.value_tables[name];
        let r = DtaCollector::answered(region, query::postcard_with(region, layout, table, key))?;
        if r.status != "found" {
            return Err(status_error(r.status, name, key));
        }
        if r.path.len() > cap {
            return Err(Error::new(
                Code::NoSpace,
                format!("a path of {} hops, the buffer holds {cap}", r.path.len()),
            ));
        }
        if !r.path.is_empty() {
            crate::non_null(path_out, "path_out")?;
            // SAFETY: `cap` >= len writable u32s by the caller's contract.
            unsafe { std::ptr::copy_nonoverlapping(r.path.as_ptr(), path_out, r.path.len()) };
        }
        // SAFETY: the caller's contract.
        unsafe { put(hops, r.path.len(), "hops") }
    })
}

/// What [`dta_query_append_read`] read (`dta_list_read` of dta.h).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct DtaListRead {
    /// Entries written to the buffer, oldest first.
    pub entries: usize,
    /// Bytes per entry (the store's `entry_len`).
    pub entry_len: usize,
    /// Where to resume: pass it back as `tail`.
    pub next_tail: u64,
    /// Entries overwritten before they could be read (the writer lapped the reader).
    pub missed: u64,
}

/// Tail value that starts an Append read at the oldest entry still held.
pub const OLDEST: u64 = u64::MAX;

/// Append query ([DTA A.3]): read entries of list `list` from absolute index `tail`
/// (`DTA_TAIL_OLDEST`: the oldest still held), as many as `buf[..cap]` holds, into `buf`
/// back to back; counts and the resume point into `*out`.
///
/// # Safety
/// `c` an open handle; `store` a NUL-terminated string; `buf` `cap` writable bytes; `out`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn dta_query_append_read(
    c: *mut DtaCollector,
    store: *const c_char,
    list: u32,
    tail: u64,
    buf: *mut u8,
    cap: usize,
    out: *mut DtaListRead,
) -> c_int {
    guard("dta_query_append_read", || {
        // SAFETY: the caller's contract.
        let (c, name) = unsafe { (handle(c)?, string(store, "store")?) };
        let region = c.region(name)?;
        let entry_len = match &region.header().spec {
            dta_store::StoreSpec::Append(s) => s.entry_len as usize,
            _ => {
                return Err(Error::new(
                    Code::WrongKind,
                    format!(
                        "store {name:?} is a {:?} store, not an Append store",
                        region.header().kind
                    ),
                ))
            }
        };
        let max = cap / entry_len;
        if max == 0 {
            return Err(Error::new(
                Code::NoSpace,
                format!("entries are {entry_len} bytes, the buffer holds {cap}"),
            ));
        }
        let tail = (tail != OLDEST).then_some(tail);
        let r = DtaCollector::answered(
            region,
            query::list(region, list, tail, max, query::raw_records),
        )?;
        // SAFETY: the caller's contract.
        let dst = unsafe { crate::bytes_mut(buf, cap, "buf") }?;
        for (i, e) in r.entries.iter().enumerate() {
            hex::decode_to_slice(e, &mut dst[i * entry_len..(i + 1) * entry_len])
                .map_err(|e| Error::new(Code::Internal, e.to_string()))?;
        }
        let read = DtaListRead {
            entries: r.entries.len(),
            entry_len,
            next_tail: r.next_tail,
            missed: r.missed,
        };
        // SAFETY: the caller's contract.
        unsafe { put(out, read, "out") }
    })
}

/// Sketch-Merge Count-Min query: `key`'s merged estimate (minimum over rows) into `*estimate`.
/// `DTA_E_NOT_MERGED` while a column the key reads has not been merged from the reporters.
///
/// # Safety
/// `c` an open handle; `store` a NUL-terminated string; `key` `key_len` readable bytes;
/// `estimate` writable.
#[no_mangle]
pub unsafe extern "C" fn dta_query_sketch(
    c: *mut DtaCollector,
    store: *const c_char,
    key: *const u8,
    key_len: usize,
    estimate: *mut u64,
) -> c_int {
    guard("dta_query_sketch", || {
        // SAFETY: the caller's contract.
        let (c, name, key) = unsafe {
            (
                handle(c)?,
                string(store, "store")?,
                crate::bytes(key, key_len, "key")?,
            )
        };
        let region = c.region(name)?;
        let r = DtaCollector::answered(region, query::sketch(region, Some(key)))?;
        let e = r.estimate.ok_or_else(|| {
            Error::new(
                Code::WrongKind,
                format!("store {name:?} is a {} sketch, not Count-Min", r.sketch),
            )
        })?;
        // SAFETY: the caller's contract.
        unsafe { put(estimate, e, "estimate") }
    })
}

/// Sketch-Merge HyperLogLog query: the estimated number of distinct keys into `*cardinality`.
///
/// # Safety
/// `c` an open handle; `store` a NUL-terminated string; `cardinality` writable.
#[no_mangle]
pub unsafe extern "C" fn dta_query_sketch_cardinality(
    c: *mut DtaCollector,
    store: *const c_char,
    cardinality: *mut f64,
) -> c_int {
    guard("dta_query_sketch_cardinality", || {
        // SAFETY: the caller's contract.
        let (c, name) = unsafe { (handle(c)?, string(store, "store")?) };
        let region = c.region(name)?;
        if let dta_store::StoreSpec::SketchMerge(spec) = &region.header().spec {
            if !matches!(spec.kind, dta_store::SketchKind::HyperLogLog { .. }) {
                return Err(Error::new(
                    Code::WrongKind,
                    format!("store {name:?} is a Count-Min sketch, not HyperLogLog"),
                ));
            }
        }
        let r = DtaCollector::answered(region, query::sketch(region, None))?;
        let v = r.cardinality.ok_or_else(|| {
            Error::new(
                Code::WrongKind,
                format!("store {name:?} is a {} sketch, not HyperLogLog", r.sketch),
            )
        })?;
        // SAFETY: the caller's contract.
        unsafe { put(cardinality, v, "cardinality") }
    })
}

/// The column row `row` of a Count-Min sketch of `columns` columns (a power of two, at most
/// 65536) gives `key`: the hash a Sketch-Merge store's query reads with, so that a reporter's
/// local sketch and the merged store agree on where each key counts.
///
/// # Safety
/// `key` `key_len` readable bytes; `column` writable.
#[no_mangle]
pub unsafe extern "C" fn dta_sketch_cm_column(
    key: *const u8,
    key_len: usize,
    row: u32,
    columns: u32,
    column: *mut u32,
) -> c_int {
    guard("dta_sketch_cm_column", || {
        // SAFETY: the caller's contract.
        let key = unsafe { crate::bytes(key, key_len, "key") }?;
        if !columns.is_power_of_two() || columns > 1 << 16 {
            return Err(Error::new(
                Code::Invalid,
                format!("columns {columns}: a power of two up to 65536"),
            ));
        }
        let row = u8::try_from(row)
            .map_err(|_| Error::new(Code::Invalid, format!("row {row}: 0..=255")))?;
        let col = hash::index(HashScheme::Native, key, row, u64::from(columns)) as u32;
        // SAFETY: the caller's contract.
        unsafe { put(column, col, "column") }
    })
}
