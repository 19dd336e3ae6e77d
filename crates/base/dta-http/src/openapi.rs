//! The OpenAPI 3.1 documents of the HTTP servers (`schemas/openapi/`, shipped in the package as
//! `/usr/share/dta/schemas/openapi/`), each served by its server at `GET /openapi.json`:
//! [`COLLECTOR`] by the collector (its query, INT, cluster, console, metrics and health routes),
//! [`METRICS`] by the translator's, INT sink's and exporters' metrics endpoints. The tests run
//! schemathesis against running servers with them (`python/tests/test_openapi.py`).

use axum::http::header;
use axum::routing::get;
use axum::Router;

/// The collector's API.
pub const COLLECTOR: &str = include_str!("../../../../schemas/openapi/collector.json");
/// A metrics endpoint (`/metrics`, `/healthz`, `/readyz`).
pub const METRICS: &str = include_str!("../../../../schemas/openapi/metrics.json");

/// `GET /openapi.json` answering `document`.
pub fn router(document: &'static str) -> Router {
    Router::new().route(
        "/openapi.json",
        get(move || async move { ([(header::CONTENT_TYPE, "application/json")], document) }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documents_are_openapi_3_1_json_with_their_paths() {
        for (doc, paths) in [
            (
                COLLECTOR,
                &["/stores", "/query/kw/{name}", "/int/network", "/metrics"][..],
            ),
            (
                METRICS,
                &["/metrics", "/healthz", "/readyz", "/openapi.json"][..],
            ),
        ] {
            let v: serde_json::Value = serde_json::from_str(doc).unwrap();
            assert_eq!(v["openapi"], "3.1.0");
            for p in paths {
                assert!(v["paths"].get(p).is_some(), "{p}");
            }
        }
    }
}
