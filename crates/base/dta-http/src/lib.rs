//! The one HTTP server set-up shared by every DTA HTTP endpoint (the collector's query API, the
//! translator's and the INT sink's `/metrics`): hyper's HTTP/1 connection driver under an
//! axum router, with
//!
//! - a header-read timeout: a connection that does not deliver a complete request head within
//!   it — a half-sent request, or an idle keep-alive connection between requests — is closed;
//! - a request timeout: a handler that has not answered within it gets 503;
//! - a cap on concurrent connections (further clients wait in the listen backlog) and on each
//!   connection's lifetime;
//! - a cap on the request target's length (414);
//! - access control: an optional bearer token, REQUIRED when the listen address is not
//!   loopback ([`check_access`]); requests without it get 401;
//! - `GET /healthz` (liveness) and `GET /readyz` (readiness), no token needed: they reveal no
//!   telemetry ([`health`]);
//! - a request log: one `tracing` event per request ([`health::log_request`]);
//! - the web console's static assets ([`console`], on the collector only; no token needed:
//!   they hold no data, the page asks the API with the token the operator gives it).
//!
//! Limits are the `DEFAULT_*`/`MAX_*` constants below; `docs/http.md` documents them.

pub mod client;
pub mod console;
pub mod exposition;
pub mod health;
pub mod history;
pub mod metrics;
pub mod openapi;
pub mod secret;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Environment variable holding the bearer token itself.
pub const TOKEN_ENV: &str = "DTA_HTTP_TOKEN";
/// Environment variable naming a file that holds the bearer token.
pub const TOKEN_FILE_ENV: &str = "DTA_HTTP_TOKEN_FILE";
/// A request head (request line and headers) must arrive within this; it is also how long an
/// idle keep-alive connection is kept.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A handler must answer within this, or the client gets 503.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections served at once; more wait in the listen backlog.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// A connection is closed after this long whatever it does (a client that never reads its
/// answer cannot hold a connection slot forever).
pub const DEFAULT_MAX_CONNECTION_AGE: Duration = Duration::from_secs(300);
/// After shutdown, how long requests in flight may take to finish before their connections are
/// dropped.
pub const SHUTDOWN_DRAIN: Duration = Duration::from_secs(5);
/// Longest request target (path and query) accepted; longer is 414.
pub const MAX_URI_LEN: usize = 4096;
/// Longest token file read; a token is at least [`MIN_TOKEN_LEN`] bytes.
pub const MAX_TOKEN_LEN: usize = 4096;
/// Shortest token accepted (after trimming whitespace).
pub const MIN_TOKEN_LEN: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "{addr} is not a loopback address: a bearer token is required to serve on it \
         (set `token_file`, or the environment variable {TOKEN_FILE_ENV} or {TOKEN_ENV}), \
         or bind 127.0.0.1"
    )]
    TokenRequired { addr: SocketAddr },
    #[error("token file {path}: {msg}")]
    TokenFile { path: PathBuf, msg: String },
    #[error("token from {source_name}: {msg}")]
    BadToken { source_name: String, msg: String },
    #[error("cannot resolve {addr:?}: {msg}")]
    Resolve { addr: String, msg: String },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// A bearer token. Its `Debug` does not print it.
#[derive(Clone)]
pub struct Token(Arc<[u8]>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token(<{} bytes>)", self.0.len())
    }
}

