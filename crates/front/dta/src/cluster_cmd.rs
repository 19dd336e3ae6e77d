//! `dta cluster check|show`: validate a cluster map and print its assignment (docs/scale-out.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use dta_cluster::{ClusterMap, Key, Placement, SketchPlacement};

#[derive(Subcommand)]
pub enum ClusterCmd {
    /// Validate the map: exit 0 and print a one-line summary, or the reason it is refused.
    Check(MapArgs),
    /// Print the assignment: the collectors, each store's rule, a sample of keys and their
    /// owners, and each collector's share of hashed keys.
    Show(ShowArgs),
    /// Print the map in the line format of the C reporter (`c/include/dta/cluster.h`):
    /// collectors (IPv4 translator addresses) and the Append tables.
    Export(MapArgs),
}

#[derive(Args)]
pub struct MapArgs {
    /// The cluster map (TOML).
    #[arg(long, value_name = "FILE")]
    pub map: PathBuf,
}

#[derive(Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub map: MapArgs,
    /// Keys 0..KEYS (as 4-byte big-endian keys) counted for the shares.
    #[arg(long, default_value_t = 100_000)]
    pub keys: u32,
    /// Keys listed with their owners.
    #[arg(long, default_value_t = 8)]
    pub sample: u32,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

fn load(a: &MapArgs) -> anyhow::Result<ClusterMap> {
    ClusterMap::load(&a.map).with_context(|| format!("cluster map {}", a.map.display()))
}

