//! The Sketch-Merge store ([DTA-draft §3.1] "Sketch-Merge", §4.2): the network-wide sketch the
//! translator
//! merges from every reporter's columns (counter-wise sum for Count-Min, register-wise max for
//! HyperLogLog) and writes in batches of consecutive columns.
//!
//! The data area is `columns` merged-column records of `record_len` bytes, column c at
//! `c·record_len`: `[epoch u32 LE][reporters u32 LE][values][zero pad to a multiple of 8]`, where
//! values are `rows` u64 LE sums (Count-Min) or `registers_per_column` u8 registers
//! (HyperLogLog), and `reporters` is how many reporters contributed. Each record carries its own
//! epoch, so a query can tell whether the columns it combines come from one epoch.

use crate::hash;
use crate::sketch::hll_estimate;
use crate::{
    ApplyError, HashScheme, Header, MemSink, RegionMem, SketchKind, StoreError, StoreKind,
    StoreSpec,
};

/// Bytes of records gathered into one write.
const BUF: usize = 4096;
/// The buffer of a write of a few records (a single column, as ApproSync writes them): at least
/// one record of the largest kind (a Count-Min of 32 rows: 8 + 8 x 32 bytes), so the common
/// one-column write does not zero a whole [`BUF`].
const SMALL_BUF: usize = 512;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SketchLayout {
    sketch_id: u16,
    kind: SketchKind,
    columns: u32,
    width: usize,
    record_len: usize,
}

/// The epoch and contributor count stored with a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnEpoch {
    pub epoch: u32,
    pub reporters: u32,
}

impl SketchLayout {
    pub fn new(h: &Header) -> Result<Self, StoreError> {
        match &h.spec {
            StoreSpec::SketchMerge(s) => Ok(SketchLayout {
                sketch_id: s.sketch_id,
                kind: s.kind,
                columns: s.kind.columns(),
                width: s.kind.width() as usize,
                record_len: s.kind.record_len(),
            }),
            _ => Err(StoreError::WrongKind {
                expected: StoreKind::SketchMerge,
                found: h.kind,
            }),
        }
    }

    pub fn sketch_id(&self) -> u16 {
        self.sketch_id
    }
    pub fn kind(&self) -> SketchKind {
        self.kind
    }
    pub fn columns(&self) -> u32 {
        self.columns
    }
    /// Values per column (CM rows, HLL registers per column).
    pub fn width(&self) -> usize {
        self.width
    }
    /// Bytes of one merged-column record.
    pub fn record_len(&self) -> usize {
        self.record_len
    }
    /// Bytes of one column on the wire: CM `rows·4` (u32 BE counters), HLL `registers_per_column`.
    pub fn column_len_wire(&self) -> usize {
        match self.kind {
            SketchKind::CountMin { rows, .. } => rows as usize * 4,
            SketchKind::HyperLogLog {
                registers_per_column,
                ..
            } => registers_per_column as usize,
        }
    }

    pub fn column_offset(&self, column: u32) -> u64 {
        column as u64 * self.record_len as u64
    }

    /// Write `values.len() / width` merged columns starting at `first_column`, all of `epoch`,
    /// merged from `reporters` reporters: contiguous records, in as few writes as fit a 4 KiB
    /// staging buffer (no allocation).
    pub fn write_columns(
        &self,
        first_column: u32,
        epoch: u32,
        reporters: u32,
        values: &[u64],
        sink: &mut impl MemSink,
    ) -> Result<(), ApplyError> {
        if values.is_empty() || values.len() % self.width != 0 {
            return Err(ApplyError::BadDataLen);
        }
        let count = (values.len() / self.width) as u64;
        if first_column as u64 + count > self.columns as u64 {
            return Err(ApplyError::BadColumn);
        }
        if count as usize * self.record_len <= SMALL_BUF {
            self.write_records::<SMALL_BUF>(first_column, epoch, reporters, values, sink)
        } else {
            self.write_records::<BUF>(first_column, epoch, reporters, values, sink)
        }
    }

    /// [`SketchLayout::write_columns`] through a buffer of `N` bytes (at least one record).
    fn write_records<const N: usize>(
        &self,
        first_column: u32,
        epoch: u32,
        reporters: u32,
        values: &[u64],
        sink: &mut impl MemSink,
    ) -> Result<(), ApplyError> {
        let mut buf = [0u8; N];
        let per_write = N / self.record_len;
        let mut offset = self.column_offset(first_column);
        for group in values.chunks(per_write * self.width) {
            let mut at = 0;
            for col in group.chunks_exact(self.width) {
                let rec = &mut buf[at..at + self.record_len];
                rec.fill(0);
                rec[0..4].copy_from_slice(&epoch.to_le_bytes());
                rec[4..8].copy_from_slice(&reporters.to_le_bytes());
                match self.kind {
                    SketchKind::CountMin { .. } => {
                        for (o, v) in rec[8..].chunks_exact_mut(8).zip(col) {
                            o.copy_from_slice(&v.to_le_bytes());
                        }
                    }
                    SketchKind::HyperLogLog { .. } => {
                        for (o, &v) in rec[8..].iter_mut().zip(col) {
                            *o = v.min(255) as u8;
                        }
                    }
                }
                at += self.record_len;
            }
            sink.write(offset, &buf[..at])?;
            offset += at as u64;
        }
        Ok(())
    }

