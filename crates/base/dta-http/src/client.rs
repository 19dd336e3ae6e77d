//! A minimal blocking HTTP/1.1 client, for asking a peer collector's query API (the cluster
//! queries of `dta_collector::cluster`, `GET`) and writing to InfluxDB's HTTP API (`POST`, the
//! INT sink's export thread): one request per connection
//! (`Connection: close`), a connect and an I/O timeout, an answer of at most
//! [`MAX_RESPONSE_BYTES`], a bearer token when given, and one deadline for the whole exchange
//! (connect, send, every read: a peer that trickles bytes cannot hold a request past it). A peer
//! that does not answer in time is [`ClientError::TimedOut`], one that refuses the connection
//! [`ClientError::Refused`]. The peer is another collector, but its
//! answer is still bounded and parsed defensively: a malformed status line, a header section
//! over [`MAX_HEAD_BYTES`] or a body beyond its `Content-Length` is an error, never a panic.
//!
//! Kept by hand rather than hyper's client: callers are blocking threads (the CLI, the console's
//! samplers, the cluster fan-out's workers) and the one deadline over connect, send and every
//! read is what bounds a hung peer; hyper's needs a runtime and per-phase timeouts around it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::Token;

/// Largest answer read (head and body).
pub const MAX_RESPONSE_BYTES: usize = 16 << 20;
/// Largest response head (status line and headers).
pub const MAX_HEAD_BYTES: usize = 16 << 10;
/// Connect, read and write timeout of a request unless told otherwise.
pub const DEFAULT_CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No complete answer before the deadline (the peer is hung, stopped or too slow).
    #[error("http://{addr}{target}: timed out after {:.0} ms", after.as_secs_f64() * 1e3)]
    TimedOut {
        /// The peer.
        addr: SocketAddr,
        /// The request target.
        target: String,
        /// The time the request was given.
        after: Duration,
    },
    /// The peer refused the connection (nothing listens there).
    #[error("http://{addr}{target}: connection refused")]
    Refused {
        /// The peer.
        addr: SocketAddr,
        /// The request target.
        target: String,
    },
    /// Connecting, sending or receiving failed otherwise.
    #[error("http://{addr}{target}: {source}")]
    Io {
        /// The peer.
        addr: SocketAddr,
        /// The request target.
        target: String,
        /// Why.
        source: std::io::Error,
    },
    /// The answer is not HTTP/1.x, or exceeds the limits.
    #[error("http://{addr}{target}: malformed answer: {msg}")]
    Malformed {
        /// The peer.
        addr: SocketAddr,
        /// The request target.
        target: String,
        /// What is wrong.
        msg: String,
    },
}

/// An answer: the status code, the headers and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status code.
    pub status: u16,
    /// The headers, names lower-cased, values trimmed, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Answer {
    /// The value of the first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// `GET target` (path and query, already percent-encoded) from `addr`, answered within
/// `timeout`.
pub fn get(
    addr: SocketAddr,
    target: &str,
    token: Option<&Token>,
    timeout: Duration,
) -> Result<Answer, ClientError> {
    get_until(addr, target, token, Instant::now() + timeout)
}

/// `GET target` from `addr`, answered by `deadline` (connect, send and receive together).
pub fn get_until(
    addr: SocketAddr,
    target: &str,
    token: Option<&Token>,
    deadline: Instant,
) -> Result<Answer, ClientError> {
    let bearer = token.map(|t| format!("Bearer {}", String::from_utf8_lossy(&t.0)));
    exchange(addr, "GET", target, bearer.as_deref(), None, deadline)
}

