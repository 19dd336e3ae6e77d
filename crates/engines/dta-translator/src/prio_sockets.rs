//! Priority admission at the socket ([DTA-draft §3.2] "Telemetry Flow Control &
//! Prioritization"): every receiver (a translator thread, or the classifier) has one UDP socket
//! per priority, all in the port's `SO_REUSEPORT` group, and a classic BPF program attached to
//! the group sends each datagram to the socket of its priority in the kernel, before any
//! receive buffer fills. A flood of low priority then fills only the low socket's buffer: when
//! the kernel must drop, it drops the flood's own datagrams, never the high-priority ones
//! queued behind them in one shared buffer; receivers read high first ([`PrioSockets::recv`]),
//! but not only: every [`MEDIUM_TURN`]th read starts at medium and every [`LOW_TURN`]th at low,
//! so a flood that claims high priority cannot starve the lower sockets (a priority is a claim,
//! `crate::claims`); while the higher sockets are empty nothing changes.
//! The kernel's drops are counted per socket, so per priority ([`PrioSockets::kernel_drops`]).
//!
//! The program ([`program`]) reads what the classifier reads ([`crate::classify::priority_of`]):
//! the native header's priority bits (3, invalid, and anything that is not DTA count as low, the
//! prototype as medium, which carries none). With several receivers it picks the receiver too,
//! keeping each sequence space on one: a native datagram by its reporter id, a prototype one by
//! its source address (the prototype's spaces are per source). [`steer`] is the same decision
//! in Rust, tested against the kernel's.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use dta_net::cbpf::*;
use dta_net::mmsg::RecvBatch;
use dta_wire::Priority;

/// Socket slots of a receiver, highest priority first.
pub const SLOTS: [Priority; 3] = [Priority::High, Priority::Medium, Priority::Low];

/// Receivers one port's group holds at most (the sockets are `3 ×` this).
pub const MAX_RECEIVERS: usize = crate::config::MAX_THREADS;

/// The slot of priority `p` ([`SLOTS`]).
pub fn slot_of(p: Priority) -> usize {
    match p {
        Priority::High => 0,
        Priority::Medium => 1,
        Priority::Low => 2,
    }
}

/// One receiver's sockets: one per priority ([`SLOTS`] order), or one for every priority
/// ([`PrioSockets::single`], a socket the caller bound without steering).
pub struct PrioSockets {
    sockets: Vec<UdpSocket>,
    /// Reads so far, for the turns of the lower sockets.
    turn: std::sync::atomic::AtomicU32,
}

/// Every this many reads starts at the medium socket.
pub const MEDIUM_TURN: u32 = 8;
/// Every this many reads starts at the low socket.
pub const LOW_TURN: u32 = 32;

impl PrioSockets {
    /// One socket taking every priority (no steering: the kernel drops at its buffer blindly).
    pub fn single(socket: UdpSocket) -> PrioSockets {
        PrioSockets {
            sockets: vec![socket],
            turn: Default::default(),
        }
    }

    /// Another handle on the same sockets (for a metrics collector).
    pub fn try_clone(&self) -> io::Result<PrioSockets> {
        Ok(PrioSockets {
            turn: Default::default(),
            sockets: self
                .sockets
                .iter()
                .map(UdpSocket::try_clone)
                .collect::<io::Result<_>>()?,
        })
    }

    /// The sockets, highest priority first.
    pub fn all(&self) -> &[UdpSocket] {
        &self.sockets
    }

