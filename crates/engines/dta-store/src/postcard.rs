//! Postcarding ([DTA §4 "Postcarding", A.2], analysis A.6).
//!
//! The data area is `chunks` chunks of B slots of b bits followed by a 32-bit check
//! (`chunk_len = B·b/8 + 4` bytes, chunks packed back to back). A path of flow x with values
//! v_0..v_{ℓ-1} is written as one chunk: slot i holds `checksum(x, i) ⊕ g(v_i)` (little-endian,
//! b/8 bytes), with the blank value ⊔ for hops i ≥ ℓ, so each flow always writes all B slots; the
//! check is [`hash::data_check`] over x and all B slots, so a chunk read while another path of
//! the same key is written over it (whose slots each decode on their own) fails it instead of
//! decoding to a mix of two paths. The chunk goes to chunks `h_j(x) = index(native, x, j,
//! chunks)` for j in 0..N. A query keeps the N chunks whose check matches x and decodes each with
//! a lookup table `{(g(v), v) | v ∈ V ∪ {⊔}}`: a chunk is valid if slots 0..ℓ decode to values of
//! V and slots ℓ..B to ⊔ (ℓ ≥ 1); the path is output if all valid chunks agree.

use crate::hash::{self, BLANK};
use crate::{ApplyError, Header, MemSink, QueryError, RegionMem, StoreError, StoreKind, StoreSpec};

/// Most values a query's value set V may hold ([`ValueTable::new`]): the table is about
/// 24 bytes per value, so this bounds a query's table to ~25 MiB.
pub const MAX_VALUES: usize = 1 << 20;

/// Largest slot area of a chunk: 16 hops of 4 bytes.
const MAX_SLOTS: usize = 64;
/// Bytes of the check at the end of every chunk.
pub const CHUNK_CHECK_LEN: usize = 4;
/// Largest chunk.
const MAX_CHUNK: usize = MAX_SLOTS + CHUNK_CHECK_LEN;

/// One path encoded for writing ([`PostcardingLayout::encode_chunk`]): the chunk's bytes and
/// the byte offsets of its N copies in the data area.
#[derive(Debug, Clone, Copy)]
pub struct EncodedChunk {
    bytes: [u8; MAX_CHUNK],
    len: u8,
    offsets: [u64; crate::MAX_REDUNDANCY as usize],
    copies: u8,
}

impl EncodedChunk {
    /// Nothing encoded yet.
    pub const EMPTY: EncodedChunk = EncodedChunk {
        bytes: [0; MAX_CHUNK],
        len: 0,
        offsets: [0; crate::MAX_REDUNDANCY as usize],
        copies: 0,
    };

    /// The chunk's bytes (`chunk_len`).
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Where its N copies go.
    #[inline]
    pub fn offsets(&self) -> &[u64] {
        &self.offsets[..self.copies as usize]
    }
}

/// The check of a chunk whose slot bytes are `slots` for a key with check seed `seed`
/// ([`hash::check_seed`]): [`hash::data_check`] over the slots as LE 8-byte words, the last
/// zero-padded.
#[inline]
fn chunk_check(seed: u64, slots: &[u8]) -> u32 {
    let mut words = [0u64; MAX_SLOTS / 8];
    for (w, c) in words.iter_mut().zip(slots.chunks(8)) {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        *w = u64::from_le_bytes(b);
    }
    hash::data_check(seed, &words[..slots.len().div_ceil(8)])
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostcardingLayout {
    chunks: u64,
    hops: usize,
    slot_bits: u8,
    slot_bytes: usize,
    chunk_len: usize,
    redundancy: u8,
    key_len: usize,
}

/// The answer to a Postcarding query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostcardAnswer {
    /// The path: ℓ values, hop 0 first.
    Found(Vec<u32>),
    /// No chunk holds valid information for the key.
    Empty,
    /// Valid chunks disagree.
    Ambiguous,
}

