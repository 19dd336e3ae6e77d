// Size: one rdma-core device context (verbs and RDMA CM calls over FFI) and its safe wrappers,
// which must agree on every resource's lifetime; about 90 lines are unit tests.
//! The RNIC collector proper (feature `rdma-core`): libibverbs and librdmacm through `rdma-sys`.
//!
//! [DTA §5.3] ("Collector RDMA Service"): the collector registers its per-primitive memory,
//! listens with RDMA CM and advertises the memory with SENDs; from then on the NIC executes the
//! translator's WRITEs and FETCH_ADDs and the collector's CPU does nothing per report.
//!
//! Sequence (`docs/rdma.md`, "With a ConnectX NIC (rdma-core)"):
//! `rdma_create_event_channel`, `rdma_create_id(RDMA_PS_TCP)`, `rdma_bind_addr`, `rdma_listen`;
//! on `CONNECT_REQUEST`: per device context once `ibv_alloc_pd` + `ibv_reg_mr` of every region's
//! whole mapping ([`crate::plan::REGION_ACCESS`]), then a CQ and an RC QP (`rdma_create_qp`) and
//! `rdma_accept` with responder resources for the translator's atomics; on `ESTABLISHED` the
//! advertisement SENDs; on `DISCONNECTED` the QP is destroyed and the regions stay registered.
//!
//! Flagged reports arrive as WRITE WITH IMMEDIATE, each consuming one receive WQE
//! ([IBTA §9.4.3]): every QP gets [`RnicConfig::recv_queue`] WQEs before `rdma_accept`, its CQ is
//! armed on the device's completion channel (polled with the CM channel), and each receive
//! completion is reposted and announced on the notification ring ([`crate::recv`]).

use std::ffi::CStr;
use std::io;
use std::net::SocketAddr;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Connection requests are the peers' to send: refusals are logged at most every
/// [`dta_log::DEFAULT_INTERVAL`] (counted exactly in the stats).
static REJECTED: dta_log::Throttle = dta_log::Throttle::new(dta_log::DEFAULT_INTERVAL);

use dta_store::notify::NotifyRing;

use rdma_sys::*;
use serde::Serialize;

use crate::config::RnicConfig;
use crate::plan::{self, MappedRegion, PlanError, Registration};
use crate::recv::{self, PostRecv, RecvCompletion, RecvQueue, RecvStats};

/// What went wrong, with the call that failed and the OS error.
#[derive(Debug, thiserror::Error)]
pub enum RnicError {
    /// `err` is part of the message, deliberately not a `#[source]` (printed once).
    #[error("{call}: {err}{hint}")]
    Verbs {
        call: &'static str,
        err: io::Error,
        hint: &'static str,
    },
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Config(#[from] crate::config::RnicConfigError),
    #[error("the RDMA device was removed")]
    DeviceRemoved,
    /// `ibv_get_device_list` failed with ENOSYS: the kernel has no RDMA support (no
    /// `/sys/class/infiniband_verbs`), as on this project's CI machines.
    #[error("ibv_get_device_list: the kernel has no RDMA subsystem (ENOSYS){NO_DEVICE_HINT}")]
    NoSubsystem,
}

const NO_DEVICE_HINT: &str = " (is there an RDMA device? `ibv_devices` should list it and \
`rdma link` show it ACTIVE on the netdev holding the listen address; the kernel needs the \
rdma_cm and ib_uverbs modules)";

fn last_err(call: &'static str) -> RnicError {
    RnicError::Verbs {
        call,
        err: io::Error::last_os_error(),
        hint: "",
    }
}

fn rc_err(call: &'static str, rc: i32) -> RnicError {
    // librdmacm returns -1 with errno; the inline verbs return the error number.
    let source = if rc == -1 {
        io::Error::last_os_error()
    } else {
        io::Error::from_raw_os_error(rc.abs())
    };
    RnicError::Verbs {
        call,
        err: source,
        hint: "",
    }
}

fn with_hint(e: RnicError) -> RnicError {
    match e {
        RnicError::Verbs { call, err, .. } => RnicError::Verbs {
            call,
            err,
            hint: NO_DEVICE_HINT,
        },
        e => e,
    }
}

/// The RDMA devices libibverbs sees (`ibv_get_device_list`), by name. A kernel without RDMA
/// support is [`RnicError::NoSubsystem`], an RDMA subsystem without devices an empty list.
pub fn device_names() -> Result<Vec<String>, RnicError> {
    let mut n = 0i32;
    // SAFETY: n is a valid out pointer; the list is freed below.
    let list = unsafe { ibv_get_device_list(&mut n) };
    if list.is_null() {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOSYS) {
            return Err(RnicError::NoSubsystem);
        }
        return Err(RnicError::Verbs {
            call: "ibv_get_device_list",
            err: e,
            hint: NO_DEVICE_HINT,
        });
    }
    let mut out = Vec::with_capacity(n.max(0) as usize);
    for i in 0..n.max(0) as usize {
        // SAFETY: the list holds n valid device pointers; the names are NUL-terminated.
        unsafe {
            let d = *list.add(i);
            let name = ibv_get_device_name(d);
            if !name.is_null() {
                out.push(CStr::from_ptr(name).to_string_lossy().into_owned());
            }
        }
    }
    // SAFETY: list came from ibv_get_device_list.
    unsafe { ibv_free_device_list(list) };
    Ok(out)
}

