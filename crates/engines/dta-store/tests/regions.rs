//! Regions: persistence, read-only mapping, corrupt headers, bounds, the byte-exact prototype
//! Key-Write layout, and the serde form of store specs.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use dta_store::header::{field, header_crc};
use dta_store::{
    AppendSpec, ApplyError, HashScheme, KeyWriteAnswer, KeyWriteLayout, KeyWriteSpec, Region,
    SinkError, SketchKind, StoreError, StoreKind, StoreSpec,
};

fn kw(slots: u64) -> StoreSpec {
    StoreSpec::KeyWrite(KeyWriteSpec::new(slots, 4, 4))
}

fn patch(path: &Path, at: u64, bytes: &[u8], fix_crc: bool) {
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(bytes).unwrap();
    if fix_crc {
        let page = std::fs::read(path).unwrap();
        let crc = header_crc(&page[..4096]);
        f.seek(SeekFrom::Start(field::HEADER_CRC.start as u64))
            .unwrap();
        f.write_all(&crc.to_le_bytes()).unwrap();
    }
}

#[test]
fn regions_are_send_and_sync() {
    fn ok<T: Send + Sync>() {}
    ok::<Region>();
    ok::<dta_store::RegionMem>();
}

#[test]
fn survives_close_and_reopen_and_checks_spec() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flows.region");
    let key = [10, 0, 0, 1];
    {
        let r = Region::create(&path, "flows", &kw(1 << 12), false).unwrap();
        assert_eq!(r.header().kind, StoreKind::KeyWrite);
        // Native hashing is the default, also for 4-byte keys and data.
        assert_eq!(r.header().hash, HashScheme::Native);
        let l = KeyWriteLayout::new(r.header()).unwrap();
        l.apply(&key, &[1, 2, 3, 4], 2, &mut r.mem().sink())
            .unwrap();
        r.flush().unwrap();
        println!("huge pages: {}", r.huge_pages());
    }
    let len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(len, 4096 + (1 << 12) * 8);
    // Same spec: opened, data kept.
    let r = Region::create(&path, "flows", &kw(1 << 12), false).unwrap();
    let l = KeyWriteLayout::new(r.header()).unwrap();
    assert_eq!(
        l.query(r.mem(), &key, Some(2), 1).unwrap(),
        KeyWriteAnswer::Found {
            data: vec![1, 2, 3, 4],
            votes: 2
        }
    );
    let created = r.header().created_unix_ns;
    assert!(created > 0);
    drop(r);
    let r = Region::open(&path).unwrap();
    assert_eq!(r.header().created_unix_ns, created);
    assert_eq!(r.header().name, "flows");
    drop(r);
    // Different spec or name: refused, or recreated (zeroed) with force.
    assert!(matches!(
        Region::create(&path, "flows", &kw(1 << 13), false),
        Err(StoreError::SpecMismatch { .. })
    ));
    assert!(matches!(
        Region::create(&path, "other", &kw(1 << 12), false),
        Err(StoreError::SpecMismatch { .. })
    ));
    let r = Region::create(&path, "flows", &kw(1 << 13), true).unwrap();
    let l = KeyWriteLayout::new(r.header()).unwrap();
    assert_eq!(
        l.query(r.mem(), &key, Some(2), 1).unwrap(),
        KeyWriteAnswer::Empty
    );
    assert_eq!(r.mem().len(), (1 << 13) * 8);
    // A layout of the wrong kind is refused.
    assert!(matches!(
        dta_store::AppendLayout::new(r.header()),
        Err(StoreError::WrongKind { .. })
    ));
}

