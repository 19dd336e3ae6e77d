//! Kernel-bypass receive (AF_XDP) across a veth pair between two namespaces the test creates:
//! datagrams to the port are read from the UMEM with their payload and source exactly as sent;
//! a source outside the allow-list is dropped in the driver and counted; a datagram to another
//! port, and everything on a queue without a socket, reaches the ordinary socket. Then the
//! translator: the same reports through an AF_XDP socket and through a UDP socket give
//! byte-identical stores. Needs root (a counted skip otherwise).

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_store::{Header, KeyIncrementSpec, KeyWriteSpec, Region, StoreSpec};
use dta_testkit::netns::run_in;
use dta_translator::prio_sockets::PrioSockets;
use dta_translator::{ingest, Stats, Translator, TranslatorConfig};
use dta_wire::prefix::AllowList;
use dta_xdp::xsk::{XskProgram, XskReceiver};

mod common;
use common::*;

const PORT: u16 = 40070;

fn allow(prefixes: &[&str]) -> AllowList {
    AllowList::new(prefixes.iter().map(|p| p.parse().unwrap()).collect())
}

/// A 13-byte 5-tuple key.
fn tuple(i: u32) -> Vec<u8> {
    let b = i.to_be_bytes();
    vec![10, 0, b[2], b[3], 10, 0, 1, b[3], 0x04, 0xd2, 0, 80, 6]
}

/// Every datagram waiting on `r`, as (payload, source), waiting up to 5 s for `n`.
fn take(r: &mut XskReceiver, n: usize) -> Vec<(Vec<u8>, SocketAddr)> {
    let mut got = vec![];
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < n && Instant::now() < end {
        if r.recv_batch(64, &mut |it| got.extend(it.map(|(p, s)| (p.to_vec(), s)))) == 0 {
            r.wait(Duration::from_millis(20)).unwrap();
        }
    }
    got
}

#[test]
fn datagrams_reach_the_umem_as_sent_and_the_policy_holds_in_the_driver() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    let net = net("k", 86);
    let (a, ip_a, ip_b) = (net.a.clone(), net.ip_a.clone(), net.ip_b.clone());
    // The peer's second address: a source outside the allow-list.
    let _ = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &net.b,
            "ip",
            "addr",
            "add",
            "10.86.0.9/24",
            "dev",
            &net.dev_b,
        ])
        .status();
    let dev = net.dev_a.clone();
    let (got, stats, passed) = run_in(&a, move || {
        let plain = UdpSocket::bind(("0.0.0.0", PORT + 1)).unwrap();
        plain
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut prog = XskProgram::load_attach(&dev, PORT, &allow(&[&format!("{ip_b}/32")]), false)
            .expect("loading the redirect program");
        let mut r = XskReceiver::open(&dev, 0, PORT).expect("an AF_XDP socket on queue 0");
        prog.register(0, r.fd()).unwrap();
        let to: SocketAddr = format!("{ip_a}:{PORT}").parse().unwrap();
        let other: SocketAddr = format!("{ip_a}:{}", PORT + 1).parse().unwrap();
        let sent: Vec<Vec<u8>> = (0..100u32)
            .map(|i| i.to_be_bytes().repeat(1 + i as usize % 50))
            .collect();
        let b = net.b.clone();
        let s2 = sent.clone();
        std::thread::spawn(move || {
            run_in(&b, move || {
                let s = UdpSocket::bind(("10.86.0.2", 5555)).unwrap();
                for d in &s2 {
                    s.send_to(d, to).unwrap();
                    std::thread::sleep(Duration::from_micros(200));
                }
                let spoof = UdpSocket::bind(("10.86.0.9", 5556)).unwrap();
                for _ in 0..7 {
                    spoof.send_to(b"not allowed", to).unwrap();
                }
                s.send_to(b"to the socket", other).unwrap();
            })
        })
        .join()
        .unwrap();
        let got = take(&mut r, sent.len());
        let mut buf = [0u8; 64];
        let passed = plain
            .recv(&mut buf)
            .map(|n| buf[..n].to_vec())
            .unwrap_or_default();
        std::thread::sleep(Duration::from_millis(100));
        let stats = prog.stats().unwrap();
        let extra = take(&mut r, 1);
        assert!(
            extra.is_empty(),
            "nothing else reached the socket: {extra:?}"
        );
        assert!(
            r.stats().rejected().is_empty(),
            "{:?}",
            r.stats().rejected()
        );
        (got.into_iter().zip(sent).collect::<Vec<_>>(), stats, passed)
    });
    assert_eq!(got.len(), 100);
    for ((payload, src), want) in &got {
        assert_eq!(payload, want);
        assert_eq!(src.to_string(), "10.86.0.2:5555");
    }
    assert_eq!(stats.redirected, 100, "{stats:?}");
    assert_eq!(stats.source_not_allowed, 7, "{stats:?}");
    assert_eq!(passed, b"to the socket");
}

