//! Prometheus metrics of the collector's stores, computed at scrape time from the regions
//! themselves (the collector does no work per report): per store, how full its data area is
//! (fraction of non-zero 8-byte words, sampled on large regions as `dta inspect` does), the
//! region's data bytes, and for Append stores the entries appended over all lists (the sum of
//! the list heads, [DTA §4.4]). Served as `GET /metrics` by the HTTP API ([`crate::http`]).
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `dta_store_fill_ratio` | gauge | `store`, `kind` |
//! | `dta_store_region_bytes` | gauge | `store`, `kind` |
//! | `dta_store_appended_entries_total` | counter | `store` |
//! | `dta_store_available` | gauge | `store`, and `reason` for one not served (1 served; 0 bad or lost, with why) |
//! | `dta_collector_stores` | gauge | |

use std::sync::Arc;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use prometheus_client::collector::Collector as PromCollector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::collector::Collector;
use crate::query;

/// The content type of the exposition (OpenMetrics text).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The stores' metrics, read on each scrape.
pub struct StoreMetrics {
    collector: Arc<Collector>,
}

impl std::fmt::Debug for StoreMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreMetrics")
            .field("dir", &self.collector.dir())
            .finish()
    }
}

impl StoreMetrics {
    pub fn new(collector: Arc<Collector>) -> Self {
        StoreMetrics { collector }
    }
}

impl PromCollector for StoreMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut rows = Vec::new();
        for s in self.collector.stores() {
            if s.check().is_err() {
                continue;
            }
            let path = s.path.clone();
            match query::inspect(&s.region, &path.display().to_string()) {
                // Re-checked: a region lost while inspected read as zeros.
                Ok(i) if s.check().is_ok() => {
                    rows.push((s.name.as_str(), s.region.header().kind.name(), i))
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("metrics: store {}: {e}", s.name),
            }
        }
        let status = self.collector.status();
        let mut m = enc.encode_descriptor(
            "dta_store_available",
            "1 if the store is served, 0 if its region is bad or was lost (reason label)",
            None,
            MetricType::Gauge,
        )?;
        for st in &status {
            // A served store has no reason label (no empty label value is exported).
            let mut l = vec![("store", st.name.as_str())];
            if let Err(r) = &st.available {
                l.push(("reason", r.as_str()));
            }
            ConstGauge::new(i64::from(st.available.is_ok())).encode(m.encode_family(&l)?)?;
        }
        let n = ConstGauge::new(self.collector.stores().len() as i64);
        n.encode(enc.encode_descriptor(
            "dta_collector_stores",
            "Stores hosted by the collector",
            None,
            MetricType::Gauge,
        )?)?;
        let mut m = enc.encode_descriptor(
            "dta_store_fill_ratio",
            "Fraction of a store's non-zero 8-byte words (sampled on large regions)",
            None,
            MetricType::Gauge,
        )?;
        for (name, kind, i) in &rows {
            let l = [("store", *name), ("kind", *kind)];
            ConstGauge::new(i.fill).encode(m.encode_family(&l)?)?;
        }
        let mut m = enc.encode_descriptor(
            "dta_store_region_bytes",
            "Bytes of a store's data area",
            None,
            MetricType::Gauge,
        )?;
        for (name, kind, i) in &rows {
            let l = [("store", *name), ("kind", *kind)];
            ConstGauge::new(i.data_bytes as i64).encode(m.encode_family(&l)?)?;
        }
        let mut m = enc.encode_descriptor(
            "dta_store_appended_entries",
            "Entries appended to an Append store over all its lists ([DTA §4.4])",
            None,
            MetricType::Counter,
        )?;
        for (name, _, i) in &rows {
            if let Some(a) = i.appended {
                ConstCounter::new(a).encode(m.encode_family(&[("store", *name)])?)?;
            }
        }
        Ok(())
    }
}

