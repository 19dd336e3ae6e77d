//! Key-Write (001 §4 "Key-Write", Appendix A.1 Algorithms 1-2, analysis A.5).
//!
//! The data area is `slots` slots of `slot_len` bytes: `[checksum u32 LE][data as on the wire]
//! [zero padding to a multiple of 8]`. A report is written as N identical slots at
//! `index(scheme, key, n, slots)` for n in 0..N; a query reads the N slots, keeps those whose
//! checksum matches the key's and takes a plurality vote with consensus threshold T. With 4-byte
//! keys and data and the prototype scheme this is byte-exact with the Tofino prototype (8-byte
//! slots written by one atomic store).

use crate::hash;
use crate::{
    ApplyError, HashScheme, Header, MemSink, RegionMem, StoreError, StoreKind, StoreSpec,
    MAX_REDUNDANCY,
};

/// Largest slot: 4 + 64 bytes, rounded to 8.
pub const MAX_SLOT: usize = 72;

/// The answer to an allocation-free Key-Write query ([`KeyWriteLayout::lookup`]); the value is
/// in the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// One value won the vote with `votes` >= T matching slots; it is in the buffer.
    Found { votes: u8 },
    /// No slot carries the key's checksum.
    Empty,
    /// No strict plurality of at least T votes.
    Ambiguous,
}

/// Where Key-Write reports go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyWriteLayout {
    slots: u64,
    key_len: usize,
    data_len: usize,
    slot_len: usize,
    hash: HashScheme,
}

/// The answer to a Key-Write query (001 A.1 Algorithm 2, A.5 "plurality vote").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyWriteAnswer {
    /// One value won the vote with `votes` >= T matching slots.
    Found { data: Vec<u8>, votes: u8 },
    /// No slot carries the key's checksum.
    Empty,
    /// Slots carry the key's checksum but no single value has a strict plurality of at least T
    /// votes. `candidates` are the distinct values with their votes, most votes first.
    Ambiguous { candidates: Vec<(Vec<u8>, u8)> },
}

impl KeyWriteLayout {
    pub fn new(h: &Header) -> Result<Self, StoreError> {
        match &h.spec {
            StoreSpec::KeyWrite(s) => Ok(KeyWriteLayout {
                slots: s.slots,
                key_len: s.key_len as usize,
                data_len: s.data_len as usize,
                slot_len: s.slot_len(),
                hash: s.hash,
            }),
            _ => Err(StoreError::WrongKind {
                expected: StoreKind::KeyWrite,
                found: h.kind,
            }),
        }
    }

    pub fn key_len(&self) -> usize {
        self.key_len
    }
    pub fn data_len(&self) -> usize {
        self.data_len
    }
    pub fn slot_len(&self) -> usize {
        self.slot_len
    }
    pub fn slots(&self) -> u64 {
        self.slots
    }
    pub fn hash(&self) -> HashScheme {
        self.hash
    }

    /// Byte offset of copy `n` of `key`.
    #[inline]
    pub fn slot_offset(&self, key: &[u8], n: u8) -> u64 {
        hash::index(self.hash, key, n, self.slots) * self.slot_len as u64
    }

    /// The byte offsets of the `redundancy` copies of `key` into `out[..redundancy]` (001 A.1
    /// Algorithm 1, `h0(n, K) mod Buflen` for n in 0..N): the batch API, so a translator can
    /// compute a whole datagram's offsets and prefetch them before writing. Hashes the key once.
    /// Redundancy is capped at [`MAX_REDUNDANCY`].
    #[inline]
    pub fn slot_offsets(
        &self,
        key: &[u8],
        redundancy: u8,
        out: &mut [u64; MAX_REDUNDANCY as usize],
    ) {
        let n = redundancy.min(MAX_REDUNDANCY);
        let len = self.slot_len as u64;
        match self.hash {
            HashScheme::Native => {
                let h = hash::fnv1a64(key);
                for i in 0..n {
                    out[i as usize] = hash::native_index(h, i, self.slots) * len;
                }
            }
            HashScheme::Prototype => {
                for i in 0..n {
                    out[i as usize] = self.slot_offset(key, i);
                }
            }
        }
    }

    /// Encode the slot of (`key`, `data`) into `out`: `[checksum u32 LE][data][zero padding]`
    /// (001 A.1 Algorithm 1, `h1(K) ‖ data`). Returns the slot length. Errors as [`Self::apply`]
    /// for a key or data of the wrong length.
    #[inline]
    pub fn encode_slot(
        &self,
        key: &[u8],
        data: &[u8],
        out: &mut [u8; MAX_SLOT],
    ) -> Result<usize, ApplyError> {
        if key.len() != self.key_len {
            return Err(ApplyError::BadKeyLen);
        }
        if data.len() != self.data_len {
            return Err(ApplyError::BadDataLen);
        }
        out[..4].copy_from_slice(&hash::checksum(self.hash, key).to_le_bytes());
        out[4..4 + self.data_len].copy_from_slice(data);
        out[4 + self.data_len..self.slot_len].fill(0);
        Ok(self.slot_len)
    }

