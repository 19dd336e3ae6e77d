//! `Region`: a mapped region file of `dta-store`, its header and the queries of its store
//! ([DTA A.1]-A.6; Sketch-Merge [DTA-draft §3.1]). Queries read the mapping in place; the
//! `apply_*` methods write through `dta-store`'s layouts exactly as the translator does (the
//! `MemSink` seam of docs/architecture.md), for tests and tools.

use std::path::PathBuf;

use dta_store::{
    AppendLayout, Header, KeyIncrementLayout, KeyWriteAnswer, KeyWriteLayout, ListReader,
    PostcardAnswer, PostcardingLayout, SketchLayout, StoreError, StoreSpec, ValueTable,
};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::json_to_py;

create_exception!(
    _native,
    RegionError,
    PyValueError,
    "A region that cannot be created or opened, a query for the wrong store kind, or a write \
     the store's layout rejects; `reason` names the cause."
);

pub(crate) fn region_err(py: Python<'_>, reason: &str, message: String) -> PyErr {
    let err = RegionError::new_err(format!("{reason}: {message}"));
    let _ = err.value(py).setattr("reason", reason);
    err
}

/// `StoreError` to Python: I/O errors keep their OS error class (FileNotFoundError, ...).
fn store_err(py: Python<'_>, e: StoreError) -> PyErr {
    let reason = match &e {
        StoreError::Io { path, source } => {
            return PyErr::from(std::io::Error::new(
                source.kind(),
                format!("{}: {source}", path.display()),
            ))
        }
        StoreError::BadMagic => "bad_magic",
        StoreError::BadVersion(_) => "bad_version",
        StoreError::BadKind(_) => "bad_kind",
        StoreError::BadHashScheme(_) => "bad_hash_scheme",
        StoreError::BadHeaderCrc { .. } => "bad_header_crc",
        StoreError::BadGeometry(_) => "bad_geometry",
        StoreError::Truncated { .. } => "truncated",
        StoreError::BadName(_) => "bad_name",
        StoreError::BadSpec(_) => "bad_spec",
        StoreError::SpecMismatch { .. } => "spec_mismatch",
        StoreError::WrongKind { .. } => "wrong_kind",
        StoreError::BadListId { .. } => "bad_list_id",
        StoreError::BadShard { .. } => "bad_shard",
        StoreError::RegionLost { .. } => "region_lost",
        StoreError::NoSpace { .. } => "no_space",
    };
    region_err(py, reason, e.to_string())
}

fn apply_err(py: Python<'_>, e: dta_store::ApplyError) -> PyErr {
    region_err(py, e.reason(), e.to_string())
}

/// A serialisable answer field as a Python dict.
pub(crate) fn to_py<'py>(
    py: Python<'py>,
    v: serde_json::Result<serde_json::Value>,
) -> PyResult<Bound<'py, PyAny>> {
    let v = v.map_err(|e| PyValueError::new_err(format!("cannot render the answer: {e}")))?;
    json_to_py(py, &v)
}

fn header_dict<'py>(py: Python<'py>, h: &Header) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &h.name)?;
    d.set_item("kind", h.kind.name())?;
    let spec = serde_json::to_value(&h.spec)
        .map_err(|e| PyValueError::new_err(format!("cannot render the store spec: {e}")))?;
    d.set_item("spec", json_to_py(py, &spec)?)?;
    let hash = serde_json::to_value(h.hash)
        .map_err(|e| PyValueError::new_err(format!("cannot render the hash scheme: {e}")))?;
    d.set_item("hash", json_to_py(py, &hash)?)?;
    d.set_item("version", h.version)?;
    d.set_item("header_len", h.header_len)?;
    d.set_item("data_offset", h.data_offset)?;
    d.set_item("data_len", h.data_len)?;
    d.set_item("created_unix_ns", h.created_unix_ns)?;
    Ok(d)
}

/// The Postcarding value set V of a query: `range(n)` as an int, or an iterable of u32 values.
enum Values {
    Range(u32),
    List(Vec<u32>),
}

