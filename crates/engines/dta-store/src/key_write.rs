//! Key-Write ([DTA §4 "Key-Write", A.1] Algorithms 1-2, analysis A.5).
//!
//! The data area is `slots` slots of `slot_len` bytes: `[checksum u32 LE][data as on the wire]
//! [zero padding to a multiple of 8]`. A report is written as N identical slots at
//! `index(scheme, key, n, slots)` for n in 0..N; a query reads the N slots, keeps those whose
//! checksum matches the key's and takes a plurality vote with consensus threshold T. With 4-byte
//! keys and data and the prototype scheme this is byte-exact with the Tofino prototype (8-byte
//! slots written by one atomic store).

use crate::hash;
use crate::{
    ApplyError, HashScheme, Header, MemSink, QueryError, RegionMem, StoreError, StoreKind,
    StoreSpec, MAX_REDUNDANCY,
};

/// Largest slot: 4 + 64 bytes, rounded to 8.
pub const MAX_SLOT: usize = 72;

/// Keys per group of [`KeyWriteLayout::lookup_batch`]: the next group's lines are prefetched
/// while this many queries are voted on.
pub const LOOKUP_GROUP: usize = 16;

/// The arguments of one [`KeyWriteLayout::lookup_batch`] call, checked.
#[derive(Clone, Copy)]
struct Batch<'a> {
    mem: &'a RegionMem,
    keys: &'a [u8],
    redundancy: u8,
    threshold: u8,
}

/// CRC-32 (zlib) of `m ‖ byte` from `crc = CRC-32(m)`: one byte of the bitwise reflected
/// algorithm (polynomial 0xEDB88320).
#[inline(always)]
fn crc32_byte(crc: u32, byte: u8) -> u32 {
    let mut c = !crc ^ byte as u32;
    for _ in 0..8 {
        c = (c >> 1) ^ (0xEDB8_8320 & (c & 1).wrapping_neg());
    }
    !c
}

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

/// The per-key part of a Key-Write slot's check, computed once per report by
/// [`KeyWriteLayout::slot_offsets`] and consumed by [`KeyWriteLayout::encode_slot`]. Native: a
/// 64-bit seed derived from the key's hash; prototype: CRC-32 of `key_le`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyTag(pub u64);

/// The native slot check over key and data ([`hash::data_check`] from the key's seed over the
/// slot's 8-byte words, check field and padding zeroed).
#[inline(always)]
fn native_check(tag: KeyTag, words: &[u64]) -> u32 {
    hash::data_check(tag.0, words)
}

/// Where Key-Write reports go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyWriteLayout {
    slots: u64,
    key_len: usize,
    data_len: usize,
    slot_len: usize,
    hash: HashScheme,
    redundancy: u8,
}

/// Call the generic method `$m::<NW>` of `$self` for its slots of NW u64 words (1..=9:
/// `slot_len` is at most `MAX_SLOT` = 72 bytes, checked when the header is read).
macro_rules! by_words {
    ($self:ident, $m:ident($($arg:expr),*)) => {
        match $self.slot_len / 8 {
            1 => $self.$m::<1>($($arg),*),
            2 => $self.$m::<2>($($arg),*),
            3 => $self.$m::<3>($($arg),*),
            4 => $self.$m::<4>($($arg),*),
            5 => $self.$m::<5>($($arg),*),
            6 => $self.$m::<6>($($arg),*),
            7 => $self.$m::<7>($($arg),*),
            8 => $self.$m::<8>($($arg),*),
            _ => $self.$m::<9>($($arg),*),
        }
    };
}

/// The distinct values a key's slots hold, with their votes ([`KeyWriteLayout::tally`]).
struct Tally<const NW: usize> {
    /// Each candidate's slot words, check field and padding masked out.
    cands: [[u64; NW]; MAX_REDUNDANCY as usize],
    votes: [u8; MAX_REDUNDANCY as usize],
    n: usize,
}

