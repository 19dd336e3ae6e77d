//! The translator-side Postcarding cache ([DTA §4 "Postcarding", A.2]).
//!
//! Postcards of one flow/packet ID arrive hop by hop. The cache gathers them so that a flow's
//! whole path becomes ONE chunk write per redundancy copy instead of one write per hop. A chunk
//! is emitted when all B postcards have arrived, when the reporter-supplied path length has been
//! reached, when another flow hashes to the same cache line (a collision evicts the resident),
//! or when it has waited longer than the configured timeout. Hops that never arrived are written
//! as the blank value, so each chunk always covers all B slots.
//!
//! The cache is a fixed, preallocated, direct-mapped table of 64-byte lines, one per flow and
//! aligned to the cache line (key, the first 8 hops' values, a bitmap of the hops seen, the
//! path length and the time first seen): no allocation on the data path.

use std::time::Instant;

/// Longest key a cache line holds (the native protocol's maximum).
pub const MAX_KEY: usize = 16;
/// Largest B the cache supports.
pub const MAX_HOPS: usize = 16;

/// Why a chunk left the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// B postcards, or the reported path length, arrived.
    Complete,
    /// Another flow needed the line.
    Collision,
    /// Waited longer than the timeout.
    Timeout,
    /// Shutdown or explicit flush.
    Flush,
}

/// A chunk ready to be written: the flow key and its B values (`None` = blank).
#[derive(Debug, Clone, Copy)]
pub struct Chunk {
    pub key: [u8; MAX_KEY],
    pub key_len: u8,
    pub values: [Option<u32>; MAX_HOPS],
    pub immediate: bool,
    /// Postcards of the path that carried the immediate flag.
    pub flagged: u8,
}

impl Chunk {
    pub fn key(&self) -> &[u8] {
        &self.key[..self.key_len as usize]
    }
}

/// Hops whose values a cache line holds itself; a store with more hops keeps the rest in a
/// parallel overflow table.
const LINE_HOPS: usize = 8;

/// One flow's partial path: exactly one 64-byte cache line, aligned (B <= [`LINE_HOPS`], the
/// common case: one miss per postcard, not three).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line {
    key: [u8; MAX_KEY],
    /// Hops 0..LINE_HOPS; hop h's value is meaningful when bit h of `present` is set.
    values: [u32; LINE_HOPS],
    /// When the flow was first seen, nanoseconds after the cache's epoch.
    since_ns: u64,
    /// Bit h: hop h's postcard arrived (else it is written as blank).
    present: u16,
    key_len: u8,
    /// The reporter-supplied path length (0: none yet).
    path_len: u8,
    in_use: bool,
    /// Postcards of this path that carried the immediate flag (at most B).
    flagged: u8,
}

const _: () = assert!(std::mem::size_of::<Line>() == 64 && std::mem::align_of::<Line>() == 64);
const _: () = assert!(MAX_HOPS <= 16, "present is a u16");

impl Line {
    const EMPTY: Line = Line {
        key: [0; MAX_KEY],
        values: [0; LINE_HOPS],
        since_ns: 0,
        present: 0,
        key_len: 0,
        path_len: 0,
        in_use: false,
        flagged: 0,
    };

    fn key(&self) -> &[u8] {
        &self.key[..self.key_len as usize]
    }
}

/// Direct-mapped cache of partially collected paths.
pub struct PostcardCache {
    lines: Vec<Line>,
    /// Values of hops LINE_HOPS.. of each line (empty when B <= LINE_HOPS).
    overflow: Vec<[u32; MAX_HOPS - LINE_HOPS]>,
    mask: usize,
    hops: u8,
    occupied: usize,
    /// The origin of the lines' `since_ns`.
    epoch: Instant,
}

impl PostcardCache {
    /// `entries` is rounded up to a power of two; `hops` is the store's B.
    pub fn new(entries: usize, hops: u8) -> Self {
        assert!((1..=MAX_HOPS as u8).contains(&hops), "hops must be 1..=16");
        let n = entries.max(1).next_power_of_two();
        PostcardCache {
            lines: vec![Line::EMPTY; n],
            overflow: if hops as usize > LINE_HOPS {
                vec![[0; MAX_HOPS - LINE_HOPS]; n]
            } else {
                vec![]
            },
            mask: n - 1,
            hops,
            occupied: 0,
            epoch: Instant::now(),
        }
    }

    pub fn occupied(&self) -> usize {
        self.occupied
    }

    /// Bytes of the table (lines and overflow).
    pub fn bytes(&self) -> usize {
        self.lines.len() * std::mem::size_of::<Line>()
            + self.overflow.len() * std::mem::size_of::<[u32; MAX_HOPS - LINE_HOPS]>()
    }

