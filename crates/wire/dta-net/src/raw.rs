// Size: one socket type: its two send paths (sendmmsg, the PACKET_MMAP ring) and its receive
// path share the socket set-up and the interface ioctls.
//! One `AF_PACKET` raw socket type (Linux, needs CAP_NET_RAW): whole Ethernet frames sent and
//! received on one interface of the calling thread's network namespace, bypassing the IP/UDP
//! stack. [`RawSocket::open_send_only`] is the benchmark sender (no receive queue, the qdisc
//! skipped, many frames per `sendmmsg(2)` with [`RawSocket::send_cyclic`]);
//! [`RawSocket::open`] receives the frames of one EtherType ([`RawSocket::recv`] waits with a
//! timeout and says whether the kernel looped back one of our own). The socket is created and
//! owned by `socket2`; what `socket2` lacks (`sendmmsg`, `PACKET_QDISC_BYPASS`,
//! `SO_RCVBUFFORCE`, the packet type of a received frame, interface ioctls) is `libc`.

#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Receive buffer asked for (best effort) on receiving sockets: bursts of frames wait here.
pub const RECV_BUFFER: usize = 8 << 20;
/// Frames handed to one `sendmmsg(2)` call at most.
pub const MAX_BATCH: usize = 1024;

/// An `AF_PACKET` raw socket bound to one interface.
#[derive(Debug)]
pub struct RawSocket {
    sock: Socket,
    ifindex: i32,
    mac: [u8; 6],
}

/// One received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Bytes written to the buffer (a frame longer than the buffer is cut).
    pub len: usize,
    /// The frame is one this host sent (`PACKET_OUTGOING`), looped back by the kernel.
    pub outgoing: bool,
}

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    // Shorter than IFNAMSIZ, so it fits `ifr_name` with its terminating NUL.
    crate::iface::check_name(name)?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut r: libc::ifreq = unsafe { zeroed() };
    for (d, s) in r.ifr_name.iter_mut().zip(name.as_bytes()) {
        *d = *s as libc::c_char;
    }
    Ok(r)
}

/// The MAC address and index of interface `name` (in the calling thread's network namespace).
pub fn iface_mac_index(name: &str) -> io::Result<([u8; 6], i32)> {
    // SAFETY: plain socket/ioctl calls on structures we own; the fd is closed by OwnedFd.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return Err(last_err());
        }
        let s = OwnedFd::from_raw_fd(s);
        let mut r = ifreq(name)?;
        if libc::ioctl(s.as_raw_fd(), libc::SIOCGIFHWADDR, &mut r) < 0 {
            let e = last_err();
            return Err(io::Error::new(e.kind(), format!("interface {name}: {e}")));
        }
        let mut mac = [0u8; 6];
        for (m, b) in mac.iter_mut().zip(r.ifr_ifru.ifru_hwaddr.sa_data.iter()) {
            *m = *b as u8;
        }
        let mut r = ifreq(name)?;
        if libc::ioctl(s.as_raw_fd(), libc::SIOCGIFINDEX, &mut r) < 0 {
            return Err(last_err());
        }
        Ok((mac, r.ifr_ifru.ifru_ifindex))
    }
}

fn set_int_opt(fd: i32, level: i32, name: i32, v: libc::c_int) -> io::Result<()> {
    // SAFETY: setsockopt with a c_int value we own.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const libc::c_int as *const libc::c_void,
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(last_err())
    } else {
        Ok(())
    }
}

