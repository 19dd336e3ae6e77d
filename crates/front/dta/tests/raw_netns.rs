//! `dta report --raw IFACE`: prebuilt frames on an AF_PACKET socket, across a veth pair between
//! two network namespaces the test creates, into `dta translator` in the other namespace. Every
//! report the sender counts arrives and is applied. Needs root (a counted skip otherwise).

use std::process::{Child, Command, Stdio};

use dta_testkit::netns::{run_in, VethPair};

mod common;

use common::dta;

#[test]
fn raw_sender_into_translator_across_namespaces() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    let net = VethPair::new("x", 79);
    let (na, nb, vb) = (&net.a, &net.b, &net.dev_b);

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("dta.toml");
    // The classifier off: on a machine busy enough to starve the translator thread it sheds a
    // raw burst by design, and this test counts every datagram.
    std::fs::write(
        &cfg,
        format!(
            "region_dir = '{}'\n[translator]\nlisten = '10.79.0.1:40040'\nallow = ['10.79.0.0/24']\n\
             classifier = false\n\
             [[store]]\nname = 'kw'\nkind = 'key-write'\nslots = 65536\nkey_len = 4\n\
             data_len = 4\n",
            dir.path().join("r").display()
        ),
    )
    .unwrap();
    let parsed: dta_node::config::Config = dta_node::config::Config::load(&cfg).unwrap();
    dta_collector::Collector::create(&parsed.region_dir, &parsed.store, false).unwrap();

    let translator = start_in(na, &cfg, 1);

    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            nb,
            env!("CARGO_BIN_EXE_dta"),
            "report",
            "--raw",
            vb,
        ])
        .args(["--to", "10.79.0.1:40040", "-p", "kw", "--count", "32000"])
        .args(["--keys", "5000", "--json", "--quiet"])
        .output()
        .unwrap();
    common::assert_success(&out);
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["reports"], 32000, "{rep}");
    assert_eq!(rep["datagrams"], 1000, "{rep}");

    let st = finished(na, translator, 1000);
    assert_eq!(st["datagrams"], 1000, "{st}");
    assert_eq!(st["reports"]["key_write"], 32000, "{st}");

    // A key the load generator drew (key index 0 is the first of the uniform keys' space) reads
    // back with the data the load generator derives from it.
    let key = dta_reporter::loadgen::key_vec(0, 4);
    let want = dta_reporter::loadgen::expected_data(&key, 4);
    let out = dta()
        .args(["query", "kw", "--store", "kw", "--json", "-n", "2"])
        .args(["--key", &format!("0x{}", hex::encode(&key))])
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "found", "{v}");
    assert_eq!(v["data"], hex::encode(want), "{v}");
}

/// The translator's metrics address inside its namespace.
const METRICS: &str = "127.0.0.1:40080";