#[test]
fn read_only_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r");
    let r = Region::create(&path, "ro", &kw(1 << 8), false).unwrap();
    let l = KeyWriteLayout::new(r.header()).unwrap();
    l.apply(&[1, 2, 3, 4], &[9, 9, 9, 9], 1, &mut r.mem().sink())
        .unwrap();
    drop(r);
    let ro = Region::open_read_only(&path).unwrap();
    assert!(!ro.is_writable());
    assert!(matches!(
        l.query(ro.mem(), &[1, 2, 3, 4], Some(1), 1).unwrap(),
        KeyWriteAnswer::Found { .. }
    ));
    let before = snapshot(ro.mem());
    assert_eq!(ro.mem().write(0, &[1; 8]), Err(SinkError::ReadOnly));
    assert_eq!(ro.mem().fetch_add_u64(0, 1), Err(SinkError::ReadOnly));
    assert_eq!(
        l.apply(&[1, 2, 3, 4], &[0; 4], 1, &mut ro.mem().sink()),
        Err(ApplyError::Sink(SinkError::ReadOnly))
    );
    assert_eq!(snapshot(ro.mem()), before);
    ro.flush().unwrap();
}

fn snapshot(mem: &dta_store::RegionMem) -> Vec<u8> {
    let mut v = vec![0u8; mem.len() as usize];
    mem.read(0, &mut v).unwrap();
    v
}

#[test]
fn corrupt_headers_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = |name: &str| {
        let p = dir.path().join(name);
        Region::create(&p, "c", &kw(1 << 10), true).unwrap();
        p
    };
    let p = fresh("magic");
    patch(&p, 0, b"X", false);
    assert!(matches!(Region::open(&p), Err(StoreError::BadMagic)));

    let p = fresh("crc");
    patch(&p, 3000, &[1], false);
    let e = Region::open(&p).unwrap_err();
    assert!(matches!(e, StoreError::BadHeaderCrc { .. }));
    assert!(e.to_string().contains("corrupt header"));

    let p = fresh("version");
    patch(&p, field::VERSION.start as u64, &5u16.to_le_bytes(), true);
    assert!(matches!(Region::open(&p), Err(StoreError::BadVersion(5))));
    // Version 3 (Postcarding chunks without their check) is refused.
    let p = fresh("version3");
    patch(&p, field::VERSION.start as u64, &3u16.to_le_bytes(), true);
    let e = Region::open(&p).unwrap_err();
    assert!(matches!(e, StoreError::BadVersion(3)));
    assert!(e.to_string().contains("recreate"), "{e}");
    // Version 2 (no live counters; they would fail its CRC) is refused too.
    let p = fresh("version2");
    patch(&p, field::VERSION.start as u64, &2u16.to_le_bytes(), true);
    assert!(matches!(Region::open(&p), Err(StoreError::BadVersion(2))));
    // Version 1 (no redundancy in the header, key-only slot checks) is refused, not misread.
    let p = fresh("version1");
    patch(&p, field::VERSION.start as u64, &1u16.to_le_bytes(), true);
    let e = Region::open(&p).unwrap_err();
    assert!(matches!(e, StoreError::BadVersion(1)));
    assert!(e.to_string().contains("reads version 4"), "{e}");

    let p = fresh("kind");
    patch(&p, field::KIND.start as u64, &9u16.to_le_bytes(), true);
    assert!(matches!(Region::open(&p), Err(StoreError::BadKind(9))));

    let p = fresh("hash");
    patch(
        &p,
        field::HASH_SCHEME.start as u64,
        &7u32.to_le_bytes(),
        true,
    );
    assert!(matches!(
        Region::open(&p),
        Err(StoreError::BadHashScheme(7))
    ));

    let p = fresh("datalen");
    patch(
        &p,
        field::DATA_LEN.start as u64,
        &(1u64 << 20).to_le_bytes(),
        true,
    );
    assert!(matches!(Region::open(&p), Err(StoreError::BadGeometry(_))));

    let p = fresh("slots");
    patch(&p, field::PARAMS.start as u64, &1000u64.to_le_bytes(), true);
    let e = Region::open(&p).unwrap_err();
    assert!(matches!(e, StoreError::BadSpec(_)), "{e}");
    assert!(e.to_string().contains("power of two"));

    let p = fresh("truncated");
    OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(4096 + 100)
        .unwrap();
    assert!(matches!(
        Region::open(&p),
        Err(StoreError::Truncated {
            file_len: 4196,
            needed: 12288
        })
    ));

    let p = fresh("short");
    OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(10)
        .unwrap();
    assert!(matches!(
        Region::open(&p),
        Err(StoreError::Truncated { .. })
    ));

    let p = dir.path().join("empty");
    std::fs::write(&p, b"").unwrap();
    assert!(matches!(
        Region::open(&p),
        Err(StoreError::Truncated { .. })
    ));
    // create() over a corrupt file refuses without force and recreates with it.
    assert!(Region::create(&p, "c", &kw(1 << 10), false).is_err());
    assert!(Region::create(&p, "c", &kw(1 << 10), true).is_ok());

    assert!(matches!(
        Region::open(&dir.path().join("missing")),
        Err(StoreError::Io { .. })
    ));
    // Bad names and specs.
    assert!(Region::create(&dir.path().join("n"), "", &kw(8), true).is_err());
    assert!(Region::create(&dir.path().join("n"), &"x".repeat(33), &kw(8), true).is_err());
    assert!(Region::create(&dir.path().join("n"), "a", &kw(12), true).is_err());
    let proto13 = StoreSpec::KeyWrite(KeyWriteSpec {
        slots: 8,
        key_len: 13,
        data_len: 4,
        hash: HashScheme::Prototype,
        redundancy: 2,
    });
    assert!(Region::create(&dir.path().join("n"), "a", &proto13, true).is_err());
}

