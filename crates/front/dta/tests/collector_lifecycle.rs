//! `dta collector` as a process: a region truncated under it or corrupt at start is reported and
//! skipped while the other stores keep answering, one collector per region directory, and
//! SIGTERM/SIGINT stop it cleanly with its final stats. `dta inspect` and `dta query` report a bad
//! region by file and problem.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod common;

use common::dta;

/// A config serving two stores over HTTP on `port` from `dir/r`.
fn setup(dir: &Path, port: u16, force: bool) -> PathBuf {
    let cfg = dir.join(if force { "force.toml" } else { "dta.toml" });
    std::fs::write(
        &cfg,
        format!(
            "region_dir = 'r'\n[collector]\nhttp = '127.0.0.1:{port}'\nforce = {force}\n\
             [[store]]\nname = 'kw'\nkind = 'key-write'\nslots = 1024\n\
             [[store]]\nname = 'ki'\nkind = 'key-increment'\ncounters = 1024\n"
        ),
    )
    .unwrap();
    cfg
}

/// Create the regions of `cfg` (and release them).
fn create_regions(cfg: &Path) {
    let parsed = dta_node::config::Config::load(cfg).unwrap();
    dta_collector::Collector::create(&parsed.region_dir, &parsed.store, false).unwrap();
}

fn region(cfg: &Path, name: &str) -> PathBuf {
    cfg.parent()
        .unwrap()
        .join("r")
        .join(format!("{name}.region"))
}

/// Overwrite a region's magic: the file is no longer a region.
fn corrupt(path: &Path) {
    let mut f = OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.write_all(b"garbage!").unwrap();
}

/// Status and body of `GET path` on 127.0.0.1:`port`.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let status = resp.get(9..12)?.parse().ok()?;
    Some((status, resp.split_once("\r\n\r\n")?.1.to_owned()))
}

/// `GET /stores` as JSON.
fn stores(port: u16) -> Vec<serde_json::Value> {
    let (status, body) = get(port, "/stores").expect("GET /stores");
    assert_eq!(status, 200, "{body}");
    let start = body.find('[').unwrap();
    let end = body.rfind(']').unwrap();
    serde_json::from_str::<Vec<serde_json::Value>>(&body[start..=end]).unwrap()
}

struct Running {
    child: Child,
    stderr: JoinHandle<String>,
}

/// Start `dta collector --config cfg` and wait until its HTTP API answers.
fn start(cfg: &Path, port: u16) -> Running {
    let mut child = dta()
        .arg("collector")
        .arg("--config")
        .arg(cfg)
        .current_dir(cfg.parent().unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while get(port, "/stores").is_none() {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("collector exited ({st}): {}", stderr.join().unwrap());
        }
        assert!(Instant::now() < deadline, "collector did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Running { child, stderr }
}

impl Running {
    /// Send `sig` and wait for the exit: (exit code, stderr).
    fn stop(mut self, sig: i32) -> (Option<i32>, String) {
        // SAFETY: kill(2) on our own child's PID.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("collector did not stop on signal {sig}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (status.code(), self.stderr.join().unwrap())
    }
}

#[test]
fn region_truncated_under_a_running_collector_is_reported_and_the_others_serve() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_tcp_port();
    let cfg = setup(dir.path(), port, false);
    let run = start(&cfg, port);
    assert_eq!(get(port, "/query/kw/kw?key=1").unwrap().0, 200);

    OpenOptions::new()
        .write(true)
        .open(region(&cfg, "kw"))
        .unwrap()
        .set_len(100)
        .unwrap();
    // The query reads the cut mapping: the process survives and the answer is an error.
    let (status, body) = get(port, "/query/kw/kw?key=1").expect("collector died");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("truncated"), "{body}");
    let (status, body) = get(port, "/query/ki/ki?key=1").unwrap();
    assert_eq!(status, 200, "{body}");
    let list = stores(port);
    let kw = list.iter().find(|s| s["name"] == "kw").expect("kw listed");
    assert_eq!(kw["available"], false, "{kw}");
    assert!(kw["error"].as_str().unwrap().contains("truncated"), "{kw}");
    let ki = list.iter().find(|s| s["header"]["name"] == "ki").unwrap();
    assert_eq!(ki["available"], true, "{ki}");
    let metrics = common::scrape(port).unwrap();
    assert!(
        metrics.contains("dta_store_available{store=\"ki\"} 1"),
        "{metrics}"
    );

    let (code, stderr) = run.stop(libc::SIGTERM);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("region lost"), "{stderr}");
    assert!(stderr.contains("1 unavailable"), "{stderr}");
}

