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

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

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
    columns: u32,
    reporters: u32,
    batch: u32,
    progress: HashMap<u32, ReporterProgress>,
    epochs: HashMap<u32, EpochAcc>,
    newest: Option<u32>,
}

impl SketchAggregator {
    pub fn new(merge: Merge, columns: u32, reporters: u32, batch: u32) -> Self {
        SketchAggregator {
            merge,
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
        });
        if epoch < p.epoch {
            return Ok(ColumnVerdict::Stale);
        }
        if epoch > p.epoch {
            p.epoch = epoch;
            p.next = 0;
        }
        p.last_seen = now;
        p.from = from;
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
        match self.merge {
            Merge::Sum { .. } => {
                for (d, c) in dst.iter_mut().zip(data.chunks_exact(4)) {
                    *d += u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as u64;
                }
            }
            Merge::Max { .. } => {
                for (d, &r) in dst.iter_mut().zip(data) {
                    *d = (*d).max(r as u64);
                }
            }
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
        let mut s = SketchAggregator::new(Merge::Sum { rows: 2 }, 4, 2, 2);
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
        let mut s = SketchAggregator::new(Merge::Max { width: 3 }, 1, 2, 8);
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
        let mut s = SketchAggregator::new(Merge::Sum { rows: 1 }, 3, 1, 8);
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
        let mut s = SketchAggregator::new(Merge::Sum { rows: 1 }, 2, 2, 1);
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
        let mut a = SketchAggregator::new(Merge::Max { width: 1 }, 2, 2, 1);
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
}
