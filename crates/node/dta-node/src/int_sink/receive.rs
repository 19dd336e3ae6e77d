//! The INT sink's receive threads: each reads its own steered socket (and, with AF_XDP, its
//! share of the AF_XDP sockets, handing a report of a flow another thread owns to that thread:
//! [`super::handoff`]), hands the datagrams to its sink a slice at a time, runs the sink's
//! timers, and flushes on stop in the order the sinks' hand-overs need.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dta_int::IntSink;
use dta_net::mmsg::RecvBatch;
use dta_translator::ingest::{self, DatagramSource};
use dta_translator::sinks::RegionSinks;

use super::handoff::{self, Handoff};

/// How long a sink thread waits for a datagram before it runs its timers and looks at `stop`.
pub(super) const RECV_WAIT: Duration = Duration::from_millis(10);

/// Nanoseconds since the Unix epoch (the sink's clock for FlowCache ages and events).
fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The datagrams of one `recvmmsg`, to the sink, a slice of admitted ones at a time
/// ([`IntSink::handle_reports`]: the same as one by one, in order, with their cache misses
/// overlapped).
fn take(sink: &mut IntSink<RegionSinks>, m: &RecvBatch, n: usize) {
    let unknown = SocketAddr::from(([0, 0, 0, 0], 0));
    take_owned(
        sink,
        &mut (0..n).map(|i| {
            let (data, from) = m.datagram(i);
            (data, from.unwrap_or(unknown))
        }),
        None,
    );
}

/// Whether a receive loop may pause to gather its next batch: not within [`HANDING_QUIET`] of a
/// batch that handed a flow to the fast path ([`IntSink::handed_over`]). That flow's next
/// reports, already on their way, reach the sink instead of the fast path until the program
/// knows it, each at the full cost of the sink's handling, and new flows come in bursts (a
/// start, a route change): a pause then delays the hand-over of every new flow that arrives
/// in it.
#[derive(Default)]
struct Handing {
    /// Until when (ns, the sink's clock) the loop does not pause.
    quiet_until_ns: u64,
}

/// How long after a hand-over to the fast path a receive loop reads on without pausing: a burst
/// of new flows at the rates measured (docs/benchmarks.md, "Speed at the limit, fifth part").
const HANDING_QUIET: Duration = Duration::from_millis(10);

impl Handing {
    /// A batch handed a flow over at `now_ns`.
    fn handed(&mut self, now_ns: u64) {
        self.quiet_until_ns = now_ns.saturating_add(HANDING_QUIET.as_nanos() as u64);
    }

    /// Whether the loop may pause at `now_ns`.
    fn may_pause(&self, now_ns: u64) -> bool {
        now_ns >= self.quiet_until_ns
    }
}

/// Where one sink thread receives: its socket, the AF_XDP sockets it reads beside it (none
/// without AF_XDP receive), whose program's drops it counts as its own rejects, and the
/// inboxes of the threads (with AF_XDP and several threads).
pub(super) struct Receive<'a, 's> {
    pub(super) socket: &'a UdpSocket,
    pub(super) sources: Vec<&'a mut &'s mut (dyn DatagramSource + Send)>,
    pub(super) watch: Option<&'a crate::af_xdp::Watch>,
    /// The threads' inboxes and this thread's index among them.
    pub(super) steer: Option<Steer<'a>>,
    pub(super) batch: usize,
    /// After a partial batch, how long the next gathers ([`RecvBatch::gather`]).
    pub(super) gather: Duration,
}

/// The inboxes of the sink threads and this one's index: an AF_XDP report of a flow another
/// thread owns goes to its inbox.
#[derive(Clone, Copy)]
pub(super) struct Steer<'a> {
    pub(super) handoff: &'a Handoff,
    pub(super) me: usize,
    pub(super) threads: usize,
    /// Threads done receiving (they hand nothing over any more).
    pub(super) received: &'a AtomicUsize,
}