pub fn run(c: ClusterCmd) -> anyhow::Result<ExitCode> {
    match c {
        ClusterCmd::Check(a) => {
            let m = load(&a)?;
            println!(
                "cluster map {} version {}: {} collectors, {} stores{}",
                a.map.display(),
                m.version,
                m.collectors.len(),
                m.stores.len(),
                m.previous
                    .as_ref()
                    .map(|p| format!(", changing from version {}", p.version))
                    .unwrap_or_default()
            );
            Ok(ExitCode::SUCCESS)
        }
        ClusterCmd::Show(a) => show(&a),
        ClusterCmd::Export(a) => {
            let m = load(&a)?;
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "# dta cluster export --map {} (c/include/dta/cluster.h)",
                a.map.display()
            )?;
            writeln!(out, "version {}", m.version)?;
            for c in &m.collectors {
                if !c.translator.is_ipv4() {
                    anyhow::bail!(
                        "collector {}: the C line format takes IPv4 translator addresses",
                        c.name
                    );
                }
                writeln!(out, "collector {} {}", c.name, c.translator)?;
            }
            let name = |i: usize| m.collectors[i].name.as_str();
            for s in &m.stores {
                if let Placement::Table { lists, default } = &s.placement {
                    for (l, c) in lists {
                        writeln!(out, "list {} {l} {}", s.name, name(*c))?;
                    }
                    if let Some(d) = default {
                        writeln!(out, "default {} {}", s.name, name(*d))?;
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Each collector's share of `keys` 4-byte keys, and how many of them the previous map placed
/// elsewhere.
fn shares(m: &ClusterMap, keys: u32) -> (Vec<u64>, Option<u64>) {
    let ks: Vec<[u8; 4]> = (0..keys).map(u32::to_be_bytes).collect();
    let n = m.shares(ks.iter().map(|k| &k[..]));
    let moved = m.previous.as_ref().map(|p| {
        ks.iter()
            .filter(|k| {
                let now = &m.collectors[dta_cluster::rendezvous(m.seeds(), &k[..]).unwrap_or(0)];
                let before = &p.collectors[dta_cluster::rendezvous(p.seeds(), &k[..]).unwrap_or(0)];
                now.name != before.name
            })
            .count() as u64
    });
    (n, moved)
}

fn show(a: &ShowArgs) -> anyhow::Result<ExitCode> {
    let m = load(&a.map)?;
    let (share, moved) = shares(&m, a.keys);
    let name = |i: usize| m.collectors[i].name.as_str();
    let mut stores = vec![];
    for s in &m.stores {
        let mut sample = vec![];
        match &s.placement {
            Placement::Hash => {
                for k in 0..a.sample {
                    let key = k.to_be_bytes();
                    let owners = m.owners_during_change(&s.name, Key::Bytes(&key))?;
                    sample.push(serde_json::json!({
                        "key": format!("0x{}", hex::encode(key)),
                        "owner": owners[0].name,
                        "previous_owner": owners.get(1).map(|c| c.name.clone()),
                    }));
                }
            }
            Placement::Table { lists, default } => {
                for (l, c) in lists {
                    sample.push(serde_json::json!({"list": l, "owner": name(*c)}));
                }
                if let Some(d) = default {
                    sample.push(serde_json::json!({"list": "other", "owner": name(*d)}));
                }
            }
            Placement::Sketch(SketchPlacement::One(c)) => {
                sample.push(serde_json::json!({"reporters": "all", "owner": name(*c)}));
            }
            Placement::Sketch(SketchPlacement::Hierarchical { sections, default }) => {
                for sec in sections {
                    sample.push(serde_json::json!({
                        "section": sec.name, "reporters": sec.reporters,
                        "owner": name(sec.collector),
                    }));
                }
                sample.push(serde_json::json!({"reporters": "other", "owner": name(*default)}));
            }
        }
        stores.push(serde_json::json!({
            "name": s.name,
            "kind": s.kind.name(),
            "key_len": s.key_len,
            "sketch_id": s.sketch_id,
            "placement": s.placement.name(),
            "assignment": sample,
        }));
    }
    let collectors: Vec<_> = m
        .collectors
        .iter()
        .zip(&share)
        .map(|(c, n)| {
            serde_json::json!({
                "name": c.name,
                "translator": c.translator,
                "http": c.http,
                "region_dir": c.region_dir,
                "mode": c.mode,
                "nic_budget": c.nic_budget,
                "hashed_keys": n,
                "share": *n as f64 / a.keys.max(1) as f64,
            })
        })
        .collect();
    let v = serde_json::json!({
        "version": m.version,
        "previous_version": m.previous.as_ref().map(|p| p.version),
        "collectors": collectors,
        "stores": stores,
        "keys_counted": a.keys,
        "keys_moved_from_previous": moved,
    });
    let mut out = std::io::stdout().lock();
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "cluster map version {}", m.version)?;
    if let (Some(p), Some(mv)) = (&m.previous, moved) {
        writeln!(
            out,
            "changing from version {}: {mv} of {} hashed keys ({:.1}%) have a new owner",
            p.version,
            a.keys,
            100.0 * mv as f64 / a.keys.max(1) as f64
        )?;
    }
    writeln!(out, "collectors:")?;
    for (c, n) in m.collectors.iter().zip(&share) {
        writeln!(
            out,
            "  {:<12} {:<5} translator {:<21} http {:<21} nic_budget {:<10} {:>5.1}% of hashed keys",
            c.name,
            format!("{:?}", c.mode).to_lowercase(),
            c.translator,
            c.http.map(|h| h.to_string()).unwrap_or_else(|| "-".into()),
            c.nic_budget,
            100.0 * *n as f64 / a.keys.max(1) as f64
        )?;
    }
    writeln!(out, "stores:")?;
    for s in &stores {
        writeln!(
            out,
            "  {:<12} {:<14} {}",
            s["name"].as_str().unwrap_or(""),
            s["kind"].as_str().unwrap_or(""),
            s["placement"].as_str().unwrap_or("")
        )?;
        for e in s["assignment"].as_array().into_iter().flatten() {
            writeln!(out, "      {e}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `dta query ... --cluster MAP`: the answer from the owner(s) of the key (or list, sketch);
/// `None` when the query names no cluster map.
pub fn query(what: &crate::QueryWhat) -> anyhow::Result<Option<ExitCode>> {
    use crate::QueryWhat as W;
    use dta_collector::cluster::{Ask, ClusterQuery};
    let (sel, ask, key) = match what {
        W::Int(_) | W::System(_) => return Ok(None),
        W::Kw {
            sel,
            key,
            redundancy,
            threshold,
        } => (
            sel,
            Ask::Kw {
                redundancy: *redundancy,
                threshold: *threshold,
            },
            Some(key),
        ),
        W::Ki {
            sel,
            key,
            redundancy,
            window,
        } => (
            sel,
            Ask::Ki {
                redundancy: *redundancy,
                window: *window,
            },
            Some(key),
        ),
        W::Postcard { sel, key, values } => (sel, Ask::Postcard { values: *values }, Some(key)),
        W::List {
            sel,
            list,
            tail,
            max,
        } => (
            sel,
            Ask::List {
                list: *list,
                tail: *tail,
                max: *max,
            },
            None,
        ),
        W::Sketch { sel, key } => (sel, Ask::Sketch, key.as_ref()),
    };
    let Some(map_path) = &sel.cluster else {
        return Ok(None);
    };
    let Some(store) = &sel.store else {
        anyhow::bail!("--cluster: say which store (--store NAME)");
    };
    let map = load(&MapArgs {
        map: map_path.clone(),
    })?;
    let token = dta_http::ServerOptions::with_token_file(None)?.token;
    let cq = ClusterQuery::new(std::sync::Arc::new(map), token)
        .with_decoder(dta_int::events::decode_record);
    let mut out = std::io::stdout().lock();
    let print = |out: &mut std::io::StdoutLock, v: &serde_json::Value| -> anyhow::Result<()> {
        if sel.json {
            writeln!(out, "{}", serde_json::to_string_pretty(v)?)?;
        } else {
            writeln!(out, "{}", summary(v))?;
        }
        Ok(())
    };
    let found = |v: &serde_json::Value| v["status"].is_null() || v["status"] == "found";
    match (&ask, key) {
        (Ask::List { .. }, _) => {
            print(&mut out, &cq.list(store, &ask)?)?;
            Ok(Some(ExitCode::SUCCESS))
        }
        (Ask::Sketch, k) => {
            let k = k
                .map(|k| dta_collector::query::parse_key(k, None))
                .transpose()?;
            print(&mut out, &cq.sketch(store, k.as_deref())?)?;
            Ok(Some(ExitCode::SUCCESS))
        }
        (_, Some(k)) if k.contains(',') => {
            let keys = k
                .split(',')
                .filter(|k| !k.is_empty())
                .map(|k| cq.parse_key(store, k))
                .collect::<Result<Vec<_>, _>>()?;
            // Every key's answer or error is printed; the exit status is the worst of them:
            // 2 if a key could not be answered, else 1 if a key was not found, else 0.
            let (mut all_found, mut all_answered) = (true, true);
            let mut answers = vec![];
            for (r, k) in cq.batch(store, &keys, &ask)?.into_iter().zip(&keys) {
                match r {
                    Ok(v) => {
                        all_found &= found(&v);
                        answers.push(v);
                    }
                    Err(e) => {
                        all_answered = false;
                        answers.push(e.for_key(k));
                    }
                }
            }
            if sel.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&answers)?)?;
            } else {
                for v in &answers {
                    match v["error"].as_str() {
                        Some(e) => writeln!(
                            out,
                            "{store} key 0x{}: error: {e}",
                            v["key"].as_str().unwrap_or("?")
                        )?,
                        None => writeln!(out, "{}", summary(v))?,
                    }
                }
            }
            Ok(Some(if !all_answered {
                ExitCode::from(2)
            } else if all_found {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }))
        }
        (_, Some(k)) => {
            let key = cq.parse_key(store, k)?;
            let v = cq.key(store, &key, &ask)?;
            print(&mut out, &v)?;
            Ok(Some(if found(&v) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }))
        }
        (_, None) => anyhow::bail!("this query needs --key"),
    }
}

/// One line for a cluster answer.
fn summary(v: &serde_json::Value) -> String {
    let who: Vec<String> = v["collectors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| match c.as_str() {
            Some(s) => s.to_owned(),
            None => c["collector"].as_str().unwrap_or("?").to_owned(),
        })
        .collect();
    let what = if let Some(d) = v["data"].as_str() {
        format!("found 0x{d} ({} votes)", v["votes"])
    } else if let Some(p) = v["path"].as_array().filter(|p| !p.is_empty()) {
        format!(
            "path {}",
            p.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        )
    } else if let Some(c) = v["count"].as_u64() {
        format!("count {c}")
    } else if let Some(e) = v["entries"].as_array() {
        format!(
            "{} entries: {}",
            e.len(),
            e.iter()
                .map(|x| x.as_str().unwrap_or("").to_owned())
                .collect::<Vec<_>>()
                .join(" ")
        )
    } else if !v["estimate"].is_null() {
        format!("estimate {}", v["estimate"])
    } else if !v["cardinality"].is_null() {
        format!("cardinality {}", v["cardinality"])
    } else {
        v["status"].as_str().unwrap_or("?").to_owned()
    };
    let key = v["key"]
        .as_str()
        .map(|k| format!(" key 0x{k}"))
        .unwrap_or_default();
    format!(
        "{}{key}: {what} (from {})",
        v["store"].as_str().unwrap_or("?"),
        who.join(", ")
    )
}