    /// Query without allocating (001 A.1 Algorithm 2 with A.5's plurality vote): the winning
    /// value, if any, is copied into `out[..data_len]`. Same answers as [`Self::query`]:
    /// `Found` with its votes, `Empty`, or `Ambiguous` (then `out` holds one of the tied values).
    /// `out` shorter than `data_len` answers `Empty`.
    pub fn lookup(
        &self,
        mem: &RegionMem,
        key: &[u8],
        redundancy: u8,
        threshold: u8,
        out: &mut [u8],
    ) -> Lookup {
        if self.check_key(key, redundancy).is_err() || out.len() < self.data_len {
            return Lookup::Empty;
        }
        let mut offs = [0u64; MAX_REDUNDANCY as usize];
        self.slot_offsets(key, redundancy, &mut offs);
        let offs = &offs[..redundancy as usize];
        for &o in offs {
            mem.prefetch(o);
        }
        let csum = hash::checksum(self.hash, key).to_le_bytes();
        // Up to MAX_REDUNDANCY distinct candidate slots, compared in place.
        let mut slots = [[0u8; MAX_SLOT]; MAX_REDUNDANCY as usize];
        let mut votes = [0u8; MAX_REDUNDANCY as usize];
        let mut cands = 0usize;
        let d = self.data_len;
        for &o in offs {
            let slot = &mut slots[cands][..self.slot_len];
            if mem.read(o, slot).is_err() || slot[..4] != csum {
                continue;
            }
            let new = &slots[cands][4..4 + d];
            match (0..cands).find(|&c| slots[c][4..4 + d] == *new) {
                Some(c) => votes[c] += 1,
                None => {
                    votes[cands] = 1;
                    cands += 1;
                }
            }
        }
        if cands == 0 {
            return Lookup::Empty;
        }
        let mut best = 0;
        for c in 1..cands {
            if votes[c] > votes[best] {
                best = c;
            }
        }
        let top = votes[best];
        let unique = (0..cands).all(|c| c == best || votes[c] < top);
        out[..d].copy_from_slice(&slots[best][4..4 + d]);
        if unique && top >= threshold.max(1) {
            Lookup::Found { votes: top }
        } else {
            Lookup::Ambiguous
        }
    }

    fn check_key(&self, key: &[u8], redundancy: u8) -> Result<(), ApplyError> {
        if key.len() != self.key_len {
            return Err(ApplyError::BadKeyLen);
        }
        if redundancy == 0 || redundancy > MAX_REDUNDANCY {
            return Err(ApplyError::BadRedundancy);
        }
        Ok(())
    }

    /// Translate one report: N slot writes (001 A.1 Algorithm 1, `CraftWrite`).
    #[inline]
    pub fn apply(
        &self,
        key: &[u8],
        data: &[u8],
        redundancy: u8,
        sink: &mut impl MemSink,
    ) -> Result<(), ApplyError> {
        self.check_key(key, redundancy)?;
        if data.len() != self.data_len {
            return Err(ApplyError::BadDataLen);
        }
        let mut slot = [0u8; MAX_SLOT];
        slot[..4].copy_from_slice(&hash::checksum(self.hash, key).to_le_bytes());
        slot[4..4 + self.data_len].copy_from_slice(data);
        let slot = &slot[..self.slot_len];
        match self.hash {
            HashScheme::Native => {
                let h = hash::fnv1a64(key);
                for n in 0..redundancy {
                    let off = hash::native_index(h, n, self.slots) * self.slot_len as u64;
                    sink.write(off, slot)?;
                }
            }
            HashScheme::Prototype => {
                for n in 0..redundancy {
                    sink.write(self.slot_offset(key, n), slot)?;
                }
            }
        }
        Ok(())
    }

    /// Query `key` over `redundancy` slots with consensus threshold `threshold` (001 A.1
    /// Algorithm 2; A.5 suggests T = 1 with a plurality vote). A key or redundancy the store
    /// cannot hold answers `Empty`.
    pub fn query(
        &self,
        mem: &RegionMem,
        key: &[u8],
        redundancy: u8,
        threshold: u8,
    ) -> KeyWriteAnswer {
        if self.check_key(key, redundancy).is_err() {
            return KeyWriteAnswer::Empty;
        }
        let csum = hash::checksum(self.hash, key).to_le_bytes();
        let mut cands: Vec<(Vec<u8>, u8)> = Vec::new();
        let mut slot = [0u8; MAX_SLOT];
        for n in 0..redundancy {
            let slot = &mut slot[..self.slot_len];
            if mem.read(self.slot_offset(key, n), slot).is_err() || slot[..4] != csum {
                continue;
            }
            let data = &slot[4..4 + self.data_len];
            match cands.iter_mut().find(|(d, _)| d == data) {
                Some((_, v)) => *v += 1,
                None => cands.push((data.to_vec(), 1)),
            }
        }
        if cands.is_empty() {
            return KeyWriteAnswer::Empty;
        }
        cands.sort_by_key(|c| std::cmp::Reverse(c.1));
        let top = cands[0].1;
        let unique = cands.len() == 1 || cands[1].1 < top;
        if unique && top >= threshold.max(1) {
            let (data, votes) = cands.swap_remove(0);
            KeyWriteAnswer::Found { data, votes }
        } else {
            KeyWriteAnswer::Ambiguous { candidates: cands }
        }
    }
}
