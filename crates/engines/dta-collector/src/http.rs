//! The HTTP query API (read-only): JSON answers to the same queries as `dta query`.
//!
//! | route | answer |
//! | --- | --- |
//! | `GET /stores` | every store's inspection |
//! | `GET /stores/{name}` | one store's inspection |
//! | `GET /query/kw/{name}?key=K&redundancy=4&threshold=1` | [`KeyWriteResult`](crate::query::KeyWriteResult) |
//! | `GET /query/ki/{name}?key=K&redundancy=4&window=W` | [`KeyIncrementResult`](crate::query::KeyIncrementResult) (`window`: `current`, `all`, `last:5m`, `at:UNIX_MS`) |
//! | `GET /query/postcard/{name}?key=K&values=N` | [`PostcardResult`](crate::query::PostcardResult) |
//! | `GET /query/list/{name}?list=L&tail=T&max=M` | [`ListResult`](crate::query::ListResult) |
//! | `GET /query/sketch/{name}?key=K` | [`SketchResult`](crate::query::SketchResult) |
//! | `GET /cluster/query/{kw,ki,postcard,list,sketch}/{name}?...` | the same, answered by the key's owner(s) in the cluster map ([`crate::cluster`]) |
//! | `GET /cluster/batch/{kw,ki,postcard}/{name}?keys=K1,K2,...` | `{"answers": [...]}`, the owners asked in parallel |
//! | `GET /local/batch/{kw,ki,postcard}/{name}?keys=K1,K2,...` | `{"answers": [...]}` from this collector's own regions (what a cluster peer forwards to) |
//! | `GET /metrics` | Prometheus exposition of the stores ([`crate::metrics`]) |
//! | `GET /healthz` | liveness (`ok`) |
//!
//! Errors are `{"error": "..."}` with status 400 (bad request: a parameter unknown, malformed or
//! beyond its limit in [`crate::limits`]), 401 (token), 404 (no such store) or 503 (timeout, or
//! the store's region is bad or was lost while served; `GET /stores` lists it with
//! `"available": false` and the reason). The server (timeouts, connection cap, token) is the
//! shared [`dta_http`] set-up.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tokio::sync::Semaphore;

use crate::cluster::{Ask, ClusterQuery, ClusterQueryError, MAX_BATCH_KEYS};
use crate::collector::{Collector, CollectorError};
use crate::limits::{ParamError, Params, MAX_HEAVY_QUERIES};
use crate::query::{self, QueryError};

/// The query string's parameters; one that cannot be decoded, or given twice, is 400 with a JSON
/// message, as every other error. Public for the routes other crates add to the API.
pub struct Raw(pub HashMap<String, String>);

#[axum::async_trait]
impl<S: Send + Sync> FromRequestParts<S> for Raw {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(pairs) = Query::<Vec<(String, String)>>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError(StatusCode::BAD_REQUEST, e.body_text()))?;
        // A parameter given twice is ambiguous (which one would the answer be for?): refused.
        let mut m = HashMap::with_capacity(pairs.len());
        for (k, v) in pairs {
            if m.contains_key(&k) {
                return Err(ApiError(
                    StatusCode::BAD_REQUEST,
                    format!("parameter `{k}` is given more than once"),
                ));
            }
            m.insert(k, v);
        }
        Ok(Raw(m))
    }
}

/// The `{name}` of a route; one that cannot be decoded is 400 with a JSON message.
pub struct Name(pub String);

#[axum::async_trait]
impl<S: Send + Sync> FromRequestParts<S> for Name {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(n)| Name(n))
            .map_err(|e| ApiError(StatusCode::BAD_REQUEST, e.body_text()))
    }
}

/// An error answer: its status and message (`{"error": message}`).
pub struct ApiError(pub StatusCode, pub String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        dta_http::error_response(self.0, self.1)
    }
}

impl ApiError {
    /// 400 with `msg`: a parameter the query cannot take (the INT queries' errors too).
    pub fn bad_request(msg: impl std::fmt::Display) -> ApiError {
        ApiError(StatusCode::BAD_REQUEST, msg.to_string())
    }
}

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> Self {
        let code = match e {
            QueryError::NotMerged(_) => StatusCode::NOT_FOUND,
            QueryError::WrongKind { .. }
            | QueryError::BadKey { .. }
            | QueryError::Store(_)
            | QueryError::Invalid(_) => StatusCode::BAD_REQUEST,
        };
        ApiError(code, e.to_string())
    }
}

