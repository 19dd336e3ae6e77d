//! The spill: high-priority datagrams the write meter could not admit yet, kept whole (bytes and
//! source) in a bounded FIFO until the budget allows them in again ([DTA-draft §4.2]: "the CPU
//! can simply re-inject these packets into the pipeline when the RDMA generation rate falls
//! below a threshold"; docs/flow-control.md).
//!
//! First a ring in memory (preallocated, `spill_memory` bytes), then optionally a ring in a
//! file (`spill_file`, at most `spill_file_bytes`, created when first needed). Order is kept
//! across both: while the file holds anything, new datagrams go to the file too, and the memory
//! is read out before the file. Nothing grows: a datagram that fits in neither is refused
//! ([`Full`]) and the caller counts it.

use std::fs::File;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use dta_wire::MAX_DATAGRAM;

/// Bytes of a record's header: `len u16 | port u16 | family u8 | 3 reserved | address 16`
/// (little-endian; an IPv4 address in the first 4 address bytes).
pub const RECORD_HEADER: usize = 24;

/// Why the spill could not take a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Memory and file (if any) are full, or the datagram is too long.
    Capacity,
    /// The spill file could not be written (its filesystem is full, or an I/O error); logged,
    /// at most every [`dta_log::DEFAULT_INTERVAL`].
    FileError,
}

/// A spill file that cannot be written is logged at most this often (it can fail per datagram).
static FILE_ERROR: dta_log::Throttle = dta_log::Throttle::new(dta_log::DEFAULT_INTERVAL);

/// Where a ring keeps its bytes.
trait Backing {
    fn put(&mut self, at: u64, bytes: &[u8]) -> io::Result<()>;
    fn get(&mut self, at: u64, out: &mut [u8]) -> io::Result<()>;
}

impl Backing for Box<[u8]> {
    fn put(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        self[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }
    fn get(&mut self, at: u64, out: &mut [u8]) -> io::Result<()> {
        out.copy_from_slice(&self[at as usize..at as usize + out.len()]);
        Ok(())
    }
}

impl Backing for File {
    fn put(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        self.write_all_at(bytes, at)
    }
    fn get(&mut self, at: u64, out: &mut [u8]) -> io::Result<()> {
        self.read_exact_at(out, at)
    }
}

/// A byte ring of whole records over a backing store of `cap` bytes.
struct Ring<B> {
    backing: B,
    cap: u64,
    head: u64,
    used: u64,
    records: usize,
}

impl<B: Backing> Ring<B> {
    fn new(backing: B, cap: u64) -> Self {
        Ring {
            backing,
            cap,
            head: 0,
            used: 0,
            records: 0,
        }
    }

    /// Write `bytes` at ring position `pos` (wrapping).
    fn put(&mut self, pos: u64, bytes: &[u8]) -> io::Result<()> {
        let at = pos % self.cap;
        let first = ((self.cap - at) as usize).min(bytes.len());
        self.backing.put(at, &bytes[..first])?;
        if first < bytes.len() {
            self.backing.put(0, &bytes[first..])?;
        }
        Ok(())
    }

    fn get(&mut self, pos: u64, out: &mut [u8]) -> io::Result<()> {
        let at = pos % self.cap;
        let first = ((self.cap - at) as usize).min(out.len());
        self.backing.get(at, &mut out[..first])?;
        if first < out.len() {
            self.backing.get(0, &mut out[first..])?;
        }
        Ok(())
    }

    fn fits(&self, len: usize) -> bool {
        self.cap - self.used >= (RECORD_HEADER + len) as u64
    }

    fn push(&mut self, header: &[u8; RECORD_HEADER], body: &[u8]) -> io::Result<()> {
        let tail = self.head + self.used;
        self.put(tail, header)?;
        self.put(tail + RECORD_HEADER as u64, body)?;
        self.used += (RECORD_HEADER + body.len()) as u64;
        self.records += 1;
        Ok(())
    }

    /// The oldest record into `out`: its length and source. `None` when empty.
    fn pop(&mut self, out: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        if self.records == 0 {
            return Ok(None);
        }
        let mut h = [0u8; RECORD_HEADER];
        self.get(self.head, &mut h)?;
        let (len, src) = decode_header(&h);
        if len > out.len() || (RECORD_HEADER + len) as u64 > self.used {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "corrupt spill record",
            ));
        }
        self.get(self.head + RECORD_HEADER as u64, &mut out[..len])?;
        self.head = (self.head + (RECORD_HEADER + len) as u64) % self.cap;
        self.used -= (RECORD_HEADER + len) as u64;
        self.records -= 1;
        if self.records == 0 {
            self.head = 0;
            self.used = 0;
        }
        Ok(Some((len, src)))
    }

    fn clear(&mut self) {
        self.head = 0;
        self.used = 0;
        self.records = 0;
    }
}

