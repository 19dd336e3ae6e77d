//! What an operator relies on: `dta check` (the collector's plan, with sizes, before it runs),
//! `/healthz` and `/readyz` on every HTTP server, the request log, logs without colour codes off a
//! terminal or as JSON, the listening addresses at start-up, and every relative path of a
//! configuration taken relative to the file, whatever the working directory.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{assert_success, dta, free_tcp_port, free_udp_port, interrupt, wait_for};

const EXAMPLE: &str = include_str!("../../../../examples/dta.toml");

/// The example configuration in `dir/etc/dta.toml` with its ports replaced and its region
/// directory the relative `regions` (so `dir/etc/regions`); returns (file, http, listen).
fn write_config(dir: &Path) -> (std::path::PathBuf, String, String) {
    let etc = dir.join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let http = format!("127.0.0.1:{}", free_tcp_port());
    let listen = format!("127.0.0.1:{}", free_udp_port());
    for from in [
        "region_dir = \"dta-regions\"",
        "127.0.0.1:40080",
        "127.0.0.1:40040",
    ] {
        assert!(EXAMPLE.contains(from), "examples/dta.toml lost {from:?}");
    }
    let text = EXAMPLE
        .replace("region_dir = \"dta-regions\"", "region_dir = \"regions\"")
        .replace("127.0.0.1:40080", &http)
        .replace("127.0.0.1:40040", &listen);
    let f = etc.join("dta.toml");
    std::fs::write(&f, text).unwrap();
    (f, http, listen)
}

/// `GET path` on `addr`: (status, body).
fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let (head, body) = resp.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

fn wait_http(addr: &str) {
    wait_for(&format!("HTTP on {addr}"), || {
        get(addr, "/healthz").is_some()
    });
}

fn check(config: &Path, cwd: &Path) -> std::process::Output {
    dta()
        .current_dir(cwd)
        .args(["check", "--json", "--config"])
        .arg(config)
        .output()
        .unwrap()
}

/// Stop `c` with SIGTERM; its exit status must be success; its stderr.
fn stop(c: Child) -> String {
    interrupt(&c, libc::SIGTERM);
    let out = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{:?}: {err}", out.status);
    err
}

#[test]
fn check_plans_the_regions_the_collector_then_creates_with_those_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let (conf, http, _) = write_config(dir.path());
    let regions = dir.path().join("etc/regions");
    // Run from elsewhere: the relative region_dir is the file's directory's.
    let elsewhere = dir.path().join("cwd");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = check(Path::new("../etc/dta.toml"), &elsewhere);
    assert_success(&out);
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        plan["region_dir"]
            .as_str()
            .unwrap()
            .ends_with("etc/regions"),
        "{plan}"
    );
    assert_eq!(plan["region_dir_exists"], false);
    let stores = plan["stores"].as_array().unwrap();
    assert_eq!(stores.len(), EXAMPLE.matches("[[store]]").count());
    assert!(stores.iter().all(|s| s["state"] == "new"), "{plan}");
    let total: u64 = stores.iter().map(|s| s["bytes"].as_u64().unwrap()).sum();
    assert_eq!(plan["total_bytes"].as_u64(), Some(total));
    assert_eq!(plan["collector_http"].as_str(), Some(http.as_str()));
    assert!(!regions.exists(), "dta check created nothing");

    // The collector, from yet another directory, creates exactly that.
    let c = dta()
        .current_dir(&elsewhere)
        .args(["collector", "--config", "../etc/dta.toml"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_http(&http);
    for s in stores {
        // Printed as the configuration's path was given: relative to the working directory.
        let path = elsewhere.join(s["path"].as_str().unwrap());
        assert_eq!(
            path.canonicalize().unwrap().parent(),
            Some(regions.canonicalize().unwrap().as_path())
        );
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            s["bytes"].as_u64().unwrap(),
            "{}",
            s["name"]
        );
    }
    let err = stop(c);
    assert!(
        err.contains(&format!("query API on http://{http}")),
        "{err}"
    );

    // Checked again: reopened, data kept.
    let out = check(&conf, dir.path());
    assert_success(&out);
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        plan["stores"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["state"] == "reopened"),
        "{plan}"
    );

    // A store whose parameters changed: the collector would refuse its file; check says so and
    // fails, naming it.
    let text = std::fs::read_to_string(&conf).unwrap();
    let kw = text
        .find("kind = \"key-write\"")
        .expect("a key-write store");
    let slots = kw + text[kw..].find("slots = ").unwrap();
    let changed = format!("{}slots = 1024\n{}", &text[..slots], {
        let rest = &text[slots..];
        &rest[rest.find('\n').unwrap() + 1..]
    });
    std::fs::write(&conf, changed).unwrap();
    let out = dta()
        .args(["check", "--config"])
        .arg(&conf)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("REFUSED"), "{stdout}");
    assert!(stderr.contains("would refuse"), "{stderr}");
}

