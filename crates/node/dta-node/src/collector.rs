//! The collector service (`dta collector`): the configured regions, created or reopened under
//! the directory's collector lock, served over HTTP (the query API, the INT routes, the cluster
//! routes and the web console: one router, [`routes`]) and checked every second; on stop,
//! requests in flight get [`DRAIN`] to finish and the regions are flushed. The software
//! responder and the rdma-core collector serve the same HTTP API beside their RDMA loop
//! ([`HttpService`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use dta_collector::cluster::ClusterQuery;
use dta_collector::{query, Collector};

use crate::config::Config;

/// How long in-flight HTTP requests may finish after SIGTERM/SIGINT.
pub const DRAIN: Duration = Duration::from_secs(5);
/// How often every served region is checked for being still whole.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Create (or reopen) the configured regions, taking the directory's collector lock (a second
/// collector is refused here); one line per store on stderr.
pub fn create(cfg: &Config) -> anyhow::Result<Collector> {
    let mut c = Collector::create(&cfg.region_dir, &cfg.store, cfg.collector.force)?;
    for dir in &cfg.collector.serve_read_only {
        wait_for_writer(dir, READ_ONLY_WAIT);
        if !dir.is_dir() {
            continue;
        }
        c.serve_read_only(dir).with_context(|| {
            format!(
                "[collector] serve_read_only {}: serving its stores read-only",
                dir.display()
            )
        })?;
    }
    for s in c.stores() {
        eprintln!(
            "store {:<12} {:<14} {} ({})",
            s.name,
            s.region.header().kind.name(),
            s.path.display(),
            s.region.pages()
        );
    }
    for b in c.bad() {
        eprintln!(
            "store {:<12} {:<14} {}: {}",
            b.name,
            "UNAVAILABLE",
            b.path.display(),
            b.reason
        );
    }
    Ok(c)
}

/// How long a collector waits for another writer (an INT sink started at the same moment) to
/// publish the regions of a directory it serves read-only.
pub const READ_ONLY_WAIT: Duration = Duration::from_secs(30);
/// A writer that published no new region for this long has published them all.
const SETTLED: Duration = Duration::from_millis(500);

/// Wait (at most `wait`) while `dir`'s writer holds it and is still publishing regions (none
/// yet, or a new one within [`SETTLED`]): an INT sink started beside the collector creates its
/// regions one by one. Stores that appear later are not served until the collector restarts
/// (said at start when none are there).
fn wait_for_writer(dir: &std::path::Path, wait: Duration) {
    let deadline = Instant::now() + wait;
    let lock = dir.join(dta_store::lock::COLLECTOR_LOCK);
    let count = || dta_collector::collector::region_names(dir, usize::MAX).len();
    let (mut seen, mut since) = (count(), Instant::now());
    while dta_store::lock::InstanceLock::held(&lock) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        let n = count();
        if n != seen {
            (seen, since) = (n, Instant::now());
        } else if n > 0 && since.elapsed() >= SETTLED {
            break;
        }
    }
    if count() == 0 {
        tracing::warn!(
            "[collector] serve_read_only {}: no region there yet; its stores are served once \
             their writer (an INT sink) created them and this collector restarted",
            dir.display()
        );
    }
}

/// The processes whose counters the web console shows: `[collector] translator_metrics` and
/// `int_sink_metrics` (an address as `--metrics` takes it; empty: not configured).
fn console_peers(
    c: &dta_collector::CollectorConfig,
) -> anyhow::Result<Vec<dta_http::console::Peer>> {
    [
        ("translator", "translator_metrics", &c.translator_metrics),
        ("int-sink", "int_sink_metrics", &c.int_sink_metrics),
    ]
    .into_iter()
    .map(|(name, key, addr)| {
        let addr = match addr.as_str() {
            "" => None,
            a => Some(
                dta_http::parse_listen_addr(a)
                    .map_err(|e| anyhow::anyhow!("[collector] {key}: {e}"))?,
            ),
        };
        Ok(dta_http::console::Peer {
            name: name.into(),
            addr,
        })
    })
    .collect()
}

/// The collector's HTTP routes: the query API (with the cluster routes when `cluster` is set),
/// the INT queries and the web console over them.
pub fn routes(
    cfg: &Config,
    c: Arc<Collector>,
    cluster: Option<Arc<ClusterQuery>>,
    token: Option<dta_http::Token>,
) -> anyhow::Result<axum::Router> {
    let console = dta_collector::http::console_options(
        &c,
        cluster.as_deref(),
        console_peers(&cfg.collector)?,
        token,
    );
    Ok(
        dta_collector::http::router_decoding(c.clone(), cluster, dta_int::events::decode_record)
            .merge(crate::int_http::router(c))
            .merge(dta_http::console::router(console))
            .merge(dta_http::openapi::router(dta_http::openapi::COLLECTOR)),
    )
}

