//! The C ABI's column of the conformance suite (docs/modes.md; the other modes are in
//! crates/front/dta/tests/conformance.rs, which also checks that the table, the document and these
//! tests agree): every promise of `dta_node::modes::TABLE` for `dta_collector_open`, through the
//! functions a C program calls. The embedding program is the receive loop: it hands the node
//! datagrams with their source (`dta_collector_ingest_from`) and stops it with
//! `dta_collector_close`; its counters are `dta_stats`.

use std::ffi::{CStr, CString};
use std::net::Ipv4Addr;
use std::ptr;

use dta_node::modes::{support, Mode, Promise, Support};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Priority, Report};

use super::*;
use crate::handle::code_of;

const GOOD: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const SPOOF: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
const GOOD2: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 4);

/// The conformance suite's configuration (as crates/front/dta/tests/conformance.rs writes it), with
/// `extra` at the end.
fn config(extra: &str) -> String {
    format!(
        "region_dir = 'regions'\n[translator]\nallow = ['{GOOD}/32', '{GOOD2}/32']\n\
         append_flush_ms = 60000\n\
         [[store]]\nname = 'kw'\nkind = 'key-write'\nslots = 4096\nkey_len = 4\ndata_len = 4\n\
         [[store]]\nname = 'locked'\nkind = 'key-write'\nslots = 1024\nkey_len = 8\n\
         data_len = 4\nallow = ['{GOOD2}/32']\n\
         [[store]]\nname = 'ki'\nkind = 'key-increment'\ncounters = 4096\nkey_len = 4\n\
         [[store]]\nname = 'ap'\nkind = 'append'\nlists = 4\ncapacity = 256\nentry_len = 4\n\
         batch = 16\n{extra}"
    )
}

