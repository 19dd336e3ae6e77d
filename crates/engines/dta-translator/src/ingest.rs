// Size: the receive loops (one thread, threads, the classifier) share the socket set-up, the
// drain on stop and the sending of NACKs.
//! The UDP ingest loop: batched `recvmmsg` into preallocated buffers, one `Translator` call per
//! datagram, NACKs sent back, timers run when the socket is idle. [`run_threads`] runs one such
//! loop per thread, each on its own `SO_REUSEPORT` socket of the same port ([`crate::shard`]).
//! [`run_classified`] puts the first-stage classifier in front instead ([`crate::classify`]): one
//! thread receives and queues by priority, the translator threads take high priority first.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dta_wire::prefix::AllowList;

use crate::classify::{priority_of, Entry, Lanes, Pool};
use crate::config::TranslatorConfig;
use crate::engine::Translator;
use crate::reason::Reason;
use crate::sinks::Sinks;
use crate::stats::{add, Stats};

use dta_net::mmsg::{RecvBatch, RecvHeaders};

pub use crate::prio_sockets::PrioSockets;
use crate::sockets::backlog;
pub use crate::sockets::{bind, bind_group, kernel_drops, refuse_shared_port, set_recv_buffer};
use dta_wire::MAX_DATAGRAM;

/// The receive buffers of every UDP receive loop of the workspace (translator threads, the
/// INT sink): `batch` datagrams of up to [`MAX_DATAGRAM`] bytes per `recvmmsg`.
pub fn recv_batch(batch: usize) -> RecvBatch {
    RecvBatch::new(batch, MAX_DATAGRAM)
}

/// Datagrams taken from a socket after `stop` before the final flush (a receive buffer's worth;
/// a flood cannot delay the exit beyond it).
pub const MAX_DRAIN_DATAGRAMS: usize = 65_536;

/// One translator thread on `socket` (the RoCE and XDP translators' userspace path), behind
/// the classifier when the configuration asks for it or the machine has a spare core
/// ([`TranslatorConfig::classifier_for`]); the classifier counts into `classifier_stats`.
pub fn run_one<S: Sinks + Send>(
    translator: &mut Translator<S>,
    rx: &PrioSockets,
    cfg: &TranslatorConfig,
    classifier_stats: &Stats,
    stop: &AtomicBool,
) -> io::Result<()> {
    if cfg.classifier_for(1) {
        let lanes = Lanes::from_config(1, cfg)?;
        run_classified(
            std::slice::from_mut(translator),
            rx,
            &lanes,
            &cfg.allow,
            classifier_stats,
            cfg.recv_batch,
            stop,
        )
    } else {
        run(translator, rx, cfg.recv_batch, stop)
    }
}

/// Run the translator on `socket` until `stop` is set, then write out everything it holds.
pub fn run<S: Sinks>(
    translator: &mut Translator<S>,
    rx: &PrioSockets,
    batch: usize,
    stop: &AtomicBool,
) -> io::Result<()> {
    receive(translator, rx, None, batch, stop)?;
    translator.flush_all();
    Ok(())
}

