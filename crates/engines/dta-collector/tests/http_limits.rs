//! The HTTP API under hostile requests: parameters beyond their limits, heavy queries next to
//! cheap ones, half-sent requests, idle connections, tokens and non-loopback binds. Served on
//! ephemeral loopback ports by the tests themselves.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dta_collector::limits::{MAX_LIST_ENTRIES, MAX_POSTCARD_VALUES};
use dta_collector::{Collector, StoreConfig};
use dta_http::{ServerOptions, Token};

fn collector(dir: &std::path::Path) -> Arc<Collector> {
    let stores: Vec<StoreConfig> = [
        "name = 'kw'\nkind = 'key-write'\nslots = 1024",
        "name = 'pc'\nkind = 'postcarding'\nchunks = 1024\nhops = 5\nslot_bits = 32\n\
         redundancy = 2\nkey_len = 4\nvalues = 1024",
        "name = 'ev'\nkind = 'append'\nlists = 2\ncapacity = 64\nbatch = 4",
    ]
    .iter()
    .map(|t| toml::from_str(t).unwrap())
    .collect();
    Arc::new(Collector::create(dir, &stores, false).unwrap())
}

/// A server on a runtime with ONE async worker (so a blocked worker would block everything).
fn start(c: Arc<Collector>, opts: ServerOptions) -> (tokio::runtime::Runtime, SocketAddr) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt.block_on(dta_http::bind("127.0.0.1:0", &opts)).unwrap();
    let addr = listener.local_addr().unwrap();
    let router = dta_collector::http::router(c);
    rt.spawn(dta_http::serve(
        listener,
        router,
        opts,
        std::future::pending(),
    ));
    (rt, addr)
}

fn request(addr: SocketAddr, path: &str, extra_headers: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\n{extra_headers}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status = resp[9..12].parse().unwrap();
    let body = resp.split_once("\r\n\r\n").map_or("", |b| b.1).to_owned();
    (status, body)
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    request(addr, path, "")
}

#[test]
fn parameters_beyond_their_limits_are_400_and_the_server_keeps_answering() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, addr) = start(collector(dir.path()), ServerOptions::default());
    for path in [
        // A 2^32-value Postcarding lookup table: tens of GiB.
        "/query/postcard/pc?key=1&values=4294967295".to_owned(),
        format!(
            "/query/postcard/pc?key=1&values={}",
            MAX_POSTCARD_VALUES + 1
        ),
        "/query/list/ev?max=18446744073709551615".to_owned(),
        format!("/query/list/ev?max={}", MAX_LIST_ENTRIES + 1),
        "/query/list/ev?max=0".to_owned(),
        "/query/kw/kw?key=1&redundancy=200".to_owned(),
        "/query/kw/kw?key=1&redundancy=2&threshold=3".to_owned(),
        "/query/kw/kw?key=1&count=99999999999".to_owned(),
        "/stores?limit=1".to_owned(),
        // Not UTF-8 once percent-decoded: the extractors' own rejections are JSON too.
        "/stores/%FF".to_owned(),
        "/query/kw/%C3?key=1".to_owned(),
        // A threshold above the copies read (the store's N = 2) could never be met.
        "/query/kw/kw?key=1&threshold=3".to_owned(),
        // A parameter given twice: which one would the answer be for?
        "/query/kw/kw?key=1&key=2".to_owned(),
    ] {
        let (s, body) = get(addr, &path);
        assert_eq!(s, 400, "{path}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let msg = v["error"].as_str().unwrap();
        assert!(!msg.is_empty(), "{path}");
    }
    let (s, body) = get(addr, &format!("/stores?x={}", "a".repeat(8000)));
    assert_eq!(s, 414, "{body}");
    let (s, body) = get(addr, "/query/postcard/pc?key=1&values=4294967295");
    assert!(body.contains("values"), "{s} {body}");
    assert_eq!(get(addr, "/healthz"), (200, "ok\n".to_owned()));
    let (s, body) = get(addr, "/query/kw/kw?key=1&redundancy=2");
    assert_eq!(s, 200, "{body}");
    assert!(body.contains("\"status\":\"empty\""), "{body}");
}

#[test]
fn cpu_stall_request_is_rejected_and_a_cheap_query_answers_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, addr) = start(collector(dir.path()), ServerOptions::default());
    // 2^26 values: a 1.2 GiB lookup table and seconds of hashing if it were accepted.
    let stall = std::thread::spawn(move || get(addr, "/query/postcard/pc?key=1&values=67108864"));
    std::thread::sleep(Duration::from_millis(20));
    let (s, body) = get(addr, "/query/kw/kw?key=1&redundancy=2");
    assert_eq!(s, 200, "{body}");
    let (s, body) = stall.join().unwrap();
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("out of range"), "{body}");
}

