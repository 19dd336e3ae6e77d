// Size: the conformance suite is one table (docs/modes.md) and one harness per kind of node
// (translator, INT sink) that every cell of the table runs through; splitting it would split
// the harness from the cells.
//! The conformance suite: every promise of docs/modes.md against every mode run as a process
//! (the translator in shared memory with one thread, several threads and the classifier, with
//! XDP in native and generic mode, over RoCEv2 to the software responder, and the INT sink with
//! and without its XDP fast path). One test per cell, `cell_<promise>_<mode>`: where the table
//! (`dta_node::modes::TABLE`) says the mode keeps the promise, the test shows it kept, tried as
//! an attacker would (spoofed sources, flagged and malformed datagrams, a stop with data
//! pending); where it says the mode refuses, the test starts the mode with the setting and
//! checks it exits 2 naming the setting and the mode. The C ABI's cells are in
//! crates/front/dta-capi/src/conformance.rs. `docs_and_tests_agree` fails when docs/modes.md, the
//! table and the tests disagree.
//!
//! Modes in network namespaces (XDP, RoCEv2, the INT sink's XDP) need root; without it their
//! cells are counted skips (and fail in CI, where `DTA_REQUIRE_ALL` is set).

use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use dta_node::modes::{support, Mode, Promise, Support, TABLE};
use dta_testkit::netns::{run_in, VethPair};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Priority, Report};

mod common;

// ---------------------------------------------------------------------------------------------
// The cells.

macro_rules! cells {
    ($($name:ident => $promise:ident, $mode:ident;)*) => {
        $(
            #[test]
            fn $name() {
                cell(Promise::$promise, Mode::$mode);
            }
        )*
        /// Every cell's test name, for [`docs_and_tests_agree`].
        const CELLS: &[(&str, Promise, Mode)] = &[$((stringify!($name), Promise::$promise, Mode::$mode)),*];
    };
}

cells! {
    cell_allow_memory => Allow, Memory;
    cell_allow_threads => Allow, Threads;
    cell_allow_classifier => Allow, Classifier;
    cell_allow_xdp_native => Allow, XdpNative;
    cell_allow_xdp_generic => Allow, XdpGeneric;
    cell_allow_rdma => Allow, Rdma;
    cell_allow_af_xdp => Allow, AfXdp;
    cell_allow_int_sink => Allow, IntSink;
    cell_allow_int_sink_xdp => Allow, IntSinkXdp;
    cell_allow_int_sink_af_xdp => Allow, IntSinkAfXdp;
    cell_store_allow_memory => StoreAllow, Memory;
    cell_store_allow_threads => StoreAllow, Threads;
    cell_store_allow_classifier => StoreAllow, Classifier;
    cell_store_allow_xdp_native => StoreAllow, XdpNative;
    cell_store_allow_xdp_generic => StoreAllow, XdpGeneric;
    cell_store_allow_rdma => StoreAllow, Rdma;
    cell_store_allow_af_xdp => StoreAllow, AfXdp;
    cell_store_allow_int_sink => StoreAllow, IntSink;
    cell_store_allow_int_sink_xdp => StoreAllow, IntSinkXdp;
    cell_store_allow_int_sink_af_xdp => StoreAllow, IntSinkAfXdp;
    cell_rules_memory => Rules, Memory;
    cell_rules_threads => Rules, Threads;
    cell_rules_classifier => Rules, Classifier;
    cell_rules_xdp_native => Rules, XdpNative;
    cell_rules_xdp_generic => Rules, XdpGeneric;
    cell_rules_rdma => Rules, Rdma;
    cell_rules_af_xdp => Rules, AfXdp;
    cell_rules_int_sink => Rules, IntSink;
    cell_rules_int_sink_xdp => Rules, IntSinkXdp;
    cell_rules_int_sink_af_xdp => Rules, IntSinkAfXdp;
    cell_priority_memory => Priority, Memory;
    cell_priority_threads => Priority, Threads;
    cell_priority_classifier => Priority, Classifier;
    cell_priority_xdp_native => Priority, XdpNative;
    cell_priority_xdp_generic => Priority, XdpGeneric;
    cell_priority_rdma => Priority, Rdma;
    cell_priority_af_xdp => Priority, AfXdp;
    cell_priority_int_sink => Priority, IntSink;
    cell_priority_int_sink_xdp => Priority, IntSinkXdp;
    cell_priority_int_sink_af_xdp => Priority, IntSinkAfXdp;
    cell_notifications_memory => Notifications, Memory;
    cell_notifications_threads => Notifications, Threads;
    cell_notifications_classifier => Notifications, Classifier;
    cell_notifications_xdp_native => Notifications, XdpNative;
    cell_notifications_xdp_generic => Notifications, XdpGeneric;
    cell_notifications_rdma => Notifications, Rdma;
    cell_notifications_af_xdp => Notifications, AfXdp;
    cell_notifications_int_sink => Notifications, IntSink;
    cell_notifications_int_sink_xdp => Notifications, IntSinkXdp;
    cell_notifications_int_sink_af_xdp => Notifications, IntSinkAfXdp;
    cell_flush_on_stop_memory => FlushOnStop, Memory;
    cell_flush_on_stop_threads => FlushOnStop, Threads;
    cell_flush_on_stop_classifier => FlushOnStop, Classifier;
    cell_flush_on_stop_xdp_native => FlushOnStop, XdpNative;
    cell_flush_on_stop_xdp_generic => FlushOnStop, XdpGeneric;
    cell_flush_on_stop_rdma => FlushOnStop, Rdma;
    cell_flush_on_stop_af_xdp => FlushOnStop, AfXdp;
    cell_flush_on_stop_int_sink => FlushOnStop, IntSink;
    cell_flush_on_stop_int_sink_xdp => FlushOnStop, IntSinkXdp;
    cell_flush_on_stop_int_sink_af_xdp => FlushOnStop, IntSinkAfXdp;
    cell_metrics_memory => Metrics, Memory;
    cell_metrics_threads => Metrics, Threads;
    cell_metrics_classifier => Metrics, Classifier;
    cell_metrics_xdp_native => Metrics, XdpNative;
    cell_metrics_xdp_generic => Metrics, XdpGeneric;
    cell_metrics_rdma => Metrics, Rdma;
    cell_metrics_af_xdp => Metrics, AfXdp;
    cell_metrics_int_sink => Metrics, IntSink;
    cell_metrics_int_sink_xdp => Metrics, IntSinkXdp;
    cell_metrics_int_sink_af_xdp => Metrics, IntSinkAfXdp;
    cell_rejects_memory => Rejects, Memory;
    cell_rejects_threads => Rejects, Threads;
    cell_rejects_classifier => Rejects, Classifier;
    cell_rejects_xdp_native => Rejects, XdpNative;
    cell_rejects_xdp_generic => Rejects, XdpGeneric;
    cell_rejects_rdma => Rejects, Rdma;
    cell_rejects_af_xdp => Rejects, AfXdp;
    cell_rejects_int_sink => Rejects, IntSink;
    cell_rejects_int_sink_xdp => Rejects, IntSinkXdp;
    cell_rejects_int_sink_af_xdp => Rejects, IntSinkAfXdp;
}