/// The receive loop proper, until `stop`: from `rx`, and from `source` first when there is one.
fn receive<S: Sinks>(
    translator: &mut Translator<S>,
    rx: &PrioSockets,
    mut source: Option<&mut dyn DatagramSource>,
    batch: usize,
    stop: &AtomicBool,
) -> io::Result<()> {
    let mut m = recv_batch(batch);
    let unknown: SocketAddr = "0.0.0.0:0".parse().unwrap();
    let socket = rx.sender();
    // A batch from the source, if any: how many datagrams it held.
    let from_source = |translator: &mut Translator<S>,
                       source: &mut Option<&mut dyn DatagramSource>|
     -> io::Result<usize> {
        match source {
            Some(src) => {
                let now = Instant::now();
                src.recv_batch(batch, &mut |it| translator.handle_batch(it, now))
            }
            None => Ok(0),
        }
    };
    let mut turns = SourceTurns::default();
    while !stop.load(Ordering::Relaxed) {
        // The spill goes first, while the budget allows: it is older than what arrives now.
        translator.reinject(Instant::now());
        let a = from_source(translator, &mut source)?;
        // One batch of the highest priority waiting (prio_sockets), or a wait when none is.
        let n = if turns.read_sockets(a, batch) {
            rx.recv(&mut m)?
        } else {
            0
        };
        match turns.after(n + a) {
            Idle::Busy => {}
            Idle::Nap if source.is_some() => Idle::Nap.pause(),
            _ => rx.wait_with(source.as_ref().map(|s| s.fd()), IDLE_WAIT)?,
        }
        let now = Instant::now();
        translator.handle_batch(
            (0..n).map(|i| {
                let (data, src) = m.datagram(i);
                (data, src.unwrap_or(unknown))
            }),
            now,
        );
        send_nacks(translator, socket);
        translator.tick(now);
        // After a partial batch from the sockets, let the next one gather (a source costs no
        // system call per batch: it is read again at once).
        if a == 0 {
            m.gather(n, translator.recv_gather());
        }
    }
    // Stopping: apply what the kernel already holds for these sockets (datagrams that arrived
    // before the signal), high priority first, bounded so a flood cannot hold the exit.
    let mut drained = 0;
    while drained < MAX_DRAIN_DATAGRAMS {
        let a = from_source(translator, &mut source)?;
        let n = rx.recv(&mut m)?;
        if n + a == 0 {
            break;
        }
        let now = Instant::now();
        for i in 0..n {
            let (data, src) = m.datagram(i);
            translator.handle_datagram(data, src.unwrap_or(unknown), now);
        }
        drained += n + a;
    }
    // Spilled datagrams are written regardless of the budget, while the other threads still
    // take what this one hands them ([`Translator::drain_spill`]; bounded by the spill's size).
    translator.drain_spill();
    send_nacks(translator, socket);
    Ok(())
}

/// What a [`DatagramSource`] hands a batch to: the datagrams (payload, source) of one batch.
pub type BatchFn<'f> = dyn FnMut(&mut dyn Iterator<Item = (&[u8], SocketAddr)>) + 'f;

/// A source of datagrams other than the kernel's sockets: an AF_XDP socket
/// (`dta_xdp::xsk::XskReceiver`), read by [`run_source`] beside the ordinary sockets.
pub trait DatagramSource {
    /// Hand up to `max` received datagrams (payload, source) to `f` as one batch; how many
    /// were read (0: none waiting). Never blocks.
    fn recv_batch(&mut self, max: usize, f: &mut BatchFn<'_>) -> io::Result<usize>;

    /// A descriptor that is readable when datagrams wait (for `poll`).
    fn fd(&self) -> std::os::fd::RawFd;
}

/// [`run`] with datagrams from `source` as well as from `rx` (what the source does not take
/// still reaches the sockets, and NACKs leave through them): until `stop`, then everything
/// held written out.
pub fn run_source<S: Sinks>(
    translator: &mut Translator<S>,
    source: &mut dyn DatagramSource,
    rx: &PrioSockets,
    batch: usize,
    stop: &AtomicBool,
) -> io::Result<()> {
    receive(translator, rx, Some(source), batch, stop)?;
    translator.flush_all();
    Ok(())
}

fn send_nacks<S: Sinks>(translator: &mut Translator<S>, socket: &UdpSocket) {
    for nack in translator.drain_nacks() {
        // A NACK that cannot be sent is not fatal: the reporter's timeout covers it.
        let _ = socket.send_to(nack.bytes(), nack.to);
    }
}

/// Run one translator thread per socket (from [`bind_group`]; the translators made with
/// [`Translator::with_shard`] over one [`crate::Shards`]) until `stop` is set. On the way out
/// every thread keeps applying what the others hand it until all have stopped receiving, then
/// writes out everything it holds. An error on one thread stops them all.
pub fn run_threads<S: Sinks + Send>(
    translators: &mut [Translator<S>],
    sockets: &[PrioSockets],
    batch: usize,
    stop: &AtomicBool,
) -> io::Result<()> {
    let sources = (0..translators.len()).map(|_| None).collect();
    run_threads_from(translators, sockets, sources, batch, stop)
}

/// [`run_threads`], thread `i` reading `sources[i]` too when it is given (an AF_XDP socket,
/// [`DatagramSource`]).
pub fn run_threads_from<S: Sinks + Send>(
    translators: &mut [Translator<S>],
    sockets: &[PrioSockets],
    sources: Vec<Option<&mut (dyn DatagramSource + Send)>>,
    batch: usize,
    stop: &AtomicBool,
) -> io::Result<()> {
    assert_eq!(
        translators.len(),
        sockets.len(),
        "one socket per translator"
    );
    assert_eq!(
        translators.len(),
        sources.len(),
        "one source per translator"
    );
    let stopped = AtomicUsize::new(0);
    let threads = translators.len();
    let results: Vec<io::Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = translators
            .iter_mut()
            .zip(sockets)
            .zip(sources)
            .enumerate()
            .map(|(i, ((t, rx), source))| {
                let stopped = &stopped;
                std::thread::Builder::new()
                    .name(format!("dta-translator-{i}"))
                    .spawn_scoped(s, move || {
                        let mut guard = Stopped::new(stopped);
                        let source = source.map(|s| s as &mut dyn DatagramSource);
                        let r = receive(t, rx, source, batch, stop);
                        if r.is_err() {
                            stop.store(true, Ordering::Relaxed);
                        }
                        finish(t, rx.sender(), &mut guard, threads);
                        r
                    })
                    .expect("spawn translator thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("translator panicked")))
            })
            .collect()
    });
    results.into_iter().collect()
}

