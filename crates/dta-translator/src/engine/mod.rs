//! The translator proper: one datagram in, memory operations out.
//!
//! [`Translator::handle_datagram`] checks the source against the allow-list, parses a datagram
//! of either protocol, admits retransmittable datagrams by sequence number (go-back-N, written
//! once for both protocols), and hands every report on: Key-Write and Key-Increment to the
//! batch staging ([`staging`]), everything else to the per-primitive dispatch ([`dispatch`]):
//! Postcarding through the cache, Append through per-list batches, Sketch-Merge through
//! per-reporter column tracking and merging ([DTA §4]). Routes to the stores are built once
//! ([`routes`]); the timers write out what waits ([`timers`]). Nothing here allocates per
//! report or takes a lock.

mod dispatch;
mod routes;
mod staging;
#[cfg(test)]
mod tests;
mod timers;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_store::{Region, StoreInfo};
use dta_wire::prefix::AllowList;
use dta_wire::{native, prototype, Datagram, Report};

use crate::config::TranslatorConfig;
use crate::reason::Reason;
use crate::sequence::{SequenceTracker, Verdict};
use crate::shard::{Forwarded, Shard};
use crate::sinks::Sinks;
use crate::stats::{add, Stats};

pub use routes::BuildError;
use routes::{AppendRoute, KeyIncrementRoute, KeyWriteRoute, PostcardRoute, SketchRoute};
use staging::{RouteCache, Stage, STAGE};

/// A NACK waiting to be sent by the ingest loop.
#[derive(Debug, Clone, Copy)]
pub struct PendingNack {
    pub to: SocketAddr,
    pub buf: [u8; 24],
    pub len: usize,
}

