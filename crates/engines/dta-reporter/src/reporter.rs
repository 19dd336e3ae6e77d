// Size: datagram packing, sequence numbers, NACK retransmission and congestion notices all act
// on one reporter's state.
//! The reporter: builds DTA reports into datagrams and sends them over UDP ([DTA §3] "reporters
//! ... generate telemetry reports"), with per-datagram sequence numbers, NACK-driven
//! retransmission ([DTA §5.2], [DTA-draft §3.2]) and congestion notices obeyed
//! ([DTA-draft §3.2] "Telemetry Flow Control & Prioritization").
//!
//! * **Prototype** protocol: one report per datagram. The long base header carries the low
//!   byte of the reporter's sequence number (`seqnum u8`); the short one carries none, so a
//!   short-format reporter cannot be retransmittable.
//! * **Native** protocol: reports are packed back to back into the open datagram until the
//!   next one would not fit `max_datagram`, `max_reports_per_datagram` is reached, or
//!   [`Reporter::flush`] is called. Nothing is allocated per report: the datagram is built in a
//!   buffer allocated once.
//!
//! **Retransmission**: a retransmittable reporter keeps its last `retransmit_buffer` datagrams
//! in a ring. A native NACK names the missing datagram `seq` and a bitmap of further missing
//! ones; the reporter resends exactly those it still keeps, byte for byte (selective repeat,
//! [`crate::flow`]). A prototype NACK names the number the translator expects next; the
//! reporter resends every kept datagram from it to the newest (go-back-N). NACKs arrive on a
//! separate, unconnected UDP socket bound on `nack_port` (default [`NACK_PORT`], 40044, where
//! the translator sends them); it is polled without blocking every [`NACK_POLL_EVERY`]
//! datagrams, by [`Reporter::poll_nacks`], and by [`Reporter::linger`] which waits for late
//! NACKs at the end of a run. A NACK for the same number as the last honoured one within
//! `nack_holdoff` is ignored: the translator repeats a NACK while datagrams sent before the
//! retransmission keep arriving. A named number older than the ring is counted in
//! `unrecoverable_nacks`. Sketch-Merge NACKs (a native NACK with a sketch body,
//! [DTA-draft §3.1]) are not handled here: they are kept for [`crate::sketch::SketchSender`] to
//! take with [`Reporter::take_sketch_nack`].
//!
//! **Tail probe**: a lost last datagram leaves no gap the translator could see, so at the end
//! of a retransmittable run ([`Reporter::linger`], [`Reporter::close`]) the newest datagram is
//! resent `tail_probes` times, `tail_probe_interval` apart, while NACKs are handled. (Not on
//! every [`Reporter::flush`]: flush ends each batch, and probing there would stall the sender.)
//!
//! **Congestion notices** (native kind 2) arrive on the NACK socket too: for their `hold_ms` a
//! datagram of a limited priority over its token bucket ([`crate::flow::Governor`]) is not
//! sent, takes no sequence number, and is counted in `suppressed`; sending never blocks.
//! Retransmissions and tail probes answer the translator and are not limited. A NACK acted on
//! slows the reporter down the same way for a short while ([`crate::flow`], counted in
//! `nack_slowdowns`): low priority paused, medium at half its recent rate.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_wire::native::{self, HeaderRepr, Kind, SketchNack};

use crate::flow::{self, Governor, Named};
use dta_wire::prototype::{self, BaseFormat, BaseRepr};
use dta_wire::{Priority, Report, NACK_PORT};

/// The NACK socket is polled (non-blocking) once every this many datagrams sent.
pub const NACK_POLL_EVERY: u32 = 64;
/// Default largest UDP payload: a 1500-byte Ethernet MTU less the IPv4 and UDP headers.
pub const DEFAULT_MAX_DATAGRAM: usize = 1472;

/// Which protocol the reporter speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The Tofino prototype's (one report per datagram), with the given base header.
    Prototype(BaseFormat),
    /// Native protocol version 1.
    Native {
        /// This reporter's id (the translator tracks sequence numbers and sketches per id).
        reporter_id: u32,
    },
}

