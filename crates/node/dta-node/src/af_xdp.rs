//! Kernel-bypass receive for the node's services (`dta translator --af-xdp IFACE`,
//! `dta int-sink --af-xdp IFACE`, docs/xdp.md "AF_XDP receive"): the redirect program on the
//! interface, holding the same compiled allow-list as every other mode (or, for the INT sink
//! with its fast path on the same interface, the fast path's program, which redirects what it
//! passes to the sink: [`Redirector`]), and one AF_XDP socket per receive queue, each read by
//! one service thread beside its ordinary sockets (which keep receiving what the redirect does
//! not take, and send the NACKs). With `--af-xdp-busy-poll USECS` the sockets busy-poll
//! ([`XskReceiver::busy_poll`]).
//!
//! Nothing it loses is silent: a [`Watch`] shared by the service reads the program's and the
//! sockets' counters. The service's `/metrics` shows them ([`AfXdpMetrics`], the same family
//! shape as the socket path's kernel drops), the watch thread logs once (rate-limited) when the
//! kernel's loss counters grow, and the program's drops of sources outside the allow-list are
//! mirrored into the service's own `source_not_allowed` counters.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use dta_http::metrics::counter_family as family;
use dta_translator::ingest::DatagramSource;
use dta_translator::{Reason, Stats};
use dta_wire::prefix::AllowList;
use dta_xdp::xsk::{self, XskCounters, XskKernelStats, XskProgram, XskProgramStats, XskReceiver};
use dta_xdp::{AttachMode, XdpError};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

/// The longest busy poll `--af-xdp-busy-poll` takes, in microseconds.
pub use dta_xdp::xsk::MAX_BUSY_POLL_US;

/// What `--af-xdp` asks.
#[derive(Debug, Clone)]
pub struct AfXdpOptions {
    /// The interface the reports arrive on.
    pub iface: String,
    /// Attach the redirect program in generic (SKB) mode even where the driver has native XDP.
    pub generic: bool,
    /// Busy-poll the sockets for up to this many microseconds when their rings are empty
    /// (`--af-xdp-busy-poll`; [`XskReceiver::busy_poll`]).
    pub busy_poll_us: Option<u32>,
}

/// The XDP program that hands the interface's frames to the sockets.
pub trait Redirector: Send {
    /// Hand the frames of receive queue `queue` to the socket `fd`.
    fn register(&mut self, queue: u32, fd: std::os::fd::RawFd) -> Result<(), XdpError>;
    /// Its counters in the shape of the redirect program's.
    fn stats(&self) -> Result<XskProgramStats, XdpError>;
    /// How it is attached.
    fn mode(&self) -> AttachMode;
    /// Whether its `source_not_allowed` drops are for the receive loops to count as the
    /// service's own rejects (the INT fast path hands its own to the sink).
    fn mirrors_sources(&self) -> bool;
}

impl Redirector for XskProgram {
    fn register(&mut self, queue: u32, fd: std::os::fd::RawFd) -> Result<(), XdpError> {
        XskProgram::register(self, queue, fd)
    }
    fn stats(&self) -> Result<XskProgramStats, XdpError> {
        XskProgram::stats(self)
    }
    fn mode(&self) -> AttachMode {
        XskProgram::mode(self)
    }
    fn mirrors_sources(&self) -> bool {
        true
    }
}

/// The redirect program and the sockets, one per receive queue.
pub struct AfXdp {
    iface: String,
    watch: Arc<Watch>,
    receivers: Vec<XskReceiver>,
    busy_poll_us: Option<u32>,
    /// The kernel's run-time statistics, on while this lives: the program's CPU time in the
    /// summary (`program.run_time_ns`; not kept where the kernel refuses).
    _run_time: Option<std::os::fd::OwnedFd>,
}

/// Why AF_XDP receive cannot start; the service then receives through its sockets.
#[derive(Debug, thiserror::Error)]
#[error("AF_XDP receive on {iface} is unavailable: {why:#}")]
pub struct Unavailable {
    iface: String,
    why: anyhow::Error,
}

