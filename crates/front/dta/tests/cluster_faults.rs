//! One sick peer costs one answer (docs/scale-out.md, "Reading"): three collectors of a cluster
//! map on loopback, asked over HTTP, one of them stopped (SIGSTOP: it accepts connections and
//! never answers), then killed (connections refused). A batch through a healthy collector's
//! `/cluster/batch` and `dta query --cluster` answers the healthy owners' keys, and gives each of
//! the sick owner's keys an error naming it and saying "timed out" or "refused", within one
//! deadline, never a failed request. A map whose `http` points at the wrong collector is refused
//! at query time and warned about at start.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{dta, free_tcp_port, free_udp_port, interrupt, wait_for};

/// The client's per-collector deadline (`dta_http::client::DEFAULT_CLIENT_TIMEOUT`).
const DEADLINE: Duration = Duration::from_secs(5);

struct Node {
    name: String,
    http: String,
    child: Option<Child>,
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A cluster map of `nodes` (HTTP only: no `region_dir`, so every owner is asked over HTTP) with
/// one Key-Write store `kw`; `http_of` overrides a collector's `http`.
fn map(dir: &Path, nodes: &[(String, String)], http_of: &[(&str, &str)]) -> PathBuf {
    let mut t = String::from("version = 1\n");
    for (name, http) in nodes {
        let http = http_of
            .iter()
            .find(|(n, _)| n == name)
            .map_or(http.as_str(), |(_, h)| h);
        t += &format!(
            "[[collector]]\nname = \"{name}\"\nmode = \"shm\"\ntranslator = \"127.0.0.1:{}\"\nhttp = \"{http}\"\n",
            free_udp_port()
        );
    }
    t += "[[store]]\nname = \"kw\"\nkind = \"key-write\"\nkey_len = 4\n";
    let f = dir.join(format!("map-{}.toml", http_of.len()));
    std::fs::write(&f, t).unwrap();
    f
}

fn config(dir: &Path, name: &str, http: &str) -> PathBuf {
    let regions = dir.join(format!("regions-{name}"));
    let f = dir.join(format!("{name}.toml"));
    std::fs::write(
        &f,
        format!(
            "region_dir = {:?}\n[collector]\nhttp = \"{http}\"\n[[store]]\nname = \"kw\"\n\
             kind = \"key-write\"\nslots = 4096\nkey_len = 4\ndata_len = 4\nredundancy = 2\n",
            regions.display().to_string()
        ),
    )
    .unwrap();
    f
}

fn start(dir: &Path, name: &str, http: &str, map: &Path) -> Child {
    let child = dta()
        .args(["collector", "--name", name, "--cluster"])
        .arg(map)
        .arg("--config")
        .arg(config(dir, name, http))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&format!("collector {name} on {http}"), || {
        common::scrape_at(http).is_some()
    });
    child
}

/// Three collectors c0, c1, c2 of one map, all started.
fn cluster(dir: &Path) -> (Vec<Node>, PathBuf) {
    let names: Vec<(String, String)> = (0..3)
        .map(|i| (format!("c{i}"), format!("127.0.0.1:{}", free_tcp_port())))
        .collect();
    let m = map(dir, &names, &[]);
    let nodes = names
        .iter()
        .map(|(n, h)| Node {
            name: n.clone(),
            http: h.clone(),
            child: Some(start(dir, n, h, &m)),
        })
        .collect();
    (nodes, m)
}

/// 4-byte keys, as hex, with their owners in `map` (from `dta cluster show --json`'s rule: the
/// owner is asked of the map through the CLI, never recomputed here).
fn owners(map: &Path, keys: &[u32]) -> Vec<String> {
    let out = dta()
        .args(["cluster", "show", "--json", "--sample"])
        .arg(keys.iter().max().unwrap().saturating_add(1).to_string())
        .arg("--map")
        .arg(map)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sample = v["stores"][0]["assignment"].as_array().unwrap().clone();
    keys.iter()
        .map(|&k| sample[k as usize]["owner"].as_str().unwrap().to_owned())
        .collect()
}

fn get(addr: &str, path: &str) -> (u16, serde_json::Value) {
    let a =
        dta_http::client::get(addr.parse().unwrap(), path, None, Duration::from_secs(30)).unwrap();
    (a.status, serde_json::from_slice(&a.body).unwrap())
}

fn query(map: &Path, keys: &str) -> (Output, Duration) {
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_dta"))
        .args(["query", "kw", "--store", "kw", "--key", keys, "--cluster"])
        .arg(map)
        .output()
        .unwrap();
    (out, t0.elapsed())
}

/// Keys 0..24 and their owners; at least two of each collector's.
fn keys(map: &Path) -> (Vec<u32>, Vec<String>) {
    let keys: Vec<u32> = (0..24).collect();
    let owners = owners(map, &keys);
    for c in ["c0", "c1", "c2"] {
        assert!(
            owners.iter().filter(|o| *o == c).count() >= 2,
            "too few keys of {c}: {owners:?}"
        );
    }
    (keys, owners)
}