/// Counts a translator thread as stopped receiving, once, also when it unwinds (so the others
/// do not wait for it forever).
struct Stopped<'a> {
    counter: &'a AtomicUsize,
    counted: bool,
}

impl<'a> Stopped<'a> {
    fn new(counter: &'a AtomicUsize) -> Self {
        Stopped {
            counter,
            counted: false,
        }
    }

    fn now(&mut self) {
        if !std::mem::replace(&mut self.counted, true) {
            self.counter.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        self.now();
    }
}

/// A translator thread that stopped receiving: it keeps applying what the other threads hand
/// it until all of them have stopped receiving too, then writes out everything it holds.
fn finish<S: Sinks>(
    t: &mut Translator<S>,
    socket: &UdpSocket,
    stopped: &mut Stopped<'_>,
    threads: usize,
) {
    let counter = stopped.counter;
    stopped.now();
    while counter.load(Ordering::Acquire) < threads {
        let now = Instant::now();
        if t.drain_inbox(now) == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
        send_nacks(t, socket);
    }
    t.flush_all();
    send_nacks(t, socket);
}

/// How long a translator thread behind the classifier waits for a datagram before it runs its
/// timers (as the socket's receive timeout does without the classifier).
const IDLE_WAIT: Duration = Duration::from_millis(2);
/// After a [`DatagramSource`] delivered at a rate that arms the naps ([`NAP_ARM`]), how long
/// the loop naps between looks instead of waiting for readiness, and how long a nap is.
const SOURCE_SPIN: Duration = Duration::from_millis(2);
const SOURCE_NAP: Duration = Duration::from_micros(20);
/// Datagrams within one [`SOURCE_SPIN`] that arm the naps: 200 (100 000/s). Slower, a wake-up
/// missed altogether costs one receive wait (10 ms at most: a ring holds 4 096 frames at the
/// least, and 1 000 arrive in it), while naps would cost 50 000 wake-ups a second.
const NAP_ARM: usize = 200;
/// With a [`DatagramSource`] delivering full batches, the sockets are read one turn in this
/// many.
const SOCKET_TURN: usize = 16;

/// The rhythm of a receive loop that reads [`DatagramSource`]s beside its sockets (the
/// translator's and the INT sink's): while the sources deliver full batches the sockets are
/// read one turn in [`SOCKET_TURN`] (no system call per batch for what the sources do not
/// take); for [`SOURCE_SPIN`] after datagrams arrived at [`NAP_ARM`]'s rate or faster, an idle
/// turn naps [`SOURCE_NAP`] and looks again rather than waiting for readiness (not always
/// signalled at once, AF_XDP in copy mode, and a ring overflows in the time a missed wake-up
/// costs); otherwise it waits.
#[derive(Debug)]
pub struct SourceTurns {
    turn: usize,
    /// When the naps were last armed.
    armed: Instant,
    /// The current [`SOURCE_SPIN`] window: its start and the datagrams received in it.
    window: Instant,
    in_window: usize,
}

/// What an idle turn of a [`SourceTurns`] loop does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Datagrams arrived: go on.
    Busy,
    /// Sleep [`SOURCE_NAP`] ([`Idle::pause`]), then look again.
    Nap,
    /// Wait for a descriptor to be readable.
    Wait,
}

