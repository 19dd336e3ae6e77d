//! The XDP translator end to end, in network namespaces over a veth pair the test creates:
//! reports sent from one namespace reach the XDP program on the other end, which applies them
//! into map-backed stores; the stores must be byte-identical to what the userspace translator
//! writes for the same reports into file-backed regions, readable through bpffs pins, and what
//! the program cannot handle must reach a userspace socket. Needs root: a counted skip otherwise.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_store::{
    AppendSpec, HashScheme, Header, KeyIncrementSpec, KeyWriteSpec, Region, StoreSpec,
    MAX_REDUNDANCY,
};
use dta_testkit::netns::run_in;
use dta_translator::{Reason, Stats, Translator, TranslatorConfig};
use dta_xdp::XdpTranslator;

mod common;
use common::*;

/// The stores' N: `kwp` holds MAX_REDUNDANCY copies, `kwn` fewer (so a Key-Write report can
/// ask for more copies than its store holds); the Key-Increment stores differ so that each is
/// checked against its own N.
const KWN_N: u8 = 3;
const KIP_N: u8 = 3;
const KIN_N: u8 = 2;

/// Native report flags for redundancy `n` (the low two bits are N - 1).
fn red_flags(n: u8) -> u8 {
    n - 1
}

fn headers() -> Vec<Header> {
    let specs = [
        (
            "kwp",
            StoreSpec::KeyWrite(KeyWriteSpec {
                hash: HashScheme::Prototype,
                redundancy: MAX_REDUNDANCY,
                ..KeyWriteSpec::new(1024, 4, 4)
            }),
        ),
        (
            "kwn",
            StoreSpec::KeyWrite(KeyWriteSpec {
                redundancy: KWN_N,
                ..KeyWriteSpec::new(512, 13, 20)
            }),
        ),
        (
            "kip",
            StoreSpec::KeyIncrement(KeyIncrementSpec {
                counters: 1024,
                key_len: 4,
                hash: HashScheme::Prototype,
                redundancy: KIP_N,
                windows: 0,
                window_ms: 0,
            }),
        ),
        (
            "kin",
            // The xxh3 scheme, 9..16-byte keys.
            StoreSpec::KeyIncrement(KeyIncrementSpec {
                counters: 256,
                key_len: 13,
                hash: HashScheme::Xxh3,
                redundancy: KIN_N,
                windows: 0,
                window_ms: 0,
            }),
        ),
        (
            "app",
            StoreSpec::Append(AppendSpec {
                lists: 16,
                capacity: 8,
                entry_len: 4,
                batch: 4,
                record: Default::default(),
            }),
        ),
        (
            // The widest slot (4 + 64 bytes, 9 words): the check's loop bound; the xxh3
            // scheme, 4..8-byte keys.
            "kww",
            StoreSpec::KeyWrite(KeyWriteSpec {
                redundancy: MAX_REDUNDANCY,
                hash: HashScheme::Xxh3,
                ..KeyWriteSpec::new(256, 8, 64)
            }),
        ),
    ];
    specs
        .iter()
        .map(|(n, s)| Header::new(n, s).unwrap())
        .collect()
}

fn tuple(i: u8) -> Vec<u8> {
    vec![10, 0, 0, i, 10, 0, 1, i, 0x04, 0xd2, 0, 80, 6]
}

/// The workload: every datagram the XDP program must apply itself. Key-Write reports use every
/// N in 1..=store N, Key-Increment reports exactly the store's N.
fn workload() -> Vec<Vec<u8>> {
    let mut d = vec![];
    for i in 0..40u32 {
        d.push(proto_kw(
            0x0a00_0000 + i,
            (i % 4 + 1) as u8,
            (i * 7).to_be_bytes(),
        ));
        d.push(proto_ki(i % 9, KIP_N, i as u64 + 1));
        d.push(proto_ap(i % 5, [i as u8, 1, 2, 3]));
    }
    for i in 0..20u8 {
        let data: Vec<u8> = (0..20).map(|j| i.wrapping_mul(3) ^ j).collect();
        let mut add = vec![0u8; 8];
        add[7] = i + 1;
        let mut ap = (i as u32 % 3 + 10).to_be_bytes().to_vec();
        ap.extend([i, i, 0xee, 0xff]);
        let wide: Vec<u8> = (0..64).map(|j| i.wrapping_mul(5).wrapping_add(j)).collect();
        d.push(native(&[
            (1, red_flags(i % KWN_N + 1), tuple(i), data),
            (3, red_flags(KIN_N), tuple(i % 4), add),
            (2, 0, vec![], ap),
            (1, red_flags(i % MAX_REDUNDANCY + 1), vec![i; 8], wide),
        ]));
    }
    d
}

