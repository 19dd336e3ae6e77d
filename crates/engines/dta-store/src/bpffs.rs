//! Regions that are BPF array maps pinned in bpffs: the XDP translator's stores (docs/xdp.md).
//! A `BPF_F_MMAPABLE` array map whose elements hold a region (header page, then data area) is
//! opened with `BPF_OBJ_GET` and mapped like a file, so `Region::open` (and `dta query
//! --region /sys/fs/bpf/...`) reads it exactly as it reads a file-backed region.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
const BPF_OBJ_GET: libc::c_long = 7;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_F_MMAPABLE: u32 = 1 << 10;

/// Whether `path` lives on a bpffs mount.
pub(crate) fn is_bpffs(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statfs writes into the zeroed struct we own; `c` is a valid C string.
    unsafe {
        let mut s: libc::statfs = std::mem::zeroed();
        #[allow(clippy::unnecessary_cast)]
        let ok = libc::statfs(c.as_ptr(), &mut s) == 0 && s.f_type as i64 == BPF_FS_MAGIC;
        ok
    }
}

fn sys_bpf(cmd: libc::c_long, attr: &mut [u64; 16]) -> io::Result<i64> {
    // SAFETY: `attr` is a zero-padded bpf_attr of 128 bytes that outlives the call.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), 128usize) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Open the map pinned at `path`; returns its descriptor and the bytes it holds
/// (`value_size · max_entries`). Fails unless it is a `BPF_F_MMAPABLE` array map.
///
/// The descriptor is read-write even for a read-only region, which is then mapped `PROT_READ`:
/// `mmap` of a file not open for writing drops `VM_SHARED` from a `MAP_SHARED` mapping, and the
/// kernel maps a BPF map only shared (`bpf_map_mmap`), so a `BPF_F_RDONLY` descriptor cannot be
/// mapped at all (EINVAL). Reading a pinned store therefore needs write permission on the pin;
/// without it the error says so.
pub(crate) fn open_pinned(path: &Path, _writable: bool) -> io::Result<(OwnedFd, u64)> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    let mut attr = [0u64; 16];
    attr[0] = c.as_ptr() as u64; // pathname; bpf_fd = 0, file_flags = 0 (read-write)
    let fd = match sys_bpf(BPF_OBJ_GET, &mut attr) {
        Ok(fd) => fd as i32,
        Err(e)
            if e.raw_os_error() == Some(libc::EACCES) || e.raw_os_error() == Some(libc::EPERM) =>
        {
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "{e}: reading a pinned XDP store needs write permission on its pin (the \
                     kernel maps BPF maps only through a read-write descriptor)"
                ),
            ))
        }
        Err(e) => return Err(e),
    };
    // SAFETY: the kernel just returned this new descriptor; we own it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // struct bpf_map_info: type, id, key_size, value_size, max_entries, map_flags (u32 each).
    let mut info = [0u32; 20];
    let mut attr = [0u64; 16];
    use std::os::fd::AsRawFd;
    attr[0] = fd.as_raw_fd() as u32 as u64 | ((std::mem::size_of_val(&info) as u64) << 32);
    attr[1] = info.as_mut_ptr() as u64;
    sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    let (kind, value_size, max_entries, flags) = (info[0], info[3], info[4], info[5]);
    if kind != BPF_MAP_TYPE_ARRAY || flags & BPF_F_MMAPABLE == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a BPF_F_MMAPABLE array map",
        ));
    }
    // Array elements are laid out every round_up(value_size, 8) bytes.
    let len = (value_size as u64).div_ceil(8) * 8 * max_entries as u64;
    Ok((fd, len))
}
