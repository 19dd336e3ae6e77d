//! INT end to end through the real commands: `dta pcap gen` writes a trace and its ground truth,
//! `dta int-sink` (with line-protocol export and Prometheus metrics) receives `dta pcap replay`,
//! and `dta query int path` answers every flow as the ground truth says.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{dta, free_tcp_port, free_udp_port, scrape};
use dta_metrics::{parse_exposition, value};

/// `d/int.toml`: an INT sink on 127.0.0.1:`port` ([`common::write_int_config`]).
fn write_config(d: &std::path::Path, port: u16, sink: &str) {
    common::write_int_config(d, &format!("127.0.0.1:{port}"), sink);
}

/// Wait until the sink's metrics endpoint on `mport` answers (it starts once the sink's UDP
/// sockets are bound).
fn wait_metrics(mport: u16) {
    common::wait_for("the sink's metrics endpoint", || scrape(mport).is_some());
}

/// The sink's counters of telemetry reports taken and of datagrams refused for their source.
fn taken_and_rejected(mport: u16) -> (u64, u64) {
    let s = parse_exposition(&scrape(mport).expect("metrics")).unwrap();
    let n = |name, labels: &[(&str, &str)]| {
        value(&s, name, labels).unwrap_or_else(|| panic!("no {name} {labels:?}")) as u64
    };
    (
        n("dta_int_telemetry_reports_total", &[]),
        n(
            "dta_int_sources_rejected_total",
            &[("reason", "source_not_allowed")],
        ),
    )
}

/// `dta pcap gen` of `flows` flows into `d/trace.pcap` (ground truth `d/trace.json`).
fn gen_trace(d: &std::path::Path, flows: u32) -> serde_json::Value {
    let pcap = d.join("trace.pcap");
    let out = dta()
        .args([
            "pcap",
            "gen",
            "--max-packets",
            "20",
            "--seed",
            "3",
            "--flows",
        ])
        .arg(flows.to_string())
        .arg("--out")
        .arg(&pcap)
        .output()
        .unwrap();
    common::assert_success(&out);
    serde_json::from_str(&std::fs::read_to_string(d.join("trace.json")).unwrap()).unwrap()
}

/// `dta query int path` of `flow`: its JSON.
fn query_path(d: &std::path::Path, flow: &str) -> serde_json::Value {
    let out = dta()
        .args(["query", "int", "path", "--store", "paths", "--flow", flow])
        .arg("--region-dir")
        .arg(d.join("regions"))
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{flow}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn pcap_replay_into_int_sink_then_query_paths() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let truth = gen_trace(d, 40);
    let pcap = d.join("trace.pcap");

    let port = free_udp_port();
    let mport = free_tcp_port();
    write_config(d, port, "");
    let lp = d.join("export.lp");
    let mut sink = dta()
        .args([
            "int-sink",
            "--duration",
            "60",
            "--metrics",
            &format!("127.0.0.1:{mport}"),
        ])
        .arg("--config")
        .arg(d.join("int.toml"))
        .arg("--influx")
        .arg(&lp)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its metrics endpoint answers once its UDP socket is bound.
    wait_metrics(mport);
    let out = dta()
        .args([
            "pcap",
            "replay",
            "--rate",
            "5000",
            "--to",
            &format!("127.0.0.1:{port}"),
        ])
        .arg(&pcap)
        .output()
        .unwrap();
    common::assert_success(&out);
    std::thread::sleep(Duration::from_millis(300));
    let metrics = scrape(mport).expect("metrics endpoint");
    assert!(metrics.contains("dta_int"), "{metrics}");
    // Stop it once the replay is done (a fixed --duration could end before a loaded machine has
    // sent everything): SIGTERM flushes every flow held.
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(sink.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let status = sink.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(sink.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");

    // Flow records were exported as line protocol when the sink flushed its FlowCache.
    let lines = std::fs::read_to_string(&lp).unwrap();
    assert!(lines.lines().any(|l| l.starts_with("int_flow")), "{lines}");

    // Every flow's path, through the CLI.
    let flows = truth["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 40);
    for f in flows {
        let flow = f["flow"].as_str().unwrap();
        let v = query_path(d, flow);
        assert_eq!(v["status"], "found", "{flow}: {v}");
        assert_eq!(v["path"], f["path"], "{flow}: {v}");
    }
}

/// SIGTERM (what a service manager sends) ends `dta int-sink` cleanly: the flows it holds are
/// written and it exits 0; Ctrl-C (SIGINT) the same.
#[test]
fn int_sink_flushes_and_exits_zero_on_sigterm_and_sigint() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let truth = gen_trace(d, 5);
        let (port, mport) = (free_udp_port(), free_tcp_port());
        write_config(d, port, "");
        let sink = dta()
            .args(["int-sink", "--metrics", &format!("127.0.0.1:{mport}")])
            .arg("--config")
            .arg(d.join("int.toml"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_metrics(mport);
        let out = dta()
            .args(["pcap", "replay", "--to", &format!("127.0.0.1:{port}")])
            .arg(d.join("trace.pcap"))
            .output()
            .unwrap();
        common::assert_success(&out);
        std::thread::sleep(Duration::from_millis(200));
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(sink.id() as libc::pid_t, sig) }, 0);
        let out = sink.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "signal {sig}: {:?}: {err}",
            out.status
        );
        assert!(!err.contains("Interrupted"), "{err}");
        for f in truth["flows"].as_array().unwrap() {
            let flow = f["flow"].as_str().unwrap();
            let v = query_path(d, flow);
            assert_eq!(v["status"], "found", "signal {sig}, {flow}: {v}");
            assert_eq!(v["path"], f["path"], "{flow}: {v}");
        }
    }
}