impl Token {
    /// A token from its text: surrounding whitespace is trimmed; it must then be
    /// [`MIN_TOKEN_LEN`]..=[`MAX_TOKEN_LEN`] visible ASCII characters (what a header carries).
    pub fn new(text: &str, source_name: &str) -> Result<Token, HttpError> {
        let t = text.trim();
        let bad = |msg: String| HttpError::BadToken {
            source_name: source_name.to_owned(),
            msg,
        };
        if t.len() < MIN_TOKEN_LEN || t.len() > MAX_TOKEN_LEN {
            return Err(bad(format!(
                "{} bytes; a token is {MIN_TOKEN_LEN}..={MAX_TOKEN_LEN} bytes",
                t.len()
            )));
        }
        if !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad(
                "a token is visible ASCII characters only (no spaces)".into()
            ));
        }
        Ok(Token(t.as_bytes().into()))
    }

    /// The token in file `path` (its whole content, trimmed).
    pub fn from_file(path: &Path) -> Result<Token, HttpError> {
        let text = secret::read(path, "token file")
            .map_err(|e| HttpError::TokenFile {
                path: path.to_owned(),
                msg: e.msg,
            })?
            .text;
        Token::new(&text, &path.display().to_string()).map_err(|e| match e {
            HttpError::BadToken { msg, .. } => HttpError::TokenFile {
                path: path.to_owned(),
                msg,
            },
            e => e,
        })
    }

    /// Whether `presented` is this token, in time independent of where they differ.
    pub fn matches(&self, presented: &[u8]) -> bool {
        let t = &self.0;
        // Compare every byte of the token whatever `presented` holds; only the (public) length
        // decides early.
        let mut diff = (t.len() != presented.len()) as u8;
        for (i, &b) in t.iter().enumerate() {
            diff |= b ^ presented.get(i).copied().unwrap_or(!b);
        }
        std::hint::black_box(diff) == 0
    }
}

/// How a server is run. [`Default`] is the `DEFAULT_*` limits and no token.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub header_read_timeout: Duration,
    pub request_timeout: Duration,
    pub max_connections: usize,
    pub max_connection_age: Duration,
    /// Required on every request but `/healthz` and `/readyz` when set.
    pub token: Option<Token>,
    /// What `/readyz` answers.
    pub ready: health::Readiness,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connection_age: DEFAULT_MAX_CONNECTION_AGE,
            token: None,
            ready: health::Readiness::always(),
        }
    }
}

impl ServerOptions {
    /// Default limits; the token from `token_file` if given, else from the file named by
    /// [`TOKEN_FILE_ENV`], else from [`TOKEN_ENV`], else none.
    pub fn with_token_file(token_file: Option<&Path>) -> Result<ServerOptions, HttpError> {
        let token = match token_file {
            Some(p) => Some(Token::from_file(p)?),
            None => match std::env::var_os(TOKEN_FILE_ENV) {
                Some(p) if !p.is_empty() => Some(Token::from_file(Path::new(&p))?),
                _ => match std::env::var(TOKEN_ENV) {
                    Ok(t) if !t.is_empty() => Some(Token::new(&t, TOKEN_ENV)?),
                    _ => None,
                },
            },
        };
        Ok(ServerOptions {
            token,
            ..ServerOptions::default()
        })
    }
}

/// A listen address from the command line: `PORT` alone is `127.0.0.1:PORT` (the default host
/// is loopback, so serving beyond the machine is always spelt out), otherwise `IP:PORT`.
pub fn parse_listen_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse()
        .map_err(|_| format!("{s:?} is neither PORT (on 127.0.0.1) nor IP:PORT"))
}

/// Refuse to serve a non-loopback address without a token.
pub fn check_access(addr: SocketAddr, opts: &ServerOptions) -> Result<(), HttpError> {
    if opts.token.is_none() && !addr.ip().is_loopback() {
        return Err(HttpError::TokenRequired { addr });
    }
    Ok(())
}

/// Resolve `addr`, check every address it names with [`check_access`], and listen on the first.
pub async fn bind(addr: &str, opts: &ServerOptions) -> Result<TcpListener, HttpError> {
    let resolve = |msg: String| HttpError::Resolve {
        addr: addr.to_owned(),
        msg,
    };
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|e| resolve(e.to_string()))?
        .collect();
    let first = *addrs
        .first()
        .ok_or_else(|| resolve("no addresses".into()))?;
    for a in &addrs {
        check_access(*a, opts)?;
    }
    TcpListener::bind(first)
        .await
        .map_err(|source| HttpError::Bind {
            addr: first,
            source,
        })
}

/// `{"error": msg}` with `status`: the one shape of every error answer.
pub fn error_response(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": msg.into() }))).into_response()
}