/// Reporter configuration. [`ReporterConfig::new`] gives the defaults.
#[derive(Debug, Clone)]
pub struct ReporterConfig {
    /// The translator (UDP port [`dta_wire::DTA_PORT`] normally).
    pub destination: SocketAddr,
    /// The protocol.
    pub protocol: Protocol,
    /// Native datagram priority (the prototype carries none). Default
    /// [`flow::DEFAULT_PRIORITY`] (medium).
    pub priority: Priority,
    /// Keep datagrams and resend them on a NACK. Default false. Needs the long base header with
    /// the prototype.
    pub retransmittable: bool,
    /// Largest UDP payload (native packing limit). Default [`DEFAULT_MAX_DATAGRAM`].
    pub max_datagram: usize,
    /// Most reports per native datagram (1..=255). Default 255.
    pub max_reports_per_datagram: u8,
    /// Local UDP port NACKs and congestion notices are received on (the control port):
    /// `Some(0)` for an ephemeral port (see [`Reporter::nack_addr`]), `None` to run without
    /// flow control (nothing from the translator is received). Default `Some(NACK_PORT)`. A
    /// port that cannot be bound is an error naming who holds it ([`crate::control`]), never a
    /// reporter that silently obeys nothing. A prototype reporter that is not retransmittable
    /// has nothing to receive (the prototype has no notices) and opens no socket.
    pub nack_port: Option<u16>,
    /// A control socket shared with the other native reporters of this process
    /// ([`crate::control::ControlHub`]); when set, `nack_port` is not bound. Default none.
    pub control_hub: Option<std::sync::Arc<crate::control::ControlHub>>,
    /// Datagrams kept for retransmission (at most 128 with the prototype, whose sequence
    /// number is 8 bits). Default [`flow::DEFAULT_RETRANSMIT_BUFFER`] (256).
    pub retransmit_buffer: usize,
    /// Ignore a repeated NACK for the same sequence number within this time. Default 10 ms.
    pub nack_holdoff: Duration,
    /// Times the newest datagram is resent at the end of a retransmittable run (0: none).
    /// Default [`flow::DEFAULT_TAIL_PROBES`] (2).
    pub tail_probes: u32,
    /// Spacing of the tail probes. Default 10 ms.
    pub tail_probe_interval: Duration,
    /// The clock congestion notices and NACK hold-offs are timed with. Default
    /// [`Clock::System`].
    pub clock: Clock,
    /// Local address to send from. Default: unspecified, of the destination's family.
    pub bind: Option<IpAddr>,
    /// The control key shared with the translator (`[translator] control_key_file`): NACKs and
    /// congestion notices are then obeyed only when they carry a valid authenticator with a
    /// counter not seen before, bound to the life this reporter announces in its hellos
    /// (docs/security.md). Default none: any well-formed message from
    /// the translator's address is obeyed.
    pub control_key: Option<dta_wire::auth::ControlKey>,
    /// Addresses NACKs and notices are taken from besides `destination` (a reporter whose NACK
    /// socket serves several translators, [`crate::ClusterReporter`]). Default none.
    pub control_from: Vec<SocketAddr>,
}

impl ReporterConfig {
    /// The defaults for sending to `destination`.
    pub fn new(destination: SocketAddr, protocol: Protocol) -> ReporterConfig {
        ReporterConfig {
            destination,
            protocol,
            priority: flow::DEFAULT_PRIORITY,
            retransmittable: false,
            max_datagram: DEFAULT_MAX_DATAGRAM,
            max_reports_per_datagram: u8::MAX,
            nack_port: Some(NACK_PORT),
            retransmit_buffer: flow::DEFAULT_RETRANSMIT_BUFFER,
            nack_holdoff: flow::DEFAULT_NACK_HOLDOFF,
            tail_probes: flow::DEFAULT_TAIL_PROBES,
            tail_probe_interval: flow::DEFAULT_TAIL_PROBE_INTERVAL,
            clock: Clock::System,
            bind: None,
            control_key: None,
            control_from: vec![],
            control_hub: None,
        }
    }
}

/// Where a reporter hears its translator.
enum Control {
    /// Nowhere: `nack_port: None` (no flow control), or nothing to hear.
    Off,
    /// Its own control socket.
    Own(UdpSocket),
    /// A socket shared with the other reporters of the process, and this reporter's id.
    Hub(std::sync::Arc<crate::control::ControlHub>, u32),
}

/// Milliseconds for the reporter's timing (congestion-notice holds and buckets, NACK hold-off).
#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// Real time since the reporter was created.
    #[default]
    System,
    /// Whatever the shared value says: scripted time for tests and the behaviour vectors
    /// (`spec/vectors/reporter.json`). Set it with [`Clock::set`].
    Manual(Arc<AtomicU64>),
}

impl Clock {
    /// A manual clock at 0 ms.
    pub fn manual() -> Clock {
        Clock::Manual(Arc::new(AtomicU64::new(0)))
    }

    /// Set a manual clock to `ms` (no-op for the system clock).
    pub fn set(&self, ms: u64) {
        if let Clock::Manual(a) = self {
            a.store(ms, Ordering::Relaxed);
        }
    }

    fn now_ms(&self, start: Instant) -> u64 {
        match self {
            Clock::System => start.elapsed().as_millis() as u64,
            Clock::Manual(a) => a.load(Ordering::Relaxed),
        }
    }
}