    fn ns(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// Line `i` as the chunk it writes: its key and B values, blanks where no postcard arrived.
    fn chunk(&self, i: usize) -> Chunk {
        let line = &self.lines[i];
        let mut c = Chunk {
            key: line.key,
            key_len: line.key_len,
            values: [None; MAX_HOPS],
            immediate: line.flagged > 0,
            flagged: line.flagged,
        };
        for h in 0..self.hops as usize {
            if line.present & (1 << h) != 0 {
                c.values[h] = Some(if h < LINE_HOPS {
                    line.values[h]
                } else {
                    self.overflow[i][h - LINE_HOPS]
                });
            }
        }
        c
    }

    /// Insert one postcard. `evict` is called with any chunk that leaves the cache as a result
    /// (a collided resident first, then this flow's chunk if it is now complete).
    ///
    /// The caller has checked `hop < hops` and `key.len() <= MAX_KEY`.
    #[allow(clippy::too_many_arguments)] // the postcard's fields, unpacked on the data path
    pub fn insert(
        &mut self,
        key: &[u8],
        hop: u8,
        path_len: u8,
        value: u32,
        immediate: bool,
        now: Instant,
        evict: impl FnMut(&Chunk, Eviction),
    ) {
        self.insert_at(
            self.line(key),
            key,
            hop,
            path_len,
            value,
            immediate,
            now,
            evict,
        )
    }

    /// The line `key`'s path lives in.
    #[inline]
    pub fn line(&self, key: &[u8]) -> usize {
        (dta_store::hash::fnv1a64(key) as usize) & self.mask
    }

    /// Fetch line `i` ([`Self::line`]) into the CPU's cache ahead of its [`Self::insert_at`]:
    /// the table is larger than the cache, and a postcard's line is otherwise one miss waited
    /// for.
    #[inline]
    pub fn prefetch(&self, i: usize) {
        if let Some(line) = self.lines.get(i) {
            dta_store::prefetch_for_write(line);
        }
    }

    /// [`Self::insert`] into line `i`, which is [`Self::line`] of `key`.
    #[allow(clippy::too_many_arguments)] // the postcard's fields, unpacked on the data path
    #[inline]
    pub fn insert_at(
        &mut self,
        i: usize,
        key: &[u8],
        hop: u8,
        path_len: u8,
        value: u32,
        immediate: bool,
        now: Instant,
        mut evict: impl FnMut(&Chunk, Eviction),
    ) {
        debug_assert!(hop < self.hops && key.len() <= MAX_KEY);
        debug_assert_eq!(i, self.line(key));
        let i = i & self.mask;
        if self.lines[i].in_use && self.lines[i].key() != key {
            evict(&self.chunk(i), Eviction::Collision);
            self.lines[i].in_use = false;
            self.occupied -= 1;
        }
        if !self.lines[i].in_use {
            let since_ns = self.ns(now);
            let line = &mut self.lines[i];
            line.in_use = true;
            line.key[..key.len()].copy_from_slice(key);
            line.key_len = key.len() as u8;
            line.present = 0;
            line.flagged = 0;
            line.path_len = 0;
            line.since_ns = since_ns;
            self.occupied += 1;
        }
        let h = hop as usize;
        if h < LINE_HOPS {
            self.lines[i].values[h] = value;
        } else {
            self.overflow[i][h - LINE_HOPS] = value;
        }
        let line = &mut self.lines[i];
        line.present |= 1 << h;
        line.flagged = line.flagged.saturating_add(immediate as u8);
        if path_len > 0 {
            line.path_len = path_len.min(self.hops);
        }
        let target = if line.path_len > 0 {
            line.path_len
        } else {
            self.hops
        };
        if line.present.count_ones() >= target as u32 {
            line.in_use = false;
            self.occupied -= 1;
            evict(&self.chunk(i), Eviction::Complete);
        }
    }

    /// Evict every line older than `timeout` (or all lines when `timeout` is `None`).
    pub fn expire(
        &mut self,
        now: Instant,
        timeout: Option<std::time::Duration>,
        mut evict: impl FnMut(&Chunk, Eviction),
    ) {
        if self.occupied == 0 {
            return;
        }
        let now_ns = self.ns(now);
        let limit = timeout.map(|t| t.as_nanos().min(u64::MAX as u128) as u64);
        for i in 0..self.lines.len() {
            let line = &self.lines[i];
            if !line.in_use {
                continue;
            }
            let old = match limit {
                None => true,
                Some(t) => now_ns.saturating_sub(line.since_ns) >= t,
            };
            if old {
                let why = if timeout.is_some() {
                    Eviction::Timeout
                } else {
                    Eviction::Flush
                };
                evict(&self.chunk(i), why);
                self.lines[i].in_use = false;
                self.occupied -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(
        cache: &mut PostcardCache,
        key: &[u8],
        hop: u8,
        path_len: u8,
        v: u32,
    ) -> Vec<(Vec<Option<u32>>, Eviction)> {
        let mut out = vec![];
        cache.insert(key, hop, path_len, v, false, Instant::now(), |c, e| {
            out.push((c.values[..5].to_vec(), e))
        });
        out
    }

    #[test]
    fn emits_after_b_postcards_in_any_order() {
        let mut c = PostcardCache::new(64, 5);
        for hop in [3, 0, 4, 1] {
            assert!(collect(&mut c, b"flow", hop, 0, 100 + hop as u32).is_empty());
        }
        let out = collect(&mut c, b"flow", 2, 0, 102);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].1, Eviction::Complete);
        assert_eq!(out[0].0, (100..105).map(Some).collect::<Vec<_>>());
        assert_eq!(c.occupied(), 0);
    }

    #[test]
    fn path_length_triggers_early_emit_with_blanks() {
        let mut c = PostcardCache::new(64, 5);
        assert!(collect(&mut c, b"f", 0, 3, 7).is_empty());
        assert!(collect(&mut c, b"f", 1, 3, 8).is_empty());
        let out = collect(&mut c, b"f", 2, 3, 9);
        assert_eq!(out[0].0, vec![Some(7), Some(8), Some(9), None, None]);
    }

    #[test]
    fn collision_evicts_resident_and_timeout_expires() {
        let mut c = PostcardCache::new(1, 5); // one line: every new flow collides
        assert!(collect(&mut c, b"a", 0, 0, 1).is_empty());
        let out = collect(&mut c, b"b", 0, 0, 2);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].1, Eviction::Collision);
        assert_eq!(out[0].0[0], Some(1));
        let mut expired = vec![];
        c.expire(
            Instant::now() + std::time::Duration::from_secs(1),
            Some(std::time::Duration::from_millis(10)),
            |ch, e| expired.push((ch.key().to_vec(), e)),
        );
        assert_eq!(expired, vec![(b"b".to_vec(), Eviction::Timeout)]);
        assert_eq!(c.occupied(), 0);
    }

