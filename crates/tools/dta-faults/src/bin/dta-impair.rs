//! `dta-impair`: a userspace impairment forwarder for DTA over UDP. Datagrams received on
//! `--listen` are forwarded to `--to` with seeded loss, duplication, reordering and delay
//! (`dta_faults::impair`), counted by priority; datagrams for reporters (NACKs, congestion
//! notices) received on `--reverse-listen` are forwarded unimpaired to the reporter they name,
//! at `--reverse-port` (the reporters' NACK port).
//!
//! Userspace because the test machines' kernels have no `sch_netem`. The translator sees the
//! forwarder's address as every reporter's source, so it sends NACKs to the forwarder's
//! translator-side address; the forwarder learns which reporter address each reporter id came
//! from and sends the NACK on.
//!
//! The counters are written as JSON to `--counts` on SIGUSR1 and on exit (SIGTERM, SIGINT,
//! or `--duration`), and printed on stdout on exit.

use std::collections::{BTreeMap, HashMap};
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;

use dta_faults::impair::{Impairment, Pipeline, MAX_DATAGRAM};
use dta_net::mmsg::{RecvBatch, SendBatch};
use dta_wire::native::{Kind, Packet};

#[derive(Parser)]
#[command(
    name = "dta-impair",
    about = "Forward DTA datagrams over UDP with seeded loss, duplication, reordering and delay"
)]
struct Args {
    /// Address reporters send to.
    #[arg(long)]
    listen: SocketAddr,
    /// The translator.
    #[arg(long)]
    to: SocketAddr,
    /// Local address datagrams are forwarded from (the translator sends NACKs to its IP).
    #[arg(long)]
    bind: Option<SocketAddr>,
    /// Address NACKs and notices from the translator arrive on (default: --bind's IP, the
    /// reporters' NACK port).
    #[arg(long)]
    reverse_listen: Option<SocketAddr>,
    /// Port reporters receive NACKs on.
    #[arg(long, default_value_t = dta_wire::NACK_PORT)]
    reverse_port: u16,
    /// Percent of datagrams dropped.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Percent of datagrams sent twice.
    #[arg(long, default_value_t = 0.0)]
    duplicate: f64,
    /// Percent of datagrams held back.
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// A held datagram is sent after this many later ones...
    #[arg(long, default_value_t = 3)]
    reorder_by: u32,
    /// ... or after this many milliseconds.
    #[arg(long, default_value_t = 20.0)]
    hold_max_ms: f64,
    /// Milliseconds every forwarded datagram is delayed by.
    #[arg(long, default_value_t = 0.0)]
    delay_ms: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the counters here (JSON) on SIGUSR1 and on exit.
    #[arg(long)]
    counts: Option<PathBuf>,
    /// Stop after this many seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Receive buffer of both sockets, bytes (forced with CAP_NET_ADMIN).
    #[arg(long, default_value_t = 8 << 20)]
    recv_buffer: usize,
}

static STOP: AtomicBool = AtomicBool::new(false);
static DUMP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    if sig == libc::SIGUSR1 {
        DUMP.store(true, Ordering::Relaxed);
    } else {
        STOP.store(true, Ordering::Relaxed);
    }
}

fn install_signals() -> anyhow::Result<()> {
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGUSR1] {
        // SAFETY: a handler that only stores to atomics; no SA_RESTART, so poll wakes up.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                bail!("sigaction: {}", std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

fn set_recv_buffer(s: &UdpSocket, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: setsockopt on a socket we own with a c_int value.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &v as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return;
        }
    }
}

/// Most reporter ids remembered for routing NACKs back.
const MAX_REPORTERS: usize = 1 << 20;
/// Datagrams taken from one socket before looking at the other.
const BATCH: usize = 512;

struct Reverse {
    /// Reporter id -> the address its datagrams came from.
    routes: HashMap<u32, IpAddr>,
    /// The last reporter address seen (for NACKs without a reporter id: the prototype's).
    last: Option<IpAddr>,
    received: BTreeMap<&'static str, u64>,
    sent: u64,
    unroutable: u64,
    send_errors: u64,
}

