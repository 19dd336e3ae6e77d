//! InfluxDB line protocol: `measurement,tag=v,tag=v field=v,field=v timestamp_ns`, one point per
//! line (the format InfluxDB 1.x/2.x, Telegraf and VictoriaMetrics ingest over HTTP, files and
//! UDP). Escaping follows the line protocol reference: in measurements, commas and spaces; in
//! tag keys, tag values and field keys, commas, equals signs and spaces; in string field values,
//! double quotes and backslashes. Integers carry an `i` suffix, unsigned ones too (InfluxDB 1.x
//! has no unsigned type: a `u` suffix is refused there; a value past `i64::MAX` is refused here),
//! floats none. Tags are written sorted by key (what InfluxDB recommends), and tags with an
//! empty value are left out (the protocol has no empty tag values). Newlines cannot be escaped
//! anywhere and NaN/infinite floats cannot be represented: such points are refused with an error.
//!
//! A record's tags are of bounded cardinality (InfluxDB indexes every series for ever); what is
//! unbounded, a flow, is its [`Record::entity`] and goes in as a string field. InfluxDB keeps one
//! point per series and timestamp, and the INT sink stamps every report of one receive batch with
//! the same time: [`SeriesClock`] moves a point whose series and timestamp were used to the next
//! free nanosecond, so no point overwrites another.
//!
//! Targets: a file or stdout ([`LineWriter`]), UDP ([`UdpLineSink`]), and InfluxDB's HTTP write
//! API ([`HttpLineSink`]: `/write?db=` of 1.x, `/api/v2/write?org=&bucket=` of 2.x).

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashSet, VecDeque};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::Duration;

use crate::record::{FieldValue, Record};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LineError {
    #[error("line protocol cannot carry a newline (in {0:?})")]
    Newline(String),
    #[error("point has no fields")]
    NoFields,
    #[error("empty measurement or key")]
    EmptyName,
    #[error("field {0:?} is NaN or infinite")]
    NonFinite(String),
    #[error("field {0:?} is beyond a signed 64-bit integer")]
    OutOfRange(String),
}

fn check(s: &str) -> Result<(), LineError> {
    if s.contains(['\n', '\r']) {
        return Err(LineError::Newline(s.to_owned()));
    }
    Ok(())
}