impl RawSocket {
    /// `protocol`: the EtherType received in host order, 0 for none (send only).
    fn bind(iface: &str, protocol: u16) -> io::Result<RawSocket> {
        let (mac, ifindex) = iface_mac_index(iface)?;
        let proto = protocol.to_be();
        let sock = Socket::new(
            Domain::PACKET,
            Type::RAW,
            Some(Protocol::from(i32::from(proto))),
        )
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("AF_PACKET socket (needs CAP_NET_RAW): {e}"),
            )
        })?;
        // SAFETY: sockaddr_ll is plain old data (all-zero is valid) and fits in
        // sockaddr_storage; the length given is sockaddr_ll's.
        let addr = unsafe {
            let mut storage: libc::sockaddr_storage = zeroed();
            let sll = &mut *(&mut storage as *mut libc::sockaddr_storage as *mut libc::sockaddr_ll);
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = proto;
            sll.sll_ifindex = ifindex;
            SockAddr::new(storage, size_of::<libc::sockaddr_ll>() as libc::socklen_t)
        };
        sock.bind(&addr)?;
        Ok(RawSocket { sock, ifindex, mac })
    }

    /// A socket that only sends, skipping the qdisc (frames go straight to the driver, e.g.
    /// `veth_xmit`; best effort).
    pub fn open_send_only(iface: &str) -> io::Result<RawSocket> {
        let s = RawSocket::bind(iface, 0)?;
        // An older kernel without the option still sends, through the qdisc.
        let _ = set_int_opt(
            s.sock.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            1,
        );
        Ok(s)
    }

    /// A socket that sends and receives the frames of `ethertype` (e.g.
    /// [`crate::ethernet::ETHERTYPE_IPV4`]), with a [`RECV_BUFFER`] receive buffer (best effort:
    /// forcing it needs CAP_NET_ADMIN).
    pub fn open(iface: &str, ethertype: u16) -> io::Result<RawSocket> {
        let s = RawSocket::bind(iface, ethertype)?;
        let _ = set_int_opt(
            s.sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            RECV_BUFFER as libc::c_int,
        );
        Ok(s)
    }

    /// The interface's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The interface index.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// Send one whole frame.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        self.sock.send(frame).map(|_| ())
    }

    /// Wait at most `timeout` for one frame and receive it into `buf`; `Ok(None)` on timeout (a
    /// zero timeout polls).
    pub fn recv(&self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<Received>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut pfd = libc::pollfd {
                fd: self.sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            // SAFETY: one pollfd we own.
            let r = unsafe { libc::poll(&mut pfd, 1, ms) };
            if r < 0 {
                let e = last_err();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if r == 0 {
                return Ok(None);
            }
            // SAFETY: recvfrom into the caller's buffer (its length given) and a sockaddr_ll we
            // own (its length given).
            let (n, pkttype) = unsafe {
                let mut sll: libc::sockaddr_ll = zeroed();
                let mut sl = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
                let n = libc::recvfrom(
                    self.sock.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    &mut sll as *mut libc::sockaddr_ll as *mut libc::sockaddr,
                    &mut sl,
                );
                (n, sll.sll_pkttype)
            };
            if n < 0 {
                let e = last_err();
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) {
                    continue;
                }
                return Err(e);
            }
            return Ok(Some(Received {
                len: n as usize,
                outgoing: pkttype == libc::PACKET_OUTGOING,
            }));
        }
    }

    /// Send `frames` cyclically, up to `batch` (at most [`MAX_BATCH`]) per `sendmmsg` call,
    /// until `limit` frames were accepted (the last call is shortened) or `stop()` returns true
    /// (checked before every call). Returns the frames the kernel accepted. A full queue
    /// (`ENOBUFS`, `EAGAIN`) or a signal is not an error: the call is retried. `InvalidInput`
    /// for no frames or a zero batch.
    pub fn send_cyclic(
        &self,
        frames: &[Vec<u8>],
        batch: usize,
        limit: u64,
        mut stop: impl FnMut() -> bool,
    ) -> io::Result<u64> {
        if frames.is_empty() || batch == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "send_cyclic: no frames or a zero batch",
            ));
        }
        let n = batch.min(MAX_BATCH);
        // The bound interface is the destination: no address per frame.
        let mut sender = crate::mmsg::Sender::new(None);
        let mut next = 0usize;
        let mut sent = 0u64;
        while sent < limit && !stop() {
            let k = (n as u64).min(limit - sent) as usize;
            let start = next;
            next = (next + k) % frames.len();
            // Rotate through the frames so each call sends different ones.
            let batch = (0..k).map(|i| frames[(start + i) % frames.len()].as_slice());
            let s = sender.send(self.sock.as_raw_fd(), batch);
            sent += s.datagrams;
            // A queue that stays full is back-pressure, not an error: go on.
            match s.last_error {
                None | Some(libc::ENOBUFS) | Some(libc::EAGAIN) => {}
                Some(errno) => return Err(io::Error::from_raw_os_error(errno)),
            }
        }
        Ok(sent)
    }
}

