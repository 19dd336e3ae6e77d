//! Kernel-bypass receive (AF_XDP, docs/xdp.md "AF_XDP receive"): the datagrams to one UDP port
//! are redirected by an XDP program (`bpf/xsk_redirect.bpf.c`) from the interface's receive
//! queues into AF_XDP sockets, one per queue, and read in place from their UMEM: no socket
//! buffer, no copy into a `recvmmsg` buffer, no system call per batch while traffic flows.
//!
//! * [`XskProgram`]: the redirect program, attached to the interface. It checks the source
//!   against the node's allow-list before it reads anything else (the same LPM trie as the XDP
//!   translator, `bpf/allow.h`), drops and counts what the list excludes, and redirects the
//!   rest to the socket of the frame's receive queue (a queue without one passes the frame up
//!   the stack, so the ordinary UDP socket still receives it).
//! * [`XskReceiver`]: one AF_XDP socket bound to one queue, its UMEM (frames of
//!   [`FRAME_SIZE`] bytes), fill ring and receive ring ([`xdpilone`]: a small, `no_std`,
//!   dependency-free implementation of the rings). Zero-copy where the driver supports it, else
//!   copy mode, chosen at bind. A frame is parsed in place (`dta_net::udp_datagram`) and handed
//!   on as the payload and its source; a frame that is not a UDP datagram to the port is
//!   counted by reason and given back to the kernel.
//!
//! [`XskReceiver`] implements [`dta_translator::ingest::DatagramSource`], so the translator's
//! and the INT sink's receive loops take it where they take a socket.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use aya::maps::{Array, PerCpuArray, XskMap};
use aya::programs::{Xdp, XdpFlags};
use aya::Ebpf;
use dta_translator::ingest::BatchFn;
use dta_wire::prefix::AllowList;
use xdpilone::{DeviceQueue, IfInfo, RingRx, Socket, SocketConfig, Umem, UmemConfig, User};

use crate::{AttachMode, XdpError};

pub(crate) static PROGRAM: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xsk_redirect.o"));

/// Receive queues the redirect program serves (`MAX_QUEUES` in the C source).
pub const MAX_QUEUES: u32 = 64;
/// Bytes of a UMEM frame: a power of two holding a 1500-byte MTU's frame and the headroom.
pub const FRAME_SIZE: u32 = 2048;
/// Frames of one socket's UMEM at the least (8 MiB); the fill and receive rings hold as many.
pub const FRAMES: u32 = 4096;
/// Most frames of one socket's UMEM (128 MiB): at 1 M datagrams/s, 65 ms of arrivals held while
/// its thread waits for a CPU.
pub const MAX_FRAMES: u32 = 65536;
/// The UMEM memory a service's sockets share ([`frames_for`]): 128 MiB, the memory the socket
/// path's kernel grants one INT sink socket (a 64 MiB `SO_RCVBUF` is doubled for bookkeeping,
/// socket(7)), so a burst the socket path holds, AF_XDP holds too.
pub const UMEM_BUDGET: u64 = 128 << 20;

/// Frames per socket for `sockets` sockets sharing [`UMEM_BUDGET`]: a power of two from
/// [`FRAMES`] to [`MAX_FRAMES`].
pub fn frames_for(sockets: usize) -> u32 {
    let share = UMEM_BUDGET / FRAME_SIZE as u64 / sockets.max(1) as u64;
    let pow2 = if share == 0 {
        1
    } else {
        1u64 << (63 - share.leading_zeros())
    };
    pow2.clamp(FRAMES as u64, MAX_FRAMES as u64) as u32
}
/// Most descriptors taken from the receive ring at once.
pub const MAX_BATCH: usize = 256;

/// Packets one busy poll of the driver may process (`SO_BUSY_POLL_BUDGET`): the kernel's NAPI
/// weight, and the receive loop's batch ([`MAX_BATCH`] at most).
pub const BUSY_POLL_BUDGET: u16 = 64;
/// The longest busy poll asked (`SO_BUSY_POLL`, microseconds): one receive wait's worth.
pub const MAX_BUSY_POLL_US: u32 = 10_000;

