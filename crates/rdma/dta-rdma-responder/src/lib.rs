//! The software RoCE responder: the collector side for hosts without an RDMA NIC. It plays what an RNIC does for DTA ([DTA §3, §5.3]): the passive side of
//! RDMA CM on QP1, one registered memory region per store (its whole region file: the header
//! page, read-only to peers, and the data area), and Reliable Connection responder semantics.
//!
//! Each request packet goes through the states of the IBA responder (vol. 1 §9.7.5, §9.9), named
//! as in Linux `drivers/infiniband/sw/rxe/rxe_resp.c` ([`RespState`]): check the PSN (an expected
//! packet executes; a duplicate is re-acknowledged and never re-executed, a duplicate FETCH_ADD
//! replays its saved original value; a packet ahead of the expected PSN is NAKed "PSN sequence
//! error" once per gap), check the opcode sequence (WRITE First/Middle/Last), check the R_Key
//! and bounds (a NAK "remote access error" and no byte changed), execute, complete (an
//! immediate is delivered to subscribers), acknowledge (coalesced: when AckReq is set or every
//! `ack_every` packets; atomics are always acknowledged with their original value).
//!
//! The crate: this file holds the responder, its queue pairs and the frame dispatch (address
//! check first); `rdma_cm` the passive side of RDMA CM; `adv` the memory advertisement; `resp`
//! the RC responder's states, one function each.
//!
//! Deviation, documented in `docs/rdma.md`: after a remote access error or invalid request
//! NAK a real RNIC moves the QP to the error state; this responder consumes the PSN and stays
//! in RTS, so one bad write does not tear down the translator's connection.

mod adv;
mod rdma_cm;
mod resp;

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_roce::aeth::{NakCode, Syndrome};
use dta_roce::cm::{self, IdsRepr, MadRepr, Message, RejRepr, RepRepr, MAD_LEN};
use dta_roce::{aeth, atomic_ack_eth, bth, deth, FrameRepr, Opcode, QP1, QP1_QKEY};
use dta_store::Region;
use dta_store::StoreInfo;
use dta_wire::prefix::AllowList;

use dta_rdma::adv::{emit_native, AdvertisedStore, ProtoAdv};
use dta_rdma::common::{
    addc, inc, psn_add, psn_diff, send_opcode, Endpoint, PathTemplate, DEFAULT_CM_PORT, MAX_FRAME,
};
use dta_rdma::common::{random_psn, random_qpn, random_u32};
use dta_rdma::link::Link;

/// REJ reason "invalid service ID" (IBA Table 109).
pub const REJ_INVALID_SERVICE_ID: u16 = 8;

/// Configuration of the software responder.
#[derive(Debug, Clone)]
pub struct ResponderConfig {
    /// Our MAC and IPv4 address.
    pub local: Endpoint,
    /// The RDMA CM port we listen on (TCP port space).
    pub port: u16,
    /// Acknowledge at least every this many in-order packets (and whenever AckReq is set).
    pub ack_every: u32,
    /// Path MTU for the advertisement SENDs (payload bytes per packet).
    pub mtu: usize,
    /// Atomic results kept for duplicate FETCH_ADDs (responder resources).
    pub atomic_history: usize,
    /// Retransmission timeout of our REP and advertisement SENDs.
    pub rto: Duration,
    /// A connection that receives nothing (no request, no ACK) for this long is torn down, so
    /// a translator that vanished without a DREQ does not hold its queue pair forever. `None`
    /// (the default): never, since RC has no keepalive and an idle translator is legitimate; a
    /// restarted translator's REQ replaces its old connection anyway.
    pub idle_timeout: Option<Duration>,
    /// Translator addresses a connection request (CM REQ) is accepted from; a REQ from any
    /// other source is dropped unanswered (`drop_req_not_allowed`), so a host outside it never
    /// learns the stores' R_Keys from a memory advertisement. `dta responder` requires it
    /// (`--allow`); the library default admits any source.
    pub allow: AllowList,
    /// At most one CNP per queue pair per this interval ([RoCEv2 A17.9.3] leaves the CNP
    /// generation rate to the implementation; 50 µs is DCQCN's notification-point interval, the
    /// scheme the annex's congestion control is built for).
    pub cnp_interval: Duration,
}

