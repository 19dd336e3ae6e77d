//! Translator-side Append batching ([DTA §4 "Append", A.3], Algorithm 3).
//!
//! Each list has a batch of B entries in the translator. A full batch becomes one contiguous
//! write at the list's head, followed by the new head pointer (a monotone u64 count of entries
//! ever appended, so readers can tell how many entries they missed when the writer lapped them).
//! Partial batches are flushed after an idle timeout so that a quiet list still reaches the
//! collector. All buffers are preallocated: one flat array of `lists × B × entry_len` bytes.

/// Per-list batches and head pointers.
pub struct AppendBatcher {
    entry_len: usize,
    batch: usize,
    buf: Vec<u8>,
    fill: Vec<u32>,
    heads: Vec<u64>,
    /// Lists that received entries since the last flush, each once, for flushing without
    /// scanning every list.
    dirty: Vec<u32>,
    queued: Vec<bool>,
    /// Flagged (immediate) entries in each list's batch.
    flagged: Vec<u32>,
}

/// A batch ready to be written.
pub struct Batch<'a> {
    pub list: u32,
    /// Absolute index of the first entry (the head before this batch).
    pub first_index: u64,
    pub entries: &'a [u8],
    pub immediate: bool,
    /// Entries of the batch that carried the immediate flag.
    pub flagged: u32,
    pub full: bool,
}

impl AppendBatcher {
    /// `heads` are the lists' current head pointers (read from the region at start-up so that a
    /// restarted translator continues where the last one stopped).
    pub fn new(entry_len: usize, batch: usize, heads: Vec<u64>) -> Self {
        let lists = heads.len();
        AppendBatcher {
            entry_len,
            batch,
            buf: vec![0; lists * batch * entry_len],
            fill: vec![0; lists],
            heads,
            dirty: Vec::with_capacity(lists.min(1 << 16)),
            queued: vec![false; lists],
            flagged: vec![0; lists],
        }
    }

    pub fn lists(&self) -> u32 {
        self.heads.len() as u32
    }

    pub fn head(&self, list: u32) -> u64 {
        self.heads[list as usize]
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
        let l = list as usize;
        let fill = self.fill[l] as usize;
        if !self.queued[l] {
            self.queued[l] = true;
            self.dirty.push(list);
        }
        let base = (l * self.batch + fill) * self.entry_len;
        self.buf[base..base + self.entry_len].copy_from_slice(data);
        self.flagged[l] += immediate as u32;
        self.fill[l] += 1;
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
        let n = self.fill[l] as usize;
        let start = l * self.batch * self.entry_len;
        let first_index = self.heads[l];
        let flagged = self.flagged[l];
        self.fill[l] = 0;
        self.flagged[l] = 0;
        self.heads[l] += n as u64;
        emit(Batch {
            list: l as u32,
            first_index,
            entries: &self.buf[start..start + n * self.entry_len],
            immediate: flagged > 0,
            flagged,
            full,
        })
    }

    /// Flush every partial batch.
    pub fn flush_partial<E>(
        &mut self,
        mut emit: impl FnMut(Batch<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let dirty = std::mem::take(&mut self.dirty);
        let mut result = Ok(());
        for &list in &dirty {
            self.queued[list as usize] = false;
            if self.fill[list as usize] > 0 {
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
            .map(|&l| self.fill[l as usize] as usize)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_batches_are_emitted_in_order_with_heads() {
        let mut b = AppendBatcher::new(4, 4, vec![10, 0]);
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
}
