//! The requester and the software responder over the in-memory link: every primitive lands,
//! exactly once even with loss, duplication and reordering both ways; access errors are NAKed
//! and change nothing; FETCH_ADD returns the original value, also for a duplicate.

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;
use dta_collector::query;
use dta_rdma::{mem_pair, Impaired, Impairment, MemLink};
use dta_rdma_requester::{connect, RequesterConfig};
use dta_rdma_responder::ResponderConfig;
use dta_translator::{Sinks, Translator};

fn rcfg() -> RequesterConfig {
    RequesterConfig::new(T, C.ip)
}

fn run_primitives(imp: Option<(Impairment, Impairment)>, flows: u32) {
    let (tcfg, stores) = embedded();
    let dir = tempfile::tempdir().unwrap();
    let remote = collector(&dir.path().join("remote"), &stores);
    let reference = collector(&dir.path().join("reference"), &stores);
    let (a, b) = mem_pair();
    let (conn, srv, imp_stats) = match imp {
        None => {
            let srv = serve(b, ResponderConfig::new(C), &remote);
            (
                connect(Box::new(a) as Box<dyn dta_rdma::Link>, rcfg()).unwrap(),
                srv,
                None,
            )
        }
        Some((up, down)) => {
            let b = Impaired::new(b, down);
            let a = Impaired::new(a, up);
            let st = (a.stats(), b.stats());
            let srv = serve(b, ResponderConfig::new(C), &remote);
            (
                connect(Box::new(a) as Box<dyn dta_rdma::Link>, rcfg()).unwrap(),
                srv,
                Some(st),
            )
        }
    };
    assert_eq!(conn.stores.len(), stores.len());
    assert_eq!(conn.stores[0].header.name, "kw");
    assert_eq!(conn.proto.addr, conn.stores[0].data_va());
    assert_eq!(conn.proto.rkey, srv.registrations[0].2);
    let infos = conn.store_infos();
    let sinks = conn.sinks;
    let rstats = sinks.stats();
    let mut t = Translator::new(&tcfg, &infos, sinks, new_stats()).unwrap();
    let mut reference_t = Translator::colocated(&tcfg, reference.regions(), new_stats()).unwrap();
    let start = Instant::now();
    let sums = feed(&mut t, flows, start);
    feed(&mut reference_t, flows, start);
    assert_eq!(
        t.stats().snapshot()["rejected"],
        reference_t.stats().snapshot()["rejected"]
    );
    assert_eq!(t.sinks().in_flight(), 0, "flush waited for every ACK");
    assert_same_regions(&remote, &reference);
    // The live counters arrive by FETCH_ADD on the header words, exactly once each, as the
    // co-located translator counts them.
    for name in ["kw", "counters"] {
        let (r, l) = (
            remote.store(name).unwrap().region.mem().tally(),
            reference.store(name).unwrap().region.mem().tally(),
        );
        assert_eq!(r, l, "{name}");
        assert!(r.writes > 0, "{name}");
    }
    let counters = &remote.store("counters").unwrap().region;
    for (k, s) in sums {
        assert_eq!(
            query::key_increment(counters, &k.to_be_bytes(), Some(2))
                .unwrap()
                .count,
            s,
            "key {k}"
        );
    }
    let kw = &remote.store("kw").unwrap().region;
    let r = query::key_write(kw, &1_000_007u32.to_be_bytes(), Some(2), 1).unwrap();
    assert_eq!(
        r.data.unwrap(),
        hex(&7u32.wrapping_mul(2_654_435_761).to_be_bytes())
    );
    // Every WRITE WITH IMMEDIATE delivered exactly once: one zero-length write per flagged
    // Key-Write report or Append batch, after its data, its immediate data naming the store and
    // how many flagged reports it covers; together, every flagged report once, also on the
    // collector's notification ring.
    let imm = rstats.immediates.load(Ordering::Relaxed);
    assert!(imm > 0);
    let notes: Vec<_> = srv.notes.try_iter().collect();
    assert_eq!(notes.len() as u64, imm);
    let parse = dta_store::notify::parse_immediate;
    assert!(notes
        .iter()
        .all(|n| parse(n.imm).0 == n.store && n.len == 0));
    let flagged = t.stats().immediates.load(Ordering::Relaxed);
    let announced: u64 = notes.iter().map(|n| parse(n.imm).2 as u64).sum();
    assert_eq!(announced, flagged);
    let mut cursor = srv.cursor;
    let on_ring: u64 = std::iter::from_fn(|| srv.ring.next(&mut cursor, Duration::ZERO))
        .map(|n| n.reports as u64)
        .sum();
    assert_eq!(on_ring, flagged);
    let s = rstats.snapshot();
    assert_eq!(s["naks_remote_access"], 0);
    if let Some((up, down)) = imp_stats {
        let lost = up.dropped.load(Ordering::Relaxed) + down.dropped.load(Ordering::Relaxed);
        assert!(
            lost > 0
                && up.duplicated.load(Ordering::Relaxed) > 0
                && up.reordered.load(Ordering::Relaxed) > 0
        );
        assert!(s["retransmitted_packets"].as_u64().unwrap() > 0, "{s}");
        assert!(srv.stats.duplicates.load(Ordering::Relaxed) > 0);
        eprintln!("requester {s}\nresponder {}", srv.stats.snapshot());
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn every_primitive_lands_over_a_clean_link() {
    run_primitives(None, 3000);
}

#[test]
fn exactly_once_with_loss_duplication_and_reordering_both_ways() {
    let imp = |seed| Impairment {
        loss: 0.05,
        duplicate: 0.02,
        reorder: 0.10,
        reorder_by: Duration::from_millis(3),
        delay: Duration::from_micros(100),
        seed,
    };
    run_primitives(Some((imp(1), imp(2))), 3000);
}

fn connected(
    dir: &std::path::Path,
    up: Option<Impairment>,
) -> (
    dta_rdma_requester::Connection<Box<dyn dta_rdma::Link>>,
    Running,
    dta_collector::Collector,
) {
    let (_, stores) = embedded();
    let remote = collector(dir, &stores);
    let (a, b) = mem_pair();
    let srv = serve(b, ResponderConfig::new(C), &remote);
    let link: Box<dyn dta_rdma::Link> = match up {
        Some(i) => Box::new(Impaired::new(a, i)),
        None => Box::new(a),
    };
    (connect(link, rcfg()).unwrap(), srv, remote)
}

fn data(c: &dta_collector::Collector, store: usize, off: u64, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    c.stores()[store].region.mem().read(off, &mut b).unwrap();
    b
}

#[test]
fn wrong_rkey_or_out_of_region_is_naked_and_changes_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, srv, remote) = connected(dir.path(), None);
    let mut s = conn.sinks;
    let st = s.stats();
    let kw = &conn.stores[0];
    let (va, len, rkey) = (kw.data_va(), kw.header.data_len, kw.rkey);
    // Wrong R_Key.
    s.write_raw(va, rkey ^ 0x100, &[0xaa; 8], None).unwrap();
    let e = s.flush().unwrap_err();
    assert!(e.to_string().contains("remote_access_error"), "{e}");
    // Straddling the end of the data area.
    s.write_raw(va + len - 4, rkey, &[0xbb; 8], None).unwrap();
    assert!(s.flush().is_err());
    // The header page (registered, but not writable).
    s.write_raw(kw.region_va, rkey, &[0xcc; 8], None).unwrap();
    assert!(s.flush().is_err());
    // A multi-packet write whose RETH length overruns: nothing of it is written.
    s.write_raw(va + len - 1500, rkey, &[0xdd; 3000], None)
        .unwrap();
    assert!(s.flush().is_err());
    assert_eq!(st.naks_remote_access.load(Ordering::Relaxed), 4);
    assert_eq!(srv.stats.naks_remote_access.load(Ordering::Relaxed), 4);
    assert!(data(&remote, 0, 0, 8).iter().all(|&b| b == 0));
    assert!(data(&remote, 0, len - 1500, 1500).iter().all(|&b| b == 0));
    let page = remote.stores()[0].region.header().to_page();
    assert_eq!(
        dta_store::Header::parse(&page).unwrap(),
        *remote.stores()[0].region.header()
    );
    // The sink's own bounds check refuses before sending.
    assert!(s.write(0, len - 4, &[1; 8], false).is_err());
    // The connection still works: a multi-packet write (First/Middle/Last) lands.
    let big: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    s.write_raw(va + 4096, rkey, &big, Some(7)).unwrap();
    s.flush().unwrap();
    assert_eq!(data(&remote, 0, 4096, 3000), big);
    let n = srv.notes.recv_timeout(dta_testkit::WAIT).unwrap();
    assert_eq!((n.store, n.offset, n.len, n.imm), (0, 4096, 3000, 7));
    s.disconnect().unwrap();
    // The responder counts the DREQ on its own thread.
    dta_testkit::wait_until(
        "the responder to count the DREQ",
        || srv.stats.cm_dreq.load(Ordering::Relaxed),
        |&n| n >= 1,
    );
    assert_eq!(srv.stats.cm_dreq.load(Ordering::Relaxed), 1);
}

