//! Counters for everything the translator sees: reports by primitive, rejected datagrams and
//! reports by reason, translator-side events.
//!
//! Single writer, many readers: each ingest thread owns its `Stats` and bumps counters with a
//! relaxed load and store ([`add`]) — a plain increment, no locked read-modify-write on the data
//! path — while any other thread may read a snapshot. Several ingest threads keep one `Stats`
//! each and their snapshots are summed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use dta_wire::{Error as WireError, Opcode};

use crate::reason::Reason;

/// How long after a spill file write failed the translator reports itself not ready.
pub const SPILL_FILE_UNREADY: std::time::Duration = std::time::Duration::from_secs(10);

/// Milliseconds since the Unix epoch (0 before it).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Stats {
    /// Why the translator is not ready, if a spill file write failed within
    /// [`SPILL_FILE_UNREADY`] (over every thread's stats).
    pub fn spill_unready(all: &[std::sync::Arc<Stats>]) -> Result<(), String> {
        let at = all
            .iter()
            .map(|s| s.spill_file_error_at.load(Relaxed))
            .max()
            .unwrap_or(0);
        let ago = unix_ms().saturating_sub(at);
        if at != 0 && ago < SPILL_FILE_UNREADY.as_millis() as u64 {
            let n: u64 = all.iter().map(|s| s.spill_file_errors.load(Relaxed)).sum();
            return Err(format!(
                "the spill file could not be written {ago} ms ago ({n} failed writes; its \
                 filesystem full?): high priority beyond the memory spill is being dropped"
            ));
        }
        Ok(())
    }
}

