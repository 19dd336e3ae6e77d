//! `dta check --config F [--cluster MAP]`: validate a configuration as its service would load it
//! (a node's `dta.toml`: the same [`Config::load`], store specs, rule compilation and HTTP access
//! checks of the collector and the translator; an INT sink's: [`IntSinkFile::load`] and the
//! settings the sink refuses, [`dta_node::modes::check_int_sink`]) and print what would be
//! created, with sizes. Nothing is created.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;

use dta_collector::region_path;
use dta_node::config::{Config, IntSinkFile, ServiceFile};

#[derive(Args)]
pub struct CheckArgs {
    /// The configuration file (TOML) to check.
    #[arg(short, long)]
    config: PathBuf,
    /// A cluster map (docs/scale-out.md) to check too.
    #[arg(long, value_name = "MAP")]
    cluster: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

/// What `dta collector` would do with a store's region file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum RegionState {
    /// No file yet: created.
    New,
    /// A region of this name and parameters: reopened, its data kept.
    Reopened,
    /// A file of other parameters (or not a region) and `force`: recreated, its data lost.
    Recreated,
    /// A file of other parameters (or not a region) without `force`: the collector refuses it.
    Refused,
    /// It does not fit in what its filesystem has left (after the stores before it): the
    /// collector refuses it.
    NoSpace,
}