#[test]
fn fetch_add_returns_the_original_value_also_for_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    // Every frame to the responder is delivered twice.
    let dup = Impairment {
        duplicate: 1.0,
        seed: 3,
        ..Default::default()
    };
    let (conn, srv, remote) = connected(dir.path(), Some(dup));
    let mut s = conn.sinks;
    let ki = remote
        .stores()
        .iter()
        .position(|x| x.name == "counters")
        .unwrap();
    let mut expect = 0u64;
    for i in 1..=50u64 {
        assert_eq!(s.fetch_add_wait(ki, 64, i).unwrap(), expect);
        expect += i;
    }
    s.flush().unwrap();
    assert_eq!(
        remote.stores()[ki].region.mem().load_u64(64).unwrap(),
        expect
    );
    // The copy of the last FETCH_ADD may still be on its way when its first copy's ACK is in.
    dta_testkit::wait_until(
        "the responder to replay the 50 duplicates",
        || srv.stats.duplicate_atomics_replayed.load(Ordering::Relaxed),
        |&n| n >= 50,
    );
    assert_eq!(srv.stats.fetch_adds.load(Ordering::Relaxed), 50);
}

#[test]
fn unknown_port_is_rejected_with_a_clear_error() {
    let (_, stores) = embedded();
    let dir = tempfile::tempdir().unwrap();
    let remote = collector(dir.path(), &stores[..1]);
    let (a, b) = mem_pair();
    let _srv = serve(b, ResponderConfig::new(C), &remote);
    let cfg = RequesterConfig {
        port: 9999,
        ..rcfg()
    };
    let e = connect::<MemLink>(a, cfg).err().unwrap();
    assert!(e.to_string().contains("invalid service id"), "{e}");
}

#[test]
fn rate_limit_paces_messages() {
    let (_, stores) = embedded();
    let dir = tempfile::tempdir().unwrap();
    let remote = collector(dir.path(), &stores[..1]);
    let (a, b) = mem_pair();
    let _srv = serve(b, ResponderConfig::new(C), &remote);
    let cfg = RequesterConfig {
        rate: Some(2000.0),
        ..rcfg()
    };
    let mut s = connect::<MemLink>(a, cfg).unwrap().sinks;
    let t0 = Instant::now();
    for i in 0..200u64 {
        s.write(0, i * 8, &i.to_le_bytes(), false).unwrap();
    }
    s.flush().unwrap();
    let el = t0.elapsed();
    assert!(el >= Duration::from_millis(90), "{el:?}");
    assert!(s.stats().rate_limited_waits.load(Ordering::Relaxed) > 0);
    assert_eq!(
        remote.stores()[0].region.mem().load_u64(199 * 8).unwrap(),
        199
    );
}
