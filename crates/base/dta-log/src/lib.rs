//! Warnings that cannot flood the log. A condition that can repeat per datagram, per request or
//! per peer (a full spill file, an export target down, connection requests from outside the
//! allow-list) is logged at most once per interval by a [`Throttle`], and the line says how many
//! like it were held back since the last one, so the log keeps its signal and its size while the
//! counters (each a metric of its crate) keep the exact numbers.
//!
//! ```
//! use std::time::Duration;
//! static SPILL_FULL: dta_log::Throttle = dta_log::Throttle::new(Duration::from_secs(5));
//! for _ in 0..1000 {
//!     dta_log::warn_throttled!(SPILL_FULL, "spill file full: datagram dropped");
//! }
//! // One line was logged; the next one, at least 5 s later, says "(999 more since ...)".
//! ```
//!
//! Messages that echo their input (a configuration value, a parser's excerpt of the offending
//! line) stay bounded too: [`elide`] cuts every line beyond [`MAX_LINE`] characters in the
//! middle and says how much it left out.
//!
//! Hand-written (an atomic timestamp and a counter): the tracing ecosystem has no maintained
//! per-call-site rate limiter, and this one takes no lock on the data path.

#![deny(unsafe_code)]
#![warn(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How often a throttled warning is logged unless told otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// At most one log line per interval for one condition; usable from any thread (`&self`), in a
/// `static` at the call site.
#[derive(Debug)]
pub struct Throttle {
    interval_ms: u64,
    /// When the last line was logged, in ms since [`epoch`] plus one (0: never).
    last: AtomicU64,
    /// Occurrences not logged since the last line.
    held: AtomicU64,
}

/// The process's reference instant for all throttles.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl Throttle {
    /// A throttle logging at most once per `interval`.
    pub const fn new(interval: Duration) -> Throttle {
        Throttle {
            interval_ms: interval.as_millis() as u64,
            last: AtomicU64::new(0),
            held: AtomicU64::new(0),
        }
    }

    /// One occurrence: `Some(held)` when it is to be logged (with the count of occurrences held
    /// back since the last line), else `None` (it is counted).
    pub fn admit(&self) -> Option<u64> {
        self.admit_at(epoch().elapsed().as_millis() as u64 + 1)
    }

    fn admit_at(&self, now: u64) -> Option<u64> {
        let last = self.last.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < self.interval_ms.max(1) {
            self.held.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        // One thread wins the line; the others count themselves held back.
        if self
            .last
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            self.held.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(self.held.swap(0, Ordering::Relaxed))
    }

    /// The interval.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }
}

/// `tracing::warn!` through a [`Throttle`]: logged when admitted, with " (N more since the last
/// one)" appended when occurrences were held back.
#[macro_export]
macro_rules! warn_throttled {
    ($throttle:expr, $($arg:tt)+) => {
        if let Some(held) = $throttle.admit() {
            if held == 0 {
                $crate::__tracing::warn!($($arg)+);
            } else {
                $crate::__tracing::warn!(
                    "{} ({held} more like it since the last one, logged at most every {:?})",
                    format_args!($($arg)+),
                    $throttle.interval()
                );
            }
        }
    };
}

#[doc(hidden)]
pub use tracing as __tracing;

/// Longest line of a message [`elide`] leaves whole, in characters.
pub const MAX_LINE: usize = 400;

/// An error's chain of messages (outermost first) as one line that says each thing once: a
/// cause whose message the text so far already holds is skipped (a wrapper that prints its
/// source, then the source itself), and a cause that begins with what the text so far ends
/// with (a path named by the context and again by the error) is joined over that overlap.
/// For `anyhow::Error`: `say_once(e.chain().map(|c| c.to_string()))`.
pub fn say_once(layers: impl IntoIterator<Item = String>) -> String {
    let mut out = String::new();
    for layer in layers {
        let layer = layer.trim();
        if layer.is_empty() || out.contains(layer) {
            continue;
        }
        if out.is_empty() {
            out.push_str(layer);
            continue;
        }
        // The longest end of `out` that `layer` begins with, at least 2 characters and
        // starting at a word boundary of `out`.
        let overlap = (2..=out.len().min(layer.len()))
            .rev()
            .filter(|&n| out.is_char_boundary(out.len() - n) && layer.is_char_boundary(n))
            .find(|&n| {
                let at = out.len() - n;
                out[at..] == layer[..n] && (at == 0 || out[..at].ends_with(' '))
            });
        match overlap {
            Some(n) => out.push_str(&layer[n..]),
            None => {
                out.push_str(": ");
                out.push_str(layer);
            }
        }
    }
    out
}

/// `msg` with every line longer than [`MAX_LINE`] characters cut in the middle: its first 240
/// and last 80 characters kept, "… [N characters elided] …" between.
pub fn elide(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len().min(64 << 10));
    for (i, line) in msg.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let n = line.chars().count();
        if n <= MAX_LINE {
            out.push_str(line);
            continue;
        }
        let (head, tail) = (240, 80);
        let start_tail = line
            .char_indices()
            .nth(n - tail)
            .map_or(line.len(), |(b, _)| b);
        let end_head = line.char_indices().nth(head).map_or(0, |(b, _)| b);
        out.push_str(&line[..end_head]);
        out.push_str(&format!(" … [{} characters elided] … ", n - head - tail));
        out.push_str(&line[start_tail..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_a_thing_once() {
        let os = "No such file or directory (os error 2)".to_string();
        assert_eq!(
            say_once([
                "opening region /x.region".into(),
                format!("/x.region: {os}"),
                os.clone()
            ]),
            format!("opening region /x.region: {os}")
        );
        assert_eq!(
            say_once(["replaying /p.pcap".into(), os.clone(), os.clone()]),
            format!("replaying /p.pcap: {os}")
        );
        // Distinct layers are all kept; a word merely ending alike is not merged.
        assert_eq!(say_once(["a b".into(), "bc".into()]), "a b: bc");
        assert_eq!(
            say_once(["reading x".into(), "bad".into()]),
            "reading x: bad"
        );
    }

    #[test]
    fn long_lines_are_cut_in_the_middle_and_short_ones_kept() {
        let long = format!("name = \"{}\"", "é".repeat(200_000));
        let msg = format!("in configuration dta.toml\n{long}\nunknown field");
        let e = elide(&msg);
        assert!(e.len() < 2000, "{}", e.len());
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines[0], "in configuration dta.toml");
        assert!(
            lines[1].starts_with("name = \"éé") && lines[1].ends_with("éé\""),
            "{}",
            lines[1]
        );
        assert!(
            lines[1].contains("[199689 characters elided]"),
            "{}",
            lines[1]
        );
        assert_eq!(lines[2], "unknown field");
        assert_eq!(elide("short"), "short");
    }

    #[test]
    fn one_line_per_interval_with_the_count_held_back() {
        let t = Throttle::new(Duration::from_millis(100));
        assert_eq!(t.admit_at(1), Some(0));
        for now in 2..100 {
            assert_eq!(t.admit_at(now), None);
        }
        assert_eq!(t.admit_at(101), Some(98));
        assert_eq!(t.admit_at(150), None);
        assert_eq!(t.admit_at(5000), Some(1));
    }

    #[test]
    fn threads_share_one_throttle() {
        let t = Throttle::new(Duration::from_secs(3600));
        let logged: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..10_000).filter(|_| t.admit().is_some()).count() as u64))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(logged, 1);
        assert_eq!(t.held.load(Ordering::Relaxed), 39_999);
    }
}
