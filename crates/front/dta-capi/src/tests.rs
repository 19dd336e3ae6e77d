// Size: the C ABI's unit tests, calling every exported function through raw pointers as C does;
// they share one configuration and the open, encode and ingest helpers.
//! The ABI functions as C calls them: through raw pointers, checking codes and messages.

use std::ffi::{CStr, CString};
use std::ptr;

use super::*;
use crate::handle::code_of;

const CONFIG: &str = r#"
region_dir = "regions"

[[store]]
name = "kw"
kind = "key-write"
slots = 4096
key_len = 4
data_len = 4
redundancy = 2

[[store]]
name = "bytes"
kind = "key-increment"
counters = 4096
key_len = 4
redundancy = 2

[[store]]
name = "paths"
kind = "postcarding"
chunks = 4096
hops = 5
slot_bits = 32
redundancy = 2
key_len = 4
values = 1024

[[store]]
name = "drops"
kind = "append"
lists = 2
capacity = 1024
entry_len = 8
batch = 4

[[store]]
name = "cm"
kind = "sketch-merge"
sketch_id = 1
sketch = "count-min"
rows = 3
columns = 256
reporters = 2
"#;

fn last_error() -> String {
    // SAFETY: never NULL, NUL-terminated.
    unsafe { CStr::from_ptr(dta_last_error()) }
        .to_string_lossy()
        .into_owned()
}

struct Open {
    dir: Option<tempfile::TempDir>,
    path: CString,
    c: *mut DtaCollector,
}

