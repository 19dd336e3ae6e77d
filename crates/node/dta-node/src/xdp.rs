//! The XDP translator service (`dta translator --xdp IFACE`): Key-Write, Key-Increment and
//! Append applied in the driver by the XDP program (crates/engines/dta-xdp, bpf/) into BPF maps laid out
//! as regions; everything the program passes up (other primitives, retransmittable and flagged
//! datagrams, malformed input) is handled by the userspace translator, which writes the same
//! maps for those stores and the region files for the rest.
//!
//! The policy is the node's ([`IngressPolicy`]): the program drops sources outside
//! `[translator] allow` before parsing (its allow-list map is filled from the compiled policy),
//! stores with an allow-list of their own stay with the userspace half, the simple rules run in
//! the driver and the rest in userspace, flagged reports are announced by the userspace half.
//! The maps are seeded from the region files at start and written back at exit; they are pinned
//! in bpffs while it runs (`dta query --region PIN/NAME` reads them) and the pins removed at exit
//! unless asked to keep them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use dta_collector::Collector;
use dta_store::lock::InstanceLock;
use dta_store::Header;
use dta_translator::ingest::PrioSockets;
use dta_translator::rules::{PrimitiveName, Rules};
use dta_translator::{ingest, PrototypeHeader, Reason, RegionSinks, Stats, Translator};
use dta_xdp::{copy_data, AttachMode, XdpConfig, XdpStats, XdpTranslator};

use crate::config::Config;
use crate::interfaces::InterfaceDrops;
use crate::modes::{self, Mode};
use crate::policy::IngressPolicy;
use crate::translator::{open_regions, ring, Options, Serving};

/// Where the XDP translator runs.
#[derive(Debug, Clone)]
pub struct XdpOptions {
    pub iface: String,
    /// Attach in generic (SKB) mode even where the driver has a native one.
    pub generic: bool,
    /// Pin the maps in this bpffs directory.
    pub pin: PathBuf,
    /// Leave the pins behind at exit (they hold the stores as they were).
    pub keep_pins: bool,
}

/// How often the driver's counters are copied into the translator's.
const MIRROR_EVERY: Duration = Duration::from_millis(200);

