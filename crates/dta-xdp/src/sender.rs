//! A fast raw sender for benchmarks (issue 4, benchmark 4): prebuilt Ethernet/IPv4/UDP frames
//! sent on an `AF_PACKET` socket bound to one interface, many frames per `sendmmsg(2)` call, so
//! the sender bypasses the IP/UDP stack and loads the receiving end as hard as one core can.

use std::io;
use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Ethernet + IPv4 + UDP header bytes in front of each payload.
pub const FRAME_OVERHEAD: usize = 14 + 20 + 8;

/// One Ethernet/IPv4/UDP frame carrying `payload` (IPv4 header checksum set, UDP checksum 0).
pub fn udp_frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: SocketAddrV4,
    dst: SocketAddrV4,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(FRAME_OVERHEAD + payload.len());
    f.extend(dst_mac);
    f.extend(src_mac);
    f.extend(0x0800u16.to_be_bytes());
    let ip_len = (20 + 8 + payload.len()) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[6] = 0x40; // don't fragment
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.ip().octets());
    ip[16..20].copy_from_slice(&dst.ip().octets());
    let mut sum = 0u32;
    for w in ip.chunks(2) {
        sum += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend(ip);
    f.extend(src.port().to_be_bytes());
    f.extend(dst.port().to_be_bytes());
    f.extend((8 + payload.len() as u16).to_be_bytes());
    f.extend([0, 0]);
    f.extend(payload);
    f
}

/// An `AF_PACKET` raw socket bound to one interface (needs CAP_NET_RAW).
pub struct RawSender {
    fd: OwnedFd,
}

impl RawSender {
    /// Open a raw socket on `iface` (in the calling thread's network namespace).
    pub fn open(iface: &str) -> io::Result<RawSender> {
        let name = std::ffi::CString::new(iface)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name"))?;
        // SAFETY: if_nametoindex reads a NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: plain socket(2); the fd is owned right after.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a fresh, valid fd.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_ll is plain data; zeroed is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = 0; // send only
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: bind with a sockaddr_ll of the right length.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // Skip the qdisc: frames go straight to the driver (veth_xmit).
        let one: libc::c_int = 1;
        // SAFETY: setsockopt with a c_int value.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_QDISC_BYPASS,
                &one as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as u32,
            );
        }
        Ok(RawSender { fd })
    }

    /// Send `frames` cyclically, `batch` per `sendmmsg` call, until `stop()` returns true
    /// (checked after every call). Returns the frames the kernel accepted. `ENOBUFS` (the
    /// receiver's backlog is full) is not an error: the call is retried.
    pub fn blast(
        &self,
        frames: &[Vec<u8>],
        batch: usize,
        stop: impl FnMut() -> bool,
    ) -> io::Result<u64> {
        self.blast_at_most(frames, batch, u64::MAX, stop)
    }

    /// [`Self::blast`], stopping after `limit` frames at most (the last call is shortened).
    pub fn blast_at_most(
        &self,
        frames: &[Vec<u8>],
        batch: usize,
        limit: u64,
        mut stop: impl FnMut() -> bool,
    ) -> io::Result<u64> {
        assert!(!frames.is_empty() && batch > 0);
        let n = batch.min(1024);
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
        let mut msgs: Vec<libc::mmsghdr> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
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
            let r = unsafe { libc::sendmmsg(self.fd.as_raw_fd(), msgs.as_mut_ptr(), k, 0) };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                    _ => return Err(e),
                }
            }
            sent += r as u64;
            // Rotate through the frames so each call sends different reports.
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
    fn frame_has_valid_ipv4_checksum_and_lengths() {
        let f = udp_frame(
            [2, 0, 0, 0, 0, 2],
            [2, 0, 0, 0, 0, 1],
            "10.1.2.3:5000".parse().unwrap(),
            "10.1.2.4:40040".parse().unwrap(),
            &[1, 2, 3, 4, 5],
        );
        assert_eq!(f.len(), FRAME_OVERHEAD + 5);
        assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 1]);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        let ip = &f[14..34];
        let mut sum = 0u32;
        for w in ip.chunks(2) {
            sum += u16::from_be_bytes([w[0], w[1]]) as u32;
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(sum, 0xffff, "IPv4 header checksum");
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 33);
        assert_eq!(u16::from_be_bytes([f[36], f[37]]), 40040);
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 13);
        assert_eq!(&f[42..], &[1, 2, 3, 4, 5]);
    }
}
