//! The HTTP query API (read-only): JSON answers to the same queries as `dta query`.
//!
//! | route | answer |
//! | --- | --- |
//! | `GET /stores` | every store's inspection |
//! | `GET /stores/{name}` | one store's inspection |
//! | `GET /query/kw/{name}?key=K&redundancy=N&threshold=1` (N default: the store's) | [`KeyWriteResult`](crate::query::KeyWriteResult) |
//! | `GET /query/ki/{name}?key=K&redundancy=N` (N default: the store's) | [`KeyIncrementResult`](crate::query::KeyIncrementResult) |
//! | `GET /query/postcard/{name}?key=K&values=N` | [`PostcardResult`](crate::query::PostcardResult) |
//! | `GET /query/list/{name}?list=L&tail=T&max=M` | [`ListResult`](crate::query::ListResult) |
//! | `GET /query/sketch/{name}?key=K` | [`SketchResult`](crate::query::SketchResult) |
//! | `GET /metrics` | Prometheus exposition of the stores ([`crate::metrics`]) |
//!
//! Errors are `{"error": "..."}` with status 400 (bad request), 404 (no such store) or 503 (the
//! store's region is bad or was lost while served; `GET /stores` lists it with
//! `"available": false` and the reason).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::collector::{region_path, Collector, CollectorError};
use crate::query::{self, QueryError};

type Params = Query<HashMap<String, String>>;

struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(serde_json::json!({"error": self.1}))).into_response()
    }
}

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> Self {
        ApiError(StatusCode::BAD_REQUEST, e.to_string())
    }
}

impl From<CollectorError> for ApiError {
    fn from(e: CollectorError) -> Self {
        let code = match e {
            CollectorError::NoSuchStore(_) => StatusCode::NOT_FOUND,
            CollectorError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(code, e.to_string())
    }
}

fn param<T: std::str::FromStr>(
    p: &HashMap<String, String>,
    name: &str,
    default: Option<T>,
) -> Result<T, ApiError> {
    match p.get(name) {
        Some(v) => v.parse().map_err(|_| {
            ApiError(
                StatusCode::BAD_REQUEST,
                format!("bad value for `{name}`: {v:?}"),
            )
        }),
        None => {
            default.ok_or_else(|| ApiError(StatusCode::BAD_REQUEST, format!("missing `{name}`")))
        }
    }
}

/// An optional parameter: `None` when absent (the query then uses the store's own value).
fn opt_param<T: std::str::FromStr>(
    p: &HashMap<String, String>,
    name: &str,
) -> Result<Option<T>, ApiError> {
    p.get(name).map(|_| param(p, name, None)).transpose()
}

type Shared = Arc<Collector>;

/// `answer` to a query on store `name`, unless its region was lost while the query read it (a
/// truncated file reads as zeros, `dta_store::guard`): then the store's error.
fn served<T>(c: &Collector, name: &str, answer: T) -> Result<Json<T>, ApiError> {
    c.store(name)?;
    Ok(Json(answer))
}

fn key_of(c: &Collector, name: &str, p: &HashMap<String, String>) -> Result<Vec<u8>, ApiError> {
    let store = c.store(name)?;
    let raw: String = param(p, "key", None)?;
    Ok(query::parse_key(
        &raw,
        query::key_len(store.region.header()),
    )?)
}

async fn stores(State(c): State<Shared>) -> Result<Json<serde_json::Value>, ApiError> {
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
}

async fn store(
    State(c): State<Shared>,
    Path(name): Path<String>,
) -> Result<Json<query::Inspection>, ApiError> {
    let s = c.store(&name)?;
    let path = region_path(c.dir(), &s.name);
    let i = query::inspect(&s.region, &path.display().to_string())?;
    served(&c, &name, i)
}

async fn kw(
    State(c): State<Shared>,
    Path(name): Path<String>,
    Query(p): Params,
) -> Result<Json<query::KeyWriteResult>, ApiError> {
    let key = key_of(&c, &name, &p)?;
    let r = &c.store(&name)?.region;
    served(
        &c,
        &name,
        query::key_write(
            r,
            &key,
            opt_param(&p, "redundancy")?,
            param(&p, "threshold", Some(1))?,
        )?,
    )
}

async fn ki(
    State(c): State<Shared>,
    Path(name): Path<String>,
    Query(p): Params,
) -> Result<Json<query::KeyIncrementResult>, ApiError> {
    let key = key_of(&c, &name, &p)?;
    let r = &c.store(&name)?.region;
    served(
        &c,
        &name,
        query::key_increment(r, &key, opt_param(&p, "redundancy")?)?,
    )
}

async fn postcard(
    State(c): State<Shared>,
    Path(name): Path<String>,
    Query(p): Params,
) -> Result<Json<query::PostcardResult>, ApiError> {
    let key = key_of(&c, &name, &p)?;
    let s = c.store(&name)?;
    let default_values = s.config.as_ref().and_then(|c| c.values).unwrap_or(1 << 18);
    served(
        &c,
        &name,
        query::postcard(&s.region, &key, param(&p, "values", Some(default_values))?)?,
    )
}

async fn list(
    State(c): State<Shared>,
    Path(name): Path<String>,
    Query(p): Params,
) -> Result<Json<query::ListResult>, ApiError> {
    let r = &c.store(&name)?.region;
    let tail = match p.get("tail") {
        Some(_) => Some(param::<u64>(&p, "tail", None)?),
        None => None,
    };
    served(
        &c,
        &name,
        query::list(
            r,
            param(&p, "list", Some(0))?,
            tail,
            param(&p, "max", Some(1024))?,
        )?,
    )
}

async fn sketch(
    State(c): State<Shared>,
    Path(name): Path<String>,
    Query(p): Params,
) -> Result<Json<query::SketchResult>, ApiError> {
    let s = c.store(&name)?;
    let key = match p.get("key") {
        Some(k) => Some(query::parse_key(k, query::key_len(s.region.header()))?),
        None => None,
    };
    served(&c, &name, query::sketch(&s.region, key.as_deref())?)
}

/// The API's routes over `collector`.
pub fn router(collector: Arc<Collector>) -> Router {
    Router::new()
        .route("/stores", get(stores))
        .route("/stores/:name", get(store))
        .route("/query/kw/:name", get(kw))
        .route("/query/ki/:name", get(ki))
        .route("/query/postcard/:name", get(postcard))
        .route("/query/list/:name", get(list))
        .route("/query/sketch/:name", get(sketch))
        .route("/metrics", get(crate::metrics::handler))
        .with_state(collector)
}

/// Serve the API on `addr` until `shutdown` resolves.
pub async fn serve(
    collector: Arc<Collector>,
    addr: &str,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!("query API on http://{}", listener.local_addr()?);
    axum::serve(listener, router(collector))
        .with_graceful_shutdown(shutdown)
        .await
}