/// The exposition text of `collector`'s stores.
pub fn encode(collector: Arc<Collector>) -> String {
    let mut r = Registry::default();
    r.register_collector(Box::new(StoreMetrics::new(collector)));
    r.register_collector(Box::new(dta_http::exposition::ProcessMetrics::new(
        "collector",
    )));
    let mut s = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut s, &r) {
        tracing::error!("metrics encoding failed: {e}");
    }
    s
}

/// `GET /metrics`. Inspecting regions reads their memory, so it runs off the async workers.
pub async fn handler(State(c): State<Arc<Collector>>) -> impl IntoResponse {
    let body = tokio::task::spawn_blocking(move || encode(c))
        .await
        .unwrap_or_default();
    ([(CONTENT_TYPE, OPENMETRICS)], body)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use dta_store::{AppendLayout, KeyIncrementLayout};

    use super::*;
    use crate::StoreConfig;

    /// `name{labels} value` lines of an exposition, labels as written.
    fn samples(text: &str) -> Vec<(String, f64)> {
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').unwrap();
                (k.to_owned(), v.parse().unwrap())
            })
            .collect()
    }

    fn scrape(addr: std::net::SocketAddr) -> (String, Vec<(String, f64)>) {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text\r\n\
             Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        let (head, body) = resp.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.to_ascii_lowercase().contains("openmetrics-text"));
        assert!(body.trim_end().ends_with("# EOF"));
        (body.to_owned(), samples(body))
    }

    fn get(v: &[(String, f64)], k: &str) -> f64 {
        v.iter()
            .find(|(n, _)| n == k)
            .unwrap_or_else(|| panic!("no sample {k} in {v:?}"))
            .1
    }

    #[test]
    fn metrics_endpoint_tracks_the_stores() {
        let dir = tempfile::tempdir().unwrap();
        let stores: Vec<StoreConfig> = [
            "name = 'ki'\nkind = 'key-increment'\ncounters = 1024",
            "name = 'ev'\nkind = 'append'\nlists = 2\ncapacity = 64\nbatch = 4",
        ]
        .iter()
        .map(|t| toml::from_str(t).unwrap())
        .collect();
        let c = Arc::new(Collector::create(dir.path(), &stores, false).unwrap());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let router = crate::http::router(c.clone());
        rt.spawn(async move { axum::serve(listener, router).await });

        let (_, before) = scrape(addr);
        assert_eq!(get(&before, "dta_collector_stores"), 2.0);
        assert_eq!(get(&before, "dta_store_available{store=\"ki\"}"), 1.0);
        assert_eq!(
            get(
                &before,
                "dta_store_fill_ratio{store=\"ki\",kind=\"key_increment\"}"
            ),
            0.0
        );
        let ki_bytes = get(
            &before,
            "dta_store_region_bytes{store=\"ki\",kind=\"key_increment\"}",
        );
        assert_eq!(ki_bytes as u64, c.store("ki").unwrap().region.mem().len());
        assert_eq!(
            get(&before, "dta_store_appended_entries_total{store=\"ev\"}"),
            0.0
        );

        // Write as the translator would; the next scrape sees it.
        let ki = &c.store("ki").unwrap().region;
        KeyIncrementLayout::new(ki.header())
            .unwrap()
            .apply(&[10, 0, 0, 1], 5, 2, &mut ki.mem().sink())
            .unwrap();
        let ev = &c.store("ev").unwrap().region;
        AppendLayout::new(ev.header())
            .unwrap()
            .write_entries(1, 0, &[0, 0, 0, 1, 0, 0, 0, 2], &mut ev.mem().sink())
            .unwrap();
        let (_, after) = scrape(addr);
        let fill = get(
            &after,
            "dta_store_fill_ratio{store=\"ki\",kind=\"key_increment\"}",
        );
        // Two counters of 1024 words written.
        assert!((fill - 2.0 / 1024.0).abs() < 1e-9, "fill {fill}");
        assert_eq!(
            get(&after, "dta_store_appended_entries_total{store=\"ev\"}"),
            2.0
        );
    }
}