fn encode_header(len: usize, src: SocketAddr) -> [u8; RECORD_HEADER] {
    let mut h = [0u8; RECORD_HEADER];
    h[0..2].copy_from_slice(&(len as u16).to_le_bytes());
    h[2..4].copy_from_slice(&src.port().to_le_bytes());
    match src.ip() {
        IpAddr::V4(v4) => {
            h[4] = 4;
            h[8..12].copy_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            h[4] = 6;
            h[8..24].copy_from_slice(&v6.octets());
        }
    }
    h
}

fn decode_header(h: &[u8; RECORD_HEADER]) -> (usize, SocketAddr) {
    let len = u16::from_le_bytes([h[0], h[1]]) as usize;
    let port = u16::from_le_bytes([h[2], h[3]]);
    let ip: IpAddr = if h[4] == 4 {
        IpAddr::from([h[8], h[9], h[10], h[11]])
    } else {
        let mut o = [0u8; 16];
        o.copy_from_slice(&h[8..24]);
        IpAddr::V6(Ipv6Addr::from(o))
    };
    (len, SocketAddr::new(ip, port))
}

/// The bounded FIFO of spilled datagrams: memory, then file.
pub struct Spill {
    mem: Ring<Box<[u8]>>,
    file: Option<Ring<File>>,
    file_path: Option<PathBuf>,
    file_cap: u64,
    /// Records lost by a file that failed to read back (the caller counts them).
    lost: u64,
}

impl Spill {
    /// A spill of `memory` bytes (allocated now), continuing into `file` (at most `file_bytes`)
    /// when given. The file is created when the memory first overflows.
    pub fn new(memory: u64, file: Option<&Path>, file_bytes: u64) -> Self {
        Spill {
            mem: Ring::new(vec![0u8; memory as usize].into_boxed_slice(), memory),
            file: None,
            file_path: file.map(Path::to_path_buf),
            file_cap: file_bytes,
            lost: 0,
        }
    }

    /// Make the spill file `<spill_file>.<index>` (one per translator thread); before its first
    /// use.
    pub fn suffix_file(&mut self, index: usize) {
        if self.file.is_none() {
            if let Some(p) = &mut self.file_path {
                let mut name = p.as_os_str().to_owned();
                name.push(format!(".{index}"));
                *p = PathBuf::from(name);
            }
        }
    }

    /// Datagrams held.
    pub fn len(&self) -> usize {
        self.mem.records + self.file.as_ref().map_or(0, |f| f.records)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held (records with their headers), memory and file.
    pub fn bytes(&self) -> u64 {
        self.mem.used + self.file.as_ref().map_or(0, |f| f.used)
    }

    /// Bytes of memory the spill holds allocated.
    pub fn memory_capacity(&self) -> u64 {
        self.mem.cap
    }

    /// Records lost since the last call (a spill file that could not be written back in full or
    /// read back).
    pub fn take_lost(&mut self) -> u64 {
        std::mem::take(&mut self.lost)
    }

    fn file_ring(&mut self) -> Option<&mut Ring<File>> {
        if self.file.is_none() {
            let path = self.file_path.as_ref()?;
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)
            {
                Ok(f) => self.file = Some(Ring::new(f, self.file_cap)),
                Err(e) => {
                    tracing::warn!(
                        "spill file {}: {e}; spilling to memory only",
                        path.display()
                    );
                    self.file_path = None;
                    return None;
                }
            }
        }
        self.file.as_mut()
    }

    /// Append a datagram received from `src`.
    pub fn push(&mut self, datagram: &[u8], src: SocketAddr) -> Result<(), Full> {
        if datagram.len() > MAX_DATAGRAM {
            return Err(Full::Capacity);
        }
        let h = encode_header(datagram.len(), src);
        let file_busy = self.file.as_ref().is_some_and(|f| f.records > 0);
        if !file_busy && self.mem.fits(datagram.len()) {
            return self.mem.push(&h, datagram).map_err(|_| Full::Capacity);
        }
        let Some(f) = self.file_ring() else {
            return Err(Full::Capacity);
        };
        if !f.fits(datagram.len()) {
            return Err(Full::Capacity);
        }
        match f.push(&h, datagram) {
            Ok(()) => Ok(()),
            Err(e) => {
                let path = self.file_path.as_deref().unwrap_or(Path::new("?"));
                let why = if dta_store::space::is_no_space(&e) {
                    "its filesystem is full".to_owned()
                } else {
                    e.to_string()
                };
                dta_log::warn_throttled!(
                    FILE_ERROR,
                    "spill file {}: {why}: high-priority datagrams beyond the memory spill are \
                     dropped (counted as spill_file_errors)",
                    path.display()
                );
                Err(Full::FileError)
            }
        }
    }