fn store_headers() -> Vec<Header> {
    vec![
        Header::new("kw", &StoreSpec::KeyWrite(KeyWriteSpec::new(4096, 13, 8))).unwrap(),
        Header::new(
            "ki",
            &StoreSpec::KeyIncrement(KeyIncrementSpec {
                counters: 4096,
                key_len: 13,
                hash: dta_store::HashScheme::Native,
                redundancy: 2,
                windows: 0,
                window_ms: 0,
            }),
        )
        .unwrap(),
    ]
}

fn regions(dir: &std::path::Path) -> Vec<Arc<Region>> {
    store_headers()
        .iter()
        .map(|h| {
            Arc::new(
                Region::create(
                    &dir.join(format!("{}.region", h.name)),
                    &h.name,
                    &h.spec,
                    true,
                )
                .unwrap(),
            )
        })
        .collect()
}

/// Native datagrams of Key-Write and Key-Increment reports, some malformed.
fn datagrams() -> Vec<Vec<u8>> {
    let mut v = vec![];
    for i in 0..400u32 {
        let key = tuple(i % 97);
        let reports = vec![
            (1u8, 1u8, key.clone(), u64::from(i).to_be_bytes().to_vec()),
            (3, 1, key, (1 + u64::from(i % 5)).to_be_bytes().to_vec()),
        ];
        v.push(native(&reports));
    }
    v.push(vec![0x10]);
    v.push(vec![0x99; 30]);
    v
}

/// Run a translator over `regions` for `datagrams`, received through AF_XDP (`xsk`) or the
/// UDP socket; its counters.
fn translate(
    net: &dta_testkit::netns::VethPair,
    regions: Vec<Arc<Region>>,
    xsk: bool,
) -> serde_json::Value {
    let (a, b, dev, ip_a) = (
        net.a.clone(),
        net.b.clone(),
        net.dev_a.clone(),
        net.ip_a.clone(),
    );
    run_in(&a, move || {
        let cfg = TranslatorConfig {
            allow: allow(&["10.87.0.0/24"]),
            ..Default::default()
        };
        let stats = Arc::new(Stats::default());
        let mut t = Translator::colocated(&cfg, regions, stats.clone()).unwrap();
        let sockets = PrioSockets::single(
            ingest::bind(format!("0.0.0.0:{PORT}").parse().unwrap(), 1 << 22).unwrap(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let to: SocketAddr = format!("{ip_a}:{PORT}").parse().unwrap();
        // The program and the AF_XDP socket first: every datagram then takes that way.
        let xsk = xsk.then(|| {
            let mut prog = XskProgram::load_attach(&dev, PORT, &cfg.allow, false).unwrap();
            let r = XskReceiver::open(&dev, 0, PORT).unwrap();
            prog.register(0, r.fd()).unwrap();
            (prog, r)
        });
        let sender = {
            let b = b.clone();
            std::thread::spawn(move || send_all(&b, to, datagrams()))
        };
        let stopper = {
            let (stop, stats) = (stop.clone(), stats.clone());
            std::thread::spawn(move || {
                let want = datagrams().len() as u64;
                wait_for(|| stats.datagrams.load(std::sync::atomic::Ordering::Relaxed) >= want);
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            })
        };
        if let Some((prog, mut r)) = xsk {
            ingest::run_source(&mut t, &mut r, &sockets, 64, &stop).unwrap();
            assert_eq!(prog.stats().unwrap().redirected, datagrams().len() as u64);
        } else {
            ingest::run(&mut t, &sockets, 64, &stop).unwrap();
        }
        sender.join().unwrap();
        stopper.join().unwrap();
        stats.snapshot()
    })
}

#[test]
fn the_same_reports_through_af_xdp_and_a_socket_give_identical_stores() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    let net = net("j", 87);
    let d = tempfile::tempdir().unwrap();
    let (da, db) = (d.path().join("socket"), d.path().join("xsk"));
    std::fs::create_dir_all(&da).unwrap();
    std::fs::create_dir_all(&db).unwrap();
    let (ra, rb) = (regions(&da), regions(&db));
    let sa = translate(&net, ra.clone(), false);
    let sb = translate(&net, rb.clone(), true);
    assert_eq!(sa, sb, "the same counters");
    assert!(
        sa["rejected"]
            .as_object()
            .unwrap()
            .values()
            .any(|v| v.as_u64() > Some(0)),
        "{sa}"
    );
    for (x, y) in ra.iter().zip(&rb) {
        assert_eq!(
            data_of(x),
            data_of(y),
            "{}: the same bytes",
            x.header().name
        );
    }
}

/// Send `d` from `ns` at `src` to `to` with `setup` applied to the socket first.
fn send_with(ns: &str, src: SocketAddr, to: SocketAddr, d: Vec<Vec<u8>>, setup: fn(&UdpSocket)) {
    run_in(ns, move || {
        let s = UdpSocket::bind(src).unwrap();
        setup(&s);
        for x in &d {
            s.send_to(x, to).unwrap();
        }
    })
}

fn setsockopt_ip(s: &UdpSocket, opt: libc::c_int, val: &[u8]) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt on an open socket with a buffer of `val.len()` bytes.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IP,
            opt,
            val.as_ptr().cast(),
            val.len() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
}

