//! Receive-side protection: the first-stage classifier of the translator's ingest
//! (`docs/flow-control.md`, "Receive-side protection"; [DTA-draft §3.2] "Telemetry Flow Control
//! & Prioritization").
//!
//! Without it, each translator thread reads its own socket and, when reports arrive faster than
//! they can be translated, the kernel drops at the full receive buffer whatever comes next, high
//! priority as readily as low. With it, one classifier thread drains the socket with `recvmmsg`
//! into a preallocated [`Pool`] of datagram buffers, reads nothing but the priority bits
//! ([`priority_of`]) and pushes (buffer, length, source) into one of three bounded lock-free
//! queues of the translator thread that owns the source ([`Lanes`]); translator threads take high
//! first, then medium, then low. A full queue sheds its datagram, counted
//! `shed{priority}`: under overload low priority is dropped first, and the translator threads
//! never wait for the kernel.
//!
//! A source is always queued to the same translator thread (a hash of its address and port, as
//! `SO_REUSEPORT` spreads sockets), so one reporter's datagrams of one priority stay in order on
//! one thread: its sequence space and its Sketch-Merge columns are never split. Datagrams of
//! different priorities may overtake each other, which the sequence spaces (one per priority)
//! allow.
//!
//! Every buffer index is owned by exactly one party at a time (the free list, the classifier,
//! a queue, or the translator thread applying it); the pool holds enough buffers for every queue
//! to be full while the classifier and every translator hold a batch, so the free list never runs
//! dry. Nothing here allocates after start-up or takes a lock.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;

use crossbeam_queue::ArrayQueue;
use dta_wire::{native, Priority, Protocol};

use crate::config::{validate_depths, validate_shed_backlog, Depths, DEFAULT_SHED_BACKLOG};
use dta_wire::MAX_DATAGRAM;

/// The priority a datagram is queued at: the native header's priority bits read with the wire
/// crate's accessor, medium for the prototype (which carries none), low for anything
/// unparseable (the parser rejects it later, counted by reason).
#[inline]
pub fn priority_of(buf: &[u8]) -> Priority {
    match dta_wire::protocol_of(buf) {
        Ok(Protocol::Prototype) => Priority::Medium,
        Ok(Protocol::Native) => native::Packet::new_checked(buf)
            .ok()
            .and_then(|p| Priority::try_from(p.priority_raw()).ok())
            .unwrap_or(Priority::Low),
        Err(_) => Priority::Low,
    }
}

/// A received datagram waiting in a queue: its buffer in the [`Pool`], its length, its source.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub buf: u32,
    pub len: u32,
    pub src: SocketAddr,
}

/// Preallocated datagram buffers of one size, and the list of free ones, shared by the threads
/// that pass datagrams to each other by index: the classifier's (`MAX_DATAGRAM` bytes each),
/// the INT sink's hand-over of AF_XDP reports between its threads.
pub struct Pool {
    /// Owns the memory; only ever accessed through `base`.
    _mem: Vec<u8>,
    base: *mut u8,
    buffers: usize,
    size: usize,
    free: ArrayQueue<u32>,
}

// SAFETY: the memory is shared by index: a buffer is written only by the party holding its index
// (taken from `free`) and read only by the translator thread that popped its entry from a queue;
// the queues' push/pop order these accesses (release/acquire).
unsafe impl Send for Pool {}
unsafe impl Sync for Pool {}

impl Pool {
    /// `buffers` buffers (at least 1) of `size` bytes, all free.
    pub fn new(buffers: usize, size: usize) -> Pool {
        let buffers = buffers.max(1);
        // Zeroed memory comes from the kernel untouched: pages are backed as buffers get used.
        let mut mem = vec![0u8; buffers * size];
        let base = mem.as_mut_ptr();
        let free = ArrayQueue::new(buffers);
        for i in 0..buffers {
            let _ = free.push(i as u32);
        }
        Pool {
            _mem: mem,
            base,
            buffers,
            size,
            free,
        }
    }