impl Idle {
    /// Sleep if this turn naps.
    pub fn pause(self) {
        if self == Idle::Nap {
            std::thread::sleep(SOURCE_NAP);
        }
    }
}

impl Default for SourceTurns {
    fn default() -> Self {
        let now = Instant::now();
        SourceTurns {
            turn: 0,
            armed: now.checked_sub(SOURCE_SPIN).unwrap_or(now),
            window: now,
            in_window: 0,
        }
    }
}

impl SourceTurns {
    /// Whether the sockets are read this turn, the sources having delivered `from_sources` of
    /// a `batch`.
    pub fn read_sockets(&mut self, from_sources: usize, batch: usize) -> bool {
        let read = from_sources < batch || self.turn % SOCKET_TURN == 0;
        self.turn = self.turn.wrapping_add(1);
        read
    }

    /// After a turn that received `got` datagrams in all.
    pub fn after(&mut self, got: usize) -> Idle {
        self.after_at(got, Instant::now())
    }

    fn after_at(&mut self, got: usize, now: Instant) -> Idle {
        if now.saturating_duration_since(self.window) >= SOURCE_SPIN {
            self.window = now;
            self.in_window = 0;
        }
        self.in_window = self.in_window.saturating_add(got);
        if self.in_window >= NAP_ARM {
            self.armed = now;
        }
        if got > 0 {
            Idle::Busy
        } else if now.saturating_duration_since(self.armed) < SOURCE_SPIN {
            Idle::Nap
        } else {
            Idle::Wait
        }
    }
}

/// Wait until one of `fds` is readable or `timeout` passes (a signal ends the wait early).
pub fn wait_readable(fds: &[std::os::fd::RawFd], timeout: Duration) -> io::Result<()> {
    const MAX: usize = 16;
    let mut p = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; MAX];
    for (p, &fd) in p.iter_mut().zip(fds) {
        p.fd = fd;
    }
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: pollfds we own, alive for the call (unused entries have fd -1: ignored).
    let r = unsafe { libc::poll(p.as_mut_ptr(), fds.len().min(MAX) as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// How long, after `stop`, the classifier waits for room in a full queue for a datagram that
/// arrived before the stop, rather than shedding it (bounded: a stuck translator thread cannot
/// hold the exit).
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// Run `translators` behind the first-stage classifier ([`crate::classify`]): one thread
/// (`dta-classifier`) receives from `socket` with `recvmmsg` of `batch` into `lanes`' buffers,
/// drops sources outside `allow` (counted `source_not_allowed`), and queues each datagram by
/// priority to the translator thread owning its source, shedding it (counted
/// `shed{priority}`) when that queue is full; translator thread `i` applies lane `i`, high
/// priority first. The classifier's counters go to `classifier_stats`. On `stop` the classifier
/// takes what the kernel still holds (at most [`MAX_DRAIN_DATAGRAMS`]) and stops; the translator
/// threads apply their queues to the end, then write out everything they hold. An error of the
/// classifier stops them all.
pub fn run_classified<S: Sinks + Send>(
    translators: &mut [Translator<S>],
    rx: &PrioSockets,
    lanes: &Lanes,
    allow: &AllowList,
    classifier_stats: &Stats,
    batch: usize,
    stop: &AtomicBool,
) -> io::Result<()> {
    assert_eq!(
        translators.len(),
        lanes.threads(),
        "one classifier lane per translator"
    );
    let stopped = AtomicUsize::new(0);
    let threads = translators.len();
    std::thread::scope(|s| {
        let classifier = std::thread::Builder::new()
            .name("dta-classifier".into())
            .spawn_scoped(s, || {
                let r = classify(rx, lanes, allow, classifier_stats, batch, stop);
                if r.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                r
            })
            .expect("spawn classifier thread");
        let handles: Vec<_> = translators
            .iter_mut()
            .enumerate()
            .map(|(i, t)| {
                let stopped = &stopped;
                std::thread::Builder::new()
                    .name(format!("dta-translator-{i}"))
                    .spawn_scoped(s, move || {
                        let mut guard = Stopped::new(stopped);
                        translate_lane(t, lanes, i, rx.sender());
                        finish(t, rx.sender(), &mut guard, threads);
                    })
                    .expect("spawn translator thread")
            })
            .collect();
        let mut r = classifier
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("classifier panicked")));
        for h in handles {
            if h.join().is_err() && r.is_ok() {
                r = Err(io::Error::other("translator panicked"));
            }
        }
        r
    })
}

