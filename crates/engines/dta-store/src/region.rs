// Size: a region's file, mapping, header check, SIGBUS-guard registration and the atomic accessors
// every store uses belong to one type whose invariants (no `&mut [u8]` into shared memory) are
// argued once, here.
//! Regions: one file, a 4096-byte header page then the data area, mapped shared ([DTA §5.3]: the
//! collector hosts per-primitive memory structures the translator writes into). The data area is
//! reached only through [`RegionMem`], which bounds-checks every access and goes through raw
//! pointers and atomics — never a `&mut [u8]` — because other processes (and RDMA NICs) write the
//! same memory concurrently.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};

use memmap2::{Advice, MmapOptions, MmapRaw};

use crate::guard::Guard;
use crate::header::{field, Header, HEADER_LEN};
use crate::space::HUGETLBFS_MAGIC;
use crate::{SinkError, StoreError, StoreSpec};

/// Where a translated report's memory operations go: the seam between translator and memory
/// (`docs/architecture.md`). Offsets are relative to the region's data area.
pub trait MemSink {
    /// RDMA WRITE of `bytes` at `offset` in the region's data area.
    fn write(&mut self, offset: u64, bytes: &[u8]) -> Result<(), SinkError>;
    /// RDMA FETCH_ADD of `add` to the little-endian u64 at `offset` (8-byte aligned).
    fn fetch_add(&mut self, offset: u64, add: u64) -> Result<(), SinkError>;
    /// Add to the region's live counters ([`Tally`], header bytes 128..144, outside the CRC):
    /// `writes` slots, counters or chunks written and `added` to the Key-Increment total. A
    /// writer calls it once per batch it writes, not per report; an RDMA writer issues a
    /// FETCH_ADD on each counter that changes (`docs/regions.md` §1).
    fn count(&mut self, writes: u64, added: u64) -> Result<(), SinkError>;
}

/// A region's live counters, read from its header page ([`crate::header::field::TALLY`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Slots (Key-Write), counters (Key-Increment) or chunks (Postcarding) written: one per copy.
    pub writes: u64,
    /// Key-Increment: the sum of every counter value added (each report counted once, not per
    /// copy).
    pub added: u64,
}

impl<S: MemSink + ?Sized> MemSink for &mut S {
    fn write(&mut self, offset: u64, bytes: &[u8]) -> Result<(), SinkError> {
        (**self).write(offset, bytes)
    }
    fn fetch_add(&mut self, offset: u64, add: u64) -> Result<(), SinkError> {
        (**self).fetch_add(offset, add)
    }
    fn count(&mut self, writes: u64, added: u64) -> Result<(), SinkError> {
        (**self).count(writes, added)
    }
}

const HUGE_PAGE: u64 = 2 << 20;
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// A mapped region file.
pub struct Region {
    // Field order: `mem` points into `map`; `map` must outlive it (dropped after).
    mem: RegionMem,
    header: Header,
    path: PathBuf,
    huge: bool,
    pages: Pages,
    /// Unregistered on drop, before `map` is unmapped.
    guard: Guard,
    map: MmapRaw,
    /// False for a mapping with no file to msync (a BPF map, [`Region::from_fd`]).
    syncable: bool,
    _file: File,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("path", &self.path)
            .field("header", &self.header)
            .field("writable", &self.mem.writable)
            .field("huge_pages", &self.huge)
            .finish()
    }
}

fn fs_magic(file: &File) -> Option<i64> {
    use std::os::fd::AsRawFd;
    // SAFETY: fstatfs writes into the zeroed struct we own; the fd is valid for the call.
    unsafe {
        let mut s: libc::statfs = std::mem::zeroed();
        if libc::fstatfs(file.as_raw_fd(), &mut s) == 0 {
            #[allow(clippy::unnecessary_cast)]
            Some(s.f_type as i64)
        } else {
            None
        }
    }
}

/// Where a region is built before it is published as `path`: a hidden name in the same
/// directory (same filesystem, so publishing is a link) that directory listings skip.
fn partial_path(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}.partial"))
}