/// The XDP translator, built (program loaded and attached, maps seeded and pinned, socket
/// bound, metrics serving) and not yet receiving.
pub struct XdpNode {
    cfg: Config,
    opts: Options,
    x: Mutex<XdpTranslator>,
    /// The program's actions as last mirrored, for `/metrics` ([`mirror`]).
    actions: Arc<Mutex<Vec<(&'static str, u64)>>>,
    mode: AttachMode,
    pins: Vec<PathBuf>,
    keep_pins: bool,
    translator: Translator<RegionSinks>,
    /// The userspace half's, the classifier's, then the driver's (mirrored, [`mirror`]).
    stats: Vec<Arc<Stats>>,
    socket: PrioSockets,
    policy: IngressPolicy,
    headers: Vec<Header>,
    running_user: Vec<PrimitiveName>,
    collector: Collector,
    /// The drops of the interfaces it receives on.
    interfaces: Arc<InterfaceDrops>,
    _metrics: Option<dta_metrics::MetricsServer>,
    _writer: InstanceLock,
}

impl XdpNode {
    pub fn build(cfg: &Config, opts: Options, xo: &XdpOptions) -> anyhow::Result<XdpNode> {
        let mode = if xo.generic {
            Mode::XdpGeneric
        } else {
            Mode::XdpNative
        };
        modes::check_translator(mode, cfg)?;
        if cfg.translator.threads > 1 {
            anyhow::bail!(
                "threads = {}: the XDP translator runs in the driver, its userspace half on one \
                 thread",
                cfg.translator.threads
            );
        }
        crate::translator::refuse_shared_port(cfg)?;
        let (writer, collector) = open_regions(cfg)?;
        let headers = collector.headers();
        let policy = IngressPolicy::of_config(cfg, &headers, Some(ring(&cfg.region_dir)?))?;
        // Stores the driver may hold: its primitives, without an allow-list of their own (the
        // userspace half checks those).
        let holdable: Vec<Header> = headers
            .iter()
            .filter(|h| dta_xdp::handles(&h.spec) && !policy.store_has_allow(&h.name))
            .cloned()
            .collect();
        // The rules (docs/rules.md "In the XDP translator"): the simple match -> Append / drop
        // rules run in the driver; the stores of every primitive another rule looks at or
        // writes stay with the userspace half, which runs the whole set (for what the program
        // passes up).
        let set = policy.rules().current();
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
        for h in headers.iter().filter(|h| policy.store_has_allow(&h.name)) {
            eprintln!(
                "store {:?} stays in userspace: it has an allow-list of its own",
                h.name
            );
        }
        for h in headers
            .iter()
            .filter(|h| matches!(&h.spec, dta_store::StoreSpec::KeyIncrement(s) if s.windows > 0))
        {
            eprintln!(
                "store {:?} stays in userspace: it keeps time windows",
                h.name
            );
        }
        let xcfg = XdpConfig {
            port: cfg.translator.listen.port(),
            prototype_long: cfg.translator.prototype_header == PrototypeHeader::Long,
            allow: policy.allow().clone(),
        };
        let mut x = XdpTranslator::load(&xcfg, &in_driver).context("loading the XDP program")?;
        x.install_rules(&split)
            .context("installing the rules in the XDP program")?;
        for s in x.stores() {
            copy_data(&collector.store(&s.name)?.region, &s.region).with_context(|| {
                format!("seeding the XDP store {} from its region file", s.name)
            })?;
        }
        // Bind before attaching: the program passes up what it does not apply, to this socket.
        let socket = crate::translator::bind_sockets(cfg, 1)?.remove(0);
        let attached = x
            .attach(&xo.iface, xo.generic)
            .with_context(|| format!("attaching XDP to {}", xo.iface))?;
        let pins = match x.pin(&xo.pin) {
            Ok(p) => {
                eprintln!("XDP stores pinned in {}", xo.pin.display());
                p
            }
            Err(e) => {
                eprintln!(
                    "not pinning the XDP stores in {} ({e}): query them from the region files \
                     after exit",
                    xo.pin.display()
                );
                vec![]
            }
        };
        let regions = x.fallback_regions(&headers, |h| {
            collector.store(&h.name).ok().map(|s| s.region.clone())
        });
        let stats: Vec<Arc<Stats>> = (0..3).map(|_| Arc::new(Stats::default())).collect();
        let translator = policy.apply(Translator::colocated(
            &cfg.translator,
            regions,
            stats[0].clone(),
        )?)?;
        // Every action has its series from the first scrape on (the mirror refreshes them).
        let actions: Arc<Mutex<Vec<(&'static str, u64)>>> = Arc::new(Mutex::new(
            x.stats()
                .map(|s| s.actions().to_vec())
                .unwrap_or_else(|_| dta_xdp::XdpStats::default().actions().to_vec()),
        ));
        let a = actions.clone();
        let program = crate::ops::ProgramActions::new(
            "dta_translator_xdp_program",
            "Frames the XDP translator's program handled, by action: applied in the driver, \
             passed up to the userspace half (pass_*), dropped",
            move || a.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        );
        let interfaces =
            InterfaceDrops::watch("translator", cfg.translator.listen.ip(), &[&xo.iface]);
        let metrics = crate::translator::start_translator_metrics(
            opts.metrics,
            &stats,
            std::slice::from_ref(&socket),
            None,
            Some(program),
            &interfaces,
            collector.regions(),
        )?;
        Ok(XdpNode {
            cfg: cfg.clone(),
            opts,
            x: Mutex::new(x),
            actions,
            mode: attached,
            pins,
            keep_pins: xo.keep_pins,
            translator,
            stats,
            socket,
            policy,
            headers,
            running_user,
            collector,
            interfaces,
            _metrics: metrics,
            _writer: writer,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// The counters: the userspace half's, the classifier's, the driver's.
    pub fn stats(&self) -> &[Arc<Stats>] {
        &self.stats
    }

    pub fn describe(&self) -> String {
        let x = lock(&self.x);
        format!(
            "XDP translator on {} ({:?} mode), {} stores in the driver; userspace on udp://{}",
            x.attached().map_or("?", |(i, _)| i),
            self.mode,
            x.stores().len(),
            self.local_addr()
                .map_or_else(|e| e.to_string(), |a| a.to_string())
        )
    }

    /// Receive until `stop`; then write the maps back to the region files, flush, remove the
    /// pins (unless kept) and return the counters.
    pub fn run(mut self, stop: &AtomicBool) -> anyhow::Result<serde_json::Value> {
        let serving = Serving {
            stats: &self.stats,
            opts: &self.opts,
            config: &self.cfg,
        };
        let (x, headers, running_user, rules) = (
            &self.x,
            &self.headers,
            &self.running_user,
            self.policy.rules(),
        );
        let install = |c: &Config| reload(c, headers, running_user, x, rules);
        let (t, socket, cfg, stats, actions) = (
            &mut self.translator,
            &self.socket,
            &self.cfg.translator,
            &self.stats,
            &self.actions,
        );
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    mirror(&lock(x), &stats[2], actions);
                    std::thread::sleep(MIRROR_EVERY);
                }
            });
            serving.run(stop, install, || {
                ingest::run_one(t, socket, cfg, &stats[1], stop)
            })
        });
        let x = self.x.into_inner().unwrap_or_else(|e| e.into_inner());
        mirror(&x, &self.stats[2], &self.actions);
        let xdp_stats = x.stats().ok();
        let xdp_rules = x.rule_stats().ok();
        for s in x.stores() {
            copy_data(&s.region, &self.collector.store(&s.name)?.region).with_context(|| {
                format!("writing the XDP store {} back to its region file", s.name)
            })?;
        }
        for r in self.collector.regions() {
            r.flush()?;
        }
        drop(x);
        if !self.keep_pins {
            remove_pins(&self.pins);
        }
        r?;
        Ok(serde_json::json!({
            "xdp": xdp_stats,
            "xdp_rules": xdp_rules,
            "userspace": Stats::sum(&self.stats[..2]).snapshot(),
            "translator": Stats::sum(&self.stats).snapshot(),
            "rules": self.policy.rules().stats().snapshot(),
            "interfaces": self.interfaces.snapshot(),
        }))
    }
}

