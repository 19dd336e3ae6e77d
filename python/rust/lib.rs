// Size: the Python module's bindings of the wire crate, one `#[pyfunction]` or class per exported
// name, registered in one `#[pymodule]`.
//! `dta._native`: the PyO3 extension behind the `dta` Python package. It is a thin layer over
//! the Rust core: report encoding and decoding for both DTA wire protocols come from `dta-wire`
//! (`encode_prototype`, the `NativeDatagram` builder, `decode`, the NACK codecs), and read-only
//! queries on region files come from `dta-store` (`Region`). Every rejection raises
//! `dta.WireError` (a `ValueError`) whose message starts with, and whose `reason` attribute is,
//! the counter name of `docs/protocol.md` (`bad_key_len`, `truncated`, ...); a native datagram
//! that cannot take one more report raises `dta.DatagramFull`.

use dta_reporter::flow;
use dta_wire::native::{self, HeaderRepr, Kind, SketchNack};
use dta_wire::prototype::{self, BaseFormat, BaseRepr};
use dta_wire::{Opcode, Priority, Report};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

mod cluster;
mod int;
mod region;
mod sketch;
mod watch;

create_exception!(
    _native,
    WireError,
    PyValueError,
    "A report or datagram the DTA wire protocols reject; `reason` is the counter name."
);
create_exception!(
    _native,
    DatagramFull,
    PyException,
    "The native datagram has no room (bytes or the 255-report limit) for one more report."
);

/// Raise `WireError` for a `dta_wire::Error`, with its reason as message prefix and attribute.
pub(crate) fn wire_err(py: Python<'_>, e: dta_wire::Error, context: &str) -> PyErr {
    reason_err(py, e.reason(), &format!("{e}{context}"))
}

/// Raise `WireError` with an explicit reason (for checks the bindings add themselves).
pub(crate) fn reason_err(py: Python<'_>, reason: &str, detail: &str) -> PyErr {
    let err = WireError::new_err(format!("{reason}: {detail}"));
    // Setting an attribute on a fresh exception instance cannot fail in practice; if it does,
    // the message still names the reason.
    let _ = err.value(py).setattr("reason", reason);
    err
}

/// Bytes-like argument (`bytes`, `bytearray`, `memoryview`, ...) as a byte vector.
pub(crate) fn bytes_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if obj.is_instance_of::<pyo3::types::PyString>() {
        return Err(PyValueError::new_err(format!(
            "{what} must be bytes-like, not str (use bytes.fromhex)"
        )));
    }
    obj.extract::<Vec<u8>>()
        .map_err(|_| PyValueError::new_err(format!("{what} must be bytes-like")))
}

/// A prototype u32 key: an int, or its 4 big-endian bytes.
fn u32_key(obj: &Bound<'_, PyAny>) -> PyResult<[u8; 4]> {
    if let Ok(k) = obj.extract::<u32>() {
        return Ok(k.to_be_bytes());
    }
    let b = bytes_of(obj, "key")?;
    <[u8; 4]>::try_from(b.as_slice()).map_err(|_| {
        reason_err(
            obj.py(),
            "bad_key_len",
            "a prototype key is a u32 (4 bytes)",
        )
    })
}

/// A native key: bytes, or an int sent as its 4 big-endian bytes.
fn native_key(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(k) = obj.extract::<u32>() {
        return Ok(k.to_be_bytes().to_vec());
    }
    bytes_of(obj, "key")
}

fn opcode_of(name: &str) -> PyResult<Opcode> {
    Opcode::from_name(name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "unknown opcode {name:?}: expected key_write, append, key_increment, postcarding or sketch_merge"
        ))
    })
}

fn format_of(name: &str) -> PyResult<BaseFormat> {
    BaseFormat::from_name(name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "base_header must be \"short\" or \"long\", not {name:?}"
        ))
    })
}

fn priority_of(name: &str) -> PyResult<Priority> {
    Priority::from_name(name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "priority must be low, medium or high, not {name:?}"
        ))
    })
}