/// Publish the built file `partial` as `path` atomically and without replacing a file another
/// creator published meanwhile (a hard link fails on an existing name; a rename where the
/// filesystem has no links).
fn publish(partial: &Path, path: &Path) -> Result<(), StoreError> {
    match std::fs::hard_link(partial, path) {
        Ok(()) => std::fs::remove_file(partial).map_err(|e| StoreError::io(partial, e)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(StoreError::io(path, e)),
        Err(_) => std::fs::rename(partial, path).map_err(|e| StoreError::io(path, e)),
    }
}

/// The pages a region's data area is on, as best known when it was mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// 2 MiB pages of a hugetlbfs mount.
    Hugetlbfs,
    /// tmpfs with transparent huge pages for shared memory, and `MADV_HUGEPAGE` accepted.
    Transparent,
    /// 4 KiB pages, and why: every random write may take a page walk.
    Small(&'static str),
}

impl Pages {
    /// Whether these are huge pages.
    pub fn huge(&self) -> bool {
        !matches!(self, Pages::Small(_))
    }
}

impl std::fmt::Display for Pages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pages::Hugetlbfs => f.write_str("2 MiB pages (hugetlbfs)"),
            Pages::Transparent => f.write_str("2 MiB pages (transparent, as the kernel can)"),
            Pages::Small(why) => write!(f, "4 KiB pages: {why}"),
        }
    }
}

fn shmem_thp_enabled() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
        .map(|s| {
            ["[always]", "[within_size]", "[advise]", "[force]"]
                .iter()
                .any(|m| s.contains(m))
        })
        .unwrap_or(false)
}

impl Region {
    /// Create the region `path` for `spec`. If the file already holds a valid region with the same
    /// name and spec it is opened and its data kept (regions survive restarts). If it holds
    /// something else, this fails unless `force`, in which case the file is recreated (zeroed).
    pub fn create(
        path: &Path,
        name: &str,
        spec: &StoreSpec,
        force: bool,
    ) -> Result<Region, StoreError> {
        let header = Header::new(name, spec)?;
        if path.exists() {
            match Region::open(path) {
                Ok(r) if r.header.name == name && r.header.spec == *spec => return Ok(r),
                Ok(r) if !force => {
                    return Err(StoreError::SpecMismatch {
                        path: path.to_path_buf(),
                        existing_name: r.header.name.clone(),
                        existing: format!("{:?}", r.header.spec),
                    })
                }
                Err(e) if !force => return Err(e),
                _ => {}
            }
            std::fs::remove_file(path).map_err(|e| StoreError::io(path, e))?;
        }
        let no_space = |size: u64| StoreError::NoSpace {
            path: path.to_path_buf(),
            size,
            free: crate::space::free_bytes(path).unwrap_or(0),
        };
        let total = HEADER_LEN as u64 + header.data_len;
        // Refused before the file exists when it plainly cannot fit (hugetlbfs reports its
        // pool, which fallocate then reserves).
        if crate::space::free_bytes(path).is_ok_and(|free| free < total) {
            return Err(no_space(total));
        }
        // Built under a name no reader opens (not `*.region`) and published whole: a translator
        // or query that lists the directory meanwhile never maps a region without its header.
        let partial = partial_path(path);
        let _ = std::fs::remove_file(&partial); // left by a creator that died half-way
        let built = Region::build(&partial, path, &header, total);
        let published = built.and_then(|()| publish(&partial, path));
        if published.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        published?;
        Region::open(path)
    }

