//! Batched datagram I/O: `recvmmsg(2)` into preallocated buffers with the sources
//! ([`RecvBatch`]) and `sendmmsg(2)` of borrowed datagrams ([`Sender`]) or of copies queued
//! in preallocated buffers ([`SendBatch`]). One system call per batch instead of one per
//! datagram. This is the one implementation that every receive loop (translator threads, the
//! INT sink, the impairment forwarder) and every batched sender (pcap replay, the forwarder, the
//! raw-frame load generator) uses. `socket2` has no `recvmmsg`/`sendmmsg`, so it is `libc`.

#![allow(unsafe_code)]

use std::io;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::RawFd;
use std::time::Duration;

use socket2::SockAddr;

/// Datagrams one call takes at most (the kernel's `UIO_MAXIOV`).
pub const MAX_BATCH: usize = 1024;

/// How often a send is retried while the kernel's queue is full (`ENOBUFS`, `EAGAIN`), 50 µs
/// apart, before the datagram it stopped at is counted as an error.
const FULL_RETRIES: u32 = 100;

/// `recvmmsg` headers and source addresses, preallocated, for buffers the caller provides at
/// each call (the classifier receives straight into its pool's buffers).
pub struct RecvHeaders {
    iovecs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
    msgs: Vec<libc::mmsghdr>,
    n: usize,
}

// SAFETY: the raw pointers point into the struct's own heap buffers, which move with it, or at
// caller buffers only during `recv`.
unsafe impl Send for RecvHeaders {}

impl RecvHeaders {
    /// Headers for `batch` datagrams (clamped to 1..=[`MAX_BATCH`]).
    pub fn new(batch: usize) -> RecvHeaders {
        let batch = batch.clamp(1, MAX_BATCH);
        let mut m = RecvHeaders {
            iovecs: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                };
                batch
            ],
            // SAFETY: all-zero is a valid sockaddr_storage.
            addrs: vec![unsafe { MaybeUninit::zeroed().assume_init() }; batch],
            msgs: Vec::with_capacity(batch),
            n: 0,
        };
        for i in 0..batch {
            // SAFETY: all-zero is a valid mmsghdr; the pointers are set here.
            let mut h: libc::mmsghdr = unsafe { MaybeUninit::zeroed().assume_init() };
            h.msg_hdr.msg_iov = &mut m.iovecs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_name = (&mut m.addrs[i] as *mut libc::sockaddr_storage).cast();
            m.msgs.push(h);
        }
        m
    }

    /// Datagrams one [`Self::recv`] takes at most.
    pub fn capacity(&self) -> usize {
        self.msgs.len()
    }

    /// Receive from `fd` into `bufs` (at most [`Self::capacity`] of them, each a pointer and
    /// its length); how many datagrams arrived. `flags`: `MSG_WAITFORONE` in a loop that waits,
    /// `MSG_DONTWAIT` when draining. A timeout, an empty non-blocking socket, a signal
    /// (`EINTR`) and an ICMP error of an earlier send (`ECONNREFUSED`) are 0 datagrams, never
    /// an error.
    ///
    /// # Safety
    /// Each of `bufs` is valid for writes of its length for the duration of the call.
    pub unsafe fn recv(
        &mut self,
        fd: RawFd,
        flags: i32,
        bufs: impl IntoIterator<Item = (*mut u8, usize)>,
    ) -> io::Result<usize> {
        let mut k = 0;
        for (b, (p, len)) in self.iovecs.iter_mut().zip(bufs) {
            *b = libc::iovec {
                iov_base: p.cast(),
                iov_len: len,
            };
            k += 1;
        }
        for h in &mut self.msgs[..k] {
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            h.msg_len = 0;
        }
        self.n = 0;
        if k == 0 {
            return Ok(0);
        }
        // SAFETY: the first k headers point at the caller's buffers (valid by the contract)
        // and at address storage owned by self, all alive for the call.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.msgs.as_mut_ptr(),
                k as u32,
                flags,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
                | io::ErrorKind::Interrupted
                | io::ErrorKind::ConnectionRefused => Ok(0),
                _ => Err(e),
            };
        }
        self.n = n as usize;
        Ok(self.n)
    }

    /// The length of datagram `i` of the last [`Self::recv`] (what the kernel wrote: at most
    /// its buffer's length).
    pub fn len_of(&self, i: usize) -> usize {
        debug_assert!(i < self.n, "datagram {i} of {}", self.n);
        (self.msgs[i].msg_len as usize).min(self.iovecs[i].iov_len)
    }

    /// The source of datagram `i` of the last [`Self::recv`] (`None` for an address family
    /// other than IPv4 and IPv6).
    pub fn source(&self, i: usize) -> Option<SocketAddr> {
        socket_addr(&self.addrs[i])
    }
}