/// The program's counters (per CPU, summed); the order of `enum` in the C source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct XskProgramStats {
    /// Frames the program saw.
    pub packets: u64,
    /// Datagrams to the port handed to a queue's socket.
    pub redirected: u64,
    /// Frames passed up the stack: not a UDP datagram to the port.
    pub pass_other: u64,
    /// Datagrams from a source outside the allow-list: dropped unparsed.
    pub source_not_allowed: u64,
    /// Datagrams to the port on a queue without a socket: passed up the stack.
    pub pass_no_socket: u64,
    /// UDP over IPv4 with options: passed up the stack (the socket receives it).
    pub pass_ip_options: u64,
    /// IPv4 fragments: passed up the stack, which reassembles them.
    pub pass_fragment: u64,
    /// The program's run time and runs (`bpf_prog_info`; 0 unless the kernel's run-time
    /// statistics are on, [`crate::enable_run_time_stats`]): its CPU cost.
    pub run_time_ns: u64,
    pub run_count: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct XskCfg {
    port: u32,
}
// SAFETY: repr(C), one u32.
unsafe impl aya::Pod for XskCfg {}

/// The redirect program, loaded and attached; detached when dropped.
pub struct XskProgram {
    ebpf: Ebpf,
    mode: AttachMode,
}

impl XskProgram {
    /// Load the program for datagrams to UDP `port` from the sources of `allow`, and attach it
    /// to `iface` (native mode, else generic unless `native_only`).
    pub fn load_attach(
        iface: &str,
        port: u16,
        allow: &AllowList,
        generic: bool,
    ) -> Result<XskProgram, XdpError> {
        if PROGRAM.is_empty() {
            return Err(XdpError::NotBuilt);
        }
        let mut ebpf = Ebpf::load(PROGRAM)?;
        crate::allow::install(&mut ebpf, allow)?;
        {
            let mut cfg: Array<_, XskCfg> = Array::try_from(
                ebpf.map_mut("xsk_cfg")
                    .ok_or_else(|| XdpError::MissingMap("xsk_cfg".into()))?,
            )?;
            cfg.set(0, XskCfg { port: port.into() }, 0)?;
        }
        let prog: &mut Xdp = ebpf
            .program_mut("xsk_redirect")
            .ok_or_else(|| XdpError::MissingMap("program xsk_redirect".into()))?
            .try_into()?;
        prog.load()?;
        let mode = if generic {
            prog.attach(iface, XdpFlags::SKB_MODE)?;
            AttachMode::Generic
        } else {
            match prog.attach(iface, XdpFlags::DRV_MODE) {
                Ok(_) => AttachMode::Native,
                Err(_) => {
                    prog.attach(iface, XdpFlags::SKB_MODE)?;
                    AttachMode::Generic
                }
            }
        };
        Ok(XskProgram { ebpf, mode })
    }

    /// How the program is attached.
    pub fn mode(&self) -> AttachMode {
        self.mode
    }

    /// Redirect the frames of receive queue `queue` to the socket `fd`.
    pub fn register(&mut self, queue: u32, fd: RawFd) -> Result<(), XdpError> {
        let mut m: XskMap<_> = XskMap::try_from(
            self.ebpf
                .map_mut("xsks")
                .ok_or_else(|| XdpError::MissingMap("xsks".into()))?,
        )?;
        m.set(queue, fd, 0)?;
        Ok(())
    }

    /// The program's counters, summed over CPUs.
    pub fn stats(&self) -> Result<XskProgramStats, XdpError> {
        let arr: PerCpuArray<_, u64> = PerCpuArray::try_from(
            self.ebpf
                .map("xsk_stats")
                .ok_or_else(|| XdpError::MissingMap("xsk_stats".into()))?,
        )?;
        let c = |i: u32| -> Result<u64, XdpError> { Ok(arr.get(&i, 0)?.iter().sum()) };
        let prog: &Xdp = self
            .ebpf
            .program("xsk_redirect")
            .ok_or_else(|| XdpError::MissingMap("program xsk_redirect".into()))?
            .try_into()?;
        let info = prog.info()?;
        Ok(XskProgramStats {
            packets: c(0)?,
            redirected: c(1)?,
            pass_other: c(2)?,
            source_not_allowed: c(3)?,
            pass_no_socket: c(4)?,
            pass_ip_options: c(5)?,
            pass_fragment: c(6)?,
            run_time_ns: info.run_time().as_nanos() as u64,
            run_count: info.run_count(),
        })
    }
}

