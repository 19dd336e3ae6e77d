// Size: the RC responder is one state machine over one queue pair table, one function per state as
// in Linux rxe's resp.c; splitting the states across files would hide their order.
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
//! Deviation, documented in `docs/rdma.md`: after a remote access error or invalid request
//! NAK a real RNIC moves the QP to the error state; this responder consumes the PSN and stays
//! in RTS, so one bad write does not tear down the translator's connection.

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

    // ---- RDMA CM, passive side (IBA §12.6, Linux cm.c / cma.c) ----

    fn handle_cm(&mut self, f: &FrameRepr<'_>) -> io::Result<()> {
        let Ok(mad) = MadRepr::parse(f.payload) else {
            return self.drop_frame(DropReason::Malformed);
        };
        let peer = Endpoint {
            mac: f.eth.src,
            ip: f.ip.src,
        };
        match mad.message {
            Message::Req(req) => {
                if !self
                    .cfg
                    .allow
                    .allows(std::net::IpAddr::from(std::net::Ipv4Addr::from(peer.ip)))
                {
                    return self.drop_frame(DropReason::ReqNotAllowed);
                }
                inc(&self.stats.cm_req);
                // A retransmitted REQ: answer with the same REP.
                if let Some(q) = self
                    .qps
                    .iter()
                    .find(|q| q.remote_comm_id == req.local_comm_id && q.path.remote.ip == peer.ip)
                {
                    let rep = q.rep.clone();
                    inc(&self.stats.cm_rep_sent);
                    return self.link.send(&rep);
                }
                if cm::rdma_cm_port(req.service_id) != Some(self.cfg.port) {
                    let rej = RejRepr {
                        local_comm_id: 0,
                        remote_comm_id: req.local_comm_id,
                        message_rejected: 0,
                        reject_info_length: 0,
                        reason: REJ_INVALID_SERVICE_ID,
                        ari: &[],
                        private_data: &[],
                    };
                    inc(&self.stats.cm_rej_sent);
                    return self.send_mad(peer, mad.transaction_id, Message::Rej(rej));
                }
                // A new REQ from a peer we already have a connection with, under another
                // communication id: that peer restarted without a DREQ (killed, crashed). Its
                // old queue pair can never be used again; the new connection replaces it.
                let before = self.qps.len();
                self.qps.retain(|q| q.path.remote.ip != peer.ip);
                addc(&self.stats.cm_replaced, (before - self.qps.len()) as u64);
                // QPN, starting PSN and communication id from the OS random source, so that
                // neither a blind spoofer nor a restarted responder's old peer can predict them.
                let qpn = loop {
                    let q = random_qpn();
                    if self.qps.iter().all(|o| o.qpn != q) {
                        break q;
                    }
                };
                let spsn = random_psn();
                let local_comm_id = random_u32();
                let rep = RepRepr {
                    local_comm_id,
                    remote_comm_id: req.local_comm_id,
                    local_qkey: 0,
                    local_qpn: qpn,
                    local_eecn: 0,
                    starting_psn: spsn,
                    responder_resources: req.initiator_depth,
                    initiator_depth: req.responder_resources,
                    target_ack_delay: 15,
                    failover_accepted: 0,
                    end_to_end_flow_control: false,
                    rnr_retry_count: 7,
                    srq: false,
                    vendor_id: 0,
                    local_ca_guid: 0x0200_0000_0000_0001,
                    private_data: &[],
                };
                let path = PathTemplate {
                    local: self.cfg.local,
                    remote: peer,
                    udp_src: 0xc000 | (qpn as u16 & 0x3fff),
                };
                let mut mad_buf = [0u8; MAD_LEN];
                let _ = (MadRepr {
                    transaction_id: mad.transaction_id,
                    message: Message::Rep(rep),
                })
                .emit(&mut mad_buf);
                let rep_frame = self.ud_frame(&path, &mad_buf);
                self.qps.push(Qp {
                    qpn,
                    remote_qpn: req.local_qpn,
                    path,
                    state: QpState::Rtr,
                    local_comm_id,
                    remote_comm_id: req.local_comm_id,
                    rep: rep_frame.clone(),
                    rep_sent: Instant::now(),
                    rep_tries: 0,
                    epsn: req.starting_psn,
                    msn: 0,
                    unacked: 0,
                    nak_sent: false,
                    write: None,
                    atomics: vec![(u32::MAX, 0); self.cfg.atomic_history.max(1)],
                    atomic_next: 0,
                    spsn,
                    send_q: VecDeque::new(),
                    send_at: Instant::now(),
                    last_rx: Instant::now(),
                    last_cnp: None,
                });
                inc(&self.stats.cm_rep_sent);
                self.link.send(&rep_frame)
            }
            Message::Rtu(rtu) => {
                let Some(qi) = self.qps.iter().position(|q| {
                    q.local_comm_id == rtu.remote_comm_id
                        && q.remote_comm_id == rtu.local_comm_id
                        && q.path.remote.ip == peer.ip
                }) else {
                    return self.drop_frame(DropReason::NotConnected);
                };
                inc(&self.stats.cm_rtu);
                if self.qps[qi].state == QpState::Rtr {
                    self.qps[qi].state = QpState::Rts;
                    inc(&self.stats.connections);
                    self.advertise(qi)?;
                }
                Ok(())
            }
            Message::Dreq(dreq) => {
                inc(&self.stats.cm_dreq);
                let drep = IdsRepr {
                    local_comm_id: dreq.remote_comm_id,
                    remote_comm_id: dreq.local_comm_id,
                    private_data: &[],
                };
                if let Some(qi) = self.qps.iter().position(|q| {
                    q.local_comm_id == dreq.remote_comm_id
                        && q.remote_comm_id == dreq.local_comm_id
                        && q.path.remote.ip == peer.ip
                }) {
                    self.qps.remove(qi);
                }
                // Answer even an unknown (already closed) connection: the DREP may have been lost.
                self.send_mad(peer, mad.transaction_id, Message::Drep(drep))
            }
            _ => Ok(()),
        }
    }

    fn ud_frame(&self, path: &PathTemplate, mad: &[u8]) -> Vec<u8> {
        let f = FrameRepr {
            deth: Some(deth::Repr {
                qkey: QP1_QKEY,
                src_qp: QP1,
            }),
            payload: mad,
            ..path.frame(bth::Repr::new(Opcode::UdSendOnly, QP1, 0))
        };
        let mut b = vec![0u8; f.buffer_len()];
        let _ = f.emit(&mut b);
        b
    }

    fn send_mad(&mut self, peer: Endpoint, tid: u64, m: Message<'_>) -> io::Result<()> {
        let mut mad = [0u8; MAD_LEN];
        if (MadRepr {
            transaction_id: tid,
            message: m,
        })
        .emit(&mut mad)
        .is_err()
        {
            return Ok(());
        }
        let path = PathTemplate {
            local: self.cfg.local,
            remote: peer,
            udp_src: 0xc000,
        };
        let f = self.ud_frame(&path, &mad);
        self.link.send(&f)
    }

    /// Queue and send the two advertisement messages (`adv` module).
    fn advertise(&mut self, qi: usize) -> io::Result<()> {
        let stores: Vec<AdvertisedStore> = self
            .mrs
            .iter()
            .map(|m| {
                let append_heads = StoreInfo::from_region(&m.region)
                    .map(|s| s.append_heads)
                    .unwrap_or_default();
                AdvertisedStore {
                    region_va: m.va,
                    region_len: m.len,
                    rkey: m.rkey,
                    header: m.region.header().clone(),
                    append_heads,
                }
            })
            .collect();
        let proto = stores
            .first()
            .map(|s| ProtoAdv {
                addr: s.data_va(),
                length: s.header.data_len.min(u32::MAX as u64) as u32,
                rkey: s.rkey,
            })
            .unwrap_or(ProtoAdv {
                addr: 0,
                length: 0,
                rkey: 0,
            });
        let native = emit_native(&stores);
        let mtu = self.cfg.mtu;
        let q = &mut self.qps[qi];
        for msg in [&proto.emit()[..], &native[..]] {
            let n = msg.len().div_ceil(mtu).max(1);
            for (i, chunk) in msg.chunks(mtu).enumerate() {
                let mut b = bth::Repr::new(send_opcode(i, n), q.remote_qpn, q.spsn);
                b.ack_req = i + 1 == n || i % 8 == 7;
                let f = FrameRepr {
                    payload: chunk,
                    ..q.path.frame(b)
                };
                let mut buf = vec![0u8; f.buffer_len()];
                let _ = f.emit(&mut buf);
                q.send_q.push_back((q.spsn, buf));
                q.spsn = psn_add(q.spsn, 1);
            }
        }
        q.send_at = Instant::now();
        for (_, f) in &q.send_q {
            self.link.send(f)?;
            inc(&self.stats.adv_packets_sent);
        }
        Ok(())
    }

    /// An ACK for our SENDs.
    fn send_side_ack(&mut self, qi: usize, f: &FrameRepr<'_>) {
        let q = &mut self.qps[qi];
        let Some(a) = f.aeth else { return };
        let upto = match a.syndrome {
            Syndrome::Ack { .. } => f.bth.psn,
            _ => psn_add(f.bth.psn, 0x00ff_ffff), // psn - 1: resend from psn on the timer
        };
        while let Some((p, _)) = q.send_q.front() {
            if psn_diff(*p, upto) <= 0 {
                q.send_q.pop_front();
                q.send_at = Instant::now();
            } else {
                break;
            }
        }
        if !matches!(a.syndrome, Syndrome::Ack { .. }) {
            q.send_at = Instant::now() - self.cfg.rto; // resend now
        }
    }

    // ---- RC responder (IBA §9.7.5; rxe_resp.c) ----

    fn request(&mut self, qi: usize, f: &FrameRepr<'_>) -> io::Result<()> {
        let mut state = RespState::GetReq;
        let op = f.bth.opcode;
        let mut nak = NakCode::InvalidRequest;
        let mut orig = 0u64;
        loop {
            state = match state {
                RespState::GetReq => {
                    if !op.is_rc() {
                        RespState::ErrInvalidRequest
                    } else {
                        RespState::ChkPsn
                    }
                }
                RespState::ChkPsn => {
                    let q = &self.qps[qi];
                    let d = psn_diff(f.bth.psn, q.epsn);
                    if d == 0 {
                        RespState::ChkOpSeq
                    } else if d < 0 {
                        RespState::Duplicate
                    } else {
                        RespState::ErrPsnOutOfSeq
                    }
                }
                RespState::ChkOpSeq => {
                    let in_write = self.qps[qi].write.is_some();
                    let continues = matches!(
                        op,
                        Opcode::RcWriteMiddle | Opcode::RcWriteLast | Opcode::RcWriteLastImm
                    );
                    if in_write != continues {
                        RespState::ErrInvalidRequest
                    } else {
                        RespState::ChkOpValid
                    }
                }
                RespState::ChkOpValid => match op {
                    Opcode::RcWriteFirst
                    | Opcode::RcWriteMiddle
                    | Opcode::RcWriteLast
                    | Opcode::RcWriteLastImm
                    | Opcode::RcWriteOnly
                    | Opcode::RcWriteOnlyImm
                    | Opcode::RcFetchAdd => RespState::ChkRkey,
                    _ => RespState::ErrInvalidRequest,
                },
                RespState::ChkRkey => match self.check_access(qi, f) {
                    Ok(()) => RespState::Execute,
                    Err(code) => {
                        nak = code;
                        if code == NakCode::RemoteAccessError {
                            RespState::ErrRkeyViolation
                        } else {
                            RespState::ErrInvalidRequest
                        }
                    }
                },
                RespState::Execute => match self.execute(qi, f) {
                    Ok(o) => {
                        orig = o;
                        RespState::Complete
                    }
                    Err(code) => {
                        nak = code;
                        RespState::ErrRkeyViolation
                    }
                },
                RespState::Complete => {
                    let q = &mut self.qps[qi];
                    q.epsn = psn_add(q.epsn, 1);
                    q.nak_sent = false;
                    q.unacked += 1;
                    if matches!(
                        op,
                        Opcode::RcWriteOnly
                            | Opcode::RcWriteOnlyImm
                            | Opcode::RcWriteLast
                            | Opcode::RcWriteLastImm
                            | Opcode::RcFetchAdd
                    ) {
                        q.msn = psn_add(q.msn, 1);
                    }
                    RespState::Acknowledge
                }
                RespState::Acknowledge => {
                    let q = &mut self.qps[qi];
                    if op == Opcode::RcFetchAdd {
                        q.atomics[q.atomic_next] = (f.bth.psn, orig);
                        q.atomic_next = (q.atomic_next + 1) % q.atomics.len();
                        q.unacked = 0;
                        self.send_atomic_ack(qi, f.bth.psn, orig)?;
                    } else if f.bth.ack_req || q.unacked >= self.cfg.ack_every {
                        q.unacked = 0;
                        self.send_ack(qi, Syndrome::Ack { credits: 31 }, f.bth.psn)?;
                    }
                    RespState::Done
                }
                RespState::Duplicate => {
                    inc(&self.stats.duplicates);
                    let q = &self.qps[qi];
                    if op == Opcode::RcFetchAdd {
                        // Replay the saved result: never add twice (IBA §9.7.5.1.5 / rxe).
                        if let Some(&(_, o)) = q.atomics.iter().find(|(p, _)| *p == f.bth.psn) {
                            inc(&self.stats.duplicate_atomics_replayed);
                            self.send_atomic_ack(qi, f.bth.psn, o)?;
                        }
                    } else {
                        let prev = psn_add(q.epsn, 0x00ff_ffff);
                        self.send_ack(qi, Syndrome::Ack { credits: 31 }, prev)?;
                    }
                    RespState::Done
                }
                RespState::ErrPsnOutOfSeq => {
                    inc(&self.stats.out_of_sequence_dropped);
                    if !self.qps[qi].nak_sent {
                        self.qps[qi].nak_sent = true;
                        inc(&self.stats.naks_psn_sequence);
                        let e = self.qps[qi].epsn;
                        self.send_ack(qi, Syndrome::Nak(NakCode::PsnSequenceError), e)?;
                    }
                    RespState::Done
                }
                RespState::ErrInvalidRequest | RespState::ErrRkeyViolation => {
                    if state == RespState::ErrRkeyViolation {
                        inc(&self.stats.naks_remote_access);
                        nak = NakCode::RemoteAccessError;
                    } else {
                        inc(&self.stats.naks_invalid_request);
                    }
                    // Consume the PSN (see the module doc), drop a broken write sequence.
                    let q = &mut self.qps[qi];
                    if matches!(op, Opcode::RcWriteFirst) {
                        q.write = Some(WriteCtx {
                            store: 0,
                            offset: 0,
                            start: 0,
                            remaining: 0,
                            discard: true,
                        });
                    } else if !matches!(op, Opcode::RcWriteMiddle) {
                        q.write = None;
                    }
                    q.epsn = psn_add(q.epsn, 1);
                    q.nak_sent = false;
                    q.unacked = 0;
                    self.send_ack(qi, Syndrome::Nak(nak), f.bth.psn)?;
                    RespState::Done
                }
                RespState::Done => return Ok(()),
            }
        }
    }

    /// R_Key and bounds (IBA §9.7.5.1.3, C9-88 ff.). Only the data area is writable.
    fn check_access(&self, qi: usize, f: &FrameRepr<'_>) -> Result<(), NakCode> {
        let (va, rkey, len, atomic) = match (f.reth, f.atomic_eth) {
            (Some(r), _) => (r.va, r.rkey, u64::from(r.dma_len), false),
            (None, Some(a)) => (a.va, a.rkey, 8, true),
            (None, None) => {
                // Middle / Last: continue the write in progress.
                let w = self.qps[qi].write.as_ref().ok_or(NakCode::InvalidRequest)?;
                if w.discard {
                    return Ok(());
                }
                let last = matches!(f.bth.opcode, Opcode::RcWriteLast | Opcode::RcWriteLastImm);
                let n = f.payload.len() as u64;
                if n > w.remaining || (last && n != w.remaining) || (!last && n == 0) {
                    return Err(NakCode::InvalidRequest);
                }
                return Ok(());
            }
        };
        let mr = self
            .mrs
            .iter()
            .find(|m| m.rkey == rkey)
            .ok_or(NakCode::RemoteAccessError)?;
        let data_va = mr.va + mr.data_offset;
        let end = va.checked_add(len).ok_or(NakCode::RemoteAccessError)?;
        // Besides the data area, a FETCH_ADD may reach the header's live counters
        // (docs/regions.md §1).
        if atomic && is_tally(va.wrapping_sub(mr.va)) && va >= mr.va {
            return Ok(());
        }
        if va < data_va || end > mr.va + mr.len {
            return Err(NakCode::RemoteAccessError);
        }
        if atomic && (va - data_va) % 8 != 0 {
            return Err(NakCode::InvalidRequest);
        }
        let only = matches!(f.bth.opcode, Opcode::RcWriteOnly | Opcode::RcWriteOnlyImm);
        if only && f.payload.len() as u64 != len {
            return Err(NakCode::InvalidRequest);
        }
        if f.bth.opcode == Opcode::RcWriteFirst
            && (f.payload.len() as u64 >= len || f.payload.is_empty())
        {
            return Err(NakCode::InvalidRequest);
        }
        Ok(())
    }

    fn execute(&mut self, qi: usize, f: &FrameRepr<'_>) -> Result<u64, NakCode> {
        let op = f.bth.opcode;
        let locate = |mrs: &[Mr], rkey: u32, va: u64| -> (usize, u64) {
            let s = mrs.iter().position(|m| m.rkey == rkey).unwrap_or(0);
            (s, va - (mrs[s].va + mrs[s].data_offset))
        };
        match op {
            Opcode::RcFetchAdd => {
                let a = f.atomic_eth.ok_or(NakCode::InvalidRequest)?;
                let s = self.mrs.iter().position(|m| m.rkey == a.rkey).unwrap_or(0);
                let at = a.va.wrapping_sub(self.mrs[s].va);
                let mem = self.mrs[s].region.mem();
                let o = if is_tally(at) {
                    mem.fetch_add_tally(at, a.swap_add)
                } else {
                    let (_, off) = locate(&self.mrs, a.rkey, a.va);
                    mem.fetch_add_u64(off, a.swap_add)
                }
                .map_err(|_| NakCode::RemoteAccessError)?;
                inc(&self.stats.fetch_adds);
                Ok(o)
            }
            Opcode::RcWriteOnly | Opcode::RcWriteOnlyImm | Opcode::RcWriteFirst => {
                let r = f.reth.ok_or(NakCode::InvalidRequest)?;
                let (s, off) = locate(&self.mrs, r.rkey, r.va);
                self.mrs[s]
                    .region
                    .mem()
                    .write(off, f.payload)
                    .map_err(|_| NakCode::RemoteAccessError)?;
                inc(&self.stats.write_packets);
                addc(&self.stats.write_bytes, f.payload.len() as u64);
                if op == Opcode::RcWriteFirst {
                    self.qps[qi].write = Some(WriteCtx {
                        store: s,
                        offset: off + f.payload.len() as u64,
                        start: off,
                        remaining: u64::from(r.dma_len) - f.payload.len() as u64,
                        discard: false,
                    });
                } else {
                    inc(&self.stats.writes);
                    if let Some(imm) = f.immdt {
                        self.notify(s, off, f.payload.len() as u64, imm);
                    }
                }
                Ok(0)
            }
            Opcode::RcWriteMiddle | Opcode::RcWriteLast | Opcode::RcWriteLastImm => {
                let w = self.qps[qi].write.as_mut().ok_or(NakCode::InvalidRequest)?;
                let last = op != Opcode::RcWriteMiddle;
                if !w.discard {
                    self.mrs[w.store]
                        .region
                        .mem()
                        .write(w.offset, f.payload)
                        .map_err(|_| NakCode::RemoteAccessError)?;
                    w.offset += f.payload.len() as u64;
                    w.remaining -= f.payload.len() as u64;
                    inc(&self.stats.write_packets);
                    addc(&self.stats.write_bytes, f.payload.len() as u64);
                }
                if last {
                    let w = self.qps[qi].write.take().unwrap();
                    if !w.discard {
                        inc(&self.stats.writes);
                        if let Some(imm) = f.immdt {
                            self.notify(w.store, w.start, w.offset - w.start, imm);
                        }
                    }
                }
                Ok(0)
            }
            _ => Err(NakCode::InvalidRequest),
        }
    }

    fn notify(&mut self, store: usize, offset: u64, len: u64, imm: u32) {
        inc(&self.stats.immediates);
        let n = Notification {
            store,
            offset,
            len,
            imm,
        };
        self.subscribers.retain(|s| s.send(n).is_ok());
        if let (Some(ring), Some(mr)) = (&self.ring, self.mrs.get(store)) {
            ring.announce_immediate(&mr.region.header().name, imm);
        }
    }

    /// A packet of queue pair `qi` arrived marked ECN CE: tell its requester with a CNP
    /// ([RoCEv2 A17.9.3]: BTH opcode 0x81 to the requester's QP, BECN set, 16 reserved bytes),
    /// at most one per `cnp_interval` per queue pair. The packet itself is handled as usual.
    fn congestion_notify(&mut self, qi: usize) -> io::Result<()> {
        inc(&self.stats.ecn_ce_received);
        let now = Instant::now();
        let q = &mut self.qps[qi];
        if q.last_cnp
            .is_some_and(|t| now.saturating_duration_since(t) < self.cfg.cnp_interval)
        {
            return Ok(());
        }
        q.last_cnp = Some(now);
        let f = FrameRepr {
            payload: &[0; dta_roce::CNP_PAYLOAD_LEN],
            ..q.path.frame(bth::Repr {
                becn: true,
                ..bth::Repr::new(Opcode::Cnp, q.remote_qpn, 0)
            })
        };
        if let Ok(n) = f.emit(&mut self.tx[..]) {
            inc(&self.stats.cnps_sent);
            self.link.send(&self.tx[..n])?;
        }
        Ok(())
    }

    fn send_ack(&mut self, qi: usize, syndrome: Syndrome, psn: u32) -> io::Result<()> {
        let q = &self.qps[qi];
        let f = FrameRepr {
            aeth: Some(aeth::Repr {
                syndrome,
                msn: q.msn,
            }),
            ..q.path
                .frame(bth::Repr::new(Opcode::RcAcknowledge, q.remote_qpn, psn))
        };
        if let Ok(n) = f.emit(&mut self.tx[..]) {
            inc(&self.stats.acks_sent);
            self.link.send(&self.tx[..n])?;
        }
        Ok(())
    }

    fn send_atomic_ack(&mut self, qi: usize, psn: u32, original: u64) -> io::Result<()> {
        let q = &self.qps[qi];
        let f = FrameRepr {
            aeth: Some(aeth::Repr {
                syndrome: Syndrome::Ack { credits: 31 },
                msn: q.msn,
            }),
            atomic_ack_eth: Some(atomic_ack_eth::Repr { original }),
            ..q.path.frame(bth::Repr::new(
                Opcode::RcAtomicAcknowledge,
                q.remote_qpn,
                psn,
            ))
        };
        if let Ok(n) = f.emit(&mut self.tx[..]) {
            inc(&self.stats.acks_sent);
            self.link.send(&self.tx[..n])?;
        }
        Ok(())
    }
}

/// Whether header byte `at` of a region is one of its live counters, the only header words a
/// peer may FETCH_ADD to (`docs/regions.md` §1).
fn is_tally(at: u64) -> bool {
    at == dta_store::header::field::TALLY_WRITES as u64
        || at == dta_store::header::field::TALLY_ADDED as u64
}
