//! `dta.ClusterMap`: the cluster map of `dta-cluster` (which collector owns each key), so
//! Python routes reports and queries with the same hash as the Rust and C code
//! (`spec/vectors/cluster.json`).

use std::path::PathBuf;
use std::sync::Arc;

use dta_cluster::{ClusterMap as Map, Key};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn map_err(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A validated cluster map (docs/scale-out.md).
#[pyclass(module = "dta._native", frozen)]
pub struct ClusterMap {
    map: Arc<Map>,
}

fn collector_dict<'py>(
    py: Python<'py>,
    c: &dta_cluster::Collector,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &c.name)?;
    d.set_item(
        "translator",
        (c.translator.ip().to_string(), c.translator.port()),
    )?;
    d.set_item("http", c.http.map(|h| (h.ip().to_string(), h.port())))?;
    d.set_item("region_dir", c.region_dir.clone())?;
    d.set_item(
        "mode",
        match c.mode {
            dta_cluster::Mode::Rdma => "rdma",
            dta_cluster::Mode::Shm => "shm",
        },
    )?;
    d.set_item("nic_budget", c.nic_budget)?;
    Ok(d)
}

#[pymethods]
impl ClusterMap {
    /// Read and validate the map in `path` (a relative `region_dir` is taken relative to it).
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        Ok(ClusterMap {
            map: Arc::new(Map::load(&path).map_err(map_err)?),
        })
    }

    /// Parse and validate a map from TOML text.
    #[staticmethod]
    fn parse(text: &str) -> PyResult<Self> {
        Ok(ClusterMap {
            map: Arc::new(Map::parse(text).map_err(map_err)?),
        })
    }

    #[getter]
    fn version(&self) -> u64 {
        self.map.version
    }

    /// The previous map's version, if the map embeds one.
    #[getter]
    fn previous_version(&self) -> Option<u64> {
        self.map.previous.as_ref().map(|p| p.version)
    }

    /// The collectors, in the map's order, as dicts.
    #[getter]
    fn collectors<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.map
            .collectors
            .iter()
            .map(|c| collector_dict(py, c))
            .collect()
    }

    /// The collector named `name` (a dict, as in `collectors`), or also from the previous map.
    fn collector<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let c = self
            .map
            .collector(name)
            .or_else(|| self.map.previous.as_ref().and_then(|p| p.collector(name)))
            .ok_or_else(|| map_err(format!("the cluster map names no collector {name:?}")))?;
        collector_dict(py, c)
    }

    /// The store's rule: kind, placement, key_len.
    fn store<'py>(&self, py: Python<'py>, store: &str) -> PyResult<Bound<'py, PyDict>> {
        let s = self.map.store(store).map_err(map_err)?;
        let d = PyDict::new(py);
        d.set_item("name", &s.name)?;
        d.set_item("kind", s.kind.name())?;
        d.set_item("placement", s.placement.name())?;
        d.set_item("key_len", s.key_len)?;
        d.set_item("sketch_id", s.sketch_id)?;
        Ok(d)
    }

    /// The name of the collector owning `key` (bytes) of a hashed store.
    fn owner(&self, store: &str, key: &[u8]) -> PyResult<String> {
        Ok(self
            .map
            .owner(store, Key::Bytes(key))
            .map_err(map_err)?
            .name
            .clone())
    }

    /// The name of the collector owning Append list `list_id`.
    fn list_owner(&self, store: &str, list_id: u32) -> PyResult<String> {
        Ok(self
            .map
            .owner(store, Key::List(list_id))
            .map_err(map_err)?
            .name
            .clone())
    }

    /// The name of the collector a Sketch-Merge reporter sends to.
    fn sketch_owner(&self, store: &str, reporter_id: u32) -> PyResult<String> {
        Ok(self
            .map
            .owner(store, Key::Reporter(reporter_id))
            .map_err(map_err)?
            .name
            .clone())
    }

    /// Who may hold `key` during a change: the owner, then the previous map's if different.
    fn owners_during_change(&self, store: &str, key: &[u8]) -> PyResult<Vec<String>> {
        Ok(self
            .map
            .owners_during_change(store, Key::Bytes(key))
            .map_err(map_err)?
            .into_iter()
            .map(|c| c.name.clone())
            .collect())
    }

    /// The same for an Append list.
    fn list_owners_during_change(&self, store: &str, list_id: u32) -> PyResult<Vec<String>> {
        Ok(self
            .map
            .owners_during_change(store, Key::List(list_id))
            .map_err(map_err)?
            .into_iter()
            .map(|c| c.name.clone())
            .collect())
    }

    /// The store a report of this primitive and key length goes to, as the translator finds
    /// it: `kind` is "key_write", "key_increment", "postcarding", "append" or "sketch_merge".
    #[pyo3(signature = (kind, key_len=4, sketch_id=None))]
    fn store_for(&self, kind: &str, key_len: usize, sketch_id: Option<u16>) -> PyResult<String> {
        let key = vec![0u8; key_len.min(16)];
        let report = match kind {
            "key_write" => dta_wire::Report::KeyWrite {
                key: &key,
                data: &[],
                redundancy: 1,
                immediate: false,
            },
            "key_increment" => dta_wire::Report::KeyIncrement {
                key: &key,
                counter: 0,
                redundancy: 1,
                immediate: false,
            },
            "postcarding" => dta_wire::Report::Postcard {
                key: &key,
                hop: 0,
                path_len: 0,
                value: 0,
                immediate: false,
            },
            "append" => dta_wire::Report::Append {
                list_id: 0,
                data: &[],
                immediate: false,
            },
            "sketch_merge" => dta_wire::Report::SketchColumn {
                sketch_id: sketch_id.unwrap_or(0),
                column: 0,
                epoch: 0,
                data: &[],
                immediate: false,
            },
            other => return Err(map_err(format!("unknown primitive {other:?}"))),
        };
        Ok(self.map.rule_for(&report).map_err(map_err)?.name.clone())
    }
}

/// A collector's rendezvous seed (`dta_cluster::collector_seed`).
#[pyfunction]
pub fn cluster_seed(name: &str) -> u64 {
    dta_cluster::collector_seed(name)
}

/// The score of `key` at a collector of seed `seed` (`dta_cluster::score`).
#[pyfunction]
pub fn cluster_score(key: &[u8], seed: u64) -> u64 {
    dta_cluster::score(dta_store::hash::fnv1a64(key), seed)
}

/// The index in `names` of the collector owning `key` (rendezvous hashing).
#[pyfunction]
pub fn cluster_owner(names: Vec<String>, key: &[u8]) -> PyResult<usize> {
    let seeds: Vec<u64> = names
        .iter()
        .map(|n| dta_cluster::collector_seed(n))
        .collect();
    dta_cluster::rendezvous(&seeds, key).ok_or_else(|| map_err("no collectors"))
}
