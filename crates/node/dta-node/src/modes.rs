//! The ways of running `dta` and the promises each keeps: one table ([`TABLE`]), mirrored by
//! docs/modes.md and proven cell by cell by the conformance suite (crates/front/dta/tests/conformance.rs,
//! crates/front/dta-capi/src/conformance.rs; a test fails when the table, the document and the
//! tests disagree). A mode that cannot keep a promise refuses, at start, the setting that asks
//! for it, naming the setting and the mode ([`check_translator`], [`check_int_sink`]): nothing
//! a configuration asks for is ignored silently.

use std::fmt;

use crate::config::{Config, IntSinkFile};

/// A way of running a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `dta translator`, one thread, no classifier.
    Memory,
    /// `dta translator --threads N`.
    Threads,
    /// `dta translator` behind the priority classifier (`classifier = true`).
    Classifier,
    /// `dta translator --xdp IFACE`, native mode.
    XdpNative,
    /// `dta translator --xdp IFACE --xdp-generic`.
    XdpGeneric,
    /// `dta translator --rdma IFACE` to the software responder (`dta responder`).
    Rdma,
    /// `dta translator --af-xdp IFACE`: kernel-bypass receive (AF_XDP), one translator thread
    /// per receive queue.
    AfXdp,
    /// The C ABI's in-process node (`dta_collector_open`).
    Capi,
    /// `dta int-sink`.
    IntSink,
    /// `dta int-sink --xdp IFACE`.
    IntSinkXdp,
    /// `dta int-sink --af-xdp IFACE`: kernel-bypass receive.
    IntSinkAfXdp,
}

impl Mode {
    pub const ALL: [Mode; 11] = [
        Mode::Memory,
        Mode::Threads,
        Mode::Classifier,
        Mode::XdpNative,
        Mode::XdpGeneric,
        Mode::Rdma,
        Mode::AfXdp,
        Mode::Capi,
        Mode::IntSink,
        Mode::IntSinkXdp,
        Mode::IntSinkAfXdp,
    ];

    /// The mode's name in docs/modes.md and in the conformance tests' names.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Memory => "memory",
            Mode::Threads => "threads",
            Mode::Classifier => "classifier",
            Mode::XdpNative => "xdp_native",
            Mode::XdpGeneric => "xdp_generic",
            Mode::Rdma => "rdma",
            Mode::AfXdp => "af_xdp",
            Mode::Capi => "capi",
            Mode::IntSink => "int_sink",
            Mode::IntSinkXdp => "int_sink_xdp",
            Mode::IntSinkAfXdp => "int_sink_af_xdp",
        }
    }

    /// How an operator starts it.
    pub fn command(self) -> &'static str {
        match self {
            Mode::Memory => "dta translator",
            Mode::Threads => "dta translator --threads N",
            Mode::Classifier => "dta translator (classifier = true)",
            Mode::XdpNative => "dta translator --xdp IFACE",
            Mode::XdpGeneric => "dta translator --xdp IFACE --xdp-generic",
            Mode::Rdma => "dta translator --rdma IFACE",
            Mode::AfXdp => "dta translator --af-xdp IFACE",
            Mode::Capi => "dta_collector_open (C ABI)",
            Mode::IntSink => "dta int-sink",
            Mode::IntSinkXdp => "dta int-sink --xdp IFACE",
            Mode::IntSinkAfXdp => "dta int-sink --af-xdp IFACE",
        }
    }

    fn is_int_sink(self) -> bool {
        matches!(self, Mode::IntSink | Mode::IntSinkXdp | Mode::IntSinkAfXdp)
    }

    fn is_xdp_translator(self) -> bool {
        matches!(self, Mode::XdpNative | Mode::XdpGeneric)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.command())
    }
}