    /// Where reports arrive (the same address for the three).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sockets[0].local_addr()
    }

    /// The socket NACKs and notices are sent from (any: they share the address).
    pub fn sender(&self) -> &UdpSocket {
        &self.sockets[0]
    }

    /// Receive one batch into `m` from the first socket holding datagrams in this read's order
    /// ([`PrioSockets::read_order`]), without waiting; how many (0: all empty). A receiver
    /// that takes one batch per turn and comes back here serves high priority first.
    pub fn recv(&self, m: &mut RecvBatch) -> io::Result<usize> {
        for fd in self.read_order() {
            let n = m.recv(fd, libc::MSG_DONTWAIT)?;
            if n > 0 {
                return Ok(n);
            }
        }
        Ok(0)
    }

    /// The sockets in the order this read tries them: highest priority first, except every
    /// [`MEDIUM_TURN`]th read (medium, low, high) and every [`LOW_TURN`]th (low, high, medium).
    pub fn read_order(&self) -> impl Iterator<Item = RawFd> + '_ {
        let t = self
            .turn
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .wrapping_add(1);
        let start = match self.sockets.len() {
            3 if t % LOW_TURN == 0 => 2,
            3 if t % MEDIUM_TURN == 0 => 1,
            _ => 0,
        };
        let n = self.sockets.len();
        (0..n).map(move |i| self.sockets[(start + i) % n].as_raw_fd())
    }

    /// Wait until one of the sockets has a datagram, at most `timeout` (a signal ends the wait
    /// early; either way the caller looks again).
    pub fn wait(&self, timeout: Duration) -> io::Result<()> {
        self.wait_with(None, timeout)
    }

    /// [`PrioSockets::wait`], also for `extra` to be readable (another source of datagrams,
    /// an AF_XDP socket).
    pub fn wait_with(&self, extra: Option<RawFd>, timeout: Duration) -> io::Result<()> {
        let mut fds = [libc::pollfd {
            fd: -1,
            events: libc::POLLIN,
            revents: 0,
        }; 4];
        for (p, s) in fds.iter_mut().zip(&self.sockets) {
            p.fd = s.as_raw_fd();
        }
        fds[3].fd = extra.unwrap_or(-1);
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: pollfds we own, alive for the call (unused entries have fd -1: ignored).
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Datagrams the kernel dropped at each socket's full receive buffer, by priority
    /// ([`SLOTS`] order; a [`PrioSockets::single`] socket's under low).
    pub fn kernel_drops(&self) -> [u64; 3] {
        let mut d = [0u64; 3];
        let slots = if self.sockets.len() == 3 { 0 } else { 2 };
        for (i, s) in self.sockets.iter().enumerate() {
            d[slots + i] += crate::sockets::kernel_drops(s).unwrap_or(0);
        }
        d
    }

    /// The descriptors, highest priority first.
    pub fn fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        self.sockets.iter().map(|s| s.as_raw_fd())
    }
}

/// Bind `receivers` receivers' sockets (three each) to `addr` in one `SO_REUSEPORT` group and
/// attach the steering program. Port 0 picks a free port. The caller refuses a port another
/// process shares first ([`crate::sockets::refuse_shared_port`]).
pub fn bind(
    addr: SocketAddr,
    receivers: usize,
    recv_buffer: usize,
) -> io::Result<Vec<PrioSockets>> {
    let receivers = receivers.clamp(1, MAX_RECEIVERS);
    let first = crate::sockets::bind(addr, recv_buffer)?;
    let addr = first.local_addr()?;
    let mut all = vec![first];
    for _ in 1..3 * receivers {
        all.push(crate::sockets::bind(addr, recv_buffer)?);
    }
    attach_reuseport(all[0].as_raw_fd(), &mut program(receivers))?;
    let mut out = Vec::with_capacity(receivers);
    let mut it = all.into_iter();
    while let (Some(h), Some(m), Some(l)) = (it.next(), it.next(), it.next()) {
        out.push(PrioSockets {
            sockets: vec![h, m, l],
            turn: Default::default(),
        });
    }
    Ok(out)
}

/// Multiplier of the source-address hash (a 32-bit odd constant, the golden ratio's).
const MIX: u32 = 0x9E37_79B1;