/// Bytes of one ring block (a multiple of the page size; whole frames per block).
pub const TX_RING_BLOCK: usize = 1 << 16;
/// Slots a [`TxRing`] has at least (more when the frames set is larger).
pub const TX_RING_MIN_SLOTS: usize = 2048;
/// Slots a [`TxRing`] has at most.
pub const TX_RING_MAX_SLOTS: usize = 1 << 16;
/// Slots handed to the kernel per `send(2)` kick at most.
pub const TX_RING_KICK: usize = 256;
/// How long [`TxRing::send_cyclic`] waits at the end for the kernel to finish the frames it
/// was handed.
pub const TX_RING_DRAIN: Duration = Duration::from_secs(2);
/// Where a frame's bytes start in its slot: TPACKET_V2's header, aligned
/// (`TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)`, the kernel's default TX data offset).
const TX_DATA_OFFSET: usize = libc::TPACKET2_HDRLEN - size_of::<libc::sockaddr_ll>();

/// What [`TxRing::send_cyclic`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxStats {
    /// Frames the kernel transmitted (handed to the driver).
    pub sent: u64,
    /// Frames the kernel refused as malformed (`TP_STATUS_WRONG_FORMAT`); not in `sent`.
    pub wrong_format: u64,
    /// `send(2)` calls that asked the kernel to transmit.
    pub kicks: u64,
    /// Times the ring was full (every slot still owned by the kernel) and the thread yielded.
    pub full: u64,
}

/// A `PACKET_MMAP` transmit ring (`PACKET_TX_RING`, `TPACKET_V2`) on a send-only `AF_PACKET`
/// socket bound to one interface, qdisc bypassed: the frames are written into the shared ring
/// once, and sending is flipping slot statuses and one `send(2)` per up to [`TX_RING_KICK`]
/// frames, with no per-frame copy from userspace and no per-frame system call. One ring per
/// thread (several threads each open their own: the kernel walks each ring from its own head).
#[derive(Debug)]
pub struct TxRing {
    sock: RawSocket,
    map: *mut u8,
    map_len: usize,
    frame_size: usize,
    slots: usize,
    /// The frames, in the order they are sent (slot `s` carries frame `s % frames.len()` when
    /// `prebuilt`; otherwise each slot is rewritten before it is sent).
    frames: Vec<Vec<u8>>,
    prebuilt: bool,
    /// The next slot to fill (the kernel's own head follows it).
    head: usize,
    /// Frames queued so far (the next frame to send is `frames[next % frames.len()]`).
    next: u64,
}

// SAFETY: the mapping is owned by the ring (unmapped on drop) and only touched through
// `&mut self`; moving the ring to another thread moves that ownership.
unsafe impl Send for TxRing {}

