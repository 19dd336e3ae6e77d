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
//!   peer that does not answer is `"reachable": false` with the reason, never a 0; with a
//!   cluster map, every collector's readiness (`/readyz`) too.
//! - `GET /console/history?since_ms=` (token required when one is set): the last hour of the
//!   watched counters as rates and gauges ([`crate::history`]), sampled by the collector.

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

/// The console's files, embedded at build time from `crates/base/dta-http/console/`.
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

/// A collector of the cluster map, whose readiness the console shows.
#[derive(Debug, Clone)]
pub struct Member {
    pub name: String,
    /// Its HTTP address in the map; `None`: the map gives it none (the page says so).
    pub http: Option<SocketAddr>,
}

/// What the console shows beyond the collector's own API.
#[derive(Default)]
pub struct Options {
    /// The processes whose counters it shows and keeps a history of.
    pub peers: Vec<Peer>,
    /// The cluster's collectors (empty without a cluster map).
    pub members: Vec<Member>,
    /// The collector's own exposition (its stores' fill), for the history.
    pub local: Option<Arc<dyn Fn() -> String + Send + Sync>>,
    /// The token the peers are asked with (the collector's own: peers of one deployment share
    /// it).
    pub token: Option<Token>,
}

/// How often, in history steps, the collector's own stores are sampled (their fill is read
/// from the regions).
pub const LOCAL_EVERY: u32 = 10;

#[derive(Clone)]
struct Console {
    peers: Arc<[Peer]>,
    members: Arc<[Member]>,
    token: Option<Token>,
    history: Arc<crate::history::History>,
}

/// Whether `path` is one of the console's static assets (served without a token: they are the
/// same for everyone and hold no data).
pub fn is_asset(path: &str) -> bool {
    path == "/console"
        || path
            .strip_prefix(PREFIX)
            .is_some_and(|n| ASSETS.iter().any(|a| a.name == n))
}

/// The console's routes: the assets under [`PREFIX`], `/console/peers` and
/// `/console/history`; the history's sampler starts here and stops when the router is dropped.
pub fn router(o: Options) -> Router {
    let history = crate::history::History::new();
    let mut sources: Vec<crate::history::Source> = o
        .peers
        .iter()
        .filter_map(|p| {
            p.addr.map(|addr| crate::history::Source::Metrics {
                name: p.name.clone(),
                addr,
            })
        })
        .collect();
    if let Some(encode) = o.local {
        sources.push(crate::history::Source::Local {
            name: "collector".into(),
            every: LOCAL_EVERY,
            encode,
        });
    }
    sources.extend(o.members.iter().filter_map(|m| {
        m.http.map(|addr| crate::history::Source::Ready {
            name: m.name.clone(),
            addr,
        })
    }));
    history.start(sources, o.token.clone());
    let mut r = Router::new().route("/console", get(|| async { Redirect::permanent(PREFIX) }));
    for a in ASSETS {
        r = r.route(
            &format!("{PREFIX}{}", a.name),
            get(move || async move { asset(a) }),
        );
    }
    r.route("/console/peers", get(peers_answer))
        .route("/console/history", get(history_answer))
        .with_state(Console {
            peers: o.peers.into(),
            members: o.members.into(),
            token: o.token,
            history,
        })
        .layer(axum::middleware::map_response(secure))
}

async fn history_answer(
    State(c): State<Console>,
    axum::extract::RawQuery(q): axum::extract::RawQuery,
) -> Response {
    let mut since = 0;
    for (k, v) in url_pairs(q.as_deref().unwrap_or("")) {
        match (k.as_str(), v.parse::<u64>()) {
            ("since_ms", Ok(t)) => since = t,
            ("since_ms", Err(_)) => {
                return crate::error_response(
                    StatusCode::BAD_REQUEST,
                    format!("since_ms {v:?}: expected Unix milliseconds"),
                )
            }
            _ => {
                return crate::error_response(
                    StatusCode::BAD_REQUEST,
                    format!("unknown parameter {k:?}: expected since_ms"),
                )
            }
        }
    }
    Json(c.history.answer(since)).into_response()
}