#[test]
fn cheap_query_answers_while_heavy_queries_run() {
    const HEAVY: usize = 16;
    let dir = tempfile::tempdir().unwrap();
    let (_rt, addr) = start(collector(dir.path()), ServerOptions::default());
    let done = Arc::new(AtomicUsize::new(0));
    let heavy: Vec<_> = (0..HEAVY)
        .map(|_| {
            let done = done.clone();
            std::thread::spawn(move || {
                let path = format!("/query/postcard/pc?key=1&values={MAX_POSTCARD_VALUES}");
                let (s, body) = get(addr, &path);
                done.fetch_add(1, Ordering::SeqCst);
                assert_eq!(s, 200, "{body}");
            })
        })
        .collect();
    // Let the heavy queries reach the server first.
    std::thread::sleep(Duration::from_millis(50));
    let (s, body) = get(addr, "/query/kw/kw?key=1&redundancy=2");
    let finished = done.load(Ordering::SeqCst);
    assert_eq!(s, 200, "{body}");
    assert!(
        finished < HEAVY,
        "the cheap query waited for all {HEAVY} heavy ones"
    );
    for h in heavy {
        h.join().unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), HEAVY);
}

#[test]
fn half_sent_request_is_closed_after_the_header_read_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ServerOptions {
        header_read_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let (_rt, addr) = start(collector(dir.path()), opts);
    for sent in [&b"GET /stores HTTP/1.1\r\nHost:"[..], b""] {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(sent).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut out = vec![];
        // The server closes: read_to_end ends (EOF or reset), it does not time out.
        let r = s.read_to_end(&mut out);
        if let Err(e) = &r {
            assert!(
                !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "still open after 10 s: {e}"
            );
        }
    }
    assert_eq!(get(addr, "/healthz").0, 200);
}

/// The idle connections send nothing: a server that served connections one at a time would
/// hold the scrape until their header read timeout (10 s by default). 5 s is far below that and
/// far above what a loaded machine takes to answer.
#[test]
fn scrape_answers_within_5s_past_50_idle_connections() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, addr) = start(collector(dir.path()), ServerOptions::default());
    assert!(ServerOptions::default().header_read_timeout > Duration::from_secs(5));
    let idle: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out)
        .expect("scrape answered within 5 s");
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains("dta_collector_stores"), "{out}");
    drop(idle);
}

#[test]
fn token_is_required_when_set() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "s3cret-token-of-the-test\n").unwrap();
    let opts = ServerOptions {
        token: Some(Token::from_file(&token_file).unwrap()),
        ..Default::default()
    };
    let (_rt, addr) = start(collector(&dir.path().join("regions")), opts);
    let q = "/query/kw/kw?key=1";
    assert_eq!(request(addr, q, "").0, 401);
    assert_eq!(
        request(
            addr,
            q,
            "Authorization: Bearer s3cret-token-of-the-tesT\r\n"
        )
        .0,
        401
    );
    assert_eq!(
        request(
            addr,
            q,
            "Authorization: Bearer s3cret-token-of-the-test-\r\n"
        )
        .0,
        401
    );
    assert_eq!(
        request(addr, q, "Authorization: Basic s3cret-token-of-the-test\r\n").0,
        401
    );
    assert_eq!(
        request(addr, "/metrics", "Authorization: Bearer wrong\r\n").0,
        401
    );
    let (s, body) = request(
        addr,
        q,
        "Authorization: Bearer s3cret-token-of-the-test\r\n",
    );
    assert_eq!(s, 200, "{body}");
    assert_eq!(get(addr, "/healthz").0, 200, "liveness needs no token");
}

#[test]
fn non_loopback_bind_without_token_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let c = collector(dir.path());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = rt
        .block_on(dta_collector::http::serve_with(
            c.clone(),
            "0.0.0.0:0",
            ServerOptions::default(),
            async {},
        ))
        .unwrap_err();
    assert!(err.to_string().contains("token is required"), "{err}");
    // With a token it starts (and stops at once: the shutdown future is ready).
    let opts = ServerOptions {
        token: Some(Token::new("a-token-of-sixteen-bytes", "test").unwrap()),
        ..Default::default()
    };
    rt.block_on(dta_collector::http::serve_with(
        c,
        "0.0.0.0:0",
        opts,
        async {},
    ))
    .unwrap();
}
