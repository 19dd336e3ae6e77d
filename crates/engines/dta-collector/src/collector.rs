//! Region lifecycle: a collector owns a directory of region files, one per configured store.
//!
//! One collector per directory: [`Collector::create`] takes the directory's
//! [`COLLECTOR_LOCK`] before it touches a region, so a second collector (with or without
//! `force`) is refused with the first one's PID and never recreates a file the first serves.
//!
//! A region that cannot be opened (bad magic, bad header CRC, shorter than its header says, bad
//! geometry, another store's spec) is reported and skipped: the collector serves the others and
//! lists the bad one with its reason ([`Collector::bad`]). A region that goes bad while served
//! (its file truncated, see `dta_store::guard`) is found by [`Region::check`]; from then on
//! [`Collector::store`] answers [`CollectorError::Unavailable`] for it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dta_store::lock::{InstanceLock, LockError, COLLECTOR_LOCK};
use dta_store::{Region, StoreSpec};

use crate::config::StoreConfig;

/// File name of a store's region inside the region directory.
pub fn region_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.region"))
}

/// The spec the collector creates or reopens store `cfg`'s region in `dir` with: the
/// configuration's, except that a configuration naming no `hash` keeps the scheme of the region
/// already there ([`crate::config::StoreConfig::spec_over`]).
pub fn planned_spec(dir: &Path, cfg: &StoreConfig) -> Result<StoreSpec, CollectorError> {
    let path = region_path(dir, &cfg.name);
    let existing = match cfg.hash {
        None if path.exists() => Region::open_read_only(&path)
            .ok()
            .filter(|r| r.header().name == cfg.name)
            .map(|r| r.header().spec.clone()),
        _ => None,
    };
    Ok(cfg.spec_over(existing.as_ref())?)
}

#[derive(Debug, thiserror::Error)]
pub enum CollectorError {
    #[error(transparent)]
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
    #[error("no store named {name:?}; {}", present_stores(.present))]
    NoSuchStore { name: String, present: Vec<String> },
    #[error("store {name:?} is unavailable: {reason}")]
    Unavailable { name: String, reason: String },
    #[error(transparent)]
    Lock(#[from] LockError),
}

/// Most store names an error lists.
pub const MAX_NAMES_SAID: usize = 32;

/// "the stores are: a, b, c" (at most [`MAX_NAMES_SAID`], sorted), or that there are none.
pub fn present_stores(names: &[String]) -> String {
    if names.is_empty() {
        return "there are no stores".into();
    }
    let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let more = sorted.len().saturating_sub(MAX_NAMES_SAID);
    sorted.truncate(MAX_NAMES_SAID);
    let mut s = format!("the stores are: {}", sorted.join(", "));
    if more > 0 {
        s.push_str(&format!(" and {more} more"));
    }
    s
}

/// The names of the regions in `dir` (`NAME.region`), at most `max`; none if it cannot be read.
pub fn region_names(dir: &std::path::Path, max: usize) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    rd.filter_map(|e| {
        let n = e.ok()?.file_name().into_string().ok()?;
        // Hidden files are regions being built (published whole under their name).
        (!n.starts_with('.')).then_some(())?;
        n.strip_suffix(".region").map(str::to_owned)
    })
    .take(max)
    .collect()
}

/// The error for store `name` that neither the configuration (`configured`) nor the region
/// directory `dir` has, naming the stores that exist (both kinds).
pub fn no_such_store<'a>(
    name: &str,
    dir: &Path,
    configured: impl IntoIterator<Item = &'a str>,
) -> CollectorError {
    let mut present: Vec<String> = configured.into_iter().map(str::to_owned).collect();
    present.extend(region_names(dir, MAX_NAMES_SAID * 4));
    CollectorError::NoSuchStore {
        name: name.to_owned(),
        present,
    }
}

/// One store: its configuration (if created from one) and its mapped region.
pub struct Store {
    pub name: String,
    pub config: Option<StoreConfig>,
    pub region: Arc<Region>,
    /// Its region file (in the collector's directory, or one it serves read-only).
    pub path: PathBuf,
    /// Set once the region was found lost and logged, so it is logged once.
    lost_logged: AtomicBool,
}

impl Store {
    fn new(name: String, config: Option<StoreConfig>, region: Region, path: PathBuf) -> Store {
        Store {
            name,
            config,
            region: Arc::new(region),
            path,
            lost_logged: AtomicBool::new(false),
        }
    }

    /// Whether the store can be served: its region is still whole ([`Region::check`]). The first
    /// failure is logged.
    pub fn check(&self) -> Result<(), CollectorError> {
        self.region.check().map_err(|e| {
            if !self.lost_logged.swap(true, Ordering::Relaxed) {
                tracing::error!("store {}: {e}; no longer served", self.name);
            }
            CollectorError::Unavailable {
                name: self.name.clone(),
                reason: e.to_string(),
            }
        })
    }
}

/// A store whose region could not be opened: skipped, listed with the reason.
#[derive(Debug, Clone)]
pub struct BadStore {
    pub name: String,
    pub path: PathBuf,
    pub reason: String,
}

/// Whether one store is served, for listings.
#[derive(Debug, Clone)]
pub struct StoreStatus {
    pub name: String,
    pub path: PathBuf,
    /// `Err(reason)` when the store is not served.
    pub available: Result<(), String>,
}

/// The collector's stores.
pub struct Collector {
    dir: PathBuf,
    stores: Vec<Store>,
    bad: Vec<BadStore>,
    /// Held for the collector's life by [`Collector::create`].
    _lock: Option<InstanceLock>,
}

