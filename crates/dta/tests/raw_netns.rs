//! `dta report --raw IFACE`: prebuilt frames on an AF_PACKET socket, across a veth pair between
//! two network namespaces the test creates, into `dta translator` in the other namespace. Every
//! report the sender counts arrives and is applied. Needs root (a counted skip otherwise).

use std::process::{Command, Stdio};

use dta_testkit::netns::VethPair;
use std::time::Duration;

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
    std::fs::write(
        &cfg,
        format!(
            "region_dir = '{}'\n[translator]\nlisten = '10.79.0.1:40040'\nallow = ['10.79.0.0/24']\n\
             [[store]]\nname = 'kw'\nkind = 'key-write'\nslots = 65536\nkey_len = 4\n\
             data_len = 4\n",
            dir.path().join("r").display()
        ),
    )
    .unwrap();
    let parsed: dta::config::Config = dta::config::Config::load(&cfg).unwrap();
    dta_collector::Collector::create(&parsed.region_dir, &parsed.store, false).unwrap();

    let exe = env!("CARGO_BIN_EXE_dta");
    let translator = Command::new("ip")
        .args([
            "netns",
            "exec",
            na,
            exe,
            "translator",
            "--stats-interval",
            "0",
        ])
        .args(["--duration", "4", "--json", "--config"])
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));

    let out = Command::new("ip")
        .args(["netns", "exec", nb, exe, "report", "--raw", vb])
        .args(["--to", "10.79.0.1:40040", "-p", "kw", "--count", "32000"])
        .args(["--keys", "5000", "--json", "--quiet"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["reports"], 32000, "{rep}");
    assert_eq!(rep["datagrams"], 1000, "{rep}");

    let out = translator.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
