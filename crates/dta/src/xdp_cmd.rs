//! `dta translator --xdp IFACE`: Key-Write, Key-Increment and Append applied in the driver by the
//! XDP program (crates/dta-xdp, bpf/), into BPF maps laid out as regions; everything the program
//! passes up (other primitives, retransmittable datagrams, malformed input) is handled by the
//! userspace translator, which writes the same maps for those stores and the region files for
//! the rest. The maps are seeded from the region files at start and written back at exit, and
//! pinned in bpffs so `dta query --region PIN/NAME` reads them live.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use dta::config::Config;
use dta_collector::Collector;
use dta_store::Header;
use dta_translator::rules::{PrimitiveName, Rules};
use dta_translator::{ingest, PrototypeHeader, Stats, Translator};
use dta_xdp::{copy_data, XdpConfig, XdpTranslator};

#[derive(Args, Clone, Default)]
pub struct XdpArgs {
    /// Apply Key-Write, Key-Increment and Append in the driver with XDP on this interface; the
    /// rest goes to the userspace translator.
    #[arg(long)]
    pub xdp: Option<String>,
    /// Attach in generic (SKB) mode even if the driver supports native XDP.
    #[arg(long, requires = "xdp")]
    pub xdp_generic: bool,
    /// Pin the XDP stores (maps) in this bpffs directory.
    #[arg(long, requires = "xdp", default_value = "/sys/fs/bpf/dta")]
    pub xdp_pin: PathBuf,
}

pub fn translator(
    cfg: &Config,
    a: &XdpArgs,
    config_path: Option<PathBuf>,
    stop: Arc<AtomicBool>,
    duration: Option<f64>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let iface = a.xdp.as_deref().expect("--xdp given");
    let collector = Collector::open_dir(&cfg.region_dir, true)
        .with_context(|| "start the collector first (`dta collector`), it creates the regions")?;
    let headers: Vec<Header> = collector
        .stores()
        .iter()
        .map(|s| s.region.header().clone())
        .collect();
    let xcfg = XdpConfig {
        port: cfg.translator.listen.port(),
        prototype_long: cfg.translator.prototype_header == PrototypeHeader::Long,
    };
    // The rules (docs/rules.md "In the XDP translator"): the simple match -> Append / drop
    // rules run in the driver; the stores of every primitive another rule looks at or writes
    // stay with the userspace half, which runs the whole set (for what the program passes up).
    let set = cfg.compile_rules_for(&headers, 0)?;
    let holdable: Vec<Header> = headers
        .iter()
        .filter(|h| dta_xdp::handles(&h.spec))
        .cloned()
        .collect();
    let running_user = set
        .split_xdp(&dta_xdp::userspace_primitives(&holdable))
        .userspace_primitives;
    let in_driver: Vec<Header> = holdable
        .into_iter()
        .filter(|h| !running_user.contains(&PrimitiveName::of(&h.spec)))
        .collect();
    let split = set.split_xdp(&running_user);
    for (_, name, why) in &split.userspace {
        eprintln!("rule {name:?} runs in userspace: {}", why.describe());
    }
    let mut x = XdpTranslator::load(&xcfg, &in_driver).context("loading the XDP program")?;
    x.install_rules(&split)
        .context("installing the rules in the XDP program")?;
    let rules = Rules::new(set.clone());
    for s in x.stores() {
        copy_data(&collector.store(&s.name)?.region, &s.region)
            .with_context(|| format!("seeding the XDP store {} from its region file", s.name))?;
    }
    let mode = x
        .attach(iface, a.xdp_generic)
        .with_context(|| format!("attaching XDP to {iface}"))?;
    match x.pin(&a.xdp_pin) {
        Ok(_) => eprintln!("XDP stores pinned in {}", a.xdp_pin.display()),
        Err(e) => eprintln!(
            "not pinning the XDP stores in {} ({e}): query them from the region files after exit",
            a.xdp_pin.display()
        ),
    }
    let regions = x.fallback_regions(&headers, |h| {
        collector.store(&h.name).ok().map(|s| s.region.clone())
    });
    let stats = Arc::new(Stats::default());
    let mut t = Translator::colocated(&cfg.translator, regions, stats.clone())?
        .with_rules(rules.clone(), cfg.translator.rule_state_entries);
    let socket = ingest::bind(cfg.translator.listen, cfg.translator.recv_buffer)
        .with_context(|| format!("binding {}", cfg.translator.listen))?;
    eprintln!(
        "XDP translator on {iface} ({mode:?} mode), {} stores in the driver; userspace on udp://{}",
        x.stores().len(),
        socket.local_addr()?
    );
    if let Some(d) = duration {
        let s = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(d));
            s.store(true, Ordering::Relaxed);
        });
    }
    let classifier = Arc::new(Stats::default());
    let x = Mutex::new(x);
    crate::watch_cmd::reload_on_sighup();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        if let Some(path) = config_path {
            let (x, rules, stop, running_user) = (&x, &rules, &stop, &running_user);
            let headers = &headers;
            scope.spawn(move || {
                crate::watch_cmd::reload_loop_with(path, stop, |c| {
                    reload(c, headers, running_user, x, rules)
                })
            });
        }
        let r = ingest::run_one(&mut t, &socket, &cfg.translator, &classifier, &stop);
        stop.store(true, Ordering::Relaxed);
        Ok(r?)
    })?;
    let x = x
        .into_inner()
        .expect("the reload thread does not panic holding the lock");
    let stats = Stats::sum(&[stats, classifier]);
    let xdp_stats = x.stats().ok();
    let xdp_rules = x.rule_stats().ok();
    for s in x.stores() {
        copy_data(&s.region, &collector.store(&s.name)?.region)
            .with_context(|| format!("writing the XDP store {} back to its region file", s.name))?;
    }
    for r in collector.regions() {
        r.flush()?;
    }
    let out = serde_json::json!({
        "xdp": xdp_stats,
        "xdp_rules": xdp_rules,
        "userspace": stats.snapshot(),
        "rules": rules.stats().snapshot(),
    });
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        eprintln!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// A reload of `dta translator --xdp`: the new rules split against the stores as placed at
/// start (a store cannot move between the driver and userspace while running); the driver's
/// share is installed first (refused without changing anything if it does not fit), then the
/// whole set for the userspace half.
fn reload(
    c: &Config,
    headers: &[Header],
    running_user: &[PrimitiveName],
    x: &Mutex<XdpTranslator>,
    rules: &Rules,
) -> anyhow::Result<String> {
    let set = c.compile_rules_for(headers, 0)?;
    let split = set.split_xdp(running_user);
    if let Some(p) = split
        .userspace_primitives
        .iter()
        .find(|p| !running_user.contains(p))
    {
        let names: Vec<&str> = split.userspace.iter().map(|(_, n, _)| *n).collect();
        anyhow::bail!(
            "the rules {names:?} need the {p:?} stores in userspace, which are in the driver: \
             restart `dta translator --xdp` to move them"
        );
    }
    let g = x
        .lock()
        .map_err(|_| anyhow::anyhow!("the XDP translator's lock is poisoned"))?
        .install_rules(&split)?;
    let cat: Vec<_> = headers.iter().map(|h| (h.name.as_str(), &h.spec)).collect();
    rules
        .replace(&c.translator.rules, &cat)
        .map_err(anyhow::Error::msg)?;
    Ok(format!(
        "XDP generation {g}: {} rules in the driver, {} in userspace",
        split.xdp.len(),
        split.userspace.len()
    ))
}