#[derive(Serialize)]
struct StorePlan {
    name: String,
    kind: &'static str,
    path: PathBuf,
    /// The region file's length: header page and data area.
    bytes: u64,
    state: RegionState,
    /// Why an existing file is not reopened.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

#[derive(Serialize)]
struct Plan {
    config: PathBuf,
    region_dir: PathBuf,
    region_dir_exists: bool,
    stores: Vec<StorePlan>,
    total_bytes: u64,
    /// Bytes the regions still need from their filesystem (new or recreated files, and what an
    /// existing file does not have allocated yet).
    needed_bytes: u64,
    /// Bytes free on the region directory's filesystem (its nearest existing ancestor's).
    free_bytes: Option<u64>,
    /// Which service the file configures: `node` (collector and translator) or `int-sink`.
    service: &'static str,
    /// The collector's HTTP API address; absent when off (and for an INT sink).
    collector_http: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    collector_token: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    translator_listen: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    translator_threads: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rules: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    int_sink: Option<IntSinkPlan>,
    /// The secret files the services will read, each read and checked as they read it.
    secrets: Vec<dta_node::config::SecretFile>,
    /// This build's version, and what it left out (`dta --version`).
    build: String,
    /// The XDP programs this build left out (clang missing at build time): `--xdp` and
    /// `--af-xdp` cannot start.
    xdp_programs_missing: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<ClusterPlan>,
}

/// What `dta int-sink` would do with the file.
#[derive(Serialize)]
struct IntSinkPlan {
    listen: String,
    /// Sink threads (0 in the file: one per available core).
    threads: usize,
    /// Reporter prefixes taken.
    allow: Vec<String>,
    /// Event thresholds set (by name); none: the sink raises no threshold events.
    thresholds: Vec<String>,
    /// The per-switch histograms' bucketing and its buckets.
    histogram: dta_int::Buckets,
    histogram_buckets: usize,
    /// The histograms' long tier (a Key-Increment store of its key length): its name, windows
    /// and their width.
    #[serde(skip_serializing_if = "Option::is_none")]
    long_tier: Option<(String, u32, u64)>,
}

#[derive(Serialize)]
struct ClusterPlan {
    map: PathBuf,
    version: u64,
    collectors: usize,
    stores: usize,
}

/// The length of the region file `Region::create` makes for `spec`.
fn region_bytes(name: &str, spec: &dta_store::StoreSpec) -> anyhow::Result<u64> {
    let h = dta_store::Header::new(name, spec).with_context(|| format!("store {name:?}"))?;
    Ok(dta_store::header::HEADER_LEN as u64 + h.data_len)
}

fn region_state(
    path: &Path,
    name: &str,
    spec: &dta_store::StoreSpec,
    force: bool,
) -> (RegionState, Option<String>) {
    if !path.exists() {
        return (RegionState::New, None);
    }
    let why = match dta_store::Region::open_read_only(path) {
        Ok(r) if r.header().name == name && r.header().spec == *spec => {
            return (RegionState::Reopened, None)
        }
        Ok(r) => format!(
            "holds store {:?} with other parameters ({:?})",
            r.header().name,
            r.header().spec
        ),
        Err(e) => e.to_string(),
    };
    let state = if force {
        RegionState::Recreated
    } else {
        RegionState::Refused
    };
    (state, Some(why))
}

/// What the service of the file would create: its stores, each with its region's state and
/// size, in the order they are created; the bytes still needed and those free.
fn store_plans(
    region_dir: &Path,
    configured: &[dta_collector::StoreConfig],
    force: bool,
) -> anyhow::Result<(Vec<StorePlan>, u64, Option<u64>)> {
    let free = dta_store::space::free_bytes(region_dir).ok();
    let (mut stores, mut needed) = (vec![], 0u64);
    for s in configured {
        let spec = dta_collector::planned_spec(region_dir, s)?;
        let path = region_path(region_dir, &s.name);
        let bytes = region_bytes(&s.name, &spec)?;
        let (mut state, mut reason) = region_state(&path, &s.name, &spec, force);
        // What creating (or allocating) this region takes from the filesystem, in the order
        // the collector creates them.
        let need = match state {
            RegionState::New | RegionState::Recreated => bytes,
            RegionState::Reopened => {
                use std::os::unix::fs::MetadataExt;
                let have = std::fs::metadata(&path).map_or(0, |m| m.blocks() * 512);
                bytes.saturating_sub(have)
            }
            RegionState::Refused | RegionState::NoSpace => 0,
        };
        if let Some(free) = free.filter(|&f| needed + need > f) {
            reason = Some(format!(
                "needs {} more; its filesystem has {} left after the stores before it",
                dta_store::space::human(need),
                dta_store::space::human(free.saturating_sub(needed))
            ));
            state = RegionState::NoSpace;
        } else {
            needed += need;
        }
        stores.push(StorePlan {
            name: s.name.clone(),
            kind: spec.kind().name(),
            bytes,
            path,
            state,
            reason,
        });
    }
    Ok((stores, needed, free))
}

fn plan(a: &CheckArgs) -> anyhow::Result<Plan> {
    let mut p = match ServiceFile::load(&a.config)? {
        ServiceFile::Node(cfg) => node_plan(a, &cfg)?,
        ServiceFile::IntSink(f) => int_sink_plan(a, &f)?,
    };
    p.cluster = a
        .cluster
        .as_ref()
        .map(|p| {
            let m = dta_cluster::ClusterMap::load(p)
                .with_context(|| format!("cluster map {}", p.display()))?;
            anyhow::Ok(ClusterPlan {
                map: p.clone(),
                version: m.version,
                collectors: m.collectors.len(),
                stores: m.stores.len(),
            })
        })
        .transpose()?;
    Ok(p)
}

/// A node's file: the collector's stores, HTTP API and secrets, the translator's socket and
/// rules.
fn node_plan(a: &CheckArgs, cfg: &Config) -> anyhow::Result<Plan> {
    // The HTTP API's token and the refusal of a non-loopback address without one.
    let http = dta_collector::http::options(&cfg.collector)
        .with_context(|| format!("in configuration {}: [collector]", a.config.display()))?;
    // Every secret file a service of this configuration reads, read as it reads it.
    let secrets = cfg
        .secret_files()
        .with_context(|| format!("in configuration {}", a.config.display()))?;
    let (stores, needed, free) = store_plans(&cfg.region_dir, &cfg.store, cfg.collector.force)?;
    Ok(Plan {
        service: "node",
        collector_http: (!cfg.collector.http.is_empty()).then(|| cfg.collector.http.clone()),
        collector_token: Some(http.token.is_some()),
        translator_listen: Some(cfg.translator.listen.to_string()),
        translator_threads: Some(cfg.translator.threads.max(1)),
        rules: Some(cfg.translator.rules.len()),
        int_sink: None,
        secrets,
        ..common_plan(a, &cfg.region_dir, stores, needed, free)
    })
}

/// An INT sink's file: its stores (created without `force`, as `dta int-sink` does), its
/// socket, and what it refuses of its `[translator]` and `[[store]]` settings.
fn int_sink_plan(a: &CheckArgs, f: &IntSinkFile) -> anyhow::Result<Plan> {
    let mode = dta_node::modes::int_sink_mode(false, false);
    dta_node::modes::check_int_sink(f, mode)
        .with_context(|| format!("in configuration {}", a.config.display()))?;
    let (stores, needed, free) = store_plans(&f.region_dir, &f.store, false)?;
    let th = &f.sink.thresholds;
    let thresholds = [
        ("hop_latency", th.hop_latency),
        ("queue_occupancy", th.queue_occupancy),
        ("egress_tx_util", th.egress_tx_util),
        ("path_latency", th.path_latency),
        ("latency_change", th.latency_change),
        ("queue_change", th.queue_change),
    ]
    .into_iter()
    // u32::MAX is "off" (ThresholdConfig's default).
    .filter(|(_, v)| *v != u32::MAX)
    .map(|(n, v)| format!("{n} = {v}"))
    .collect();
    Ok(Plan {
        service: "int-sink",
        int_sink: Some(IntSinkPlan {
            listen: f.listen.to_string(),
            threads: f.sink.threads,
            allow: f
                .sink
                .allow
                .prefixes()
                .iter()
                .map(|p| p.to_string())
                .collect(),
            thresholds,
            histogram: f.sink.histogram.clone(),
            histogram_buckets: f.sink.histogram.count(),
            long_tier: f
                .store
                .iter()
                .find(|s| {
                    s.kind == Some(dta_collector::config::StoreKindName::KeyIncrement)
                        && s.key_len == Some(dta_int::layout::LONG_TIER_KEY_LEN as u8)
                })
                .map(|s| {
                    (
                        s.name.clone(),
                        s.windows.unwrap_or(0),
                        s.window_ms.unwrap_or(0),
                    )
                }),
        }),
        ..common_plan(a, &f.region_dir, stores, needed, free)
    })
}

/// What every service's plan says alike.
fn common_plan(
    a: &CheckArgs,
    region_dir: &Path,
    stores: Vec<StorePlan>,
    needed: u64,
    free: Option<u64>,
) -> Plan {
    Plan {
        config: a.config.clone(),
        region_dir_exists: region_dir.is_dir(),
        region_dir: region_dir.to_path_buf(),
        total_bytes: stores.iter().map(|s| s.bytes).sum(),
        needed_bytes: needed,
        free_bytes: free,
        stores,
        service: "node",
        collector_http: None,
        collector_token: None,
        translator_listen: None,
        translator_threads: None,
        rules: None,
        int_sink: None,
        secrets: vec![],
        build: dta_node::ops::build_note(),
        xdp_programs_missing: dta_node::ops::xdp_programs_missing(),
        cluster: None,
    }
}

/// The service that would refuse a region.
fn who(p: &Plan) -> &'static str {
    if p.int_sink.is_some() {
        "INT sink"
    } else {
        "collector"
    }
}

