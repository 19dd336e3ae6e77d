//! Append ([DTA §4 "Append", A.3] Algorithms 3-4).
//!
//! The data area starts with one little-endian u64 *head* per list (`8·lists` bytes, padded to a
//! 4096-byte boundary), followed by the rings: list l's ring is `capacity` entries of `entry_len`
//! bytes at `rings_offset + l·capacity·entry_len`. The head is the total number of entries ever
//! appended to the list (monotone, never wraps in practice); entry number `i` lives at ring
//! position `i mod capacity`. The translator writes a batch of entries first and the new head
//! second (one atomic 8-byte write), so a reader that sees head h can read every entry below h.
//! A writer that maps the region places each entry straight into its slot as it arrives
//! ([`AppendLayout::write_entry`], reserve-then-publish) and publishes the head only once the
//! batch is complete ([`AppendLayout::publish`]): the same two steps, the entry copied once.
//! Readers ([`ListReader`]) are seqlock-style: read the head, copy, re-read the head, and discard
//! (counting as *missed*) whatever the writer may have overwritten meanwhile.

use crate::spec::StoreSpec as Spec;
use crate::{ApplyError, Header, MemSink, RegionMem, StoreError, StoreKind, StoreSpec};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendLayout {
    lists: u32,
    capacity: u64,
    entry_len: usize,
    batch: usize,
    rings_offset: u64,
}

impl AppendLayout {
    pub fn new(h: &Header) -> Result<Self, StoreError> {
        match &h.spec {
            StoreSpec::Append(s) => Ok(AppendLayout {
                lists: s.lists,
                capacity: s.capacity,
                entry_len: s.entry_len as usize,
                batch: s.batch as usize,
                rings_offset: Spec::append_rings_offset(s.lists),
            }),
            _ => Err(StoreError::WrongKind {
                expected: StoreKind::Append,
                found: h.kind,
            }),
        }
    }

    pub fn lists(&self) -> u32 {
        self.lists
    }
    /// Entries per list.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }
    pub fn entry_len(&self) -> usize {
        self.entry_len
    }
    /// B.
    pub fn batch(&self) -> usize {
        self.batch
    }
    /// Offset of the first ring.
    pub fn rings_offset(&self) -> u64 {
        self.rings_offset
    }

    /// Offset of `list`'s head pointer.
    #[inline]
    pub fn head_offset(&self, list: u32) -> u64 {
        list as u64 * 8
    }

    /// Offset of entry number `index` (absolute count; wraps modulo the capacity) of `list`.
    #[inline]
    pub fn entry_offset(&self, list: u32, index: u64) -> u64 {
        self.rings_offset
            + (list as u64 * self.capacity + (index & (self.capacity - 1))) * self.entry_len as u64
    }

    /// Write one entry at its slot, entry number `index` of `list`, without publishing it: the
    /// reserve half of reserve-then-publish. The caller publishes it with [`Self::publish`] once
    /// its batch is complete; until then a reader does not read it (it is at or above the
    /// head). A writer has at most one batch of `batch()` entries reserved beyond the head of a
    /// list (the distance [`ListReader`] keeps from the overwrite frontier).
    #[inline(always)]
    pub fn write_entry(
        &self,
        list: u32,
        index: u64,
        entry: &[u8],
        sink: &mut impl MemSink,
    ) -> Result<(), ApplyError> {
        if list >= self.lists {
            return Err(ApplyError::BadListId);
        }
        if entry.len() != self.entry_len {
            return Err(ApplyError::BadDataLen);
        }
        sink.write(self.entry_offset(list, index), entry)?;
        Ok(())
    }

    /// Publish `list`'s entries below `head` (one atomic 8-byte write of the head): the publish
    /// half of reserve-then-publish, after every entry below `head` was written.
    #[inline]
    pub fn publish(&self, list: u32, head: u64, sink: &mut impl MemSink) -> Result<(), ApplyError> {
        if list >= self.lists {
            return Err(ApplyError::BadListId);
        }
        sink.write(self.head_offset(list), &head.to_le_bytes())?;
        Ok(())
    }

    /// Memory writes [`Self::write_entries`] issues for `k` entries (k ≥ 1) from `first_index`:
    /// the entries (two writes when they wrap at the ring's end) and the head.
    #[inline]
    pub fn batch_writes(&self, first_index: u64, k: u64) -> u64 {
        let pos = first_index & (self.capacity - 1);
        if k > self.capacity - pos {
            3
        } else {
            2
        }
    }

