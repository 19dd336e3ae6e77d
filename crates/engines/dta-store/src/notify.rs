//! The notification ring: how a CPU learns that a flagged report's data arrived, in the
//! co-located (shared-memory) mode ([DTA §7] "Push notifications"; docs/architecture.md
//! "Push notifications").
//!
//! A file `notify.ring` in the region directory, mapped shared by the translator threads (the
//! writers) and any number of subscribers (readers, each with its own cursor). Every report
//! carrying the immediate flag, once its data is in the region, is announced by one slot: the
//! store, primitive, key (or list), how many flagged reports the write covered, and the time.
//! Writers claim a slot with an atomic add on `head`, fill it, then publish it by storing its
//! sequence number; a subscriber reads slots in order and sleeps on a futex word (shared, so
//! across processes) that writers bump and wake only while someone waits. A subscriber that
//! falls a whole ring behind skips what was overwritten and counts it (`missed`): the ring never
//! blocks the data path.
//!
//! Layout (little-endian; docs/regions.md):
//! - 0: magic `DTANOTF1` (8), version u32, slot length u32 (64), capacity u64 (a power of two)
//! - 64: `head` u64 (slots claimed); 128: `wake` u32 (futex word); 132: `waiters` u32
//! - 4096 + 64·i: slot i: `seq` u64 (index + 1 once written), `unix_ns` u64, `value` u64 (an
//!   Append's list, 0 otherwise), `reports` u32, `primitive` u8, `key_len` u8, `name_len` u8,
//!   pad u8, `key` [16], `name` [16] (the store's name, truncated)

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use memmap2::MmapRaw;

/// The ring's file name in the region directory.
pub const RING_FILE: &str = "notify.ring";
/// Slots of a ring created with the default size.
pub const DEFAULT_CAPACITY: u64 = 1 << 16;
/// Most slots of a ring (64 MiB).
pub const MAX_CAPACITY: u64 = 1 << 20;
const MAGIC: &[u8; 8] = b"DTANOTF1";
const VERSION: u32 = 1;
const SLOT: u64 = 64;
const DATA: u64 = 4096;
const HEAD: usize = 64;
const WAKE: usize = 128;
const WAITERS: usize = 132;
/// Longest key a slot holds.
pub const KEY: usize = 16;
/// Longest store name a slot holds (longer names are truncated).
pub const NAME: usize = 16;

/// Why a ring could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("notification ring {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("notification ring {path}: {why}")]
    Invalid { path: PathBuf, why: String },
}

/// One notification.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Notice {
    /// Position in the ring (0, 1, ...): tells notices apart and in order.
    pub seq: u64,
    /// The store written.
    pub store: String,
    /// The primitive's opcode ([`dta_wire::Opcode`] as a number); serialized by its name.
    #[serde(serialize_with = "serialize_primitive")]
    pub primitive: u8,
    /// The report's key (Key-Write, Key-Increment, Postcarding), hex; empty for Append.
    pub key: String,
    /// An Append's list; 0 otherwise.
    pub list: u64,
    /// Flagged reports the write covered (an Append batch or a path may hold several).
    pub reports: u32,
    /// When the data was in the region, nanoseconds since the Unix epoch.
    pub unix_ns: u64,
}

/// A notice's primitive as JSON, counters and spec vectors name it (`key_write`, ...); a number no
/// opcode has (a damaged ring) reads `opcode N`.
pub fn primitive_name(op: u8) -> std::borrow::Cow<'static, str> {
    match dta_wire::Opcode::try_from(op) {
        Ok(op) => op.name().into(),
        Err(_) => format!("opcode {op}").into(),
    }
}

fn serialize_primitive<S: serde::Serializer>(op: &u8, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&primitive_name(*op))
}

/// What a writer puts in a slot.
#[derive(Debug, Clone, Copy)]
pub struct Announce<'a> {
    pub store: &'a str,
    pub primitive: u8,
    pub key: &'a [u8],
    pub list: u64,
    pub reports: u32,
}

/// The 32-bit immediate data of the WRITE WITH IMMEDIATE that announces flagged reports over
/// RDMA (docs/rdma.md): store number (bits 0..8), primitive (8..16), flagged reports (16..32,
/// saturated).
pub fn immediate_data(store: usize, primitive: u8, reports: u32) -> u32 {
    (store.min(255) as u32) | (primitive as u32) << 8 | reports.min(0xffff) << 16
}

/// [`immediate_data`] back: (store, primitive, reports).
pub fn parse_immediate(imm: u32) -> (usize, u8, u32) {
    ((imm & 0xff) as usize, (imm >> 8) as u8, imm >> 16)
}

