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

use std::collections::VecDeque;
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

/// A Count-Min sketch kept in approximate sync with a Sketch-Merge store of
/// `sync = "approsync"` (ApproSync, [InvisiFlow §6.1] "Sources"; docs/protocol.md).
///
/// Every [`ApproSync::update`] checks the counters it touched against the values last sent: a
/// counter that has grown by at least `theta` times its last-sent value (and by at least 1) makes
/// its column due. [`ApproSync::sync`] sends each due column once, with the column's current
/// (cumulative) counters, and remembers them as sent. Columns go in any order and a lost one is
/// healed by the next sync of the same column (the translator merges only what grew), so there is
/// nothing to retransmit; [`ApproSync::sync_all`] sends every column, to bound what a loss can
/// leave behind (e.g. at the end of an epoch).
///
/// Due columns are sent in the order they became due. The data path ([`ApproSync::update`],
/// [`ApproSync::sync`], [`ApproSync::next_due`]) allocates nothing: the due set is a bitmap and a
/// queue of at most `columns` columns, both sized at construction.
#[derive(Debug, Clone)]
pub struct ApproSync {
    sketch: CountMin,
    /// The counters as last sent, laid out like the sketch's (column-major: `c·rows + r`).
    sent: Vec<u32>,
    theta: f64,
    sketch_id: u16,
    epoch: u32,
    due: Vec<bool>,
    /// The due columns, oldest first (each at most once: `due` marks them).
    due_list: VecDeque<u32>,
    column: Vec<u8>,
}

impl ApproSync {
    /// A zeroed `rows` × `columns` Count-Min sketch synced as sketch `sketch_id`, epoch `epoch`,
    /// with relative divergence threshold `theta`. The shape must be the store's (`rows`
    /// 1..=16: a column is at most 64 bytes in the native protocol; `columns` a power of two,
    /// at most 65536: the column index is 16 bits); `theta` finite and non-negative.
    pub fn new(
        rows: u32,
        columns: u32,
        theta: f64,
        sketch_id: u16,
        epoch: u32,
    ) -> Result<ApproSync, ReportError> {
        if !(1..=16).contains(&rows) {
            return Err(ReportError::Unsupported(
                "an ApproSync Count-Min has 1..=16 rows (a native column is at most 64 bytes)",
            ));
        }
        if !columns.is_power_of_two() || columns > u16::MAX as u32 + 1 {
            return Err(ReportError::Unsupported(
                "an ApproSync Count-Min has a power-of-two number of columns, at most 65536",
            ));
        }
        if !theta.is_finite() || theta < 0.0 {
            return Err(ReportError::Unsupported(
                "the ApproSync threshold is a finite, non-negative relative divergence",
            ));
        }
        Ok(ApproSync {
            sketch: CountMin::new(rows, columns),
            sent: vec![0; rows as usize * columns as usize],
            theta,
            sketch_id,
            epoch,
            due: vec![false; columns as usize],
            due_list: VecDeque::with_capacity(columns as usize),
            column: vec![0; rows as usize * 4],
        })
    }

    /// The sketch as counted here (what the store converges to once every due column is sent).
    pub fn sketch(&self) -> &CountMin {
        &self.sketch
    }

    /// The sketch id.
    pub fn sketch_id(&self) -> u16 {
        self.sketch_id
    }

    /// The epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Columns due for a sync.
    pub fn due(&self) -> usize {
        self.due_list.len()
    }

    /// Count `inc` for `key` in every row (saturating, as the store merges u32 counters); true
    /// when this made a column due.
    pub fn update(&mut self, key: &[u8], inc: u32) -> bool {
        let mut newly_due = false;
        for r in 0..self.sketch.rows() {
            // Each row's column is hashed once: counted, then checked against what was sent.
            let c = self.sketch.column_of(key, r);
            let now = self.sketch.add(r, c, inc);
            if self.due[c as usize] {
                continue;
            }
            let sent = self.sent[(c * self.sketch.rows() + r) as usize];
            if self.diverged(now, sent) {
                self.due[c as usize] = true;
                self.due_list.push_back(c);
                newly_due = true;
            }
        }
        newly_due
    }