fn key_list(keys: &[u32]) -> String {
    keys.iter()
        .map(|k| format!("0x{k:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Each answer of a batch: an answer from its owner, or (the sick owner's keys) an error naming
/// it and containing `why`.
fn check_answers(
    answers: &[serde_json::Value],
    keys: &[u32],
    owners: &[String],
    sick: &str,
    why: &str,
) {
    assert_eq!(answers.len(), keys.len());
    for ((a, k), o) in answers.iter().zip(keys).zip(owners) {
        if o == sick {
            let e = a["error"]
                .as_str()
                .unwrap_or_else(|| panic!("key {k}: {a}"));
            assert!(
                e.contains(&format!("collector {sick}")) && e.contains(why),
                "key {k}: {e}"
            );
            assert_eq!(
                (a["collector"].as_str(), a["key"].as_str()),
                (Some(sick), Some(&*format!("{k:08x}"))),
                "{a}"
            );
        } else {
            assert_eq!(a["status"], "empty", "key {k}: {a}");
            assert_eq!(a["collectors"], serde_json::json!([o]), "key {k}: {a}");
        }
    }
}

#[test]
fn a_hung_owner_costs_its_own_keys_one_deadline_and_a_dead_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut nodes, map) = cluster(dir.path());
    let (keys, owners) = keys(&map);
    let list = key_list(&keys);

    // All healthy: every key answered by its owner, through c0's HTTP API and the CLI.
    let (status, v) = get(&nodes[0].http, &format!("/cluster/batch/kw/kw?keys={list}"));
    assert_eq!(status, 200, "{v}");
    check_answers(v["answers"].as_array().unwrap(), &keys, &owners, "none", "");
    let (out, _) = query(&map, &list);
    assert_eq!(out.status.code(), Some(1), "all empty: not found"); // documented: 1 = not found
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        keys.len()
    );

    // c2 stopped: it accepts connections (the kernel's backlog) and never answers.
    let c2 = nodes[2].child.as_ref().unwrap().id() as i32;
    unsafe { libc::kill(c2, libc::SIGSTOP) };
    let t0 = Instant::now();
    let (status, v) = get(&nodes[0].http, &format!("/cluster/batch/kw/kw?keys={list}"));
    let took = t0.elapsed();
    assert_eq!(status, 200, "{v}");
    check_answers(
        v["answers"].as_array().unwrap(),
        &keys,
        &owners,
        "c2",
        "timed out",
    );
    assert!(
        took < DEADLINE * 2,
        "the batch took {took:?}: more than one deadline"
    );
    assert!(
        took >= DEADLINE - Duration::from_millis(200),
        "{took:?}: c2 was not waited for"
    );

    // The CLI: every key's line, the sick owner's an error; exit 2 (a key had no answer).
    let (out, took) = query(&map, &list);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(took < DEADLINE * 2, "{took:?}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), keys.len(), "{text}");
    for ((l, k), o) in lines.iter().zip(&keys).zip(&owners) {
        assert!(l.contains(&format!("0x{k:08x}")), "{l}");
        if o == "c2" {
            assert!(l.contains("error: collector c2: timed out"), "{l}");
        } else {
            assert!(l.contains(&format!("(from {o})")), "{l}");
        }
    }
    // One key of the hung owner alone: an error naming it, exit 2, no answer labelled otherwise.
    let k2 = keys[owners.iter().position(|o| o == "c2").unwrap()];
    let (out, _) = query(&map, &format!("0x{k2:08x}"));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("collector c2: timed out"), "{err}");
    let (status, v) = get(
        &nodes[0].http,
        &format!("/cluster/query/kw/kw?key=0x{k2:08x}"),
    );
    assert_eq!(status, 504, "{v}");
    assert!(v["error"].as_str().unwrap().contains("timed out"), "{v}");

    // c2 gone: its keys are refused at once.
    let mut c = nodes[2].child.take().unwrap();
    unsafe { libc::kill(c2, libc::SIGCONT) };
    c.kill().unwrap();
    c.wait().unwrap();
    let t0 = Instant::now();
    let (status, v) = get(&nodes[0].http, &format!("/cluster/batch/kw/kw?keys={list}"));
    assert_eq!(status, 200, "{v}");
    check_answers(
        v["answers"].as_array().unwrap(),
        &keys,
        &owners,
        "c2",
        "refused",
    );
    assert!(t0.elapsed() < DEADLINE, "{:?}", t0.elapsed());
    let (out, _) = query(&map, &list);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("error: collector c2: refused"));

    for n in &mut nodes[..2] {
        let c = n.child.take().unwrap();
        interrupt(&c, libc::SIGTERM);
        assert!(c.wait_with_output().unwrap().status.success(), "{}", n.name);
    }
}

