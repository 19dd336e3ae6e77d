//! Shared fixtures: a region directory with one store of each primitive and a translator over it.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use dta_store::{
    AppendSpec, HashScheme, KeyIncrementSpec, KeyWriteSpec, PostcardingSpec, Region, SketchKind,
    SketchSpec, StoreSpec, DEFAULT_REDUNDANCY, MAX_REDUNDANCY,
};
use dta_translator::{RegionSinks, Stats, Translator, TranslatorConfig};

pub fn specs() -> Vec<(&'static str, StoreSpec)> {
    vec![
        (
            "kw",
            StoreSpec::KeyWrite(KeyWriteSpec {
                slots: 1 << 12,
                key_len: 4,
                data_len: 4,
                hash: HashScheme::Prototype,
                redundancy: MAX_REDUNDANCY,
            }),
        ),
        (
            "flows",
            StoreSpec::KeyWrite(KeyWriteSpec {
                slots: 1 << 12,
                key_len: 13,
                data_len: 8,
                hash: HashScheme::Native,
                redundancy: MAX_REDUNDANCY,
            }),
        ),
        (
            "ki",
            StoreSpec::KeyIncrement(KeyIncrementSpec {
                counters: 1 << 12,
                key_len: 4,
                hash: HashScheme::Native,
                redundancy: DEFAULT_REDUNDANCY,
                windows: 0,
                window_ms: 0,
            }),
        ),
        (
            "paths",
            StoreSpec::Postcarding(PostcardingSpec {
                chunks: 1 << 10,
                hops: 5,
                slot_bits: 32,
                redundancy: 2,
                key_len: 4,
            }),
        ),
        (
            "events",
            StoreSpec::Append(AppendSpec {
                lists: 4,
                capacity: 256,
                entry_len: 4,
                batch: 4,
                record: Default::default(),
            }),
        ),
        (
            "cm",
            StoreSpec::SketchMerge(SketchSpec {
                sketch_id: 1,
                kind: SketchKind::CountMin {
                    rows: 2,
                    columns: 8,
                },
                reporters: 2,
                sync: Default::default(),
            }),
        ),
    ]
}

pub fn regions(dir: &Path) -> Vec<Arc<Region>> {
    specs()
        .iter()
        .map(|(name, spec)| {
            Arc::new(Region::create(&dir.join(format!("{name}.region")), name, spec, true).unwrap())
        })
        .collect()
}

pub fn translator(regions: &[Arc<Region>]) -> Translator<RegionSinks> {
    Translator::colocated(
        &TranslatorConfig::default(),
        regions.to_vec(),
        Arc::new(Stats::default()),
    )
    .unwrap()
}

pub fn src() -> SocketAddr {
    "127.0.0.1:5555".parse().unwrap()
}