impl Open {
    /// Close the handle, keeping the directory.
    fn close(mut self) -> (tempfile::TempDir, CString) {
        let c = std::mem::replace(&mut self.c, ptr::null_mut());
        // SAFETY: opened by `open`, closed once.
        let rc = unsafe { dta_collector_close(c) };
        assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
        (self.dir.take().unwrap(), self.path.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if !self.c.is_null() {
            // SAFETY: opened by `open`, closed once.
            let rc = unsafe { dta_collector_close(self.c) };
            assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
        }
    }
}

fn open() -> Open {
    open_config(CONFIG)
}

fn open_config(config: &str) -> Open {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("dta.toml");
    std::fs::write(&p, config).unwrap();
    let path = CString::new(p.to_str().unwrap()).unwrap();
    let mut c = ptr::null_mut();
    // SAFETY: valid string and out pointer.
    let rc = unsafe { dta_collector_open(path.as_ptr(), &mut c) };
    assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
    assert!(!c.is_null());
    Open {
        dir: Some(dir),
        path,
        c,
    }
}

fn header(reporter_id: u32) -> DtaHeader {
    DtaHeader {
        reporter_id,
        seq: 0,
        priority: 1,
        retransmittable: 0,
        immediate: 0,
    }
}

type Encoded = ([u8; 128], usize);

fn ingest(o: &Open, (buf, len): Encoded) -> Code {
    // SAFETY: a valid handle and buffer.
    code_of(unsafe { dta_collector_ingest(o.c, buf.as_ptr(), len) })
}

fn kw(key: [u8; 4], data: [u8; 4]) -> Encoded {
    let (mut buf, mut len) = ([0u8; 128], 0);
    // SAFETY: valid pointers and lengths.
    let rc = unsafe {
        dta_encode_key_write(
            &header(1),
            key.as_ptr(),
            4,
            data.as_ptr(),
            4,
            2,
            buf.as_mut_ptr(),
            buf.len(),
            &mut len,
        )
    };
    assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
    (buf, len)
}

fn store(name: &str) -> CString {
    CString::new(name).unwrap()
}

#[test]
fn every_primitive_ingested_is_answered_by_its_query() {
    let o = open();
    assert_eq!(ingest(&o, kw([10, 0, 0, 1], [1, 2, 3, 4])), Code::Ok);
    let (mut buf, mut len) = ([0u8; 128], 0);
    for _ in 0..3 {
        // SAFETY: valid pointers.
        let rc = unsafe {
            dta_encode_key_increment(
                &header(1),
                [0, 0, 0, 7].as_ptr(),
                4,
                1500,
                2,
                buf.as_mut_ptr(),
                128,
                &mut len,
            )
        };
        assert_eq!(code_of(rc), Code::Ok);
        assert_eq!(ingest(&o, (buf, len)), Code::Ok);
    }
    for (hop, sw) in [11u32, 22, 33].iter().enumerate() {
        // SAFETY: valid pointers.
        let rc = unsafe {
            dta_encode_postcard(
                &header(*sw),
                [0, 0, 0, 9].as_ptr(),
                4,
                hop as u8,
                3,
                *sw,
                buf.as_mut_ptr(),
                128,
                &mut len,
            )
        };
        assert_eq!(code_of(rc), Code::Ok);
        assert_eq!(ingest(&o, (buf, len)), Code::Ok);
    }
    for i in 0..5u64 {
        let e = (1000 + i).to_be_bytes();
        // SAFETY: valid pointers.
        let rc = unsafe {
            dta_encode_append(
                &header(3),
                1,
                e.as_ptr(),
                8,
                buf.as_mut_ptr(),
                128,
                &mut len,
            )
        };
        assert_eq!(code_of(rc), Code::Ok);
        assert_eq!(ingest(&o, (buf, len)), Code::Ok);
    }
    // Count-Min: each of 2 reporters counts key 42 five times; columns sent in order.
    let key = 42u32.to_be_bytes();
    let cols: Vec<u32> = (0..3)
        .map(|row| {
            let mut col = 0;
            // SAFETY: valid pointers.
            let rc = unsafe { dta_sketch_cm_column(key.as_ptr(), 4, row, 256, &mut col) };
            assert_eq!(code_of(rc), Code::Ok);
            col
        })
        .collect();
    for reporter in 0..2 {
        for column in 0..256u32 {
            let mut data = [0u8; 12];
            for row in 0..3 {
                if cols[row] == column {
                    data[row * 4..row * 4 + 4].copy_from_slice(&5u32.to_be_bytes());
                }
            }
            // SAFETY: valid pointers.
            let rc = unsafe {
                dta_encode_sketch_column(
                    &header(reporter),
                    1,
                    column as u16,
                    1,
                    data.as_ptr(),
                    12,
                    buf.as_mut_ptr(),
                    128,
                    &mut len,
                )
            };
            assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
            assert_eq!(ingest(&o, (buf, len)), Code::Ok, "{}", last_error());
        }
    }
    // SAFETY: a valid handle.
    assert_eq!(
        code_of(unsafe { dta_collector_flush(o.c) }),
        Code::Ok,
        "{}",
        last_error()
    );

    let (mut data, mut n) = ([0u8; 64], 0usize);
    // SAFETY: valid pointers.
    let rc = unsafe {
        dta_query_key_write(
            o.c,
            store("kw").as_ptr(),
            [10, 0, 0, 1].as_ptr(),
            4,
            1,
            data.as_mut_ptr(),
            64,
            &mut n,
        )
    };
    assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
    assert_eq!(&data[..n], &[1, 2, 3, 4]);

    let mut count = 0u64;
    // SAFETY: valid pointers.
    let rc = unsafe {
        dta_query_key_increment(
            o.c,
            store("bytes").as_ptr(),
            [0, 0, 0, 7].as_ptr(),
            4,
            &mut count,
        )
    };
    assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
    assert_eq!(count, 4500);

    let (mut path, mut hops) = ([0u32; 8], 0usize);
    // SAFETY: valid pointers.
    let rc = unsafe {
        dta_query_postcard_path(
            o.c,
            store("paths").as_ptr(),
            [0, 0, 0, 9].as_ptr(),
            4,
            path.as_mut_ptr(),
            8,
            &mut hops,
        )
    };
    assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
    assert_eq!(&path[..hops], &[11, 22, 33]);

    let mut entries = [0u8; 64];
    let mut read = DtaListRead::default();
    // SAFETY: valid pointers.
    let rc = unsafe {
        dta_query_append_read(
            o.c,
            store("drops").as_ptr(),
            1,
            OLDEST,
            entries.as_mut_ptr(),
            64,
            &mut read,
        )
    };
    assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
    assert_eq!((read.entries, read.entry_len, read.missed), (5, 8, 0));
    let got: Vec<u64> = entries[..40]
        .chunks(8)
        .map(|c| u64::from_be_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, vec![1000, 1001, 1002, 1003, 1004]);
    // Resuming at next_tail reads nothing new.
    // SAFETY: valid pointers.
    let rc = unsafe {
        dta_query_append_read(
            o.c,
            store("drops").as_ptr(),
            1,
            read.next_tail,
            entries.as_mut_ptr(),
            64,
            &mut read,
        )
    };
    assert_eq!((code_of(rc), read.entries), (Code::Ok, 0));

    let mut est = 0u64;
    // SAFETY: valid pointers.
    let rc = unsafe { dta_query_sketch(o.c, store("cm").as_ptr(), key.as_ptr(), 4, &mut est) };
    assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
    assert_eq!(est, 10, "the two reporters' counts summed");

    let mut s = std::mem::MaybeUninit::<DtaStats>::uninit();
    // SAFETY: valid pointers.
    let rc = unsafe { dta_collector_stats(o.c, s.as_mut_ptr()) };
    assert_eq!(code_of(rc), Code::Ok);
    // SAFETY: written on success.
    let s = unsafe { s.assume_init() };
    assert_eq!(s.rejected, 0);
    assert_eq!(s.reports, [1, 5, 3, 3, 512]);
    assert_eq!(s.datagrams, 1 + 3 + 3 + 5 + 512);
    assert_eq!(s.postcard_chunks_complete, 1);
    assert_eq!(
        (s.postcard_chunks_timeout, s.postcard_chunks_collision),
        (0, 0)
    );
}

/// Two paths in flight that share the translator's one Postcarding cache line: the first is
/// written early (a collision), the second at the flush (hops missing); the stats tell them
/// apart.
#[test]
fn postcard_collisions_are_counted_apart_from_timeouts() {
    let o = open_config(&CONFIG.replace(
        "region_dir = \"regions\"",
        "region_dir = \"regions\"\n[translator]\npostcard_cache_entries = 1",
    ));
    let (mut buf, mut len) = ([0u8; 128], 0usize);
    for flow in [1u8, 2] {
        // SAFETY: valid pointers.
        let rc = unsafe {
            dta_encode_postcard(
                &header(10),
                [0, 0, 0, flow].as_ptr(),
                4,
                0,
                3,
                10,
                buf.as_mut_ptr(),
                128,
                &mut len,
            )
        };
        assert_eq!(code_of(rc), Code::Ok);
        assert_eq!(ingest(&o, (buf, len)), Code::Ok, "{}", last_error());
    }
    // SAFETY: a valid handle.
    assert_eq!(code_of(unsafe { dta_collector_flush(o.c) }), Code::Ok);
    let mut s = std::mem::MaybeUninit::<DtaStats>::uninit();
    // SAFETY: valid pointers.
    assert_eq!(
        code_of(unsafe { dta_collector_stats(o.c, s.as_mut_ptr()) }),
        Code::Ok
    );
    // SAFETY: written on success.
    let s = unsafe { s.assume_init() };
    assert_eq!(
        (
            s.postcard_chunks_complete,
            s.postcard_chunks_collision,
            s.postcard_chunks_timeout
        ),
        (0, 1, 1)
    );
}

#[test]
fn bad_datagrams_are_rejected_with_the_reason_and_counted() {
    let o = open();
    // Not a DTA version.
    let mut bad = [0u8; 128];
    bad[0] = 0x20;
    assert_eq!(ingest(&o, (bad, 12)), Code::Rejected);
    assert!(last_error().contains("unknown_version"), "{}", last_error());
    // Truncated: a valid datagram cut short.
    let (buf, len) = kw([1, 1, 1, 1], [2, 2, 2, 2]);
    assert_eq!(ingest(&o, (buf, len - 1)), Code::Rejected);
    assert!(last_error().contains("truncated"), "{}", last_error());
    // Well-formed, but no store holds 16-byte keys.
    let (mut b2, mut n2) = ([0u8; 128], 0);
    // SAFETY: valid pointers.
    let rc = unsafe {
        dta_encode_key_write(
            &header(1),
            [7u8; 16].as_ptr(),
            16,
            [1u8; 4].as_ptr(),
            4,
            1,
            b2.as_mut_ptr(),
            128,
            &mut n2,
        )
    };
    assert_eq!(code_of(rc), Code::Ok);
    assert_eq!(ingest(&o, (b2, n2)), Code::Rejected);
    assert!(last_error().contains("no_store"), "{}", last_error());
    // Longer than the translator's receive buffer: cut off there, as over UDP, and rejected.
    let mut long = vec![0u8; 20000];
    long[..len].copy_from_slice(&buf[..len]);
    // SAFETY: a valid handle and buffer.
    let rc = unsafe { dta_collector_ingest(o.c, long.as_ptr(), long.len()) };
    assert_eq!(code_of(rc), Code::Rejected, "{}", last_error());
    assert!(
        last_error().contains("9216-byte datagram"),
        "{}",
        last_error()
    );
    // The next good one succeeds and clears the message.
    assert_eq!(ingest(&o, (buf, len)), Code::Ok);
    assert_eq!(last_error(), "");
    // SAFETY: valid handle; NULL datagram of non-zero length.
    let rc = unsafe { dta_collector_ingest(o.c, ptr::null(), 5) };
    assert_eq!(code_of(rc), Code::Null);
    assert!(
        last_error().contains("datagram is NULL"),
        "{}",
        last_error()
    );

    let mut s = std::mem::MaybeUninit::<DtaStats>::uninit();
    // SAFETY: valid pointers.
    assert_eq!(
        code_of(unsafe { dta_collector_stats(o.c, s.as_mut_ptr()) }),
        Code::Ok
    );
    // SAFETY: written on success.
    let s = unsafe { s.assume_init() };
    assert_eq!(s.rejected, 4);
    let by_name = |name: &str| -> u64 {
        (0..REJECT_REASONS)
            .filter(|&i| {
                // SAFETY: in range: a static NUL-terminated name.
                unsafe { CStr::from_ptr(dta_reject_reason_name(i)) }
                    .to_str()
                    .unwrap()
                    == name
            })
            .map(|i| s.rejects[i])
            .sum()
    };
    assert_eq!(
        (
            by_name("unknown_version"),
            by_name("truncated"),
            by_name("no_store")
        ),
        (1, 1, 1)
    );
    assert!(dta_reject_reason_name(REJECT_REASONS).is_null());
}

#[test]
fn queries_that_cannot_be_answered_are_errors_with_messages() {
    let o = open();
    let (mut data, mut n) = ([0u8; 64], 0usize);
    let q = |name: &str, key: &[u8], data: &mut [u8; 64], n: &mut usize| {
        // SAFETY: valid pointers.
        code_of(unsafe {
            dta_query_key_write(
                o.c,
                store(name).as_ptr(),
                key.as_ptr(),
                key.len(),
                1,
                data.as_mut_ptr(),
                64,
                n,
            )
        })
    };
    assert_eq!(
        q("nope", &[1, 2, 3, 4], &mut data, &mut n),
        Code::UnknownStore
    );
    assert!(
        last_error().contains("\"nope\"") && last_error().contains("kw"),
        "{}",
        last_error()
    );
    assert_eq!(
        q("bytes", &[1, 2, 3, 4], &mut data, &mut n),
        Code::WrongKind
    );
    assert_eq!(q("kw", &[1, 2, 3], &mut data, &mut n), Code::Invalid);
    assert_eq!(q("kw", &[1, 2, 3, 4], &mut data, &mut n), Code::Empty);
    assert!(last_error().contains("01020304"), "{}", last_error());
    let (mut path, mut hops) = ([0u32; 8], 0usize);
    // SAFETY: valid pointers.
    let rc = unsafe {
        dta_query_postcard_path(
            o.c,
            store("paths").as_ptr(),
            [0; 4].as_ptr(),
            4,
            path.as_mut_ptr(),
            8,
            &mut hops,
        )
    };
    assert_eq!(code_of(rc), Code::Empty);
    let mut est = 0;
    // SAFETY: valid pointers.
    let rc = unsafe { dta_query_sketch(o.c, store("cm").as_ptr(), [0; 4].as_ptr(), 4, &mut est) };
    assert_eq!(code_of(rc), Code::NotMerged, "{}", last_error());
    let mut card = 0.0;
    // SAFETY: valid pointers.
    let rc = unsafe { dta_query_sketch_cardinality(o.c, store("cm").as_ptr(), &mut card) };
    assert_eq!(code_of(rc), Code::WrongKind, "{}", last_error());
    let mut small = [0u8; 4];
    let mut read = DtaListRead::default();
    // SAFETY: valid pointers.
    let rc = unsafe {
        dta_query_append_read(
            o.c,
            store("drops").as_ptr(),
            0,
            OLDEST,
            small.as_mut_ptr(),
            4,
            &mut read,
        )
    };
    assert_eq!(code_of(rc), Code::NoSpace, "{}", last_error());
    // SAFETY: valid pointers; list 9 is beyond the store's 2 lists.
    let mut big = [0u8; 64];
    let rc = unsafe {
        dta_query_append_read(
            o.c,
            store("drops").as_ptr(),
            9,
            OLDEST,
            big.as_mut_ptr(),
            64,
            &mut read,
        )
    };
    assert_ne!(code_of(rc), Code::Ok);
    assert!(!last_error().is_empty());
}

#[test]
fn open_errors_name_the_cause() {
    let mut c = ptr::null_mut();
    let missing = CString::new("/nonexistent/dta.toml").unwrap();
    // SAFETY: valid pointers.
    let rc = unsafe { dta_collector_open(missing.as_ptr(), &mut c) };
    assert_eq!(code_of(rc), Code::Config);
    assert!(
        last_error().contains("/nonexistent/dta.toml"),
        "{}",
        last_error()
    );
    assert!(c.is_null());
    // SAFETY: NULL path.
    assert_eq!(
        code_of(unsafe { dta_collector_open(ptr::null(), &mut c) }),
        Code::Null
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[store]]\nname='a'\nkind='append'\nslots=8\n").unwrap();
    let bad = CString::new(bad.to_str().unwrap()).unwrap();
    // SAFETY: valid pointers.
    let rc = unsafe { dta_collector_open(bad.as_ptr(), &mut c) };
    assert_eq!(code_of(rc), Code::Config);
    assert!(last_error().contains("slots"), "{}", last_error());
    // A second collector on the same directory is refused (the lock), naming it.
    let o = open();
    // SAFETY: valid pointers.
    let rc = unsafe { dta_collector_open(o.path.as_ptr(), &mut c) };
    assert_eq!(code_of(rc), Code::Io, "{}", last_error());
    assert!(c.is_null());
    // Close accepts NULL.
    // SAFETY: NULL is allowed.
    assert_eq!(
        code_of(unsafe { dta_collector_close(ptr::null_mut()) }),
        Code::Ok
    );
}

#[test]
fn regions_survive_close_and_reopen() {
    let o = open();
    assert_eq!(ingest(&o, kw([5, 5, 5, 5], [9, 9, 9, 9])), Code::Ok);
    let (dir, path) = o.close();
    let mut c = ptr::null_mut();
    // SAFETY: valid pointers.
    assert_eq!(
        code_of(unsafe { dta_collector_open(path.as_ptr(), &mut c) }),
        Code::Ok,
        "{}",
        last_error()
    );
    let (mut data, mut n) = ([0u8; 64], 0usize);
    // SAFETY: valid pointers.
    let rc = unsafe {
        dta_query_key_write(
            c,
            store("kw").as_ptr(),
            [5; 4].as_ptr(),
            4,
            1,
            data.as_mut_ptr(),
            64,
            &mut n,
        )
    };
    assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
    assert_eq!(&data[..n], &[9; 4]);
    // SAFETY: opened above.
    assert_eq!(code_of(unsafe { dta_collector_close(c) }), Code::Ok);
    drop(dir);
}

#[test]
fn encoders_refuse_what_the_wire_cannot_carry() {
    let (mut buf, mut len) = ([0u8; 128], 0usize);
    let enc = |h: &DtaHeader, key: &[u8], data: &[u8], red: u8, buf: &mut [u8], len: &mut usize| {
        // SAFETY: valid pointers.
        code_of(unsafe {
            dta_encode_key_write(
                h,
                key.as_ptr(),
                key.len(),
                data.as_ptr(),
                data.len(),
                red,
                buf.as_mut_ptr(),
                buf.len(),
                len,
            )
        })
    };
    let h = header(1);
    assert_eq!(
        enc(&h, &[1; 4], &[1; 4], 0, &mut buf, &mut len),
        Code::Invalid
    );
    assert_eq!(
        enc(&h, &[1; 4], &[1; 4], 5, &mut buf, &mut len),
        Code::Invalid
    );
    assert_eq!(
        enc(&h, &[1; 17], &[1; 4], 1, &mut buf, &mut len),
        Code::Invalid
    );
    assert!(last_error().contains("bad_key_len"), "{}", last_error());
    assert_eq!(
        enc(&h, &[1; 4], &[1; 65], 1, &mut buf, &mut len),
        Code::Invalid
    );
    assert_eq!(
        enc(&h, &[1; 4], &[1; 4], 1, &mut buf[..20], &mut len),
        Code::NoSpace
    );
    let mut hp = h;
    hp.priority = 3;
    assert_eq!(
        enc(&hp, &[1; 4], &[1; 4], 1, &mut buf, &mut len),
        Code::Invalid
    );
    assert!(last_error().contains("priority 3"), "{}", last_error());
    // The largest report fits DTA_MAX_ENCODED exactly.
    assert_eq!(enc(&h, &[1; 16], &[1; 64], 4, &mut buf, &mut len), Code::Ok);
    assert_eq!(len, MAX_ENCODED);
    // What the encoder wrote is what the wire parser reads back.
    match dta_wire::parse(&buf[..len], dta_wire::prototype::BaseFormat::Short).unwrap() {
        dta_wire::Datagram::Native(d) => {
            assert_eq!(d.reports().count(), 1);
        }
        dta_wire::Datagram::Prototype(_) => panic!("native expected"),
    }
    let mut col = 0;
    // SAFETY: valid pointers.
    assert_eq!(
        code_of(unsafe { dta_sketch_cm_column([1; 4].as_ptr(), 4, 0, 1000, &mut col) }),
        Code::Invalid
    );
}

#[test]
fn error_names_cover_every_code() {
    for c in Code::ALL {
        // SAFETY: static NUL-terminated names.
        let n = unsafe { CStr::from_ptr(dta_error_name(c as i32)) };
        assert_eq!(n, c.name());
        assert_ne!(n.to_bytes(), b"unknown_code");
    }
    // SAFETY: static.
    assert_eq!(
        unsafe { CStr::from_ptr(dta_error_name(-99)) }.to_bytes(),
        b"unknown_code"
    );
}

/// The header declares exactly the exported functions, and its constants are the library's.
#[test]
fn the_header_matches_the_library() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../..");
    let h = std::fs::read_to_string(format!("{root}/c/include/dta/dta.h")).unwrap();
    let mut exported = vec![];
    for f in [
        "lib.rs",
        "handle.rs",
        "encode.rs",
        "query.rs",
        "approsync.rs",
    ] {
        let src =
            std::fs::read_to_string(format!("{}/src/{f}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        for l in src.lines() {
            if let Some(rest) = l.split("extern \"C\" fn ").nth(1) {
                exported.push(rest.split('(').next().unwrap().to_string());
            }
        }
    }
    assert!(exported.len() >= 20, "{exported:?}");
    for name in &exported {
        assert!(
            h.contains(&format!(" {name}(")) || h.contains(&format!("*{name}(")),
            "dta.h lacks {name}"
        );
    }
    let declared = h.lines().filter_map(|l| {
        let l = l.trim_start();
        let (ret, rest) = (l.starts_with("int ") || l.starts_with("const char *"), l);
        ret.then(|| {
            rest.split('(')
                .next()
                .unwrap()
                .rsplit([' ', '*'])
                .next()
                .unwrap()
                .to_string()
        })
    });
    for d in declared {
        assert!(
            exported.contains(&d),
            "dta.h declares {d}, the library does not export it"
        );
    }
    let define = |name: &str| -> u64 {
        let l = h
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap();
        l.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    assert_eq!(define("DTA_REJECT_REASONS"), REJECT_REASONS as u64);
    assert_eq!(define("DTA_PRIMITIVES"), PRIMITIVES as u64);
    assert_eq!(define("DTA_MAX_ENCODED"), MAX_ENCODED as u64);
    for c in Code::ALL {
        let name = format!("DTA_E_{}", c.name().to_str().unwrap().to_uppercase());
        let name = match c {
            Code::Null => "DTA_E_NULL".into(),
            Code::Invalid => "DTA_E_INVALID".into(),
            _ => name,
        };
        assert!(
            h.contains(&format!("{name} = {}", c as i32)),
            "dta.h lacks {name} = {}",
            c as i32
        );
    }
}

/// The structs' layouts C sees (c/tests/capi.c checks the same sizes from the C side).
#[test]
fn struct_layouts_are_the_headers() {
    use std::mem::{align_of, offset_of, size_of};
    assert_eq!((size_of::<DtaHeader>(), align_of::<DtaHeader>()), (12, 4));
    assert_eq!(offset_of!(DtaHeader, priority), 8);
    assert_eq!(
        size_of::<DtaStats>(),
        8 * (1 + PRIMITIVES + 1 + REJECT_REASONS + 7)
    );
    assert_eq!(offset_of!(DtaStats, rejects), 8 * (2 + PRIMITIVES));
    assert_eq!(size_of::<DtaListRead>(), 32);
    assert_eq!(offset_of!(DtaListRead, next_tail), 16);
}

/// Ingest one datagram into open collector `c`; it must be accepted.
fn ingest_ok(c: *mut DtaCollector, datagram: &[u8], cfg: &str) {
    // SAFETY: `c` is open; the pointer and length are the slice's.
    let rc = unsafe { dta_collector_ingest(c, datagram.as_ptr(), datagram.len()) };
    assert_eq!(code_of(rc), Code::Ok, "{cfg}: {}", last_error());
}

/// The simulation's configurations open, and reports shaped as their comments say (13-byte flow
/// keys, 8-byte port keys, 16-byte drop entries, 12-byte Count-Min columns synced with ApproSync)
/// are accepted and answered.
#[test]
fn the_simulation_configurations_take_the_reports_they_document() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../..");
    for cfg in ["examples/invisiflow.toml", "sim/smoke.toml"] {
        let dir = tempfile::tempdir().unwrap();
        let path = CString::new(format!("{root}/{cfg}")).unwrap();
        let regions = CString::new(dir.path().to_str().unwrap()).unwrap();
        let mut c = ptr::null_mut();
        // SAFETY: valid pointers.
        let rc = unsafe { dta_collector_open_dir(path.as_ptr(), regions.as_ptr(), &mut c) };
        assert_eq!(code_of(rc), Code::Ok, "{cfg}: {}", last_error());
        let (mut buf, mut len) = ([0u8; 128], 0usize);
        let flow = [10, 0, 0, 1, 10, 0, 1, 2, 0x03, 0xe8, 0, 80, 6];
        let h = header(3);
        // SAFETY (each block): valid pointers and lengths; `c` open.
        unsafe {
            assert_eq!(
                code_of(dta_encode_postcard(
                    &h,
                    flow.as_ptr(),
                    13,
                    0,
                    1,
                    19,
                    buf.as_mut_ptr(),
                    128,
                    &mut len
                )),
                Code::Ok
            );
            ingest_ok(c, &buf[..len], cfg);
            let port = [0, 0, 0, 19, 0, 2, 0, 7];
            assert_eq!(
                code_of(dta_encode_key_increment(
                    &h,
                    port.as_ptr(),
                    8,
                    9000,
                    2,
                    buf.as_mut_ptr(),
                    128,
                    &mut len
                )),
                Code::Ok
            );
            ingest_ok(c, &buf[..len], cfg);
            let drop_entry = [7u8; 16];
            assert_eq!(
                code_of(dta_encode_append(
                    &h,
                    19,
                    drop_entry.as_ptr(),
                    16,
                    buf.as_mut_ptr(),
                    128,
                    &mut len
                )),
                Code::Ok
            );
            ingest_ok(c, &buf[..len], cfg);
            // Per-flow accounting: the ApproSync Sketch-Merge store of the flow's half takes
            // one column at a time, cumulative, in any order (a lost sync healed by the next).
            let columns = if cfg.starts_with("sim/") { 256 } else { 65_536 };
            let (mut half, mut cols) = (0u32, [0u32; 3]);
            assert_eq!(
                code_of(dta_sketch_cm_column(flow.as_ptr(), 13, 3, 2, &mut half)),
                Code::Ok
            );
            for (r, c) in cols.iter_mut().enumerate() {
                assert_eq!(
                    code_of(dta_sketch_cm_column(
                        flow.as_ptr(),
                        13,
                        r as u32,
                        columns,
                        c
                    )),
                    Code::Ok
                );
            }
            let sketch = store(["flowsync0", "flowsync1"][half as usize]);
            let estimate = |c: *mut DtaCollector| {
                let mut est = 0u64;
                let rc = dta_query_sketch(c, sketch.as_ptr(), flow.as_ptr(), 13, &mut est);
                (code_of(rc), est)
            };
            assert_eq!(estimate(c).0, Code::NotMerged, "{cfg}: before any sync");
            // Switch 16 syncs 5, then 9 (7 lost, arriving last); switch 17 syncs 4; each sync
            // names the row of the flow's column (a column's other rows count other flows).
            for (reporter, count) in [(16u32, 5u32), (16, 9), (17, 4), (16, 7)] {
                for r in (0..3).rev() {
                    let mut col = [0u8; 12];
                    col[4 * r..4 * r + 4].copy_from_slice(&count.to_be_bytes());
                    assert_eq!(
                        code_of(dta_encode_sketch_column(
                            &header(reporter),
                            3 + half as u16,
                            cols[r] as u16,
                            1,
                            col.as_ptr(),
                            12,
                            buf.as_mut_ptr(),
                            128,
                            &mut len
                        )),
                        Code::Ok
                    );
                    ingest_ok(c, &buf[..len], cfg);
                }
            }
            assert_eq!(estimate(c), (Code::Ok, 13), "{cfg}: {}", last_error());
            assert_eq!(code_of(dta_collector_flush(c)), Code::Ok);
            let (mut path, mut hops) = ([0u32; 8], 0usize);
            let rc = dta_query_postcard_path(
                c,
                store("paths").as_ptr(),
                flow.as_ptr(),
                13,
                path.as_mut_ptr(),
                8,
                &mut hops,
            );
            assert_eq!(
                (code_of(rc), &path[..hops]),
                (Code::Ok, &[19u32][..]),
                "{cfg}: {}",
                last_error()
            );
            assert_eq!(code_of(dta_collector_close(c)), Code::Ok);
        }
    }
}

/// Sequence numbers a reporter skipped beyond the tracker's window are counted lost; a datagram
/// received twice is counted a duplicate.
#[test]
fn stats_count_sequence_loss_and_duplicates() {
    let o = open();
    let (mut buf, mut len) = ([0u8; 128], 0usize);
    for seq in [0u32, 1, 1, 100_000] {
        let mut h = header(5);
        h.seq = seq;
        // SAFETY: valid pointers.
        let rc = unsafe {
            dta_encode_key_write(
                &h,
                [1; 4].as_ptr(),
                4,
                [2; 4].as_ptr(),
                4,
                2,
                buf.as_mut_ptr(),
                128,
                &mut len,
            )
        };
        assert_eq!(code_of(rc), Code::Ok);
        assert_eq!(ingest(&o, (buf, len)), Code::Ok, "{}", last_error());
    }
    let mut s = std::mem::MaybeUninit::<DtaStats>::uninit();
    // SAFETY: valid pointers.
    assert_eq!(
        code_of(unsafe { dta_collector_stats(o.c, s.as_mut_ptr()) }),
        Code::Ok
    );
    // SAFETY: written on success.
    let s = unsafe { s.assume_init() };
    assert_eq!(s.duplicates, 1);
    assert!(s.lost > 0 && s.lost < 100_000, "lost {}", s.lost);
}

/// A switch in C keeps its sketch with `dta_approsync_*`, sends the due columns with
/// `dta_encode_sketch_column` (some lost on the way), then a full resync: the ApproSync store
/// answers every flow as the two switches counted it together.
#[test]
fn approsync_sketches_sync_into_the_store_through_loss() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("dta.toml");
    std::fs::write(
        &p,
        "region_dir = \"regions\"\n[[store]]\nname = \"flows\"\nkind = \"sketch-merge\"\n\
         sketch_id = 5\nsketch = \"count-min\"\nrows = 3\ncolumns = 1024\nreporters = 2\n\
         sync = \"approsync\"\n",
    )
    .unwrap();
    let path = CString::new(p.to_str().unwrap()).unwrap();
    let new = |theta: f64| {
        let mut s = ptr::null_mut();
        // SAFETY: a valid out pointer.
        let rc = unsafe { dta_approsync_new(3, 1024, theta, 5, 1, &mut s) };
        assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
        s
    };
    // SAFETY (the block): every handle is live until freed at the end; pointers and lengths
    // are the buffers'.
    unsafe {
        let mut c = ptr::null_mut();
        assert_eq!(code_of(dta_collector_open(path.as_ptr(), &mut c)), Code::Ok);
        let switches = [new(1.0), new(1.0)];
        let union = new(1.0); // never sent: the expectation
        let (mut buf, mut len) = ([0u8; 128], 0usize);
        let mut sent = 0usize;
        // Send every due column of `s` as reporter `id`, losing every 7th datagram if `lossy`.
        let mut drain = |s: *mut DtaApproSync, id: u32, lossy: bool| {
            let (mut col, mut data, mut n) = (0u16, [0u8; 12], 0usize);
            loop {
                let rc = dta_approsync_next_due(s, &mut col, data.as_mut_ptr(), 12, &mut n);
                if code_of(rc) == Code::Empty {
                    break;
                }
                assert_eq!((code_of(rc), n), (Code::Ok, 12), "{}", last_error());
                assert_eq!(
                    code_of(dta_encode_sketch_column(
                        &header(id),
                        5,
                        col,
                        1,
                        data.as_ptr(),
                        n,
                        buf.as_mut_ptr(),
                        128,
                        &mut len
                    )),
                    Code::Ok
                );
                sent += 1;
                if !(lossy && sent % 7 == 0) {
                    ingest_ok(c, &buf[..len], "approsync");
                }
            }
        };
        let flow = |f: u32| f.wrapping_mul(2_654_435_761).to_be_bytes();
        for i in 0..4000u32 {
            let f = flow((i * i) % 300);
            let s = (i % 2) as usize;
            let mut newly_due = -1;
            let inc = 1 + i % 3;
            let rc = dta_approsync_update(switches[s], f.as_ptr(), 4, inc, &mut newly_due);
            assert_eq!(code_of(rc), Code::Ok);
            assert!(newly_due == 0 || newly_due == 1);
            assert_eq!(
                code_of(dta_approsync_update(
                    union,
                    f.as_ptr(),
                    4,
                    inc,
                    ptr::null_mut()
                )),
                Code::Ok
            );
            if i % 250 == 249 {
                drain(switches[s], s as u32 + 1, true);
            }
        }
        for (s, &h) in switches.iter().enumerate() {
            assert_eq!(code_of(dta_approsync_mark_all_due(h)), Code::Ok);
            let mut due = 0usize;
            assert_eq!(code_of(dta_approsync_due(h, &mut due)), Code::Ok);
            assert_eq!(due, 1024);
            drain(h, s as u32 + 1, false);
            assert_eq!(code_of(dta_approsync_due(h, &mut due)), Code::Ok);
            assert_eq!(due, 0);
        }
        let name = store("flows");
        for f in 0..300u32 {
            let k = flow(f);
            let (mut want, mut got) = (0u64, 0u64);
            assert_eq!(
                code_of(dta_approsync_estimate(union, k.as_ptr(), 4, &mut want)),
                Code::Ok
            );
            let rc = dta_query_sketch(c, name.as_ptr(), k.as_ptr(), 4, &mut got);
            assert_eq!(
                (code_of(rc), got),
                (Code::Ok, want),
                "flow {f}: {}",
                last_error()
            );
        }
        let mut st: DtaStats = std::mem::zeroed();
        assert_eq!(code_of(dta_collector_stats(c, &mut st)), Code::Ok);
        assert_eq!(st.rejected, 0);

        // Errors: codes with messages, the column kept due.
        let s = switches[0];
        assert_eq!(
            code_of(dta_approsync_update(
                s,
                b"x".as_ptr(),
                1,
                5,
                ptr::null_mut()
            )),
            Code::Ok
        );
        let (mut col, mut small, mut n) = (0u16, [0u8; 8], 0usize);
        let rc = dta_approsync_next_due(s, &mut col, small.as_mut_ptr(), 8, &mut n);
        assert_eq!(code_of(rc), Code::NoSpace);
        assert!(last_error().contains("12 bytes"), "{}", last_error());
        let mut due = 0usize;
        assert_eq!(code_of(dta_approsync_due(s, &mut due)), Code::Ok);
        assert!(due > 0, "a column that did not fit stays due");
        let rc = dta_approsync_next_due(s, ptr::null_mut(), small.as_mut_ptr(), 8, &mut n);
        assert_eq!(code_of(rc), Code::Null);
        let rc = dta_approsync_due(ptr::null_mut(), &mut due);
        assert_eq!(code_of(rc), Code::Null);
        assert!(last_error().contains("sketch is NULL"), "{}", last_error());
        let mut bad = ptr::null_mut();
        for (rows, columns, theta) in [(17, 1024, 1.0), (3, 1000, 1.0), (3, 1024, f64::NAN)] {
            let rc = dta_approsync_new(rows, columns, theta, 5, 1, &mut bad);
            assert_eq!(code_of(rc), Code::Invalid, "{rows} x {columns}, {theta}");
            assert!(!last_error().is_empty());
            assert!(bad.is_null());
        }
        assert_eq!(code_of(dta_approsync_next_epoch(s, 2)), Code::Ok);
        let rc = dta_approsync_next_due(s, &mut col, small.as_mut_ptr(), 8, &mut n);
        assert_eq!(
            code_of(rc),
            Code::Empty,
            "a new epoch starts with nothing due"
        );

        for h in [switches[0], switches[1], union] {
            dta_approsync_free(h);
        }
        dta_approsync_free(ptr::null_mut());
        assert_eq!(code_of(dta_collector_close(c)), Code::Ok);
    }
}