#[test]
fn a_map_pointing_at_the_wrong_collector_is_warned_about_and_never_mislabels() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, _) = cluster(dir.path());
    // A second map in which c0's and c1's `http` are swapped: asking c1 reaches c0 (itself,
    // when asked through c0). (One address for both is refused when the map is read.)
    let named: Vec<(String, String)> = nodes
        .iter()
        .map(|n| (n.name.clone(), n.http.clone()))
        .collect();
    let wrong = map(
        dir.path(),
        &named,
        &[("c0", &nodes[1].http), ("c1", &nodes[0].http)],
    );
    let (keys, owners) = keys(&wrong);
    let k1 = keys[owners.iter().position(|o| o == "c1").unwrap()];

    // A collector started with that map says so (the other inconsistencies are unit-tested
    // with dta_node::collector::cluster_http_warnings).
    let http = format!("127.0.0.1:{}", free_tcp_port());
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let c = start(&other, "c1", &http, &wrong);
    interrupt(&c, libc::SIGTERM);
    let out = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "warning: collector \"c1\" listens for HTTP on {http} but the cluster map says {}",
            nodes[0].http
        )),
        "{err}"
    );

    // The CLI with that map: c1's key is an error saying who answered, not c0's answer as c1's.
    let (out, _) = query(&wrong, &format!("0x{k1:08x}"));
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("collector c1") && err.contains("served by collector \"c0\""),
        "{err}"
    );
    drop(nodes);
}

/// Python's `ClusterClient.batch` with a hung owner: the others' answers, an error object per
/// key of the hung one, within one deadline.
#[test]
fn python_batch_with_a_hung_owner() {
    let Some(py) = common::python() else {
        dta_testkit::record_skip(
            "python_batch_with_a_hung_owner",
            "no Python with the dta package (scripts/test-bindings.sh builds it)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (nodes, map) = cluster(dir.path());
    let (keys, owners) = keys(&map);
    unsafe { libc::kill(nodes[2].child.as_ref().unwrap().id() as i32, libc::SIGSTOP) };
    let script = format!(
        "import dta, json, time\n\
         c = dta.ClusterClient({map:?})\n\
         t0 = time.monotonic()\n\
         answers = c.batch('kw', 'kw', [k.to_bytes(4, 'big') for k in {keys:?}])\n\
         print(json.dumps({{'answers': answers, 'took': time.monotonic() - t0}}))\n",
        map = map.display().to_string(),
    );
    let out = Command::new(py).args(["-c", &script]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    check_answers(
        v["answers"].as_array().unwrap(),
        &keys,
        &owners,
        "c2",
        "timed out",
    );
    let took = v["took"].as_f64().unwrap();
    assert!(took < 2.0 * DEADLINE.as_secs_f64(), "{took} s");
}

/// The console of any collector shows every collector of the map: ready ones ready, a hung one
/// (SIGSTOP: it accepts, never answers) and a dead one not ready with the reason, within the
/// peers' deadline; the history keeps each one's readiness over time.
#[test]
fn the_console_shows_every_collectors_health() {
    let dir = tempfile::tempdir().unwrap();
    let (mut nodes, _) = cluster(dir.path());
    let hung = nodes[1].child.as_ref().unwrap().id();
    unsafe { libc::kill(hung as i32, libc::SIGSTOP) };
    let dead = nodes[2].child.take().unwrap();
    common::interrupt(&dead, libc::SIGTERM);
    let mut dead = dead;
    assert!(dead.wait().unwrap().success());
    let t0 = Instant::now();
    let (code, v) = get(&nodes[0].http, "/console/peers");
    assert_eq!(code, 200, "{v}");
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "one deadline, asked in parallel"
    );
    let by_name = |n: &str| {
        v["collectors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == n)
            .unwrap_or_else(|| panic!("{n}: {v}"))
            .clone()
    };
    assert_eq!(by_name("c0")["ready"], true, "{v}");
    assert_eq!(by_name("c0")["status"], 200, "{v}");
    for n in ["c1", "c2"] {
        let c = by_name(n);
        assert_eq!(c["ready"], false, "{v}");
        assert!(!c["error"].as_str().unwrap_or_default().is_empty(), "{v}");
    }
    // The history: c0 ready, the others not, in the cluster chart.
    wait_for("the history's readiness points", || {
        let (_, h) = get(&nodes[0].http, "/console/history");
        let last = |n: &str| {
            h["series"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["chart"] == "cluster" && s["label"] == n)
                .and_then(|s| s["points"].as_array().and_then(|p| p.last()).cloned())
                .map(|p| p[1].as_f64())
        };
        last("c0") == Some(Some(1.0))
            && last("c1") == Some(Some(0.0))
            && last("c2") == Some(Some(0.0))
    });
    unsafe { libc::kill(hung as i32, libc::SIGCONT) };
}
