//! The memory advertisement the responder SENDs after the connection is established
//! (`docs/rdma.md`, "Memory advertisement").
//!
//! 1. Prototype-compatible: one 16-byte SEND Only, `addr_lo u32, addr_hi u32, length u32,
//!    rkey u32`, little-endian, describing the data area of the first store (what the Tofino
//!    prototype's collector sent, [P4-RDMA §V-C]).
//! 2. Native: one SEND message (First/Middle/Last when longer than the path MTU), little-endian:
//!    `magic "DTAADV\0\x01"`, `stores u32`, `reserved u32`, then per store `region_va u64`
//!    (address of the header page), `region_len u64` (header page + data area), `rkey u32`,
//!    `append_heads u32` (count), the 4096-byte region header page, and that many `u64` Append
//!    heads. The data area starts at `region_va + header.data_offset`.

use dta_store::header::HEADER_LEN;
use dta_store::Header;
use dta_store::StoreInfo;

/// Magic of the native advertisement.
pub const NATIVE_MAGIC: [u8; 8] = *b"DTAADV\x00\x01";
/// Length of the prototype advertisement.
pub const PROTO_LEN: usize = 16;

/// The prototype's advertisement: one memory region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtoAdv {
    pub addr: u64,
    pub length: u32,
    pub rkey: u32,
}

impl ProtoAdv {
    pub fn emit(&self) -> [u8; PROTO_LEN] {
        let mut b = [0u8; PROTO_LEN];
        b[0..4].copy_from_slice(&(self.addr as u32).to_le_bytes());
        b[4..8].copy_from_slice(&((self.addr >> 32) as u32).to_le_bytes());
        b[8..12].copy_from_slice(&self.length.to_le_bytes());
        b[12..16].copy_from_slice(&self.rkey.to_le_bytes());
        b
    }

    pub fn parse(b: &[u8]) -> Option<ProtoAdv> {
        if b.len() != PROTO_LEN {
            return None;
        }
        let u = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        Some(ProtoAdv {
            addr: u64::from(u(0)) | (u64::from(u(4)) << 32),
            length: u(8),
            rkey: u(12),
        })
    }
}

/// One store as advertised.
#[derive(Debug, Clone)]
pub struct AdvertisedStore {
    /// Address of the region's header page in the responder's address space.
    pub region_va: u64,
    /// Header page + data area.
    pub region_len: u64,
    pub rkey: u32,
    pub header: Header,
    pub append_heads: Vec<u64>,
}

impl AdvertisedStore {
    /// Address of the data area (where offset 0 of the store is).
    pub fn data_va(&self) -> u64 {
        self.region_va + self.header.data_offset
    }

    /// What the translator needs to build its routes.
    pub fn store_info(&self) -> StoreInfo {
        StoreInfo {
            header: self.header.clone(),
            append_heads: self.append_heads.clone(),
        }
    }
}

/// Encode the native advertisement.
pub fn emit_native(stores: &[AdvertisedStore]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&NATIVE_MAGIC);
    b.extend_from_slice(&(stores.len() as u32).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    for s in stores {
        b.extend_from_slice(&s.region_va.to_le_bytes());
        b.extend_from_slice(&s.region_len.to_le_bytes());
        b.extend_from_slice(&s.rkey.to_le_bytes());
        b.extend_from_slice(&(s.append_heads.len() as u32).to_le_bytes());
        b.extend_from_slice(&s.header.to_page());
        for h in &s.append_heads {
            b.extend_from_slice(&h.to_le_bytes());
        }
    }
    b
}

/// Why an advertisement could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdvError {
    #[error("not a native advertisement (bad magic)")]
    BadMagic,
    #[error("advertisement truncated")]
    Truncated,
    #[error("store {0}: bad region header: {1}")]
    BadHeader(usize, String),
    #[error("store {0}: the region length does not cover its data area")]
    BadLength(usize),
}

/// Decode the native advertisement.
pub fn parse_native(b: &[u8]) -> Result<Vec<AdvertisedStore>, AdvError> {
    if b.len() < 16 {
        return Err(AdvError::Truncated);
    }
    if b[..8] != NATIVE_MAGIC {
        return Err(AdvError::BadMagic);
    }
    let n = u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize;
    let mut at = 16;
    let mut out = Vec::with_capacity(n.min(1024));
    for i in 0..n {
        let fixed = b.get(at..at + 24).ok_or(AdvError::Truncated)?;
        let region_va = u64::from_le_bytes(fixed[0..8].try_into().unwrap());
        let region_len = u64::from_le_bytes(fixed[8..16].try_into().unwrap());
        let rkey = u32::from_le_bytes(fixed[16..20].try_into().unwrap());
        let heads = u32::from_le_bytes(fixed[20..24].try_into().unwrap()) as usize;
        at += 24;
        let page = b.get(at..at + HEADER_LEN).ok_or(AdvError::Truncated)?;
        let header = Header::parse(page).map_err(|e| AdvError::BadHeader(i, e.to_string()))?;
        at += HEADER_LEN;
        let hb = b.get(at..at + heads * 8).ok_or(AdvError::Truncated)?;
        let append_heads = hb
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        at += heads * 8;
        // An overflowing end is as bad as one past the region.
        if header
            .data_offset
            .checked_add(header.data_len)
            .is_none_or(|end| end > region_len)
        {
            return Err(AdvError::BadLength(i));
        }
        out.push(AdvertisedStore {
            region_va,
            region_len,
            rkey,
            header,
            append_heads,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proto_adv_is_16_little_endian_bytes() {
        let a = ProtoAdv {
            addr: 0x0000_7f01_0203_0405,
            length: 0x1000,
            rkey: 0xabcd,
        };
        let b = a.emit();
        assert_eq!(
            b,
            [5, 4, 3, 2, 1, 0x7f, 0, 0, 0, 0x10, 0, 0, 0xcd, 0xab, 0, 0]
        );
        assert_eq!(ProtoAdv::parse(&b), Some(a));
        assert_eq!(ProtoAdv::parse(&b[..15]), None);
    }

    #[test]
    fn native_adv_round_trip_and_errors() {
        let spec = dta_store::StoreSpec::Append(dta_store::spec::AppendSpec {
            lists: 2,
            capacity: 16,
            entry_len: 4,
            batch: 4,
            record: Default::default(),
        });
        let header = Header::new("ev", &spec).unwrap();
        let s = AdvertisedStore {
            region_va: 1 << 40,
            region_len: header.data_offset + header.data_len,
            rkey: 7,
            header,
            append_heads: vec![3, 9],
        };
        let b = emit_native(std::slice::from_ref(&s));
        let back = parse_native(&b).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].append_heads, vec![3, 9]);
        assert_eq!(back[0].header, s.header);
        assert_eq!(back[0].data_va(), (1 << 40) + 4096);
        assert_eq!(
            parse_native(&b[..b.len() - 1]).unwrap_err(),
            AdvError::Truncated
        );
        let mut bad = b.clone();
        bad[0] = b'X';
        assert_eq!(parse_native(&bad).unwrap_err(), AdvError::BadMagic);
        let mut short = b.clone();
        short[16 + 8] = 0; // region_len too small
        short[16 + 9] = 0;
        assert!(matches!(parse_native(&short), Err(AdvError::BadLength(0))));
    }
}