impl<const NW: usize> Tally<NW> {
    /// The plurality's candidate and whether it wins (a strict plurality of at least
    /// `threshold` votes, [DTA A.5]); `None` when no slot holds the key.
    fn winner(&self, threshold: u8) -> Option<(usize, bool)> {
        if self.n == 0 {
            return None;
        }
        let mut best = 0;
        for c in 1..self.n {
            if self.votes[c] > self.votes[best] {
                best = c;
            }
        }
        let top = self.votes[best];
        let unique = (0..self.n).all(|c| c == best || self.votes[c] < top);
        Some((best, unique && top >= threshold.max(1)))
    }

    /// Candidate `c`'s data bytes (slot bytes 4..4 + `data_len`) into `out`.
    fn data(&self, c: usize, data_len: usize, out: &mut [u8]) {
        let mut bytes = [0u8; MAX_SLOT];
        for (w, x) in self.cands[c].iter().enumerate() {
            bytes[8 * w..8 * w + 8].copy_from_slice(&x.to_le_bytes());
        }
        out[..data_len].copy_from_slice(&bytes[4..4 + data_len]);
    }
}

/// The answer to a Key-Write query ([DTA A.1] Algorithm 2, A.5 "plurality vote").
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
                redundancy: s.redundancy,
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
    /// The store's N (from its header): reports use 1..=N, queries read N unless told fewer.
    pub fn redundancy(&self) -> u8 {
        self.redundancy
    }

    /// Byte offset of copy `n` of `key`.
    #[inline]
    pub fn slot_offset(&self, key: &[u8], n: u8) -> u64 {
        hash::index(self.hash, key, n, self.slots) * self.slot_len as u64
    }

    /// The byte offsets of the `redundancy` copies of `key` into `out[..redundancy]` ([DTA A.1]
    /// Algorithm 1, `h0(n, K) mod Buflen` for n in 0..N) and the key's [`KeyTag`]: the one place
    /// a Key-Write report is hashed, once per report, used by the store's own `apply` and
    /// queries and by the translator's batched staging (which prefetches the offsets before it
    /// writes). Redundancy is capped at [`MAX_REDUNDANCY`].
    ///
    /// The prototype's index of copy n is CRC-32 of `key_le ‖ n` and its checksum CRC-32 of
    /// `key_le`: the indices continue the checksum's CRC by one byte instead of hashing the key
    /// again for every copy.
    #[inline(always)]
    pub fn slot_offsets(
        &self,
        key: &[u8],
        redundancy: u8,
        out: &mut [u64; MAX_REDUNDANCY as usize],
    ) -> KeyTag {
        let n = redundancy.min(MAX_REDUNDANCY);
        let len = self.slot_len as u64;
        match self.hash {
            HashScheme::Native => {
                let h = hash::fnv1a64(key);
                for i in 0..n {
                    out[i as usize] = hash::native_index(h, i, self.slots) * len;
                }
                KeyTag(hash::check_seed(h))
            }
            HashScheme::Xxh3 => {
                let h = hash::xxh3_128(key);
                for i in 0..n {
                    out[i as usize] = hash::xxh3_index(h, i, self.slots) * len;
                }
                KeyTag(h.1)
            }
            HashScheme::Prototype => {
                let csum = hash::checksum(HashScheme::Prototype, key);
                let mask = self.slots.wrapping_sub(1);
                for i in 0..n {
                    out[i as usize] = (crc32_byte(csum, i) as u64 & mask) * len;
                }
                KeyTag(csum as u64)
            }
        }
    }

    /// Encode the slot of a report whose key has tag `tag` (from [`Self::slot_offsets`]) and
    /// whose data is `data` into `out[..slot_len]`: `[check u32 LE][data][zero padding]` ([DTA
    /// A.1] Algorithm 1, `h1(K) ‖ data`). The native check covers key AND data
    /// ([`Self::slot_check`]), so a slot torn between two writes fails it; the prototype's is
    /// CRC-32 of the key alone (byte-exact with the Tofino prototype). The one slot encoder:
    /// `apply` and the translator's staging both call it. Returns the slot length; `BadDataLen`
    /// for data of the wrong length.
    #[inline]
    pub fn encode_slot(
        &self,
        tag: KeyTag,
        data: &[u8],
        out: &mut [u8; MAX_SLOT],
    ) -> Result<usize, ApplyError> {
        if data.len() != self.data_len {
            return Err(ApplyError::BadDataLen);
        }
        if let Ok(d) = <[u8; 4]>::try_from(data) {
            out[..8].copy_from_slice(&self.encode_word(tag, d).to_le_bytes());
            return Ok(8);
        }
        out[..4].fill(0);
        out[4..4 + self.data_len].copy_from_slice(data);
        out[4 + self.data_len..self.slot_len].fill(0);
        let check = match self.hash {
            HashScheme::Native | HashScheme::Xxh3 => {
                let mut words = [0u64; MAX_SLOT / 8];
                for (w, c) in words.iter_mut().zip(out[..self.slot_len].chunks_exact(8)) {
                    *w = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
                }
                native_check(tag, &words[..self.slot_len / 8])
            }
            HashScheme::Prototype => tag.0 as u32,
        };
        out[..4].copy_from_slice(&check.to_le_bytes());
        Ok(self.slot_len)
    }

    /// The common 8-byte slot (4-byte data) as its little-endian word: the same bytes as
    /// [`Self::encode_slot`] gives for `data` (which calls it), without the variable-length
    /// copies. The translator's batched apply encodes one per report and stores it whole.
    #[inline(always)]
    pub fn encode_word(&self, tag: KeyTag, data: [u8; 4]) -> u64 {
        let word = u64::from(u32::from_le_bytes(data)) << 32;
        let check = match self.hash {
            HashScheme::Native | HashScheme::Xxh3 => native_check(tag, &[word]),
            HashScheme::Prototype => tag.0 as u32,
        };
        word | u64::from(check)
    }

    /// Whether the slot bytes `slot` (`slot_len` of them, as read from the region) carry the
    /// check of a report whose key has `tag`: the key's slot, written whole (native), or the
    /// key's slot (prototype, whose check covers the key only).
    pub fn slot_holds(&self, tag: KeyTag, slot: &[u8]) -> bool {
        if slot.len() != self.slot_len {
            return false;
        }
        let mask = self.data_masks::<{ MAX_SLOT / 8 }>();
        let mut words = [0u64; MAX_SLOT / 8];
        for ((w, c), m) in words.iter_mut().zip(slot.chunks_exact(8)).zip(&mask) {
            *w = u64::from_le_bytes(c.try_into().unwrap_or([0; 8])) & m;
        }
        let stored = u32::from_le_bytes([slot[0], slot[1], slot[2], slot[3]]);
        self.slot_check(tag, stored, &words[..self.slot_len / 8])
    }

    /// Whether a slot read as LE words (`slot`, with the data `mask` of [`Self::data_masks`]
    /// already applied to `masked`) carries `tag`'s check.
    #[inline(always)]
    fn slot_check(&self, tag: KeyTag, stored: u32, masked: &[u64]) -> bool {
        match self.hash {
            HashScheme::Native | HashScheme::Xxh3 => native_check(tag, masked) == stored,
            HashScheme::Prototype => tag.0 as u32 == stored,
        }
    }

    /// The data bytes (slot bytes 4..4 + data_len) of each of a slot's `NW` words, as a mask over
    /// its LE value: the check field and the padding masked out.
    #[inline(always)]
    fn data_masks<const NW: usize>(&self) -> [u64; NW] {
        let d = self.data_len;
        let mut mask = [0u64; NW];
        for (w, m) in mask.iter_mut().enumerate() {
            let lo = (8 * w).max(4);
            let hi = (8 * w + 8).min(4 + d);
            if lo < hi {
                let bits = 8 * (hi - lo) as u32;
                let ones = if bits >= 64 {
                    u64::MAX
                } else {
                    (1u64 << bits) - 1
                };
                *m = ones << (8 * (lo - 8 * w));
            }
        }
        mask
    }

    /// Query without allocating ([DTA A.1] Algorithm 2 with A.5's plurality vote): the winning
    /// value, if any, is copied into `out[..data_len]`. Same answers as [`Self::query`]:
    /// `Found` with its votes, `Empty`, or `Ambiguous` (then `out` holds one of the tied values).
    /// An `Empty` answer leaves `out` unchanged. `redundancy` `None` reads the store's N; an
    /// explicit N outside 1..=store N, a key of the wrong length or `out` shorter than
    /// `data_len` is an error.
    ///
    /// Each slot is read as `slot_len / 8` atomic u64 words (one word for the prototype's 8-byte
    /// slot) and candidates are compared as words, data bytes only.
    pub fn lookup(
        &self,
        mem: &RegionMem,
        key: &[u8],
        redundancy: Option<u8>,
        threshold: u8,
        out: &mut [u8],
    ) -> Result<Lookup, QueryError> {
        QueryError::key(key, self.key_len)?;
        let redundancy = QueryError::redundancy(redundancy, self.redundancy)?;
        QueryError::threshold(threshold, redundancy)?;
        if out.len() < self.data_len {
            return Err(QueryError::BadBatch {
                got: 1,
                need: self.data_len,
                have: out.len(),
            });
        }
        let mut offs = [0u64; MAX_REDUNDANCY as usize];
        let tag = self.slot_offsets(key, redundancy, &mut offs);
        let offs = &offs[..redundancy as usize];
        for &o in offs {
            mem.prefetch(o);
        }
        let out = &mut out[..self.data_len];
        Ok(by_words!(self, vote(mem, offs, tag, threshold, out)))
    }

    /// Many queries in one call, without allocating: [DTA A.1] Algorithm 2 ("Csum ←
    /// h1(K); for n = 0 to N: (Csum_slot, D) ← GetSlot(n, K); if Csum == Csum_slot then add D
    /// to list of candidates; D_winner ← candidate D if D appears at least T times") with the
    /// "plurality vote" A.5 suggests as the default, for every key of `keys`.
    ///
    /// `keys` holds the keys back to back, `key_len` bytes each; `answers[i]` receives key i's
    /// answer and `out[i·data_len..(i+1)·data_len]` its value, exactly as [`Self::lookup`] would
    /// give them, byte for byte (an `Empty` answer leaves its part of `out` unchanged). The
    /// number of keys is `answers.len()`.
    ///
    /// The keys go in groups of [`LOOKUP_GROUP`]: the slot offsets and checksums of the next
    /// group are computed and all its lines prefetched before the current group is voted on, so
    /// the cache (and TLB) misses of many queries overlap instead of being taken one after
    /// another. The prefetch is [`RegionMem::prefetch`] (PREFETCHW where the CPU has it).
    ///
    /// Errors, with nothing written: `BadKeyLen` if `keys.len() != answers.len() · key_len`,
    /// `BadBatch` if `out.len() != answers.len() · data_len`, `BadRedundancy` unless
    /// `redundancy` is `None` (the store's N) or in 1..=store N.
    pub fn lookup_batch(
        &self,
        mem: &RegionMem,
        keys: &[u8],
        redundancy: Option<u8>,
        threshold: u8,
        out: &mut [u8],
        answers: &mut [Lookup],
    ) -> Result<(), QueryError> {
        let count = answers.len();
        let redundancy = QueryError::redundancy(redundancy, self.redundancy)?;
        QueryError::threshold(threshold, redundancy)?;
        if count.checked_mul(self.key_len) != Some(keys.len()) {
            return Err(QueryError::BadKeyLen {
                got: keys.len(),
                want: count.saturating_mul(self.key_len),
            });
        }
        if count.checked_mul(self.data_len) != Some(out.len()) {
            return Err(QueryError::BadBatch {
                got: count,
                need: count.saturating_mul(self.data_len),
                have: out.len(),
            });
        }
        let b = Batch {
            mem,
            keys,
            redundancy,
            threshold,
        };
        by_words!(self, batch(b, out, answers));
        Ok(())
    }

    /// [`Self::lookup_batch`] for slots of `NW` words, arguments checked.
    #[inline(always)]
    fn batch<const NW: usize>(&self, b: Batch<'_>, out: &mut [u8], answers: &mut [Lookup]) {
        const G: usize = LOOKUP_GROUP;
        let n = b.redundancy as usize;
        let (kl, dl) = (self.key_len, self.data_len);
        // Two groups of offsets and checksums: the one being voted on and the next, prefetched.
        let mut offs = [[[0u64; MAX_REDUNDANCY as usize]; G]; 2];
        let mut csums = [[KeyTag(0); G]; 2];
        let prepare =
            |g: usize, offs: &mut [[u64; MAX_REDUNDANCY as usize]; G], csums: &mut [KeyTag; G]| {
                let keys = &b.keys[g * G * kl..((g + 1) * G * kl).min(b.keys.len())];
                for (i, key) in keys.chunks_exact(kl).enumerate() {
                    csums[i] = self.slot_offsets(key, b.redundancy, &mut offs[i]);
                }
                for o in offs.iter().take(keys.len() / kl) {
                    for &o in &o[..n] {
                        b.mem.prefetch(o);
                    }
                }
            };
        let groups = answers.len().div_ceil(G);
        if groups == 0 {
            return;
        }
        let (o0, o1) = offs.split_at_mut(1);
        let (c0, c1) = csums.split_at_mut(1);
        let (mut cur, mut next) = ((&mut o0[0], &mut c0[0]), (&mut o1[0], &mut c1[0]));
        prepare(0, cur.0, cur.1);
        for (g, (answers, out)) in answers
            .chunks_mut(G)
            .zip(out.chunks_mut(G * dl.max(1)))
            .enumerate()
        {
            if g + 1 < groups {
                prepare(g + 1, next.0, next.1);
            }
            for (i, a) in answers.iter_mut().enumerate() {
                let out = &mut out[i * dl..(i + 1) * dl];
                *a = self.vote::<NW>(b.mem, &cur.0[i][..n], cur.1[i], b.threshold, out);
            }
            std::mem::swap(&mut cur, &mut next);
        }
    }

    /// The distinct values the slots at `offs` hold for `tag`, with their votes ([DTA A.1]
    /// Algorithm 2: "if Csum == Csum_slot then add D to list of candidates"), for slots of `NW`
    /// u64 words: the one place a Key-Write query reads, checks and counts slots. Slots are
    /// snapshots of atomic 8-byte loads (as [`RegionMem::read`] does); a slot that cannot be
    /// read is skipped. Candidates are compared as words, data bytes only.
    #[inline(always)]
    fn tally<const NW: usize>(&self, mem: &RegionMem, offs: &[u64], tag: KeyTag) -> Tally<NW> {
        let mask = self.data_masks::<NW>();
        let mut t = Tally {
            cands: [[0u64; NW]; MAX_REDUNDANCY as usize],
            votes: [0u8; MAX_REDUNDANCY as usize],
            n: 0,
        };
        'slots: for &o in offs {
            let mut slot = [0u64; NW];
            for (w, x) in slot.iter_mut().enumerate() {
                match mem.load_u64(o.wrapping_add(8 * w as u64)) {
                    Ok(v) => *x = v,
                    Err(_) => continue 'slots,
                }
            }
            let stored = slot[0] as u32;
            for (x, m) in slot.iter_mut().zip(&mask) {
                *x &= m;
            }
            if !self.slot_check(tag, stored, &slot) {
                continue;
            }
            match t.cands[..t.n].iter().position(|c| *c == slot) {
                Some(c) => t.votes[c] += 1,
                None => {
                    t.cands[t.n] = slot;
                    t.votes[t.n] = 1;
                    t.n += 1;
                }
            }
        }
        t
    }

    /// The plurality vote over the slots at `offs` ([DTA A.1] Algorithm 2, A.5) for slots of `NW`
    /// u64 words; `out` is exactly `data_len` bytes.
    #[inline(always)]
    fn vote<const NW: usize>(
        &self,
        mem: &RegionMem,
        offs: &[u64],
        tag: KeyTag,
        threshold: u8,
        out: &mut [u8],
    ) -> Lookup {
        let t = self.tally::<NW>(mem, offs, tag);
        let Some((best, found)) = t.winner(threshold) else {
            return Lookup::Empty;
        };
        t.data(best, self.data_len, out);
        if found {
            Lookup::Found {
                votes: t.votes[best],
            }
        } else {
            Lookup::Ambiguous
        }
    }

    /// [`Self::query`] for slots of `NW` words, arguments checked.
    fn answer<const NW: usize>(
        &self,
        mem: &RegionMem,
        offs: &[u64],
        tag: KeyTag,
        threshold: u8,
    ) -> KeyWriteAnswer {
        let t = self.tally::<NW>(mem, offs, tag);
        let Some((best, found)) = t.winner(threshold) else {
            return KeyWriteAnswer::Empty;
        };
        let value = |c: usize| {
            let mut d = vec![0u8; self.data_len];
            t.data(c, self.data_len, &mut d);
            d
        };
        if found {
            return KeyWriteAnswer::Found {
                data: value(best),
                votes: t.votes[best],
            };
        }
        let mut candidates: Vec<(Vec<u8>, u8)> = (0..t.n).map(|c| (value(c), t.votes[c])).collect();
        candidates.sort_by_key(|c| std::cmp::Reverse(c.1));
        KeyWriteAnswer::Ambiguous { candidates }
    }

    /// Whether a report of `key` at `redundancy` can be applied: `BadKeyLen`, or
    /// `BadRedundancy` outside 1..=store N (its data length is checked by [`Self::encode_slot`]).
    #[inline]
    pub fn check(&self, key: &[u8], redundancy: u8) -> Result<(), ApplyError> {
        crate::check_report(key, self.key_len, redundancy, self.redundancy)
    }

    /// Translate one report: N slot writes ([DTA A.1] Algorithm 1, `CraftWrite`). A report may
    /// use any N in 1..=store N (the query's vote reads all the store's N slots).
    #[inline]
    pub fn apply(
        &self,
        key: &[u8],
        data: &[u8],
        redundancy: u8,
        sink: &mut impl MemSink,
    ) -> Result<(), ApplyError> {
        self.check(key, redundancy)?;
        let mut offs = [0u64; MAX_REDUNDANCY as usize];
        let tag = self.slot_offsets(key, redundancy, &mut offs);
        let mut slot = [0u8; MAX_SLOT];
        let len = self.encode_slot(tag, data, &mut slot)?;
        for &o in &offs[..redundancy as usize] {
            sink.write(o, &slot[..len])?;
        }
        sink.count(redundancy as u64, 0)?;
        Ok(())
    }

    /// How sure an answer over `redundancy` copies (`None`: the store's N) is, from the region's
    /// live counters ([`crate::confidence::key_write`]).
    pub fn confidence(&self, mem: &RegionMem, redundancy: Option<u8>) -> crate::Confidence {
        let n = redundancy
            .unwrap_or(self.redundancy)
            .clamp(1, self.redundancy);
        crate::confidence::key_write(mem.tally(), self.slots, n)
    }

    /// Query `key` over `redundancy` slots (`None`: the store's N) with consensus threshold
    /// `threshold` ([DTA A.1] Algorithm 2; [DTA A.5] suggests T = 1 with a plurality vote). A key
    /// of the wrong length or an N outside 1..=store N is an error.
    pub fn query(
        &self,
        mem: &RegionMem,
        key: &[u8],
        redundancy: Option<u8>,
        threshold: u8,
    ) -> Result<KeyWriteAnswer, QueryError> {
        QueryError::key(key, self.key_len)?;
        let redundancy = QueryError::redundancy(redundancy, self.redundancy)?;
        QueryError::threshold(threshold, redundancy)?;
        let mut offs = [0u64; MAX_REDUNDANCY as usize];
        let tag = self.slot_offsets(key, redundancy, &mut offs);
        let offs = &offs[..redundancy as usize];
        Ok(by_words!(self, answer(mem, offs, tag, threshold)))
    }
}