impl AfXdp {
    /// Check that `iface` has the `queues` receive queues the service's threads need: a
    /// setting this mode cannot honour is refused, not worked around.
    pub fn check_queues(o: &AfXdpOptions, queues: usize) -> anyhow::Result<()> {
        let have = xsk::rx_queues(&o.iface)
            .with_context(|| format!("--af-xdp {}: reading its receive queues", o.iface))?;
        if queues as u32 > have {
            bail!(
                "--af-xdp {iface}: {iface} has {have} receive queue{s}, and AF_XDP receive runs \
                 one translator thread per queue: set threads to at most {have}, or give the \
                 interface more queues (ethtool -L {iface} combined N; veth: numrxqueues)",
                iface = o.iface,
                s = if have == 1 { "" } else { "s" },
            );
        }
        if queues as u32 > xsk::MAX_QUEUES {
            bail!("--af-xdp: at most {} queues", xsk::MAX_QUEUES);
        }
        Ok(())
    }

    /// Attach the redirect program for datagrams to UDP `port` from `allow`'s sources and open
    /// one socket on each of the first `queues` receive queues. `service` names the service in
    /// the log (`translator`, `int-sink`).
    pub fn open(
        o: &AfXdpOptions,
        port: u16,
        allow: &AllowList,
        queues: usize,
        service: &'static str,
    ) -> Result<AfXdp, Unavailable> {
        let program =
            XskProgram::load_attach(&o.iface, port, allow, o.generic).map_err(|e| Unavailable {
                iface: o.iface.clone(),
                why: e.into(),
            })?;
        Self::open_with(o, port, Box::new(program), queues, service)
    }

    /// [`AfXdp::open`] with a program already attached to the interface that redirects to the
    /// sockets it is given (the INT fast path's).
    pub fn open_with(
        o: &AfXdpOptions,
        port: u16,
        mut program: Box<dyn Redirector>,
        queues: usize,
        service: &'static str,
    ) -> Result<AfXdp, Unavailable> {
        let unavailable = |why: anyhow::Error| Unavailable {
            iface: o.iface.clone(),
            why,
        };
        let mut receivers = Vec::with_capacity(queues);
        let mut counters = Vec::with_capacity(queues);
        let frames = xsk::frames_for(queues);
        for q in 0..queues as u32 {
            let r = XskReceiver::open_with(&o.iface, q, port, frames)
                .map_err(|e| unavailable(e.into()))?;
            program
                .register(q, r.fd())
                .map_err(|e| unavailable(e.into()))?;
            counters.push(r.counters().map_err(|e| unavailable(e.into()))?);
            receivers.push(r);
        }
        Ok(AfXdp {
            iface: o.iface.clone(),
            watch: Arc::new(Watch {
                service,
                iface: o.iface.clone(),
                program: Mutex::new(program),
                counters,
                source_not_allowed: AtomicU64::new(0),
            }),
            receivers,
            busy_poll_us: None,
            _run_time: dta_xdp::enable_run_time_stats().ok(),
        })
    }

    /// What `--af-xdp` gives a service, from what [`AfXdp::open`] (or [`AfXdp::open_with`])
    /// answered: the sockets, busy-polling as `o` asks; or, where the kernel or the driver
    /// cannot open them, none (the service's UDP sockets alone), said once. Busy polling the
    /// kernel refuses is an error: a setting the mode cannot honour, refused at start.
    pub fn start(
        o: &AfXdpOptions,
        opened: Result<AfXdp, Unavailable>,
    ) -> anyhow::Result<Option<AfXdp>> {
        let mut x = match opened {
            Ok(x) => x,
            Err(e) => {
                eprintln!("warning: {e}; receiving through the UDP socket instead");
                return Ok(None);
            }
        };
        if let Some(us) = o.busy_poll_us {
            x.busy_poll(us)?;
        }
        Ok(Some(x))
    }

    /// Busy-poll every socket for up to `usecs` microseconds when its ring is empty; an error
    /// (the kernel refused an option) is for the service to refuse at start.
    fn busy_poll(&mut self, usecs: u32) -> anyhow::Result<()> {
        for r in &mut self.receivers {
            r.busy_poll(usecs).with_context(|| {
                format!(
                    "--af-xdp-busy-poll {usecs}: busy polling needs CAP_NET_ADMIN (or \
                     net.core.busy_read at least {usecs})"
                )
            })?;
        }
        self.busy_poll_us = Some(usecs.clamp(1, xsk::MAX_BUSY_POLL_US));
        Ok(())
    }