/// Preallocated `recvmmsg` state: `batch` buffers of `slot` bytes and the headers.
pub struct RecvBatch {
    bufs: Vec<u8>,
    slot: usize,
    headers: RecvHeaders,
}

impl RecvBatch {
    /// Buffers for `batch` datagrams (clamped to 1..=[`MAX_BATCH`]) of up to `slot` bytes
    /// each; a longer datagram is cut to `slot` bytes.
    pub fn new(batch: usize, slot: usize) -> RecvBatch {
        let headers = RecvHeaders::new(batch);
        let slot = slot.max(1);
        RecvBatch {
            bufs: vec![0; headers.capacity() * slot],
            slot,
            headers,
        }
    }

    /// Datagrams one [`Self::recv`] takes at most.
    pub fn capacity(&self) -> usize {
        self.headers.capacity()
    }

    /// Receive up to [`Self::capacity`] datagrams from `fd`, as [`RecvHeaders::recv`] does.
    pub fn recv(&mut self, fd: RawFd, flags: i32) -> io::Result<usize> {
        let (slot, base) = (self.slot, self.bufs.as_mut_ptr());
        let n = self.headers.capacity();
        // SAFETY: slot i is bytes [i * slot, (i + 1) * slot) of self.bufs, owned by self and
        // alive for the call.
        unsafe {
            self.headers
                .recv(fd, flags, (0..n).map(|i| (base.add(i * slot), slot)))
        }
    }

    /// Datagram `i` of the last [`Self::recv`] and its source (`None` for an address family
    /// other than IPv4 and IPv6).
    pub fn datagram(&self, i: usize) -> (&[u8], Option<SocketAddr>) {
        let at = i * self.slot;
        (
            &self.bufs[at..at + self.headers.len_of(i)],
            self.headers.source(i),
        )
    }

    /// After a [`Self::recv`] of `n` datagrams: if the batch was partial, sleep `pause` so the
    /// next one gathers in the receive buffer, rather than waking for every few datagrams (a
    /// wake-up costs more than the reports it brings). No pause while the receiver is behind
    /// (full batches), nor when `pause` is zero.
    pub fn gather(&self, n: usize, pause: Duration) {
        if n > 0 && n < self.capacity() && !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }
}

/// The socket address in a `sockaddr_storage` the kernel filled.
pub fn socket_addr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::new(ip.into(), u16::from_be(sin.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::new(ip.into(), u16::from_be(sin6.sin6_port)))
        }
        _ => None,
    }
}

/// What a batched send did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    /// Datagrams the kernel accepted.
    pub datagrams: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Datagrams it refused (counted, then skipped): an error other than a full queue, or a
    /// queue that stayed full.
    pub errors: u64,
    /// The `errno` of the last refusal.
    pub last_error: Option<i32>,
}

/// `sendmmsg` of borrowed datagrams to one destination (or, with none, to the socket's
/// connected peer or bound interface): the headers are kept between calls, the datagrams are
/// not copied.
pub struct Sender {
    to: Option<SockAddr>,
    iovecs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

// SAFETY: the iovecs only point at caller data during `send`; between calls they dangle unused.
unsafe impl Send for Sender {}

impl Sender {
    /// Sends to `to` (`None`: the socket's connected peer, or the interface of a bound packet
    /// socket).
    pub fn new(to: Option<SocketAddr>) -> Sender {
        Sender {
            to: to.map(SockAddr::from),
            iovecs: Vec::new(),
            msgs: Vec::new(),
        }
    }

    /// Send every datagram of `dgrams`, up to [`MAX_BATCH`] per call. A signal is retried; a
    /// full queue is retried briefly; any other refusal counts the datagram it stopped at as an
    /// error and goes on with the next.
    pub fn send<'a>(&mut self, fd: RawFd, dgrams: impl IntoIterator<Item = &'a [u8]>) -> Sent {
        self.iovecs.clear();
        for d in dgrams {
            self.iovecs.push(libc::iovec {
                iov_base: d.as_ptr() as *mut libc::c_void,
                iov_len: d.len(),
            });
        }
        self.msgs.clear();
        for v in self.iovecs.iter_mut() {
            // SAFETY: all-zero is a valid mmsghdr; the pointers are set here.
            let mut h: libc::mmsghdr = unsafe { MaybeUninit::zeroed().assume_init() };
            h.msg_hdr.msg_iov = v;
            h.msg_hdr.msg_iovlen = 1;
            if let Some(to) = &self.to {
                h.msg_hdr.msg_name = to.as_ptr() as *mut libc::c_void;
                h.msg_hdr.msg_namelen = to.len();
            }
            self.msgs.push(h);
        }
        let mut out = Sent::default();
        let (mut done, mut tries) = (0usize, 0u32);
        while done < self.msgs.len() {
            let k = (self.msgs.len() - done).min(MAX_BATCH);
            // SAFETY: the headers point at `iovecs`, the caller's datagrams (borrowed for this
            // call) and the address, all alive for the call; the kernel reads k of them.
            let r = unsafe { libc::sendmmsg(fd, self.msgs[done..].as_mut_ptr(), k as u32, 0) };
            if r > 0 {
                let r = r as usize;
                out.datagrams += r as u64;
                out.bytes += self.iovecs[done..done + r]
                    .iter()
                    .map(|v| v.iov_len as u64)
                    .sum::<u64>();
                done += r;
                tries = 0;
                continue;
            }
            let errno = io::Error::last_os_error().raw_os_error();
            match errno {
                Some(libc::EINTR) => {}
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) if tries < FULL_RETRIES => {
                    tries += 1;
                    std::thread::sleep(Duration::from_micros(50));
                }
                _ => {
                    out.last_error = errno;
                    out.errors += 1;
                    done += 1;
                    tries = 0;
                }
            }
        }
        self.iovecs.clear();
        self.msgs.clear();
        out
    }
}