impl ResponderConfig {
    pub fn new(local: Endpoint) -> Self {
        ResponderConfig {
            local,
            port: DEFAULT_CM_PORT,
            ack_every: 16,
            mtu: 1024,
            atomic_history: 1024,
            rto: Duration::from_millis(50),
            idle_timeout: None,
            allow: AllowList::any(),
            cnp_interval: Duration::from_micros(50),
        }
    }
}

dta_rdma::counters!(
    /// What the responder did, by event.
    ResponderStats {
        frames,
        drop_malformed,
        drop_not_our_address,
        drop_unknown_qp,
        drop_wrong_peer,
        drop_not_connected,
        drop_req_not_allowed,
        cm_req,
        cm_rep_sent,
        cm_rej_sent,
        cm_rtu,
        cm_dreq,
        cm_replaced,
        idle_closed,
        connections,
        writes,
        write_packets,
        write_bytes,
        fetch_adds,
        immediates,
        duplicates,
        duplicate_atomics_replayed,
        acks_sent,
        ecn_ce_received,
        cnps_sent,
        naks_psn_sequence,
        naks_invalid_request,
        naks_remote_access,
        out_of_sequence_dropped,
        adv_packets_sent,
        adv_retransmits,
    }
);

/// Why the responder dropped a frame without acting on it (each has its `drop_*` counter in
/// [`ResponderStats`]). Address and queue-pair checks run before any other responder step, as
/// Linux rxe's `rxe_rcv` / `check_addr` do: an RC packet acts only on the queue pair of the peer
/// that connected it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Not a well-formed RoCEv2 frame (or CM MAD).
    Malformed,
    /// Not addressed to our IPv4 address.
    NotOurAddress,
    /// The destination QP is none of ours.
    UnknownQp,
    /// The destination QP is ours, but the source IPv4 address is not its peer's.
    WrongPeer,
    /// A CM message for no connection we know (an RTU with unknown ids).
    NotConnected,
    /// A connection request from a source outside [`ResponderConfig::allow`].
    ReqNotAllowed,
}

impl DropReason {
    pub const ALL: [DropReason; 6] = [
        DropReason::Malformed,
        DropReason::NotOurAddress,
        DropReason::UnknownQp,
        DropReason::WrongPeer,
        DropReason::NotConnected,
        DropReason::ReqNotAllowed,
    ];

    /// This reason's counter.
    pub fn counter(self, s: &ResponderStats) -> &std::sync::atomic::AtomicU64 {
        match self {
            DropReason::Malformed => &s.drop_malformed,
            DropReason::NotOurAddress => &s.drop_not_our_address,
            DropReason::UnknownQp => &s.drop_unknown_qp,
            DropReason::WrongPeer => &s.drop_wrong_peer,
            DropReason::NotConnected => &s.drop_not_connected,
            DropReason::ReqNotAllowed => &s.drop_req_not_allowed,
        }
    }
}

/// A WRITE WITH IMMEDIATE arrived: where it wrote and its immediate data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notification {
    pub store: usize,
    pub offset: u64,
    pub len: u64,
    pub imm: u32,
}

/// The steps of the responder, named as in Linux rxe (`enum resp_states`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RespState {
    GetReq,
    ChkPsn,
    ChkOpSeq,
    ChkOpValid,
    ChkRkey,
    Execute,
    Complete,
    Acknowledge,
    Duplicate,
    ErrPsnOutOfSeq,
    ErrInvalidRequest,
    ErrRkeyViolation,
    Done,
}

