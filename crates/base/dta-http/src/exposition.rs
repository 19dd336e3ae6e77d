//! The samples of a Prometheus / OpenMetrics text exposition, parsed: what the console reads
//! from its peers' `/metrics`, and what tests and tools read back from ours. Written here
//! because the exposition's sample lines are a few lines of grammar and the crates that parse
//! them pull in a parser framework for it; only the samples are read (no metadata).

/// One sample of an exposition: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, k: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
}

/// Parse the samples of a Prometheus / OpenMetrics text exposition (comments skipped; label
/// values unescaped; an optional timestamp after the value ignored). Lines that do not parse
/// are an error naming them.
pub fn parse_exposition(text: &str) -> Result<Vec<Sample>, String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || format!("bad exposition line: {line:?}");
        let name_end = line.find(['{', ' ']).ok_or_else(bad)?;
        let name = line[..name_end].to_owned();
        let mut labels = Vec::new();
        let mut rest = &line[name_end..];
        if let Some(r) = rest.strip_prefix('{') {
            let mut chars = r.char_indices().peekable();
            let mut end = None;
            loop {
                // key
                let mut key = String::new();
                while let Some(&(i, c)) = chars.peek() {
                    if c == '}' {
                        end = Some(i);
                        break;
                    }
                    chars.next();
                    if c == '=' {
                        break;
                    }
                    if c != ',' {
                        key.push(c);
                    }
                }
                if end.is_some() {
                    break;
                }
                if chars.next().map(|x| x.1) != Some('"') {
                    return Err(bad());
                }
                let mut val = String::new();
                loop {
                    match chars.next().map(|x| x.1) {
                        Some('\\') => match chars.next().map(|x| x.1) {
                            Some('n') => val.push('\n'),
                            Some(c) => val.push(c),
                            None => return Err(bad()),
                        },
                        Some('"') => break,
                        Some(c) => val.push(c),
                        None => return Err(bad()),
                    }
                }
                labels.push((key, val));
            }
            rest = &r[end.ok_or_else(bad)? + 1..];
        }
        let value = rest.split_whitespace().next().ok_or_else(bad)?;
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse::<f64>().map_err(|_| bad())?,
        };
        out.push(Sample {
            name,
            labels,
            value,
        });
    }
    Ok(out)
}

/// The value of the sample `name` whose labels include all of `labels` (summed if several).
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for s in samples.iter().filter(|s| s.name == name) {
        if labels.iter().all(|(k, v)| s.label(k) == Some(v)) {
            *found.get_or_insert(0.0) += s.value;
        }
    }
    found
}

