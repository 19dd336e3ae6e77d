//! Deterministic keys, data and postcard values of the load generator.
//!
//! Everything a load-generator run sends is a pure function of the key index `i` (drawn from a
//! [`KeyDist`] seeded by the run's seed), so a test or a benchmark can recompute what it should
//! find in the collector:
//!
//! * **Key bytes** ([`key_bytes`]): a 4-byte key is `i as u32` big-endian (the prototype's
//!   u32 key); a 13-byte key is an IPv4 5-tuple (`src ip, dst ip, src port, dst port, proto`)
//!   with `src ip = 10.0.0.0 | i[0..24]`, `dst ip = 192.168.0.0 | i[24..40]`,
//!   `src port = i[40..56]`, `dst port = 80 + i[56..64]`, `proto = 6` (TCP); any other length
//!   is `i` big-endian, right-aligned (zero-padded on the left, its low bytes when shorter
//!   than 8). Keys are distinct for `i < 256^key_len`.
//! * **Data** ([`fill_data`], [`expected_data`]): `h = fnv1a64(key)`; the data is the
//!   concatenation of the big-endian 8-byte words `splitmix64(h + j)`, `j = 0, 1, ...`, cut to
//!   `data_len` bytes.
//! * **Key-Increment counter** ([`expected_counter`]): `1 + fnv1a64(key) % 16`.
//! * **Postcard values** ([`postcard_value`]): `fmix32(fnv1a64(key) as u32 ^ fnv1a64(key) >> 32
//!   ^ hop · 0x9E3779B9) mod values`, below the store's value set size, so never the blank
//!   value `0xFFFF_FFFF`.
//! * **Append list** ([`append_list`]): `first_list + i % lists`, data as above.

use rand::Rng;
use rand_distr::{Distribution, Zipf};

/// Longest key the native protocol carries.
pub const MAX_KEY_LEN: usize = 16;
/// Longest data the native protocol carries.
pub const MAX_DATA_LEN: usize = 64;

/// FNV-1a, 64 bits (the same function the native hashing scheme applies to keys).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// SplitMix64's output function: a bijective 64-bit mixer.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// MurmurHash3's 32-bit finaliser.
pub fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// Write key `i` of a key space of `out.len()`-byte keys into `out` (see the module doc).
/// `out.len()` must be 1..=16.
pub fn key_bytes(i: u64, out: &mut [u8]) {
    let b = i.to_be_bytes();
    match out.len() {
        4 => out.copy_from_slice(&(i as u32).to_be_bytes()),
        13 => {
            let src = 0x0A00_0000u32 | (i as u32 & 0x00FF_FFFF);
            let dst = 0xC0A8_0000u32 | ((i >> 24) as u32 & 0xFFFF);
            let sport = (i >> 40) as u16;
            let dport = 80u16 + (i >> 56) as u16;
            out[0..4].copy_from_slice(&src.to_be_bytes());
            out[4..8].copy_from_slice(&dst.to_be_bytes());
            out[8..10].copy_from_slice(&sport.to_be_bytes());
            out[10..12].copy_from_slice(&dport.to_be_bytes());
            out[12] = 6;
        }
        n if n < 8 => out.copy_from_slice(&b[8 - n..]),
        n => {
            out[..n - 8].fill(0);
            out[n - 8..].copy_from_slice(&b);
        }
    }
}

/// Key `i` as a `key_len`-byte vector (allocates; for tests and queries).
pub fn key_vec(i: u64, key_len: u8) -> Vec<u8> {
    let mut k = vec![0u8; key_len as usize];
    key_bytes(i, &mut k);
    k
}

/// Fill `out` with the data the load generator sends for `key` (see the module doc).
pub fn fill_data(key: &[u8], out: &mut [u8]) {
    let h = fnv1a64(key);
    for (j, chunk) in out.chunks_mut(8).enumerate() {
        let w = splitmix64(h.wrapping_add(j as u64)).to_be_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// The `data_len` bytes the load generator sends with `key` (Key-Write data, Append entries).
pub fn expected_data(key: &[u8], data_len: u8) -> Vec<u8> {
    let mut d = vec![0u8; data_len as usize];
    fill_data(key, &mut d);
    d
}

/// The counter the load generator adds per Key-Increment report of `key`: `1 + fnv1a64(key) % 16`.
pub fn expected_counter(key: &[u8]) -> u64 {
    1 + fnv1a64(key) % 16
}

/// The value hop `hop` reports for flow `key` (see the module doc), below `values` (the store's
/// value set 0..values); never `0xFFFF_FFFF`, the Postcarding blank value ([DTA §4 "Postcarding",
/// A.2]).
pub fn postcard_value(key: &[u8], hop: u8, values: u32) -> u32 {
    let h = fnv1a64(key);
    let v = fmix32((h as u32) ^ ((h >> 32) as u32) ^ (hop as u32).wrapping_mul(0x9E37_79B9));
    // Below u32::MAX, the blank slot, whatever `values` is.
    v % values.clamp(1, u32::MAX)
}

/// The list key index `i` appends to: `first_list + i % lists` (`lists` ≥ 1).
pub fn append_list(i: u64, first_list: u32, lists: u32) -> u32 {
    first_list.wrapping_add((i % lists.max(1) as u64) as u32)
}

/// How key indices are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KeyDist {
    /// Uniform over `0..n`.
    Uniform {
        /// Key space size.
        n: u64,
    },
    /// Zipf over `0..n` with exponent `s`: key index `r - 1` has rank `r` (key 0 is the most
    /// frequent), probability ∝ `1 / r^s`.
    Zipf {
        /// Key space size.
        n: u64,
        /// Exponent (> 0).
        s: f64,
    },
}

impl KeyDist {
    /// Key space size.
    pub fn n(&self) -> u64 {
        match *self {
            KeyDist::Uniform { n } | KeyDist::Zipf { n, .. } => n,
        }
    }
}

/// A ready-to-sample [`KeyDist`].
#[derive(Debug, Clone)]
pub enum KeySampler {
    /// Uniform over `0..n`.
    Uniform(u64),
    /// Zipf ranks `1..=n`, shifted to indices `0..n`.
    Zipf(Zipf<f64>),
}

/// Why a key distribution cannot be sampled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KeyDistError {
    /// `n` is 0.
    #[error("the key space is empty (n = 0)")]
    Empty,
    /// Zipf exponent not positive and finite.
    #[error("bad Zipf exponent {0}: must be > 0 and finite")]
    BadExponent(f64),
}