/// One registered memory region (a store's region file).
struct Mr {
    region: Arc<Region>,
    va: u64,
    len: u64,
    data_offset: u64,
    rkey: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QpState {
    /// REP sent, waiting for RTU (an RTR QP already receives).
    Rtr,
    /// RTU received; advertisement sent.
    Rts,
}

struct WriteCtx {
    store: usize,
    /// Next data-area offset to write.
    offset: u64,
    start: u64,
    remaining: u64,
    /// An access error was NAKed at First: consume the rest silently.
    discard: bool,
}

struct Qp {
    qpn: u32,
    remote_qpn: u32,
    path: PathTemplate,
    state: QpState,
    local_comm_id: u32,
    remote_comm_id: u32,
    rep: Vec<u8>,
    rep_sent: Instant,
    rep_tries: u32,
    epsn: u32,
    msn: u32,
    unacked: u32,
    nak_sent: bool,
    write: Option<WriteCtx>,
    atomics: Vec<(u32, u64)>,
    atomic_next: usize,
    // Our SENDs (the advertisement): reliable, go-back-N on timeout.
    spsn: u32,
    send_q: VecDeque<(u32, Vec<u8>)>,
    send_at: Instant,
    /// When the peer last sent anything on this QP (or connected it): the idle timeout.
    last_rx: Instant,
    /// When we last sent this QP's peer a CNP (rate limit).
    last_cnp: Option<Instant>,
}

/// The software responder over a [`Link`].
pub struct Responder<L: Link> {
    link: L,
    cfg: ResponderConfig,
    mrs: Vec<Mr>,
    qps: Vec<Qp>,
    stats: Arc<ResponderStats>,
    subscribers: Vec<mpsc::Sender<Notification>>,
    /// The region directory's notification ring, where each WRITE WITH IMMEDIATE becomes a
    /// notice ([`Self::set_ring`]).
    ring: Option<Arc<dta_store::notify::NotifyRing>>,
    rx: Vec<u8>,
    tx: Box<[u8; MAX_FRAME]>,
}

/// Base virtual address of store `i`'s region: stores are 2^40 bytes apart, so no address is
/// ever in two regions.
fn region_va(i: usize) -> u64 {
    (i as u64 + 1) << 40
}

impl<L: Link> Responder<L> {
    /// Register `regions` (store `i` is `regions[i]`) and listen on `link`.
    pub fn new(link: L, cfg: ResponderConfig, regions: Vec<Arc<Region>>) -> Self {
        let mut rkeys: Vec<u32> = Vec::with_capacity(regions.len());
        let mrs = regions
            .into_iter()
            .enumerate()
            .map(|(i, region)| {
                let h = region.header();
                // An R_Key is the only authorization a WRITE carries: 32 bits from the OS random
                // source, distinct per region (the lookup is by key, not by a store number).
                let rkey = loop {
                    let k = random_u32();
                    if !rkeys.contains(&k) {
                        break k;
                    }
                };
                rkeys.push(rkey);
                Mr {
                    va: region_va(i),
                    len: h.data_offset + h.data_len,
                    data_offset: h.data_offset,
                    rkey,
                    region,
                }
            })
            .collect();
        Responder {
            link,
            cfg,
            mrs,
            qps: vec![],
            stats: Arc::default(),
            subscribers: vec![],
            ring: None,
            rx: vec![0; MAX_FRAME],
            tx: Box::new([0; MAX_FRAME]),
        }
    }

    pub fn stats(&self) -> &Arc<ResponderStats> {
        &self.stats
    }

    /// Put a notice on `ring` (the collector's region directory's) for every WRITE WITH
    /// IMMEDIATE, as the co-located translator does for flagged reports: the immediate data
    /// names the primitive and the number of flagged reports
    /// ([`dta_store::notify::parse_immediate`]); the store is the one written.
    pub fn set_ring(&mut self, ring: Arc<dta_store::notify::NotifyRing>) {
        self.ring = Some(ring);
    }

    /// Receive a [`Notification`] for every WRITE WITH IMMEDIATE.
    pub fn subscribe(&mut self) -> mpsc::Receiver<Notification> {
        let (tx, rx) = mpsc::channel();
        self.subscribers.push(tx);
        rx
    }