/// Run one cell: the promise kept, or the setting asking for it refused at start.
fn cell(p: Promise, m: Mode) {
    let int = matches!(m, Mode::IntSink | Mode::IntSinkXdp | Mode::IntSinkAfXdp);
    match support(p, m) {
        Support::Refused(_) => {
            let stderr = if int {
                int_refusal(p, m)
            } else {
                translator_refusal(p, m)
            };
            assert!(
                stderr.contains(&m.to_string()) && stderr.contains("is not honoured"),
                "{m}: the refusal names neither the mode nor why: {stderr}"
            );
        }
        Support::Kept => {
            if needs_netns(m) {
                if let Some(why) = dta_testkit::netns_unavailable() {
                    dta_testkit::skip!("{m} runs in network namespaces: {why}");
                }
            }
            if int {
                int_keeps(p, m)
            } else {
                translator_keeps(p, m)
            }
        }
    }
}

fn needs_netns(m: Mode) -> bool {
    matches!(
        m,
        Mode::XdpNative
            | Mode::XdpGeneric
            | Mode::Rdma
            | Mode::AfXdp
            | Mode::IntSinkXdp
            | Mode::IntSinkAfXdp
    )
}

#[test]
fn docs_and_tests_agree() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../docs/modes.md"
    ))
    .expect("docs/modes.md");
    // The table: a header row naming the modes, then one row per promise.
    let rows: Vec<Vec<String>> = doc
        .lines()
        .skip_while(|l| !l.starts_with("| promise |"))
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect()
        })
        .collect();
    assert!(rows.len() > 2, "docs/modes.md has no table of promises");
    let modes: Vec<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
    assert_eq!(rows[0][1..], modes, "docs/modes.md: the modes' columns");
    let body = &rows[2..];
    assert_eq!(
        body.len(),
        TABLE.len(),
        "docs/modes.md: one row per promise"
    );
    for ((p, row), doc_row) in TABLE.iter().zip(body) {
        assert_eq!(doc_row[0], p.name(), "docs/modes.md: promise order");
        for (i, s) in row.iter().enumerate() {
            let want = match s {
                Support::Kept => "kept",
                Support::Refused(_) => "refused",
            };
            assert!(
                doc_row[i + 1].starts_with(want),
                "docs/modes.md: {} / {}: {:?}, the table says {want}",
                p.name(),
                Mode::ALL[i].name(),
                doc_row[i + 1]
            );
        }
    }
    // Every cell has its test: here, or the C ABI's.
    let capi = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../dta-capi/src/conformance.rs"
    ))
    .expect("crates/front/dta-capi/src/conformance.rs");
    for p in Promise::ALL {
        for m in Mode::ALL {
            let name = format!("cell_{}_{}", p.name(), m.name());
            let here = CELLS
                .iter()
                .any(|(n, cp, cm)| *n == name && *cp == p && *cm == m);
            let there = m == Mode::Capi && capi.contains(&format!("fn {name}()"));
            assert!(here || there, "no test {name} for the cell {p:?} / {m:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Processes.

/// A child process whose stderr lines arrive on a channel.
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

    /// Wait for a stderr line containing `what`; panics with everything seen if the process
    /// ends or [`dta_testkit::WAIT`] passes first.
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
                Err(_) => panic!("no {what:?} on stderr: {}", self.seen.join("\n")),
            }
        }
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    /// Wait for the exit; the status, stdout and the whole of stderr.
    fn finish(mut self) -> (std::process::ExitStatus, String, String) {
        let mut out = String::new();
        let _ = self.child.stdout.take().unwrap().read_to_string(&mut out);
        let status = self.child.wait().unwrap();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(l);
        }
        (status, out, self.seen.join("\n"))
    }

    /// SIGTERM, then the exit, which must be 0; stdout and stderr.
    fn stop(self) -> (String, String) {
        self.signal(libc::SIGTERM);
        let (status, out, err) = self.finish();
        assert!(status.success(), "exit {status} after SIGTERM: {err}");
        (out, err)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `dta ARGS`, in namespace `ns` when given.
fn dta_in(ns: Option<&str>) -> Command {
    match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_dta")]);
            c
        }
        None => common::dta(),
    }
}

/// `f` in namespace `ns` (on a thread of its own), or here.
fn within<T: Send + 'static>(ns: Option<&str>, f: impl FnOnce() -> T + Send + 'static) -> T {
    match ns {
        Some(ns) => run_in(ns, f),
        None => f(),
    }
}

/// A veth pair for a cell, GRO on at the peer (native XDP on veth sees frames only then), with
/// two more addresses at the peer (`.3`, the spoofed source; `.4`, a second reporter).
fn veth(tag: &str) -> VethPair {
    let net = VethPair::new(tag, 91);
    let _ = Command::new("ip")
        .args([
            "netns", "exec", &net.b, "ethtool", "-K", &net.dev_b, "gro", "on",
        ])
        .output();
    for a in ["10.91.0.3/24", "10.91.0.4/24"] {
        assert!(dta_testkit::netns::ip(&[
            "-n", &net.b, "addr", "add", a, "dev", &net.dev_b
        ]));
    }
    net
}