    /// One line: the interface, how the program is attached, how the sockets are bound.
    pub fn describe(&self) -> String {
        let zc = self.receivers.iter().filter(|r| r.zero_copy()).count();
        format!(
            "AF_XDP receive on {} ({:?} XDP, {} socket{} of {} frames, {}{})",
            self.iface,
            self.watch.lock().mode(),
            self.receivers.len(),
            if self.receivers.len() == 1 { "" } else { "s" },
            xsk::frames_for(self.receivers.len()),
            if zc == self.receivers.len() {
                "zero-copy"
            } else if zc == 0 {
                "copy mode"
            } else {
                "zero-copy and copy mode"
            },
            self.busy_poll_us
                .map(|u| format!(", busy polling {u} µs"))
                .unwrap_or_default()
        )
    }

    /// The counters' reader, shared with the metrics and the watch thread.
    pub fn watch(&self) -> Arc<Watch> {
        self.watch.clone()
    }

    /// The sockets, one per translator thread, as the receive loops take them.
    pub fn sources(&mut self) -> Vec<&mut (dyn DatagramSource + Send)> {
        self.receivers
            .iter_mut()
            .map(|r| r as &mut (dyn DatagramSource + Send))
            .collect()
    }

    /// The program's and the sockets' counters, for the summary.
    pub fn snapshot(&self) -> serde_json::Value {
        let sockets: Vec<serde_json::Value> = self
            .watch
            .counters
            .iter()
            .map(|c| {
                let s = &c.stats;
                serde_json::json!({
                    "queue": c.queue,
                    "zero_copy": c.zero_copy,
                    "frames": s.frames.load(Relaxed),
                    "datagrams": s.datagrams.load(Relaxed),
                    "rejected": s.rejected().into_iter().collect::<std::collections::BTreeMap<_, _>>(),
                    "kernel": c.kernel(),
                    "busy_poll_us": c.busy_poll_us(),
                })
            })
            .collect();
        serde_json::json!({
            "iface": self.iface,
            "program": self.watch.program().ok(),
            "sockets": sockets,
            "lost": self.watch.lost(),
        })
    }
}

/// How often the watch reads the counters.
pub const WATCH_EVERY: Duration = Duration::from_millis(200);
/// At most one log line about AF_XDP loss per this interval (with what it held back).
pub const LOSS_LOG_EVERY: Duration = Duration::from_secs(10);

/// The program's and the sockets' counters, read from threads other than the receiving ones:
/// the metrics at each scrape, the watch thread ([`Watch::run`]) every [`WATCH_EVERY`].
pub struct Watch {
    service: &'static str,
    iface: String,
    program: Mutex<Box<dyn Redirector>>,
    counters: Vec<XskCounters>,
    /// The program's `source_not_allowed` as last read by [`Watch::run`], for the receive loops
    /// to count as their own without a system call of theirs.
    source_not_allowed: AtomicU64,
}

impl Watch {
    fn lock(&self) -> std::sync::MutexGuard<'_, Box<dyn Redirector>> {
        self.program.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The program's counters now (a few system calls: not for the data path).
    pub fn program(&self) -> Result<XskProgramStats, dta_xdp::XdpError> {
        self.lock().stats()
    }

    /// The sockets' counters now, with their queues.
    pub fn sockets(&self) -> impl Iterator<Item = (&XskCounters, XskKernelStats)> {
        self.counters.iter().map(|c| (c, c.kernel()))
    }

    /// Frames the sockets lost (the kernel's `rx_dropped + rx_ring_full`, summed).
    pub fn lost(&self) -> u64 {
        self.sockets()
            .map(|(_, k)| k.lost())
            .fold(0, u64::wrapping_add)
    }

    /// Read the program's `source_not_allowed` now and publish it for
    /// [`Watch::source_not_allowed`].
    pub fn refresh(&self) {
        if !self.lock().mirrors_sources() {
            return;
        }
        if let Ok(p) = self.program() {
            self.source_not_allowed
                .fetch_max(p.source_not_allowed, Relaxed);
        }
    }

