//! The collector's receive queue and what its completions mean, without a device.
//!
//! A flagged report reaches the collector as an RDMA WRITE WITH IMMEDIATE (docs/rdma.md,
//! "Push notifications"). At the responder such a WRITE consumes a receive WQE ([IBTA §9.4.3]):
//! with none posted the RNIC answers RNR NAK and the translator's queue pair stalls in retries.
//! So every accepted queue pair keeps receive WQEs posted ([`RecvQueue`]), one reposted per
//! completion, at most [`MAX_RECV_QUEUE`] per queue pair; and each receive completion's
//! immediate becomes a notice on the region directory's notification ring
//! ([`announce_completion`]) through [`NotifyRing::announce_immediate`], the function the
//! software responder uses, so that a subscriber (`dta watch`) cannot tell the two apart.
//!
//! The WRITE's data goes where its RETH says; the receive WQE only carries the completion, so
//! the WQEs have no scatter list (a SEND, which the translator never issues, would complete in
//! error and be counted).

use std::sync::atomic::{AtomicU64, Ordering};

use dta_store::notify::{parse_immediate, NotifyRing};
use serde::Serialize;

/// Most receive WQEs posted per queue pair; also the default depth (`[rnic] recv_queue` may
/// only lower it). Each covers one WRITE WITH IMMEDIATE that completed but was not yet polled.
pub const MAX_RECV_QUEUE: u32 = 1024;

/// Bit of a work request id that marks a receive WQE (send WQEs, the advertisements, count up
/// from 0): completions of both kinds share one CQ, and an error completion's opcode is not
/// defined, so the id is what tells them apart.
pub const RECV_WR_TAG: u64 = 1 << 63;

/// Whether a completion's work request id names a receive WQE.
pub fn is_recv_wr(wr_id: u64) -> bool {
    wr_id & RECV_WR_TAG != 0
}

/// The fields of a receive completion ([`ibv_wc`](https://man7.org/linux/man-pages/man3/ibv_poll_cq.3.html))
/// that decide what it announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvCompletion {
    /// `status == IBV_WC_SUCCESS`.
    pub success: bool,
    /// `opcode == IBV_WC_RECV_RDMA_WITH_IMM` and `wc_flags & IBV_WC_WITH_IMM`.
    pub write_with_imm: bool,
    /// `imm_data` as libibverbs delivers it: network byte order.
    pub imm_data_be: u32,
}

/// Why a receive completion announced nothing; one counter each in [`RecvStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvReject {
    /// The WQE completed in error (flushed when the queue pair left RTS, or a SEND that found
    /// no buffer).
    Failed,
    /// A successful completion that is not a WRITE WITH IMMEDIATE (a SEND).
    NotWriteWithImm,
    /// The immediate names a store this collector does not have.
    UnknownStore,
}

/// Receive-side counters of an RNIC collector.
#[derive(Debug, Default, Serialize)]
pub struct RecvStats {
    /// Receive completions polled (every outcome).
    pub recv_completions: AtomicU64,
    /// Notices put on the ring.
    pub notifications: AtomicU64,
    /// Completions whose immediate was well formed while no ring was set (nothing announced).
    pub notifications_without_ring: AtomicU64,
    pub recv_failed: AtomicU64,
    pub recv_not_write_with_imm: AtomicU64,
    pub recv_unknown_store: AtomicU64,
    /// Receive WQEs posted (the initial fill and every replenishment).
    pub recv_posted: AtomicU64,
    /// `ibv_post_recv` failures (the queue pair is in error: it is being torn down).
    pub recv_post_errors: AtomicU64,
}

impl RecvStats {
    fn reject(&self, r: RecvReject) -> &AtomicU64 {
        match r {
            RecvReject::Failed => &self.recv_failed,
            RecvReject::NotWriteWithImm => &self.recv_not_write_with_imm,
            RecvReject::UnknownStore => &self.recv_unknown_store,
        }
    }
}

fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Announce receive completion `c` on `ring` (when set) as the store its immediate names
/// (`stores[i]` is store `i`'s name, in the collector's order, as in the immediate), counting
/// the outcome in `stats`. No allocation.
pub fn announce_completion(
    c: &RecvCompletion,
    stores: &[String],
    ring: Option<&NotifyRing>,
    stats: &RecvStats,
) -> Result<(), RecvReject> {
    inc(&stats.recv_completions);
    let r = classify(c, stores);
    match r {
        Ok((store, imm)) => match ring {
            Some(ring) => {
                ring.announce_immediate(store, imm);
                inc(&stats.notifications);
            }
            None => inc(&stats.notifications_without_ring),
        },
        Err(e) => inc(stats.reject(e)),
    }
    r.map(|_| ())
}