    /// Take the oldest datagram into `out` (at least [`MAX_DATAGRAM`] bytes): its length and
    /// source.
    pub fn pop(&mut self, out: &mut [u8]) -> Option<(usize, SocketAddr)> {
        if let Ok(Some(r)) = self.mem.pop(out) {
            return Some(r);
        }
        let f = self.file.as_mut()?;
        match f.pop(out) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("spill file read: {e}; {} datagrams lost", f.records);
                self.lost += f.records as u64;
                f.clear();
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(i: u32) -> SocketAddr {
        if i % 2 == 0 {
            SocketAddr::new(IpAddr::from([10, 0, 0, i as u8]), 1000 + i as u16)
        } else {
            SocketAddr::new("2001:db8::7".parse().unwrap(), 1000 + i as u16)
        }
    }

    fn datagram(i: u32, len: usize) -> Vec<u8> {
        (0..len).map(|j| (i as usize * 31 + j) as u8).collect()
    }

    /// Pop everything, checking each is the next expected datagram.
    fn drain_expecting(s: &mut Spill, ids: impl IntoIterator<Item = (u32, usize)>) {
        let mut out = vec![0u8; MAX_DATAGRAM];
        for (i, len) in ids {
            let (n, from) = s.pop(&mut out).expect("a datagram");
            assert_eq!(&out[..n], &datagram(i, len)[..], "datagram {i}");
            assert_eq!(from, src(i));
        }
        assert!(s.pop(&mut out).is_none());
        assert!(s.is_empty());
        assert_eq!(s.bytes(), 0);
    }

    #[test]
    fn memory_ring_is_fifo_across_the_wrap_and_bounded() {
        // 5 records of 24 + 40 bytes fit in 320; then wrap around many times.
        let mut s = Spill::new(320, None, 0);
        let mut next_out = 0u32;
        let mut out = vec![0u8; MAX_DATAGRAM];
        for i in 0..5 {
            s.push(&datagram(i, 40), src(i)).unwrap();
        }
        assert_eq!(s.push(&datagram(99, 40), src(99)), Err(Full::Capacity));
        assert_eq!(s.bytes(), 320);
        for i in 5..200u32 {
            let (n, from) = s.pop(&mut out).unwrap();
            assert_eq!(&out[..n], &datagram(next_out, 40)[..]);
            assert_eq!(from, src(next_out));
            next_out += 1;
            s.push(&datagram(i, 40), src(i)).unwrap();
        }
        drain_expecting(&mut s, (195..200).map(|i| (i, 40)));
        assert_eq!(s.memory_capacity(), 320);
    }

    #[test]
    fn fifo_across_memory_file_and_back_to_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spill");
        let mut s = Spill::new(2 * (24 + 100), Some(&path), 3 * (24 + 100));
        for i in 0..5 {
            s.push(&datagram(i, 100), src(i)).unwrap();
        }
        assert!(path.exists(), "the file took the overflow");
        assert_eq!(
            s.push(&datagram(5, 100), src(5)),
            Err(Full::Capacity),
            "both full"
        );
        let mut out = vec![0u8; MAX_DATAGRAM];
        // Memory is read first; a spill while the file holds anything goes to the file.
        let (n, _) = s.pop(&mut out).unwrap();
        assert_eq!(&out[..n], &datagram(0, 100)[..]);
        assert_eq!(
            s.push(&datagram(6, 100), src(6)),
            Err(Full::Capacity),
            "file still full"
        );
        let (n, _) = s.pop(&mut out).unwrap();
        assert_eq!(&out[..n], &datagram(1, 100)[..]);
        let (n, _) = s.pop(&mut out).unwrap();
        assert_eq!(&out[..n], &datagram(2, 100)[..]);
        // Memory is empty, the file holds 3 and 4 (and has room for one): 7 goes behind them.
        s.push(&datagram(7, 100), src(7)).unwrap();
        drain_expecting(&mut s, [(3, 100), (4, 100), (7, 100)]);
        // Everything drained: memory first again.
        s.push(&datagram(8, 10), src(8)).unwrap();
        assert_eq!(s.file.as_ref().unwrap().records, 0);
        drain_expecting(&mut s, [(8, 10)]);
    }

    #[test]
    fn no_memory_and_no_file_refuses_everything() {
        let mut s = Spill::new(0, None, 0);
        assert_eq!(s.push(&[1, 2, 3], src(0)), Err(Full::Capacity));
        assert!(s.is_empty());
        // A file that cannot be created: memory only, refused, said once.
        let mut s = Spill::new(0, Some(Path::new("/nonexistent-dir/spill")), 1 << 20);
        assert_eq!(s.push(&[1, 2, 3], src(0)), Err(Full::Capacity));
        assert_eq!(s.push(&[1, 2, 3], src(0)), Err(Full::Capacity));
    }
}