/// A mapped ring, for writing and reading.
pub struct NotifyRing {
    map: MmapRaw,
    capacity: u64,
    path: PathBuf,
    _file: File,
}

// SAFETY: every shared word is accessed atomically; slot bodies are written before their
// sequence number is published (Release) and read after it is seen (Acquire), then checked
// again.
unsafe impl Send for NotifyRing {}
unsafe impl Sync for NotifyRing {}

fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl NotifyRing {
    /// The ring of region directory `dir`, created (with `capacity` slots) if it does not
    /// exist. Creation is atomic: a complete file is linked into place, so a second process
    /// creating it at the same time opens the same ring.
    pub fn open_or_create(dir: &Path, capacity: u64) -> Result<NotifyRing, NotifyError> {
        let path = dir.join(RING_FILE);
        if !path.exists() {
            if !capacity.is_power_of_two() || !(2..=MAX_CAPACITY).contains(&capacity) {
                return Err(NotifyError::Invalid {
                    path,
                    why: format!("capacity {capacity}: a power of two in 2..={MAX_CAPACITY}"),
                });
            }
            let io = |source| NotifyError::Io {
                path: path.clone(),
                source,
            };
            let tmp = dir.join(format!(".{RING_FILE}.{}", std::process::id()));
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)
                .map_err(io)?;
            // Allocated for real, as regions are (crate::space): the ring cannot fault later.
            let sized = f
                .set_len(DATA + capacity * SLOT)
                .and_then(|()| crate::space::allocate(&f, DATA + capacity * SLOT));
            if let Err(e) = sized {
                let _ = std::fs::remove_file(&tmp);
                return Err(io(e));
            }
            let mut h = [0u8; 24];
            h[..8].copy_from_slice(MAGIC);
            h[8..12].copy_from_slice(&VERSION.to_le_bytes());
            h[12..16].copy_from_slice(&(SLOT as u32).to_le_bytes());
            h[16..24].copy_from_slice(&capacity.to_le_bytes());
            std::os::unix::fs::FileExt::write_all_at(&f, &h, 0).map_err(io)?;
            drop(f);
            let linked = std::fs::hard_link(&tmp, &path);
            let _ = std::fs::remove_file(&tmp);
            match linked {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(e)),
            }
        }
        NotifyRing::open(dir)
    }

    /// The existing ring of region directory `dir`, checked before it is mapped.
    pub fn open(dir: &Path) -> Result<NotifyRing, NotifyError> {
        let path = dir.join(RING_FILE);
        let io = |source| NotifyError::Io {
            path: path.clone(),
            source,
        };
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io)?;
        let mut h = [0u8; 24];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut h, 0).map_err(io)?;
        let invalid = |why: String| NotifyError::Invalid {
            path: path.clone(),
            why,
        };
        if &h[..8] != MAGIC {
            return Err(invalid("not a notification ring (bad magic)".into()));
        }
        let version = u32::from_le_bytes(h[8..12].try_into().unwrap());
        let slot = u32::from_le_bytes(h[12..16].try_into().unwrap());
        let capacity = u64::from_le_bytes(h[16..24].try_into().unwrap());
        if version != VERSION || slot as u64 != SLOT {
            return Err(invalid(format!(
                "version {version}, slot {slot}: this build reads version {VERSION}, slot {SLOT}"
            )));
        }
        if !capacity.is_power_of_two() || !(2..=MAX_CAPACITY).contains(&capacity) {
            return Err(invalid(format!("capacity {capacity}")));
        }
        let len = f.metadata().map_err(io)?.len();
        if len != DATA + capacity * SLOT {
            return Err(invalid(format!(
                "{len} bytes, {} expected for {capacity} slots",
                DATA + capacity * SLOT
            )));
        }
        let map = MmapRaw::map_raw(&f).map_err(io)?;
        Ok(NotifyRing {
            map,
            capacity,
            path,
            _file: f,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off % 8 == 0 && off + 8 <= self.map.len());
        // SAFETY: in bounds (checked size), 8-aligned (page-aligned map), shared memory
        // accessed only atomically.
        unsafe { &*(self.map.as_mut_ptr().add(off) as *const AtomicU64) }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        // SAFETY: as for `u64_at`.
        unsafe { &*(self.map.as_mut_ptr().add(off) as *const AtomicU32) }
    }

    fn slot(&self, i: u64) -> usize {
        (DATA + (i & (self.capacity - 1)) * SLOT) as usize
    }

    /// Slots claimed so far (the next notice's `seq`).
    pub fn head(&self) -> u64 {
        self.u64_at(HEAD).load(Ordering::Acquire)
    }

    /// Announce one write: claim a slot, fill it, publish it, and wake sleeping subscribers.
    /// Never blocks; no allocation.
    pub fn announce(&self, a: &Announce<'_>) {
        let i = self.u64_at(HEAD).fetch_add(1, Ordering::AcqRel);
        let s = self.slot(i);
        // Unpublish first: a reader that sees the old sequence number mid-write rejects it.
        self.u64_at(s).store(0, Ordering::Release);
        self.u64_at(s + 8).store(now_unix_ns(), Ordering::Relaxed);
        self.u64_at(s + 16).store(a.list, Ordering::Relaxed);
        let key_len = a.key.len().min(KEY);
        let name = a.store.as_bytes();
        let name_len = name.len().min(NAME);
        let word = a.reports as u64
            | (a.primitive as u64) << 32
            | (key_len as u64) << 40
            | (name_len as u64) << 48;
        self.u64_at(s + 24).store(word, Ordering::Relaxed);
        let mut kb = [0u8; KEY + NAME];
        kb[..key_len].copy_from_slice(&a.key[..key_len]);
        kb[KEY..KEY + name_len].copy_from_slice(&name[..name_len]);
        for (j, c) in kb.chunks(8).enumerate() {
            self.u64_at(s + 32 + 8 * j)
                .store(u64::from_le_bytes(c.try_into().unwrap()), Ordering::Relaxed);
        }
        self.u64_at(s).store(i + 1, Ordering::Release);
        self.u32_at(WAKE).fetch_add(1, Ordering::Release);
        if self.u32_at(WAITERS).load(Ordering::Acquire) > 0 {
            futex_wake(self.u32_at(WAKE));
        }
    }

    /// Announce the write that a WRITE WITH IMMEDIATE to store `store` completed: the
    /// immediate data ([`immediate_data`]) names the primitive and the flagged reports it
    /// covers. The one decoder of an immediate into a notice, for every RDMA receiver (the
    /// software responder, an RNIC's receive completions).
    pub fn announce_immediate(&self, store: &str, imm: u32) {
        let (_, primitive, reports) = parse_immediate(imm);
        self.announce(&Announce {
            store,
            primitive,
            key: &[],
            list: 0,
            reports,
        });
    }

    /// Read slot `i` if it still holds notice `i` (completely written and not overwritten).
    fn read(&self, i: u64) -> Option<Notice> {
        let s = self.slot(i);
        if self.u64_at(s).load(Ordering::Acquire) != i + 1 {
            return None;
        }
        let unix_ns = self.u64_at(s + 8).load(Ordering::Relaxed);
        let list = self.u64_at(s + 16).load(Ordering::Relaxed);
        let word = self.u64_at(s + 24).load(Ordering::Relaxed);
        let mut kb = [0u8; KEY + NAME];
        for j in 0..(KEY + NAME) / 8 {
            kb[8 * j..8 * j + 8].copy_from_slice(
                &self
                    .u64_at(s + 32 + 8 * j)
                    .load(Ordering::Relaxed)
                    .to_le_bytes(),
            );
        }
        std::sync::atomic::fence(Ordering::Acquire);
        if self.u64_at(s).load(Ordering::Relaxed) != i + 1 {
            return None;
        }
        let key_len = ((word >> 40) as u8 as usize).min(KEY);
        let name_len = ((word >> 48) as u8 as usize).min(NAME);
        Some(Notice {
            seq: i,
            store: String::from_utf8_lossy(&kb[KEY..KEY + name_len]).into_owned(),
            primitive: (word >> 32) as u8,
            key: kb[..key_len].iter().map(|b| format!("{b:02x}")).collect(),
            list,
            reports: word as u32,
            unix_ns,
        })
    }

    /// A subscriber's cursor, starting at the next notice.
    pub fn subscribe(&self) -> Cursor {
        Cursor {
            next: self.head(),
            missed: 0,
        }
    }

    /// The next notice for `cursor`, waiting at most `timeout` for one; `None` when none
    /// came.
    pub fn next(&self, cursor: &mut Cursor, timeout: Duration) -> Option<Notice> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            // The wake word is read before the head: a notice published after this read bumps
            // it, so the futex wait below returns at once instead of sleeping through it.
            let wake = self.u32_at(WAKE).load(Ordering::Acquire);
            let head = self.head();
            if head.saturating_sub(cursor.next) > self.capacity {
                let skip = head - self.capacity - cursor.next;
                cursor.missed += skip;
                cursor.next += skip;
            }
            let now = std::time::Instant::now();
            if cursor.next < head {
                if let Some(n) = self.read(cursor.next) {
                    cursor.next += 1;
                    return Some(n);
                }
                // Claimed but not yet published (a writer is filling it), or overwritten
                // meanwhile (the next pass skips it): look again shortly.
                if now >= deadline {
                    return None;
                }
                std::thread::yield_now();
                continue;
            }
            if now >= deadline {
                return None;
            }
            let waiters = self.u32_at(WAITERS);
            waiters.fetch_add(1, Ordering::AcqRel);
            futex_wait(self.u32_at(WAKE), wake, deadline - now);
            waiters.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// One subscriber's position in a ring ([`NotifyRing::subscribe`]).