impl TxRing {
    /// A ring on `iface` carrying `frames` (each at most the interface's MTU plus the Ethernet
    /// header; at least one). `InvalidInput` for no frames, an empty frame or one too long for a
    /// ring slot.
    pub fn open(iface: &str, frames: Vec<Vec<u8>>) -> io::Result<TxRing> {
        let bad = |m: String| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
        if frames.is_empty() {
            return bad("tx ring: no frames".into());
        }
        let longest = frames.iter().map(Vec::len).max().unwrap_or(0);
        if frames.iter().any(Vec::is_empty) {
            return bad("tx ring: an empty frame".into());
        }
        // A slot holds the header and the frame, a power of two so whole slots fill a block.
        let frame_size = (TX_DATA_OFFSET + longest).next_power_of_two().max(128);
        if frame_size > TX_RING_BLOCK {
            return bad(format!(
                "tx ring: a {longest}-byte frame does not fit a {TX_RING_BLOCK}-byte block"
            ));
        }
        let per_block = TX_RING_BLOCK / frame_size;
        let (slots, prebuilt) = ring_slots(frames.len(), per_block);
        let sock = RawSocket::bind(iface, 0)?;
        let fd = sock.sock.as_raw_fd();
        set_int_opt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            libc::tpacket_versions::TPACKET_V2 as libc::c_int,
        )?;
        // As for the sendmmsg sender: straight to the driver when the kernel allows it.
        let _ = set_int_opt(fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1);
        // Frames in flight are charged to the send buffer: room for the whole ring, so the
        // kernel does not refuse a kick while slots are free (best effort: forcing needs
        // CAP_NET_ADMIN).
        let _ = set_int_opt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            (slots * frame_size * 2).min(i32::MAX as usize / 2) as libc::c_int,
        );
        let req = libc::tpacket_req {
            tp_block_size: TX_RING_BLOCK as libc::c_uint,
            tp_block_nr: (slots / per_block) as libc::c_uint,
            tp_frame_size: frame_size as libc::c_uint,
            tp_frame_nr: slots as libc::c_uint,
        };
        // SAFETY: setsockopt with a tpacket_req we own, its size given.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_PACKET,
                libc::PACKET_TX_RING,
                &req as *const libc::tpacket_req as *const libc::c_void,
                size_of::<libc::tpacket_req>() as libc::socklen_t,
            )
        };
        if r < 0 {
            let e = last_err();
            return Err(io::Error::new(e.kind(), format!("PACKET_TX_RING: {e}")));
        }
        let map_len = slots * frame_size;
        // SAFETY: maps the ring the kernel just allocated for this socket (its whole length);
        // unmapped on drop.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED,
                fd,
                0,
            )
        };
        let map = if map == libc::MAP_FAILED {
            // MAP_LOCKED needs RLIMIT_MEMLOCK room; the ring works unlocked too.
            // SAFETY: as above.
            let m = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            };
            if m == libc::MAP_FAILED {
                let e = last_err();
                return Err(io::Error::new(
                    e.kind(),
                    format!("mmap of the tx ring: {e}"),
                ));
            }
            m
        } else {
            map
        };
        let mut ring = TxRing {
            sock,
            map: map as *mut u8,
            map_len,
            frame_size,
            slots,
            frames,
            prebuilt,
            head: 0,
            next: 0,
        };
        if ring.prebuilt {
            for s in 0..ring.slots {
                ring.write_slot(s, s % ring.frames.len());
            }
        }
        Ok(ring)
    }

    /// Slots in the ring.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Whether every slot keeps the frame written at set-up (the ring's slots are a multiple of
    /// the frames); otherwise each slot is rewritten before it is sent.
    pub fn prebuilt(&self) -> bool {
        self.prebuilt
    }

    /// The interface's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.sock.mac
    }

    fn header(&self, slot: usize) -> *mut libc::tpacket2_hdr {
        debug_assert!(slot < self.slots);
        // SAFETY: slot < slots, so the slot lies inside the mapping.
        unsafe { self.map.add(slot * self.frame_size) as *mut libc::tpacket2_hdr }
    }

    /// The status word of `slot`, shared with the kernel.
    fn status(&self, slot: usize) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: tp_status is the first, 4-byte aligned u32 of the slot's header, which lives
        // as long as the mapping (as long as self); the kernel writes it concurrently, hence
        // atomic access.
        unsafe { &*(self.header(slot) as *const std::sync::atomic::AtomicU32) }
    }

    /// Write frame `f` into `slot` (a slot the kernel does not own).
    fn write_slot(&mut self, slot: usize, f: usize) {
        let frame = &self.frames[f];
        let h = self.header(slot);
        // SAFETY: the slot is ours (status AVAILABLE or not yet handed over); the frame fits
        // (frame_size was sized for the longest frame past TX_DATA_OFFSET).
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                (h as *mut u8).add(TX_DATA_OFFSET),
                frame.len(),
            );
            (*h).tp_len = frame.len() as u32;
            (*h).tp_snaplen = frame.len() as u32;
        }
    }

    /// Ask the kernel to transmit every slot marked for sending; `false` when it could not take
    /// them now (a full device queue, a signal): they stay marked and go with the next kick.
    fn kick(&self) -> io::Result<bool> {
        // SAFETY: a zero-length send on our socket: the kernel reads the ring, not a buffer.
        let r = unsafe {
            libc::send(
                self.sock.sock.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = last_err();
            return match e.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(false),
                _ => Err(e),
            };
        }
        Ok(true)
    }

    /// Send the ring's frames cyclically (frame `i` sent is `frames[i % frames.len()]`) until
    /// `limit` frames were handed to the kernel or `stop()` returns true (checked before every
    /// kick), then wait (at most [`TX_RING_DRAIN`]) until the kernel finished them. A full ring
    /// is waited out by yielding the CPU.
    pub fn send_cyclic(
        &mut self,
        limit: u64,
        mut stop: impl FnMut() -> bool,
    ) -> io::Result<TxStats> {
        use std::sync::atomic::Ordering::{Acquire, Release};
        let mut st = TxStats::default();
        let mut queued = 0u64;
        while queued < limit && !stop() {
            let mut q = 0;
            while q < TX_RING_KICK && queued < limit {
                let s = self.status(self.head).load(Acquire);
                if s & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING) != 0 {
                    break; // the kernel still owns this slot
                }
                if s & libc::TP_STATUS_WRONG_FORMAT != 0 {
                    st.wrong_format += 1;
                }
                if !self.prebuilt {
                    let f = (self.next % self.frames.len() as u64) as usize;
                    self.write_slot(self.head, f);
                }
                self.status(self.head)
                    .store(libc::TP_STATUS_SEND_REQUEST, Release);
                self.head = (self.head + 1) % self.slots;
                self.next += 1;
                q += 1;
                queued += 1;
            }
            let waiting = self.status(self.head).load(Acquire);
            if q > 0 || waiting == libc::TP_STATUS_SEND_REQUEST {
                st.kicks += 1;
                self.kick()?;
            } else {
                st.full += 1;
                std::thread::yield_now();
            }
        }
        // The frames handed over but not yet taken, then the ones in flight.
        let deadline = Instant::now() + TX_RING_DRAIN;
        loop {
            let mut pending = false;
            let mut requested = false;
            for s in 0..self.slots {
                let v = self.status(s).load(Acquire);
                requested |= v == libc::TP_STATUS_SEND_REQUEST;
                pending |= v & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING) != 0;
            }
            if !pending || Instant::now() >= deadline {
                break;
            }
            if requested {
                st.kicks += 1;
                self.kick()?;
            } else {
                std::thread::yield_now();
            }
        }
        let mut left = 0u64;
        for s in 0..self.slots {
            let v = self.status(s).load(Acquire);
            if v & libc::TP_STATUS_WRONG_FORMAT != 0 {
                st.wrong_format += 1;
                // Counted once: the slot is free again.
                self.status(s).store(libc::TP_STATUS_AVAILABLE, Release);
            } else if v & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING) != 0 {
                left += 1;
            }
        }
        if left > 0 {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("tx ring: {left} frames still unsent after {TX_RING_DRAIN:?}"),
            ));
        }
        st.sent = queued - st.wrong_format;
        Ok(st)
    }
}