/// Counters of the RNIC collector (connection-level, plus one per receive completion: a
/// flagged report's WRITE WITH IMMEDIATE; the NIC does the other reports' work alone).
#[derive(Debug, Default, Serialize)]
pub struct RnicStats {
    pub connect_requests: AtomicU64,
    pub accepted: AtomicU64,
    pub rejected: AtomicU64,
    /// Connection requests from a source outside the allow-list, rejected unanswered.
    pub rejected_not_allowed: AtomicU64,
    pub established: AtomicU64,
    pub disconnected: AtomicU64,
    pub connect_errors: AtomicU64,
    pub advert_sends_ok: AtomicU64,
    pub advert_send_errors: AtomicU64,
    /// Receive WQEs and their completions (WRITE WITH IMMEDIATE).
    pub recv: RecvStats,
}

fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// One device context (`id->verbs`): its protection domain and the regions registered in it.
struct Device {
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    mrs: Vec<*mut ibv_mr>,
    rkeys: Vec<u32>,
    max_qp_rd_atom: u8,
    max_qp_init_rd_atom: u8,
    /// Where this device's CQs signal completions (polled with the CM channel).
    comp_channel: *mut ibv_comp_channel,
}

/// One accepted connection.
struct Conn {
    id: *mut rdma_cm_id,
    device: usize,
    cq: *mut ibv_cq,
    /// The advertisement messages, back to back, and their registration.
    send_buf: Vec<u8>,
    send_mr: *mut ibv_mr,
    sends_outstanding: u32,
    /// The receive WQEs posted on this QP.
    recv: RecvQueue,
    peer: Option<SocketAddr>,
}

/// `ibv_post_recv` of one WQE without a scatter list: a WRITE WITH IMMEDIATE writes where its
/// RETH says and needs the WQE only for its completion.
struct QpRecv(*mut ibv_qp);

impl PostRecv for QpRecv {
    fn post_recv(&mut self, wr_id: u64) -> Result<(), i32> {
        let mut wr = ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: ptr::null_mut(),
            num_sge: 0,
        };
        let mut bad: *mut ibv_recv_wr = ptr::null_mut();
        // SAFETY: the QP is live (owned by a connection); the WR is valid for the call (the
        // provider copies it into the receive queue).
        match unsafe { ibv_post_recv(self.0, &mut wr, &mut bad) } {
            0 => Ok(()),
            rc => Err(rc.abs()),
        }
    }
}

/// The RNIC collector: regions registered on demand, RDMA CM listening.
pub struct RnicCollector {
    cfg: RnicConfig,
    regions: Vec<MappedRegion>,
    regs: Vec<Registration>,
    prototype_index: usize,
    channel: *mut rdma_event_channel,
    listener: *mut rdma_cm_id,
    devices: Vec<Device>,
    conns: Vec<Conn>,
    stats: RnicStats,
    /// Store names in the collector's order: an immediate's store number indexes it.
    store_names: Vec<String>,
    /// The region directory's notification ring ([`Self::set_ring`]).
    ring: Option<Arc<NotifyRing>>,
}

fn sockaddr_of(a: &SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: an all-zero sockaddr_storage is valid; we fill the family-specific prefix.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match a {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in.
            let sin = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
        }
        SocketAddr::V6(v6) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_addr.s6_addr = v6.ip().octets();
            sin6.sin6_scope_id = v6.scope_id();
        }
    }
    ss
}