impl PendingNack {
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The go-back-N receiver a retransmittable datagram belongs to, and so its NACK format.
#[derive(Debug, Clone, Copy)]
enum Sequenced {
    /// Prototype: per source address, 8-bit numbers.
    Prototype,
    /// Native: per reporter id, 32-bit numbers.
    Native { reporter_id: u32 },
}

/// The translator over a set of stores and the sinks that reach them.
pub struct Translator<S: Sinks> {
    sinks: S,
    stats: Arc<Stats>,
    format: prototype::BaseFormat,
    nack_port: u16,
    postcard_timeout: Duration,
    append_flush: Duration,
    sketch_stall: Duration,
    key_write: Vec<KeyWriteRoute>,
    key_increment: Vec<KeyIncrementRoute>,
    postcarding: Vec<PostcardRoute>,
    append: Option<AppendRoute>,
    sketches: Vec<SketchRoute>,
    native_seq: SequenceTracker,
    prototype_seq: SequenceTracker,
    nacks: Vec<PendingNack>,
    last_append_flush: Instant,
    last_postcard_expire: Instant,
    shard: Option<Shard>,
    /// Sources a datagram may come from at all.
    allow: AllowList,
    /// Per store (indexed as the sinks index stores), the sources its reports may come from,
    /// on top of `allow`; `None`: anyone `allow` lets in.
    store_allow: Vec<Option<AllowList>>,
    /// Store names, indexed as the sinks index stores (per-store settings are by name).
    store_names: Vec<String>,
}

impl Translator<crate::sinks::RegionSinks> {
    /// The co-located translator: it maps the collector's `regions` and writes straight into
    /// them (shared memory).
    pub fn colocated(
        cfg: &TranslatorConfig,
        regions: Vec<Arc<Region>>,
        stats: Arc<Stats>,
    ) -> Result<Self, BuildError> {
        let infos = regions
            .iter()
            .map(|r| StoreInfo::from_region(r).map_err(|e| BuildError::Layout(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        Translator::new(cfg, &infos, crate::sinks::RegionSinks::new(regions), stats)
    }
}

impl<S: Sinks> Translator<S> {
    /// Make this translator one thread of a group sharing the stores ([`crate::shard`]): it
    /// keeps the state of the Postcarding flows, Append lists and sketches it owns, hands other
    /// threads' to them, and applies what they hand it ([`Self::drain_inbox`], also run by
    /// [`Self::tick`]).
    pub fn with_shard(mut self, shard: Shard) -> Self {
        self.shard = Some(shard);
        self
    }

    /// Restrict the reports for store `name` to sources in `allow` (on top of the translator's
    /// own allow-list).
    pub fn set_store_allow(&mut self, name: &str, allow: AllowList) -> Result<(), BuildError> {
        let i = self
            .store_names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| BuildError::UnknownStore(name.to_string()))?;
        self.store_allow[i] = Some(allow);
        Ok(())
    }

    pub fn shard(&self) -> Option<&Shard> {
        self.shard.as_ref()
    }

    /// Apply the reports other threads handed to this one (their state is this thread's).
    /// Returns how many.
    pub fn drain_inbox(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while let Some(f) = self.shard.as_ref().and_then(Shard::pop) {
            if let Some(report) = f.report() {
                self.apply(&report, f.reporter, f.src, now);
            }
            n += 1;
        }
        n
    }

    /// Hand `report` to the thread that owns its state, if that is another one; true if so.
    /// Waits (applying this thread's own inbox meanwhile, so two threads waiting on each
    /// other both progress) while the owner's inbox is full.
    fn forward(
        &mut self,
        report: &Report<'_>,
        reporter: u32,
        src: SocketAddr,
        now: Instant,
    ) -> bool {
        let Some(shard) = &self.shard else {
            return false;
        };
        let Some(owner) = shard.owner(report).filter(|&o| o != shard.index()) else {
            return false;
        };
        let Some(mut f) = Forwarded::new(report, reporter, src) else {
            return false; // not encodable: let this thread apply (and reject) it
        };
        loop {
            match self.shard.as_ref().map(|s| s.forward(owner, f)) {
                Some(Ok(())) | None => break,
                Some(Err(back)) => {
                    f = back;
                    self.drain_inbox(now);
                    std::thread::yield_now();
                }
            }
        }
        add(&self.stats.forwarded, 1);
        true
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    pub fn sinks(&self) -> &S {
        &self.sinks
    }

    pub fn sinks_mut(&mut self) -> &mut S {
        &mut self.sinks
    }

    /// NACKs produced since the last call, for the ingest loop to send.
    pub fn drain_nacks(&mut self) -> std::vec::Drain<'_, PendingNack> {
        self.nacks.drain(..)
    }

    /// Handle one UDP payload received from `src`.
    pub fn handle_datagram(&mut self, buf: &[u8], src: SocketAddr, now: Instant) {
        add(&self.stats.datagrams, 1);
        add(&self.stats.bytes, buf.len() as u64);
        // Trust before work: a source outside the allow-list is neither parsed, applied,
        // sequenced nor NACKed (a NACK to a spoofed source would be a reflection).
        if !self.allow.allows(src.ip()) {
            self.stats.reject(Reason::SourceNotAllowed);
            return;
        }
        match dta_wire::parse(buf, self.format) {
            Err(e) => self.stats.wire_error(e),
            Ok(Datagram::Prototype(repr)) => {
                if let (true, Some(seq)) = (repr.base.retransmittable, repr.base.seqnum) {
                    if !self.admit(Sequenced::Prototype, seq as u32, src, now) {
                        return;
                    }
                }
                // The prototype carries no priority: count it as medium.
                add(&self.stats.by_priority[1], 1);
                self.apply(&repr.report, 0, src, now);
            }
            Ok(Datagram::Native(d)) => {
                let h = d.header;
                if h.kind != native::Kind::Reports {
                    // NACKs travel translator -> reporter; one arriving here is misdirected.
                    self.stats.wire_error(dta_wire::Error::UnknownKind);
                    return;
                }
                let seq = Sequenced::Native {
                    reporter_id: h.reporter_id,
                };
                if h.retransmittable && !self.admit(seq, h.seq, src, now) {
                    return;
                }
                add(&self.stats.by_priority[h.priority as usize], 1);
                // Batched apply ([DTA §6] "the translator … batches"): Key-Write and
                // Key-Increment reports are routed once per shape, hashed and their lines
                // prefetched, then written together; counters are added once per batch. Other
                // primitives flush the batch first, so memory operations keep report order.
                let mut stage = Stage::new(src.ip());
                let mut routes = RouteCache::default();
                // One pass over the validated reports (zero-copy views): Key-Write and
                // Key-Increment are staged; anything else flushes the stage and takes `apply`.
                for view in d.views() {
                    if stage.len == STAGE {
                        self.write_stage(&mut stage);
                    }
                    let report = view.report();
                    if !self.stage(&mut stage, &mut routes, &report) {
                        self.write_stage(&mut stage);
                        self.apply(&report, h.reporter_id, src, now);
                    }
                }
                self.write_stage(&mut stage);
            }
        }
    }

    /// Go-back-N admission of a retransmittable datagram, the same for both protocols
    /// ([DTA §5.2]; [`crate::sequence`]): true to apply it. A duplicate is dropped; a datagram
    /// after a gap is dropped as `out_of_order` and the expected number NACKed (rate-limited by
    /// the tracker), in the datagram's protocol.
    fn admit(&mut self, seq: Sequenced, number: u32, src: SocketAddr, now: Instant) -> bool {
        let verdict = match seq {
            Sequenced::Prototype => self.prototype_seq.check(peer_key(src.ip()), number, now),
            Sequenced::Native { reporter_id } => {
                self.native_seq.check(reporter_id as u64, number, now)
            }
        };
        match verdict {
            Verdict::Apply => true,
            Verdict::Resync => {
                add(&self.stats.resyncs, 1);
                true
            }
            Verdict::Duplicate => {
                add(&self.stats.duplicates, 1);
                false
            }
            Verdict::Gap { nack } => {
                self.stats.reject(Reason::OutOfOrder);
                if let Some(expected) = nack {
                    match seq {
                        Sequenced::Prototype => {
                            let n = prototype::NackRepr {
                                seqnum: expected as u8,
                                nack: true,
                            };
                            let mut b = [0u8; 24];
                            if let Ok(len) = n.emit(&mut b) {
                                self.queue_nack(src, b, len);
                            }
                        }
                        Sequenced::Native { reporter_id } => {
                            self.queue_native_nack(src, reporter_id, expected, None)
                        }
                    }
                }
                false
            }
        }
    }

    fn queue_nack(&mut self, src: SocketAddr, buf: [u8; 24], len: usize) {
        if self.nacks.len() < self.nacks.capacity() {
            self.nacks.push(PendingNack {
                to: SocketAddr::new(src.ip(), self.nack_port),
                buf,
                len,
            });
            add(&self.stats.nacks_sent, 1);
        }
    }

    fn queue_native_nack(
        &mut self,
        src: SocketAddr,
        reporter_id: u32,
        seq: u32,
        sketch: Option<native::SketchNack>,
    ) {
        let n = native::NackRepr {
            reporter_id,
            seq,
            sketch,
            missing: 0,
        };
        let mut b = [0u8; 24];
        if let Ok(len) = n.emit(&mut b) {
            self.queue_nack(src, b, len);
        }
    }
}

/// Whether store `store`'s allow-list (if it has one) lets `src` in.
#[inline]
fn allowed(store_allow: &[Option<AllowList>], store: usize, src: IpAddr) -> bool {
    match store_allow.get(store) {
        Some(Some(a)) => a.allows(src),
        _ => true,
    }
}

fn peer_key(ip: IpAddr) -> u64 {
    match ip {
        IpAddr::V4(v4) => u32::from(v4) as u64,
        IpAddr::V6(v6) => {
            let o = v6.octets();
            u64::from_be_bytes([o[8], o[9], o[10], o[11], o[12], o[13], o[14], o[15]])
                ^ u64::from_be_bytes([o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7]])
        }
    }
}

#[cfg(test)]
mod ingress_tests {
    use std::time::Instant;