    /// ApproSync's divergence test: the counter grew by at least `theta` of the value last sent,
    /// and by at least one.
    fn diverged(&self, now: u32, sent: u32) -> bool {
        let grown = now.saturating_sub(sent);
        grown > 0 && grown as f64 >= self.theta * sent as f64
    }

    /// Send every due column through `reporter` (native protocol) and flush it; the number of
    /// columns sent.
    pub fn sync(&mut self, reporter: &mut Reporter) -> Result<usize, ReportError> {
        let (sketch_id, epoch) = (self.sketch_id, self.epoch);
        let n = self.take_due(|column, data| {
            reporter.sketch_column(sketch_id, column, epoch, data, false)
        })?;
        reporter.flush()?;
        Ok(n)
    }

    /// Send every column, due or not, and flush: a full resync ([`ApproSync::mark_all_due`]).
    pub fn sync_all(&mut self, reporter: &mut Reporter) -> Result<usize, ReportError> {
        self.mark_all_due();
        self.sync(reporter)
    }

    /// Make every column due: the next sync is a full resync. ApproSync columns are cumulative,
    /// so it heals every loss so far (a lost column is otherwise healed only when the column
    /// diverges again) and tells the store the columns that never counted anything (their keys
    /// then read 0, not "not merged"). It costs `columns` reports: use it to end an epoch or
    /// now and then, not per update.
    pub fn mark_all_due(&mut self) {
        for c in 0..self.sketch.columns() {
            if !self.due[c as usize] {
                self.due[c as usize] = true;
                self.due_list.push_back(c);
            }
        }
    }

    /// Hand each due column to `send` (its index and wire bytes: `rows` big-endian u32), oldest
    /// first, until none is left or `send` fails (that column stays due); the columns handed over
    /// count as sent. The building block of [`ApproSync::sync`] for senders other than a
    /// [`Reporter`] (the Python package's).
    pub fn take_due<E>(
        &mut self,
        mut send: impl FnMut(u16, &[u8]) -> Result<(), E>,
    ) -> Result<usize, E> {
        let mut sent = 0;
        while let Some(&c) = self.due_list.front() {
            self.sketch.column_wire(c, &mut self.column);
            send(c as u16, &self.column)?;
            self.due_list.pop_front();
            self.mark_sent(c);
            sent += 1;
        }
        Ok(sent)
    }

    /// The oldest due column, which now counts as sent: its index and wire bytes (`rows`
    /// big-endian u32). For a caller that sends one column at a time (the C ABI's).
    pub fn next_due(&mut self) -> Option<(u16, &[u8])> {
        let c = self.due_list.pop_front()?;
        self.sketch.column_wire(c, &mut self.column);
        self.mark_sent(c);
        Some((c as u16, &self.column))
    }

    /// Column `c` was handed over: its counters are now the values last sent.
    fn mark_sent(&mut self, c: u32) {
        self.due[c as usize] = false;
        let at = c as usize * self.sketch.rows() as usize;
        let now = self.sketch.column_counters(c);
        self.sent[at..at + now.len()].copy_from_slice(now);
    }

