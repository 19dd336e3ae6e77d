//! Live reloads of a running translator's rules (docs/rules.md "Reloading"): on a change of the
//! configuration file or on SIGHUP. A reload is checked against the running configuration
//! before anything is installed ([`check`]): a file that parses to no stores (an empty or
//! half-written file), or that removes every running rule without saying so
//! (`rules = []` under `[translator]`), is refused and the running rules stay; a store whose
//! kind or size changed is reported as needing a restart.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::Context;

use crate::config::Config;

/// How often the configuration file's modification time is looked at.
const WATCH_INTERVAL: Duration = Duration::from_millis(200);

/// A file's modification time (none when it cannot be read).
pub fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// What a reload may install, and what it cannot change without a restart.
#[derive(Debug)]
pub struct Checked {
    pub config: Config,
    /// Settings that changed but take effect only at a restart.
    pub restart_needed: Vec<String>,
}

/// Check the text of a reloaded configuration (`new`, read from `path`) against the running
/// one. An error says why the reload is refused.
pub fn check(running: &Config, text: &str, path: &Path) -> anyhow::Result<Checked> {
    let mut config =
        Config::parse(text).with_context(|| format!("in configuration {}", path.display()))?;
    config.resolve_paths(crate::config::config_dir(path));
    if config.store.is_empty() && !running.store.is_empty() {
        anyhow::bail!(
            "{} parses to no [[store]] while {} stores are served (an empty or half-written \
             file?); refused: stop the service to serve no stores",
            path.display(),
            running.store.len()
        );
    }
    let explicit_rules = toml::from_str::<toml::Value>(text)
        .ok()
        .and_then(|v| v.get("translator")?.get("rules").cloned())
        .is_some();
    if config.translator.rules.is_empty() && !running.translator.rules.is_empty() && !explicit_rules
    {
        anyhow::bail!(
            "{} has no rules while {} run; refused: write `rules = []` under [translator] to \
             remove every rule",
            path.display(),
            running.translator.rules.len()
        );
    }
    let mut restart_needed = vec![];
    for old in &running.store {
        match config.store.iter().find(|s| s.name == old.name) {
            None => restart_needed.push(format!("store {:?} removed", old.name)),
            Some(new) => {
                if new.spec().ok() != old.spec().ok() {
                    restart_needed.push(format!("store {:?}: kind or size changed", old.name));
                } else if new.allow != old.allow {
                    restart_needed.push(format!("store {:?}: allow changed", old.name));
                }
            }
        }
    }
    for new in &config.store {
        if !running.store.iter().any(|s| s.name == new.name) {
            restart_needed.push(format!("store {:?} added", new.name));
        }
    }
    let (a, b) = (&running.translator, &config.translator);
    if a.allow != b.allow {
        restart_needed.push("[translator] allow changed".into());
    }
    if a.flow_control != b.flow_control {
        restart_needed.push("[translator.flow_control] changed".into());
    }
    Ok(Checked {
        config,
        restart_needed,
    })
}

/// Until `stop`: when configuration `path` changes or SIGHUP arrives, check it against the
/// running configuration ([`check`]) and hand it to `install` (which reloads what it runs and
/// describes the result). A configuration that does not load, that [`check`] refuses or that
/// `install` refuses is reported and the running rules stay.
pub fn reload_loop(
    path: PathBuf,
    loaded_mtime: Option<SystemTime>,
    running: Config,
    stop: &AtomicBool,
    mut install: impl FnMut(&Config) -> anyhow::Result<String>,
) {
    let mut running = running;
    // Compared with the file as it was when `running` was read (when known), so an edit made
    // before this thread started is a change too.
    let mut seen = loaded_mtime.or_else(|| mtime(&path));
    let mut hups = crate::signals::sighups();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(WATCH_INTERVAL);
        let now = mtime(&path);
        let h = crate::signals::sighups();
        if now == seen && h == hups {
            continue;
        }
        (seen, hups) = (now, h);
        let r = std::fs::read_to_string(&path)
            .with_context(|| format!("reading configuration {}", path.display()))
            .and_then(|text| check(&running, &text, &path))
            .and_then(|c| install(&c.config).map(|what| (c, what)))
            .with_context(|| format!("reloading the rules of {}", path.display()));
        match r {
            Ok((c, what)) => {
                eprintln!("rules reloaded from {} ({what})", path.display());
                for n in &c.restart_needed {
                    tracing::warn!("{}: {n}: takes effect at a restart", path.display());
                }
                running = c.config;
            }
            Err(e) => eprintln!(
                "dta: error: {}; the running rules stay",
                dta_log::say_once(e.chain().map(|c| c.to_string()))
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[[store]]\nname = 'kw'\nkind = 'key-write'\nslots = 1024\n\
        [[translator.rules]]\nname = 'd'\nprimitive = 'key-write'\naction = 'drop'\n";

    fn running() -> Config {
        Config::parse(BASE).unwrap()
    }

    #[test]
    fn an_empty_file_is_refused() {
        let e = check(&running(), "", Path::new("/etc/dta/dta.toml")).unwrap_err();
        assert!(format!("{e:#}").contains("no [[store]]"), "{e:#}");
    }

    #[test]
    fn removing_every_rule_needs_saying_so() {
        let no_rules = "[[store]]\nname = 'kw'\nkind = 'key-write'\nslots = 1024\n";
        let e = check(&running(), no_rules, Path::new("d.toml")).unwrap_err();
        assert!(format!("{e:#}").contains("rules = []"), "{e:#}");
        let explicit = format!("{no_rules}[translator]\nrules = []\n");
        let c = check(&running(), &explicit, Path::new("d.toml")).unwrap();
        assert!(c.config.translator.rules.is_empty());
        assert!(c.restart_needed.is_empty(), "{:?}", c.restart_needed);
    }

    #[test]
    fn a_store_resized_needs_a_restart() {
        let bigger = BASE.replace("slots = 1024", "slots = 2048");
        let c = check(&running(), &bigger, Path::new("d.toml")).unwrap();
        assert_eq!(
            c.restart_needed,
            vec!["store \"kw\": kind or size changed".to_string()]
        );
    }
}