/// The classifier thread: receive, classify, queue or shed, until `stop`; then take what the
/// kernel holds (bounded) and tell the translator threads it is done.
pub fn classify(
    rx: &PrioSockets,
    lanes: &Lanes,
    allow: &AllowList,
    stats: &Stats,
    batch: usize,
    stop: &AtomicBool,
) -> io::Result<()> {
    let r = classify_until(rx, lanes, allow, stats, batch, stop);
    lanes.done.store(true, Ordering::SeqCst);
    for lane in lanes.lanes.iter() {
        lane.wake();
    }
    r
}

fn classify_until(
    sockets: &PrioSockets,
    lanes: &Lanes,
    allow: &AllowList,
    stats: &Stats,
    batch: usize,
    stop: &AtomicBool,
) -> io::Result<()> {
    let mut rx = PoolRx::new(batch, lanes.threads());
    let r = (|| {
        while !stop.load(Ordering::Relaxed) {
            // One batch of the highest priority waiting (prio_sockets), or a wait.
            let (n, fd) = rx.recv_first(&lanes.pool, sockets)?;
            if n == 0 {
                sockets.wait(IDLE_WAIT)?;
                continue;
            }
            rx.dispatch(n, lanes, allow, stats, Wait::Backlog { fd, stop });
        }
        // Stopping: queue what the kernel already holds for these sockets, waiting a bounded
        // time for room rather than shedding it.
        let deadline = Instant::now() + DRAIN_WAIT;
        let mut drained = 0;
        while drained < MAX_DRAIN_DATAGRAMS {
            let (n, _) = rx.recv_first(&lanes.pool, sockets)?;
            if n == 0 {
                break;
            }
            rx.dispatch(n, lanes, allow, stats, Wait::Until(deadline));
            drained += n;
        }
        Ok(())
    })();
    rx.give_back(&lanes.pool);
    r
}

/// A translator thread behind the classifier: apply lane `me`'s datagrams, high priority first,
/// run the timers when idle, until the classifier is done and the lane is empty.
fn translate_lane<S: Sinks>(t: &mut Translator<S>, lanes: &Lanes, me: usize, socket: &UdpSocket) {
    let lane = &lanes.lanes[me];
    lane.register();
    loop {
        let now = Instant::now();
        let mut n = 0;
        // A turn is bounded so the timers and NACKs keep their pace under load.
        while n < TURN {
            let Some(e) = lane.pop() else { break };
            t.handle_datagram(lanes.pool.bytes(e.buf, e.len), e.src, now);
            lanes.pool.release(e.buf);
            n += 1;
        }
        if n == 0 && lanes.done.load(Ordering::SeqCst) && lane.is_empty() {
            break;
        }
        send_nacks(t, socket);
        t.tick(now);
        send_nacks(t, socket);
        if n == 0 {
            lane.wait(IDLE_WAIT, &lanes.done);
        }
    }
}