/// The source of the datagrams [`userspace`] applies.
const USERSPACE_SRC: &str = "127.0.0.9:5000";

/// `work` through the userspace translator into file-backed regions in `dir`, one per header
/// of `hs` in its order, flushed; it refuses nothing of it. The regions, and the translator for
/// more.
fn userspace(
    dir: &std::path::Path,
    hs: &[Header],
    work: &[Vec<u8>],
) -> (Vec<Arc<Region>>, Translator<dta_translator::RegionSinks>) {
    let files: Vec<Arc<Region>> = hs
        .iter()
        .map(|h| Arc::new(Region::create(&dir.join(&h.name), &h.name, &h.spec, false).unwrap()))
        .collect();
    let mut t = Translator::colocated(
        &TranslatorConfig::default(),
        files.clone(),
        Arc::new(Stats::default()),
    )
    .unwrap();
    let src: SocketAddr = USERSPACE_SRC.parse().unwrap();
    for d in work {
        t.handle_datagram(d, src, Instant::now());
    }
    t.flush_all();
    assert_eq!(
        t.stats().total_rejected(),
        0,
        "userspace refused part of the workload"
    );
    (files, t)
}

#[test]
fn xdp_stores_match_the_userspace_translator_and_pass_the_rest() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("the XDP test loads BPF: {why}");
    }
    let net = net("x", 99);
    let hs = headers();
    let hs2 = hs.clone();
    let dev_a = net.dev_a.clone();
    let x = run_in(&net.a, move || {
        let mut x = XdpTranslator::load(&any_source(), &hs2).expect("load XDP program");
        let mode = x.attach(&dev_a, false).expect("attach");
        eprintln!("attached in {mode:?} mode");
        x
    });
    assert_eq!(x.stores().len(), 6);
    // A userspace socket in namespace a for what the program passes.
    let to: SocketAddr = format!("{}:40040", net.ip_a).parse().unwrap();
    let sock = run_in(&net.a, move || {
        let s = UdpSocket::bind(to).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        s
    });

    let work = workload();
    let n = work.len() as u64;
    send_all(&net.b, to, work.clone());
    assert!(
        wait_for(|| x.stats().unwrap().datagrams >= n),
        "XDP applied {:?}",
        x.stats()
    );
    let st = x.stats().unwrap();
    assert_eq!(st.key_write, 40 + 20 + 20);
    assert_eq!(st.key_increment, 40 + 20);
    assert_eq!(st.append, 40 + 20);
    assert_eq!(st.pass_immediate, 0);
    assert_eq!(st.drop_map_error, 0);

    // The same datagrams through the userspace translator into file-backed regions.
    let dir = tempfile::tempdir().unwrap();
    let (files, mut t) = userspace(dir.path(), &hs, &work);
    let src: SocketAddr = USERSPACE_SRC.parse().unwrap();
    for (h, f) in hs.iter().zip(&files) {
        let m = x.region(&h.name).unwrap();
        assert_eq!(m.header().spec, f.header().spec, "{}: header", h.name);
        assert_eq!(
            m.header().data_len,
            f.header().data_len,
            "{}: header",
            h.name
        );
        let (a, b) = (data_of(m), data_of(f));
        assert!(a.iter().any(|&b| b != 0), "{}: XDP store is empty", h.name);
        assert!(
            a == b,
            "{}: XDP store differs from the userspace translator's",
            h.name
        );
    }

    // Queries through a bpffs pin, exactly as `dta query --region` opens it: on a bpffs this
    // test mounts (the one at /sys/fs/bpf may not be).
    let bpf = tempfile::tempdir().unwrap();
    assert!(
        std::process::Command::new("mount")
            .args(["-t", "bpf", "bpf"])
            .arg(bpf.path())
            .status()
            .is_ok_and(|s| s.success()),
        "mount -t bpf"
    );
    let pins = x.pin(&bpf.path().join("dta"));
    {
        let pins = pins.expect("pinning in a bpffs");
        let r = Region::open_read_only(&pins[0]).expect("open pinned map as a region");
        let kw = dta_store::KeyWriteLayout::new(r.header()).unwrap();
        let key = 0x0a00_0003u32.to_be_bytes();
        match kw.query(r.mem(), &key, Some(4), 1).unwrap() {
            dta_store::KeyWriteAnswer::Found { data, .. } => {
                assert_eq!(data, (3u32 * 7).to_be_bytes())
            }
            other => panic!("query through the pin: {other:?}"),
        }
        let ki = dta_store::KeyIncrementLayout::new(x.stores()[2].region.header()).unwrap();
        // key 2 got i = 2, 11, 20, 29, 38: adds 3 + 12 + 21 + 30 + 39 to each of its N counters.
        assert!(
            ki.query(x.stores()[2].region.mem(), &2u32.to_be_bytes(), None)
                .unwrap()
                >= 105
        );
        for p in &pins {
            let _ = std::fs::remove_file(p);
        }
        let _ = std::fs::remove_dir(pins[0].parent().unwrap());
    }
    let _ = std::process::Command::new("umount")
        .arg("-l")
        .arg(bpf.path())
        .status();

    // What the program cannot handle reaches userspace, and leaves the stores untouched.
    let before: Vec<Vec<u8>> = x.stores().iter().map(|s| data_of(&s.region)).collect();
    let mut postcard = vec![0x04, 0x00];
    postcard.extend([10, 0, 0, 1, 2, 0, 0, 0, 42]);
    let mut retrans = native(&[(1, 0, tuple(1), vec![1; 20])]);
    retrans[1] |= 0x20;
    let passed = vec![
        postcard,                                               // Postcarding: the userspace cache
        retrans,                                                // retransmittable: sequence numbers
        native(&[(1, 0, tuple(1), vec![1; 12])]),               // no Key-Write store of that shape
        proto_kw(1, 9, [1, 2, 3, 4]),                           // bad redundancy
        vec![0x01, 0x00, 0x01, 0x0a],                           // truncated
        native(&[(3, 0, tuple(2), vec![0; 8])])[..30].to_vec(), // native, truncated
        vec![0x77; 40],                                         // unknown version
        proto_ap(99, [1, 1, 1, 1]),                             // list id beyond the store
        native(&[(1, 0x80 | red_flags(1), tuple(7), vec![7; 20])]), // flagged: announced above
        vec![0x01, 0x80, 0x01, 0, 0, 0, 7, 1, 2, 3, 4],         // flagged prototype Key-Write
    ];
    // Redundancies the routed store refuses: the userspace translator counts them. Key-Increment
    // below and above the store's N (`redundancy_mismatch`), Key-Write above it (`bad_redundancy`).
    let ki_add = vec![0, 0, 0, 0, 0, 0, 0, 9];
    let refused = vec![
        proto_ki(5, KIP_N - 1, 7),
        native(&[(3, red_flags(KIN_N + 1), tuple(3), ki_add)]),
        native(&[(1, red_flags(KWN_N + 1), tuple(5), vec![5; 20])]),
    ];
    let passed = [passed, refused.clone()].concat();
    let k = passed.len();
    let stb = x.stats().unwrap();
    send_all(&net.b, to, passed.clone());
    let mut got = vec![];
    let mut buf = [0u8; 2048];
    while got.len() < k {
        match sock.recv_from(&mut buf) {
            Ok((len, _)) => got.push(buf[..len].to_vec()),
            Err(e) => panic!("only {} of {k} passed datagrams arrived: {e}", got.len()),
        }
    }
    assert_eq!(got, passed);
    let sta = x.stats().unwrap();
    assert_eq!(sta.datagrams, stb.datagrams);
    assert_eq!(sta.pass_retransmittable - stb.pass_retransmittable, 1);
    assert_eq!(
        sta.pass_unhandled - stb.pass_unhandled,
        3 + refused.len() as u64
    );
    assert_eq!(sta.pass_malformed - stb.pass_malformed, 4);
    assert_eq!(sta.pass_immediate - stb.pass_immediate, 2);
    let after: Vec<Vec<u8>> = x.stores().iter().map(|s| data_of(&s.region)).collect();
    assert!(before == after, "passed datagrams changed a store");

    // The userspace translator refuses the same redundancies, for the reasons above, and leaves
    // its regions identical to the XDP stores.
    let stats = t.stats().clone();
    let (mm, br) = (
        stats.rejected_by(Reason::RedundancyMismatch),
        stats.rejected_by(Reason::BadRedundancy),
    );
    for d in &refused {
        t.handle_datagram(d, src, Instant::now());
    }
    t.flush_all();
    assert_eq!(stats.rejected_by(Reason::RedundancyMismatch) - mm, 2);
    assert_eq!(stats.rejected_by(Reason::BadRedundancy) - br, 1);
    for (h, f) in hs.iter().zip(&files) {
        let m = x.region(&h.name).unwrap();
        assert!(
            data_of(m) == data_of(f),
            "{}: a refused report changed a store",
            h.name
        );
    }
    drop(x);
}