    /// The program's drops of sources outside the allow-list, as last read by [`Watch::run`]
    /// or [`Watch::refresh`].
    pub fn source_not_allowed(&self) -> u64 {
        self.source_not_allowed.load(Relaxed)
    }

    /// Until `stop`, and once more after it: every [`WATCH_EVERY`] read the program's
    /// `source_not_allowed` (published for [`Watch::source_not_allowed`], then `after_read`
    /// is called) and the sockets' loss; when the loss grew, a warning (at most one per
    /// [`LOSS_LOG_EVERY`], saying how much was lost since the last one and why).
    pub fn run(&self, stop: &AtomicBool, mut after_read: impl FnMut(&Watch)) {
        let mut logged = self.lost();
        let mut last_line: Option<Instant> = None;
        loop {
            let done = stop.load(Relaxed);
            self.refresh();
            after_read(self);
            let lost = self.lost();
            if lost > logged && last_line.is_none_or(|t| t.elapsed() >= LOSS_LOG_EVERY) {
                let k =
                    self.sockets()
                        .fold(XskKernelStats::default(), |a, (_, k)| XskKernelStats {
                            rx_dropped: a.rx_dropped + k.rx_dropped,
                            rx_ring_full: a.rx_ring_full + k.rx_ring_full,
                            rx_fill_ring_empty: a.rx_fill_ring_empty + k.rx_fill_ring_empty,
                            rx_invalid_descs: a.rx_invalid_descs + k.rx_invalid_descs,
                        });
                tracing::warn!(
                    "{}: AF_XDP on {} lost {} frames since the last report ({} in all: \
                     {} dropped, {} at a full receive ring; the fill ring was empty {} times): \
                     the receive thread falls behind; see {}_af_xdp_kernel_drops_total",
                    self.service,
                    self.iface,
                    lost - logged,
                    lost,
                    k.rx_dropped,
                    k.rx_ring_full,
                    k.rx_fill_ring_empty,
                    crate::ops::metric_prefix(self.service),
                );
                logged = lost;
                last_line = Some(Instant::now());
            }
            if done {
                return;
            }
            let until = Instant::now() + WATCH_EVERY;
            while Instant::now() < until && !stop.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Copy the program's drops into `into` (a [`Stats`] that holds nothing else):
    /// `source_not_allowed`, and the datagrams they were.
    pub fn mirror(&self, into: &Stats) {
        let n = self.source_not_allowed();
        into.datagrams.store(n, Relaxed);
        into.rejects[Reason::SourceNotAllowed.index()].store(n, Relaxed);
    }

    /// The counters now, as the metrics show them.
    pub fn reading(&self) -> Reading {
        Reading {
            program: self.program().unwrap_or_default(),
            sockets: self
                .sockets()
                .map(|(c, k)| SocketReading {
                    queue: c.queue,
                    frames: c.stats.frames.load(Relaxed),
                    rejected: c.stats.rejected(),
                    kernel: k,
                })
                .collect(),
        }
    }

    /// The service's metrics of AF_XDP receive, read at each scrape.
    pub fn metrics(self: &Arc<Self>) -> AfXdpMetrics {
        let w = self.clone();
        AfXdpMetrics {
            prefix: crate::ops::metric_prefix(self.service),
            read: Box::new(move || w.reading()),
        }
    }
}

/// The counters of AF_XDP receive at one moment.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    pub program: XskProgramStats,
    pub sockets: Vec<SocketReading>,
}

/// One socket's counters at one moment.
#[derive(Debug, Clone, Default)]
pub struct SocketReading {
    pub queue: u32,
    /// Frames read from its receive ring.
    pub frames: u64,
    /// Frames given back unread, by reason.
    pub rejected: Vec<(&'static str, u64)>,
    pub kernel: XskKernelStats,
}

/// `/metrics` of AF_XDP receive, read at each scrape (`PREFIX` is `dta_translator` or
/// `dta_int_sink`):
///
/// - `PREFIX_af_xdp_kernel_drops_total{queue,reason}`: frames the kernel dropped at a socket,
///   `reason` `dropped` (no free frame: the fill ring was empty) or `ring_full` (the receive
///   ring was full), as `PREFIX_kernel_drops_total` counts the socket path's;
/// - `PREFIX_af_xdp_fill_ring_empty_total{queue}` and `PREFIX_af_xdp_invalid_descs_total{queue}`;
/// - `PREFIX_af_xdp_frames_total{queue}` read, `PREFIX_af_xdp_rejected_total{queue,reason}`
///   given back unread;
/// - `PREFIX_af_xdp_program_total{action}`: what the redirect program did with each frame
///   (`redirected`, `pass_other`, `pass_no_socket`, `pass_ip_options`, `pass_fragment`,
///   `source_not_allowed`).
pub struct AfXdpMetrics {
    prefix: &'static str,
    read: Box<dyn Fn() -> Reading + Send + Sync>,
}

impl AfXdpMetrics {
    /// The families of a fixed reading under `service`'s prefix (`translator`, `int-sink`):
    /// what a scrape shows for those counters (the dashboard's and the documentation's checks).
    pub fn of_reading(service: &str, r: Reading) -> AfXdpMetrics {
        AfXdpMetrics {
            prefix: crate::ops::metric_prefix(service),
            read: Box::new(move || r.clone()),
        }
    }
}

impl std::fmt::Debug for AfXdpMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AfXdpMetrics({})", self.prefix)
    }
}

