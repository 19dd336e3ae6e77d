//! The `/metrics` endpoint of the processes without an HTTP API, and the encoding helpers every
//! family's collector uses: one constant counter or gauge, a labelled counter family, the
//! registry's exposition text. The families themselves live beside what they measure
//! (`dta-metrics` for the translator and the INT sink, `dta-export` for the exporters).

use std::net::SocketAddr;
use std::sync::Arc;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// The content type of [`encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// One counter sample with its descriptor.
pub fn counter(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    v: u64,
) -> Result<(), std::fmt::Error> {
    let c = ConstCounter::new(v);
    let m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    c.encode(m)
}

/// One gauge sample with its descriptor.
pub fn gauge(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    v: u64,
) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(v as i64);
    let m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    g.encode(m)
}

/// A counter family of one series per label set (labels of any encodable type: `&str`,
/// `String`), for the collectors of other crates too.
pub fn counter_family<L: prometheus_client::encoding::EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in series {
        ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// The registry's exposition text (OpenMetrics, ends with `# EOF`).
pub fn encode(registry: &Registry) -> String {
    let mut s = String::new();
    // Writing into a String cannot fail; an encoder error would be a bug in a collector.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut s, registry) {
        tracing::error!("metrics encoding failed: {e}");
    }
    s
}

/// The `/metrics` server: `GET /metrics` answers [`encode`], `/healthz` liveness, any other path
/// 404, another method on `/metrics` 405; served by the shared server set-up ([`dta_http`]:
/// timeouts, connection cap, optional bearer token) on its own thread. Stops when dropped.
pub struct MetricsServer {
    inner: crate::BackgroundServer,
}

/// The routes of a metrics server over `registry`.
pub fn metrics_router(registry: Arc<Registry>) -> axum::Router {
    use axum::http::{header, StatusCode};
    axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move |headers: axum::http::HeaderMap| {
                let registry = registry.clone();
                async move {
                    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
                    let (ct, body) = crate::exposition::negotiate(accept, encode(&registry));
                    ([(header::CONTENT_TYPE, ct)], body)
                }
            }),
        )
        .merge(crate::openapi::router(crate::openapi::METRICS))
        .fallback(|| async { (StatusCode::NOT_FOUND, "try /metrics\n") })
}

impl MetricsServer {
    /// Listen on `addr` (port 0: any free port, see [`MetricsServer::local_addr`]) with the
    /// default limits and the token of the environment
    /// ([`crate::ServerOptions::with_token_file`]); a non-loopback `addr` needs a token.
    pub fn start(addr: SocketAddr, registry: Arc<Registry>) -> std::io::Result<MetricsServer> {
        let opts = crate::ServerOptions::with_token_file(None).map_err(std::io::Error::other)?;
        MetricsServer::start_with(addr, registry, opts)
    }

    /// As [`MetricsServer::start`], with explicit options.
    pub fn start_with(
        addr: SocketAddr,
        registry: Arc<Registry>,
        opts: crate::ServerOptions,
    ) -> std::io::Result<MetricsServer> {
        let inner =
            crate::BackgroundServer::start(addr, metrics_router(registry), opts, "dta-metrics")
                .map_err(std::io::Error::other)?;
        Ok(MetricsServer { inner })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr()
    }
}
