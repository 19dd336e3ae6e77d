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