impl KeySampler {
    /// Prepare sampling from `dist`.
    pub fn new(dist: KeyDist) -> Result<KeySampler, KeyDistError> {
        match dist {
            KeyDist::Uniform { n: 0 } | KeyDist::Zipf { n: 0, .. } => Err(KeyDistError::Empty),
            KeyDist::Uniform { n } => Ok(KeySampler::Uniform(n)),
            KeyDist::Zipf { n, s } => {
                if !(s > 0.0 && s.is_finite()) {
                    return Err(KeyDistError::BadExponent(s));
                }
                Zipf::new(n, s)
                    .map(KeySampler::Zipf)
                    .map_err(|_| KeyDistError::BadExponent(s))
            }
        }
    }

    /// Draw one key index.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match self {
            KeySampler::Uniform(n) => rng.gen_range(0..*n),
            // Zipf yields ranks 1..=n as floats; clamp guards the float edge.
            KeySampler::Zipf(z) => (z.sample(rng) as u64).clamp(1, u64::MAX) - 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_byte_keys_are_big_endian_u32() {
        assert_eq!(key_vec(0x0102_0304, 4), vec![1, 2, 3, 4]);
        assert_eq!(key_vec(7, 4), vec![0, 0, 0, 7]);
    }

    #[test]
    fn five_tuple_keys() {
        let k = key_vec(0x0000_0123_4567_89AB, 13);
        assert_eq!(&k[0..4], &[10, 0x67, 0x89, 0xAB]);
        assert_eq!(&k[4..8], &[192, 168, 0x23, 0x45]);
        assert_eq!(&k[8..10], &[0, 0x01]);
        assert_eq!(&k[10..12], &80u16.to_be_bytes());
        assert_eq!(k[12], 6);
        // distinct keys for distinct indices
        let a: std::collections::HashSet<Vec<u8>> = (0..5000).map(|i| key_vec(i, 13)).collect();
        assert_eq!(a.len(), 5000);
    }

    #[test]
    fn other_lengths_right_aligned() {
        assert_eq!(key_vec(0x0102, 2), vec![1, 2]);
        assert_eq!(key_vec(0x0102, 10), vec![0, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(
            key_vec(0x0102_0304_0506_0708, 8),
            vec![1, 2, 3, 4, 5, 6, 7, 8]
        );
    }

    #[test]
    fn data_is_a_prefix_stable_function_of_the_key() {
        let k = key_vec(42, 4);
        let d64 = expected_data(&k, 64);
        let d12 = expected_data(&k, 12);
        assert_eq!(&d64[..12], &d12[..]);
        assert_eq!(&d64[..8], &splitmix64(fnv1a64(&k)).to_be_bytes());
        assert_ne!(expected_data(&key_vec(43, 4), 12), d12);
    }

    #[test]
    fn fnv_reference_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn postcard_values_never_blank_and_depend_on_hop() {
        let k = key_vec(9, 13);
        let vals: Vec<u32> = (0..8).map(|h| postcard_value(&k, h, u32::MAX)).collect();
        for w in vals.windows(2) {
            assert_ne!(w[0], w[1]);
        }
        for i in 0..20000 {
            assert_ne!(
                postcard_value(&key_vec(i, 4), (i % 5) as u8, u32::MAX),
                u32::MAX
            );
            assert!(postcard_value(&key_vec(i, 4), (i % 5) as u8, 1 << 18) < 1 << 18);
        }
    }

    #[test]
    fn counters_in_range() {
        for i in 0..100 {
            let c = expected_counter(&key_vec(i, 4));
            assert!((1..=16).contains(&c));
        }
    }

    #[test]
    fn samplers_stay_in_range_and_reject_bad_input() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for d in [KeyDist::Uniform { n: 10 }, KeyDist::Zipf { n: 10, s: 1.2 }] {
            let s = KeySampler::new(d).unwrap();
            for _ in 0..10000 {
                assert!(s.sample(&mut rng) < 10);
            }
        }
        assert_eq!(
            KeySampler::new(KeyDist::Uniform { n: 0 }).unwrap_err(),
            KeyDistError::Empty
        );
        assert!(matches!(
            KeySampler::new(KeyDist::Zipf { n: 5, s: 0.0 }),
            Err(KeyDistError::BadExponent(_))
        ));
    }
}
