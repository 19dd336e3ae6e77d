//! The two hash schemes of `docs/architecture.md` ("Hashing"), the only place they are computed.
//!
//! * **prototype** (0): `slot(key, n) = crc32(key_le ‖ n) & (count-1)`, `checksum(key) =
//!   crc32(key_le)`, where `key_le` is the wire key with its bytes reversed (the 4-byte key as a
//!   little-endian u32). Byte-compatible with the Tofino prototype ([DTA §5.2, A.1]). CRC
//!   is affine, so `slot(key, n) = slot(key, 0) ^ c_n`: the N copies are correlated.
//! * **native** (1): `h = fnv1a64(key)`, `index(key, n) = fmix64(h ^ 0x9E3779B97F4A7C15·(n+1)) &
//!   (count-1)`, `checksum(key) = crc32(key)`.
//!
//! * **xxh3** (2): `(lo, hi) = XXH3-128(key)` (seed 0, the default secret), `index(key, n) =
//!   (lo + n·hi) & (count-1)` (double hashing: the N indices from one hash, [Kirsch-Mitzenmacher
//!   §3]), the Key-Write check's per-key seed `hi`, `checksum(key) = hi >> 32`. One hash of the
//!   key per report where native takes an FNV-1a and N + 1 finalisers.
//!
//! `count` is always a power of two (the layouts validate it); indices are `& (count - 1)`.

use crate::HashScheme;

/// Multiplier that separates the N native index functions (the golden-ratio constant).
pub const NATIVE_SEED: u64 = 0x9E37_79B9_7F4A_7C15;
/// Salt of the Postcarding per-hop checksum (architecture.md "Hashing").
pub const POSTCARD_SALT: u64 = 0xC2B2_AE3D_27D4_EB4F;
/// Salt of the per-key seed of the key+data checks ([`data_check`]): native Key-Write slots
/// (`key_write::KeyTag`) and Postcarding chunks.
pub const SLOT_CHECK_SALT: u64 = 0x1656_67B1_9E37_79F9;
/// The Postcarding blank value ⊔ ([DTA §4]): never a member of V.
pub const BLANK: u32 = 0xFFFF_FFFF;

/// zlib's CRC-32 (IEEE 802.3, reflected, init and final XOR 0xFFFFFFFF).
///
/// Keys (at most [`SHORT`] bytes) take a slice-by-4 table loop inlined into the caller: for a
/// 4-byte key that is four independent table loads, where `crc32fast` (whose SIMD kernel only
/// pays off from 64 bytes) spends more on its call and dispatch than on the bytes. Longer input
/// goes to `crc32fast`. Both give zlib's CRC (tested against each other below).
#[inline]
pub fn crc32(b: &[u8]) -> u32 {
    if b.len() <= SHORT {
        return !crc32_update(!0, b);
    }
    let mut h = hasher();
    h.update(b);
    h.finalize()
}

/// Longest input [`crc32`] hashes with its own table loop.
pub const SHORT: usize = 32;

/// The reflected CRC-32 polynomial.
const POLY: u32 = 0xEDB8_8320;

/// Slice-by-4 tables: `CRC_TABLES[0]` is the classic byte table, `CRC_TABLES[k][i]` the CRC of
/// byte `i` followed by `k` zero bytes.
static CRC_TABLES: [[u32; 256]; 4] = crc_tables();

const fn crc_tables() -> [[u32; 256]; 4] {
    let mut t = [[0u32; 256]; 4];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut k = 1;
        while k < 4 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            k += 1;
        }
        i += 1;
    }
    t
}

/// Run the (pre- and post-inverted by the caller) CRC register `crc` over `b`.
#[inline(always)]
fn crc32_update(mut crc: u32, b: &[u8]) -> u32 {
    let t = &CRC_TABLES;
    let mut chunks = b.chunks_exact(4);
    for c in &mut chunks {
        let x = crc ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        crc = t[3][(x & 0xff) as usize]
            ^ t[2][((x >> 8) & 0xff) as usize]
            ^ t[1][((x >> 16) & 0xff) as usize]
            ^ t[0][(x >> 24) as usize];
    }
    for &x in chunks.remainder() {
        crc = (crc >> 8) ^ t[0][((crc ^ x as u32) & 0xff) as usize];
    }
    crc
}

