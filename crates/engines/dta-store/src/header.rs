//! The region header page (`docs/regions.md` §1 is its byte-by-byte description), in the style
//! of smoltcp's `wire`: a [`field`] module of byte ranges and a [`Header`] repr with
//! `parse`/`emit`/`buffer_len`. All integers are little-endian. The header is covered by a
//! CRC-32 (computed over the whole 4096-byte page with the CRC field zeroed), so a reader detects
//! a corrupt header instead of trusting garbage geometry. The live counters ([`field::TALLY`])
//! sit in the header page but outside the CRC: writers add to them while the region is in use.

use crate::spec::{
    AppendRecord, AppendSpec, KeyIncrementSpec, KeyWriteSpec, PostcardingSpec, SketchKind,
    SketchSpec, SketchSync,
};
use crate::{HashScheme, StoreError, StoreKind, StoreSpec};

/// Byte ranges of the header page.
pub mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..8;
    pub const VERSION: Range<usize> = 8..10;
    pub const KIND: Range<usize> = 10..12;
    pub const HEADER_LEN: Range<usize> = 12..16;
    pub const DATA_OFFSET: Range<usize> = 16..24;
    pub const DATA_LEN: Range<usize> = 24..32;
    pub const HASH_SCHEME: Range<usize> = 32..36;
    pub const HEADER_CRC: Range<usize> = 36..40;
    pub const CREATED_NS: Range<usize> = 40..48;
    pub const NAME: Range<usize> = 48..80;
    /// Kind-specific parameters (see `docs/regions.md`).
    pub const PARAMS: Range<usize> = 80..128;
    /// Live counters, updated by writers with atomic adds and NOT covered by the CRC: u64 LE
    /// `writes` at 128 (slots, counters or chunks written: one per copy), u64 LE `added` at 136
    /// (Key-Increment: the sum of all counter values added), 144..192 reserved (zero).
    pub const TALLY: Range<usize> = 128..192;
    /// Byte offset of the `writes` counter in the header page.
    pub const TALLY_WRITES: usize = 128;
    /// Byte offset of the `added` counter in the header page.
    pub const TALLY_ADDED: usize = 136;
    /// Reserved, written as zero (covered by the CRC).
    pub const RESERVED: Range<usize> = 192..4096;
}

pub const MAGIC: &[u8; 8] = b"DTAREGN\0";
/// 4: every Postcarding chunk ends with a 4-byte check over key and slots (3: live counters at
/// 128..192, outside the CRC; 2: Key-Write and Key-Increment record N, native Key-Write slot
/// checks cover key and data).
pub const VERSION: u16 = 4;
/// Bytes of the header page; the data area starts here.
pub const HEADER_LEN: usize = 4096;
/// Bytes of the store name field.
pub const NAME_LEN: usize = 32;

/// A parsed region header.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub name: String,
    pub kind: StoreKind,
    pub spec: StoreSpec,
    pub hash: HashScheme,
    pub version: u16,
    pub header_len: u32,
    pub data_offset: u64,
    pub data_len: u64,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_unix_ns: u64,
}

fn rd16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn rd32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn rd64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// CRC-32 of a header page with the CRC field and the live counters ([`field::TALLY`]) taken as
/// zero.
pub fn header_crc(page: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&page[..field::HEADER_CRC.start]);
    h.update(&[0; 4]);
    h.update(&page[field::HEADER_CRC.end..field::TALLY.start]);
    h.update(&[0; field::TALLY.end - field::TALLY.start]);
    h.update(&page[field::TALLY.end..HEADER_LEN]);
    h.finalize()
}

/// Check a store name: 1..=32 bytes of UTF-8 without NUL.
pub fn validate_name(name: &str) -> Result<(), StoreError> {
    if name.is_empty() || name.len() > NAME_LEN || name.contains('\0') {
        return Err(StoreError::BadName(format!(
            "{name:?}: must be 1..={NAME_LEN} bytes without NUL"
        )));
    }
    Ok(())
}

impl Header {
    /// The record layout of an Append store's entries ([`AppendRecord::Raw`] for any other kind).
    pub fn append_record(&self) -> AppendRecord {
        match &self.spec {
            StoreSpec::Append(s) => s.record,
            _ => AppendRecord::Raw,
        }
    }

