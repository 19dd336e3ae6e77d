//! Batched UDP I/O for `dta-impair`: `recvmmsg` into preallocated buffers (with the sources) and
//! `sendmmsg` of a batch to the connected peer, so the forwarder is not the bottleneck of the
//! path it impairs (one system call per batch instead of two per datagram).

use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use crate::impair::MAX_DATAGRAM;

/// Datagrams per system call.
pub const BATCH: usize = 64;
/// Bytes per buffer: the largest UDP payload fits.
const SLOT: usize = MAX_DATAGRAM + 1;

/// `recvmmsg` state: [`BATCH`] buffers and source addresses, allocated once.
pub struct RecvBatch {
    bufs: Vec<u8>,
    iovecs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
    msgs: Vec<libc::mmsghdr>,
    n: usize,
}

// SAFETY: the raw pointers point into the struct's own heap buffers, which move with it.
unsafe impl Send for RecvBatch {}

impl Default for RecvBatch {
    fn default() -> Self {
        RecvBatch::new()
    }
}

impl RecvBatch {
    /// Buffers for [`BATCH`] datagrams.
    pub fn new() -> RecvBatch {
        let mut m = RecvBatch {
            bufs: vec![0; BATCH * SLOT],
            iovecs: Vec::with_capacity(BATCH),
            // SAFETY: all-zero is a valid sockaddr_storage.
            addrs: vec![unsafe { MaybeUninit::zeroed().assume_init() }; BATCH],
            msgs: Vec::with_capacity(BATCH),
            n: 0,
        };
        for i in 0..BATCH {
            m.iovecs.push(libc::iovec {
                iov_base: m.bufs[i * SLOT..].as_mut_ptr().cast(),
                iov_len: SLOT,
            });
        }
        for i in 0..BATCH {
            // SAFETY: all-zero is a valid mmsghdr; the pointers are set below.
            let mut h: libc::mmsghdr = unsafe { MaybeUninit::zeroed().assume_init() };
            h.msg_hdr.msg_iov = &mut m.iovecs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_name = (&mut m.addrs[i] as *mut libc::sockaddr_storage).cast();
            m.msgs.push(h);
        }
        m
    }

    /// Receives what is waiting on the (non-blocking) `socket`, up to [`BATCH`]; returns how
    /// many (0: nothing waiting).
    pub fn recv(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        for h in &mut self.msgs {
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            h.msg_len = 0;
        }
        // SAFETY: every mmsghdr points into buffers owned by self that outlive the call.
        let n = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                self.msgs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        self.n = 0;
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock
                | io::ErrorKind::Interrupted
                // An ICMP error for an earlier send from this socket.
                | io::ErrorKind::ConnectionRefused => Ok(0),
                _ => Err(e),
            };
        }
        self.n = n as usize;
        Ok(self.n)
    }

    /// Datagram `i` of the last [`RecvBatch::recv`] and its source.
    pub fn get(&self, i: usize) -> (&[u8], Option<IpAddr>) {
        assert!(i < self.n, "datagram {i} of {}", self.n);
        let len = (self.msgs[i].msg_len as usize).min(SLOT);
        (&self.bufs[i * SLOT..i * SLOT + len], source(&self.addrs[i]))
    }
}

fn source(ss: &libc::sockaddr_storage) -> Option<IpAddr> {
    match ss.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).into())
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(Ipv6Addr::from(sin6.sin6_addr.s6_addr).into())
        }
        _ => None,
    }
}

/// A batch of datagrams for `sendmmsg` on a connected socket.
pub struct SendBatch {
    bufs: Vec<u8>,
    lens: Vec<usize>,
    iovecs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    /// Datagrams the kernel refused (the peer's ICMP port unreachable, a full queue).
    pub errors: u64,
}

// SAFETY: as for RecvBatch.
unsafe impl Send for SendBatch {}

impl Default for SendBatch {
    fn default() -> Self {
        SendBatch::new()
    }
}

impl SendBatch {
    /// Room for [`BATCH`] datagrams.
    pub fn new() -> SendBatch {
        SendBatch {
            bufs: vec![0; BATCH * SLOT],
            lens: Vec::with_capacity(BATCH),
            iovecs: Vec::with_capacity(BATCH),
            msgs: Vec::with_capacity(BATCH),
            errors: 0,
        }
    }

    /// Queues a copy of `b`, sending the batch first when it is full.
    pub fn push(&mut self, socket: &UdpSocket, b: &[u8]) {
        if self.lens.len() == BATCH {
            self.flush(socket);
        }
        let i = self.lens.len();
        let n = b.len().min(SLOT);
        self.bufs[i * SLOT..i * SLOT + n].copy_from_slice(&b[..n]);
        self.lens.push(n);
    }

    /// Sends what is queued to the socket's connected peer.
    pub fn flush(&mut self, socket: &UdpSocket) {
        let mut sent = 0;
        while sent < self.lens.len() {
            self.iovecs.clear();
            self.msgs.clear();
            for i in sent..self.lens.len() {
                self.iovecs.push(libc::iovec {
                    iov_base: self.bufs[i * SLOT..].as_mut_ptr().cast(),
                    iov_len: self.lens[i],
                });
            }
            for k in 0..self.iovecs.len() {
                // SAFETY: all-zero is a valid mmsghdr (no address: the socket is connected).
                let mut h: libc::mmsghdr = unsafe { MaybeUninit::zeroed().assume_init() };
                h.msg_hdr.msg_iov = &mut self.iovecs[k];
                h.msg_hdr.msg_iovlen = 1;
                self.msgs.push(h);
            }
            // SAFETY: the headers point into self's buffers, alive for the call.
            let r = unsafe {
                libc::sendmmsg(
                    socket.as_raw_fd(),
                    self.msgs.as_mut_ptr(),
                    self.msgs.len() as u32,
                    0,
                )
            };
            if r <= 0 {
                let e = io::Error::last_os_error();
                if r < 0 && e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // The first datagram failed: count it lost, go on with the rest.
                self.errors += 1;
                sent += 1;
            } else {
                sent += r as usize;
            }
        }
        self.lens.clear();
    }
}

/// A UDP socket bound to `local` and connected to `peer`, non-blocking.
pub fn connected(local: SocketAddr, peer: SocketAddr) -> io::Result<UdpSocket> {
    let s = UdpSocket::bind(local)?;
    s.connect(peer)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_goes_out_and_comes_back_in_order_with_its_source() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        let tx = connected("127.0.0.1:0".parse().unwrap(), rx.local_addr().unwrap()).unwrap();
        let mut out = SendBatch::new();
        for i in 0..(BATCH + 5) as u32 {
            out.push(&tx, &i.to_be_bytes());
        }
        out.flush(&tx);
        assert_eq!(out.errors, 0);
        let mut got = vec![];
        let mut batch = RecvBatch::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < BATCH + 5 && std::time::Instant::now() < deadline {
            let n = batch.recv(&rx).unwrap();
            for i in 0..n {
                let (b, src) = batch.get(i);
                assert_eq!(src, Some(tx.local_addr().unwrap().ip()));
                got.push(u32::from_be_bytes(b.try_into().unwrap()));
            }
        }
        assert_eq!(got, (0..(BATCH + 5) as u32).collect::<Vec<_>>());
    }
}
