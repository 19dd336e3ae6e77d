//! Shared test set-up: the embedded configuration's stores, a responder on a thread, the same
//! reports fed to a RoCE translator and to a co-located reference translator.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dta_collector::{Collector, StoreConfig};
use dta_rdma::{Endpoint, Link};
use dta_rdma_responder::{Responder, ResponderConfig, ResponderStats};
use dta_translator::{Sinks, Stats, Translator, TranslatorConfig};
use dta_wire::Report;

#[derive(serde::Deserialize)]
struct Cfg {
    #[serde(default)]
    translator: TranslatorConfig,
    #[serde(default)]
    store: Vec<StoreConfig>,
}

/// The translator configuration and the stores of `examples/dta.toml`.
pub fn embedded() -> (TranslatorConfig, Vec<StoreConfig>) {
    let text = include_str!("../../../../../examples/dta.toml");
    let v: toml::Table = toml::from_str(text).unwrap();
    let mut t = toml::Table::new();
    for k in ["translator", "store"] {
        if let Some(x) = v.get(k) {
            t.insert(k.into(), x.clone());
        }
    }
    let c: Cfg = toml::Value::Table(t).try_into().unwrap();
    (c.translator, c.store)
}

/// The translator's end of the in-memory link.
pub const T: Endpoint = Endpoint {
    mac: [2, 0, 0, 0, 0, 1],
    ip: [10, 0, 0, 1],
};

/// The collector's end of the in-memory link.
pub const C: Endpoint = Endpoint {
    mac: [2, 0, 0, 0, 0, 2],
    ip: [10, 0, 0, 2],
};

pub struct Running {
    pub stop: Arc<AtomicBool>,
    pub handle: Option<JoinHandle<()>>,
    pub stats: Arc<ResponderStats>,
    pub notes: std::sync::mpsc::Receiver<dta_rdma_responder::Notification>,
    pub registrations: Vec<(u64, u64, u32)>,
    /// The collector directory's notification ring the responder announces on, and a cursor
    /// from its start.
    pub ring: Arc<dta_store::notify::NotifyRing>,
    pub cursor: dta_store::notify::Cursor,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Start a responder over `link` serving `collector`'s regions.
pub fn serve<L: Link + Send + 'static>(
    link: L,
    cfg: ResponderConfig,
    collector: &Collector,
) -> Running {
    let mut r = Responder::new(link, cfg, collector.regions());
    let stats = r.stats().clone();
    let notes = r.subscribe();
    let ring = Arc::new(
        dta_store::notify::NotifyRing::open_or_create(
            collector.dir(),
            dta_store::notify::DEFAULT_CAPACITY,
        )
        .unwrap(),
    );
    let cursor = ring.subscribe();
    r.set_ring(ring.clone());
    let registrations = (0..collector.regions().len())
        .map(|i| r.registration(i).unwrap())
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let handle = std::thread::spawn(move || r.run(&s).unwrap());
    Running {
        stop,
        handle: Some(handle),
        stats,
        notes,
        registrations,
        ring,
        cursor,
    }
}

/// A fresh collector in `dir`.
pub fn collector(dir: &Path, stores: &[StoreConfig]) -> Collector {
    Collector::create(dir, stores, true).unwrap()
}