    /// A header for a new region.
    pub fn new(name: &str, spec: &StoreSpec) -> Result<Header, StoreError> {
        validate_name(name)?;
        let data_len = spec.data_len()?;
        let created_unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Ok(Header {
            name: name.to_string(),
            kind: spec.kind(),
            spec: spec.clone(),
            hash: spec.hash(),
            version: VERSION,
            header_len: HEADER_LEN as u32,
            data_offset: HEADER_LEN as u64,
            data_len,
            created_unix_ns,
        })
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Parse and validate a header page (at least 4096 bytes). Never panics.
    pub fn parse(page: &[u8]) -> Result<Header, StoreError> {
        if page.len() < HEADER_LEN {
            return Err(StoreError::Truncated {
                file_len: page.len() as u64,
                needed: HEADER_LEN as u64,
            });
        }
        if &page[field::MAGIC] != MAGIC {
            return Err(StoreError::BadMagic);
        }
        let version = rd16(page, field::VERSION.start);
        if version != VERSION {
            return Err(StoreError::BadVersion(version));
        }
        let stored = rd32(page, field::HEADER_CRC.start);
        let computed = header_crc(page);
        if stored != computed {
            return Err(StoreError::BadHeaderCrc { stored, computed });
        }
        let kind_raw = rd16(page, field::KIND.start);
        let kind = StoreKind::from_u16(kind_raw).ok_or(StoreError::BadKind(kind_raw))?;
        let header_len = rd32(page, field::HEADER_LEN.start);
        if header_len as usize != HEADER_LEN {
            return Err(StoreError::BadGeometry(format!(
                "header_len = {header_len}, expected {HEADER_LEN}"
            )));
        }
        let data_offset = rd64(page, field::DATA_OFFSET.start);
        if data_offset != HEADER_LEN as u64 {
            return Err(StoreError::BadGeometry(format!(
                "data_offset = {data_offset}, expected {HEADER_LEN}"
            )));
        }
        let data_len = rd64(page, field::DATA_LEN.start);
        let hash_raw = rd32(page, field::HASH_SCHEME.start);
        let hash = HashScheme::from_u32(hash_raw).ok_or(StoreError::BadHashScheme(hash_raw))?;
        let created_unix_ns = rd64(page, field::CREATED_NS.start);
        let raw_name = &page[field::NAME];
        let end = raw_name.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
        if raw_name[end..].iter().any(|&b| b != 0) {
            return Err(StoreError::BadName("name is not NUL padded".into()));
        }
        let name = std::str::from_utf8(&raw_name[..end])
            .map_err(|_| StoreError::BadName("name is not UTF-8".into()))?
            .to_string();
        validate_name(&name)?;
        let p = &page[field::PARAMS];
        let spec = Self::parse_params(kind, hash, p)?;
        if spec.hash() != hash {
            return Err(StoreError::BadHashScheme(hash_raw));
        }
        let expected = spec.data_len()?;
        if data_len != expected {
            return Err(StoreError::BadGeometry(format!(
                "data_len = {data_len}, but the parameters need {expected}"
            )));
        }
        Ok(Header {
            name,
            kind,
            spec,
            hash,
            version,
            header_len,
            data_offset,
            data_len,
            created_unix_ns,
        })
    }

    fn parse_params(kind: StoreKind, hash: HashScheme, p: &[u8]) -> Result<StoreSpec, StoreError> {
        let derived = |name: &str, stored: u64, want: u64| {
            if stored != want {
                Err(StoreError::BadGeometry(format!(
                    "{name} = {stored}, but the parameters give {want}"
                )))
            } else {
                Ok(())
            }
        };
        let spec = match kind {
            StoreKind::KeyWrite => {
                let s = KeyWriteSpec {
                    slots: rd64(p, 0),
                    key_len: p[8],
                    data_len: p[9],
                    hash,
                    redundancy: p[12],
                };
                StoreSpec::KeyWrite(s.clone()).validate()?;
                derived("slot_len", rd16(p, 10) as u64, s.slot_len() as u64)?;
                StoreSpec::KeyWrite(s)
            }
            StoreKind::KeyIncrement => StoreSpec::KeyIncrement(KeyIncrementSpec {
                counters: rd64(p, 0),
                key_len: p[8],
                hash,
                redundancy: p[9],
                windows: rd32(p, 16),
                window_ms: rd64(p, 24),
            }),
            StoreKind::Postcarding => {
                let s = PostcardingSpec {
                    chunks: rd64(p, 0),
                    hops: p[8],
                    slot_bits: p[9],
                    redundancy: p[10],
                    key_len: p[11],
                };
                derived("chunk_len", rd16(p, 12) as u64, s.chunk_len() as u64)?;
                StoreSpec::Postcarding(s)
            }
            StoreKind::Append => {
                let s = AppendSpec {
                    lists: rd32(p, 0),
                    batch: rd32(p, 4),
                    capacity: rd64(p, 8),
                    entry_len: p[16],
                    record: AppendRecord::from_code(p[17]).ok_or_else(|| {
                        StoreError::BadGeometry(format!("unknown Append record layout {}", p[17]))
                    })?,
                };
                derived(
                    "rings_offset",
                    rd64(p, 24),
                    StoreSpec::append_rings_offset(s.lists),
                )?;
                StoreSpec::Append(s)
            }
            StoreKind::SketchMerge => {
                let (a, b) = (rd32(p, 8), rd32(p, 12));
                let kind = match rd16(p, 2) {
                    1 => SketchKind::CountMin {
                        rows: a,
                        columns: b,
                    },
                    2 => SketchKind::HyperLogLog {
                        registers: a,
                        registers_per_column: b,
                    },
                    t => return Err(StoreError::BadSpec(format!("unknown sketch type {t}"))),
                };
                let sync = match p[24] {
                    0 => SketchSync::InOrder,
                    1 => SketchSync::Approsync,
                    t => return Err(StoreError::BadSpec(format!("unknown sketch sync {t}"))),
                };
                let s = SketchSpec {
                    sketch_id: rd16(p, 0),
                    kind,
                    reporters: rd32(p, 4),
                    sync,
                };
                StoreSpec::SketchMerge(s.clone()).validate()?;
                derived("columns", rd32(p, 16) as u64, kind.columns() as u64)?;
                derived("record_len", rd32(p, 20) as u64, kind.record_len() as u64)?;
                StoreSpec::SketchMerge(s)
            }
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Write the header page (including its CRC) into `page[..4096]`; the rest of the page is
    /// zeroed. `page` must be at least [`HEADER_LEN`] bytes.
    pub fn emit(&self, page: &mut [u8]) {
        let page = &mut page[..HEADER_LEN];
        page.fill(0);
        page[field::MAGIC].copy_from_slice(MAGIC);
        page[field::VERSION].copy_from_slice(&self.version.to_le_bytes());
        page[field::KIND].copy_from_slice(&(self.kind as u16).to_le_bytes());
        page[field::HEADER_LEN].copy_from_slice(&self.header_len.to_le_bytes());
        page[field::DATA_OFFSET].copy_from_slice(&self.data_offset.to_le_bytes());
        page[field::DATA_LEN].copy_from_slice(&self.data_len.to_le_bytes());
        page[field::HASH_SCHEME].copy_from_slice(&(self.hash as u32).to_le_bytes());
        page[field::CREATED_NS].copy_from_slice(&self.created_unix_ns.to_le_bytes());
        let n = self.name.len().min(NAME_LEN);
        page[field::NAME.start..field::NAME.start + n].copy_from_slice(&self.name.as_bytes()[..n]);
        let p = &mut page[field::PARAMS];
        match &self.spec {
            StoreSpec::KeyWrite(s) => {
                p[0..8].copy_from_slice(&s.slots.to_le_bytes());
                p[8] = s.key_len;
                p[9] = s.data_len;
                p[10..12].copy_from_slice(&(s.slot_len() as u16).to_le_bytes());
                p[12] = s.redundancy;
            }
            StoreSpec::KeyIncrement(s) => {
                p[0..8].copy_from_slice(&s.counters.to_le_bytes());
                p[8] = s.key_len;
                p[9] = s.redundancy;
                p[16..20].copy_from_slice(&s.windows.to_le_bytes());
                p[24..32].copy_from_slice(&s.window_ms.to_le_bytes());
            }
            StoreSpec::Postcarding(s) => {
                p[0..8].copy_from_slice(&s.chunks.to_le_bytes());
                p[8] = s.hops;
                p[9] = s.slot_bits;
                p[10] = s.redundancy;
                p[11] = s.key_len;
                p[12..14].copy_from_slice(&(s.chunk_len() as u16).to_le_bytes());
            }
            StoreSpec::Append(s) => {
                p[0..4].copy_from_slice(&s.lists.to_le_bytes());
                p[4..8].copy_from_slice(&s.batch.to_le_bytes());
                p[8..16].copy_from_slice(&s.capacity.to_le_bytes());
                p[16] = s.entry_len;
                p[17] = s.record.code();
                p[24..32].copy_from_slice(&StoreSpec::append_rings_offset(s.lists).to_le_bytes());
            }
            StoreSpec::SketchMerge(s) => {
                p[0..2].copy_from_slice(&s.sketch_id.to_le_bytes());
                let (t, a, b) = match s.kind {
                    SketchKind::CountMin { rows, columns } => (1u16, rows, columns),
                    SketchKind::HyperLogLog {
                        registers,
                        registers_per_column,
                    } => (2, registers, registers_per_column),
                };
                p[2..4].copy_from_slice(&t.to_le_bytes());
                p[4..8].copy_from_slice(&s.reporters.to_le_bytes());
                p[8..12].copy_from_slice(&a.to_le_bytes());
                p[12..16].copy_from_slice(&b.to_le_bytes());
                p[16..20].copy_from_slice(&s.kind.columns().to_le_bytes());
                p[20..24].copy_from_slice(&(s.kind.record_len() as u32).to_le_bytes());
                p[24] = match s.sync {
                    SketchSync::InOrder => 0,
                    SketchSync::Approsync => 1,
                };
            }
        }
        let crc = header_crc(page);
        page[field::HEADER_CRC].copy_from_slice(&crc.to_le_bytes());
    }

    /// The header as a 4096-byte page.
    pub fn to_page(&self) -> Vec<u8> {
        let mut page = vec![0u8; HEADER_LEN];
        self.emit(&mut page);
        page
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_every_kind() {
        let specs = [
            StoreSpec::KeyWrite(KeyWriteSpec::new(1 << 10, 4, 4)),
            StoreSpec::KeyWrite(KeyWriteSpec::new(1 << 10, 13, 20)),
            StoreSpec::KeyIncrement(KeyIncrementSpec {
                counters: 1 << 12,
                key_len: 13,
                hash: HashScheme::Native,
                redundancy: 3,
                windows: 0,
                window_ms: 0,
            }),
            StoreSpec::Postcarding(PostcardingSpec {
                chunks: 1 << 8,
                hops: 5,
                slot_bits: 16,
                redundancy: 2,
                key_len: 13,
            }),
            StoreSpec::Append(AppendSpec {
                lists: 3,
                capacity: 64,
                entry_len: 13,
                batch: 16,
                record: Default::default(),
            }),
            StoreSpec::SketchMerge(SketchSpec {
                sketch_id: 7,
                kind: SketchKind::HyperLogLog {
                    registers: 1024,
                    registers_per_column: 64,
                },
                reporters: 3,
                sync: SketchSync::InOrder,
            }),
            StoreSpec::SketchMerge(SketchSpec {
                sketch_id: 8,
                kind: SketchKind::CountMin {
                    rows: 4,
                    columns: 256,
                },
                reporters: 2,
                sync: SketchSync::Approsync,
            }),
        ];
        for spec in specs {
            let h = Header::new("s", &spec).unwrap();
            let page = h.to_page();
            assert_eq!(Header::parse(&page).unwrap(), h);
            // Any single flipped bit in the page is detected.
            for at in [0usize, 9, 11, 20, 30, 33, 45, 50, 81, 90, 200, 4095] {
                let mut p = page.clone();
                p[at] ^= 0x10;
                assert!(Header::parse(&p).is_err(), "flip at {at} undetected");
            }
            // The live counters are outside the CRC.
            let mut p = page.clone();
            p[field::TALLY_WRITES] = 7;
            p[field::TALLY_ADDED + 3] = 9;
            assert_eq!(Header::parse(&p).unwrap(), h);
        }
    }
}