async fn require_token(State(token): State<Token>, req: Request, next: Next) -> Response {
    if console::is_asset(req.uri().path()) {
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    match presented {
        Some(p) if token.matches(p) => next.run(req).await,
        _ => {
            let mut r = error_response(
                StatusCode::UNAUTHORIZED,
                "missing or wrong `Authorization: Bearer` token",
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            r
        }
    }
}

async fn bound_request(State(timeout): State<Duration>, req: Request, next: Next) -> Response {
    let uri_len = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if uri_len > MAX_URI_LEN {
        return error_response(
            StatusCode::URI_TOO_LONG,
            format!("request target is {uri_len} bytes; at most {MAX_URI_LEN}"),
        );
    }
    match tokio::time::timeout(timeout, next.run(req)).await {
        Ok(r) => r,
        Err(_) => error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("no answer within the request timeout ({timeout:?})"),
        ),
    }
}

/// `routes` with the token check (when `opts.token` is set), `/healthz` and `/readyz`, the
/// request-target and request-time bounds, and the request log: what [`serve`] serves. Exposed
/// for in-process tests and fuzzing.
pub fn app(routes: Router, opts: &ServerOptions) -> Router {
    let routes = match &opts.token {
        Some(t) => routes.layer(middleware::from_fn_with_state(t.clone(), require_token)),
        None => routes,
    };
    routes
        .merge(health::router(opts.ready.clone()))
        .layer(middleware::from_fn_with_state(
            opts.request_timeout,
            bound_request,
        ))
        .layer(middleware::from_fn(health::log_request))
}

/// Serve [`app`]`(routes, opts)` on `listener` until `shutdown` resolves. Connections still
/// open then are dropped with the runtime.
pub async fn serve(
    listener: TcpListener,
    routes: Router,
    opts: ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if let Ok(a) = listener.local_addr() {
        check_access(a, &opts).map_err(std::io::Error::other)?;
    }
    let app = app(routes, &opts);
    let max = opts.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(max));
    // Tells every connection to finish its request in flight and close.
    let (stopping, _) = tokio::sync::watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return Ok(()),
            },
            _ = &mut shutdown => break,
        };
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of descriptors and the like: wait, do not spin, do not flood the log.
                    static ACCEPT: dta_log::Throttle =
                        dta_log::Throttle::new(dta_log::DEFAULT_INTERVAL);
                    dta_log::warn_throttled!(ACCEPT, "accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let svc = TowerToHyperService::new(app.clone());
        let (header_read, age) = (opts.header_read_timeout, opts.max_connection_age);
        let mut stop = stopping.subscribe();
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_read)
                .serve_connection(TokioIo::new(stream), svc);
            let served = async move {
                let mut conn = std::pin::pin!(conn);
                tokio::select! {
                    r = conn.as_mut() => return r,
                    _ = stop.wait_for(|s| *s) => conn.as_mut().graceful_shutdown(),
                }
                conn.await
            };
            match tokio::time::timeout(age, served).await {
                Ok(Err(e)) => tracing::debug!("http connection: {e}"),
                Err(_) => tracing::debug!("http connection closed at its maximum age"),
                Ok(Ok(())) => {}
            }
            drop(permit);
        });
    }
    // Stop accepting; idle connections close now, requests in flight get SHUTDOWN_DRAIN.
    drop(listener);
    let _ = stopping.send(true);
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    if tokio::time::timeout(SHUTDOWN_DRAIN, slots.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("http requests still in flight after {SHUTDOWN_DRAIN:?}; closing them");
    }
    Ok(())
}