/// A short tag for a cell's namespaces (interface names are at most 15 bytes).
fn tag() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("k{}", N.fetch_add(1, Ordering::Relaxed))
}

/// The body of `GET path` at `addr` (in namespace `ns`): the status line's code and the body.
fn http_get(ns: Option<&str>, addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let path = path.to_string();
    within(ns, move || {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut resp = String::new();
        s.read_to_string(&mut resp).ok()?;
        let (head, body) = resp.split_once("\r\n\r\n")?;
        let code = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((code, body.to_owned()))
    })
}

/// The value of metric `name` (summed over the samples with `labels`), 0 when absent.
fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let samples = dta_metrics::parse_exposition(text).unwrap();
    dta_metrics::value(&samples, name, labels).unwrap_or(0.0)
}

/// Send `dgrams` to `to` from source address `from`, in namespace `ns`, paced so that nothing
/// is lost on the way (the cells check contents, not speed).
fn send(ns: Option<&str>, from: IpAddr, to: SocketAddr, dgrams: Vec<Vec<u8>>, pace: bool) {
    within(ns, move || {
        let s = UdpSocket::bind(SocketAddr::new(from, 0)).unwrap();
        for d in &dgrams {
            s.send_to(d, to).unwrap();
            if pace {
                std::thread::sleep(Duration::from_micros(300));
            }
        }
    });
}

/// Frames [`frames_nobody_takes`] sends in a cell.
const IGNORED_FRAMES: usize = 50;

/// Send `n` broadcast Ethernet frames of an EtherType no protocol takes (0x88B5, IEEE 802's
/// local experimental one) out of `dev` in namespace `ns`: the interface receiving them counts
/// each in its `rx_dropped`, as it would a frame its driver or stack dropped.
fn frames_nobody_takes(ns: Option<&str>, dev: &str, n: usize) {
    let dev = dev.to_string();
    within(ns, move || {
        let s = dta_net::raw::RawSocket::open_send_only(&dev).unwrap();
        let mut frame = vec![0xff; 6];
        frame.extend(s.mac());
        frame.extend([0x88, 0xb5]);
        frame.resize(64, 0x5a);
        for _ in 0..n {
            s.send(&frame).unwrap();
        }
    });
}

/// `PREFIX_interface_rx_drops_total{interface=at,reason="dropped"}` before and after `send`
/// (which makes `at` drop [`IGNORED_FRAMES`]; `None` for a node on the host's loopback, which
/// every other test shares: there only the family is checked): it grows by them at least; what
/// it grew by.
fn interface_drops_counted(
    prefix: &str,
    at: &str,
    metrics: impl Fn() -> String,
    send: Option<impl FnOnce()>,
) -> u64 {
    let name = format!("{prefix}_interface_rx_drops_total");
    let labels = [("interface", at), ("reason", "dropped")];
    let text = metrics();
    assert!(
        text.contains(&format!("{name}{{interface=\"{at}\",reason=\"missed\"}}")),
        "no {name} of {at}: {text}"
    );
    let before = metric(&text, &name, &labels) as u64;
    let Some(send) = send else {
        return 0;
    };
    send();
    let want = before + IGNORED_FRAMES as u64;
    dta_testkit::wait_until(
        &format!("{name} of {at} counting {IGNORED_FRAMES} frames"),
        || metric(&metrics(), &name, &labels) as u64,
        |&c| c >= want,
    ) - before
}

// ---------------------------------------------------------------------------------------------
// DTA datagrams.

/// Sequence numbers of the datagrams the cells build (one space each; never retransmittable).
static SEQ: AtomicU32 = AtomicU32::new(1);

fn datagram(priority: Priority, reports: &[Report<'_>]) -> Vec<u8> {
    let mut buf = vec![0u8; 1500];
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let mut b = DatagramBuilder::new(&mut buf, priority, false, 1, seq).unwrap();
    for r in reports {
        b.push(r).unwrap();
    }
    let n = b.finish();
    buf.truncate(n);
    buf
}

/// A Key-Write to store `kw` (4-byte keys, 4-byte data).
fn kw(key: u32, immediate: bool) -> Vec<u8> {
    let (k, d) = (key.to_be_bytes(), (key ^ 0x5a5a_5a5a).to_be_bytes());
    datagram(
        Priority::Medium,
        &[Report::KeyWrite {
            key: &k,
            data: &d,
            redundancy: 2,
            immediate,
        }],
    )
}

/// A Key-Write to store `locked` (8-byte keys).
fn kw8(key: u64) -> Vec<u8> {
    let (k, d) = (key.to_be_bytes(), (key as u32).to_be_bytes());
    datagram(
        Priority::Medium,
        &[Report::KeyWrite {
            key: &k,
            data: &d,
            redundancy: 2,
            immediate: false,
        }],
    )
}

fn append(list: u32, entry: u32) -> Vec<u8> {
    let e = entry.to_be_bytes();
    datagram(
        Priority::Medium,
        &[Report::Append {
            list_id: list,
            data: &e,
            immediate: false,
        }],
    )
}

/// Datagrams the wire parser rejects: a native header announcing no report, a truncated
/// report, an unknown version.
fn malformed() -> Vec<Vec<u8>> {
    let mut truncated = kw(9, false);
    truncated.truncate(truncated.len() - 3);
    vec![
        vec![0x10, 0x40, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0],
        truncated,
        vec![0x70; 24],
    ]
}

// ---------------------------------------------------------------------------------------------
// The translator modes.

/// The families a mode's `/metrics` has beside every mode's: each loss of its receive path and
/// what its XDP program did with each frame, where operators look.
fn mode_families(m: Mode) -> &'static [&'static str] {
    match m {
        Mode::XdpNative | Mode::XdpGeneric => {
            &["dta_translator_xdp_program_total{action=\"pass_fragment\"}"]
        }
        Mode::AfXdp => &[
            "dta_translator_af_xdp_kernel_drops_total{queue=\"0\",reason=\"dropped\"}",
            "dta_translator_af_xdp_kernel_drops_total{queue=\"0\",reason=\"ring_full\"}",
            "dta_translator_af_xdp_fill_ring_empty_total",
            "dta_translator_af_xdp_program_total{action=\"pass_fragment\"}",
        ],
        Mode::IntSinkXdp => &["dta_int_sink_xdp_program_total{action=\"pass_ip_options\"}"],
        Mode::IntSinkAfXdp => &[
            "dta_int_sink_af_xdp_kernel_drops_total{queue=\"0\",reason=\"dropped\"}",
            "dta_int_sink_af_xdp_program_total{action=\"redirected\"}",
            "dta_int_sink_kernel_drops_total",
        ],
        _ => &[],
    }
}

