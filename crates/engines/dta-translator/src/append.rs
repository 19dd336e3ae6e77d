//! Translator-side Append batching ([DTA §4 "Append", A.3], Algorithm 3).
//!
//! Each list has a batch of B entries in the translator. A full batch becomes one contiguous
//! write at the list's head, followed by the new head pointer (a monotone u64 count of entries
//! ever appended, so readers can tell how many entries they missed when the writer lapped them).
//! Partial batches are flushed after an idle timeout so that a quiet list still reaches the
//! collector. All buffers are preallocated: one flat array of `lists × B × entry_len` bytes.
//!
//! In place (a sink that maps the store, [`crate::Sinks::region_mem`]): no batch buffer. The
//! translator reserves the next B slots of the list in the region and copies each entry once,
//! straight from the datagram into its slot ([`AppendBatcher::reserve`]); the head is
//! published only when the batch is complete (or flushed), so a reader never sees part of a
//! batch ([`dta_store::AppendLayout::write_entry`], [`dta_store::AppendLayout::publish`]).
//! A remote sink keeps the batch buffer as its staging buffer: one contiguous RDMA WRITE per
//! batch.

/// Per-list batches and head pointers.
pub struct AppendBatcher {
    entry_len: usize,
    batch: usize,
    /// Entries are written in place by the caller; `buf` is empty.
    in_place: bool,
    buf: Vec<u8>,
    /// Per list, what one entry touches (one bounds check, one line).
    lists: Vec<List>,
    /// Lists that received entries since the last flush, each once, for flushing without
    /// scanning every list.
    dirty: Vec<u32>,
}

/// One list's batch state.
#[derive(Clone, Copy, Default)]
struct List {
    /// Entries published (the head pointer written last).
    head: u64,
    /// Entries in the batch.
    fill: u32,
    /// In `dirty`.
    queued: bool,
    /// Entries of the batch that carried the immediate flag.
    flagged: u32,
}

/// A batch ready to be written.
pub struct Batch<'a> {
    pub list: u32,
    /// Absolute index of the first entry (the head before this batch).
    pub first_index: u64,
    /// Entries in the batch.
    pub count: u64,
    /// The entries' bytes (`count × entry_len`); empty in place (already in their slots).
    pub entries: &'a [u8],
    pub immediate: bool,
    /// Entries of the batch that carried the immediate flag.
    pub flagged: u32,
    pub full: bool,
}

impl AppendBatcher {
    /// `heads` are the lists' current head pointers (read from the region at start-up so that a
    /// restarted translator continues where the last one stopped).
    /// `in_place`: the caller writes each entry into its slot ([`Self::reserve`]) and the
    /// batches carry no bytes.
    pub fn new(entry_len: usize, batch: usize, heads: Vec<u64>, in_place: bool) -> Self {
        let lists = heads.len();
        AppendBatcher {
            entry_len,
            batch,
            in_place,
            buf: if in_place {
                vec![]
            } else {
                vec![0; lists * batch * entry_len]
            },
            lists: heads
                .into_iter()
                .map(|head| List {
                    head,
                    ..List::default()
                })
                .collect(),
            dirty: Vec::with_capacity(lists.min(1 << 16)),
        }
    }

    pub fn lists(&self) -> u32 {
        self.lists.len() as u32
    }

    pub fn head(&self, list: u32) -> u64 {
        self.lists[list as usize].head
    }

    /// Whether entries are written in place ([`Self::reserve`]) rather than pushed.
    pub fn in_place(&self) -> bool {
        self.in_place
    }

    /// In place: the absolute index of `list`'s next entry (its published head plus the
    /// entries reserved since). The caller writes the entry into that slot, then calls
    /// [`Self::placed`]; a failed write calls nothing and the slot is reserved again next time.
    /// The caller has checked `list < lists()`.
    #[inline(always)]
    pub fn reserve(&self, list: u32) -> u64 {
        let s = &self.lists[list as usize];
        s.head + s.fill as u64
    }

