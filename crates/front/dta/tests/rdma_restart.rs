//! `dta translator --rdma` against `dta responder`, as processes in two network namespaces the
//! test creates (a veth pair between them): a translator killed with SIGKILL (no DREQ) is
//! restarted, reconnects (its REQ replaces the dead connection) and writes; the restarted one
//! exits at the end of `--duration` with a DREQ; the responder stops on SIGTERM with exit 0 and
//! its final stats. Needs root (skipped otherwise).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

mod common;

use common::dta;
use dta_testkit::netns::VethPair;

/// A child process whose stderr lines arrive on a channel (and are kept for the final check).
struct Proc {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Proc {
    fn spawn(mut cmd: Command) -> Proc {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Proc {
            child,
            lines,
            seen: vec![],
        }
    }

    /// Wait (up to [`dta_testkit::WAIT`]) for a stderr line containing `what`.
    fn wait_for(&mut self, what: &str) {
        loop {
            match self.lines.recv_timeout(dta_testkit::WAIT) {
                Ok(l) => {
                    let hit = l.contains(what);
                    self.seen.push(l);
                    if hit {
                        return;
                    }
                }
                Err(_) => panic!("no {what:?} on stderr: {:?}", self.seen),
            }
        }
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill on the pid of a child we spawned and have not reaped.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    /// Wait for the exit; the exit status, stdout and the whole of stderr.
    fn finish(mut self) -> (std::process::ExitStatus, String, String) {
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let status = self.child.wait().unwrap();
        // Every line up to the end of stderr (the reader thread ends there and the channel
        // closes), however late the reader thread runs.
        while let Ok(l) = self.lines.recv_timeout(dta_testkit::WAIT) {
            self.seen.push(l);
        }
        (status, out, self.seen.join("\n"))
    }
}

/// The last JSON object printed on stderr (the final stats).
fn last_json(text: &str) -> serde_json::Value {
    let start = text.rfind("\n{").map_or(0, |i| i + 1);
    serde_json::from_str(&text[start..]).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn killed_translator_restarts_reconnects_and_writes_responder_stops_on_sigterm() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    // Translator in `a` (10.77.0.1), responder in `b` (10.77.0.2).
    let pair = VethPair::new("kt", 77);
    let (nt, nc, vt, vc) = (&pair.a, &pair.b, &pair.dev_a, &pair.dev_b);

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("dta.toml");
    std::fs::write(
        &cfg,
        format!(
            "region_dir = '{}'\n[translator]\nlisten = '10.77.0.1:40050'\nallow = ['10.77.0.0/24']\n\
             [[store]]\nname = 'kw'\nkind = 'key-write'\nslots = 4096\nkey_len = 4\n\
             data_len = 4\n",
            dir.path().join("r").display()
        ),
    )
    .unwrap();
    let exe = env!("CARGO_BIN_EXE_dta");
    let in_ns = |ns: &str| {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, exe]);
        c
    };

    let mut cmd = in_ns(nc);
    cmd.args([
        "responder",
        "--iface",
        vc,
        "--allow",
        &format!("{}/32", pair.ip_a),
        "--config",
    ])
    .arg(&cfg);
    let mut responder = Proc::spawn(cmd);
    responder.wait_for("software RoCE responder on");

    let translator = |extra: &[&str]| {
        let mut cmd = in_ns(nt);
        cmd.args(["translator", "--rdma", vt, "--collector", "10.77.0.2"])
            .args(extra)
            .arg("--config")
            .arg(&cfg);
        let mut p = Proc::spawn(cmd);
        p.wait_for("translator on udp://");
        p
    };
    let report = |count: &str| {
        let out = in_ns(nt)
            .args(["report", "--to", "10.77.0.1:40050", "-p", "kw"])
            .args(["--count", count, "--keys", "64", "--json", "--quiet"])
            .output()
            .unwrap();
        common::assert_success(&out);
    };

    // The first translator connects and writes, then dies without a word.
    let first = translator(&[]);
    report("640");
    std::thread::sleep(Duration::from_millis(300));
    first.signal(libc::SIGKILL);
    let (status, _, _) = first.finish();
    assert!(!status.success());

    // Its successor connects (a new REQ, not a retransmission of the dead one's) and writes.
    // Its --duration outlasts the report below on a loaded machine too (a process start in
    // the namespace and 640 reports); what it did not receive in time would not be written.
    let second = translator(&["--duration", "10", "--json"]);
    report("640");
    let (status, out, err) = second.finish();
    assert!(status.success(), "{err}");
    assert!(err.contains("disconnected from 10.77.0.2"), "{err}");
    let st: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(st["rdma"]["write_packets"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(st["rdma"]["naks_remote_access"], 0, "{st}");

    responder.signal(libc::SIGTERM);
    let (status, _, err) = responder.finish();
    assert!(status.success(), "responder after SIGTERM: {err}");
    let st = last_json(&err);
    assert_eq!(st["cm_replaced"], 1, "{st}");
    assert_eq!(st["cm_dreq"], 1, "{st}");
    assert_eq!(st["connections"], 2, "{st}");
    assert!(st["write_packets"].as_u64().unwrap() > 0, "{st}");

    // A key the second translator wrote reads back from the regions the responder flushed.
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
