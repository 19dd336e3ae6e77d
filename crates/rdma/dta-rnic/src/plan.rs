//! What the RNIC collector registers and advertises, computed without a device: each store's
//! region file mapped whole (header page + data area) as one memory region, the access flags it
//! is registered with, and the advertisements built from the registrations and their rkeys
//! (with `dta_rdma::adv`, the software responder's encoder).
//!
//! [DTA §3 / §5.3]: the collector's CPU does no work per report; it registers the per-primitive
//! memory once and the NIC executes the translator's WRITEs and FETCH_ADDs into it.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};

use dta_rdma::adv::{emit_native, AdvertisedStore, ProtoAdv, PROTO_LEN};
use dta_store::header::{Header, HEADER_LEN};
use dta_store::Region;
use dta_store::StoreInfo;

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
    #[error("{0} stores: an advertisement counts at most 2^32-1")]
    TooManyStores(usize),
    #[error("no stores to register")]
    NoStores,
    #[error("store {index} is the prototype store but there are {count} stores")]
    PrototypeIndex { index: usize, count: usize },
}

/// One region file mapped whole, shared, read-write: the memory an RNIC registers. The mapping
/// is `MAP_SHARED` on the same file the collector, the translator and queries map, so what the
/// NIC writes is what they read. (`dta_store::Region` maps the same file but exposes only its
/// data area; registering needs the whole mapping's address.)
pub struct MappedRegion {
    region: Arc<Region>,
    map: MmapRaw,
}

impl std::fmt::Debug for MappedRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedRegion")
            .field("name", &self.region.header().name)
            .field("path", &self.region.path())
            .field("len", &self.map.len())
            .finish()
    }
}

impl MappedRegion {
    /// Map the file of `region` (opened read-write, e.g. by `dta_collector::Collector::create`)
    /// whole, checking that the file's header is the region's.
    pub fn open(region: Arc<Region>) -> Result<MappedRegion, PlanError> {
        let path = region.path().to_owned();
        let err = |msg: String| PlanError::Region {
            path: path.clone(),
            msg,
        };
        if !region.is_writable() {
            return Err(err("opened read-only: the NIC could not write it".into()));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|source| PlanError::Io {
                path: path.clone(),
                source,
            })?;
        let map = MmapOptions::new()
            .map_raw(&file)
            .map_err(|source| PlanError::Io {
                path: path.clone(),
                source,
            })?;
        if map.len() < HEADER_LEN {
            return Err(err(format!(
                "{} bytes, shorter than the header page",
                map.len()
            )));
        }
        let mut page = vec![0u8; HEADER_LEN];
        // SAFETY: the mapping is at least HEADER_LEN bytes (checked above).
        unsafe { std::ptr::copy_nonoverlapping(map.as_ptr(), page.as_mut_ptr(), HEADER_LEN) };
        let header = Header::parse(&page).map_err(|e| err(e.to_string()))?;
        if header != *region.header() {
            return Err(err("the file's header changed since it was opened".into()));
        }
        let end = header.data_offset.checked_add(header.data_len);
        if end.is_none_or(|e| e > map.len() as u64) {
            return Err(err("data area runs past the end of the file".into()));
        }
        Ok(MappedRegion { region, map })
    }

    /// Map every store of a collector, in its store order.
    pub fn from_collector(c: &dta_collector::Collector) -> Result<Vec<MappedRegion>, PlanError> {
        c.stores()
            .iter()
            .map(|s| MappedRegion::open(s.region.clone()))
            .collect()
    }

    pub fn name(&self) -> &str {
        &self.region.header().name
    }
    pub fn path(&self) -> &Path {
        self.region.path()
    }
    pub fn header(&self) -> &Header {
        self.region.header()
    }
    pub fn region(&self) -> &Arc<Region> {
        &self.region
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
            self.header(),
        )
    }

    /// This store as the native advertisement describes it, registered with `rkey`: the
    /// registration, the header and the current Append heads (read now, so a translator that
    /// reconnects continues each list where it was).
    pub fn advertised(&self, rkey: u32) -> Result<AdvertisedStore, PlanError> {
        let info = StoreInfo::from_region(&self.region).map_err(|e| PlanError::Region {
            path: self.path().to_owned(),
            msg: format!("reading Append heads: {e}"),
        })?;
        Ok(AdvertisedStore {
            region_va: self.map.as_ptr() as u64,
            region_len: self.map.len() as u64,
            rkey,
            header: info.header,
            append_heads: info.append_heads,
        })
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
}

impl Registration {
    /// The registration of a region mapped at `addr` for `length` bytes with header `header`.
    pub fn new(addr: u64, length: u64, header: &Header) -> Registration {
        Registration {
            name: header.name.clone(),
            addr,
            length,
            data_addr: addr + header.data_offset,
            data_len: header.data_len,
            access: REGION_ACCESS,
        }
    }
}

/// The two advertisement messages posted after a connection is established, encoded by
/// `dta_rdma::adv` exactly as the software responder encodes them (`docs/rdma.md`, "Memory
/// advertisement").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adverts {
    /// The prototype's 16 bytes: the data area of the store at `prototype_index`.
    pub prototype: [u8; PROTO_LEN],
    /// The native message: every store, its header page and Append heads.
    pub native: Vec<u8>,
}

impl Adverts {
    /// The SEND messages to post, in order, as `cfg` selects: the prototype one first (a
    /// prototype translator reads only the first message), then the native one.
    pub fn messages(&self, cfg: &crate::RnicConfig) -> Vec<&[u8]> {
        let mut m: Vec<&[u8]> = Vec::new();
        if cfg.advertise_prototype {
            m.push(&self.prototype);
        }
        if cfg.advertise_native {
            m.push(&self.native);
        }
        m
    }
}

/// Build the advertisements of `stores` (in store order). The prototype message describes the
/// data area of store `prototype_index`, its length capped at 2^32-1 as the software responder
/// caps it (the prototype's field is 32 bits).
pub fn adverts(stores: &[AdvertisedStore], prototype_index: usize) -> Result<Adverts, PlanError> {
    if stores.is_empty() {
        return Err(PlanError::NoStores);
    }
    if u32::try_from(stores.len()).is_err() {
        return Err(PlanError::TooManyStores(stores.len()));
    }
    let p = stores
        .get(prototype_index)
        .ok_or(PlanError::PrototypeIndex {
            index: prototype_index,
            count: stores.len(),
        })?;
    let prototype = ProtoAdv {
        addr: p.data_va(),
        length: p.header.data_len.min(u32::MAX as u64) as u32,
        rkey: p.rkey,
    }
    .emit();
    Ok(Adverts {
        prototype,
        native: emit_native(stores),
    })
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