    /// Size, allocate and write the header of the new file `file_path` (`total` bytes); errors
    /// name `path`, the region it becomes.
    fn build(
        file_path: &Path,
        path: &Path,
        header: &Header,
        mut total: u64,
    ) -> Result<(), StoreError> {
        let no_space = |size: u64| StoreError::NoSpace {
            path: path.to_path_buf(),
            size,
            free: crate::space::free_bytes(path).unwrap_or(0),
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(file_path)
            .map_err(|e| StoreError::io(path, e))?;
        let hugetlbfs = fs_magic(&file) == Some(HUGETLBFS_MAGIC);
        if hugetlbfs {
            total = total.div_ceil(HUGE_PAGE) * HUGE_PAGE;
        }
        // Allocated for real: a region that cannot be backed is refused now, not lost at the
        // first write into a page the filesystem cannot give.
        let sized = file
            .set_len(total)
            .and_then(|()| crate::space::allocate(&file, total));
        if let Err(e) = sized {
            return Err(if crate::space::is_no_space(&e) {
                no_space(total)
            } else {
                StoreError::io(path, e)
            });
        }
        let map = MmapOptions::new()
            .map_raw(&file)
            .map_err(|e| StoreError::io(path, e))?;
        // Written through the mapping: hugetlbfs supports no write(2).
        let page = header.to_page();
        // SAFETY: the mapping is at least HEADER_LEN bytes long and we just created the file.
        unsafe { std::ptr::copy_nonoverlapping(page.as_ptr(), map.as_mut_ptr(), HEADER_LEN) };
        map.flush_range(0, HEADER_LEN)
            .map_err(|e| StoreError::io(path, e))
    }

    /// Open an existing region read-write.
    pub fn open(path: &Path) -> Result<Region, StoreError> {
        Region::open_inner(path, true)
    }

    /// Open an existing region read-only: every write through [`RegionMem`] fails with
    /// [`SinkError::ReadOnly`].
    pub fn open_read_only(path: &Path) -> Result<Region, StoreError> {
        Region::open_inner(path, false)
    }

    fn open_inner(path: &Path, writable: bool) -> Result<Region, StoreError> {
        if crate::bpffs::is_bpffs(path) {
            // A BPF array map pinned in bpffs (the XDP translator's stores, docs/xdp.md).
            let (fd, len) =
                crate::bpffs::open_pinned(path, writable).map_err(|e| StoreError::io(path, e))?;
            return Region::from_fd(fd, len, path, writable);
        }
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| StoreError::io(path, e))?;
        let file_len = file.metadata().map_err(|e| StoreError::io(path, e))?.len();
        // A region opened for writing (a restart, a file made by another tool) is allocated for
        // real too: refused now if the filesystem cannot back it.
        if writable && file_len > 0 {
            crate::space::allocate(&file, file_len).map_err(|e| {
                if crate::space::is_no_space(&e) {
                    StoreError::NoSpace {
                        path: path.to_path_buf(),
                        size: file_len,
                        free: crate::space::free_bytes(path).unwrap_or(0),
                    }
                } else {
                    StoreError::io(path, e)
                }
            })?;
        }
        Region::map_file(file, file_len, path, writable)
    }

    /// A region over the first `len` bytes of a shared, mappable descriptor that already holds a
    /// header page and data area, e.g. a `BPF_F_MMAPABLE` array map (dta-xdp). `path` only names
    /// it in messages. The header is validated as [`Region::open`] does; [`Region::flush`] is a
    /// no-op (there is no file to sync).
    pub fn from_fd(
        fd: std::os::fd::OwnedFd,
        len: u64,
        path: &Path,
        writable: bool,
    ) -> Result<Region, StoreError> {
        let mut r = Region::map_file(File::from(fd), len, path, writable)?;
        r.syncable = false;
        r.pages = Pages::Small("a BPF map (the kernel allocates its pages)");
        r.huge = false;
        Ok(r)
    }

    fn map_file(
        file: File,
        file_len: u64,
        path: &Path,
        writable: bool,
    ) -> Result<Region, StoreError> {
        if file_len < HEADER_LEN as u64 {
            return Err(StoreError::Truncated {
                file_len,
                needed: HEADER_LEN as u64,
            });
        }
        let len = usize::try_from(file_len)
            .map_err(|_| StoreError::BadGeometry("region larger than the address space".into()))?;
        let map = if writable {
            MmapOptions::new().len(len).map_raw(&file)
        } else {
            MmapOptions::new().len(len).map_raw_read_only(&file)
        }
        .map_err(|e| StoreError::io(path, e))?;
        if (map.len() as u64) < file_len {
            return Err(StoreError::Truncated {
                file_len: map.len() as u64,
                needed: file_len,
            });
        }
        let mut page = vec![0u8; HEADER_LEN];
        // SAFETY: the mapping is at least HEADER_LEN bytes (checked above).
        unsafe { std::ptr::copy_nonoverlapping(map.as_ptr(), page.as_mut_ptr(), HEADER_LEN) };
        let header = Header::parse(&page)?;
        let needed = header
            .data_offset
            .checked_add(header.data_len)
            .ok_or_else(|| StoreError::BadGeometry("data_offset + data_len overflows".into()))?;
        if file_len < needed {
            return Err(StoreError::Truncated { file_len, needed });
        }
        let magic = fs_magic(&file);
        let hugetlbfs = magic == Some(HUGETLBFS_MAGIC);
        let advised = header.data_len > 0
            && map
                .advise_range(
                    Advice::HugePage,
                    header.data_offset as usize,
                    header.data_len as usize,
                )
                .is_ok();
        let pages = if hugetlbfs {
            Pages::Hugetlbfs
        } else if magic != Some(TMPFS_MAGIC) {
            Pages::Small(
                "not on hugetlbfs or tmpfs (put region_dir on a hugetlbfs mount: \
                 scripts/hugepages.sh)",
            )
        } else if !shmem_thp_enabled() {
            Pages::Small(
                "tmpfs, and transparent huge pages for shared memory are off \
                 (/sys/kernel/mm/transparent_hugepage/shmem_enabled; or hugetlbfs: \
                 scripts/hugepages.sh)",
            )
        } else if !advised {
            Pages::Small("tmpfs, and madvise(MADV_HUGEPAGE) was refused")
        } else {
            Pages::Transparent
        };
        let huge = pages.huge();
        let guard = Guard::register(map.as_ptr(), map.len());
        let mem = RegionMem {
            lost: guard.flag(),
            // SAFETY: data_offset + data_len <= file_len <= map.len() (checked above).
            ptr: unsafe { map.as_mut_ptr().add(header.data_offset as usize) },
            len: header.data_len,
            // SAFETY: the mapping is at least HEADER_LEN bytes (checked above).
            tally: unsafe { map.as_mut_ptr().add(field::TALLY.start) },
            writable,
        };
        Ok(Region {
            mem,
            header,
            path: path.to_path_buf(),
            huge,
            pages,
            guard,
            map,
            syncable: true,
            _file: file,
        })
    }

