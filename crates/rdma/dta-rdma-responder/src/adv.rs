//! The memory advertisement (docs/rdma.md "Memory advertisement"): the stores' addresses,
//! lengths and R_Keys sent to a connected translator as reliable SENDs on its queue pair (go-back-N
//! on timeout, [`Responder::timers`]), and the ACKs of those SENDs.

use super::*;

impl<L: Link> Responder<L> {
    /// Queue and send the two advertisement messages (`adv` module).
    pub(crate) fn advertise(&mut self, qi: usize) -> io::Result<()> {
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
    pub(crate) fn send_side_ack(&mut self, qi: usize, f: &FrameRepr<'_>) {
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
}
