//! The C ABI of DTA (`libdta.so` / `libdta.a`, header `c/include/dta/dta.h`): a program written in
//! C or C++ (a simulator, a switch agent, a test harness) embeds a collector and its co-located
//! translator in its own process. [`dta_collector_open`] reads a `dta.toml` exactly as
//! `dta collector` does and creates (or reopens) the stores' region files, then builds the
//! shared-memory translator `dta translator` would run over them; [`dta_collector_ingest`] hands
//! it one native-protocol datagram, as if received over UDP, with the translator's validation and
//! reject counting ([`dta_collector_stats`]). The `dta_encode_*` functions build such datagrams
//! with the Rust reporter's encoder (`dta_wire::native::DatagramBuilder`), and the `dta_query_*`
//! functions answer with the query functions of `dta query` (`dta_collector::query`); the
//! `dta_approsync_*` functions keep a reporter's ApproSync sketch (`dta_reporter::ApproSync`). Every
//! function returns a status code (`DTA_E_*`, 0 on success) and leaves a message for
//! [`dta_last_error`]; nothing unwinds or aborts across the boundary. See docs/embedding.md.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::Instant;

mod approsync;
mod encode;
mod handle;
mod query;

pub use approsync::*;
pub use encode::*;
pub use handle::*;
pub use query::*;

/// Status codes (`enum dta_error` of dta.h). 0 is success; every error is negative and leaves a
/// message for [`dta_last_error`].
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Ok = 0,
    /// A required pointer is NULL.
    Null = -1,
    /// The configuration cannot be read or is invalid.
    Config = -2,
    /// The region directory or a region file cannot be created, opened or locked.
    Io = -3,
    /// The translator rejected the datagram, or some of its reports (counted by reason).
    Rejected = -4,
    /// An argument is out of range (key or data length, redundancy, priority, ...).
    Invalid = -5,
    /// The caller's buffer is too small.
    NoSpace = -6,
    /// No store of that name.
    UnknownStore = -7,
    /// The store is of another primitive than the query's.
    WrongKind = -8,
    /// Nothing is stored for the key (Key-Write, Postcarding: the slots are empty).
    Empty = -9,
    /// The stored copies disagree (Key-Write, Postcarding): no answer can be given.
    Ambiguous = -10,
    /// A Sketch-Merge query reads a column no merge has written yet.
    NotMerged = -11,
    /// An internal error was caught at the boundary (a bug: please report it).
    Internal = -12,
    /// The answer was written but covers only part of what was asked (a time range longer
    /// than the store keeps): [`dta_last_error`] says what was asked and what is held.
    Partial = -13,
}

impl Code {
    /// Every code, in value order.
    pub const ALL: [Code; 14] = [
        Code::Ok,
        Code::Null,
        Code::Config,
        Code::Io,
        Code::Rejected,
        Code::Invalid,
        Code::NoSpace,
        Code::UnknownStore,
        Code::WrongKind,
        Code::Empty,
        Code::Ambiguous,
        Code::NotMerged,
        Code::Internal,
        Code::Partial,
    ];

    /// The snake_case name [`dta_error_name`] returns.
    pub fn name(self) -> &'static CStr {
        match self {
            Code::Ok => c"ok",
            Code::Null => c"null_pointer",
            Code::Config => c"config",
            Code::Io => c"io",
            Code::Rejected => c"rejected",
            Code::Invalid => c"invalid_argument",
            Code::NoSpace => c"no_space",
            Code::UnknownStore => c"unknown_store",
            Code::WrongKind => c"wrong_kind",
            Code::Empty => c"empty",
            Code::Ambiguous => c"ambiguous",
            Code::NotMerged => c"not_merged",
            Code::Internal => c"internal",
            Code::Partial => c"partial",
        }
    }
}

/// An error crossing the boundary: its code and the message [`dta_last_error`] returns.
#[derive(Debug)]
pub struct Error {
    pub code: Code,
    pub msg: String,
}

impl Error {
    pub fn new(code: Code, msg: impl Into<String>) -> Error {
        Error {
            code,
            msg: msg.into(),
        }
    }
}

pub(crate) type Result<T> = std::result::Result<T, Error>;

thread_local! {
    /// The message of the thread's last failed call; `None` after a successful one (so that a
    /// successful call allocates nothing).
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn set_last_error(msg: Option<&str>) {
    // A NUL inside a message would cut it short in C: replace it.
    let c = msg.map(|m| CString::new(m.replace('\0', "\\0")).unwrap_or_default());
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Run `f` at the boundary: its error (or a caught panic) becomes a status code and the
/// thread's last error message; success clears the message.
pub(crate) fn guard(what: &str, f: impl FnOnce() -> Result<()>) -> c_int {
    let r = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let why = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(Error::new(Code::Internal, format!("internal error: {why}")))
    });
    match r {
        Ok(()) => {
            set_last_error(None);
            Code::Ok as c_int
        }
        Err(e) => {
            set_last_error(Some(&format!("{what}: {}", e.msg)));
            e.code as c_int
        }
    }
}

/// A required pointer argument, or [`Code::Null`] naming it.
pub(crate) fn non_null<T>(p: *const T, name: &str) -> Result<*const T> {
    if p.is_null() {
        Err(Error::new(Code::Null, format!("{name} is NULL")))
    } else {
        Ok(p)
    }
}

/// `len` bytes at `p` as a slice; `p` may be NULL only when `len` is 0.
///
/// # Safety
/// `p` points to `len` readable bytes (or `len` is 0).
pub(crate) unsafe fn bytes<'a>(p: *const u8, len: usize, name: &str) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    non_null(p, name)?;
    // SAFETY: the caller guarantees `len` readable bytes at the non-NULL `p`.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// A caller buffer of `cap` bytes as a mutable slice.
///
/// # Safety
/// `p` points to `cap` writable bytes (or `cap` is 0).
pub(crate) unsafe fn bytes_mut<'a>(p: *mut u8, cap: usize, name: &str) -> Result<&'a mut [u8]> {
    if cap == 0 {
        return Ok(&mut []);
    }
    non_null(p, name)?;
    // SAFETY: the caller guarantees `cap` writable bytes at the non-NULL `p`.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, cap) })
}

/// A NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
pub(crate) unsafe fn string<'a>(p: *const c_char, name: &str) -> Result<&'a str> {
    non_null(p, name)?;
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Error::new(Code::Invalid, format!("{name} is not UTF-8")))
}

/// Store `v` at `out` (checked non-NULL first).
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
pub(crate) unsafe fn put<T>(out: *mut T, v: T, name: &str) -> Result<()> {
    non_null(out, name)?;
    // SAFETY: non-NULL and writable by the caller's contract.
    unsafe { out.write(v) };
    Ok(())
}

/// The message of the last failed call on this thread ("" after a successful one). Valid until
/// the next call into the library on the same thread; never NULL.
#[no_mangle]
pub extern "C" fn dta_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_deref().map_or(c"".as_ptr(), CStr::as_ptr))
}

/// A status code's snake_case name ("ok", "rejected", ...; "unknown_code" for others).
#[no_mangle]
pub extern "C" fn dta_error_name(code: c_int) -> *const c_char {
    Code::ALL
        .iter()
        .find(|c| **c as c_int == code)
        .map_or(c"unknown_code".as_ptr(), |c| c.name().as_ptr())
}

pub(crate) fn now() -> Instant {
    Instant::now()
}

pub(crate) fn path_arg(p: &str) -> &Path {
    Path::new(p)
}

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod tests;