impl<'py> FromPyObject<'py> for Values {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(n) = ob.extract::<u32>() {
            return Ok(Values::Range(n));
        }
        let range_type = ob.py().import("builtins")?.getattr("range")?;
        if ob.is_instance(&range_type)? {
            let r = ob;
            let (start, stop, step): (i64, i64, i64) = (
                r.getattr("start")?.extract()?,
                r.getattr("stop")?.extract()?,
                r.getattr("step")?.extract()?,
            );
            if start == 0 && step == 1 && (0..=u32::MAX as i64).contains(&stop) {
                return Ok(Values::Range(stop as u32));
            }
        }
        let mut out = Vec::new();
        for v in ob.try_iter()? {
            out.push(v?.extract::<u32>()?);
        }
        Ok(Values::List(out))
    }
}

/// A region file (`dta-store`): `Region(path, writable=False)` opens an existing one.
#[pyclass(module = "dta._native")]
pub(crate) struct Region {
    region: dta_store::Region,
    /// The last Postcarding value table built for a `range(n)` value set, reused by queries.
    table_cache: Option<(u32, ValueTable)>,
}

impl Region {
    /// The mapped region, for the INT queries (`crate::int`).
    pub(crate) fn inner(&self) -> &dta_store::Region {
        &self.region
    }

    fn wrap(region: dta_store::Region) -> Self {
        Region {
            region,
            table_cache: None,
        }
    }

    fn key_write_layout(&self, py: Python<'_>) -> PyResult<KeyWriteLayout> {
        KeyWriteLayout::new(self.region.header()).map_err(|e| store_err(py, e))
    }

    fn key_increment_layout(&self, py: Python<'_>) -> PyResult<KeyIncrementLayout> {
        KeyIncrementLayout::new(self.region.header()).map_err(|e| store_err(py, e))
    }

    fn postcard_layout(&self, py: Python<'_>) -> PyResult<PostcardingLayout> {
        PostcardingLayout::new(self.region.header()).map_err(|e| store_err(py, e))
    }

    fn append_layout(&self, py: Python<'_>) -> PyResult<AppendLayout> {
        AppendLayout::new(self.region.header()).map_err(|e| store_err(py, e))
    }

    fn sketch_layout(&self, py: Python<'_>) -> PyResult<SketchLayout> {
        SketchLayout::new(self.region.header()).map_err(|e| store_err(py, e))
    }

    /// After a query read the region: `RegionError` (`region_lost`) if its file was truncated
    /// meanwhile, whose mapping then reads as zeros (an answer from those is no answer).
    fn still_whole(&self, py: Python<'_>) -> PyResult<()> {
        self.region.check().map_err(|e| store_err(py, e))
    }

    fn require_writable(&self, py: Python<'_>) -> PyResult<()> {
        if self.region.is_writable() {
            Ok(())
        } else {
            Err(region_err(
                py,
                "read_only",
                "the region was opened read-only (use Region(path, writable=True))".into(),
            ))
        }
    }
}

/// A query the store cannot answer (wrong key length, N outside 1..=store N, too many values):
/// a `RegionError` (a `ValueError`) with its reason.
fn query_err(py: Python<'_>, e: dta_store::QueryError) -> PyErr {
    use dta_store::QueryError as Q;
    let reason = match &e {
        Q::BadKeyLen { .. } => "bad_key_len",
        Q::BadRedundancy { .. } => "bad_redundancy",
        Q::BadThreshold { .. } => "bad_threshold",
        Q::TooManyValues { .. } => "too_many_values",
        Q::BadValueBits { .. } => "bad_value_bits",
        Q::BadBatch { .. } => "bad_batch",
        Q::Window(_) => "bad_window",
    };
    region_err(py, reason, e.to_string())
}

/// An optional N: `None` is the store's (from its header).
fn redundancy_opt(py: Python<'_>, r: Option<i64>) -> PyResult<Option<u8>> {
    r.map(|r| redundancy_u8(py, r)).transpose()
}

fn redundancy_u8(py: Python<'_>, r: i64) -> PyResult<u8> {
    u8::try_from(r)
        .map_err(|_| region_err(py, "bad_redundancy", format!("redundancy {r} out of range")))
}

#[pymethods]
impl Region {
    #[new]
    #[pyo3(signature = (path, writable=false))]
    fn new(py: Python<'_>, path: PathBuf, writable: bool) -> PyResult<Self> {
        let r = if writable {
            dta_store::Region::open(&path)
        } else {
            dta_store::Region::open_read_only(&path)
        };
        r.map(Region::wrap).map_err(|e| store_err(py, e))
    }