/// `POST target` to `addr` with `body` of `content_type`, an `Authorization` header when given,
/// answered within `timeout`.
pub fn post(
    addr: SocketAddr,
    target: &str,
    authorization: Option<&str>,
    content_type: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<Answer, ClientError> {
    let deadline = Instant::now() + timeout;
    exchange(
        addr,
        "POST",
        target,
        authorization,
        Some((content_type, body)),
        deadline,
    )
}

/// One request and its answer by `deadline`.
fn exchange(
    addr: SocketAddr,
    method: &str,
    target: &str,
    authorization: Option<&str>,
    body: Option<(&str, &[u8])>,
    deadline: Instant,
) -> Result<Answer, ClientError> {
    let started = Instant::now();
    let io = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => ClientError::TimedOut {
            addr,
            target: target.to_owned(),
            after: deadline.saturating_duration_since(started),
        },
        std::io::ErrorKind::ConnectionRefused => ClientError::Refused {
            addr,
            target: target.to_owned(),
        },
        _ => ClientError::Io {
            addr,
            target: target.to_owned(),
            source,
        },
    };
    // What is left of the deadline; a zero (past) deadline is a timeout, never "no timeout".
    let left = || {
        let d = deadline.saturating_duration_since(Instant::now());
        if d.is_zero() {
            Err(io(std::io::ErrorKind::TimedOut.into()))
        } else {
            Ok(d)
        }
    };
    let bad = |msg: String| ClientError::Malformed {
        addr,
        target: target.to_owned(),
        msg,
    };
    let bad_text = |t: &str| t.bytes().any(|b| b.is_ascii_control() || b == b' ');
    if !target.starts_with('/') || bad_text(target) {
        return Err(bad("the request target must be an encoded path".into()));
    }
    if authorization.is_some_and(|a| a.bytes().any(|b| b.is_ascii_control())) {
        return Err(bad("the Authorization value has a control character".into()));
    }
    let mut s = TcpStream::connect_timeout(&addr, left()?).map_err(io)?;
    s.set_write_timeout(Some(left()?)).map_err(io)?;
    let _ = s.set_nodelay(true);
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(a) = authorization {
        req.push_str("Authorization: ");
        req.push_str(a);
        req.push_str("\r\n");
    }
    if let Some((content_type, b)) = body {
        req.push_str(&format!(
            "Content-Type: {content_type}\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).map_err(io)?;
    if let Some((_, b)) = body {
        s.write_all(b).map_err(io)?;
    }
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 16 << 10];
    loop {
        s.set_read_timeout(Some(left()?)).map_err(io)?;
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        }
        if buf.len() > MAX_RESPONSE_BYTES {
            return Err(bad(format!("more than {MAX_RESPONSE_BYTES} bytes")));
        }
    }
    let head_end = buf
        .windows(4)
        .take(MAX_HEAD_BYTES)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad(format!("no end of head within {MAX_HEAD_BYTES} bytes")))?;
    let head =
        std::str::from_utf8(&buf[..head_end]).map_err(|_| bad("head is not UTF-8".into()))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let (version, code) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    if !version.starts_with("HTTP/1.") || code.len() != 3 {
        return Err(bad(format!("status line {status_line:?}")));
    }
    let status: u16 = code
        .parse()
        .map_err(|_| bad(format!("status line {status_line:?}")))?;
    let mut content_length = None;
    let mut chunked = false;
    let mut headers = vec![];
    for l in lines {
        let Some((name, value)) = l.split_once(':') else {
            return Err(bad(format!("header line {l:?}")));
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        if name.eq_ignore_ascii_case("content-length") {
            content_length = Some(
                value
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| bad(format!("Content-Length {value:?}")))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.trim().eq_ignore_ascii_case("chunked");
            if !chunked {
                return Err(bad(format!("Transfer-Encoding {value:?}")));
            }
        }
    }
    let body = &buf[head_end + 4..];
    if chunked {
        return Ok(Answer {
            status,
            headers,
            body: dechunk(body).map_err(bad)?,
        });
    }
    let body = match content_length {
        Some(n) if n > body.len() => return Err(bad(format!("{} of {n} body bytes", body.len()))),
        Some(n) => &body[..n],
        None => body,
    };
    Ok(Answer {
        status,
        headers,
        body: body.to_vec(),
    })
}

/// The body of a `Transfer-Encoding: chunked` answer (RFC 9112 §7.1): hex sizes, each chunk,
/// a zero-size chunk last; extensions and trailers ignored. Never longer than `b`.
fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(b.len());
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk size line without its end")?;
        let line = std::str::from_utf8(&b[..eol]).map_err(|_| "a chunk size is not text")?;
        let hex = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(hex, 16).map_err(|_| format!("chunk size {hex:?}"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 || &b[size..size + 2] != b"\r\n" {
            return Err(format!("a chunk of {size} bytes cut short"));
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A one-shot server answering `raw` to the first request; its address.
    fn serve(raw: &'static [u8]) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(raw);
        });
        addr
    }

    fn ask(raw: &'static [u8]) -> Result<Answer, ClientError> {
        get(
            serve(raw),
            "/query/kw/kw?key=1",
            None,
            Duration::from_secs(5),
        )
    }

    #[test]
    fn answers_are_read_to_their_length() {
        let a =
            ask(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nDta-Collector:  c1 \r\n\r\n{}trailing")
                .unwrap();
        assert_eq!((a.status, &a.body[..]), (200, &b"{}"[..]));
        assert_eq!(
            (a.header("dta-collector"), a.header("x")),
            (Some("c1"), None)
        );
        // Chunked, as InfluxDB answers queries: the chunks joined, extensions ignored.
        let a = ask(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\n{\"a\r\n2\r\n\":\r\n2\r\n1}\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(&a.body[..], &b"{\"a\":1}"[..]);
        let a =
            ask(b"HTTP/1.1 404 Not Found\r\nconnection: close\r\n\r\n{\"error\":\"x\"}").unwrap();
        assert_eq!((a.status, &a.body[..]), (404, &b"{\"error\":\"x\"}"[..]));
    }

    #[test]
    fn malformed_answers_are_errors() {
        for raw in [
            &b"SMTP 220 hello\r\n\r\n"[..],
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{}\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}",
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n",
        ] {
            let raw: &'static [u8] = raw;
            assert!(
                matches!(ask(raw), Err(ClientError::Malformed { .. })),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
        let nobody = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let e = get(nobody, "/x", None, Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, ClientError::Refused { .. }), "{e:?}");
        assert!(e.to_string().ends_with("/x: connection refused"), "{e}");
        assert!(matches!(
            get(nobody, "/x y", None, Duration::from_secs(1)),
            Err(ClientError::Malformed { .. })
        ));
    }

    /// A peer that accepts and then says nothing, or trickles a byte at a time, costs one
    /// deadline, not a timeout per read.
    #[test]
    fn hung_and_trickling_peers_time_out_at_the_deadline() {
        let hung = TcpListener::bind("127.0.0.1:0").unwrap();
        let trickle = TcpListener::bind("127.0.0.1:0").unwrap();
        let trickle_addr = trickle.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = trickle.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            for b in b"HTTP/1.1 200 OK\r\nX-Padding: ".iter().cycle().take(200) {
                if s.write_all(&[*b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        for addr in [hung.local_addr().unwrap(), trickle_addr] {
            let t0 = std::time::Instant::now();
            let e = get(addr, "/q", None, Duration::from_millis(600)).unwrap_err();
            let took = t0.elapsed();
            assert!(matches!(e, ClientError::TimedOut { .. }), "{e:?}");
            assert!(e.to_string().contains("timed out after 600 ms"), "{e}");
            assert!(took < Duration::from_millis(3000), "{took:?}");
        }
        // A deadline already past is a timeout at once.
        let e = get_until(trickle_addr, "/q", None, std::time::Instant::now()).unwrap_err();
        assert!(matches!(e, ClientError::TimedOut { .. }), "{e:?}");
    }
}