/// The peer's address of a connection id, for log lines.
fn peer_of(id: *mut rdma_cm_id) -> Option<SocketAddr> {
    // SAFETY: id is a live rdma_cm_id; rdma_get_peer_addr returns a pointer into it.
    unsafe {
        if id.is_null() {
            return None;
        }
        let sa = rdma_get_peer_addr(&*id) as *const libc::sockaddr;
        match (*sa).sa_family as i32 {
            libc::AF_INET => {
                let sin = &*(sa as *const libc::sockaddr_in);
                Some(SocketAddr::from((
                    sin.sin_addr.s_addr.to_ne_bytes(),
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                let sin6 = &*(sa as *const libc::sockaddr_in6);
                Some(SocketAddr::from((
                    sin6.sin6_addr.s6_addr,
                    u16::from_be(sin6.sin6_port),
                )))
            }
            _ => None,
        }
    }
}

fn event_name(ev: rdma_cm_event_type::Type) -> String {
    // SAFETY: rdma_event_str returns a static string for any value.
    unsafe {
        let s = rdma_event_str(ev);
        if s.is_null() {
            format!("event {ev}")
        } else {
            CStr::from_ptr(s).to_string_lossy().into_owned()
        }
    }
}

impl RnicCollector {
    /// Map `collector`'s regions and listen with RDMA CM on `cfg.listen`. The regions are
    /// registered with the listen address's device at once, or, when listening on the wildcard
    /// address, on the first connection request from each device.
    pub fn new(
        cfg: RnicConfig,
        collector: &dta_collector::Collector,
    ) -> Result<RnicCollector, RnicError> {
        cfg.validate()?;
        let regions = MappedRegion::from_collector(collector)?;
        let names: Vec<&str> = regions.iter().map(|r| r.name()).collect();
        let prototype_index = cfg.prototype_index(&names)?;
        let need = cfg.sends_per_connection();
        if need > cfg.send_queue {
            return Err(crate::config::RnicConfigError(format!(
                "send_queue {} is smaller than the {need} advertisement SENDs per connection",
                cfg.send_queue
            ))
            .into());
        }
        plan::check_access(plan::REGION_ACCESS)?;
        let regs: Vec<Registration> = regions.iter().map(|r| r.registration()).collect();
        let store_names = regs.iter().map(|r| r.name.clone()).collect();
        // Fail now, not at the first connection, if the adverts cannot be built.
        let probe: Vec<_> = regions
            .iter()
            .map(|r| r.advertised(0))
            .collect::<Result<_, _>>()?;
        plan::adverts(&probe, prototype_index)?;

        let mut me = RnicCollector {
            cfg,
            regions,
            regs,
            prototype_index,
            channel: ptr::null_mut(),
            listener: ptr::null_mut(),
            devices: Vec::new(),
            conns: Vec::new(),
            stats: RnicStats::default(),
            store_names,
            ring: None,
        };
        // SAFETY: plain constructor calls; every pointer is checked and owned by `me`, whose
        // Drop releases it.
        unsafe {
            me.channel = rdma_create_event_channel();
            if me.channel.is_null() {
                return Err(with_hint(last_err("rdma_create_event_channel")));
            }
            let fd = (*me.channel).fd;
            let fl = libc::fcntl(fd, libc::F_GETFL);
            if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
                return Err(last_err("fcntl(O_NONBLOCK) on the CM channel"));
            }
            let mut id = ptr::null_mut();
            if rdma_create_id(
                me.channel,
                &mut id,
                ptr::null_mut(),
                rdma_port_space::RDMA_PS_TCP,
            ) != 0
            {
                return Err(with_hint(last_err("rdma_create_id(RDMA_PS_TCP)")));
            }
            me.listener = id;
            let mut ss = sockaddr_of(&me.cfg.listen);
            if rdma_bind_addr(id, &mut ss as *mut _ as *mut libc::sockaddr as *mut _) != 0 {
                return Err(with_hint(last_err("rdma_bind_addr")));
            }
            if rdma_listen(id, me.cfg.backlog.min(i32::MAX as u32) as i32) != 0 {
                return Err(with_hint(last_err("rdma_listen")));
            }
            // Bound to a specific address, the id already has its device: register now, so
            // that a registration failure (locked-memory limit) shows at start, not at the
            // first connection. Bound to the wildcard address, registration waits for it.
            let ctx = (*id).verbs;
            if !ctx.is_null() {
                me.device(ctx)?;
            }
        }
        Ok(me)
    }

    pub fn stats(&self) -> &RnicStats {
        &self.stats
    }

    /// Put a notice on `ring` (the region directory's) for every WRITE WITH IMMEDIATE, as the
    /// software responder does ([`NotifyRing::announce_immediate`]).
    pub fn set_ring(&mut self, ring: Arc<NotifyRing>) {
        self.ring = Some(ring);
    }

    /// The registrations (one per store, in store order).
    pub fn registrations(&self) -> &[Registration] {
        &self.regs
    }

    /// Connections currently accepted.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Serve until `stop` is set: CM events and the advertisement SENDs' completions.
    pub fn run(&mut self, stop: &AtomicBool) -> Result<(), RnicError> {
        while !stop.load(Ordering::Relaxed) {
            self.poll_once(100)?;
        }
        Ok(())
    }

    /// Wait up to `timeout_ms` for CM events or completions, handle the CM events, then reap
    /// completions (advertisement SENDs, receive WQEs) and repost receive WQEs.
    pub fn poll_once(&mut self, timeout_ms: i32) -> Result<(), RnicError> {
        // SAFETY: the channels are live for as long as self.
        let mut pfds: Vec<libc::pollfd> = std::iter::once(unsafe { (*self.channel).fd })
            .chain(self.devices.iter().map(|d| unsafe { (*d.comp_channel).fd }))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: pfds holds valid pollfds.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(RnicError::Verbs {
                    call: "poll",
                    err: e,
                    hint: "",
                });
            }
        }
        loop {
            let mut ev: *mut rdma_cm_event = ptr::null_mut();
            // SAFETY: non-blocking channel; ev is a valid out pointer.
            if unsafe { rdma_get_cm_event(self.channel, &mut ev) } != 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::WouldBlock {
                    break;
                }
                return Err(RnicError::Verbs {
                    call: "rdma_get_cm_event",
                    err: e,
                    hint: "",
                });
            }
            self.handle_event(ev)?;
        }
        self.take_cq_events();
        self.reap_completions();
        Ok(())
    }

    /// Acknowledge every CQ event waiting on the devices' completion channels and re-arm those
    /// CQs; [`Self::reap_completions`] then polls them (after re-arming, so nothing that
    /// completes in between goes unsignalled).
    fn take_cq_events(&mut self) {
        for d in &self.devices {
            loop {
                let mut cq: *mut ibv_cq = ptr::null_mut();
                let mut cq_ctx: *mut libc::c_void = ptr::null_mut();
                // SAFETY: a live, non-blocking channel; valid out pointers.
                if unsafe { ibv_get_cq_event(d.comp_channel, &mut cq, &mut cq_ctx) } != 0 {
                    break;
                }
                // SAFETY: cq came from the channel and is live (a CQ is destroyed only by
                // close(), and every event of it is acknowledged here at once).
                unsafe {
                    ibv_ack_cq_events(cq, 1);
                    ibv_req_notify_cq(cq, 0);
                }
            }
        }
    }

    fn handle_event(&mut self, ev: *mut rdma_cm_event) -> Result<(), RnicError> {
        // SAFETY: ev is a live event until rdma_ack_cm_event; we copy what we need first.
        let (kind, id, status, initiator_depth_req, responder_res_req) = unsafe {
            (
                (*ev).event,
                (*ev).id,
                (*ev).status,
                (*ev).param.conn.initiator_depth,
                (*ev).param.conn.responder_resources,
            )
        };
        let mut destroy_after_ack = false;
        let mut result = Ok(());
        match kind {
            rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST => {
                inc(&self.stats.connect_requests);
                let peer = peer_of(id);
                if !self.cfg.admits(peer.map(|p| p.ip())) {
                    inc(&self.stats.rejected_not_allowed);
                    dta_log::warn_throttled!(
                        REJECTED,
                        "rejecting a connection request from {peer:?}: outside allow"
                    );
                    // SAFETY: id is the request's new id, not yet accepted.
                    unsafe { rdma_reject(id, ptr::null(), 0) };
                    destroy_after_ack = true;
                } else {
                    match self.accept(id, initiator_depth_req, responder_res_req) {
                        Ok(()) => {
                            inc(&self.stats.accepted);
                            tracing::info!(?peer, "connection request accepted");
                        }
                        Err(e) => {
                            inc(&self.stats.rejected);
                            dta_log::warn_throttled!(
                                REJECTED,
                                "rejecting a connection request from {peer:?}: {e}"
                            );
                            // SAFETY: id is the request's new id, not yet accepted.
                            unsafe { rdma_reject(id, ptr::null(), 0) };
                            destroy_after_ack = true;
                        }
                    }
                }
            }
            rdma_cm_event_type::RDMA_CM_EVENT_ESTABLISHED => {
                inc(&self.stats.established);
                if let Some(ci) = self.conns.iter().position(|c| c.id == id) {
                    if let Err(e) = self.advertise(ci) {
                        tracing::warn!(peer = ?self.conns[ci].peer, "advertising: {e}");
                        inc(&self.stats.advert_send_errors);
                        // SAFETY: a connected id.
                        unsafe { rdma_disconnect(id) };
                    }
                }
            }
            rdma_cm_event_type::RDMA_CM_EVENT_DISCONNECTED => {
                inc(&self.stats.disconnected);
                if let Some(ci) = self.conns.iter().position(|c| c.id == id) {
                    tracing::info!(peer = ?self.conns[ci].peer, "disconnected");
                    self.close(ci);
                    destroy_after_ack = true;
                }
            }
            rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_ERROR
            | rdma_cm_event_type::RDMA_CM_EVENT_UNREACHABLE
            | rdma_cm_event_type::RDMA_CM_EVENT_REJECTED => {
                inc(&self.stats.connect_errors);
                tracing::warn!(
                    "{} (status {status}) on a connection being accepted",
                    event_name(kind)
                );
                if let Some(ci) = self.conns.iter().position(|c| c.id == id) {
                    self.close(ci);
                    destroy_after_ack = true;
                }
            }
            rdma_cm_event_type::RDMA_CM_EVENT_DEVICE_REMOVAL => {
                result = Err(RnicError::DeviceRemoved);
            }
            rdma_cm_event_type::RDMA_CM_EVENT_TIMEWAIT_EXIT
            | rdma_cm_event_type::RDMA_CM_EVENT_ADDR_CHANGE => {
                tracing::debug!("{}", event_name(kind));
            }
            other => tracing::debug!("ignored {}", event_name(other)),
        }
        // SAFETY: ev came from rdma_get_cm_event and is acked exactly once; an id is destroyed
        // only after its event is acked (rdma_destroy_id waits for outstanding events).
        unsafe {
            rdma_ack_cm_event(ev);
            if destroy_after_ack {
                rdma_destroy_id(id);
            }
        }
        result
    }

    /// The device of `ctx`, registering every region in it on first use.
    fn device(&mut self, ctx: *mut ibv_context) -> Result<usize, RnicError> {
        if let Some(i) = self.devices.iter().position(|d| d.ctx == ctx) {
            return Ok(i);
        }
        // SAFETY: ctx is the live device context of a connection request; everything created
        // is stored in `dev` and released by Drop (or below on failure).
        unsafe {
            let mut attr: ibv_device_attr = std::mem::zeroed();
            let rc = ibv_query_device(ctx, &mut attr);
            if rc != 0 {
                return Err(rc_err("ibv_query_device", rc));
            }
            let pd = ibv_alloc_pd(ctx);
            if pd.is_null() {
                return Err(last_err("ibv_alloc_pd"));
            }
            let comp_channel = ibv_create_comp_channel(ctx);
            if comp_channel.is_null() {
                let e = last_err("ibv_create_comp_channel");
                ibv_dealloc_pd(pd);
                return Err(e);
            }
            let mut dev = Device {
                ctx,
                pd,
                mrs: Vec::new(),
                rkeys: Vec::new(),
                max_qp_rd_atom: attr.max_qp_rd_atom.clamp(0, 255) as u8,
                max_qp_init_rd_atom: attr.max_qp_init_rd_atom.clamp(0, 255) as u8,
                comp_channel,
            };
            let fd = (*comp_channel).fd;
            let fl = libc::fcntl(fd, libc::F_GETFL);
            if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
                let e = last_err("fcntl(O_NONBLOCK) on the completion channel");
                Self::release_device(&dev);
                return Err(e);
            }
            for (r, m) in self.regs.iter().zip(&self.regions) {
                let mr = ibv_reg_mr(
                    pd,
                    m.as_mut_ptr() as *mut libc::c_void,
                    r.length as usize,
                    r.access as i32,
                );
                if mr.is_null() {
                    let e = io::Error::last_os_error();
                    Self::release_device(&dev);
                    return Err(RnicError::Verbs {
                        call: "ibv_reg_mr",
                        err: io::Error::new(
                            e.kind(),
                            format!(
                                "store {:?} ({} bytes): {e} (raise `ulimit -l` for locked memory)",
                                r.name, r.length
                            ),
                        ),
                        hint: "",
                    });
                }
                dev.rkeys.push((*mr).rkey);
                dev.mrs.push(mr);
                tracing::info!(
                    store = %r.name,
                    addr = format_args!("{:#x}", r.addr),
                    length = r.length,
                    rkey = format_args!("{:#x}", (*mr).rkey),
                    "registered"
                );
            }
            self.devices.push(dev);
            Ok(self.devices.len() - 1)
        }
    }

    fn accept(
        &mut self,
        id: *mut rdma_cm_id,
        initiator_depth_req: u8,
        responder_res_req: u8,
    ) -> Result<(), RnicError> {
        // SAFETY: id is the new connection's id; its verbs context is set on CONNECT_REQUEST.
        let ctx = unsafe { (*id).verbs };
        let di = self.device(ctx)?;
        let (pd, max_rd, max_init, comp_channel) = {
            let d = &self.devices[di];
            (
                d.pd,
                d.max_qp_rd_atom,
                d.max_qp_init_rd_atom,
                d.comp_channel,
            )
        };
        let cqe = (self.cfg.send_queue + self.cfg.recv_queue) as i32;
        // SAFETY: ctx and its completion channel are live; the CQ is destroyed in close() or on
        // failure below.
        let cq = unsafe { ibv_create_cq(ctx, cqe, ptr::null_mut(), comp_channel, 0) };
        if cq.is_null() {
            return Err(last_err("ibv_create_cq"));
        }
        // SAFETY: a live CQ; armed once here, re-armed after each of its events.
        let rc = unsafe { ibv_req_notify_cq(cq, 0) };
        if rc != 0 {
            // SAFETY: cq was created above and is used by nothing.
            unsafe { ibv_destroy_cq(cq) };
            return Err(rc_err("ibv_req_notify_cq", rc));
        }
        // SAFETY: zeroed ibv_qp_init_attr is valid; the fields we need are set.
        let mut qpa: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        qpa.send_cq = cq;
        qpa.recv_cq = cq;
        qpa.qp_type = ibv_qp_type::IBV_QPT_RC;
        qpa.sq_sig_all = 0;
        qpa.cap.max_send_wr = self.cfg.send_queue;
        qpa.cap.max_recv_wr = self.cfg.recv_queue;
        qpa.cap.max_send_sge = 1;
        qpa.cap.max_recv_sge = 1;
        qpa.cap.max_inline_data = self.cfg.max_inline;
        // SAFETY: id, pd and the attributes are valid.
        if unsafe { rdma_create_qp(id, pd, &mut qpa) } != 0 {
            let e = last_err("rdma_create_qp");
            // SAFETY: cq was created above and is used by nothing.
            unsafe { ibv_destroy_cq(cq) };
            return Err(e);
        }
        // Receive WQEs before the translator can send its first WRITE WITH IMMEDIATE.
        let mut rq = RecvQueue::new(self.cfg.recv_queue);
        // SAFETY: rdma_create_qp set the id's QP.
        if let Err(errno) = rq.fill(&mut QpRecv(unsafe { (*id).qp }), &self.stats.recv) {
            // SAFETY: the QP and CQ were created above for this id only.
            unsafe {
                rdma_destroy_qp(id);
                ibv_destroy_cq(cq);
            }
            return Err(rc_err("ibv_post_recv", errno));
        }
        // [DTA §5.2]: Key-Increment is an RDMA FETCH_ADD, an atomic the translator initiates; the
        // number we may have outstanding as responder is `responder_resources`.
        let (rr, idepth) = self.cfg.accept_depths(max_rd, max_init, responder_res_req);
        let _ = initiator_depth_req; // the requester's wish; the device limit decides.
                                     // SAFETY: zeroed rdma_conn_param is valid (no private data).
        let mut cp: rdma_conn_param = unsafe { std::mem::zeroed() };
        cp.responder_resources = rr;
        cp.initiator_depth = idepth;
        cp.rnr_retry_count = 7;
        cp.retry_count = 7;
        // SAFETY: id has a QP; cp is valid for the call.
        if unsafe { rdma_accept(id, &mut cp) } != 0 {
            let e = last_err("rdma_accept");
            // SAFETY: the QP and CQ were created above for this id only.
            unsafe {
                rdma_destroy_qp(id);
                ibv_destroy_cq(cq);
            }
            return Err(e);
        }
        self.conns.push(Conn {
            id,
            device: di,
            cq,
            send_buf: Vec::new(),
            send_mr: ptr::null_mut(),
            sends_outstanding: 0,
            recv: rq,
            peer: peer_of(id),
        });
        Ok(())
    }

    /// Post the advertisement SENDs on connection `ci` (prototype first, then native).
    fn advertise(&mut self, ci: usize) -> Result<(), RnicError> {
        let di = self.conns[ci].device;
        let stores: Vec<_> = self
            .regions
            .iter()
            .zip(&self.devices[di].rkeys)
            .map(|(r, &rkey)| r.advertised(rkey))
            .collect::<Result<_, _>>()?;
        let adverts = plan::adverts(&stores, self.prototype_index)?;
        let msgs = adverts.messages(&self.cfg);
        let conn = &mut self.conns[ci];
        conn.send_buf = msgs.concat();
        // SAFETY: the buffer lives in conn until close(), which deregisters it first.
        let mr = unsafe {
            ibv_reg_mr(
                self.devices[di].pd,
                conn.send_buf.as_mut_ptr() as *mut libc::c_void,
                conn.send_buf.len(),
                plan::ACCESS_LOCAL_WRITE as i32,
            )
        };
        if mr.is_null() {
            return Err(last_err("ibv_reg_mr (advertisement buffer)"));
        }
        conn.send_mr = mr;
        // SAFETY: mr is live.
        let lkey = unsafe { (*mr).lkey };
        let mut sges: Vec<ibv_sge> = Vec::with_capacity(msgs.len());
        let mut at = 0usize;
        for m in &msgs {
            sges.push(ibv_sge {
                addr: conn.send_buf.as_ptr() as u64 + at as u64,
                length: m.len() as u32,
                lkey,
            });
            at += m.len();
        }
        // SAFETY: zeroed send WRs are valid; each points at one SGE above and at the next WR.
        let mut wrs: Vec<ibv_send_wr> = (0..sges.len())
            .map(|_| unsafe { std::mem::zeroed() })
            .collect();
        let n = wrs.len();
        let base = wrs.as_mut_ptr();
        for (i, wr) in wrs.iter_mut().enumerate() {
            wr.wr_id = i as u64;
            wr.sg_list = &mut sges[i];
            wr.num_sge = 1;
            wr.opcode = ibv_wr_opcode::IBV_WR_SEND;
            wr.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0;
            // SAFETY: i + 1 < n indexes inside wrs.
            wr.next = if i + 1 < n {
                unsafe { base.add(i + 1) }
            } else {
                ptr::null_mut()
            };
        }
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        // SAFETY: the QP is connected; the WR chain and SGEs outlive the call (the HCA copies
        // WRs at post time; the buffer itself stays registered until close()).
        let rc = unsafe { ibv_post_send((*conn.id).qp, base, &mut bad) };
        if rc != 0 {
            return Err(rc_err("ibv_post_send (advertisement)", rc));
        }
        conn.sends_outstanding = n as u32;
        Ok(())
    }

    /// Poll every connection's CQ: advertisement SEND completions are counted, receive
    /// completions announced ([`recv::announce_completion`]) and their WQEs reposted. Bounded:
    /// at most one receive queue's worth of completions per connection per call.
    fn reap_completions(&mut self) {
        // SAFETY: zeroed work completions are valid out slots.
        let mut wcs: [ibv_wc; 32] = unsafe { std::mem::zeroed() };
        let RnicCollector {
            conns,
            stats,
            store_names,
            ring,
            ..
        } = self;
        let ring = ring.as_deref();
        for c in conns.iter_mut() {
            let mut budget = (c.recv.depth() + c.sends_outstanding) as usize;
            while budget > 0 {
                // SAFETY: the CQ is live; wcs holds wcs.len() slots.
                let n = unsafe { ibv_poll_cq(c.cq, wcs.len() as i32, wcs.as_mut_ptr()) };
                let n = n.max(0) as usize;
                for wc in &wcs[..n] {
                    if recv::is_recv_wr(wc.wr_id) {
                        c.recv.completed();
                        let with_imm = wc.wc_flags & ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0;
                        let rc = RecvCompletion {
                            success: wc.status == ibv_wc_status::IBV_WC_SUCCESS,
                            write_with_imm: wc.opcode == ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM
                                && with_imm,
                            // SAFETY: a plain u32 either way; meaningful with IBV_WC_WITH_IMM.
                            imm_data_be: unsafe { wc.imm_data_invalidated_rkey_union.imm_data },
                        };
                        if let Err(why) =
                            recv::announce_completion(&rc, store_names, ring, &stats.recv)
                        {
                            tracing::debug!(peer = ?c.peer, ?why, "receive completion not announced");
                        }
                        continue;
                    }
                    c.sends_outstanding = c.sends_outstanding.saturating_sub(1);
                    if wc.status == ibv_wc_status::IBV_WC_SUCCESS {
                        inc(&stats.advert_sends_ok);
                    } else {
                        inc(&stats.advert_send_errors);
                        // SAFETY: ibv_wc_status_str returns a static string.
                        let s = unsafe { CStr::from_ptr(ibv_wc_status_str(wc.status)) };
                        tracing::warn!(peer = ?c.peer, "advertisement SEND failed: {}", s.to_string_lossy());
                    }
                }
                budget = budget.saturating_sub(n);
                if n < wcs.len() {
                    break;
                }
            }
            // SAFETY: the connection's QP is live until close().
            let qp = unsafe { (*c.id).qp };
            if !qp.is_null() {
                if let Err(errno) = c.recv.fill(&mut QpRecv(qp), &stats.recv) {
                    // The QP is in the error state (the peer is going away): its WQEs are
                    // flushed and its DISCONNECTED event closes it.
                    tracing::debug!(peer = ?c.peer, errno, "reposting receive WQEs");
                }
            }
        }
    }

    /// Destroy connection `ci`'s QP, CQ and send buffer (the id is destroyed by the caller after
    /// the event is acked). The regions stay registered.
    fn close(&mut self, ci: usize) {
        let c = self.conns.swap_remove(ci);
        // SAFETY: these objects belong to this connection only.
        unsafe { Self::release_conn(&c) };
    }

    unsafe fn release_conn(c: &Conn) {
        if !(*c.id).qp.is_null() {
            rdma_destroy_qp(c.id);
        }
        if !c.send_mr.is_null() {
            ibv_dereg_mr(c.send_mr);
        }
        if !c.cq.is_null() {
            ibv_destroy_cq(c.cq);
        }
    }

    fn release_device(d: &Device) {
        // SAFETY: the MRs and the PD belong to this device entry only.
        unsafe {
            for &mr in &d.mrs {
                ibv_dereg_mr(mr);
            }
            ibv_dealloc_pd(d.pd);
            if !d.comp_channel.is_null() {
                ibv_destroy_comp_channel(d.comp_channel);
            }
        }
    }
}