/// Why a report was not sent.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The report cannot be expressed on the wire (key or data length, redundancy, ...).
    #[error("invalid report: {}", .0.reason())]
    Wire(#[from] dta_wire::Error),
    /// The primitive does not exist in the configured protocol (Sketch-Merge in the prototype).
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
    /// One report is larger than `max_datagram` allows.
    #[error("a report of {len} bytes does not fit a datagram of at most {max} bytes")]
    TooLarge {
        /// Bytes the report needs, with the datagram header.
        len: usize,
        /// The configured `max_datagram`.
        max: usize,
    },
    /// No collector of the cluster map owns the report (`crate::cluster`).
    #[error("no owner: {0}")]
    Unroutable(String),
    /// The socket failed.
    #[error("socket: {0}")]
    Io(#[from] io::Error),
}

/// Reporter counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReporterStats {
    /// Datagrams sent (first transmissions).
    pub datagrams: u64,
    /// Reports sent (first transmissions).
    pub reports: u64,
    /// UDP payload bytes sent (first transmissions).
    pub bytes: u64,
    /// Datagrams resent on a NACK.
    pub retransmissions: u64,
    /// Well-formed NACKs for this reporter received.
    pub nacks: u64,
    /// NACKs ignored within the hold-off of the same NACK.
    pub nacks_held_off: u64,
    /// Sequence numbers NACKed that are no longer kept (or, for a prototype NACK, NACKs
    /// reaching back further than the ring).
    pub unrecoverable_nacks: u64,
    /// Times the newest datagram was resent by the tail probe.
    pub tail_probes: u64,
    /// Congestion notices for this reporter received.
    pub notices: u64,
    /// Times an acted-on NACK slowed the reporter down (low paused, medium halved for
    /// [`flow::NACK_SLOWDOWN_MS`]).
    pub nack_slowdowns: u64,
    /// Datagrams not sent because a congestion notice's (or a NACK slowdown's) limit was
    /// reached.
    pub suppressed: u64,
    /// Reports in those datagrams.
    pub suppressed_reports: u64,
    /// Malformed or foreign datagrams on the NACK socket (NACKs and notices for another
    /// reporter id included).
    pub bad_nacks: u64,
    /// Datagrams the kernel refused (e.g. ICMP port unreachable: `ECONNREFUSED`); lost.
    pub send_errors: u64,
    /// Control messages (NACKs, notices) not obeyed: from an address other than the
    /// translator's.
    pub control_wrong_source: u64,
    /// Not obeyed: without an authenticator while a key is configured.
    pub control_unauthenticated: u64,
    /// Not obeyed: an authenticator that does not verify.
    pub control_bad_authenticator: u64,
    /// Not obeyed: a counter already seen (a replay).
    pub control_replayed: u64,
    /// Not obeyed: sealed but bound to no life while this reporter announced one (the
    /// translator had not heard its hello yet, or a recording from before any hello).
    pub control_unbound: u64,
    /// Not obeyed: bound to another life of this reporter (recorded before it started).
    pub control_stale_life: u64,
    /// Hellos sent (a reporter with a control key announces its life, `dta_wire::auth`).
    pub hellos: u64,
}

impl ReporterStats {
    /// Add `other`'s counters to these (totals over several reporters).
    pub fn add(&mut self, other: &ReporterStats) {
        let ReporterStats {
            datagrams,
            reports,
            bytes,
            retransmissions,
            nacks,
            nacks_held_off,
            unrecoverable_nacks,
            tail_probes,
            notices,
            nack_slowdowns,
            suppressed,
            suppressed_reports,
            bad_nacks,
            send_errors,
            control_wrong_source,
            control_unauthenticated,
            control_bad_authenticator,
            control_replayed,
            control_unbound,
            control_stale_life,
            hellos,
        } = *other;
        self.datagrams += datagrams;
        self.reports += reports;
        self.bytes += bytes;
        self.retransmissions += retransmissions;
        self.nacks += nacks;
        self.nacks_held_off += nacks_held_off;
        self.unrecoverable_nacks += unrecoverable_nacks;
        self.tail_probes += tail_probes;
        self.notices += notices;
        self.nack_slowdowns += nack_slowdowns;
        self.suppressed += suppressed;
        self.suppressed_reports += suppressed_reports;
        self.bad_nacks += bad_nacks;
        self.send_errors += send_errors;
        self.control_wrong_source += control_wrong_source;
        self.control_unauthenticated += control_unauthenticated;
        self.control_bad_authenticator += control_bad_authenticator;
        self.control_replayed += control_replayed;
        self.control_unbound += control_unbound;
        self.control_stale_life += control_stale_life;
        self.hellos += hellos;
    }
}

/// The last `cap` retransmittable datagrams, consecutive in sequence number (also the rings of
/// [`crate::loadgen::run_many`]'s simulated reporters).
pub(crate) struct RetransmitRing {
    slot_len: usize,
    data: Vec<u8>,
    lens: Vec<usize>,
    /// Index of the slot the next datagram goes to.
    head: usize,
    filled: usize,
}

impl RetransmitRing {
    pub(crate) fn new(cap: usize, slot_len: usize) -> RetransmitRing {
        RetransmitRing {
            slot_len,
            data: vec![0; cap * slot_len],
            lens: vec![0; cap],
            head: 0,
            filled: 0,
        }
    }

    fn cap(&self) -> usize {
        self.lens.len()
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if self.cap() == 0 {
            return;
        }
        let s = self.head * self.slot_len;
        self.data[s..s + bytes.len()].copy_from_slice(bytes);
        self.lens[self.head] = bytes.len();
        self.head = (self.head + 1) % self.cap();
        self.filled = (self.filled + 1).min(self.cap());
    }

    /// Datagrams held (at most the capacity).
    pub(crate) fn filled(&self) -> usize {
        self.filled
    }

    /// The `back`-th newest datagram (1 = newest); `back` must be in 1..=filled.
    pub(crate) fn get(&self, back: usize) -> &[u8] {
        let i = (self.head + self.cap() - back) % self.cap();
        let s = i * self.slot_len;
        &self.data[s..s + self.lens[i]]
    }
}

/// Sends DTA reports to one translator. See the module doc.
pub struct Reporter {
    cfg: ReporterConfig,
    socket: UdpSocket,
    control: Control,
    /// A control message failed its authenticator: said once (a key that differs from the
    /// translator's), then only counted.
    said_bad_key: bool,
    /// The open native datagram, or the prototype scratch buffer.
    buf: Vec<u8>,
    /// Bytes in the open native datagram (0: none open).
    len: usize,
    count: u8,
    /// Sequence number of the next datagram sent (the open one, if any).
    next_seq: u32,
    ring: RetransmitRing,
    stats: ReporterStats,
    sketch_nack: Option<SketchNack>,
    /// The last NACK honoured: its number and when (clock ms).
    last_nack: Option<(u32, u64)>,
    since_poll: u32,
    governor: Governor,
    start: Instant,
    /// Authenticated control messages' counters seen ([`ReplayWindow`]).
    replay: ReplayWindow,
    /// This run's life, announced in hellos (a native reporter with a control key and flow
    /// control): only messages bound to it are obeyed (`dta_wire::auth`).
    life: Option<u64>,
    /// The last hello's counter (wall-clock nanoseconds, strictly increasing).
    hello_counter: u64,
    last_hello: Option<Instant>,
}