#[derive(Debug, Clone, Copy)]
pub struct Cursor {
    next: u64,
    missed: u64,
}

impl Cursor {
    /// Notices lost because this subscriber fell a whole ring behind.
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// The `seq` of the next notice this cursor reads.
    pub fn position(&self) -> u64 {
        self.next
    }
}

/// Sleep while `word` holds `expected`, at most `timeout` (a shared futex: across processes).
fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT on a live, aligned u32 of a shared mapping, with a valid timespec.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wake every sleeper on `word`.
fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32 of a shared mapping.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_notice_names_its_primitive_and_a_damaged_one_says_so() {
        assert_eq!(primitive_name(1), "key_write");
        assert_eq!(primitive_name(5), "sketch_merge");
        assert_eq!(primitive_name(0), "opcode 0");
        assert_eq!(primitive_name(200), "opcode 200");
    }

    use super::*;

    fn announce(r: &NotifyRing, k: u32) {
        r.announce(&Announce {
            store: "kw",
            primitive: 1,
            key: &k.to_be_bytes(),
            list: 0,
            reports: 1,
        });
    }

    /// Two mappings of one ring (as two processes have): every notice reaches a subscriber
    /// once, in order; a subscriber a whole ring behind counts what it missed.
    #[test]
    fn every_notice_once_in_order_and_lapping_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let w = NotifyRing::open_or_create(dir.path(), 8).unwrap();
        let r = NotifyRing::open_or_create(dir.path(), 1024).unwrap();
        assert_eq!(r.capacity(), 8, "the existing ring is opened");
        let mut sub = r.subscribe();
        assert_eq!(r.next(&mut sub, Duration::from_millis(1)), None);
        for k in 0..5 {
            announce(&w, k);
        }
        for k in 0..5u32 {
            let n = r.next(&mut sub, Duration::from_millis(1)).unwrap();
            assert_eq!((n.seq, n.key.clone()), (k as u64, hex(k)));
            assert_eq!((n.store.as_str(), n.primitive, n.reports), ("kw", 1, 1));
        }
        for k in 5..25 {
            announce(&w, k);
        }
        let got: Vec<u64> = std::iter::from_fn(|| r.next(&mut sub, Duration::from_millis(1)))
            .map(|n| n.seq)
            .collect();
        assert_eq!(got, (17..25).collect::<Vec<_>>());
        assert_eq!(sub.missed(), 12);
    }

    fn hex(k: u32) -> String {
        k.to_be_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// A sleeping subscriber is woken by a writer on another thread.
    #[test]
    fn a_waiting_subscriber_is_woken() {
        let dir = tempfile::tempdir().unwrap();
        // Room for all 100: a subscriber descheduled while the writer runs ahead is not lapped
        // (what a lapped subscriber sees is tested on its own).
        let w = NotifyRing::open_or_create(dir.path(), 128).unwrap();
        let r = NotifyRing::open(dir.path()).unwrap();
        std::thread::scope(|s| {
            let mut sub = r.subscribe();
            let h = s.spawn(move || {
                (0..100)
                    .map(|_| r.next(&mut sub, Duration::from_secs(10)).map(|n| n.seq))
                    .collect::<Vec<_>>()
            });
            std::thread::sleep(Duration::from_millis(20));
            for k in 0..100 {
                announce(&w, k);
                if k % 10 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            let got = h.join().unwrap();
            assert_eq!(got, (0..100).map(Some).collect::<Vec<_>>());
        });
    }

    /// A file that is not a ring, or not whole, is refused before it is mapped.
    #[test]
    fn a_bad_ring_file_is_refused_with_a_message() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(RING_FILE),
            b"garbage that is not a ring.....",
        )
        .unwrap();
        let e = NotifyRing::open(dir.path()).err().unwrap().to_string();
        assert!(e.contains("bad magic"), "{e}");
        let _ = std::fs::remove_file(dir.path().join(RING_FILE));
        drop(NotifyRing::open_or_create(dir.path(), 16).unwrap());
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join(RING_FILE))
            .unwrap();
        f.set_len(DATA + 3 * SLOT).unwrap();
        let e = NotifyRing::open(dir.path()).err().unwrap().to_string();
        assert!(e.contains("expected for 16 slots"), "{e}");
        let e = NotifyRing::open_or_create(&dir.path().join("x"), 3)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("power of two"), "{e}");
    }
}