/// A promise of docs/security.md and docs/flow-control.md a mode keeps or refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promise {
    /// A datagram from a source outside the global allow-list (`[translator] allow`, the INT
    /// sink's `[sink] allow`) is dropped before it is parsed and counted
    /// `source_not_allowed`.
    Allow,
    /// A report for a store with `[[store]] allow` from a source outside it is not applied and
    /// is counted `source_not_allowed`.
    StoreAllow,
    /// `[[translator.rules]]` run on every report (a drop rule drops).
    Rules,
    /// `[translator.flow_control]`: admission by priority against the write meter.
    Priority,
    /// A report flagged immediate is announced once on the region directory's ring (the INT
    /// sink: every event it stores).
    Notifications,
    /// On stop (SIGTERM; the C ABI: `dta_collector_close`) everything held is written.
    FlushOnStop,
    /// `/metrics`, `/healthz` and `/readyz` (the C ABI: `dta_stats`).
    Metrics,
    /// Every rejected datagram or report is counted by reason.
    Rejects,
}

impl Promise {
    pub const ALL: [Promise; 8] = [
        Promise::Allow,
        Promise::StoreAllow,
        Promise::Rules,
        Promise::Priority,
        Promise::Notifications,
        Promise::FlushOnStop,
        Promise::Metrics,
        Promise::Rejects,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Promise::Allow => "allow",
            Promise::StoreAllow => "store_allow",
            Promise::Rules => "rules",
            Promise::Priority => "priority",
            Promise::Notifications => "notifications",
            Promise::FlushOnStop => "flush_on_stop",
            Promise::Metrics => "metrics",
            Promise::Rejects => "rejects",
        }
    }

    /// The configuration setting that asks for the promise.
    pub fn setting(self, mode: Mode) -> &'static str {
        match (self, mode.is_int_sink()) {
            (Promise::Allow, true) => "[sink] allow",
            (Promise::Allow, false) => "[translator] allow",
            (Promise::StoreAllow, _) => "[[store]] allow",
            (Promise::Rules, _) => "[[translator.rules]]",
            (Promise::Priority, _) => "[translator.flow_control] write_budget",
            (Promise::Notifications, _) => "the immediate flag",
            (Promise::FlushOnStop, _) => "SIGTERM",
            (Promise::Metrics, _) => "--metrics",
            (Promise::Rejects, _) => "(always)",
        }
    }
}

/// Whether a mode keeps a promise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    Kept,
    /// The mode refuses to start when the setting asks for the promise; the text says why.
    Refused(&'static str),
}

/// Why the XDP translator refuses a write budget.
const XDP_UNMETERED: &str = "the XDP program applies Key-Write, Key-Increment and Append in the \
     driver, where no write meter runs; run without --xdp to meter writes";
/// Why the INT sink refuses per-store allow-lists.
const INT_ONE_SOURCE: &str = "the INT sink writes every store itself from the reports [sink] \
     allow admits; restrict the reporters with [sink] allow";
/// Why the INT sink refuses translator rules.
const INT_NO_RULES: &str = "the INT sink's stores are written by the sink, not by DTA reports; \
     its events and thresholds are [sink] settings";
/// Why the INT sink refuses a write budget.
const INT_UNMETERED: &str = "the INT sink writes shared memory without a write meter";

/// The table: for each promise, each mode of [`Mode::ALL`] in order.
pub const TABLE: [(Promise, [Support; 11]); 8] = {
    use Support::{Kept as K, Refused as R};
    [
        (Promise::Allow, [K, K, K, K, K, K, K, K, K, K, K]),
        (
            Promise::StoreAllow,
            [
                K,
                K,
                K,
                K,
                K,
                K,
                K,
                K,
                R(INT_ONE_SOURCE),
                R(INT_ONE_SOURCE),
                R(INT_ONE_SOURCE),
            ],
        ),
        (
            Promise::Rules,
            [
                K,
                K,
                K,
                K,
                K,
                K,
                K,
                K,
                R(INT_NO_RULES),
                R(INT_NO_RULES),
                R(INT_NO_RULES),
            ],
        ),
        (
            Promise::Priority,
            [
                K,
                K,
                K,
                R(XDP_UNMETERED),
                R(XDP_UNMETERED),
                K,
                K,
                K,
                R(INT_UNMETERED),
                R(INT_UNMETERED),
                R(INT_UNMETERED),
            ],
        ),
        (Promise::Notifications, [K, K, K, K, K, K, K, K, K, K, K]),
        (Promise::FlushOnStop, [K, K, K, K, K, K, K, K, K, K, K]),
        (Promise::Metrics, [K, K, K, K, K, K, K, K, K, K, K]),
        (Promise::Rejects, [K, K, K, K, K, K, K, K, K, K, K]),
    ]
};