impl PostcardingLayout {
    pub fn new(h: &Header) -> Result<Self, StoreError> {
        match &h.spec {
            StoreSpec::Postcarding(s) => Ok(PostcardingLayout {
                chunks: s.chunks,
                hops: s.hops as usize,
                slot_bits: s.slot_bits,
                slot_bytes: s.slot_bits as usize / 8,
                chunk_len: s.chunk_len(),
                redundancy: s.redundancy,
                key_len: s.key_len as usize,
            }),
            _ => Err(StoreError::WrongKind {
                expected: StoreKind::Postcarding,
                found: h.kind,
            }),
        }
    }

    /// B.
    pub fn hops(&self) -> usize {
        self.hops
    }
    /// N.
    pub fn redundancy(&self) -> u8 {
        self.redundancy
    }
    pub fn key_len(&self) -> usize {
        self.key_len
    }
    /// b.
    pub fn slot_bits(&self) -> u8 {
        self.slot_bits
    }
    pub fn chunks(&self) -> u64 {
        self.chunks
    }
    /// Bytes of one chunk: B·b/8 bytes of slots, then the 4-byte check.
    pub fn chunk_len(&self) -> usize {
        self.chunk_len
    }

    /// Bytes of a chunk's slots (B·b/8); the check follows them.
    fn slots_len(&self) -> usize {
        self.hops * self.slot_bytes
    }

    /// Byte offset of copy `j` of `key`'s chunk, from `h = fnv1a64(key)`.
    #[inline]
    pub fn chunk_offset(&self, h: u64, j: u8) -> u64 {
        hash::native_index(h, j, self.chunks) * self.chunk_len() as u64
    }

    /// The chunk bytes for `key` (`h = fnv1a64(key)`) and `values` into `out[..chunk_len]`
    /// ([DTA §4]: slot i = checksum(x, i) ⊕ g(v_i)), then the check over key and slots. The one
    /// chunk encoder: [`Self::apply_chunk`] (the store's and the translator's writes) calls it.
    fn encode(&self, h: u64, values: &[Option<u32>], out: &mut [u8; MAX_CHUNK]) {
        for (i, v) in values.iter().enumerate() {
            let v = v.unwrap_or(BLANK);
            let s = hash::postcard_checksum(h, i as u8, self.slot_bits)
                ^ hash::postcard_g(v, self.slot_bits);
            let at = i * self.slot_bytes;
            out[at..at + self.slot_bytes].copy_from_slice(&s.to_le_bytes()[..self.slot_bytes]);
        }
        let n = self.slots_len();
        let check = chunk_check(hash::check_seed(h), &out[..n]);
        out[n..n + CHUNK_CHECK_LEN].copy_from_slice(&check.to_le_bytes());
    }

    /// Write one path: one write of `chunk_len` bytes per redundancy copy. `values` has B entries,
    /// `None` = blank (a value equal to the blank 0xFFFFFFFF is also written as blank).
    #[inline]
    pub fn apply_chunk(
        &self,
        key: &[u8],
        values: &[Option<u32>],
        sink: &mut impl MemSink,
    ) -> Result<(), ApplyError> {
        let mut c = EncodedChunk::EMPTY;
        self.encode_chunk(key, values, &mut c)?;
        for &o in c.offsets() {
            sink.write(o, c.bytes())?;
        }
        sink.count(self.redundancy as u64, 0)?;
        Ok(())
    }

    /// Encode one path into `out`: its chunk bytes ([`Self::encode`]) and the offsets of its N
    /// copies, for a writer that issues the writes of many chunks together (the translator's
    /// lean path: every line prefetched, then every chunk written). [`Self::apply_chunk`] is
    /// this and the writes.
    #[inline]
    pub fn encode_chunk(
        &self,
        key: &[u8],
        values: &[Option<u32>],
        out: &mut EncodedChunk,
    ) -> Result<(), ApplyError> {
        if key.len() != self.key_len {
            return Err(ApplyError::BadKeyLen);
        }
        if values.len() != self.hops {
            return Err(ApplyError::BadHop);
        }
        let h = hash::fnv1a64(key);
        self.encode(h, values, &mut out.bytes);
        out.len = self.chunk_len as u8;
        out.copies = self.redundancy;
        for j in 0..self.redundancy {
            out.offsets[j as usize] = self.chunk_offset(h, j);
        }
        Ok(())
    }