/// What is inconsistent between the cluster map and the HTTP address collector `name` listens
/// on (`listen`): the map's `http` for it naming another port or host (peers would ask the
/// wrong place), or another collector's `http` being this address (its keys would be answered
/// here). Peers detect the second at query time too (`dta_collector::cluster`).
pub fn cluster_http_warnings(
    map: &dta_cluster::ClusterMap,
    name: &str,
    listen: &str,
) -> Vec<String> {
    let Ok(at) = dta_http::parse_listen_addr(listen) else {
        return vec![];
    };
    // A wildcard listen address serves every local address: only its port is compared.
    let same = |a: std::net::SocketAddr| {
        a.port() == at.port() && (at.ip().is_unspecified() || a.ip() == at.ip())
    };
    let mut out = vec![];
    match map.collector(name).map(|c| c.http) {
        Some(Some(h)) if !same(h) => out.push(format!(
            "collector {name:?} listens for HTTP on {at} but the cluster map says {h}: peers \
             asking it for its keys will not reach it"
        )),
        Some(None) => out.push(format!(
            "the cluster map gives collector {name:?} no `http`: peers cannot ask it over HTTP"
        )),
        _ => {}
    }
    for c in &map.collectors {
        if c.name != name && c.http == Some(at) {
            out.push(format!(
                "the cluster map gives collector {:?} this collector's HTTP address {at}: its \
                 keys would be asked here (peers refuse such answers)",
                c.name
            ));
        }
    }
    out
}

/// The cluster routes of a collector named `name` in `map`: `/cluster/...` asks the owners.
pub fn cluster_query(
    map: dta_cluster::ClusterMap,
    name: &str,
    c: Arc<Collector>,
    token: Option<dta_http::Token>,
) -> anyhow::Result<Arc<ClusterQuery>> {
    Ok(Arc::new(
        ClusterQuery::new(Arc::new(map), token)
            .with_decoder(dta_int::events::decode_record)
            .with_local(name, c)
            .map_err(anyhow::Error::msg)?,
    ))
}

/// Serve `routes` at `[collector] http` until `stop`, checking the regions every
/// [`CHECK_EVERY`]; requests in flight get [`DRAIN`] after the stop.
fn serve(
    cfg: &Config,
    c: &Arc<Collector>,
    routes: axum::Router,
    opts: dta_http::ServerOptions,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let (tx, mut rx) = tokio::sync::watch::channel(false);
        let shutdown = async move {
            let _ = rx.wait_for(|stopping| *stopping).await;
        };
        let server = dta_collector::http::serve_router(routes, &cfg.collector.http, opts, shutdown);
        tokio::pin!(server);
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut checked = Instant::now();
        loop {
            tokio::select! {
                r = &mut server => return r,
                _ = tick.tick() => {}
            }
            if checked.elapsed() >= CHECK_EVERY {
                c.check_stores();
                checked = Instant::now();
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
        // Stop accepting; requests in flight get DRAIN to finish.
        let _ = tx.send(true);
        match tokio::time::timeout(DRAIN, &mut server).await {
            Ok(r) => r,
            Err(_) => {
                tracing::warn!("requests still in flight after {DRAIN:?}; closing them");
                Ok(())
            }
        }
    })?;
    Ok(())
}

/// The collector's HTTP API on a thread of its own, beside an RDMA loop that owns the caller's
/// thread (the software responder, the rdma-core collector). None when `[collector] http` is
/// empty.
pub struct HttpService(std::thread::JoinHandle<anyhow::Result<()>>);

impl HttpService {
    pub fn spawn(
        cfg: &Config,
        c: Arc<Collector>,
        cluster: Option<Arc<ClusterQuery>>,
        stop: Arc<AtomicBool>,
    ) -> anyhow::Result<Option<HttpService>> {
        if cfg.collector.http.is_empty() {
            return Ok(None);
        }
        let mut opts = dta_collector::http::options(&cfg.collector)?;
        opts.ready = crate::ops::collector_ready(c.clone());
        let routes = routes(cfg, c.clone(), cluster, opts.token.clone())?;
        eprintln!("HTTP queries on http://{}", cfg.collector.http);
        let cfg = cfg.clone();
        let h = std::thread::Builder::new()
            .name("dta-http".into())
            .spawn(move || serve(&cfg, &c, routes, opts, &stop))?;
        Ok(Some(HttpService(h)))
    }

