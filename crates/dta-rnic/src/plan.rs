//! What the RNIC collector registers and advertises, computed without a device: each store's
//! region file mapped whole (header page + data area) as one memory region, the access flags it
//! is registered with, and the advertisements built from the registrations and their rkeys.
//!
//! 001 §3 / §5.3: the collector's CPU does no work per report; it registers the per-primitive
//! memory once and the NIC executes the translator's WRITEs and FETCH_ADDs into it.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use memmap2::{MmapOptions, MmapRaw};

use dta_store::header::{Header, HEADER_LEN};

use crate::advert::{native, prototype, AdvertError};

/// `IBV_ACCESS_LOCAL_WRITE` (`<infiniband/verbs.h>`, enum ibv_access_flags).
pub const ACCESS_LOCAL_WRITE: u32 = 1;
/// `IBV_ACCESS_REMOTE_WRITE`.
pub const ACCESS_REMOTE_WRITE: u32 = 1 << 1;
/// `IBV_ACCESS_REMOTE_READ`.
pub const ACCESS_REMOTE_READ: u32 = 1 << 2;
/// `IBV_ACCESS_REMOTE_ATOMIC`.
pub const ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;

/// The access every region is registered with: the translator WRITEs (Key-Write, Postcarding,
/// Append, Sketch-Merge) and FETCH_ADDs (Key-Increment) into it, and may READ it (the header
/// page, for a translator that prefers reading the layout to the native advertisement).
/// Remote write and remote atomic require local write (`ibv_reg_mr(3)`).
pub const REGION_ACCESS: u32 =
    ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

/// Check `flags` against the rule of `ibv_reg_mr(3)`: "If IBV_ACCESS_REMOTE_WRITE or
/// IBV_ACCESS_REMOTE_ATOMIC is set, then IBV_ACCESS_LOCAL_WRITE must be set too."
pub fn check_access(flags: u32) -> Result<(), PlanError> {
    if flags & (ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC) != 0 && flags & ACCESS_LOCAL_WRITE == 0
    {
        return Err(PlanError::Access(flags));
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("region {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("region {path}: {msg}")]
    Region { path: PathBuf, msg: String },
    #[error("access flags {0:#x}: remote write or atomic without local write")]
    Access(u32),
    #[error("{0} stores: an advertisement counts at most 65535")]
    TooManyStores(usize),
    #[error("no stores to register")]
    NoStores,
    #[error("{count} registrations but {rkeys} rkeys")]
    RkeyCount { count: usize, rkeys: usize },
    #[error("store {index} is the prototype store but there are {count} stores")]
    PrototypeIndex { index: usize, count: usize },
    #[error("store {name:?}: {source}")]
    Advert { name: String, source: AdvertError },
}

/// One region file mapped whole, shared, read-write: the memory an RNIC registers. The mapping
/// is `MAP_SHARED` on the same file the collector, the translator and queries map, so what the
/// NIC writes is what they read.
pub struct MappedRegion {
    name: String,
    path: PathBuf,
    header: Header,
    header_bytes: [u8; native::HEADER_BYTES],
    map: MmapRaw,
}

impl std::fmt::Debug for MappedRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedRegion")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("len", &self.map.len())
            .finish()
    }
}

impl MappedRegion {
    /// Map the region file at `path` (created by `dta_collector::Collector::create`), checking
    /// its header.
    pub fn open(path: &Path) -> Result<MappedRegion, PlanError> {
        let io = |source| PlanError::Io {
            path: path.to_owned(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io)?;
        let map = MmapOptions::new().map_raw(&file).map_err(io)?;
        if map.len() < HEADER_LEN {
            return Err(PlanError::Region {
                path: path.to_owned(),
                msg: format!("{} bytes, shorter than the header page", map.len()),
            });
        }
        let mut page = vec![0u8; HEADER_LEN];
        // SAFETY: the mapping is at least HEADER_LEN bytes (checked above).
        unsafe { std::ptr::copy_nonoverlapping(map.as_ptr(), page.as_mut_ptr(), HEADER_LEN) };
        let header = Header::parse(&page).map_err(|e| PlanError::Region {
            path: path.to_owned(),
            msg: e.to_string(),
        })?;
        if page[native::HEADER_BYTES..].iter().any(|&b| b != 0) {
            // The native advertisement carries only the first 128 bytes; a header that uses more
            // would be advertised wrongly. Refuse rather than advertise a different layout.
            return Err(PlanError::Region {
                path: path.to_owned(),
                msg: format!(
                    "header has non-zero bytes past {}: not advertisable",
                    native::HEADER_BYTES
                ),
            });
        }
        let end = header.data_offset.checked_add(header.data_len);
        if end.is_none_or(|e| e > map.len() as u64) {
            return Err(PlanError::Region {
                path: path.to_owned(),
                msg: "data area runs past the end of the file".into(),
            });
        }
        let mut header_bytes = [0u8; native::HEADER_BYTES];
        header_bytes.copy_from_slice(&page[..native::HEADER_BYTES]);
        Ok(MappedRegion {
            name: header.name.clone(),
            path: path.to_owned(),
            header,
            header_bytes,
            map,
        })
    }

    /// Map every store of a collector, in its store order.
    pub fn from_collector(c: &dta_collector::Collector) -> Result<Vec<MappedRegion>, PlanError> {
        c.stores()
            .iter()
            .map(|s| MappedRegion::open(s.region.path()))
            .collect()
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn header(&self) -> &Header {
        &self.header
    }
    /// Start of the mapping (the header page).
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }
    /// Bytes mapped: the whole file.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// What to register for this region.
    pub fn registration(&self) -> Registration {
        Registration::new(
            self.map.as_ptr() as u64,
            self.map.len() as u64,
            &self.header,
            self.header_bytes,
        )
    }
}

/// One memory region to register: the whole mapping of a region file, and where its data area
/// (the translator's offset 0) lies in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub name: String,
    /// Virtual address of the mapping (the header page).
    pub addr: u64,
    /// Bytes registered: the whole file (header page, data area, any hugetlbfs rounding).
    pub length: u64,
    /// Virtual address of the data area.
    pub data_addr: u64,
    pub data_len: u64,
    /// Access flags for `ibv_reg_mr`.
    pub access: u32,
    pub header_bytes: [u8; native::HEADER_BYTES],
}