    /// B = 16: hops past the line's eight live in the overflow table and come out in place, the
    /// hops that never arrived as blanks; a flow taking a line again starts with no hops.
    #[test]
    fn hops_past_the_line_come_from_the_overflow() {
        let mut c = PostcardCache::new(4, 16);
        assert_eq!(c.bytes(), 4 * 64 + 4 * 32);
        let mut out = vec![];
        for hop in (0..16).filter(|h| h % 3 != 0) {
            c.insert(
                b"k",
                hop,
                0,
                1000 + hop as u32,
                hop == 13,
                Instant::now(),
                |ch, e| out.push((*ch, e)),
            );
        }
        assert!(out.is_empty());
        c.expire(Instant::now(), None, |ch, e| out.push((*ch, e)));
        assert_eq!(out.len(), 1);
        let (ch, e) = out[0];
        assert_eq!(e, Eviction::Flush);
        assert_eq!(ch.key(), b"k");
        assert!(ch.immediate);
        for h in 0..16u32 {
            let want = (h % 3 != 0).then_some(1000 + h);
            assert_eq!(ch.values[h as usize], want, "hop {h}");
        }
        // The line again, for the same key: nothing of the old path remains.
        assert!(collect_n(&mut c, b"k", 15, 0, 7, 16).is_empty());
        let mut again = vec![];
        c.expire(Instant::now(), None, |ch, _| again.push(*ch));
        assert_eq!(again[0].values[..15], [None; 15]);
        assert_eq!(again[0].values[15], Some(7));
        assert!(!again[0].immediate);
    }

    fn collect_n(
        cache: &mut PostcardCache,
        key: &[u8],
        hop: u8,
        path_len: u8,
        v: u32,
        hops: usize,
    ) -> Vec<(Vec<Option<u32>>, Eviction)> {
        let mut out = vec![];
        cache.insert(key, hop, path_len, v, false, Instant::now(), |c, e| {
            out.push((c.values[..hops].to_vec(), e))
        });
        out
    }

    #[test]
    fn duplicate_postcard_does_not_complete_a_path() {
        let mut c = PostcardCache::new(8, 2);
        assert!(collect(&mut c, b"x", 0, 0, 1).is_empty());
        assert!(collect(&mut c, b"x", 0, 0, 1).is_empty());
        assert_eq!(collect(&mut c, b"x", 1, 0, 2).len(), 1);
    }
}
