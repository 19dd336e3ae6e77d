//! The translator-side Postcarding cache ([DTA §4 "Postcarding", A.2]).
//!
//! Postcards of one flow/packet ID arrive hop by hop. The cache gathers them so that a flow's
//! whole path becomes ONE chunk write per redundancy copy instead of one write per hop. A chunk
//! is emitted when all B postcards have arrived, when the reporter-supplied path length has been
//! reached, when another flow hashes to the same cache line (a collision evicts the resident),
//! or when it has waited longer than the configured timeout. Hops that never arrived are written
//! as the blank value, so each chunk always covers all B slots.
//!
//! The cache is a fixed, preallocated, direct-mapped table: no allocation on the data path.

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
}

impl Chunk {
    pub fn key(&self) -> &[u8] {
        &self.key[..self.key_len as usize]
    }
}

#[derive(Clone, Copy)]
struct Line {
    chunk: Chunk,
    in_use: bool,
    seen: u8,
    path_len: u8,
    since: Option<Instant>,
}

/// Direct-mapped cache of partially collected paths.
pub struct PostcardCache {
    lines: Vec<Line>,
    mask: usize,
    hops: u8,
    occupied: usize,
}

impl PostcardCache {
    /// `entries` is rounded up to a power of two; `hops` is the store's B.
    pub fn new(entries: usize, hops: u8) -> Self {
        assert!((1..=MAX_HOPS as u8).contains(&hops), "hops must be 1..=16");
        let n = entries.max(1).next_power_of_two();
        let empty = Line {
            chunk: Chunk {
                key: [0; MAX_KEY],
                key_len: 0,
                values: [None; MAX_HOPS],
                immediate: false,
            },
            in_use: false,
            seen: 0,
            path_len: 0,
            since: None,
        };
        PostcardCache {
            lines: vec![empty; n],
            mask: n - 1,
            hops,
            occupied: 0,
        }
    }

    pub fn occupied(&self) -> usize {
        self.occupied
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
        mut evict: impl FnMut(&Chunk, Eviction),
    ) {
        debug_assert!(hop < self.hops && key.len() <= MAX_KEY);
        let i = (dta_store::hash::fnv1a64(key) as usize) & self.mask;
        let line = &mut self.lines[i];
        if line.in_use && line.chunk.key() != key {
            evict(&line.chunk, Eviction::Collision);
            line.in_use = false;
            self.occupied -= 1;
        }
        if !line.in_use {
            line.in_use = true;
            self.occupied += 1;
            line.chunk.key[..key.len()].copy_from_slice(key);
            line.chunk.key_len = key.len() as u8;
            line.chunk.values = [None; MAX_HOPS];
            line.chunk.immediate = false;
            line.seen = 0;
            line.path_len = 0;
            line.since = Some(now);
        }
        let slot = &mut line.chunk.values[hop as usize];
        if slot.is_none() {
            line.seen += 1;
        }
        *slot = Some(value);
        line.chunk.immediate |= immediate;
        if path_len > 0 {
            line.path_len = path_len.min(self.hops);
        }
        let target = if line.path_len > 0 {
            line.path_len
        } else {
            self.hops
        };
        if line.seen >= target {
            evict(&line.chunk, Eviction::Complete);
            line.in_use = false;
            self.occupied -= 1;
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
        for line in self.lines.iter_mut().filter(|l| l.in_use) {
            let old = match (timeout, line.since) {
                (None, _) => true,
                (Some(t), Some(s)) => now.duration_since(s) >= t,
                (Some(_), None) => true,
            };
            if old {
                let why = if timeout.is_some() {
                    Eviction::Timeout
                } else {
                    Eviction::Flush
                };
                evict(&line.chunk, why);
                line.in_use = false;
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

    #[test]
    fn duplicate_postcard_does_not_complete_a_path() {
        let mut c = PostcardCache::new(8, 2);
        assert!(collect(&mut c, b"x", 0, 0, 1).is_empty());
        assert!(collect(&mut c, b"x", 0, 0, 1).is_empty());
        assert_eq!(collect(&mut c, b"x", 1, 0, 2).len(), 1);
    }
}