    /// Start epoch `epoch` from an empty sketch (the store starts its merge anew per epoch).
    pub fn next_epoch(&mut self, epoch: u32) {
        let (rows, columns) = (self.sketch.rows(), self.sketch.columns());
        self.sketch = CountMin::new(rows, columns);
        self.sent.iter_mut().for_each(|v| *v = 0);
        self.due.iter_mut().for_each(|d| *d = false);
        self.due_list.clear();
        self.epoch = epoch;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The columns `sketch` hands over now, as (column, counters).
    fn take(sketch: &mut ApproSync) -> Vec<(u16, Vec<u32>)> {
        let mut out = vec![];
        sketch
            .take_due(|c, data| {
                let v = data
                    .chunks_exact(4)
                    .map(|b| u32::from_be_bytes(b.try_into().unwrap()))
                    .collect();
                out.push((c, v));
                Ok::<(), ()>(())
            })
            .unwrap();
        out
    }

    #[test]
    fn a_column_is_due_when_a_counter_grew_by_theta_of_what_was_sent() {
        let mut s = ApproSync::new(1, 4, 1.0, 1, 1).unwrap();
        let k = b"flow";
        let c = s.sketch().column_of(k, 0) as u16;
        // theta = 1: due at 1 (from 0), 2 (from 1), 4 (from 2), 8 (from 4).
        let mut synced_at = vec![];
        for n in 1..=10u32 {
            let due = s.update(k, 1);
            assert_eq!(due, s.due() == 1, "update {n}");
            for (col, v) in take(&mut s) {
                assert_eq!(col, c);
                synced_at.push(v[0]);
            }
        }
        assert_eq!(synced_at, [1, 2, 4, 8]);
        assert!(take(&mut s).is_empty());
    }

    #[test]
    fn theta_zero_syncs_every_growth_and_a_due_column_is_listed_once() {
        let mut s = ApproSync::new(2, 8, 0.0, 1, 1).unwrap();
        for _ in 0..5 {
            s.update(b"a", 1);
        }
        // Both rows may share a column or not; each due column is handed over once.
        let cols = take(&mut s);
        let mut ids: Vec<u16> = cols.iter().map(|(c, _)| *c).collect();
        ids.dedup();
        assert_eq!(ids.len(), cols.len());
        assert!(cols.iter().all(|(_, v)| v.iter().sum::<u32>() >= 5));
        s.update(b"a", 0);
        assert!(take(&mut s).is_empty(), "no growth, nothing due");
    }

    #[test]
    fn a_failed_send_leaves_the_column_due() {
        let mut s = ApproSync::new(1, 4, 1.0, 1, 1).unwrap();
        s.update(b"x", 3);
        assert_eq!(s.take_due(|_, _| Err("down")), Err("down"));
        assert_eq!(s.due(), 1);
        assert_eq!(take(&mut s).len(), 1);
    }

    #[test]
    fn due_columns_go_oldest_first_one_at_a_time_or_all() {
        let mut s = ApproSync::new(1, 1024, 0.0, 1, 1).unwrap();
        let keys: Vec<[u8; 4]> = (0..50u32).map(|k| k.to_be_bytes()).collect();
        let mut order = vec![];
        for k in &keys {
            let c = s.sketch().column_of(k, 0) as u16;
            if s.update(k, 1) {
                order.push(c);
            }
        }
        let (first, wire) = s.next_due().unwrap();
        assert_eq!(first, order[0]);
        assert_eq!(wire.len(), 4);
        assert_eq!(s.due(), order.len() - 1);
        let rest: Vec<u16> = take(&mut s).into_iter().map(|(c, _)| c).collect();
        assert_eq!(rest, order[1..]);
        assert!(s.next_due().is_none());
    }

    #[test]
    fn a_new_epoch_starts_empty() {
        let mut s = ApproSync::new(1, 4, 1.0, 1, 1).unwrap();
        s.update(b"x", 3);
        s.next_epoch(2);
        assert_eq!((s.epoch(), s.due(), s.sketch().estimate(b"x")), (2, 0, 0));
        s.update(b"x", 1);
        assert_eq!(take(&mut s)[0].1, [1]);
    }

    #[test]
    fn shapes_the_wire_cannot_carry_are_refused() {
        for (rows, columns, theta) in [
            (0, 4, 1.0),
            (17, 4, 1.0),
            (1, 3, 1.0),
            (1, 1 << 17, 1.0),
            (1, 4, f64::NAN),
            (1, 4, -0.5),
            (1, 4, f64::INFINITY),
        ] {
            assert!(
                ApproSync::new(rows, columns, theta, 1, 1).is_err(),
                "{rows} x {columns}, theta {theta}"
            );
        }
        assert!(ApproSync::new(16, 1 << 16, 0.0, 1, 1).is_ok());
    }
}