    /// In place: the entry at [`Self::reserve`]'s index was written; when it completes the
    /// list's batch, the batch to publish.
    #[inline(always)]
    pub fn placed(&mut self, list: u32, immediate: bool) -> Option<Batch<'_>> {
        debug_assert!(self.in_place);
        let l = list as usize;
        let s = &mut self.lists[l];
        if !s.queued {
            s.queued = true;
            self.dirty.push(list);
        }
        s.flagged += immediate as u32;
        s.fill += 1;
        if s.fill as usize == self.batch {
            Some(self.take(l, true))
        } else {
            None
        }
    }

    /// Add one entry; when the list's batch fills up, `emit` receives it.
    /// The caller has checked `list < lists()` and `data.len() == entry_len`.
    pub fn push<E>(
        &mut self,
        list: u32,
        data: &[u8],
        immediate: bool,
        emit: impl FnOnce(Batch<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        debug_assert!(!self.in_place);
        let l = list as usize;
        let s = &mut self.lists[l];
        let fill = s.fill as usize;
        if !s.queued {
            s.queued = true;
            self.dirty.push(list);
        }
        s.flagged += immediate as u32;
        s.fill += 1;
        let base = (l * self.batch + fill) * self.entry_len;
        self.buf[base..base + self.entry_len].copy_from_slice(data);
        if fill + 1 == self.batch {
            self.emit_list(l, true, emit)?;
        }
        Ok(())
    }

    fn emit_list<E>(
        &mut self,
        l: usize,
        full: bool,
        emit: impl FnOnce(Batch<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        emit(self.take(l, full))
    }

    /// List `l`'s batch, its entries counted into the head.
    #[inline]
    fn take(&mut self, l: usize, full: bool) -> Batch<'_> {
        let s = &mut self.lists[l];
        let n = s.fill as usize;
        let first_index = s.head;
        let flagged = s.flagged;
        s.fill = 0;
        s.flagged = 0;
        s.head += n as u64;
        let entries = if self.in_place {
            &[][..]
        } else {
            let start = l * self.batch * self.entry_len;
            &self.buf[start..start + n * self.entry_len]
        };
        Batch {
            list: l as u32,
            first_index,
            count: n as u64,
            entries,
            immediate: flagged > 0,
            flagged,
            full,
        }
    }

    /// Flush every partial batch.
    pub fn flush_partial<E>(
        &mut self,
        mut emit: impl FnMut(Batch<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let dirty = std::mem::take(&mut self.dirty);
        let mut result = Ok(());
        for &list in &dirty {
            self.lists[list as usize].queued = false;
            if self.lists[list as usize].fill > 0 {
                let r = self.emit_list(list as usize, false, &mut emit);
                if result.is_ok() {
                    result = r;
                }
            }
        }
        self.dirty = dirty;
        self.dirty.clear();
        result
    }

    pub fn pending(&self) -> usize {
        self.dirty
            .iter()
            .map(|&l| self.lists[l as usize].fill as usize)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_batches_are_emitted_in_order_with_heads() {
        let mut b = AppendBatcher::new(4, 4, vec![10, 0], false);
        let mut out: Vec<(u32, u64, Vec<u8>, bool)> = vec![];
        for i in 0..9u32 {
            b.push(0, &i.to_be_bytes(), false, |batch| {
                out.push((
                    batch.list,
                    batch.first_index,
                    batch.entries.to_vec(),
                    batch.full,
                ));
                Ok::<_, ()>(())
            })
            .unwrap();
        }
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].1, 10);
        assert_eq!(out[1].1, 14);
        assert_eq!(&out[1].2[..4], &4u32.to_be_bytes());
        assert_eq!(b.pending(), 1);
        b.flush_partial(|batch| {
            out.push((
                batch.list,
                batch.first_index,
                batch.entries.to_vec(),
                batch.full,
            ));
            Ok::<_, ()>(())
        })
        .unwrap();
        assert_eq!(out[2], (0, 18, 8u32.to_be_bytes().to_vec(), false));
        assert_eq!(b.head(0), 19);
        assert_eq!(b.pending(), 0);
    }

    /// In place: each reserved slot is the next index, a batch is handed out (to publish) when
    /// its B-th entry is placed, carrying no bytes, and a flush publishes the partial batch.
    #[test]
    fn in_place_batches_reserve_consecutive_slots() {
        let mut b = AppendBatcher::new(4, 4, vec![10, 0], true);
        assert!(b.buf.is_empty());
        let mut published = vec![];
        for i in 0..9u64 {
            let list = (i % 3 == 2) as u32;
            let at = b.reserve(list);
            if let Some(batch) = b.placed(list, i == 4) {
                published.push((batch.list, batch.first_index, batch.count, batch.immediate));
                assert!(batch.entries.is_empty() && batch.full);
            }
            // List 0 gets i = 0, 1, 3, 4, 6, 7 at 10..16; list 1 gets i = 2, 5, 8 at 0..3.
            let expect = if list == 0 { 10 + i - i / 3 } else { i / 3 };
            assert_eq!(at, expect, "entry {i}");
        }
        assert_eq!(published, vec![(0, 10, 4, true)]);
        assert_eq!(b.head(0), 14);
        assert_eq!(b.reserve(0), 16);
        assert_eq!(b.pending(), 5);
        b.flush_partial(|batch| {
            assert!(!batch.full && batch.entries.is_empty());
            published.push((batch.list, batch.first_index, batch.count, batch.immediate));
            Ok::<_, ()>(())
        })
        .unwrap();
        assert_eq!(published[1..], [(0, 14, 2, false), (1, 0, 3, false)]);
        assert_eq!((b.head(0), b.head(1), b.pending()), (16, 3, 0));
    }
}