/// Datagrams a translator thread applies between two runs of its timers.
const TURN: usize = 256;

/// The classifier's `recvmmsg` state: up to `batch` buffers held from the pool, the headers
/// pointing at them.
struct PoolRx {
    batch: usize,
    held: Vec<u32>,
    headers: RecvHeaders,
    woken: Vec<bool>,
}

/// Marks a held buffer handed to a queue.
const HANDED: u32 = u32::MAX;

/// How long the classifier waits for room in a full queue before shedding.
#[derive(Clone, Copy)]
enum Wait<'a> {
    /// Running: wait while the kernel holds less than the lanes' `shed_backlog` of the socket's
    /// receive buffer (a burst the buffer can hold is delayed, not shed) and not stopping.
    Backlog { fd: i32, stop: &'a AtomicBool },
    /// Stopping: wait until the deadline.
    Until(Instant),
}

impl Wait<'_> {
    /// Whether to wait for room rather than shed.
    fn for_room(self, shed_backlog: f64) -> bool {
        match self {
            Wait::Until(d) => Instant::now() < d,
            Wait::Backlog { fd, stop } => {
                !stop.load(Ordering::Relaxed)
                    && shed_backlog > 0.0
                    && backlog(fd).is_ok_and(|f| f < shed_backlog)
            }
        }
    }
}

impl PoolRx {
    fn new(batch: usize, lanes: usize) -> PoolRx {
        let headers = RecvHeaders::new(batch);
        PoolRx {
            batch: headers.capacity(),
            held: Vec::with_capacity(headers.capacity()),
            headers,
            woken: vec![false; lanes],
        }
    }

    /// Top up the held buffers from the pool and receive into them; returns how many arrived.
    fn recv(&mut self, pool: &Pool, fd: i32, flags: i32) -> io::Result<usize> {
        while self.held.len() < self.batch {
            match pool.take() {
                Some(b) => self.held.push(b),
                None => break,
            }
        }
        if self.held.is_empty() {
            // Cannot happen with the pool sized by `Lanes::new`; do not spin if it does.
            std::thread::sleep(IDLE_WAIT);
            return Ok(0);
        }
        // SAFETY: the held buffers are this thread's (taken from the pool), MAX_DATAGRAM
        // bytes each, and stay so for the call.
        unsafe {
            self.headers.recv(
                fd,
                flags,
                self.held.iter().map(|&b| (pool.ptr(b), MAX_DATAGRAM)),
            )
        }
    }

    /// [`Self::recv`] from the first socket holding datagrams in this read's order (highest
    /// priority first, the lower ones in their turns: [`PrioSockets::read_order`]), without
    /// waiting: how many arrived and from which socket (0: all empty).
    fn recv_first(&mut self, pool: &Pool, sockets: &PrioSockets) -> io::Result<(usize, i32)> {
        for fd in sockets.read_order() {
            let n = self.recv(pool, fd, libc::MSG_DONTWAIT)?;
            if n > 0 {
                return Ok((n, fd));
            }
        }
        Ok((0, -1))
    }

    /// Queue the `n` datagrams received, or shed them. A full queue is waited on (its
    /// translator thread woken) as `wait` says before the datagram is shed.
    fn dispatch(
        &mut self,
        n: usize,
        lanes: &Lanes,
        allow: &AllowList,
        stats: &Stats,
        wait: Wait<'_>,
    ) {
        let unknown: SocketAddr = SocketAddr::from(([0, 0, 0, 0], 0));
        for j in 0..n {
            let b = self.held[j];
            let len = self.headers.len_of(j) as u32;
            let src = self.headers.source(j).unwrap_or(unknown);
            // Trust before work, as the translator does: a source outside the allow-list takes
            // no place in a queue (a spoofed flood marked high would otherwise crowd out real
            // high-priority reports).
            if !allow.allows(src.ip()) {
                add(&stats.datagrams, 1);
                add(&stats.bytes, u64::from(len));
                stats.reject(Reason::SourceNotAllowed);
                continue;
            }
            let p = priority_of(lanes.pool.bytes(b, len));
            let lane = lanes.lane_of(src);
            let mut e = Entry { buf: b, len, src };
            loop {
                match lanes.push(lane, p, e) {
                    Ok(()) => {
                        self.held[j] = HANDED;
                        self.woken[lane] = true;
                        break;
                    }
                    Err(back) => {
                        e = back;
                        if wait.for_room(lanes.shed_backlog) {
                            lanes.lanes[lane].wake();
                            std::thread::yield_now();
                            continue;
                        }
                        add(&stats.shed[p as usize], 1);
                        break;
                    }
                }
            }
        }
        self.held.retain(|&b| b != HANDED);
        for (i, w) in self.woken.iter_mut().enumerate() {
            if std::mem::take(w) {
                lanes.lanes[i].wake();
            }
        }
    }