    /// Store `i`'s registration: (address of the data area, its length, R_Key).
    pub fn registration(&self, store: usize) -> Option<(u64, u64, u32)> {
        self.mrs
            .get(store)
            .map(|m| (m.va + m.data_offset, m.len - m.data_offset, m.rkey))
    }

    /// Connected queue pairs (RTS).
    pub fn connections(&self) -> usize {
        self.qps.iter().filter(|q| q.state == QpState::Rts).count()
    }

    /// Advertisements not yet acknowledged by their peers.
    pub fn advertising(&self) -> bool {
        self.qps.iter().any(|q| !q.send_q.is_empty())
    }

    /// Serve until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        while !stop.load(Ordering::Relaxed) {
            self.poll(Duration::from_millis(5))?;
        }
        Ok(())
    }

    /// Handle every frame that arrives within `timeout` (at least one wait), then run timers.
    pub fn poll(&mut self, timeout: Duration) -> io::Result<()> {
        let mut wait = timeout;
        while let Some(n) = self.link.recv(&mut self.rx[..], wait)? {
            let rx = std::mem::take(&mut self.rx);
            let r = self.handle_frame(&rx[..n]);
            self.rx = rx;
            r?;
            wait = Duration::ZERO;
        }
        self.timers()
    }

    fn timers(&mut self) -> io::Result<()> {
        let now = Instant::now();
        let rto = self.cfg.rto;
        if let Some(idle) = self.cfg.idle_timeout {
            let before = self.qps.len();
            self.qps
                .retain(|q| now.saturating_duration_since(q.last_rx) < idle);
            addc(&self.stats.idle_closed, (before - self.qps.len()) as u64);
        }
        for q in &mut self.qps {
            if q.state == QpState::Rtr
                && now.duration_since(q.rep_sent) >= rto * 4
                && q.rep_tries < 15
            {
                q.rep_tries += 1;
                q.rep_sent = now;
                self.link.send(&q.rep)?;
                inc(&self.stats.cm_rep_sent);
            }
            if !q.send_q.is_empty() && now.duration_since(q.send_at) >= rto {
                q.send_at = now;
                for (_, f) in &q.send_q {
                    self.link.send(f)?;
                    inc(&self.stats.adv_retransmits);
                }
            }
        }
        Ok(())
    }

    fn drop_frame(&self, why: DropReason) -> io::Result<()> {
        inc(why.counter(&self.stats));
        Ok(())
    }

    /// The first responder check, before the PSN or the R_Key is looked at: the frame is for
    /// one of our queue pairs and comes from the address that queue pair was connected to
    /// (rxe `check_addr`). The UDP source port is not checked: RoCEv2 uses it for flow entropy
    /// only ([RoCEv2 A17.3]) and a peer may change it.
    fn check_addr(&self, f: &FrameRepr<'_>) -> Result<usize, DropReason> {
        let qi = self
            .qps
            .iter()
            .position(|q| q.qpn == f.bth.dest_qp)
            .ok_or(DropReason::UnknownQp)?;
        if f.ip.src != self.qps[qi].path.remote.ip {
            return Err(DropReason::WrongPeer);
        }
        Ok(qi)
    }

    fn handle_frame(&mut self, buf: &[u8]) -> io::Result<()> {
        inc(&self.stats.frames);
        let Ok(f) = FrameRepr::parse(buf) else {
            return self.drop_frame(DropReason::Malformed);
        };
        if f.ip.dst != self.cfg.local.ip {
            return self.drop_frame(DropReason::NotOurAddress);
        }
        if f.bth.dest_qp == QP1 && f.bth.opcode == Opcode::UdSendOnly {
            return self.handle_cm(&f);
        }
        let qi = match self.check_addr(&f) {
            Ok(qi) => qi,
            Err(why) => return self.drop_frame(why),
        };
        self.qps[qi].last_rx = Instant::now();
        if f.ip.congestion_experienced() {
            self.congestion_notify(qi)?;
        }
        match f.bth.opcode {
            Opcode::RcAcknowledge => {
                self.send_side_ack(qi, &f);
                Ok(())
            }
            _ => self.request(qi, &f),
        }
    }
}
