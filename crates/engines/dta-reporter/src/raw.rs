//! The raw sender: the native datagrams of a load, built first into Ethernet frames, then sent
//! as fast as the interface takes them on AF_PACKET sockets, one per sender thread (`sendmmsg`
//! of 64, or a transmit ring). For measuring a translator at the limit, where a UDP socket's
//! per-datagram cost would be what is measured; needs `CAP_NET_RAW`.

use std::net::SocketAddrV4;
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use dta_net::raw::{RawSocket, TxRing};
use dta_wire::Priority;

use crate::loadgen::{self, LoadError, LoadSpec, LoadStats};

/// Most sender threads.
pub const MAX_SENDERS: u32 = 16;
/// Most distinct frames per sender (each built in memory, up to 1514 bytes; a TX ring holds at
/// most this many slots, [`dta_net::raw::TX_RING_MAX_SLOTS`]).
pub const MAX_FRAMES: usize = dta_net::raw::TX_RING_MAX_SLOTS;

/// Where and how the frames go.
#[derive(Debug, Clone)]
pub struct RawOptions {
    /// The interface the frames leave by.
    pub iface: String,
    /// The translator.
    pub to: SocketAddrV4,
    /// The source address and first port; `None`: the interface's IPv4 address, port 40000.
    pub src: Option<SocketAddrV4>,
    /// The next hop's MAC address.
    pub dst_mac: [u8; 6],
    /// Sender threads (each its own socket and its own share of the load).
    pub senders: u32,
    /// Source ports per sender, used in turn (the receiver's flow hash spreads them).
    pub src_ports: u16,
    /// Distinct frames each sender builds and sends cyclically.
    pub frames: usize,
    /// A transmit ring (`PACKET_TX_RING`) instead of `sendmmsg`.
    pub tx_ring: bool,
    /// The first sender's reporter id (sender `i` is `reporter_id + i`).
    pub reporter_id: u32,
    /// The datagrams' priority.
    pub priority: Priority,
    /// Most reports per datagram.
    pub batch: u8,
    /// Stop after this long (with no count).
    pub duration: Option<Duration>,
}

/// What was sent.
#[derive(Debug, Clone, Default)]
pub struct RawStats {
    /// Reports, datagrams and bytes sent, and for how long.
    pub load: LoadStats,
    /// System calls (`sendmmsg` calls or ring kicks).
    pub calls: u64,
}

/// Why the raw sender could not run.
#[derive(Debug, thiserror::Error)]
pub enum RawError {
    /// The options cannot be honoured, or the frames not built.
    #[error("{0}")]
    Options(String),
    /// The load spec is invalid.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A socket or interface call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RawError {
    let what = what.into();
    move |source| RawError::Io { what, source }
}

/// One sender's frames, and the reports each of them carries.
struct Plan {
    frames: Vec<Vec<u8>>,
    reports: Vec<u64>,
    /// Frames to send (`u64::MAX`: until the duration ends).
    limit: u64,
}

/// Send the load `spec(i)` gives each sender `i` of `o.senders` (its share of the count, its
/// seed); every sender starts at once, after its frames are built and its socket is set up.
pub fn send(o: &RawOptions, spec: impl Fn(u32) -> LoadSpec) -> Result<RawStats, RawError> {
    let senders = o.senders.max(1);
    let ports = o.src_ports.max(1);
    // Every sender's frames are built in memory first: bound them before building.
    if senders > MAX_SENDERS || o.frames > MAX_FRAMES {
        return Err(RawError::Options(format!(
            "at most {MAX_SENDERS} senders of at most {MAX_FRAMES} frames each (asked: \
             {senders} x {})",
            o.frames
        )));
    }
    let (src_mac, _) =
        dta_net::raw::iface_mac_index(&o.iface).map_err(io(format!("interface {}", o.iface)))?;
    let src = match o.src {
        Some(s) => s,
        None => SocketAddrV4::new(
            dta_net::iface::ipv4_of(&o.iface)
                .map_err(io(format!(
                    "{} has no IPv4 address: give a source",
                    o.iface
                )))?
                .into(),
            40000,
        ),
    };
    if u32::from(src.port()) + senders * u32::from(ports) > 65536 {
        return Err(RawError::Options(format!(
            "{senders} senders x {ports} source ports from port {} pass 65535",
            src.port()
        )));
    }
    let plans = (0..senders)
        .map(|i| plan(o, &spec(i), i, src, src_mac, ports))
        .collect::<Result<Vec<_>, _>>()?;
    let results = run_senders(o, &plans);
    let mut stats = RawStats::default();
    for (p, r) in plans.iter().zip(results) {
        let (sent, kicks, elapsed) = r?;
        stats.load.datagrams += sent;
        stats.load.reports += cyclic_sum(&p.reports, sent);
        let payload: Vec<u64> = p
            .frames
            .iter()
            .map(|f| (f.len() - dta_net::UDP_FRAME_OVERHEAD) as u64)
            .collect();
        stats.load.bytes += cyclic_sum(&payload, sent);
        stats.load.elapsed = stats.load.elapsed.max(elapsed);
        stats.calls += kicks;
    }
    Ok(stats)
}