/// Whether `mode` keeps `promise`.
pub fn support(promise: Promise, mode: Mode) -> Support {
    let m = Mode::ALL.iter().position(|&x| x == mode).expect("in ALL");
    TABLE
        .iter()
        .find(|(p, _)| *p == promise)
        .map(|(_, row)| row[m])
        .expect("every promise has a row")
}

/// A setting the mode cannot honour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub setting: String,
    pub mode: Mode,
    pub why: &'static str,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is not honoured by `{}`: {} (docs/modes.md)",
            self.setting, self.mode, self.why
        )
    }
}

impl std::error::Error for Refusal {}

fn refuse(promise: Promise, mode: Mode, setting: impl Into<String>) -> Result<(), Refusal> {
    match support(promise, mode) {
        Support::Kept => Ok(()),
        Support::Refused(why) => Err(Refusal {
            setting: setting.into(),
            mode,
            why,
        }),
    }
}

/// Refuse what `cfg` asks of a translator that `mode` cannot honour.
pub fn check_translator(mode: Mode, cfg: &Config) -> Result<(), Refusal> {
    if cfg.translator.flow_control.metered() {
        refuse(
            Promise::Priority,
            mode,
            format!(
                "[translator.flow_control] write_budget = {}",
                cfg.translator.flow_control.write_budget
            ),
        )?;
    }
    if let Some(s) = cfg.store.iter().find(|s| s.allow.is_some()) {
        refuse(
            Promise::StoreAllow,
            mode,
            format!("[[store]] {:?} allow", s.name),
        )?;
    }
    if let Some(r) = cfg.translator.rules.first() {
        refuse(
            Promise::Rules,
            mode,
            format!("[[translator.rules]] {:?}", r.name),
        )?;
    }
    debug_assert!(!mode.is_int_sink() || !mode.is_xdp_translator());
    Ok(())
}

/// The INT sink's mode: with its XDP fast path (`xdp`), with AF_XDP receive (`af_xdp`), or
/// neither.
pub fn int_sink_mode(xdp: bool, af_xdp: bool) -> Mode {
    match (xdp, af_xdp) {
        (true, _) => Mode::IntSinkXdp,
        (false, true) => Mode::IntSinkAfXdp,
        (false, false) => Mode::IntSink,
    }
}

/// Why the INT sink's XDP fast path refuses histograms other than log2.
const XDP_LOG2_HISTOGRAMS: &str = "the XDP fast path counts histograms in the driver in log2 \
     buckets; set [sink] histogram = { kind = \"log2\" } to use it, or run without --xdp for \
     the log-linear quantiles";

/// Why the INT sink's XDP fast path refuses a per-port histogram store.
const XDP_NO_PORTS: &str = "the XDP fast path counts histograms per switch in the driver, not \
     per port: remove the per-port histogram store (Key-Increment of 8-byte keys) to use it, or \
     run without --xdp for the per-port histograms";