/// Key-Write (two stores), Key-Increment, Postcarding, Append and Sketch-Merge reports for `n`
/// flows; some immediate. Returns the exact Key-Increment sums per key.
pub fn feed<S: Sinks>(t: &mut Translator<S>, n: u32, start: Instant) -> Vec<(u32, u64)> {
    let src: SocketAddr = "127.9.0.1:5000".parse().unwrap();
    let mut sums = vec![0u64; 500];
    for i in 0..n {
        let now = start + Duration::from_micros(u64::from(i) * 50);
        let key = (1_000_000 + i).to_be_bytes();
        let data = i.wrapping_mul(2_654_435_761).to_be_bytes();
        let r = Report::KeyWrite {
            key: &key,
            data: &data,
            redundancy: 2,
            immediate: i % 50 == 0,
        };
        t.apply(&r, 1, src, now);
        let mut flow = [0u8; 13];
        flow[..4].copy_from_slice(&i.to_be_bytes());
        flow[12] = 6;
        let fd = (u64::from(i) * 1_000_003).to_be_bytes();
        t.apply(
            &Report::KeyWrite {
                key: &flow,
                data: &fd,
                redundancy: 1,
                immediate: false,
            },
            1,
            src,
            now,
        );
        let k = i % 500;
        let add = u64::from(i % 7 + 1);
        sums[k as usize] += add;
        let kk = (2_000_000 + k).to_be_bytes();
        t.apply(
            &Report::KeyIncrement {
                key: &kk,
                counter: add,
                redundancy: 2,
                immediate: false,
            },
            1,
            src,
            now,
        );
        let pk = (3_000_000 + i).to_be_bytes();
        let len = 1 + (i % 5) as u8;
        for hop in 0..len {
            let v = (i.wrapping_mul(31) + u32::from(hop) * 7919) % (1 << 18);
            t.apply(
                &Report::Postcard {
                    key: &pk,
                    hop,
                    path_len: len,
                    value: v,
                    immediate: false,
                },
                1,
                src,
                now,
            );
        }
        t.apply(
            &Report::Append {
                list_id: i % 16,
                data: &i.to_be_bytes(),
                immediate: i % 97 == 0,
            },
            1,
            src,
            now,
        );
        t.tick(now);
    }
    // Sketch-Merge: two reporters, every Count-Min column (4 rows of u32) and HLL column.
    for (rep, port) in [(11u32, 6000u16), (12, 6001)] {
        let from: SocketAddr = SocketAddr::new("127.9.0.2".parse().unwrap(), port);
        for c in 0..1024u16 {
            let mut d = [0u8; 16];
            for row in 0..4 {
                d[row * 4..row * 4 + 4]
                    .copy_from_slice(&(u32::from(c) * (row as u32 + 1) + rep).to_be_bytes());
            }
            t.apply(
                &Report::SketchColumn {
                    sketch_id: 1,
                    column: c,
                    epoch: 1,
                    data: &d,
                    immediate: false,
                },
                rep,
                from,
                start,
            );
        }
        for c in 0..64u16 {
            let d: Vec<u8> = (0..64)
                .map(|j| ((c as u32 * 7 + j + rep) % 23) as u8)
                .collect();
            t.apply(
                &Report::SketchColumn {
                    sketch_id: 2,
                    column: c,
                    epoch: 1,
                    data: &d,
                    immediate: false,
                },
                rep,
                from,
                start,
            );
        }
    }
    t.flush_all();
    sums.into_iter()
        .enumerate()
        .map(|(k, s)| (2_000_000 + k as u32, s))
        .collect()
}

/// Byte-compare every store's data area.
pub fn assert_same_regions(a: &Collector, b: &Collector) {
    for (sa, sb) in a.stores().iter().zip(b.stores()) {
        let (ma, mb) = (sa.region.mem(), sb.region.mem());
        assert_eq!(ma.len(), mb.len());
        let mut off = 0u64;
        let mut ba = vec![0u8; 1 << 20];
        let mut bb = vec![0u8; 1 << 20];
        while off < ma.len() {
            let n = (ma.len() - off).min(1 << 20) as usize;
            ma.read(off, &mut ba[..n]).unwrap();
            mb.read(off, &mut bb[..n]).unwrap();
            if ba[..n] != bb[..n] {
                let i = (0..n).find(|&i| ba[i] != bb[i]).unwrap();
                panic!(
                    "store {}: first difference at data offset {}",
                    sa.name,
                    off + i as u64
                );
            }
            off += n as u64;
        }
    }
}

pub fn new_stats() -> Arc<Stats> {
    Arc::new(Stats::default())
}
