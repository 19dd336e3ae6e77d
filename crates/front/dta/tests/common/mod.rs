//! Helpers shared by the CLI tests: the binary, free loopback ports, a metrics scrape, and a
//! collector + translator run from the example configuration ([`Stack`]).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// Assert that a finished command succeeded, showing its standard error if not.
#[track_caller]
pub fn assert_success(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `dta` binary under test.
pub fn dta() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dta"))
}

/// A loopback TCP port free at the time of the call.
pub fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A loopback UDP port free at the time of the call.
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The body of `GET /metrics` on 127.0.0.1:`port`, if it answers 200.
pub fn scrape(port: u16) -> Option<String> {
    scrape_at(("127.0.0.1", port))
}

/// The body of `GET /metrics` on `addr`, if it answers 200.
pub fn scrape_at(addr: impl std::net::ToSocketAddrs) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let (head, body) = resp.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

const EXAMPLE: &str = include_str!("../../../../../examples/dta.toml");

/// The example configuration with its region directory and ports replaced, a collector that
/// created its regions, and a translator running from it.
pub struct Stack {
    _dir: tempfile::TempDir,
    /// The configuration file.
    pub config: PathBuf,
    /// The translator's address.
    pub listen: String,
    /// The collector's HTTP address.
    pub http: String,
    /// The reporters' control port (the translator's `nack_port`): this stack's own, so that
    /// reporters of two stacks at once (tests run in parallel) do not contend for the default.
    pub nack_port: u16,
    // Dropped in this order: the translator first, then the collector.
    translator: Option<Spawned>,
    collector: Spawned,
}

/// `text` with `from` replaced by `to`; `from` must occur (the example still says it).
fn replace(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "the example no longer has {from:?}");
    text.replace(from, to)
}

impl Stack {
    pub fn start() -> Stack {
        Stack::start_from(EXAMPLE, "dta-regions")
    }