#[test]
fn out_of_bounds_writes_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let r = Region::create(&dir.path().join("b"), "b", &kw(16), false).unwrap();
    let m = r.mem();
    assert_eq!(m.len(), 128);
    m.write(0, &[7; 128]).unwrap();
    let before = snapshot(m);
    assert_eq!(
        m.write(124, &[1; 8]),
        Err(SinkError::OutOfBounds {
            offset: 124,
            len: 8
        })
    );
    assert_eq!(
        m.write(u64::MAX - 2, &[1; 8]),
        Err(SinkError::OutOfBounds {
            offset: u64::MAX - 2,
            len: 8
        })
    );
    assert!(matches!(
        m.fetch_add_u64(128, 1),
        Err(SinkError::OutOfBounds { .. })
    ));
    assert_eq!(
        m.fetch_add_u64(4, 1),
        Err(SinkError::Misaligned { offset: 4 })
    );
    assert_eq!(m.load_u64(3), Err(SinkError::Misaligned { offset: 3 }));
    let mut out = [0u8; 4];
    assert!(m.read(126, &mut out).is_err());
    assert_eq!(snapshot(m), before);
    // The edge itself is fine.
    m.write(120, &[1; 8]).unwrap();
    assert_eq!(m.fetch_add_u64(120, 1).unwrap(), 0x0101_0101_0101_0101);
    assert_eq!(m.load_u64(120).unwrap(), 0x0101_0101_0101_0102);
}