    pub fn join(self) -> anyhow::Result<()> {
        self.0
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the HTTP thread panicked")))
    }
}

/// What a stopped collector says of each store.
#[derive(Debug)]
pub struct Stopped {
    pub seconds: f64,
    pub unavailable: usize,
    pub flush_failed: usize,
    /// Per store: its fill and entries appended, or why it is unavailable.
    pub stores: Vec<(String, Result<query::Inspection, String>)>,
}

/// `dta collector`: create the regions, serve them over HTTP (or only keep them checked when
/// `[collector] http` is empty) until `stop`, then flush them and inspect each.
pub fn run(
    cfg: &Config,
    cluster: Option<(dta_cluster::ClusterMap, String)>,
    stop: &AtomicBool,
) -> anyhow::Result<Stopped> {
    let started = Instant::now();
    let mut http_opts = dta_collector::http::options(&cfg.collector)?;
    // Checked before anything is created: a bad address fails the start, not the first view.
    console_peers(&cfg.collector)?;
    let c = Arc::new(create(cfg)?);
    http_opts.ready = crate::ops::collector_ready(c.clone());
    let cluster = cluster
        .map(|(m, name)| cluster_query(m, &name, c.clone(), http_opts.token.clone()))
        .transpose()?;
    if let Some(cq) = &cluster {
        if cfg.collector.http.is_empty() {
            bail!("--cluster answers over the HTTP API: set [collector] http");
        }
        for w in cluster_http_warnings(cq.map(), cq.local_name().unwrap_or(""), &cfg.collector.http)
        {
            eprintln!("warning: {w}");
        }
    }
    if cfg.collector.http.is_empty() {
        eprintln!("collector ready (no HTTP API); Ctrl-C or SIGTERM to stop");
        let mut checked = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
            if checked.elapsed() >= CHECK_EVERY {
                c.check_stores();
                checked = Instant::now();
            }
        }
    } else {
        let routes = routes(cfg, c.clone(), cluster, http_opts.token.clone())?;
        serve(cfg, &c, routes, http_opts, stop).context("serving HTTP")?;
    }
    let unavailable = c.check_stores();
    let flush_failed = c.flush();
    let stores = c
        .status()
        .into_iter()
        .map(|st| {
            // A region lost at this point is listed as such, it does not fail the exit.
            let inspected = st.available.and_then(|()| {
                let s = c.store(&st.name).map_err(|e| e.to_string())?;
                let i = query::inspect(&s.region, &st.path.display().to_string())
                    .map_err(|e| e.to_string())?;
                s.check().map_err(|e| e.to_string())?;
                Ok(i)
            });
            (st.name, inspected)
        })
        .collect();
    Ok(Stopped {
        seconds: started.elapsed().as_secs_f64(),
        unavailable,
        flush_failed,
        stores,
    })
}

#[cfg(test)]
mod tests {
    use super::cluster_http_warnings;

    #[test]
    fn cluster_http_addresses_that_disagree_with_the_listener_are_warned_about() {
        let map = dta_cluster::ClusterMap::parse(
            "version = 1\n\
             [[collector]]\nname = \"c0\"\ntranslator = \"127.0.0.1:1\"\nmode = \"shm\"\nhttp = \"10.0.0.1:80\"\n\
             [[collector]]\nname = \"c1\"\ntranslator = \"127.0.0.1:2\"\nmode = \"shm\"\nhttp = \"10.0.0.2:80\"\n\
             [[collector]]\nname = \"c2\"\ntranslator = \"127.0.0.1:3\"\nmode = \"shm\"\n\
             [[store]]\nname = \"kw\"\nkind = \"key-write\"\n",
        )
        .unwrap();
        // As the map says, or a wildcard on its port: nothing to say.
        assert!(cluster_http_warnings(&map, "c0", "10.0.0.1:80").is_empty());
        assert!(cluster_http_warnings(&map, "c0", "0.0.0.0:80").is_empty());
        // Another port, another host: the map's address is named.
        for listen in ["10.0.0.1:81", "127.0.0.1:80"] {
            let w = cluster_http_warnings(&map, "c0", listen);
            assert_eq!(w.len(), 1, "{w:?}");
            assert!(w[0].contains("the cluster map says 10.0.0.1:80"), "{w:?}");
        }
        // Listening where the map puts another collector: both said.
        let w = cluster_http_warnings(&map, "c0", "10.0.0.2:80");
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[1].contains("gives collector \"c1\" this collector's HTTP address"),
            "{w:?}"
        );
        // No `http` for itself.
        let w = cluster_http_warnings(&map, "c2", "127.0.0.1:80");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("no `http`"), "{w:?}");
    }
}