/// The xxh3 scheme in the driver for every key length a store takes (each of XXH3's short-input
/// branches: 1..3, 4..8 and 9..16 bytes): the XDP program's stores equal the userspace
/// translator's, byte for byte.
#[test]
fn xdp_xxh3_stores_match_the_userspace_translator_at_every_key_length() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("the XDP test loads BPF: {why}");
    }
    let lens = [1u8, 3, 4, 7, 12, 16];
    let hs: Vec<Header> = lens
        .iter()
        .map(|&k| {
            let spec = if k == 7 {
                StoreSpec::KeyIncrement(KeyIncrementSpec {
                    counters: 512,
                    key_len: k,
                    hash: HashScheme::Xxh3,
                    redundancy: KIN_N,
                    windows: 0,
                    window_ms: 0,
                })
            } else {
                StoreSpec::KeyWrite(KeyWriteSpec {
                    redundancy: MAX_REDUNDANCY,
                    hash: HashScheme::Xxh3,
                    ..KeyWriteSpec::new(512, k, 4)
                })
            };
            Header::new(&format!("x{k}"), &spec).unwrap()
        })
        .collect();
    let mut work = vec![];
    for i in 0..30u8 {
        let reports: Vec<(u8, u8, Vec<u8>, Vec<u8>)> = lens
            .iter()
            .map(|&k| {
                let key: Vec<u8> = (0..k).map(|j| i.wrapping_mul(13) ^ j).collect();
                if k == 7 {
                    let mut add = vec![0u8; 8];
                    add[7] = i + 1;
                    (3, red_flags(KIN_N), key, add)
                } else {
                    (1, red_flags(i % MAX_REDUNDANCY + 1), key, vec![i, k, 2, 3])
                }
            })
            .collect();
        work.push(native(&reports));
    }
    let net = net("x3", 98);
    let hs2 = hs.clone();
    let dev_a = net.dev_a.clone();
    let x = run_in(&net.a, move || {
        let mut x = XdpTranslator::load(&any_source(), &hs2).expect("load XDP program");
        x.attach(&dev_a, false).expect("attach");
        x
    });
    let to: SocketAddr = format!("{}:40040", net.ip_a).parse().unwrap();
    let _sock = run_in(&net.a, move || UdpSocket::bind(to).unwrap());
    let n = work.len() as u64;
    send_all(&net.b, to, work.clone());
    assert!(
        wait_for(|| x.stats().unwrap().datagrams >= n),
        "XDP applied {:?}",
        x.stats()
    );
    assert_eq!(x.stats().unwrap().key_write, 30 * 5);
    assert_eq!(x.stats().unwrap().key_increment, 30);
    let dir = tempfile::tempdir().unwrap();
    let (files, _) = userspace(dir.path(), &hs, &work);
    for (h, f) in hs.iter().zip(&files) {
        let (a, b) = (data_of(x.region(&h.name).unwrap()), data_of(f));
        assert!(a.iter().any(|&b| b != 0), "{}: XDP store is empty", h.name);
        assert!(a == b, "{}: XDP store differs from userspace", h.name);
    }
}
