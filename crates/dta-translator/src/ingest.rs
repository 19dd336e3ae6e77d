//! The UDP ingest loop: batched `recvmmsg` into preallocated buffers, one `Translator` call per
//! datagram, NACKs sent back, timers run when the socket is idle. [`run_threads`] runs one such
//! loop per thread, each on its own `SO_REUSEPORT` socket of the same port ([`crate::shard`]).

use std::io;
use std::mem::MaybeUninit;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use crate::engine::Translator;
use crate::sinks::Sinks;

/// Largest datagram accepted; longer ones are truncated by the kernel and rejected by the parser.
pub const MAX_DATAGRAM: usize = 9216;

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
/// would split the traffic between it and us without a word ([`crate::port_owner`]).
pub fn refuse_shared_port(port: u16) -> io::Result<()> {
    if port == 0 {
        return Ok(());
    }
    let users = crate::port_owner::other_udp_users(port)?;
    let Some(u) = users.first() else {
        return Ok(());
    };
    let who = match u.pid {
        Some(pid) => format!("process {pid}"),
        None => format!(
            "a process this user cannot inspect (socket inode {})",
            u.inode
        ),
    };
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
/// the buffer ends up smaller than asked, since that is where bursts are dropped.
fn set_recv_buffer(socket: &Socket, bytes: usize) {
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
}

/// Preallocated `recvmmsg` state for `batch` datagrams.
struct MmsgBuffers {
    bufs: Vec<u8>,
    iovecs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
    msgs: Vec<libc::mmsghdr>,
}

impl MmsgBuffers {
    fn new(batch: usize) -> Self {
        let batch = batch.clamp(1, 1024);
        let mut m = MmsgBuffers {
            bufs: vec![0; batch * MAX_DATAGRAM],
            iovecs: Vec::with_capacity(batch),
            // SAFETY: sockaddr_storage and mmsghdr are plain C structs for which all-zero is valid.
            addrs: vec![unsafe { MaybeUninit::zeroed().assume_init() }; batch],
            msgs: Vec::with_capacity(batch),
        };
        for i in 0..batch {
            m.iovecs.push(libc::iovec {
                iov_base: m.bufs[i * MAX_DATAGRAM..].as_mut_ptr().cast(),
                iov_len: MAX_DATAGRAM,
            });
        }
        for i in 0..batch {
            // SAFETY: as above.
            let mut h: libc::mmsghdr = unsafe { MaybeUninit::zeroed().assume_init() };
            h.msg_hdr.msg_iov = &mut m.iovecs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_name = (&mut m.addrs[i] as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            m.msgs.push(h);
        }
        m
    }

    /// Receive up to `batch` datagrams; returns how many (0 on timeout). `flags`:
    /// `MSG_WAITFORONE` in the loop, `MSG_DONTWAIT` when draining.
    fn recv(&mut self, fd: i32, flags: i32) -> io::Result<usize> {
        for h in &mut self.msgs {
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            h.msg_len = 0;
        }
        // SAFETY: every mmsghdr points into buffers owned by self that outlive the call.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.msgs.as_mut_ptr(),
                self.msgs.len() as u32,
                flags,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
                | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        Ok(n as usize)
    }

    fn datagram(&self, i: usize) -> (&[u8], Option<SocketAddr>) {
        let len = self.msgs[i].msg_len as usize;
        let data = &self.bufs[i * MAX_DATAGRAM..i * MAX_DATAGRAM + len.min(MAX_DATAGRAM)];
        (data, sockaddr_to_std(&self.addrs[i]))
    }
}

fn sockaddr_to_std(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let sin: &libc::sockaddr_in = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::new(ip.into(), u16::from_be(sin.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let sin6: &libc::sockaddr_in6 =
                unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::new(ip.into(), u16::from_be(sin6.sin6_port)))
        }
        _ => None,
    }
}

/// Datagrams taken from a socket after `stop` before the final flush (a receive buffer's worth;
/// a flood cannot delay the exit beyond it).
pub const MAX_DRAIN_DATAGRAMS: usize = 65_536;

/// Run the translator on `socket` until `stop` is set, then write out everything it holds.
pub fn run<S: Sinks>(
    translator: &mut Translator<S>,
    socket: &UdpSocket,
    batch: usize,
    stop: &AtomicBool,
) -> io::Result<()> {
    receive(translator, socket, batch, stop)?;
    translator.flush_all();
    Ok(())
}

/// The receive loop proper, until `stop`.
fn receive<S: Sinks>(
    translator: &mut Translator<S>,
    socket: &UdpSocket,
    batch: usize,
    stop: &AtomicBool,
) -> io::Result<()> {
    let mut m = MmsgBuffers::new(batch);
    let fd = socket.as_raw_fd();
    let unknown: SocketAddr = "0.0.0.0:0".parse().unwrap();
    while !stop.load(Ordering::Relaxed) {
        let n = m.recv(fd, libc::MSG_WAITFORONE)?;
        let now = Instant::now();
        // The spill goes first, while the budget allows: it is older than this batch.
        translator.reinject(now);
        for i in 0..n {
            let (data, src) = m.datagram(i);
            translator.handle_datagram(data, src.unwrap_or(unknown), now);
        }
        send_nacks(translator, socket);
        translator.tick(now);
    }
    // Stopping: apply what the kernel already holds for this socket (datagrams that arrived
    // before the signal), bounded so a flood cannot hold the exit.
    let mut drained = 0;
    while drained < MAX_DRAIN_DATAGRAMS {
        let n = m.recv(fd, libc::MSG_DONTWAIT)?;
        if n == 0 {
            break;
        }
        let now = Instant::now();
        for i in 0..n {
            let (data, src) = m.datagram(i);
            translator.handle_datagram(data, src.unwrap_or(unknown), now);
        }
        drained += n;
    }
    // Spilled datagrams are written regardless of the budget, while the other threads still
    // take what this one hands them ([`Translator::drain_spill`]; bounded by the spill's size).
    translator.drain_spill();
    send_nacks(translator, socket);
    Ok(())
}

fn send_nacks<S: Sinks>(translator: &mut Translator<S>, socket: &UdpSocket) {
    for nack in translator.drain_nacks() {
        // A NACK that cannot be sent is not fatal: the reporter's timeout covers it.
        let _ = socket.send_to(nack.bytes(), nack.to);
    }
}

/// Run one translator thread per socket (from [`bind_group`]; the translators made with
/// [`Translator::with_shard`] over one [`crate::Shards`]) until `stop` is set. On the way out
/// every thread keeps applying what the others hand it until all have stopped receiving, then
/// writes out everything it holds. An error on one thread stops them all.
pub fn run_threads<S: Sinks + Send>(
    translators: &mut [Translator<S>],
    sockets: &[UdpSocket],
    batch: usize,
    stop: &AtomicBool,
) -> io::Result<()> {
    assert_eq!(
        translators.len(),
        sockets.len(),
        "one socket per translator"
    );
    let stopped = AtomicUsize::new(0);
    let threads = translators.len();
    let results: Vec<io::Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = translators
            .iter_mut()
            .zip(sockets)
            .enumerate()
            .map(|(i, (t, socket))| {
                let stopped = &stopped;
                std::thread::Builder::new()
                    .name(format!("dta-translator-{i}"))
                    .spawn_scoped(s, move || {
                        let r = receive(t, socket, batch, stop);
                        if r.is_err() {
                            stop.store(true, Ordering::Relaxed);
                        }
                        stopped.fetch_add(1, Ordering::AcqRel);
                        // Others may still hand this thread reports until they stop too.
                        while stopped.load(Ordering::Acquire) < threads {
                            let now = Instant::now();
                            if t.drain_inbox(now) == 0 {
                                std::thread::sleep(Duration::from_micros(200));
                            }
                            send_nacks(t, socket);
                        }
                        t.flush_all();
                        send_nacks(t, socket);
                        r
                    })
                    .expect("spawn translator thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("translator panicked")))
            })
            .collect()
    });
    results.into_iter().collect()
}

/// Run for at most `duration` (tests and benchmarks).
pub fn run_for<S: Sinks>(
    translator: &mut Translator<S>,
    socket: &UdpSocket,
    batch: usize,
    duration: Duration,
) -> io::Result<()> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(duration);
            stop.store(true, Ordering::Relaxed);
        });
        run(translator, socket, batch, &stop)
    })
}