    /// The parsed, validated header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The data area.
    pub fn mem(&self) -> &RegionMem {
        &self.mem
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_writable(&self) -> bool {
        self.mem.writable
    }

    /// Whether the data area is backed by huge pages, as best known: the file is on hugetlbfs,
    /// or on tmpfs with transparent huge pages enabled for shmem and `MADV_HUGEPAGE` accepted.
    pub fn huge_pages(&self) -> bool {
        self.huge
    }

    /// The pages the data area is on, and why not huge ones where it is not ([`Pages`]).
    pub fn pages(&self) -> Pages {
        self.pages
    }

    /// Whether the region is still backed by its whole file: an error once the file was found
    /// shorter than the header's geometry, or a SIGBUS on the mapping replaced it with zero pages
    /// ([`crate::guard`]). A lost region stays lost: every [`RegionMem`] access then fails with
    /// [`SinkError::RegionLost`], and it must be reopened once its file is repaired.
    pub fn check(&self) -> Result<(), StoreError> {
        let needed = self.header.data_offset + self.header.data_len;
        let short = self.syncable
            && !self.guard.is_lost()
            && matches!(self._file.metadata(), Ok(m) if m.len() < needed);
        if short {
            self.guard.mark_lost();
        }
        if short || self.guard.is_lost() {
            let why = if self.syncable {
                crate::space::lost_reason(&self.path, needed)
            } else {
                "a page of the mapping faulted".to_owned()
            };
            return Err(StoreError::RegionLost {
                path: self.path.clone(),
                why,
            });
        }
        Ok(())
    }

    /// msync the mapping to its file.
    pub fn flush(&self) -> Result<(), StoreError> {
        if !self.mem.writable || !self.syncable || self.guard.is_lost() {
            return Ok(());
        }
        self.map.flush().map_err(|e| StoreError::io(&self.path, e))
    }
}

/// A region's data area: bounds-checked reads, writes and atomics on shared memory.
///
/// An 8-byte-aligned write whose length is a multiple of 8 is performed as single atomic 8-byte
/// stores, and the matching reads as atomic 8-byte loads, so a reader never sees a torn 8-byte
/// word (a prototype Key-Write slot, an Append head). Other writes are plain copies.
pub struct RegionMem {
    /// The mapping's lost flag ([`crate::guard`]): set, every access fails.
    lost: &'static AtomicBool,
    ptr: *mut u8,
    len: u64,
    /// The header page's live counters ([`field::TALLY`]), 8-byte aligned.
    tally: *mut u8,
    writable: bool,
}

// SAFETY: RegionMem only hands out copies of the memory and performs atomic or raw-pointer
// accesses; the memory is shared with other processes anyway, so no Rust aliasing guarantee is
// claimed over it. The mapping outlives RegionMem (both are owned by Region).
unsafe impl Send for RegionMem {}
unsafe impl Sync for RegionMem {}

impl std::fmt::Debug for RegionMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegionMem")
            .field("len", &self.len)
            .field("writable", &self.writable)
            .finish()
    }
}

