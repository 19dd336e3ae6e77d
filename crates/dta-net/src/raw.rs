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
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut r: libc::ifreq = unsafe { zeroed() };
    let b = name.as_bytes();
    if b.is_empty() || b.len() >= r.ifr_name.len() || b.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {name:?}"),
        ));
    }
    for (d, s) in r.ifr_name.iter_mut().zip(b) {
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

/// The first IPv4 address of interface `name`.
pub fn iface_ipv4(name: &str) -> io::Result<[u8; 4]> {
    // SAFETY: getifaddrs hands us a list we free with freeifaddrs; we only read through it.
    unsafe {
        let mut ifa: *mut libc::ifaddrs = std::ptr::null_mut();
        if libc::getifaddrs(&mut ifa) != 0 {
            return Err(last_err());
        }
        let mut p = ifa;
        let mut found = None;
        while !p.is_null() {
            let a = &*p;
            if !a.ifa_addr.is_null()
                && i32::from((*a.ifa_addr).sa_family) == libc::AF_INET
                && std::ffi::CStr::from_ptr(a.ifa_name).to_bytes() == name.as_bytes()
            {
                let sin = &*(a.ifa_addr as *const libc::sockaddr_in);
                found = Some(u32::from_be(sin.sin_addr.s_addr).to_be_bytes());
                break;
            }
            p = a.ifa_next;
        }
        libc::freeifaddrs(ifa);
        found.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("interface {name} has no IPv4 address (give one with --ip)"),
            )
        })
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
        let mut iovs: Vec<libc::iovec> = (0..n)
            .map(|i| {
                let f = &frames[i % frames.len()];
                libc::iovec {
                    iov_base: f.as_ptr() as *mut libc::c_void,
                    iov_len: f.len(),
                }
            })
            .collect();
        // SAFETY: mmsghdr is plain data; zeroed is valid.
        let mut msgs: Vec<libc::mmsghdr> = (0..n).map(|_| unsafe { zeroed() }).collect();
        let mut next = n % frames.len();
        let mut sent = 0u64;
        while sent < limit && !stop() {
            for (m, iov) in msgs.iter_mut().zip(iovs.iter_mut()) {
                m.msg_hdr.msg_iov = iov;
                m.msg_hdr.msg_iovlen = 1;
            }
            let k = (n as u64).min(limit - sent) as u32;
            // SAFETY: msgs points at n >= k headers, each with one iovec over a frame in
            // `frames`, which outlives the call.
            let r = unsafe { libc::sendmmsg(self.sock.as_raw_fd(), msgs.as_mut_ptr(), k, 0) };
            if r < 0 {
                let e = last_err();
                match e.raw_os_error() {
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                    _ => return Err(e),
                }
            }
            sent += r as u64;
            // Rotate through the frames so each call sends different ones.
            if frames.len() > n {
                for iov in iovs.iter_mut() {
                    let f = &frames[next];
                    iov.iov_base = f.as_ptr() as *mut libc::c_void;
                    iov.iov_len = f.len();
                    next = (next + 1) % frames.len();
                }
            }
        }
        Ok(sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_lookups() {
        let (_, idx) = iface_mac_index("lo").expect("lo exists in every namespace");
        assert!(idx > 0);
        assert_eq!(iface_ipv4("lo").unwrap(), [127, 0, 0, 1]);
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
        let r = rx.recv(&mut buf, Duration::from_secs(2)).unwrap().unwrap();
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
        let mut got = 0;
        while let Some(r) = rx.recv(&mut buf, Duration::from_millis(200)).unwrap() {
            assert_eq!((r.len, r.outgoing), (60, false));
            got += 1;
        }
        assert_eq!(got, 5);
    }
}
