//! `dta.ApproSync`: a Count-Min sketch kept in approximate sync with a Sketch-Merge store of
//! `sync = "approsync"` ([InvisiFlow §6.1] "Sources"), the Rust reporter's
//! `dta_reporter::ApproSync` (same hash as the store, same divergence test), sending its due
//! columns through any reporter with the `dta.reporter.Reporter` methods `sketch_merge` and
//! `flush`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::bytes_of;

/// A Count-Min sketch synced with ApproSync (docs/protocol.md "Sketch-Merge").
#[pyclass(module = "dta._native")]
pub struct ApproSync {
    inner: dta_reporter::ApproSync,
}

#[pymethods]
impl ApproSync {
    /// `rows` × `columns` (the store's shape: rows 1..=16, columns a power of two up to 65536),
    /// relative divergence threshold `theta` (>= 0), sketch id and epoch.
    #[new]
    #[pyo3(signature = (rows, columns, theta, sketch_id, epoch))]
    fn new(rows: u32, columns: u32, theta: f64, sketch_id: u16, epoch: u32) -> PyResult<Self> {
        dta_reporter::ApproSync::new(rows, columns, theta, sketch_id, epoch)
            .map(|inner| ApproSync { inner })
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Count `inc` (a u32) for `key` in every row; True when this made a column due.
    #[pyo3(signature = (key, inc=1))]
    fn update(&mut self, key: &Bound<'_, PyAny>, inc: u32) -> PyResult<bool> {
        let key = bytes_of(key, "key")?;
        Ok(self.inner.update(&key, inc))
    }

    /// The sketch's own Count-Min estimate of `key` (what the store answers once synced).
    fn estimate(&self, key: &Bound<'_, PyAny>) -> PyResult<u64> {
        Ok(self.inner.sketch().estimate(&bytes_of(key, "key")?))
    }

    /// Columns due for a sync.
    #[getter]
    fn due(&self) -> usize {
        self.inner.due()
    }

    #[getter]
    fn rows(&self) -> u32 {
        self.inner.sketch().rows()
    }

    #[getter]
    fn columns(&self) -> u32 {
        self.inner.sketch().columns()
    }

    #[getter]
    fn sketch_id(&self) -> u16 {
        self.inner.sketch_id()
    }

    #[getter]
    fn epoch(&self) -> u32 {
        self.inner.epoch()
    }

    /// Send every due column with `reporter.sketch_merge(sketch_id, column, epoch, data)`, then
    /// `reporter.flush()`; the number of columns sent. A column whose send raises stays due.
    fn sync(&mut self, reporter: &Bound<'_, PyAny>) -> PyResult<usize> {
        let (sketch_id, epoch) = (self.inner.sketch_id(), self.inner.epoch());
        let py = reporter.py();
        let n = self.inner.take_due(|column, data| {
            reporter
                .call_method1(
                    "sketch_merge",
                    (sketch_id, column, epoch, PyBytes::new(py, data)),
                )
                .map(|_| ())
        })?;
        reporter.call_method0("flush")?;
        Ok(n)
    }

    /// Send every column, due or not (a full resync, healing every loss so far), then flush.
    fn sync_all(&mut self, reporter: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.inner.mark_all_due();
        self.sync(reporter)
    }

    /// Start epoch `epoch` from an empty sketch.
    fn next_epoch(&mut self, epoch: u32) {
        self.inner.next_epoch(epoch)
    }
}