/// Store `bytes` at `p` (the data area's byte `offset`): 8-byte words as single release stores
/// where offset and length allow (a reader never sees part of a word), else a copy after a
/// release fence. The one store of [`RegionMem::write`] and [`RegionMem::write_at`].
///
/// # Safety
/// `p .. p + bytes.len()` lies inside the mapping.
#[inline(always)]
unsafe fn put(p: *mut u8, offset: u64, bytes: &[u8]) {
    if offset % 8 == 0 && bytes.len() % 8 == 0 {
        for (i, chunk) in bytes.chunks_exact(8).enumerate() {
            let w = u64::from_ne_bytes(chunk.try_into().unwrap_or([0; 8]));
            // SAFETY: in bounds (the caller) and 8-byte aligned.
            unsafe { AtomicU64::from_ptr(p.add(i * 8) as *mut u64) }.store(w, Ordering::Release);
        }
    } else {
        fence(Ordering::Release);
        // The short lengths entries and chunks have are copied inline, not by a call to memcpy.
        // SAFETY: in bounds (the caller); `bytes` is a caller buffer, not part of the mapping.
        unsafe {
            match bytes.len() {
                4 => copy_fixed::<4>(bytes, p),
                16 => copy_fixed::<16>(bytes, p),
                24 => copy_fixed::<24>(bytes, p),
                n => std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, n),
            }
        }
    }
}

/// Copy the `N` bytes of `bytes` (exactly `N` long) to `p`, unaligned.
///
/// # Safety
/// `p .. p + N` is writable and does not overlap `bytes`.
#[inline(always)]
unsafe fn copy_fixed<const N: usize>(bytes: &[u8], p: *mut u8) {
    let mut b = [0u8; N];
    b.copy_from_slice(bytes);
    // SAFETY: the caller's.
    unsafe { std::ptr::write_unaligned(p as *mut [u8; N], b) };
}

