//! What operators and service managers see of a running `dta`: the log (format, colours) and
//! the readiness `/readyz` answers.

use std::io::IsTerminal;
use std::sync::Arc;

use dta_http::health::Readiness;

/// Environment variable choosing the log format (`text` or `json`), like `--log-format`.
pub const LOG_FORMAT_ENV: &str = "DTA_LOG_FORMAT";
/// Environment variable filtering the log (`tracing_subscriber::EnvFilter` syntax, e.g.
/// `debug`, `dta_http::request=off`).
pub const LOG_FILTER_ENV: &str = "DTA_LOG";
/// The filter when [`LOG_FILTER_ENV`] is unset (or does not parse).
pub const DEFAULT_LOG_FILTER: &str = "info";

/// How log events are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One line per event; colours only when stderr is a terminal (and `NO_COLOR` is unset).
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target` and the event's fields
    /// (`message` among them).
    Json,
}

/// Whether text logs carry ANSI colour codes: only on a terminal, and never with `NO_COLOR`
/// set (<https://no-color.org>). A journal, a file or a pipe gets plain text.
pub fn ansi_colours() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Install the process's log subscriber: `format` on stderr, filtered by [`LOG_FILTER_ENV`].
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env(LOG_FILTER_ENV)
        .unwrap_or_else(|_| DEFAULT_LOG_FILTER.into());
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => b.with_ansi(ansi_colours()).init(),
        LogFormat::Json => b
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_ansi(false)
            .init(),
    }
}

/// The metric name prefix of a service (`int-sink`: `dta_int_sink`; the translator's modes:
/// `dta_translator`).
pub(crate) fn metric_prefix(service: &str) -> &'static str {
    if service == "int-sink" {
        dta_metrics::INT_SINK_PREFIX
    } else {
        dta_metrics::TRANSLATOR_PREFIX
    }
}

/// Counters of a service's `/metrics`: one registry of every family the service exports.
pub type Registry = prometheus_client::registry::Registry;

/// Start a service's metrics server at `addr` (`/metrics`, `/healthz`, `/readyz`): the
/// registry's families, readiness from `ready`, a token from the environment
/// ([`metrics_options`]). The one start-up of every service's metrics server.
pub fn start_metrics(
    addr: std::net::SocketAddr,
    mut registry: Registry,
    ready: Readiness,
    component: &'static str,
) -> anyhow::Result<dta_metrics::MetricsServer> {
    use anyhow::Context;
    registry.register_collector(Box::new(dta_http::exposition::ProcessMetrics::new(
        component,
    )));
    let opts = metrics_options(ready)?;
    let m = dta_metrics::MetricsServer::start_with(addr, Arc::new(registry), opts)
        .with_context(|| format!("metrics server on {addr}"))?;
    eprintln!("metrics on http://{}/metrics", m.local_addr());
    Ok(m)
}

/// This process's CPU time so far (user + system), seconds.
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return f64::NAN;
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// Readiness of a collector: every store of its configuration mapped and readable.
pub fn collector_ready(c: Arc<dta_collector::Collector>) -> Readiness {
    Readiness::new(move || {
        let down: Vec<String> = c
            .status()
            .into_iter()
            .filter_map(|s| s.available.err().map(|r| format!("store {}: {r}", s.name)))
            .collect();
        match down.len() {
            0 => Ok(()),
            n => Err(format!(
                "{n} store{} unavailable: {}",
                if n == 1 { "" } else { "s" },
                down.join("; ")
            )),
        }
    })
}

/// Readiness of a translator or an INT sink whose report sockets are bound (their metrics
/// server starts after): every region it writes still mapped and whole.
pub fn regions_ready(regions: Vec<Arc<dta_store::Region>>) -> Readiness {
    Readiness::new(move || check_regions(&regions))
}

fn check_regions(regions: &[Arc<dta_store::Region>]) -> Result<(), String> {
    for r in regions {
        r.check()
            .map_err(|e| format!("region {}: {e}", r.path().display()))?;
    }
    Ok(())
}

/// Readiness of a translator: its regions whole ([`regions_ready`]) and its spill file
/// writable (not failed within `dta_translator::stats::SPILL_FILE_UNREADY`).
pub fn translator_ready(
    regions: Vec<Arc<dta_store::Region>>,
    stats: Vec<Arc<dta_translator::Stats>>,
) -> Readiness {
    Readiness::new(move || {
        check_regions(&regions)?;
        dta_translator::Stats::spill_unready(&stats)
    })
}

/// The server options of a `--metrics` server (token from the environment) answering `/readyz`
/// with `ready`.
pub fn metrics_options(ready: Readiness) -> anyhow::Result<dta_http::ServerOptions> {
    Ok(dta_http::ServerOptions {
        ready,
        ..dta_http::ServerOptions::with_token_file(None)?
    })
}

/// The version, and what this build left out: `0.1.0`, or `0.1.0 (built without the XDP
/// programs dta_xdp, ...: ...)` when clang was missing at build time (`dta --version`,
/// `dta check`).
pub fn build_note() -> String {
    let missing = xdp_programs_missing();
    if missing.is_empty() {
        env!("CARGO_PKG_VERSION").to_owned()
    } else {
        format!(
            "{} (built without the XDP programs {}: clang was missing at build time; \
             run scripts/setup.sh, then build again)",
            env!("CARGO_PKG_VERSION"),
            missing.join(", ")
        )
    }
}

/// The XDP programs this build left out (clang missing at build time; none normally).
pub fn xdp_programs_missing() -> Vec<&'static str> {
    dta_xdp::missing_programs()
}

/// What an XDP program did with the frames it saw: one counter family `NAME_total{action}`,
/// read at each scrape (`dta_translator_xdp_program_total`, `dta_int_sink_xdp_program_total`;
/// the AF_XDP redirect program's is [`crate::af_xdp::AfXdpMetrics`]'s).
pub struct ProgramActions {
    name: &'static str,
    help: &'static str,
    read: Box<dyn Fn() -> Vec<(&'static str, u64)> + Send + Sync>,
}

impl ProgramActions {
    pub fn new(
        name: &'static str,
        help: &'static str,
        read: impl Fn() -> Vec<(&'static str, u64)> + Send + Sync + 'static,
    ) -> ProgramActions {
        ProgramActions {
            name,
            help,
            read: Box::new(read),
        }
    }
}

impl std::fmt::Debug for ProgramActions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProgramActions({})", self.name)
    }
}

impl prometheus_client::collector::Collector for ProgramActions {
    fn encode(
        &self,
        mut enc: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        dta_http::metrics::counter_family(
            &mut enc,
            self.name,
            self.help,
            (self.read)()
                .into_iter()
                .map(|(a, v)| (vec![("action", a)], v)),
        )
    }
}
