//! `Watcher`: push notifications of a region directory (`dta_store::notify`) as a Python
//! iterator of dicts, the same fields as `dta watch` prints.

use std::path::PathBuf;
use std::time::Duration;

use dta_store::notify::{Cursor, NotifyRing, DEFAULT_CAPACITY};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Subscribe to the notices of region directory `region_dir` (creating its ring if no
/// translator has yet), from now on. Iterating yields one dict per notice (`seq`, `store`,
/// `primitive`, `key`, `list`, `reports`, `unix_ns`); it ends after `timeout` seconds without
/// one (`None`: waits forever, in steps that let Ctrl-C through). `missed` counts notices
/// overwritten before this watcher read them.
#[pyclass(module = "dta._native")]
pub struct Watcher {
    ring: NotifyRing,
    cursor: Cursor,
    timeout: Option<f64>,
}

#[pymethods]
impl Watcher {
    #[new]
    #[pyo3(signature = (region_dir, timeout=None))]
    fn new(region_dir: PathBuf, timeout: Option<f64>) -> PyResult<Self> {
        if let Some(t) = timeout {
            if !(t.is_finite() && t >= 0.0) {
                return Err(PyValueError::new_err(format!(
                    "timeout = {t}: seconds, finite and not negative"
                )));
            }
        }
        let ring = NotifyRing::open_or_create(&region_dir, DEFAULT_CAPACITY)
            .map_err(|e| PyOSError::new_err(e.to_string()))?;
        let cursor = ring.subscribe();
        Ok(Watcher {
            ring,
            cursor,
            timeout,
        })
    }

    #[getter]
    fn missed(&self) -> u64 {
        self.cursor.missed()
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(
        mut slf: PyRefMut<'py, Self>,
        py: Python<'py>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        const STEP: Duration = Duration::from_millis(100);
        let mut waited = Duration::ZERO;
        loop {
            let step = match slf.timeout {
                Some(t) => {
                    let left = Duration::from_secs_f64(t).saturating_sub(waited);
                    if left.is_zero() && waited > Duration::ZERO {
                        return Ok(None);
                    }
                    left.min(STEP)
                }
                None => STEP,
            };
            let this = &mut *slf;
            let (ring, cursor) = (&this.ring, &mut this.cursor);
            let got = py.allow_threads(|| ring.next(cursor, step));
            if let Some(n) = got {
                let d = PyDict::new(py);
                d.set_item("seq", n.seq)?;
                d.set_item("store", n.store)?;
                d.set_item("primitive", dta_store::notify::primitive_name(n.primitive))?;
                d.set_item("key", n.key)?;
                d.set_item("list", n.list)?;
                d.set_item("reports", n.reports)?;
                d.set_item("unix_ns", n.unix_ns)?;
                return Ok(Some(d));
            }
            waited += step;
            py.check_signals()?;
            if slf
                .timeout
                .is_some_and(|t| waited >= Duration::from_secs_f64(t))
            {
                return Ok(None);
            }
        }
    }
}
