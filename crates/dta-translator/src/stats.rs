//! Counters for everything the translator sees: reports by primitive, rejected datagrams and
//! reports by reason, translator-side events.
//!
//! Single writer, many readers: each ingest thread owns its `Stats` and bumps counters with a
//! relaxed load and store ([`add`]) — a plain increment, no locked read-modify-write on the data
//! path — while any other thread may read a snapshot. Several ingest threads keep one `Stats`
//! each and their snapshots are summed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use dta_wire::{Error as WireError, Opcode};

/// Why a datagram or a report was dropped. Wire reasons come from `dta_wire::Error::reason`;
/// the rest are the translator's.
pub const APPLY_REASONS: [&str; 10] = [
    "no_store",
    "bad_list_id",
    "bad_hop",
    "bad_key_len",
    "bad_data_len",
    "bad_redundancy",
    "out_of_order",
    "stale_epoch",
    "unknown_reporter",
    "sink_error",
];

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
    pub wire_errors: [AtomicU64; WireError::ALL.len()],
    pub apply_errors: [AtomicU64; APPLY_REASONS.len()],
    pub duplicates: AtomicU64,
    pub resyncs: AtomicU64,
    pub nacks_sent: AtomicU64,
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
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            datagrams: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            reports: Default::default(),
            by_priority: Default::default(),
            wire_errors: std::array::from_fn(|_| AtomicU64::new(0)),
            apply_errors: std::array::from_fn(|_| AtomicU64::new(0)),
            duplicates: AtomicU64::new(0),
            resyncs: AtomicU64::new(0),
            nacks_sent: AtomicU64::new(0),
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
    /// The sum of several threads' counters (one `Stats` per translator thread).
    pub fn sum(all: &[std::sync::Arc<Stats>]) -> Stats {
        let t = Stats::default();
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
        for i in 0..t.wire_errors.len() {
            acc(&t.wire_errors[i], &|s| &s.wire_errors[i]);
        }
        for i in 0..t.apply_errors.len() {
            acc(&t.apply_errors[i], &|s| &s.apply_errors[i]);
        }
        acc(&t.duplicates, &|s| &s.duplicates);
        acc(&t.resyncs, &|s| &s.resyncs);
        acc(&t.nacks_sent, &|s| &s.nacks_sent);
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
        t
    }

    pub fn report(&self, op: Opcode) {
        add(&self.reports[op as usize - 1], 1);
    }

    pub fn wire_error(&self, e: WireError) {
        let i = WireError::ALL.iter().position(|x| *x == e).unwrap_or(0);
        add(&self.wire_errors[i], 1);
    }

    /// Count a translator-side rejection by its reason (one of [`APPLY_REASONS`]).
    pub fn apply_error(&self, reason: &str) {
        let i = APPLY_REASONS
            .iter()
            .position(|r| *r == reason)
            .unwrap_or(APPLY_REASONS.len() - 1);
        add(&self.apply_errors[i], 1);
    }

    pub fn reports_of(&self, op: Opcode) -> u64 {
        self.reports[op as usize - 1].load(Relaxed)
    }

    /// Total rejected for `reason`, wire and translator (some reasons, e.g. `bad_data_len`, are
    /// both: a malformed report, or a well-formed one no store of its primitive can hold).
    pub fn rejected(&self, reason: &str) -> u64 {
        self.wire_rejected(reason) + self.apply_rejected(reason)
    }

    /// Datagrams rejected by the parser for `reason`.
    pub fn wire_rejected(&self, reason: &str) -> u64 {
        WireError::ALL
            .iter()
            .position(|e| e.reason() == reason)
            .map_or(0, |i| self.wire_errors[i].load(Relaxed))
    }

    /// Reports rejected by the translator for `reason`.
    pub fn apply_rejected(&self, reason: &str) -> u64 {
        APPLY_REASONS
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.apply_errors[i].load(Relaxed))
    }

    pub fn total_rejected(&self) -> u64 {
        self.wire_errors
            .iter()
            .map(|c| c.load(Relaxed))
            .sum::<u64>()
            + self
                .apply_errors
                .iter()
                .map(|c| c.load(Relaxed))
                .sum::<u64>()
    }

    /// A JSON snapshot, for `--json` output, logs and the HTTP API.
    pub fn snapshot(&self) -> serde_json::Value {
        let mut reports = serde_json::Map::new();
        for op in PRIMITIVES {
            reports.insert(op.name().into(), self.reports_of(op).into());
        }
        let mut rejected = serde_json::Map::new();
        for e in WireError::ALL {
            rejected.insert(e.reason().into(), self.rejected(e.reason()).into());
        }
        for r in APPLY_REASONS {
            rejected.insert(r.into(), self.rejected(r).into());
        }
        let l = |c: &AtomicU64| c.load(Relaxed);
        serde_json::json!({
            "datagrams": l(&self.datagrams),
            "bytes": l(&self.bytes),
            "reports": reports,
            "priority": {"low": l(&self.by_priority[0]), "medium": l(&self.by_priority[1]), "high": l(&self.by_priority[2])},
            "rejected": rejected,
            "duplicates": l(&self.duplicates),
            "resyncs": l(&self.resyncs),
            "nacks_sent": l(&self.nacks_sent),
            "immediates": l(&self.immediates),
            "memory": {"writes": l(&self.writes), "fetch_adds": l(&self.fetch_adds), "write_bytes": l(&self.write_bytes)},
            "postcarding": {"complete": l(&self.postcard_chunks_complete), "collision": l(&self.postcard_chunks_collision), "timeout": l(&self.postcard_chunks_timeout)},
            "append": {"batches": l(&self.append_batches), "partial_batches": l(&self.append_partial_batches)},
            "sketch_merge": {"columns_written": l(&self.sketch_columns_written)},
            "forwarded": l(&self.forwarded),
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
        s.apply_error("bad_data_len");
        s.apply_error("bad_data_len");
        assert_eq!(s.wire_rejected("bad_data_len"), 1);
        assert_eq!(s.apply_rejected("bad_data_len"), 2);
        assert_eq!(s.rejected("bad_data_len"), 3);
        assert_eq!(s.total_rejected(), 3);
        assert_eq!(s.snapshot()["rejected"]["bad_data_len"], 3);
    }

    #[test]
    fn sum_adds_every_thread() {
        let a = Arc::new(Stats::default());
        let b = Arc::new(Stats::default());
        a.report(Opcode::Append);
        b.report(Opcode::Append);
        add(&b.forwarded, 4);
        b.apply_error("no_store");
        let t = Stats::sum(&[a, b]);
        assert_eq!(t.reports_of(Opcode::Append), 2);
        assert_eq!(t.forwarded.load(Relaxed), 4);
        assert_eq!(t.rejected("no_store"), 1);
    }
}
