//! Raw Ethernet frame links: the [`Link`] trait, an in-memory pair with seeded impairments
//! (loss, duplication, reordering, delay) for deterministic tests, and [`PacketLink`]: a
//! `dta_net::raw` socket bound to one interface that keeps only incoming RoCEv2 frames (IPv4,
//! UDP destination 4791).
//!
//! `tc netem` is not available on this kernel (`CONFIG_NET_SCH_NETEM` is not set), so loss is
//! injected in userspace with [`Impaired`], which wraps any link. AF_XDP would avoid one copy
//! per frame; it is a later optimisation.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use dta_net::raw::RawSocket;
use dta_net::{ethernet, ipv4, udp, IPPROTO_UDP};
use dta_roce::ROCE_PORT;

pub use dta_net::iface::ipv4_of;
pub use dta_net::raw::iface_mac_index;

/// Sends and receives whole Ethernet frames.
pub trait Link {
    /// Send one frame.
    fn send(&mut self, frame: &[u8]) -> io::Result<()>;
    /// Receive one frame into `buf`, waiting at most `timeout`; `Ok(None)` on timeout. A zero
    /// timeout polls.
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>>;
}

impl<L: Link + ?Sized> Link for Box<L> {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        (**self).send(frame)
    }
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        (**self).recv(buf, timeout)
    }
}

/// A small deterministic generator (SplitMix64) for seeded impairments.
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A uniform value in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Impairments applied to frames sent on a link, each with its own probability.
#[derive(Debug, Clone, Copy, Default)]
pub struct Impairment {
    /// Probability that a frame is dropped.
    pub loss: f64,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Probability that a frame is held back (by up to `reorder_by`) so that later ones overtake it.
    pub reorder: f64,
    /// How long a reordered frame is held back at most.
    pub reorder_by: Duration,
    /// Delay added to every frame.
    pub delay: Duration,
    /// Seed of the generator deciding every impairment.
    pub seed: u64,
}

/// Counts of what an impairment did.
#[derive(Debug, Default)]
pub struct ImpairStats {
    pub frames: AtomicU64,
    pub dropped: AtomicU64,
    pub duplicated: AtomicU64,
    pub reordered: AtomicU64,
}

struct Queue {
    frames: Mutex<VecDeque<(Instant, Vec<u8>)>>,
    cv: Condvar,
}

/// One end of an in-memory link ([`mem_pair`]).
pub struct MemLink {
    tx: Arc<Queue>,
    rx: Arc<Queue>,
}

/// Two connected in-memory link ends: what one sends the other receives.
pub fn mem_pair() -> (MemLink, MemLink) {
    let q = || {
        Arc::new(Queue {
            frames: Mutex::new(VecDeque::new()),
            cv: Condvar::new(),
        })
    };
    let (a, b) = (q(), q());
    (
        MemLink {
            tx: a.clone(),
            rx: b.clone(),
        },
        MemLink { tx: b, rx: a },
    )
}

impl MemLink {
    fn send_at(&mut self, at: Instant, frame: &[u8]) {
        let mut q = self.tx.frames.lock().unwrap();
        q.push_back((at, frame.to_vec()));
        self.tx.cv.notify_all();
    }
}

impl Link for MemLink {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.send_at(Instant::now(), frame);
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        let deadline = Instant::now() + timeout;
        let mut q = self.rx.frames.lock().unwrap();
        loop {
            let now = Instant::now();
            // The first frame that is due, in send order: held-back frames are overtaken.
            if let Some(i) = q.iter().position(|(at, _)| *at <= now) {
                let (_, f) = q.remove(i).unwrap();
                let n = f.len().min(buf.len());
                buf[..n].copy_from_slice(&f[..n]);
                return Ok(Some(n));
            }
            if now >= deadline {
                return Ok(None);
            }
            let next_due = q.iter().map(|(at, _)| *at).min().unwrap_or(deadline);
            let wait = next_due.min(deadline).saturating_duration_since(now);
            q = self
                .rx
                .cv
                .wait_timeout(q, wait.max(Duration::from_micros(50)))
                .unwrap()
                .0;
        }
    }
}

/// A link whose sent frames are impaired (seeded, reproducible decisions). Delay and
/// reordering need a [`MemLink`] underneath (they set delivery times); over other links only
/// loss and duplication apply.
pub struct Impaired<L> {
    inner: L,
    imp: Impairment,
    rng: SplitMix,
    stats: Arc<ImpairStats>,
}

impl<L> Impaired<L> {
    pub fn new(inner: L, imp: Impairment) -> Self {
        Impaired {
            inner,
            imp,
            rng: SplitMix(imp.seed),
            stats: Arc::default(),
        }
    }
    /// What the impairment did so far.
    pub fn stats(&self) -> Arc<ImpairStats> {
        self.stats.clone()
    }
}

/// Something that can deliver a frame at a given time (in-memory links) or now.
pub trait Scheduled: Link {
    /// Deliver `frame` no earlier than `at`.
    fn send_later(&mut self, at: Instant, frame: &[u8]) -> io::Result<()>;
}

impl Scheduled for MemLink {
    fn send_later(&mut self, at: Instant, frame: &[u8]) -> io::Result<()> {
        self.send_at(at, frame);
        Ok(())
    }
}