    /// Read column `column`: its epoch/reporters and values.
    pub fn read_column(&self, mem: &RegionMem, column: u32) -> Option<(ColumnEpoch, Vec<u64>)> {
        if column >= self.columns {
            return None;
        }
        let mut rec = vec![0u8; self.record_len];
        mem.read(self.column_offset(column), &mut rec).ok()?;
        let ce = ColumnEpoch {
            epoch: u32::from_le_bytes(rec[0..4].try_into().unwrap()),
            reporters: u32::from_le_bytes(rec[4..8].try_into().unwrap()),
        };
        let values = match self.kind {
            SketchKind::CountMin { .. } => rec[8..8 + self.width * 8]
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            SketchKind::HyperLogLog { .. } => {
                rec[8..8 + self.width].iter().map(|&r| r as u64).collect()
            }
        };
        Some((ce, values))
    }

    /// Every column's epoch and contributor count.
    pub fn column_epochs(&self, mem: &RegionMem) -> Vec<ColumnEpoch> {
        let mut out = Vec::with_capacity(self.columns as usize);
        let mut hdr = [0u8; 8];
        for c in 0..self.columns {
            if mem.read(self.column_offset(c), &mut hdr).is_err() {
                break;
            }
            out.push(ColumnEpoch {
                epoch: u32::from_le_bytes(hdr[0..4].try_into().unwrap()),
                reporters: u32::from_le_bytes(hdr[4..8].try_into().unwrap()),
            });
        }
        out
    }

    fn cm_cells(&self, mem: &RegionMem, key: &[u8]) -> Vec<(ColumnEpoch, u64)> {
        let SketchKind::CountMin { rows, columns } = self.kind else {
            return vec![];
        };
        (0..rows)
            .filter_map(|r| {
                let c = hash::index(HashScheme::Native, key, r as u8, columns as u64) as u32;
                let at = self.column_offset(c);
                let mut hdr = [0u8; 8];
                mem.read(at, &mut hdr).ok()?;
                let v = mem.load_u64(at + 8 + r as u64 * 8).ok()?;
                Some((
                    ColumnEpoch {
                        epoch: u32::from_le_bytes(hdr[0..4].try_into().unwrap()),
                        reporters: u32::from_le_bytes(hdr[4..8].try_into().unwrap()),
                    },
                    v,
                ))
            })
            .collect()
    }

    /// Whether every column `key`'s Count-Min estimate reads has been merged at least once (a
    /// column the translator never wrote holds no reporter's data: an estimate from it would be
    /// a 0 that means "not yet", not "never seen"). False for a HyperLogLog store.
    pub fn cm_key_merged(&self, mem: &RegionMem, key: &[u8]) -> bool {
        let cells = self.cm_cells(mem, key);
        !cells.is_empty() && cells.iter().all(|(ce, _)| ce.reporters > 0)
    }

    /// How many columns have been merged at least once (HyperLogLog: registers of unmerged
    /// columns read as 0).
    pub fn merged_columns(&self, mem: &RegionMem) -> u32 {
        self.column_epochs(mem)
            .iter()
            .filter(|c| c.reporters > 0)
            .count() as u32
    }

    /// The merged Count-Min estimate of `key` (minimum over rows), whatever epoch each column
    /// holds. 0 for a HyperLogLog store.
    pub fn cm_estimate(&self, mem: &RegionMem, key: &[u8]) -> u64 {
        self.cm_cells(mem, key)
            .into_iter()
            .map(|(_, v)| v)
            .min()
            .unwrap_or(0)
    }

    /// The estimate of `key` in `epoch`, or `None` if one of the columns it needs holds another
    /// epoch (or this is not a Count-Min store).
    pub fn cm_estimate_epoch(&self, mem: &RegionMem, key: &[u8], epoch: u32) -> Option<u64> {
        let cells = self.cm_cells(mem, key);
        if cells.is_empty() || cells.iter().any(|(ce, _)| ce.epoch != epoch) {
            return None;
        }
        cells.into_iter().map(|(_, v)| v).min()
    }

    /// All HyperLogLog registers, column by column.
    pub fn hll_registers(&self, mem: &RegionMem) -> Vec<u8> {
        let mut regs = Vec::with_capacity(self.columns as usize * self.width);
        for c in 0..self.columns {
            match self.read_column(mem, c) {
                Some((_, v)) => regs.extend(v.into_iter().map(|r| r as u8)),
                None => regs.extend(std::iter::repeat_n(0, self.width)),
            }
        }
        regs
    }

    /// The merged HyperLogLog cardinality estimate. NaN for a Count-Min store.
    pub fn hll_cardinality(&self, mem: &RegionMem) -> f64 {
        match self.kind {
            SketchKind::HyperLogLog { .. } => hll_estimate(&self.hll_registers(mem)),
            SketchKind::CountMin { .. } => f64::NAN,
        }
    }
}