#[test]
fn check_reports_what_is_wrong_and_checks_a_cluster_map() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "regoin_dir = 'x'\n").unwrap();
    let out = dta()
        .args(["check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("regoin_dir") && err.contains("bad.toml"),
        "{err}"
    );

    // A non-loopback HTTP API without a token is refused, as the collector would.
    let open = dir.path().join("open.toml");
    std::fs::write(&open, "[collector]\nhttp = '0.0.0.0:40080'\n").unwrap();
    let out = dta()
        .args(["check", "--config"])
        .arg(&open)
        .env_remove("DTA_HTTP_TOKEN")
        .env_remove("DTA_HTTP_TOKEN_FILE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("token"));

    let (conf, _, _) = write_config(dir.path());
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let out = dta()
        .args(["check", "--config"])
        .arg(&conf)
        .arg("--cluster")
        .arg(repo.join("examples/cluster.toml"))
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("configuration ") && text.contains(": valid"),
        "{text}"
    );
    assert!(
        text.contains("cluster map ") && text.contains("collectors"),
        "{text}"
    );
    assert!(
        text.contains(" MiB") || text.contains(" KiB"),
        "sizes: {text}"
    );
    let broken = dir.path().join("map.toml");
    std::fs::write(&broken, "version = 1\n").unwrap();
    let out = dta()
        .args(["check", "--config"])
        .arg(&conf)
        .arg("--cluster")
        .arg(&broken)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("map.toml"));
}

/// A `[translator]` setting that would exhaust memory or threads (the largest integer TOML
/// holds, or just past its bound) is refused with the setting's name by every command that
/// reads the file, before anything is allocated: exit status 2, never an abort.
#[test]
fn hostile_translator_settings_are_refused_by_name_before_any_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let max = i64::MAX;
    for (setting, value) in [
        ("postcard_cache_entries", max.to_string()),
        ("postcard_cache_entries", "1099511627776".to_string()),
        ("threads", "100000".to_string()),
        ("recv_batch", "0".to_string()),
        ("recv_batch", "100000000".to_string()),
        ("recv_buffer", max.to_string()),
        ("postcard_timeout_ms", max.to_string()),
        ("sketch_batch_columns", "0".to_string()),
    ] {
        let conf = dir.path().join("hostile.toml");
        std::fs::write(
            &conf,
            format!("region_dir = 'r'\n[translator]\n{setting} = {value}\n"),
        )
        .unwrap();
        for cmd in [&["check"][..], &["collector"], &["translator"]] {
            let out = dta().args(cmd).arg("--config").arg(&conf).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{cmd:?} {setting} = {value}: {err}"
            );
            assert!(
                err.contains(&format!("translator.{setting} = {value}")),
                "{cmd:?}: {err}"
            );
        }
    }
    assert!(!dir.path().join("r").exists(), "no region was created");
}

