//! The translator's datagram handler end to end: arbitrary datagrams from arbitrary sources
//! (allowed and not) into `Translator::handle_datagram` over small shared-memory regions of
//! every primitive, with timer ticks in between and a final `flush_all`. Nothing may panic,
//! and every write must land inside its region (the sinks check bounds; a failed write counts
//! as `sink_error`, which a correct translator never produces here).
//!
//! Input: byte 0 picks the prototype header format; then records `[src selector, tick
//! selector, len_hi, len_lo, datagram...]`.

#![no_main]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use dta_store::{
    AppendSpec, HashScheme, KeyIncrementSpec, KeyWriteSpec, PostcardingSpec, Region, SketchKind,
    SketchSpec, StoreSpec,
};
use dta_translator::{PrototypeHeader, Reason, Stats, Translator, TranslatorConfig};
use dta_wire::prefix::AllowList;
use libfuzzer_sys::fuzz_target;

fn regions() -> &'static Vec<Arc<Region>> {
    static R: OnceLock<Vec<Arc<Region>>> = OnceLock::new();
    R.get_or_init(|| {
        let dir: PathBuf =
            std::env::temp_dir().join(format!("dta-fuzz-translator-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let specs = [
            ("kw", StoreSpec::KeyWrite(KeyWriteSpec { slots: 64, key_len: 4, data_len: 4, hash: HashScheme::Prototype, redundancy: 4 })),
            ("kw13", StoreSpec::KeyWrite(KeyWriteSpec { slots: 64, key_len: 13, data_len: 8, hash: HashScheme::Native, redundancy: 4 })),
            ("ki", StoreSpec::KeyIncrement(KeyIncrementSpec { counters: 64, key_len: 4, hash: HashScheme::Native, redundancy: 2, windows: 0, window_ms: 0 })),
            // Time windows: the writer moves between them at its tick.
            ("kiw", StoreSpec::KeyIncrement(KeyIncrementSpec { counters: 64, key_len: 6, hash: HashScheme::Native, redundancy: 2, windows: 2, window_ms: 100 })),
            ("pc", StoreSpec::Postcarding(PostcardingSpec { chunks: 16, hops: 5, slot_bits: 32, redundancy: 2, key_len: 4 })),
            ("ap", StoreSpec::Append(AppendSpec { lists: 3, capacity: 16, entry_len: 4, batch: 4, record: Default::default() })),
            ("cm", StoreSpec::SketchMerge(SketchSpec { sketch_id: 1, kind: SketchKind::CountMin { rows: 2, columns: 4 }, reporters: 2, sync: Default::default() })),
            ("hll", StoreSpec::SketchMerge(SketchSpec { sketch_id: 2, kind: SketchKind::HyperLogLog { registers: 16, registers_per_column: 4 }, reporters: 1, sync: Default::default() })),
        ];
        specs
            .iter()
            .map(|(n, s)| Arc::new(Region::create(&dir.join(n), n, s, true).unwrap()))
            .collect()
    })
}

const SOURCES: [&str; 5] = [
    "127.0.0.1:4000",
    "127.0.0.1:4001",
    "127.0.0.2:4000",
    "[::1]:4000",
    "[::ffff:127.0.0.1]:4000",
];

fuzz_target!(|input: &[u8]| {
    let Some((&fmt, mut rest)) = input.split_first() else {
        return;
    };
    let cfg = TranslatorConfig {
        prototype_header: if fmt & 1 == 0 { PrototypeHeader::Short } else { PrototypeHeader::Long },
        allow: AllowList::new(vec![
            "127.0.0.1/32".parse().unwrap(),
            "::1/128".parse().unwrap(),
        ]),
        postcard_cache_entries: 8,
        nack_interval_ms: 0,
        // The smallest sequence tracker: a translator is built per input, and the default
        // table (12.5 MiB, zeroed) would cost more than the input's work.
        tracker_entries: dta_translator::sequence::MIN_ENTRIES,
        ..TranslatorConfig::default()
    };
    let stats = Arc::new(Stats::default());
    let mut t = Translator::colocated(&cfg, regions().clone(), stats.clone()).unwrap();
    if fmt & 2 != 0 {
        t.set_store_allow("ap", AllowList::new(vec!["127.0.0.1/32".parse().unwrap()])).unwrap();
    }
    let t0 = Instant::now();
    let mut now = t0;
    while rest.len() >= 4 {
        let (src, tick) = (rest[0], rest[1]);
        let len = (u16::from_be_bytes([rest[2], rest[3]]) as usize).min(rest.len() - 4);
        let (d, r) = rest[4..].split_at(len);
        rest = r;
        let src: SocketAddr = SOURCES[src as usize % SOURCES.len()].parse().unwrap();
        t.handle_datagram(d, src, now);
        let _ = t.drain_nacks().count();
        if tick & 0x80 != 0 {
            now += Duration::from_millis((tick & 0x7f) as u64 * 4);
            t.tick(now);
        }
    }
    t.flush_all();
    assert_eq!(stats.rejected_by(Reason::SinkError), 0, "a write outside its region");
});