impl Registration {
    /// The registration of a region mapped at `addr` for `length` bytes with header `header`.
    pub fn new(
        addr: u64,
        length: u64,
        header: &Header,
        header_bytes: [u8; native::HEADER_BYTES],
    ) -> Registration {
        Registration {
            name: header.name.clone(),
            addr,
            length,
            data_addr: addr + header.data_offset,
            data_len: header.data_len,
            access: REGION_ACCESS,
            header_bytes,
        }
    }
}

/// The advertisements posted after a connection is established: the prototype 16-byte one
/// (for the store at `prototype_index`) and one native message per store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adverts {
    pub prototype: [u8; prototype::LEN],
    pub native: Vec<[u8; native::LEN]>,
}

impl Adverts {
    /// The SEND messages to post, in order, as `cfg` selects: the prototype one first (a
    /// prototype translator reads only the first message), then the native ones.
    pub fn messages(&self, cfg: &crate::RnicConfig) -> Vec<&[u8]> {
        let mut m: Vec<&[u8]> = Vec::new();
        if cfg.advertise_prototype {
            m.push(&self.prototype);
        }
        if cfg.advertise_native {
            m.extend(self.native.iter().map(|n| &n[..]));
        }
        m
    }
}

/// Build the advertisements from the registrations and the rkeys `ibv_reg_mr` returned for them
/// (same order).
pub fn adverts(
    regs: &[Registration],
    rkeys: &[u32],
    prototype_index: usize,
) -> Result<Adverts, PlanError> {
    if regs.is_empty() {
        return Err(PlanError::NoStores);
    }
    if regs.len() != rkeys.len() {
        return Err(PlanError::RkeyCount {
            count: regs.len(),
            rkeys: rkeys.len(),
        });
    }
    let count = u16::try_from(regs.len()).map_err(|_| PlanError::TooManyStores(regs.len()))?;
    let p = regs.get(prototype_index).ok_or(PlanError::PrototypeIndex {
        index: prototype_index,
        count: regs.len(),
    })?;
    let err = |r: &Registration| {
        let name = r.name.clone();
        move |source| PlanError::Advert { name, source }
    };
    let proto = prototype::Repr::new(p.data_addr, p.data_len, rkeys[prototype_index])
        .map_err(err(p))?
        .to_bytes();
    let mut native_msgs = Vec::with_capacity(regs.len());
    for (i, (r, &rkey)) in regs.iter().zip(rkeys).enumerate() {
        let repr = native::Repr {
            index: i as u16,
            count,
            rkey,
            addr: r.addr,
            length: r.length,
            data_addr: r.data_addr,
            data_len: r.data_len,
            header: r.header_bytes,
            header_len: native::HEADER_BYTES as u16,
        };
        let mut buf = [0u8; native::LEN];
        repr.emit(&mut native::Packet::new_unchecked(&mut buf[..]))
            .map_err(err(r))?;
        native_msgs.push(buf);
    }
    Ok(Adverts {
        prototype: proto,
        native: native_msgs,
    })
}

/// Decode what a translator received back into (store name, header, registration): the inverse
/// of [`adverts`], used by tests and by `dta decode`-style tooling.
pub fn decode_native(msg: &[u8]) -> Result<(Header, native::Repr), PlanError> {
    let repr = native::Repr::parse(&native::Packet::new_unchecked(msg)).map_err(|source| {
        PlanError::Advert {
            name: String::new(),
            source,
        }
    })?;
    let header = Header::parse(&repr.header_page()).map_err(|e| PlanError::Region {
        path: PathBuf::new(),
        msg: format!("advertised header: {e}"),
    })?;
    Ok((header, repr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_access_is_the_four_flags_and_legal() {
        assert_eq!(REGION_ACCESS, 0b1111);
        check_access(REGION_ACCESS).unwrap();
        assert!(check_access(ACCESS_REMOTE_WRITE).is_err());
        assert!(check_access(ACCESS_REMOTE_ATOMIC | ACCESS_REMOTE_READ).is_err());
        check_access(ACCESS_REMOTE_READ).unwrap();
        check_access(ACCESS_LOCAL_WRITE | ACCESS_REMOTE_ATOMIC).unwrap();
    }
}
