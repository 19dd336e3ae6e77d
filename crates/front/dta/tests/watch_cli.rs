//! `dta translator` reloads its rules when its configuration file changes, and `dta watch`
//! prints one JSON line per flagged report: a rule added to a running translator flags every
//! Key-Write report from then on, and each one sent is notified exactly once.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{dta, Stack};

const FLAG_KW: &str = "\n[[translator.rules]]\nname = \"flag-kw\"\nprimitive = \"key-write\"\n\
                       store = \"kw\"\naction = \"immediate\"\n";

/// Start `dta watch` and return it once it has subscribed (its first stderr line).
fn watch(config: &std::path::Path, args: &[&str]) -> std::process::Child {
    let mut c = dta()
        .arg("watch")
        .arg("--config")
        .arg(config)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(c.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("watching"), "{line}");
    c
}

fn wait_exit(c: &mut std::process::Child, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if c.try_wait().unwrap().is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn a_rule_added_live_flags_reports_and_watch_prints_each_once() {
    let mut s = Stack::start();
    // Without the rule nothing is flagged: no notice.
    let mut quiet = watch(&s.config, &["--duration", "1"]);
    s.report(50, &["-p", "kw"]);
    let out = wait_exit(&mut quiet, Duration::from_secs(30));
    assert!(out, "watch --duration 1 did not stop");
    let out = quiet.wait_with_output().unwrap();
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Add the rule to the file: the translator picks it up while running.
    let mut text = std::fs::read_to_string(&s.config).unwrap();
    let at = text.find("[[store]]").unwrap();
    text.insert_str(at, &format!("{FLAG_KW}\n"));
    std::fs::write(&s.config, text).unwrap();
    let mut probe = watch(&s.config, &["--count", "1"]);
    let start = Instant::now();
    loop {
        s.report(1, &["-p", "kw"]);
        if wait_exit(&mut probe, Duration::from_millis(200)) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the rule was not reloaded"
        );
    }

    const N: u64 = 200;
    let mut w = watch(&s.config, &["--count", &N.to_string()]);
    s.report(N, &["-p", "kw", "--keys", "1000000"]);
    assert!(
        wait_exit(&mut w, Duration::from_secs(60)),
        "not every report was notified"
    );
    let out = w.wait_with_output().unwrap();
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len() as u64, N);
    let first = lines[0]["seq"].as_u64().unwrap();
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["seq"].as_u64().unwrap(), first + i as u64, "{l}");
        assert_eq!(
            (l["store"].as_str(), l["primitive"].as_str()),
            (Some("kw"), Some("key_write"))
        );
        assert_eq!(l["reports"], 1);
        assert!(l["latency_ns"].as_u64().is_some(), "{l}");
    }
    // No more than N: a further watch sees nothing.
    let mut after = watch(&s.config, &["--duration", "0.5"]);
    assert!(wait_exit(&mut after, Duration::from_secs(30)));
    assert!(after.wait_with_output().unwrap().stdout.is_empty());

    let stats = s.stop_translator();
    assert_eq!(stats["rules"]["reloads"], 1, "{}", stats["rules"]);
    assert!(
        stats["rules"]["flagged"].as_u64().unwrap() > N,
        "{}",
        stats["rules"]
    );
}

const DROP_KW: &str = "\n[[translator.rules]]\nname = \"drop-kw\"\nprimitive = \"key-write\"\n\
                       store = \"kw\"\naction = \"drop\"\n";
const FLAG_KI: &str = "\n[[translator.rules]]\nname = \"flag-ki\"\nprimitive = \"key-increment\"\n\
                       action = \"immediate\"\n";

/// A configuration file caught half-way through an in-place rewrite (truncated to nothing) is
/// refused as a reload, on the file's change and on SIGHUP: the running drop rule keeps
/// dropping, and no further rule set is installed.
#[test]
fn a_truncated_configuration_does_not_empty_the_running_rules() {
    let mut s = Stack::start();
    let original = std::fs::read_to_string(&s.config).unwrap();
    let mut text = original.clone();
    text.insert_str(
        original.find("[[store]]").unwrap(),
        &format!("{DROP_KW}{FLAG_KI}\n"),
    );
    std::fs::write(&s.config, &text).unwrap();
    // Both rules are in once a Key-Increment report is notified.
    let mut probe = watch(&s.config, &["--count", "1"]);
    let start = Instant::now();
    loop {
        s.report(1, &["-p", "ki"]);
        if wait_exit(&mut probe, Duration::from_millis(200)) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the rules were not reloaded"
        );
    }
    // Truncated in place, seen as a change; then SIGHUP too.
    std::fs::write(&s.config, "").unwrap();
    std::thread::sleep(Duration::from_millis(800));
    common::interrupt(s.translator(), libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(800));
    // Key-Write reports: dropped by the rule that is still running, none applied.
    s.report(100, &["-p", "kw", "--keys", "1000000"]);
    std::fs::write(&s.config, &original).unwrap();
    let stats = s.stop_translator();
    assert_eq!(stats["rules"]["reloads"], 1, "{}", stats["rules"]);
    assert_eq!(stats["rules"]["dropped"], 100, "{}", stats["rules"]);
}