fn escape(out: &mut String, s: &str, special: &[char]) {
    for c in s.chars() {
        if special.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
}

/// The timestamps the most recent points of each series were written with, so two points of one
/// series never share one: a point whose (series, timestamp) was used is moved to the next free
/// nanosecond. Bounded: it remembers the last [`SeriesClock::REMEMBERED`] points, and looks at most
/// [`SeriesClock::MAX_PROBES`] nanoseconds ahead.
#[derive(Debug, Default)]
pub struct SeriesClock {
    used: HashSet<(u64, u64)>,
    order: VecDeque<(u64, u64)>,
}

impl SeriesClock {
    /// Points remembered (about 48 bytes each).
    pub const REMEMBERED: usize = 1 << 18;
    /// Nanoseconds tried after a used timestamp before writing the point where it is.
    pub const MAX_PROBES: u64 = 4096;

    /// The timestamp to write for a point of `series` stamped `ts`.
    pub fn stamp(&mut self, series: &str, ts: u64) -> u64 {
        let mut h = DefaultHasher::new();
        series.hash(&mut h);
        let h = h.finish();
        let mut t = ts;
        while self.used.contains(&(h, t)) && t - ts < Self::MAX_PROBES && t < u64::MAX {
            t += 1;
        }
        if self.used.insert((h, t)) {
            self.order.push_back((h, t));
            if self.order.len() > Self::REMEMBERED {
                if let Some(old) = self.order.pop_front() {
                    self.used.remove(&old);
                }
            }
        }
        t
    }
}

/// Append one point's line (with the trailing `\n`) to `out`. On error `out` is unchanged.
pub fn write_line(out: &mut String, r: &dyn Record) -> Result<(), LineError> {
    write_point(out, r, None)
}

/// [`write_line`], its timestamp from `clock` when given.
pub fn write_point(
    out: &mut String,
    r: &dyn Record,
    clock: Option<&mut SeriesClock>,
) -> Result<(), LineError> {
    let start = out.len();
    let res = write_line_inner(out, r, start, clock);
    if res.is_err() {
        out.truncate(start);
    }
    res
}

fn write_line_inner(
    out: &mut String,
    r: &dyn Record,
    start: usize,
    clock: Option<&mut SeriesClock>,
) -> Result<(), LineError> {
    let m = r.measurement();
    if m.is_empty() {
        return Err(LineError::EmptyName);
    }
    check(m)?;
    escape(out, m, &[',', ' ']);
    let mut tags = r.tags();
    tags.sort_by(|a, b| a.0.cmp(b.0));
    for (k, v) in &tags {
        check(k)?;
        check(v)?;
        if k.is_empty() {
            return Err(LineError::EmptyName);
        }
        if v.is_empty() {
            continue;
        }
        out.push(',');
        escape(out, k, &[',', '=', ' ']);
        out.push('=');
        escape(out, v, &[',', '=', ' ']);
    }
    let series_end = out.len();
    let mut fields = r.fields();
    if fields.is_empty() {
        return Err(LineError::NoFields);
    }
    if let Some((k, v)) = r.entity() {
        fields.insert(0, (k, FieldValue::Str(v)));
    }
    for (i, (k, v)) in fields.iter().enumerate() {
        check(k)?;
        if k.is_empty() {
            return Err(LineError::EmptyName);
        }
        out.push(if i == 0 { ' ' } else { ',' });
        escape(out, k, &[',', '=', ' ']);
        out.push('=');
        match v {
            FieldValue::Float(f) => {
                if !f.is_finite() {
                    return Err(LineError::NonFinite((*k).to_owned()));
                }
                let _ = write!(out, "{f}");
            }
            FieldValue::Int(n) => {
                let _ = write!(out, "{n}i");
            }
            FieldValue::UInt(n) => {
                if *n > i64::MAX as u64 {
                    return Err(LineError::OutOfRange((*k).to_owned()));
                }
                let _ = write!(out, "{n}i");
            }
            FieldValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            FieldValue::Str(s) => {
                check(s)?;
                out.push('"');
                escape(out, s, &['"', '\\']);
                out.push('"');
            }
        }
    }
    let ts = match clock {
        Some(c) => c.stamp(&out[start..series_end], r.timestamp_ns()),
        None => r.timestamp_ns(),
    };
    let _ = writeln!(out, " {ts}");
    Ok(())
}

/// One point as a line, without the trailing newline.
pub fn to_line(r: &dyn Record) -> Result<String, LineError> {
    let mut s = String::new();
    write_line(&mut s, r)?;
    s.pop();
    Ok(s)
}

/// Writes points as lines to any `Write` (a file, stdout). Points that cannot be represented
/// are counted in `rejected` and skipped.
pub struct LineWriter<W: Write> {
    out: W,
    buf: String,
    clock: SeriesClock,
    /// Points written.
    pub written: u64,
    /// Points refused (see [`LineError`]).
    pub rejected: u64,
}

impl<W: Write> LineWriter<W> {
    pub fn new(out: W) -> Self {
        LineWriter {
            out,
            buf: String::new(),
            clock: SeriesClock::default(),
            written: 0,
            rejected: 0,
        }
    }

    /// Write one point.
    pub fn write(&mut self, r: &dyn Record) -> std::io::Result<()> {
        self.buf.clear();
        match write_point(&mut self.buf, r, Some(&mut self.clock)) {
            Ok(()) => {
                self.out.write_all(self.buf.as_bytes())?;
                self.written += 1;
            }
            Err(e) => {
                tracing::debug!("line protocol: point refused: {e}");
                self.rejected += 1;
            }
        }
        Ok(())
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Sends points as line protocol over UDP (InfluxDB's `[[udp]]` listener, Telegraf's
/// `socket_listener`): lines are packed into datagrams of at most `max_datagram` bytes, never
/// splitting a line; [`UdpLineSink::flush`] sends what is pending.
pub struct UdpLineSink {
    socket: UdpSocket,
    to: SocketAddr,
    max_datagram: usize,
    pending: String,
    line: String,
    clock: SeriesClock,
    /// Points accepted.
    pub written: u64,
    /// Points refused (see [`LineError`]) or longer than a datagram.
    pub rejected: u64,
    /// Datagrams sent.
    pub datagrams: u64,
}

impl UdpLineSink {
    /// Send to `to` from an ephemeral port; datagrams of at most `max_datagram` bytes.
    pub fn new(to: SocketAddr, max_datagram: usize) -> std::io::Result<Self> {
        let bind: SocketAddr = if to.is_ipv4() {
            "0.0.0.0:0".parse().unwrap()
        } else {
            "[::]:0".parse().unwrap()
        };
        Ok(UdpLineSink {
            socket: UdpSocket::bind(bind)?,
            to,
            max_datagram: max_datagram.max(64),
            pending: String::new(),
            line: String::new(),
            clock: SeriesClock::default(),
            written: 0,
            rejected: 0,
            datagrams: 0,
        })
    }

    pub fn write(&mut self, r: &dyn Record) -> std::io::Result<()> {
        self.line.clear();
        let ok = write_point(&mut self.line, r, Some(&mut self.clock)).is_ok();
        if !ok || self.line.len() > self.max_datagram {
            self.rejected += 1;
            return Ok(());
        }
        if self.pending.len() + self.line.len() > self.max_datagram {
            self.flush()?;
        }
        self.pending.push_str(&self.line);
        self.written += 1;
        Ok(())
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            self.socket.send_to(self.pending.as_bytes(), self.to)?;
            self.datagrams += 1;
            self.pending.clear();
        }
        Ok(())
    }
}

impl Drop for UdpLineSink {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// Writes points to InfluxDB's HTTP write API: lines gathered into a body of at most
/// [`HttpLineSink::MAX_BODY`] bytes and `POST`ed at each [`HttpLineSink::flush`] (the export
/// thread's batch) or when the body is full. A refused write (the server down, an error status)
/// is an error with InfluxDB's message; its points are counted in `failed`, not retried.
pub struct HttpLineSink {
    addr: SocketAddr,
    target: String,
    authorization: Option<String>,
    timeout: Duration,
    body: String,
    points: u64,
    line: String,
    clock: SeriesClock,
    /// Points the server took.
    pub written: u64,
    /// Points refused (see [`LineError`]) or larger than a body.
    pub rejected: u64,
    /// Points of writes the server refused or did not answer.
    pub failed: u64,
    /// Write requests the server took.
    pub requests: u64,
}

impl HttpLineSink {
    /// Largest request body (InfluxDB's advice: batches of about 5 000 lines).
    pub const MAX_BODY: usize = 1 << 20;
    /// How long one write may take.
    pub const TIMEOUT: Duration = Duration::from_secs(5);

    /// Write to `url`: `http://HOST:PORT/write?db=DB` (InfluxDB 1.x) or
    /// `http://HOST:PORT/api/v2/write?org=ORG&bucket=BUCKET` (2.x); `HOST` resolved now. With
    /// `token`, each request carries `Authorization: Token TOKEN` (2.x tokens; 1.x takes
    /// `USER:PASSWORD`).
    pub fn new(url: &str, token: Option<String>) -> Result<HttpLineSink, String> {
        if url.starts_with("https://") {
            return Err(format!(
                "{url}: https is not supported (no TLS client here): write to a local InfluxDB \
                 or Telegraf over http://"
            ));
        }
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{url}: expected http://HOST:PORT/write?db=DB"))?;
        let (host, target) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => {
                return Err(format!(
                    "{url}: no path (/write?db=DB or /api/v2/write?...)"
                ))
            }
        };
        if !(target.starts_with("/write?") || target.starts_with("/api/v2/write?")) {
            return Err(format!(
                "{url}: the path is /write?db=DB (InfluxDB 1.x) or /api/v2/write?org=ORG&bucket=B (2.x)"
            ));
        }
        let addr = host
            .to_socket_addrs()
            .map_err(|e| format!("{url}: {host}: {e}"))?
            .next()
            .ok_or_else(|| format!("{url}: {host} has no address"))?;
        if let Some(t) = &token {
            if t.is_empty() || t.bytes().any(|b| b.is_ascii_control()) {
                return Err("the InfluxDB token is empty or has a control character".into());
            }
        }
        Ok(HttpLineSink {
            addr,
            target: target.to_owned(),
            authorization: token.map(|t| format!("Token {t}")),
            timeout: Self::TIMEOUT,
            body: String::new(),
            points: 0,
            line: String::new(),
            clock: SeriesClock::default(),
            written: 0,
            rejected: 0,
            failed: 0,
            requests: 0,
        })
    }

    /// Whether the server answers `GET /ping` (InfluxDB 1.x and 2.x: 204).
    pub fn ping(&self) -> Result<(), String> {
        match dta_http::client::get(self.addr, "/ping", None, self.timeout) {
            Ok(a) if (200..300).contains(&a.status) => Ok(()),
            Ok(a) => Err(format!("GET /ping answered {}", a.status)),
            Err(e) => Err(e.to_string()),
        }
    }

    pub fn write(&mut self, r: &dyn Record) -> std::io::Result<()> {
        self.line.clear();
        let ok = write_point(&mut self.line, r, Some(&mut self.clock)).is_ok();
        if !ok || self.line.len() > Self::MAX_BODY {
            self.rejected += 1;
            return Ok(());
        }
        let mut res = Ok(());
        if self.body.len() + self.line.len() > Self::MAX_BODY {
            res = self.flush();
        }
        self.body.push_str(&self.line);
        self.points += 1;
        res
    }

    /// Send what is gathered. On error the points are counted in `failed` and dropped.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if self.body.is_empty() {
            return Ok(());
        }
        let points = std::mem::take(&mut self.points);
        let sent = dta_http::client::post(
            self.addr,
            &self.target,
            self.authorization.as_deref(),
            "text/plain; charset=utf-8",
            self.body.as_bytes(),
            self.timeout,
        );
        self.body.clear();
        let err = match sent {
            Ok(a) if (200..300).contains(&a.status) => {
                self.written += points;
                self.requests += 1;
                return Ok(());
            }
            Ok(a) => format!(
                "InfluxDB answered {}: {}",
                a.status,
                String::from_utf8_lossy(&a.body[..a.body.len().min(512)]).trim()
            ),
            Err(e) => e.to_string(),
        };
        self.failed += points;
        Err(std::io::Error::other(err))
    }
}

impl Drop for HttpLineSink {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Point;

    #[test]
    fn points_of_one_series_never_share_a_timestamp() {
        let mut c = SeriesClock::default();
        // One receive batch: three points stamped alike, another series untouched.
        assert_eq!(c.stamp("m,node=1", 100), 100);
        assert_eq!(c.stamp("m,node=1", 100), 101);
        assert_eq!(c.stamp("m,node=2", 100), 100);
        // In any order: a later point first, then one of the earlier batch again.
        assert_eq!(c.stamp("m,node=1", 5_000_000), 5_000_000);
        assert_eq!(c.stamp("m,node=1", 100), 102);
        assert_eq!(c.stamp("m,node=1", 101), 103);
        assert_eq!(c.stamp("m,node=1", 99), 99);
        // Bounded memory.
        for i in 0..SeriesClock::REMEMBERED as u64 + 10 {
            c.stamp("s", i * 7);
        }
        assert!(c.used.len() <= SeriesClock::REMEMBERED);
        assert_eq!(c.used.len(), c.order.len());
    }

    #[test]
    fn http_targets_are_checked_before_anything_is_sent() {
        for (url, why) in [
            (
                "https://127.0.0.1:8086/write?db=d",
                "https is not supported",
            ),
            ("127.0.0.1:8086/write?db=d", "expected http://"),
            ("http://127.0.0.1:8086", "no path"),
            (
                "http://127.0.0.1:8086/query?db=d",
                "the path is /write?db=DB",
            ),
        ] {
            let e = HttpLineSink::new(url, None).err().unwrap();
            assert!(e.contains(why), "{url}: {e}");
        }
        assert!(
            HttpLineSink::new("http://127.0.0.1:8086/write?db=d", Some("a\nb".into())).is_err()
        );
        // Nothing listens: the start-up check says so.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let h = HttpLineSink::new(&format!("http://127.0.0.1:{port}/write?db=d"), None).unwrap();
        assert!(h.ping().unwrap_err().contains("refused"));
    }

    #[test]
    fn literal_lines() {
        let p = Point::new("int_event", 1_700_000_000_000_000_000)
            .tag("switch", "7")
            .tag("kind", "threshold")
            .field("value", 1234u64)
            .field("delta", -5i64)
            .field("avg", 2.5)
            .field("e2e", true);
        assert_eq!(
            to_line(&p).unwrap(),
            "int_event,kind=threshold,switch=7 value=1234i,delta=-5i,avg=2.5,e2e=true 1700000000000000000"
        );
    }

    #[test]
    fn escaping_follows_the_reference() {
        // Measurement: commas and spaces; tag keys/values and field keys: also '='; string
        // fields: quotes and backslashes (and nothing else: '=' and ',' stay as they are).
        let p = Point::new("my meas,x=y", 1)
            .tag("tag key", "a,b=c d")
            .tag("empty", "")
            .field("f=k,x y", "say \"hi\" \\o/ a=b,c")
            .field("n", 1.0);
        assert_eq!(
            to_line(&p).unwrap(),
            r#"my\ meas\,x=y,tag\ key=a\,b\=c\ d f\=k\,x\ y="say \"hi\" \\o/ a=b,c",n=1 1"#
        );
    }

    #[test]
    fn refuses_what_cannot_be_written() {
        let nl = Point::new("m", 1).tag("t", "a\nb").field("v", 1u64);
        assert!(matches!(to_line(&nl), Err(LineError::Newline(_))));
        let nan = Point::new("m", 1).field("v", f64::NAN);
        assert_eq!(to_line(&nan), Err(LineError::NonFinite("v".into())));
        assert_eq!(to_line(&Point::new("m", 1)), Err(LineError::NoFields));
        assert_eq!(
            to_line(&Point::new("", 1).field("v", 1u64)),
            Err(LineError::EmptyName)
        );
        // A refused point leaves the buffer as it was.
        let mut s = String::from("x\n");
        assert!(write_line(&mut s, &nan).is_err());
        assert_eq!(s, "x\n");
    }

    #[test]
    fn writer_counts_and_skips() {
        let mut w = LineWriter::new(Vec::new());
        w.write(&Point::new("a", 1).field("v", 1i64)).unwrap();
        w.write(&Point::new("a", 2).field("v", f64::INFINITY))
            .unwrap();
        w.write(&Point::new("b", 3).field("v", 2i64)).unwrap();
        assert_eq!((w.written, w.rejected), (2, 1));
        assert_eq!(
            String::from_utf8(w.into_inner()).unwrap(),
            "a v=1i 1\nb v=2i 3\n"
        );
    }

    #[test]
    fn udp_packs_whole_lines_into_datagrams() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut tx = UdpLineSink::new(rx.local_addr().unwrap(), 100).unwrap();
        // Each line is "m v=NNNNi T\n" = 20 bytes: five fit in a 100-byte datagram.
        for i in 0..12u64 {
            tx.write(&Point::new("m", 1_000_000 + i).field("v", 1000 + i as i64))
                .unwrap();
        }
        tx.flush().unwrap();
        assert_eq!(tx.datagrams, 3);
        let mut lines = Vec::new();
        let mut buf = [0u8; 2048];
        for _ in 0..3 {
            let n = rx.recv(&mut buf).unwrap();
            assert!(n <= 100);
            let s = std::str::from_utf8(&buf[..n]).unwrap();
            assert!(s.ends_with('\n'));
            lines.extend(s.lines().map(str::to_owned));
        }
        assert_eq!(lines.len(), 12);
        assert_eq!(lines[11], "m v=1011i 1000011");
    }
}
