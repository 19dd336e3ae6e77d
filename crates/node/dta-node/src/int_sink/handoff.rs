//! Flow steering over AF_XDP. An AF_XDP socket receives what the NIC put on its queue (the
//! outer addresses and ports decide, so one sink switch lands on one queue), while a flow's
//! reports must reach the one sink thread that holds it (its FlowCache entry, its record, its
//! postcards: [`dta_int::shard`]). So the thread that reads a queue computes each report's
//! owner with [`dta_int::steer::steer`] (the function the socket path's kernel program
//! computes) and copies a report another thread owns into that thread's inbox: a buffer of a
//! shared [`Pool`] and a bounded lock-free queue of indices, as the classifier hands datagrams
//! to translator threads. The reader's frames go straight back to its fill ring.
//!
//! Nothing is dropped here: a full inbox makes the reader apply its own inbox and try again,
//! so every waiting thread is one that drains, and the reports behind it wait in its receive
//! ring, where the kernel counts what overflows (`af_xdp_kernel_drops_total`). Waits are
//! counted ([`Handoff::full_waits`]). An idle thread sleeps in `poll` on its sockets and its
//! inbox's eventfd, which a sender signals only when the thread said it sleeps.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};

use crossbeam_queue::ArrayQueue;
use dta_translator::classify::{Entry, Pool};

/// Reports one thread's inbox holds (at 1 M reports/s, 4 ms of another thread's share).
pub(super) const INBOX: usize = 4096;
/// Bytes of one hand-over buffer: an AF_XDP frame (`dta_xdp::xsk::FRAME_SIZE`) holds the whole
/// datagram, so its payload always fits.
const BUFFER: usize = 2048;
/// Reports applied from an inbox at once (the sink takes them a slice at a time).
pub(super) const SLICE: usize = 64;

/// One thread's inbox.
struct Inbox {
    queue: ArrayQueue<Entry>,
    /// The owner is about to sleep in `poll`: a sender signals `wake`.
    sleeping: AtomicBool,
    wake: OwnedFd,
}

/// The inboxes of every sink thread and the buffers they share.
pub(super) struct Handoff {
    pool: Pool,
    inboxes: Box<[Inbox]>,
    handed: AtomicU64,
    full_waits: AtomicU64,
}

