//! `dta translator --xdp IFACE`: Key-Write, Key-Increment and Append applied in the driver by the
//! XDP program (crates/dta-xdp, bpf/), into BPF maps laid out as regions; everything the program
//! passes up (other primitives, retransmittable datagrams, malformed input) is handled by the
//! userspace translator, which writes the same maps for those stores and the region files for
//! the rest. The maps are seeded from the region files at start and written back at exit, and
//! pinned in bpffs so `dta query --region PIN/NAME` reads them live.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use dta::config::Config;
use dta_collector::Collector;
use dta_store::Header;
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
    // The program runs no rules: the stores of every primitive a rule looks at or writes stay
    // with the userspace half, which runs them (docs/rules.md "In the XDP translator").
    let touched = dta_translator::rules::config::primitives_touched(&cfg.translator.rules);
    let in_driver: Vec<Header> = headers
        .iter()
        .filter(|h| !touched.contains(&dta_translator::rules::PrimitiveName::of(&h.spec)))
        .cloned()
        .collect();
    let mut x = XdpTranslator::load(&xcfg, &in_driver).context("loading the XDP program")?;
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
    let mut t = Translator::colocated(&cfg.translator, regions, stats.clone())?;
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
    ingest::run_one(&mut t, &socket, &cfg.translator, &classifier, &stop)?;
    let stats = Stats::sum(&[stats, classifier]);
    let xdp_stats = x.stats().ok();
    for s in x.stores() {
        copy_data(&s.region, &collector.store(&s.name)?.region)
            .with_context(|| format!("writing the XDP store {} back to its region file", s.name))?;
    }
    for r in collector.regions() {
        r.flush()?;
    }
    let out = serde_json::json!({"xdp": xdp_stats, "userspace": stats.snapshot()});
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        eprintln!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(ExitCode::SUCCESS)
}