/// A fresh CRC-32 hasher. `crc32fast::Hasher::new` detects the CPU's features on every call,
/// which costs more than hashing a short key; cloning a hasher made once does not.
#[inline]
fn hasher() -> crc32fast::Hasher {
    static PROTOTYPE: std::sync::OnceLock<crc32fast::Hasher> = std::sync::OnceLock::new();
    PROTOTYPE.get_or_init(crc32fast::Hasher::new).clone()
}

/// FNV-1a's 64-bit offset basis and prime.
const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a.
///
/// The common key lengths (4, 8 and 16 bytes: IPv4 flows, 8-byte ids, 5-tuples) take a loop of
/// known length that the compiler unrolls; the bytes and the order they are folded in are the
/// same, so the hash is the same (tested against the byte loop below).
#[inline(always)]
pub fn fnv1a64(b: &[u8]) -> u64 {
    match b.len() {
        4 => fnv1a64_fixed::<4>(b),
        8 => fnv1a64_fixed::<8>(b),
        16 => fnv1a64_fixed::<16>(b),
        _ => fnv1a64_bytes(FNV_BASIS, b),
    }
}

#[inline(always)]
fn fnv1a64_fixed<const N: usize>(b: &[u8]) -> u64 {
    let mut k = [0u8; N];
    k.copy_from_slice(&b[..N]);
    fnv1a64_bytes(FNV_BASIS, &k)
}

#[inline(always)]
fn fnv1a64_bytes(mut h: u64, b: &[u8]) -> u64 {
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// MurmurHash3's 64-bit finaliser.
#[inline(always)]
pub fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// MurmurHash3's 32-bit finaliser (a bijection on u32).
#[inline]
pub fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// The CRC register after the key with its bytes reversed (the prototype's `key_le`). Keys
/// longer than 16 bytes are cut to 16 (no store accepts them).
#[inline]
fn crc_reversed(key: &[u8]) -> u32 {
    let mut le = [0u8; 16];
    let n = key.len().min(16);
    for (d, s) in le[..n].iter_mut().zip(key[..n].iter().rev()) {
        *d = *s;
    }
    crc32_update(!0, &le[..n])
}

/// Index `n` (0-based copy / row number) of `key` among `count` (a power of two) cells.
/// [DTA A.1] Algorithm 1, `h0(n, K) mod Buflen`.
#[inline]
pub fn index(scheme: HashScheme, key: &[u8], n: u8, count: u64) -> u64 {
    match scheme {
        HashScheme::Prototype => {
            !crc32_update(crc_reversed(key), &[n]) as u64 & count.wrapping_sub(1)
        }
        HashScheme::Native => native_index(fnv1a64(key), n, count),
        HashScheme::Xxh3 => xxh3_index(xxh3_128(key), n, count),
    }
}

/// XXH3-128 of `key` (seed 0, the default secret) as its `(low, high)` 64-bit halves: the xxh3
/// scheme's one hash of a key.
#[inline(always)]
pub fn xxh3_128(key: &[u8]) -> (u64, u64) {
    let h = xxhash_rust::xxh3::xxh3_128(key);
    (h as u64, (h >> 64) as u64)
}

/// The xxh3 index of copy `n` from the key's `(lo, hi)`: `(lo + n·hi) & (count - 1)`.
#[inline(always)]
pub fn xxh3_index((lo, hi): (u64, u64), n: u8, count: u64) -> u64 {
    lo.wrapping_add((n as u64).wrapping_mul(hi)) & count.wrapping_sub(1)
}

/// The native index from a precomputed `h = fnv1a64(key)`.
#[inline(always)]
pub fn native_index(h: u64, n: u8, count: u64) -> u64 {
    fmix64(h ^ NATIVE_SEED.wrapping_mul(n as u64 + 1)) & count.wrapping_sub(1)
}

/// The key checksum stored beside Key-Write data ([DTA A.1], `h1(K)`).
#[inline]
pub fn checksum(scheme: HashScheme, key: &[u8]) -> u32 {
    match scheme {
        HashScheme::Prototype => !crc_reversed(key),
        HashScheme::Native => crc32(key),
        HashScheme::Xxh3 => (xxh3_128(key).1 >> 32) as u32,
    }
}

/// `mask(b)`: the low `bits` bits set (bits in 1..=32).
#[inline]
pub fn mask(bits: u8) -> u32 {
    if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    }
}

