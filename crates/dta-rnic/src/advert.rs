//! Memory advertisements: the SEND messages a collector posts on a freshly established RC
//! connection to tell the translator where it may write (001 §5.3: "advertise primitive-specific
//! metadata to the translator using RDMA-Send packets").
//!
//! Two formats, both little-endian (as the prototype's C++ collector sent its structs):
//!
//! - **prototype** (16 bytes, exactly the prototype's): `addr_lo u32, addr_hi u32, length u32,
//!   rkey u32`. It describes one store's *data area* (the translator's offsets are relative to
//!   it), so a prototype translator writes where ours would.
//! - **native** (one message per store, [`native::LEN`] bytes): the store's whole registration
//!   (header page and data area), its data area, and the header's significant bytes, so the
//!   translator learns each store's layout without a round trip. `docs/rdma.md` documents both.
//!
//! Views follow the smoltcp `wire` style: `Packet<T: AsRef<[u8]>>` with `new_unchecked` /
//! `new_checked`, a `field` module of byte ranges, and a `Repr` with `parse` / `emit` /
//! `buffer_len`.

/// Why an advertisement could not be parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AdvertError {
    #[error("advertisement truncated: {len} bytes, need {needed}")]
    Truncated { len: usize, needed: usize },
    #[error("not a native advertisement (magic {0:02x?})")]
    BadMagic([u8; 4]),
    #[error("native advertisement version {0} (this build knows 1)")]
    BadVersion(u8),
    #[error("store index {index} not below store count {count}")]
    BadIndex { index: u16, count: u16 },
    #[error("header bytes {0} exceed the {max} the message carries", max = native::HEADER_BYTES)]
    BadHeaderLen(u16),
    #[error("data area [{data_addr:#x}, +{data_len}) lies outside the registration [{addr:#x}, +{length})")]
    DataOutside {
        addr: u64,
        length: u64,
        data_addr: u64,
        data_len: u64,
    },
    #[error("a prototype advertisement carries a 32-bit length; {0} bytes do not fit")]
    TooLong(u64),
}

/// The prototype-compatible 16-byte advertisement.
pub mod prototype {
    use super::AdvertError;

    /// Byte ranges of the fields.
    pub mod field {
        use std::ops::Range;
        pub const ADDR_LO: Range<usize> = 0..4;
        pub const ADDR_HI: Range<usize> = 4..8;
        pub const LENGTH: Range<usize> = 8..12;
        pub const RKEY: Range<usize> = 12..16;
    }

    /// Bytes of the message.
    pub const LEN: usize = 16;

    /// A read/write view of a prototype advertisement.
    #[derive(Debug, Clone)]
    pub struct Packet<T: AsRef<[u8]>> {
        buffer: T,
    }

    fn le32(b: &[u8], r: std::ops::Range<usize>) -> u32 {
        u32::from_le_bytes([b[r.start], b[r.start + 1], b[r.start + 2], b[r.start + 3]])
    }

    impl<T: AsRef<[u8]>> Packet<T> {
        /// Wrap without checking the length: accessors may panic on a short buffer.
        pub fn new_unchecked(buffer: T) -> Self {
            Packet { buffer }
        }

        /// Wrap, checking the buffer holds at least [`LEN`] bytes. Longer buffers are accepted
        /// (a receive buffer is usually larger than the message); the fields are the first 16.
        pub fn new_checked(buffer: T) -> Result<Self, AdvertError> {
            let len = buffer.as_ref().len();
            if len < LEN {
                return Err(AdvertError::Truncated { len, needed: LEN });
            }
            Ok(Packet { buffer })
        }

        pub fn into_inner(self) -> T {
            self.buffer
        }

        /// The advertised virtual address (`addr_hi << 32 | addr_lo`).
        pub fn addr(&self) -> u64 {
            let b = self.buffer.as_ref();
            (le32(b, field::ADDR_HI) as u64) << 32 | le32(b, field::ADDR_LO) as u64
        }

        pub fn length(&self) -> u32 {
            le32(self.buffer.as_ref(), field::LENGTH)
        }

        pub fn rkey(&self) -> u32 {
            le32(self.buffer.as_ref(), field::RKEY)
        }
    }

    impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
        pub fn set_addr(&mut self, addr: u64) {
            let b = self.buffer.as_mut();
            b[field::ADDR_LO].copy_from_slice(&(addr as u32).to_le_bytes());
            b[field::ADDR_HI].copy_from_slice(&((addr >> 32) as u32).to_le_bytes());
        }

        pub fn set_length(&mut self, length: u32) {
            self.buffer.as_mut()[field::LENGTH].copy_from_slice(&length.to_le_bytes());
        }

        pub fn set_rkey(&mut self, rkey: u32) {
            self.buffer.as_mut()[field::RKEY].copy_from_slice(&rkey.to_le_bytes());
        }
    }

    /// A parsed prototype advertisement.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Repr {
        pub addr: u64,
        pub length: u32,
        pub rkey: u32,
    }

    impl Repr {
        /// The advertisement of a data area of `length` bytes at `addr`; fails if the length
        /// does not fit the prototype's 32-bit field.
        pub fn new(addr: u64, length: u64, rkey: u32) -> Result<Repr, AdvertError> {
            let length = u32::try_from(length).map_err(|_| AdvertError::TooLong(length))?;
            Ok(Repr { addr, length, rkey })
        }

        pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr, AdvertError> {
            Packet::new_checked(packet.buffer.as_ref())?;
            Ok(Repr {
                addr: packet.addr(),
                length: packet.length(),
                rkey: packet.rkey(),
            })
        }

        pub fn buffer_len(&self) -> usize {
            LEN
        }

        /// Write the 16 bytes; the buffer must hold at least [`LEN`] (checked by the caller with
        /// `Packet::new_checked`).
        pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
            packet.set_addr(self.addr);
            packet.set_length(self.length);
            packet.set_rkey(self.rkey);
        }

        /// The 16 bytes as an array.
        pub fn to_bytes(&self) -> [u8; LEN] {
            let mut b = [0u8; LEN];
            self.emit(&mut Packet::new_unchecked(&mut b[..]));
            b
        }
    }
}

/// The native advertisement: one message per store.
///
/// ```text
/// offset size field
///  0     4    magic "DTAA"
///  4     1    version (1)
///  5     1    reserved (0)
///  6     2    store index (0-based, in the collector's store order)
///  8     2    store count
/// 10     2    header bytes carried (H, at most 128)
/// 12     4    rkey (of the registration below)
/// 16     8    registration address: the region's header page
/// 24     8    registration length: header page + data area (+ hugetlbfs rounding)
/// 32     8    data area address (registration address + the header's data_offset)
/// 40     8    data area length
/// 48     128  the header page's first H bytes, zero-padded; the rest of the page is zero
/// ```
pub mod native {
    use super::AdvertError;

    /// Byte ranges of the fields.
    pub mod field {
        use std::ops::Range;
        pub const MAGIC: Range<usize> = 0..4;
        pub const VERSION: usize = 4;
        pub const RESERVED: usize = 5;
        pub const INDEX: Range<usize> = 6..8;
        pub const COUNT: Range<usize> = 8..10;
        pub const HEADER_BYTES: Range<usize> = 10..12;
        pub const RKEY: Range<usize> = 12..16;
        pub const ADDR: Range<usize> = 16..24;
        pub const LENGTH: Range<usize> = 24..32;
        pub const DATA_ADDR: Range<usize> = 32..40;
        pub const DATA_LEN: Range<usize> = 40..48;
        pub const HEADER: Range<usize> = 48..176;
    }

    pub const MAGIC: [u8; 4] = *b"DTAA";
    pub const VERSION: u8 = 1;
    /// Header bytes carried: the region header's fixed fields and kind parameters
    /// (`dta_store::header::field::PARAMS.end`); the rest of the 4096-byte page is reserved zero.
    pub const HEADER_BYTES: usize = 128;
    /// Bytes of one message.
    pub const LEN: usize = field::HEADER.end;

    /// A read/write view of a native advertisement.
    #[derive(Debug, Clone)]
    pub struct Packet<T: AsRef<[u8]>> {
        buffer: T,
    }

    impl<T: AsRef<[u8]>> Packet<T> {
        pub fn new_unchecked(buffer: T) -> Self {
            Packet { buffer }
        }

