//! Reporter-side sketch builders ([DTA-draft §3.1] "Sketch-Merge"): a Count-Min sketch and a
//! HyperLogLog
//! that hash exactly like the Sketch-Merge store, so the collector can query the merged sketch
//! with the same keys. Count-Min row r of key k is column `hash::index(Native, k, r, columns)`;
//! HyperLogLog hashes a key as `hash::hll_hash(k)`, takes the top p bits as the register and the
//! rank of the rest. Columns are what a reporter sends: CM column c = the `rows` counters of
//! column c; HLL column c = registers `c·per_column .. (c+1)·per_column`.

use crate::hash;
use crate::HashScheme;

/// A Count-Min sketch of u32 counters (the wire width).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountMin {
    rows: u32,
    columns: u32,
    /// Column-major: counter (r, c) at `c·rows + r`.
    counters: Vec<u32>,
}

impl CountMin {
    /// `columns` must be a power of two.
    pub fn new(rows: u32, columns: u32) -> Self {
        assert!(columns.is_power_of_two(), "columns must be a power of two");
        assert!((1..=255).contains(&rows), "rows must be 1..=255");
        CountMin {
            rows,
            columns,
            counters: vec![0; rows as usize * columns as usize],
        }
    }

    pub fn rows(&self) -> u32 {
        self.rows
    }
    pub fn columns(&self) -> u32 {
        self.columns
    }

    /// The column key `key` uses in row `row`.
    #[inline]
    pub fn column_of(&self, key: &[u8], row: u32) -> u32 {
        hash::index(HashScheme::Native, key, row as u8, self.columns as u64) as u32
    }

    /// Add `inc` to the key's counter in every row (saturating).
    pub fn update(&mut self, key: &[u8], inc: u32) {
        for r in 0..self.rows {
            let c = self.column_of(key, r);
            self.add(r, c, inc);
        }
    }

    /// Add `inc` to the counter of row `row`, column `c` (saturating); its new value. For a
    /// caller that has the key's column already ([`CountMin::column_of`]).
    #[inline]
    pub fn add(&mut self, row: u32, c: u32, inc: u32) -> u32 {
        let x = &mut self.counters[(c * self.rows + row) as usize];
        *x = x.saturating_add(inc);
        *x
    }

    /// The counters of column `c`, row 0 first.
    pub fn column(&self, c: u32) -> Vec<u32> {
        self.column_counters(c).to_vec()
    }

    /// The counters of column `c`, row 0 first, borrowed.
    pub fn column_counters(&self, c: u32) -> &[u32] {
        let at = (c * self.rows) as usize;
        &self.counters[at..at + self.rows as usize]
    }

    /// Column `c` as sent on the wire: `rows` big-endian u32 counters.
    pub fn column_wire(&self, c: u32, out: &mut [u8]) {
        for (o, v) in out.chunks_exact_mut(4).zip(self.column_counters(c)) {
            o.copy_from_slice(&v.to_be_bytes());
        }
    }

    /// The Count-Min estimate: the minimum over rows.
    pub fn estimate(&self, key: &[u8]) -> u64 {
        (0..self.rows)
            .map(|r| self.counters[(self.column_of(key, r) * self.rows + r) as usize] as u64)
            .min()
            .unwrap_or(0)
    }
}

/// A HyperLogLog of `registers` (a power of two, >= 16) u8 registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HyperLogLog {
    p: u32,
    registers: Vec<u8>,
}

impl HyperLogLog {
    pub fn new(registers: u32) -> Self {
        assert!(
            registers.is_power_of_two() && registers >= 16,
            "registers must be a power of two >= 16"
        );
        HyperLogLog {
            p: registers.trailing_zeros(),
            registers: vec![0; registers as usize],
        }
    }

    /// Register index and rank of a key (Flajolet et al.; 64-bit hash).
    #[inline]
    pub fn position(p: u32, key: &[u8]) -> (usize, u8) {
        let x = hash::hll_hash(key);
        let idx = (x >> (64 - p)) as usize;
        let w = x << p;
        let rank = (w.leading_zeros() + 1).min(64 - p + 1);
        (idx, rank as u8)
    }

    pub fn insert(&mut self, key: &[u8]) {
        let (i, r) = Self::position(self.p, key);
        if self.registers[i] < r {
            self.registers[i] = r;
        }
    }

    /// Registers of column `c` when a column holds `per_column` registers.
    pub fn column(&self, c: u32, per_column: u32) -> &[u8] {
        let at = (c * per_column) as usize;
        &self.registers[at..at + per_column as usize]
    }

    pub fn registers(&self) -> &[u8] {
        &self.registers
    }

    /// Register-wise max with another sketch of the same size.
    pub fn merge(&mut self, other: &HyperLogLog) {
        for (a, &b) in self.registers.iter_mut().zip(&other.registers) {
            *a = (*a).max(b);
        }
    }

    pub fn cardinality(&self) -> f64 {
        hll_estimate(&self.registers)
    }
}

/// The HyperLogLog estimate of a register array (with the small-range linear-counting
/// correction; a 64-bit hash needs no large-range one).
pub fn hll_estimate(registers: &[u8]) -> f64 {
    let m = registers.len() as f64;
    if registers.is_empty() {
        return 0.0;
    }
    let alpha = match registers.len() {
        16 => 0.673,
        32 => 0.697,
        64 => 0.709,
        _ => 0.7213 / (1.0 + 1.079 / m),
    };
    let sum: f64 = registers.iter().map(|&r| (-(r as f64)).exp2()).sum();
    let e = alpha * m * m / sum;
    let zeros = registers.iter().filter(|&&r| r == 0).count();
    if e <= 2.5 * m && zeros > 0 {
        m * (m / zeros as f64).ln()
    } else {
        e
    }
}