/// Where a translator cell runs: addresses, namespaces.
struct Site {
    net: Option<VethPair>,
    /// Where the translator and its metrics server run.
    node_ns: Option<String>,
    /// Where the senders run.
    send_ns: Option<String>,
    listen: SocketAddr,
    metrics: SocketAddr,
    good: IpAddr,
    good2: IpAddr,
    spoof: IpAddr,
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

impl Site {
    fn new(m: Mode) -> Site {
        match m {
            Mode::XdpNative | Mode::XdpGeneric | Mode::AfXdp => {
                let net = veth(&tag());
                Site {
                    node_ns: Some(net.a.clone()),
                    send_ns: Some(net.b.clone()),
                    listen: "10.91.0.1:40040".parse().unwrap(),
                    metrics: "127.0.0.1:9464".parse().unwrap(),
                    good: ip("10.91.0.2"),
                    good2: ip("10.91.0.4"),
                    spoof: ip("10.91.0.3"),
                    net: Some(net),
                }
            }
            Mode::Rdma => {
                let net = veth(&tag());
                Site {
                    node_ns: Some(net.a.clone()),
                    send_ns: Some(net.a.clone()),
                    listen: "127.0.0.1:40040".parse().unwrap(),
                    metrics: "127.0.0.1:9464".parse().unwrap(),
                    good: ip("127.0.0.2"),
                    good2: ip("127.0.0.4"),
                    spoof: ip("127.0.0.3"),
                    net: Some(net),
                }
            }
            _ => Site {
                net: None,
                node_ns: None,
                send_ns: None,
                listen: SocketAddr::new(ip("127.0.0.1"), common::free_udp_port()),
                metrics: SocketAddr::new(ip("127.0.0.1"), common::free_tcp_port()),
                good: ip("127.0.0.2"),
                good2: ip("127.0.0.4"),
                spoof: ip("127.0.0.3"),
            },
        }
    }
}

/// The cell's dta.toml: the sources `good` and `good2` allowed, store `locked` only from
/// `good2`; `kw`, `locked`, `ki`, `ap` (`kw` named native, `locked` on the default scheme,
/// xxh3, and `ki` named xxh3, so every mode writes and reads both); `kw` large enough that the
/// few thousand keys a cell writes leave every key a copy; batches and timers long, so only
/// the stop writes what is pending; `translator` and `extra` add lines to `[translator]` and
/// to the end.
fn translator_config(dir: &Path, m: Mode, site: &Site, translator: &str, extra: &str) -> PathBuf {
    let threads = match m {
        Mode::Threads => "threads = 2\nclassifier = false",
        Mode::Classifier => "threads = 1\nclassifier = true",
        _ => "threads = 1\nclassifier = false",
    };
    let cfg = dir.join("dta.toml");
    std::fs::write(
        &cfg,
        format!(
            "region_dir = 'regions'\n[collector]\nhttp = ''\n[translator]\nlisten = '{}'\n\
             allow = ['{}/32', '{}/32']\n{threads}\nappend_flush_ms = 60000\n{translator}\n\
             [[store]]\nname = 'kw'\nkind = 'key-write'\nslots = 1048576\nkey_len = 4\n\
             data_len = 4\nhash = 'native'\n\
             [[store]]\nname = 'locked'\nkind = 'key-write'\nslots = 1024\nkey_len = 8\n\
             data_len = 4\nallow = ['{}/32']\n\
             [[store]]\nname = 'ki'\nkind = 'key-increment'\ncounters = 4096\nkey_len = 4\n\
             hash = 'xxh3'\n\
             [[store]]\nname = 'ap'\nkind = 'append'\nlists = 4\ncapacity = 256\n\
             entry_len = 4\nbatch = 16\n{extra}",
            site.listen, site.good, site.good2, site.good2
        ),
    )
    .unwrap();
    cfg
}

/// A translator of mode `m` running from its configuration, with what it writes into.
struct Tn {
    mode: Mode,
    site: Site,
    dir: tempfile::TempDir,
    cfg: PathBuf,
    translator: Option<Proc>,
    responder: Option<Proc>,
}

impl Tn {
    fn start(m: Mode, translator: &str, extra: &str) -> Tn {
        let site = Site::new(m);
        let dir = tempfile::tempdir().unwrap();
        let cfg = translator_config(dir.path(), m, &site, translator, extra);
        let responder = if m == Mode::Rdma {
            let net = site.net.as_ref().unwrap();
            let mut c = dta_in(Some(&net.b));
            c.args(["responder", "--iface", &net.dev_b, "--allow"])
                .arg(format!("{}/32", net.ip_a))
                .arg("--config")
                .arg(&cfg);
            let mut p = Proc::spawn(c);
            p.wait_for("software RoCE responder on");
            Some(p)
        } else {
            // The collector's regions, as `dta collector` creates them.
            let c = dta_node::config::Config::load(&cfg).unwrap();
            drop(dta_node::collector::create(&c).unwrap());
            None
        };
        let mut c = dta_in(site.node_ns.as_deref());
        c.args(["translator", "--json", "--stats-interval", "0", "--metrics"])
            .arg(site.metrics.to_string())
            .arg("--config")
            .arg(&cfg);
        if let Some(net) = &site.net {
            match m {
                Mode::XdpNative => {
                    c.args(["--xdp", &net.dev_a, "--xdp-pin"]);
                    c.arg(format!("/sys/fs/bpf/dta-{}", net.a));
                }
                Mode::XdpGeneric => {
                    c.args(["--xdp", &net.dev_a, "--xdp-generic", "--xdp-pin"]);
                    c.arg(format!("/sys/fs/bpf/dta-{}", net.a));
                }
                Mode::Rdma => {
                    c.args(["--rdma", &net.dev_a, "--collector", &net.ip_b]);
                }
                Mode::AfXdp => {
                    // Busy polling: every promise holds with the receive thread running the
                    // driver's receive itself.
                    c.args(["--af-xdp", &net.dev_a, "--af-xdp-busy-poll", "20"]);
                }
                _ => {}
            }
        }
        let mut t = Proc::spawn(c);
        t.wait_for("metrics on http://");
        Tn {
            mode: m,
            site,
            dir,
            cfg,
            translator: Some(t),
            responder,
        }
    }