/// Refuse what an INT sink file asks that the INT sink in `mode` cannot honour. Its `[translator]` table configures the sink's own
/// translator (caches, batches, timers); the settings of a translator that receives datagrams
/// itself have the sink's own (`[sink] allow`, `[sink] recv_buffer`, ...) and are refused by
/// name.
pub fn check_int_sink(f: &IntSinkFile, mode: Mode) -> Result<(), Refusal> {
    if mode == Mode::IntSinkXdp && f.sink.histogram != dta_int::Buckets::Log2 {
        return Err(Refusal {
            setting: format!(
                "[sink] histogram = {}",
                toml::Value::try_from(&f.sink.histogram)
                    .map_or_else(|_| format!("{:?}", f.sink.histogram), |v| v.to_string())
            ),
            mode,
            why: XDP_LOG2_HISTOGRAMS,
        });
    }
    if mode == Mode::IntSinkXdp {
        let ports = f.store.iter().find(|s| {
            s.kind == Some(dta_collector::config::StoreKindName::KeyIncrement)
                && s.key_len == Some(dta_int::layout::PORT_KEY_LEN as u8)
        });
        if let Some(s) = ports {
            return Err(Refusal {
                setting: format!(
                    "[[store]] {} (key_len = {})",
                    s.name,
                    dta_int::layout::PORT_KEY_LEN
                ),
                mode,
                why: XDP_NO_PORTS,
            });
        }
    }
    let t = &f.translator;
    let d = dta_translator::TranslatorConfig::default();
    let receive_only = |setting: &str, sink: &str| Refusal {
        setting: format!("[translator] {setting}"),
        mode,
        why: if sink.is_empty() {
            "the INT sink receives telemetry reports itself, not DTA datagrams"
        } else {
            sink_setting(sink)
        },
    };
    let differs: [(&str, bool, &str); 10] = [
        ("allow", t.allow != d.allow, "allow"),
        ("listen", t.listen != d.listen, "listen"),
        ("threads", t.threads != d.threads, "threads"),
        ("recv_buffer", t.recv_buffer != d.recv_buffer, "recv_buffer"),
        ("recv_batch", t.recv_batch != d.recv_batch, "recv_batch"),
        ("classifier", t.classifier.is_some(), ""),
        ("nack_port", t.nack_port != d.nack_port, ""),
        (
            "prototype_header",
            t.prototype_header != d.prototype_header,
            "",
        ),
        ("nack_budget", t.nack_budget != d.nack_budget, ""),
        ("control_key_file", t.control_key_file.is_some(), ""),
    ];
    if let Some((name, _, sink)) = differs.iter().find(|(_, set, _)| *set) {
        return Err(receive_only(name, sink));
    }
    if t.flow_control.metered() {
        refuse(
            Promise::Priority,
            mode,
            format!(
                "[translator.flow_control] write_budget = {}",
                t.flow_control.write_budget
            ),
        )?;
    }
    if let Some(s) = f.store.iter().find(|s| s.allow.is_some()) {
        refuse(
            Promise::StoreAllow,
            mode,
            format!("[[store]] {:?} allow", s.name),
        )?;
    }
    if let Some(r) = t.rules.first() {
        refuse(
            Promise::Rules,
            mode,
            format!("[[translator.rules]] {:?}", r.name),
        )?;
    }
    Ok(())
}

