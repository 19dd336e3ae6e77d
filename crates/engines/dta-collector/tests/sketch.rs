//! Sketch-Merge answers read only merged columns: before the translator has written the columns
//! a key reads (all reporters of the sketch sent them), the answer is an error that says so,
//! never a 0 that would read as "never seen".

use dta_collector::query::{self, QueryError};
use dta_collector::{Collector, StoreConfig};
use dta_store::SketchLayout;

fn store(toml_text: &str) -> StoreConfig {
    toml::from_str(toml_text).unwrap()
}

#[test]
fn unmerged_sketch_columns_are_an_error_not_a_zero() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::create(
        dir.path(),
        &[
            store(
                "name = 'cm'\nkind = 'sketch-merge'\nsketch_id = 1\nsketch = 'count-min'\n\
                 rows = 2\ncolumns = 8\nreporters = 2",
            ),
            store(
                "name = 'hll'\nkind = 'sketch-merge'\nsketch_id = 2\nsketch = 'hyperloglog'\n\
                 registers = 64\nregisters_per_column = 16\nreporters = 2",
            ),
        ],
        false,
    )
    .unwrap();
    let cm = &c.store("cm").unwrap().region;
    let hll = &c.store("hll").unwrap().region;
    let key = 42u32.to_be_bytes();

    let e = query::sketch(cm, Some(&key)).unwrap_err();
    assert!(matches!(e, QueryError::NotMerged(_)), "{e}");
    assert!(e.to_string().contains("2 reporters"), "{e}");
    let e = query::sketch(hll, None).unwrap_err();
    assert!(matches!(e, QueryError::NotMerged(_)), "{e}");

    // Every column merged (epoch 1, both reporters): the key's estimate is the rows' minimum.
    let l = SketchLayout::new(cm.header()).unwrap();
    let values: Vec<u64> = (0..8 * 2).map(|i| 5 + i as u64).collect();
    l.write_columns(0, 1, 2, &values, &mut cm.mem().sink())
        .unwrap();
    let r = query::sketch(cm, Some(&key)).unwrap();
    assert!(r.estimate.unwrap() >= 5, "{r:?}");

    let l = SketchLayout::new(hll.header()).unwrap();
    l.write_columns(0, 1, 2, &[1; 16], &mut hll.mem().sink())
        .unwrap();
    let r = query::sketch(hll, None).unwrap();
    assert!(r.cardinality.unwrap() > 0.0, "{r:?}");
}