/// Prototype Key-Write, byte-exact: key 10.0.0.1 (wire 0a 00 00 01), data de ad be ef, 65536
/// slots, N = 2. checksum = crc32(01 00 00 0a) = 0x792d5167; slots crc32(01 00 00 0a 00) & 0xffff
/// = 13863 and crc32(01 00 00 0a 01) & 0xffff = 1713 (computed with Python's zlib).
#[test]
fn prototype_key_write_is_byte_exact() {
    let dir = tempfile::tempdir().unwrap();
    // The prototype layout is used only when asked for.
    let mut spec = KeyWriteSpec::new(1 << 16, 4, 4);
    spec.hash = HashScheme::Prototype;
    let spec = StoreSpec::KeyWrite(spec);
    let r = Region::create(&dir.path().join("p"), "proto", &spec, false).unwrap();
    let l = KeyWriteLayout::new(r.header()).unwrap();
    assert_eq!((l.slot_len(), l.redundancy()), (8, 2));
    l.apply(
        &[0x0a, 0x00, 0x00, 0x01],
        &[0xde, 0xad, 0xbe, 0xef],
        2,
        &mut r.mem().sink(),
    )
    .unwrap();
    let want = [0x67, 0x51, 0x2d, 0x79, 0xde, 0xad, 0xbe, 0xef];
    let mut got = [0u8; 8];
    for off in [13863u64 * 8, 1713 * 8] {
        r.mem().read(off, &mut got).unwrap();
        assert_eq!(got, want, "slot at {off}");
    }
    // Nothing else was written.
    let all = snapshot(r.mem());
    assert_eq!(all.iter().filter(|&&b| b != 0).count(), 16);
    // The file bytes are the same (header page + offset).
    r.flush().unwrap();
    let file = std::fs::read(r.path()).unwrap();
    assert_eq!(&file[4096 + 110_904..4096 + 110_912], &want);
    assert_eq!(&file[..8], b"DTAREGN\0");
}

#[test]
fn wide_key_write_slots_and_voting() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = KeyWriteSpec::new(1 << 10, 13, 20);
    spec.redundancy = 3;
    let spec = StoreSpec::KeyWrite(spec);
    let r = Region::create(&dir.path().join("w"), "w", &spec, false).unwrap();
    let l = KeyWriteLayout::new(r.header()).unwrap();
    assert_eq!((l.slot_len(), l.hash()), (24, HashScheme::Native));
    let key = *b"five-tuple-13";
    let data: Vec<u8> = (0..20).collect();
    l.apply(&key, &data, 3, &mut r.mem().sink()).unwrap();
    let mut slot = [0u8; 24];
    r.mem().read(l.slot_offset(&key, 1), &mut slot).unwrap();
    let tag = l.slot_offsets(&key, 3, &mut [0; dta_store::MAX_REDUNDANCY as usize]);
    let mut enc = [0u8; dta_store::key_write::MAX_SLOT];
    assert_eq!(l.encode_slot(tag, &data, &mut enc), Ok(24));
    assert_eq!(slot[..], enc[..24]);
    assert_eq!(&slot[4..24], &data[..]);
    assert!(l.slot_holds(tag, &slot));
    assert_eq!(
        l.query(r.mem(), &key, Some(3), 3).unwrap(),
        KeyWriteAnswer::Found {
            data: data.clone(),
            votes: 3
        }
    );
    // The check covers the data: a slot whose data changed under its check (a torn write) is
    // not the key's.
    let mut torn = slot;
    torn[4] = 0xff;
    assert!(!l.slot_holds(tag, &torn));
    // Forge a competing value with a valid check in one copy: plurality still wins 2-1, but a
    // consensus threshold of 3 is no longer met.
    let mut forged_data = data.clone();
    forged_data[0] = 0xff;
    let mut forged = [0u8; dta_store::key_write::MAX_SLOT];
    l.encode_slot(tag, &forged_data, &mut forged).unwrap();
    let forged = &forged[..24];
    let one = l.slot_offset(&key, 1);
    r.mem().write(one, forged).unwrap();
    assert_eq!(
        l.query(r.mem(), &key, Some(3), 1).unwrap(),
        KeyWriteAnswer::Found {
            data: data.clone(),
            votes: 2
        }
    );
    assert!(matches!(
        l.query(r.mem(), &key, Some(3), 3).unwrap(),
        KeyWriteAnswer::Ambiguous { .. }
    ));
    // 1-1 tie with N = 2 (if copies 0 and 1 are distinct slots).
    if l.slot_offset(&key, 0) != one {
        assert!(matches!(
            l.query(r.mem(), &key, Some(2), 1).unwrap(),
            KeyWriteAnswer::Ambiguous { .. }
        ));
    }
    let mut s = r.mem().sink();
    assert_eq!(
        l.apply(&key[..4], &data, 1, &mut s),
        Err(ApplyError::BadKeyLen)
    );
    assert_eq!(
        l.apply(&key, &data[..4], 1, &mut s),
        Err(ApplyError::BadDataLen)
    );
    assert_eq!(
        l.apply(&key, &data, 9, &mut s),
        Err(ApplyError::BadRedundancy)
    );
}

