//! The RC responder ([IBTA §9.7.5], §9.9): a request packet goes through the states of
//! [`RespState`], one function each, named and ordered as in Linux
//! `drivers/infiniband/sw/rxe/rxe_resp.c`: checks first (opcode, PSN, opcode sequence, R_Key
//! and bounds), then execution, completion and acknowledgement, or one of the error states.

use super::*;

/// One request packet on its way through the states.
struct Req<'p, 'f> {
    qi: usize,
    f: &'p FrameRepr<'f>,
    /// The NAK an error state sends.
    nak: NakCode,
    /// FETCH_ADD's original value, for its acknowledgement.
    orig: u64,
}

impl<L: Link> Responder<L> {
    /// Take request packet `f` on queue pair `qi` through the states until done.
    pub(crate) fn request(&mut self, qi: usize, f: &FrameRepr<'_>) -> io::Result<()> {
        let mut r = Req {
            qi,
            f,
            nak: NakCode::InvalidRequest,
            orig: 0,
        };
        let mut state = RespState::GetReq;
        loop {
            state = match state {
                RespState::GetReq => self.get_req(&r),
                RespState::ChkPsn => self.check_psn(&r),
                RespState::ChkOpSeq => self.check_op_seq(&r),
                RespState::ChkOpValid => self.check_op_valid(&r),
                RespState::ChkRkey => self.check_rkey(&mut r),
                RespState::Execute => self.execute_req(&mut r),
                RespState::Complete => self.complete(&r),
                RespState::Acknowledge => self.acknowledge(&r)?,
                RespState::Duplicate => self.duplicate(&r)?,
                RespState::ErrPsnOutOfSeq => self.err_psn_out_of_seq(&r)?,
                RespState::ErrInvalidRequest => self.err_request(&mut r, false)?,
                RespState::ErrRkeyViolation => self.err_request(&mut r, true)?,
                RespState::Done => return Ok(()),
            }
        }
    }

    /// An RC opcode goes on; anything else is an invalid request.
    fn get_req(&self, r: &Req<'_, '_>) -> RespState {
        if r.f.bth.opcode.is_rc() {
            RespState::ChkPsn
        } else {
            RespState::ErrInvalidRequest
        }
    }

    /// The expected PSN executes; an earlier one is a duplicate; a later one is a gap.
    fn check_psn(&self, r: &Req<'_, '_>) -> RespState {
        let d = psn_diff(r.f.bth.psn, self.qps[r.qi].epsn);
        if d == 0 {
            RespState::ChkOpSeq
        } else if d < 0 {
            RespState::Duplicate
        } else {
            RespState::ErrPsnOutOfSeq
        }
    }

    /// WRITE Middle and Last continue a WRITE First; nothing else may interrupt one.
    fn check_op_seq(&self, r: &Req<'_, '_>) -> RespState {
        let in_write = self.qps[r.qi].write.is_some();
        let continues = matches!(
            r.f.bth.opcode,
            Opcode::RcWriteMiddle | Opcode::RcWriteLast | Opcode::RcWriteLastImm
        );
        if in_write != continues {
            RespState::ErrInvalidRequest
        } else {
            RespState::ChkOpValid
        }
    }

    /// The operations a DTA collector executes: WRITEs (with immediate) and FETCH_ADD.
    fn check_op_valid(&self, r: &Req<'_, '_>) -> RespState {
        match r.f.bth.opcode {
            Opcode::RcWriteFirst
            | Opcode::RcWriteMiddle
            | Opcode::RcWriteLast
            | Opcode::RcWriteLastImm
            | Opcode::RcWriteOnly
            | Opcode::RcWriteOnlyImm
            | Opcode::RcFetchAdd => RespState::ChkRkey,
            _ => RespState::ErrInvalidRequest,
        }
    }

    /// The R_Key and the bounds ([`Self::check_access`]).
    fn check_rkey(&self, r: &mut Req<'_, '_>) -> RespState {
        match self.check_access(r.qi, r.f) {
            Ok(()) => RespState::Execute,
            Err(code) => {
                r.nak = code;
                if code == NakCode::RemoteAccessError {
                    RespState::ErrRkeyViolation
                } else {
                    RespState::ErrInvalidRequest
                }
            }
        }
    }

    /// Execute the operation ([`Self::execute`]).
    fn execute_req(&mut self, r: &mut Req<'_, '_>) -> RespState {
        match self.execute(r.qi, r.f) {
            Ok(o) => {
                r.orig = o;
                RespState::Complete
            }
            Err(code) => {
                r.nak = code;
                RespState::ErrRkeyViolation
            }
        }
    }

