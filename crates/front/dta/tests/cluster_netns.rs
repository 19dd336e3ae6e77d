//! Many collectors in network namespaces this test creates ([DTA-draft §3.2] "Supporting
//! Multiple Collectors"): three shared-memory collectors, each in its own namespace serving its
//! HTTP API, two translators (one serving c0 and c1, one serving c2), reporters and clients in
//! a fifth namespace, all on one bridge.
//!
//! 1. Every primitive is reported through `dta report --cluster`: each key lands on its owner
//!    (the reporter's and the translators' counts per collector agree with the map; a key is
//!    not on the other collectors).
//! 2. Every key is answered through the CLI (`dta query --cluster`, batches), the HTTP API
//!    (`/cluster/...` of a collector, forwarding to its peers) and Python (`ClusterClient`),
//!    exactly as one collector would answer it.
//! 3. A fourth collector joins (map version 2 with version 1 as `previous`): about a quarter of
//!    the keys change owner, keys written before the change are still answered (by their old
//!    owner), and Key-Increment counts written on both sides of the change add up.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{interrupt, wait_for};
use dta_cluster::{ClusterMap, Key};
use dta_reporter::keys;
use dta_reporter::loadgen::{self, KeyDist, LoadSpec};
use dta_testkit::netns::{ip, run_in};
use dta_wire::Opcode;

const TOKEN: &str = "cluster-test-token-0123456789abcdef";
const NET: &str = "10.78.0";
const HTTP_PORT: u16 = 40080;
/// Keys per keyed primitive (drawn uniformly from 0..KEYS, so some repeat).
const KEYS: u64 = 2000;
const COUNT: u64 = 3000;

/// Namespaces on one bridge: name and last address byte.
struct Net {
    tag: String,
    ns: Vec<(String, u8)>,
}

impl Net {
    fn new(members: &[(&str, u8)]) -> Net {
        let tag = format!("cl{}", std::process::id() % 10_000);
        let br = format!("{tag}br");
        let _ = ip(&["netns", "del", &br]);
        assert!(ip(&["netns", "add", &br]));
        assert!(ip(&["-n", &br, "link", "add", "br0", "type", "bridge"]));
        assert!(ip(&["-n", &br, "link", "set", "br0", "up"]));
        let mut net = Net {
            tag: tag.clone(),
            ns: vec![(br.clone(), 0)],
        };
        for (name, host) in members {
            let ns = format!("{tag}{name}");
            let _ = ip(&["netns", "del", &ns]);
            assert!(ip(&["netns", "add", &ns]), "netns add {ns}");
            net.ns.push((ns.clone(), *host));
            let (inside, outside) = (format!("e{tag}{name}"), format!("b{tag}{name}"));
            assert!(ip(&[
                "link", "add", &inside, "netns", &ns, "type", "veth", "peer", "name", &outside,
                "netns", &br,
            ]));
            assert!(ip(&["-n", &br, "link", "set", &outside, "master", "br0"]));
            assert!(ip(&["-n", &br, "link", "set", &outside, "up"]));
            let addr = format!("{NET}.{host}/24");
            assert!(ip(&["-n", &ns, "addr", "add", &addr, "dev", &inside]));
            assert!(ip(&["-n", &ns, "link", "set", &inside, "up"]));
            assert!(ip(&["-n", &ns, "link", "set", "lo", "up"]));
        }
        net
    }

    fn ns(&self, name: &str) -> String {
        format!("{}{name}", self.tag)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for (ns, _) in &self.ns {
            ip(&["netns", "del", ns]);
        }
    }
}

/// `dta ARGS` inside namespace `ns`, with the HTTP token in its environment.
fn dta_in(ns: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_dta")])
        .env("DTA_HTTP_TOKEN", TOKEN);
    c
}