impl Scheduled for PacketLink {
    fn send_later(&mut self, _at: Instant, frame: &[u8]) -> io::Result<()> {
        self.send(frame)
    }
}

impl<L: Scheduled> Link for Impaired<L> {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.stats.frames.fetch_add(1, Ordering::Relaxed);
        if self.rng.unit() < self.imp.loss {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let copies = if self.rng.unit() < self.imp.duplicate {
            self.stats.duplicated.fetch_add(1, Ordering::Relaxed);
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut at = Instant::now() + self.imp.delay;
            if self.rng.unit() < self.imp.reorder {
                self.stats.reordered.fetch_add(1, Ordering::Relaxed);
                at += self.imp.reorder_by.mul_f64(0.2 + 0.8 * self.rng.unit());
            }
            self.inner.send_later(at, frame)?;
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        self.inner.recv(buf, timeout)
    }
}

/// An `AF_PACKET` raw socket bound to one interface, receiving only incoming RoCEv2 frames
/// (EtherType IPv4, protocol UDP, destination port 4791; filtered in userspace).
pub struct PacketLink {
    sock: RawSocket,
}

impl PacketLink {
    /// Open a raw socket on `iface` (needs CAP_NET_RAW).
    pub fn open(iface: &str) -> io::Result<PacketLink> {
        Ok(PacketLink {
            sock: RawSocket::open(iface, ethernet::ETHERTYPE_IPV4)?,
        })
    }

    /// The interface's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.sock.mac()
    }

    /// The interface index.
    pub fn ifindex(&self) -> i32 {
        self.sock.ifindex()
    }
}

/// True for an IPv4/UDP frame to port 4791 (what the raw socket keeps). Only the headers'
/// shape is checked here; [`dta_roce::FrameRepr`] checks the rest.
pub fn is_roce_frame(f: &[u8]) -> bool {
    let Ok(eth) = ethernet::Packet::new_checked(f) else {
        return false;
    };
    if eth.ethertype() != ethernet::ETHERTYPE_IPV4 {
        return false;
    }
    let Ok(ip) = ipv4::Packet::new_checked(&f[ethernet::HEADER_LEN..]) else {
        return false;
    };
    if ip.protocol() != IPPROTO_UDP {
        return false;
    }
    udp::Packet::new_checked(ip.into_payload()).is_ok_and(|u| u.dst_port() == ROCE_PORT)
}

impl Link for PacketLink {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.sock.send(frame)
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(r) = self.sock.recv(buf, left)? else {
                return Ok(None);
            };
            if !r.outgoing && is_roce_frame(&buf[..r.len]) {
                return Ok(Some(r.len));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_pair_delivers_both_ways_and_times_out() {
        let (mut a, mut b) = mem_pair();
        let mut buf = [0u8; 16];
        a.send(b"hello").unwrap();
        assert_eq!(b.recv(&mut buf, Duration::ZERO).unwrap(), Some(5));
        assert_eq!(&buf[..5], b"hello");
        assert_eq!(b.recv(&mut buf, Duration::from_millis(5)).unwrap(), None);
        b.send(b"yo").unwrap();
        assert_eq!(a.recv(&mut buf, Duration::ZERO).unwrap(), Some(2));
    }

    #[test]
    fn impairment_is_seeded_and_does_what_it_says() {
        let run = |seed| {
            let (a, mut b) = mem_pair();
            let mut a = Impaired::new(
                a,
                Impairment {
                    loss: 0.1,
                    duplicate: 0.1,
                    reorder: 0.2,
                    reorder_by: Duration::from_millis(2),
                    delay: Duration::ZERO,
                    seed,
                },
            );
            for i in 0..1000u32 {
                a.send(&i.to_be_bytes()).unwrap();
            }
            let mut got = vec![];
            let mut buf = [0u8; 4];
            while b
                .recv(&mut buf, Duration::from_millis(20))
                .unwrap()
                .is_some()
            {
                got.push(u32::from_be_bytes(buf));
            }
            (got, a.stats())
        };
        let (g1, s) = run(7);
        let (g2, _) = run(7);
        let mut sorted1 = g1.clone();
        sorted1.sort();
        let mut sorted2 = g2.clone();
        sorted2.sort();
        assert_eq!(sorted1, sorted2, "same seed, same fate per frame");
        let dropped = s.dropped.load(Ordering::Relaxed);
        let dup = s.duplicated.load(Ordering::Relaxed);
        assert!((50..150).contains(&dropped), "{dropped}");
        assert!((40..150).contains(&dup), "{dup}");
        assert_eq!(g1.len() as u64, 1000 - dropped + dup);
        assert!(g1.windows(2).any(|w| w[0] > w[1]), "some reordering");
    }

    #[test]
    fn roce_filter() {
        let mut f = [0u8; 60];
        f[12] = 8;
        f[14] = 0x45;
        f[23] = 17;
        f[36..38].copy_from_slice(&4791u16.to_be_bytes());
        assert!(is_roce_frame(&f));
        f[37] ^= 1;
        assert!(!is_roce_frame(&f));
        assert!(!is_roce_frame(&f[..40]));
    }
}
