//! RDMA CM, passive side ([IBTA §12.6]; Linux `cm.c` / `cma.c`): a REQ from an allowed
//! translator gets a REP (retransmitted until the RTU) for a new queue pair, whose memory
//! advertisement follows ([`crate::adv`]); a DREQ frees it; anything else is counted and dropped.

use super::*;

impl<L: Link> Responder<L> {
    pub(crate) fn handle_cm(&mut self, f: &FrameRepr<'_>) -> io::Result<()> {
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

    pub(crate) fn ud_frame(&self, path: &PathTemplate, mad: &[u8]) -> Vec<u8> {
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

    pub(crate) fn send_mad(&mut self, peer: Endpoint, tid: u64, m: Message<'_>) -> io::Result<()> {
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
}