    /// Write `entries` (k·entry_len bytes, k ≤ capacity) as entries `first_index..first_index+k`
    /// of `list` ([DTA A.3] Algorithm 3, `WriteBatch`): the entries first, split in two writes at
    /// the ring's end if needed, then the head `first_index + k`.
    #[inline]
    pub fn write_entries(
        &self,
        list: u32,
        first_index: u64,
        entries: &[u8],
        sink: &mut impl MemSink,
    ) -> Result<(), ApplyError> {
        if list >= self.lists {
            return Err(ApplyError::BadListId);
        }
        let e = self.entry_len;
        if entries.len() % e != 0 || (entries.len() / e) as u64 > self.capacity {
            return Err(ApplyError::BadDataLen);
        }
        let k = (entries.len() / e) as u64;
        if k == 0 {
            return Ok(());
        }
        let pos = first_index & (self.capacity - 1);
        let first = k.min(self.capacity - pos) as usize;
        sink.write(self.entry_offset(list, first_index), &entries[..first * e])?;
        if first < k as usize {
            sink.write(self.entry_offset(list, 0), &entries[first * e..])?;
        }
        self.publish(list, first_index.wrapping_add(k), sink)
    }
}

/// What one [`ListReader::poll`] produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PollResult {
    /// Entries appended to `out`.
    pub entries: usize,
    /// Entries of this reader's shard that were overwritten before they could be read.
    pub missed: u64,
}

/// Reads one list in order ([DTA A.3] Algorithm 4), optionally as one of `shards` readers that take
/// disjoint index sets (`index % shards == shard`).
///
/// A reader never returns an entry the writer may have overwritten while it was being copied: it
/// stays `batch` entries clear of the ring's overwrite frontier (a writer has at most one batch
/// in flight), so after being lapped it resumes `capacity - batch` entries behind the head.
#[derive(Debug, Clone)]
pub struct ListReader {
    layout: AppendLayout,
    list: u32,
    shard: u64,
    shards: u64,
    tail: u64,
}

impl ListReader {
    /// A reader of `list` starting at entry 0 (entries already overwritten count as missed).
    pub fn new(
        layout: AppendLayout,
        list: u32,
        shard: u32,
        shards: u32,
    ) -> Result<Self, StoreError> {
        if list >= layout.lists {
            return Err(StoreError::BadListId {
                list,
                lists: layout.lists,
            });
        }
        if shards == 0 || shard >= shards {
            return Err(StoreError::BadShard { shard, shards });
        }
        Ok(ListReader {
            layout,
            list,
            shard: shard as u64,
            shards: shards as u64,
            tail: shard as u64,
        })
    }

    /// Start at entry `tail` instead (e.g. the current head, to read only new entries).
    pub fn with_tail(mut self, tail: u64) -> Self {
        self.tail = self.align(tail);
        self
    }

    /// The next entry index this reader will return.
    pub fn tail(&self) -> u64 {
        self.tail
    }

    pub fn list(&self) -> u32 {
        self.list
    }

    /// The smallest index >= x of this reader's shard.
    fn align(&self, x: u64) -> u64 {
        x + (self.shard + self.shards - x % self.shards) % self.shards
    }

    /// Indices of this shard in [a, b), `a` aligned.
    fn count(&self, a: u64, b: u64) -> u64 {
        if b <= a {
            0
        } else {
            (b - a).div_ceil(self.shards)
        }
    }

    /// Append up to `max` new entries (entry_len bytes each, oldest first) to `out`.
    pub fn poll(&mut self, mem: &RegionMem, max: usize, out: &mut Vec<u8>) -> PollResult {
        let l = &self.layout;
        let e = l.entry_len;
        let cap = l.capacity;
        let head_at = l.head_offset(self.list);
        let Ok(h1) = mem.load_u64(head_at) else {
            return PollResult::default();
        };
        let mut missed = 0;
        let oldest = self.align(h1.saturating_sub(cap));
        if self.tail < oldest {
            missed += self.count(self.tail, oldest);
            self.tail = oldest;
        }
        let start = out.len();
        let mut idx = self.tail;
        let mut n = 0u64;
        while idx < h1 && (n as usize) < max {
            let at = out.len();
            out.resize(at + e, 0);
            if mem
                .read(l.entry_offset(self.list, idx), &mut out[at..])
                .is_err()
            {
                out.truncate(at);
                break;
            }
            idx += self.shards;
            n += 1;
        }
        // Re-read the head: entries below `safe` may have been overwritten during the copy.
        let h2 = mem.load_u64(head_at).unwrap_or(h1).max(h1);
        let safe = (h2 + l.batch as u64).saturating_sub(cap);
        let torn = self.count(self.tail, safe).min(n);
        if torn > 0 {
            out.drain(start..start + torn as usize * e);
            missed += torn;
            n -= torn;
        }
        self.tail = idx;
        PollResult {
            entries: n as usize,
            missed,
        }
    }
}
