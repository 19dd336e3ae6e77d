//! Region lifecycle: a collector owns a directory of region files, one per configured store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dta_store::Region;

use crate::config::StoreConfig;

/// File name of a store's region inside the region directory.
pub fn region_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.region"))
}

#[derive(Debug, thiserror::Error)]
pub enum CollectorError {
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("region directory {dir}: {source}")]
    Dir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("region {path}: {msg}")]
    Region { path: PathBuf, msg: String },
    #[error("two stores are named {0:?}")]
    DuplicateName(String),
    #[error("no store named {0:?} (see `dta inspect` for the stores present)")]
    NoSuchStore(String),
}

/// One store: its configuration (if created from one) and its mapped region.
pub struct Store {
    pub name: String,
    pub config: Option<StoreConfig>,
    pub region: Arc<Region>,
}

/// The collector's stores.
pub struct Collector {
    dir: PathBuf,
    stores: Vec<Store>,
}

impl Collector {
    /// Create (or reopen, keeping their data) the regions of `stores` in `dir`.
    pub fn create(dir: &Path, stores: &[StoreConfig], force: bool) -> Result<Self, CollectorError> {
        std::fs::create_dir_all(dir).map_err(|source| CollectorError::Dir {
            dir: dir.to_owned(),
            source,
        })?;
        let mut out: Vec<Store> = Vec::new();
        for cfg in stores {
            let spec = cfg.spec()?;
            if out.iter().any(|s| s.name == cfg.name) {
                return Err(CollectorError::DuplicateName(cfg.name.clone()));
            }
            let path = region_path(dir, &cfg.name);
            let region = Region::create(&path, &cfg.name, &spec, force).map_err(|e| {
                CollectorError::Region {
                    path: path.clone(),
                    msg: e.to_string(),
                }
            })?;
            out.push(Store {
                name: cfg.name.clone(),
                config: Some(cfg.clone()),
                region: Arc::new(region),
            });
        }
        Ok(Collector {
            dir: dir.to_owned(),
            stores: out,
        })
    }

    /// Open every region file in `dir` (read-only unless `writable`), in name order.
    pub fn open_dir(dir: &Path, writable: bool) -> Result<Self, CollectorError> {
        let rd = std::fs::read_dir(dir).map_err(|source| CollectorError::Dir {
            dir: dir.to_owned(),
            source,
        })?;
        let mut paths: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "region"))
            .collect();
        paths.sort();
        let mut stores = Vec::new();
        for path in paths {
            let region = if writable {
                Region::open(&path)
            } else {
                Region::open_read_only(&path)
            }
            .map_err(|e| CollectorError::Region {
                path: path.clone(),
                msg: e.to_string(),
            })?;
            stores.push(Store {
                name: region.header().name.clone(),
                config: None,
                region: Arc::new(region),
            });
        }
        Ok(Collector {
            dir: dir.to_owned(),
            stores,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn stores(&self) -> &[Store] {
        &self.stores
    }

    pub fn regions(&self) -> Vec<Arc<Region>> {
        self.stores.iter().map(|s| s.region.clone()).collect()
    }

    pub fn store(&self, name: &str) -> Result<&Store, CollectorError> {
        self.stores
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| CollectorError::NoSuchStore(name.to_owned()))
    }
}