/// The counters of authenticated control messages accepted: the highest, and which of the 64
/// below it were seen. The translator's threads draw counters from one sequence and send
/// independently, so messages may arrive out of order; any counter is taken once, and one more
/// than 64 behind the highest is taken for a replay.
#[derive(Debug, Default, Clone, Copy)]
struct ReplayWindow {
    top: Option<u64>,
    seen: u64,
}

impl ReplayWindow {
    /// Take counter `c`: false if it was seen or is too old.
    fn take(&mut self, c: u64) -> bool {
        let Some(top) = self.top else {
            self.top = Some(c);
            self.seen = 1;
            return true;
        };
        if c > top {
            let shift = c - top;
            self.seen = if shift >= 64 { 0 } else { self.seen << shift };
            self.seen |= 1;
            self.top = Some(c);
            return true;
        }
        let back = top - c;
        if back >= 64 || self.seen & (1 << back) != 0 {
            return false;
        }
        self.seen |= 1 << back;
        true
    }
}

impl Reporter {
    /// Open the sending socket (connected to `cfg.destination`) and the NACK socket.
    pub fn new(cfg: ReporterConfig) -> io::Result<Reporter> {
        let invalid = |m: &str| io::Error::new(io::ErrorKind::InvalidInput, m.to_string());
        if cfg.max_reports_per_datagram == 0 {
            return Err(invalid("max_reports_per_datagram must be at least 1"));
        }
        let min = match cfg.protocol {
            Protocol::Native { .. } => native::HEADER_LEN + native::MAX_REPORT_LEN,
            Protocol::Prototype(f) => f.header_len() + 33,
        };
        if cfg.max_datagram < min || cfg.max_datagram > 65507 {
            return Err(invalid(&format!(
                "max_datagram must be in {min}..=65507 (one largest report fits)"
            )));
        }
        if cfg.tail_probes > flow::MAX_TAIL_PROBES {
            return Err(invalid(&format!(
                "tail_probes must be at most {}",
                flow::MAX_TAIL_PROBES
            )));
        }
        if cfg.retransmittable && cfg.protocol == Protocol::Prototype(BaseFormat::Short) {
            return Err(invalid(
                "the prototype short header has no sequence number: retransmission needs the long format",
            ));
        }
        let unspecified = |v6: bool| -> IpAddr {
            if v6 {
                Ipv6Addr::UNSPECIFIED.into()
            } else {
                Ipv4Addr::UNSPECIFIED.into()
            }
        };
        let v6 = cfg.destination.is_ipv6();
        let local = cfg.bind.unwrap_or_else(|| unspecified(v6));
        let socket = UdpSocket::bind(SocketAddr::new(local, 0))?;
        socket.connect(cfg.destination)?;
        let control =
            match (&cfg.control_hub, cfg.protocol) {
                (Some(hub), Protocol::Native { reporter_id }) => {
                    hub.register(reporter_id);
                    Control::Hub(hub.clone(), reporter_id)
                }
                (Some(_), Protocol::Prototype(_)) => return Err(invalid(
                    "a control socket is shared by native reporters (the prototype's NACK names \
                     no reporter)",
                )),
                (None, Protocol::Prototype(_)) if !cfg.retransmittable => Control::Off,
                (None, _) => match cfg.nack_port {
                    None => Control::Off,
                    Some(port) => Control::Own(crate::control::bind(cfg.destination, port)?),
                },
            };
        let ring_cap = if !cfg.retransmittable {
            0
        } else if matches!(cfg.protocol, Protocol::Prototype(_)) {
            cfg.retransmit_buffer.min(128)
        } else {
            cfg.retransmit_buffer
        };
        Reporter {
            buf: vec![0; cfg.max_datagram],
            ring: RetransmitRing::new(ring_cap, cfg.max_datagram),
            cfg,
            socket,
            control,
            said_bad_key: false,
            len: 0,
            count: 0,
            next_seq: 0,
            stats: ReporterStats::default(),
            sketch_nack: None,
            last_nack: None,
            since_poll: 0,
            governor: Governor::new(),
            start: Instant::now(),
            replay: ReplayWindow::default(),
            life: None,
            hello_counter: 0,
            last_hello: None,
        }
        .announced()
    }

    /// A reporter that obeys only keyed messages draws its life and says hello.
    fn announced(mut self) -> io::Result<Reporter> {
        let hears = !matches!(self.control, Control::Off);
        if let (true, Some(_), Protocol::Native { .. }) =
            (hears, &self.cfg.control_key, self.cfg.protocol)
        {
            self.life = Some(rand::random());
            self.say_hello()?;
        }
        Ok(self)
    }