fn last_error() -> String {
    // SAFETY: never NULL, NUL-terminated.
    unsafe { CStr::from_ptr(dta_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// An open node over a fresh directory.
struct Node {
    dir: Option<tempfile::TempDir>,
    c: *mut DtaCollector,
}

impl Node {
    fn open(extra: &str) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("dta.toml");
        std::fs::write(&p, config(extra)).unwrap();
        let path = CString::new(p.to_str().unwrap()).unwrap();
        let mut c = ptr::null_mut();
        // SAFETY: a valid string and out pointer.
        let rc = unsafe { dta_collector_open(path.as_ptr(), &mut c) };
        assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
        Node { dir: Some(dir), c }
    }

    fn ingest(&self, from: Ipv4Addr, d: &[u8]) -> Code {
        // SAFETY: an open handle and a readable buffer.
        code_of(unsafe {
            dta_collector_ingest_from(self.c, d.as_ptr(), d.len(), from.into(), 5000)
        })
    }

    fn stats(&self) -> DtaStats {
        let mut s = std::mem::MaybeUninit::<DtaStats>::uninit();
        // SAFETY: an open handle; `s` is written on success.
        let rc = unsafe { dta_collector_stats(self.c, s.as_mut_ptr()) };
        assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
        // SAFETY: written by dta_collector_stats.
        unsafe { s.assume_init() }
    }

    fn found(&self, store: &str, key: &[u8]) -> bool {
        let name = CString::new(store).unwrap();
        let (mut out, mut len) = ([0u8; 64], 0usize);
        // SAFETY: an open handle, valid buffers.
        let rc = unsafe {
            dta_query_key_write(
                self.c,
                name.as_ptr(),
                key.as_ptr(),
                key.len(),
                1,
                out.as_mut_ptr(),
                out.len(),
                &mut len,
            )
        };
        code_of(rc) == Code::Ok
    }

    /// Close (flushing), keeping the directory.
    fn close(mut self) -> tempfile::TempDir {
        let c = std::mem::replace(&mut self.c, ptr::null_mut());
        // SAFETY: opened by `open`, closed once.
        let rc = unsafe { dta_collector_close(c) };
        assert_eq!(code_of(rc), Code::Ok, "{}", last_error());
        self.dir.take().expect("open")
    }

    fn region_dir(&self) -> std::path::PathBuf {
        self.dir.as_ref().expect("open").path().join("regions")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if !self.c.is_null() {
            // SAFETY: opened by `open`, closed once.
            unsafe { dta_collector_close(self.c) };
        }
    }
}

fn reason(name: &str) -> usize {
    dta_translator::Reason::ALL
        .iter()
        .position(|r| r.name() == name)
        .unwrap()
}

fn datagram(priority: Priority, reports: &[Report<'_>]) -> Vec<u8> {
    let mut buf = vec![0u8; 1500];
    let mut b = DatagramBuilder::new(&mut buf, priority, false, 1, 0).unwrap();
    for r in reports {
        b.push(r).unwrap();
    }
    let n = b.finish();
    buf.truncate(n);
    buf
}

fn kw(key: u32, immediate: bool) -> Vec<u8> {
    let k = key.to_be_bytes();
    datagram(
        Priority::Medium,
        &[Report::KeyWrite {
            key: &k,
            data: &k,
            redundancy: 2,
            immediate,
        }],
    )
}

fn kw8(key: u64) -> Vec<u8> {
    let k = key.to_be_bytes();
    datagram(
        Priority::Medium,
        &[Report::KeyWrite {
            key: &k,
            data: &k[4..],
            redundancy: 2,
            immediate: false,
        }],
    )
}

/// The cell as the table has it (every C ABI cell is kept).
fn kept(p: Promise) {
    assert_eq!(support(p, Mode::Capi), Support::Kept, "{p:?}");
}

#[test]
fn cell_allow_capi() {
    kept(Promise::Allow);
    let n = Node::open("");
    assert_eq!(n.ingest(SPOOF, &kw(1, false)), Code::Rejected);
    assert!(
        last_error().contains("source_not_allowed"),
        "{}",
        last_error()
    );
    assert_eq!(n.ingest(GOOD, &kw(2, false)), Code::Ok);
    assert_eq!(n.stats().rejects[reason("source_not_allowed")], 1);
    assert!(
        !n.found("kw", &1u32.to_be_bytes()),
        "a spoofed report was stored"
    );
    assert!(n.found("kw", &2u32.to_be_bytes()));
}

#[test]
fn cell_store_allow_capi() {
    kept(Promise::StoreAllow);
    let n = Node::open("");
    assert_eq!(n.ingest(GOOD, &kw8(5)), Code::Rejected);
    assert_eq!(n.ingest(GOOD2, &kw8(6)), Code::Ok);
    assert_eq!(n.stats().rejects[reason("source_not_allowed")], 1);
    assert!(!n.found("locked", &5u64.to_be_bytes()));
    assert!(n.found("locked", &6u64.to_be_bytes()));
}

#[test]
fn cell_rules_capi() {
    kept(Promise::Rules);
    let n = Node::open(
        "[[translator.rules]]\nname = 'no-ee'\nprimitive = 'key-write'\nstore = 'kw'\n\
         key_prefix = '000000ee'\naction = 'drop'\n",
    );
    n.ingest(GOOD, &kw(0xee, false));
    assert_eq!(n.ingest(GOOD, &kw(0xef, false)), Code::Ok);
    assert!(
        !n.found("kw", &0xeeu32.to_be_bytes()),
        "dropped by the rule"
    );
    assert!(n.found("kw", &0xefu32.to_be_bytes()));
}

#[test]
fn cell_priority_capi() {
    kept(Promise::Priority);
    let n = Node::open("[translator.flow_control]\nwrite_budget = 20000\nburst = 2000\n");
    let mut high = vec![];
    let mut low_keys = 0u32;
    for i in 0..300u32 {
        let keys: Vec<[u8; 4]> = (0..8).map(|j| (i * 8 + j).to_be_bytes()).collect();
        let reports: Vec<Report<'_>> = keys
            .iter()
            .map(|k| Report::KeyWrite {
                key: k,
                data: k,
                redundancy: 2,
                immediate: false,
            })
            .collect();
        n.ingest(GOOD, &datagram(Priority::Low, &reports));
        low_keys += 8;
        if i % 30 == 0 {
            let k = (1_000_000 + i).to_be_bytes();
            high.push(k);
            n.ingest(
                GOOD,
                &datagram(
                    Priority::High,
                    &[Report::KeyWrite {
                        key: &k,
                        data: &k,
                        redundancy: 2,
                        immediate: false,
                    }],
                ),
            );
        }
    }
    // SAFETY: an open handle.
    assert_eq!(code_of(unsafe { dta_collector_flush(n.c) }), Code::Ok);
    for k in &high {
        assert!(n.found("kw", k), "a high-priority report lost");
    }
    let stored = (0..low_keys)
        .filter(|k| n.found("kw", &k.to_be_bytes()))
        .count() as u32;
    assert!(
        stored < low_keys,
        "the low-priority burst beyond the bucket was all stored"
    );
}

#[test]
fn cell_notifications_capi() {
    kept(Promise::Notifications);
    let n = Node::open("");
    let ring = dta_store::notify::NotifyRing::open_or_create(
        &n.region_dir(),
        dta_store::notify::DEFAULT_CAPACITY,
    )
    .unwrap();
    let mut cursor = ring.subscribe();
    assert_eq!(n.ingest(GOOD, &kw(0x77, true)), Code::Ok);
    let notice = ring
        .next(&mut cursor, std::time::Duration::from_secs(5))
        .expect("the flagged report announced");
    assert_eq!(
        (notice.store.as_str(), notice.key.as_str()),
        ("kw", "00000077")
    );
}

#[test]
fn cell_flush_on_stop_capi() {
    kept(Promise::FlushOnStop);
    let n = Node::open("");
    for i in 0..3u32 {
        let e = (100 + i).to_be_bytes();
        let d = datagram(
            Priority::Medium,
            &[Report::Append {
                list_id: 1,
                data: &e,
                immediate: false,
            }],
        );
        assert_eq!(n.ingest(GOOD, &d), Code::Ok);
    }
    let dir = n.close();
    let region = dta_store::Region::open_read_only(&dir.path().join("regions/ap.region")).unwrap();
    let l = dta_collector::query::list(&region, 1, None, 10, dta_collector::query::raw_records)
        .unwrap();
    assert_eq!(l.entries, vec!["00000064", "00000065", "00000066"]);
}

#[test]
fn cell_metrics_capi() {
    kept(Promise::Metrics);
    let n = Node::open("");
    for k in 0..5 {
        n.ingest(GOOD, &kw(k, false));
    }
    let s = n.stats();
    assert_eq!(s.datagrams, 5);
    assert_eq!(s.reports[0], 5, "Key-Write reports");
    assert_eq!(s.rejected, 0);
}

#[test]
fn cell_rejects_capi() {
    kept(Promise::Rejects);
    let n = Node::open("");
    let mut truncated = kw(9, false);
    truncated.truncate(truncated.len() - 3);
    let bad = [
        vec![0x10, 0x40, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0],
        truncated,
        vec![0x70; 24],
    ];
    for d in &bad {
        assert_eq!(n.ingest(GOOD, d), Code::Rejected);
    }
    let s = n.stats();
    assert_eq!(s.rejected, bad.len() as u64);
    assert_eq!(s.rejects.iter().sum::<u64>(), bad.len() as u64);
}