/// One sink thread: receive until `stop` (a signal, an error on any thread) or `deadline`,
/// take what the kernel already holds (bounded), then (with inboxes) apply what the others
/// hand this one until every thread is done receiving, then flush: this thread's flows first,
/// then, once every thread has flushed its flows (which may hand reports to the translator
/// that owns them), what the others handed this one. A signal interrupting `recvmmsg` is not
/// an error.
pub(super) fn run_sink(
    sink: &mut IntSink<RegionSinks>,
    rx: Receive<'_, '_>,
    stop: &AtomicBool,
    deadline: Option<Instant>,
    flushed: &AtomicUsize,
    threads: usize,
) -> std::io::Result<()> {
    let Receive {
        socket,
        mut sources,
        watch,
        steer,
        batch,
        gather,
    } = rx;
    let mut m = ingest::recv_batch(batch);
    let mut handing = Handing::default();
    let fd = socket.as_raw_fd();
    let mut turns = ingest::SourceTurns::default();
    let mut fds = vec![fd];
    fds.extend(sources.iter().map(|s| s.fd()));
    fds.extend(steer.map(|s| s.handoff.fd(s.me)));
    // The program's drops already counted as this sink's rejects.
    let mut mirrored = 0;
    let r = loop {
        if stop.load(Ordering::Relaxed) {
            break Ok(());
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            stop.store(true, Ordering::Relaxed);
            break Ok(());
        }
        if sources.is_empty() && steer.is_none() {
            // The socket alone: one blocking receive (its timeout runs the timers).
            match m.recv(fd, libc::MSG_WAITFORONE) {
                Ok(n) => {
                    let handed = sink.handed_over();
                    take(sink, &m, n);
                    let now = now_ns();
                    sink.tick(now);
                    if sink.handed_over() != handed {
                        handing.handed(now);
                    }
                    if handing.may_pause(now) {
                        m.gather(n, gather);
                    }
                }
                Err(e) => break Err(e),
            }
            continue;
        }
        let handed = sink.handed_over();
        let a = match from_sources(sink, &mut sources, batch, steer) {
            Ok(a) => a + steer.map_or(0, |s| from_inbox(sink, s)),
            Err(e) => break Err(e),
        };
        let n = if turns.read_sockets(a, batch) {
            match m.recv(fd, libc::MSG_DONTWAIT) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
                Err(e) => break Err(e),
            }
        } else {
            0
        };
        take(sink, &m, n);
        // The clock is read only when a flow was handed over or a pause could follow.
        if sink.handed_over() != handed {
            handing.handed(now_ns());
        }
        let pause = n + a < batch && !gather.is_zero() && handing.may_pause(now_ns());
        match turns.after(n + a) {
            // A partial batch: let the next one gather, as from the socket alone (at paced
            // rates one wake-up per `gather`, not one per few reports).
            ingest::Idle::Busy if pause => std::thread::sleep(gather),
            ingest::Idle::Busy => {}
            ingest::Idle::Nap => ingest::Idle::Nap.pause(),
            ingest::Idle::Wait => {
                if steer.is_none_or(|s| s.handoff.sleep(s.me)) {
                    let r = ingest::wait_readable(&fds, RECV_WAIT);
                    if let Some(s) = steer {
                        s.handoff.woke(s.me);
                    }
                    if let Err(e) = r {
                        break Err(e);
                    }
                }
            }
        }
        sink.tick(now_ns());
        if let Some(w) = watch {
            mirrored = mirror_rejects(sink, w, mirrored);
        }
    };
    if r.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    // Reports that arrived before the stop, bounded so a flood cannot hold the exit.
    let mut drained = 0;
    while drained < ingest::MAX_DRAIN_DATAGRAMS {
        let a = from_sources(sink, &mut sources, batch, steer).unwrap_or(0)
            + steer.map_or(0, |s| from_inbox(sink, s));
        let n = m.recv(fd, libc::MSG_DONTWAIT).unwrap_or_default();
        if n + a == 0 {
            break;
        }
        take(sink, &m, n);
        drained += n + a;
    }
    if let Some(s) = steer {
        // Nothing more from this thread; what the others still hand this one is applied until
        // they are done too, then what is left.
        s.received.fetch_add(1, Ordering::AcqRel);
        while s.received.load(Ordering::Acquire) < s.threads {
            if from_inbox(sink, s) == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        while from_inbox(sink, s) > 0 {}
    }
    if let Some(w) = watch {
        w.refresh();
        mirror_rejects(sink, w, mirrored);
    }
    sink.flush(now_ns());
    flushed.fetch_add(1, Ordering::AcqRel);
    while flushed.load(Ordering::Acquire) < threads {
        // `tick` applies what the other threads hand this one.
        sink.tick(now_ns());
        std::thread::sleep(Duration::from_micros(200));
    }
    sink.tick(now_ns());
    sink.flush(now_ns());
    r
}

/// A batch from each AF_XDP socket, to the sink as [`take`] hands it a socket's (with `steer`,
/// a report of a flow another thread owns to that thread); how many datagrams they held.
fn from_sources(
    sink: &mut IntSink<RegionSinks>,
    sources: &mut [&mut &mut (dyn DatagramSource + Send)],
    batch: usize,
    steer: Option<Steer<'_>>,
) -> std::io::Result<usize> {
    let mut got = 0;
    for s in sources.iter_mut() {
        got += s.recv_batch(batch, &mut |it| take_owned(sink, it, steer))?;
    }
    Ok(got)
}

/// Up to a slice of what the other threads handed this one, to the sink; how many.
fn from_inbox(sink: &mut IntSink<RegionSinks>, s: Steer<'_>) -> usize {
    s.handoff
        .drain_slice(s.me, &mut |it| take_owned(sink, it, None))
}

/// The admitted datagrams `it` yields to the sink a slice at a time, as [`take`]; with
/// `steer`, a report whose flow another thread owns ([`dta_int::steer::steer`], the socket
/// path's steering) goes to that thread's inbox instead, and while that inbox is full this
/// thread applies its own, so the thread it waits for is never waiting for it.
fn take_owned(
    sink: &mut IntSink<RegionSinks>,
    it: &mut dyn Iterator<Item = (&[u8], SocketAddr)>,
    steer: Option<Steer<'_>>,
) {
    const SLICE: usize = handoff::SLICE;
    let now = now_ns();
    let mut batch: [(&[u8], u64); SLICE] = [(&[], 0); SLICE];
    let mut k = 0;
    for (data, from) in it {
        if !sink.admit(from.ip()) {
            continue;
        }
        if let Some(s) = steer {
            let to = dta_int::steer::steer(data, s.threads);
            if to != s.me {
                while !s.handoff.try_send(to, data, from) {
                    if from_inbox(sink, s) == 0 {
                        std::thread::yield_now();
                    }
                }
                continue;
            }
        }
        batch[k] = (data, now);
        k += 1;
        if k == SLICE {
            sink.handle_reports(&batch);
            k = 0;
        }
    }
    sink.handle_reports(&batch[..k]);
}

/// Count the AF_XDP program's `source_not_allowed` drops since `already` as the sink's own
/// source rejects (the driver refused them before the sink saw them); the new total. One
/// atomic load: the watch thread reads the program's counters.
fn mirror_rejects(sink: &IntSink<RegionSinks>, w: &crate::af_xdp::Watch, already: u64) -> u64 {
    let total = w.source_not_allowed();
    sink.count_source_rejects(total.saturating_sub(already));
    total.max(already)
}