fn classify<'a>(c: &RecvCompletion, stores: &'a [String]) -> Result<(&'a str, u32), RecvReject> {
    if !c.success {
        return Err(RecvReject::Failed);
    }
    if !c.write_with_imm {
        return Err(RecvReject::NotWriteWithImm);
    }
    let imm = u32::from_be(c.imm_data_be);
    let (store, _, _) = parse_immediate(imm);
    let name = stores.get(store).ok_or(RecvReject::UnknownStore)?;
    Ok((name, imm))
}

/// Posting receive WQEs on one queue pair (`ibv_post_recv`, or a mock in tests).
pub trait PostRecv {
    /// Post one receive WQE with work request id `wr_id`; the error is the errno.
    fn post_recv(&mut self, wr_id: u64) -> Result<(), i32>;
}

/// One queue pair's receive queue: how many WQEs are posted, kept at `depth`.
#[derive(Debug, Clone)]
pub struct RecvQueue {
    depth: u32,
    posted: u32,
    next: u64,
}

impl RecvQueue {
    /// A queue kept at `depth` WQEs, capped at [`MAX_RECV_QUEUE`] (at least 1).
    pub fn new(depth: u32) -> RecvQueue {
        RecvQueue {
            depth: depth.clamp(1, MAX_RECV_QUEUE),
            posted: 0,
            next: 0,
        }
    }

    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// WQEs posted and not yet completed.
    pub fn posted(&self) -> u32 {
        self.posted
    }

    /// Post WQEs until `depth` are outstanding; returns how many were posted. Stops at the
    /// first failure (counted), leaving the rest for the next call.
    pub fn fill(&mut self, q: &mut impl PostRecv, stats: &RecvStats) -> Result<u32, i32> {
        let mut n = 0;
        while self.posted < self.depth {
            let id = RECV_WR_TAG | (self.next & !RECV_WR_TAG);
            if let Err(e) = q.post_recv(id) {
                inc(&stats.recv_post_errors);
                return Err(e);
            }
            self.next = self.next.wrapping_add(1);
            self.posted += 1;
            n += 1;
            inc(&stats.recv_posted);
        }
        Ok(n)
    }

