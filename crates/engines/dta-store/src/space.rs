//! Storage that tells the truth about space: a region is allocated for real when it is created
//! or opened for writing (`posix_fallocate`), so a region that does not fit its filesystem is
//! refused at that moment, naming the file, the size and the free space, instead of being
//! created sparse, reported ready, and lost at the first page the filesystem cannot back
//! (a SIGBUS on the mapping, [`crate::guard`]). The same numbers let `dta check` say so
//! beforehand ([`free_bytes`]), and a region found lost is diagnosed by what is true of its
//! file ([`lost_reason`]).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Bytes an unprivileged writer can still allocate on the filesystem holding `path` (the
/// nearest existing ancestor when `path` does not exist yet).
pub fn free_bytes(path: &Path) -> io::Result<u64> {
    let mut p = path;
    while !p.exists() {
        p = match p.parent() {
            Some(q) if !q.as_os_str().is_empty() => q,
            _ => Path::new("."),
        };
        if p == Path::new(".") {
            break;
        }
    }
    let c = std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))?;
    let mut f: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `f` a valid out-parameter.
    if unsafe { libc::statfs(c.as_ptr(), &mut f) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if f.f_type as i64 == HUGETLBFS_MAGIC && f.f_blocks == 0 {
        // A hugetlbfs mount without `size=` reports no blocks: its limit is the free pages of
        // the pool of its page size.
        return Ok(free_huge_pages(f.f_bsize as u64).saturating_mul(f.f_bsize as u64));
    }
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `s` a valid out-parameter.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((s.f_bavail as u64).saturating_mul(s.f_frsize as u64))
}

/// `statfs(2)`'s `f_type` of hugetlbfs.
pub(crate) const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;

/// Free pages of the huge page pool of `page` bytes (0 when the kernel has none of that size).
fn free_huge_pages(page: u64) -> u64 {
    std::fs::read_to_string(format!(
        "/sys/kernel/mm/hugepages/hugepages-{}kB/free_hugepages",
        page / 1024
    ))
    .ok()
    .and_then(|s| s.trim().parse().ok())
    .unwrap_or(0)
}

/// Whether `e` says the filesystem (or the user's quota) is full.
pub fn is_no_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// Allocate the first `len` bytes of `file` for real. A filesystem that cannot (bpffs, some
/// network filesystems: `EOPNOTSUPP`) is left as it is: its pages are not reserved, which is
/// what `docs/regions.md` says of it.
pub fn allocate(file: &File, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length beyond off_t"))?;
    loop {
        // SAFETY: a valid open descriptor; posix_fallocate returns the error number.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
        match rc {
            0 => return Ok(()),
            libc::EINTR => continue,
            libc::EOPNOTSUPP | libc::ENODEV | libc::ESPIPE => return Ok(()),
            e => return Err(io::Error::from_raw_os_error(e)),
        }
    }
}

/// Why the region file at `path`, needing `needed` bytes, lost its mapping: truncated (the file
/// is shorter), or a page that could not be allocated (its filesystem or memory is full).
pub fn lost_reason(path: &Path, needed: u64) -> String {
    match std::fs::metadata(path) {
        Err(e) => format!("the file is gone ({e})"),
        Ok(m) if m.len() < needed => format!(
            "the file was truncated while mapped ({} of {needed} bytes)",
            m.len()
        ),
        Ok(_) => format!(
            "a page of the file could not be allocated (its filesystem has {} free; a region \
             created sparse by another tool, or memory exhausted)",
            human(free_bytes(path).unwrap_or(0))
        ),
    }
}

/// Bytes for a message: exact, with the binary unit beside.
pub fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut v = n as f64;
    let mut u = "";
    for unit in UNITS {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        u = unit;
    }
    format!("{n} bytes ({v:.1} {u})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_of_a_path_not_created_yet_is_its_ancestors() {
        let d = tempfile::tempdir().unwrap();
        let here = free_bytes(d.path()).unwrap();
        let below = free_bytes(&d.path().join("a/b/c.region")).unwrap();
        assert!(here > 0);
        // Same filesystem; other tests may write meanwhile.
        assert!(
            below.abs_diff(here) < here / 10 + (64 << 20),
            "{here} vs {below}"
        );
    }

    #[test]
    fn allocation_beyond_the_free_space_is_no_space() {
        let d = tempfile::tempdir().unwrap();
        let f = File::create(d.path().join("x")).unwrap();
        allocate(&f, 1 << 20).unwrap();
        assert!(f.metadata().unwrap().len() >= 1 << 20);
        let too_much = free_bytes(d.path()).unwrap() + (1 << 40);
        let e = allocate(&f, too_much).unwrap_err();
        assert!(
            is_no_space(&e) || e.raw_os_error() == Some(libc::EFBIG),
            "{e}"
        );
    }

    #[test]
    fn sizes_read_exactly_and_roughly() {
        assert_eq!(human(512), "512 bytes");
        assert_eq!(human(3 << 30), "3221225472 bytes (3.0 GiB)");
    }
}