fn required<'a, 'py>(
    v: &'a Option<Bound<'py, PyAny>>,
    name: &str,
    op: &str,
) -> PyResult<&'a Bound<'py, PyAny>> {
    v.as_ref()
        .ok_or_else(|| PyValueError::new_err(format!("{op} needs `{name}`")))
}

/// Redundancy as a wire byte: values beyond u8 are out of range like 0 or 5.
fn redundancy_of(py: Python<'_>, r: i64) -> PyResult<u8> {
    u8::try_from(r).map_err(|_| wire_err(py, dta_wire::Error::BadRedundancy, ""))
}

/// Encode one prototype datagram ([DTA §4, Figure 4]; byte-exact with the Tofino prototype).
///
/// Fields by opcode (the names of `spec/vectors/prototype.json`):
/// key_write `redundancy, key, data` (4/12/28 bytes); key_increment `redundancy, key, counter`;
/// append `list_id, data` (4 bytes); postcarding `key, hop, data` (the hop's u32 value; `value`
/// is accepted as an alias). `key` is a u32 or its 4 big-endian bytes. The short base header
/// carries neither `seqnum` nor `retransmittable`: passing them with it is an error.
#[pyfunction]
#[pyo3(signature = (opcode, *, base_header="short", immediate=false, seqnum=None, retransmittable=false,
                    redundancy=1, key=None, data=None, counter=None, list_id=None, hop=None, value=None))]
#[allow(clippy::too_many_arguments)]
fn encode_prototype<'py>(
    py: Python<'py>,
    opcode: &str,
    base_header: &str,
    immediate: bool,
    seqnum: Option<u8>,
    retransmittable: bool,
    redundancy: i64,
    key: Option<Bound<'py, PyAny>>,
    data: Option<Bound<'py, PyAny>>,
    counter: Option<u64>,
    list_id: Option<u32>,
    hop: Option<u8>,
    value: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let op = opcode_of(opcode)?;
    let format = format_of(base_header)?;
    if format == BaseFormat::Short && (seqnum.is_some() || retransmittable) {
        return Err(PyValueError::new_err(
            "the short base header carries no seqnum and no retransmittable flag (use base_header=\"long\")",
        ));
    }
    let key_bytes;
    let data_bytes;
    let report = match op {
        Opcode::KeyWrite => {
            key_bytes = u32_key(required(&key, "key", opcode)?)?;
            data_bytes = bytes_of(required(&data, "data", opcode)?, "data")?;
            Report::KeyWrite {
                key: &key_bytes,
                data: &data_bytes,
                redundancy: redundancy_of(py, redundancy)?,
                immediate,
            }
        }
        Opcode::KeyIncrement => {
            key_bytes = u32_key(required(&key, "key", opcode)?)?;
            Report::KeyIncrement {
                key: &key_bytes,
                counter: counter
                    .ok_or_else(|| PyValueError::new_err("key_increment needs `counter`"))?,
                redundancy: redundancy_of(py, redundancy)?,
                immediate,
            }
        }
        Opcode::Append => {
            data_bytes = bytes_of(required(&data, "data", opcode)?, "data")?;
            Report::Append {
                list_id: list_id.ok_or_else(|| PyValueError::new_err("append needs `list_id`"))?,
                data: &data_bytes,
                immediate,
            }
        }
        Opcode::Postcarding => {
            key_bytes = u32_key(required(&key, "key", opcode)?)?;
            let v = match (&data, &value) {
                (Some(_), Some(_)) => {
                    return Err(PyValueError::new_err(
                        "postcarding takes `data` or `value`, not both",
                    ))
                }
                (Some(v), None) | (None, Some(v)) => v,
                (None, None) => {
                    return Err(PyValueError::new_err(
                        "postcarding needs `data` (the hop's u32 value)",
                    ))
                }
            };
            let v = match v.extract::<u32>() {
                Ok(v) => v,
                Err(_) => {
                    let b = bytes_of(v, "data")?;
                    u32::from_be_bytes(<[u8; 4]>::try_from(b.as_slice()).map_err(|_| {
                        reason_err(py, "bad_data_len", "postcarding data is a u32 (4 bytes)")
                    })?)
                }
            };
            Report::Postcard {
                key: &key_bytes,
                hop: hop.ok_or_else(|| PyValueError::new_err("postcarding needs `hop`"))?,
                path_len: 0,
                value: v,
                immediate,
            }
        }
        Opcode::SketchMerge => {
            return Err(wire_err(
                py,
                dta_wire::Error::UnknownOpcode,
                " (sketch_merge is native-only)",
            ))
        }
    };
    let repr = prototype::Repr {
        base: BaseRepr {
            opcode: op,
            seqnum: match format {
                BaseFormat::Short => None,
                BaseFormat::Long => Some(seqnum.unwrap_or(0)),
            },
            immediate,
            retransmittable,
        },
        report,
    };
    let mut buf = [0u8; 64];
    let n = repr
        .emit(&mut buf, format)
        .map_err(|e| wire_err(py, e, ""))?;
    Ok(PyBytes::new(py, &buf[..n]))
}