#[test]
fn collector_health_readiness_and_request_log_without_colours() {
    let dir = tempfile::tempdir().unwrap();
    let (conf, http, _) = write_config(dir.path());
    // stderr is a pipe: no ANSI codes.
    let c = dta()
        .args(["collector", "--config"])
        .arg(&conf)
        .env_remove("NO_COLOR")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_http(&http);
    assert_eq!(get(&http, "/healthz").unwrap(), (200, "ok\n".into()));
    assert_eq!(get(&http, "/readyz").unwrap(), (200, "ready\n".into()));
    // A region lost under the collector: alive, not ready, and why.
    let kw = dir.path().join("etc/regions/kw.region");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&kw)
        .unwrap()
        .set_len(0)
        .unwrap();
    let (status, body) = get(&http, "/readyz").unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("not ready") && body.contains("kw"), "{body}");
    assert_eq!(get(&http, "/healthz").unwrap().0, 200);
    let err = stop(c);
    assert!(!err.contains('\x1b'), "ANSI codes off a terminal:\n{err}");
    // One request line per request: method, path, status, latency.
    let line = err
        .lines()
        .find(|l| l.contains("path=/readyz") && l.contains("status=503"))
        .unwrap_or_else(|| panic!("no request log line:\n{err}"));
    assert!(
        line.contains("method=GET") && line.contains("latency_us="),
        "{line}"
    );
    // Answered probes are not worth a line at the default level: a supervisor or an open
    // console would fill the log.
    assert!(
        !err.lines()
            .any(|l| l.contains("path=/healthz") || l.contains("status=200")),
        "answered requests logged at the default level:\n{err}"
    );
}