/// The content type of the OpenMetrics text format (what the registries encode).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the Prometheus text format 0.0.4.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// An OpenMetrics text exposition rewritten in the Prometheus text format 0.0.4, for scrapers
/// and tools that do not ask for OpenMetrics (`promtool check metrics`, `curl`): a counter's
/// `# HELP`/`# TYPE` name its `_total` sample, `unknown` is `untyped`, `# EOF` and `# UNIT` go.
/// Written here because the client library encodes OpenMetrics only.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut counters = std::collections::HashSet::new();
    for l in openmetrics.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            if let Some((name, "counter")) = rest.split_once(' ') {
                counters.insert(name.to_owned());
            }
        }
    }
    let mut out = String::with_capacity(openmetrics.len());
    for l in openmetrics.lines() {
        if l == "# EOF" || l.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| l.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((p, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let name = if counters.contains(name) {
                    format!("{name}_total")
                } else {
                    name.to_owned()
                };
                let tail = if p == "# TYPE " && tail == "unknown" {
                    "untyped"
                } else {
                    tail
                };
                out.push_str(&format!("{p}{name} {tail}\n"));
            }
            None => {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    out
}

/// The `/metrics` answer for a request with `accept`: OpenMetrics when asked for, else the
/// Prometheus text format ([`to_prometheus_text`]).
pub fn negotiate(accept: Option<&str>, openmetrics: String) -> (&'static str, String) {
    if accept.is_some_and(|a| a.contains("application/openmetrics-text")) {
        (OPENMETRICS, openmetrics)
    } else {
        (PROMETHEUS_TEXT, to_prometheus_text(&openmetrics))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_is_rewritten_as_prometheus_text() {
        let om = "# HELP a_bytes Bytes.\n# TYPE a_bytes counter\n# UNIT a_bytes bytes\n\
                  a_bytes_total{x=\"1\"} 3\n# HELP g A gauge.\n# TYPE g gauge\ng 2\n\
                  # TYPE u unknown\nu 1\n# EOF\n";
        let text = to_prometheus_text(om);
        assert_eq!(
            text,
            "# HELP a_bytes_total Bytes.\n# TYPE a_bytes_total counter\n\
             a_bytes_total{x=\"1\"} 3\n# HELP g A gauge.\n# TYPE g gauge\ng 2\n\
             # TYPE u untyped\nu 1\n"
        );
        assert_eq!(
            parse_exposition(&text).unwrap(),
            parse_exposition(om).unwrap(),
            "the same samples"
        );
        assert_eq!(negotiate(None, om.into()).0, PROMETHEUS_TEXT);
        assert_eq!(
            negotiate(
                Some("application/openmetrics-text;version=1.0.0"),
                om.into()
            )
            .0,
            OPENMETRICS
        );
    }
}

/// Every process's own families, registered beside its service's: `dta_build_info` (1, with
/// the version and the component as labels) and the standard `process_*` families of the
/// Prometheus client libraries (CPU seconds, resident memory, open descriptors, start time),
/// read from `/proc/self` at each scrape.
#[derive(Debug)]
pub struct ProcessMetrics {
    component: &'static str,
}

impl ProcessMetrics {
    /// `component`: `collector`, `translator` or `int-sink` (the `component` label).
    pub fn new(component: &'static str) -> ProcessMetrics {
        ProcessMetrics { component }
    }
}

/// `/proc/self/stat` fields 14-15 (utime, stime) and 22 (starttime), in clock ticks.
fn proc_stat() -> Option<(u64, u64, u64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name may hold spaces: the fields after it start past the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((
        f.get(11)?.parse().ok()?,
        f.get(12)?.parse().ok()?,
        f.get(19)?.parse().ok()?,
    ))
}

/// Seconds since the epoch the system booted (`/proc/stat` btime).
fn boot_time() -> Option<u64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

impl prometheus_client::collector::Collector for ProcessMetrics {
    fn encode(
        &self,
        mut enc: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        use prometheus_client::metrics::MetricType;
        let mut info = enc.encode_descriptor(
            "dta_build_info",
            "This process's build: 1, with its version and component as labels",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(1i64).encode(info.encode_family(&[
            ("version", env!("CARGO_PKG_VERSION")),
            ("component", self.component),
        ])?)?;
        // SAFETY: sysconf reads a constant of the system; it touches no memory of ours.
        let (tick, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK).max(1) as f64,
                libc::sysconf(libc::_SC_PAGESIZE).max(1) as f64,
            )
        };
        if let Some((utime, stime, start)) = proc_stat() {
            let m = enc.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new((utime + stime) as f64 / tick).encode(m)?;
            if let Some(boot) = boot_time() {
                let m = enc.encode_descriptor(
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds",
                    None,
                    MetricType::Gauge,
                )?;
                ConstGauge::new(boot as f64 + start as f64 / tick).encode(m)?;
            }
        }
        if let Some(rss) = std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        {
            let m = enc.encode_descriptor(
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                None,
                MetricType::Gauge,
            )?;
            ConstGauge::new(rss as f64 * page).encode(m)?;
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            let m = enc.encode_descriptor(
                "process_open_fds",
                "Number of open file descriptors",
                None,
                MetricType::Gauge,
            )?;
            ConstGauge::new(fds.count() as i64).encode(m)?;
        }
        Ok(())
    }
}