/// Postcarding's per-hop checksum `checksum(x, i)` ([DTA §4] "Postcarding"), `b` bits, from
/// `h = fnv1a64(key)`.
#[inline]
pub fn postcard_checksum(h: u64, hop: u8, bits: u8) -> u32 {
    (fmix64(h ^ POSTCARD_SALT ^ hop as u64) as u32) & mask(bits)
}

/// Postcarding's value hash `g(v)` ([DTA §4]), `b` bits.
#[inline]
pub fn postcard_g(v: u32, bits: u8) -> u32 {
    fmix32(v) & mask(bits)
}

/// The per-key seed of [`data_check`], from `h = fnv1a64(key)`.
#[inline(always)]
pub fn check_seed(h: u64) -> u64 {
    fmix64(h ^ SLOT_CHECK_SALT)
}

/// The check over key and data of a native Key-Write slot or a Postcarding chunk: the key's
/// `seed` ([`check_seed`]), then each 8-byte LE word of the data folded in by a multiply-rotate
/// step, finalised by fmix64 and folded to 32 bits. Each step is a bijection of the state for a
/// fixed word, so two data that differ in one word always differ before the final fold; data torn
/// between two writes of the same key therefore match their stored check with probability about
/// 2^-32, and so does another key's data.
#[inline(always)]
pub fn data_check(seed: u64, words: &[u64]) -> u32 {
    let mut h = seed;
    for &w in words {
        h = (h ^ w).wrapping_mul(NATIVE_SEED).rotate_left(29);
    }
    let h = fmix64(h);
    (h ^ (h >> 32)) as u32
}

/// The 64-bit hash HyperLogLog uses for a key: `fmix64(fnv1a64(key))`.
#[inline]
pub fn hll_hash(key: &[u8]) -> u64 {
    fmix64(fnv1a64(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(fmix64(0), 0);
        assert_eq!(fmix32(0), 0);
    }

    #[test]
    fn short_crc_matches_crc32fast() {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut buf = [0u8; 80];
        for len in 0..buf.len() {
            for _ in 0..50 {
                for b in buf.iter_mut() {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    *b = x as u8;
                }
                let mut h = crc32fast::Hasher::new();
                h.update(&buf[..len]);
                assert_eq!(crc32(&buf[..len]), h.finalize(), "length {len}");
                assert_eq!(!crc32_update(!0, &buf[..len]), crc32(&buf[..len]));
            }
        }
    }

    /// The fixed-length FNV-1a paths give the byte loop's hash at every length around them.
    #[test]
    fn fnv1a64_fast_lengths_equal_the_byte_loop() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut buf = [0u8; 40];
        for len in 0..buf.len() {
            for _ in 0..100 {
                for b in buf.iter_mut() {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    *b = x as u8;
                }
                let mut want = 0xcbf2_9ce4_8422_2325u64;
                for &b in &buf[..len] {
                    want = (want ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
                }
                assert_eq!(fnv1a64(&buf[..len]), want, "length {len}");
            }
        }
    }

    #[test]
    fn prototype_reverses_the_key() {
        let key = [0x0A, 0x00, 0x00, 0x01];
        assert_eq!(
            checksum(HashScheme::Prototype, &key),
            crc32(&[0x01, 0x00, 0x00, 0x0A])
        );
        assert_eq!(
            index(HashScheme::Prototype, &key, 3, 1 << 30),
            (crc32(&[0x01, 0x00, 0x00, 0x0A, 3]) & ((1 << 30) - 1)) as u64
        );
    }
}