    /// Create (or reopen, if it holds the same store) the region `path` for `spec`, a dict in
    /// the schema of the collector's configuration: `{"kind": "key_write", "slots": 1024,
    /// "key_len": 4, "data_len": 4}` etc. The region is opened writable.
    #[staticmethod]
    #[pyo3(signature = (path, name, spec, force=false))]
    fn create(
        py: Python<'_>,
        path: PathBuf,
        name: &str,
        spec: &Bound<'_, PyDict>,
        force: bool,
    ) -> PyResult<Self> {
        let json: String = py
            .import("json")?
            .call_method1("dumps", (spec,))?
            .extract()?;
        let spec: StoreSpec = serde_json::from_str(&json)
            .map_err(|e| region_err(py, "bad_spec", format!("{e} in {json}")))?;
        dta_store::Region::create(&path, name, &spec, force)
            .map(Region::wrap)
            .map_err(|e| store_err(py, e))
    }

    /// The region header: name, kind, spec, hash scheme, geometry.
    #[getter]
    fn header<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        header_dict(py, self.region.header())
    }

    /// The store kind ("key_write", "append", ...).
    #[getter]
    fn kind(&self) -> &'static str {
        self.region.header().kind.name()
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.region.path().to_path_buf()
    }

    #[getter]
    fn writable(&self) -> bool {
        self.region.is_writable()
    }

    /// Key-Write query ([DTA A.1] Algorithm 2, A.5 plurality vote over `redundancy` slots with
    /// consensus threshold `threshold`; `redundancy` None reads the store's N from its header):
    /// `{"status": "found", "data": bytes, "votes": n}`,
    /// `{"status": "empty", "data": None}` or `{"status": "ambiguous", "data": None,
    /// "candidates": [(bytes, votes), ...]}`, each with `"redundancy"` (the copies read: the
    /// store's N unless asked for fewer; `votes` of them agreed) and `"confidence": {"load",
    /// "p_overwritten", "p_wrong"}` (docs/regions.md §5).
    #[pyo3(signature = (key, redundancy=None, threshold=1))]
    fn key_write<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        redundancy: Option<i64>,
        threshold: u8,
    ) -> PyResult<Bound<'py, PyDict>> {
        let layout = self.key_write_layout(py)?;
        let answer = layout
            .query(
                self.region.mem(),
                key,
                redundancy_opt(py, redundancy)?,
                threshold,
            )
            .map_err(|e| query_err(py, e))?;
        let d = PyDict::new(py);
        let n = redundancy_opt(py, redundancy)?;
        d.set_item("redundancy", n.unwrap_or(layout.redundancy()))?;
        let c = layout.confidence(self.region.mem(), n);
        d.set_item("confidence", to_py(py, serde_json::to_value(c))?)?;
        match answer {
            KeyWriteAnswer::Found { data, votes } => {
                d.set_item("status", "found")?;
                d.set_item("data", PyBytes::new(py, &data))?;
                d.set_item("votes", votes)?;
            }
            KeyWriteAnswer::Empty => {
                d.set_item("status", "empty")?;
                d.set_item("data", py.None())?;
            }
            KeyWriteAnswer::Ambiguous { candidates } => {
                d.set_item("status", "ambiguous")?;
                d.set_item("data", py.None())?;
                let l = PyList::empty(py);
                for (data, votes) in candidates {
                    l.append((PyBytes::new(py, &data), votes))?;
                }
                d.set_item("candidates", l)?;
            }
        }
        self.still_whole(py)?;
        Ok(d)
    }

    /// Key-Increment query ([DTA A.4] Algorithm 6): the minimum of the key's `redundancy`
    /// counters; `redundancy` None reads the store's N from its header.
    #[pyo3(signature = (key, redundancy=None))]
    fn key_increment(&self, py: Python<'_>, key: &[u8], redundancy: Option<i64>) -> PyResult<u64> {
        let layout = self.key_increment_layout(py)?;
        let n = layout
            .query(self.region.mem(), key, redundancy_opt(py, redundancy)?)
            .map_err(|e| query_err(py, e))?;
        self.still_whole(py)?;
        Ok(n)
    }

    /// Key-Increment query over time windows (docs/regions.md §2.2): `window` is `"current"`,
    /// `"all"`, `"last:5m"` (s, m, h or ms) or `"at:UNIX_MS"`; a store without windows answers
    /// only `"all"`. `{"count": the sum of each window's minimum, "windows": [{"number",
    /// "start_ms", "end_ms", "open"}, ...]}`, the windows read, oldest first.
    #[pyo3(signature = (key, window="current", redundancy=None))]
    fn key_increment_window<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        window: &str,
        redundancy: Option<i64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let layout = self.key_increment_layout(py)?;
        let sel =
            dta_store::WindowSel::parse(window).map_err(|m| region_err(py, "bad_window", m))?;
        let (count, windows) = layout
            .query_windows(
                self.region.mem(),
                key,
                redundancy_opt(py, redundancy)?,
                sel,
                dta_store::key_increment::unix_ms(),
            )
            .map_err(|e| query_err(py, e))?;
        self.still_whole(py)?;
        to_py(
            py,
            serde_json::to_value(windows)
                .map(|w| serde_json::json!({"count": count, "windows": w})),
        )
    }

    /// The time windows this Key-Increment store holds, oldest first (empty without windows).
    fn windows<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let layout = self.key_increment_layout(py)?;
        let w = layout.held_windows(self.region.mem(), dta_store::key_increment::unix_ms());
        to_py(py, serde_json::to_value(w))
    }

    /// The count-min error bound of this Key-Increment store's answers (docs/regions.md §5):
    /// `{"total", "epsilon", "error", "delta"}`: an answer exceeds the true count by at most
    /// `error` with probability at least 1 - `delta`.
    fn key_increment_bound<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let layout = self.key_increment_layout(py)?;
        to_py(py, serde_json::to_value(layout.bound(self.region.mem())))
    }

    /// The region's live counters: `{"writes": copies written, "added": Key-Increment total}`.
    #[getter]
    fn tally<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t = self.region.mem().tally();
        let d = PyDict::new(py);
        d.set_item("writes", t.writes)?;
        d.set_item("added", t.added)?;
        Ok(d)
    }

    /// Postcarding query ([DTA §4] "Postcarding", A.2): `values_range` is the value set V, an int
    /// n or `range(n)` for V = {0, ..., n-1}, or an iterable of the values.
    /// `{"status": "found", "path": [hop 0 value, ...]}`, `{"status": "empty", "path": None}`
    /// or `{"status": "ambiguous", "path": None}`, each with `"confidence"` as in `key_write`.
    fn postcard<'py>(
        &mut self,
        py: Python<'py>,
        key: &[u8],
        values_range: Values,
    ) -> PyResult<Bound<'py, PyDict>> {
        let layout = self.postcard_layout(py)?;
        let mem = self.region.mem();
        let (answer, confidence) = match values_range {
            Values::Range(n) => {
                if !matches!(&self.table_cache, Some((m, _)) if *m == n) {
                    let t = ValueTable::range(&layout, n).map_err(|e| query_err(py, e))?;
                    self.table_cache = Some((n, t));
                }
                match &self.table_cache {
                    Some((_, t)) => (layout.query(mem, key, t), layout.confidence(mem, t)),
                    None => (
                        Ok(PostcardAnswer::Empty),
                        layout.confidence(
                            mem,
                            &ValueTable::range(&layout, 0).map_err(|e| query_err(py, e))?,
                        ),
                    ),
                }
            }
            Values::List(v) => {
                let t = ValueTable::new(&layout, v).map_err(|e| query_err(py, e))?;
                (layout.query(mem, key, &t), layout.confidence(mem, &t))
            }
        };
        let answer = answer.map_err(|e| query_err(py, e))?;
        let d = PyDict::new(py);
        d.set_item("confidence", to_py(py, serde_json::to_value(confidence))?)?;
        match answer {
            PostcardAnswer::Found(path) => {
                d.set_item("status", "found")?;
                d.set_item("path", path)?;
            }
            PostcardAnswer::Empty => {
                d.set_item("status", "empty")?;
                d.set_item("path", py.None())?;
            }
            PostcardAnswer::Ambiguous => {
                d.set_item("status", "ambiguous")?;
                d.set_item("path", py.None())?;
            }
        }
        self.still_whole(py)?;
        Ok(d)
    }

    /// Poll list `list` of an Append store ([DTA A.3] Algorithm 4) from entry index `tail`:
    /// `{"entries": [bytes, ...], "missed": n, "tail": next index, "record": layout}`, and for a
    /// store with a record layout (`int-event`) `"decoded": [dict or None, ...]`, the entries
    /// as `dta query list` decodes them. Pass the returned `tail`
    /// to the next call to read on; `shard`/`shards` split a list among readers.
    #[pyo3(signature = (list, tail=0, max=1024, shard=0, shards=1))]
    fn list_poll<'py>(
        &self,
        py: Python<'py>,
        list: u32,
        tail: u64,
        max: usize,
        shard: u32,
        shards: u32,
    ) -> PyResult<Bound<'py, PyDict>> {
        let layout = self.append_layout(py)?;
        let entry_len = layout.entry_len();
        let mut reader = ListReader::new(layout, list, shard, shards)
            .map_err(|e| store_err(py, e))?
            .with_tail(tail);
        let mut out = Vec::new();
        let res = reader.poll(self.region.mem(), max, &mut out);
        let entries = PyList::empty(py);
        for e in out.chunks_exact(entry_len) {
            entries.append(PyBytes::new(py, e))?;
        }
        let d = PyDict::new(py);
        d.set_item("entries", entries)?;
        // With a record layout in the header, each entry decoded too (None: it does not).
        let record = self.region.header().append_record();
        d.set_item("record", record.name())?;
        if !record.is_raw() {
            let n = (out.len() / entry_len) as u64;
            let first = reader.tail() - n * u64::from(shards);
            let decoded = PyList::empty(py);
            for (i, e) in out.chunks_exact(entry_len).enumerate() {
                let seq = first + i as u64 * u64::from(shards);
                match dta_int::events::decode_record(record, e, seq) {
                    Some(v) => decoded.append(json_to_py(py, &v)?)?,
                    None => decoded.append(py.None())?,
                }
            }
            d.set_item("decoded", decoded)?;
        }
        d.set_item("missed", res.missed)?;
        d.set_item("tail", reader.tail())?;
        self.still_whole(py)?;
        Ok(d)
    }

    /// Count-Min estimate of `key` in a Sketch-Merge store ([DTA-draft §3.1]: minimum over rows of
    /// the merged sketch). With `epoch`, None unless every column it needs holds that epoch.
    #[pyo3(signature = (key, epoch=None))]
    fn sketch_estimate(
        &self,
        py: Python<'_>,
        key: &[u8],
        epoch: Option<u32>,
    ) -> PyResult<Option<u64>> {
        let layout = self.sketch_layout(py)?;
        if !matches!(layout.kind(), dta_store::SketchKind::CountMin { .. }) {
            return Err(region_err(
                py,
                "wrong_kind",
                "sketch_estimate needs a Count-Min sketch store".into(),
            ));
        }
        if epoch.is_none() && !layout.cm_key_merged(self.region.mem(), key) {
            return Err(region_err(
                py,
                "not_merged",
                "a column this key reads has not been merged yet (the translator writes a column \
                 once every reporter of the sketch has sent it)"
                    .into(),
            ));
        }
        Ok(match epoch {
            None => Some(layout.cm_estimate(self.region.mem(), key)),
            Some(e) => layout.cm_estimate_epoch(self.region.mem(), key, e),
        })
    }

    /// HyperLogLog cardinality estimate of a Sketch-Merge store ([DTA-draft §3.1], merged
    /// registers).
    fn sketch_cardinality(&self, py: Python<'_>) -> PyResult<f64> {
        let layout = self.sketch_layout(py)?;
        if !matches!(layout.kind(), dta_store::SketchKind::HyperLogLog { .. }) {
            return Err(region_err(
                py,
                "wrong_kind",
                "sketch_cardinality needs a HyperLogLog sketch store".into(),
            ));
        }
        if layout.merged_columns(self.region.mem()) == 0 {
            return Err(region_err(
                py,
                "not_merged",
                "no column has been merged yet (the translator writes a column once every \
                 reporter of the sketch has sent it)"
                    .into(),
            ));
        }
        Ok(layout.hll_cardinality(self.region.mem()))
    }

    /// Every column's `(epoch, reporters)` of a Sketch-Merge store.
    fn sketch_columns(&self, py: Python<'_>) -> PyResult<Vec<(u32, u32)>> {
        let layout = self.sketch_layout(py)?;
        Ok(layout
            .column_epochs(self.region.mem())
            .into_iter()
            .map(|c| (c.epoch, c.reporters))
            .collect())
    }

    // -- writes through the store layouts (what the translator's primitives emit) ------------

    /// Write one Key-Write report into the region ([DTA A.1] Algorithm 1).
    /// `redundancy` None writes the store's N copies.
    #[pyo3(signature = (key, data, redundancy=None))]
    fn apply_key_write(
        &self,
        py: Python<'_>,
        key: &[u8],
        data: &[u8],
        redundancy: Option<i64>,
    ) -> PyResult<()> {
        self.require_writable(py)?;
        let layout = self.key_write_layout(py)?;
        let r = redundancy_opt(py, redundancy)?.unwrap_or(layout.redundancy());
        layout
            .apply(key, data, r, &mut self.region.mem().sink())
            .map_err(|e| apply_err(py, e))
    }

    /// Apply one Key-Increment report ([DTA A.4] Algorithm 5): `redundancy` FETCH_ADDs.
    /// `redundancy` None is the store's N (any other N is `redundancy_mismatch`).
    #[pyo3(signature = (key, counter, redundancy=None))]
    fn apply_key_increment(
        &self,
        py: Python<'_>,
        key: &[u8],
        counter: u64,
        redundancy: Option<i64>,
    ) -> PyResult<()> {
        self.require_writable(py)?;
        let mut layout = self.key_increment_layout(py)?;
        let r = redundancy_opt(py, redundancy)?.unwrap_or(layout.redundancy());
        // A windowed store: into the window of the wall clock (entered as a translator would).
        let mem = self.region.mem();
        layout
            .enter_window(mem, dta_store::key_increment::unix_ms())
            .map_err(|e| region_err(py, "sink_error", e.to_string()))?;
        layout
            .apply(key, counter, r, &mut mem.sink())
            .map_err(|e| apply_err(py, e))
    }

    /// Write one whole Postcarding path ([DTA A.2]): hop values, hop 0 first; missing hops (up to
    /// the store's B) and None are blank.
    fn apply_postcard(&self, py: Python<'_>, key: &[u8], values: Vec<Option<u32>>) -> PyResult<()> {
        self.require_writable(py)?;
        let layout = self.postcard_layout(py)?;
        if values.len() > layout.hops() {
            return Err(region_err(
                py,
                "bad_hop",
                format!(
                    "{} values for a store of {} hops",
                    values.len(),
                    layout.hops()
                ),
            ));
        }
        let mut padded = values;
        padded.resize(layout.hops(), None);
        layout
            .apply_chunk(key, &padded, &mut self.region.mem().sink())
            .map_err(|e| apply_err(py, e))
    }

    /// Write Append entries `first_index..` of `list` and publish the new head ([DTA A.3]
    /// Algorithm 3). `entries` is k entries of the store's entry length, back to back.
    fn apply_append(
        &self,
        py: Python<'_>,
        list: u32,
        first_index: u64,
        entries: &[u8],
    ) -> PyResult<()> {
        self.require_writable(py)?;
        let layout = self.append_layout(py)?;
        layout
            .write_entries(list, first_index, entries, &mut self.region.mem().sink())
            .map_err(|e| apply_err(py, e))
    }

    /// Write merged Sketch-Merge columns from `first_column` ([DTA-draft §4.2]): `values` holds
    /// whole columns (rows per column for Count-Min, registers per column for HyperLogLog).
    fn apply_sketch_columns(
        &self,
        py: Python<'_>,
        first_column: u32,
        epoch: u32,
        reporters: u32,
        values: Vec<u64>,
    ) -> PyResult<()> {
        self.require_writable(py)?;
        let layout = self.sketch_layout(py)?;
        layout
            .write_columns(
                first_column,
                epoch,
                reporters,
                &values,
                &mut self.region.mem().sink(),
            )
            .map_err(|e| apply_err(py, e))
    }

    /// Flush the mapping to the file.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.region.flush().map_err(|e| store_err(py, e))
    }

    fn __repr__(&self) -> String {
        let h = self.region.header();
        format!(
            "Region(path={:?}, name={:?}, kind={:?}, writable={})",
            self.region.path().display().to_string(),
            h.name,
            h.kind.name(),
            if self.region.is_writable() {
                "True"
            } else {
                "False"
            }
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("RegionError", m.py().get_type::<RegionError>())?;
    m.add_class::<Region>()?;
    Ok(())
}
