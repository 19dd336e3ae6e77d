//! Nothing silent, from the command line: a configuration in which a store can never receive a
//! report, a cluster map with two collectors at one place, a secret file that is a device, a
//! FIFO, oversize or all-zero, a key others may read, a time range longer than a store keeps, a
//! duration without its unit, and the build's own gaps are each refused or said, by the command
//! an operator runs (`dta check`, `dta cluster check`, `dta query`, `dta --version`,
//! `dta report --json`).

use std::path::Path;
use std::process::Output;

mod common;
use common::{dta, free_udp_port};

fn run(args: &[&str]) -> Output {
    dta().args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn config(dir: &Path, extra: &str, stores: &str) -> std::path::PathBuf {
    let p = dir.join("dta.toml");
    std::fs::write(
        &p,
        format!(
            "region_dir = 'regions'\n[translator]\nlisten = '127.0.0.1:{}'\n{extra}\n{stores}",
            free_udp_port()
        ),
    )
    .unwrap();
    p
}

const KI: &str = "[[store]]\nname = 'ki'\nkind = 'key-increment'\ncounters = 1024\nkey_len = 4\n";

#[test]
fn a_store_no_report_can_reach_is_refused_naming_both() {
    let d = tempfile::tempdir().unwrap();
    let twin = format!(
        "{KI}[[store]]\nname = 'ki_windows'\nkind = 'key-increment'\ncounters = 1024\n\
         key_len = 4\nwindows = 6\nwindow_ms = 10000\n"
    );
    let c = config(d.path(), "", &twin);
    let o = run(&["check", "--config", c.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("\"ki_windows\" can never receive a report")
            && e.contains("routed to store \"ki\"")
            && e.contains("another key length"),
        "{e}"
    );
    // The collector refuses it at start too, with the same words.
    let o = run(&["collector", "--config", c.to_str().unwrap()]);
    assert!(!o.status.success() && stderr(&o).contains("can never receive a report"));
    // Another key length: each reachable.
    let ok = format!(
        "{KI}[[store]]\nname = 'ki_windows'\nkind = 'key-increment'\ncounters = 1024\n\
         key_len = 6\nwindows = 6\nwindow_ms = 10000\n"
    );
    let c = config(d.path(), "", &ok);
    let o = run(&["check", "--config", c.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_cluster_map_with_two_collectors_at_one_address_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("cluster.toml");
    std::fs::write(
        &m,
        "version = 1\n\
         [[collector]]\nname = 'a'\ntranslator = '127.0.0.1:41000'\nhttp = '127.0.0.1:8080'\nmode = 'shm'\n\
         [[collector]]\nname = 'b'\ntranslator = '127.0.0.1:41001'\nhttp = '127.0.0.1:8080'\nmode = 'shm'\n\
         [[store]]\nname = 'kw'\nkind = 'key-write'\n",
    )
    .unwrap();
    let o = run(&["cluster", "check", "--map", m.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("collectors \"a\" and \"b\" share one HTTP address (127.0.0.1:8080)"),
        "{e}"
    );
}

#[test]
fn secret_files_are_read_bounded_and_checked_before_a_service_starts() {
    let d = tempfile::tempdir().unwrap();
    let check = |key: &str| {
        let c = config(
            d.path(),
            &format!("control_key_file = '{key}'"),
            "[[store]]\nname = 'kw'\nkind = 'key-write'\nslots = 1024\n",
        );
        run(&["check", "--config", c.to_str().unwrap()])
    };
    // A device is refused at once, before anything is read (it was read until the kernel
    // killed the process).
    let t = std::time::Instant::now();
    let o = check("/dev/zero");
    assert!(
        !o.status.success() && stderr(&o).contains("a character device"),
        "{}",
        stderr(&o)
    );
    assert!(t.elapsed() < std::time::Duration::from_secs(10));
    // A FIFO without a writer does not hold the start.
    let fifo = d.path().join("key.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a fresh path in our temporary directory.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let o = check(fifo.to_str().unwrap());
    assert!(stderr(&o).contains("a FIFO"), "{}", stderr(&o));
    // Oversize, all-zero, readable by others.
    let write = |name: &str, content: &str, mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        let p = d.path().join(name);
        std::fs::write(&p, content).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let big = write("big.key", &"0".repeat(1 << 20), 0o600);
    assert!(stderr(&check(&big)).contains("a secret file is at most"));
    let zero = write("zero.key", &"0".repeat(32), 0o600);
    assert!(stderr(&check(&zero)).contains("all zero"));
    let open = write("open.key", "00112233445566778899aabbccddeeff\n", 0o644);
    let o = check(&open);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("control key file") && out.contains("WARNING") && out.contains("chmod 600"),
        "{out}"
    );
    // Said once in the log, where the key is read.
    assert_eq!(
        stderr(&o).matches("has mode 0644").count(),
        1,
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_version_and_check_say_what_the_build_left_out() {
    let o = run(&["--version"]);
    assert!(o.status.success());
    let v = String::from_utf8_lossy(&o.stdout);
    assert!(
        v.starts_with(&format!("dta {}", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    // This build has its XDP programs (the tests need clang: scripts/setup.sh): nothing to say;
    // dta check says so in words, and lists none missing.
    let d = tempfile::tempdir().unwrap();
    let c = config(
        d.path(),
        "",
        "[[store]]\nname = 'kw'\nkind = 'key-write'\nslots = 1024\n",
    );
    let o = run(&["check", "--config", c.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let missing = plan["xdp_programs_missing"].as_array().unwrap();
    assert_eq!(
        missing.is_empty(),
        !v.contains("built without"),
        "{v} {plan}"
    );
}

#[test]
fn a_window_longer_than_the_store_keeps_is_answered_as_cut_and_a_bare_number_refused() {
    let d = tempfile::tempdir().unwrap();
    let c = config(
        d.path(),
        "",
        "[[store]]\nname = 'win'\nkind = 'key-increment'\ncounters = 1024\nkey_len = 4\n\
         windows = 6\nwindow_ms = 10000\n",
    );
    let c = c.to_str().unwrap();
    let o = run(&["check", "--config", c]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The regions, as the collector creates them; the translator enters the current window.
    let col = common::spawn(dta().args(["collector", "--config", c]));
    common::wait_for("the region", || {
        d.path().join("regions/win.region").exists()
    });
    let tr = common::spawn(dta().args(["translator", "--config", c]));
    let q = |w: &str| {
        run(&[
            "query", "ki", "--config", c, "--store", "win", "--key", "1", "--window", w, "--json",
        ])
    };
    common::wait_for("a window held", || q("all").status.success());
    let o = q("last:15m");
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["complete"], false, "{v}");
    let note = v["note"].as_str().unwrap();
    assert!(
        note.contains("last 15 min") && note.contains("6 windows of 10 s"),
        "{note}"
    );
    let o = q("last:30s");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["complete"], true, "{v}");
    let o = q("last:5");
    assert!(
        !o.status.success() && stderr(&o).contains("unit"),
        "{}",
        stderr(&o)
    );
    for mut p in [tr, col] {
        common::interrupt(&p, libc::SIGTERM);
        let _ = p.wait();
    }
}

#[test]
fn report_json_shows_flow_control_and_its_counters() {
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = sink.local_addr().unwrap().to_string();
    let o = run(&[
        "report",
        "--no-flow-control",
        "--to",
        &to,
        "-c",
        "100",
        "--json",
        "-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["flow_control"], false, "{v}");
    for k in [
        "notices",
        "bad_nacks",
        "control_wrong_source",
        "control_unauthenticated",
        "control_bad_authenticator",
        "control_replayed",
        "control_unbound",
        "control_stale_life",
        "hellos",
    ] {
        assert_eq!(v[k], 0, "{k}: {v}");
    }
    // A retransmittable reporter needs the control port: the flag is refused with it.
    let o = run(&[
        "report",
        "--no-flow-control",
        "--retransmittable",
        "--to",
        &to,
    ]);
    assert!(!o.status.success() && stderr(&o).contains("cannot be used with"));
}

/// A keyed reporter announces its life and the keyed translator counts it: `dta report
/// --control-key-file` says hello (counted in its JSON), and the translator's own counters
/// (`flow_control.hellos`, `dta_translator_hellos_total`) show it accepted; a hello under
/// another key is counted as such, never taken.
#[test]
fn a_keyed_reporter_says_hello_and_the_translator_counts_it() {
    let d = tempfile::tempdir().unwrap();
    let key = d.path().join("control.key");
    std::fs::write(&key, "00112233445566778899aabbccddeeff\n").unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let other = d.path().join("other.key");
    std::fs::write(&other, "ffeeddccbbaa99887766554433221100\n").unwrap();
    std::fs::set_permissions(&other, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let c = config(d.path(), "control_key_file = 'control.key'", KI);
    let cfg = std::fs::read_to_string(&c).unwrap();
    let listen = cfg
        .lines()
        .find_map(|l| l.strip_prefix("listen = '"))
        .unwrap()
        .trim_end_matches('\'')
        .to_string();
    let c = c.to_str().unwrap();
    let col = common::spawn(dta().args(["collector", "--config", c]));
    common::wait_for("the region", || d.path().join("regions/ki.region").exists());
    let tr = dta()
        .args([
            "translator",
            "--json",
            "--stats-interval",
            "0",
            "--config",
            c,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let port: u16 = listen.rsplit(':').next().unwrap().parse().unwrap();
    common::wait_for("the translator", || common::udp_port_bound(port));
    let report = |k: &Path| {
        let o = run(&[
            "report",
            "--to",
            &listen,
            "--control-key-file",
            k.to_str().unwrap(),
            "--nack-port",
            "0",
            "-c",
            "1000",
            "--json",
            "-q",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let v = report(&key);
    assert!(v["hellos"].as_u64().unwrap() >= 1, "{v}");
    let v = report(&other);
    assert!(v["hellos"].as_u64().unwrap() >= 1, "{v}");
    common::interrupt(&tr, libc::SIGTERM);
    let out = tr.wait_with_output().unwrap();
    common::assert_success(&out);
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hellos = &st["flow_control"]["hellos"];
    assert!(hellos["accepted"].as_u64().unwrap() >= 1, "{st}");
    assert!(hellos["bad_authenticator"].as_u64().unwrap() >= 1, "{st}");
    let mut col = col;
    common::interrupt(&col, libc::SIGTERM);
    let _ = col.wait();
}