/// The `key=value` pairs of a query string (no percent-decoding: the one parameter is a number).
fn url_pairs(q: &str) -> impl Iterator<Item = (String, String)> + '_ {
    q.split('&').filter(|p| !p.is_empty()).map(|p| {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        (k.to_owned(), v.to_owned())
    })
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
    let members = c
        .members
        .iter()
        .cloned()
        .map(|m| tokio::task::spawn_blocking(move || member_status(&m)));
    let (asks, members): (Vec<_>, Vec<_>) = (asks.collect(), members.collect());
    let mut out = Vec::with_capacity(asks.len());
    let mut cluster = Vec::with_capacity(members.len());
    for (a, peer) in asks
        .into_iter()
        .map(|a| (a, true))
        .chain(members.into_iter().map(|a| (a, false)))
    {
        match a.await {
            Ok(v) if peer => out.push(v),
            Ok(v) => cluster.push(v),
            Err(e) => {
                return crate::error_response(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
            }
        }
    }
    Json(serde_json::json!({ "peers": out, "collectors": cluster })).into_response()
}

/// A cluster collector's readiness as the page shows it: its `/readyz` answer, or why none.
fn member_status(m: &Member) -> serde_json::Value {
    let Some(addr) = m.http else {
        return serde_json::json!({
            "name": m.name, "http": null, "ready": false,
            "error": "the cluster map gives it no http address",
        });
    };
    let started = std::time::Instant::now();
    match crate::client::get(addr, "/readyz", None, PEER_TIMEOUT) {
        Ok(a) => serde_json::json!({
            "name": m.name, "http": addr.to_string(), "ready": a.status == 200,
            "status": a.status, "answer": String::from_utf8_lossy(&a.body).trim(),
            "ms": started.elapsed().as_millis() as u64,
        }),
        Err(e) => serde_json::json!({
            "name": m.name, "http": addr.to_string(), "ready": false, "error": e.to_string(),
        }),
    }
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
    let all = match crate::exposition::parse_exposition(&text) {
        Ok(x) => x,
        Err(e) => return unreachable(format!("its /metrics does not parse: {e}")),
    };
    let health = health(&all);
    let (samples, dropped) = shown_samples(all, MAX_PEER_SAMPLES);
    serde_json::json!({
        "name": p.name, "addr": addr.to_string(), "configured": true, "reachable": true,
        "health": health, "samples": samples, "dropped": dropped,
    })
}

/// One line of a process's health: a watched counter ([`crate::history::WATCHED`]) since the
/// process started, summed per value of its label, and whether it is a loss (a loss, a shed or
/// a reject above 0: marked bad).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HealthLine {
    /// The chart it belongs to: `ingest`, `int` (intake), `loss`, `shed`, `rejects`, `nacks`.
    pub what: &'static str,
    pub family: &'static str,
    /// The label's value (`priority`, `reason`, `primitive`), when the family has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub value: f64,
    pub bad: bool,
}

/// Charts whose counters count what was lost, shed or refused.
const BAD_CHARTS: [&str; 3] = ["loss", "shed", "rejects"];

/// A process's health from all of its samples: every watched counter it exposes, intake first,
/// then the losses (each per label value); the bad ones are losses above 0.
pub fn health(samples: &[crate::exposition::Sample]) -> Vec<HealthLine> {
    let mut out: Vec<HealthLine> = vec![];
    for w in crate::history::WATCHED {
        if w.kind != crate::history::Kind::Rate || w.chart == "priority" {
            continue;
        }
        let mut by: std::collections::BTreeMap<Option<String>, f64> = Default::default();
        for s in samples.iter().filter(|s| s.name == w.family) {
            *by.entry(w.by.and_then(|l| s.label(l)).map(str::to_owned))
                .or_default() += s.value;
        }
        for (label, value) in by {
            out.push(HealthLine {
                what: w.chart,
                family: w.family,
                label,
                value,
                bad: BAD_CHARTS.contains(&w.chart) && value > 0.0,
            });
        }
    }
    out.sort_by_key(|l| BAD_CHARTS.contains(&l.what));
    out
}

/// The samples of an OpenMetrics or Prometheus text exposition as `name{labels}` and value, at
/// most `max` of them, and how many more there were.
pub fn parse_samples(text: &str, max: usize) -> Result<(Vec<(String, f64)>, usize), String> {
    Ok(shown_samples(
        crate::exposition::parse_exposition(text)?,
        max,
    ))
}