/// The receive queues of `iface` (`/sys/class/net/IFACE/queues/rx-*`).
pub fn rx_queues(iface: &str) -> std::io::Result<u32> {
    let dir = std::fs::read_dir(format!("/sys/class/net/{iface}/queues"))?;
    Ok(dir
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count() as u32)
}

/// A socket's counters: what it read, and what it gave back unread by reason.
#[derive(Debug, Default)]
pub struct XskStats {
    /// Frames read from the receive ring.
    pub frames: AtomicU64,
    /// Datagrams handed on.
    pub datagrams: AtomicU64,
    /// Frames that were not a UDP datagram to the port, by `dta_net::Error` (in
    /// `dta_net::Error::ALL` order), and (last) datagrams to another port.
    pub rejected: [AtomicU64; dta_net::Error::ALL.len() + 1],
}

impl XskStats {
    /// `(reason, count)` of every non-zero rejection.
    pub fn rejected(&self) -> Vec<(&'static str, u64)> {
        dta_net::Error::ALL
            .iter()
            .map(|e| e.reason())
            .chain(["other_port"])
            .zip(&self.rejected)
            .map(|(r, c)| (r, c.load(Relaxed)))
            .filter(|(_, c)| *c > 0)
            .collect()
    }
}

/// The kernel's counters of one socket (`XDP_STATISTICS`, `struct xdp_statistics` in
/// linux/if_xdp.h). A frame is lost at the socket when it is counted in `rx_dropped` or
/// `rx_ring_full`; `rx_fill_ring_empty` says why most such losses happen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct XskKernelStats {
    /// Frames dropped: no free frame to copy into (the fill ring was empty) or larger than a
    /// frame.
    pub rx_dropped: u64,
    /// Frames dropped because the receive ring was full (the reader fell behind).
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when a frame arrived.
    pub rx_fill_ring_empty: u64,
    /// Descriptors userspace gave the kernel that it could not use (a bug of ours if ever
    /// non-zero).
    pub rx_invalid_descs: u64,
}

impl XskKernelStats {
    /// Frames the socket lost: `rx_dropped + rx_ring_full`.
    pub fn lost(&self) -> u64 {
        self.rx_dropped.wrapping_add(self.rx_ring_full)
    }

    /// The counters of the AF_XDP socket `fd` (all 0 where the kernel does not answer).
    pub fn of(fd: RawFd) -> XskKernelStats {
        let mut s = [0u64; 8];
        let mut len = std::mem::size_of_val(&s) as libc::socklen_t;
        // SAFETY: getsockopt(SOL_XDP, XDP_STATISTICS) into a buffer of `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                s.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if r != 0 {
            return XskKernelStats::default();
        }
        // struct xdp_statistics: rx_dropped, rx_invalid_descs, tx_invalid_descs,
        // rx_ring_full, rx_fill_ring_empty_descs, tx_ring_empty_descs.
        XskKernelStats {
            rx_dropped: s[0],
            rx_invalid_descs: s[1],
            rx_ring_full: s[3],
            rx_fill_ring_empty: s[4],
        }
    }
}

/// What another thread reads of one socket while its receive thread uses it: the queue, the
/// binding, this side's counters and the kernel's (through a duplicate of the socket's
/// descriptor, closed when the last handle goes).
#[derive(Debug, Clone)]
pub struct XskCounters {
    pub queue: u32,
    pub zero_copy: bool,
    pub stats: Arc<XskStats>,
    fd: Arc<OwnedFd>,
}

impl XskCounters {
    /// The kernel's counters of the socket now.
    pub fn kernel(&self) -> XskKernelStats {
        XskKernelStats::of(self.fd.as_raw_fd())
    }

    /// The socket's busy poll as the kernel holds it (`SO_BUSY_POLL`, microseconds; 0: off).
    pub fn busy_poll_us(&self) -> u32 {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt of one int into `v` on the handle's open descriptor.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_BUSY_POLL,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if r == 0 {
            v.max(0) as u32
        } else {
            0
        }
    }
}

/// The UMEM's memory: anonymous, page-aligned, populated, unmapped on drop (after the socket
/// that uses it, by field order).
struct Area {
    ptr: NonNull<u8>,
    len: usize,
}

impl Area {
    fn new(len: usize) -> std::io::Result<Area> {
        // SAFETY: a fresh anonymous private mapping; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Area {
            ptr: NonNull::new(p.cast()).expect("mmap returned a non-null address"),
            len,
        })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer used (the socket is dropped before).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