impl From<ClusterQueryError> for ApiError {
    fn from(e: ClusterQueryError) -> Self {
        let code = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        ApiError(code, e.to_string())
    }
}

impl From<ParamError> for ApiError {
    fn from(e: ParamError) -> Self {
        ApiError(StatusCode::BAD_REQUEST, e.to_string())
    }
}

impl From<CollectorError> for ApiError {
    fn from(e: CollectorError) -> Self {
        let code = match e {
            CollectorError::NoSuchStore { .. } => StatusCode::NOT_FOUND,
            CollectorError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(code, e.to_string())
    }
}

/// The API's state: the collector, the slots of heavy queries, and the cluster queries when
/// the collector serves a cluster map.
#[derive(Clone)]
struct Api {
    c: Arc<Collector>,
    heavy: HeavySlots,
    cluster: Option<Arc<ClusterQuery>>,
    decode: query::RecordDecoder,
}

/// The slots of heavy queries (table scans, bucket reads, metrics): at most
/// [`MAX_HEAVY_QUERIES`] run at once, on the blocking pool, so the executor keeps answering
/// cheap queries meanwhile.
#[derive(Clone)]
pub struct HeavySlots(Arc<Semaphore>);

impl Default for HeavySlots {
    fn default() -> Self {
        HeavySlots(Arc::new(Semaphore::new(MAX_HEAVY_QUERIES)))
    }
}

impl HeavySlots {
    /// Run `f` over `c` once a slot is free. The slot is held until `f` returns, even if the
    /// client has gone.
    pub async fn run<T: Send + 'static>(
        &self,
        c: &Arc<Collector>,
        f: impl FnOnce(&Arc<Collector>) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let permit =
            self.0.clone().acquire_owned().await.map_err(|_| {
                ApiError(StatusCode::SERVICE_UNAVAILABLE, "shutting down".to_owned())
            })?;
        let c = c.clone();
        tokio::task::spawn_blocking(move || {
            let r = f(&c);
            drop(permit);
            r
        })
        .await
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
    }
}

impl FromRef<Api> for Arc<Collector> {
    fn from_ref(a: &Api) -> Arc<Collector> {
        a.c.clone()
    }
}

impl Api {
    /// [`HeavySlots::run`] over this API's collector.
    async fn heavy<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Arc<Collector>) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        self.heavy.run(&self.c, f).await
    }
}

impl HeavySlots {
    /// The shape of every store query of the API, the collector's and the INT sink's: store
    /// `name` is looked up first (an unknown or lost store answers its error before any work is
    /// queued), then `f` reads its region off the executor within the bound, and the answer
    /// is [`served`].
    pub async fn on_store<T: Send + 'static>(
        &self,
        c: &Arc<Collector>,
        name: String,
        f: impl FnOnce(&Collector, &crate::Store) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<Json<T>, ApiError> {
        c.store(&name)?;
        self.run(c, move |c| {
            let answer = f(c, c.store(&name)?)?;
            served(c, &name, answer)
        })
        .await
    }
}

/// `answer` to a query on store `name`, unless its region was lost while the query read it (a
/// truncated file reads as zeros, `dta_store::guard`): then the store's error.
pub fn served<T>(c: &Collector, name: &str, answer: T) -> Result<Json<T>, ApiError> {
    c.store(name)?;
    Ok(Json(answer))
}

fn key_of(c: &Collector, name: &str, p: &Params) -> Result<Vec<u8>, ApiError> {
    let store = c.store(name)?;
    let raw = p.raw("key").ok_or(ParamError::Missing("key"))?;
    Ok(query::parse_key(
        raw,
        query::key_len(store.region.header()),
    )?)
}

async fn stores(State(a): State<Api>, Raw(raw): Raw) -> Result<Json<serde_json::Value>, ApiError> {
    Params::new(&raw, &[])?;
    a.heavy(|c| {
        let mut out = vec![];
        for st in c.status() {
            let path = st.path.display().to_string();
            let inspected = st.available.clone().and_then(|()| {
                let s = c.store(&st.name).map_err(|e| e.to_string())?;
                let i = query::inspect(&s.region, &path).map_err(|e| e.to_string())?;
                // Lost while inspected: its figures are zeros, not data.
                c.store(&st.name).map_err(|e| e.to_string())?;
                serde_json::to_value(i).map_err(|e| e.to_string())
            });
            out.push(match inspected {
                Ok(mut v) => {
                    v["available"] = true.into();
                    v
                }
                Err(reason) => serde_json::json!({
                    "name": st.name,
                    "path": path,
                    "available": false,
                    "error": reason,
                }),
            });
        }
        Ok(Json(serde_json::Value::Array(out)))
    })
    .await
}

