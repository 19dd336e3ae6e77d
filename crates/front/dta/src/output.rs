//! Human-readable and JSON output of query answers.

use std::io::{self, Write};

use serde::Serialize;

use dta_collector::query::{
    Inspection, KeyIncrementResult, KeyWriteResult, ListResult, PostcardResult, SketchResult,
};

/// Print `value` as JSON when `json`, else with `human`.
pub fn print<T: Serialize>(
    out: &mut impl Write,
    json: bool,
    value: &T,
    human: fn(&mut dyn Write, &T) -> io::Result<()>,
) -> io::Result<()> {
    if json {
        writeln!(
            out,
            "{}",
            serde_json::to_string(value).map_err(io::Error::other)?
        )
    } else {
        human(out, value)
    }
}

pub fn key_write(out: &mut dyn Write, r: &KeyWriteResult) -> io::Result<()> {
    let c = &r.confidence;
    match r.status {
        "found" => writeln!(
            out,
            "{} key 0x{}: 0x{} ({} of {} copies agree; wrong with probability {:.1e} at load {:.3})",
            r.store,
            r.key,
            r.data.as_deref().unwrap_or(""),
            r.votes,
            r.redundancy,
            c.p_wrong,
            c.load
        ),
        "ambiguous" => {
            writeln!(
                out,
                "{} key 0x{}: ambiguous over {} copies, candidates:",
                r.store, r.key, r.redundancy
            )?;
            for (d, v) in &r.candidates {
                writeln!(out, "  0x{d} ({v} of {} copies)", r.redundancy)?;
            }
            Ok(())
        }
        _ => writeln!(
            out,
            "{} key 0x{}: empty (not stored, or overwritten: a stored key would be with probability {:.3} at load {:.3})",
            r.store, r.key, c.p_overwritten, c.load
        ),
    }
}

pub fn key_increment(out: &mut dyn Write, r: &KeyIncrementResult) -> io::Result<()> {
    let b = &r.bound;
    writeln!(
        out,
        "{} key 0x{}: {} (at most {} over the true count with probability {:.3}; total {})",
        r.store,
        r.key,
        r.count,
        b.error,
        1.0 - b.delta,
        b.total
    )?;
    if let Some(w) = &r.windows {
        match (w.first(), w.last()) {
            (Some(first), Some(last)) => writeln!(
                out,
                "  over {} window(s), Unix ms {}..{}{}",
                w.len(),
                first.start_ms,
                last.end_ms,
                if last.open {
                    " (the last still open)"
                } else {
                    ""
                }
            )?,
            _ => writeln!(out, "  over no window (none held in the range asked)")?,
        }
    }
    if let Some(n) = &r.coverage.note {
        writeln!(out, "  PARTIAL: {n}")?;
    }
    Ok(())
}

pub fn postcard(out: &mut dyn Write, r: &PostcardResult) -> io::Result<()> {
    let c = &r.confidence;
    match r.status {
        "found" => {
            let hops: Vec<String> = r.path.iter().map(|v| v.to_string()).collect();
            writeln!(
                out,
                "{} key 0x{}: {} hop{}: {} (wrong with probability {:.1e} at load {:.3})",
                r.store,
                r.key,
                r.path.len(),
                if r.path.len() == 1 { "" } else { "s" },
                hops.join(" -> "),
                c.p_wrong,
                c.load
            )
        }
        "empty" => writeln!(
            out,
            "{} key 0x{}: empty (not stored, or overwritten: a stored path would be with probability {:.3} at load {:.3})",
            r.store, r.key, c.p_overwritten, c.load
        ),
        s => writeln!(out, "{} key 0x{}: {s}", r.store, r.key),
    }
}

pub fn list(out: &mut dyn Write, r: &ListResult) -> io::Result<()> {
    writeln!(
        out,
        "{} list {}: {} entr{} (missed {}, next tail {})",
        r.store,
        r.list,
        r.entries.len(),
        if r.entries.len() == 1 { "y" } else { "ies" },
        r.missed,
        r.next_tail
    )?;
    if let Some(note) = &r.coverage.note {
        writeln!(out, "  PARTIAL: {note}")?;
    }
    for (i, e) in r.entries.iter().enumerate() {
        let at = r.next_tail - (r.entries.len() - i) as u64;
        match r.decoded.as_ref().and_then(|d| d.get(i)) {
            // Decoded by the store's record layout: the record, then its bytes.
            Some(d) if !d.is_null() => writeln!(out, "  [{at}] {d}  (0x{e})")?,
            _ => writeln!(out, "  [{at}] 0x{e}")?,
        }
    }
    Ok(())
}

