//! A reporter's ApproSync sketch ([InvisiFlow §6.1] "Sources") for C: `dta_reporter::ApproSync`
//! behind an opaque handle. The program counts with [`dta_approsync_update`], takes each due
//! column with [`dta_approsync_next_due`] (index and wire bytes, ready for
//! `dta_encode_sketch_column`) until `DTA_E_EMPTY`, and sends them; a full resync is
//! [`dta_approsync_mark_all_due`] followed by the same loop.

use std::ffi::c_int;

use dta_reporter::ApproSync;

use crate::{bytes, bytes_mut, guard, non_null, put, Code, Error, Result};

/// The opaque `dta_approsync` of dta.h.
pub struct DtaApproSync {
    inner: ApproSync,
}

/// The handle behind `s`, or [`Code::Null`].
///
/// # Safety
/// `s` is NULL or a handle from [`dta_approsync_new`] not yet freed.
unsafe fn sketch<'a>(s: *mut DtaApproSync) -> Result<&'a mut ApproSync> {
    non_null(s, "sketch")?;
    // SAFETY: non-NULL and live by the caller's contract.
    Ok(unsafe { &mut (*s).inner })
}

/// A zeroed `rows` x `columns` Count-Min (rows 1..=16, columns a power of two up to 65536: the
/// store's shape) synced as sketch `sketch_id`, epoch `epoch`, with relative divergence
/// threshold `theta` (finite, >= 0). Free it with [`dta_approsync_free`].
///
/// # Safety
/// `out` writable.
#[no_mangle]
pub unsafe extern "C" fn dta_approsync_new(
    rows: u32,
    columns: u32,
    theta: f64,
    sketch_id: u16,
    epoch: u32,
    out: *mut *mut DtaApproSync,
) -> c_int {
    guard("dta_approsync_new", || {
        let inner = ApproSync::new(rows, columns, theta, sketch_id, epoch)
            .map_err(|e| Error::new(Code::Invalid, e.to_string()))?;
        // SAFETY: the caller's contract.
        unsafe { put(out, Box::into_raw(Box::new(DtaApproSync { inner })), "out") }
    })
}

/// Count `inc` for `key` in every row; `*newly_due` (if not NULL) is 1 when this made a column
/// due (a counter grew by `theta` of its last-sent value, and by at least 1), else 0.
///
/// # Safety
/// `s` a live handle; `key` `key_len` readable bytes; `newly_due` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dta_approsync_update(
    s: *mut DtaApproSync,
    key: *const u8,
    key_len: usize,
    inc: u32,
    newly_due: *mut c_int,
) -> c_int {
    guard("dta_approsync_update", || {
        // SAFETY: the caller's contract.
        let (s, key) = unsafe { (sketch(s)?, bytes(key, key_len, "key")?) };
        let due = s.update(key, inc);
        if !newly_due.is_null() {
            // SAFETY: non-NULL and writable by the caller's contract.
            unsafe { put(newly_due, c_int::from(due), "newly_due") }?;
        }
        Ok(())
    })
}

/// Columns due for a sync, into `*due`.
///
/// # Safety
/// `s` a live handle; `due` writable.
#[no_mangle]
pub unsafe extern "C" fn dta_approsync_due(s: *mut DtaApproSync, due: *mut usize) -> c_int {
    guard("dta_approsync_due", || {
        // SAFETY: the caller's contract.
        let n = unsafe { sketch(s) }?.due();
        // SAFETY: the caller's contract.
        unsafe { put(due, n, "due") }
    })
}

/// Take the next due column: its index into `*column`, its wire bytes (`rows` big-endian u32
/// counters, cumulative) into `data[0..cap)`, their length into `*len_out`; the column then
/// counts as sent. `DTA_E_EMPTY` when no column is due; `DTA_E_NO_SPACE` (the column stays due)
/// when `cap` is below `rows x 4`.
///
/// # Safety
/// `s` a live handle; `column`, `len_out` writable; `data` `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn dta_approsync_next_due(
    s: *mut DtaApproSync,
    column: *mut u16,
    data: *mut u8,
    cap: usize,
    len_out: *mut usize,
) -> c_int {
    guard("dta_approsync_next_due", || {
        // SAFETY: the caller's contract.
        let (s, out) = unsafe { (sketch(s)?, bytes_mut(data, cap, "data")?) };
        non_null(column, "column")?;
        non_null(len_out, "len_out")?;
        let need = s.sketch().rows() as usize * 4;
        if s.due() > 0 && cap < need {
            return Err(Error::new(
                Code::NoSpace,
                format!("a column is {need} bytes, the buffer {cap}"),
            ));
        }
        let (c, wire) = s
            .next_due()
            .ok_or_else(|| Error::new(Code::Empty, "no column is due"))?;
        out[..wire.len()].copy_from_slice(wire);
        // SAFETY: the caller's contract (checked non-NULL above).
        unsafe {
            put(column, c, "column")?;
            put(len_out, need, "len_out")
        }
    })
}

/// Make every column due: the next columns taken are a full resync (heals every loss so far).
///
/// # Safety
/// `s` a live handle.
#[no_mangle]
pub unsafe extern "C" fn dta_approsync_mark_all_due(s: *mut DtaApproSync) -> c_int {
    guard("dta_approsync_mark_all_due", || {
        // SAFETY: the caller's contract.
        unsafe { sketch(s) }?.mark_all_due();
        Ok(())
    })
}

/// The local sketch's Count-Min estimate of `key` (what the store answers once every due column
/// has arrived).
///
/// # Safety
/// `s` a live handle; `key` `key_len` readable bytes; `estimate` writable.
#[no_mangle]
pub unsafe extern "C" fn dta_approsync_estimate(
    s: *mut DtaApproSync,
    key: *const u8,
    key_len: usize,
    estimate: *mut u64,
) -> c_int {
    guard("dta_approsync_estimate", || {
        // SAFETY: the caller's contract.
        let (s, key) = unsafe { (sketch(s)?, bytes(key, key_len, "key")?) };
        let e = s.sketch().estimate(key);
        // SAFETY: the caller's contract.
        unsafe { put(estimate, e, "estimate") }
    })
}

/// Start epoch `epoch` from an empty sketch.
///
/// # Safety
/// `s` a live handle.
#[no_mangle]
pub unsafe extern "C" fn dta_approsync_next_epoch(s: *mut DtaApproSync, epoch: u32) -> c_int {
    guard("dta_approsync_next_epoch", || {
        // SAFETY: the caller's contract.
        unsafe { sketch(s) }?.next_epoch(epoch);
        Ok(())
    })
}

/// Free a handle (NULL is ignored).
///
/// # Safety
/// `s` NULL or a live handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn dta_approsync_free(s: *mut DtaApproSync) {
    if !s.is_null() {
        // SAFETY: the caller's contract: a live handle, given up here.
        drop(unsafe { Box::from_raw(s) });
    }
}
