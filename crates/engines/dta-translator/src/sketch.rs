//! Translator-side Sketch-Merge ([DTA-draft §3.1] "Sketch-Merge" and §4.2).
//!
//! Every reporter sends its sketch column by column, in order, tagged with an epoch. The
//! translator keeps, per reporter, the last in-order column; a column that skips ahead is not
//! merged but answered with a NACK naming the column to resend from. In-order columns are merged
//! into the translator's copy of the epoch's network-wide sketch (counter-wise sum for
//! Count-Min, register-wise max for HyperLogLog), and a column is written to the collector once
//! every expected reporter has contributed it. Consecutive ready columns are batched into one
//! write.
//!
//! Two gaps of the paper's scheme are closed here. A lost *last* column is revealed by no later
//! column, so a reporter that stops mid-sketch is NACKed for its next column after a stall
//! timeout ([`SketchAggregator::stalled`]). And a column some reporter never contributed is not
//! silently dropped: when a newer epoch retires it, it is written with the number of reporters
//! it actually merges, which the store records beside the column.
//!
//! A store created with `sync = "approsync"` takes ApproSync's sparse updates instead
//! ([InvisiFlow §6.1] "Sources"): a reporter sends one column, with its current cumulative
//! values, whenever one of its counters has diverged from the value last sent. Columns come in
//! any order and may be lost, repeated or reordered on the way (InvisiFlow's transport moves them
//! hop by hop), so the translator keeps each reporter's last values and merges only what grew:
//! the increase is added (Count-Min) or the register max-merged (HyperLogLog), and the column is
//! written at once with the number of reporters that have sent it so far. A later column heals a
//! lost one; a stale or repeated one changes nothing, and a reporter's first sync of a column
//! counts it among the column's reporters even when all its values are 0. The state is
//! `reporters × columns × width` u32 values and a bit per reporter and column, bounded by the
//! store's parameters ([`dta_store::MAX_APPROSYNC_STATE`]).

use hashbrown::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use dta_store::SketchSync;

/// How columns merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// Count-Min: `rows` big-endian u32 counters per column, summed.
    Sum { rows: usize },
    /// HyperLogLog: `width` u8 registers per column, max.
    Max { width: usize },
}

impl Merge {
    /// Values per column.
    pub fn width(&self) -> usize {
        match *self {
            Merge::Sum { rows } => rows,
            Merge::Max { width } => width,
        }
    }

    /// Bytes of one column on the wire.
    pub fn wire_len(&self) -> usize {
        match *self {
            Merge::Sum { rows } => rows * 4,
            Merge::Max { width } => width,
        }
    }

    /// The values of one column as sent: big-endian u32 counters (Count-Min) or u8 registers
    /// (HyperLogLog).
    fn values<'a>(&self, data: &'a [u8]) -> impl Iterator<Item = u32> + 'a {
        let step = match *self {
            Merge::Sum { .. } => 4,
            Merge::Max { .. } => 1,
        };
        data.chunks_exact(step)
            .map(|c| c.iter().fold(0u32, |v, &b| (v << 8) | b as u32))
    }

    /// Merge a reporter's value that grew from `from` to `to` into the merged value `merged`:
    /// the increase is added (Count-Min), the register max-merged (HyperLogLog). A column sent in
    /// order is growth from 0.
    fn absorb(&self, merged: &mut u64, from: u32, to: u32) {
        match *self {
            Merge::Sum { .. } => *merged += (to - from) as u64,
            Merge::Max { .. } => *merged = (*merged).max(to as u64),
        }
    }
}

/// The fate of one received column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnVerdict {
    Merged,
    /// Already merged (a retransmission overlap).
    Duplicate,
    /// Skipped ahead: NACK `column` of `epoch`.
    OutOfOrder {
        column: u16,
        epoch: u32,
    },
    /// For an epoch already retired.
    Stale,
    /// From a reporter beyond the `reporters` the sketch was created for: its columns are not
    /// merged (they would count a reporter the store does not expect) and it gets no state
    /// (which bounds the per-reporter state a hostile sender can create).
    UnknownReporter,
}