#[test]
fn specs_in_toml() {
    #[derive(serde::Deserialize)]
    struct Cfg {
        store: Vec<StoreSpec>,
    }
    let cfg: Cfg = toml::from_str(
        r#"
[[store]]
kind = "key_write"
slots = 1024
key_len = 4
data_len = 4

[[store]]
kind = "key_write"
slots = 1024
key_len = 13
data_len = 4

[[store]]
kind = "key_write"
slots = 1024
key_len = 4
data_len = 4
hash = "prototype"
redundancy = 3

[[store]]
kind = "append"
lists = 8
capacity = 1024
entry_len = 16

[[store]]
kind = "sketch_merge"
sketch_id = 2
sketch = "count_min"
rows = 4
columns = 1024
reporters = 3

[[store]]
kind = "postcarding"
chunks = 4096
key_len = 13
"#,
    )
    .unwrap();
    let hashes: Vec<HashScheme> = cfg.store.iter().take(3).map(|s| s.hash()).collect();
    assert_eq!(
        hashes,
        [
            HashScheme::Native,
            HashScheme::Native,
            HashScheme::Prototype
        ]
    );
    let ns: Vec<Option<u8>> = cfg.store.iter().map(|s| s.redundancy()).collect();
    assert_eq!(ns, [Some(2), Some(2), Some(3), None, None, Some(2)]);
    assert_eq!(
        cfg.store[3],
        StoreSpec::Append(AppendSpec {
            lists: 8,
            capacity: 1024,
            entry_len: 16,
            batch: 16,
            record: Default::default(),
        })
    );
    match &cfg.store[4] {
        StoreSpec::SketchMerge(s) => assert_eq!(
            s.kind,
            SketchKind::CountMin {
                rows: 4,
                columns: 1024
            }
        ),
        other => panic!("{other:?}"),
    }
    match &cfg.store[5] {
        StoreSpec::Postcarding(p) => assert_eq!((p.hops, p.slot_bits, p.redundancy), (5, 32, 2)),
        other => panic!("{other:?}"),
    }
    for s in &cfg.store {
        s.validate().unwrap();
        let json = serde_json::to_string(s).unwrap();
        assert_eq!(&serde_json::from_str::<StoreSpec>(&json).unwrap(), s);
    }
}

/// A region appears under its name only whole: a reader that lists the directory while large
/// regions are being created (sized, allocated, their headers written) either does not see one
/// or opens it; a half-made file left by a creator that died is replaced, and nothing but the
/// regions remains.
#[test]
fn a_region_is_published_whole() {
    let dir = tempfile::tempdir().unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                for e in std::fs::read_dir(dir.path()).unwrap().flatten() {
                    if e.path().extension().is_some_and(|x| x == "region") {
                        Region::open_read_only(&e.path())
                            .unwrap_or_else(|err| panic!("a listed region must open: {err}"));
                    }
                }
            }
        });
        for i in 0..4 {
            let name = format!("big{i}");
            // A stale half-made file from a creator that died.
            std::fs::write(dir.path().join(format!(".{name}.region.partial")), b"junk").unwrap();
            let path = dir.path().join(format!("{name}.region"));
            let r = Region::create(&path, &name, &kw(1 << (18 + i)), true).unwrap();
            assert_eq!(r.header().name, name);
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["big0.region", "big1.region", "big2.region", "big3.region"]
    );
}