/// What AF_XDP does not take goes up the stack, counted by reason (a UDP datagram over IPv4
/// with options, an IPv4 fragment: the ordinary socket receives each whole); what a socket
/// loses is counted by the kernel and read through a handle another thread holds.
#[test]
fn unusual_datagrams_go_up_the_stack_and_a_full_ring_is_counted() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    let net = net("o", 88);
    let (a, b, ip_a) = (net.a.clone(), net.b.clone(), net.ip_a.clone());
    let dev = net.dev_a.clone();
    run_in(&a, move || {
        // The socket path on the same port: what the program passes up arrives here.
        let plain = UdpSocket::bind(("0.0.0.0", PORT)).unwrap();
        plain
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut prog = XskProgram::load_attach(&dev, PORT, &allow(&["10.88.0.0/24"]), false)
            .expect("loading the redirect program");
        let mut r = XskReceiver::open_with(&dev, 0, PORT, dta_xdp::xsk::FRAMES)
            .expect("an AF_XDP socket on queue 0");
        prog.register(0, r.fd()).unwrap();
        let handle = r.counters().unwrap();
        let to: SocketAddr = format!("{ip_a}:{PORT}").parse().unwrap();
        let src: SocketAddr = "10.88.0.2:5600".parse().unwrap();
        // IP options (four bytes: NOP NOP NOP EOL, RFC 791 §3.1): IHL 6.
        send_with(&b, src, to, vec![b"with options".to_vec()], |s| {
            setsockopt_ip(s, libc::IP_OPTIONS, &[1, 1, 1, 0])
        });
        // 3000 bytes over a 1500-byte MTU, fragmented by the sender.
        let big = (0..3000u32).map(|i| i as u8).collect::<Vec<u8>>();
        let src2: SocketAddr = "10.88.0.2:5601".parse().unwrap();
        send_with(&b, src2, to, vec![big.clone()], |s| {
            setsockopt_ip(
                s,
                libc::IP_MTU_DISCOVER,
                &libc::IP_PMTUDISC_DONT.to_ne_bytes(),
            )
        });
        let mut got = vec![];
        let mut buf = vec![0u8; 4096];
        while let Ok(n) = plain.recv(&mut buf) {
            got.push(buf[..n].to_vec());
            if got.len() == 2 {
                break;
            }
        }
        assert_eq!(
            got,
            vec![b"with options".to_vec(), big],
            "both reached the socket whole"
        );
        let p = prog.stats().unwrap();
        assert_eq!(p.pass_ip_options, 1, "{p:?}");
        assert!(
            p.pass_fragment >= 3,
            "3000 bytes are three fragments: {p:?}"
        );
        assert_eq!(p.redirected, 0, "{p:?}");
        assert!(take(&mut r, 1).is_empty(), "nothing for the AF_XDP socket");

        // Flood the socket without reading it: the UMEM holds FRAMES, the kernel drops the
        // rest and says so.
        let n = 2 * dta_xdp::xsk::FRAMES as usize;
        let flood: Vec<Vec<u8>> = (0..n as u32).map(|i| i.to_be_bytes().to_vec()).collect();
        run_in(&b, move || {
            let s = UdpSocket::bind("10.88.0.2:5602").unwrap();
            for (i, x) in flood.iter().enumerate() {
                s.send_to(x, to).unwrap();
                // Paced so the veth's own queue (256 frames) does not overflow first.
                if i % 64 == 63 {
                    std::thread::sleep(Duration::from_micros(500));
                }
            }
        });
        std::thread::sleep(Duration::from_millis(200));
        let k = r.kernel_stats();
        assert_eq!(handle.kernel(), k, "the handle reads the same socket");
        let kept = take(&mut r, n).len();
        assert!(kept <= dta_xdp::xsk::FRAMES as usize, "{kept}");
        assert!(
            kept as u64 + k.lost() <= n as u64 && k.lost() >= n as u64 / 4,
            "the frames the socket could not hold are counted lost: kept {kept}, {k:?}"
        );
        assert!(k.rx_dropped > 0 || k.rx_ring_full > 0, "{k:?}");
        assert_eq!(
            handle
                .stats
                .frames
                .load(std::sync::atomic::Ordering::Relaxed),
            kept as u64
        );
    });
}
