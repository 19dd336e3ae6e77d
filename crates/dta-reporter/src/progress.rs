//! An indicatif progress bar for [`crate::loadgen::run`] (feature `indicatif`).

use indicatif::{ProgressBar, ProgressStyle};

use crate::loadgen::Progress;

/// A bar sized to `target` reports (a spinner without one), hidden when `quiet`.
pub fn bar(target: Option<u64>, quiet: bool) -> ProgressBar {
    let bar = match (quiet, target) {
        (true, _) => ProgressBar::hidden(),
        (false, Some(n)) => ProgressBar::new(n),
        (false, None) => ProgressBar::new_spinner(),
    };
    let style = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} reports {per_sec} {msg}",
    )
    .expect("the template is valid");
    bar.set_style(style);
    bar
}

/// Move `bar` to a run's progress (pass `|p| update(&bar, p)` as the callback).
pub fn update(bar: &ProgressBar, p: Progress) {
    bar.set_position(p.reports);
    bar.set_message(format!("{} datagrams", p.datagrams));
}
