//! Translator-side Sketch-Merge (paper 000 §3.1 "Sketch-Merge" and §4.2).
//!
//! Every reporter sends its sketch column by column, in order, tagged with an epoch. The
//! translator keeps, per reporter, the last in-order column; a column that skips ahead is not
//! merged but answered with a NACK naming the column to resend from. In-order columns are merged
//! into the translator's copy of the epoch's network-wide sketch (counter-wise sum for
//! Count-Min, register-wise max for HyperLogLog), and a column is written to the collector once
//! every expected reporter has contributed it. Consecutive ready columns are batched into one
//! write.

use std::collections::HashMap;

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
    OutOfOrder { column: u16, epoch: u32 },
    /// For an epoch already retired.
    Stale,
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
    progress: HashMap<u32, (u32, u32)>,
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

    /// Receive column `column` of `epoch` from `reporter`. Ready columns go to `emit`.
    /// The caller has checked `data.len() == merge.wire_len()` and `column < columns`.
    pub fn receive<E>(
        &mut self,
        reporter: u32,
        epoch: u32,
        column: u16,
        data: &[u8],
        mut emit: impl FnMut(ReadyColumns<'_>) -> Result<(), E>,
    ) -> Result<ColumnVerdict, E> {
        let column = column as u32;
        if let Some(newest) = self.newest {
            if epoch.saturating_add(1) < newest {
                return Ok(ColumnVerdict::Stale);
            }
        }
        let (r_epoch, next) = *self.progress.get(&reporter).unwrap_or(&(epoch, 0));
        let next = if epoch > r_epoch {
            0
        } else if epoch < r_epoch {
            return Ok(ColumnVerdict::Stale);
        } else {
            next
        };
        if column < next {
            return Ok(ColumnVerdict::Duplicate);
        }
        if column > next {
            self.progress.insert(reporter, (epoch, next));
            return Ok(ColumnVerdict::OutOfOrder {
                column: next as u16,
                epoch,
            });
        }
        self.progress.insert(reporter, (epoch, next + 1));
        if self.newest.is_none_or(|n| epoch > n) {
            self.newest = Some(epoch);
            // Retire epochs older than the previous one: their stragglers are stale.
            self.epochs.retain(|&e, _| e + 1 >= epoch);
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

    /// Write every complete column not yet written (idle flush).
    pub fn flush<E>(&mut self, mut emit: impl FnMut(ReadyColumns<'_>) -> Result<(), E>) -> Result<(), E> {
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
                    Self::emit_run(acc, self.reporters, width, epoch, start, c - start, &mut emit)?;
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

    fn col(vals: &[u32]) -> Vec<u8> {
        vals.iter().flat_map(|v| v.to_be_bytes()).collect()
    }

    #[test]
    fn sums_when_all_reporters_contributed_and_nacks_gaps() {
        let mut s = SketchAggregator::new(Merge::Sum { rows: 2 }, 4, 2, 2);
        let mut out: Vec<(u32, u32, Vec<u64>)> = vec![];
        let mut rx = |s: &mut SketchAggregator, r, c, v: &[u32], out: &mut Vec<(u32, u32, Vec<u64>)>| {
            s.receive(r, 1, c, &col(v), |rc| {
                out.push((rc.first_column, rc.count, rc.values.to_vec()));
                Ok::<_, ()>(())
            })
            .unwrap()
        };
        assert_eq!(rx(&mut s, 1, 0, &[1, 2], &mut out), ColumnVerdict::Merged);
        assert_eq!(
            rx(&mut s, 1, 2, &[9, 9], &mut out),
            ColumnVerdict::OutOfOrder { column: 1, epoch: 1 }
        );
        assert_eq!(rx(&mut s, 1, 1, &[3, 4], &mut out), ColumnVerdict::Merged);
        assert_eq!(rx(&mut s, 1, 0, &[1, 2], &mut out), ColumnVerdict::Duplicate);
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
            s.receive(r, 0, 0, &regs, |rc| {
                out.push(rc.values.to_vec());
                Ok::<_, ()>(())
            })
            .unwrap();
        }
        assert_eq!(out, vec![vec![4, 5, 3]]);
    }
}