    use dta_wire::prototype::{BaseFormat, BaseRepr, Repr};
    use dta_wire::{Opcode, Report};

    use super::tests::{datagram, src, translator_with};
    use crate::config::{PrototypeHeader, TranslatorConfig};
    use crate::reason::Reason;

    const KW: Report<'static> = Report::KeyWrite {
        key: &[1, 2, 3, 4],
        data: &[5, 6, 7, 8],
        redundancy: 1,
        immediate: false,
    };

    fn proto(seq: u8) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        let r = Repr {
            base: BaseRepr {
                opcode: Opcode::KeyWrite,
                seqnum: Some(seq),
                immediate: false,
                retransmittable: true,
            },
            report: KW,
        };
        let n = r.emit(&mut b, BaseFormat::Long).unwrap();
        b.truncate(n);
        b
    }

    /// The go-back-N admission is one code path: both protocols apply in order, drop
    /// duplicates, drop after a gap as out_of_order and NACK the expected number, each in its
    /// own NACK format, to the source's NACK port.
    #[test]
    fn admission_is_the_same_for_both_protocols() {
        let cfg = TranslatorConfig {
            prototype_header: PrototypeHeader::Long,
            nack_interval_ms: 0,
            ..TranslatorConfig::default()
        };
        let mut t = translator_with(&cfg);
        let now = Instant::now();
        let native = |seq| datagram(true, 3, seq, &[KW]);
        for (d, nack) in [
            (
                [native(10), native(11), native(11), native(13)],
                vec![0x11, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 12],
            ),
            ([proto(10), proto(11), proto(11), proto(13)], vec![12, 0x80]),
        ] {
            let s = t.stats().clone();
            let (applied, dups, ooo) = (
                s.reports_of(Opcode::KeyWrite),
                s.duplicates.load(std::sync::atomic::Ordering::Relaxed),
                s.rejected_by(Reason::OutOfOrder),
            );
            for x in &d {
                t.handle_datagram(x, src(), now);
            }
            assert_eq!(s.reports_of(Opcode::KeyWrite) - applied, 2);
            assert_eq!(
                s.duplicates.load(std::sync::atomic::Ordering::Relaxed) - dups,
                1
            );
            assert_eq!(s.rejected_by(Reason::OutOfOrder) - ooo, 1);
            let nacks: Vec<_> = t.drain_nacks().collect();
            assert_eq!(nacks.len(), 1);
            assert_eq!(nacks[0].to, (src().ip(), cfg.nack_port).into());
            assert_eq!(nacks[0].bytes(), &nack[..]);
        }
    }

    #[test]
    fn a_native_nack_arriving_is_misdirected_and_nothing_is_applied_from_outside() {
        let mut t = translator_with(&TranslatorConfig::default());
        let mut nack = [0u8; 24];
        let n = dta_wire::native::NackRepr::new(1, 2)
            .emit(&mut nack)
            .unwrap();
        t.handle_datagram(&nack[..n], src(), Instant::now());
        assert_eq!(
            t.stats()
                .rejected_by(Reason::Wire(dta_wire::Error::UnknownKind)),
            1
        );
        t.handle_datagram(
            &datagram(false, 1, 0, &[KW]),
            "192.0.2.1:9".parse().unwrap(),
            Instant::now(),
        );
        assert_eq!(t.stats().rejected_by(Reason::SourceNotAllowed), 1);
        assert!(t.sinks().areas.iter().all(|a| a.iter().all(|&b| b == 0)));
    }
}