    /// Bytes of one buffer.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Bytes of every buffer.
    pub fn bytes_held(&self) -> usize {
        self.buffers * self.size
    }

    /// The start of buffer `i`, for `recvmmsg` (the caller holds index `i`).
    pub fn ptr(&self, i: u32) -> *mut u8 {
        assert!((i as usize) < self.buffers);
        // SAFETY: in bounds of the allocation, checked above.
        unsafe { self.base.add(i as usize * self.size) }
    }

    /// The first `len` bytes of buffer `i`. The caller holds index `i` and nobody writes the
    /// buffer until the caller gives it back with [`Pool::release`].
    pub fn bytes(&self, i: u32, len: u32) -> &[u8] {
        let len = (len as usize).min(self.size);
        // SAFETY: in bounds (checked by `ptr`), initialised (zeroed at allocation), and not
        // written while its index is held by the reader.
        unsafe { std::slice::from_raw_parts(self.ptr(i), len) }
    }

    /// Copy `data` (its first [`Pool::size`] bytes) into buffer `i`, which the caller holds;
    /// the bytes copied.
    pub fn fill(&self, i: u32, data: &[u8]) -> u32 {
        let n = data.len().min(self.size);
        // SAFETY: `n` bytes from the start of buffer `i` lie in the allocation (`ptr` checks
        // `i`), and a buffer is written only by the party holding its index.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr(i), n) };
        n as u32
    }

    /// A free buffer's index, now the caller's; `None` when every buffer is held.
    pub fn take(&self) -> Option<u32> {
        self.free.pop()
    }

    /// Give buffer `i` back to the free list.
    pub fn release(&self, i: u32) {
        // Cannot fail: the free list holds every buffer.
        let _ = self.free.push(i);
    }
}

/// One translator thread's queues and how to wake it.
pub(crate) struct Lane {
    /// Indexed by `Priority as usize` (low, medium, high).
    queues: [ArrayQueue<Entry>; 3],
    sleeping: AtomicBool,
    thread: OnceLock<Thread>,
    /// Pops so far, for the lower queues' turns.
    turn: std::sync::atomic::AtomicU32,
}