/// The socket of a group of `receivers` receivers that the kernel gives a datagram with UDP
/// payload `payload` from `src`: receiver `r`, slot `s` is socket `3r + s`.
pub fn steer(payload: &[u8], src: IpAddr, receivers: usize) -> usize {
    let n = receivers.clamp(1, MAX_RECEIVERS) as u32;
    let (receiver, slot) = match payload.first() {
        Some(0x01..=0x04) => {
            let word = match src {
                IpAddr::V4(a) => u32::from(a),
                IpAddr::V6(a) => match a.to_ipv4_mapped() {
                    Some(v4) => u32::from(v4),
                    None => u32::from_be_bytes(a.octets()[12..16].try_into().unwrap()),
                },
            };
            ((word.wrapping_mul(MIX) >> 16) % n, 1)
        }
        Some(b) if b >> 4 == 1 && payload.len() >= dta_wire::native::HEADER_LEN => {
            let id = u32::from_be_bytes(payload[4..8].try_into().unwrap());
            let slot = match payload[1] >> 6 {
                2 => 0,
                1 => 1,
                _ => 2,
            };
            (id % n, slot)
        }
        _ => (0, 2),
    };
    (receiver * 3 + slot) as usize
}

/// Scratch words of the program.
const M_RECEIVER: u32 = 0;