#[test]
fn json_logs_with_the_flag_or_the_environment() {
    for by_env in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (conf, http, _) = write_config(dir.path());
        let mut cmd = dta();
        cmd.args(["collector", "--config"]).arg(&conf);
        if by_env {
            cmd.env("DTA_LOG_FORMAT", "json");
        } else {
            cmd.args(["--log-format", "json"]);
        }
        let c = cmd.stderr(Stdio::piped()).spawn().unwrap();
        wait_http(&http);
        // Answered requests are logged at debug; a refusal at info, where this looks.
        assert_eq!(get(&http, "/stores").unwrap().0, 200);
        assert_eq!(get(&http, "/no/such/route").unwrap().0, 404);
        let err = stop(c);
        let events: Vec<serde_json::Value> = err
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let req = events
            .iter()
            .find(|e| e["path"] == "/no/such/route")
            .unwrap_or_else(|| panic!("by_env {by_env}: no JSON request event:\n{err}"));
        assert_eq!(req["method"], "GET");
        assert_eq!(req["status"], 404);
        assert_eq!(req["level"], "INFO");
        assert!(
            !events.iter().any(|e| e["path"] == "/stores"),
            "an answered request at the default level:\n{err}"
        );
        assert!(req["latency_us"].is_u64(), "{req}");
        assert!(
            events.iter().any(|e| e["message"]
                .as_str()
                .is_some_and(|m| m.contains(&format!("http://{http}")))),
            "the listening address as an event:\n{err}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let (conf, _, _) = write_config(dir.path());
    let out = dta()
        .args(["--log-format", "xml", "check", "--config"])
        .arg(&conf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "clap refuses an unknown format");
    assert!(String::from_utf8_lossy(&out.stderr).contains("xml"));
}

#[test]
fn translator_and_int_sink_metrics_servers_answer_healthz_and_readyz() {
    let dir = tempfile::tempdir().unwrap();
    let (conf, http, listen) = write_config(dir.path());
    let c = dta()
        .args(["collector", "--config"])
        .arg(&conf)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_http(&http);
    let metrics = format!("127.0.0.1:{}", free_tcp_port());
    let t = dta()
        .args([
            "translator",
            "--stats-interval",
            "0",
            "--metrics",
            &metrics,
            "--config",
        ])
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_http(&metrics);
    assert_eq!(get(&metrics, "/healthz").unwrap(), (200, "ok\n".into()));
    assert_eq!(get(&metrics, "/readyz").unwrap(), (200, "ready\n".into()));
    let err = stop(t);
    // Every listening address at start-up.
    assert!(
        err.contains(&format!("translator on udp://{listen}")),
        "{err}"
    );
    assert!(
        err.contains(&format!("metrics on http://{metrics}/metrics")),
        "{err}"
    );
    stop(c);

    // The INT sink: relative region_dir under the file's directory, from another cwd.
    let d = dir.path().join("int");
    std::fs::create_dir(&d).unwrap();
    let udp = format!("127.0.0.1:{}", free_udp_port());
    common::write_int_config(&d, &udp, "");
    let mport = format!("127.0.0.1:{}", free_tcp_port());
    let sink = dta()
        .current_dir(dir.path())
        .args(["int-sink", "--config", "int/int.toml", "--metrics", &mport])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while get(&mport, "/healthz").is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "int-sink metrics"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(get(&mport, "/readyz").unwrap(), (200, "ready\n".into()));
    assert!(d.join("regions/paths.region").exists());
    let err = stop(sink);
    assert!(err.contains(&format!("int-sink on udp://{udp}")), "{err}");
    assert!(
        err.contains(&format!("metrics on http://{mport}/metrics")),
        "{err}"
    );
}

#[test]
fn generate_writes_man_pages_and_completions() {
    let dir = tempfile::tempdir().unwrap();
    let out = dta()
        .arg("generate")
        .arg("man")
        .arg(dir.path().join("man"))
        .output()
        .unwrap();
    assert_success(&out);
    let page = std::fs::read_to_string(dir.path().join("man/dta-check.1")).unwrap();
    assert!(page.contains("\\-\\-cluster"), "{page}");
    let out = dta()
        .arg("generate")
        .arg("completions")
        .arg(dir.path().join("c"))
        .output()
        .unwrap();
    assert_success(&out);
    for f in ["dta.bash", "_dta", "dta.fish"] {
        let text = std::fs::read_to_string(dir.path().join("c").join(f)).unwrap();
        assert!(text.contains("check"), "{f}");
    }
    // Hidden from the help an operator reads.
    let help = dta().arg("--help").output().unwrap();
    assert!(!String::from_utf8_lossy(&help.stdout).contains("generate"));
}

/// Errors say a thing once (no operating-system error repeated, no path twice), and an unknown
/// store names the stores that exist.
#[test]
fn errors_say_a_thing_once_and_an_unknown_store_lists_the_stores() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.region");
    for args in [
        vec![
            "query".to_string(),
            "kw".into(),
            "--key".into(),
            "1".into(),
            "--region".into(),
            missing.display().to_string(),
        ],
        vec![
            "pcap".into(),
            "replay".into(),
            "--to".into(),
            "127.0.0.1:9".into(),
            dir.path().join("missing.pcap").display().to_string(),
        ],
        vec!["inspect".into(), missing.display().to_string()],
    ] {
        let out = dta().args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.matches("(os error 2)").count(), 1, "{args:?}: {err}");
        assert_eq!(err.matches("missing.").count(), 1, "{args:?}: {err}");
    }
    // The example configuration's stores, named when the one asked for is not among them.
    let out = dta()
        .args([
            "query",
            "kw",
            "--store",
            "nope",
            "--key",
            "1",
            "--region-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no store named \"nope\""), "{err}");
    let stores = EXAMPLE.matches("[[store]]").count();
    let listed = err
        .split("the stores are: ")
        .nth(1)
        .unwrap_or_else(|| panic!("{err}"))
        .trim()
        .split(", ")
        .count();
    assert_eq!(listed, stores, "{err}");
}