struct ReporterProgress {
    epoch: u32,
    next: u32,
    last_seen: Instant,
    last_nack: Option<Instant>,
    from: SocketAddr,
    /// ApproSync: the values last merged from this reporter in `epoch`, `columns × width`
    /// (allocated at its first column; empty in order).
    last: Vec<u32>,
    /// ApproSync: a bit per column this reporter has sent in `epoch` (it is then one of the
    /// column's contributors, even if everything it counted there is 0).
    sent: Vec<u64>,
}

struct EpochAcc {
    values: Vec<u64>,
    contributors: Vec<u32>,
    written: Vec<bool>,
}

/// Columns ready to be written: `values` holds `count × width` merged values.
pub struct ReadyColumns<'a> {
    pub epoch: u32,
    pub first_column: u32,
    pub count: u32,
    pub values: &'a [u64],
    pub reporters: u32,
}

/// One sketch's aggregation state.
pub struct SketchAggregator {
    merge: Merge,
    sync: SketchSync,
    columns: u32,
    reporters: u32,
    batch: u32,
    progress: HashMap<u32, ReporterProgress>,
    epochs: HashMap<u32, EpochAcc>,
    newest: Option<u32>,
}

impl SketchAggregator {
    pub fn new(merge: Merge, sync: SketchSync, columns: u32, reporters: u32, batch: u32) -> Self {
        SketchAggregator {
            merge,
            sync,
            columns,
            reporters: reporters.max(1),
            batch: batch.max(1),
            progress: HashMap::new(),
            epochs: HashMap::new(),
            newest: None,
        }
    }

    pub fn merge_kind(&self) -> Merge {
        self.merge
    }

    pub fn columns(&self) -> u32 {
        self.columns
    }

