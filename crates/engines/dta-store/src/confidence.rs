//! How sure an answer is (`docs/regions.md` §5): estimates computed from the region's live
//! counters ([`Tally`]) and its geometry, attached to Key-Write, Postcarding and Key-Increment
//! answers.
//!
//! A store does not know when a queried key was written, only how much was written in total, so
//! the load factor is taken over everything written since the region was created: the estimates
//! are those of the oldest key, an upper bound for any younger one.

use serde::Serialize;

use crate::Tally;

/// Bits of a Key-Write slot check (native and prototype alike: 32).
pub const KEY_WRITE_CHECK_BITS: i32 = 32;

/// How sure a Key-Write or Postcarding answer is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Confidence {
    /// Copies written per cell (slot or chunk): `writes / cells`, i.e. αN of [DTA A.5].
    pub load: f64,
    /// Probability that every one of the key's N copies has been overwritten since it was
    /// written, `(1 − e^{−load})^N`: for an `empty`, how likely the key was written and lost.
    pub p_overwritten: f64,
    /// Probability that a `found` answer is wrong: all N copies overwritten and another key's
    /// copy passes the check ([DTA A.5] return-error upper bound for Key-Write, [DTA A.6] (12)
    /// for Postcarding).
    pub p_wrong: f64,
}

/// The count-min error bound of a Key-Increment answer: with probability at least `1 − delta`
/// the answer exceeds the true count by at most `error = ⌈epsilon · total⌉` (it never
/// underestimates).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CountBound {
    /// Sum of all counter values added to the store.
    pub total: u64,
    /// `e · N / counters`.
    pub epsilon: f64,
    /// `⌈epsilon · total⌉`.
    pub error: u64,
    /// `e^{−N}`.
    pub delta: f64,
}

/// Probability that one given cell of `cells` was written at least once by `writes` writes at
/// uniformly random cells (Poisson approximation, [DTA A.5]).
fn overwritten(writes: u64, cells: u64) -> (f64, f64) {
    let load = writes as f64 / cells.max(1) as f64;
    (load, -(-load).exp_m1())
}

/// Key-Write ([DTA A.5]): `slots` slots, a query over `n` copies, 32-bit checks.
pub fn key_write(tally: Tally, slots: u64, n: u8) -> Confidence {
    let (load, over) = overwritten(tally.writes, slots);
    let all = over.powi(n as i32);
    // 1 − (1 − 2^−b)^N, computed without cancellation.
    let hit = -(n as f64 * (-(2f64.powi(-KEY_WRITE_CHECK_BITS))).ln_1p()).exp_m1();
    Confidence {
        load,
        p_overwritten: all,
        p_wrong: all * hit,
    }
}

/// Bits of a Postcarding chunk check (`postcard::CHUNK_CHECK_LEN` bytes).
pub const POSTCARD_CHECK_BITS: i32 = 32;

/// Postcarding ([DTA A.6]): `chunks` chunks of `hops` slots of `bits` bits, `n` copies, and a
/// query table of `values` distinct values (the blank included, i.e. |V| + 1). A wrong answer
/// needs all N copies overwritten, a foreign chunk whose slots decode to a valid path
/// ([`postcard_slots_valid`]) AND whose 32-bit check matches the queried key (2^−32).
pub fn postcard(
    tally: Tally,
    chunks: u64,
    n: u8,
    hops: usize,
    bits: u8,
    values: usize,
) -> Confidence {
    let (load, over) = overwritten(tally.writes, chunks);
    let all = over.powi(n as i32);
    Confidence {
        load,
        p_overwritten: all,
        p_wrong: all
            * postcard_slots_valid(n, hops, bits, values)
            * 2f64.powi(-POSTCARD_CHECK_BITS),
    }
}

/// [DTA A.6] (12) for a key whose N chunks were all overwritten: the probability that the slots
/// of one of the N foreign chunks decode to a valid path, `N·((|V| + 1)·2^−b)^B` (at most 1). The
/// slot decoder alone (`PostcardingLayout::decode_slots`, without the chunk check) answers
/// wrong this often.
pub fn postcard_slots_valid(n: u8, hops: usize, bits: u8, values: usize) -> f64 {
    // A slot of a foreign chunk decodes to some value with probability (|V| + 1)·2^−b.
    let slot_valid = (values as f64 * 2f64.powi(-(bits as i32))).min(1.0);
    (n as f64 * slot_valid.powi(hops as i32)).min(1.0)
}

/// Key-Increment ([DTA A.4]): the N counters of a key are spread over one array of `counters`.
/// Each holds the key's count plus the others' noise, of mean `N·total/counters`; by Markov the
/// noise of one counter exceeds `e·N·total/counters` with probability at most 1/e, and of all N
/// independent counters (the minimum) with probability at most e^{−N}.
pub fn key_increment(tally: Tally, counters: u64, n: u8) -> CountBound {
    let epsilon = std::f64::consts::E * n as f64 / counters.max(1) as f64;
    CountBound {
        total: tally.added,
        epsilon,
        error: (epsilon * tally.added as f64).ceil() as u64,
        delta: (-(n as f64)).exp(),
    }
}
