// Size: the RC requester's connection set-up, send queue, retransmission and completion all act on
// one queue pair's state (PSNs, outstanding WRITEs), so they stay together.
//! The requester: the translator's RoCEv2 sink ([`RoceSinks`], a `dta_translator::Sinks`) and
//! the active side of RDMA CM ([`connect`]).
//!
//! Reliability as RC requires ([IBTA §9.7], [DTA §5.3]; not the prototype's "drop 100 000
//! reports after any ACK"): every packet gets the next PSN and stays in a bounded retransmission
//! window until acknowledged; AckReq is set every `ack_every` packets and before a flush waits;
//! a full window blocks the translator thread, which polls for ACKs (backpressure); a "PSN
//! sequence error" NAK goes back to the NAKed PSN and resends everything from there
//! (go-back-N); an RNR NAK waits the RNR timer, doubled on each consecutive one; no progress for
//! the retransmission timeout resends from the oldest unacknowledged PSN with AckReq set (the
//! responder's ACK or NAK then tells where it is: resynchronisation), with exponential backoff
//! and a retry limit. Messages are rate limited per collector (token bucket). Everything is
//! counted in [`RequesterStats`].

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_roce::aeth::{NakCode, Syndrome};
use dta_roce::cm::{
    self, CmaHeader, DreqRepr, IdsRepr, MadRepr, Message, PathRepr, ReqRepr, MAD_LEN,
    REQ_PRIVATE_DATA_LEN,
};
use dta_roce::{aeth, atomic_eth, bth, deth, reth, FrameRepr, Opcode, QP1, QP1_QKEY};
use dta_store::{SinkError, StoreInfo};
use dta_translator::sinks::Congestion;
use dta_translator::Sinks;

use dta_rdma::adv::{parse_native, AdvError, AdvertisedStore, ProtoAdv};
use dta_rdma::common::{
    addc, inc, psn_add, psn_diff, set_ack_req, write_opcode, Endpoint, PathTemplate, BROADCAST,
    DEFAULT_CM_PORT, MAX_FRAME, PSN_MASK,
};
use dta_rdma::common::{random_psn, random_qpn, random_u32};
use dta_rdma::link::Link;

/// Configuration of a connection to one collector.
#[derive(Debug, Clone)]
pub struct RequesterConfig {
    /// Our MAC and IPv4 address.
    pub local: Endpoint,
    /// The collector's IPv4 address.
    pub collector: [u8; 4],
    /// The collector's MAC; `None`: the REQ is broadcast and the REP's source MAC is used.
    pub collector_mac: Option<[u8; 6]>,
    /// The collector's RDMA CM port.
    pub port: u16,
    /// Path MTU: payload bytes per packet (256, 512, 1024, 2048 or 4096; at most 1024 here).
    pub mtu: usize,
    /// Retransmission window, in packets.
    pub window: usize,
    /// Set AckReq at least every this many packets.
    pub ack_every: u32,
    /// Messages per second to this collector (`None`: unlimited).
    pub rate: Option<f64>,
    /// Initial retransmission timeout (doubled per consecutive timeout up to `max_rto`).
    pub rto: Duration,
    pub max_rto: Duration,
    /// Consecutive timeouts before the connection is declared lost.
    pub retry_limit: u32,
    /// CM response timeout and retries (REQ, DREQ) and the time the advertisement may take.
    pub cm_timeout: Duration,
    pub cm_retries: u32,
}

impl RequesterConfig {
    pub fn new(local: Endpoint, collector: [u8; 4]) -> Self {
        RequesterConfig {
            local,
            collector,
            collector_mac: None,
            port: DEFAULT_CM_PORT,
            mtu: 1024,
            window: 256,
            ack_every: 16,
            rate: None,
            rto: Duration::from_millis(20),
            max_rto: Duration::from_millis(500),
            retry_limit: 16,
            cm_timeout: Duration::from_millis(500),
            cm_retries: 8,
        }
    }
}