#[test]
fn corrupt_region_at_start_is_listed_and_the_others_serve() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_tcp_port();
    let cfg = setup(dir.path(), port, false);
    create_regions(&cfg);
    corrupt(&region(&cfg, "kw"));

    let run = start(&cfg, port);
    let list = stores(port);
    assert_eq!(list.len(), 2, "{list:?}");
    let kw = list.iter().find(|s| s["name"] == "kw").expect("kw listed");
    assert_eq!(kw["available"], false);
    assert!(kw["error"].as_str().unwrap().contains("bad magic"), "{kw}");
    let (status, body) = get(port, "/query/kw/kw?key=1").unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("bad magic"), "{body}");
    assert_eq!(get(port, "/query/ki/ki?key=1").unwrap().0, 200);
    let (code, stderr) = run.stop(libc::SIGTERM);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("UNAVAILABLE"), "{stderr}");
    // The corrupt file was reported, not recreated.
    let head = std::fs::read(region(&cfg, "kw")).unwrap();
    assert_eq!(&head[..8], b"garbage!");
}

#[test]
fn inspect_and_query_report_a_corrupt_region_by_file_and_problem() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = setup(dir.path(), common::free_tcp_port(), false);
    create_regions(&cfg);
    corrupt(&region(&cfg, "kw"));

    let out = dta()
        .arg("inspect")
        .arg("--config")
        .arg(&cfg)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("ki.region"), "{stdout}");
    assert!(!stdout.contains("kw.region"), "{stdout}");
    assert!(
        stderr.contains("kw.region") && stderr.contains("bad magic"),
        "{stderr}"
    );

    let out = dta()
        .args(["query", "kw", "--store", "kw", "--key", "1", "--config"])
        .arg(&cfg)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("kw.region") && stderr.contains("bad magic"),
        "{stderr}"
    );
}

#[test]
fn a_second_collector_on_one_directory_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_tcp_port();
    let cfg = setup(dir.path(), port, false);
    let run = start(&cfg, port);
    let pid = run.child.id();
    let before = std::fs::metadata(region(&cfg, "kw"))
        .unwrap()
        .modified()
        .unwrap();
    // Without and with `force` (which would recreate the first one's files).
    for force in [false, true] {
        let other = setup(dir.path(), common::free_tcp_port(), force);
        let out = dta()
            .arg("collector")
            .arg("--config")
            .arg(&other)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "force={force}: {stderr}");
        assert!(stderr.contains(&format!("process {pid}")), "{stderr}");
    }
    let after = std::fs::metadata(region(&cfg, "kw"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after);
    assert_eq!(get(port, "/query/kw/kw?key=1").unwrap().0, 200);
    let (code, stderr) = run.stop(libc::SIGTERM);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn sigterm_and_sigint_stop_the_collector_with_its_final_stats() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let dir = tempfile::tempdir().unwrap();
        let port = common::free_tcp_port();
        let cfg = setup(dir.path(), port, false);
        let run = start(&cfg, port);
        let (code, stderr) = run.stop(sig);
        assert_eq!(code, Some(0), "signal {sig}: {stderr}");
        assert!(
            stderr.contains("collector stopped after")
                && stderr.contains("2 stores served, 0 unavailable"),
            "{stderr}"
        );
        assert!(
            stderr.contains("store kw") && stderr.contains("store ki"),
            "{stderr}"
        );
        // Stopped means stopped accepting.
        assert!(get(port, "/stores").is_none());
    }
}
