//! Health and request logging shared by every server of [`crate::serve`]:
//!
//! - `GET /healthz`: liveness. The process answers HTTP, so it is alive: always `200 ok`.
//! - `GET /readyz`: readiness. `200 ready` when the server's [`Readiness`] check passes (the
//!   collector: every configured region mapped and readable; a translator or INT sink: its
//!   report socket bound and its regions readable), else `503` with the reason.
//! - a request log: one `tracing` event per request (target [`REQUEST_LOG_TARGET`]) with method,
//!   path (without the query string: keys stay out of the log), status and latency. Answered
//!   requests (scrapes, health checks, the console's polls, queries) at debug, so a console left
//!   open or a scraper does not fill the log; refusals (4xx) at info, failures (5xx) at warn.
//!
//! Neither probe needs the bearer token (a supervisor asks them): they reveal up or down and a
//! reason that names stores, files and free space, never telemetry (docs/security.md).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// The `tracing` target of the request log (`DTA_LOG=dta_http::request=off` silences it).
pub const REQUEST_LOG_TARGET: &str = "dta_http::request";

/// Longest path logged (a longer one is cut): a log line stays bounded whatever is requested.
pub const LOGGED_PATH_MAX: usize = 256;

/// Whether a server's process is ready to serve: `Err(reason)` when not.
#[derive(Clone)]
pub struct Readiness(Arc<dyn Fn() -> Result<(), String> + Send + Sync>);

impl Readiness {
    pub fn new(check: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> Readiness {
        Readiness(Arc::new(check))
    }

    /// Ready as soon as the server answers (a server started only once its process is ready).
    pub fn always() -> Readiness {
        Readiness::new(|| Ok(()))
    }

    pub fn check(&self) -> Result<(), String> {
        (self.0)()
    }
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness::always()
    }
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Readiness(..)")
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(ready): State<Readiness>) -> Response {
    // The check reads region headers (memory already mapped): cheap, but off the async workers.
    match tokio::task::spawn_blocking(move || ready.check()).await {
        Ok(Ok(())) => "ready\n".into_response(),
        Ok(Err(reason)) => crate::error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}"),
        ),
        Err(e) => crate::error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: the readiness check failed: {e}"),
        ),
    }
}

/// `/healthz` and `/readyz` over `ready`.
pub fn router(ready: Readiness) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(ready)
}

/// The request log: one event per request, after its answer.
pub async fn log_request(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path: String = req.uri().path().chars().take(LOGGED_PATH_MAX).collect();
    let start = Instant::now();
    let r = next.run(req).await;
    let status = r.status().as_u16();
    let latency_us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    macro_rules! log {
        ($level:ident) => {
            tracing::$level!(
                target: REQUEST_LOG_TARGET,
                method = %method,
                path = %path,
                status,
                latency_us,
                "request"
            )
        };
    }
    match r.status() {
        s if s.is_server_error() => log!(warn),
        s if s.is_client_error() => log!(info),
        _ => log!(debug),
    }
    r
}