// SAFETY: the area is owned by one receiver, which one thread uses at a time.
unsafe impl Send for Area {}

/// One AF_XDP socket on one receive queue (see the module doc).
pub struct XskReceiver {
    rx: RingRx,
    fill: DeviceQueue,
    user: User,
    _socket: Socket,
    _umem: Umem,
    area: Area,
    iface: String,
    port: u16,
    queue: u32,
    zero_copy: bool,
    descs: Vec<xdpilone::xdp::XdpDesc>,
    parsed: Vec<(u32, u32, SocketAddr)>,
    /// Frames read and not yet back in the fill ring.
    returning: Vec<u64>,
    stats: Arc<XskStats>,
    /// Busy polling is on ([`XskReceiver::busy_poll`]): an empty receive ring is answered by
    /// running the driver's receive from this thread.
    busy_poll: bool,
}

// SAFETY: the rings and the UMEM are owned by this receiver and used by one thread at a time;
// the raw pointers they hold point into `area`, which moves with them.
unsafe impl Send for XskReceiver {}

/// Why a socket could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("AF_XDP socket on {iface} queue {queue}: {what}: {errno}")]
pub struct XskError {
    iface: String,
    queue: u32,
    what: &'static str,
    errno: String,
}

impl XskReceiver {
    /// Open a socket on `iface`'s receive queue `queue` for datagrams to UDP `port`: zero-copy
    /// when the driver supports it, else copy mode.
    pub fn open(iface: &str, queue: u32, port: u16) -> Result<XskReceiver, XskError> {
        Self::open_with(iface, queue, port, FRAMES)
    }

    /// [`Self::open`] with a UMEM of `frames` frames (a power of two, [`FRAMES`] to
    /// [`MAX_FRAMES`]; [`frames_for`] shares a budget among sockets).
    pub fn open_with(
        iface: &str,
        queue: u32,
        port: u16,
        frames: u32,
    ) -> Result<XskReceiver, XskError> {
        let frames = frames.clamp(FRAMES, MAX_FRAMES).next_power_of_two();
        match Self::open_mode(iface, queue, port, true, frames) {
            Ok(r) => Ok(r),
            Err(_) => Self::open_mode(iface, queue, port, false, frames),
        }
    }