    /// As [`Stack::start`], from the example configuration `example` (whose `region_dir` is
    /// `region_dir`), e.g. `examples/systems.toml`.
    pub fn start_from(example: &str, region_dir: &str) -> Stack {
        let dir = tempfile::tempdir().unwrap();
        let regions = dir.path().join("regions");
        let listen = format!("127.0.0.1:{}", free_udp_port());
        let text = replace(
            example,
            &format!("region_dir = {region_dir:?}"),
            &format!("region_dir = {:?}", regions.display().to_string()),
        );
        let text = replace(&text, "127.0.0.1:40040", &listen);
        let http = format!("127.0.0.1:{}", free_tcp_port());
        let text = replace(&text, "127.0.0.1:40080", &http);
        let nack_port = free_udp_port();
        let text = replace(
            &text,
            "\n[translator]\n",
            &format!("\n[translator]\nnack_port = {nack_port}\n"),
        );
        let config = dir.path().join("dta.toml");
        std::fs::write(&config, text).unwrap();
        let stores = example.matches("[[store]]").count();
        let collector = spawn(dta().arg("collector").arg("--config").arg(&config));
        wait_for("the collector's regions", || {
            std::fs::read_dir(&regions).is_ok_and(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.path().extension().is_some_and(|x| x == "region"))
                    .count()
                    == stores
            })
        });
        let mut s = Stack {
            _dir: dir,
            config,
            listen,
            http,
            nack_port,
            collector,
            translator: None,
        };
        let mut t = dta();
        t.args(["translator", "--json", "--stats-interval", "0", "--config"])
            .arg(&s.config)
            .stdout(Stdio::piped());
        s.translator = Some(spawn(&mut t));
        let port = s.listen.rsplit_once(':').unwrap().1.parse().unwrap();
        wait_for("the translator's port", || udp_port_bound(port));
        s
    }

    /// `dta report --to LISTEN --nack-port NACK_PORT -q -c COUNT ARGS`: must succeed.
    pub fn report(&self, count: u64, args: &[&str]) {
        let out = dta()
            .args([
                "report",
                "--to",
                &self.listen,
                "--nack-port",
                &self.nack_port.to_string(),
                "-q",
                "-c",
                &count.to_string(),
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

    /// The running translator.
    pub fn translator(&self) -> &Child {
        self.translator.as_ref().unwrap()
    }

    /// Stop the translator (SIGINT, as Ctrl-C) and return its final counters.
    pub fn stop_translator(&mut self) -> serde_json::Value {
        let t = self.translator.take().unwrap();
        interrupt(&t, libc::SIGINT);
        let out = t.into_child().wait_with_output().unwrap();
        assert!(out.status.success(), "translator: {:?}", out.status);
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `dta query WHAT --config CONFIG ARGS --json`, with nothing else.
    pub fn query(&self, what: &str, args: &[&str]) -> serde_json::Value {
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

/// A service a test started: killed and reaped when dropped, so a failing test leaves no
/// process behind (one would hold the test harness's output open and stall the run).
pub struct Spawned(Option<Child>);

impl From<Child> for Spawned {
    fn from(c: Child) -> Spawned {
        Spawned(Some(c))
    }
}

impl Spawned {
    /// The process, no longer killed when dropped (e.g. to collect its output).
    pub fn into_child(mut self) -> Child {
        self.0.take().expect("held until dropped")
    }
}

impl std::ops::Deref for Spawned {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.0.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Spawned {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("held until dropped")
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn spawn(c: &mut Command) -> Spawned {
    Spawned(Some(c.stderr(Stdio::null()).spawn().unwrap()))
}

pub fn interrupt(c: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(c.id() as libc::pid_t, sig) }, 0);
}

/// Wait (bounded by [`dta_testkit::WAIT`]) until `ok` holds; panics naming `what`.
#[track_caller]
pub fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    dta_testkit::wait_until(what, &mut ok, |&done| done);
}

/// Whether a UDP socket of this network namespace is bound to `port`, read from the kernel's
/// socket tables of the calling thread's namespace. A probe that binds the port itself would
/// race with the process being waited for: holding the port for an instant, it makes that
/// process's own bind (or its check for another user of the port) fail.
pub fn udp_port_bound(port: u16) -> bool {
    ["/proc/thread-self/net/udp", "/proc/thread-self/net/udp6"]
        .iter()
        .filter_map(|t| std::fs::read_to_string(t).ok())
        .any(|text| !dta_net::port_owner::inodes_on_port(&text, port).is_empty())
}

/// `d/int.toml`: an INT sink listening on `listen` (its HTTP API) with stores in `d/regions`,
/// log2 histograms (what the XDP fast path counts, so that every mode takes the file);
/// `sink` adds lines to its `[sink]` table.
pub fn write_int_config(d: &std::path::Path, listen: &str, sink: &str) {
    std::fs::write(
        d.join("int.toml"),
        format!(
            r#"region_dir = "regions"
listen = "{listen}"
[sink]
int_udp_port = 5000
histogram = {{ kind = "log2" }}
{sink}
[[store]]
name = "paths"
kind = "key-write"
slots = 65536
key_len = 13
data_len = 24
[[store]]
name = "latency"
kind = "postcarding"
chunks = 65536
hops = 5
key_len = 13
[[store]]
name = "events"
kind = "append"
lists = 16
capacity = 16384
entry_len = 32
record = "int-event"
batch = 16
[[store]]
name = "hist"
kind = "key-increment"
counters = 262144
key_len = 6
"#
        ),
    )
    .unwrap();
}

/// The Python with the `dta` package built into it (`DTA_PYTHON`, else the repo's `.venv`, as
/// scripts/test-bindings.sh builds it); None when it cannot import `dta`.
pub fn python() -> Option<PathBuf> {
    let p = std::env::var_os("DTA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../.venv/bin/python")
        });
    let ok = Command::new(&p)
        .args(["-c", "import dta; dta.ClusterClient"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(p)
}

/// `dta pcap gen` of `flows` flows (at most 30 packets each, `seed`) into `d/trace.pcap`, then
/// `dta int-sink` on `d/int.toml` (hop latencies above `hop_latency_threshold` ns are events,
/// flows idle for 200 ms leave the FlowCache) with `export` (its export options) receiving
/// `dta pcap replay` of it, stopped with SIGTERM once the replay is done (which flushes every
/// flow and export). The ground truth (`d/trace.json`) and the sink's exit summary (JSON).
#[allow(dead_code)]
pub fn replay_into_int_sink(
    d: &std::path::Path,
    flows: u32,
    seed: u32,
    hop_latency_threshold: u32,
    export: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let out = dta()
        .args(["pcap", "gen", "--max-packets", "30"])
        .args(["--flows", &flows.to_string(), "--seed", &seed.to_string()])
        .arg("--out")
        .arg(d.join("trace.pcap"))
        .output()
        .unwrap();
    assert_success(&out);
    let truth =
        serde_json::from_str(&std::fs::read_to_string(d.join("trace.json")).unwrap()).unwrap();
    let (port, mport) = (free_udp_port(), free_tcp_port());
    write_int_config(
        d,
        &format!("127.0.0.1:{port}"),
        &format!("idle_timeout_ms = 200\nthresholds = {{ hop_latency = {hop_latency_threshold} }}"),
    );
    let sink = dta()
        .args([
            "int-sink",
            "--duration",
            "120",
            "--metrics",
            &mport.to_string(),
        ])
        .arg("--config")
        .arg(d.join("int.toml"))
        .args(export)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the sink's metrics endpoint", || scrape(mport).is_some());
    let out = dta()
        .args(["pcap", "replay", "--rate", "20000"])
        .args(["--to", &format!("127.0.0.1:{port}")])
        .arg(d.join("trace.pcap"))
        .output()
        .unwrap();
    assert_success(&out);
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(sink.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let out = sink.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary = stderr
        .rfind("\n{")
        .and_then(|i| serde_json::from_str(&stderr[i..]).ok())
        .unwrap_or_else(|| panic!("no exit summary: {stderr}"));
    (truth, summary)
}