fn lock(x: &Mutex<XdpTranslator>) -> std::sync::MutexGuard<'_, XdpTranslator> {
    x.lock().unwrap_or_else(|e| e.into_inner())
}

/// Copy the driver's counters into `into` (which holds nothing else), so the translator's
/// metrics and summary count what the driver applied and rejected like the userspace half's,
/// and its actions into `actions` (`dta_translator_xdp_program_total`).
fn mirror(x: &XdpTranslator, into: &Stats, actions: &Mutex<Vec<(&'static str, u64)>>) {
    let Ok(s) = x.stats() else { return };
    set_mirror(&s, into);
    *actions.lock().unwrap_or_else(|e| e.into_inner()) = s.actions().to_vec();
}

fn set_mirror(s: &XdpStats, into: &Stats) {
    use dta_wire::Opcode;
    let set = |c: &std::sync::atomic::AtomicU64, v: u64| c.store(v, Ordering::Relaxed);
    set(&into.datagrams, s.datagrams + s.source_not_allowed);
    for (op, n) in [
        (Opcode::KeyWrite, s.key_write),
        (Opcode::KeyIncrement, s.key_increment),
        (Opcode::Append, s.append),
    ] {
        set(&into.reports[op as usize - 1], n);
    }
    set(
        &into.rejects[Reason::SourceNotAllowed.index()],
        s.source_not_allowed,
    );
}

/// Remove the pins (and their directory when it is left empty).
fn remove_pins(pins: &[PathBuf]) {
    for p in pins {
        if let Err(e) = std::fs::remove_file(p) {
            tracing::warn!("removing the pin {}: {e}", p.display());
        }
    }
    if let Some(dir) = pins.first().and_then(|p| p.parent()) {
        let _ = std::fs::remove_dir(dir);
    }
}

/// A reload of the XDP translator: the new rules split against the stores as placed at start
/// (a store cannot move between the driver and userspace while running); the driver's share
/// is installed first (refused without changing anything if it does not fit), then the whole
/// set for the userspace half.
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
    let g = lock(x).install_rules(&split)?;
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