        /// Wrap, checking the length (at least [`LEN`]), the magic and the version.
        pub fn new_checked(buffer: T) -> Result<Self, AdvertError> {
            let b = buffer.as_ref();
            if b.len() < LEN {
                return Err(AdvertError::Truncated {
                    len: b.len(),
                    needed: LEN,
                });
            }
            let p = Packet { buffer };
            if p.magic() != MAGIC {
                return Err(AdvertError::BadMagic(p.magic()));
            }
            if p.version() != VERSION {
                return Err(AdvertError::BadVersion(p.version()));
            }
            Ok(p)
        }

        pub fn into_inner(self) -> T {
            self.buffer
        }

        fn b(&self) -> &[u8] {
            self.buffer.as_ref()
        }
        fn u16_at(&self, r: std::ops::Range<usize>) -> u16 {
            u16::from_le_bytes(self.b()[r].try_into().unwrap())
        }
        fn u64_at(&self, r: std::ops::Range<usize>) -> u64 {
            u64::from_le_bytes(self.b()[r].try_into().unwrap())
        }

        pub fn magic(&self) -> [u8; 4] {
            self.b()[field::MAGIC].try_into().unwrap()
        }
        pub fn version(&self) -> u8 {
            self.b()[field::VERSION]
        }
        pub fn index(&self) -> u16 {
            self.u16_at(field::INDEX)
        }
        pub fn count(&self) -> u16 {
            self.u16_at(field::COUNT)
        }
        pub fn header_bytes(&self) -> u16 {
            self.u16_at(field::HEADER_BYTES)
        }
        pub fn rkey(&self) -> u32 {
            u32::from_le_bytes(self.b()[field::RKEY].try_into().unwrap())
        }
        pub fn addr(&self) -> u64 {
            self.u64_at(field::ADDR)
        }
        pub fn length(&self) -> u64 {
            self.u64_at(field::LENGTH)
        }
        pub fn data_addr(&self) -> u64 {
            self.u64_at(field::DATA_ADDR)
        }
        pub fn data_len(&self) -> u64 {
            self.u64_at(field::DATA_LEN)
        }
        /// The carried header bytes (all 128; only the first `header_bytes()` are meaningful).
        pub fn header(&self) -> &[u8] {
            &self.b()[field::HEADER]
        }
    }

    impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
        fn bm(&mut self) -> &mut [u8] {
            self.buffer.as_mut()
        }
        pub fn set_magic(&mut self) {
            self.bm()[field::MAGIC].copy_from_slice(&MAGIC);
            self.bm()[field::VERSION] = VERSION;
            self.bm()[field::RESERVED] = 0;
        }
        pub fn set_index(&mut self, v: u16) {
            self.bm()[field::INDEX].copy_from_slice(&v.to_le_bytes());
        }
        pub fn set_count(&mut self, v: u16) {
            self.bm()[field::COUNT].copy_from_slice(&v.to_le_bytes());
        }
        pub fn set_header_bytes(&mut self, v: u16) {
            self.bm()[field::HEADER_BYTES].copy_from_slice(&v.to_le_bytes());
        }
        pub fn set_rkey(&mut self, v: u32) {
            self.bm()[field::RKEY].copy_from_slice(&v.to_le_bytes());
        }
        pub fn set_addr(&mut self, v: u64) {
            self.bm()[field::ADDR].copy_from_slice(&v.to_le_bytes());
        }
        pub fn set_length(&mut self, v: u64) {
            self.bm()[field::LENGTH].copy_from_slice(&v.to_le_bytes());
        }
        pub fn set_data_addr(&mut self, v: u64) {
            self.bm()[field::DATA_ADDR].copy_from_slice(&v.to_le_bytes());
        }
        pub fn set_data_len(&mut self, v: u64) {
            self.bm()[field::DATA_LEN].copy_from_slice(&v.to_le_bytes());
        }
        pub fn header_mut(&mut self) -> &mut [u8] {
            &mut self.bm()[field::HEADER]
        }
    }

    /// A parsed native advertisement.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Repr {
        pub index: u16,
        pub count: u16,
        pub rkey: u32,
        pub addr: u64,
        pub length: u64,
        pub data_addr: u64,
        pub data_len: u64,
        /// The header page's first `header_len` bytes (`header_len <= HEADER_BYTES`).
        pub header: [u8; HEADER_BYTES],
        pub header_len: u16,
    }

    impl Repr {
        fn check(&self) -> Result<(), AdvertError> {
            if self.index >= self.count {
                return Err(AdvertError::BadIndex {
                    index: self.index,
                    count: self.count,
                });
            }
            if self.header_len as usize > HEADER_BYTES {
                return Err(AdvertError::BadHeaderLen(self.header_len));
            }
            let inside = self.data_addr >= self.addr
                && self
                    .data_addr
                    .checked_add(self.data_len)
                    .zip(self.addr.checked_add(self.length))
                    .is_some_and(|(de, re)| de <= re);
            if !inside {
                return Err(AdvertError::DataOutside {
                    addr: self.addr,
                    length: self.length,
                    data_addr: self.data_addr,
                    data_len: self.data_len,
                });
            }
            Ok(())
        }

        /// Parse and validate: index below count, header length in range, data area inside the
        /// registration.
        pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr, AdvertError> {
            let p = Packet::new_checked(packet.buffer.as_ref())?;
            let header_len = p.header_bytes();
            if header_len as usize > HEADER_BYTES {
                return Err(AdvertError::BadHeaderLen(header_len));
            }
            let mut header = [0u8; HEADER_BYTES];
            header[..header_len as usize].copy_from_slice(&p.header()[..header_len as usize]);
            let r = Repr {
                index: p.index(),
                count: p.count(),
                rkey: p.rkey(),
                addr: p.addr(),
                length: p.length(),
                data_addr: p.data_addr(),
                data_len: p.data_len(),
                header,
                header_len,
            };
            r.check()?;
            Ok(r)
        }

        pub fn buffer_len(&self) -> usize {
            LEN
        }

        /// Write the message; refuses an inconsistent `Repr` (see [`Repr::parse`]) and a buffer
        /// shorter than [`LEN`].
        pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
            &self,
            packet: &mut Packet<T>,
        ) -> Result<(), AdvertError> {
            self.check()?;
            let len = packet.buffer.as_ref().len();
            if len < LEN {
                return Err(AdvertError::Truncated { len, needed: LEN });
            }
            packet.set_magic();
            packet.set_index(self.index);
            packet.set_count(self.count);
            packet.set_header_bytes(self.header_len);
            packet.set_rkey(self.rkey);
            packet.set_addr(self.addr);
            packet.set_length(self.length);
            packet.set_data_addr(self.data_addr);
            packet.set_data_len(self.data_len);
            let h = packet.header_mut();
            h.fill(0);
            h[..self.header_len as usize].copy_from_slice(&self.header[..self.header_len as usize]);
            Ok(())
        }

        /// The header page this advertisement describes (4096 bytes: the carried bytes, then
        /// zeros), ready for `dta_store::Header::parse`, which checks its CRC.
        pub fn header_page(&self) -> Vec<u8> {
            let mut page = vec![0u8; dta_store::header::HEADER_LEN];
            page[..self.header_len as usize]
                .copy_from_slice(&self.header[..self.header_len as usize]);
            page
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prototype_bytes_are_little_endian_lo_hi_length_rkey() {
        let r = prototype::Repr::new(0x0000_7f12_3456_7000, 1 << 20, 0xdead_beef).unwrap();
        let b = r.to_bytes();
        assert_eq!(
            b,
            [
                0x00, 0x70, 0x56, 0x34, // addr_lo
                0x12, 0x7f, 0x00, 0x00, // addr_hi
                0x00, 0x00, 0x10, 0x00, // length
                0xef, 0xbe, 0xad, 0xde, // rkey
            ]
        );
        let p = prototype::Packet::new_checked(&b[..]).unwrap();
        assert_eq!(prototype::Repr::parse(&p).unwrap(), r);
    }

    #[test]
    fn prototype_rejects_short_and_long() {
        assert_eq!(
            prototype::Packet::new_checked(&[0u8; 15][..]).unwrap_err(),
            AdvertError::Truncated {
                len: 15,
                needed: 16
            }
        );
        assert_eq!(
            prototype::Repr::new(0, 1 << 32, 1).unwrap_err(),
            AdvertError::TooLong(1 << 32)
        );
        assert!(prototype::Repr::new(0, u32::MAX as u64, 1).is_ok());
    }

    fn sample() -> native::Repr {
        let mut header = [0u8; native::HEADER_BYTES];
        for (i, b) in header.iter_mut().enumerate() {
            *b = i as u8 ^ 0x5a;
        }
        native::Repr {
            index: 1,
            count: 3,
            rkey: 0x0102_0304,
            addr: 0x7f00_0000_0000,
            length: 4096 + 65536,
            data_addr: 0x7f00_0000_1000,
            data_len: 65536,
            header,
            header_len: 128,
        }
    }

    #[test]
    fn native_layout_and_round_trip() {
        let r = sample();
        let mut buf = [0xffu8; native::LEN];
        r.emit(&mut native::Packet::new_unchecked(&mut buf[..]))
            .unwrap();
        assert_eq!(&buf[0..6], b"DTAA\x01\x00");
        assert_eq!(&buf[6..12], &[1, 0, 3, 0, 128, 0]);
        assert_eq!(&buf[12..16], &[4, 3, 2, 1]);
        assert_eq!(&buf[16..24], &0x7f00_0000_0000u64.to_le_bytes());
        assert_eq!(&buf[24..32], &(4096u64 + 65536).to_le_bytes());
        assert_eq!(&buf[32..40], &0x7f00_0000_1000u64.to_le_bytes());
        assert_eq!(&buf[40..48], &65536u64.to_le_bytes());
        assert_eq!(buf[48], 0x5a);
        assert_eq!(buf.len(), 176);
        let p = native::Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(native::Repr::parse(&p).unwrap(), r);
    }

    #[test]
    fn native_short_header_is_zero_padded() {
        let mut r = sample();
        r.header_len = 10;
        let mut buf = [0xffu8; native::LEN];
        r.emit(&mut native::Packet::new_unchecked(&mut buf[..]))
            .unwrap();
        assert!(buf[58..].iter().all(|&b| b == 0));
        let back = native::Repr::parse(&native::Packet::new_unchecked(&buf[..])).unwrap();
        assert_eq!(back.header_len, 10);
        assert!(back.header[10..].iter().all(|&b| b == 0));
        assert_eq!(back.header_page().len(), 4096);
    }

    #[test]
    fn native_rejects_bad_input() {
        let r = sample();
        let mut buf = [0u8; native::LEN];
        r.emit(&mut native::Packet::new_unchecked(&mut buf[..]))
            .unwrap();
        let parse = |b: &[u8]| native::Repr::parse(&native::Packet::new_unchecked(b));
        assert!(matches!(
            parse(&buf[..native::LEN - 1]),
            Err(AdvertError::Truncated { .. })
        ));
        let mut bad = buf;
        bad[0] = b'X';
        assert!(matches!(parse(&bad), Err(AdvertError::BadMagic(_))));
        let mut bad = buf;
        bad[4] = 2;
        assert_eq!(parse(&bad), Err(AdvertError::BadVersion(2)));
        let mut bad = buf;
        bad[6] = 3; // index 3 of 3
        assert_eq!(
            parse(&bad),
            Err(AdvertError::BadIndex { index: 3, count: 3 })
        );
        let mut bad = buf;
        bad[10] = 129;
        assert_eq!(parse(&bad), Err(AdvertError::BadHeaderLen(129)));
        let mut bad = buf;
        bad[40] = 1; // data_len + 1 now runs past the registration
        assert!(matches!(parse(&bad), Err(AdvertError::DataOutside { .. })));
        // Emit refuses what parse would refuse.
        let mut r2 = sample();
        r2.data_addr = r2.addr - 1;
        assert!(matches!(
            r2.emit(&mut native::Packet::new_unchecked(&mut buf[..])),
            Err(AdvertError::DataOutside { .. })
        ));
        let mut short = [0u8; 100];
        assert!(matches!(
            r.emit(&mut native::Packet::new_unchecked(&mut short[..])),
            Err(AdvertError::Truncated { .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn native_parse_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..260)) {
            let _ = native::Repr::parse(&native::Packet::new_unchecked(&bytes[..]));
            let _ = prototype::Packet::new_checked(&bytes[..]).map(|p| prototype::Repr::parse(&p));
        }
    }
}