async fn store(
    State(a): State<Api>,
    Name(name): Name,
    Raw(raw): Raw,
) -> Result<Json<query::Inspection>, ApiError> {
    Params::new(&raw, &[])?;
    a.heavy
        .on_store(&a.c, name, |_, s| {
            Ok(query::inspect(&s.region, &s.path.display().to_string())?)
        })
        .await
}

async fn kw(
    State(a): State<Api>,
    Name(name): Name,
    Raw(raw): Raw,
) -> Result<Json<query::KeyWriteResult>, ApiError> {
    let p = Params::new(&raw, &["key", "redundancy", "threshold"])?;
    let redundancy = p.redundancy()?;
    let threshold = p.threshold(redundancy)?;
    let key = key_of(&a.c, &name, &p)?;
    let r = &a.c.store(&name)?.region;
    served(
        &a.c,
        &name,
        query::key_write(r, &key, redundancy, threshold)?,
    )
}

async fn ki(
    State(a): State<Api>,
    Name(name): Name,
    Raw(raw): Raw,
) -> Result<Json<query::KeyIncrementResult>, ApiError> {
    let p = Params::new(&raw, &["key", "redundancy", "window"])?;
    let redundancy = p.redundancy()?;
    let window = p.window()?;
    let key = key_of(&a.c, &name, &p)?;
    let r = &a.c.store(&name)?.region;
    served(
        &a.c,
        &name,
        query::key_increment_in(r, &key, redundancy, window)?,
    )
}

async fn postcard(
    State(a): State<Api>,
    Name(name): Name,
    Raw(raw): Raw,
) -> Result<Json<query::PostcardResult>, ApiError> {
    let p = Params::new(&raw, &["key", "values"])?;
    let key = key_of(&a.c, &name, &p)?;
    let s = a.c.store(&name)?;
    let default_values = s
        .config
        .as_ref()
        .and_then(|c| c.values)
        .unwrap_or(dta_wire::DEFAULT_POSTCARD_VALUES);
    let values = p.postcard_values(default_values)?;
    a.heavy
        .on_store(&a.c, name, move |_, s| {
            Ok(query::postcard(&s.region, &key, values)?)
        })
        .await
}

async fn list(
    State(a): State<Api>,
    Name(name): Name,
    Raw(raw): Raw,
) -> Result<Json<query::ListResult>, ApiError> {
    let p = Params::new(&raw, &["list", "tail", "max"])?;
    let r = &a.c.store(&name)?.region;
    let entry_len = match &r.header().spec {
        dta_store::StoreSpec::Append(s) => s.entry_len as usize,
        // The query names the kind mismatch.
        _ => 1,
    };
    let list = p.bounded("list", Some(0u32), 0, u32::MAX)?;
    let tail = p.opt_u64("tail")?;
    let max = p.list_max(entry_len)?;
    let decode = a.decode;
    a.heavy
        .on_store(&a.c, name, move |_, s| {
            Ok(query::list(&s.region, list, tail, max, decode)?)
        })
        .await
}

async fn sketch(
    State(a): State<Api>,
    Name(name): Name,
    Raw(raw): Raw,
) -> Result<Json<query::SketchResult>, ApiError> {
    let p = Params::new(&raw, &["key"])?;
    let s = a.c.store(&name)?;
    let key = match p.raw("key") {
        Some(k) => Some(query::parse_key(k, query::key_len(s.region.header()))?),
        None => None,
    };
    served(&a.c, &name, query::sketch(&s.region, key.as_deref())?)
}

/// `{kind}/{name}` of a cluster route.
struct KindName(String, String);

#[axum::async_trait]
impl<S: Send + Sync> FromRequestParts<S> for KindName {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map(|Path((k, n))| KindName(k, n))
            .map_err(|e| ApiError(StatusCode::BAD_REQUEST, e.body_text()))
    }
}

fn cluster_of(a: &Api) -> Result<Arc<ClusterQuery>, ApiError> {
    a.cluster.clone().ok_or_else(|| {
        ApiError(
            StatusCode::NOT_FOUND,
            "this collector serves no cluster map (`dta collector --cluster MAP --name NAME`)"
                .to_owned(),
        )
    })
}

