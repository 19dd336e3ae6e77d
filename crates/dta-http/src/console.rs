//! The web console: a read-only page served on the collector's HTTP port under `/console/`
//! (`docs/console.md`).
//!
//! - Its assets (one HTML page, one stylesheet, one script) are embedded in the binary
//!   ([`ASSETS`]): nothing is read from disk, nothing is loaded from elsewhere. They are plain
//!   HTML, CSS and JavaScript with no library: the page must work on a machine with no route to
//!   a CDN, and every line it runs is in this repository to be read.
//! - Every console answer carries [`CSP`], which forbids loading or connecting anywhere but the
//!   collector itself, inline scripts and styles, framing, and form submission.
//! - The assets are public (they hold no data, like `/healthz`); the data the page shows comes
//!   from the query API, which the page asks with the bearer token the operator types in when
//!   the API requires one (kept in the tab's `sessionStorage`).
//! - `GET /console/peers` (token required when one is set): the counters of the translator's and
//!   the INT sink's metrics endpoints ([`Peer`]), asked by the collector (the page may connect to
//!   its own origin only), each within [`PEER_TIMEOUT`], at most [`MAX_PEER_SAMPLES`] samples; a
//!   peer that does not answer is `"reachable": false` with the reason, never a 0.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::Token;

/// The Content-Security-Policy of every console answer: scripts, styles, images and
/// connections from the collector's own origin only; no inline code, no frames, no forms sent
/// anywhere, no plugins.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Where the console is served.
pub const PREFIX: &str = "/console/";

/// One embedded asset: its path under [`PREFIX`], content type, and content.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

/// The console's files, embedded at build time from `crates/dta-http/console/`.
const ASSETS: &[Asset] = &[
    Asset {
        name: "",
        content_type: "text/html; charset=utf-8",
        body: include_str!("../console/index.html"),
    },
    Asset {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../console/console.css"),
    },
    Asset {
        name: "console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../console/console.js"),
    },
];

/// How long the collector waits for a peer's `/metrics`.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(2);
/// Samples of a peer's exposition passed to the page; more are dropped and counted.
pub const MAX_PEER_SAMPLES: usize = 512;

/// A process whose metrics endpoint the console shows.
#[derive(Debug, Clone)]
pub struct Peer {
    /// What the page calls it (`translator`, `int-sink`).
    pub name: String,
    /// Its metrics address; `None`: not configured (the page says so).
    pub addr: Option<SocketAddr>,
}

#[derive(Clone)]
struct Console {
    peers: Arc<[Peer]>,
    token: Option<Token>,
}

/// Whether `path` is one of the console's static assets (served without a token: they are the
/// same for everyone and hold no data).
pub fn is_asset(path: &str) -> bool {
    path == "/console"
        || path
            .strip_prefix(PREFIX)
            .is_some_and(|n| ASSETS.iter().any(|a| a.name == n))
}

/// The console's routes: the assets under [`PREFIX`] and `/console/peers` over `peers`, asked
/// with `token` (the collector's own: peers of one deployment share it).
pub fn router(peers: Vec<Peer>, token: Option<Token>) -> Router {
    let mut r = Router::new().route("/console", get(|| async { Redirect::permanent(PREFIX) }));
    for a in ASSETS {
        r = r.route(
            &format!("{PREFIX}{}", a.name),
            get(move || async move { asset(a) }),
        );
    }
    r.route("/console/peers", get(peers_answer))
        .with_state(Console {
            peers: peers.into(),
            token,
        })
        .layer(axum::middleware::map_response(secure))
}

