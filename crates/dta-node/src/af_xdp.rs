//! Kernel-bypass receive for the node's services (`dta translator --af-xdp IFACE`,
//! `dta int-sink --af-xdp IFACE`, docs/xdp.md "AF_XDP receive"): the redirect program on the
//! interface, holding the same compiled allow-list as every other mode, and one AF_XDP socket
//! per receive queue, each read by one translator thread (the INT sink's one thread reads them
//! all) beside its ordinary sockets (which keep receiving what the redirect does not take, and
//! send the NACKs). The program's drops are mirrored into a [`Stats`], so
//! the metrics and the summary count them under `source_not_allowed` like the userspace ones.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;

use anyhow::{bail, Context};
use dta_translator::ingest::DatagramSource;
use dta_translator::{Reason, Stats};
use dta_wire::prefix::AllowList;
use dta_xdp::xsk::{self, XskProgram, XskReceiver};

/// What `--af-xdp` asks.
#[derive(Debug, Clone)]
pub struct AfXdpOptions {
    /// The interface the reports arrive on.
    pub iface: String,
    /// Attach the redirect program in generic (SKB) mode even where the driver has native XDP.
    pub generic: bool,
}

/// The redirect program and the sockets, one per receive queue.
pub struct AfXdp {
    iface: String,
    program: Mutex<XskProgram>,
    receivers: Vec<XskReceiver>,
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
    /// one socket on each of the first `queues` receive queues.
    pub fn open(
        o: &AfXdpOptions,
        port: u16,
        allow: &AllowList,
        queues: usize,
    ) -> Result<AfXdp, Unavailable> {
        let unavailable = |why: anyhow::Error| Unavailable {
            iface: o.iface.clone(),
            why,
        };
        let mut program = XskProgram::load_attach(&o.iface, port, allow, o.generic)
            .map_err(|e| unavailable(e.into()))?;
        let mut receivers = Vec::with_capacity(queues);
        let frames = xsk::frames_for(queues);
        for q in 0..queues as u32 {
            let r = XskReceiver::open_with(&o.iface, q, port, frames)
                .map_err(|e| unavailable(e.into()))?;
            program
                .register(q, r.fd())
                .map_err(|e| unavailable(e.into()))?;
            receivers.push(r);
        }
        Ok(AfXdp {
            iface: o.iface.clone(),
            program: Mutex::new(program),
            receivers,
            _run_time: dta_xdp::enable_run_time_stats().ok(),
        })
    }

    /// One line: the interface, how the program is attached, how the sockets are bound.
    pub fn describe(&self) -> String {
        let zc = self.receivers.iter().filter(|r| r.zero_copy()).count();
        format!(
            "AF_XDP receive on {} ({:?} XDP, {} socket{}, {})",
            self.iface,
            self.lock().mode(),
            self.receivers.len(),
            if self.receivers.len() == 1 { "" } else { "s" },
            if zc == self.receivers.len() {
                "zero-copy"
            } else if zc == 0 {
                "copy mode"
            } else {
                "zero-copy and copy mode"
            }
        )
    }

    /// The sockets, one per translator thread, as the receive loops take them, and the
    /// program's counters, to mirror while they receive.
    pub fn parts(&mut self) -> (Mirror<'_>, Vec<Option<&mut (dyn DatagramSource + Send)>>) {
        let sources = self
            .receivers
            .iter_mut()
            .map(|r| Some(r as &mut (dyn DatagramSource + Send)))
            .collect();
        (Mirror(&self.program), sources)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, XskProgram> {
        lock(&self.program)
    }

    /// [`Mirror::mirror`].
    pub fn mirror(&self, into: &Stats) {
        Mirror(&self.program).mirror(into)
    }

    /// The program's and the sockets' counters, for the summary.
    pub fn snapshot(&self) -> serde_json::Value {
        let sockets: Vec<serde_json::Value> = self
            .receivers
            .iter()
            .map(|r| {
                let s = r.stats();
                serde_json::json!({
                    "queue": r.queue(),
                    "zero_copy": r.zero_copy(),
                    "frames": s.frames.load(Relaxed),
                    "datagrams": s.datagrams.load(Relaxed),
                    "rejected": s.rejected().into_iter().collect::<std::collections::BTreeMap<_, _>>(),
                    "kernel": r.kernel_stats(),
                })
            })
            .collect();
        serde_json::json!({
            "iface": self.iface,
            "program": self.lock().stats().ok(),
            "sockets": sockets,
        })
    }
}

fn lock(p: &Mutex<XskProgram>) -> std::sync::MutexGuard<'_, XskProgram> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// The program's counters, read while the sockets are in use.
pub struct Mirror<'a>(&'a Mutex<XskProgram>);

impl Mirror<'_> {
    /// Copy the program's drops into `into` (which holds nothing else): `source_not_allowed`,
    /// and the datagrams they were.
    pub fn mirror(&self, into: &Stats) {
        let Some(n) = self.source_not_allowed() else {
            return;
        };
        into.datagrams.store(n, Relaxed);
        into.rejects[Reason::SourceNotAllowed.index()].store(n, Relaxed);
    }

    /// The datagrams the program dropped for their source since it was attached (`None`: its
    /// counters could not be read).
    pub fn source_not_allowed(&self) -> Option<u64> {
        lock(self.0).stats().ok().map(|s| s.source_not_allowed)
    }
}
