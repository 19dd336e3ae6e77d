//! `dta watch`: push notifications as JSON lines.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use clap::Args;

use dta_store::notify::{NotifyRing, DEFAULT_CAPACITY};

#[derive(Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub config: crate::ConfigArgs,
    /// Stop after this many notices.
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
}

/// How long one wait on the ring lasts before the stop flag is looked at again.
const POLL: Duration = Duration::from_millis(100);

/// Print every notice of the region directory's ring as one JSON line, from now on: what a
/// flagged report wrote and when, and `latency_ns` from its write to this print. A line
/// `{"missed": N}` says N notices were overwritten before they could be read.
pub fn watch(a: WatchArgs, stop: &AtomicBool) -> anyhow::Result<ExitCode> {
    let cfg = a.config.load()?;
    // The translator creates the ring too; whichever starts first, both map the same file.
    let ring = NotifyRing::open_or_create(&cfg.region_dir, DEFAULT_CAPACITY)?;
    let mut cursor = ring.subscribe();
    eprintln!(
        "watching {} from notice {}",
        ring.path().display(),
        cursor.position()
    );
    let started = Instant::now();
    let mut out = std::io::stdout().lock();
    let (mut n, mut missed) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed)
        && a.count.is_none_or(|c| n < c)
        && a.duration
            .is_none_or(|d| started.elapsed().as_secs_f64() < d)
    {
        let Some(notice) = ring.next(&mut cursor, POLL) else {
            continue;
        };
        if cursor.missed() > missed {
            writeln!(
                out,
                "{}",
                serde_json::json!({ "missed": cursor.missed() - missed })
            )?;
            missed = cursor.missed();
        }
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let mut v = serde_json::to_value(&notice)?;
        v["latency_ns"] = now.saturating_sub(notice.unix_ns).into();
        writeln!(out, "{v}")?;
        out.flush()?;
        n += 1;
    }
    Ok(ExitCode::SUCCESS)
}
