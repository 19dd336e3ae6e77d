//! Storage that tells the truth (docs/regions.md, "Space"): on a small filesystem of its own (a
//! 16 MiB tmpfs mounted by the test; root only, skipped otherwise),
//!
//! * `dta check` says beforehand that a region does not fit, naming it, its file, its size and
//!   the free space; the collector then refuses that region with the same facts, and `/readyz`
//!   says it is not ready;
//! * a region that fits is allocated at creation: once the filesystem is filled by someone
//!   else, the translator still writes every page of it, and nothing is lost or mis-diagnosed;
//! * a spill file on a full filesystem is logged a few times (not once per datagram), counted
//!   (`dta_translator_spill_file_errors`) and makes the translator's `/readyz` say why.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

mod common;
use common::{dta, free_tcp_port, free_udp_port, interrupt, scrape, wait_for};

/// A tmpfs of `mib` MiB mounted at a fresh directory, unmounted on drop.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn mount(test: &str, mib: u32) -> Option<SmallFs> {
        if !dta_testkit::is_root() {
            dta_testkit::record_skip(test, "mounting a small tmpfs needs root");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "dta-test"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            dta_testkit::record_skip(test, "mount -t tmpfs failed");
            return None;
        }
        Some(SmallFs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fill what is left with a file of zeros written for real.
    fn fill(&self) {
        let mut f = std::fs::File::create(self.path().join("filler")).unwrap();
        let chunk = vec![0u8; 64 << 10];
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
                    break;
                }
            }
        }
        assert!(dta_store::space::free_bytes(self.path()).unwrap() < 64 << 10);
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A configuration in `dir` with region_dir `regions` and Key-Write stores of `slots` slots each
/// (8 bytes a slot); returns (file, http, listen).
fn config(
    dir: &Path,
    regions: &Path,
    stores: &[(&str, u64)],
    extra: &str,
) -> (PathBuf, String, String) {
    let http = format!("127.0.0.1:{}", free_tcp_port());
    let listen = format!("127.0.0.1:{}", free_udp_port());
    let mut t = format!(
        "region_dir = {:?}\n[collector]\nhttp = \"{http}\"\n[translator]\nlisten = \"{listen}\"\n{extra}\n",
        regions.display().to_string()
    );
    // Each store its own key length: reporters address a Key-Write store by its shape, and a
    // store no report could reach is refused.
    for (i, (name, slots)) in stores.iter().enumerate() {
        t += &format!(
            "[[store]]\nname = \"{name}\"\nkind = \"key-write\"\nslots = {slots}\nkey_len = {}\n\
             data_len = 4\nredundancy = 2\n",
            4 + i
        );
    }
    let f = dir.join(format!("dta-{}.toml", stores.len()));
    std::fs::write(&f, t).unwrap();
    (f, http, listen)
}

/// A child process killed on drop (a failed assertion leaves nothing running).
struct Proc(Option<Child>);

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn(c: &mut std::process::Command) -> Proc {
    Proc(Some(
        c.stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ))
}

/// `GET path` on `addr`: (status, body).
fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let a =
        dta_http::client::get(addr.parse().unwrap(), path, None, Duration::from_secs(10)).ok()?;
    Some((a.status, String::from_utf8_lossy(&a.body).into_owned()))
}