impl Collector for AfXdpMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let p = self.prefix;
        let Reading { program, sockets } = (self.read)();
        let q = |c: &SocketReading| ("queue", c.queue.to_string());
        family(
            &mut enc,
            &format!("{p}_af_xdp_kernel_drops"),
            "Frames the kernel dropped at an AF_XDP socket, by queue and reason: dropped (no free \
             frame, the fill ring was empty) or ring_full (the receive ring was full)",
            sockets.iter().flat_map(|c| {
                [
                    (
                        vec![q(c), ("reason", "dropped".into())],
                        c.kernel.rx_dropped,
                    ),
                    (
                        vec![q(c), ("reason", "ring_full".into())],
                        c.kernel.rx_ring_full,
                    ),
                ]
            }),
        )?;
        family(
            &mut enc,
            &format!("{p}_af_xdp_fill_ring_empty"),
            "Times an AF_XDP socket's fill ring was empty when a frame arrived, by queue",
            sockets
                .iter()
                .map(|c| (vec![q(c)], c.kernel.rx_fill_ring_empty)),
        )?;
        family(
            &mut enc,
            &format!("{p}_af_xdp_invalid_descs"),
            "Descriptors of an AF_XDP socket's rings the kernel could not use, by queue",
            sockets
                .iter()
                .map(|c| (vec![q(c)], c.kernel.rx_invalid_descs)),
        )?;
        family(
            &mut enc,
            &format!("{p}_af_xdp_frames"),
            "Frames read from an AF_XDP socket's receive ring, by queue",
            sockets.iter().map(|c| (vec![q(c)], c.frames)),
        )?;
        family(
            &mut enc,
            &format!("{p}_af_xdp_rejected"),
            "Frames read from an AF_XDP socket that were not a UDP datagram to the port, by queue \
             and reason (given back unread)",
            sockets.iter().flat_map(|c| {
                c.rejected
                    .iter()
                    .map(|&(r, n)| (vec![q(c), ("reason", r.to_owned())], n))
            }),
        )?;
        let prog = program;
        family(
            &mut enc,
            &format!("{p}_af_xdp_program"),
            "Frames the AF_XDP redirect program handled, by action: redirected to a socket, \
             passed up the stack (pass_*: the UDP socket receives them), or dropped \
             (source_not_allowed)",
            [
                ("redirected", prog.redirected),
                ("pass_other", prog.pass_other),
                ("pass_no_socket", prog.pass_no_socket),
                ("pass_ip_options", prog.pass_ip_options),
                ("pass_fragment", prog.pass_fragment),
                ("source_not_allowed", prog.source_not_allowed),
            ]
            .map(|(a, v)| (vec![("action", a.to_owned())], v)),
        )
    }
}