fn output(mut c: Command, what: &str) -> serde_json::Value {
    let out = c.output().unwrap();
    assert!(
        out.status.success() || out.status.code() == Some(1),
        "{what}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The map text: collectors `names` (c0, c1 on the first translator, c2, c3 on the second),
/// with region directories when `regions` is given, and the stores of `examples/dta.toml`.
fn map_text(version: u64, names: &[&str], regions: Option<&Path>, table: &str) -> String {
    let mut s = format!("version = {version}\n");
    for n in names {
        let i: u8 = n[1..].parse().unwrap();
        let translator = if i < 2 { 11 } else { 12 };
        s += &format!(
            "[[collector]]\nname = \"{n}\"\ntranslator = \"{NET}.{translator}:{}\"\n\
             http = \"{NET}.{}:{HTTP_PORT}\"\nmode = \"shm\"\n",
            40140 + i as u16,
            20 + i
        );
        if let Some(r) = regions {
            s += &format!("region_dir = {:?}\n", r.join(n).display().to_string());
        }
    }
    s + &format!(
        "[[store]]\nname = \"kw\"\nkind = \"key-write\"\nkey_len = 4\n\
         [[store]]\nname = \"flows\"\nkind = \"key-write\"\nkey_len = 13\n\
         [[store]]\nname = \"counters\"\nkind = \"key-increment\"\n\
         [[store]]\nname = \"paths\"\nkind = \"postcarding\"\n\
         [[store]]\nname = \"events\"\nkind = \"append\"\n{table}\n\
         [[store]]\nname = \"flowsizes\"\nkind = \"sketch-merge\"\nsketch_id = 1\n\
         placement = \"one\"\ncollector = \"c1\"\n\
         [[store]]\nname = \"distinct\"\nkind = \"sketch-merge\"\nsketch_id = 2\n\
         placement = \"one\"\ncollector = \"c2\"\n"
    )
}

/// Map version 2 (c3 added) with version 1 embedded as `[previous]`.
fn with_previous(v2: &str, v1: &str) -> String {
    let prev = v1
        .replacen("version = 1\n", "[previous]\nversion = 1\n", 1)
        .replace("[[collector]]", "[[previous.collector]]")
        .replace("[[store]]", "[[previous.store]]");
    format!("{v2}{prev}")
}

/// The keys `dta report -p PRIMITIVE -c COUNT --keys KEYS` (one sender, seed 1) draws.
fn drawn(primitive: Opcode, count: u64) -> Vec<u64> {
    let mut spec = LoadSpec::new(primitive);
    spec.keys = KeyDist::Uniform { n: KEYS };
    spec.seed = 1;
    loadgen::key_indices(&spec)
        .unwrap()
        .take(count as usize)
        .collect()
}

#[test]
fn three_collectors_then_four() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    let dir = tempfile::tempdir().unwrap();
    let regions = dir.path().join("regions");
    let net = Net::new(&[
        ("rep", 2),
        ("t1", 11),
        ("t2", 12),
        ("c0", 20),
        ("c1", 21),
        ("c2", 22),
        ("c3", 23),
    ]);
    let table = "table = { c0 = [0], c1 = [1], c2 = [2] }\ncollector = \"c0\"";
    let names3 = ["c0", "c1", "c2"];
    let names4 = ["c0", "c1", "c2", "c3"];
    let full1 = dir.path().join("map1.toml");
    let query1 = dir.path().join("query1.toml");
    let full2 = dir.path().join("map2.toml");
    let query2 = dir.path().join("query2.toml");
    let f1 = map_text(1, &names3, Some(&regions), table);
    let q1 = map_text(1, &names3, None, table);
    // Version 2: c3 joins and takes list 3 (list 0..2 stay where they were).
    let table2 = "table = { c0 = [0], c1 = [1], c2 = [2], c3 = [3] }\ncollector = \"c0\"";
    std::fs::write(&full1, &f1).unwrap();
    std::fs::write(&query1, &q1).unwrap();
    std::fs::write(
        &full2,
        with_previous(&map_text(2, &names4, Some(&regions), table2), &f1),
    )
    .unwrap();
    std::fs::write(
        &query2,
        with_previous(&map_text(2, &names4, None, table2), &q1),
    )
    .unwrap();
    let map1 = ClusterMap::load(&full1).unwrap();
    let map2 = ClusterMap::load(&full2).unwrap();

    // One configuration for every collector and translator: the example's stores, sketches
    // merged from one reporter, reporters of the bridge's network allowed.
    let example = include_str!("../../../../examples/dta.toml");
    let mut cfg = example.replace("reporters = 2", "reporters = 1").replace(
        "allow = [\"127.0.0.0/8\", \"::1/128\"]",
        &format!("allow = [\"{NET}.0/24\"]"),
    );
    assert!(cfg.contains(&format!("{NET}.0/24")));
    cfg = cfg.replace("lists = 16", "lists = 4");
    let mut procs = Procs(vec![]);
    let stores = example.matches("[[store]]").count();
    let start_collector = |procs: &mut Procs, name: &str, map: &Path| {
        let i: u8 = name[1..].parse().unwrap();
        let c = cfg.replace(
            "http = \"127.0.0.1:40080\"",
            &format!("http = \"{NET}.{}:{HTTP_PORT}\"", 20 + i),
        );
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, c).unwrap();
        let mut cmd = dta_in(&net.ns(name));
        cmd.args(["collector", "--config"])
            .arg(&path)
            .arg("--region-dir")
            .arg(regions.join(name))
            .arg("--cluster")
            .arg(map)
            .args(["--name", name])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        procs.0.push(cmd.spawn().unwrap());
        let rd = regions.join(name);
        wait_for("the collector's regions", || {
            std::fs::read_dir(&rd).is_ok_and(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.path().extension().is_some_and(|x| x == "region"))
                    .count()
                    == stores
            })
        });
        let ns = net.ns(name);
        let addr = format!("{NET}.{}:{HTTP_PORT}", 20 + i);
        wait_for("the collector's HTTP API", || {
            let a = addr.clone();
            run_in(&ns, move || std::net::TcpStream::connect(&a).is_ok())
        });
    };
    let base = dir.path().join("translator.toml");
    std::fs::write(&base, &cfg).unwrap();
    let start_translator = |ns: &str, map: &Path, serves: &[&str], m: &ClusterMap| -> Child {
        let mut cmd = dta_in(&net.ns(ns));
        cmd.args(["translator", "--json", "--stats-interval", "0", "--config"])
            .arg(&base)
            .arg("--cluster")
            .arg(map)
            .args(["--collectors", &serves.join(",")])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let child = cmd.spawn().unwrap();
        for s in serves {
            let addr = m.collector(s).unwrap().translator;
            wait_for("the translator's port", || {
                run_in(&net.ns(ns), move || common::udp_port_bound(addr.port()))
            });
        }
        child
    };
    let stop_translator = |c: Child| -> serde_json::Value {
        interrupt(&c, libc::SIGINT);
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "translator: {:?}", out.status);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let report = |map: &Path, args: &[&str]| -> serde_json::Value {
        let mut c = dta_in(&net.ns("rep"));
        c.args(["report", "--cluster"])
            .arg(map)
            .args(["-q", "--json", "--keys", &KEYS.to_string()])
            .args(args);
        output(c, &format!("dta report {args:?}"))
    };
    for n in names3 {
        start_collector(&mut procs, n, &query1);
    }
    let ta = start_translator("t1", &full1, &["c0", "c1"], &map1);
    let tb = start_translator("t2", &full1, &["c2"], &map1);

    // ---- 1. every primitive reported through the map ----
    let c = COUNT.to_string();
    let sent_kw = report(&full1, &["-p", "kw", "-c", &c]);
    let sent_flows = report(
        &full1,
        &["-p", "kw", "-c", &c, "--key-len", "13", "--data-len", "8"],
    );
    let sent_ki = report(&full1, &["-p", "ki", "-c", &c]);
    let sent_pc = report(&full1, &["-p", "postcard", "-c", "1000", "--hops", "5"]);
    let sent_ap = report(&full1, &["-p", "append", "-c", "400", "--lists", "4"]);
    let sent_sk = report(&full1, &["-p", "sketch", "-c", "500", "--reporter-id", "1"]);
    // The reporter's count per collector is the map's.
    let per = |v: &serde_json::Value, n: &str| v["per_collector"][n].as_u64().unwrap();
    let kw_keys = drawn(Opcode::KeyWrite, COUNT);
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for &i in &kw_keys {
        let k = keys::key_vec(i, 4);
        *want
            .entry(map1.owner("kw", Key::Bytes(&k)).unwrap().name.clone())
            .or_default() += 1;
    }
    for n in names3 {
        assert_eq!(per(&sent_kw, n), want[n], "Key-Write reports sent to {n}");
        assert!(per(&sent_kw, n) > COUNT / 5, "{n} owns a third of the keys");
    }
    // Append: list L (key index % 4) to its table's collector (list 3 to the default, c0).
    let ap_keys = drawn(Opcode::Append, 400);
    let in_list = |l: u64| ap_keys.iter().filter(|&&i| i % 4 == l).count() as u64;
    assert_eq!(per(&sent_ap, "c1"), in_list(1));
    assert_eq!(per(&sent_ap, "c2"), in_list(2));
    assert_eq!(per(&sent_ap, "c0"), in_list(0) + in_list(3));
    // The sketch to its one collector.
    assert_eq!(
        per(&sent_sk, "c1"),
        sent_sk["reports"].as_u64().unwrap(),
        "every Sketch-Merge column to c1"
    );
    // The translators received exactly what was sent to each collector.
    let stats_a = stop_translator(ta);
    let stats_b = stop_translator(tb);
    let got = |n: &str, prim: &str| -> u64 {
        let s = if n == "c2" { &stats_b } else { &stats_a };
        s[n]["reports"][prim].as_u64().unwrap()
    };
    for n in names3 {
        assert_eq!(
            got(n, "key_write"),
            per(&sent_kw, n) + per(&sent_flows, n),
            "{n}"
        );
        assert_eq!(got(n, "key_increment"), per(&sent_ki, n), "{n}");
        assert_eq!(got(n, "postcarding"), per(&sent_pc, n), "{n}");
        assert_eq!(got(n, "append"), per(&sent_ap, n), "{n}");
        assert_eq!(got(n, "sketch_merge"), per(&sent_sk, n), "{n}");
        let rejected: u64 = [&stats_a, &stats_b]
            .iter()
            .filter_map(|s| s[n]["rejected"].as_object())
            .flat_map(|r| r.values())
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(rejected, 0, "{n} rejected reports");
    }
    // A key is on its owner and on no other collector.
    for &i in kw_keys.iter().take(50) {
        let k = keys::key_vec(i, 4);
        let owner = &map1.owner("kw", Key::Bytes(&k)).unwrap().name;
        for n in names3 {
            let r = dta_store::Region::open_read_only(&regions.join(n).join("kw.region")).unwrap();
            let a = dta_collector::query::key_write(&r, &k, None, 1).unwrap();
            assert_eq!(
                a.status == "found",
                n == owner,
                "key {i} on {n} (owner {owner})"
            );
        }
    }
    let ta = start_translator("t1", &full1, &["c0", "c1"], &map1);
    let tb = start_translator("t2", &full1, &["c2"], &map1);

    // ---- 2. every query through the CLI, HTTP and Python ----
    let mut distinct: Vec<u64> = kw_keys.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let sample: Vec<u64> = distinct.iter().copied().take(300).collect();
    let ki_keys = drawn(Opcode::KeyIncrement, COUNT);
    let ki_count = |i: u64, times: u64| {
        ki_keys.iter().filter(|&&j| j == i).count() as u64
            * keys::expected_counter(&keys::key_vec(i, 4))
            * times
    };
    let key_list = |ks: &[u64]| -> String {
        ks.iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let check_kw = |answers: &serde_json::Value, via: &str| {
        let answers = answers.as_array().unwrap();
        assert_eq!(answers.len(), sample.len(), "{via}");
        for (i, a) in sample.iter().zip(answers) {
            let k = keys::key_vec(*i, 4);
            assert_eq!(a["status"], "found", "{via}: key {i}: {a}");
            assert_eq!(
                a["data"].as_str().unwrap(),
                hex::encode(keys::expected_data(&k, 4)),
                "{via}: key {i}"
            );
            // Answered by the collector the data was written to (the first map's owner).
            let written = &map1.owner("kw", Key::Bytes(&k)).unwrap().name;
            assert_eq!(
                a["collectors"][0].as_str().unwrap(),
                written,
                "{via}: key {i}"
            );
        }
    };
    let cli = |map: &Path, what: &str, store: &str, args: &[&str]| -> serde_json::Value {
        let mut c = dta_in(&net.ns("rep"));
        c.args(["query", what, "--cluster"])
            .arg(map)
            .args(["--store", store, "--json"])
            .args(args);
        output(c, &format!("dta query {what} {store} {args:?}"))
    };
    let http = |collector: u8, target: &str| -> serde_json::Value {
        let addr: std::net::SocketAddr = format!("{NET}.{}:{HTTP_PORT}", 20 + collector)
            .parse()
            .unwrap();
        let token = dta_http::Token::new(TOKEN, "test").unwrap();
        let t = target.to_owned();
        let a = run_in(&net.ns("rep"), move || {
            dta_http::client::get(addr, &t, Some(&token), Duration::from_secs(20))
        })
        .unwrap();
        assert_eq!(
            a.status,
            200,
            "{target}: {}",
            String::from_utf8_lossy(&a.body)
        );
        serde_json::from_slice(&a.body).unwrap()
    };
    let check_all = |full: &Path, query: &Path, via_http: u8, times: u64| {
        // Key-Write: a batch through the CLI (the regions read here) and through HTTP (the
        // collector forwards to its peers' APIs).
        check_kw(
            &cli(full, "kw", "kw", &["--key", &key_list(&sample)]),
            "CLI",
        );
        let h = http(
            via_http,
            &format!("/cluster/batch/kw/kw?keys={}", key_list(&sample)),
        );
        check_kw(&h["answers"], "HTTP");
        // Key-Increment, one key at a time and as a batch.
        let ki_sample: Vec<u64> = sample.iter().copied().take(100).collect();
        let batch = cli(full, "ki", "counters", &["--key", &key_list(&ki_sample)]);
        for (i, a) in ki_sample.iter().zip(batch.as_array().unwrap()) {
            assert_eq!(
                a["count"].as_u64().unwrap(),
                ki_count(*i, times),
                "CLI ki {i}"
            );
        }
        let h = http(
            via_http,
            &format!("/cluster/batch/ki/counters?keys={}", key_list(&ki_sample)),
        );
        for (i, a) in ki_sample.iter().zip(h["answers"].as_array().unwrap()) {
            assert_eq!(
                a["count"].as_u64().unwrap(),
                ki_count(*i, times),
                "HTTP ki {i}"
            );
        }
        // Postcarding: whole paths.
        let pc_keys = drawn(Opcode::Postcarding, 200);
        for &i in pc_keys.iter().take(20) {
            let k = keys::key_vec(i, 4);
            let want: Vec<u64> = (0..5)
                .map(|h| keys::postcard_value(&k, h, dta_wire::DEFAULT_POSTCARD_VALUES) as u64)
                .collect();
            let a = cli(full, "postcard", "paths", &["--key", &i.to_string()]);
            let got: Vec<u64> = a["path"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            assert_eq!(got, want, "CLI postcard {i}: {a}");
            let a = http(via_http, &format!("/cluster/query/postcard/paths?key={i}"));
            assert_eq!(a["path"].as_array().unwrap().len(), 5, "HTTP postcard {i}");
        }
        // Append: every list from its owner, each entry as appended.
        for l in 0..4u32 {
            let a = cli(
                full,
                "list",
                "events",
                &["--list", &l.to_string(), "--max", "1000"],
            );
            let want: Vec<String> = ap_keys
                .iter()
                .filter(|&&i| i % 4 == l as u64)
                .map(|&i| hex::encode(keys::expected_data(&keys::key_vec(i, 4), 4)))
                .collect();
            assert_eq!(a["entries"], serde_json::json!(want), "CLI list {l}");
            let h = http(
                via_http,
                &format!("/cluster/query/list/events?list={l}&max=1000"),
            );
            assert_eq!(h["entries"], a["entries"], "HTTP list {l}");
            assert_eq!(
                (&h["complete"], &h["more"]),
                (&true.into(), &false.into()),
                "{h}"
            );
            // Cut by max: the fan-out says so, naming the collector whose part is cut.
            let cut = http(
                via_http,
                &format!("/cluster/query/list/events?list={l}&max=1"),
            );
            if want.len() > 1 {
                assert_eq!(cut["complete"], false, "{cut}");
                assert!(
                    cut["note"].as_str().unwrap().contains("max 1 reached"),
                    "{cut}"
                );
            }
        }
        // Sketch-Merge: a key's estimate is at least its count among the sketch's keys.
        let sk_keys = drawn(Opcode::SketchMerge, 500);
        let k0 = sk_keys[0];
        let n0 = sk_keys.iter().filter(|&&k| k == k0).count() as u64;
        let a = cli(full, "sketch", "flowsizes", &["--key", &k0.to_string()]);
        assert!(a["estimate"].as_u64().unwrap() >= n0, "CLI sketch: {a}");
        assert_eq!(a["collectors"][0], "c1");
        let h = http(
            via_http,
            &format!("/cluster/query/sketch/flowsizes?key={k0}"),
        );
        assert_eq!(h["estimate"], a["estimate"]);
        // Python: the map from the Rust core, the owners' HTTP APIs.
        match common::python() {
            None => dta_testkit::record_skip(
                "cluster_netns::three_collectors_then_four (Python part)",
                "no Python with the dta package (set DTA_PYTHON or build .venv)",
            ),
            Some(py) => {
                let script = format!(
                    "import json, dta\n\
                     c = dta.ClusterClient({query:?}, token={TOKEN:?}, timeout=20)\n\
                     keys = [k.to_bytes(4, 'big') for k in {sample:?}]\n\
                     kw = c.batch('kw', 'kw', keys)\n\
                     ki = [c.ki('counters', k)['count'] for k in keys[:100]]\n\
                     ls = [len(c.list('events', l, max=1000)['entries']) for l in range(4)]\n\
                     print(json.dumps({{'kw': kw, 'ki': ki, 'lists': ls}}))\n",
                    query = query.display().to_string(),
                );
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &net.ns("rep")])
                    .arg(&py)
                    .args(["-c", &script]);
                let v = output(c, "python ClusterClient");
                check_kw(&v["kw"], "Python");
                for (i, n) in sample.iter().zip(v["ki"].as_array().unwrap()) {
                    assert_eq!(n.as_u64().unwrap(), ki_count(*i, times), "Python ki {i}");
                }
                let want: Vec<u64> = (0..4).map(in_list).collect();
                assert_eq!(v["lists"], serde_json::json!(want));
            }
        }
    };
    check_all(&full1, &query1, 0, 1);

    // ---- 3. a fourth collector joins ----
    start_collector(&mut procs, "c3", &query2);
    stop_translator(ta);
    stop_translator(tb);
    let ta = start_translator("t1", &full2, &["c0", "c1"], &map2);
    let tb = start_translator("t2", &full2, &["c2", "c3"], &map2);
    let moved = distinct
        .iter()
        .filter(|&&i| {
            let k = keys::key_vec(i, 4);
            map2.owner("kw", Key::Bytes(&k)).unwrap().name == "c3"
        })
        .count();
    let frac = moved as f64 / distinct.len() as f64;
    assert!(
        (0.19..0.31).contains(&frac),
        "{moved} of {} keys moved",
        distinct.len()
    );
    // Keys written before the change are answered (by their old owner) through the new map;
    // Key-Increment counts written again after the change add up across old and new owner.
    let sent_ki2 = report(&full2, &["-p", "ki", "-c", &c]);
    assert!(
        per(&sent_ki2, "c3") > COUNT / 6,
        "c3 takes its share: {sent_ki2}"
    );
    check_all(&full2, &query2, 3, 2);
    let stats_a = stop_translator(ta);
    let stats_b = stop_translator(tb);
    assert_eq!(
        stats_b["c3"]["reports"]["key_increment"].as_u64().unwrap(),
        per(&sent_ki2, "c3")
    );
    assert_eq!(
        stats_a["c0"]["reports"]["key_increment"].as_u64().unwrap()
            + stats_a["c1"]["reports"]["key_increment"].as_u64().unwrap(),
        per(&sent_ki2, "c0") + per(&sent_ki2, "c1")
    );
}
