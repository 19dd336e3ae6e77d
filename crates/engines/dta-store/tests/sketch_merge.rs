//! Sketch-Merge ([DTA-draft §3.1, §4.2]): the merged Count-Min of several reporters equals the
//! Count-Min of the union stream; the merged HyperLogLog estimates the union's cardinality.

use dta_store::sketch::{CountMin, HyperLogLog};
use dta_store::{ApplyError, Region, SketchKind, SketchLayout, SketchSpec, StoreSpec};
use rand::{Rng, SeedableRng};

fn key(i: u64) -> [u8; 8] {
    dta_store::hash::fmix64(i ^ 0x5151).to_le_bytes()
}

#[test]
fn merged_count_min_equals_union() {
    let dir = tempfile::tempdir().unwrap();
    let (rows, columns, reporters) = (4u32, 1024u32, 5u32);
    let spec = StoreSpec::SketchMerge(SketchSpec {
        sketch_id: 3,
        kind: SketchKind::CountMin { rows, columns },
        reporters,
        sync: Default::default(),
    });
    let r = Region::create(&dir.path().join("cm"), "cm", &spec, false).unwrap();
    let l = SketchLayout::new(r.header()).unwrap();
    assert_eq!(l.column_len_wire(), 16);
    let mut rng = rand::rngs::StdRng::seed_from_u64(dta_testkit::test_seed(0x534b));
    let mut union = CountMin::new(rows, columns);
    let mut per: Vec<CountMin> = (0..reporters)
        .map(|_| CountMin::new(rows, columns))
        .collect();
    for _ in 0..200_000 {
        let k = key(rng.gen_range(0..20_000u64).pow(2) / 20_000);
        let inc = rng.gen_range(1..100);
        per[rng.gen_range(0..reporters as usize)].update(&k, inc);
        union.update(&k, inc);
    }
    // What the translator does: sum each column's big-endian wire counters, write batches of 8.
    let epoch = 41;
    let mut wire = vec![0u8; l.column_len_wire()];
    for first in (0..columns).step_by(8) {
        let mut vals = vec![0u64; 8 * rows as usize];
        for c in first..first + 8 {
            for cm in &per {
                cm.column_wire(c, &mut wire);
                for (row, b) in wire.chunks_exact(4).enumerate() {
                    vals[(c - first) as usize * rows as usize + row] +=
                        u32::from_be_bytes(b.try_into().unwrap()) as u64;
                }
            }
        }
        l.write_columns(first, epoch, reporters, &vals, &mut r.mem().sink())
            .unwrap();
    }
    for c in 0..columns {
        let (ce, v) = l.read_column(r.mem(), c).unwrap();
        assert_eq!((ce.epoch, ce.reporters), (epoch, reporters));
        let want: Vec<u64> = union.column(c).into_iter().map(u64::from).collect();
        assert_eq!(v, want, "column {c}");
    }
    for i in 0..5_000u64 {
        let k = key(i);
        assert_eq!(l.cm_estimate(r.mem(), &k), union.estimate(&k));
        assert_eq!(
            l.cm_estimate_epoch(r.mem(), &k, epoch),
            Some(union.estimate(&k))
        );
        assert_eq!(l.cm_estimate_epoch(r.mem(), &k, epoch + 1), None);
    }
    assert!(l.column_epochs(r.mem()).iter().all(|e| e.epoch == epoch));
    // Record layout: [epoch][reporters][rows × u64] = 40 bytes per column.
    assert_eq!(l.record_len(), 40);
    let mut rec = [0u8; 8];
    r.mem().read(l.column_offset(5), &mut rec).unwrap();
    assert_eq!(rec, [41, 0, 0, 0, 5, 0, 0, 0]);
    // Shapes.
    let mut s = r.mem().sink();
    assert_eq!(
        l.write_columns(1023, 1, 1, &[0; 8], &mut s),
        Err(ApplyError::BadColumn)
    );
    assert_eq!(
        l.write_columns(0, 1, 1, &[0; 3], &mut s),
        Err(ApplyError::BadDataLen)
    );
}

#[test]
fn merged_hyperloglog_within_three_standard_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (m, per_col, reporters) = (4096u32, 64u32, 3u32);
    let spec = StoreSpec::SketchMerge(SketchSpec {
        sketch_id: 9,
        kind: SketchKind::HyperLogLog {
            registers: m,
            registers_per_column: per_col,
        },
        reporters,
        sync: Default::default(),
    });
    let r = Region::create(&dir.path().join("hll"), "hll", &spec, false).unwrap();
    let l = SketchLayout::new(r.header()).unwrap();
    assert_eq!(l.columns(), 64);
    // Seeded (and printed) so an estimate outside its bound can be replayed.
    let salt: u64 = dta_testkit::test_seed(0x4c4c_5a17);
    let mut union = HyperLogLog::new(m);
    let mut per: Vec<HyperLogLog> = (0..reporters).map(|_| HyperLogLog::new(m)).collect();
    // Overlapping key ranges: reporter i sees [i·50k, i·50k + 100k); 200k distinct in all.
    for (i, h) in per.iter_mut().enumerate() {
        for x in i as u64 * 50_000..i as u64 * 50_000 + 100_000 {
            let k = (x ^ salt).to_le_bytes();
            h.insert(&k);
            union.insert(&k);
        }
    }
    let truth = 200_000f64;
    for c in 0..l.columns() {
        let vals: Vec<u64> = (0..per_col as usize)
            .map(|j| {
                per.iter()
                    .map(|h| h.column(c, per_col)[j] as u64)
                    .max()
                    .unwrap()
            })
            .collect();
        l.write_columns(c, 2, reporters, &vals, &mut r.mem().sink())
            .unwrap();
    }
    assert_eq!(l.hll_registers(r.mem()), union.registers());
    let est = l.hll_cardinality(r.mem());
    let se = 1.04 / (m as f64).sqrt();
    println!(
        "hll: estimate {est:.0} for {truth} ({:+.2}%, 3 SE = {:.2}%)",
        (est / truth - 1.0) * 100.0,
        3.0 * se * 100.0
    );
    assert!((est / truth - 1.0).abs() <= 3.0 * se);
    // Small cardinalities use linear counting.
    let mut small = HyperLogLog::new(m);
    for x in 0..100u64 {
        small.insert(&x.to_le_bytes());
    }
    assert!((small.cardinality() - 100.0).abs() < 5.0);
}