fn stop(mut p: Proc) -> String {
    let c = p.0.take().unwrap();
    interrupt(&c, libc::SIGTERM);
    let out = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn regions_are_allocated_and_one_that_does_not_fit_is_refused_by_name() {
    let Some(fs) = SmallFs::mount(
        "regions_are_allocated_and_one_that_does_not_fit_is_refused_by_name",
        16,
    ) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let regions = fs.path().join("regions");

    // 8 MiB fits in 16: created, allocated for real.
    let (cfg, http, listen) = config(work.path(), &regions, &[("kw", 1 << 20)], "");
    let out = dta()
        .args(["check", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let collector = spawn(dta().args(["collector", "--config"]).arg(&cfg));
    wait_for("the collector's HTTP API", || {
        get(&http, "/readyz").is_some_and(|(s, _)| s == 200)
    });
    {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(regions.join("kw.region")).unwrap();
        assert!(
            m.blocks() * 512 >= m.len(),
            "kw.region is sparse: {} of {}",
            m.blocks() * 512,
            m.len()
        );
    }

    // The translator starts (its notification ring allocated too), someone else fills the
    // filesystem, then the translator writes all over the region.
    let translator = spawn(dta().args(["translator", "--config"]).arg(&cfg));
    let port: u16 = listen.rsplit(':').next().unwrap().parse().unwrap();
    wait_for("the translator's socket", || common::udp_port_bound(port));
    fs.fill();
    let out = dta()
        .args([
            "report",
            "--no-flow-control",
            "--to",
            &listen,
            "--count",
            "200000",
            "--keys",
            "200000",
            "--rate",
            "400000",
            "--quiet",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = stop(translator);
    assert!(
        !err.contains("region lost") && err.contains("\"sink_error\": 0,"),
        "{err}"
    );
    let (status, body) = get(&http, "/readyz").unwrap();
    assert_eq!(status, 200, "{body}");
    let (_, st) = get(&http, "/stores/kw").unwrap();
    let v: serde_json::Value = serde_json::from_str(&st).unwrap();
    // 200 000 keys, 2 copies each, in 2^20 slots: about a third of the words written.
    assert!(v["fill"].as_f64().unwrap() > 0.2, "{v}");
    stop(collector);

    // A second store of 16 MiB cannot fit: `dta check` says so first, naming it, its file, its
    // size and the free space; the collector refuses it with the same facts and is not ready.
    std::fs::remove_file(fs.path().join("filler")).unwrap();
    let (cfg, http, _) = config(
        work.path(),
        &regions,
        &[("kw", 1 << 20), ("big", 1 << 21)],
        "",
    );
    let out = dta()
        .args(["check", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains("store big") && stdout.contains("REFUSED: does not fit"),
        "{stdout}"
    );
    assert!(
        stderr.contains("the collector would refuse big (")
            && stderr.contains("big.region, 16.0 MiB)")
            && stderr.contains("free on the filesystem of"),
        "{stderr}"
    );
    let collector = spawn(dta().args(["collector", "--config"]).arg(&cfg));
    wait_for("the collector's HTTP API", || {
        get(&http, "/healthz").is_some()
    });
    let (status, body) = get(&http, "/readyz").unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("store big") && body.contains("big.region: a region of 16781312 bytes (16.0 MiB) does not fit: its filesystem has"),
        "{body}"
    );
    let err = stop(collector);
    assert!(err.contains("does not fit"), "{err}");
    assert!(
        !regions.join("big.region").exists(),
        "a refused region leaves no file"
    );
}

#[test]
fn a_spill_file_on_a_full_filesystem_is_logged_rarely_counted_and_unready() {
    let Some(fs) = SmallFs::mount(
        "a_spill_file_on_a_full_filesystem_is_logged_rarely_counted_and_unready",
        1,
    ) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let spill = fs.path().join("spill");
    fs.fill();
    // A meter of 1 000 writes/s with a tiny burst and no memory to speak of: a high-priority
    // burst goes to the spill file, which cannot take it.
    let extra = format!(
        "[translator.flow_control]\nwrite_budget = 1000\nburst = 8\nmin_budget = 100\n\
         spill_memory = 4096\nspill_file = {:?}\nspill_file_bytes = 1048576\n",
        spill.display().to_string()
    );
    let (cfg, _, listen) = config(
        work.path(),
        &work.path().join("regions"),
        &[("kw", 4096)],
        &extra,
    );
    let collector = spawn(dta().args(["collector", "--config"]).arg(&cfg));
    wait_for("regions", || work.path().join("regions/kw.region").exists());
    let metrics = free_tcp_port();
    let translator = spawn(
        dta()
            .args(["translator", "--metrics", &metrics.to_string(), "--config"])
            .arg(&cfg),
    );
    wait_for("metrics", || scrape(metrics).is_some());
    let out = dta()
        .args([
            "report",
            "--no-flow-control",
            "--to",
            &listen,
            "--priority",
            "high",
            "--count",
            "20000",
            "--quiet",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let errors = wait_for_value("spill file errors", || {
        let m = scrape(metrics)?;
        let n: u64 = m
            .lines()
            .find(|l| {
                l.starts_with("dta_translator_spill_file_errors_total ")
                    || l.starts_with("dta_translator_spill_file_errors ")
            })?
            .rsplit(' ')
            .next()?
            .parse()
            .ok()?;
        (n > 100).then_some(n)
    });
    let (status, body) = get(&format!("127.0.0.1:{metrics}"), "/readyz").unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("the spill file could not be written"),
        "{body}"
    );
    let err = stop(translator);
    stop(collector);
    let lines = err.lines().filter(|l| l.contains("spill file")).count();
    assert!(
        (1..=3).contains(&lines),
        "{lines} log lines for {errors} failed spill writes:\n{err}"
    );
    assert!(err.contains("its filesystem is full"), "{err}");
}

fn wait_for_value<T: std::fmt::Debug>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let mut got = None;
    wait_for(what, || {
        got = f();
        got.is_some()
    });
    got.unwrap()
}
