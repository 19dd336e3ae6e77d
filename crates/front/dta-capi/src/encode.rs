//! Report builders: one native-protocol datagram holding one report, written into a caller
//! buffer by the Rust reporter's encoder ([`DatagramBuilder`]), so C and C++ code never encodes
//! by hand. The datagram is what a reporter sends over UDP and what
//! [`crate::dta_collector_ingest`] takes.

use std::ffi::c_int;

use dta_wire::native::DatagramBuilder;
use dta_wire::{Priority, Report};

use crate::{guard, non_null, put, Code, Error, Result};

/// The longest datagram an encoder writes (`DTA_MAX_ENCODED`): one report with the longest key
/// and data.
pub const MAX_ENCODED: usize = dta_wire::native::HEADER_LEN + dta_wire::native::MAX_REPORT_LEN;

/// The datagram header of a report (`dta_header` of dta.h).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DtaHeader {
    /// The reporter's id (a switch id, say); Sketch-Merge reporters are 0..the store's
    /// `reporters`.
    pub reporter_id: u32,
    /// The datagram's sequence number in the reporter's space (see docs/protocol.md).
    pub seq: u32,
    /// 0 low, 1 medium, 2 high ([DTA-draft §3.2]).
    pub priority: u8,
    /// Non-zero: the reporter keeps the datagram for retransmission and the translator applies
    /// it exactly once, NACKing gaps; zero: gaps are counted, never NACKed.
    pub retransmittable: u8,
    /// Non-zero: the report is written with immediate (the collector is notified).
    pub immediate: u8,
}

fn wire_error(e: dta_wire::Error) -> Error {
    match e {
        dta_wire::Error::Truncated => {
            Error::new(Code::NoSpace, "the buffer cannot hold the datagram")
        }
        e => Error::new(Code::Invalid, format!("{} ({})", e, e.reason())),
    }
}

/// Encode `report` under header `h` into `buf[..cap]`, its length into `*len_out`.
///
/// # Safety
/// `h` valid for a read; `buf` valid for `cap` writable bytes; `len_out` for a write.
unsafe fn encode(
    h: *const DtaHeader,
    report: impl FnOnce(bool) -> Result<Report<'static>>,
    buf: *mut u8,
    cap: usize,
    len_out: *mut usize,
) -> Result<()> {
    non_null(h, "header")?;
    non_null(len_out, "len_out")?;
    // SAFETY: non-NULL; readable by the caller's contract.
    let h = unsafe { *h };
    let priority = Priority::try_from(h.priority)
        .map_err(|_| Error::new(Code::Invalid, format!("priority {}: 0..=2", h.priority)))?;
    let report = report(h.immediate != 0)?;
    // SAFETY: the caller's contract.
    let out = unsafe { crate::bytes_mut(buf, cap, "buf") }?;
    let mut b = DatagramBuilder::new(out, priority, h.retransmittable != 0, h.reporter_id, h.seq)
        .map_err(wire_error)?;
    b.push(&report).map_err(wire_error)?;
    let n = b.finish();
    // SAFETY: checked non-NULL above.
    unsafe { put(len_out, n, "len_out") }
}

/// A borrowed input slice extended to `'static` for the duration of one encode call, which
/// never keeps it.
///
/// # Safety
/// `p` points to `len` readable bytes that outlive the call.
unsafe fn input(p: *const u8, len: usize, name: &str) -> Result<&'static [u8]> {
    // SAFETY: the caller's contract.
    unsafe { crate::bytes(p, len, name) }
}

fn redundancy(n: u8) -> Result<u8> {
    if (1..=dta_wire::MAX_REDUNDANCY).contains(&n) {
        Ok(n)
    } else {
        Err(Error::new(
            Code::Invalid,
            format!("redundancy {n}: 1..={}", dta_wire::MAX_REDUNDANCY),
        ))
    }
}

/// A Key-Write report ([DTA §4] "Key-Write"): store `data` (4..=64 bytes) under `key` (1..=16
/// bytes) in `redundancy` (1..=4) slots.
///
/// # Safety
/// Pointers valid for their lengths; `len_out` writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn dta_encode_key_write(
    h: *const DtaHeader,
    key: *const u8,
    key_len: usize,
    data: *const u8,
    data_len: usize,
    redundancy_n: u8,
    buf: *mut u8,
    cap: usize,
    len_out: *mut usize,
) -> c_int {
    guard("dta_encode_key_write", || {
        // SAFETY: the caller's contract.
        let (key, data) = unsafe { (input(key, key_len, "key")?, input(data, data_len, "data")?) };
        let redundancy = redundancy(redundancy_n)?;
        // SAFETY: the caller's contract.
        unsafe {
            encode(
                h,
                |immediate| {
                    Ok(Report::KeyWrite {
                        key,
                        data,
                        redundancy,
                        immediate,
                    })
                },
                buf,
                cap,
                len_out,
            )
        }
    })
}

