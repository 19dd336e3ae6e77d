//! ApproSync end to end ([InvisiFlow §6.1] "Sources"): reporters keep Count-Min sketches with
//! `dta_reporter::ApproSync`, which sends a column whenever a counter diverges; their datagrams
//! reach the translator lost, duplicated and reordered; the Sketch-Merge store of
//! `sync = "approsync"` never counts more than the reporters did, and after a final
//! `sync_all` answers every key exactly as the union of the reporters' sketches.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Instant;

use dta_reporter::{ApproSync, Protocol, Reporter, ReporterConfig};
use dta_store::sketch::CountMin;
use dta_store::{Region, SketchKind, SketchLayout, SketchSpec, SketchSync, StoreSpec};
use dta_translator::{Stats, Translator, TranslatorConfig};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const ROWS: u32 = 3;
const COLUMNS: u32 = 512;
const SKETCH_ID: u16 = 9;
const EPOCH: u32 = 1;

/// A reporter of id `id` sending to `rx`, and its ApproSync sketch.
fn switch(rx: &UdpSocket, id: u32, theta: f64) -> (Reporter, ApproSync) {
    let mut cfg = ReporterConfig::new(
        rx.local_addr().unwrap(),
        Protocol::Native { reporter_id: id },
    );
    // Several switches at once, and nothing sends them control messages.
    cfg.nack_port = None;
    (
        Reporter::new(cfg).unwrap(),
        ApproSync::new(ROWS, COLUMNS, theta, SKETCH_ID, EPOCH).unwrap(),
    )
}

/// Every datagram waiting on `rx`: each sync has flushed before this is called, and a datagram
/// sent on loopback is queued at the receiver when `send` returns.
fn drain(rx: &UdpSocket) -> Vec<(Vec<u8>, SocketAddr)> {
    rx.set_nonblocking(true).unwrap();
    let mut out = vec![];
    let mut buf = [0u8; 65536];
    while let Ok((n, from)) = rx.recv_from(&mut buf) {
        out.push((buf[..n].to_vec(), from));
    }
    out
}

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

#[test]
fn the_store_converges_to_the_union_of_the_reporters_sketches_through_loss_and_reordering() {
    let dir = tempfile::tempdir().unwrap();
    let spec = StoreSpec::SketchMerge(SketchSpec {
        sketch_id: SKETCH_ID,
        kind: SketchKind::CountMin {
            rows: ROWS,
            columns: COLUMNS,
        },
        reporters: 2,
        sync: SketchSync::Approsync,
    });
    let region =
        Arc::new(Region::create(&dir.path().join("cm.region"), "cm", &spec, true).unwrap());
    let layout = SketchLayout::new(region.header()).unwrap();
    let stats = Arc::new(Stats::default());
    let mut t = Translator::colocated(
        &TranslatorConfig::default(),
        vec![region.clone()],
        stats.clone(),
    )
    .unwrap();

    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut switches = [switch(&rx, 1, 0.5), switch(&rx, 2, 0.5)];
    let mut union = CountMin::new(ROWS, COLUMNS);
    let mut rng = rand::rngs::StdRng::seed_from_u64(dta_testkit::test_seed(0xa5));
    let keys = 3000u32;
    let mut delivered = 0usize;
    let mut lost = 0usize;
    for round in 0..40 {
        for _ in 0..500 {
            // Skewed flow sizes: low keys are heavy.
            let k = key(rng.gen_range(0..keys).pow(2) / keys);
            let s = rng.gen_range(0..2);
            let inc = rng.gen_range(1..4);
            switches[s].1.update(&k, inc);
            union.update(&k, inc);
        }
        for (reporter, sketch) in switches.iter_mut() {
            sketch.sync(reporter).unwrap();
            assert_eq!(sketch.due(), 0);
        }
        // The network: a tenth of the datagrams lost, some repeated, all reordered.
        let mut batch = drain(&rx);
        let repeats: Vec<_> = batch
            .iter()
            .filter(|_| rng.gen_bool(0.1))
            .cloned()
            .collect();
        batch.extend(repeats);
        batch.shuffle(&mut rng);
        for (d, from) in batch {
            if rng.gen_bool(0.1) {
                lost += 1;
                continue;
            }
            delivered += 1;
            t.handle_datagram(&d, from, Instant::now());
        }
        // Never more than the reporters counted, whatever was lost or repeated.
        for i in (0..keys).step_by(97) {
            let k = key(i);
            assert!(
                layout.cm_estimate(region.mem(), &k) <= union.estimate(&k),
                "round {round}: key {i} overcounted"
            );
        }
    }
    assert!(lost > 0 && delivered > 0);
    assert!(
        stats.duplicates.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "repeated columns count as duplicates"
    );

    // A final sync of every column heals every loss.
    for (reporter, sketch) in switches.iter_mut() {
        sketch.sync_all(reporter).unwrap();
    }
    for (d, from) in drain(&rx) {
        t.handle_datagram(&d, from, Instant::now());
    }
    for i in 0..keys {
        let k = key(i);
        assert!(layout.cm_key_merged(region.mem(), &k), "key {i} not merged");
        assert_eq!(
            layout.cm_estimate_epoch(region.mem(), &k, EPOCH),
            Some(union.estimate(&k)),
            "key {i}"
        );
    }
    assert_eq!(stats.total_rejected(), 0, "{}", stats.snapshot());
}

#[test]
fn a_second_sync_without_divergence_sends_nothing() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (mut reporter, mut sketch) = switch(&rx, 1, 1.0);
    for i in 0..100u32 {
        sketch.update(&key(i), 1);
    }
    let first = sketch.sync(&mut reporter).unwrap();
    assert!(first > 0 && first <= COLUMNS as usize);
    assert!(!drain(&rx).is_empty());
    assert_eq!(sketch.sync(&mut reporter).unwrap(), 0);
    assert!(drain(&rx).is_empty(), "nothing due, nothing sent");
    assert_eq!(reporter.stats().reports, first as u64);
    // A full resync sends every column, touched or not.
    assert_eq!(sketch.sync_all(&mut reporter).unwrap(), COLUMNS as usize);
    assert_eq!(reporter.stats().reports, first as u64 + COLUMNS as u64);
}
