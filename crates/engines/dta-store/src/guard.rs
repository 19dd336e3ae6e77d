//! SIGBUS guard for region mappings: a region file truncated (or its filesystem shrunk) while it
//! is mapped must not kill the process.
//!
//! Touching a page of a shared file mapping that lies beyond the file's end raises SIGBUS. Any
//! process may truncate a region file (an operator, a second tool, a full tmpfs), so every
//! mapping made by [`crate::Region`] is registered here. A process-wide SIGBUS handler looks the
//! faulting address up among the registered mappings; for a fault inside one it maps anonymous
//! zero pages over the WHOLE mapping with `MAP_FIXED` (so the faulting access, and any later one,
//! completes and reads zeros), and marks the mapping lost. [`crate::Region::check`] and every
//! [`crate::RegionMem`] access then report the region as lost, so the collector drops it from
//! service with a message instead of answering from zeros. Faults outside every registered
//! mapping are passed to the previously installed handler (Rust's stack-overflow handler, or the
//! default action, which terminates the process as before).
//!
//! The handler may run at any instant on any thread, so the registry is a fixed array of atomics:
//! registering and looking up take no lock and allocate nothing.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Most mappings guarded at once in one process; a mapping beyond this works unguarded.
pub const MAX_GUARDED: usize = 1024;

struct Slot {
    /// Start of the mapping; 0 when the slot is free.
    start: AtomicUsize,
    /// Length of the mapping; 0 while the slot is being filled or emptied.
    len: AtomicUsize,
    /// Set by the handler when it replaced the mapping.
    lost: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    lost: AtomicBool::new(false),
};
static SLOTS: [Slot; MAX_GUARDED] = [FREE; MAX_GUARDED];

/// Flag of mappings that could not be registered (never set).
static NEVER_LOST: AtomicBool = AtomicBool::new(false);

/// The SIGBUS disposition found when the guard was installed.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// A registered mapping; unregistered on drop (before the mapping is unmapped).
#[derive(Debug)]
pub struct Guard {
    slot: Option<usize>,
}

impl Guard {
    /// Register the mapping `[start, start + len)`, installing the process-wide handler on first
    /// use. When every slot is taken (or the handler cannot be installed) the mapping is not
    /// guarded and [`Guard::is_guarded`] is false.
    pub fn register(start: *const u8, len: usize) -> Guard {
        if start.is_null() || len == 0 || !install() {
            return Guard { slot: None };
        }
        for (i, s) in SLOTS.iter().enumerate() {
            if s.start
                .compare_exchange(0, start as usize, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                s.lost.store(false, Ordering::Relaxed);
                s.len.store(len, Ordering::Release);
                return Guard { slot: Some(i) };
            }
        }
        Guard { slot: None }
    }

    /// Whether the mapping is registered with the handler.
    pub fn is_guarded(&self) -> bool {
        self.slot.is_some()
    }

    /// Whether a SIGBUS inside the mapping replaced it with zero pages.
    #[inline]
    pub fn is_lost(&self) -> bool {
        self.flag().load(Ordering::Acquire)
    }

    /// The mapping's lost flag, for checks on the data path (a relaxed load, no lock).
    pub fn flag(&self) -> &'static AtomicBool {
        match self.slot {
            Some(i) => &SLOTS[i].lost,
            None => &NEVER_LOST,
        }
    }

    /// Mark the mapping lost without a fault (its file was found shorter than the mapping).
    pub fn mark_lost(&self) {
        if let Some(i) = self.slot {
            SLOTS[i].lost.store(true, Ordering::Release);
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            SLOTS[i].len.store(0, Ordering::Release);
            SLOTS[i].start.store(0, Ordering::Release);
        }
    }
}

/// Install the handler once; false if that failed.
fn install() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        // SAFETY: plain sigaction calls on structs we own; the handler only uses atomics, mmap
        // and sigaction.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                return false;
            }
            let _ = PREVIOUS.set(old);
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = handler as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(libc::SIGBUS, &act, std::ptr::null_mut()) == 0
        }
    })
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    for s in SLOTS.iter() {
        let start = s.start.load(Ordering::Acquire);
        let len = s.len.load(Ordering::Acquire);
        if start == 0 || len == 0 || addr < start || addr - start >= len {
            continue;
        }
        // SAFETY: replaces only the registered mapping's own range, which the owning Region
        // keeps reserved until it unregisters; mmap is a plain system call.
        let p = unsafe {
            libc::mmap(
                start as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            s.lost.store(true, Ordering::Release);
            return;
        }
        break;
    }
    // Not ours (or the replacement failed): behave as if the guard were absent.
    // SAFETY: PREVIOUS was set before this handler was installed.
    unsafe { chain(sig, info, ctx) }
}

unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let prev = PREVIOUS.get();
    match prev {
        Some(p)
            if p.sa_sigaction != libc::SIG_DFL
                && p.sa_sigaction != libc::SIG_IGN
                && p.sa_flags & libc::SA_SIGINFO != 0 =>
        {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(p.sa_sigaction);
            f(sig, info, ctx);
        }
        Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(p.sa_sigaction);
            f(sig);
        }
        _ => {
            // Restore the default action and return: the access faults again and the process
            // terminates with SIGBUS, exactly as without the guard.
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(libc::SIGBUS, &act, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn truncated_file_under_a_registered_mapping_reads_zeros_and_is_flagged() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&[0xAB; 3 * 4096]).unwrap();
        let map = memmap2::MmapOptions::new().map_raw(&f).unwrap();
        let g = Guard::register(map.as_ptr(), map.len());
        assert!(g.is_guarded());
        // SAFETY: in bounds of the mapping.
        assert_eq!(unsafe { map.as_ptr().add(2 * 4096).read_volatile() }, 0xAB);
        assert!(!g.is_lost());
        f.set_len(4096).unwrap();
        // Beyond the new end of file: SIGBUS without the guard.
        // SAFETY: in bounds of the mapping; the guard turns the fault into zero pages.
        let v = unsafe { map.as_ptr().add(2 * 4096 + 8).read_volatile() };
        assert_eq!(v, 0);
        assert!(g.is_lost());
        // The whole mapping was replaced: writes complete too.
        // SAFETY: in bounds of the mapping, now anonymous memory.
        unsafe { map.as_mut_ptr().add(4096 * 2).write_volatile(7) };
        drop(g);
        drop(map);
    }

    #[test]
    fn region_truncated_while_mapped_is_reported_lost_not_a_crash() {
        use crate::{KeyWriteSpec, Region, SinkError, StoreError, StoreSpec};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("kw.region");
        let spec = StoreSpec::KeyWrite(KeyWriteSpec {
            slots: 1 << 12,
            key_len: 4,
            data_len: 4,
            hash: crate::HashScheme::Native,
            redundancy: crate::DEFAULT_REDUNDANCY,
        });
        let r = Region::create(&p, "kw", &spec, false).unwrap();
        let last = r.mem().len() - 8;
        r.mem().store_u64(last, 5).unwrap();
        r.check().unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(4096)
            .unwrap();
        // Found by the size check before any access faults.
        assert!(matches!(r.check(), Err(StoreError::RegionLost { .. })));
        assert_eq!(r.mem().load_u64(last), Err(SinkError::RegionLost));
        r.flush().unwrap();

        // Without a check first: the access itself faults, the guard absorbs it.
        let p2 = dir.path().join("kw2.region");
        let r2 = Region::create(&p2, "kw", &spec, false).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p2)
            .unwrap()
            .set_len(4096)
            .unwrap();
        let mut out = [0xFFu8; 16];
        // The first access either sees the flag (if set meanwhile) or faults into zero pages.
        let _ = r2.mem().read(last - 8, &mut out);
        assert!(r2.check().is_err());
        assert_eq!(r2.mem().read(0, &mut out), Err(SinkError::RegionLost));
    }

    #[test]
    fn slots_are_reused_after_drop() {
        let buf = [0u8; 64];
        let a = Guard::register(buf.as_ptr(), buf.len());
        let i = a.slot.unwrap();
        a.mark_lost();
        assert!(a.is_lost());
        drop(a);
        // Freed (another test may already have taken the slot for its own mapping).
        assert_ne!(
            SLOTS[i].start.load(Ordering::Relaxed),
            buf.as_ptr() as usize
        );
        let b = Guard::register(buf.as_ptr(), buf.len());
        assert!(b.is_guarded());
        assert!(!b.is_lost(), "a reused slot starts intact");
    }
}
