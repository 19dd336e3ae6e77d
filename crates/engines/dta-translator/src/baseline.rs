//! The conventional CPU collector DTA is compared with ([DTA §6] "Cuckoo", [DTA §6.1] Fig. 7):
//! the collector's CPU parses every report and inserts it into a hash map keyed by flow (Key-Write:
//! the latest data; Key-Increment: the running sum) or pushes it onto a per-list ring (Append).
//! [`collect`] parses a datagram and hands each report to a [`Conventional`] store: a plain
//! `hashbrown::HashMap<[u8; K], [u8; D]>` (Key-Write only, the benchmark suite's `cuckoo`
//! comparison) or a [`HashMapCollector`] (every keyed primitive and Append, the Marple
//! comparison of `dta-systems`' Fig. 7b benchmark). Benchmarks only: the translator never uses it.

use dta_wire::{Datagram, Report};

/// A conventional collector's store: what it does with each parsed report.
pub trait Conventional {
    /// Store one report.
    fn insert(&mut self, report: &Report<'_>);
}

impl<const K: usize, const D: usize> Conventional for hashbrown::HashMap<[u8; K], [u8; D]> {
    fn insert(&mut self, report: &Report<'_>) {
        if let Report::KeyWrite { key, data, .. } = report {
            if let (Ok(k), Ok(v)) = ((*key).try_into(), (*data).try_into()) {
                hashbrown::HashMap::insert(self, k, v);
            }
        }
    }
}

/// Parse a native datagram and insert each of its reports into `store`; the reports parsed.
pub fn collect(datagram: &[u8], store: &mut impl Conventional) -> usize {
    let mut n = 0;
    if let Ok(Datagram::Native(dg)) =
        dta_wire::parse(datagram, dta_wire::prototype::BaseFormat::Short)
    {
        for r in dg.reports() {
            store.insert(&r);
            n += 1;
        }
    }
    n
}

/// Bytes of a key or a Key-Write value the collector keeps inline (the wire's longest key).
const INLINE: usize = 16;

/// A key (or value) of up to [`INLINE`] bytes, zero padded, with its length.
type Inline = (u8, [u8; INLINE]);

fn inline(b: &[u8]) -> Inline {
    let mut a = [0u8; INLINE];
    let n = b.len().min(INLINE);
    a[..n].copy_from_slice(&b[..n]);
    (n as u8, a)
}

/// A conventional collector of every primitive but Postcarding and Sketch-Merge: Key-Write and
/// Key-Increment in hash maps keyed by the report's key, Append entries in one ring of
/// `capacity` entries per list (the oldest overwritten), as a CPU collector keeping the same
/// data as the DTA stores would.
pub struct HashMapCollector {
    /// Key-Write: the latest value per key (values longer than 16 bytes are cut).
    pub key_write: hashbrown::HashMap<Inline, Inline>,
    /// Key-Increment: the sum per key.
    pub key_increment: hashbrown::HashMap<Inline, u64>,
    lists: Vec<Vec<u8>>,
    heads: Vec<u64>,
    entry_len: usize,
    capacity: usize,
}

impl HashMapCollector {
    /// A collector of `lists` Append lists of `capacity` entries of `entry_len` bytes, its maps
    /// reserved for `keys` keys (allocated up front, like the store's memory).
    pub fn new(keys: usize, lists: u32, capacity: usize, entry_len: usize) -> HashMapCollector {
        HashMapCollector {
            key_write: hashbrown::HashMap::with_capacity(keys),
            key_increment: hashbrown::HashMap::with_capacity(keys),
            lists: (0..lists)
                .map(|_| vec![0u8; capacity * entry_len])
                .collect(),
            heads: vec![0; lists as usize],
            entry_len,
            capacity: capacity.max(1),
        }
    }

    /// Entries ever appended to `list`.
    pub fn appended(&self, list: u32) -> u64 {
        self.heads.get(list as usize).copied().unwrap_or(0)
    }
}

impl Conventional for HashMapCollector {
    fn insert(&mut self, report: &Report<'_>) {
        match *report {
            Report::KeyWrite { key, data, .. } => {
                self.key_write.insert(inline(key), inline(data));
            }
            Report::KeyIncrement { key, counter, .. } => {
                let c = self.key_increment.entry(inline(key)).or_insert(0);
                *c = c.wrapping_add(counter);
            }
            Report::Append { list_id, data, .. } => {
                if let (Some(l), Some(h)) = (
                    self.lists.get_mut(list_id as usize),
                    self.heads.get_mut(list_id as usize),
                ) {
                    let at = (*h as usize % self.capacity) * self.entry_len;
                    let n = data.len().min(self.entry_len);
                    l[at..at + n].copy_from_slice(&data[..n]);
                    *h += 1;
                }
            }
            Report::Postcard { .. } | Report::SketchColumn { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dta_wire::native::DatagramBuilder;
    use dta_wire::Priority;

    #[test]
    fn every_report_lands_where_a_query_would_look() {
        let mut buf = [0u8; 1500];
        let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 1, 0).unwrap();
        let rs = [
            Report::KeyWrite {
                key: &[1, 2, 3, 4],
                data: &[5, 6, 7, 8],
                redundancy: 2,
                immediate: false,
            },
            Report::KeyIncrement {
                key: &[9; 5],
                counter: 3,
                redundancy: 2,
                immediate: false,
            },
            Report::KeyIncrement {
                key: &[9; 5],
                counter: 4,
                redundancy: 2,
                immediate: false,
            },
            Report::Append {
                list_id: 1,
                data: &[7; 8],
                immediate: false,
            },
        ];
        for r in &rs {
            b.push(r).unwrap();
        }
        let n = b.finish();
        let mut c = HashMapCollector::new(16, 2, 4, 8);
        assert_eq!(collect(&buf[..n], &mut c), 4);
        assert_eq!(c.key_write[&inline(&[1, 2, 3, 4])], inline(&[5, 6, 7, 8]));
        assert_eq!(c.key_increment[&inline(&[9; 5])], 7);
        assert_eq!((c.appended(0), c.appended(1)), (0, 1));
        let mut m = hashbrown::HashMap::<[u8; 4], [u8; 4]>::new();
        assert_eq!(collect(&buf[..n], &mut m), 4);
        assert_eq!(m[&[1, 2, 3, 4]], [5, 6, 7, 8]);
        assert_eq!(collect(&[0u8; 3], &mut m), 0);
    }
}
