//! The UDP sockets of a receive loop (the translator's threads, its priority sockets, the INT
//! sink's): bound with `SO_REUSEPORT` and a large receive buffer, a port another process holds
//! refused, and what the kernel counts of them (drops at a full buffer, the backlog).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

/// Bind the translator's UDP socket: `SO_REUSEPORT` (so several translator threads can share the
/// port), a large receive buffer, and a short receive timeout so the loop can run its timers.
pub fn bind(addr: SocketAddr, recv_buffer: usize) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    set_recv_buffer(&socket, recv_buffer);
    socket.bind(&addr.into())?;
    let socket: UdpSocket = socket.into();
    socket.set_read_timeout(Some(Duration::from_millis(2)))?;
    Ok(socket)
}

/// Bind `n` sockets to the same address with `SO_REUSEPORT`, one per translator thread. Port 0
/// picks a free port for the first and binds the rest to it.
pub fn bind_group(addr: SocketAddr, n: usize, recv_buffer: usize) -> io::Result<Vec<UdpSocket>> {
    refuse_shared_port(addr.port())?;
    let first = bind(addr, recv_buffer)?;
    let addr = first.local_addr()?;
    let mut v = vec![first];
    for _ in 1..n.max(1) {
        v.push(bind(addr, recv_buffer)?);
    }
    Ok(v)
}

/// Refuse a port another process already has a UDP socket on: with `SO_REUSEPORT` the kernel
/// would split the traffic between it and us without a word ([`dta_net::port_owner`]).
pub fn refuse_shared_port(port: u16) -> io::Result<()> {
    if port == 0 {
        return Ok(());
    }
    let users = dta_net::port_owner::other_udp_users(port)?;
    let Some(u) = users.first() else {
        return Ok(());
    };
    let who = u.describe();
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!(
            "UDP port {port} is already in use by {who}: another translator (or program) would \
             share its traffic; stop it first or choose another port"
        ),
    ))
}

/// Ask for a `bytes` receive buffer. `SO_RCVBUF` is capped by `net.core.rmem_max` (often
/// 208 KiB, a few hundred datagrams); with CAP_NET_ADMIN, `SO_RCVBUFFORCE` is not. Says so when
/// the buffer ends up smaller than asked, since that is where bursts are dropped. Returns the
/// buffer the kernel granted, in bytes (of datagram payload and bookkeeping, as asked).
pub fn set_recv_buffer(socket: &Socket, bytes: usize) -> usize {
    let want = bytes.min(i32::MAX as usize / 2) as libc::c_int;
    // SAFETY: setsockopt with a valid fd and a c_int option value.
    let forced = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&want as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    } == 0;
    if !forced {
        let _ = socket.set_recv_buffer_size(bytes);
    }
    // Linux reports double the requested size (it counts its bookkeeping).
    let got = socket.recv_buffer_size().unwrap_or(0) / 2;
    if got < bytes {
        tracing::warn!(
            "receive buffer is {got} bytes, not the configured {bytes}: raise net.core.rmem_max \
             or run with CAP_NET_ADMIN, or bursts will be dropped by the kernel"
        );
    }
    got
}

/// Datagrams the kernel dropped on `socket` because its receive buffer was full
/// (`SO_MEMINFO`, `SK_MEMINFO_DROPS`): what the translator never saw.
pub fn kernel_drops(socket: &UdpSocket) -> io::Result<u64> {
    Ok(u64::from(
        meminfo(socket.as_raw_fd())?[libc::SK_MEMINFO_DROPS as usize],
    ))
}

/// The fraction of its receive buffer the kernel holds for socket `fd` (`SO_MEMINFO`:
/// `SK_MEMINFO_RMEM_ALLOC` / `SK_MEMINFO_RCVBUF`).
pub(crate) fn backlog(fd: i32) -> io::Result<f64> {
    let info = meminfo(fd)?;
    let rcvbuf = info[libc::SK_MEMINFO_RCVBUF as usize].max(1);
    Ok(f64::from(info[libc::SK_MEMINFO_RMEM_ALLOC as usize]) / f64::from(rcvbuf))
}

/// `getsockopt(SO_MEMINFO)`: the socket's memory counters, indexed by `SK_MEMINFO_*`.
fn meminfo(fd: i32) -> io::Result<[u32; libc::SK_MEMINFO_DROPS as usize + 1]> {
    let mut info = [0u32; libc::SK_MEMINFO_DROPS as usize + 1];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `info`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

/// `SO_MEMINFO` (Linux 4.12), which libc does not export for glibc targets: 55 everywhere but
/// SPARC.
#[cfg(not(target_arch = "sparc64"))]
const SO_MEMINFO: libc::c_int = 55;
#[cfg(target_arch = "sparc64")]
const SO_MEMINFO: libc::c_int = 0x39;
