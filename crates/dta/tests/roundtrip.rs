//! What one tool writes, another reads back with default options: `dta report` of every
//! primitive into a `dta translator` run from the example configuration (free ports, a temp
//! region directory, nothing else changed), then `dta query` of the keys it sent; `dta report`
//! to a dead port fails.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{dta, free_tcp_port, free_udp_port};
use dta_reporter::loadgen::{
    build_count_min, expected_counter, expected_data, key_indices, key_vec, postcard_value,
    LoadSpec,
};
use dta_wire::Opcode;

const EXAMPLE: &str = include_str!("../../../examples/dta.toml");

/// Reports each `dta report` run sends (the only option besides `--to`, `--quiet` and, for the
/// second Sketch-Merge reporter, `--reporter-id`).
const COUNT: u64 = 1000;

/// The example configuration with its region directory and ports replaced, a collector that
/// created its regions, and a translator running from it.
struct Setup {
    _dir: tempfile::TempDir,
    config: PathBuf,
    listen: String,
    collector: Child,
    translator: Option<Child>,
}

/// `text` with `from` replaced by `to`; `from` must occur (the example still says it).
fn replace(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "examples/dta.toml no longer has {from:?}"
    );
    text.replace(from, to)
}

impl Setup {
    fn start() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let regions = dir.path().join("regions");
        let listen = format!("127.0.0.1:{}", free_udp_port());
        let text = replace(
            EXAMPLE,
            "region_dir = \"dta-regions\"",
            &format!("region_dir = {:?}", regions.display().to_string()),
        );
        let text = replace(&text, "127.0.0.1:40040", &listen);
        let text = replace(
            &text,
            "127.0.0.1:40080",
            &format!("127.0.0.1:{}", free_tcp_port()),
        );
        let config = dir.path().join("dta.toml");
        std::fs::write(&config, text).unwrap();
        let stores = EXAMPLE.matches("[[store]]").count();
        let collector = spawn(dta().arg("collector").arg("--config").arg(&config));
        wait_for("the collector's regions", || {
            std::fs::read_dir(&regions).is_ok_and(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.path().extension().is_some_and(|x| x == "region"))
                    .count()
                    == stores
            })
        });
        let mut s = Setup {
            _dir: dir,
            config,
            listen,
            collector,
            translator: None,
        };
        let mut t = dta();
        t.args(["translator", "--json", "--stats-interval", "0", "--config"])
            .arg(&s.config)
            .stdout(Stdio::piped());
        s.translator = Some(spawn(&mut t));
        // The translator listens once its port is taken.
        let l = s.listen.clone();
        wait_for("the translator's port", || {
            std::net::UdpSocket::bind(&l).is_err()
        });
        s
    }

    /// `dta report --to LISTEN -q -c COUNT ARGS`: must succeed.
    fn report(&self, args: &[&str]) {
        let out = dta()
            .args([
                "report",
                "--to",
                &self.listen,
                "-q",
                "-c",
                &COUNT.to_string(),
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "dta report {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stop the translator (SIGINT, as Ctrl-C) and return its final counters.
    fn stop_translator(&mut self) -> serde_json::Value {
        let t = self.translator.take().unwrap();
        interrupt(&t, libc::SIGINT);
        let out = t.wait_with_output().unwrap();
        assert!(out.status.success(), "translator: {:?}", out.status);
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `dta query WHAT --config CONFIG ARGS --json`, with nothing else.
    fn query(&self, what: &str, args: &[&str]) -> serde_json::Value {
        let out = dta()
            .args(["query", what, "--config"])
            .arg(&self.config)
            .args(args)
            .arg("--json")
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "dta query {what} {args:?}: not JSON ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        for c in self.translator.iter_mut().chain([&mut self.collector]) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn(c: &mut Command) -> Child {
    c.stderr(Stdio::null()).spawn().unwrap()
}

fn interrupt(c: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(c.id() as libc::pid_t, sig) }, 0);
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The key indices a default `dta report` of `primitive` with `COUNT` reports draws.
fn spec(primitive: Opcode) -> LoadSpec {
    let mut s = LoadSpec::new(primitive);
    s.count = Some(COUNT);
    s
}

/// How often each key index occurs in the first `n` draws of `spec`.
fn occurrences(spec: &LoadSpec, n: u64) -> HashMap<u64, u64> {
    let mut m = HashMap::new();
    for i in key_indices(spec).unwrap().take(n as usize) {
        *m.entry(i).or_default() += 1;
    }
    m
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn every_primitive_reported_with_defaults_reads_back_with_defaults() {
    let mut s = Setup::start();
    for p in ["kw", "ki", "postcard", "append", "sketch"] {
        s.report(&["--primitive", p]);
    }
    // The example's Count-Min merges 2 reporters: the second is reporter 0.
    s.report(&["--primitive", "sketch", "--reporter-id", "0"]);
    // The last Append batch and the Postcarding cache are flushed on the translator's timers.
    std::thread::sleep(Duration::from_millis(300));
    let stats = s.stop_translator();
    let rejected: u64 = stats["rejected"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(rejected, 0, "rejected: {}", stats["rejected"]);

    // Key-Write: every key holds its data.
    let kw = spec(Opcode::KeyWrite);
    for &i in occurrences(&kw, COUNT).keys().take(50) {
        let v = s.query("kw", &["--store", "kw", "--key", &i.to_string()]);
        assert_eq!(v["status"], "found", "kw key {i}: {v}");
        assert_eq!(v["data"], hex_of(&expected_data(&key_vec(i, 4), 4)), "{v}");
    }

    // Postcarding: every flow's whole path, values within the store's value set.
    let pc = spec(Opcode::Postcarding);
    let flows = occurrences(&pc, COUNT / u64::from(pc.hops));
    for &i in flows.keys().take(50) {
        let key = key_vec(i, 4);
        let v = s.query("postcard", &["--store", "paths", "--key", &i.to_string()]);
        assert_eq!(v["status"], "found", "postcard key {i}: {v}");
        let want: Vec<u32> = (0..pc.hops)
            .map(|h| postcard_value(&key, h, pc.postcard_values))
            .collect();
        assert_eq!(v["path"], serde_json::json!(want), "postcard key {i}: {v}");
    }

    // Append: list 0 holds the entries in the order sent.
    let ap = spec(Opcode::Append);
    let v = s.query("list", &["--store", "events", "--max", &COUNT.to_string()]);
    let want: Vec<String> = key_indices(&ap)
        .unwrap()
        .take(COUNT as usize)
        .map(|i| hex_of(&expected_data(&key_vec(i, 4), 4)))
        .collect();
    assert_eq!(v["entries"], serde_json::json!(want), "append list 0");

    // Sketch-Merge: the merged Count-Min of the two reporters' (identical) sketches.
    let sk = spec(Opcode::SketchMerge);
    let cm = build_count_min(&sk).unwrap();
    for &i in occurrences(&sk, COUNT).keys().take(50) {
        let key = key_vec(i, 4);
        let v = s.query("sketch", &["--store", "flowsizes", "--key", &i.to_string()]);
        assert_eq!(v["estimate"], 2 * cm.estimate(&key), "sketch key {i}: {v}");
    }

    // Key-Increment: every key counts its counter once per occurrence (the query reads the
    // store's redundancy, not its own default).
    let ki = spec(Opcode::KeyIncrement);
    for (&i, &n) in occurrences(&ki, COUNT).iter().take(50) {
        let v = s.query("ki", &["--store", "counters", "--key", &i.to_string()]);
        let want = n * expected_counter(&key_vec(i, 4));
        assert_eq!(v["count"], want, "ki key {i} ({n} reports): {v}");
    }
}

#[test]
fn report_to_a_dead_port_fails_with_a_message() {
    let dead = format!("127.0.0.1:{}", free_udp_port());
    for p in ["kw", "postcard"] {
        for count in ["1", "1000"] {
            let out = dta()
                .args(["report", "--to", &dead, "-q", "-c", count, "--primitive", p])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{p} x{count} to a dead port: {err}");
            assert!(err.contains("refused"), "{err}");
        }
    }
}