/// Encode a prototype NACK (`seqnum u8 | N:1 | reserved:7`).
#[pyfunction]
#[pyo3(signature = (seqnum, nack=true))]
fn encode_prototype_nack<'py>(
    py: Python<'py>,
    seqnum: u8,
    nack: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut buf = [0u8; prototype::NackRepr::LEN];
    let n = prototype::NackRepr { seqnum, nack }
        .emit(&mut buf)
        .map_err(|e| wire_err(py, e, ""))?;
    Ok(PyBytes::new(py, &buf[..n]))
}

/// Decode a prototype NACK to `{"seqnum", "nack"}`.
#[pyfunction]
fn decode_prototype_nack<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let b = bytes_of(buf, "buf")?;
    let n = prototype::NackRepr::parse(&b).map_err(|e| wire_err(py, e, ""))?;
    let d = PyDict::new(py);
    d.set_item("seqnum", n.seqnum)?;
    d.set_item("nack", n.nack)?;
    Ok(d)
}

/// Encode a native NACK (kind 1): `sketch` is None or `(sketch_id, column, epoch)`; `missing`
/// the further missing sequence numbers, each 1..=64 after `seq` (not with `sketch`).
#[pyfunction]
#[pyo3(signature = (reporter_id, seq, sketch=None, missing=Vec::new()))]
fn encode_native_nack<'py>(
    py: Python<'py>,
    reporter_id: u32,
    seq: u32,
    sketch: Option<(u16, u16, u32)>,
    missing: Vec<u32>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut bitmap = 0u64;
    for m in missing {
        let d = m.wrapping_sub(seq);
        if !(1..=native::MISSING_BITS).contains(&d) {
            return Err(PyValueError::new_err(format!(
                "missing sequence number {m} is not 1..={} after seq {seq}",
                native::MISSING_BITS
            )));
        }
        bitmap |= 1 << (d - 1);
    }
    let repr = native::NackRepr {
        reporter_id,
        seq,
        sketch: sketch.map(|(sketch_id, column, epoch)| SketchNack {
            sketch_id,
            column,
            epoch,
        }),
        missing: bitmap,
    };
    let mut buf = [0u8; native::HEADER_LEN + native::SKETCH_NACK_LEN];
    let n = repr.emit(&mut buf).map_err(|e| wire_err(py, e, ""))?;
    Ok(PyBytes::new(py, &buf[..n]))
}

/// Encode a congestion notice (kind 2): for `hold_ms` the reporter sends at most `low_rate` /
/// `medium_rate` datagrams per second of those priorities (0: pause, 2**32 - 1: no limit).
#[pyfunction]
fn encode_notice<'py>(
    py: Python<'py>,
    reporter_id: u32,
    hold_ms: u32,
    low_rate: u32,
    medium_rate: u32,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut buf = [0u8; native::NOTICE_LEN];
    let n = native::NoticeRepr {
        reporter_id,
        hold_ms,
        low_rate,
        medium_rate,
    }
    .emit(&mut buf)
    .map_err(|e| wire_err(py, e, ""))?;
    Ok(PyBytes::new(py, &buf[..n]))
}