    /// One of our WQEs completed (in any status): it is no longer posted.
    pub fn completed(&mut self) {
        self.posted = self.posted.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dta_store::notify::immediate_data;
    use std::time::Duration;

    fn stores() -> Vec<String> {
        vec!["kw".into(), "append".into()]
    }

    fn wc(imm: u32) -> RecvCompletion {
        RecvCompletion {
            success: true,
            write_with_imm: true,
            imm_data_be: imm.to_be(),
        }
    }

    /// A receive completion of a WRITE WITH IMMEDIATE becomes exactly the notice the software
    /// responder puts on the ring for the same immediate; everything else is counted by reason
    /// and announces nothing.
    #[test]
    fn completions_become_the_responders_notices() {
        let dir = tempfile::tempdir().unwrap();
        let ring = NotifyRing::open_or_create(dir.path(), 64).unwrap();
        let reader = NotifyRing::open(dir.path()).unwrap();
        let mut sub = reader.subscribe();
        let stats = RecvStats::default();
        let s = stores();
        let imm = immediate_data(1, 3, 16);
        assert_eq!(
            announce_completion(&wc(imm), &s, Some(&ring), &stats),
            Ok(())
        );
        let n = reader.next(&mut sub, Duration::from_millis(10)).unwrap();
        assert_eq!(
            (
                n.store.as_str(),
                n.primitive,
                n.reports,
                n.key.as_str(),
                n.list
            ),
            ("append", 3, 16, "", 0)
        );
        // The same immediate through the responder's function gives the same notice.
        ring.announce_immediate("append", imm);
        let m = reader.next(&mut sub, Duration::from_millis(10)).unwrap();
        assert_eq!(
            (m.store, m.primitive, m.reports, m.key, m.list),
            (n.store, n.primitive, n.reports, n.key, n.list)
        );

        let failed = RecvCompletion {
            success: false,
            ..wc(imm)
        };
        let send = RecvCompletion {
            write_with_imm: false,
            ..wc(imm)
        };
        let bad_store = wc(immediate_data(2, 1, 1));
        assert_eq!(
            announce_completion(&failed, &s, Some(&ring), &stats),
            Err(RecvReject::Failed)
        );
        assert_eq!(
            announce_completion(&send, &s, Some(&ring), &stats),
            Err(RecvReject::NotWriteWithImm)
        );
        assert_eq!(
            announce_completion(&bad_store, &s, Some(&ring), &stats),
            Err(RecvReject::UnknownStore)
        );
        assert_eq!(reader.next(&mut sub, Duration::from_millis(1)), None);
        assert_eq!(announce_completion(&wc(imm), &s, None, &stats), Ok(()));
        let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!(c(&stats.recv_completions), 5);
        assert_eq!(c(&stats.notifications), 1);
        assert_eq!(c(&stats.notifications_without_ring), 1);
        assert_eq!(
            (
                c(&stats.recv_failed),
                c(&stats.recv_not_write_with_imm),
                c(&stats.recv_unknown_store)
            ),
            (1, 1, 1)
        );
    }

    /// The immediate is read in network byte order, as libibverbs delivers it.
    #[test]
    fn the_immediate_is_big_endian() {
        let s = stores();
        let imm = immediate_data(1, 1, 2);
        assert_eq!(classify(&wc(imm), &s), Ok(("append", imm)));
        let swapped = RecvCompletion {
            imm_data_be: imm,
            ..wc(imm)
        };
        // Read the wrong way round, the store byte would be the top byte of `reports` (0).
        assert_eq!(classify(&swapped, &s), Ok(("kw", imm.swap_bytes())));
    }

    /// A queue pair as the mock sees it: posted ids, and a failure switch.
    #[derive(Default)]
    struct MockQp {
        posted: Vec<u64>,
        outstanding: u32,
        fail: bool,
    }

    impl PostRecv for MockQp {
        fn post_recv(&mut self, wr_id: u64) -> Result<(), i32> {
            if self.fail {
                return Err(libc::EINVAL);
            }
            self.posted.push(wr_id);
            self.outstanding += 1;
            Ok(())
        }
    }

    /// The queue is filled to its depth, one WQE is reposted per completion so the depth never
    /// drops across many WRITE WITH IMMEDIATE completions, ids are tagged and distinct, and a
    /// failing post is counted and retried on the next fill.
    #[test]
    fn the_receive_queue_is_replenished_per_completion() {
        let stats = RecvStats::default();
        let mut qp = MockQp::default();
        let mut q = RecvQueue::new(8);
        assert_eq!(q.fill(&mut qp, &stats), Ok(8));
        assert_eq!((q.posted(), qp.outstanding), (8, 8));
        assert_eq!(q.fill(&mut qp, &stats), Ok(0), "already full");
        for round in 0..1000u32 {
            // The RNIC consumes 1..=8 WQEs, then the collector polls and replenishes.
            let k = round % 8 + 1;
            for _ in 0..k {
                qp.outstanding -= 1;
                q.completed();
            }
            assert_eq!(q.fill(&mut qp, &stats), Ok(k));
            assert_eq!((q.posted(), qp.outstanding), (8, 8));
        }
        assert!(qp.posted.iter().all(|&id| is_recv_wr(id)));
        let mut ids = qp.posted.clone();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), qp.posted.len(), "distinct work request ids");
        assert_eq!(
            stats.recv_posted.load(Ordering::Relaxed),
            qp.posted.len() as u64
        );

        q.completed();
        qp.outstanding -= 1;
        qp.fail = true;
        assert_eq!(q.fill(&mut qp, &stats), Err(libc::EINVAL));
        assert_eq!(stats.recv_post_errors.load(Ordering::Relaxed), 1);
        assert_eq!(q.posted(), 7);
        qp.fail = false;
        assert_eq!(q.fill(&mut qp, &stats), Ok(1));
        assert_eq!(q.posted(), 8);
    }

    /// The depth is bounded by the one constant, and is never 0.
    #[test]
    fn depth_is_bounded() {
        assert_eq!(RecvQueue::new(0).depth(), 1);
        assert_eq!(RecvQueue::new(u32::MAX).depth(), MAX_RECV_QUEUE);
        assert!(!is_recv_wr(0) && !is_recv_wr(5) && is_recv_wr(RECV_WR_TAG | 5));
    }
}
