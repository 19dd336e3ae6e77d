//! InfluxDB line protocol: `measurement,tag=v,tag=v field=v,field=v timestamp_ns`, one point per
//! line (the format InfluxDB 1.x/2.x, Telegraf and VictoriaMetrics ingest over HTTP, files and
//! UDP). Escaping follows the line protocol reference: in measurements, commas and spaces; in
//! tag keys, tag values and field keys, commas, equals signs and spaces; in string field values,
//! double quotes and backslashes. Integers carry an `i` suffix, unsigned integers `u`, floats
//! none. Tags are written sorted by key (what InfluxDB recommends), and tags with an empty value
//! are left out (the protocol has no empty tag values). Newlines cannot be escaped anywhere and
//! NaN/infinite floats cannot be represented: such points are refused with an error.

use std::fmt::Write as _;
use std::io::Write;
use std::net::{SocketAddr, UdpSocket};

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

/// Append one point's line (with the trailing `\n`) to `out`. On error `out` is unchanged.
pub fn write_line(out: &mut String, r: &dyn Record) -> Result<(), LineError> {
    let start = out.len();
    let res = write_line_inner(out, r);
    if res.is_err() {
        out.truncate(start);
    }
    res
}

fn write_line_inner(out: &mut String, r: &dyn Record) -> Result<(), LineError> {
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
    let fields = r.fields();
    if fields.is_empty() {
        return Err(LineError::NoFields);
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
                let _ = write!(out, "{n}u");
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
    let _ = writeln!(out, " {}", r.timestamp_ns());
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
            written: 0,
            rejected: 0,
        }
    }

    /// Write one point.
    pub fn write(&mut self, r: &dyn Record) -> std::io::Result<()> {
        self.buf.clear();
        match write_line(&mut self.buf, r) {
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
            written: 0,
            rejected: 0,
            datagrams: 0,
        })
    }

    pub fn write(&mut self, r: &dyn Record) -> std::io::Result<()> {
        self.line.clear();
        if write_line(&mut self.line, r).is_err() || self.line.len() > self.max_datagram {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Point;

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
            "int_event,kind=threshold,switch=7 value=1234u,delta=-5i,avg=2.5,e2e=true 1700000000000000000"
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