/// The `[sink] allow` list (default loopback): a source outside it is dropped and counted by
/// reason; inside it, taken.
#[test]
fn int_sink_takes_reports_only_from_allowed_sources() {
    for (allow, taken) in [
        (r#"["10.0.0.0/8", "::1"]"#, false),
        (r#"["127.0.0.0/8"]"#, true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let truth = gen_trace(d, 3);
        let (port, mport) = (free_udp_port(), free_tcp_port());
        write_config(d, port, &format!("allow = {allow}"));
        let mut sink = dta()
            .args(["int-sink", "--metrics", &format!("127.0.0.1:{mport}")])
            .arg("--config")
            .arg(d.join("int.toml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_metrics(mport);
        let out = dta()
            .args(["pcap", "replay", "--to", &format!("127.0.0.1:{port}")])
            .arg(d.join("trace.pcap"))
            .output()
            .unwrap();
        assert!(out.status.success());
        let sent = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["sent"]
            .as_u64()
            .unwrap();
        // Every datagram sent is either taken or refused, once the sink has read them all.
        let (_, rejected) = dta_testkit::wait_until(
            &format!("{allow}: the sink to take or refuse all {sent} datagrams"),
            || taken_and_rejected(mport),
            |(taken, rejected)| taken + rejected == sent,
        );
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(
            unsafe { libc::kill(sink.id() as libc::pid_t, libc::SIGTERM) },
            0
        );
        assert!(sink.wait().unwrap().success());
        let flow = truth["flows"][0]["flow"].as_str().unwrap();
        let v = query_path(d, flow);
        if taken {
            assert_eq!(rejected, 0, "{allow}");
            assert_eq!(v["status"], "found", "{allow}: {v}");
        } else {
            assert!(rejected > 0, "{allow}: {rejected} rejected");
            assert_ne!(v["status"], "found", "{allow}: {v}");
        }
    }
}

/// Start `dta int-sink` on `d/int.toml` writing flow records to `d/records.jsonl`; returns
/// once its metrics endpoint answers (its sockets are bound by then).
fn start_sink(d: &std::path::Path, mport: u16) -> std::process::Child {
    let sink = dta()
        .args(["int-sink", "--metrics", &format!("127.0.0.1:{mport}")])
        .arg("--config")
        .arg(d.join("int.toml"))
        .arg("--records")
        .arg(d.join("records.jsonl"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_metrics(mport);
    sink
}

/// `dta int-sink check` of `d`'s records against its trace, with the stores' paths: its JSON.
fn check(d: &std::path::Path) -> (bool, serde_json::Value, String) {
    let out = dta()
        .args(["int-sink", "check", "--truth"])
        .arg(d.join("trace.json"))
        .arg("--records")
        .arg(d.join("records.jsonl"))
        .arg("--config")
        .arg(d.join("int.toml"))
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.success(),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Several sink threads (flows steered to them by the kernel): every flow's record is whole
/// (one record, from one thread) and exact against the ground truth, its path in the stores,
/// and the final stats add up over the threads.
#[test]
fn int_sink_threads_keep_every_flow_record_exact() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    gen_trace(d, 300);
    let (port, mport) = (free_udp_port(), free_tcp_port());
    write_config(d, port, "threads = 3\nidle_timeout_ms = 600000");
    let sink = start_sink(d, mport);
    let out = dta()
        .args(["pcap", "replay", "--rate", "20000"])
        .args(["--to", &format!("127.0.0.1:{port}")])
        .arg(d.join("trace.pcap"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let replay: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let metrics = scrape(mport).expect("metrics");
    assert!(
        metrics.contains("dta_int_sink_kernel_drops_total 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("dta_int_sink_recv_buffer_bytes"),
        "{metrics}"
    );
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(sink.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let out = sink.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("3 threads"), "{err}");
    let stats: serde_json::Value =
        serde_json::from_str(&err[err.find("{\n").expect("final stats")..]).unwrap();
    assert_eq!(stats["reports"], replay["sent"], "{stats}");
    assert_eq!(stats["receive"]["threads"], 3, "{stats}");
    assert_eq!(stats["receive"]["kernel_drops"], 0, "{stats}");
    let (ok, v, err) = check(d);
    assert!(ok, "{v}\n{err}");
    assert_eq!(v["flows_exact"], 300, "{v}");
    assert_eq!(v["flows_in_several_records"], 0, "{v}");
    assert_eq!(v["paths_from_store"]["wrong"], 0, "{v}");
    assert_eq!(v["paths_from_store"]["found_exact"], 300, "{v}");
    // Every thread took a part: each record is from one of them, and the flushes add up.
    assert_eq!(stats["flows_flushed"], 300, "{stats}");
}

/// SIGINT and SIGTERM in the middle of a replay: the sink stops receiving, flushes every flow
/// it holds (their records exact for what it received) and prints its final stats; what the
/// sender had not sent yet is missing, nothing else.
#[test]
fn int_sink_flushes_every_flow_on_a_signal_mid_replay() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        gen_trace(d, 200);
        let (port, mport) = (free_udp_port(), free_tcp_port());
        write_config(d, port, "threads = 2\nidle_timeout_ms = 600000");
        let sink = start_sink(d, mport);
        let replay = dta()
            .args(["pcap", "replay", "--rate", "500"])
            .args(["--to", &format!("127.0.0.1:{port}")])
            .arg(d.join("trace.pcap"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // Mid-replay: once the sink has taken part of the trace (the replay, at 500/s, needs
        // seconds for the rest).
        dta_testkit::wait_until(
            "the sink to take 100 reports",
            || taken_and_rejected(mport),
            |&(taken, _)| taken > 100,
        );
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(sink.id() as libc::pid_t, sig) }, 0);
        let out = sink.wait_with_output().unwrap();
        let mut replay = replay;
        let _ = replay.kill();
        let _ = replay.wait();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "signal {sig}: {err}");
        assert!(!err.contains("Interrupted"), "{err}");
        let stats: serde_json::Value =
            serde_json::from_str(&err[err.find("{\n").expect("final stats")..]).unwrap();
        let reports = stats["reports"].as_u64().unwrap();
        assert!(reports > 100, "signal {sig}: {stats}");
        // Every report received is in a flushed flow record.
        let records = std::fs::read_to_string(d.join("records.jsonl")).unwrap();
        let (mut n, mut packets) = (0u64, 0u64);
        for l in records.lines() {
            let r: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(r["reason"], "flush", "{r}");
            n += 1;
            packets += r["packets"].as_u64().unwrap();
        }
        assert_eq!(packets, reports, "signal {sig}");
        assert_eq!(stats["flows_flushed"].as_u64().unwrap(), n, "{stats}");
        // The check finds the flows not reached yet missing, and nothing wrong in the rest
        // except flows cut short.
        let (ok, v, _) = check(d);
        assert!(!ok, "a mid-run stop cannot have every flow: {v}");
        assert_eq!(v["flows_unexpected"], 0, "{v}");
        assert_eq!(v["paths_from_store"]["wrong"], 0, "{v}");
    }
}

/// The receive settings are checked before anything is bound: a useless receive buffer, a
/// batch beyond the buffers, too many threads are errors that say which.
#[test]
fn int_sink_refuses_bad_receive_settings() {
    for (line, says) in [
        ("recv_buffer = 1", "recv_buffer must be"),
        ("recv_buffer = 4294967296", "recv_buffer must be"),
        ("recv_batch = 0", "recv_batch must be"),
        ("recv_batch = 5000", "recv_batch must be"),
        ("threads = 100000", "threads must be"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write_config(d, free_udp_port(), line);
        let out = dta()
            .args(["int-sink", "--duration", "0.1", "--config"])
            .arg(d.join("int.toml"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{line}: {err}");
        assert!(err.contains(says), "{line}: {err}");
    }
}

/// AF_XDP settings the sink cannot honour are refused at start, saying which: a busy poll of 0
/// or past the longest, busy polling without AF_XDP, and the redirect program's generic mode
/// where the fast path's program does the redirect on the same interface.
#[test]
fn int_sink_refuses_af_xdp_settings_it_cannot_honour() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_config(d, free_udp_port(), "");
    for (args, says) in [
        (
            &["--af-xdp", "lo", "--af-xdp-busy-poll", "0"][..],
            "--af-xdp-busy-poll",
        ),
        (
            &["--af-xdp", "lo", "--af-xdp-busy-poll", "10001"][..],
            "--af-xdp-busy-poll",
        ),
        (&["--af-xdp-busy-poll", "50"][..], "--af-xdp"),
        (
            &["--xdp", "lo", "--af-xdp", "lo", "--af-xdp-generic"][..],
            "use --xdp-generic",
        ),
    ] {
        let out = dta()
            .args(["int-sink", "--duration", "0.1", "--config"])
            .arg(d.join("int.toml"))
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// `examples/int-sink.toml` runs as it is (here on a free port, in a temporary directory):
/// `--duration` stops it, it says its threads and receive buffer, and exits 0.
#[test]
fn the_example_int_sink_configuration_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../examples/int-sink.toml"),
    )
    .unwrap();
    let port = free_udp_port();
    let text = text.replace("127.0.0.1:32766", &format!("127.0.0.1:{port}"));
    assert!(text.contains(&port.to_string()));
    std::fs::write(d.join("int.toml"), text).unwrap();
    let out = dta()
        .args(["int-sink", "--duration", "0.3", "--config"])
        .arg(d.join("int.toml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("receive buffer"), "{err}");
    assert!(err.contains("\"kernel_drops\": 0"), "{err}");
}

/// What changed recently, from the CLI and from the collector's HTTP API alike: the newest
/// events of every kind (decoded, newest first, filtered by switch) and a switch's histogram in
/// the current window of a windowed store, the windows named in the answer; a window the store
/// does not hold is an error with a message on both.
#[test]
fn events_and_windowed_histograms_agree_between_cli_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let udp = free_udp_port();
    let http = format!("127.0.0.1:{}", free_tcp_port());
    // Every queue occupancy above 1 is an event; histograms in windows of a minute.
    write_config(d, udp, "thresholds = { queue_occupancy = 1 }");
    let text = std::fs::read_to_string(d.join("int.toml")).unwrap();
    let stores = &text[text.find("[[store]]").unwrap()..];
    let stores = stores.replace(
        "key_len = 6\n",
        "key_len = 6\nwindows = 5\nwindow_ms = 60000\n",
    );
    std::fs::write(
        d.join("collector.toml"),
        format!("region_dir = \"regions\"\n[collector]\nhttp = \"{http}\"\n{stores}"),
    )
    .unwrap();
    std::fs::write(
        d.join("sink.toml"),
        format!(
            "region_dir = \"regions\"\nlisten = \"127.0.0.1:{udp}\"\n[sink]\nint_udp_port = \
             5000\nthresholds = {{ queue_occupancy = 1 }}\n"
        ),
    )
    .unwrap();
    let mut collector = common::spawn(
        dta()
            .args(["collector", "--config"])
            .arg(d.join("collector.toml")),
    );
    let addr: std::net::SocketAddr = http.parse().unwrap();
    let get = |path: &str| {
        dta_http::client::get(addr, path, None, Duration::from_secs(5))
            .map(|a| (a.status, String::from_utf8_lossy(&a.body).into_owned()))
    };
    common::wait_for("the collector's API", || get("/healthz").is_ok());
    let mport = free_tcp_port();
    let mut sink = common::spawn(
        dta()
            .args(["int-sink", "--metrics", &mport.to_string(), "--config"])
            .arg(d.join("sink.toml")),
    );
    wait_metrics(mport);
    let truth = gen_trace(d, 10);
    let out = dta()
        .args(["pcap", "replay", "--to", &format!("127.0.0.1:{udp}")])
        .arg(d.join("trace.pcap"))
        .output()
        .unwrap();
    common::assert_success(&out);
    std::thread::sleep(Duration::from_millis(300));
    sigterm(&mut sink);
    let cli = |args: &[&str]| -> Result<serde_json::Value, String> {
        let out = dta()
            .args(["query", "int"])
            .args(args)
            .arg("--region-dir")
            .arg(d.join("regions"))
            .output()
            .unwrap();
        if out.status.success() {
            Ok(serde_json::from_slice(&out.stdout).unwrap())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    };
    // Events: every kind by default, newest first; the page says it is partial.
    let page = cli(&["events", "--store", "events", "--max", "50"]).unwrap();
    let evs = page["events"].as_array().unwrap();
    assert_eq!(evs.len(), 50, "{page}");
    assert_eq!(page["complete"], false, "more than 50 are held: {page}");
    let times: Vec<u64> = evs.iter().map(|e| e["time_ns"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first");
    let (code, body) = get("/int/events/events?max=50").unwrap();
    assert_eq!(code, 200, "{body}");
    let http_page: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(http_page, page, "the CLI and HTTP give one answer");
    // The next page, from the cursor, both ways: no event twice.
    let next = page["next"].as_str().unwrap();
    let second = cli(&[
        "events", "--store", "events", "--max", "50", "--before", next,
    ])
    .unwrap();
    let (code, body) = get(&format!("/int/events/events?max=50&before={next}")).unwrap();
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        second
    );
    let key = |e: &serde_json::Value| (e["kind"].to_string(), e["seq"].as_u64().unwrap());
    let first_keys: std::collections::HashSet<_> = evs.iter().map(key).collect();
    assert!(second["events"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| !first_keys.contains(&key(e))));
    // At one switch: every one of its events held, whatever their age.
    let node_id = evs[0]["node_id"].as_u64().unwrap();
    let node = node_id.to_string();
    let at = cli(&[
        "events", "--store", "events", "--node", &node, "--max", "4096",
    ])
    .unwrap();
    assert!(at["events"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["node_id"].as_u64() == Some(node_id)));
    let (code, body) = get("/int/events/events?before=flood:1").unwrap();
    assert_eq!(code, 400, "{body}");
    let (code, body) = get("/int/events/events?kind=flood").unwrap();
    assert_eq!(code, 400);
    assert!(body.contains("unknown event kind"), "{body}");
    // The histogram of the current window, named in the answer, the same both ways.
    let first = truth["flows"][0]["path"][0].as_u64().unwrap().to_string();
    let h = cli(&["histogram", "--store", "hist", "--node", &first]).unwrap();
    assert!(h["total"].as_u64().unwrap() > 0, "{h}");
    let windows = h["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 1, "{h}");
    assert_eq!(
        windows[0]["end_ms"].as_u64().unwrap() - windows[0]["start_ms"].as_u64().unwrap(),
        60000
    );
    let (code, body) = get(&format!("/int/histogram/hist?node={first}")).unwrap();
    assert_eq!(code, 200, "{body}");
    let hh: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(hh["buckets"], h["buckets"]);
    assert_eq!(hh["windows"], h["windows"]);
    let all = cli(&[
        "histogram",
        "--store",
        "hist",
        "--node",
        &first,
        "--window",
        "all",
    ])
    .unwrap();
    assert_eq!(all["total"], h["total"]);
    // A window the store does not hold: an error with a message, both ways.
    let e = cli(&[
        "histogram",
        "--store",
        "hist",
        "--node",
        &first,
        "--window",
        "at:1000",
    ])
    .unwrap_err();
    assert!(e.contains("no window of this store matches"), "{e}");
    let (code, body) = get(&format!("/int/histogram/hist?node={first}&window=at:1000")).unwrap();
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("no window of this store matches"), "{body}");
    let (code, body) = get(&format!("/int/histogram/hist?node={first}&window=soon")).unwrap();
    assert_eq!(code, 400, "{body}");
    // The generic Key-Increment query of the windowed store: one bucket's counter in the
    // current window, the window named, the same from the CLI and HTTP; `all` covers them all.
    let bucket = h["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .position(|b| b["count"].as_u64() > Some(0))
        .expect("a bucket with samples");
    // The bucket's key in the bucketing the answer names (the sink's default, log-linear).
    let scheme: dta_int::Buckets = serde_json::from_value(h["histogram"].clone()).unwrap();
    assert!(matches!(scheme, dta_int::Buckets::LogLinear { .. }), "{h}");
    let lo = h["buckets"][bucket]["lo"].as_u64().unwrap() as u32;
    let key = format!(
        "0x{}",
        hex::encode(scheme.key(
            first.parse().unwrap(),
            dta_int::layout::Metric::QueueOccupancy,
            scheme.bucket(lo)
        ))
    );
    let ki = |extra: &[&str]| {
        let out = dta()
            .args(["query", "ki", "--store", "hist", "--key", &key, "--json"])
            .args(extra)
            .arg("--region-dir")
            .arg(d.join("regions"))
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (ok, text) = ki(&[]);
    assert!(ok, "{text}");
    let k: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(k["count"], h["buckets"][bucket]["count"], "{k} vs {h}");
    assert_eq!(k["windows"], h["windows"]);
    let (code, body) = get(&format!("/query/ki/hist?key={key}")).unwrap();
    assert_eq!(code, 200, "{body}");
    let hk: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!((&hk["count"], &hk["windows"]), (&k["count"], &k["windows"]));
    let (ok, text) = ki(&["--window", "all"]);
    assert!(ok, "{text}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["count"],
        k["count"]
    );
    let (ok, text) = ki(&["--window", "at:1000"]);
    assert!(
        !ok && text.contains("no window of this store matches"),
        "{text}"
    );
    let (code, body) = get(&format!("/query/ki/hist?key={key}&window=at:1000")).unwrap();
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("no window of this store matches"), "{body}");
    // The worst flows, knowing no key: every flow of the trace once, the same both ways.
    let flow_page = cli(&[
        "flows", "--store", "events", "--paths", "paths", "--top", "packets", "--max", "100",
    ])
    .unwrap();
    assert_eq!(flow_page["complete"], true, "{flow_page}");
    let flows = flow_page["flows"].as_array().unwrap();
    assert_eq!(
        flows.len(),
        truth["flows"].as_array().unwrap().len(),
        "{flows:?}"
    );
    let most = truth["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["packets"].as_u64().unwrap())
        .max()
        .unwrap();
    assert_eq!(flows[0]["packets"].as_u64(), Some(most));
    let (code, body) = get("/int/flows/events?paths=paths&top=packets&max=100").unwrap();
    assert_eq!(code, 200, "{body}");
    let hf: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(hf, flow_page);
    // The network map: the congested switch first, the same both ways.
    let net = cli(&["network"]).unwrap();
    let (code, body) = get("/int/network").unwrap();
    assert_eq!(code, 200, "{body}");
    let hn: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(hn, net);
    assert!(!net["switches"].as_array().unwrap().is_empty(), "{net}");
    assert!(!net["links"].as_array().unwrap().is_empty(), "{net}");
    let (code, body) = get("/int/flows/events?top=best").unwrap();
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("expected recent, latency, worst"), "{body}");
    sigterm(&mut collector);
}

/// SIGTERM `child` and wait for its exit 0.
fn sigterm(child: &mut std::process::Child) {
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    assert!(child.wait().unwrap().success());
}