/// A region says which pages it is on and, on 4 KiB pages, why: on tmpfs it follows the
/// kernel's shmem THP setting (read here independently), elsewhere (not hugetlbfs) it names
/// hugetlbfs as the way to huge pages.
#[test]
fn regions_say_which_pages_they_are_on_and_why() {
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
        .unwrap_or_default();
    let thp_on = ["[always]", "[within_size]", "[advise]", "[force]"]
        .iter()
        .any(|m| thp.contains(m));
    let shm = std::path::Path::new("/dev/shm");
    let mut dirs = vec![(tempfile::tempdir().unwrap(), false)];
    if shm.is_dir() {
        dirs.push((tempfile::tempdir_in(shm).unwrap(), true));
    }
    for (dir, tmpfs) in &dirs {
        let r = Region::create(&dir.path().join("p.region"), "p", &kw(1 << 12), false).unwrap();
        let pages = r.pages();
        assert_eq!(pages.huge(), r.huge_pages());
        let said = pages.to_string();
        if *tmpfs && thp_on {
            assert!(pages.huge() || said.contains("madvise"), "{said}");
        } else if *tmpfs {
            assert!(
                said.starts_with(
                    "4 KiB pages: tmpfs, and transparent huge pages for shared memory are off"
                ),
                "{said}"
            );
        } else if !said.contains("hugetlbfs)") {
            // Not tmpfs (nor hugetlbfs): the way to huge pages is named.
            assert!(said.contains("scripts/hugepages.sh"), "{said}");
        }
    }
}

/// Regions on hugetlbfs, on a mount without `size=` (as `scripts/hugepages.sh` and systemd's
/// /dev/hugepages make it): such a mount reports no blocks, and the space check takes the huge
/// page pool's free pages instead, so the region is created on 2 MiB pages; a region larger
/// than the pool is refused naming the pool's free bytes. Root: the test reserves two pages of
/// its own and mounts its own hugetlbfs, and gives both back.
#[test]
fn regions_on_hugetlbfs_without_a_size_limit() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        dta_testkit::skip!("reserving huge pages and mounting hugetlbfs needs root");
    }
    let pool = "/sys/kernel/mm/hugepages/hugepages-2048kB";
    let read = |f: &str| -> u64 {
        std::fs::read_to_string(format!("{pool}/{f}"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let before = read("nr_hugepages");
    let want = 2;
    let grown = read("free_hugepages") < want;
    if grown {
        std::fs::write(format!("{pool}/nr_hugepages"), (before + want).to_string()).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "hugetlbfs", "-o", "pagesize=2M", "none"])
        .arg(dir.path())
        .status()
        .is_ok_and(|s| s.success());
    let result = std::panic::catch_unwind(|| {
        assert!(mounted, "mount -t hugetlbfs");
        let free = dta_store::space::free_bytes(dir.path()).unwrap();
        assert!(free >= want * (2 << 20), "the pool's free pages: {free}");
        let r = Region::create(&dir.path().join("h.region"), "h", &kw(1 << 12), false).unwrap();
        assert_eq!(r.pages(), dta_store::Pages::Hugetlbfs);
        assert!(r.huge_pages());
        let l = KeyWriteLayout::new(r.header()).unwrap();
        l.apply(&[1, 2, 3, 4], &[5, 6, 7, 8], 2, &mut r.mem().sink())
            .unwrap();
        assert!(matches!(
            l.query(r.mem(), &[1, 2, 3, 4], Some(2), 1).unwrap(),
            KeyWriteAnswer::Found { .. }
        ));
        drop(r);
        // More than the pool holds: refused before anything is written, naming what is free.
        let big = kw(1 << 40 >> 3);
        match Region::create(&dir.path().join("big.region"), "big", &big, false) {
            Err(dta_store::StoreError::NoSpace { free, .. }) => {
                assert!(free < 1 << 40, "{free}")
            }
            other => panic!("a region larger than the pool: {other:?}"),
        }
    });
    if mounted {
        let _ = std::process::Command::new("umount")
            .arg(dir.path())
            .status();
    }
    if grown {
        let _ = std::fs::write(format!("{pool}/nr_hugepages"), before.to_string());
    }
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