    fn send_from(&self, from: IpAddr, dgrams: Vec<Vec<u8>>) {
        send(
            self.site.send_ns.as_deref(),
            from,
            self.site.listen,
            dgrams,
            true,
        );
    }

    fn metrics(&self) -> String {
        let (code, body) = http_get(self.site.node_ns.as_deref(), self.site.metrics, "/metrics")
            .expect("the metrics server answers");
        assert_eq!(code, 200, "{body}");
        body
    }

    /// Wait until the translator counted `n` datagrams (received in userspace or in the
    /// driver).
    fn wait_datagrams(&self, n: u64) {
        dta_testkit::wait_until(
            &format!("{} datagrams counted by {}", n, self.mode),
            || metric(&self.metrics(), "dta_translator_datagrams_total", &[]) as u64,
            |&c| c >= n,
        );
    }

    /// Stop (SIGTERM, exit 0; the responder too), then open what was written.
    fn stop(mut self) -> Stopped {
        let (out, err) = self.translator.take().expect("running").stop();
        let summary: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
        if let Some(r) = self.responder.take() {
            r.stop();
        }
        if self.mode == Mode::AfXdp {
            // The datagrams took the AF_XDP sockets, not a fallback to the UDP socket.
            let p = &summary["af_xdp"]["program"];
            let received = summary["datagrams"].as_u64().unwrap_or(0);
            assert!(
                err.contains("AF_XDP receive on")
                    && !err.contains("unavailable")
                    && (received == 0 || p["redirected"].as_u64().unwrap_or(0) > 0),
                "AF_XDP receive was not used: {summary}\n{err}"
            );
        }
        let c =
            dta_collector::Collector::open_dir(&self.dir.path().join("regions"), false).unwrap();
        Stopped {
            summary,
            stderr: err,
            c,
            _dir: self.dir,
            _site: self.site,
        }
    }
}

/// A stopped translator: its final counters and its stores.
struct Stopped {
    summary: serde_json::Value,
    stderr: String,
    c: dta_collector::Collector,
    _dir: tempfile::TempDir,
    _site: Site,
}

impl Stopped {
    fn kw(&self, store: &str, key: &[u8]) -> &'static str {
        let r = self.c.store(store).unwrap().region.clone();
        dta_collector::query::key_write(&r, key, None, 1)
            .unwrap()
            .status
    }

    fn list(&self, list: u32) -> Vec<String> {
        let r = self.c.store("ap").unwrap().region.clone();
        dta_collector::query::list(&r, list, None, 100, dta_collector::query::raw_records)
            .unwrap()
            .entries
    }
}

/// The setting a refusal cell starts with.
fn refused_setting(p: Promise) -> (&'static str, &'static str) {
    match p {
        Promise::Priority => ("", "[translator.flow_control]\nwrite_budget = 100000\n"),
        Promise::Rules => (
            "",
            "[[translator.rules]]\nname = 'r'\nprimitive = 'key-write'\naction = 'drop'\n",
        ),
        other => panic!("no refusal setting for {other:?}"),
    }
}

fn translator_refusal(p: Promise, m: Mode) -> String {
    // Refused before anything is loaded or bound: no namespace is needed.
    let dir = tempfile::tempdir().unwrap();
    let site = Site {
        net: None,
        node_ns: None,
        send_ns: None,
        listen: SocketAddr::new(ip("127.0.0.1"), common::free_udp_port()),
        metrics: SocketAddr::new(ip("127.0.0.1"), common::free_tcp_port()),
        good: ip("127.0.0.2"),
        good2: ip("127.0.0.4"),
        spoof: ip("127.0.0.3"),
    };
    let (t, extra) = refused_setting(p);
    let cfg = translator_config(dir.path(), m, &site, t, extra);
    let mut c = common::dta();
    c.args(["translator", "--config"]).arg(&cfg);
    match m {
        Mode::XdpNative => c.args(["--xdp", "lo"]),
        Mode::XdpGeneric => c.args(["--xdp", "lo", "--xdp-generic"]),
        Mode::Rdma => c.args(["--rdma", "lo", "--collector", "127.0.0.1"]),
        _ => &mut c,
    };
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{m} started with {t}{extra}: {stderr}"
    );
    let named = p.setting(m);
    assert!(
        stderr.contains(named.split(' ').next().unwrap()),
        "{stderr}"
    );
    stderr
}