impl RegionMem {
    /// Bytes in the data area.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn check(&self, offset: u64, len: u64) -> Result<*mut u8, SinkError> {
        if self.lost.load(Ordering::Relaxed) {
            return Err(SinkError::RegionLost);
        }
        match offset.checked_add(len) {
            Some(end) if end <= self.len => {
                // SAFETY: offset + len <= self.len, the mapping's data-area length.
                Ok(unsafe { self.ptr.add(offset as usize) })
            }
            _ => Err(SinkError::OutOfBounds { offset, len }),
        }
    }

    /// Copy `out.len()` bytes at `offset` into `out`.
    #[inline]
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), SinkError> {
        let p = self.check(offset, out.len() as u64)?;
        if offset % 8 == 0 && out.len() % 8 == 0 {
            for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
                // SAFETY: in bounds and 8-byte aligned (the data area is page aligned).
                let w = unsafe { AtomicU64::from_ptr(p.add(i * 8) as *mut u64) }
                    .load(Ordering::Relaxed);
                chunk.copy_from_slice(&w.to_ne_bytes());
            }
        } else {
            // SAFETY: in bounds; `out` is our own buffer and cannot overlap the mapping.
            unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        }
        fence(Ordering::Acquire);
        Ok(())
    }

    /// Write `bytes` at `offset`. Out of bounds (or read-only) writes change nothing.
    #[inline]
    pub fn write(&self, offset: u64, bytes: &[u8]) -> Result<(), SinkError> {
        if !self.writable {
            return Err(SinkError::ReadOnly);
        }
        let p = self.check(offset, bytes.len() as u64)?;
        // SAFETY: `check` put `offset + bytes.len()` inside the data area.
        unsafe { put(p, offset, bytes) };
        Ok(())
    }

    /// [`Self::write`] of the same `bytes` at each of `offsets` (a Postcarding chunk's N
    /// copies): every offset is written, the first error returned.
    #[inline]
    pub fn write_at(&self, offsets: &[u64], bytes: &[u8]) -> Result<(), SinkError> {
        if !self.writable {
            return Err(SinkError::ReadOnly);
        }
        let mut res = Ok(());
        for &o in offsets {
            match self.check(o, bytes.len() as u64) {
                // SAFETY: `check` put `o + bytes.len()` inside the data area.
                Ok(p) => unsafe { put(p, o, bytes) },
                Err(e) => res = res.and(Err(e)),
            }
        }
        res
    }

    /// Prefetch for writing every 64-byte line of the `len` bytes at each of `offsets` (a
    /// Postcarding chunk's copies: up to 68 bytes, two or three lines).
    #[inline]
    pub fn prefetch_span_at(&self, offsets: &[u64], len: u64) {
        let write = prefetch_mode() == PrefetchMode::Write;
        for &o in offsets {
            let end = o.saturating_add(len).min(self.len);
            let mut line = o & !63;
            while line < end {
                // SAFETY: line < end <= len, inside the mapping.
                prefetch(write, unsafe { self.ptr.add(line as usize) });
                line += 64;
            }
        }
    }

    #[inline]
    fn atomic(&self, offset: u64) -> Result<&AtomicU64, SinkError> {
        if offset % 8 != 0 {
            return Err(SinkError::Misaligned { offset });
        }
        let p = self.check(offset, 8)?;
        // SAFETY: in bounds, aligned, and the mapping lives as long as `self`.
        Ok(unsafe { AtomicU64::from_ptr(p as *mut u64) })
    }

    /// Atomically load the little-endian u64 at `offset` (8-byte aligned).
    #[inline]
    pub fn load_u64(&self, offset: u64) -> Result<u64, SinkError> {
        Ok(u64::from_le(self.atomic(offset)?.load(Ordering::Acquire)))
    }

    /// Atomically store the little-endian u64 at `offset` (8-byte aligned).
    #[inline]
    pub fn store_u64(&self, offset: u64, v: u64) -> Result<(), SinkError> {
        if !self.writable {
            return Err(SinkError::ReadOnly);
        }
        self.atomic(offset)?.store(v.to_le(), Ordering::Release);
        Ok(())
    }

    /// Atomically replace the little-endian u64 at `offset` with `new` if it holds `current`
    /// (RDMA CMP_SWAP semantics): `Ok(Ok(current))` if it did, `Ok(Err(found))` if not.
    #[inline]
    pub fn compare_exchange_u64(
        &self,
        offset: u64,
        current: u64,
        new: u64,
    ) -> Result<Result<u64, u64>, SinkError> {
        if !self.writable {
            return Err(SinkError::ReadOnly);
        }
        Ok(self
            .atomic(offset)?
            .compare_exchange(
                current.to_le(),
                new.to_le(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .map(u64::from_le)
            .map_err(u64::from_le))
    }

    /// [`Self::store_u64`] of the same `v` at each of `offsets` (a report's N copies): the
    /// region's state checked once, then one aligned store per offset. Every offset is tried;
    /// the first error, if any, is returned.
    #[inline]
    pub fn store_u64_at(&self, offsets: &[u64], v: u64) -> Result<(), SinkError> {
        if !self.writable {
            return Err(SinkError::ReadOnly);
        }
        if self.lost.load(Ordering::Relaxed) {
            return Err(SinkError::RegionLost);
        }
        let mut res = Ok(());
        for &o in offsets {
            if o % 8 != 0 {
                res = res.and(Err(SinkError::Misaligned { offset: o }));
            } else if o >= self.len || self.len - o < 8 {
                res = res.and(Err(SinkError::OutOfBounds { offset: o, len: 8 }));
            } else {
                // SAFETY: o + 8 <= len and 8-byte aligned (the data area is page aligned).
                unsafe { AtomicU64::from_ptr(self.ptr.add(o as usize) as *mut u64) }
                    .store(v.to_le(), Ordering::Release);
            }
        }
        res
    }

    /// [`Self::fetch_add_u64`] of the same `add` at each of `offsets` (a Key-Increment report's
    /// N counters), as [`Self::store_u64_at`]: every offset tried, the first error returned.
    #[inline]
    pub fn fetch_add_u64_at(&self, offsets: &[u64], add: u64) -> Result<(), SinkError> {
        if !self.writable {
            return Err(SinkError::ReadOnly);
        }
        let mut res = Ok(());
        for &o in offsets {
            if let Err(e) = self.fetch_add_u64(o, add) {
                res = res.and(Err(e));
            }
        }
        res
    }

    /// [`Self::prefetch`] of each of `offsets` (the instruction chosen once for all).
    #[inline(always)]
    pub fn prefetch_at(&self, offsets: &[u64]) {
        let write = prefetch_mode() == PrefetchMode::Write;
        for &o in offsets {
            if o < self.len {
                // SAFETY: o < len, inside the mapping.
                prefetch(write, unsafe { self.ptr.add(o as usize) });
            }
        }
    }

    /// Atomically add `add` (wrapping) to the little-endian u64 at `offset`; returns the previous
    /// value. RDMA FETCH_ADD semantics.
    #[inline]
    pub fn fetch_add_u64(&self, offset: u64, add: u64) -> Result<u64, SinkError> {
        if !self.writable {
            return Err(SinkError::ReadOnly);
        }
        let a = self.atomic(offset)?;
        if cfg!(target_endian = "little") {
            Ok(a.fetch_add(add, Ordering::AcqRel))
        } else {
            let mut cur = a.load(Ordering::Acquire);
            loop {
                let new = u64::from_le(cur).wrapping_add(add).to_le();
                match a.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(prev) => return Ok(u64::from_le(prev)),
                    Err(now) => cur = now,
                }
            }
        }
    }

    /// Hint that the cache line holding `offset` is about to be written ([DTA §6]: the translator
    /// computes a batch's slot indices first and prefetches their lines before writing, so the
    /// batch's cache misses overlap instead of queueing one after another). Uses PREFETCHW where
    /// the CPU has it (a hint NOP on older x86), `prefetcht0` otherwise on x86-64; nothing on
    /// other architectures. Out-of-bounds offsets are ignored: a prefetch never faults and never
    /// changes memory.
    #[inline(always)]
    pub fn prefetch(&self, offset: u64) {
        if offset < self.len {
            // SAFETY: offset < len, inside the mapping.
            let p = unsafe { self.ptr.add(offset as usize) };
            prefetch_write(p);
        }
    }

    /// The counter at header byte `at` ([`field::TALLY_WRITES`] or [`field::TALLY_ADDED`]).
    fn tally_word(&self, at: usize) -> Result<&AtomicU64, SinkError> {
        if self.lost.load(Ordering::Relaxed) {
            return Err(SinkError::RegionLost);
        }
        // SAFETY: `tally` points at header byte 128 of a mapping of at least HEADER_LEN bytes,
        // page aligned, so byte `at` (128 or 136) is in bounds and 8-byte aligned.
        Ok(unsafe { AtomicU64::from_ptr(self.tally.add(at - field::TALLY.start) as *mut u64) })
    }

    /// The region's live counters (zero for a region that cannot be read).
    pub fn tally(&self) -> Tally {
        let load = |at| {
            self.tally_word(at)
                .map(|w| u64::from_le(w.load(Ordering::Acquire)))
                .unwrap_or(0)
        };
        Tally {
            writes: load(field::TALLY_WRITES),
            added: load(field::TALLY_ADDED),
        }
    }

    /// FETCH_ADD `add` to the live counter at header byte `at` ([`field::TALLY_WRITES`] or
    /// [`field::TALLY_ADDED`]; anything else is out of bounds): the RDMA responder's path for a
    /// writer's [`MemSink::count`]. Returns the previous value.
    pub fn fetch_add_tally(&self, at: u64, add: u64) -> Result<u64, SinkError> {
        if !self.writable {
            return Err(SinkError::ReadOnly);
        }
        if at != field::TALLY_WRITES as u64 && at != field::TALLY_ADDED as u64 {
            return Err(SinkError::OutOfBounds { offset: at, len: 8 });
        }
        let w = self.tally_word(at as usize)?;
        Ok(u64::from_le(w.fetch_add(add.to_le(), Ordering::AcqRel)))
    }

    /// Add to the live counters (atomic, wrapping), as an RDMA FETCH_ADD on each would.
    pub fn count(&self, writes: u64, added: u64) -> Result<(), SinkError> {
        if !self.writable {
            return Err(SinkError::ReadOnly);
        }
        for (at, add) in [(field::TALLY_WRITES, writes), (field::TALLY_ADDED, added)] {
            if add != 0 {
                let w = self.tally_word(at)?;
                if cfg!(target_endian = "little") {
                    w.fetch_add(add, Ordering::AcqRel);
                } else {
                    let _ = w.fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                        Some(u64::from_le(c).wrapping_add(add).to_le())
                    });
                }
            }
        }
        Ok(())
    }

    /// A [`MemSink`] writing into this data area.
    pub fn sink(&self) -> RegionSink<'_> {
        RegionSink { mem: self }
    }
}

