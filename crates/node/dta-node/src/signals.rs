//! Signals of a running service: SIGTERM and SIGINT stop it (every service then writes what it
//! holds and exits 0), SIGHUP asks for a reload of the configuration's rules
//! ([`crate::reload`]), and a stop after a duration. The one place a process installs them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

/// SIGHUPs received: each reload loop compares it with the count it last saw
/// ([`sighups`]), so one signal reloads every loop of the process (a translator serving
/// several collectors runs one per collector).
static SIGHUPS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_sighup(_: libc::c_int) {
    SIGHUPS.fetch_add(1, Ordering::Relaxed);
}

/// A stop flag that SIGTERM and SIGINT set (their handler restarts interrupted system calls).
/// SIGHUP sets it too unless [`reload_on_sighup`] is called afterwards. Once per process.
pub fn stop_on_signals() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed))
        .context("installing the SIGTERM/SIGINT handler")?;
    Ok(stop)
}

/// Make SIGHUP ask for a reload (instead of stopping, as the stop handler would).
pub fn reload_on_sighup() {
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(
            libc::SIGHUP,
            on_sighup as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

/// How many SIGHUPs arrived so far.
pub fn sighups() -> u64 {
    SIGHUPS.load(Ordering::Relaxed)
}

/// Set `stop` after `secs` seconds (none: never), from a thread of its own.
pub fn stop_after(stop: &Arc<AtomicBool>, secs: Option<f64>) -> anyhow::Result<()> {
    let Some(secs) = secs else {
        return Ok(());
    };
    let d = Duration::try_from_secs_f64(secs)
        .with_context(|| format!("--duration {secs}: not a duration in seconds"))?;
    let s = stop.clone();
    std::thread::Builder::new()
        .name("dta-duration".into())
        .spawn(move || {
            std::thread::sleep(d);
            s.store(true, Ordering::Relaxed);
        })?;
    Ok(())
}
