//! Trust at the ingress: a datagram from a source outside the translator's allow-list is not
//! parsed, applied, sequenced or NACKed, and is counted as `source_not_allowed`; a store's own
//! allow-list restricts the reports for that store.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use dta_store::Region;
use dta_translator::{Reason, Stats, Translator, TranslatorConfig};
use dta_wire::native::DatagramBuilder;
use dta_wire::prefix::AllowList;
use dta_wire::{Opcode, Priority, Report};

/// Whether every byte of every region's data area is still zero.
fn untouched(regions: &[Arc<Region>]) -> bool {
    regions.iter().all(|r| {
        let mem = r.mem();
        let mut buf = vec![0u8; mem.len() as usize];
        mem.read(0, &mut buf).unwrap();
        buf.iter().all(|&b| b == 0)
    })
}

/// A retransmittable datagram (seq `seq`) with a Key-Write, a Key-Increment, an Append entry
/// and a postcard.
fn datagram(seq: u32) -> Vec<u8> {
    let mut buf = vec![0u8; 1500];
    let mut b = DatagramBuilder::new(&mut buf, Priority::High, true, 9, seq).unwrap();
    for r in [
        Report::KeyWrite {
            key: &[1, 2, 3, 4],
            data: &[5; 4],
            redundancy: 2,
            immediate: false,
        },
        Report::KeyIncrement {
            key: &[1, 2, 3, 4],
            counter: 7,
            redundancy: 2,
            immediate: false,
        },
        Report::Append {
            list_id: 1,
            data: &[6; 4],
            immediate: false,
        },
        Report::Postcard {
            key: &[1, 1, 1, 1],
            hop: 0,
            path_len: 1,
            value: 3,
            immediate: false,
        },
    ] {
        b.push(&r).unwrap();
    }
    let n = b.finish();
    buf.truncate(n);
    buf
}

fn translator(regions: &[Arc<Region>], allow: &str) -> Translator<dta_translator::RegionSinks> {
    let cfg = TranslatorConfig {
        allow: toml::from_str::<toml::Value>(&format!("a = {allow}")).unwrap()["a"]
            .clone()
            .try_into()
            .unwrap(),
        ..TranslatorConfig::default()
    };
    Translator::colocated(&cfg, regions.to_vec(), Arc::new(Stats::default())).unwrap()
}

#[test]
fn a_source_outside_the_allow_list_changes_nothing_and_gets_no_nack() {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let mut t = translator(&regions, r#"["127.0.0.1/32"]"#);
    let spoofed: SocketAddr = "127.0.0.2:4000".parse().unwrap();
    let v6: SocketAddr = "[::1]:4000".parse().unwrap();
    // Seq 5 first: from an allowed source this is a gap and would be NACKed.
    for seq in [5, 0, 1, 2] {
        t.handle_datagram(&datagram(seq), spoofed, Instant::now());
        t.handle_datagram(&datagram(seq), v6, Instant::now());
    }
    t.flush_all();
    let s = t.stats();
    assert_eq!(s.rejected_by(Reason::SourceNotAllowed), 8);
    assert_eq!(s.total_rejected(), 8);
    for op in [
        Opcode::KeyWrite,
        Opcode::KeyIncrement,
        Opcode::Append,
        Opcode::Postcarding,
    ] {
        assert_eq!(s.reports_of(op), 0, "{op:?}");
    }
    assert_eq!(
        t.drain_nacks().count(),
        0,
        "no NACK to a source not allowed"
    );
    assert!(untouched(&regions), "a spoofed source wrote memory");

    // The allowed source is applied (and its first datagram starts the sequence).
    let ok: SocketAddr = "127.0.0.1:4000".parse().unwrap();
    t.handle_datagram(&datagram(0), ok, Instant::now());
    t.flush_all();
    assert_eq!(t.stats().reports_of(Opcode::KeyWrite), 1);
    assert_eq!(t.stats().reports_of(Opcode::Append), 1);
    assert!(!untouched(&regions));
}

#[test]
fn ipv6_prefixes_and_mapped_ipv4_sources() {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let mut t = translator(&regions, r#"["::1/128", "10.0.0.0/8"]"#);
    for (src, applied) in [
        ("[::1]:1", true),
        ("[::2]:1", false),
        ("[::ffff:10.1.2.3]:1", true),
        ("[::ffff:127.0.0.1]:1", false),
        ("127.0.0.1:1", false),
    ] {
        let before = t.stats().reports_of(Opcode::KeyWrite);
        let mut buf = [0u8; 64];
        let mut b = DatagramBuilder::new(&mut buf, Priority::Low, false, 1, 0).unwrap();
        b.push(&Report::KeyWrite {
            key: &[1; 4],
            data: &[2; 4],
            redundancy: 1,
            immediate: false,
        })
        .unwrap();
        let n = b.finish();
        t.handle_datagram(&buf[..n], src.parse().unwrap(), Instant::now());
        assert_eq!(
            t.stats().reports_of(Opcode::KeyWrite) - before,
            applied as u64,
            "{src}"
        );
    }
    assert_eq!(t.stats().rejected_by(Reason::SourceNotAllowed), 3);
}

#[test]
fn a_stores_allow_list_restricts_its_reports_only() {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let mut t = translator(&regions, r#"["127.0.0.0/8"]"#);
    t.set_store_allow(
        "kw",
        "127.0.0.9/32"
            .parse::<dta_wire::prefix::Prefix>()
            .map(|p| AllowList::new(vec![p]))
            .unwrap(),
    )
    .unwrap();
    t.set_store_allow("events", AllowList::new(vec![])).unwrap();
    assert!(t.set_store_allow("nope", AllowList::any()).is_err());
    t.handle_datagram(&datagram(0), common::src(), Instant::now());
    t.flush_all();
    let s = t.stats();
    // Key-Write ("kw") and Append ("events") refused; Key-Increment and Postcarding applied.
    assert_eq!(s.rejected_by(Reason::SourceNotAllowed), 2);
    assert_eq!(s.reports_of(Opcode::KeyWrite), 0);
    assert_eq!(s.reports_of(Opcode::KeyIncrement), 1);
    assert_eq!(s.reports_of(Opcode::Postcarding), 1);
    assert_eq!(
        s.append_batches.load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    assert_eq!(
        s.append_partial_batches
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    // From the store's own source, its Key-Write is applied.
    t.handle_datagram(&datagram(1), "127.0.0.9:1".parse().unwrap(), Instant::now());
    assert_eq!(t.stats().reports_of(Opcode::KeyWrite), 1);
}