impl Drop for RnicCollector {
    fn drop(&mut self) {
        // SAFETY: everything below was created by this collector and is released once, in the
        // reverse order of creation.
        unsafe {
            for c in self.conns.drain(..) {
                rdma_disconnect(c.id);
                Self::release_conn(&c);
                rdma_destroy_id(c.id);
            }
            for d in self.devices.drain(..) {
                Self::release_device(&d);
            }
            if !self.listener.is_null() {
                rdma_destroy_id(self.listener);
            }
            if !self.channel.is_null() {
                rdma_destroy_event_channel(self.channel);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    extern "C" {
        static dta_rnic_layout: [usize; 41];
        static dta_rnic_layout_len: usize;
    }

    #[test]
    fn rust_layouts_match_the_installed_c_headers() {
        // SAFETY: constant arrays defined in csrc/layout.c; the length is checked first.
        let (c, len) = unsafe { (dta_rnic_layout, dta_rnic_layout_len) };
        assert_eq!(len, c.len());
        let rust = [
            size_of::<ibv_sge>(),
            size_of::<ibv_send_wr>(),
            offset_of!(ibv_send_wr, sg_list),
            offset_of!(ibv_send_wr, num_sge),
            offset_of!(ibv_send_wr, opcode),
            offset_of!(ibv_send_wr, send_flags),
            size_of::<ibv_wc>(),
            offset_of!(ibv_wc, status),
            size_of::<ibv_qp_init_attr>(),
            offset_of!(ibv_qp_init_attr, cap),
            offset_of!(ibv_qp_init_attr, qp_type),
            size_of::<rdma_conn_param>(),
            offset_of!(rdma_conn_param, responder_resources),
            offset_of!(rdma_conn_param, initiator_depth),
            offset_of!(rdma_conn_param, rnr_retry_count),
            size_of::<rdma_cm_event>(),
            offset_of!(rdma_cm_event, event),
            offset_of!(rdma_cm_event, status),
            offset_of!(rdma_cm_event, param),
            offset_of!(rdma_cm_id, verbs),
            offset_of!(rdma_cm_id, qp),
            offset_of!(rdma_cm_id, route),
            offset_of!(ibv_mr, lkey),
            offset_of!(ibv_mr, rkey),
            offset_of!(ibv_device_attr, max_qp_rd_atom),
            offset_of!(ibv_device_attr, max_qp_init_rd_atom),
            plan::ACCESS_LOCAL_WRITE as usize,
            plan::ACCESS_REMOTE_WRITE as usize,
            plan::ACCESS_REMOTE_READ as usize,
            plan::ACCESS_REMOTE_ATOMIC as usize,
            rdma_port_space::RDMA_PS_TCP as usize,
            ibv_wr_opcode::IBV_WR_SEND as usize,
            ibv_send_flags::IBV_SEND_SIGNALED.0 as usize,
            size_of::<ibv_recv_wr>(),
            offset_of!(ibv_recv_wr, sg_list),
            offset_of!(ibv_recv_wr, num_sge),
            offset_of!(ibv_wc, opcode),
            offset_of!(ibv_wc, imm_data_invalidated_rkey_union),
            offset_of!(ibv_wc, wc_flags),
            ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM as usize,
            ibv_wc_flags::IBV_WC_WITH_IMM.0 as usize,
        ];
        assert_eq!(rust, c, "Rust (left) and C (right) disagree");
        assert_eq!(size_of::<ibv_sge>(), 16);
    }

    #[test]
    fn our_access_flags_are_libibverbs_values() {
        assert_eq!(
            plan::ACCESS_LOCAL_WRITE,
            ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
        );
        assert_eq!(
            plan::ACCESS_REMOTE_WRITE,
            ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
        );
        assert_eq!(
            plan::ACCESS_REMOTE_READ,
            ibv_access_flags::IBV_ACCESS_REMOTE_READ.0
        );
        assert_eq!(
            plan::ACCESS_REMOTE_ATOMIC,
            ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0
        );
    }

    #[test]
    fn sockaddr_conversion_is_network_order() {
        let ss = sockaddr_of(&"10.1.2.3:7471".parse().unwrap());
        // SAFETY: sockaddr_of filled an AF_INET address.
        let sin = unsafe { &*(&ss as *const _ as *const libc::sockaddr_in) };
        assert_eq!(sin.sin_family as i32, libc::AF_INET);
        assert_eq!(sin.sin_port.to_ne_bytes(), 7471u16.to_be_bytes());
        assert_eq!(sin.sin_addr.s_addr.to_ne_bytes(), [10, 1, 2, 3]);
        let ss = sockaddr_of(&"[fe80::1]:9".parse().unwrap());
        // SAFETY: an AF_INET6 address.
        let sin6 = unsafe { &*(&ss as *const _ as *const libc::sockaddr_in6) };
        assert_eq!(sin6.sin6_family as i32, libc::AF_INET6);
        assert_eq!(sin6.sin6_addr.s6_addr[0], 0xfe);
        assert_eq!(sin6.sin6_addr.s6_addr[15], 1);
    }
}