    /// How sure an answer with lookup table `table` is, from the region's live counters
    /// ([`crate::confidence::postcard`]).
    pub fn confidence(&self, mem: &RegionMem, table: &ValueTable) -> crate::Confidence {
        crate::confidence::postcard(
            mem.tally(),
            self.chunks,
            self.redundancy,
            self.hops,
            self.slot_bits,
            table.len(),
        )
    }

    /// Decode one chunk as read from the region: the path length ℓ and values if the chunk's
    /// check matches the key (seed `seed = check_seed(h)`) and its slots are valid.
    fn decode(
        &self,
        h: u64,
        seed: u64,
        chunk: &[u8],
        table: &ValueTable,
        out: &mut [u32; 16],
    ) -> Option<usize> {
        let n = self.slots_len();
        let stored = u32::from_le_bytes(chunk.get(n..n + CHUNK_CHECK_LEN)?.try_into().ok()?);
        if chunk_check(seed, &chunk[..n]) != stored {
            return None;
        }
        self.decode_slots_h(h, chunk, table, out)
    }

    /// The [DTA A.6] slot decoder alone, WITHOUT the chunk check: the path the slots of `chunk`
    /// (at least B·b/8 bytes) decode to for `key`, if valid. Queries never answer from it alone
    /// (a torn or foreign chunk can decode to a path that was never written); it measures the
    /// per-slot false-candidate rate of [DTA A.6] (12), which the check multiplies by about 2^-32.
    pub fn decode_slots(&self, key: &[u8], chunk: &[u8], table: &ValueTable) -> Option<Vec<u32>> {
        if chunk.len() < self.slots_len() || table.bits != self.slot_bits {
            return None;
        }
        let mut out = [0u32; 16];
        let len = self.decode_slots_h(hash::fnv1a64(key), chunk, table, &mut out)?;
        Some(out[..len].to_vec())
    }

    /// The slot decoder from `h = fnv1a64(key)`; `chunk` holds at least B·b/8 bytes.
    fn decode_slots_h(
        &self,
        h: u64,
        chunk: &[u8],
        table: &ValueTable,
        out: &mut [u32; 16],
    ) -> Option<usize> {
        let mut len = 0;
        let mut blank_seen = false;
        for (i, slot) in chunk[..self.slots_len()]
            .chunks_exact(self.slot_bytes)
            .enumerate()
        {
            let mut w = [0u8; 4];
            w[..self.slot_bytes].copy_from_slice(slot);
            let s = u32::from_le_bytes(w) ^ hash::postcard_checksum(h, i as u8, self.slot_bits);
            match table.lookup(s)? {
                BLANK => blank_seen = true,
                v if !blank_seen => {
                    out[i] = v;
                    len += 1;
                }
                _ => return None,
            }
        }
        (len > 0).then_some(len)
    }

    /// Query `key`'s path ([DTA §4]: output the values if they appear in a valid subset of the N
    /// chunks and all other chunks are invalid).
    pub fn query(
        &self,
        mem: &RegionMem,
        key: &[u8],
        table: &ValueTable,
    ) -> Result<PostcardAnswer, QueryError> {
        QueryError::key(key, self.key_len)?;
        if table.bits != self.slot_bits {
            return Err(QueryError::BadValueBits {
                got: table.bits,
                want: self.slot_bits,
            });
        }
        let h = hash::fnv1a64(key);
        let seed = hash::check_seed(h);
        let mut found: Option<([u32; 16], usize)> = None;
        let mut chunk = [0u8; MAX_CHUNK];
        for j in 0..self.redundancy {
            let c = &mut chunk[..self.chunk_len()];
            if mem.read(self.chunk_offset(h, j), c).is_err() {
                continue;
            }
            let mut vals = [0u32; 16];
            if let Some(len) = self.decode(h, seed, c, table, &mut vals) {
                match &found {
                    None => found = Some((vals, len)),
                    Some((f, l)) if *l == len && f[..len] == vals[..len] => {}
                    Some(_) => return Ok(PostcardAnswer::Ambiguous),
                }
            }
        }
        Ok(match found {
            Some((v, l)) => PostcardAnswer::Found(v[..l].to_vec()),
            None => PostcardAnswer::Empty,
        })
    }
}