/// The steering program of a group of `receivers` receivers (the decision of [`steer`]).
pub fn program(receivers: usize) -> Vec<libc::sock_filter> {
    let n = receivers.clamp(1, MAX_RECEIVERS) as u32;
    let hl = dta_wire::native::HEADER_LEN as u32;
    let ins = [
        Op(LD | B | ABS, 0),
        // The prototype: opcodes 1..=4.
        Jump(JMP | JGE | K, 1, None, Some("other")),
        Jump(JMP | JGT | K, 4, Some("native"), None),
        // Its source address: IPv4, or the last word of IPv6 (an IPv4-mapped address's IPv4).
        Op(LD | B | ABS, NET_OFF),
        Op(ALU | RSH | K, 4),
        Jump(JMP | JEQ | K, 4, None, Some("v6")),
        Op(LD | W | ABS, NET_OFF.wrapping_add(12)),
        Goto("hash"),
        Label("v6"),
        Op(LD | W | ABS, NET_OFF.wrapping_add(20)),
        Label("hash"),
        Op(ALU | MUL | K, MIX),
        Op(ALU | RSH | K, 16),
        Op(ALU | MOD | K, n),
        Op(ALU | MUL | K, 3),
        Op(ALU | ADD | K, 1),
        Op(RET | RET_A, 0),
        // Native: version 1 in the top nibble, a whole header.
        Label("native"),
        Op(ALU | RSH | K, 4),
        Jump(JMP | JEQ | K, 1, None, Some("other")),
        Op(LD | W | LEN, 0),
        Jump(JMP | JGE | K, hl, None, Some("other")),
        Op(LD | W | ABS, 4),
        Op(ALU | MOD | K, n),
        Op(ALU | MUL | K, 3),
        Op(ST, M_RECEIVER),
        Op(LD | B | ABS, 1),
        Op(ALU | RSH | K, 6),
        Jump(JMP | JEQ | K, 2, Some("high"), None),
        Jump(JMP | JEQ | K, 1, Some("medium"), Some("low")),
        Label("high"),
        Op(LD | MEM, M_RECEIVER),
        Op(RET | RET_A, 0),
        Label("medium"),
        Op(LD | MEM, M_RECEIVER),
        Op(ALU | ADD | K, 1),
        Op(RET | RET_A, 0),
        Label("low"),
        Op(LD | MEM, M_RECEIVER),
        Op(ALU | ADD | K, 2),
        Op(RET | RET_A, 0),
        // Anything else: receiver 0's low socket (the parser counts why it is rejected).
        Label("other"),
        Op(RET | K, 2),
    ];
    assemble(&ins)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dta_wire::native::DatagramBuilder;
    use dta_wire::Report;
    use std::net::Ipv4Addr;

    fn native(p: Priority, reporter: u32) -> Vec<u8> {
        let mut buf = vec![0u8; 64];
        let mut b = DatagramBuilder::new(&mut buf, p, false, reporter, 0).unwrap();
        b.push(&Report::KeyWrite {
            key: &[1, 2, 3, 4],
            data: &[5, 6, 7, 8],
            redundancy: 1,
            immediate: false,
        })
        .unwrap();
        let n = b.finish();
        buf.truncate(n);
        buf
    }

    /// Each datagram reaches the socket [`steer`] names, sent from loopback sources.
    fn check(receivers: usize) {
        let groups = bind("127.0.0.1:0".parse().unwrap(), receivers, 1 << 20).unwrap();
        let to = groups[0].local_addr().unwrap();
        let mut cases: Vec<(Vec<u8>, Ipv4Addr)> = vec![];
        for (i, p) in [Priority::High, Priority::Medium, Priority::Low]
            .into_iter()
            .enumerate()
        {
            for r in 0..4u32 {
                cases.push((native(p, r * 7 + i as u32), Ipv4Addr::new(127, 0, 0, 2)));
            }
        }
        let mut bad_prio = native(Priority::High, 9);
        bad_prio[1] |= 0xc0;
        cases.push((bad_prio, Ipv4Addr::new(127, 0, 0, 2)));
        for last in 1..6 {
            cases.push((
                vec![0x01, 0x00, 1, 0, 0, 0, 7, 1, 2, 3, 4],
                Ipv4Addr::new(127, 0, 0, last),
            ));
        }
        cases.push((vec![0x77; 20], Ipv4Addr::new(127, 0, 0, 2)));
        cases.push((
            native(Priority::High, 3)[..10].to_vec(),
            Ipv4Addr::new(127, 0, 0, 2),
        ));
        let all: Vec<&UdpSocket> = groups.iter().flat_map(|g| g.all()).collect();
        for (payload, src) in &cases {
            let tx = UdpSocket::bind((*src, 0)).unwrap();
            tx.send_to(payload, to).unwrap();
            let want = steer(payload, IpAddr::V4(*src), receivers);
            all[want]
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut b = [0u8; 64];
            let n = all[want]
                .recv(&mut b)
                .unwrap_or_else(|e| panic!("{payload:02x?} from {src}: not on socket {want}: {e}"));
            assert_eq!(&b[..n], &payload[..]);
        }
        // Nothing went elsewhere.
        for s in all {
            s.set_nonblocking(true).unwrap();
            assert!(s.recv(&mut [0u8; 64]).is_err());
        }
    }

    #[test]
    fn lower_sockets_get_their_turns_while_high_is_busy() {
        let r = bind("127.0.0.1:0".parse().unwrap(), 1, 1 << 16)
            .unwrap()
            .pop()
            .unwrap();
        let fds: Vec<RawFd> = r.fds().collect();
        let firsts: Vec<usize> = (0..LOW_TURN)
            .map(|_| {
                let first = r.read_order().next().unwrap();
                fds.iter().position(|&f| f == first).unwrap()
            })
            .collect();
        let count = |slot| firsts.iter().filter(|&&s| s == slot).count() as u32;
        assert_eq!(count(2), 1, "low first once in {LOW_TURN}: {firsts:?}");
        assert_eq!(count(1), LOW_TURN / MEDIUM_TURN - 1, "{firsts:?}");
        assert_eq!(count(0), LOW_TURN - LOW_TURN / MEDIUM_TURN, "{firsts:?}");
        // Every read still tries every socket.
        assert_eq!(r.read_order().count(), 3);
    }

    #[test]
    fn the_kernel_steers_each_datagram_as_steer_says() {
        check(1);
        check(3);
    }

    #[test]
    fn priority_decides_the_slot() {
        let src = IpAddr::V4(Ipv4Addr::LOCALHOST);
        assert_eq!(steer(&native(Priority::High, 0), src, 1), 0);
        assert_eq!(steer(&native(Priority::Medium, 0), src, 1), 1);
        assert_eq!(steer(&native(Priority::Low, 0), src, 1), 2);
        assert_eq!(steer(&[0x02, 0x00, 0, 0, 0, 1, 9, 9, 9, 9], src, 1), 1);
        assert_eq!(steer(&[], src, 1), 2);
        // Receiver by reporter id.
        assert_eq!(steer(&native(Priority::High, 5), src, 3), 2 * 3);
    }
}