/// Add `n` to a counter that only the calling thread writes.
#[inline(always)]
pub fn add(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

/// One counter per wire reason, per translator reason, per primitive.
#[derive(Debug)]
pub struct Stats {
    pub datagrams: AtomicU64,
    pub bytes: AtomicU64,
    pub reports: [AtomicU64; 5],
    pub by_priority: [AtomicU64; 3],
    /// Datagrams the first-stage classifier dropped because their priority's queue was full
    /// ([`crate::classify`]), by priority (low, medium, high).
    pub shed: [AtomicU64; 3],
    /// Rejected datagrams and reports, one counter per [`Reason`] (indexed by
    /// [`Reason::index`]).
    pub rejects: [AtomicU64; Reason::COUNT],
    /// Sequenced datagrams seen before ([`crate::sequence`]): retransmittable ones dropped,
    /// others applied. The sum of `duplicates_by_priority`.
    pub duplicates: AtomicU64,
    /// `duplicates` by priority (low, medium, high; the prototype counts as medium).
    pub duplicates_by_priority: [AtomicU64; 3],
    /// Sequence numbers never received, by priority: fallen out of the window, given up by the
    /// timer, dropped with an evicted or resynchronised space.
    pub lost: [AtomicU64; 3],
    /// Of `lost`, those of retransmittable spaces (NACKs did not recover them).
    pub unrecovered: AtomicU64,
    /// Sequence spaces evicted from the full table.
    pub tracker_evictions: AtomicU64,
    /// Bytes of the sequence tracker's table (a gauge, set once).
    pub tracker_bytes: AtomicU64,
    pub resyncs: AtomicU64,
    pub nacks_sent: AtomicU64,
    /// NACKs not sent because the translator's NACK budget was spent (the gap is NACKed again
    /// later).
    pub nacks_over_budget: AtomicU64,
    pub immediates: AtomicU64,
    pub writes: AtomicU64,
    pub fetch_adds: AtomicU64,
    pub write_bytes: AtomicU64,
    pub postcard_chunks_complete: AtomicU64,
    pub postcard_chunks_collision: AtomicU64,
    pub postcard_chunks_timeout: AtomicU64,
    pub append_batches: AtomicU64,
    pub append_partial_batches: AtomicU64,
    pub sketch_columns_written: AtomicU64,
    /// Reports handed to the translator thread that owns their state ([`crate::shard`]); that
    /// thread counts them as reports.
    pub forwarded: AtomicU64,
    /// Flow control (docs/flow-control.md), per priority (low, medium, high) where an array:
    /// datagrams admitted against the write meter.
    pub overload_admitted: [AtomicU64; 3],
    /// Datagrams dropped by the meter's admission (high: the spill was full).
    pub overload_dropped: [AtomicU64; 3],
    /// Datagrams whose source claimed this priority beyond its budget, treated as low
    /// (`crate::claims`).
    pub demoted: [AtomicU64; 3],
    /// The sources this thread demoted most, with their counts, published once a second
    /// (`crate::claims::Claims::top_demoted`).
    pub demoted_sources: std::sync::Mutex<Vec<(std::net::IpAddr, u64)>>,
    /// High-priority datagrams put in the spill.
    pub spilled: AtomicU64,
    /// Spilled datagrams applied again.
    pub reinjected: AtomicU64,
    /// Bytes the spill holds now (gauge).
    pub spill_bytes: AtomicU64,
    /// High-priority datagrams dropped because the spill was full (`spill_full`), or lost by a
    /// spill file that could not be read back.
    pub spill_dropped: AtomicU64,
    /// Writes to the spill file that failed (its filesystem full, an I/O error); each datagram
    /// is also in `spill_dropped`.
    pub spill_file_errors: AtomicU64,
    /// When the spill file last failed, ms since the Unix epoch (0: never): readiness says
    /// "not ready" for [`SPILL_FILE_UNREADY`] after it.
    pub spill_file_error_at: AtomicU64,
    /// The meter's effective budget, writes/s (gauge; the same meter for every thread).
    pub budget: AtomicU64,
    /// The sink's congestion signals, by [`CONGESTION_KINDS`].
    pub congestion_signals: [AtomicU64; 4],
    /// Congestion notices queued to reporters.
    pub notices_sent: AtomicU64,
    /// Hellos from reporters, by [`crate::control::HelloOutcome`].
    pub hellos: [AtomicU64; crate::control::HelloOutcome::ALL.len()],
    /// Low-priority Key-Write reports written with redundancy 1 instead of their N.
    pub redundancy_lowered: AtomicU64,
}

/// Labels of `Stats::congestion_signals`, in order.
pub const CONGESTION_KINDS: [&str; 4] = ["rnr_nak", "sequence_nak", "cnp", "window_full"];
/// Labels of the per-priority arrays, in order.
pub const PRIORITIES: [&str; 3] = ["low", "medium", "high"];

impl Default for Stats {
    fn default() -> Self {
        Stats {
            datagrams: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            reports: Default::default(),
            by_priority: Default::default(),
            shed: Default::default(),
            rejects: std::array::from_fn(|_| AtomicU64::new(0)),
            duplicates: AtomicU64::new(0),
            duplicates_by_priority: Default::default(),
            lost: Default::default(),
            unrecovered: AtomicU64::new(0),
            tracker_evictions: AtomicU64::new(0),
            tracker_bytes: AtomicU64::new(0),
            resyncs: AtomicU64::new(0),
            nacks_sent: AtomicU64::new(0),
            nacks_over_budget: AtomicU64::new(0),
            immediates: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            fetch_adds: AtomicU64::new(0),
            write_bytes: AtomicU64::new(0),
            postcard_chunks_complete: AtomicU64::new(0),
            postcard_chunks_collision: AtomicU64::new(0),
            postcard_chunks_timeout: AtomicU64::new(0),
            append_batches: AtomicU64::new(0),
            append_partial_batches: AtomicU64::new(0),
            sketch_columns_written: AtomicU64::new(0),
            forwarded: AtomicU64::new(0),
            overload_admitted: Default::default(),
            overload_dropped: Default::default(),
            demoted: Default::default(),
            demoted_sources: Default::default(),
            spilled: AtomicU64::new(0),
            reinjected: AtomicU64::new(0),
            spill_bytes: AtomicU64::new(0),
            spill_dropped: AtomicU64::new(0),
            spill_file_errors: AtomicU64::new(0),
            spill_file_error_at: AtomicU64::new(0),
            budget: AtomicU64::new(0),
            congestion_signals: Default::default(),
            notices_sent: AtomicU64::new(0),
            hellos: Default::default(),
            redundancy_lowered: AtomicU64::new(0),
        }
    }
}

/// The primitives in opcode order, for labelling `Stats::reports`.
pub const PRIMITIVES: [Opcode; 5] = [
    Opcode::KeyWrite,
    Opcode::Append,
    Opcode::KeyIncrement,
    Opcode::Postcarding,
    Opcode::SketchMerge,
];

impl Stats {
    /// The sources several threads demoted most ([`Stats::demoted_sources`]), counts summed
    /// by source, the most first, at most [`crate::claims::TOP_SOURCES`].
    pub fn demoted_sources_of(all: &[std::sync::Arc<Stats>]) -> Vec<(std::net::IpAddr, u64)> {
        let mut by: std::collections::BTreeMap<std::net::IpAddr, u64> = Default::default();
        for s in all {
            let v = s.demoted_sources.lock().unwrap_or_else(|e| e.into_inner());
            for &(a, n) in v.iter() {
                *by.entry(a).or_default() += n;
            }
        }
        let mut v: Vec<_> = by.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(crate::claims::TOP_SOURCES);
        v
    }

    /// The sum of several threads' counters (one `Stats` per translator thread).
    pub fn sum(all: &[std::sync::Arc<Stats>]) -> Stats {
        let t = Stats::default();
        *t.demoted_sources.lock().unwrap_or_else(|e| e.into_inner()) =
            Stats::demoted_sources_of(all);
        let acc = |dst: &AtomicU64, f: &dyn Fn(&Stats) -> &AtomicU64| {
            dst.store(all.iter().map(|s| f(s).load(Relaxed)).sum(), Relaxed);
        };
        acc(&t.datagrams, &|s| &s.datagrams);
        acc(&t.bytes, &|s| &s.bytes);
        for i in 0..t.reports.len() {
            acc(&t.reports[i], &|s| &s.reports[i]);
        }
        for i in 0..t.by_priority.len() {
            acc(&t.by_priority[i], &|s| &s.by_priority[i]);
        }
        for i in 0..t.shed.len() {
            acc(&t.shed[i], &|s| &s.shed[i]);
        }
        for i in 0..t.rejects.len() {
            acc(&t.rejects[i], &|s| &s.rejects[i]);
        }
        acc(&t.duplicates, &|s| &s.duplicates);
        for i in 0..3 {
            acc(&t.duplicates_by_priority[i], &|s| {
                &s.duplicates_by_priority[i]
            });
            acc(&t.lost[i], &|s| &s.lost[i]);
        }
        acc(&t.unrecovered, &|s| &s.unrecovered);
        acc(&t.tracker_evictions, &|s| &s.tracker_evictions);
        acc(&t.tracker_bytes, &|s| &s.tracker_bytes);
        acc(&t.resyncs, &|s| &s.resyncs);
        acc(&t.nacks_sent, &|s| &s.nacks_sent);
        acc(&t.nacks_over_budget, &|s| &s.nacks_over_budget);
        acc(&t.immediates, &|s| &s.immediates);
        acc(&t.writes, &|s| &s.writes);
        acc(&t.fetch_adds, &|s| &s.fetch_adds);
        acc(&t.write_bytes, &|s| &s.write_bytes);
        acc(&t.postcard_chunks_complete, &|s| {
            &s.postcard_chunks_complete
        });
        acc(&t.postcard_chunks_collision, &|s| {
            &s.postcard_chunks_collision
        });
        acc(&t.postcard_chunks_timeout, &|s| &s.postcard_chunks_timeout);
        acc(&t.append_batches, &|s| &s.append_batches);
        acc(&t.append_partial_batches, &|s| &s.append_partial_batches);
        acc(&t.sketch_columns_written, &|s| &s.sketch_columns_written);
        acc(&t.forwarded, &|s| &s.forwarded);
        for i in 0..3 {
            acc(&t.overload_admitted[i], &|s| &s.overload_admitted[i]);
            acc(&t.overload_dropped[i], &|s| &s.overload_dropped[i]);
            acc(&t.demoted[i], &|s| &s.demoted[i]);
        }
        acc(&t.spilled, &|s| &s.spilled);
        acc(&t.reinjected, &|s| &s.reinjected);
        acc(&t.spill_bytes, &|s| &s.spill_bytes);
        acc(&t.spill_dropped, &|s| &s.spill_dropped);
        acc(&t.spill_file_errors, &|s| &s.spill_file_errors);
        t.spill_file_error_at.store(
            all.iter()
                .map(|s| s.spill_file_error_at.load(Relaxed))
                .max()
                .unwrap_or(0),
            Relaxed,
        );
        // One meter for all threads: its budget once, not summed.
        t.budget.store(
            all.iter()
                .map(|s| s.budget.load(Relaxed))
                .max()
                .unwrap_or(0),
            Relaxed,
        );
        for i in 0..t.congestion_signals.len() {
            acc(&t.congestion_signals[i], &|s| &s.congestion_signals[i]);
        }
        acc(&t.notices_sent, &|s| &s.notices_sent);
        for i in 0..t.hellos.len() {
            acc(&t.hellos[i], &|s| &s.hellos[i]);
        }
        acc(&t.redundancy_lowered, &|s| &s.redundancy_lowered);
        t
    }

    pub fn report(&self, op: Opcode) {
        add(&self.reports[op as usize - 1], 1);
    }

    /// Count a datagram the parser rejected.
    #[inline]
    pub fn wire_error(&self, e: WireError) {
        self.reject(Reason::Wire(e));
    }

    /// Count one rejection for `reason`.
    #[inline]
    pub fn reject(&self, reason: Reason) {
        add(&self.rejects[reason.index()], 1);
    }

    /// Count `n` rejections for `reason`.
    #[inline]
    pub fn reject_n(&self, reason: Reason, n: u64) {
        add(&self.rejects[reason.index()], n);
    }

    /// Rejections counted under exactly `reason`.
    pub fn rejected_by(&self, reason: Reason) -> u64 {
        self.rejects[reason.index()].load(Relaxed)
    }

    /// Total rejected under the name `name`, wire and translator (some names, e.g.
    /// `bad_data_len`, are both: a malformed report, or a well-formed one no store of its
    /// primitive can hold). 0 for a name no reason has.
    pub fn rejected(&self, name: &str) -> u64 {
        Reason::ALL
            .iter()
            .filter(|r| r.name() == name)
            .map(|r| self.rejected_by(*r))
            .sum()
    }

    pub fn reports_of(&self, op: Opcode) -> u64 {
        self.reports[op as usize - 1].load(Relaxed)
    }

    pub fn total_rejected(&self) -> u64 {
        self.rejects.iter().map(|c| c.load(Relaxed)).sum()
    }

    /// A JSON snapshot, for `--json` output, logs and the HTTP API.
    pub fn snapshot(&self) -> serde_json::Value {
        let mut reports = serde_json::Map::new();
        for op in PRIMITIVES {
            reports.insert(op.name().into(), self.reports_of(op).into());
        }
        let mut rejected = serde_json::Map::new();
        for r in Reason::ALL {
            rejected.insert(r.name().into(), self.rejected(r.name()).into());
        }
        let l = |c: &AtomicU64| c.load(Relaxed);
        let by_priority = |a: &[AtomicU64; 3]| serde_json::json!({"low": l(&a[0]), "medium": l(&a[1]), "high": l(&a[2])});
        let mut congestion = serde_json::Map::new();
        for (k, c) in CONGESTION_KINDS.iter().zip(&self.congestion_signals) {
            congestion.insert((*k).into(), l(c).into());
        }
        serde_json::json!({
            "datagrams": l(&self.datagrams),
            "bytes": l(&self.bytes),
            "reports": reports,
            "priority": by_priority(&self.by_priority),
            "shed": by_priority(&self.shed),
            "rejected": rejected,
            "duplicates": l(&self.duplicates),
            "duplicates_by_priority": by_priority(&self.duplicates_by_priority),
            "lost": by_priority(&self.lost),
            "unrecovered": l(&self.unrecovered),
            "tracker": {"evictions": l(&self.tracker_evictions), "bytes": l(&self.tracker_bytes)},
            "resyncs": l(&self.resyncs),
            "nacks_sent": l(&self.nacks_sent),
            "nacks_over_budget": l(&self.nacks_over_budget),
            "immediates": l(&self.immediates),
            "memory": {"writes": l(&self.writes), "fetch_adds": l(&self.fetch_adds), "write_bytes": l(&self.write_bytes)},
            "postcarding": {"complete": l(&self.postcard_chunks_complete), "collision": l(&self.postcard_chunks_collision), "timeout": l(&self.postcard_chunks_timeout)},
            "append": {"batches": l(&self.append_batches), "partial_batches": l(&self.append_partial_batches)},
            "sketch_merge": {"columns_written": l(&self.sketch_columns_written)},
            "forwarded": l(&self.forwarded),
            "flow_control": {
                "admitted": by_priority(&self.overload_admitted),
                "dropped": by_priority(&self.overload_dropped),
                "demoted": by_priority(&self.demoted),
                "demoted_sources": self
                    .demoted_sources
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .map(|(a, n)| serde_json::json!({"source": a.to_string(), "datagrams": n}))
                    .collect::<Vec<_>>(),
                "spilled": l(&self.spilled),
                "reinjected": l(&self.reinjected),
                "spill_bytes": l(&self.spill_bytes),
                "spill_dropped": l(&self.spill_dropped),
                "spill_file_errors": l(&self.spill_file_errors),
                "budget": l(&self.budget),
                "congestion_signals": congestion,
                "notices_sent": l(&self.notices_sent),
                "hellos": crate::control::HelloOutcome::ALL
                    .iter()
                    .map(|o| (o.name().to_string(), l(&self.hellos[o.index()]).into()))
                    .collect::<serde_json::Map<_, _>>(),
                "redundancy_lowered": l(&self.redundancy_lowered),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_reason_of_both_stages_counts_both() {
        let s = Stats::default();
        s.wire_error(WireError::BadDataLen);
        s.reject(Reason::BadDataLen);
        s.reject_n(Reason::BadDataLen, 2);
        assert_eq!(s.rejected_by(Reason::Wire(WireError::BadDataLen)), 1);
        assert_eq!(s.rejected_by(Reason::BadDataLen), 3);
        assert_eq!(s.rejected("no_such_reason"), 0);
        assert_eq!(s.rejected("bad_data_len"), 4);
        assert_eq!(s.total_rejected(), 4);
        assert_eq!(s.snapshot()["rejected"]["bad_data_len"], 4);
        assert_eq!(s.snapshot()["rejected"]["source_not_allowed"], 0);
    }

    #[test]
    fn sum_adds_every_thread() {
        let a = Arc::new(Stats::default());
        let b = Arc::new(Stats::default());
        a.report(Opcode::Append);
        b.report(Opcode::Append);
        add(&b.forwarded, 4);
        add(&b.shed[2], 2);
        b.reject(Reason::NoStore);
        let t = Stats::sum(&[a, b]);
        assert_eq!(t.reports_of(Opcode::Append), 2);
        assert_eq!(t.forwarded.load(Relaxed), 4);
        assert_eq!(t.shed[2].load(Relaxed), 2);
        assert_eq!(t.snapshot()["shed"]["high"], 2);
        assert_eq!(t.rejected("no_store"), 1);
    }
}