/// Connecting or running failed.
#[derive(Debug, thiserror::Error)]
pub enum RdmaError {
    #[error("link: {0}")]
    Io(#[from] io::Error),
    #[error("the collector rejected the connection (CM REJ reason {reason}{})", if *reason == 8 { ": invalid service id, nothing listens on that port" } else { "" })]
    Rejected { reason: u16 },
    #[error("no answer from the collector: {0}")]
    Timeout(&'static str),
    #[error("bad memory advertisement: {0}")]
    Advertisement(#[from] AdvError),
    #[error("connection lost: {0}")]
    Lost(String),
}

dta_rdma::counters!(
    /// What the requester did, by event.
    RequesterStats {
        writes,
        write_packets,
        write_bytes,
        immediates,
        fetch_adds,
        packets_sent,
        ack_requests,
        acks,
        atomic_acks,
        naks_psn_sequence,
        naks_invalid_request,
        naks_remote_access,
        naks_other,
        rnr_naks,
        cnps,
        go_back_n,
        retransmitted_packets,
        timeouts,
        window_full_waits,
        rate_limited_waits,
        local_rejects,
        bad_frames,
        cm_req_sent,
        cm_rep,
        cm_rej,
        adv_packets,
    }
);

struct Slot {
    psn: u32,
    len: usize,
    ack_req: bool,
    buf: Box<[u8]>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    WaitRep,
    Connected,
    WaitDrep,
    Closed,
}

struct Requester<L: Link> {
    link: L,
    cfg: RequesterConfig,
    path: PathTemplate,
    phase: Phase,
    qpn: u32,
    remote_qpn: u32,
    npsn: u32,
    window: VecDeque<Slot>,
    free: Vec<Box<[u8]>>,
    since_ack_req: u32,
    last_tx: Instant,
    rto: Duration,
    retries: u32,
    rnr_until: Option<Instant>,
    rnr_consecutive: u32,
    tokens: f64,
    refilled: Instant,
    posts: u32,
    stores: Vec<(u64, u64, u32)>,
    local_comm_id: u32,
    remote_comm_id: u32,
    tid: u64,
    rejected: Option<u16>,
    recv_epsn: u32,
    recv_nak_sent: bool,
    recv_msg: Vec<u8>,
    messages: Vec<Vec<u8>>,
    last_error: Option<String>,
    atomic_results: VecDeque<(u32, u64)>,
    /// The congestion counters when `Sinks::congestion` last read them.
    congestion_mark: [u64; 4],
    stats: Arc<RequesterStats>,
    rx: Vec<u8>,
    tx: Vec<u8>,
}

/// The translator's RoCEv2 sink to one collector: every store's writes go over one RC queue
/// pair, each store being its own registered region (address and R_Key from the
/// advertisement).
pub struct RoceSinks<L: Link> {
    inner: RefCell<Requester<L>>,
}

/// A connected collector: the sink and what the collector advertised.
pub struct Connection<L: Link> {
    pub sinks: RoceSinks<L>,
    /// The prototype-compatible advertisement (the first store).
    pub proto: ProtoAdv,
    /// Every store, with its region header and Append heads.
    pub stores: Vec<AdvertisedStore>,
}

impl<L: Link> Connection<L> {
    /// The translator's view of the stores (for `Translator::new`).
    pub fn store_infos(&self) -> Vec<StoreInfo> {
        self.stores.iter().map(|s| s.store_info()).collect()
    }
}

fn ib_mtu(mtu: usize) -> u8 {
    match mtu {
        0..=256 => 1,
        257..=512 => 2,
        513..=1024 => 3,
        1025..=2048 => 4,
        _ => 5,
    }
}

/// Connect to the collector with RDMA CM (REQ, REP, RTU) and receive its memory advertisement.
pub fn connect<L: Link>(link: L, cfg: RequesterConfig) -> Result<Connection<L>, RdmaError> {
    // QPN, starting PSN, communication id and transaction id from the OS random source: a
    // restarted translator must look like a new connection to the responder, never like a
    // retransmitted REQ of the one it replaces.
    let mtu = cfg.mtu.clamp(256, 1024);
    let cfg = RequesterConfig { mtu, ..cfg };
    let window = cfg.window.max(1);
    let remote = Endpoint {
        mac: cfg.collector_mac.unwrap_or(BROADCAST),
        ip: cfg.collector,
    };
    let qpn = random_qpn();
    let mut r = Requester {
        path: PathTemplate {
            local: cfg.local,
            remote,
            udp_src: 0xc000 | (qpn as u16 & 0x3fff),
        },
        phase: Phase::WaitRep,
        qpn,
        remote_qpn: 0,
        npsn: random_psn(),
        window: VecDeque::with_capacity(window),
        free: (0..window)
            .map(|_| vec![0u8; MAX_FRAME].into_boxed_slice())
            .collect(),
        since_ack_req: 0,
        last_tx: Instant::now(),
        rto: cfg.rto,
        retries: 0,
        rnr_until: None,
        rnr_consecutive: 0,
        tokens: 1.0,
        refilled: Instant::now(),
        posts: 0,
        stores: vec![],
        local_comm_id: random_u32(),
        remote_comm_id: 0,
        tid: (u64::from(random_u32()) << 16) & 0x0000_ffff_ffff_ffff,
        rejected: None,
        recv_epsn: 0,
        recv_nak_sent: false,
        recv_msg: vec![],
        messages: vec![],
        last_error: None,
        atomic_results: VecDeque::with_capacity(64),
        congestion_mark: [0; 4],
        stats: Arc::default(),
        rx: vec![0; MAX_FRAME],
        tx: vec![0; MAX_FRAME],
        link,
        cfg,
    };
    // REQ with retries (IBA §12.6.1: the CM response timeout).
    let mut tries = 0;
    while r.phase == Phase::WaitRep {
        if tries > r.cfg.cm_retries {
            return Err(RdmaError::Timeout("no REP to our CM REQ"));
        }
        tries += 1;
        r.send_req()?;
        let deadline = Instant::now() + r.cfg.cm_timeout;
        while r.phase == Phase::WaitRep && Instant::now() < deadline {
            r.poll_once(Duration::from_millis(5))?;
            if let Some(reason) = r.rejected {
                return Err(RdmaError::Rejected { reason });
            }
        }
    }
    // The advertisement: two SEND messages.
    let deadline = Instant::now() + r.cfg.cm_timeout * (r.cfg.cm_retries + 1);
    while r.messages.len() < 2 {
        if Instant::now() >= deadline {
            return Err(RdmaError::Timeout("no memory advertisement after RTU"));
        }
        r.poll_once(Duration::from_millis(5))?;
    }
    let proto = ProtoAdv::parse(&r.messages[0]).ok_or(AdvError::Truncated)?;
    let stores = parse_native(&r.messages[1])?;
    r.stores = stores
        .iter()
        .map(|s| (s.data_va(), s.header.data_len, s.rkey))
        .collect();
    r.messages.clear();
    Ok(Connection {
        sinks: RoceSinks {
            inner: RefCell::new(r),
        },
        proto,
        stores,
    })
}

impl<L: Link> RoceSinks<L> {
    /// The counters.
    pub fn stats(&self) -> Arc<RequesterStats> {
        self.inner.borrow().stats.clone()
    }

    /// Handle arriving ACKs and run the retransmission timers, waiting at most `timeout` for a
    /// frame. Call it when the translator is idle.
    pub fn poll(&self, timeout: Duration) -> Result<(), SinkError> {
        self.inner
            .borrow_mut()
            .poll_once(timeout)
            .map_err(|e| SinkError::Other(e.to_string()))
    }

    /// Packets sent and not yet acknowledged.
    pub fn in_flight(&self) -> usize {
        self.inner.borrow().window.len()
    }

    /// RDMA WRITE at a raw virtual address with any R_Key, bypassing the local bounds check
    /// (diagnostics and tests of the responder's checks). The outcome shows in the counters
    /// and in the error [`Sinks::flush`] returns.
    pub fn write_raw(
        &mut self,
        va: u64,
        rkey: u32,
        bytes: &[u8],
        imm: Option<u32>,
    ) -> Result<(), SinkError> {
        self.inner
            .get_mut()
            .post_write(va, rkey, bytes, imm)
            .map_err(sink_err)
    }

    /// FETCH_ADD and wait for its ATOMIC ACKNOWLEDGE: returns the original value.
    pub fn fetch_add_wait(
        &mut self,
        store: usize,
        offset: u64,
        add: u64,
    ) -> Result<u64, SinkError> {
        let r = self.inner.get_mut();
        let (va, rkey) = r.locate(store, offset, 8)?;
        let psn = r.post_fetch_add(va, rkey, add).map_err(sink_err)?;
        let deadline = Instant::now() + r.cfg.max_rto * (r.cfg.retry_limit + 1);
        loop {
            if let Some(&(_, o)) = r.atomic_results.iter().find(|(p, _)| *p == psn) {
                return Ok(o);
            }
            if let Some(e) = r.last_error.take() {
                return Err(SinkError::Other(e));
            }
            if Instant::now() > deadline {
                return Err(SinkError::Other("no ATOMIC ACKNOWLEDGE".into()));
            }
            r.poll_once(Duration::from_millis(1)).map_err(sink_err)?;
        }
    }

    /// Flush, then disconnect (DREQ, wait for DREP with retries) so the collector frees the
    /// queue pair now rather than when another REQ from us replaces it. Idempotent: once
    /// closed (by us or by the collector's DREQ) it returns at once. Dropping a connected sink
    /// sends one DREQ without waiting long, so every exit path disconnects; call this to wait
    /// for the DREP and learn whether the flush succeeded.
    pub fn disconnect(&mut self) -> Result<(), RdmaError> {
        if self.inner.get_mut().phase == Phase::Closed {
            return Ok(());
        }
        let flushed = Sinks::flush(self);
        let r = self.inner.get_mut();
        r.phase = Phase::WaitDrep;
        for _ in 0..=r.cfg.cm_retries {
            r.send_dreq()?;
            let deadline = Instant::now() + r.cfg.cm_timeout;
            while r.phase == Phase::WaitDrep && Instant::now() < deadline {
                r.poll_once(Duration::from_millis(5))?;
            }
            if r.phase == Phase::Closed {
                return flushed.map_err(|e| RdmaError::Lost(e.to_string()));
            }
        }
        Err(RdmaError::Timeout("no DREP to our DREQ"))
    }
}

impl<L: Link> Drop for RoceSinks<L> {
    /// A sink dropped while connected (an error path, a panic unwinding) still tells the
    /// collector: one DREQ, and a short wait for the DREP.
    fn drop(&mut self) {
        let r = self.inner.get_mut();
        if r.phase != Phase::Connected {
            return;
        }
        r.phase = Phase::WaitDrep;
        if r.send_dreq().is_err() {
            return;
        }
        let deadline = Instant::now() + r.cfg.cm_timeout.min(Duration::from_millis(200));
        while r.phase == Phase::WaitDrep && Instant::now() < deadline {
            if r.poll_once(Duration::from_millis(5)).is_err() {
                return;
            }
        }
    }
}

fn sink_err(e: RdmaError) -> SinkError {
    SinkError::Other(e.to_string())
}

impl<L: Link> Sinks for RoceSinks<L> {
    fn write(
        &mut self,
        store: usize,
        offset: u64,
        bytes: &[u8],
        immediate: bool,
    ) -> Result<(), SinkError> {
        // The flag travels in the announcement that follows the group's writes
        // ([`Sinks::announce`]): one WRITE WITH IMMEDIATE per flagged report, not per write.
        let _ = immediate;
        let r = self.inner.get_mut();
        let (va, rkey) = r.locate(store, offset, bytes.len() as u64)?;
        r.post_write(va, rkey, bytes, None).map_err(sink_err)
    }

    /// A zero-length WRITE WITH IMMEDIATE to store `store`, after the group's writes on the same
    /// queue pair (so the collector sees it after their data, [IBTA §9.5]): its immediate data
    /// says which store, primitive and how many flagged reports
    /// ([`dta_store::notify::immediate_data`], docs/rdma.md). The collector's responder turns
    /// it into a notice on its region directory's ring.
    fn announce(&mut self, store: usize, f: &dta_translator::sinks::Flagged<'_>) {
        let r = self.inner.get_mut();
        let imm = dta_store::notify::immediate_data(store, f.primitive as u8, f.reports);
        match r.locate(store, 0, 0) {
            Ok((va, rkey)) => {
                if r.post_write(va, rkey, &[], Some(imm)).is_err() {
                    inc(&r.stats.local_rejects);
                }
            }
            Err(_) => inc(&r.stats.local_rejects),
        }
    }

    fn fetch_add(&mut self, store: usize, offset: u64, add: u64) -> Result<(), SinkError> {
        let r = self.inner.get_mut();
        let (va, rkey) = r.locate(store, offset, 8)?;
        if offset % 8 != 0 {
            inc(&r.stats.local_rejects);
            return Err(SinkError::Misaligned { offset });
        }
        r.post_fetch_add(va, rkey, add)
            .map(|_| ())
            .map_err(sink_err)
    }

    /// One FETCH_ADD per live counter that changes, addressed below the data area at the
    /// counter's header offset (the responder registers the header page too, docs/regions.md §1).
    fn count(&mut self, store: usize, writes: u64, added: u64) -> Result<(), SinkError> {
        let r = self.inner.get_mut();
        let (va, rkey) = r.locate(store, 0, 0)?;
        let header = va - dta_store::header::HEADER_LEN as u64;
        for (at, add) in [
            (dta_store::header::field::TALLY_WRITES, writes),
            (dta_store::header::field::TALLY_ADDED, added),
        ] {
            if add != 0 {
                r.post_fetch_add(header + at as u64, rkey, add)
                    .map_err(sink_err)?;
            }
        }
        Ok(())
    }

    /// Read acknowledgements and retransmit what timed out, without waiting (the translator's
    /// idle timer calls it, so a lost packet is resent even when no reports arrive).
    fn poll(&mut self) -> Result<(), SinkError> {
        self.inner
            .get_mut()
            .poll_once(Duration::ZERO)
            .map_err(sink_err)
    }

    /// The collector's congestion signals since the last call: RNR NAKs (no receive
    /// resources), PSN-sequence NAKs (packets lost on the way), CNPs (ECN CE on the way,
    /// [RoCEv2 A17.9.3]) and waits for a full retransmission window.
    fn congestion(&mut self) -> Congestion {
        let [rnr_naks, sequence_naks, cnps, window_full] =
            self.inner.get_mut().congestion_since_last();
        Congestion {
            rnr_naks,
            sequence_naks,
            cnps,
            window_full,
        }
    }

    /// Wait until every packet sent is acknowledged; the first NAKed error since the last
    /// flush is returned.
    fn flush(&mut self) -> Result<(), SinkError> {
        let r = self.inner.get_mut();
        r.request_ack().map_err(sink_err)?;
        while !r.window.is_empty() {
            r.poll_once(Duration::from_millis(1)).map_err(sink_err)?;
        }
        match r.last_error.take() {
            Some(e) => Err(SinkError::Other(e)),
            None => Ok(()),
        }
    }
}

impl<L: Link> Requester<L> {
    /// The congestion signals counted since the last call, in the order of `Congestion`'s
    /// fields: RNR NAKs, PSN-sequence NAKs, CNPs, full-window waits.
    fn congestion_since_last(&mut self) -> [u64; 4] {
        let s = &self.stats;
        let now = [
            &s.rnr_naks,
            &s.naks_psn_sequence,
            &s.cnps,
            &s.window_full_waits,
        ]
        .map(|c| c.load(std::sync::atomic::Ordering::Relaxed));
        let d: [u64; 4] = std::array::from_fn(|i| now[i].wrapping_sub(self.congestion_mark[i]));
        self.congestion_mark = now;
        d
    }

    fn locate(&self, store: usize, offset: u64, len: u64) -> Result<(u64, u32), SinkError> {
        let &(va, data_len, rkey) = self
            .stores
            .get(store)
            .ok_or_else(|| SinkError::Other(format!("no advertised store {store}")))?;
        match offset.checked_add(len) {
            Some(end) if end <= data_len => Ok((va + offset, rkey)),
            _ => {
                inc(&self.stats.local_rejects);
                Err(SinkError::OutOfBounds { offset, len })
            }
        }
    }

    fn send_frame(&mut self, f: &FrameRepr<'_>) -> Result<(), RdmaError> {
        let n = f
            .emit(&mut self.tx)
            .map_err(|e| RdmaError::Lost(format!("emit: {e}")))?;
        self.link.send(&self.tx[..n])?;
        Ok(())
    }

    fn send_mad(&mut self, m: Message<'_>) -> Result<(), RdmaError> {
        let mut mad = [0u8; MAD_LEN];
        (MadRepr {
            transaction_id: self.tid,
            message: m,
        })
        .emit(&mut mad)
        .map_err(|e| RdmaError::Lost(format!("emit MAD: {e}")))?;
        let f = FrameRepr {
            deth: Some(deth::Repr {
                qkey: QP1_QKEY,
                src_qp: QP1,
            }),
            payload: &mad,
            ..self.path.frame(bth::Repr::new(Opcode::UdSendOnly, QP1, 0))
        };
        self.send_frame(&f)
    }

    fn send_req(&mut self) -> Result<(), RdmaError> {
        let mut pd = [0u8; REQ_PRIVATE_DATA_LEN];
        let _ = CmaHeader {
            src_port: self.path.udp_src,
            src_ip: self.cfg.local.ip,
            dst_ip: self.cfg.collector,
        }
        .emit(&mut pd);
        let req = ReqRepr {
            local_comm_id: self.local_comm_id,
            vendor_id: 0,
            service_id: cm::rdma_cm_service_id(self.cfg.port),
            local_ca_guid: 0x0200_0000_0000_0002,
            local_qkey: 0,
            local_qpn: self.qpn,
            responder_resources: 0,
            local_eecn: 0,
            initiator_depth: 16,
            remote_eecn: 0,
            remote_cm_response_timeout: 20,
            transport_service_type: 0,
            end_to_end_flow_control: false,
            starting_psn: self.npsn,
            local_cm_response_timeout: 20,
            retry_count: 7,
            pkey: 0xffff,
            path_mtu: ib_mtu(self.cfg.mtu),
            rdc_exists: false,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            srq: false,
            extended_transport_type: 0,
            primary_path: PathRepr {
                local_lid: 0xffff,
                remote_lid: 0xffff,
                local_gid: cm::ipv4_mapped_gid(self.cfg.local.ip),
                remote_gid: cm::ipv4_mapped_gid(self.cfg.collector),
                flow_label: 0,
                packet_rate: 0,
                traffic_class: 0,
                hop_limit: 64,
                sl: 0,
                subnet_local: false,
                local_ack_timeout: 14,
            },
            alternate_path: PathRepr::default(),
            sap_supported: false,
            private_data: &pd,
        };
        inc(&self.stats.cm_req_sent);
        self.send_mad(Message::Req(req))
    }

    fn send_rtu(&mut self) -> Result<(), RdmaError> {
        self.send_mad(Message::Rtu(IdsRepr {
            local_comm_id: self.local_comm_id,
            remote_comm_id: self.remote_comm_id,
            private_data: &[],
        }))
    }

    fn send_dreq(&mut self) -> Result<(), RdmaError> {
        self.send_mad(Message::Dreq(DreqRepr {
            local_comm_id: self.local_comm_id,
            remote_comm_id: self.remote_comm_id,
            remote_qpn: self.remote_qpn,
            private_data: &[],
        }))
    }

    fn refill(&mut self) {
        if let Some(rate) = self.cfg.rate {
            let now = Instant::now();
            let burst = (rate / 1000.0).max(1.0);
            self.tokens =
                (self.tokens + now.duration_since(self.refilled).as_secs_f64() * rate).min(burst);
            self.refilled = now;
        }
    }

    /// Token bucket: one token per message.
    fn rate_limit(&mut self) -> Result<(), RdmaError> {
        let Some(rate) = self.cfg.rate else {
            return Ok(());
        };
        self.refill();
        if self.tokens < 1.0 {
            inc(&self.stats.rate_limited_waits);
            while self.tokens < 1.0 {
                let need = Duration::from_secs_f64((1.0 - self.tokens) / rate);
                self.poll_once(need.min(Duration::from_millis(1)))?;
                self.refill();
            }
        }
        self.tokens -= 1.0;
        Ok(())
    }

    fn wait_space(&mut self) -> Result<(), RdmaError> {
        if self.window.len() >= self.cfg.window {
            inc(&self.stats.window_full_waits);
            self.request_ack()?;
            while self.window.len() >= self.cfg.window {
                self.poll_once(Duration::from_millis(1))?;
            }
        }
        Ok(())
    }

    /// Send one packet and keep it in the window. Returns its PSN.
    fn post(&mut self, f: FrameRepr<'_>) -> Result<u32, RdmaError> {
        self.wait_space()?;
        let psn = self.npsn;
        let mut f = f;
        f.bth.psn = psn;
        f.bth.dest_qp = self.remote_qpn;
        self.since_ack_req += 1;
        f.bth.ack_req = self.since_ack_req >= self.cfg.ack_every;
        if f.bth.ack_req {
            self.since_ack_req = 0;
            inc(&self.stats.ack_requests);
        }
        let mut buf = self
            .free
            .pop()
            .expect("a free slot when the window has room");
        let len = match f.emit(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                self.free.push(buf);
                return Err(RdmaError::Lost(format!("emit: {e}")));
            }
        };
        self.link.send(&buf[..len])?;
        inc(&self.stats.packets_sent);
        if self.window.is_empty() {
            self.last_tx = Instant::now();
        }
        self.window.push_back(Slot {
            psn,
            len,
            ack_req: f.bth.ack_req,
            buf,
        });
        self.npsn = psn_add(psn, 1);
        self.posts += 1;
        if self.posts % 16 == 0 {
            self.poll_once(Duration::ZERO)?;
        }
        Ok(psn)
    }

    fn post_write(
        &mut self,
        va: u64,
        rkey: u32,
        bytes: &[u8],
        imm: Option<u32>,
    ) -> Result<(), RdmaError> {
        self.rate_limit()?;
        let mtu = self.cfg.mtu;
        let n = bytes.len().div_ceil(mtu).max(1);
        for i in 0..n {
            let chunk = &bytes[(i * mtu).min(bytes.len())..((i + 1) * mtu).min(bytes.len())];
            let op = write_opcode(i, n, imm.is_some());
            let f = FrameRepr {
                reth: (i == 0).then_some(reth::Repr {
                    va,
                    rkey,
                    dma_len: bytes.len() as u32,
                }),
                immdt: if i + 1 == n { imm } else { None },
                payload: chunk,
                ..self.path.frame(bth::Repr::new(op, self.remote_qpn, 0))
            };
            self.post(f)?;
            inc(&self.stats.write_packets);
        }
        inc(&self.stats.writes);
        addc(&self.stats.write_bytes, bytes.len() as u64);
        if imm.is_some() {
            inc(&self.stats.immediates);
        }
        Ok(())
    }

    fn post_fetch_add(&mut self, va: u64, rkey: u32, add: u64) -> Result<u32, RdmaError> {
        self.rate_limit()?;
        let f = FrameRepr {
            atomic_eth: Some(atomic_eth::Repr {
                va,
                rkey,
                swap_add: add,
                compare: 0,
            }),
            ..self
                .path
                .frame(bth::Repr::new(Opcode::RcFetchAdd, self.remote_qpn, 0))
        };
        inc(&self.stats.fetch_adds);
        self.post(f)
    }

    /// Make sure the newest unacknowledged packet asks for an ACK (resent with AckReq if it
    /// did not).
    fn request_ack(&mut self) -> Result<(), RdmaError> {
        if let Some(s) = self.window.back_mut() {
            if !s.ack_req {
                s.ack_req = true;
                set_ack_req(&mut s.buf[..s.len]);
                self.link.send(&s.buf[..s.len])?;
                inc(&self.stats.ack_requests);
                self.since_ack_req = 0;
            }
        }
        Ok(())
    }

    /// Resend every packet from `from` on, the last with AckReq (go-back-N).
    fn go_back(&mut self, from: u32) -> Result<(), RdmaError> {
        let n = self.window.len();
        for (i, s) in self.window.iter_mut().enumerate() {
            if psn_diff(s.psn, from) >= 0 {
                if i + 1 == n && !s.ack_req {
                    s.ack_req = true;
                    set_ack_req(&mut s.buf[..s.len]);
                }
                self.link.send(&s.buf[..s.len])?;
                inc(&self.stats.retransmitted_packets);
            }
        }
        self.last_tx = Instant::now();
        Ok(())
    }

    /// Everything up to and including `psn` is acknowledged.
    fn ack_through(&mut self, psn: u32) {
        let mut progress = false;
        while let Some(s) = self.window.front() {
            if psn_diff(s.psn, psn) <= 0 {
                let s = self.window.pop_front().unwrap();
                self.free.push(s.buf);
                progress = true;
            } else {
                break;
            }
        }
        if progress {
            self.retries = 0;
            self.rto = self.cfg.rto;
            self.last_tx = Instant::now();
        }
    }

    fn poll_once(&mut self, timeout: Duration) -> Result<(), RdmaError> {
        let mut wait = timeout;
        while let Some(n) = self.link.recv(&mut self.rx, wait)? {
            let rx = std::mem::take(&mut self.rx);
            let r = self.handle_frame(&rx[..n]);
            self.rx = rx;
            r?;
            wait = Duration::ZERO;
        }
        self.timers()
    }

    fn timers(&mut self) -> Result<(), RdmaError> {
        if self.phase != Phase::Connected || self.window.is_empty() {
            return Ok(());
        }
        let now = Instant::now();
        if let Some(t) = self.rnr_until {
            if now >= t {
                self.rnr_until = None;
                let from = self.window.front().map(|s| s.psn).unwrap_or(self.npsn);
                self.go_back(from)?;
            }
            return Ok(());
        }
        if now.duration_since(self.last_tx) >= self.rto {
            inc(&self.stats.timeouts);
            self.retries += 1;
            if self.retries > self.cfg.retry_limit {
                return Err(RdmaError::Lost(format!(
                    "no acknowledgement after {} retransmissions",
                    self.cfg.retry_limit
                )));
            }
            self.rto = (self.rto * 2).min(self.cfg.max_rto);
            let from = self.window.front().map(|s| s.psn).unwrap_or(self.npsn);
            inc(&self.stats.go_back_n);
            self.go_back(from)?;
        }
        Ok(())
    }

    fn handle_frame(&mut self, buf: &[u8]) -> Result<(), RdmaError> {
        let f = match FrameRepr::parse(buf) {
            Ok(f) => f,
            Err(_) => {
                inc(&self.stats.bad_frames);
                return Ok(());
            }
        };
        if f.ip.dst != self.cfg.local.ip || f.ip.src != self.cfg.collector {
            return Ok(());
        }
        if f.bth.dest_qp == QP1 && f.bth.opcode == Opcode::UdSendOnly {
            return self.handle_cm(&f);
        }
        if f.bth.dest_qp != self.qpn || self.phase == Phase::WaitRep {
            return Ok(());
        }
        match f.bth.opcode {
            Opcode::RcAcknowledge | Opcode::RcAtomicAcknowledge => self.handle_ack(&f),
            // A congestion notification ([RoCEv2 A17.9.3]): the collector's side saw ECN CE on
            // our packets. Counted, and reported by `Sinks::congestion` to the translator's
            // meter, which slows the writes down; the queue pair itself keeps its pace.
            Opcode::Cnp => {
                inc(&self.stats.cnps);
                Ok(())
            }
            Opcode::RcSendFirst
            | Opcode::RcSendMiddle
            | Opcode::RcSendLast
            | Opcode::RcSendOnly => self.handle_send(&f),
            _ => Ok(()),
        }
    }

    fn handle_cm(&mut self, f: &FrameRepr<'_>) -> Result<(), RdmaError> {
        let Ok(mad) = MadRepr::parse(f.payload) else {
            inc(&self.stats.bad_frames);
            return Ok(());
        };
        match mad.message {
            Message::Rep(rep) if rep.remote_comm_id == self.local_comm_id => {
                inc(&self.stats.cm_rep);
                if self.phase == Phase::WaitRep {
                    self.remote_qpn = rep.local_qpn;
                    self.recv_epsn = rep.starting_psn;
                    self.remote_comm_id = rep.local_comm_id;
                    self.path.remote.mac = f.eth.src;
                    self.phase = Phase::Connected;
                }
                // Also for a retransmitted REP: our RTU was lost.
                self.send_rtu()
            }
            Message::Rej(rej) if rej.remote_comm_id == self.local_comm_id => {
                inc(&self.stats.cm_rej);
                self.rejected = Some(rej.reason);
                Ok(())
            }
            Message::Drep(d) if d.remote_comm_id == self.local_comm_id => {
                self.phase = Phase::Closed;
                Ok(())
            }
            Message::Dreq(d) if d.remote_comm_id == self.local_comm_id => {
                self.send_mad(Message::Drep(IdsRepr {
                    local_comm_id: self.local_comm_id,
                    remote_comm_id: self.remote_comm_id,
                    private_data: &[],
                }))?;
                self.phase = Phase::Closed;
                self.last_error = Some("the collector disconnected".into());
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn handle_ack(&mut self, f: &FrameRepr<'_>) -> Result<(), RdmaError> {
        let Some(a) = f.aeth else { return Ok(()) };
        let psn = f.bth.psn;
        match a.syndrome {
            Syndrome::Ack { .. } => {
                self.rnr_consecutive = 0;
                if let Some(ack) = f.atomic_ack_eth {
                    inc(&self.stats.atomic_acks);
                    if self.atomic_results.len() == 64 {
                        self.atomic_results.pop_front();
                    }
                    self.atomic_results.push_back((psn, ack.original));
                } else {
                    inc(&self.stats.acks);
                }
                self.ack_through(psn);
            }
            Syndrome::RnrNak { timer } => {
                inc(&self.stats.rnr_naks);
                self.ack_through(psn_add(psn, PSN_MASK));
                self.rnr_consecutive += 1;
                let wait = rnr_delay(timer) * (1u32 << self.rnr_consecutive.min(6));
                self.rnr_until = Some(Instant::now() + wait);
            }
            Syndrome::Nak(NakCode::PsnSequenceError) => {
                inc(&self.stats.naks_psn_sequence);
                self.ack_through(psn_add(psn, PSN_MASK));
                if self.window.front().is_some_and(|s| s.psn == psn) {
                    inc(&self.stats.go_back_n);
                    self.go_back(psn)?;
                }
            }
            Syndrome::Nak(code) => {
                match code {
                    NakCode::RemoteAccessError => inc(&self.stats.naks_remote_access),
                    NakCode::InvalidRequest => inc(&self.stats.naks_invalid_request),
                    _ => inc(&self.stats.naks_other),
                }
                if self.window.iter().any(|s| s.psn == psn) {
                    if self.last_error.is_none() {
                        self.last_error =
                            Some(format!("the collector NAKed PSN {psn:#x}: {}", code.name()));
                    }
                    // The responder consumed the PSN (docs/rdma.md, "Reliability").
                    self.ack_through(psn);
                }
            }
        }
        Ok(())
    }

    /// A packet of the advertisement (or any SEND): in order it is taken and ACKed when asked;
    /// a duplicate is re-ACKed; one ahead is NAKed once.
    fn handle_send(&mut self, f: &FrameRepr<'_>) -> Result<(), RdmaError> {
        let d = psn_diff(f.bth.psn, self.recv_epsn);
        let ack = |s: &mut Self, syn: Syndrome, psn: u32| {
            let fr = FrameRepr {
                aeth: Some(aeth::Repr {
                    syndrome: syn,
                    msn: 0,
                }),
                ..s.path
                    .frame(bth::Repr::new(Opcode::RcAcknowledge, s.remote_qpn, psn))
            };
            s.send_frame(&fr)
        };
        if d == 0 {
            inc(&self.stats.adv_packets);
            self.recv_msg.extend_from_slice(f.payload);
            if matches!(f.bth.opcode, Opcode::RcSendOnly | Opcode::RcSendLast) {
                let m = std::mem::take(&mut self.recv_msg);
                self.messages.push(m);
            }
            self.recv_epsn = psn_add(self.recv_epsn, 1);
            self.recv_nak_sent = false;
            if f.bth.ack_req {
                ack(self, Syndrome::Ack { credits: 31 }, f.bth.psn)?;
            }
        } else if d < 0 {
            ack(
                self,
                Syndrome::Ack { credits: 31 },
                psn_add(self.recv_epsn, PSN_MASK),
            )?;
        } else if !self.recv_nak_sent {
            self.recv_nak_sent = true;
            ack(
                self,
                Syndrome::Nak(NakCode::PsnSequenceError),
                self.recv_epsn,
            )?;
        }
        Ok(())
    }
}

/// The RNR NAK timer field's delay ([IBTA] Table 45), coarsened: 0 is 655.36 ms, 1..=31 go
/// from 0.01 ms to 491.52 ms roughly doubling.
pub fn rnr_delay(timer: u8) -> Duration {
    const US: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
        3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    ];
    Duration::from_micros(u64::from(US[usize::from(timer & 31)]))
}