/// A long command shows progress on a terminal only: piped, `dta pcap replay` and `dta report`
/// print their result on stdout and nothing on stderr.
#[test]
fn long_commands_are_quiet_when_piped() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("t.pcap");
    let out = dta()
        .args(["pcap", "gen", "--flows", "5", "--out"])
        .arg(&pcap)
        .output()
        .unwrap();
    assert_success(&out);
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = sink.local_addr().unwrap().to_string();
    let out = dta()
        .args(["pcap", "replay", "--to", &to])
        .arg(&pcap)
        .output()
        .unwrap();
    quiet(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["sent"].as_u64().unwrap() > 0, "{v}");
    let out = dta()
        .args([
            "report",
            "--no-flow-control",
            "--count",
            "1000",
            "--to",
            &to,
        ])
        .output()
        .unwrap();
    quiet(&out);
}

/// A command that succeeded and wrote nothing on stderr.
fn quiet(out: &std::process::Output) {
    assert_success(out);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every /metrics passes Prometheus's own linter (`promtool check metrics`, the Prometheus text
/// format a scraper gets without asking for OpenMetrics), carries `dta_build_info` and the
/// process families, and no family is exported by two kinds of process under one name.
#[test]
fn metrics_pass_promtool_and_name_each_family_once() {
    if std::process::Command::new("promtool")
        .arg("--version")
        .output()
        .is_err()
    {
        dta_testkit::skip!("promtool missing (Debian's prometheus package: scripts/setup.sh)");
    }
    let dir = tempfile::tempdir().unwrap();
    let (config, http, listen) = write_config(dir.path());
    let collector = common::spawn(dta().args(["collector", "--config"]).arg(&config));
    wait_http(&http);
    let tm = free_tcp_port();
    let translator = common::spawn(
        dta()
            .args([
                "translator",
                "--stats-interval",
                "0",
                "--metrics",
                &tm.to_string(),
            ])
            .arg("--config")
            .arg(&config),
    );
    wait_for("the translator's metrics", || common::scrape(tm).is_some());
    assert!(!listen.is_empty());
    let int_dir = dir.path().join("int");
    std::fs::create_dir_all(&int_dir).unwrap();
    common::write_int_config(&int_dir, &format!("127.0.0.1:{}", free_udp_port()), "");
    let im = free_tcp_port();
    let sink = common::spawn(
        dta()
            .args(["int-sink", "--metrics", &im.to_string(), "--config"])
            .arg(int_dir.join("int.toml")),
    );
    wait_for("the sink's metrics", || common::scrape(im).is_some());
    let texts = [
        ("collector", get(&http, "/metrics").unwrap().1),
        ("translator", common::scrape(tm).unwrap()),
        ("int-sink", common::scrape(im).unwrap()),
    ];
    let mut families: Vec<std::collections::BTreeSet<String>> = vec![];
    for (who, text) in &texts {
        assert!(
            !text.contains("# EOF"),
            "{who}: the Prometheus text format, not OpenMetrics"
        );
        assert!(
            text.contains(&format!(
                "dta_build_info{{version=\"{}\",component=\"{who}\"}} 1",
                env!("CARGO_PKG_VERSION")
            )),
            "{who}: {text}"
        );
        assert!(text.contains("process_resident_memory_bytes "), "{who}");
        let mut p = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = p.wait_with_output().unwrap();
        assert!(
            out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
            "{who}: promtool: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains("=\"\""), "{who}: an empty label value");
        families.push(
            text.lines()
                .filter_map(|l| l.strip_prefix("# TYPE "))
                .map(|l| l.split(' ').next().unwrap().to_owned())
                .filter(|f| f.starts_with("dta_") && f != "dta_build_info")
                .collect(),
        );
    }
    for (i, a) in families.iter().enumerate() {
        for (j, b) in families.iter().enumerate().skip(i + 1) {
            let both: Vec<_> = a.intersection(b).collect();
            assert!(
                both.is_empty(),
                "{} and {}: {both:?}",
                texts[i].0,
                texts[j].0
            );
        }
    }
    for mut c in [sink, translator, collector] {
        interrupt(&c, libc::SIGTERM);
        assert!(c.wait().unwrap().success());
    }
}