    /// Send a sealed hello with this run's life to the translator (`dta_wire::native::HelloRepr`).
    fn say_hello(&mut self) -> io::Result<()> {
        let (Some(life), Some(key), Protocol::Native { reporter_id }) =
            (self.life, &self.cfg.control_key, self.cfg.protocol)
        else {
            return Ok(());
        };
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        self.hello_counter = now_ns.max(self.hello_counter + 1);
        let mut b = [0u8; native::HELLO_LEN + dta_wire::auth::TRAILER_LEN];
        let n = native::HelloRepr { reporter_id, life }
            .emit(&mut b)
            .expect("room for a hello");
        let n = dta_wire::auth::seal(&mut b, n, key, self.hello_counter);
        self.last_hello = Some(Instant::now());
        match self.socket.send(&b[..n]) {
            Ok(_) => self.stats.hellos += 1,
            // Nothing listens yet: the next hello (within a second) tells it.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Say hello if the last one is at least `ms` old.
    fn hello_due(&mut self, ms: u64) -> io::Result<()> {
        if self.life.is_some()
            && self
                .last_hello
                .is_none_or(|t| t.elapsed() >= Duration::from_millis(ms))
        {
            self.say_hello()?;
        }
        Ok(())
    }

    /// This run's life, if it announces one (a native reporter with a control key).
    pub fn life(&self) -> Option<u64> {
        self.life
    }

    /// The configuration.
    pub fn config(&self) -> &ReporterConfig {
        &self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> ReporterStats {
        self.stats
    }

    /// The local address reports are sent from.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// The local address of the NACK socket, if there is one (the shared one's for a reporter
    /// of a [`crate::control::ControlHub`]).
    pub fn nack_addr(&self) -> Option<SocketAddr> {
        match &self.control {
            Control::Off => None,
            Control::Own(s) => s.local_addr().ok(),
            Control::Hub(h, _) => h.local_addr().ok(),
        }
    }

    /// Whether the reporter receives its translator's NACKs and notices (flow control on).
    pub fn hears_translator(&self) -> bool {
        !matches!(self.control, Control::Off)
    }

    /// Sequence number the next datagram will carry (the prototype sends its low byte).
    pub fn next_seq(&self) -> u32 {
        self.next_seq
    }

    /// Reports in the open (unsent) native datagram.
    pub fn pending(&self) -> u8 {
        self.count
    }

    /// Key-Write ([DTA §4] "Key-Write"): store `data` under `key` in `redundancy` slots.
    pub fn key_write(
        &mut self,
        key: &[u8],
        data: &[u8],
        redundancy: u8,
        immediate: bool,
    ) -> Result<(), ReportError> {
        self.report(&Report::KeyWrite {
            key,
            data,
            redundancy,
            immediate,
        })
    }

    /// Key-Increment ([DTA §4] "Key-Increment"): add `counter` to `redundancy` counters of `key`.
    pub fn key_increment(
        &mut self,
        key: &[u8],
        counter: u64,
        redundancy: u8,
        immediate: bool,
    ) -> Result<(), ReportError> {
        self.report(&Report::KeyIncrement {
            key,
            counter,
            redundancy,
            immediate,
        })
    }

    /// Append ([DTA §4] "Append"): append `data` to list `list_id`.
    pub fn append(
        &mut self,
        list_id: u32,
        data: &[u8],
        immediate: bool,
    ) -> Result<(), ReportError> {
        self.report(&Report::Append {
            list_id,
            data,
            immediate,
        })
    }

    /// Postcarding ([DTA §4] "Postcarding"): hop `hop`'s `value` for flow `key` (`path_len` 0 =
    /// unknown; the prototype drops it).
    pub fn postcard(
        &mut self,
        key: &[u8],
        hop: u8,
        path_len: u8,
        value: u32,
        immediate: bool,
    ) -> Result<(), ReportError> {
        self.report(&Report::Postcard {
            key,
            hop,
            path_len,
            value,
            immediate,
        })
    }

    /// One Sketch-Merge column ([DTA-draft §3.1]); native protocol only. Columns of one sketch must
    /// be sent in order: [`crate::sketch::SketchSender`] does that.
    pub fn sketch_column(
        &mut self,
        sketch_id: u16,
        column: u16,
        epoch: u32,
        data: &[u8],
        immediate: bool,
    ) -> Result<(), ReportError> {
        self.report(&Report::SketchColumn {
            sketch_id,
            column,
            epoch,
            data,
            immediate,
        })
    }

    /// Send (prototype) or pack (native) any report.
    pub fn report(&mut self, report: &Report<'_>) -> Result<(), ReportError> {
        match self.cfg.protocol {
            Protocol::Prototype(format) => self.send_prototype(report, format),
            Protocol::Native { reporter_id } => self.pack_native(report, reporter_id),
        }
    }

    fn send_prototype(
        &mut self,
        report: &Report<'_>,
        format: BaseFormat,
    ) -> Result<(), ReportError> {
        if matches!(report, Report::SketchColumn { .. }) {
            return Err(ReportError::Unsupported(
                "Sketch-Merge needs the native protocol",
            ));
        }
        let retransmittable = self.cfg.retransmittable;
        let repr = prototype::Repr {
            base: BaseRepr {
                opcode: report.opcode(),
                seqnum: (format == BaseFormat::Long).then_some(self.next_seq as u8),
                immediate: report.immediate(),
                retransmittable,
            },
            report: *report,
        };
        let n = repr.emit(&mut self.buf, format)?;
        self.send_buf(n, 1)
    }

    fn pack_native(&mut self, report: &Report<'_>, reporter_id: u32) -> Result<(), ReportError> {
        let rl = native::report_len(report);
        let max = self.cfg.max_datagram;
        if native::HEADER_LEN + rl > max {
            return Err(ReportError::TooLarge {
                len: native::HEADER_LEN + rl,
                max,
            });
        }
        if self.len > 0 && self.len + rl > max {
            self.flush()?;
        }
        let opened = self.len == 0;
        if opened {
            HeaderRepr {
                kind: Kind::Reports,
                priority: self.cfg.priority,
                retransmittable: self.cfg.retransmittable,
                count: 0,
                reporter_id,
                seq: self.next_seq,
            }
            .emit(&mut native::Packet::new_unchecked(
                &mut self.buf[..native::HEADER_LEN],
            ));
            self.len = native::HEADER_LEN;
        }
        match native::emit_report(report, &mut self.buf[self.len..max]) {
            Ok(n) => {
                self.len += n;
                self.count += 1;
            }
            Err(e) => {
                if opened {
                    self.len = 0;
                }
                return Err(e.into());
            }
        }
        if self.count >= self.cfg.max_reports_per_datagram {
            self.flush()?;
        }
        Ok(())
    }

    /// Drop the reports packed in the open native datagram without sending them (no sequence
    /// number is used). Returns how many were dropped.
    pub fn discard_pending(&mut self) -> u8 {
        let n = self.count;
        self.len = 0;
        self.count = 0;
        n
    }

    /// Add another reporter's counters to this one's (for totals over several reporters).
    pub fn add_stats(&mut self, other: ReporterStats) {
        self.stats.add(&other);
    }

    /// Send the open native datagram, if any (a no-op for the prototype).
    pub fn flush(&mut self) -> Result<(), ReportError> {
        if self.len == 0 {
            return Ok(());
        }
        native::Packet::new_unchecked(&mut self.buf[..]).set_count(self.count);
        let (len, count) = (self.len, self.count);
        self.len = 0;
        self.count = 0;
        self.send_buf(len, count as u64)
    }

    /// Count an ICMP port unreachable that arrived after the last send (the kernel keeps it as
    /// the socket's pending error, `ECONNREFUSED`) as a send error: after the last datagram of
    /// a run nothing else would see it. Other pending errors are returned.
    pub fn take_refused(&mut self) -> io::Result<()> {
        match self.socket.take_error()? {
            Some(e) if e.kind() == io::ErrorKind::ConnectionRefused => self.stats.send_errors += 1,
            Some(e) => return Err(e),
            None => {}
        }
        Ok(())
    }

    /// Milliseconds on the configured clock.
    fn now_ms(&self) -> u64 {
        self.cfg.clock.now_ms(self.start)
    }

    /// Send `buf[..len]` as the datagram `next_seq`, keep it if retransmittable; or, over a
    /// congestion notice's limit, drop it (counted, no sequence number used).
    fn send_buf(&mut self, len: usize, reports: u64) -> Result<(), ReportError> {
        let now = self.now_ms();
        if !self.governor.admit(self.cfg.priority, now) {
            self.stats.suppressed += 1;
            self.stats.suppressed_reports += reports;
            return self.count_toward_poll();
        }
        match self.socket.send(&self.buf[..len]) {
            Ok(_) => {}
            // An earlier datagram's ICMP port unreachable, kept as the socket's pending error,
            // refused this send: nothing was sent. The translator was not listening then, so
            // a hello sent meanwhile was lost too: say it again, then send once more; a
            // second refusal means nothing listens now (UDP loses the datagram; counted).
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                self.hello_due(0)?;
                match self.socket.send(&self.buf[..len]) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        self.stats.send_errors += 1
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        }
        if self.cfg.retransmittable {
            self.ring.push(&self.buf[..len]);
        }
        self.next_seq = self.next_seq.wrapping_add(1);
        self.stats.datagrams += 1;
        self.stats.reports += reports;
        self.stats.bytes += len as u64;
        self.count_toward_poll()
    }

    /// Poll the NACK socket every [`NACK_POLL_EVERY`] datagrams (sent or suppressed: a
    /// suppressed reporter must still see the notice that lifts the limit).
    fn count_toward_poll(&mut self) -> Result<(), ReportError> {
        self.since_poll += 1;
        if self.since_poll >= NACK_POLL_EVERY {
            self.poll_nacks()?;
        }
        Ok(())
    }

    /// Handle every NACK or notice waiting on the NACK socket, without blocking. Returns how
    /// many datagrams were received on it.
    pub fn poll_nacks(&mut self) -> io::Result<usize> {
        self.since_poll = 0;
        self.hello_due(dta_wire::auth::HELLO_INTERVAL_MS)?;
        let mut handled = 0;
        let mut b = [0u8; 64];
        loop {
            let s = match &self.control {
                Control::Off => return Ok(handled),
                Control::Own(s) => s,
                Control::Hub(h, id) => {
                    let (h, id) = (h.clone(), *id);
                    return h.take(id, &mut |m, from| self.handle_control_from(m, from));
                }
            };
            match s.recv_from(&mut b) {
                Ok((n, from)) => {
                    handled += 1;
                    self.handle_control_from(&b[..n], from)?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(handled),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // An ICMP error from an earlier send on this socket: not a NACK.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Wait up to `timeout` for one datagram on the NACK socket and handle it, then handle any
    /// others already waiting. Returns how many were received (0: timed out or no NACK socket).
    pub fn wait_nack(&mut self, timeout: Duration) -> io::Result<usize> {
        let n = self.poll_nacks()?;
        let s = match &self.control {
            _ if n > 0 => return Ok(n),
            Control::Off => return Ok(0),
            Control::Own(s) => s,
            Control::Hub(..) => {
                // Another reporter may be reading the shared socket: look again every ms.
                let end = Instant::now() + timeout;
                while Instant::now() < end {
                    std::thread::sleep(
                        end.saturating_duration_since(Instant::now())
                            .min(Duration::from_millis(1)),
                    );
                    let n = self.poll_nacks()?;
                    if n > 0 {
                        return Ok(n);
                    }
                }
                return Ok(0);
            }
        };
        let mut b = [0u8; 64];
        s.set_nonblocking(false)?;
        let r = s
            .set_read_timeout(Some(timeout.max(Duration::from_micros(1))))
            .and_then(|_| s.recv_from(&mut b));
        s.set_nonblocking(true)?;
        match r {
            Ok((n, from)) => {
                self.handle_control_from(&b[..n], from)?;
                Ok(1 + self.poll_nacks()?)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                        | io::ErrorKind::ConnectionRefused
                ) =>
            {
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }

    /// Handle NACKs (and notices) for `d`, however many arrive, until `d` has passed.
    fn serve_nacks_for(&mut self, d: Duration) -> io::Result<()> {
        let end = Instant::now() + d;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            if self.wait_nack(left)? == 0 && !self.hears_translator() {
                std::thread::sleep(left);
            }
        }
    }

    /// Flush, then the tail probe: resend the newest kept datagram `tail_probes` times, each
    /// after `tail_probe_interval` of handling NACKs (a lost last datagram leaves no gap the
    /// translator could NACK; the receiver drops the copies it already has). A no-op for a
    /// reporter that is not retransmittable or has sent nothing. Returns the probes sent.
    pub fn tail_probe(&mut self) -> Result<u32, ReportError> {
        self.flush()?;
        if !self.cfg.retransmittable || self.ring.filled == 0 {
            return Ok(0);
        }
        for _ in 0..self.cfg.tail_probes {
            self.serve_nacks_for(self.cfg.tail_probe_interval)?;
            match self.socket.send(self.ring.get(1)) {
                Ok(_) => self.stats.tail_probes += 1,
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    self.stats.send_errors += 1
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(self.cfg.tail_probes)
    }

    /// Flush, tail-probe (retransmittable), then keep handling NACKs until `quiet` passes with
    /// none arriving (at most `max` in all): the end of a retransmittable run. Returns the
    /// NACK datagrams received after the probe.
    pub fn linger(&mut self, quiet: Duration, max: Duration) -> Result<usize, ReportError> {
        self.tail_probe()?;
        let end = Instant::now() + max;
        let mut total = 0;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(total);
            }
            let n = self.wait_nack(quiet.min(left))?;
            if n == 0 {
                return Ok(total);
            }
            total += n;
        }
    }

    /// End the run: flush, tail-probe (retransmittable), and take an ICMP port unreachable
    /// for the last datagrams (see [`Reporter::take_refused`]). Returns the counters.
    pub fn close(mut self) -> Result<ReporterStats, ReportError> {
        self.tail_probe()?;
        self.take_refused()?;
        Ok(self.stats)
    }

    /// The last Sketch-Merge NACK received, if not taken yet.
    pub fn take_sketch_nack(&mut self) -> Option<SketchNack> {
        self.sketch_nack.take()
    }

    /// Handle one datagram received from the translator on the NACK socket: a NACK (resend
    /// what it names), a congestion notice (obey it), or anything else (counted `bad_nacks`).
    /// For callers that receive the translator's datagrams themselves.
    pub fn handle_control(&mut self, b: &[u8]) -> io::Result<()> {
        // Authenticated messages (native only: the prototype's 2-byte NACK has no room).
        let mut plain = [0u8; 64];
        let b = match (&self.cfg.control_key, self.cfg.protocol) {
            (Some(key), Protocol::Native { .. }) => {
                match dta_wire::auth::open(b, key, self.life, None, &mut plain) {
                    Ok(o) => {
                        if !self.replay.take(o.counter) {
                            self.stats.control_replayed += 1;
                            return Ok(());
                        }
                        &plain[..o.len]
                    }
                    Err(e) => {
                        *match e {
                            dta_wire::auth::AuthError::Unauthenticated => {
                                &mut self.stats.control_unauthenticated
                            }
                            dta_wire::auth::AuthError::Replayed => &mut self.stats.control_replayed,
                            dta_wire::auth::AuthError::StaleLife => {
                                &mut self.stats.control_stale_life
                            }
                            dta_wire::auth::AuthError::Unbound => {
                                // The translator has not heard this life (yet): say it again.
                                self.hello_due(dta_wire::auth::HELLO_RETRY_MS)?;
                                &mut self.stats.control_unbound
                            }
                            dta_wire::auth::AuthError::BadTag
                            | dta_wire::auth::AuthError::Truncated => {
                                if !self.said_bad_key {
                                    self.said_bad_key = true;
                                    tracing::warn!(
                                        "reporter: a control message from {} failed its \
                                         authenticator: is the control key the translator's? \
                                         Such messages are not obeyed (counted \
                                         control_bad_authenticator)",
                                        self.cfg.destination
                                    );
                                }
                                &mut self.stats.control_bad_authenticator
                            }
                        } += 1;
                        return Ok(());
                    }
                }
            }
            (None, Protocol::Native { .. }) if dta_wire::auth::is_sealed(b) => {
                // Signed by the translator, not checked here (no key): the message itself.
                match dta_wire::auth::strip(b, &mut plain) {
                    Some(n) => &plain[..n],
                    None => {
                        self.stats.bad_nacks += 1;
                        return Ok(());
                    }
                }
            }
            _ => b,
        };
        let now = self.now_ms();
        match self.cfg.protocol {
            Protocol::Prototype(_) => match prototype::NackRepr::parse(b) {
                Ok(n) if n.nack => {
                    self.stats.nacks += 1;
                    self.go_back_n(n.seqnum as u32, now)
                }
                Ok(_) => Ok(()),
                Err(_) => {
                    self.stats.bad_nacks += 1;
                    Ok(())
                }
            },
            Protocol::Native { reporter_id } => match native::Datagram::parse(b) {
                Ok(d) if d.header.reporter_id == reporter_id => {
                    if let Some(n) = d.nack() {
                        self.stats.nacks += 1;
                        if let Some(s) = n.sketch {
                            self.sketch_nack = Some(s);
                            return Ok(());
                        }
                        self.selective(&n, now)
                    } else if let Some(notice) = d.notice() {
                        self.stats.notices += 1;
                        self.governor.on_notice(&notice, now);
                        Ok(())
                    } else {
                        self.stats.bad_nacks += 1;
                        Ok(())
                    }
                }
                _ => {
                    self.stats.bad_nacks += 1;
                    Ok(())
                }
            },
        }
    }

    /// Handle a datagram of the NACK socket received from `from`: taken only from the
    /// translator ([`ReporterConfig::destination`], or [`ReporterConfig::control_from`]), then
    /// as [`Self::handle_control`]. A message from anywhere else changes nothing and is counted
    /// (`control_wrong_source`).
    pub fn handle_control_from(&mut self, b: &[u8], from: SocketAddr) -> io::Result<()> {
        let canonical = |a: SocketAddr| match a.ip() {
            IpAddr::V6(v6) => v6
                .to_ipv4_mapped()
                .map_or(a, |v4| SocketAddr::new(v4.into(), a.port())),
            IpAddr::V4(_) => a,
        };
        let from = canonical(from);
        let ok = canonical(self.cfg.destination) == from
            || self.cfg.control_from.iter().any(|c| canonical(*c) == from);
        if !ok {
            self.stats.control_wrong_source += 1;
            return Ok(());
        }
        self.handle_control(b)
    }

    /// Whether a NACK for `seq` repeats the last honoured one within the hold-off (counted);
    /// otherwise it becomes the last honoured one.
    fn held_off(&mut self, seq: u32, now: u64) -> bool {
        if let Some((s, at)) = self.last_nack {
            let holdoff = self.cfg.nack_holdoff.as_millis() as u64;
            if s == seq && now >= at && now - at < holdoff {
                self.stats.nacks_held_off += 1;
                return true;
            }
        }
        self.last_nack = Some((seq, now));
        false
    }

    /// Native NACK: resend `seq` and every bitmap number still kept, in that order.
    fn selective(&mut self, n: &native::NackRepr, now: u64) -> io::Result<()> {
        if flow::named(n.seq, self.next_seq, self.ring.filled, 1 << 32) == Named::Ahead
            && n.missing == 0
        {
            // The translator expects the datagram not sent yet: nothing is missing.
            return Ok(());
        }
        if self.held_off(n.seq, now) {
            return Ok(());
        }
        self.slow_down(now);
        for seq in n.missing_seqs() {
            match flow::named(seq, self.next_seq, self.ring.filled, 1 << 32) {
                Named::Kept(back) => self.resend_one(back)?,
                Named::Gone => self.stats.unrecoverable_nacks += 1,
                Named::Ahead => {}
            }
        }
        Ok(())
    }

    /// Prototype NACK: resend every kept datagram from `seqnum` (8 bits) to the newest.
    fn go_back_n(&mut self, seqnum: u32, now: u64) -> io::Result<()> {
        let back = match flow::named(seqnum, self.next_seq, self.ring.filled, 1 << 8) {
            Named::Kept(back) => back,
            Named::Gone => {
                self.stats.unrecoverable_nacks += 1;
                return Ok(());
            }
            Named::Ahead => return Ok(()),
        };
        if self.held_off(seqnum, now) {
            return Ok(());
        }
        self.slow_down(now);
        for k in (1..=back).rev() {
            self.resend_one(k)?;
        }
        Ok(())
    }

    /// An acted-on NACK: yield to the recovery ([`Governor::on_nack`]).
    fn slow_down(&mut self, now: u64) {
        if self.governor.on_nack(now) {
            self.stats.nack_slowdowns += 1;
        }
    }

    /// Resend the `back`-th newest kept datagram.
    fn resend_one(&mut self, back: usize) -> io::Result<()> {
        match self.socket.send(self.ring.get(back)) {
            Ok(_) => self.stats.retransmissions += 1,
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => self.stats.send_errors += 1,
            Err(e) => return Err(e),
        }
        Ok(())
    }
}

impl Drop for Reporter {
    /// Reports still packed in the open native datagram are sent on drop (errors ignored).
    fn drop(&mut self) {
        let _ = self.flush();
    }
}
