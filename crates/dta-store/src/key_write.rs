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
const MAX_SLOT: usize = 72;

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
