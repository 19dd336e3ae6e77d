//! Fixtures for the engine's unit tests: stores of every primitive described by headers only,
//! and sinks that keep each store's data area in memory and can be made to fail.

use std::net::SocketAddr;
use std::sync::Arc;

use dta_store::{
    AppendSpec, HashScheme, Header, KeyIncrementSpec, KeyWriteSpec, PostcardingSpec, SinkError,
    SketchKind, SketchSpec, StoreSpec,
};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Priority, Report};

use super::{StoreInfo, Translator};
use crate::config::TranslatorConfig;
use crate::sinks::Sinks;
use crate::stats::Stats;

/// Each store's data area in memory; `fail` makes every operation fail.
pub(super) struct Mem {
    pub areas: Vec<Vec<u8>>,
    pub fail: bool,
    /// Each store's live counters (writes, added), as [`Sinks::count`] added them.
    pub tally: Vec<(u64, u64)>,
    /// Every FETCH_ADD's addend, in the order issued.
    pub adds: Vec<u64>,
    /// Congestion signals [`Sinks::congestion`] returns (and clears).
    pub signals: crate::sinks::Congestion,
}

impl Sinks for Mem {
    fn write(&mut self, store: usize, off: u64, bytes: &[u8], _: bool) -> Result<(), SinkError> {
        if self.fail {
            return Err(SinkError::ReadOnly);
        }
        let a = &mut self.areas[store];
        let end = off as usize + bytes.len();
        a.get_mut(off as usize..end)
            .ok_or(SinkError::OutOfBounds {
                offset: off,
                len: bytes.len() as u64,
            })?
            .copy_from_slice(bytes);
        Ok(())
    }

    fn fetch_add(&mut self, store: usize, off: u64, add: u64) -> Result<(), SinkError> {
        if self.fail {
            return Err(SinkError::ReadOnly);
        }
        let w = &mut self.areas[store][off as usize..off as usize + 8];
        let v = u64::from_le_bytes((&*w).try_into().unwrap()).wrapping_add(add);
        w.copy_from_slice(&v.to_le_bytes());
        self.adds.push(add);
        Ok(())
    }

    fn congestion(&mut self) -> crate::sinks::Congestion {
        std::mem::take(&mut self.signals)
    }

    fn count(&mut self, store: usize, writes: u64, added: u64) -> Result<(), SinkError> {
        if self.fail {
            return Err(SinkError::ReadOnly);
        }
        if self.tally.len() <= store {
            self.tally.resize(store + 1, (0, 0));
        }
        self.tally[store].0 += writes;
        self.tally[store].1 += added;
        Ok(())
    }
}

/// Store indices in [`specs`].
pub(super) const KW: usize = 0;
pub(super) const KI: usize = 1;
pub(super) const PC: usize = 2;
pub(super) const AP: usize = 3;
pub(super) const SK: usize = 4;

pub(super) fn specs() -> Vec<(&'static str, StoreSpec)> {
    vec![
        (
            "kw",
            StoreSpec::KeyWrite(KeyWriteSpec {
                slots: 256,
                key_len: 4,
                data_len: 4,
                hash: HashScheme::Native,
                redundancy: dta_store::MAX_REDUNDANCY,
            }),
        ),
        (
            "ki",
            StoreSpec::KeyIncrement(KeyIncrementSpec {
                counters: 256,
                key_len: 4,
                hash: HashScheme::Native,
                redundancy: dta_store::DEFAULT_REDUNDANCY,
                windows: 0,
                window_ms: 0,
            }),
        ),
        (
            "pc",
            StoreSpec::Postcarding(PostcardingSpec {
                chunks: 64,
                hops: 2,
                slot_bits: 32,
                redundancy: 1,
                key_len: 4,
            }),
        ),
        (
            "ap",
            StoreSpec::Append(AppendSpec {
                lists: 2,
                capacity: 64,
                entry_len: 4,
                batch: 4,
                record: Default::default(),
            }),
        ),
        (
            "sk",
            StoreSpec::SketchMerge(SketchSpec {
                sketch_id: 7,
                kind: SketchKind::CountMin {
                    rows: 1,
                    columns: 4,
                },
                reporters: 1,
                sync: Default::default(),
            }),
        ),
    ]
}

pub(super) fn infos() -> Vec<StoreInfo> {
    specs()
        .iter()
        .map(|(n, s)| StoreInfo {
            header: Header::new(n, s).unwrap(),
            append_heads: vec![],
        })
        .collect()
}

pub(super) fn translator_with(cfg: &TranslatorConfig) -> Translator<Mem> {
    let infos = infos();
    let areas = infos
        .iter()
        .map(|i| vec![0u8; i.header.data_len as usize])
        .collect();
    Translator::new(
        cfg,
        &infos,
        Mem {
            areas,
            fail: false,
            tally: vec![],
            adds: vec![],
            signals: Default::default(),
        },
        Arc::new(Stats::default()),
    )
    .unwrap()
}

pub(super) fn translator() -> Translator<Mem> {
    translator_with(&TranslatorConfig::default())
}

pub(super) fn src() -> SocketAddr {
    "127.0.0.1:4000".parse().unwrap()
}

/// A native medium-priority datagram of `reports`.
pub(super) fn datagram(
    retransmit: bool,
    reporter: u32,
    seq: u32,
    reports: &[Report<'_>],
) -> Vec<u8> {
    datagram_at(Priority::Medium, retransmit, reporter, seq, reports)
}

/// A native datagram of `reports` at `priority`.
pub(super) fn datagram_at(
    priority: Priority,
    retransmit: bool,
    reporter: u32,
    seq: u32,
    reports: &[Report<'_>],
) -> Vec<u8> {
    let mut buf = vec![0u8; 1500];
    let mut b = DatagramBuilder::new(&mut buf, priority, retransmit, reporter, seq).unwrap();
    for r in reports {
        b.push(r).unwrap();
    }
    let n = b.finish();
    buf.truncate(n);
    buf
}