/// `all` as `name{labels}` and value, at most `max`, and how many more there were.
fn shown_samples(all: Vec<crate::exposition::Sample>, max: usize) -> (Vec<(String, f64)>, usize) {
    let dropped = all.len().saturating_sub(max);
    let shown = all
        .into_iter()
        .take(max)
        .map(|s| {
            let mut series = s.name;
            if !s.labels.is_empty() {
                let labels: Vec<String> =
                    s.labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
                series.push('{');
                series.push_str(&labels.join(","));
                series.push('}');
            }
            (series, s.value)
        })
        .collect();
    (shown, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_sums_the_watched_counters_and_marks_losses() {
        let text = "dta_translator_reports_total{primitive=\"kw\"} 10\n\
                    dta_translator_reports_total{primitive=\"kw\",thread=\"1\"} 5\n\
                    dta_translator_lost_total{priority=\"high\"} 0\n\
                    dta_translator_lost_total{priority=\"low\"} 3\n\
                    dta_int_sink_kernel_drops_total 0\n\
                    dta_translator_memory_ops_total{op=\"write\"} 99\n";
        let all = crate::exposition::parse_exposition(text).unwrap();
        let h = health(&all);
        let line = |f: &str, l: Option<&str>| {
            h.iter()
                .find(|x| x.family == f && x.label.as_deref() == l)
                .unwrap_or_else(|| panic!("{f} {l:?}: {h:?}"))
                .clone()
        };
        let kw = line("dta_translator_reports_total", Some("kw"));
        assert_eq!((kw.value, kw.bad, kw.what), (15.0, false, "ingest"));
        assert!(!line("dta_translator_lost_total", Some("high")).bad);
        assert!(line("dta_translator_lost_total", Some("low")).bad);
        assert!(!line("dta_int_sink_kernel_drops_total", None).bad);
        assert!(h
            .iter()
            .all(|x| x.family != "dta_translator_memory_ops_total"));
        assert_eq!(h[0].what, "ingest", "intake first");
        // Health reads every sample, not only those shown.
        let (shown, dropped) = shown_samples(all, 2);
        assert_eq!((shown.len(), dropped), (2, 4));
    }

    #[test]
    fn samples_are_parsed_and_bounded() {
        let text = "# TYPE a counter\na_total 3\nb{x=\"1 2\",y=\"}\"} 4.5 123\n# EOF\n";
        let (s, d) = parse_samples(text, 10).unwrap();
        assert_eq!(
            s,
            vec![
                ("a_total".into(), 3.0),
                ("b{x=\"1 2\",y=\"}\"}".into(), 4.5)
            ]
        );
        assert_eq!(d, 0);
        let (s, d) = parse_samples(text, 1).unwrap();
        assert!(parse_samples("bad x\n", 1).is_err());
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
            router(Options {
                peers: vec![
                    Peer {
                        name: "translator".into(),
                        addr: Some(dead),
                    },
                    Peer {
                        name: "int-sink".into(),
                        addr: None,
                    },
                ],
                members: vec![
                    Member {
                        name: "c1".into(),
                        http: Some(dead),
                    },
                    Member {
                        name: "c2".into(),
                        http: None,
                    },
                ],
                ..Default::default()
            }),
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
            let history = crate::client::get(addr, "/console/history?since_ms=0", None, t).unwrap();
            let bad = crate::client::get(addr, "/console/history?since_ms=soon", None, t).unwrap();
            (page, js, peers, history, bad)
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
        // The cluster's collectors: the dead one not ready with why, the one without an
        // address said so.
        assert_eq!(v["collectors"][0]["name"], "c1", "{v}");
        assert_eq!(v["collectors"][0]["ready"], false, "{v}");
        assert!(v["collectors"][0]["error"]
            .as_str()
            .unwrap()
            .contains(&dead.to_string()));
        assert!(v["collectors"][1]["error"]
            .as_str()
            .unwrap()
            .contains("no http address"));
        assert_eq!(got.3.status, 200);
        let h: serde_json::Value = serde_json::from_slice(&got.3.body).unwrap();
        assert_eq!(h["step_ms"], 1000, "{h}");
        assert_eq!(got.4.status, 400);
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
        let app = crate::app(
            router(Options {
                token: Some(token),
                ..Default::default()
            }),
            &opts,
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let heads = tokio::task::spawn_blocking(move || {
            [
                "/console/",
                "/console/console.css",
                "/console/peers",
                "/console",
                "/console/history",
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
        assert!(heads[4].starts_with("http/1.1 401"), "{}", heads[4]);
    }
}