/// Sender `i`'s frames: its datagrams, each from the next of its source ports.
fn plan(
    o: &RawOptions,
    spec: &LoadSpec,
    i: u32,
    src: SocketAddrV4,
    src_mac: [u8; 6],
    ports: u16,
) -> Result<Plan, RawError> {
    let datagrams = loadgen::native_datagrams(
        spec,
        o.reporter_id.wrapping_add(i),
        o.priority,
        o.batch,
        o.frames.max(1),
    )?;
    let reports = datagrams
        .iter()
        .map(|d| dta_wire::native::Datagram::parse(d).map(|d| u64::from(d.header.count)))
        .collect::<Result<Vec<u64>, _>>()
        .map_err(|e| RawError::Options(format!("a built datagram does not parse: {e}")))?;
    let base = src.port() + (i as u16) * ports;
    let frames = datagrams
        .iter()
        .enumerate()
        .map(|(j, d)| {
            let from = SocketAddrV4::new(*src.ip(), base + (j % ports as usize) as u16);
            dta_net::udp_frame_between(src_mac, o.dst_mac, from, o.to, d)
        })
        .collect::<Result<Vec<Vec<u8>>, _>>()
        .map_err(|e| RawError::Options(format!("a datagram does not fit a UDP frame: {e}")))?;
    // Frames until the sender's share of the count is reached (whole datagrams).
    let limit = match spec.count {
        Some(c) => frames_for(&reports, c),
        None => u64::MAX,
    };
    Ok(Plan {
        frames,
        reports,
        limit,
    })
}

/// One thread per plan, started together; each one's frames sent, system calls and time.
fn run_senders(o: &RawOptions, plans: &[Plan]) -> Vec<Result<(u64, u64, Duration), RawError>> {
    let barrier = Barrier::new(plans.len());
    let start_at = OnceLock::<Instant>::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = plans
            .iter()
            .map(|p| {
                let (barrier, start_at) = (&barrier, &start_at);
                s.spawn(move || send_one(o, p, barrier, start_at))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(RawError::Options("sender thread panicked".to_owned())))
            })
            .collect()
    })
}

/// One sender: set up before the common start (the ring's mapping, the frames written), then
/// send until its limit or the duration.
fn send_one(
    o: &RawOptions,
    p: &Plan,
    barrier: &Barrier,
    start_at: &OnceLock<Instant>,
) -> Result<(u64, u64, Duration), RawError> {
    enum Tx {
        Ring(TxRing),
        Mmsg(RawSocket),
    }
    let opened = if o.tx_ring {
        TxRing::open(&o.iface, p.frames.clone()).map(Tx::Ring)
    } else {
        RawSocket::open_send_only(&o.iface).map(Tx::Mmsg)
    };
    barrier.wait();
    let mut tx = opened.map_err(io(format!(
        "AF_PACKET socket on {} (needs CAP_NET_RAW)",
        o.iface
    )))?;
    let start = *start_at.get_or_init(Instant::now);
    let deadline = o.duration.map(|d| start + d);
    let stop = || deadline.is_some_and(|d| Instant::now() >= d);
    let (sent, kicks) = match &mut tx {
        Tx::Ring(r) => {
            let st = r.send_cyclic(p.limit, stop).map_err(io("sending"))?;
            (st.sent, st.kicks)
        }
        Tx::Mmsg(m) => {
            let n = m
                .send_cyclic(&p.frames, 64, p.limit, stop)
                .map_err(io("sending"))?;
            (n, n.div_ceil(64))
        }
    };
    Ok((sent, kicks, start.elapsed()))
}

/// The sum of the first `n` values of `v` repeated cyclically.
fn cyclic_sum(v: &[u64], n: u64) -> u64 {
    let len = v.len() as u64;
    if len == 0 {
        return 0;
    }
    let whole: u64 = v.iter().sum();
    whole * (n / len) + v[..(n % len) as usize].iter().sum::<u64>()
}

/// Frames, sent cyclically, until their reports (`reports[i]` in frame `i`) reach `count`.
fn frames_for(reports: &[u64], count: u64) -> u64 {
    let whole: u64 = reports.iter().sum();
    if whole == 0 {
        return 0;
    }
    let cycles = count / whole;
    let mut left = count % whole;
    let mut n = cycles * reports.len() as u64;
    for r in reports {
        if left == 0 {
            break;
        }
        left = left.saturating_sub(*r);
        n += 1;
    }
    n
}

/// A MAC address as six hex bytes separated by `:`.
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let mut mac = [0u8; 6];
    if parts.len() != 6 {
        return Err(format!(
            "bad MAC address {s:?}: want six hex bytes separated by ':'"
        ));
    }
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16)
            .map_err(|_| format!("bad MAC address {s:?}: {p:?} is not a hex byte"))?;
    }
    Ok(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cyclic_counts() {
        let r = [32, 32, 5];
        assert_eq!(cyclic_sum(&r, 0), 0);
        assert_eq!(cyclic_sum(&r, 2), 64);
        assert_eq!(cyclic_sum(&r, 7), 2 * 69 + 32);
        assert_eq!(cyclic_sum(&[], 7), 0);
        assert_eq!(frames_for(&r, 0), 0);
        assert_eq!(frames_for(&r, 1), 1);
        assert_eq!(frames_for(&r, 64), 2);
        assert_eq!(frames_for(&r, 65), 3);
        assert_eq!(frames_for(&r, 69 * 2 + 33), 8);
        assert_eq!(frames_for(&[0], 5), 0);
    }

    #[test]
    fn mac_addresses() {
        assert_eq!(parse_mac("02:00:00:00:00:0a"), Ok([2, 0, 0, 0, 0, 10]));
        assert!(parse_mac("02:00:00:00:00").is_err());
        assert!(parse_mac("02:00:00:00:00:zz").is_err());
    }
}