pub fn sketch(out: &mut dyn Write, r: &SketchResult) -> io::Result<()> {
    match (r.estimate, r.cardinality) {
        (Some(e), _) => writeln!(
            out,
            "{} (count-min, sketch {}): estimate {e}",
            r.store, r.sketch_id
        ),
        (_, Some(c)) => writeln!(
            out,
            "{} (hyperloglog, sketch {}): cardinality {c:.0}",
            r.store, r.sketch_id
        ),
        _ => writeln!(out, "{}: no answer", r.store),
    }
}

pub fn inspection(out: &mut dyn Write, i: &Inspection) -> io::Result<()> {
    writeln!(out, "{}", i.path)?;
    writeln!(
        out,
        "  header:     {}",
        serde_json::to_string(&i.header).map_err(io::Error::other)?
    )?;
    writeln!(
        out,
        "  data area:  {} bytes, {:.2}% of 8-byte words non-zero ({} examined), {}",
        i.data_bytes,
        i.fill * 100.0,
        i.sampled_words,
        i.pages
    )?;
    if let Some(n) = i.appended {
        writeln!(out, "  appended:   {n} entries in all lists")?;
    }
    Ok(())
}

/// A progress bar on stderr for a long command: sized to `target` when it is known (a spinner
/// otherwise) and counting `unit`; hidden when `quiet` or when stderr is not a terminal (so a
/// piped or logged run prints only its result).
pub fn progress(target: Option<u64>, unit: &str, quiet: bool) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let (bar, template) = match target {
        Some(n) => (
            indicatif::ProgressBar::new(n),
            format!("{{spinner}} [{{elapsed_precise}}] {{bar:40}} {{pos}}/{{len}} {unit} {{per_sec}} {{msg}}"),
        ),
        None => (
            indicatif::ProgressBar::new_spinner(),
            format!("{{spinner}} [{{elapsed_precise}}] {{pos}} {unit} {{per_sec}} {{msg}}"),
        ),
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;
    use dta_store::{Confidence, CountBound};

    #[test]
    fn human_answers_say_how_sure_they_are() {
        let confidence = Confidence {
            load: 0.5,
            p_overwritten: 0.155,
            p_wrong: 3.6e-11,
        };
        let mut r = KeyWriteResult {
            store: "kw".into(),
            key: "0000002a".into(),
            status: "found",
            data: Some("deadbeef".into()),
            votes: 2,
            candidates: vec![],
            redundancy: 2,
            confidence,
        };
        let mut out = vec![];
        key_write(&mut out, &r).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.contains("wrong with probability 3.6e-11 at load 0.500"),
            "{s}"
        );
        // The copies read and how many agreed: a key written once (lowered redundancy, or a
        // reporter's N = 1) reads 1 of N.
        assert!(s.contains("(2 of 2 copies agree;"), "{s}");
        r.votes = 1;
        r.redundancy = 4;
        let mut out = vec![];
        key_write(&mut out, &r).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("(1 of 4 copies agree;"), "{s}");
        r.status = "empty";
        let mut out = vec![];
        key_write(&mut out, &r).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("with probability 0.155 at load 0.500"), "{s}");
        let k = KeyIncrementResult {
            windows: None,
            coverage: dta_store::Coverage::COMPLETE,
            store: "ki".into(),
            key: "0a000001".into(),
            count: 7,
            redundancy: 2,
            bound: CountBound {
                total: 100,
                epsilon: 0.01,
                error: 1,
                delta: 0.135,
            },
        };
        let mut out = vec![];
        key_increment(&mut out, &k).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.contains(": 7 (at most 1 over the true count with probability 0.865; total 100)"),
            "{s}"
        );
    }
}