    /// The PSN is consumed; a finished message counts in the MSN.
    fn complete(&mut self, r: &Req<'_, '_>) -> RespState {
        let q = &mut self.qps[r.qi];
        q.epsn = psn_add(q.epsn, 1);
        q.nak_sent = false;
        q.unacked += 1;
        if matches!(
            r.f.bth.opcode,
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

    /// Atomics always, WRITEs when AckReq is set or every `ack_every` packets (coalesced).
    fn acknowledge(&mut self, r: &Req<'_, '_>) -> io::Result<RespState> {
        let (qi, psn) = (r.qi, r.f.bth.psn);
        let q = &mut self.qps[qi];
        if r.f.bth.opcode == Opcode::RcFetchAdd {
            q.atomics[q.atomic_next] = (psn, r.orig);
            q.atomic_next = (q.atomic_next + 1) % q.atomics.len();
            q.unacked = 0;
            self.send_atomic_ack(qi, psn, r.orig)?;
        } else if r.f.bth.ack_req || q.unacked >= self.cfg.ack_every {
            q.unacked = 0;
            self.send_ack(qi, Syndrome::Ack { credits: 31 }, psn)?;
        }
        Ok(RespState::Done)
    }

    /// A duplicate is acknowledged again and never executed again: a FETCH_ADD replays its
    /// saved original value (IBA §9.7.5.1.5 / rxe).
    fn duplicate(&mut self, r: &Req<'_, '_>) -> io::Result<RespState> {
        inc(&self.stats.duplicates);
        let q = &self.qps[r.qi];
        if r.f.bth.opcode == Opcode::RcFetchAdd {
            if let Some(&(_, o)) = q.atomics.iter().find(|(p, _)| *p == r.f.bth.psn) {
                inc(&self.stats.duplicate_atomics_replayed);
                self.send_atomic_ack(r.qi, r.f.bth.psn, o)?;
            }
        } else {
            let prev = psn_add(q.epsn, 0x00ff_ffff);
            self.send_ack(r.qi, Syndrome::Ack { credits: 31 }, prev)?;
        }
        Ok(RespState::Done)
    }

    /// A packet ahead of the expected PSN: dropped, the gap NAKed once.
    fn err_psn_out_of_seq(&mut self, r: &Req<'_, '_>) -> io::Result<RespState> {
        inc(&self.stats.out_of_sequence_dropped);
        if !self.qps[r.qi].nak_sent {
            self.qps[r.qi].nak_sent = true;
            inc(&self.stats.naks_psn_sequence);
            let e = self.qps[r.qi].epsn;
            self.send_ack(r.qi, Syndrome::Nak(NakCode::PsnSequenceError), e)?;
        }
        Ok(RespState::Done)
    }

    /// An invalid request or an access violation (`rkey`): NAKed, the PSN consumed and a broken
    /// write sequence dropped (the queue pair stays in RTS; see the crate doc).
    fn err_request(&mut self, r: &mut Req<'_, '_>, rkey: bool) -> io::Result<RespState> {
        if rkey {
            inc(&self.stats.naks_remote_access);
            r.nak = NakCode::RemoteAccessError;
        } else {
            inc(&self.stats.naks_invalid_request);
        }
        let q = &mut self.qps[r.qi];
        if matches!(r.f.bth.opcode, Opcode::RcWriteFirst) {
            q.write = Some(WriteCtx {
                store: 0,
                offset: 0,
                start: 0,
                remaining: 0,
                discard: true,
            });
        } else if !matches!(r.f.bth.opcode, Opcode::RcWriteMiddle) {
            q.write = None;
        }
        q.epsn = psn_add(q.epsn, 1);
        q.nak_sent = false;
        q.unacked = 0;
        self.send_ack(r.qi, Syndrome::Nak(r.nak), r.f.bth.psn)?;
        Ok(RespState::Done)
    }

    /// R_Key and bounds (IBA §9.7.5.1.3, C9-88 ff.). Only the data area is writable.
    pub(crate) fn check_access(&self, qi: usize, f: &FrameRepr<'_>) -> Result<(), NakCode> {
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

    pub(crate) fn execute(&mut self, qi: usize, f: &FrameRepr<'_>) -> Result<u64, NakCode> {
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

    pub(crate) fn notify(&mut self, store: usize, offset: u64, len: u64, imm: u32) {
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
    pub(crate) fn congestion_notify(&mut self, qi: usize) -> io::Result<()> {
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

    pub(crate) fn send_ack(&mut self, qi: usize, syndrome: Syndrome, psn: u32) -> io::Result<()> {
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

    pub(crate) fn send_atomic_ack(&mut self, qi: usize, psn: u32, original: u64) -> io::Result<()> {
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