/// A server on its own thread and single-threaded runtime, for processes that have no async
/// runtime of their own (the translator's and the INT sink's metrics). Stops when dropped.
pub struct BackgroundServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BackgroundServer {
    /// Listen on `addr` (port 0: any free port, see [`BackgroundServer::local_addr`]) and serve
    /// `routes` with `opts`. Fails, before listening, on a non-loopback `addr` without a token.
    pub fn start(
        addr: SocketAddr,
        routes: Router,
        opts: ServerOptions,
        thread_name: &str,
    ) -> Result<BackgroundServer, HttpError> {
        check_access(addr, &opts)?;
        let bind_err = |source| HttpError::Bind { addr, source };
        let std_listener = std::net::TcpListener::bind(addr).map_err(bind_err)?;
        std_listener.set_nonblocking(true).map_err(bind_err)?;
        let local = std_listener.local_addr().map_err(bind_err)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(bind_err)?;
        let listener = {
            let _g = rt.enter();
            TcpListener::from_std(std_listener).map_err(bind_err)?
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(thread_name.into())
            .spawn(move || {
                let shutdown = async move {
                    let _ = rx.await;
                };
                if let Err(e) = rt.block_on(serve(listener, routes, opts, shutdown)) {
                    tracing::warn!("http server: {e}");
                }
            })
            .map_err(bind_err)?;
        Ok(BackgroundServer {
            addr: local,
            stop: Some(tx),
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for BackgroundServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn listen_addr_defaults_to_loopback() {
        use super::parse_listen_addr;
        assert_eq!(
            parse_listen_addr("9464").unwrap().to_string(),
            "127.0.0.1:9464"
        );
        assert_eq!(
            parse_listen_addr("0.0.0.0:9464").unwrap().to_string(),
            "0.0.0.0:9464"
        );
        assert_eq!(parse_listen_addr("[::1]:1").unwrap().to_string(), "[::1]:1");
        for bad in ["", "70000", "host:1", "1.2.3.4"] {
            assert!(parse_listen_addr(bad).is_err(), "{bad}");
        }
    }

    use super::*;

    #[test]
    fn token_matches_only_itself() {
        let t = Token::new("  0123456789abcdef\n", "test").unwrap();
        assert!(t.matches(b"0123456789abcdef"));
        assert!(!t.matches(b"0123456789abcdeF"));
        assert!(!t.matches(b"0123456789abcde"));
        assert!(!t.matches(b"0123456789abcdef0"));
        assert!(!t.matches(b""));
        assert!(!format!("{t:?}").contains("0123"), "Debug hides the token");
        assert!(Token::new("short", "test").is_err());
        assert!(Token::new("0123456789 abcdef", "test").is_err());
        assert!(Token::new(&"x".repeat(MAX_TOKEN_LEN + 1), "test").is_err());
    }

    #[test]
    fn non_loopback_needs_a_token() {
        let none = ServerOptions::default();
        let with = ServerOptions {
            token: Some(Token::new("0123456789abcdef", "test").unwrap()),
            ..Default::default()
        };
        for a in ["127.0.0.1:1", "[::1]:1"] {
            assert!(check_access(a.parse().unwrap(), &none).is_ok(), "{a}");
        }
        for a in ["0.0.0.0:1", "10.1.2.3:1", "[::]:1"] {
            let e = check_access(a.parse().unwrap(), &none).unwrap_err();
            assert!(e.to_string().contains(TOKEN_FILE_ENV), "{e}");
            assert!(check_access(a.parse().unwrap(), &with).is_ok(), "{a}");
        }
    }

    #[test]
    fn token_file_is_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, "abcdefghijklmnopq\n").unwrap();
        assert!(Token::from_file(&p).unwrap().matches(b"abcdefghijklmnopq"));
        std::fs::write(&p, "").unwrap();
        let e = Token::from_file(&p).unwrap_err();
        assert!(e.to_string().contains(&p.display().to_string()), "{e}");
        assert!(Token::from_file(&dir.path().join("missing")).is_err());
    }

    /// With a token, the probes answer without it (a supervisor asks them), with their reason
    /// when not ready; every other route needs it.
    #[test]
    fn probes_need_no_token_and_everything_else_does() {
        let token = Token::new("0123456789abcdef", "test").unwrap();
        let opts = ServerOptions {
            token: Some(token.clone()),
            ready: health::Readiness::new(|| Err("store kw: region lost".into())),
            ..Default::default()
        };
        let routes = Router::new().route("/metrics", axum::routing::get(|| async { "m" }));
        let s = BackgroundServer::start("127.0.0.1:0".parse().unwrap(), routes, opts, "t").unwrap();
        let get = |path: &str, t: Option<&Token>| {
            client::get(s.local_addr(), path, t, std::time::Duration::from_secs(5)).unwrap()
        };
        assert_eq!(get("/healthz", None).status, 200);
        let r = get("/readyz", None);
        assert_eq!(r.status, 503);
        assert!(String::from_utf8_lossy(&r.body).contains("not ready: store kw: region lost"));
        assert_eq!(get("/metrics", None).status, 401);
        assert_eq!(get("/metrics", Some(&token)).status, 200);
    }
}
