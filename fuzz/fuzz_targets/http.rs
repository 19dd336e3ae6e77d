//! Arbitrary request targets (path and query string) into the collector's HTTP API, served
//! in-process (`tower::ServiceExt::oneshot` on the router with the shared server layers) over
//! small regions of every store kind: no panic, every answer a status with a bounded body, and
//! libFuzzer's `-malloc_limit_mb` catches an allocation a parameter could inflate.
#![no_main]

use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::http::Request;
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;

use dta_collector::{Collector, StoreConfig};

struct Fixture {
    rt: tokio::runtime::Runtime,
    app: axum::Router,
    _dir: std::path::PathBuf,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("dta-fuzz-http-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let stores: Vec<StoreConfig> = [
            "name = 'kw'\nkind = 'key-write'\nslots = 1024",
            "name = 'ki'\nkind = 'key-increment'\ncounters = 1024",
            "name = 'pc'\nkind = 'postcarding'\nchunks = 1024\nhops = 5\nslot_bits = 32\n\
             redundancy = 2\nkey_len = 4\nvalues = 1024",
            "name = 'ev'\nkind = 'append'\nlists = 2\ncapacity = 64\nbatch = 4",
            "name = 'cm'\nkind = 'sketch-merge'\nsketch = 'count-min'\nrows = 2\ncolumns = 64",
        ]
        .iter()
        .map(|t| toml::from_str(t).unwrap())
        .collect();
        let c = Arc::new(Collector::create(&dir, &stores, false).unwrap());
        let app = dta_http::app(
            dta_collector::http::router(c),
            &dta_http::ServerOptions::default(),
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Fixture { rt, app, _dir: dir }
    })
}

/// Route prefixes the input is appended to, chosen by its first byte, so most inputs reach a
/// handler's parameter parsing rather than the 404 fallback.
const PREFIXES: &[&str] = &[
    "/query/kw/kw?",
    "/query/ki/ki?",
    "/query/postcard/pc?",
    "/query/list/ev?",
    "/query/sketch/cm?",
    "/stores/",
    "/",
    "",
];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Ok(rest) = std::str::from_utf8(rest) else {
        return;
    };
    let target = format!("{}{rest}", PREFIXES[sel as usize % PREFIXES.len()]);
    let Ok(req) = Request::get(target.as_str()).body(Body::empty()) else {
        return;
    };
    let f = fixture();
    let resp = f.rt.block_on(f.app.clone().oneshot(req)).unwrap();
    let status = resp.status().as_u16();
    assert!(
        matches!(status, 200 | 400 | 404 | 405 | 414),
        "{target:?}: status {status}"
    );
    // A stream (`/notifications`, server-sent events) is open by design: its answer is the
    // status and the content type, not a body that ends.
    let streaming = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if streaming {
        assert_eq!(status, 200, "{target:?}");
        return;
    }
    let body = f
        .rt
        .block_on(axum::body::to_bytes(resp.into_body(), 8 << 20))
        .expect("answers are under 8 MiB");
    if status != 200 {
        // Every error carries a message.
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        assert!(
            v["error"].as_str().is_some_and(|m| !m.is_empty()) || status == 405,
            "{target:?}: {status} without an error message"
        );
    }
});