    fn open_mode(
        iface: &str,
        queue: u32,
        port: u16,
        zero_copy: bool,
        frames: u32,
    ) -> Result<XskReceiver, XskError> {
        let err = |what: &'static str, e: String| XskError {
            iface: iface.to_owned(),
            queue,
            what,
            errno: e,
        };
        let xerr = |what: &'static str| move |e: xdpilone::Errno| err(what, e.to_string());
        let len = (frames * FRAME_SIZE) as usize;
        let area = Area::new(len).map_err(|e| err("UMEM", e.to_string()))?;
        let mem = NonNull::slice_from_raw_parts(area.ptr, len);
        let config = UmemConfig {
            fill_size: frames,
            complete_size: 64,
            frame_size: FRAME_SIZE,
            headroom: 0,
            flags: 0,
        };
        // SAFETY: `mem` is a page-aligned mapping of `len` bytes that lives as long as the
        // receiver (`area`, dropped after the UMEM and the socket by field order).
        let umem = unsafe { Umem::new(config, mem) }.map_err(xerr("UMEM registration"))?;
        let mut info = IfInfo::invalid();
        let name =
            std::ffi::CString::new(iface).map_err(|e| err("interface name", e.to_string()))?;
        info.from_name(&name).map_err(xerr("interface"))?;
        info.set_queue(queue);
        let socket = Socket::with_shared(&info, &umem).map_err(xerr("socket"))?;
        let mut fill = umem
            .fq_cq(&socket)
            .map_err(xerr("fill and completion rings"))?;
        let mode = if zero_copy {
            SocketConfig::XDP_BIND_ZEROCOPY
        } else {
            SocketConfig::XDP_BIND_COPY
        };
        let user = umem
            .rx_tx(
                &socket,
                &SocketConfig {
                    rx_size: NonZeroU32::new(frames),
                    tx_size: None,
                    bind_flags: mode | SocketConfig::XDP_BIND_NEED_WAKEUP,
                },
            )
            .map_err(xerr("receive ring"))?;
        let rx = user.map_rx().map_err(xerr("receive ring mapping"))?;
        umem.bind(&user).map_err(xerr(if zero_copy {
            "bind (zero-copy)"
        } else {
            "bind (copy mode)"
        }))?;
        // Every frame starts in the fill ring.
        {
            let mut w = fill.fill(frames);
            w.insert((0..frames).map(|i| u64::from(i * FRAME_SIZE)));
            w.commit();
        }
        Ok(XskReceiver {
            rx,
            fill,
            user,
            _socket: socket,
            _umem: umem,
            area,
            iface: iface.to_owned(),
            port,
            queue,
            zero_copy,
            descs: Vec::with_capacity(MAX_BATCH),
            parsed: Vec::with_capacity(MAX_BATCH),
            returning: Vec::with_capacity(frames as usize),
            stats: Arc::new(XskStats::default()),
            busy_poll: false,
        })
    }

    /// Busy polling (socket(7) `SO_BUSY_POLL`, `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL_BUDGET`;
    /// the kernel's AF_XDP documentation, "Busy polling"): when the receive ring is empty the
    /// receive thread runs the driver's receive for up to `usecs` microseconds itself, at most
    /// [`BUSY_POLL_BUDGET`] packets a turn, and the kernel prefers that to its softirq, so
    /// frames are taken where they are read instead of in an interrupt on another CPU. Needs
    /// `CAP_NET_ADMIN` above `net.core.busy_read`; an error says which option was refused.
    pub fn busy_poll(&mut self, usecs: u32) -> Result<(), XskError> {
        let usecs = usecs.clamp(1, MAX_BUSY_POLL_US);
        for (opt, name, v) in [
            (libc::SO_PREFER_BUSY_POLL, "SO_PREFER_BUSY_POLL", 1),
            (libc::SO_BUSY_POLL, "SO_BUSY_POLL", usecs as libc::c_int),
            (
                libc::SO_BUSY_POLL_BUDGET,
                "SO_BUSY_POLL_BUDGET",
                libc::c_int::from(BUSY_POLL_BUDGET),
            ),
        ] {
            // SAFETY: setsockopt of one int on this receiver's open socket.
            let r = unsafe {
                libc::setsockopt(
                    self.fd(),
                    libc::SOL_SOCKET,
                    opt,
                    (&v as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if r != 0 {
                return Err(XskError {
                    iface: self.iface.clone(),
                    queue: self.queue,
                    what: name,
                    errno: std::io::Error::last_os_error().to_string(),
                });
            }
        }
        self.busy_poll = true;
        Ok(())
    }

    /// Run the driver's receive from this thread (busy polling): `recvfrom` on the socket,
    /// which never blocks and carries no data for an AF_XDP socket.
    fn kick(&self) {
        // SAFETY: recvfrom of 0 bytes into no buffer on this receiver's open socket.
        unsafe {
            libc::recvfrom(
                self.fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// The socket's descriptor (for [`XskProgram::register`] and `poll`).
    pub fn fd(&self) -> RawFd {
        self.user.as_raw_fd()
    }

    /// The receive queue it is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Whether the driver gave zero-copy (else copy mode).
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Its counters (shared: a metrics collector reads them while it receives).
    pub fn stats(&self) -> Arc<XskStats> {
        self.stats.clone()
    }

    /// The kernel's counters of the socket.
    pub fn kernel_stats(&self) -> XskKernelStats {
        XskKernelStats::of(self.fd())
    }

    /// A handle on its counters for another thread (the metrics, the loss watch).
    pub fn counters(&self) -> std::io::Result<XskCounters> {
        // SAFETY: `fd` is this receiver's open socket; the duplicate is owned by the handle.
        let dup = unsafe { libc::fcntl(self.fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(XskCounters {
            queue: self.queue,
            zero_copy: self.zero_copy,
            stats: self.stats.clone(),
            // SAFETY: `dup` is a fresh descriptor nothing else owns.
            fd: Arc::new(unsafe { OwnedFd::from_raw_fd(dup) }),
        })
    }

    /// Hand up to `max` received datagrams (payload, source) to `f` as one batch, then give
    /// their frames back to the kernel. Returns the frames read (0: none waiting). Never
    /// blocks.
    pub fn recv_batch(&mut self, max: usize, f: &mut BatchFn<'_>) -> usize {
        let max = max.clamp(1, MAX_BATCH) as u32;
        self.descs.clear();
        self.read_ring(max);
        if self.descs.is_empty() && self.busy_poll {
            self.kick();
            self.read_ring(max);
        }
        let n = self.descs.len();
        if n == 0 {
            return 0;
        }
        self.parsed.clear();
        let base = self.area.ptr.as_ptr();
        for d in &self.descs {
            let (off, len) = (d.addr as usize, d.len as usize);
            if off + len > self.area.len {
                // A descriptor outside the UMEM: the kernel's bug, counted as truncated.
                self.stats.rejected[0].fetch_add(1, Relaxed);
                continue;
            }
            // SAFETY: the frame lies in the area (checked), and it is ours until it is given
            // back to the fill ring below.
            let frame = unsafe { std::slice::from_raw_parts(base.add(off), len) };
            match dta_net::udp_datagram(frame) {
                Ok((src, dst, payload)) if dst.port() == self.port => {
                    let start = payload.as_ptr() as usize - base as usize;
                    self.parsed.push((start as u32, payload.len() as u32, src));
                }
                Ok(_) => {
                    self.stats.rejected[dta_net::Error::ALL.len()].fetch_add(1, Relaxed);
                }
                Err(e) => {
                    let i = dta_net::Error::ALL
                        .iter()
                        .position(|x| *x == e)
                        .unwrap_or(0);
                    self.stats.rejected[i].fetch_add(1, Relaxed);
                }
            }
        }
        self.stats.frames.fetch_add(n as u64, Relaxed);
        self.stats
            .datagrams
            .fetch_add(self.parsed.len() as u64, Relaxed);
        {
            let area = &self.area;
            let mut it = self.parsed.iter().map(|&(o, l, src)| {
                // SAFETY: as above; `o + l` lies within the frame checked above.
                let p = unsafe {
                    std::slice::from_raw_parts(area.ptr.as_ptr().add(o as usize), l as usize)
                };
                (p, src)
            });
            f(&mut it);
        }
        // The frames go back to the kernel (their chunk's start).
        self.returning.extend(
            self.descs
                .iter()
                .map(|d| d.addr & !u64::from(FRAME_SIZE - 1)),
        );
        self.give_back();
        if self.fill.needs_wakeup() {
            self.fill.wake();
        }
        n
    }

    /// Up to `max` descriptors from the receive ring into `descs`.
    fn read_ring(&mut self, max: u32) {
        let mut r = self.rx.receive(max);
        while let Some(d) = r.read() {
            self.descs.push(d);
        }
        r.release();
    }

    /// Put the frames in `returning` into the fill ring, every one of them: a reservation is
    /// served from the cached ring state and may be short (a short one refreshes it for the
    /// next), and a frame not given back would be lost for good. What the ring cannot take now
    /// (only a kernel that consumed none can leave it full) waits for the next call.
    fn give_back(&mut self) {
        let mut given = 0;
        while given < self.returning.len() {
            let mut w = self.fill.fill((self.returning.len() - given) as u32);
            let k = w.insert(self.returning[given..].iter().copied()) as usize;
            w.commit();
            if k == 0 {
                break;
            }
            given += k;
        }
        self.returning.drain(..given);
    }

    /// Wait up to `timeout` for frames (`poll`).
    pub fn wait(&self, timeout: Duration) -> std::io::Result<()> {
        let mut p = libc::pollfd {
            fd: self.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: poll on one valid descriptor.
        if unsafe { libc::poll(&mut p, 1, ms) } < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }
}

impl dta_translator::ingest::DatagramSource for XskReceiver {
    fn recv_batch(&mut self, max: usize, f: &mut BatchFn<'_>) -> std::io::Result<usize> {
        Ok(XskReceiver::recv_batch(self, max, f))
    }

    fn fd(&self) -> RawFd {
        XskReceiver::fd(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_share_the_budget() {
        assert_eq!(frames_for(1), MAX_FRAMES);
        assert_eq!(frames_for(2), 32768);
        assert_eq!(frames_for(3), 16384);
        assert_eq!(frames_for(16), FRAMES);
        assert_eq!(frames_for(64), FRAMES);
        assert_eq!(frames_for(0), MAX_FRAMES);
        // The budget is what the sockets share, never more (down to FRAMES each).
        for n in 1..=16 {
            assert!(u64::from(frames_for(n)) * u64::from(FRAME_SIZE) * n as u64 <= UMEM_BUDGET);
        }
    }
}