impl Lane {
    /// The next datagram, highest priority first, except that every
    /// [`crate::prio_sockets::MEDIUM_TURN`]th pop tries medium first and every
    /// [`crate::prio_sockets::LOW_TURN`]th low first: a flood that claims high priority cannot
    /// starve the queues below it (as the sockets' reads, `crate::prio_sockets`).
    #[inline]
    pub fn pop(&self) -> Option<Entry> {
        use crate::prio_sockets::{LOW_TURN, MEDIUM_TURN};
        let t = self.turn.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        let [l, m, h] = [Priority::Low, Priority::Medium, Priority::High].map(|p| p as usize);
        let order = if t % LOW_TURN == 0 {
            [l, h, m]
        } else if t % MEDIUM_TURN == 0 {
            [m, l, h]
        } else {
            [h, m, l]
        };
        order.into_iter().find_map(|q| self.queues[q].pop())
    }

    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(ArrayQueue::is_empty)
    }

    /// Called by the translator thread once, before it first waits.
    pub fn register(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    /// The translator thread waits up to `timeout` for work (woken by [`Lane::wake`]) unless
    /// some has arrived or `done` is set.
    pub fn wait(&self, timeout: std::time::Duration, done: &AtomicBool) {
        self.sleeping.store(true, Ordering::SeqCst);
        if self.is_empty() && !done.load(Ordering::SeqCst) {
            std::thread::park_timeout(timeout);
        }
        self.sleeping.store(false, Ordering::SeqCst);
    }

    /// Wake the translator thread if it waits.
    pub fn wake(&self) {
        if self.sleeping.load(Ordering::SeqCst) {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }
}

/// The classifier's queues (one [`Lane`] per translator thread) and the buffer pool.
pub struct Lanes {
    pub(crate) lanes: Box<[Lane]>,
    pub(crate) pool: Pool,
    /// Set by the classifier when it will push nothing more.
    pub(crate) done: AtomicBool,
    /// A full queue sheds only while the kernel holds at least this fraction of the socket's
    /// receive buffer; below it the classifier waits for room (the buffer absorbs a burst).
    pub(crate) shed_backlog: f64,
}

impl Lanes {
    /// Queues of `depths` for each of `threads` translator threads, and a pool for all of them
    /// plus `batch` buffers for the classifier and each translator thread. Refuses a zero or
    /// larger-than-[`crate::config::MAX_QUEUE_DEPTH`] depth.
    pub fn new(threads: usize, depths: Depths, batch: usize) -> std::io::Result<Lanes> {
        validate_depths(&depths)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let threads = threads.max(1);
        let buffers = threads * depths.total() + (threads + 1) * batch.max(1);
        if buffers > u32::MAX as usize {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "classifier queues too deep",
            ));
        }
        let lanes = (0..threads)
            .map(|_| Lane {
                queues: [
                    ArrayQueue::new(depths.low),
                    ArrayQueue::new(depths.medium),
                    ArrayQueue::new(depths.high),
                ],
                sleeping: AtomicBool::new(false),
                thread: OnceLock::new(),
                turn: Default::default(),
            })
            .collect();
        Ok(Lanes {
            lanes,
            pool: Pool::new(buffers, MAX_DATAGRAM),
            done: AtomicBool::new(false),
            shed_backlog: DEFAULT_SHED_BACKLOG,
        })
    }

    /// The lanes a configuration asks for in front of `threads` translator threads: its queue
    /// depths, receive batch and shed backlog.
    pub fn from_config(
        threads: usize,
        cfg: &crate::config::TranslatorConfig,
    ) -> std::io::Result<Lanes> {
        let f = cfg.classifier_shed_backlog;
        validate_shed_backlog(f).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("translator.{e}"))
        })?;
        Ok(Lanes::new(threads, cfg.classifier_depths(), cfg.recv_batch)?.with_shed_backlog(f))
    }

    /// Shed from a full queue only while the kernel holds at least `fraction` (clamped to
    /// 0..=1) of the socket's receive buffer; 0: whenever a queue is full.
    pub fn with_shed_backlog(mut self, fraction: f64) -> Lanes {
        self.shed_backlog = if fraction.is_nan() {
            DEFAULT_SHED_BACKLOG
        } else {
            fraction.clamp(0.0, 1.0)
        };
        self
    }

    pub fn threads(&self) -> usize {
        self.lanes.len()
    }

    /// Bytes of datagram buffers preallocated.
    pub fn pool_bytes(&self) -> usize {
        self.pool.bytes_held()
    }

    /// The translator thread a source's datagrams go to.
    #[inline]
    pub fn lane_of(&self, src: SocketAddr) -> usize {
        let n = self.lanes.len();
        if n == 1 {
            return 0;
        }
        let h = match src {
            SocketAddr::V4(a) => (u64::from(u32::from(*a.ip())) << 16) | u64::from(a.port()),
            SocketAddr::V6(a) => {
                let o = a.ip().octets();
                let hi = u64::from_be_bytes(o[..8].try_into().unwrap());
                let lo = u64::from_be_bytes(o[8..].try_into().unwrap());
                (hi ^ lo).rotate_left(16) ^ u64::from(a.port())
            }
        };
        // fmix64 (MurmurHash3's finaliser): every input bit moves the result.
        let mut x = h;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^= x >> 33;
        (x % n as u64) as usize
    }

    /// Queue `e` at priority `p` on lane `lane`; gives it back when that queue is full.
    #[inline]
    pub(crate) fn push(&self, lane: usize, p: Priority, e: Entry) -> Result<(), Entry> {
        self.lanes[lane].queues[p as usize].push(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dta_wire::native::DatagramBuilder;
    use dta_wire::Report;

    fn native(p: Priority) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        let mut d = DatagramBuilder::new(&mut b, p, false, 7, 1).unwrap();
        d.push(&Report::KeyIncrement {
            key: &[1, 2, 3, 4],
            counter: 1,
            redundancy: 1,
            immediate: false,
        })
        .unwrap();
        let n = d.finish();
        b.truncate(n);
        b
    }

    #[test]
    fn priority_is_read_from_the_header_medium_for_the_prototype_low_for_garbage() {
        for p in Priority::ALL {
            assert_eq!(priority_of(&native(p)), p);
        }
        // Prototype Key-Increment (opcode 0x03): no priority on the wire.
        assert_eq!(
            priority_of(&[0x03, 0, 1, 2, 3, 4, 0, 0, 0, 1]),
            Priority::Medium
        );
        assert_eq!(priority_of(&[]), Priority::Low);
        assert_eq!(priority_of(&[0x77, 0xc0]), Priority::Low); // unknown version
        let mut short = native(Priority::High);
        short.truncate(native::HEADER_LEN - 1);
        assert_eq!(priority_of(&short), Priority::Low); // truncated header
        let mut reserved = native(Priority::High);
        reserved[1] |= 0xc0; // priority 3 does not exist
        assert_eq!(priority_of(&reserved), Priority::Low);
    }

    #[test]
    fn lanes_pop_high_first_and_shed_when_full() {
        let depths = Depths {
            low: 2,
            medium: 1,
            high: 1,
        };
        let l = Lanes::new(1, depths, 4).unwrap();
        let e = |buf| Entry {
            buf,
            len: 0,
            src: SocketAddr::from(([127, 0, 0, 1], 1)),
        };
        assert!(l.push(0, Priority::Low, e(1)).is_ok());
        assert!(l.push(0, Priority::Low, e(2)).is_ok());
        assert_eq!(l.push(0, Priority::Low, e(3)).unwrap_err().buf, 3);
        assert!(l.push(0, Priority::Medium, e(4)).is_ok());
        assert!(l.push(0, Priority::High, e(5)).is_ok());
        assert!(l.push(0, Priority::High, e(6)).is_err());
        let order: Vec<u32> = std::iter::from_fn(|| l.lanes[0].pop().map(|e| e.buf)).collect();
        assert_eq!(order, [5, 4, 1, 2]);
        assert!(l.lanes[0].is_empty());
        // Every queue full, the classifier and the translator holding a batch each: the pool
        // still has a buffer for each.
        assert_eq!(l.pool.buffers, 4 + 2 * 4);
        let taken: Vec<u32> = std::iter::from_fn(|| l.pool.take()).collect();
        assert_eq!(taken.len(), 12);
        l.pool.release(taken[3]);
        assert_eq!(l.pool.take(), Some(taken[3]));
    }

    #[test]
    fn depths_are_bounded_and_a_source_keeps_its_lane() {
        let ok = Depths {
            low: 1,
            medium: 1,
            high: 1,
        };
        for bad in [
            Depths { low: 0, ..ok },
            Depths {
                high: crate::config::MAX_QUEUE_DEPTH + 1,
                ..ok
            },
        ] {
            let e = Lanes::new(2, bad, 1).err().unwrap();
            assert!(e.to_string().contains("queue depth must be"), "{e}");
        }
        let l = Lanes::new(4, ok, 1).unwrap();
        let a: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let lane = l.lane_of(a);
        assert!((0..100).all(|_| l.lane_of(a) == lane));
        // Ports of one host spread over the lanes.
        let used: std::collections::HashSet<usize> = (0..64)
            .map(|p| l.lane_of(SocketAddr::new(a.ip(), 5000 + p)))
            .collect();
        assert_eq!(used.len(), 4);
    }
}