impl Handoff {
    /// Inboxes for `threads` threads: a pool of buffers for every inbox full and every thread
    /// holding a slice, so a sender waits for its inbox, never for a buffer.
    pub(super) fn new(threads: usize) -> std::io::Result<Handoff> {
        let inboxes = (0..threads)
            .map(|_| {
                // SAFETY: eventfd(2) with flags; the result is checked and owned below.
                let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(Inbox {
                    queue: ArrayQueue::new(INBOX),
                    sleeping: AtomicBool::new(false),
                    // SAFETY: a fresh descriptor nothing else owns.
                    wake: unsafe { OwnedFd::from_raw_fd(fd) },
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Handoff {
            pool: Pool::new(threads * (INBOX + SLICE + 1), BUFFER),
            inboxes: inboxes.into_boxed_slice(),
            handed: AtomicU64::new(0),
            full_waits: AtomicU64::new(0),
        })
    }

    /// The descriptor thread `me` also waits on: readable when a sender woke it.
    pub(super) fn fd(&self, me: usize) -> RawFd {
        self.inboxes[me].wake.as_raw_fd()
    }

    /// Times a sender found an inbox full and applied its own before trying again.
    pub(super) fn full_waits(&self) -> u64 {
        self.full_waits.load(Ordering::Relaxed)
    }

    /// Reports handed to another thread.
    pub(super) fn handed(&self) -> u64 {
        self.handed.load(Ordering::Relaxed)
    }

    /// Copy `data` from `src` into thread `to`'s inbox; false when it is full (nothing taken).
    pub(super) fn try_send(&self, to: usize, data: &[u8], src: SocketAddr) -> bool {
        if !self.enqueue(to, data, src) {
            self.full_waits.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let inbox = &self.inboxes[to];
        self.handed.fetch_add(1, Ordering::Relaxed);
        // Pairs with the fence in `sleep`: either the owner sees the entry before it sleeps,
        // or this sees `sleeping` and wakes it.
        fence(Ordering::SeqCst);
        if inbox.sleeping.load(Ordering::Relaxed) && inbox.sleeping.swap(false, Ordering::AcqRel) {
            let one: u64 = 1;
            // SAFETY: write(2) of 8 bytes from a u64 to our eventfd.
            unsafe { libc::write(inbox.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
        true
    }

    /// Copy `data` into a pool buffer on thread `to`'s queue; false when the queue or the pool
    /// is full (the buffer, if taken, given back).
    fn enqueue(&self, to: usize, data: &[u8], src: SocketAddr) -> bool {
        let queue = &self.inboxes[to].queue;
        if queue.is_full() {
            return false;
        }
        let Some(buf) = self.pool.take() else {
            return false;
        };
        let len = self.pool.fill(buf, data);
        match queue.push(Entry { buf, len, src }) {
            Ok(()) => true,
            Err(e) => {
                self.pool.release(e.buf);
                false
            }
        }
    }

    /// Up to [`SLICE`] reports of thread `me`'s inbox to `f` as (payload, source), their buffers
    /// freed after; how many.
    pub(super) fn drain_slice(
        &self,
        me: usize,
        f: &mut dta_translator::ingest::BatchFn<'_>,
    ) -> usize {
        let q = &self.inboxes[me].queue;
        let mut held = [Entry {
            buf: 0,
            len: 0,
            src: SocketAddr::from(([0, 0, 0, 0], 0)),
        }; SLICE];
        let mut n = 0;
        while n < SLICE {
            match q.pop() {
                Some(e) => {
                    held[n] = e;
                    n += 1;
                }
                None => break,
            }
        }
        if n == 0 {
            return 0;
        }
        f(&mut held[..n]
            .iter()
            .map(|e| (self.pool.bytes(e.buf, e.len), e.src)));
        for e in &held[..n] {
            self.pool.release(e.buf);
        }
        n
    }

    /// Thread `me` is about to sleep in `poll` on [`Handoff::fd`]: false (do not sleep) when its
    /// inbox already holds reports. Call [`Handoff::woke`] after the wait.
    pub(super) fn sleep(&self, me: usize) -> bool {
        let inbox = &self.inboxes[me];
        inbox.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if !inbox.queue.is_empty() {
            inbox.sleeping.store(false, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// After a wait: no longer sleeping, the wake-up consumed.
    pub(super) fn woke(&self, me: usize) {
        let inbox = &self.inboxes[me];
        inbox.sleeping.store(false, Ordering::Relaxed);
        let mut v: u64 = 0;
        // SAFETY: read(2) of 8 bytes into a u64 from our non-blocking eventfd (EAGAIN when
        // nobody wrote: ignored).
        unsafe { libc::read(inbox.wake.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(h: &Handoff, me: usize) -> Vec<(Vec<u8>, SocketAddr)> {
        let mut out = vec![];
        while h.drain_slice(me, &mut |it| out.extend(it.map(|(d, s)| (d.to_vec(), s)))) > 0 {}
        out
    }

    #[test]
    fn reports_reach_their_owner_whole_and_in_order() {
        let h = Handoff::new(3).unwrap();
        let src: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        for i in 0..200u32 {
            let data: Vec<u8> = (0..(i % 97 + 1)).map(|k| (k + i) as u8).collect();
            assert!(h.try_send((i % 2 + 1) as usize, &data, src));
        }
        assert!(collect(&h, 0).is_empty());
        let one = collect(&h, 1);
        let two = collect(&h, 2);
        assert_eq!((one.len(), two.len()), (100, 100));
        for (k, (d, s)) in one.iter().enumerate() {
            let i = 2 * k as u32;
            assert_eq!(d.len() as u32, i % 97 + 1);
            assert_eq!(d[0], i as u8);
            assert_eq!(*s, src);
        }
        assert_eq!(two[0].0[0], 1);
    }

    #[test]
    fn a_full_inbox_refuses_and_counts_then_takes_again_once_drained() {
        let h = Handoff::new(2).unwrap();
        let src: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        for _ in 0..INBOX {
            assert!(h.try_send(1, b"x", src));
        }
        assert!(!h.try_send(1, b"y", src));
        assert_eq!(h.full_waits(), 1);
        assert_eq!(
            h.drain_slice(1, &mut |it| assert_eq!(it.count(), SLICE)),
            SLICE
        );
        assert!(h.try_send(1, b"z", src));
        // Longer than a buffer: cut to the buffer (an AF_XDP payload never is).
        assert!(h.try_send(0, &vec![7u8; BUFFER + 10], src));
        let got = collect(&h, 0);
        assert_eq!(got[0].0.len(), BUFFER);
    }

    #[test]
    fn a_sleeping_owner_is_woken_once_and_an_owner_with_mail_does_not_sleep() {
        let h = Handoff::new(2).unwrap();
        let src: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        assert!(h.sleep(1));
        assert!(h.try_send(1, b"a", src));
        // The eventfd is readable: poll returns at once.
        dta_translator::ingest::wait_readable(&[h.fd(1)], std::time::Duration::from_secs(5))
            .unwrap();
        let mut v = 0u64;
        // SAFETY: read of 8 bytes from the eventfd.
        let r = unsafe { libc::read(h.fd(1), (&mut v as *mut u64).cast(), 8) };
        assert_eq!((r, v), (8, 1));
        h.woke(1);
        assert!(!h.sleep(1), "mail waiting: no sleep");
        assert_eq!(collect(&h, 1).len(), 1);
        assert!(h.sleep(1));
        h.woke(1);
    }
}
