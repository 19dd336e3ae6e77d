//! `dta check --config F [--cluster MAP]`: validate a configuration as the collector and the
//! translator would load it (the same [`Config::load`], store specs, rule compilation and HTTP
//! access checks) and print what the collector would create, with sizes. Nothing is created.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;

use dta_collector::region_path;
use dta_node::config::Config;

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
    /// The collector's HTTP API address; absent when off.
    collector_http: Option<String>,
    collector_token: bool,
    translator_listen: String,
    translator_threads: usize,
    rules: usize,
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

fn plan(a: &CheckArgs) -> anyhow::Result<Plan> {
    let cfg = Config::load(&a.config)?;
    // The HTTP API's token and the refusal of a non-loopback address without one.
    let http = dta_collector::http::options(&cfg.collector)
        .with_context(|| format!("in configuration {}: [collector]", a.config.display()))?;
    // Every secret file a service of this configuration reads, read as it reads it.
    let secrets = cfg
        .secret_files()
        .with_context(|| format!("in configuration {}", a.config.display()))?;
    let free = dta_store::space::free_bytes(&cfg.region_dir).ok();
    let (mut stores, mut needed) = (vec![], 0u64);
    for s in &cfg.store {
        let spec = s.spec()?;
        let path = region_path(&cfg.region_dir, &s.name);
        let bytes = region_bytes(&s.name, &spec)?;
        let (mut state, mut reason) = region_state(&path, &s.name, &spec, cfg.collector.force);
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
    let cluster = a
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
    Ok(Plan {
        config: a.config.clone(),
        region_dir_exists: cfg.region_dir.is_dir(),
        region_dir: cfg.region_dir.clone(),
        total_bytes: stores.iter().map(|s| s.bytes).sum(),
        needed_bytes: needed,
        free_bytes: free,
        stores,
        collector_http: (!cfg.collector.http.is_empty()).then(|| cfg.collector.http.clone()),
        collector_token: http.token.is_some(),
        translator_listen: cfg.translator.listen.to_string(),
        translator_threads: cfg.translator.threads.max(1),
        rules: cfg.translator.rules.len(),
        secrets,
        build: dta_node::ops::build_note(),
        xdp_programs_missing: dta_node::ops::xdp_programs_missing(),
        cluster,
    })
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

pub fn run(a: CheckArgs) -> anyhow::Result<ExitCode> {
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
        match &p.collector_http {
            Some(h) => writeln!(
                out,
                "collector HTTP API on http://{h} ({})",
                if p.collector_token {
                    "bearer token required"
                } else {
                    "no token: loopback only"
                }
            )?,
            None => writeln!(out, "collector HTTP API off")?,
        }
        writeln!(
            out,
            "translator on udp://{} ({} thread{}), {} rule{}",
            p.translator_listen,
            p.translator_threads,
            if p.translator_threads == 1 { "" } else { "s" },
            p.rules,
            if p.rules == 1 { "" } else { "s" }
        )?;
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
            "the collector would refuse {}: the regions need {} more than the {} free on the \
             filesystem of {}",
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
            "the collector would refuse the existing region files of {} (other parameters; \
             `[collector] force = true` recreates them, losing their data)",
            refused.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}