/// The INT sink's own setting for a translator receive setting.
fn sink_setting(name: &str) -> &'static str {
    match name {
        "allow" => "the INT sink takes reports from the sources [sink] allow names",
        "listen" => "the INT sink listens on the file's top-level listen",
        "threads" => "the INT sink's threads are [sink] threads",
        "recv_buffer" => "the INT sink's receive buffer is [sink] recv_buffer",
        _ => "the INT sink's receive batch is [sink] recv_batch",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_and_promise_has_a_cell() {
        for p in Promise::ALL {
            for m in Mode::ALL {
                let _ = support(p, m);
            }
        }
        assert_eq!(TABLE.len(), Promise::ALL.len());
        for (i, (p, _)) in TABLE.iter().enumerate() {
            assert_eq!(*p, Promise::ALL[i], "rows in Promise::ALL order");
        }
    }

    #[test]
    fn a_refused_setting_is_named_with_the_mode() {
        let cfg = Config::parse(
            "[translator.flow_control]\nwrite_budget = 1000000\n[[store]]\nname = 'kw'\n\
             kind = 'key-write'\nslots = 1024\n",
        )
        .unwrap();
        let e = check_translator(Mode::XdpNative, &cfg).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("write_budget = 1000000"), "{msg}");
        assert!(msg.contains("dta translator --xdp IFACE"), "{msg}");
        assert!(check_translator(Mode::Memory, &cfg).is_ok());
        assert!(check_translator(Mode::Rdma, &cfg).is_ok());
    }

    #[test]
    fn the_int_sink_xdp_fast_path_refuses_histograms_it_cannot_count() {
        let log_linear = IntSinkFile::parse("region_dir = 'r'\n").unwrap();
        let e = check_int_sink(&log_linear, Mode::IntSinkXdp).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("[sink] histogram"), "{msg}");
        assert!(msg.contains("log_linear"), "{msg}");
        assert!(msg.contains("dta int-sink --xdp IFACE"), "{msg}");
        assert!(check_int_sink(&log_linear, Mode::IntSink).is_ok());
        let log2 = IntSinkFile::parse("region_dir = 'r'\n[sink]\nhistogram = { kind = 'log2' }\n")
            .unwrap();
        assert!(check_int_sink(&log2, Mode::IntSinkXdp).is_ok());
        // A per-port histogram store: every mode but the fast path keeps it.
        let ports = IntSinkFile::parse(
            "region_dir = 'r'\n[sink]\nhistogram = { kind = 'log2' }\n[[store]]\nname = \
             'int_hist_port'\nkind = 'key-increment'\ncounters = 1024\nkey_len = 8\n",
        )
        .unwrap();
        let e = check_int_sink(&ports, Mode::IntSinkXdp).unwrap_err();
        assert!(e.to_string().contains("int_hist_port"), "{e}");
        assert!(e.to_string().contains("per port"), "{e}");
        for m in [Mode::IntSink, Mode::IntSinkAfXdp] {
            assert!(check_int_sink(&ports, m).is_ok());
        }
    }

    #[test]
    fn the_int_sink_refuses_what_its_translator_would_ignore() {
        // Log2 histograms: what every mode takes (the XDP fast path counts no other).
        let base = "region_dir = 'r'\n[sink]\nhistogram = { kind = 'log2' }\n";
        let f = IntSinkFile::parse(base).unwrap();
        for m in [Mode::IntSink, Mode::IntSinkXdp, Mode::IntSinkAfXdp] {
            check_int_sink(&f, m).unwrap();
        }
        for (extra, named) in [
            (
                "[translator]\nallow = ['10.0.0.0/8']\n",
                "[translator] allow",
            ),
            ("[translator]\nthreads = 4\n", "[translator] threads"),
            (
                "[translator]\nclassifier = true\n",
                "[translator] classifier",
            ),
            (
                "[translator.flow_control]\nwrite_budget = 100000\n",
                "write_budget",
            ),
            (
                "[[store]]\nname = 'p'\nkind = 'key-write'\nslots = 64\nkey_len = 13\n\
                 data_len = 24\nallow = ['127.0.0.1/32']\n",
                "[[store]] \"p\" allow",
            ),
        ] {
            let f = IntSinkFile::parse(&format!("{base}{extra}")).unwrap();
            for m in [Mode::IntSink, Mode::IntSinkXdp, Mode::IntSinkAfXdp] {
                let e = check_int_sink(&f, m).unwrap_err().to_string();
                assert!(e.contains(named), "{extra}: {e}");
                assert!(e.contains("dta int-sink"), "{e}");
            }
        }
    }

    #[test]
    fn the_int_sink_on_af_xdp_runs_any_threads_and_beside_its_fast_path() {
        let f = IntSinkFile::parse("region_dir = 'r'\n[sink]\nthreads = 2\n").unwrap();
        check_int_sink(&f, Mode::IntSinkAfXdp).unwrap();
        let f = IntSinkFile::parse(
            "region_dir = 'r'\n[sink]\nthreads = 2\nhistogram = { kind = 'log2' }\n",
        )
        .unwrap();
        check_int_sink(&f, int_sink_mode(true, true)).unwrap();
        assert_eq!(int_sink_mode(true, true), Mode::IntSinkXdp);
        assert_eq!(int_sink_mode(false, true), Mode::IntSinkAfXdp);
    }
}