/// Copies of datagrams queued in preallocated buffers (`batch` of `slot` bytes), sent with
/// one [`Sender`] call when full or flushed.
pub struct SendBatch {
    bufs: Vec<u8>,
    slot: usize,
    lens: Vec<usize>,
    sender: Sender,
    /// What the sends so far did.
    pub sent: Sent,
}

impl SendBatch {
    /// Room for `batch` datagrams (1..=[`MAX_BATCH`]) of up to `slot` bytes, sent to `to`
    /// (`None`: the connected peer).
    pub fn new(batch: usize, slot: usize, to: Option<SocketAddr>) -> SendBatch {
        let batch = batch.clamp(1, MAX_BATCH);
        SendBatch {
            bufs: vec![0; batch * slot.max(1)],
            slot: slot.max(1),
            lens: Vec::with_capacity(batch),
            sender: Sender::new(to),
            sent: Sent::default(),
        }
    }

    /// Datagrams queued.
    pub fn len(&self) -> usize {
        self.lens.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    /// Queue a copy of `b` (cut to the slot), sending the batch on `fd` first when it is full.
    pub fn push(&mut self, fd: RawFd, b: &[u8]) {
        if self.lens.len() * self.slot == self.bufs.len() {
            self.flush(fd);
        }
        let i = self.lens.len();
        let n = b.len().min(self.slot);
        self.bufs[i * self.slot..i * self.slot + n].copy_from_slice(&b[..n]);
        self.lens.push(n);
    }

    /// Send what is queued.
    pub fn flush(&mut self, fd: RawFd) {
        let slot = self.slot;
        let (bufs, lens) = (&self.bufs, &self.lens);
        let s = self.sender.send(
            fd,
            lens.iter()
                .enumerate()
                .map(|(i, &n)| &bufs[i * slot..i * slot + n]),
        );
        self.sent.datagrams += s.datagrams;
        self.sent.bytes += s.bytes;
        self.sent.errors += s.errors;
        self.sent.last_error = s.last_error.or(self.sent.last_error);
        self.lens.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_batch_goes_out_and_comes_back_in_order_with_its_source() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let mut out = SendBatch::new(64, 16, None);
        for i in 0..(64 + 5) as u32 {
            out.push(tx.as_raw_fd(), &i.to_be_bytes());
        }
        out.flush(tx.as_raw_fd());
        assert_eq!(out.sent.datagrams, 69);
        assert_eq!(out.sent.bytes, 69 * 4);
        assert_eq!(out.sent.errors, 0);
        // Borrowed datagrams to an explicit destination.
        let tx2 = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut s = Sender::new(Some(rx.local_addr().unwrap()));
        let extra: Vec<[u8; 4]> = (69..72u32).map(u32::to_be_bytes).collect();
        let sent = s.send(tx2.as_raw_fd(), extra.iter().map(|b| &b[..]));
        assert_eq!(sent.datagrams, 3);
        let mut got = vec![];
        let mut batch = RecvBatch::new(32, 16);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < 72 && std::time::Instant::now() < deadline {
            let n = batch.recv(rx.as_raw_fd(), libc::MSG_DONTWAIT).unwrap();
            for i in 0..n {
                let (b, src) = batch.datagram(i);
                let v = u32::from_be_bytes(b.try_into().unwrap());
                let want = if v < 69 { &tx } else { &tx2 };
                assert_eq!(src, Some(want.local_addr().unwrap()));
                got.push(v);
            }
        }
        assert_eq!(got, (0..72).collect::<Vec<_>>());
    }

    #[test]
    fn a_long_datagram_is_cut_to_the_slot() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(&[7u8; 100], rx.local_addr().unwrap()).unwrap();
        let mut batch = RecvBatch::new(4, 10);
        let n = batch.recv(rx.as_raw_fd(), libc::MSG_WAITFORONE).unwrap();
        assert_eq!(n, 1);
        assert_eq!(batch.datagram(0).0, &[7u8; 10]);
    }
}