/// The parameters of a cluster route of `kind` besides the key(s), checked as the collector's
/// own routes check theirs.
fn cluster_ask(kind: &str, p: &Params) -> Result<Ask, ApiError> {
    Ok(match kind {
        "kw" => {
            let redundancy = p.redundancy()?;
            Ask::Kw {
                redundancy,
                threshold: p.threshold(redundancy)?,
            }
        }
        "ki" => Ask::Ki {
            redundancy: p.redundancy()?,
            window: p.window()?,
        },
        "postcard" => Ask::Postcard {
            values: match p.raw("values") {
                Some(_) => Some(p.postcard_values(0)?),
                None => None,
            },
        },
        "list" => Ask::List {
            list: p.bounded("list", Some(0u32), 0, u32::MAX)?,
            tail: p.opt_u64("tail")?,
            // The entry length is the owner's to know; the entry count is bounded here.
            max: p.list_max(1)?,
        },
        "sketch" => Ask::Sketch,
        other => {
            return Err(ApiError(
                StatusCode::NOT_FOUND,
                format!("no cluster query {other:?}: kw, ki, postcard, list, sketch"),
            ))
        }
    })
}

/// A batch request on the `which` routes (`cluster`, `local`) is for `kw`, `ki` or `postcard`.
fn batch_kind(which: &str, kind: &str) -> Result<(), ApiError> {
    if matches!(kind, "kw" | "ki" | "postcard") {
        return Ok(());
    }
    Err(ApiError(
        StatusCode::NOT_FOUND,
        format!("no {which} batch {kind:?}: kw, ki, postcard"),
    ))
}

/// The question and the keys (at most [`MAX_BATCH_KEYS`]) of a batch request.
fn batch_request<'a>(kind: &str, p: &Params<'a>) -> Result<(Ask, Vec<&'a str>), ApiError> {
    if p.raw("key").is_some() {
        return Err(ParamError::Unknown {
            name: "key".into(),
            allowed: "keys (comma-separated)".into(),
        }
        .into());
    }
    let ask = cluster_ask(kind, p)?;
    let list = p.raw("keys").ok_or(ParamError::Missing("keys"))?;
    let inputs: Vec<&str> = list.split(',').filter(|k| !k.is_empty()).collect();
    if inputs.is_empty() || inputs.len() > MAX_BATCH_KEYS {
        return Err(ParamError::OutOfRange {
            name: "keys",
            value: inputs.len() as u64,
            range: format!("1..={MAX_BATCH_KEYS} keys"),
        }
        .into());
    }
    Ok((ask, inputs))
}

fn cluster_params(kind: &str) -> &'static [&'static str] {
    match kind {
        "kw" => &["key", "keys", "redundancy", "threshold"],
        "ki" => &["key", "keys", "redundancy", "window"],
        "postcard" => &["key", "keys", "values"],
        "list" => &["list", "tail", "max"],
        _ => &["key"],
    }
}

/// `GET /cluster/query/{kind}/{name}`: the answer from the owner(s) of the key.
async fn cluster_query(
    State(a): State<Api>,
    KindName(kind, name): KindName,
    Raw(raw): Raw,
) -> Result<Json<serde_json::Value>, ApiError> {
    let cq = cluster_of(&a)?;
    let p = Params::new(&raw, cluster_params(&kind))?;
    if p.raw("keys").is_some() {
        return Err(ParamError::Unknown {
            name: "keys".into(),
            allowed: "key (a batch is /cluster/batch/...)".into(),
        }
        .into());
    }
    let ask = cluster_ask(&kind, &p)?;
    let key = match (&ask, p.raw("key")) {
        (Ask::List { .. }, _) => None,
        (Ask::Sketch, k) => match k {
            Some(k) => Some(crate::query::parse_key(k, None)?),
            None => None,
        },
        (_, Some(k)) => Some(cq.parse_key(&name, k)?),
        (_, None) => return Err(ParamError::Missing("key").into()),
    };
    a.heavy(move |_| {
        let v = match &ask {
            Ask::List { .. } => cq.list(&name, &ask)?,
            Ask::Sketch => cq.sketch(&name, key.as_deref())?,
            _ => cq.key(&name, key.as_deref().unwrap_or_default(), &ask)?,
        };
        Ok(Json(v))
    })
    .await
}

