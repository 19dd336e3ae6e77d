//! Key-Increment runs checked against the store: every report of every run applied exactly
//! once leaves each key's count at the sum of its counters ([DTA §4] "Key-Increment").
//!
//! A run is what one `dta report --primitive ki` (one sender) sends: `count` keys drawn
//! uniformly from `0..keys` with `seed`, each with the counter
//! `dta_reporter::keys::expected_counter` of its key, as [`dta_reporter::loadgen`] draws
//! them.

use std::collections::BTreeMap;

use serde::Serialize;

use dta_reporter::loadgen::{expected_counter, key_indices, key_vec, KeyDist, LoadSpec};
use dta_wire::Opcode;

/// One reporter run: its seed and its report count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// `dta report --seed`.
    pub seed: u64,
    /// `dta report --count`.
    pub count: u64,
}

impl std::str::FromStr for Run {
    type Err = String;
    /// `SEED:COUNT`.
    fn from_str(s: &str) -> Result<Run, String> {
        let (a, b) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?}: want SEED:COUNT"))?;
        let num = |x: &str| {
            x.parse::<u64>()
                .map_err(|e| format!("{s:?}: {x:?} is not a number ({e})"))
        };
        Ok(Run {
            seed: num(a)?,
            count: num(b)?,
        })
    }
}

/// Every key's expected count after `runs`, keys of `key_len` bytes drawn from `0..keys`.
pub fn expected_ki(runs: &[Run], keys: u64, key_len: u8) -> Result<BTreeMap<Vec<u8>, u64>, String> {
    let mut want = BTreeMap::new();
    for r in runs {
        let mut spec = LoadSpec::new(Opcode::KeyIncrement);
        spec.keys = KeyDist::Uniform { n: keys };
        spec.key_len = key_len;
        spec.seed = r.seed;
        spec.count = Some(r.count);
        for i in key_indices(&spec)
            .map_err(|e| e.to_string())?
            .take(r.count as usize)
        {
            let k = key_vec(i, key_len);
            let c = expected_counter(&k);
            *want.entry(k).or_insert(0) += c;
        }
    }
    Ok(want)
}

/// The comparison of a store with [`expected_ki`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KiCheck {
    /// Keys compared.
    pub keys: u64,
    /// Sum of the expected counts.
    pub expected_total: u64,
    /// Sum of the counts the store answered.
    pub stored_total: u64,
    /// Keys whose count is exactly the expected one.
    pub exact: u64,
    /// Keys counting less (reports lost).
    pub under: u64,
    /// Keys counting more (reports applied twice, or a Count-Min collision).
    pub over: u64,
    /// The first few mismatches of each kind (under first, then over): key (hex), expected,
    /// stored.
    pub mismatches: Vec<(String, u64, u64)>,
}

impl KiCheck {
    /// Whether every key is exact.
    pub fn ok(&self) -> bool {
        self.exact == self.keys
    }
}

/// Most mismatches of each kind listed in a [`KiCheck`].
pub const MAX_LISTED: usize = 10;

/// Compares `want` with the answers of `stored` (a key's count in the store).
pub fn compare<E>(
    want: &BTreeMap<Vec<u8>, u64>,
    mut stored: impl FnMut(&[u8]) -> Result<u64, E>,
) -> Result<KiCheck, E> {
    let mut c = KiCheck::default();
    let mut over = vec![];
    for (k, &w) in want {
        let got = stored(k)?;
        c.keys += 1;
        c.expected_total += w;
        c.stored_total += got;
        match got.cmp(&w) {
            std::cmp::Ordering::Equal => c.exact += 1,
            std::cmp::Ordering::Less => c.under += 1,
            std::cmp::Ordering::Greater => c.over += 1,
        }
        let list = if got < w {
            &mut c.mismatches
        } else {
            &mut over
        };
        if got != w && list.len() < MAX_LISTED {
            let hex: String = k.iter().map(|b| format!("{b:02x}")).collect();
            list.push((hex, w, got));
        }
    }
    c.mismatches.append(&mut over);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_parse_and_refuse_garbage() {
        assert_eq!(
            "3:100".parse::<Run>(),
            Ok(Run {
                seed: 3,
                count: 100
            })
        );
        assert!("3".parse::<Run>().unwrap_err().contains("SEED:COUNT"));
        assert!("x:1".parse::<Run>().unwrap_err().contains("not a number"));
    }

    #[test]
    fn expectations_sum_the_runs_counters() {
        let one = expected_ki(
            &[Run {
                seed: 1,
                count: 500,
            }],
            50,
            4,
        )
        .unwrap();
        let two = expected_ki(
            &[
                Run {
                    seed: 1,
                    count: 500,
                },
                Run {
                    seed: 1,
                    count: 500,
                },
            ],
            50,
            4,
        )
        .unwrap();
        assert!(one.len() <= 50 && !one.is_empty());
        for (k, v) in &one {
            assert_eq!(two[k], 2 * v);
            assert_eq!(
                v % expected_counter(k),
                0,
                "a multiple of the key's counter"
            );
        }
        let total: u64 = one.iter().map(|(k, v)| v / expected_counter(k)).sum();
        assert_eq!(total, 500, "one report per draw");
    }

    #[test]
    fn compare_counts_exact_under_over() {
        let want = expected_ki(
            &[Run {
                seed: 2,
                count: 200,
            }],
            20,
            4,
        )
        .unwrap();
        let first = want.keys().next().unwrap().clone();
        let last = want.keys().last().unwrap().clone();
        let c = compare(&want, |k| -> Result<u64, ()> {
            Ok(if *k == first[..] {
                want[k] - 1
            } else if *k == last[..] {
                want[k] + 5
            } else {
                want[k]
            })
        })
        .unwrap();
        assert_eq!((c.under, c.over, c.exact), (1, 1, want.len() as u64 - 2));
        assert!(!c.ok());
        assert_eq!(c.mismatches.len(), 2);
        assert_eq!(c.stored_total, c.expected_total + 4);
        let ok = compare(&want, |k| -> Result<u64, ()> { Ok(want[k]) }).unwrap();
        assert!(ok.ok());
    }
}
