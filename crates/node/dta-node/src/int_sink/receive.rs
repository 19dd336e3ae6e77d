//! The INT sink's receive threads: each reads its own steered socket (and, with AF_XDP, the
//! AF_XDP sockets), hands the datagrams to its sink a slice at a time, runs the sink's timers,
//! and flushes on stop in the order the sinks' hand-overs need.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dta_int::IntSink;
use dta_net::mmsg::RecvBatch;
use dta_translator::ingest::{self, DatagramSource};
use dta_translator::sinks::RegionSinks;

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
    take_from(
        sink,
        &mut (0..n).map(|i| {
            let (data, from) = m.datagram(i);
            (data, from.unwrap_or(unknown))
        }),
    );
}

/// Where one sink thread receives: its socket, the AF_XDP sockets it reads beside it (none
/// without AF_XDP receive), whose program's drops it counts as its own rejects.
pub(super) struct Receive<'a, 's> {
    pub(super) socket: &'a UdpSocket,
    pub(super) sources: &'a mut [&'s mut (dyn DatagramSource + Send)],
    pub(super) watch: Option<&'a crate::af_xdp::Watch>,
    pub(super) batch: usize,
    /// After a partial batch, how long the next gathers ([`RecvBatch::gather`]).
    pub(super) gather: Duration,
}

/// One sink thread: receive until `stop` (a signal, an error on any thread) or `deadline`,
/// take what the kernel already holds (bounded), then flush: this thread's flows first, then,
/// once every thread has flushed its flows (which may hand reports to the translator that owns
/// them), what the others handed this one. A signal interrupting `recvmmsg` is not an error.
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
        sources,
        watch,
        batch,
        gather,
    } = rx;
    let mut m = ingest::recv_batch(batch);
    let fd = socket.as_raw_fd();
    let mut turns = ingest::SourceTurns::default();
    let mut fds = vec![fd];
    fds.extend(sources.iter().map(|s| s.fd()));
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
        if sources.is_empty() {
            // The socket alone: one blocking receive (its timeout runs the timers).
            match m.recv(fd, libc::MSG_WAITFORONE) {
                Ok(n) => {
                    take(sink, &m, n);
                    sink.tick(now_ns());
                    m.gather(n, gather);
                }
                Err(e) => break Err(e),
            }
            continue;
        }
        let a = match from_sources(sink, sources, batch) {
            Ok(a) => a,
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
        match turns.after(n + a) {
            // A partial batch: let the next one gather, as from the socket alone (at paced
            // rates one wake-up per `gather`, not one per few reports).
            ingest::Idle::Busy if n + a < batch && !gather.is_zero() => std::thread::sleep(gather),
            ingest::Idle::Busy => {}
            ingest::Idle::Nap => ingest::Idle::Nap.pause(),
            ingest::Idle::Wait => {
                if let Err(e) = ingest::wait_readable(&fds, RECV_WAIT) {
                    break Err(e);
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
        let a = from_sources(sink, sources, batch).unwrap_or(0);
        let n = m.recv(fd, libc::MSG_DONTWAIT).unwrap_or_default();
        if n + a == 0 {
            break;
        }
        take(sink, &m, n);
        drained += n + a;
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

/// A batch from each AF_XDP socket, to the sink as [`take`] hands it a socket's; how many
/// datagrams they held.
fn from_sources(
    sink: &mut IntSink<RegionSinks>,
    sources: &mut [&mut (dyn DatagramSource + Send)],
    batch: usize,
) -> std::io::Result<usize> {
    let mut got = 0;
    for s in sources.iter_mut() {
        got += s.recv_batch(batch, &mut |it| take_from(sink, it))?;
    }
    Ok(got)
}

/// Datagrams (payload, source) to the sink, a slice of admitted ones at a time, as [`take`].
fn take_from(sink: &mut IntSink<RegionSinks>, it: &mut dyn Iterator<Item = (&[u8], SocketAddr)>) {
    const SLICE: usize = 64;
    let now = now_ns();
    let mut batch: [(&[u8], u64); SLICE] = [(&[], 0); SLICE];
    let mut k = 0;
    for (data, from) in it {
        if sink.admit(from.ip()) {
            batch[k] = (data, now);
            k += 1;
            if k == SLICE {
                sink.handle_reports(&batch);
                k = 0;
            }
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
