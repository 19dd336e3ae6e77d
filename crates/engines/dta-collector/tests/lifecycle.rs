//! Region lifecycle in the collector: bad regions are skipped and listed, a region truncated while
//! served becomes unavailable, one collector per directory.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};

use dta_collector::{region_path, Collector, CollectorError, StoreConfig};

fn store(toml_text: &str) -> StoreConfig {
    toml::from_str(toml_text).unwrap()
}

fn stores() -> Vec<StoreConfig> {
    vec![
        store("name = 'kw'\nkind = 'key-write'\nslots = 1024"),
        store("name = 'ki'\nkind = 'key-increment'\ncounters = 1024"),
    ]
}

#[test]
fn corrupt_region_is_skipped_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    drop(Collector::create(dir.path(), &stores(), false).unwrap());
    // Overwrite the magic of one region.
    let mut f = OpenOptions::new()
        .write(true)
        .open(region_path(dir.path(), "kw"))
        .unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.write_all(b"garbage!").unwrap();
    drop(f);

    let c = Collector::create(dir.path(), &stores(), false).unwrap();
    assert!(c.store("ki").is_ok());
    match c.store("kw") {
        Err(CollectorError::Unavailable { name, reason }) => {
            assert_eq!(name, "kw");
            assert!(reason.contains("bad magic"), "{reason}");
        }
        Err(e) => panic!("kw: {e}"),
        Ok(_) => panic!("kw served from a corrupt region"),
    }
    assert_eq!(c.bad().len(), 1);
    let status = c.status();
    assert_eq!(status.len(), 2);
    assert!(status.iter().any(|s| s.name == "ki" && s.available.is_ok()));
    assert!(status
        .iter()
        .any(|s| s.name == "kw" && s.available.is_err()));
    assert_eq!(c.check_stores(), 1);
    drop(c);

    // Opening the directory (as `dta inspect` and `dta query` do) lists it too.
    let ro = Collector::open_dir(dir.path(), false).unwrap();
    assert_eq!(ro.stores().len(), 1);
    assert_eq!(ro.bad().len(), 1);
    assert!(ro.bad()[0].path.ends_with("kw.region"));
}

#[test]
fn region_truncated_while_served_becomes_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::create(dir.path(), &stores(), false).unwrap();
    let kw = c.store("kw").unwrap().region.clone();
    // Read the data page once so it is mapped, then cut the file under the mapping.
    let len = kw.mem().len();
    let mut b = [0u8; 8];
    assert!(kw.mem().read(len - 8, &mut b).is_ok());
    OpenOptions::new()
        .write(true)
        .open(region_path(dir.path(), "kw"))
        .unwrap()
        .set_len(100)
        .unwrap();
    // An access after the cut completes (guarded) instead of killing the process...
    let _ = kw.mem().read(len - 8, &mut b);
    // ... and the store is reported, the other keeps serving.
    let e = c.store("kw").err().expect("kw still served");
    assert!(e.to_string().contains("truncated"), "{e}");
    assert!(c.store("ki").is_ok());
    assert_eq!(c.check_stores(), 1);
    assert_eq!(c.flush(), 0);
}

#[test]
fn second_collector_on_one_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = Collector::create(dir.path(), &stores(), false).unwrap();
    for force in [false, true] {
        let e = Collector::create(dir.path(), &stores(), force)
            .err()
            .expect("second collector started");
        assert!(
            e.to_string()
                .contains(&format!("process {}", std::process::id())),
            "{e}"
        );
    }
    // The first one's files were left alone.
    assert!(first.store("kw").is_ok());
    drop(first);
    assert!(Collector::create(dir.path(), &stores(), false).is_ok());
}

/// A configuration that names no `hash` makes new Key-Write and Key-Increment regions with the
/// default (xxh3) and reopens a region made with another scheme as it was, keeping its data;
/// one that names a scheme other than the region's is refused, as any other parameter.
#[test]
fn an_unset_hash_keeps_an_existing_regions_scheme() {
    use dta_store::{HashScheme, StoreSpec};
    let dir = tempfile::tempdir().unwrap();
    let scheme = |c: &Collector, name: &str| c.store(name).unwrap().region.header().spec.hash();
    let named = vec![
        store("name = 'kw'\nkind = 'key-write'\nslots = 1024\nhash = 'native'"),
        store("name = 'ki'\nkind = 'key-increment'\ncounters = 1024\nhash = 'native'"),
    ];
    let c = Collector::create(dir.path(), &named, false).unwrap();
    assert_eq!(scheme(&c, "kw"), HashScheme::Native);
    let mark = [0xA5u8; 8];
    c.store("kw").unwrap().region.mem().write(0, &mark).unwrap();
    drop(c);

    // Unset: both reopened native, the data kept; a new store gets xxh3.
    let mut unset = stores();
    unset.push(store("name = 'fresh'\nkind = 'key-write'\nslots = 1024"));
    let c = Collector::create(dir.path(), &unset, false).unwrap();
    assert!(c.bad().is_empty(), "{:?}", c.bad());
    assert_eq!(scheme(&c, "kw"), HashScheme::Native);
    assert_eq!(scheme(&c, "ki"), HashScheme::Native);
    assert_eq!(scheme(&c, "fresh"), HashScheme::Xxh3);
    let mut back = [0u8; 8];
    c.store("kw")
        .unwrap()
        .region
        .mem()
        .read(0, &mut back)
        .unwrap();
    assert_eq!(back, mark, "the region was recreated");
    drop(c);

    // Unset, but another geometry: refused as before (the scheme is not what differs).
    let bigger = vec![store("name = 'kw'\nkind = 'key-write'\nslots = 2048")];
    let c = Collector::create(dir.path(), &bigger, false).unwrap();
    assert_eq!(c.bad().len(), 1, "a region of other parameters was opened");
    drop(c);

    // Named and other than the region's: refused; named and the same: opened.
    let xxh3 = vec![store(
        "name = 'ki'\nkind = 'key-increment'\ncounters = 1024\nhash = 'xxh3'",
    )];
    let c = Collector::create(dir.path(), &xxh3, false).unwrap();
    assert_eq!(c.bad().len(), 1);
    let why = &c.bad()[0].reason;
    assert!(
        why.contains("a different store") && why.contains("Native"),
        "{why}"
    );
    drop(c);
    let c = Collector::create(dir.path(), &named, false).unwrap();
    assert!(c.bad().is_empty());
    drop(c);

    // Without a region, the default.
    let spec = dta_collector::planned_spec(
        dir.path(),
        &store("name = 'none'\nkind = 'key-increment'\ncounters = 64"),
    )
    .unwrap();
    assert!(
        matches!(spec, StoreSpec::KeyIncrement(ref k) if k.hash == dta_collector::config::DEFAULT_HASH)
    );
}