impl Drop for TxRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, its length; nothing refers to it after self.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

/// Slots of a ring for `frames` frames at `per_block` slots per block (a power of two), and
/// whether the frames can stay prebuilt: the slots a multiple of the frames, between
/// [`TX_RING_MIN_SLOTS`] and [`TX_RING_MAX_SLOTS`] when possible.
fn ring_slots(frames: usize, per_block: usize) -> (usize, bool) {
    let round = |n: usize| n.div_ceil(per_block) * per_block;
    // The smallest count that is a multiple of both, the frames and whole blocks.
    let unit = frames / gcd(frames, per_block) * per_block;
    if unit <= TX_RING_MAX_SLOTS {
        let k = TX_RING_MIN_SLOTS.div_ceil(unit).max(1);
        let slots = (unit * k).min(TX_RING_MAX_SLOTS / unit * unit);
        return (slots, true);
    }
    (
        round(frames.clamp(TX_RING_MIN_SLOTS, TX_RING_MAX_SLOTS)),
        false,
    )
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_lookups() {
        let (_, idx) = iface_mac_index("lo").expect("lo exists in every namespace");
        assert!(idx > 0);
        assert_eq!(
            iface_mac_index("").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            iface_mac_index("a-name-far-too-long-for-ifreq")
                .unwrap_err()
                .kind(),
            io::ErrorKind::InvalidInput
        );
        assert!(iface_mac_index("nosuchif0").is_err());
    }

    /// Over loopback: a frame sent on one socket is received on another as an incoming frame
    /// (a socket bound to one EtherType is not shown the outgoing copy), batches arrive whole,
    /// and `recv` times out when nothing is queued.
    #[test]
    fn loopback_send_recv_and_timeout() {
        const ETHERTYPE_TEST: u16 = 0x88b5; // IEEE 802 local experimental EtherType 1
        let rx = match RawSocket::open("lo", ETHERTYPE_TEST) {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                dta_testkit::skip!("AF_PACKET needs CAP_NET_RAW ({e})")
            }
            Err(e) => panic!("{e}"),
        };
        let tx = RawSocket::open_send_only("lo").unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(rx.recv(&mut buf, Duration::ZERO).unwrap(), None);
        let mut f = [0u8; 60];
        f[12..14].copy_from_slice(&ETHERTYPE_TEST.to_be_bytes());
        f[14..18].copy_from_slice(b"dta!");
        tx.send(&f).unwrap();
        let r = rx.recv(&mut buf, Duration::from_secs(10)).unwrap().unwrap();
        assert_eq!(r.len, 60);
        assert!(!r.outgoing);
        assert_eq!(&buf[14..18], b"dta!");
        let frames = vec![f.to_vec(); 3];
        assert_eq!(tx.send_cyclic(&frames, 2, 5, || false).unwrap(), 5);
        assert_eq!(tx.send_cyclic(&frames, 2, 5, || true).unwrap(), 0);
        assert_eq!(
            tx.send_cyclic(&[], 2, 5, || false).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        // Each of the 5 within 10 s (a loaded machine can defer loopback delivery to
        // ksoftirqd), then no more.
        for i in 0..5 {
            let r = rx
                .recv(&mut buf, Duration::from_secs(10))
                .unwrap()
                .unwrap_or_else(|| panic!("frame {i} did not arrive"));
            assert_eq!((r.len, r.outgoing), (60, false));
        }
        assert_eq!(rx.recv(&mut buf, Duration::from_millis(200)).unwrap(), None);
    }

    #[test]
    fn ring_sizes() {
        // 4096 frames at 128 slots per block: one frame per slot, prebuilt.
        assert_eq!(ring_slots(4096, 128), (4096, true));
        // Few frames: repeated up to the minimum, a multiple of the frames and of the blocks.
        let (s, pre) = ring_slots(3, 128);
        assert!(
            pre && s >= TX_RING_MIN_SLOTS && s % 3 == 0 && s % 128 == 0,
            "{s}"
        );
        assert_eq!(ring_slots(1, 32), (TX_RING_MIN_SLOTS, true));
        // A count sharing nothing with the block: rewritten per send, whole blocks.
        let (s, pre) = ring_slots(65_521, 128);
        assert!(!pre && s % 128 == 0 && s <= TX_RING_MAX_SLOTS, "{s}");
    }

    /// Over loopback: frames sent through the TX ring arrive whole and in the cyclic order,
    /// for a prebuilt ring and for one whose slots are rewritten; bad input is refused.
    #[test]
    fn tx_ring_loopback_order_and_contents() {
        const ETHERTYPE_TEST: u16 = 0x88b6; // IEEE 802 local experimental EtherType 2
        let rx = match RawSocket::open("lo", ETHERTYPE_TEST) {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                dta_testkit::skip!("AF_PACKET needs CAP_NET_RAW ({e})")
            }
            Err(e) => panic!("{e}"),
        };
        let frame = |i: u32, len: usize| {
            let mut f = vec![0u8; len];
            f[12..14].copy_from_slice(&ETHERTYPE_TEST.to_be_bytes());
            f[14..18].copy_from_slice(&i.to_be_bytes());
            f[len - 1] = i as u8 ^ 0x5a;
            f
        };
        assert_eq!(
            TxRing::open("lo", vec![]).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            TxRing::open("lo", vec![vec![]]).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        // 3 frames of different lengths: the ring repeats them and stays prebuilt.
        let frames: Vec<Vec<u8>> = (0..3).map(|i| frame(i, 60 + 40 * i as usize)).collect();
        let mut ring = TxRing::open("lo", frames.clone()).unwrap();
        assert!(ring.prebuilt() && ring.slots() % 3 == 0);
        let st = ring.send_cyclic(7, || false).unwrap();
        assert_eq!((st.sent, st.wrong_format), (7, 0));
        assert_eq!(ring.send_cyclic(5, || true).unwrap().sent, 0);
        // The next run continues the cycle where the last one stopped.
        assert_eq!(ring.send_cyclic(2, || false).unwrap().sent, 2);
        let mut buf = [0u8; 256];
        for i in 0..9u32 {
            let r = rx
                .recv(&mut buf, Duration::from_secs(10))
                .unwrap()
                .unwrap_or_else(|| panic!("frame {i} did not arrive"));
            assert!(!r.outgoing);
            assert_eq!(&buf[..r.len], &frames[(i % 3) as usize][..], "frame {i}");
        }
        assert_eq!(rx.recv(&mut buf, Duration::from_millis(100)).unwrap(), None);
        // A frame count (prime) no ring size is a multiple of: each slot is rewritten before it
        // is sent, and the order is still the frames'.
        let many: Vec<Vec<u8>> = (0..65_521).map(|i| frame(i, 60)).collect();
        let mut ring = TxRing::open("lo", many.clone()).unwrap();
        assert!(!ring.prebuilt());
        assert_eq!(ring.send_cyclic(4, || false).unwrap().sent, 4);
        for (i, want) in many.iter().take(4).enumerate() {
            let r = rx.recv(&mut buf, Duration::from_secs(10)).unwrap().unwrap();
            assert_eq!(&buf[..r.len], &want[..], "frame {i}");
        }
    }
}