/// `GET /cluster/batch/{kind}/{name}?keys=K1,K2,...`: each key from its owner, the owners asked
/// in parallel; `{"answers": [...]}` in the keys' order, an error object for a key that could
/// not be answered.
async fn cluster_batch(
    State(a): State<Api>,
    KindName(kind, name): KindName,
    Raw(raw): Raw,
) -> Result<Json<serde_json::Value>, ApiError> {
    let cq = cluster_of(&a)?;
    batch_kind("cluster", &kind)?;
    let p = Params::new(&raw, cluster_params(&kind))?;
    let (ask, inputs) = batch_request(&kind, &p)?;
    let keys = inputs
        .iter()
        .map(|k| cq.parse_key(&name, k))
        .collect::<Result<Vec<_>, _>>()?;
    a.heavy(move |_| {
        let answers: Vec<serde_json::Value> = cq
            .batch(&name, &keys, &ask)?
            .into_iter()
            .zip(&keys)
            .map(|(r, k)| r.unwrap_or_else(|e| e.for_key(k)))
            .collect();
        Ok(Json(serde_json::json!({ "answers": answers })))
    })
    .await
}

/// `GET /local/batch/{kw,ki,postcard}/{name}?keys=K1,K2,...`: each key answered from this
/// collector's own region (what a cluster peer forwards a batch of keys it owns to; never
/// forwarded further). `{"answers": [...]}`, an `{"error"}` object for a key that could not be
/// answered.
async fn local_batch(
    State(a): State<Api>,
    KindName(kind, name): KindName,
    Raw(raw): Raw,
) -> Result<Json<serde_json::Value>, ApiError> {
    batch_kind("local", &kind)?;
    let p = Params::new(&raw, cluster_params(&kind))?;
    let (ask, inputs) = batch_request(&kind, &p)?;
    let key_len = query::key_len(a.c.store(&name)?.region.header());
    let keys = inputs
        .iter()
        .map(|k| query::parse_key(k, key_len))
        .collect::<Result<Vec<_>, _>>()?;
    let decode = a.decode;
    a.heavy(move |c| {
        let s = c.store(&name)?;
        let values = s.config.as_ref().and_then(|c| c.values);
        let answers: Vec<serde_json::Value> = keys
            .iter()
            .map(|k| {
                crate::cluster::answer_local(&s.region, &ask, Some(k), values, decode)
                    .unwrap_or_else(|e| serde_json::json!({"error": e.to_string()}))
            })
            .collect();
        served(c, &name, serde_json::json!({ "answers": answers }))
    })
    .await
}