/// Decode a congestion notice to `{"reporter_id", "hold_ms", "low_rate", "medium_rate"}`.
#[pyfunction]
fn decode_notice<'py>(py: Python<'py>, buf: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let b = bytes_of(buf, "buf")?;
    let n = native::NoticeRepr::parse(&b).map_err(|e| wire_err(py, e, ""))?;
    json_to_py(py, &dta_wire::notice_to_json(&n))
}

/// Decode a native NACK to `{"reporter_id", "seq", "sketch": None | {...}, "missing": [...]}`.
#[pyfunction]
fn decode_native_nack<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let b = bytes_of(buf, "buf")?;
    let n = native::NackRepr::parse(&b).map_err(|e| wire_err(py, e, ""))?;
    json_to_py(py, &dta_wire::nack_to_json(&n))
}

/// A control key from 16 bytes.
fn control_key(key: &[u8]) -> PyResult<dta_wire::auth::ControlKey> {
    <[u8; dta_wire::auth::KEY_LEN]>::try_from(key)
        .map(dta_wire::auth::ControlKey::new)
        .map_err(|_| PyValueError::new_err("a control key is 16 bytes"))
}

/// `message` (a native NACK, congestion notice or hello) authenticated with `key` (16 bytes)
/// and `counter`, as the translator sends it with `[translator] control_key_file`; with `life`,
/// bound to that reporter life as the translator binds messages to a reporter whose hello it
/// heard (docs/protocol.md "Authenticated NACKs and notices").
#[pyfunction]
#[pyo3(signature = (message, key, counter, life=None))]
fn seal_control<'py>(
    py: Python<'py>,
    message: &[u8],
    key: &[u8],
    counter: u64,
    life: Option<u64>,
) -> PyResult<Bound<'py, PyBytes>> {
    let k = control_key(key)?;
    let mut b = [0u8; 64];
    if message.len() < native::HEADER_LEN
        || message.len() > b.len() - dta_wire::auth::BOUND_TRAILER_LEN
    {
        return Err(PyValueError::new_err("not a native control message"));
    }
    b[..message.len()].copy_from_slice(message);
    let n = match life {
        Some(l) => dta_wire::auth::seal_bound(&mut b, message.len(), &k, counter, l),
        None => dta_wire::auth::seal(&mut b, message.len(), &k, counter),
    };
    Ok(PyBytes::new(py, &b[..n]))
}

/// Verify an authenticated control message with `key` (16 bytes) for a reporter whose life is
/// `life` (None: one that announced none): `(message, counter)`, the message without its
/// authenticator; raises `WireError` with `reason` "unauthenticated", "truncated",
/// "bad_authenticator", "unbound" or "stale_life". Replays are the caller's to refuse (by the
/// counter).
#[pyfunction]
#[pyo3(signature = (payload, key, life=None))]
fn open_control<'py>(
    py: Python<'py>,
    payload: &[u8],
    key: &[u8],
    life: Option<u64>,
) -> PyResult<(Bound<'py, PyBytes>, u64)> {
    let k = control_key(key)?;
    let mut out = [0u8; 64];
    match dta_wire::auth::open(payload, &k, life, None, &mut out) {
        Ok(o) => Ok((PyBytes::new(py, &out[..o.len]), o.counter)),
        Err(e) => Err(reason_err(py, e.reason(), &e.to_string())),
    }
}

/// Encode a hello (kind 3): reporter `reporter_id` announces `life`, the random number its
/// control messages are to be bound to. Sent sealed (`seal_control`).
#[pyfunction]
fn encode_hello<'py>(
    py: Python<'py>,
    reporter_id: u32,
    life: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut buf = [0u8; native::HELLO_LEN];
    let n = native::HelloRepr { reporter_id, life }
        .emit(&mut buf)
        .map_err(|e| wire_err(py, e, ""))?;
    Ok(PyBytes::new(py, &buf[..n]))
}

/// Decode a hello to `{"reporter_id", "life"}`.
#[pyfunction]
fn decode_hello<'py>(py: Python<'py>, buf: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let b = bytes_of(buf, "buf")?;
    let h = native::HelloRepr::parse(&b).map_err(|e| wire_err(py, e, ""))?;
    json_to_py(py, &dta_wire::hello_to_json(&h))
}