    /// Receive column `column` of `epoch` from `reporter` (at `from`). Ready columns go to
    /// `emit`. The caller has checked `data.len() == merge.wire_len()` and `column < columns`.
    #[allow(clippy::too_many_arguments)]
    pub fn receive<E>(
        &mut self,
        reporter: u32,
        from: SocketAddr,
        epoch: u32,
        column: u16,
        data: &[u8],
        now: Instant,
        mut emit: impl FnMut(ReadyColumns<'_>) -> Result<(), E>,
    ) -> Result<ColumnVerdict, E> {
        let column = column as u32;
        if let Some(newest) = self.newest {
            if epoch.saturating_add(1) < newest {
                return Ok(ColumnVerdict::Stale);
            }
        }
        if !self.progress.contains_key(&reporter) && self.progress.len() >= self.reporters as usize
        {
            return Ok(ColumnVerdict::UnknownReporter);
        }
        let p = self.progress.entry(reporter).or_insert(ReporterProgress {
            epoch,
            next: 0,
            last_seen: now,
            last_nack: None,
            from,
            last: Vec::new(),
            sent: Vec::new(),
        });
        if epoch < p.epoch {
            return Ok(ColumnVerdict::Stale);
        }
        if epoch > p.epoch {
            p.epoch = epoch;
            p.next = 0;
            p.last.fill(0);
            p.sent.fill(0);
        }
        p.last_seen = now;
        p.from = from;
        if self.sync == SketchSync::InOrder {
            if column < p.next {
                return Ok(ColumnVerdict::Duplicate);
            }
            if column > p.next {
                return Ok(ColumnVerdict::OutOfOrder {
                    column: p.next as u16,
                    epoch,
                });
            }
            p.next += 1;
            p.last_nack = None;
        }
        if self.newest.is_none_or(|n| epoch > n) {
            self.newest = Some(epoch);
            self.retire_before(epoch.saturating_sub(1), &mut emit)?;
        }
        let width = self.merge.width();
        let columns = self.columns as usize;
        let acc = self.epochs.entry(epoch).or_insert_with(|| EpochAcc {
            values: vec![0; columns * width],
            contributors: vec![0; columns],
            written: vec![false; columns],
        });
        let dst = &mut acc.values[column as usize * width..(column as usize + 1) * width];
        if self.sync == SketchSync::Approsync {
            let p = self
                .progress
                .get_mut(&reporter)
                .expect("the reporter's progress was inserted above");
            if p.last.is_empty() {
                p.last = vec![0; columns * width];
                p.sent = vec![0; columns.div_ceil(64)];
            }
            let last = &mut p.last[column as usize * width..(column as usize + 1) * width];
            let (word, bit) = (column as usize / 64, 1u64 << (column % 64));
            let first = p.sent[word] & bit == 0;
            p.sent[word] |= bit;
            let mut grew = first;
            for ((d, l), v) in dst
                .iter_mut()
                .zip(last.iter_mut())
                .zip(self.merge.values(data))
            {
                if v > *l {
                    self.merge.absorb(d, *l, v);
                    *l = v;
                    grew = true;
                }
            }
            if !grew {
                return Ok(ColumnVerdict::Duplicate);
            }
            if first {
                acc.contributors[column as usize] += 1;
            }
            let merged = acc.contributors[column as usize];
            Self::emit_run(acc, merged, width, epoch, column, 1, &mut emit)?;
            return Ok(ColumnVerdict::Merged);
        }
        for (d, v) in dst.iter_mut().zip(self.merge.values(data)) {
            self.merge.absorb(d, 0, v);
        }
        acc.contributors[column as usize] += 1;
        if acc.contributors[column as usize] >= self.reporters {
            // Find the run of complete, unwritten columns ending here.
            let mut start = column;
            while start > 0
                && start > column + 1 - self.batch.min(column + 1)
                && !acc.written[start as usize - 1]
                && acc.contributors[start as usize - 1] >= self.reporters
            {
                start -= 1;
            }
            let run = column + 1 - start;
            if run >= self.batch || column + 1 == self.columns {
                Self::emit_run(acc, self.reporters, width, epoch, start, run, &mut emit)?;
            }
        }
        Ok(ColumnVerdict::Merged)
    }

    fn emit_run<E>(
        acc: &mut EpochAcc,
        reporters: u32,
        width: usize,
        epoch: u32,
        start: u32,
        count: u32,
        emit: &mut impl FnMut(ReadyColumns<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        for c in start..start + count {
            acc.written[c as usize] = true;
        }
        emit(ReadyColumns {
            epoch,
            first_column: start,
            count,
            values: &acc.values[start as usize * width..(start + count) as usize * width],
            reporters,
        })
    }

    /// Retire epochs older than `oldest_kept`: write their columns that some reporters did
    /// contribute but not all (marked with how many did), then forget them.
    fn retire_before<E>(
        &mut self,
        oldest_kept: u32,
        emit: &mut impl FnMut(ReadyColumns<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let width = self.merge.width();
        let old: Vec<u32> = self
            .epochs
            .keys()
            .copied()
            .filter(|&e| e < oldest_kept)
            .collect();
        for e in old {
            if let Some(mut acc) = self.epochs.remove(&e) {
                for c in 0..self.columns {
                    let n = acc.contributors[c as usize];
                    if n > 0 && !acc.written[c as usize] {
                        Self::emit_run(&mut acc, n, width, e, c, 1, emit)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Reporters that stopped mid-sketch for longer than `stall`: `nack(reporter, address,
    /// column, epoch)` is called for each, at most once per `stall`.
    pub fn stalled(
        &mut self,
        now: Instant,
        stall: Duration,
        mut nack: impl FnMut(u32, SocketAddr, u16, u32),
    ) {
        for (&reporter, p) in self.progress.iter_mut() {
            let quiet = now.saturating_duration_since(p.last_seen) >= stall;
            let due = p
                .last_nack
                .is_none_or(|t| now.saturating_duration_since(t) >= stall);
            if p.next > 0 && p.next < self.columns && quiet && due {
                p.last_nack = Some(now);
                nack(reporter, p.from, p.next as u16, p.epoch);
            }
        }
    }

    /// Write every complete column not yet written (idle flush).
    pub fn flush<E>(
        &mut self,
        mut emit: impl FnMut(ReadyColumns<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let width = self.merge.width();
        for (&epoch, acc) in self.epochs.iter_mut() {
            let mut c = 0;
            while c < self.columns {
                if !acc.written[c as usize] && acc.contributors[c as usize] >= self.reporters {
                    let start = c;
                    while c < self.columns
                        && !acc.written[c as usize]
                        && acc.contributors[c as usize] >= self.reporters
                    {
                        c += 1;
                    }
                    Self::emit_run(
                        acc,
                        self.reporters,
                        width,
                        epoch,
                        start,
                        c - start,
                        &mut emit,
                    )?;
                } else {
                    c += 1;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> SocketAddr {
        "127.0.0.1:9".parse().unwrap()
    }

    fn col(vals: &[u32]) -> Vec<u8> {
        vals.iter().flat_map(|v| v.to_be_bytes()).collect()
    }

    #[test]
    fn sums_when_all_reporters_contributed_and_nacks_gaps() {
        let mut s = SketchAggregator::new(Merge::Sum { rows: 2 }, SketchSync::InOrder, 4, 2, 2);
        let mut out: Vec<(u32, u32, Vec<u64>)> = vec![];
        let rx =
            |s: &mut SketchAggregator, r, c, v: &[u32], out: &mut Vec<(u32, u32, Vec<u64>)>| {
                s.receive(r, addr(), 1, c, &col(v), Instant::now(), |rc| {
                    out.push((rc.first_column, rc.count, rc.values.to_vec()));
                    Ok::<_, ()>(())
                })
                .unwrap()
            };
        assert_eq!(rx(&mut s, 1, 0, &[1, 2], &mut out), ColumnVerdict::Merged);
        assert_eq!(
            rx(&mut s, 1, 2, &[9, 9], &mut out),
            ColumnVerdict::OutOfOrder {
                column: 1,
                epoch: 1
            }
        );
        assert_eq!(rx(&mut s, 1, 1, &[3, 4], &mut out), ColumnVerdict::Merged);
        assert_eq!(
            rx(&mut s, 1, 0, &[1, 2], &mut out),
            ColumnVerdict::Duplicate
        );
        assert!(out.is_empty(), "reporter 2 has not contributed yet");
        assert_eq!(rx(&mut s, 2, 0, &[10, 20], &mut out), ColumnVerdict::Merged);
        assert!(out.is_empty(), "batch of 2 not complete");
        assert_eq!(rx(&mut s, 2, 1, &[30, 40], &mut out), ColumnVerdict::Merged);
        assert_eq!(out, vec![(0, 2, vec![11, 22, 33, 44])]);
    }

    #[test]
    fn hll_max_and_last_column_flushes() {
        let mut s = SketchAggregator::new(Merge::Max { width: 3 }, SketchSync::InOrder, 1, 2, 8);
        let mut out = vec![];
        for (r, regs) in [(7u32, [1u8, 5, 2]), (8, [4, 0, 3])] {
            s.receive(r, addr(), 0, 0, &regs, Instant::now(), |rc| {
                out.push(rc.values.to_vec());
                Ok::<_, ()>(())
            })
            .unwrap();
        }
        assert_eq!(out, vec![vec![4, 5, 3]]);
    }

    #[test]
    fn a_stalled_reporter_is_nacked_for_its_next_column() {
        let mut s = SketchAggregator::new(Merge::Sum { rows: 1 }, SketchSync::InOrder, 3, 1, 8);
        let t0 = Instant::now();
        let ok = |_: ReadyColumns<'_>| Ok::<_, ()>(());
        s.receive(5, addr(), 2, 0, &col(&[1]), t0, ok).unwrap();
        s.receive(5, addr(), 2, 1, &col(&[1]), t0, ok).unwrap();
        // Column 2 (the last) was lost: nothing later reveals it but the stall timer.
        let mut nacks = vec![];
        s.stalled(
            t0 + Duration::from_millis(10),
            Duration::from_millis(50),
            |r, _, c, e| nacks.push((r, c, e)),
        );
        assert!(nacks.is_empty());
        s.stalled(
            t0 + Duration::from_millis(60),
            Duration::from_millis(50),
            |r, _, c, e| nacks.push((r, c, e)),
        );
        assert_eq!(nacks, vec![(5, 2, 2)]);
        // Not repeated before another stall interval.
        s.stalled(
            t0 + Duration::from_millis(70),
            Duration::from_millis(50),
            |r, _, c, e| nacks.push((r, c, e)),
        );
        assert_eq!(nacks.len(), 1);
    }

    #[test]
    fn an_epoch_retired_incomplete_is_written_with_its_contributor_count() {
        let mut s = SketchAggregator::new(Merge::Sum { rows: 1 }, SketchSync::InOrder, 2, 2, 1);
        let t = Instant::now();
        let mut out: Vec<(u32, u32, u32, Vec<u64>)> = vec![];
        let mut push = |rc: ReadyColumns<'_>| {
            out.push((rc.epoch, rc.first_column, rc.reporters, rc.values.to_vec()));
            Ok::<_, ()>(())
        };
        // Reporter 2 never sends epoch 0; reporter 1 sends both columns of epochs 0, 1 and 2.
        for e in 0..3 {
            s.receive(1, addr(), e, 0, &col(&[7]), t, &mut push)
                .unwrap();
            s.receive(1, addr(), e, 1, &col(&[8]), t, &mut push)
                .unwrap();
        }
        // Epoch 2 retires epoch 0: its columns are written with 1 of 2 reporters.
        assert_eq!(out, vec![(0, 0, 1, vec![7]), (0, 1, 1, vec![8])]);
    }

    #[test]
    fn a_reporter_beyond_the_sketchs_reporters_is_unknown_and_gets_no_state() {
        let mut a = SketchAggregator::new(Merge::Max { width: 1 }, SketchSync::InOrder, 2, 2, 1);
        let from: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let now = Instant::now();
        let mut sink = |_: ReadyColumns<'_>| Ok::<(), ()>(());
        assert_eq!(
            a.receive(1, from, 0, 0, &[1], now, &mut sink),
            Ok(ColumnVerdict::Merged)
        );
        assert_eq!(
            a.receive(2, from, 0, 0, &[1], now, &mut sink),
            Ok(ColumnVerdict::Merged)
        );
        for id in 3..100 {
            assert_eq!(
                a.receive(id, from, 0, 0, &[1], now, &mut sink),
                Ok(ColumnVerdict::UnknownReporter)
            );
        }
        assert_eq!(a.progress.len(), 2);
        // A known reporter keeps going.
        assert_eq!(
            a.receive(1, from, 0, 1, &[1], now, &mut sink),
            Ok(ColumnVerdict::Merged)
        );
    }

    #[test]
    fn approsync_merges_what_grew_in_any_order_and_a_later_column_heals_a_lost_one() {
        // 2 rows, 4 columns, up to 2 reporters; every column written at once.
        let mut a = SketchAggregator::new(Merge::Sum { rows: 2 }, SketchSync::Approsync, 4, 2, 8);
        let t = Instant::now();
        let mut out: Vec<(u32, u32, u32, Vec<u64>)> = vec![];
        let mut rx = |a: &mut SketchAggregator, r: u32, c: u16, v: &[u32]| {
            a.receive(r, addr(), 1, c, &col(v), t, |rc| {
                out.push((rc.first_column, rc.count, rc.reporters, rc.values.to_vec()));
                Ok::<_, ()>(())
            })
            .unwrap()
        };
        // Column 3 before column 0: no NACK, both merged.
        assert_eq!(rx(&mut a, 1, 3, &[2, 0]), ColumnVerdict::Merged);
        assert_eq!(rx(&mut a, 1, 0, &[1, 1]), ColumnVerdict::Merged);
        // Reporter 1's column 3 at [4, 0] was lost; [8, 1] carries the whole increase.
        assert_eq!(rx(&mut a, 1, 3, &[8, 1]), ColumnVerdict::Merged);
        // The lost [4, 0] arrives late, then a repeat of [8, 1]: both change nothing.
        assert_eq!(rx(&mut a, 1, 3, &[4, 0]), ColumnVerdict::Duplicate);
        assert_eq!(rx(&mut a, 1, 3, &[8, 1]), ColumnVerdict::Duplicate);
        // A second reporter's column 3 adds to the merged column and is counted as a reporter.
        assert_eq!(rx(&mut a, 2, 3, &[5, 0]), ColumnVerdict::Merged);
        // Only one row grew: the other keeps its merged value.
        assert_eq!(rx(&mut a, 2, 3, &[5, 3]), ColumnVerdict::Merged);
        // A reporter's first column of zeros (it counted nothing there) is merged: the column
        // is written, so its keys read 0 rather than "not merged"; a repeat changes nothing.
        assert_eq!(rx(&mut a, 2, 1, &[0, 0]), ColumnVerdict::Merged);
        assert_eq!(rx(&mut a, 2, 1, &[0, 0]), ColumnVerdict::Duplicate);
        // Reporter 2's later growth of column 0 makes it the column's second contributor.
        assert_eq!(rx(&mut a, 2, 0, &[0, 2]), ColumnVerdict::Merged);
        assert_eq!(
            out,
            vec![
                (3, 1, 1, vec![2, 0]),
                (0, 1, 1, vec![1, 1]),
                (3, 1, 1, vec![8, 1]),
                (3, 1, 2, vec![13, 1]),
                (3, 1, 2, vec![13, 4]),
                (1, 1, 1, vec![0, 0]),
                (0, 1, 2, vec![1, 3]),
            ]
        );
        // Nothing is pending and nothing stalls.
        let mut flushed = 0;
        a.flush(|_| {
            flushed += 1;
            Ok::<_, ()>(())
        })
        .unwrap();
        assert_eq!(flushed, 0);
        let mut nacks = 0;
        a.stalled(
            t + Duration::from_secs(60),
            Duration::from_millis(1),
            |_, _, _, _| nacks += 1,
        );
        assert_eq!(nacks, 0);
    }

    #[test]
    fn approsync_a_new_epoch_starts_from_zero_and_hll_registers_max_merge() {
        let mut a = SketchAggregator::new(Merge::Sum { rows: 1 }, SketchSync::Approsync, 2, 1, 8);
        let t = Instant::now();
        let mut out = vec![];
        let mut push = |rc: ReadyColumns<'_>| {
            out.push((rc.epoch, rc.values.to_vec()));
            Ok::<_, ()>(())
        };
        a.receive(1, addr(), 1, 0, &col(&[10]), t, &mut push)
            .unwrap();
        a.receive(1, addr(), 2, 0, &col(&[3]), t, &mut push)
            .unwrap();
        assert_eq!(
            a.receive(1, addr(), 1, 0, &col(&[20]), t, &mut push),
            Ok(ColumnVerdict::Stale)
        );
        assert_eq!(out, vec![(1, vec![10]), (2, vec![3])]);

        let mut h = SketchAggregator::new(Merge::Max { width: 2 }, SketchSync::Approsync, 1, 2, 8);
        let mut regs = vec![];
        for (r, v) in [(1u32, [3u8, 1]), (2, [1, 5]), (1, [2, 1])] {
            let verdict = h
                .receive(r, addr(), 0, 0, &v, t, |rc| {
                    regs.push(rc.values.to_vec());
                    Ok::<_, ()>(())
                })
                .unwrap();
            assert_eq!(verdict == ColumnVerdict::Merged, r == 2 || v == [3, 1]);
        }
        assert_eq!(regs, vec![vec![3, 1], vec![3, 5]]);
    }
}
