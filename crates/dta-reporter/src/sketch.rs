//! Sending a sketch for Sketch-Merge ([DTA-draft §3.1] "Sketch-Merge", §4.2).
//!
//! [DTA-draft §3.1]: "every switch sends the columns *sequentially*, and the translator keeps track
//! of the last column received from each switch. If columns arrive out-of-order, the translator
//! will notify the originating switch with a NACK packet and the transmission will start again
//! from the last received in-order column." [`SketchSender`] does exactly that: it sends
//! columns `0..C` of a [`ColumnSource`] in order (packed into native datagrams by the
//! [`Reporter`]), polls for Sketch-Merge NACKs (native NACKs with a sketch body) of its sketch
//! and epoch while sending, and on one restarts from the NACKed column. After the last column
//! it waits for `timeout` without a NACK before declaring the sketch delivered.
//!
//! Column wire format (the translator's, `dta-translator::sketch`): a Count-Min column is its
//! `rows` counters as big-endian u32 (saturating); a HyperLogLog column is `width` consecutive
//! u8 registers.

use std::time::{Duration, Instant};

use dta_store::sketch::{CountMin, HyperLogLog};

use crate::reporter::{ReportError, Reporter};

/// Something that can be sent column by column.
pub trait ColumnSource {
    /// Number of columns.
    fn columns(&self) -> usize;
    /// Bytes of one column on the wire (the same for every column; 4..=64 for the native
    /// protocol).
    fn column_len(&self) -> usize;
    /// Write column `column` (< [`ColumnSource::columns`]) into `out` (`column_len` bytes).
    fn write_column(&self, column: usize, out: &mut [u8]);
}

impl<T: ColumnSource + ?Sized> ColumnSource for &T {
    fn columns(&self) -> usize {
        (**self).columns()
    }
    fn column_len(&self) -> usize {
        (**self).column_len()
    }
    fn write_column(&self, column: usize, out: &mut [u8]) {
        (**self).write_column(column, out)
    }
}

/// What [`SketchSender::send_sketch`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SketchOutcome {
    /// Column reports sent, retransmitted ones included.
    pub columns_sent: u64,
    /// Restarts on a Sketch-Merge NACK.
    pub restarts: u64,
    /// False when the restart limit was hit: the translator kept NACKing.
    pub complete: bool,
}

/// Sends one sketch in column order and restarts from a NACKed column. See the module doc.
pub struct SketchSender<S: ColumnSource> {
    source: S,
    sketch_id: u16,
    epoch: u32,
    immediate: bool,
    max_restarts: u64,
    column: Vec<u8>,
    last_restart: Option<(usize, Instant)>,
}

impl<S: ColumnSource> SketchSender<S> {
    /// A sender of `source` as sketch `sketch_id`, epoch `epoch`. At most 64 restarts by
    /// default ([`SketchSender::max_restarts`]).
    pub fn new(source: S, sketch_id: u16, epoch: u32) -> SketchSender<S> {
        let len = source.column_len();
        SketchSender {
            source,
            sketch_id,
            epoch,
            immediate: false,
            max_restarts: 64,
            column: vec![0; len],
            last_restart: None,
        }
    }

    /// Set the immediate flag of the column reports.
    pub fn immediate(mut self, immediate: bool) -> Self {
        self.immediate = immediate;
        self
    }

    /// Give up after this many restarts.
    pub fn max_restarts(mut self, n: u64) -> Self {
        self.max_restarts = n;
        self
    }

    /// The sketch id.
    pub fn sketch_id(&self) -> u16 {
        self.sketch_id
    }

