//! The INT sink's XDP fast path ([`dta_xdp::IntXdp`]): loaded and attached for the sink threads,
//! each given its own range of the program's flow slots through [`FastPath`].

use std::sync::{Arc, Mutex};

use anyhow::{bail, Context};
use dta_int::fast::{FastFlow, FastPath, FastThresholds};
use dta_int::IntSink;
use dta_int_wire::instr;
use dta_translator::sinks::RegionSinks;
use dta_xdp::{IntXdp, IntXdpConfig};

use crate::config::IntSinkFile;

/// Histogram blocks of the XDP fast path: switches whose histograms it counts (3 metrics × 33
/// log2 buckets × 8 bytes each, per possible CPU: 3.2 MiB a CPU, fewer switches past
/// `dta_xdp::INT_HIST_BUDGET`); flows through other switches stay the sink's.
const XDP_SWITCHES: u32 = 4096;

pub(super) fn lock(x: &Mutex<IntXdp>) -> std::sync::MutexGuard<'_, IntXdp> {
    x.lock().unwrap_or_else(|e| e.into_inner())
}

/// Load the INT fast path for `f`'s sinks, attach it to `iface` and give each sink its part
/// (flow slots `i * capacity ..`); with the kernel's BPF run-time statistics on while the
/// returned descriptor lives.
pub(super) fn attach(
    f: &IntSinkFile,
    iface: &str,
    force_generic: bool,
    sinks: &mut [IntSink<RegionSinks>],
) -> anyhow::Result<(Arc<Mutex<IntXdp>>, Option<std::os::fd::OwnedFd>)> {
    let Some(int_port) = f.sink.int_udp_port else {
        bail!("--xdp needs [sink] int_udp_port (INT over UDP is what the fast path reads)");
    };
    let per = sinks.first().map_or(0, |s| s.flow_cache().capacity()) as u32;
    let cfg = IntXdpConfig {
        port: f.listen.port(),
        int_port,
        instructions: instr::NODE_ID | instr::HOP_LATENCY | instr::QUEUE | instr::TX_UTIL,
        flows: per
            .checked_mul(sinks.len() as u32)
            .context("flow_capacity x threads")?,
        switches: XDP_SWITCHES,
        allow: f.sink.allow.clone(),
    };
    let mut x = IntXdp::load(&cfg).context("loading the INT XDP program")?;
    let mode = x
        .attach(iface, force_generic)
        .with_context(|| format!("attaching the INT XDP program to {iface}"))?;
    let stats_fd = match dta_xdp::enable_run_time_stats() {
        Ok(fd) => Some(fd),
        Err(e) => {
            eprintln!("warning: {e}: the XDP program's run time is not measured");
            None
        }
    };
    eprintln!("INT XDP fast path on {iface} ({mode:?} mode)");
    let x = Arc::new(Mutex::new(x));
    for (i, s) in sinks.iter_mut().enumerate() {
        s.set_fast_path(Box::new(XdpFast {
            xdp: x.clone(),
            base: i as u32 * per,
            slots: per,
            sources_taken: 0,
        }));
    }
    Ok((x, stats_fd))
}

/// The fast path's program as the AF_XDP sockets' redirect (`--xdp IFACE --af-xdp IFACE`): what
/// it passes to the sink goes to the socket of its receive queue
/// ([`IntXdp::redirect_to`]).
pub(super) struct Redirect(pub(super) Arc<Mutex<IntXdp>>);

impl crate::af_xdp::Redirector for Redirect {
    fn register(&mut self, queue: u32, fd: std::os::fd::RawFd) -> Result<(), dta_xdp::XdpError> {
        lock(&self.0).redirect_to(queue, fd)
    }

    fn stats(&self) -> Result<dta_xdp::xsk::XskProgramStats, dta_xdp::XdpError> {
        let s = lock(&self.0).stats()?;
        let to_sink = s.pass_shape + s.pass_unknown_flow + s.pass_path + s.pass_event;
        Ok(dta_xdp::xsk::XskProgramStats {
            packets: s.packets,
            redirected: s.af_xdp,
            pass_other: s.pass_other,
            source_not_allowed: s.source_not_allowed,
            pass_no_socket: to_sink.saturating_sub(s.af_xdp),
            pass_ip_options: s.pass_ip_options,
            pass_fragment: s.pass_fragment,
            run_time_ns: s.run_time_ns,
            run_count: s.run_count,
        })
    }

    fn mode(&self) -> dta_xdp::AttachMode {
        lock(&self.0)
            .attached()
            .map_or(dta_xdp::AttachMode::Generic, |(_, m)| m)
    }

    fn mirrors_sources(&self) -> bool {
        // The fast path hands its drops to sink 0 itself (`XdpFast`).
        false
    }
}

/// One sink thread's view of the shared fast path.
struct XdpFast {
    xdp: Arc<Mutex<IntXdp>>,
    /// This sink's first flow slot.
    base: u32,
    /// This sink's flow slots (`base..base + slots`).
    slots: u32,
    /// The program's `source_not_allowed` already handed to the sink (sink 0 takes them).
    sources_taken: u64,
}

/// CLOCK_MONOTONIC, ns (the clock whose coarse reading, `bpf_ktime_get_coarse_ns`, the program
/// stamps a report with).
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl FastPath for XdpFast {
    fn learn(&mut self, key: &[u8; 13], slot: u32, nodes: &[u32], seq: u32) -> Result<(), String> {
        lock(&self.xdp)
            .learn(key, self.base + slot, nodes, seq)
            .map_err(|e| e.to_string())
    }

    fn forget(&mut self, key: &[u8; 13]) {
        lock(&self.xdp).forget(key);
    }

    fn changed(&mut self, out: &mut Vec<u32>) {
        let from = out.len();
        lock(&self.xdp).changed(self.base, self.base + self.slots, out);
        for s in &mut out[from..] {
            *s -= self.base;
        }
    }

    fn take(&mut self, slot: u32, now_ns: u64) -> Option<FastFlow> {
        let a = lock(&self.xdp).take(self.base + slot)?;
        Some(FastFlow {
            packets: a.packets,
            hops: a.hops,
            // The sink's clock: as long before now as the report was.
            last_ns: now_ns.saturating_sub(monotonic_ns().saturating_sub(a.last_mono_ns)),
            seq: a.seq,
            latest: a.latest,
            sum: a.sum,
            last: a.last,
        })
    }

    fn take_hist(&mut self, add: &mut dyn FnMut(u32, usize, u8, u64)) {
        lock(&self.xdp).take_hist(add);
    }

    fn take_source_rejects(&mut self) -> u64 {
        if self.base != 0 {
            return 0;
        }
        let now = lock(&self.xdp).stats().map_or(0, |s| s.source_not_allowed);
        now.saturating_sub(std::mem::replace(&mut self.sources_taken, now))
    }

    fn set_thresholds(&mut self, t: &FastThresholds) {
        if let Err(e) = lock(&self.xdp).set_thresholds(
            t.enabled,
            t.hop_latency,
            t.queue_occupancy,
            t.egress_tx_util,
            t.path_latency,
        ) {
            eprintln!("INT XDP fast path: {e}");
        }
    }
}