/// `dta translator --config cfg --threads threads` in namespace `ns`, with its metrics on
/// [`METRICS`] there; returns once they answer (its UDP sockets are bound by then).
fn start_in(ns: &str, cfg: &std::path::Path, threads: u32) -> Child {
    let child = Command::new("ip")
        .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_dta"), "translator"])
        .args(["--stats-interval", "0", "--json", "--metrics", METRICS])
        .args(["--threads", &threads.to_string(), "--config"])
        .arg(cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ns = ns.to_owned();
    common::wait_for("the translator's metrics endpoint", || {
        run_in(&ns, || common::scrape_at(METRICS)).is_some()
    });
    child
}

/// Stop the translator in `ns` once it has received `datagrams` (frames crossing the veth pair
/// reach its socket asynchronously, after the sender exits), then its final counters. SIGINT
/// applies everything received before the final counters are printed.
fn finished(ns: &str, child: Child, datagrams: u64) -> serde_json::Value {
    let ns = ns.to_owned();
    dta_testkit::wait_until(
        &format!("the translator to receive {datagrams} datagrams"),
        || {
            let m = run_in(&ns, || common::scrape_at(METRICS)).expect("metrics");
            let s = dta_metrics::parse_exposition(&m).unwrap();
            dta_metrics::value(&s, "dta_translator_datagrams_total", &[])
        },
        |&n| n == Some(datagrams as f64),
    );
    common::interrupt(&child, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    common::assert_success(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A `dta translator` in namespace `ns` on `ip:40040` with one Key-Write store (4-byte keys and
/// data, N = 2, 2^22 slots: two keys' writes rarely meet, so which is written last, which two
/// translator threads do not fix, rarely matters); returns the child and the configuration's
/// path.
fn translator_in(
    ns: &str,
    ip: &str,
    net: &str,
    dir: &std::path::Path,
    threads: u32,
) -> (Child, std::path::PathBuf) {
    let cfg = dir.join("dta.toml");
    std::fs::write(
        &cfg,
        format!(
            "region_dir = '{}'\n[translator]\nlisten = '{ip}:40040'\nallow = ['{net}']\n\
             classifier = false\n\
             [[store]]\nname = 'kw'\nkind = 'key-write'\nslots = 4194304\nkey_len = 4\n\
             data_len = 4\nredundancy = 2\n",
            dir.join("r").display()
        ),
    )
    .unwrap();
    let parsed: dta_node::config::Config = dta_node::config::Config::load(&cfg).unwrap();
    dta_collector::Collector::create(&parsed.region_dir, &parsed.store, false).unwrap();
    (start_in(ns, &cfg, threads), cfg)
}

/// `dta report --raw --tx-ring`: one sender's frames, through its PACKET_MMAP ring, arrive
/// intact and in order: the translator's store is byte for byte the store an in-process
/// translator makes of the same datagrams.
#[test]
fn tx_ring_sender_store_is_exact() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    let net = VethPair::new("r", 81);
    let dir = tempfile::tempdir().unwrap();
    let (translator, cfg) = translator_in(&net.a, &net.ip_a, "10.81.0.0/24", dir.path(), 1);
    let out = Command::new("ip")
        .args(["netns", "exec", &net.b, env!("CARGO_BIN_EXE_dta"), "report"])
        .args(["--raw", &net.dev_b, "--tx-ring", "--to", "10.81.0.1:40040"])
        .args([
            "-p", "kw", "--count", "6400", "--keys", "3000", "--json", "--quiet",
        ])
        .output()
        .unwrap();
    common::assert_success(&out);
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (rep["reports"].as_u64(), rep["datagrams"].as_u64()),
        (Some(6400), Some(200)),
        "{rep}"
    );
    let st = finished(&net.a, translator, 200);
    assert_eq!(st["datagrams"], 200, "{st}");
    assert_eq!(st["reports"]["key_write"], 6400, "{st}");
    let rejected = st["rejected"].as_object().unwrap();
    assert!(rejected.values().all(|v| v == 0), "{st}");

    // The same datagrams (`dta report`'s defaults: seed 1, reporter 1, medium priority, 32
    // reports each) applied in-process to a second copy of the store.
    let parsed = dta_node::config::Config::load(&cfg).unwrap();
    let mut spec = dta_reporter::loadgen::LoadSpec::new(dta_wire::Opcode::KeyWrite);
    spec.count = Some(6400);
    spec.keys = dta_reporter::loadgen::KeyDist::Uniform { n: 3000 };
    let datagrams =
        dta_reporter::loadgen::native_datagrams(&spec, 1, dta_wire::Priority::Medium, 32, 200)
            .unwrap();
    let replica_dir = dir.path().join("replica");
    let replica = dta_collector::Collector::create(&replica_dir, &parsed.store, false).unwrap();
    let mut t = dta_translator::Translator::colocated(
        &dta_translator::TranslatorConfig::default(),
        replica.regions(),
        std::sync::Arc::new(dta_translator::Stats::default()),
    )
    .unwrap();
    let now = std::time::Instant::now();
    for d in &datagrams {
        t.handle_datagram(d, "127.0.0.1:40000".parse().unwrap(), now);
    }
    t.flush_all();
    let got = dta_collector::Collector::open_dir(&parsed.region_dir, false).unwrap();
    let (a, b) = (&got.regions()[0], &replica.regions()[0]);
    let len = a.mem().len() as usize;
    assert_eq!(len, b.mem().len() as usize);
    let (mut x, mut y) = (vec![0u8; len], vec![0u8; len]);
    a.mem().read(0, &mut x).unwrap();
    b.mem().read(0, &mut y).unwrap();
    assert!(x.iter().any(|&v| v != 0), "nothing was written");
    let differ = x.chunks(8).zip(y.chunks(8)).filter(|(p, q)| p != q).count();
    assert_eq!(
        differ, 0,
        "{differ} slots differ from the in-process replica"
    );
}

/// `--tx-ring --senders 2 --src-ports 4` into `--threads 2`: every frame of both senders is
/// applied, and every key each sender drew reads back with the data derived from it (1 000 keys
/// in 2^22 slots: a key whose two slots were both overwritten by other keys, which Key-Write
/// allows [DTA A.5], is about one run in 4 000).
#[test]
fn tx_ring_two_senders_every_key_applied() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    let net = VethPair::new("s", 82);
    let dir = tempfile::tempdir().unwrap();
    let (translator, cfg) = translator_in(&net.a, &net.ip_a, "10.82.0.0/24", dir.path(), 2);
    let out = Command::new("ip")
        .args(["netns", "exec", &net.b, env!("CARGO_BIN_EXE_dta"), "report"])
        .args(["--raw", &net.dev_b, "--tx-ring", "--to", "10.82.0.1:40040"])
        .args(["--senders", "2", "--src-ports", "4", "--seed", "7"])
        .args([
            "-p", "kw", "--count", "12800", "--keys", "1000", "--json", "--quiet",
        ])
        .output()
        .unwrap();
    common::assert_success(&out);
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (rep["reports"].as_u64(), rep["datagrams"].as_u64()),
        (Some(12800), Some(400)),
        "{rep}"
    );
    let st = finished(&net.a, translator, 400);
    assert_eq!(st["datagrams"], 400, "{st}");
    assert_eq!(st["reports"]["key_write"], 12800, "{st}");

    let parsed = dta_node::config::Config::load(&cfg).unwrap();
    let got = dta_collector::Collector::open_dir(&parsed.region_dir, false).unwrap();
    let region = &got.regions()[0];
    let mut checked = 0;
    for seed in [7u64, 8] {
        let mut spec = dta_reporter::loadgen::LoadSpec::new(dta_wire::Opcode::KeyWrite);
        spec.keys = dta_reporter::loadgen::KeyDist::Uniform { n: 1000 };
        spec.seed = seed;
        for i in dta_reporter::loadgen::key_indices(&spec)
            .unwrap()
            .take(6400)
        {
            let key = dta_reporter::loadgen::key_vec(i, 4);
            let r = dta_collector::query::key_write(region, &key, None, 1).unwrap();
            assert_eq!(r.status, "found", "key {i} of sender seed {seed}");
            let want = hex::encode(dta_reporter::loadgen::expected_data(&key, 4));
            assert_eq!(r.data.as_deref(), Some(want.as_str()), "key {i}");
            checked += 1;
        }
    }
    assert_eq!(checked, 12800);
}
