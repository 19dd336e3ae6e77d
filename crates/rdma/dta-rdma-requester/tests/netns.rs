//! End to end in network namespaces created here: reporter -> translator (namespace T) -> veth
//! -> software responder (namespace C) -> queries. The translator's link loses 3% and
//! duplicates 2% of its frames in userspace (`Impaired`; this kernel has no sch_netem).
//! Skipped (counted, see `dta_testkit::skip!`) when not root or without `ip`.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use dta_collector::query;
use dta_rdma::link::{ipv4_of, PacketLink};
use dta_rdma::{Endpoint, Impaired, Impairment};
use dta_rdma_requester::{connect, RequesterConfig};
use dta_rdma_responder::{Responder, ResponderConfig};
use dta_reporter::{Protocol, Reporter, ReporterConfig};
use dta_testkit::netns::{enter, VethPair};
use dta_translator::{ingest, Stats, Translator};

#[test]
fn reporter_translator_veth_responder_query() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    let net = VethPair::new("rt", 77);
    let (nt, nc) = (net.a.clone(), net.b.clone());
    let (vt, vc) = (net.dev_a.clone(), net.dev_b.clone());

    let (tcfg, stores) = embedded();
    let dir = tempfile::tempdir().unwrap();
    let remote = collector(dir.path(), &stores);
    let regions = remote.regions();
    let stop_c = Arc::new(AtomicBool::new(false));
    let responder = {
        let (nc, vc, stop) = (nc.clone(), vc.clone(), stop_c.clone());
        std::thread::spawn(move || {
            enter(&nc);
            let link = PacketLink::open(&vc).unwrap();
            let me = Endpoint {
                mac: link.mac(),
                ip: ipv4_of(&vc).unwrap(),
            };
            let mut r = Responder::new(link, ResponderConfig::new(me), regions);
            r.run(&stop).unwrap();
            r.stats().snapshot()
        })
    };

    let flows = 2000u32;
    let stats = Arc::new(Stats::default());
    let stop_t = Arc::new(AtomicBool::new(false));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<SocketAddr>();
    let translator = {
        let (nt, vt, stop, stats) = (nt.clone(), vt.clone(), stop_t.clone(), stats.clone());
        std::thread::spawn(move || {
            enter(&nt);
            let link = PacketLink::open(&vt).unwrap();
            let me = Endpoint {
                mac: link.mac(),
                ip: ipv4_of(&vt).unwrap(),
            };
            let imp = Impairment {
                loss: 0.03,
                duplicate: 0.02,
                seed: 9,
                ..Default::default()
            };
            let conn = connect(
                Impaired::new(link, imp),
                RequesterConfig::new(me, [10, 77, 0, 2]),
            )
            .unwrap();
            let infos = conn.store_infos();
            let rstats = conn.sinks.stats();
            let mut t = Translator::new(&tcfg, &infos, conn.sinks, stats).unwrap();
            let sock = ingest::bind("127.0.0.1:0".parse().unwrap(), 8 << 20).unwrap();
            addr_tx.send(sock.local_addr().unwrap()).unwrap();
            ingest::run(&mut t, &ingest::PrioSockets::single(sock), 64, &stop).unwrap();
            assert_eq!(t.sinks().in_flight(), 0);
            rstats.snapshot()
        })
    };
    let to = addr_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("translator connected");
    let sent = {
        let nt = nt.clone();
        std::thread::spawn(move || {
            enter(&nt);
            let mut r = Reporter::new(ReporterConfig::new(to, Protocol::Native { reporter_id: 1 }))
                .unwrap();
            for i in 0..flows {
                r.key_write(
                    &(1_000_000 + i).to_be_bytes(),
                    &i.to_be_bytes(),
                    2,
                    i % 100 == 0,
                )
                .unwrap();
                r.key_increment(
                    &(2_000_000 + i % 100).to_be_bytes(),
                    u64::from(i % 7 + 1),
                    2,
                    false,
                )
                .unwrap();
                let len = 1 + (i % 5) as u8;
                for hop in 0..len {
                    r.postcard(
                        &(3_000_000 + i).to_be_bytes(),
                        hop,
                        len,
                        (i * 31 + u32::from(hop)) % (1 << 18),
                        false,
                    )
                    .unwrap();
                }
                r.append(i % 16, &i.to_be_bytes(), false).unwrap();
                if i % 64 == 63 {
                    std::thread::sleep(Duration::from_micros(300));
                }
            }
            r.flush().unwrap();
            r.stats().datagrams
        })
        .join()
        .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while stats.datagrams.load(Ordering::Relaxed) < sent && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop_t.store(true, Ordering::Relaxed);
    let rq = translator.join().unwrap();
    stop_c.store(true, Ordering::Relaxed);
    let rs = responder.join().unwrap();
    eprintln!("requester {rq}\nresponder {rs}");
    assert_eq!(
        stats.datagrams.load(Ordering::Relaxed),
        sent,
        "loopback UDP lost datagrams"
    );
    assert!(rq["retransmitted_packets"].as_u64().unwrap() > 0);

    let kw = &remote.store("kw").unwrap().region;
    let counters = &remote.store("counters").unwrap().region;
    let paths = &remote.store("paths").unwrap().region;
    let mut sums = [0u64; 100];
    for i in 0..flows {
        sums[(i % 100) as usize] += u64::from(i % 7 + 1);
        let r = query::key_write(kw, &(1_000_000 + i).to_be_bytes(), Some(2), 1).unwrap();
        assert_eq!(
            r.data.as_deref(),
            Some(format!("{i:08x}").as_str()),
            "key-write {i}"
        );
    }
    for (k, s) in sums.iter().enumerate() {
        let c =
            query::key_increment(counters, &(2_000_000 + k as u32).to_be_bytes(), Some(2)).unwrap();
        assert_eq!(c.count, *s, "key-increment {k}");
    }
    let mut found = 0;
    for i in 0..200u32 {
        let p = query::postcard(paths, &(3_000_000 + i).to_be_bytes(), 1 << 18).unwrap();
        let len = 1 + i % 5;
        let want: Vec<u32> = (0..len).map(|h| (i * 31 + h) % (1 << 18)).collect();
        if p.status == "found" {
            assert_eq!(p.path, want, "path {i}");
            found += 1;
        }
    }
    assert!(found >= 190, "{found}/200 paths found");
    let events = &remote.store("events").unwrap().region;
    let layout = dta_store::AppendLayout::new(events.header()).unwrap();
    let mut total = 0;
    for list in 0..16 {
        total += events.mem().load_u64(layout.head_offset(list)).unwrap();
    }
    assert_eq!(
        total,
        u64::from(flows),
        "every Append entry written (heads advanced)"
    );
}