/// Who holds UDP `port` besides this process (`process 1234 (dta)`), for an error message.
#[pyfunction]
fn udp_port_holder(port: u16) -> String {
    dta_net::port_owner::udp_port_holder(port)
}

/// A signed control message without checking it (a reporter with no key): the message, or
/// None when it is too short to carry an authenticator.
#[pyfunction]
fn strip_control<'py>(py: Python<'py>, payload: &[u8]) -> Option<Bound<'py, PyBytes>> {
    let mut out = [0u8; 64];
    dta_wire::auth::strip(payload, &mut out).map(|n| PyBytes::new(py, &out[..n]))
}

/// Decode one datagram of either protocol (told apart by its first byte) to a dict with every
/// field: the JSON of `dta_wire::to_json` (`protocol`, `header`, `report` or `reports` or
/// `nack`). `base_header` is the configured prototype format.
#[pyfunction]
#[pyo3(signature = (buf, base_header="short"))]
fn decode<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    base_header: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let format = format_of(base_header)?;
    let b = bytes_of(buf, "buf")?;
    let d = dta_wire::parse(&b, format).map_err(|e| wire_err(py, e, ""))?;
    json_to_py(py, &dta_wire::to_json(&d))
}

/// serde_json value to Python objects (integers stay exact: u64 counters included).
pub(crate) fn json_to_py<'py>(
    py: Python<'py>,
    v: &serde_json::Value,
) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(a) => {
            let l = PyList::empty(py);
            for x in a {
                l.append(json_to_py(py, x)?)?;
            }
            l.into_any()
        }
        Value::Object(m) => {
            let d = PyDict::new(py);
            for (k, x) in m {
                d.set_item(k, json_to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// A native-protocol datagram under construction (docs/protocol.md "Native protocol"):
/// reports are validated and emitted by `dta_wire::native::emit_report` into a fixed-capacity
/// buffer; `bytes(d)` is the datagram with its header's count filled in.
#[pyclass(module = "dta._native")]
struct NativeDatagram {
    buf: Vec<u8>,
    len: usize,
    count: u8,
    #[pyo3(get)]
    priority: &'static str,
    #[pyo3(get)]
    retransmittable: bool,
    #[pyo3(get)]
    reporter_id: u32,
    #[pyo3(get, set)]
    seq: u32,
}

/// Largest UDP payload that fits a 1500-byte Ethernet MTU over IPv4 (1500 - 20 - 8).
const DEFAULT_CAPACITY: usize = 1472;

impl NativeDatagram {
    fn push(&mut self, py: Python<'_>, report: &Report<'_>) -> PyResult<usize> {
        // Validity first, so an invalid report is a WireError even when the datagram is full.
        let mut probe = [0u8; native::MAX_REPORT_LEN];
        let n = native::emit_report(report, &mut probe).map_err(|e| wire_err(py, e, ""))?;
        if self.count == u8::MAX {
            return Err(DatagramFull::new_err(
                "a native datagram holds at most 255 reports",
            ));
        }
        if self.len + n > self.buf.len() {
            return Err(DatagramFull::new_err(format!(
                "a {n}-byte report does not fit: {} of {} bytes used",
                self.len,
                self.buf.len()
            )));
        }
        self.buf[self.len..self.len + n].copy_from_slice(&probe[..n]);
        self.len += n;
        self.count += 1;
        Ok(n)
    }

    fn header(&self) -> HeaderRepr {
        HeaderRepr {
            kind: Kind::Reports,
            priority: Priority::from_name(self.priority).unwrap_or_default(),
            retransmittable: self.retransmittable,
            count: self.count,
            reporter_id: self.reporter_id,
            seq: self.seq,
        }
    }
}

#[pymethods]
impl NativeDatagram {
    /// `NativeDatagram(priority=DEFAULT_PRIORITY, retransmittable=False, reporter_id=0, seq=0,
    /// capacity=1472)`: the priority every reporter sends by default ("medium").
    #[new]
    #[pyo3(signature = (priority=None, retransmittable=false, reporter_id=0, seq=0, capacity=DEFAULT_CAPACITY))]
    fn new(
        priority: Option<&str>,
        retransmittable: bool,
        reporter_id: u32,
        seq: u32,
        capacity: usize,
    ) -> PyResult<Self> {
        let p = priority.map_or(Ok(flow::DEFAULT_PRIORITY), priority_of)?;
        if !(native::HEADER_LEN + native::REPORT_HEADER_LEN + native::MIN_DATA_LEN..=65507)
            .contains(&capacity)
        {
            return Err(PyValueError::new_err(format!(
                "capacity must be 20..=65507 bytes (a header and one report; a UDP payload), not {capacity}"
            )));
        }
        Ok(NativeDatagram {
            buf: vec![0; capacity],
            len: native::HEADER_LEN,
            count: 0,
            priority: p.name(),
            retransmittable,
            reporter_id,
            seq,
        })
    }

    /// Add a Key-Write report ([DTA §4] "Key-Write"): key 1..=16 bytes, data 4..=64 bytes.
    /// Returns the report's encoded length.
    #[pyo3(signature = (key, data, redundancy=1, immediate=false))]
    fn key_write(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        redundancy: i64,
        immediate: bool,
    ) -> PyResult<usize> {
        let (key, data) = (native_key(key)?, bytes_of(data, "data")?);
        let r = Report::KeyWrite {
            key: &key,
            data: &data,
            redundancy: redundancy_of(py, redundancy)?,
            immediate,
        };
        self.push(py, &r)
    }

    /// Add a Key-Increment report ([DTA §4] "Key-Increment"): key 1..=16 bytes, u64 counter.
    #[pyo3(signature = (key, counter, redundancy=1, immediate=false))]
    fn key_increment(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        counter: u64,
        redundancy: i64,
        immediate: bool,
    ) -> PyResult<usize> {
        let key = native_key(key)?;
        let r = Report::KeyIncrement {
            key: &key,
            counter,
            redundancy: redundancy_of(py, redundancy)?,
            immediate,
        };
        self.push(py, &r)
    }

    /// Add an Append report ([DTA §4] "Append"): list id, data 4..=64 bytes.
    #[pyo3(signature = (list_id, data, immediate=false))]
    fn append(
        &mut self,
        py: Python<'_>,
        list_id: u32,
        data: &Bound<'_, PyAny>,
        immediate: bool,
    ) -> PyResult<usize> {
        let data = bytes_of(data, "data")?;
        let r = Report::Append {
            list_id,
            data: &data,
            immediate,
        };
        self.push(py, &r)
    }

    /// Add a Postcarding report ([DTA §4] "Postcarding"): flow key, hop, the hop's u32 value,
    /// path length (0 = unknown).
    #[pyo3(signature = (key, hop, value, path_len=0, immediate=false))]
    fn postcard(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hop: u8,
        value: u32,
        path_len: u8,
        immediate: bool,
    ) -> PyResult<usize> {
        let key = native_key(key)?;
        let r = Report::Postcard {
            key: &key,
            hop,
            path_len,
            value,
            immediate,
        };
        self.push(py, &r)
    }

    /// Add a Sketch-Merge column ([DTA-draft §3.1, §4.2]): sketch id, column index, epoch,
    /// counters.
    #[pyo3(signature = (sketch_id, column, epoch, data, immediate=false))]
    fn sketch_merge(
        &mut self,
        py: Python<'_>,
        sketch_id: u16,
        column: u16,
        epoch: u32,
        data: &Bound<'_, PyAny>,
        immediate: bool,
    ) -> PyResult<usize> {
        let data = bytes_of(data, "data")?;
        let r = Report::SketchColumn {
            sketch_id,
            column,
            epoch,
            data: &data,
            immediate,
        };
        self.push(py, &r)
    }

    /// Add a report given as a dict in the schema of `spec/vectors/native.json` (and of
    /// `decode()`): `opcode`, `immediate`, then the primitive's fields, keys/data as hex
    /// strings or bytes.
    fn add(&mut self, py: Python<'_>, report: &Bound<'_, PyDict>) -> PyResult<usize> {
        let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
            report
                .get_item(k)?
                .ok_or_else(|| PyValueError::new_err(format!("report dict needs `{k}`")))
        };
        let hexed = |k: &str| -> PyResult<Vec<u8>> {
            let v = get(k)?;
            match v.extract::<String>() {
                Ok(s) => decode_hex(&s)
                    .ok_or_else(|| PyValueError::new_err(format!("`{k}` is not valid hex: {s:?}"))),
                Err(_) => bytes_of(&v, k),
            }
        };
        let immediate = match report.get_item("immediate")? {
            Some(v) => v.extract::<bool>()?,
            None => false,
        };
        let redundancy = match report.get_item("redundancy")? {
            Some(v) => redundancy_of(py, v.extract::<i64>()?)?,
            None => 1,
        };
        let op: String = get("opcode")?.extract()?;
        let (key, data);
        let r = match opcode_of(&op)? {
            Opcode::KeyWrite => {
                (key, data) = (hexed("key")?, hexed("data")?);
                Report::KeyWrite {
                    key: &key,
                    data: &data,
                    redundancy,
                    immediate,
                }
            }
            Opcode::KeyIncrement => {
                key = hexed("key")?;
                Report::KeyIncrement {
                    key: &key,
                    counter: get("counter")?.extract()?,
                    redundancy,
                    immediate,
                }
            }
            Opcode::Append => {
                data = hexed("data")?;
                Report::Append {
                    list_id: get("list_id")?.extract()?,
                    data: &data,
                    immediate,
                }
            }
            Opcode::Postcarding => {
                key = hexed("key")?;
                Report::Postcard {
                    key: &key,
                    hop: get("hop")?.extract()?,
                    path_len: match report.get_item("path_len")? {
                        Some(v) => v.extract()?,
                        None => 0,
                    },
                    value: get("value")?.extract()?,
                    immediate,
                }
            }
            Opcode::SketchMerge => {
                data = hexed("data")?;
                Report::SketchColumn {
                    sketch_id: get("sketch_id")?.extract()?,
                    column: get("column")?.extract()?,
                    epoch: get("epoch")?.extract()?,
                    data: &data,
                    immediate,
                }
            }
        };
        self.push(py, &r)
    }

    /// Reports added so far.
    #[getter]
    fn count(&self) -> u8 {
        self.count
    }

    /// Buffer capacity (the largest datagram this builder produces).
    #[getter]
    fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Bytes still free for reports.
    #[getter]
    fn remaining(&self) -> usize {
        self.buf.len() - self.len
    }

    /// Remove every report (keeping the header fields; `seq` may be given anew).
    #[pyo3(signature = (seq=None))]
    fn clear(&mut self, seq: Option<u32>) {
        self.len = native::HEADER_LEN;
        self.count = 0;
        if let Some(s) = seq {
            self.seq = s;
        }
    }

    /// The datagram's bytes. Raises `WireError` (`bad_count`) when it holds no report: an empty
    /// datagram is not valid on the wire.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        if self.count == 0 {
            return Err(reason_err(
                py,
                "bad_count",
                "a native datagram needs at least one report",
            ));
        }
        let h = self.header();
        PyBytes::new_with(py, self.len, |out| {
            out.copy_from_slice(&self.buf[..self.len]);
            h.emit(&mut native::Packet::new_unchecked(
                &mut out[..native::HEADER_LEN],
            ));
            Ok(())
        })
    }

    fn __bytes__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.to_bytes(py)
    }

    /// Length in bytes of the datagram so far (header included).
    fn __len__(&self) -> usize {
        self.len
    }

    fn __repr__(&self) -> String {
        format!(
            "NativeDatagram(priority={:?}, retransmittable={}, reporter_id={}, seq={}, count={}, len={})",
            self.priority,
            if self.retransmittable { "True" } else { "False" },
            self.reporter_id,
            self.seq,
            self.count,
            self.len
        )
    }
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

