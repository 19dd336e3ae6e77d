//! `dta watch` (push notifications as JSON lines) and the translator's live rule reload.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use clap::Args;

use dta::config::Config;
use dta_store::notify::{NotifyRing, DEFAULT_CAPACITY};
use dta_store::Header;
use dta_translator::rules::Rules;

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

/// Set by SIGHUP in `dta translator`: reload the rules.
static RELOAD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sighup(_: libc::c_int) {
    RELOAD.store(true, Ordering::Relaxed);
}

/// Make SIGHUP ask for a rule reload (instead of stopping, as the Ctrl-C handler would).
pub fn reload_on_sighup() {
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(
            libc::SIGHUP,
            on_sighup as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

/// How often the configuration file's modification time is looked at.
const WATCH_INTERVAL: Duration = Duration::from_millis(200);

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Until `stop`: reload the rules of configuration `path` when the file changes or SIGHUP
/// arrives, compiled against the running stores `specs`. A configuration that does not load or
/// whose rules do not compile is reported and the running rules stay.
pub fn reload_loop(path: PathBuf, rules: &Rules, headers: &[Header], stop: &AtomicBool) {
    reload_loop_with(path, stop, |c| {
        let cat: Vec<_> = headers.iter().map(|h| (h.name.as_str(), &h.spec)).collect();
        let g = rules
            .replace(&c.translator.rules, &cat)
            .map_err(anyhow::Error::msg)?;
        Ok(format!("generation {g}, {} rules", rules.current().len()))
    })
}

/// Until `stop`: when configuration `path` changes or SIGHUP arrives, load it and hand it to
/// `install` (which reloads what it runs and describes the result). A configuration that does
/// not load or that `install` refuses is reported and the running rules stay.
pub fn reload_loop_with(
    path: PathBuf,
    stop: &AtomicBool,
    mut install: impl FnMut(&Config) -> anyhow::Result<String>,
) {
    let mut seen = mtime(&path);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(WATCH_INTERVAL);
        let now = mtime(&path);
        let hup = RELOAD.swap(false, Ordering::Relaxed);
        if now == seen && !hup {
            continue;
        }
        seen = now;
        let r = Config::load(&path)
            .and_then(|c| install(&c))
            .with_context(|| format!("reloading the rules of {}", path.display()));
        match r {
            Ok(what) => eprintln!("rules reloaded from {} ({what})", path.display()),
            Err(e) => eprintln!("dta: error: {e:#}; the running rules stay"),
        }
    }
}