/// The prefetch instruction for lines about to be written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PrefetchMode {
    /// PREFETCHW: the line fetched for writing (exclusive).
    Write,
    /// `prefetcht0`: the CPU has no PREFETCHW (or the architecture no prefetch at all).
    Read,
}

/// Which prefetch this CPU takes, detected once.
#[inline(always)]
fn prefetch_mode() -> PrefetchMode {
    use std::sync::atomic::AtomicU8;
    // 0: unknown, 1: PREFETCHW, 2: prefetcht0.
    static MODE: AtomicU8 = AtomicU8::new(0);
    let mut mode = MODE.load(Ordering::Relaxed);
    if mode == 0 {
        mode = if prfchw_supported() { 1 } else { 2 };
        MODE.store(mode, Ordering::Relaxed);
    }
    if mode == 1 {
        PrefetchMode::Write
    } else {
        PrefetchMode::Read
    }
}

#[inline(always)]
fn prefetch_write(p: *const u8) {
    if prefetch_mode() == PrefetchMode::Write {
        prefetch_line::<true>(p)
    } else {
        prefetch_line::<false>(p)
    }
}

/// Prefetch the line at `p`: PREFETCHW if `WRITE` (the caller checked the CPU has it),
/// `prefetcht0` otherwise; nothing on other architectures.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_line<const WRITE: bool>(p: *const u8) {
    if WRITE {
        // SAFETY: PREFETCHW is a hint: it never faults (even on an unmapped address), reads or
        // writes no architectural state, and the CPU supports it (checked by the caller).
        unsafe {
            std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, readonly, preserves_flags))
        };
    } else {
        // SAFETY: prefetch is a hint and never faults; SSE is baseline on x86-64.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
        };
    }
}