/// Bytes as KiB/MiB/GiB with one decimal.
fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Whether `path` is a cluster map (top-level `version` and `[[collector]]` tables) rather than
/// a service's configuration.
fn is_cluster_map(path: &Path) -> bool {
    dta_node::config::read_config(path)
        .ok()
        .and_then(|t| toml::from_str::<toml::Table>(&t).ok())
        .is_some_and(|t| t.contains_key("version") && t.contains_key("collector"))
}

/// `dta check --config MAP` of a cluster map: checked as `--cluster` checks one.
fn run_cluster_map(a: &CheckArgs) -> anyhow::Result<ExitCode> {
    let m = dta_cluster::ClusterMap::load(&a.config)
        .with_context(|| format!("cluster map {}", a.config.display()))?;
    let c = ClusterPlan {
        map: a.config.clone(),
        version: m.version,
        collectors: m.collectors.len(),
        stores: m.stores.len(),
    };
    let mut out = std::io::stdout().lock();
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&c)?)?;
    } else {
        writeln!(
            out,
            "cluster map {} version {}: valid, {} collectors, {} stores (each collector's \
             service is configured by its own dta.toml: `dta check --config` it)",
            c.map.display(),
            c.version,
            c.collectors,
            c.stores
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(a: CheckArgs) -> anyhow::Result<ExitCode> {
    if is_cluster_map(&a.config) {
        return run_cluster_map(&a);
    }
    let p = plan(&a)?;
    let mut out = std::io::stdout().lock();
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&p)?)?;
    } else {
        writeln!(out, "configuration {}: valid", p.config.display())?;
        writeln!(
            out,
            "region directory {} ({})",
            p.region_dir.display(),
            if p.region_dir_exists {
                "exists"
            } else {
                "created at start"
            }
        )?;
        for s in &p.stores {
            let state = match s.state {
                RegionState::New => "new",
                RegionState::Reopened => "exists, reopened (data kept)",
                RegionState::Recreated => "exists, recreated (force; data lost)",
                RegionState::Refused => "exists, REFUSED",
                RegionState::NoSpace => "REFUSED: does not fit",
            };
            writeln!(
                out,
                "  store {:<14} {:<14} {:>10}  {}  {state}{}",
                s.name,
                s.kind,
                human(s.bytes),
                s.path.display(),
                s.reason
                    .as_ref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            )?;
        }
        writeln!(
            out,
            "  {} stores, {} ({} bytes) of regions; {} to allocate, {} free on their filesystem",
            p.stores.len(),
            human(p.total_bytes),
            p.total_bytes,
            human(p.needed_bytes),
            p.free_bytes.map_or_else(|| "unknown".to_owned(), human)
        )?;
        if let Some(i) = &p.int_sink {
            writeln!(
                out,
                "INT sink on udp://{} ({}), reports taken from {}",
                i.listen,
                match i.threads {
                    0 => "a thread per core".to_owned(),
                    1 => "1 thread".to_owned(),
                    n => format!("{n} threads"),
                },
                i.allow.join(", ")
            )?;
            writeln!(
                out,
                "  histograms: {} buckets per switch and metric{}",
                i.histogram_buckets,
                match (&i.histogram, i.histogram.relative_error()) {
                    (dta_int::Buckets::LogLinear { .. }, Some(e)) => format!(
                        ", log-linear: quantiles within {:.2} % of the truth",
                        e * 100.0
                    ),
                    (dta_int::Buckets::Log2, _) => ", log2 (powers of two)".to_owned(),
                    _ => ", configured edges".to_owned(),
                }
            )?;
            if let Some((name, windows, ms)) = &i.long_tier {
                writeln!(
                    out,
                    "  long tier: {name}, {windows} windows of {} s (questions longer than the \
                     histogram store holds are answered from it)",
                    ms / 1000
                )?;
            }
            if i.thresholds.is_empty() {
                writeln!(
                    out,
                    "  no [sink] thresholds: the sink raises no threshold events"
                )?;
            } else {
                writeln!(out, "  thresholds: {}", i.thresholds.join(", "))?;
            }
        }
        if let (Some(listen), Some(threads), Some(rules)) =
            (&p.translator_listen, p.translator_threads, p.rules)
        {
            match &p.collector_http {
                Some(h) => writeln!(
                    out,
                    "collector HTTP API on http://{h} ({})",
                    if p.collector_token == Some(true) {
                        "bearer token required"
                    } else {
                        "no token: loopback only"
                    }
                )?,
                None => writeln!(out, "collector HTTP API off")?,
            }
            writeln!(
                out,
                "translator on udp://{listen} ({threads} thread{}), {rules} rule{}",
                if threads == 1 { "" } else { "s" },
                if rules == 1 { "" } else { "s" }
            )?;
        }
        for f in &p.secrets {
            writeln!(
                out,
                "{} {}: readable{}",
                f.what,
                f.path.display(),
                f.warning
                    .as_ref()
                    .map(|w| format!(", WARNING: {w}"))
                    .unwrap_or_default()
            )?;
        }
        if p.xdp_programs_missing.is_empty() {
            writeln!(out, "dta {}: XDP programs built", p.build)?;
        } else {
            writeln!(
                out,
                "dta {}: the XDP translator, the INT sink's XDP fast path and AF_XDP receive \
                 cannot start",
                p.build
            )?;
        }
        if let Some(c) = &p.cluster {
            writeln!(
                out,
                "cluster map {} version {}: valid, {} collectors, {} stores",
                c.map.display(),
                c.version,
                c.collectors,
                c.stores
            )?;
        }
    }
    out.flush()?;
    let refused: Vec<&str> = p
        .stores
        .iter()
        .filter(|s| s.state == RegionState::Refused)
        .map(|s| s.name.as_str())
        .collect();
    let no_space: Vec<String> = p
        .stores
        .iter()
        .filter(|s| s.state == RegionState::NoSpace)
        .map(|s| format!("{} ({}, {})", s.name, s.path.display(), human(s.bytes)))
        .collect();
    if !no_space.is_empty() {
        bail!(
            "the {} would refuse {}: the regions need {} more than the {} free on the \
             filesystem of {}",
            who(&p),
            no_space.join(", "),
            human(
                p.stores
                    .iter()
                    .filter(|s| s.state == RegionState::NoSpace)
                    .map(|s| s.bytes)
                    .sum()
            ),
            p.free_bytes.map_or_else(|| "?".to_owned(), human),
            p.region_dir.display()
        );
    }
    if !refused.is_empty() {
        bail!(
            "the {} would refuse the existing region files of {} (other parameters; {})",
            who(&p),
            refused.join(", "),
            if p.int_sink.is_some() {
                "move them away first: the INT sink never recreates a region"
            } else {
                "`[collector] force = true` recreates them, losing their data"
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}
