//! The XDP translator's stores are readable through their bpffs pins as docs/xdp.md says
//! (`dta query ... --region PIN`, while the translator runs), and the pins are removed at exit
//! unless `--xdp-keep-pins`. Across a veth pair between two network namespaces the test creates,
//! with a bpffs the test mounts in a temporary directory. Needs root (a counted skip otherwise).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dta_testkit::netns::VethPair;

mod common;
use common::dta;

/// A bpffs mounted at a fresh directory, unmounted on drop.
struct Bpffs(tempfile::TempDir);

impl Bpffs {
    fn mount() -> Bpffs {
        let d = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "bpf", "bpf"])
            .arg(d.path())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mount -t bpf");
        Bpffs(d)
    }
}

impl Drop for Bpffs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

fn config(dir: &Path, net: &VethPair) -> PathBuf {
    let f = dir.join("dta.toml");
    std::fs::write(
        &f,
        format!(
            "region_dir = {:?}\n[translator]\nlisten = \"{}:40040\"\nallow = [\"10.84.0.0/24\"]\n\
             [[store]]\nname = \"kw\"\nkind = \"key-write\"\nslots = 4096\nkey_len = 4\n\
             data_len = 4\nredundancy = 2\n",
            dir.join("regions").display().to_string(),
            net.ip_a
        ),
    )
    .unwrap();
    let c = dta_node::config::Config::load(&f).unwrap();
    drop(dta_node::collector::create(&c).unwrap());
    f
}

/// `dta translator --xdp` in namespace `a`, pinning into `pins`; returned once pinned.
fn translator(
    net: &VethPair,
    cfg: &Path,
    pins: &Path,
    keep: bool,
) -> (Child, BufReader<std::process::ChildStderr>) {
    let mut c = Command::new("ip");
    c.args([
        "netns",
        "exec",
        &net.a,
        env!("CARGO_BIN_EXE_dta"),
        "translator",
        "--xdp",
        &net.dev_a,
    ])
    .args(["--xdp-generic", "--stats-interval", "0", "--xdp-pin"])
    .arg(pins)
    .arg("--config")
    .arg(cfg)
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    if keep {
        c.arg("--xdp-keep-pins");
    }
    let mut child = c.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !seen.contains("XDP stores pinned in") {
        let mut l = String::new();
        if err.read_line(&mut l).unwrap() == 0 || Instant::now() > deadline {
            panic!("the translator did not pin its stores: {seen}");
        }
        seen.push_str(&l);
    }
    (child, err)
}

fn stop(mut child: Child, mut err: BufReader<std::process::ChildStderr>) -> String {
    // SAFETY: kill(2) on our own child's pid (`ip netns exec` execs the translator).
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{rest}");
    rest
}

fn query(pin: &Path, key: u32) -> serde_json::Value {
    let out = dta()
        .args([
            "query",
            "kw",
            "--json",
            "--key",
            &key.to_string(),
            "--region",
        ])
        .arg(pin)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "dta query --region {}: {e}: {}{}",
            pin.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn xdp_stores_are_read_through_their_pins_which_go_at_exit() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    let net = VethPair::new("p", 84);
    let bpf = Bpffs::mount();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &net);
    let pins = bpf.0.path().join("dta");

    let (t, err) = translator(&net, &cfg, &pins, false);
    let pin = pins.join("kw");
    assert!(pin.exists(), "no pin {}", pin.display());
    // Not written yet: read through the pin, empty.
    assert_eq!(query(&pin, 5)["status"], "empty");
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &net.b,
            env!("CARGO_BIN_EXE_dta"),
            "report",
            "-q",
            "-p",
            "kw",
        ])
        .args([
            "-c",
            "100",
            "--keys",
            "100",
            "--to",
            &format!("{}:40040", net.ip_a),
        ])
        .output()
        .unwrap();
    common::assert_success(&out);
    common::wait_for("key 5 through the pin", || {
        query(&pin, 5)["status"] == "found"
    });
    let rest = stop(t, err);
    assert!(!pin.exists() && !pins.exists(), "pins left at exit: {rest}");
    // The data is back in the region file.
    let out = dta()
        .args([
            "query", "kw", "--json", "--key", "5", "--store", "kw", "--config",
        ])
        .arg(&cfg)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "found", "{v}");

    // Kept when asked: readable after exit too.
    let (t, err) = translator(&net, &cfg, &pins, true);
    stop(t, err);
    assert!(pin.exists(), "--xdp-keep-pins removed the pin");
    assert_eq!(query(&pin, 5)["status"], "found");
    let _ = std::fs::remove_file(&pin);
    let _ = std::fs::remove_dir(&pins);
}