/// The query lookup table `{(g(v), v) | v ∈ V ∪ {⊔}}` ([DTA §4]), open addressing over g(v). A g
/// value shared by several members of V (possible when b < 32; g is a bijection for b = 32)
/// decodes to nothing, so such slots never produce a wrong value.
#[derive(Debug, Clone)]
pub struct ValueTable {
    bits: u8,
    mask: usize,
    keys: Vec<u32>,
    vals: Vec<u32>,
    /// 0 empty, 1 one value, 2 several values share this g.
    state: Vec<u8>,
    len: usize,
}

impl ValueTable {
    /// The table for value set `values` (the blank is added; a blank in `values` is ignored).
    /// More than [`MAX_VALUES`] values is an error, found before the table grows past the limit.
    pub fn new(
        layout: &PostcardingLayout,
        values: impl IntoIterator<Item = u32>,
    ) -> Result<ValueTable, QueryError> {
        let values = values.into_iter();
        let hint = values.size_hint().0.clamp(16, MAX_VALUES);
        let mut t = ValueTable::with_capacity(layout.slot_bits, hint);
        t.insert(BLANK);
        for (i, v) in values.enumerate() {
            if i >= MAX_VALUES {
                return Err(QueryError::TooManyValues {
                    got: i + 1,
                    max: MAX_VALUES,
                });
            }
            if v != BLANK {
                t.insert(v);
            }
        }
        Ok(t)
    }

    /// V = 0..n.
    pub fn range(layout: &PostcardingLayout, n: u32) -> Result<ValueTable, QueryError> {
        ValueTable::new(layout, 0..n)
    }

    fn with_capacity(bits: u8, n: usize) -> ValueTable {
        let size = (n * 2 + 2).next_power_of_two();
        ValueTable {
            bits,
            mask: size - 1,
            keys: vec![0; size],
            vals: vec![0; size],
            state: vec![0; size],
            len: 0,
        }
    }

    fn grow(&mut self) {
        let mut t = ValueTable::with_capacity(self.bits, self.keys.len());
        for i in 0..self.keys.len() {
            if self.state[i] != 0 {
                let at = t.slot_of(self.keys[i]);
                t.keys[at] = self.keys[i];
                t.vals[at] = self.vals[i];
                t.state[at] = self.state[i];
                t.len += 1;
            }
        }
        *self = t;
    }

    #[inline]
    fn slot_of(&self, g: u32) -> usize {
        // g is already a mixed hash for b = 32; mix again for narrow b.
        let mut i = hash::fmix32(g) as usize & self.mask;
        while self.state[i] != 0 && self.keys[i] != g {
            i = (i + 1) & self.mask;
        }
        i
    }

    fn insert(&mut self, v: u32) {
        if (self.len + 1) * 2 > self.keys.len() {
            self.grow();
        }
        let g = hash::postcard_g(v, self.bits);
        let i = self.slot_of(g);
        match self.state[i] {
            0 => {
                self.keys[i] = g;
                self.vals[i] = v;
                self.state[i] = 1;
                self.len += 1;
            }
            1 if self.vals[i] != v => self.state[i] = 2,
            _ => {}
        }
    }

    /// The unique value whose g is `g` (the blank included).
    #[inline]
    pub fn lookup(&self, g: u32) -> Option<u32> {
        let i = self.slot_of(g);
        (self.state[i] == 1).then(|| self.vals[i])
    }

    /// Distinct g values in the table.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