impl Reverse {
    fn learn(&mut self, buf: &[u8], from: IpAddr) {
        self.last = Some(from);
        if let Some((id, _, _)) = dta_faults::impair::classify(buf).1 {
            if self.routes.len() < MAX_REPORTERS || self.routes.contains_key(&id) {
                self.routes.insert(id, from);
            }
        }
    }

    /// Where a datagram for a reporter goes, and its kind's name.
    fn route(&self, buf: &[u8]) -> (Option<IpAddr>, &'static str) {
        if dta_wire::protocol_of(buf) == Ok(dta_wire::Protocol::Native) {
            if let Ok(p) = Packet::new_checked(buf) {
                let kind = Kind::try_from(p.kind_raw()).map_or("other", |k| k.name());
                let to = self.routes.get(&p.reporter_id()).copied().or(self.last);
                return (to, kind);
            }
        }
        (self.last, "other")
    }
}

fn main() -> std::process::ExitCode {
    match run(Args::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dta-impair: error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn run(a: Args) -> anyhow::Result<()> {
    let ms = |v: f64, name: &str| -> anyhow::Result<Duration> {
        if !(v.is_finite() && v >= 0.0) {
            bail!("--{name} {v} must be a non-negative number of milliseconds");
        }
        Ok(Duration::from_secs_f64(v / 1000.0))
    };
    let imp = Impairment {
        loss: a.loss / 100.0,
        duplicate: a.duplicate / 100.0,
        reorder: a.reorder / 100.0,
        reorder_by: a.reorder_by,
        hold_max: ms(a.hold_max_ms, "hold-max-ms")?,
        delay: ms(a.delay_ms, "delay-ms")?,
        seed: a.seed,
    };
    let mut pipe = Pipeline::new(imp.clone()).map_err(anyhow::Error::msg)?;
    install_signals()?;

    let fwd_in = UdpSocket::bind(a.listen).with_context(|| format!("binding {}", a.listen))?;
    let bind = a.bind.unwrap_or_else(|| match a.to {
        SocketAddr::V4(_) => "0.0.0.0:0".parse().unwrap(),
        SocketAddr::V6(_) => "[::]:0".parse().unwrap(),
    });
    let fwd_out =
        connected(bind, a.to).with_context(|| format!("binding {bind} towards {}", a.to))?;
    let rev_listen = a
        .reverse_listen
        .unwrap_or(SocketAddr::new(bind.ip(), a.reverse_port));
    let rev_in =
        UdpSocket::bind(rev_listen).with_context(|| format!("binding {rev_listen} (reverse)"))?;
    for s in [&fwd_in, &fwd_out, &rev_in] {
        s.set_nonblocking(true)?;
        set_recv_buffer(s, a.recv_buffer);
    }
    eprintln!(
        "dta-impair: {} -> {} (from {}), reverse {} -> reporters:{}; loss {}% duplicate {}% \
         reorder {}% by {} delay {} ms seed {}",
        fwd_in.local_addr()?,
        a.to,
        fwd_out.local_addr()?,
        rev_in.local_addr()?,
        a.reverse_port,
        a.loss,
        a.duplicate,
        a.reorder,
        a.reorder_by,
        a.delay_ms,
        a.seed
    );

    let start = Instant::now();
    let deadline = a.duration.map(|d| start + Duration::from_secs_f64(d));
    let mut rev = Reverse {
        routes: HashMap::new(),
        last: None,
        received: BTreeMap::new(),
        sent: 0,
        unroutable: 0,
        send_errors: 0,
    };
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut inbound = RecvBatch::new(MMSG_BATCH, MAX_DATAGRAM + 1);
    let mut outbound = SendBatch::new(MMSG_BATCH, MAX_DATAGRAM + 1, None);
    let counts_json = |pipe: &Pipeline, rev: &Reverse, errs: u64| {
        serde_json::json!({
            "elapsed_s": start.elapsed().as_secs_f64(),
            "impairment": {
                "loss_pct": a.loss, "duplicate_pct": a.duplicate, "reorder_pct": a.reorder,
                "reorder_by": a.reorder_by, "hold_max_ms": a.hold_max_ms,
                "delay_ms": a.delay_ms, "seed": a.seed,
            },
            "forward": pipe.counts().to_json(),
            "forward_send_errors": errs,
            "untracked_drops": pipe.untracked(),
            "waiting": pipe.waiting(),
            "reverse": {
                "received": rev.received,
                "sent": rev.sent,
                "unroutable": rev.unroutable,
                "send_errors": rev.send_errors,
            },
        })
    };
    let write_counts = |v: &serde_json::Value| -> anyhow::Result<()> {
        if let Some(path) = &a.counts {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, serde_json::to_vec_pretty(v)?)
                .with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&tmp, path)
                .with_context(|| format!("renaming to {}", path.display()))?;
        }
        Ok(())
    };

    loop {
        if STOP.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if DUMP.swap(false, Ordering::Relaxed) {
            write_counts(&counts_json(&pipe, &rev, outbound.sent.errors))?;
        }
        let now = Instant::now();
        let wait = pipe
            .next_deadline()
            .map_or(Duration::from_millis(50), |d| {
                d.saturating_duration_since(now)
            })
            .min(Duration::from_millis(50));
        let mut fds = [
            libc::pollfd {
                fd: fwd_in.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: rev_in.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let timeout = wait.as_millis().min(50) as libc::c_int;
        // SAFETY: two valid pollfds for sockets that outlive the call.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(e).context("poll");
        }
        let out_fd = fwd_out.as_raw_fd();
        let mut send = |b: &[u8]| outbound.push(out_fd, b);
        for _ in 0..BATCH / MMSG_BATCH {
            let n = inbound
                .recv(fwd_in.as_raw_fd(), libc::MSG_DONTWAIT)
                .context("receiving from reporters")?;
            let now = Instant::now();
            for i in 0..n {
                let (d, from) = inbound.datagram(i);
                if let Some(from) = from {
                    rev.learn(d, from.ip());
                }
                pipe.push(d, now, &mut send);
            }
            if n < MMSG_BATCH {
                break;
            }
        }
        pipe.poll(Instant::now(), &mut send);
        outbound.flush(out_fd);
        for _ in 0..BATCH {
            match rev_in.recv_from(&mut buf) {
                Ok((n, _)) => {
                    let (dest, kind) = rev.route(&buf[..n]);
                    *rev.received.entry(kind).or_default() += 1;
                    match dest {
                        Some(ip) => {
                            match fwd_in.send_to(&buf[..n], SocketAddr::new(ip, a.reverse_port)) {
                                Ok(_) => rev.sent += 1,
                                Err(_) => rev.send_errors += 1,
                            }
                        }
                        None => rev.unroutable += 1,
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => break,
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(e).context("receiving from the translator"),
            }
        }
    }
    // What is still held or delayed goes out: the run is over, not the network.
    pipe.drain(&mut |b: &[u8]| outbound.push(fwd_out.as_raw_fd(), b));
    outbound.flush(fwd_out.as_raw_fd());
    let v = counts_json(&pipe, &rev, outbound.sent.errors);
    write_counts(&v)?;
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}

/// Datagrams per `recvmmsg`/`sendmmsg` call.
const MMSG_BATCH: usize = 64;

/// A UDP socket bound to `local` and connected to `peer`, non-blocking.
fn connected(local: SocketAddr, peer: SocketAddr) -> std::io::Result<UdpSocket> {
    let s = UdpSocket::bind(local)?;
    s.connect(peer)?;
    s.set_nonblocking(true)?;
    Ok(s)
}