fn translator_keeps(p: Promise, m: Mode) {
    match p {
        Promise::Allow => {
            let t = Tn::start(m, "", "");
            t.send_from(t.site.spoof, vec![kw(1, false)]);
            t.send_from(t.site.good, vec![kw(2, false)]);
            t.wait_datagrams(2);
            let refused = metric(
                &t.metrics(),
                "dta_translator_dropped_total",
                &[("reason", "source_not_allowed")],
            );
            assert_eq!(refused, 1.0, "{m}: the spoofed datagram counted");
            let s = t.stop();
            assert_eq!(
                s.kw("kw", &1u32.to_be_bytes()),
                "empty",
                "{m}: spoofed report stored"
            );
            assert_eq!(s.kw("kw", &2u32.to_be_bytes()), "found", "{m}");
        }
        Promise::StoreAllow => {
            let t = Tn::start(m, "", "");
            t.send_from(t.site.good, vec![kw8(5)]);
            t.send_from(t.site.good2, vec![kw8(6)]);
            t.wait_datagrams(2);
            let refused = metric(
                &t.metrics(),
                "dta_translator_dropped_total",
                &[("reason", "source_not_allowed")],
            );
            assert_eq!(refused, 1.0, "{m}: the report for `locked` counted");
            let s = t.stop();
            assert_eq!(s.kw("locked", &5u64.to_be_bytes()), "empty", "{m}");
            assert_eq!(s.kw("locked", &6u64.to_be_bytes()), "found", "{m}");
        }
        Promise::Rules => {
            let t = Tn::start(
                m,
                "",
                "[[translator.rules]]\nname = 'no-ee'\nprimitive = 'key-write'\nstore = 'kw'\n\
                 key_prefix = '000000ee'\naction = 'drop'\n",
            );
            t.send_from(t.site.good, vec![kw(0xee, false), kw(0xef, false)]);
            t.wait_datagrams(2);
            let s = t.stop();
            assert_eq!(
                s.kw("kw", &0xeeu32.to_be_bytes()),
                "empty",
                "{m}: dropped by rule"
            );
            assert_eq!(s.kw("kw", &0xefu32.to_be_bytes()), "found", "{m}");
        }
        Promise::Priority => {
            let t = Tn::start(
                m,
                "",
                "[translator.flow_control]\nwrite_budget = 20000\nburst = 2000\n",
            );
            // A low-priority burst far beyond the bucket, high priority within it.
            let mut dgrams = vec![];
            let mut high = vec![];
            for i in 0..300u32 {
                let keys: Vec<[u8; 4]> = (0..8).map(|j| (i * 8 + j).to_be_bytes()).collect();
                let reports: Vec<Report<'_>> = keys
                    .iter()
                    .map(|k| Report::KeyWrite {
                        key: k,
                        data: k,
                        redundancy: 2,
                        immediate: false,
                    })
                    .collect();
                dgrams.push(datagram(Priority::Low, &reports));
                if i % 30 == 0 {
                    let k = (1_000_000 + i).to_be_bytes();
                    high.push(k);
                    dgrams.push(datagram(
                        Priority::High,
                        &[Report::KeyWrite {
                            key: &k,
                            data: &k,
                            redundancy: 2,
                            immediate: false,
                        }],
                    ));
                }
            }
            let n = dgrams.len() as u64;
            send(
                t.site.send_ns.as_deref(),
                t.site.good,
                t.site.listen,
                dgrams,
                false,
            );
            t.wait_datagrams(n);
            let text = t.metrics();
            let dropped = metric(
                &text,
                "dta_translator_overload_dropped_total",
                &[("priority", "low")],
            );
            assert!(
                dropped > 0.0,
                "{m}: no low-priority datagram dropped: {text}"
            );
            let s = t.stop();
            for k in &high {
                assert_eq!(s.kw("kw", k), "found", "{m}: a high-priority report lost");
            }
        }
        Promise::Notifications => {
            let t = Tn::start(m, "", "");
            let mut w = common::dta();
            w.args(["watch", "--count", "1", "--duration", "60", "--config"])
                .arg(&t.cfg);
            let mut watch = Proc::spawn(w);
            watch.wait_for("watching");
            t.send_from(t.site.good, vec![kw(0x77, true), kw(0x78, false)]);
            let (status, out, err) = watch.finish();
            assert!(status.success(), "{err}");
            let notice: serde_json::Value = serde_json::from_str(out.lines().next().unwrap_or(""))
                .unwrap_or_else(|e| panic!("{m}: no notice ({e}): {out} {err}"));
            assert_eq!(notice["store"], "kw", "{notice}");
            // Over RoCEv2 the notice is the WRITE WITH IMMEDIATE's 32 bits: store, primitive,
            // count; no key (docs/rdma.md).
            let key = if m == Mode::Rdma { "" } else { "00000077" };
            assert_eq!(notice["key"], key, "{notice}");
            t.stop();
        }
        Promise::FlushOnStop => {
            let t = Tn::start(m, "", "");
            t.send_from(t.site.good, (0..3).map(|i| append(1, 100 + i)).collect());
            t.wait_datagrams(3);
            let s = t.stop();
            assert_eq!(
                s.list(1),
                vec!["00000064", "00000065", "00000066"],
                "{m}: the pending entries written at the stop: {}",
                s.stderr
            );
        }
        Promise::Metrics => {
            let t = Tn::start(m, "", "");
            let text = t.metrics();
            assert!(text.contains("dta_translator_datagrams_total"), "{text}");
            for f in mode_families(m) {
                assert!(text.contains(f), "{m}: no {f}: {text}");
            }
            for path in ["/healthz", "/readyz"] {
                let (code, body) =
                    http_get(t.site.node_ns.as_deref(), t.site.metrics, path).unwrap();
                assert_eq!(code, 200, "{m} {path}: {body}");
            }
            // The frames the receiving interface drops are counted where the node's are.
            let (ns, from, at) = match (&t.site.net, m) {
                (Some(n), Mode::Rdma) => (Some(n.a.clone()), "lo".to_string(), "lo".to_string()),
                (Some(n), _) => (Some(n.b.clone()), n.dev_b.clone(), n.dev_a.clone()),
                (None, _) => (None, "lo".into(), "lo".into()),
            };
            let dropped = interface_drops_counted(
                "dta_translator",
                &at,
                || t.metrics(),
                ns.is_some()
                    .then_some(|| frames_nobody_takes(ns.as_deref(), &from, IGNORED_FRAMES)),
            );
            let s = t.stop();
            assert!(
                s.summary["interfaces"][&at]["dropped"]
                    .as_u64()
                    .is_some_and(|n| n >= dropped),
                "{m}: the summary counts {at}'s drops: {}",
                s.summary
            );
        }
        Promise::Rejects => {
            let t = Tn::start(m, "", "");
            let bad = malformed();
            let n = bad.len() as u64;
            t.send_from(t.site.good, bad);
            t.wait_datagrams(n);
            let text = t.metrics();
            let total = metric(&text, "dta_translator_dropped_total", &[]);
            assert_eq!(
                total, n as f64,
                "{m}: every malformed datagram counted: {text}"
            );
            let s = t.stop();
            let counted: u64 = s.summary["translator"]["rejected"]
                .as_object()
                .or(s.summary["rejected"].as_object())
                .map(|o| o.values().filter_map(|v| v.as_u64()).sum())
                .unwrap_or(0);
            assert_eq!(
                counted, n,
                "{m}: the summary counts them by reason: {}",
                s.summary
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The INT sink modes.

/// The INT sink file of a cell: `threads` sink threads, `[sink]` lines from `sink`, more at the
/// end from `extra`.
fn int_config(
    dir: &Path,
    listen: SocketAddr,
    good: IpAddr,
    threads: usize,
    sink: &str,
    extra: &str,
) -> PathBuf {
    common::write_int_config(
        dir,
        &listen.to_string(),
        &format!("allow = ['{good}/32']\nthreads = {threads}\nidle_timeout_ms = 600000\n{sink}"),
    );
    let cfg = dir.join("int.toml");
    if !extra.is_empty() {
        let mut text = std::fs::read_to_string(&cfg).unwrap();
        text.push_str(extra);
        std::fs::write(&cfg, text).unwrap();
    }
    cfg
}

/// Telemetry reports of a small generated trace (one datagram each).
fn int_reports(seed: u64) -> Vec<Vec<u8>> {
    let cfg = dta_int::gen::GenConfig {
        seed,
        flows: 8,
        max_flow_packets: 20,
        reroute_prob: 0.0,
        ..Default::default()
    };
    dta_int::gen::generate(&cfg)
        .iter()
        .enumerate()
        .map(|(i, p)| {
            dta_int::gen::stacked_report(7, i as u32, &dta_int::gen::md_frame(p, cfg.int_udp_port))
        })
        .collect()
}

/// An INT sink of mode `m`.
struct Is {
    m: Mode,
    net: Option<VethPair>,
    dir: tempfile::TempDir,
    listen: SocketAddr,
    metrics: SocketAddr,
    good: IpAddr,
    spoof: IpAddr,
    sink: Proc,
}

impl Is {
    fn start(m: Mode, sink: &str) -> Is {
        let dir = tempfile::tempdir().unwrap();
        let (net, listen, metrics, good, spoof) = if needs_netns(m) {
            let net = veth(&tag());
            (
                Some(net),
                "10.91.0.1:32766".parse().unwrap(),
                "127.0.0.1:9465".parse().unwrap(),
                ip("10.91.0.2"),
                ip("10.91.0.3"),
            )
        } else {
            (
                None,
                SocketAddr::new(ip("127.0.0.1"), common::free_udp_port()),
                SocketAddr::new(ip("127.0.0.1"), common::free_tcp_port()),
                ip("127.0.0.2"),
                ip("127.0.0.3"),
            )
        };
        // AF_XDP on two threads: the veth's one queue is read by one thread, which hands the
        // other's flows over, so every promise holds across the hand-over too.
        let threads = if m == Mode::IntSinkAfXdp { 2 } else { 1 };
        let cfg = int_config(dir.path(), listen, good, threads, sink, "");
        let mut c = dta_in(net.as_ref().map(|n| n.a.as_str()));
        c.args(["int-sink", "--config"])
            .arg(&cfg)
            .arg("--records")
            .arg(dir.path().join("records.jsonl"))
            .arg("--metrics")
            .arg(metrics.to_string());
        if let Some(n) = &net {
            c.args([
                if m == Mode::IntSinkAfXdp {
                    "--af-xdp"
                } else {
                    "--xdp"
                },
                &n.dev_a,
            ]);
        }
        let mut p = Proc::spawn(c);
        p.wait_for("metrics on http://");
        Is {
            m,
            net,
            dir,
            listen,
            metrics,
            good,
            spoof,
            sink: p,
        }
    }

    fn ns(&self, node: bool) -> Option<&str> {
        self.net
            .as_ref()
            .map(|n| if node { n.a.as_str() } else { n.b.as_str() })
    }

    fn send_from(&self, from: IpAddr, dgrams: Vec<Vec<u8>>) {
        send(self.ns(false), from, self.listen, dgrams, true);
    }

    fn metrics(&self) -> String {
        let (code, body) = http_get(self.ns(true), self.metrics, "/metrics").unwrap();
        assert_eq!(code, 200, "{body}");
        body
    }

    /// Wait until `n` datagrams were received (taken, rejected or aggregated in the driver).
    fn wait_received(&self, n: u64) {
        dta_testkit::wait_until(
            &format!("{n} datagrams received by {}", self.m),
            || {
                let t = self.metrics();
                (metric(&t, "dta_int_telemetry_reports_total", &[])
                    + metric(&t, "dta_int_errors_total", &[])
                    + metric(&t, "dta_int_sources_rejected_total", &[])) as u64
            },
            |&c| c >= n,
        );
    }

    /// SIGTERM, exit 0; the final counters and the flow records.
    fn stop(self) -> (serde_json::Value, Vec<serde_json::Value>, tempfile::TempDir) {
        let (_, err) = self.sink.stop();
        let stats: serde_json::Value =
            serde_json::from_str(&err[err.find("\n{").map_or(0, |i| i + 1)..])
                .unwrap_or_else(|e| panic!("{e}: {err}"));
        if self.m == Mode::IntSinkAfXdp {
            // The reports took the AF_XDP sockets, not a fallback to the UDP socket.
            let p = &stats["af_xdp"]["program"];
            let received = stats["frames"].as_u64().unwrap_or(0);
            assert!(
                err.contains("AF_XDP receive on")
                    && !err.contains("unavailable")
                    && (received == 0 || p["redirected"].as_u64().unwrap_or(0) > 0),
                "AF_XDP receive was not used: {stats}\n{err}"
            );
        }
        let records = std::fs::read_to_string(self.dir.path().join("records.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (stats, records, self.dir)
    }
}

fn int_refusal(p: Promise, m: Mode) -> String {
    let dir = tempfile::tempdir().unwrap();
    let listen = SocketAddr::new(ip("127.0.0.1"), common::free_udp_port());
    let extra = match p {
        Promise::StoreAllow => {
            "[[store]]\nname = 'more'\nkind = 'key-write'\nslots = 64\n\
                                key_len = 13\ndata_len = 24\nallow = ['127.0.0.1/32']\n"
        }
        Promise::Rules => {
            "[[translator.rules]]\nname = 'r'\nprimitive = 'key-write'\n\
                           action = 'drop'\n"
        }
        Promise::Priority => "[translator.flow_control]\nwrite_budget = 100000\n",
        other => panic!("no refusal setting for {other:?}"),
    };
    let cfg = int_config(dir.path(), listen, ip("127.0.0.2"), 1, "", extra);
    let mut c = common::dta();
    c.args(["int-sink", "--duration", "1", "--config"])
        .arg(&cfg);
    match m {
        Mode::IntSinkXdp => {
            c.args(["--xdp", "lo"]);
        }
        Mode::IntSinkAfXdp => {
            c.args(["--af-xdp", "lo"]);
        }
        _ => {}
    }
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{m} started with {extra}: {stderr}"
    );
    assert!(
        stderr.contains(p.setting(m).split(' ').next().unwrap()),
        "{stderr}"
    );
    stderr
}

fn int_keeps(p: Promise, m: Mode) {
    match p {
        Promise::Allow => {
            // The flows are learned from the allowed source (with XDP, the program then takes
            // their reports), then the same reports arrive again from a spoofed source: none
            // of them may count.
            let s = Is::start(m, "");
            let good = int_reports(3);
            let n = good.len() as u64;
            s.send_from(s.good, good.clone());
            s.wait_received(n);
            s.send_from(s.spoof, good);
            s.wait_received(2 * n);
            let text = s.metrics();
            let refused = metric(&text, "dta_int_sources_rejected_total", &[]);
            assert_eq!(refused, n as f64, "{m}: spoofed reports counted: {text}");
            let (stats, records, _dir) = s.stop();
            let packets: u64 = records.iter().filter_map(|r| r["packets"].as_u64()).sum();
            assert_eq!(packets, n, "{m}: spoofed reports aggregated: {stats}");
        }
        Promise::Notifications => {
            // Every hop latency is an event: each is stored, and announced.
            let s = Is::start(m, "[sink.thresholds]\nhop_latency = 1\n");
            let mut w = common::dta();
            w.args(["watch", "--count", "1", "--duration", "60", "--region-dir"])
                .arg(s.dir.path().join("regions"));
            let mut watch = Proc::spawn(w);
            watch.wait_for("watching");
            let reports = int_reports(5);
            s.send_from(s.good, reports[..4].to_vec());
            let (status, out, err) = watch.finish();
            assert!(status.success(), "{err}");
            let notice: serde_json::Value = serde_json::from_str(out.lines().next().unwrap_or(""))
                .unwrap_or_else(|e| panic!("{m}: no notice ({e}): {out} {err}"));
            assert_eq!(notice["store"], "events", "{notice}");
            s.stop();
        }
        Promise::FlushOnStop => {
            // Flows age out after ten minutes: only the stop writes their records.
            let s = Is::start(m, "");
            let reports = int_reports(7);
            let n = reports.len() as u64;
            s.send_from(s.good, reports);
            s.wait_received(n);
            let (_, records, dir) = s.stop();
            let packets: u64 = records.iter().filter_map(|r| r["packets"].as_u64()).sum();
            assert_eq!(
                packets, n,
                "{m}: every report in the records written at the stop"
            );
            let c = dta_collector::Collector::open_dir(&dir.path().join("regions"), false).unwrap();
            let paths = c.store("paths").unwrap().region.clone();
            for r in &records {
                let flow = dta_int::query::parse_flow(r["flow"].as_str().unwrap()).unwrap();
                let got = dta_int::query::path(&paths, &flow, None).unwrap();
                assert_eq!(got.status, "found", "{m}: {r}");
            }
        }
        Promise::Metrics => {
            let s = Is::start(m, "");
            let text = s.metrics();
            assert!(text.contains("dta_int_telemetry_reports_total"), "{text}");
            for f in mode_families(m) {
                assert!(text.contains(f), "{m}: no {f}: {text}");
            }
            for path in ["/healthz", "/readyz"] {
                let (code, body) = http_get(s.ns(true), s.metrics, path).unwrap();
                assert_eq!(code, 200, "{m} {path}: {body}");
            }
            let (from, at) = match &s.net {
                Some(n) => (n.dev_b.clone(), n.dev_a.clone()),
                None => ("lo".to_string(), "lo".to_string()),
            };
            let ns = s.ns(false).map(str::to_string);
            let dropped = interface_drops_counted(
                "dta_int_sink",
                &at,
                || s.metrics(),
                ns.is_some()
                    .then_some(|| frames_nobody_takes(ns.as_deref(), &from, IGNORED_FRAMES)),
            );
            let (stats, _, _) = s.stop();
            assert!(
                stats["interfaces"][&at]["dropped"]
                    .as_u64()
                    .is_some_and(|n| n >= dropped),
                "{m}: the summary counts {at}'s drops: {stats}"
            );
        }
        Promise::Rejects => {
            let s = Is::start(m, "");
            let bad = vec![vec![0x20; 40], vec![0x02, 0, 0]];
            let n = bad.len() as u64;
            s.send_from(s.good, bad);
            s.wait_received(n);
            let errors = metric(&s.metrics(), "dta_int_errors_total", &[]);
            assert_eq!(errors, n as f64, "{m}: every malformed report counted");
            s.stop();
        }
        other => panic!("{other:?} is refused by {m}, not kept"),
    }
}