async fn metrics(State(a): State<Api>, headers: axum::http::HeaderMap) -> Response {
    let accept = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    match a.heavy(|c| Ok(crate::metrics::encode(c.clone()))).await {
        Ok(body) => {
            let (ct, body) = dta_http::exposition::negotiate(accept.as_deref(), body);
            ([(axum::http::header::CONTENT_TYPE, ct)], body).into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// The API's routes over `collector` (without the server set-up: see [`serve_with`] and
/// [`dta_http::app`]).
pub fn router(collector: Arc<Collector>) -> Router {
    router_with(collector, None)
}

/// [`router`], plus the `/cluster/...` routes answering over `cluster`'s collectors.
pub fn router_with(collector: Arc<Collector>, cluster: Option<Arc<ClusterQuery>>) -> Router {
    router_decoding(collector, cluster, query::raw_records)
}

/// [`router_with`], Append entries decoded by `decode` where their store has a record layout.
pub fn router_decoding(
    collector: Arc<Collector>,
    cluster: Option<Arc<ClusterQuery>>,
    decode: query::RecordDecoder,
) -> Router {
    let api = Api {
        c: collector,
        heavy: HeavySlots::default(),
        cluster,
        decode,
    };
    let dir = api.c.dir().to_path_buf();
    let name = api
        .cluster
        .as_ref()
        .and_then(|c| c.local_name())
        .and_then(|n| axum::http::HeaderValue::from_str(n).ok());
    let routes = Router::new()
        .route("/cluster/query/:kind/:name", get(cluster_query))
        .route("/cluster/batch/:kind/:name", get(cluster_batch))
        .route("/local/batch/:kind/:name", get(local_batch))
        .route("/stores", get(stores))
        .route("/stores/:name", get(store))
        .route("/query/kw/:name", get(kw))
        .route("/query/ki/:name", get(ki))
        .route("/query/postcard/:name", get(postcard))
        .route("/query/list/:name", get(list))
        .route("/query/sketch/:name", get(sketch))
        .route("/metrics", get(metrics))
        .fallback(|| async {
            dta_http::error_response(StatusCode::NOT_FOUND, "no such route; see docs/http.md")
        })
        .with_state(api)
        // Push notifications of the region directory ([`dta_http::notify`]).
        .merge(crate::notify_http::router(dir));
    // A collector of a cluster map names itself on every answer, so a peer that reaches it
    // under another name (a wrong `http` in the map) finds out rather than mislabelling.
    match name {
        Some(name) => routes.layer(axum::middleware::map_response(
            move |mut r: axum::response::Response| {
                let name = name.clone();
                async move {
                    r.headers_mut()
                        .insert(crate::cluster::COLLECTOR_HEADER, name);
                    r
                }
            },
        )),
        None => routes,
    }
}

/// Serve the API on `addr` until `shutdown` resolves, with the default limits and the token of
/// the environment ([`dta_http::ServerOptions::with_token_file`]).
pub async fn serve(
    collector: Arc<Collector>,
    addr: &str,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let opts = dta_http::ServerOptions::with_token_file(None).map_err(std::io::Error::other)?;
    serve_with(collector, addr, opts, shutdown).await
}

/// Serve the API on `addr` with `opts` until `shutdown` resolves. A non-loopback `addr` without
/// a token is refused before listening.
pub async fn serve_with(
    collector: Arc<Collector>,
    addr: &str,
    opts: dta_http::ServerOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_cluster(collector, None, addr, opts, shutdown).await
}

/// Serve `routes` (the API's [`router_with`], plus any routes merged into it) on `addr` with
/// `opts` until `shutdown` resolves. A non-loopback `addr` without a token is refused before
/// listening.
pub async fn serve_router(
    routes: Router,
    addr: &str,
    opts: dta_http::ServerOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = dta_http::bind(addr, &opts)
        .await
        .map_err(std::io::Error::other)?;
    let at = listener.local_addr()?;
    tracing::info!(
        "query API on http://{at} ({}); web console on http://{at}{}",
        if opts.token.is_some() {
            "bearer token required"
        } else {
            "no token: loopback only"
        },
        dta_http::console::PREFIX,
    );
    dta_http::serve(listener, routes, opts, shutdown).await
}

/// What the web console of `collector` shows beside the API: the counters of `peers`, the
/// fill of its stores over time, and with a cluster map every collector's readiness.
pub fn console_options(
    collector: &Arc<Collector>,
    cluster: Option<&ClusterQuery>,
    peers: Vec<dta_http::console::Peer>,
    token: Option<dta_http::Token>,
) -> dta_http::console::Options {
    // Weak: the console's sampler must not keep the regions mapped (and the directory locked)
    // past the collector's own life.
    let c = Arc::downgrade(collector);
    dta_http::console::Options {
        peers,
        members: cluster.map_or_else(Vec::new, |q| {
            q.map()
                .collectors
                .iter()
                .map(|m| dta_http::console::Member {
                    name: m.name.clone(),
                    http: m.http,
                })
                .collect()
        }),
        local: Some(Arc::new(move || {
            c.upgrade().map(crate::metrics::encode).unwrap_or_default()
        })),
        token,
    }
}

/// [`serve_with`], with the `/cluster/...` routes over `cluster` when given.
pub async fn serve_cluster(
    collector: Arc<Collector>,
    cluster: Option<Arc<ClusterQuery>>,
    addr: &str,
    opts: dta_http::ServerOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let console = dta_http::console::router(console_options(
        &collector,
        cluster.as_deref(),
        vec![],
        opts.token.clone(),
    ));
    serve_router(
        router_with(collector, cluster).merge(console),
        addr,
        opts,
        shutdown,
    )
    .await
}

/// The server options of `[collector]`: the token of `token_file` (or of the environment), and
/// the refusal of a non-loopback `http` address without one — checked at start-up, before any
/// region is touched.
pub fn options(
    cfg: &crate::CollectorConfig,
) -> Result<dta_http::ServerOptions, dta_http::HttpError> {
    let opts = dta_http::ServerOptions::with_token_file(cfg.token_file.as_deref())?;
    if !cfg.http.is_empty() {
        use std::net::ToSocketAddrs;
        let addrs = cfg
            .http
            .to_socket_addrs()
            .map_err(|e| dta_http::HttpError::Resolve {
                addr: cfg.http.clone(),
                msg: e.to_string(),
            })?;
        for a in addrs {
            dta_http::check_access(a, &opts)?;
        }
    }
    Ok(opts)
}