/// The console's security headers on every console answer.
async fn secure(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

fn asset(a: &'static Asset) -> Response {
    ([(header::CONTENT_TYPE, a.content_type)], a.body).into_response()
}

async fn peers_answer(State(c): State<Console>) -> Response {
    let asks = c.peers.iter().cloned().map(|p| {
        let token = c.token.clone();
        tokio::task::spawn_blocking(move || peer_status(&p, token.as_ref()))
    });
    let mut out = Vec::with_capacity(c.peers.len());
    for a in asks.collect::<Vec<_>>() {
        match a.await {
            Ok(v) => out.push(v),
            Err(e) => {
                return crate::error_response(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
            }
        }
    }
    Json(serde_json::json!({ "peers": out })).into_response()
}

/// One peer's state as the page shows it.
fn peer_status(p: &Peer, token: Option<&Token>) -> serde_json::Value {
    let Some(addr) = p.addr else {
        return serde_json::json!({ "name": p.name, "configured": false });
    };
    let unreachable = |why: String| {
        serde_json::json!({
            "name": p.name, "addr": addr.to_string(), "configured": true,
            "reachable": false, "error": why,
        })
    };
    let a = match crate::client::get(addr, "/metrics", token, PEER_TIMEOUT) {
        Ok(a) => a,
        Err(e) => return unreachable(e.to_string()),
    };
    if a.status != 200 {
        return unreachable(format!("GET /metrics answered {}", a.status));
    }
    let text = String::from_utf8_lossy(&a.body);
    let (samples, dropped) = parse_samples(&text, MAX_PEER_SAMPLES);
    serde_json::json!({
        "name": p.name, "addr": addr.to_string(), "configured": true, "reachable": true,
        "samples": samples, "dropped": dropped,
    })
}

/// The samples (`name{labels} value` lines) of an OpenMetrics or Prometheus text exposition,
/// at most `max` of them, and how many more there were. Lines that are not samples (comments,
/// `# EOF`, malformed values) are skipped.
pub fn parse_samples(text: &str, max: usize) -> (Vec<(String, f64)>, usize) {
    let mut out = Vec::new();
    let mut dropped = 0;
    for l in text.lines() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        // The value follows the series (which may hold spaces inside its label values); an
        // optional timestamp may follow the value.
        let series_end = match l.rfind('}') {
            Some(i) => i + 1,
            None => l.find(' ').unwrap_or(l.len()),
        };
        let (series, rest) = l.split_at(series_end);
        let Some(value) = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        else {
            continue;
        };
        if out.len() < max {
            out.push((series.to_owned(), value));
        } else {
            dropped += 1;
        }
    }
    (out, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_parsed_and_bounded() {
        let text = "# TYPE a counter\na_total 3\nb{x=\"1 2\",y=\"}\"} 4.5 123\nbad x\n# EOF\n";
        let (s, d) = parse_samples(text, 10);
        assert_eq!(
            s,
            vec![
                ("a_total".into(), 3.0),
                ("b{x=\"1 2\",y=\"}\"}".into(), 4.5)
            ]
        );
        assert_eq!(d, 0);
        let (s, d) = parse_samples(text, 1);
        assert_eq!((s.len(), d), (1, 1));
    }

    #[test]
    fn only_the_assets_are_public() {
        for p in [
            "/console",
            "/console/",
            "/console/console.js",
            "/console/console.css",
        ] {
            assert!(is_asset(p), "{p}");
        }
        for p in [
            "/console/peers",
            "/console/x",
            "/stores",
            "/consolex",
            "/console//",
        ] {
            assert!(!is_asset(p), "{p}");
        }
    }

    /// Every answer carries the policy; an unreachable peer is said to be, with the reason; an
    /// unconfigured one too.
    #[tokio::test]
    async fn assets_carry_the_policy_and_dead_peers_are_unreachable() {
        // A port nobody listens on: bound, then closed.
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let app = crate::app(
            router(
                vec![
                    Peer {
                        name: "translator".into(),
                        addr: Some(dead),
                    },
                    Peer {
                        name: "int-sink".into(),
                        addr: None,
                    },
                ],
                None,
            ),
            &crate::ServerOptions::default(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let got = tokio::task::spawn_blocking(move || {
            let t = Duration::from_secs(5);
            let page = crate::client::get(addr, "/console/", None, t).unwrap();
            let js = crate::client::get(addr, "/console/console.js", None, t).unwrap();
            let peers = crate::client::get(addr, "/console/peers", None, t).unwrap();
            (page, js, peers)
        })
        .await
        .unwrap();
        assert_eq!(got.0.status, 200);
        assert!(String::from_utf8_lossy(&got.0.body).contains("console.js"));
        assert_eq!(got.1.status, 200);
        let v: serde_json::Value = serde_json::from_slice(&got.2.body).unwrap();
        assert_eq!(v["peers"][0]["reachable"], false, "{v}");
        assert!(v["peers"][0]["error"]
            .as_str()
            .unwrap()
            .contains(&dead.to_string()));
        assert!(v["peers"][0].get("samples").is_none(), "{v}");
        assert_eq!(v["peers"][1]["configured"], false, "{v}");
    }

    /// The response head of `GET target` from `addr`.
    fn head(addr: SocketAddr, target: &str) -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        r.split("\r\n\r\n").next().unwrap().to_ascii_lowercase()
    }

    /// With a token: the assets are served without it, with the policy; the peers need it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn with_a_token_only_the_assets_are_open_and_all_carry_the_policy() {
        let token = Token::new("0123456789abcdef-console", "test").unwrap();
        let opts = crate::ServerOptions {
            token: Some(token.clone()),
            ..Default::default()
        };
        let app = crate::app(router(vec![], Some(token)), &opts);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let heads = tokio::task::spawn_blocking(move || {
            [
                "/console/",
                "/console/console.css",
                "/console/peers",
                "/console",
            ]
            .map(|t| head(addr, t))
        })
        .await
        .unwrap();
        let csp = format!("content-security-policy: {}", CSP.to_ascii_lowercase());
        assert!(heads[0].starts_with("http/1.1 200"), "{}", heads[0]);
        assert!(heads[0].contains(&csp), "{}", heads[0]);
        assert!(heads[0].contains("text/html"), "{}", heads[0]);
        assert!(heads[1].starts_with("http/1.1 200"), "{}", heads[1]);
        assert!(heads[1].contains(&csp), "{}", heads[1]);
        assert!(heads[2].starts_with("http/1.1 401"), "{}", heads[2]);
        assert!(heads[3].starts_with("http/1.1 308"), "{}", heads[3]);
    }
}