impl Collector {
    /// Take the directory's collector lock, then create (or reopen, keeping their data) the
    /// regions of `stores` in `dir`. A region that cannot be created or opened is logged and
    /// listed in [`Collector::bad`]; the configuration itself being invalid, or another
    /// collector holding the directory, is an error.
    pub fn create(dir: &Path, stores: &[StoreConfig], force: bool) -> Result<Self, CollectorError> {
        let what = format!("region directory {}", dir.display());
        let lock = InstanceLock::acquire_in(dir, COLLECTOR_LOCK, &what)?;
        let mut specs = Vec::with_capacity(stores.len());
        for (i, cfg) in stores.iter().enumerate() {
            if stores[..i].iter().any(|s| s.name == cfg.name) {
                return Err(CollectorError::DuplicateName(cfg.name.clone()));
            }
            let spec = planned_spec(dir, cfg)?;
            // The configuration's geometry is checked here, so that only the files are skipped.
            dta_store::Header::new(&cfg.name, &spec).map_err(|e| {
                CollectorError::Config(crate::config::ConfigError {
                    store: cfg.name.clone(),
                    msg: e.to_string(),
                })
            })?;
            specs.push(spec);
        }
        let mut out: Vec<Store> = Vec::new();
        let mut bad = Vec::new();
        for (cfg, spec) in stores.iter().zip(specs) {
            let path = region_path(dir, &cfg.name);
            match Region::create(&path, &cfg.name, &spec, force) {
                Ok(region) => out.push(Store::new(
                    cfg.name.clone(),
                    Some(cfg.clone()),
                    region,
                    path.clone(),
                )),
                Err(e) => {
                    tracing::error!("store {}: {}: {e}; skipped", cfg.name, path.display());
                    bad.push(BadStore {
                        name: cfg.name.clone(),
                        path,
                        reason: e.to_string(),
                    });
                }
            }
        }
        Ok(Collector {
            dir: dir.to_owned(),
            stores: out,
            bad,
            _lock: Some(lock),
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
        let mut bad = Vec::new();
        for path in paths {
            let opened = if writable {
                Region::open(&path)
            } else {
                Region::open_read_only(&path)
            };
            match opened {
                Ok(region) => stores.push(Store::new(
                    region.header().name.clone(),
                    None,
                    region,
                    path.clone(),
                )),
                Err(e) => {
                    tracing::warn!("{}: {e}; skipped", path.display());
                    bad.push(BadStore {
                        name: path
                            .file_stem()
                            .map(|s| s.to_string_lossy().into_owned())
                            .unwrap_or_default(),
                        path,
                        reason: e.to_string(),
                    });
                }
            }
        }
        Ok(Collector {
            dir: dir.to_owned(),
            stores,
            bad,
            _lock: None,
        })
    }

    /// Stores whose region could not be opened, with the reason.
    pub fn bad(&self) -> &[BadStore] {
        &self.bad
    }

    /// Every store, served or not, in name order of the served ones then the bad ones.
    pub fn status(&self) -> Vec<StoreStatus> {
        let served = self.stores.iter().map(|s| StoreStatus {
            name: s.name.clone(),
            path: s.path.clone(),
            available: s.check().map_err(|e| match e {
                CollectorError::Unavailable { reason, .. } => reason,
                e => e.to_string(),
            }),
        });
        let bad = self.bad.iter().map(|b| StoreStatus {
            name: b.name.clone(),
            path: b.path.clone(),
            available: Err(b.reason.clone()),
        });
        served.chain(bad).collect()
    }

    /// Check every served region ([`Store::check`]), logging the ones newly lost; the number
    /// not served.
    pub fn check_stores(&self) -> usize {
        self.stores.iter().filter(|s| s.check().is_err()).count() + self.bad.len()
    }

    /// msync every served, writable region; the failures are logged and counted.
    pub fn flush(&self) -> usize {
        let mut failed = 0;
        for s in &self.stores {
            if s.check().is_ok() {
                if let Err(e) = s.region.flush() {
                    tracing::error!("store {}: flush: {e}", s.name);
                    failed += 1;
                }
            }
        }
        failed
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

    /// The served stores as their region headers describe them (the truth for a store's
    /// parameters: what a translator's policy is compiled against).
    pub fn headers(&self) -> Vec<dta_store::Header> {
        self.stores
            .iter()
            .map(|s| s.region.header().clone())
            .collect()
    }

    /// The served store `name`: [`CollectorError::Unavailable`] if its region is bad or lost.
    /// Also serve, read-only, the stores of `dir` (another writer's region directory, e.g. an
    /// INT sink's): opened without a lock, never created or written here. A name the collector
    /// already serves is refused.
    pub fn serve_read_only(&mut self, dir: &Path) -> Result<(), CollectorError> {
        let other = Collector::open_dir(dir, false)?;
        for s in other
            .stores
            .iter()
            .map(|s| &s.name)
            .chain(other.bad.iter().map(|b| &b.name))
        {
            if self.stores.iter().any(|m| &m.name == s) || self.bad.iter().any(|b| &b.name == s) {
                return Err(CollectorError::DuplicateName(s.clone()));
            }
        }
        self.stores.extend(other.stores);
        self.bad.extend(other.bad);
        Ok(())
    }

    pub fn store(&self, name: &str) -> Result<&Store, CollectorError> {
        if let Some(b) = self.bad.iter().find(|b| b.name == name) {
            return Err(CollectorError::Unavailable {
                name: name.to_owned(),
                reason: b.reason.clone(),
            });
        }
        let s = self.stores.iter().find(|s| s.name == name).ok_or_else(|| {
            CollectorError::NoSuchStore {
                name: name.to_owned(),
                present: self
                    .stores
                    .iter()
                    .map(|s| s.name.clone())
                    .chain(self.bad.iter().map(|b| b.name.clone()))
                    .collect(),
            }
        })?;
        s.check()?;
        Ok(s)
    }
}