/// Encoded length of one native report, without building it: for batching decisions.
#[pyfunction]
#[pyo3(signature = (opcode, key_len=0, data_len=4))]
fn native_report_len(py: Python<'_>, opcode: &str, key_len: u8, data_len: u8) -> PyResult<usize> {
    let op = opcode_of(opcode)?;
    native::body_len(op as u8, key_len, data_len)
        .map(|b| native::REPORT_HEADER_LEN + b)
        .map_err(|e| wire_err(py, e, ""))
}

/// The `dta._native` module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // The one version: the workspace's (Cargo.toml), which maturin also gives the distribution.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<watch::Watcher>()?;
    m.add("WireError", py.get_type::<WireError>())?;
    m.add("DatagramFull", py.get_type::<DatagramFull>())?;
    m.add("DTA_PORT", dta_wire::DTA_PORT)?;
    m.add("NACK_PORT", dta_wire::NACK_PORT)?;
    m.add("DEFAULT_REDUNDANCY", dta_wire::DEFAULT_REDUNDANCY)?;
    // Every reporter's defaults (dta_reporter::flow), for the pure-Python reporter.
    m.add("DEFAULT_PRIORITY", flow::DEFAULT_PRIORITY.name())?;
    m.add("DEFAULT_RETRANSMIT_BUFFER", flow::DEFAULT_RETRANSMIT_BUFFER)?;
    m.add("DEFAULT_TAIL_PROBES", flow::DEFAULT_TAIL_PROBES)?;
    m.add(
        "DEFAULT_TAIL_PROBE_INTERVAL_MS",
        flow::DEFAULT_TAIL_PROBE_INTERVAL.as_millis() as u64,
    )?;
    m.add(
        "DEFAULT_NACK_HOLDOFF_MS",
        flow::DEFAULT_NACK_HOLDOFF.as_millis() as u64,
    )?;
    m.add("RATE_UNLIMITED", dta_wire::native::RATE_UNLIMITED)?;
    m.add("HELLO_INTERVAL_MS", dta_wire::auth::HELLO_INTERVAL_MS)?;
    m.add("HELLO_RETRY_MS", dta_wire::auth::HELLO_RETRY_MS)?;
    m.add("MAX_REDUNDANCY", dta_wire::MAX_REDUNDANCY)?;
    m.add("DEFAULT_POSTCARD_VALUES", dta_wire::DEFAULT_POSTCARD_VALUES)?;
    m.add("MAX_KEY_LEN", dta_wire::native::MAX_KEY_LEN)?;
    m.add(
        "ERROR_REASONS",
        dta_wire::Error::ALL
            .iter()
            .map(|e| e.reason())
            .collect::<Vec<_>>(),
    )?;
    m.add_function(wrap_pyfunction!(encode_prototype, m)?)?;
    m.add_function(wrap_pyfunction!(encode_prototype_nack, m)?)?;
    m.add_function(wrap_pyfunction!(decode_prototype_nack, m)?)?;
    m.add_function(wrap_pyfunction!(encode_native_nack, m)?)?;
    m.add_function(wrap_pyfunction!(decode_native_nack, m)?)?;
    m.add_function(wrap_pyfunction!(seal_control, m)?)?;
    m.add_function(wrap_pyfunction!(open_control, m)?)?;
    m.add_function(wrap_pyfunction!(strip_control, m)?)?;
    m.add_function(wrap_pyfunction!(udp_port_holder, m)?)?;
    m.add_function(wrap_pyfunction!(encode_notice, m)?)?;
    m.add_function(wrap_pyfunction!(encode_hello, m)?)?;
    m.add_function(wrap_pyfunction!(decode_hello, m)?)?;
    m.add_function(wrap_pyfunction!(decode_notice, m)?)?;
    m.add_function(wrap_pyfunction!(decode, m)?)?;
    m.add_function(wrap_pyfunction!(native_report_len, m)?)?;
    m.add_class::<NativeDatagram>()?;
    m.add_class::<sketch::ApproSync>()?;
    m.add_class::<cluster::ClusterMap>()?;
    m.add_function(wrap_pyfunction!(cluster::cluster_seed, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_score, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_owner, m)?)?;
    region::register(m)?;
    int::register(m)?;
    Ok(())
}