    fn give_back(&mut self, pool: &Pool) {
        for b in self.held.drain(..) {
            pool.release(b);
        }
    }
}

/// Run for at most `duration` (tests and benchmarks).
pub fn run_for<S: Sinks>(
    translator: &mut Translator<S>,
    rx: &PrioSockets,
    batch: usize,
    duration: Duration,
) -> io::Result<()> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(duration);
            stop.store(true, Ordering::Relaxed);
        });
        run(translator, rx, batch, &stop)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Depths;
    use dta_wire::native::DatagramBuilder;
    use dta_wire::{Priority, Report};
    use std::os::fd::AsRawFd;

    #[test]
    fn naps_only_after_arrivals_fast_enough_to_fill_a_ring_during_a_missed_wake_up() {
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let mut t = SourceTurns::default();
        // A few datagrams now and then (a fast path taking most reports): wait, never nap.
        assert_eq!(t.after_at(3, at(10)), Idle::Busy);
        assert_eq!(t.after_at(0, at(20)), Idle::Wait);
        assert_eq!(t.after_at(NAP_ARM - 4, at(1_500)), Idle::Busy);
        assert_eq!(t.after_at(0, at(1_600)), Idle::Wait);
        // The window closed at 2 ms: its count starts again.
        assert_eq!(t.after_at(1, at(2_100)), Idle::Busy);
        assert_eq!(t.after_at(0, at(2_200)), Idle::Wait);
        // A window reaching NAP_ARM arms the naps for SOURCE_SPIN.
        assert_eq!(t.after_at(NAP_ARM, at(2_300)), Idle::Busy);
        assert_eq!(t.after_at(0, at(2_400)), Idle::Nap);
        assert_eq!(t.after_at(0, at(4_200)), Idle::Nap);
        assert_eq!(t.after_at(0, at(4_400)), Idle::Wait);
    }

    fn datagram(p: Priority, seq: u32) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        let mut d = DatagramBuilder::new(&mut b, p, false, 1, seq).unwrap();
        d.push(&Report::KeyIncrement {
            key: &[0, 0, 0, 1],
            counter: 1,
            redundancy: 1,
            immediate: false,
        })
        .unwrap();
        let n = d.finish();
        b.truncate(n);
        b
    }

    /// The classifier alone (no translator thread takes from its queues), shedding whenever a
    /// queue is full (`shed_backlog` 0): each queue takes its depth, the rest of its priority is
    /// shed and counted by priority, sources outside the allow-list take no place and are
    /// counted, and the queue hands out high priority first, each priority in arrival order.
    #[test]
    fn the_classifier_queues_by_priority_and_sheds_what_does_not_fit() {
        let socket = PrioSockets::single(bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap());
        let to = socket.local_addr().unwrap();
        let lanes = Lanes::new(
            1,
            Depths {
                low: 2,
                medium: 2,
                high: 2,
            },
            8,
        )
        .unwrap()
        .with_shed_backlog(0.0);
        let allow = AllowList::new(vec![dta_wire::prefix::Prefix::new(
            "127.0.0.1".parse().unwrap(),
            32,
        )
        .unwrap()]);
        let stats = Stats::default();
        let stop = AtomicBool::new(false);
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let outsider = UdpSocket::bind("127.0.0.2:0").unwrap();
        std::thread::scope(|s| {
            let c = s.spawn(|| classify(&socket, &lanes, &allow, &stats, 8, &stop));
            let mut seq = 0;
            for p in [Priority::Low, Priority::Medium, Priority::High] {
                for _ in 0..5 {
                    tx.send_to(&datagram(p, seq), to).unwrap();
                    seq += 1;
                }
            }
            for _ in 0..3 {
                outsider.send_to(&datagram(Priority::High, 99), to).unwrap();
            }
            tx.send_to(b"\x77garbage", to).unwrap(); // unparseable: low, and shed
            let deadline = Instant::now() + dta_testkit::WAIT;
            let seen = || {
                stats
                    .shed
                    .iter()
                    .map(|c| c.load(Ordering::Relaxed))
                    .sum::<u64>()
                    + stats.rejected_by(Reason::SourceNotAllowed)
            };
            while seen() < 13 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            stop.store(true, Ordering::Relaxed);
            c.join().unwrap().unwrap();
        });
        let shed: Vec<u64> = stats
            .shed
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        assert_eq!(shed, [4, 3, 3]);
        assert_eq!(stats.rejected_by(Reason::SourceNotAllowed), 3);
        assert_eq!(stats.datagrams.load(Ordering::Relaxed), 3);
        assert!(lanes.done.load(Ordering::Relaxed));
        let mut order = vec![];
        while let Some(e) = lanes.lanes[0].pop() {
            let d = lanes.pool.bytes(e.buf, e.len);
            let p = dta_wire::native::Packet::new_checked(d).unwrap();
            order.push((p.priority_raw(), p.seq()));
            lanes.pool.release(e.buf);
        }
        assert_eq!(order, [(2, 10), (2, 11), (1, 5), (1, 6), (0, 0), (0, 1)]);
        // Every buffer is back in the pool.
        let free = std::iter::from_fn(|| lanes.pool.take()).count();
        assert_eq!(free * MAX_DATAGRAM, lanes.pool_bytes());
    }

    /// With the default `shed_backlog`, a full queue sheds nothing while the kernel buffer has
    /// room: the classifier stops taking datagrams and the buffer holds the burst. Once the
    /// buffer is past the threshold, low priority is shed.
    #[test]
    fn the_classifier_sheds_only_when_the_kernel_buffer_fills() {
        let socket = PrioSockets::single(bind("127.0.0.1:0".parse().unwrap(), 1 << 16).unwrap());
        let to = socket.local_addr().unwrap();
        let depth = Depths {
            low: 2,
            medium: 2,
            high: 2,
        };
        let lanes = Lanes::new(1, depth, 8).unwrap();
        assert_eq!(lanes.shed_backlog, crate::config::DEFAULT_SHED_BACKLOG);
        let allow = AllowList::loopback();
        let stats = Stats::default();
        let stop = AtomicBool::new(false);
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let shed = || {
            stats
                .shed
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .sum::<u64>()
        };
        std::thread::scope(|s| {
            let c = s.spawn(|| classify(&socket, &lanes, &allow, &stats, 8, &stop));
            // A burst of 10 low datagrams: 2 queued, the rest wait in the kernel buffer.
            for seq in 0..10 {
                tx.send_to(&datagram(Priority::Low, seq), to).unwrap();
            }
            std::thread::sleep(Duration::from_millis(200));
            assert_eq!(shed(), 0, "a burst the buffer holds is not shed");
            assert!(backlog(socket.sender().as_raw_fd()).unwrap() > 0.0);
            // Fill the buffer past half: now the classifier sheds.
            let deadline = Instant::now() + dta_testkit::WAIT;
            let mut seq = 10;
            while shed() == 0 && Instant::now() < deadline {
                let _ = tx.send_to(&datagram(Priority::Low, seq), to);
                seq += 1;
                if seq % 64 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            assert!(shed() > 0, "a buffer past the threshold sheds");
            assert_eq!(stats.shed[2].load(Ordering::Relaxed), 0);
            stop.store(true, Ordering::Relaxed);
            c.join().unwrap().unwrap();
        });
    }
}