/// Prefetch the line at `p` for writing: PREFETCHW where the CPU has it, else `prefetcht0`. A
/// hint that never faults, for lines about to be written: a region's ([`RegionMem::prefetch_at`])
/// and the translator's own tables (its Postcarding path cache).
#[inline(always)]
pub fn prefetch_for_write<T>(p: *const T) {
    prefetch(prefetch_mode() == PrefetchMode::Write, p.cast())
}

/// PREFETCHW (`write`: the CPU has it) or `prefetcht0` of the line at `p`.
#[inline(always)]
fn prefetch(write: bool, p: *const u8) {
    if write {
        prefetch_line::<true>(p)
    } else {
        prefetch_line::<false>(p)
    }
}

/// CPUID 0x8000_0001 ECX bit 8 (3DNowPrefetch: PREFETCH/PREFETCHW).
#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)] // `__cpuid` is safe on newer compilers, unsafe on the MSRV.
fn prfchw_supported() -> bool {
    // SAFETY: CPUID is available on every x86-64 CPU; leaf 0x8000_0000 gives the max ext. leaf.
    unsafe {
        let max = std::arch::x86_64::__cpuid(0x8000_0000).eax;
        max >= 0x8000_0001 && std::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 8) != 0
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn prefetch_line<const WRITE: bool>(_p: *const u8) {}

#[cfg(not(target_arch = "x86_64"))]
fn prfchw_supported() -> bool {
    false
}

/// The co-located [`MemSink`]: operations go straight into the mapped data area.
#[derive(Debug, Clone, Copy)]
pub struct RegionSink<'a> {
    mem: &'a RegionMem,
}

impl MemSink for RegionSink<'_> {
    #[inline]
    fn write(&mut self, offset: u64, bytes: &[u8]) -> Result<(), SinkError> {
        self.mem.write(offset, bytes)
    }
    #[inline]
    fn fetch_add(&mut self, offset: u64, add: u64) -> Result<(), SinkError> {
        self.mem.fetch_add_u64(offset, add).map(|_| ())
    }
    #[inline]
    fn count(&mut self, writes: u64, added: u64) -> Result<(), SinkError> {
        self.mem.count(writes, added)
    }
}

/// A [`MemSink`] over a plain byte vector (tests, dry runs, building expected images).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VecSink {
    pub bytes: Vec<u8>,
    /// What [`MemSink::count`] added.
    pub tally: Tally,
}

impl VecSink {
    /// A zeroed data area of `len` bytes.
    pub fn new(len: usize) -> Self {
        VecSink {
            bytes: vec![0; len],
            tally: Tally::default(),
        }
    }
}

impl MemSink for VecSink {
    fn write(&mut self, offset: u64, bytes: &[u8]) -> Result<(), SinkError> {
        let end = offset
            .checked_add(bytes.len() as u64)
            .filter(|&e| e <= self.bytes.len() as u64)
            .ok_or(SinkError::OutOfBounds {
                offset,
                len: bytes.len() as u64,
            })?;
        self.bytes[offset as usize..end as usize].copy_from_slice(bytes);
        Ok(())
    }

    fn fetch_add(&mut self, offset: u64, add: u64) -> Result<(), SinkError> {
        if offset % 8 != 0 {
            return Err(SinkError::Misaligned { offset });
        }
        if !matches!(offset.checked_add(8), Some(e) if e <= self.bytes.len() as u64) {
            return Err(SinkError::OutOfBounds { offset, len: 8 });
        }
        let o = offset as usize;
        let v = u64::from_le_bytes(self.bytes[o..o + 8].try_into().unwrap()).wrapping_add(add);
        self.bytes[o..o + 8].copy_from_slice(&v.to_le_bytes());
        Ok(())
    }

    fn count(&mut self, writes: u64, added: u64) -> Result<(), SinkError> {
        self.tally.writes = self.tally.writes.wrapping_add(writes);
        self.tally.added = self.tally.added.wrapping_add(added);
        Ok(())
    }
}