    /// The epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Send every column through `reporter` (native protocol), restarting from the column of
    /// any Sketch-Merge NACK for this sketch and epoch, until `timeout` passes after the last
    /// column without such a NACK. The reporter's NACK socket receives the NACKs; without one
    /// the sketch is sent once.
    pub fn send_sketch(
        &mut self,
        reporter: &mut Reporter,
        timeout: Duration,
    ) -> Result<SketchOutcome, ReportError> {
        let columns = self.source.columns();
        if columns > u16::MAX as usize + 1 {
            return Err(ReportError::Unsupported(
                "a sketch has at most 65536 columns (u16 column index)",
            ));
        }
        let mut out = SketchOutcome::default();
        self.last_restart = None;
        // Reports packed before belong to no sketch: send them; drop NACKs of an earlier send.
        reporter.flush()?;
        reporter.poll_nacks()?;
        let _ = reporter.take_sketch_nack();
        let mut next = 0usize;
        loop {
            // [DTA-draft §3.1]: columns are sent sequentially.
            while next < columns {
                self.source.write_column(next, &mut self.column);
                reporter.sketch_column(
                    self.sketch_id,
                    next as u16,
                    self.epoch,
                    &self.column,
                    self.immediate,
                )?;
                out.columns_sent += 1;
                next += 1;
                if reporter.pending() == 0 {
                    // A datagram left: look for NACKs at datagram granularity.
                    reporter.poll_nacks()?;
                }
                if let Some(c) = self.take_nack(reporter) {
                    if !self.restart(&mut out, reporter, c, &mut next)? {
                        return Ok(out);
                    }
                }
            }
            reporter.flush()?;
            // Wait for a NACK of a column sent last; quiet for `timeout` means delivered.
            let mut restarted = false;
            loop {
                if let Some(c) = self.take_nack(reporter) {
                    if !self.restart(&mut out, reporter, c, &mut next)? {
                        return Ok(out);
                    }
                    restarted = true;
                    break;
                }
                if reporter.wait_nack(timeout)? == 0 {
                    break;
                }
            }
            if !restarted {
                out.complete = true;
                return Ok(out);
            }
        }
    }

    /// The NACKed column, if a NACK for this sketch and epoch is waiting.
    fn take_nack(&self, reporter: &mut Reporter) -> Option<usize> {
        match reporter.take_sketch_nack() {
            Some(n) if n.sketch_id == self.sketch_id && n.epoch == self.epoch => {
                Some(n.column as usize)
            }
            _ => None,
        }
    }

    /// Restart from `column` ([DTA-draft §3.1]: "the transmission will start again from the last
    /// received in-order column"); false when the restart limit is reached.
    fn restart(
        &mut self,
        out: &mut SketchOutcome,
        reporter: &mut Reporter,
        column: usize,
        next: &mut usize,
    ) -> Result<bool, ReportError> {
        if column >= self.source.columns() {
            // Names no column of ours: nothing to resend.
            return Ok(true);
        }
        if out.restarts >= self.max_restarts {
            reporter.flush()?;
            return Ok(false);
        }
        let now = Instant::now();
        if let Some((c, at)) = self.last_restart {
            // Columns sent before the restart still arrive out of order and draw NACKs for
            // the same column: one restart per hold-off is enough.
            if c == column && now.duration_since(at) < reporter.config().nack_holdoff {
                return Ok(true);
            }
        }
        self.last_restart = Some((column, now));
        // Columns packed but not sent yet would only skip ahead of `column`: drop them.
        reporter.discard_pending();
        out.restarts += 1;
        *next = column;
        Ok(true)
    }
}

/// A Count-Min sketch sends its columns as built by `dta-store` (hashing exactly like the
/// Sketch-Merge store): column c is its `rows` counters, big-endian u32 ([DTA-draft §3.1]).
impl ColumnSource for CountMin {
    fn columns(&self) -> usize {
        CountMin::columns(self) as usize
    }
    fn column_len(&self) -> usize {
        self.rows() as usize * 4
    }
    fn write_column(&self, column: usize, out: &mut [u8]) {
        self.column_wire(column as u32, out)
    }
}

/// A HyperLogLog sent `per_column` registers per column ([DTA-draft §3.1]: merged register-wise by
/// max). `per_column` must match the Sketch-Merge store's `registers_per_column`.
#[derive(Debug, Clone, Copy)]
pub struct HllColumns<'a> {
    /// The sketch.
    pub hll: &'a HyperLogLog,
    /// Registers per column (4..=64, dividing the register count).
    pub per_column: u32,
}

impl ColumnSource for HllColumns<'_> {
    fn columns(&self) -> usize {
        self.hll.registers().len() / self.per_column.max(1) as usize
    }
    fn column_len(&self) -> usize {
        self.per_column as usize
    }
    fn write_column(&self, column: usize, out: &mut [u8]) {
        out.copy_from_slice(self.hll.column(column as u32, self.per_column));
    }
}