/// A Key-Increment report ([DTA §4] "Key-Increment"): add `counter` to `redundancy` counters of
/// `key`; the redundancy must be the store's N.
///
/// # Safety
/// Pointers valid for their lengths; `len_out` writable.
#[no_mangle]
pub unsafe extern "C" fn dta_encode_key_increment(
    h: *const DtaHeader,
    key: *const u8,
    key_len: usize,
    counter: u64,
    redundancy_n: u8,
    buf: *mut u8,
    cap: usize,
    len_out: *mut usize,
) -> c_int {
    guard("dta_encode_key_increment", || {
        // SAFETY: the caller's contract.
        let key = unsafe { input(key, key_len, "key") }?;
        let redundancy = redundancy(redundancy_n)?;
        // SAFETY: the caller's contract.
        unsafe {
            encode(
                h,
                |immediate| {
                    Ok(Report::KeyIncrement {
                        key,
                        counter,
                        redundancy,
                        immediate,
                    })
                },
                buf,
                cap,
                len_out,
            )
        }
    })
}

/// A Postcarding report ([DTA §4] "Postcarding"): hop `hop` of flow `key` saw `value` (a switch
/// id below the store's `values`); `path_len` is the path's hop count when known, else 0.
///
/// # Safety
/// Pointers valid for their lengths; `len_out` writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn dta_encode_postcard(
    h: *const DtaHeader,
    key: *const u8,
    key_len: usize,
    hop: u8,
    path_len: u8,
    value: u32,
    buf: *mut u8,
    cap: usize,
    len_out: *mut usize,
) -> c_int {
    guard("dta_encode_postcard", || {
        // SAFETY: the caller's contract.
        let key = unsafe { input(key, key_len, "key") }?;
        // SAFETY: the caller's contract.
        unsafe {
            encode(
                h,
                |immediate| {
                    Ok(Report::Postcard {
                        key,
                        hop,
                        path_len,
                        value,
                        immediate,
                    })
                },
                buf,
                cap,
                len_out,
            )
        }
    })
}

/// An Append report ([DTA §4] "Append"): append `data` (the store's `entry_len` bytes) to list
/// `list_id`.
///
/// # Safety
/// Pointers valid for their lengths; `len_out` writable.
#[no_mangle]
pub unsafe extern "C" fn dta_encode_append(
    h: *const DtaHeader,
    list_id: u32,
    data: *const u8,
    data_len: usize,
    buf: *mut u8,
    cap: usize,
    len_out: *mut usize,
) -> c_int {
    guard("dta_encode_append", || {
        // SAFETY: the caller's contract.
        let data = unsafe { input(data, data_len, "data") }?;
        // SAFETY: the caller's contract.
        unsafe {
            encode(
                h,
                |immediate| {
                    Ok(Report::Append {
                        list_id,
                        data,
                        immediate,
                    })
                },
                buf,
                cap,
                len_out,
            )
        }
    })
}

/// A Sketch-Merge column ([DTA-draft §3.1]): column `column` of sketch `sketch_id` in epoch
/// `epoch`, as the reporter `h->reporter_id` holds it. Count-Min: `rows` big-endian u32
/// counters; HyperLogLog: `registers_per_column` u8 registers. A reporter sends its columns in
/// order, 0 first, within an epoch.
///
/// # Safety
/// Pointers valid for their lengths; `len_out` writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn dta_encode_sketch_column(
    h: *const DtaHeader,
    sketch_id: u16,
    column: u16,
    epoch: u32,
    data: *const u8,
    data_len: usize,
    buf: *mut u8,
    cap: usize,
    len_out: *mut usize,
) -> c_int {
    guard("dta_encode_sketch_column", || {
        // SAFETY: the caller's contract.
        let data = unsafe { input(data, data_len, "data") }?;
        // SAFETY: the caller's contract.
        unsafe {
            encode(
                h,
                |immediate| {
                    Ok(Report::SketchColumn {
                        sketch_id,
                        column,
                        epoch,
                        data,
                        immediate,
                    })
                },
                buf,
                cap,
                len_out,
            )
        }
    })
}

/// The header of native datagram `buf[..len]` (reporter id, sequence number, priority,
/// retransmittable; `immediate` is 0): what identifies a report on its way, e.g. for a
/// receiver logging which reports arrived. `DTA_E_INVALID`, naming the parser's reason, for a
/// buffer that is not a native report datagram.
///
/// # Safety
/// `buf` `len` readable bytes; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn dta_datagram_header(
    buf: *const u8,
    len: usize,
    out: *mut DtaHeader,
) -> c_int {
    guard("dta_datagram_header", || {
        // SAFETY: the caller's contract.
        let b = unsafe { crate::bytes(buf, len, "buf") }?;
        let p = dta_wire::native::Packet::new_checked(b).map_err(wire_error_parse)?;
        let h = dta_wire::native::HeaderRepr::parse(&p).map_err(wire_error_parse)?;
        if h.kind != dta_wire::native::Kind::Reports {
            return Err(Error::new(
                Code::Invalid,
                "not a report datagram (a NACK, notice or hello)",
            ));
        }
        let v = DtaHeader {
            reporter_id: h.reporter_id,
            seq: h.seq,
            priority: h.priority as u8,
            retransmittable: u8::from(h.retransmittable),
            immediate: 0,
        };
        // SAFETY: the caller's contract.
        unsafe { put(out, v, "out") }
    })
}

fn wire_error_parse(e: dta_wire::Error) -> Error {
    Error::new(Code::Invalid, format!("{} ({})", e, e.reason()))
}
