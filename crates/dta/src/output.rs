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
    match r.status {
        "found" => writeln!(
            out,
            "{} key 0x{}: 0x{} ({} matching slot{})",
            r.store,
            r.key,
            r.data.as_deref().unwrap_or(""),
            r.votes,
            if r.votes == 1 { "" } else { "s" }
        ),
        "ambiguous" => {
            writeln!(out, "{} key 0x{}: ambiguous, candidates:", r.store, r.key)?;
            for (d, v) in &r.candidates {
                writeln!(out, "  0x{d} ({v} votes)")?;
            }
            Ok(())
        }
        _ => writeln!(
            out,
            "{} key 0x{}: empty (not stored, or overwritten)",
            r.store, r.key
        ),
    }
}

pub fn key_increment(out: &mut dyn Write, r: &KeyIncrementResult) -> io::Result<()> {
    writeln!(out, "{} key 0x{}: {}", r.store, r.key, r.count)
}

pub fn postcard(out: &mut dyn Write, r: &PostcardResult) -> io::Result<()> {
    match r.status {
        "found" => {
            let hops: Vec<String> = r.path.iter().map(|v| v.to_string()).collect();
            writeln!(
                out,
                "{} key 0x{}: {} hop{}: {}",
                r.store,
                r.key,
                r.path.len(),
                if r.path.len() == 1 { "" } else { "s" },
                hops.join(" -> ")
            )
        }
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
    for (i, e) in r.entries.iter().enumerate() {
        writeln!(
            out,
            "  [{}] 0x{e}",
            r.next_tail - (r.entries.len() - i) as u64
        )?;
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
        "  data area:  {} bytes, {:.2}% of 8-byte words non-zero ({} examined), huge pages: {}",
        i.data_bytes,
        i.fill * 100.0,
        i.sampled_words,
        if i.huge_pages { "yes" } else { "no" }
    )?;
    if let Some(n) = i.appended {
        writeln!(out, "  appended:   {n} entries in all lists")?;
    }
    Ok(())
}
