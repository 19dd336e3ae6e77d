//! Admission by priority against the write meter, and the rate limit of congestion notices
//! ([DTA-draft §3.2] "telemetry flow control & prioritization", [DTA-draft §4.2];
//! docs/flow-control.md).
//!
//! Per datagram, after its sequence check: low priority needs the bucket level at
//! `low_threshold`, medium at `medium_threshold`, high is admitted while the level is positive
//! and otherwise spilled ([`crate::spill`]). While the spill holds anything, strict priority:
//! new high datagrams queue behind it (order kept) and low and medium are dropped.

use dta_wire::Priority;

use crate::meter::Level;

/// What happens to one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Admit,
    /// High priority that cannot be written now: into the spill.
    Spill,
    /// Low or medium priority over the budget: dropped (counted, the reporter notified).
    Drop,
}

/// The admission table.
#[inline]
pub fn admission(priority: Priority, level: Level, spill_empty: bool) -> Admission {
    match priority {
        Priority::High if !spill_empty || !level.high_ok() => Admission::Spill,
        Priority::High => Admission::Admit,
        _ if !spill_empty => Admission::Drop,
        Priority::Medium if level.medium_ok() => Admission::Admit,
        Priority::Low if level.low_ok() => Admission::Admit,
        _ => Admission::Drop,
    }
}

/// Entries of the notice rate limiter (a power of two).
pub const NOTICE_SLOTS: usize = 1024;

/// At most one congestion notice per reporter source per interval: a fixed hashed array of the
/// last notice time per (source address, reporter id), allocated once. Two sources sharing a
/// slot evict each other's entry; the worst case is one extra notice, never a missed limit on
/// memory.
pub struct NoticeLimiter {
    /// (key, ns of the last notice + 1); 0: free.
    slots: Box<[(u64, u64)]>,
    interval_ns: u64,
}

impl NoticeLimiter {
    pub fn new(interval_ms: u64) -> Self {
        NoticeLimiter {
            slots: vec![(0, 0); NOTICE_SLOTS].into_boxed_slice(),
            interval_ns: interval_ms.saturating_mul(1_000_000),
        }
    }

    /// Whether a notice to `key` may go out at `now_ns` (nanoseconds on any fixed clock); if
    /// so, it is recorded as sent.
    pub fn allow(&mut self, key: u64, now_ns: u64) -> bool {
        let i = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize & (NOTICE_SLOTS - 1);
        let t = now_ns.saturating_add(1);
        let (slot_key, last) = self.slots[i];
        if last != 0 && slot_key == key && t < last.saturating_add(self.interval_ns) {
            return false;
        }
        self.slots[i] = (key, t);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(frac: f64) -> Level {
        Level {
            raw: (frac * 1000.0) as i64,
            low_at: 500,
            medium_at: 250,
        }
    }

    #[test]
    fn admission_table_per_level() {
        use Admission::*;
        use Priority::*;
        // level: (low, medium, high) with an empty spill, then with a non-empty one.
        for (l, empty, busy) in [
            (1.0, [Admit, Admit, Admit], [Drop, Drop, Spill]),
            (0.5, [Admit, Admit, Admit], [Drop, Drop, Spill]),
            (0.49, [Drop, Admit, Admit], [Drop, Drop, Spill]),
            (0.25, [Drop, Admit, Admit], [Drop, Drop, Spill]),
            (0.24, [Drop, Drop, Admit], [Drop, Drop, Spill]),
            (0.001, [Drop, Drop, Admit], [Drop, Drop, Spill]),
            (0.0, [Drop, Drop, Spill], [Drop, Drop, Spill]),
            (-3.0, [Drop, Drop, Spill], [Drop, Drop, Spill]),
        ] {
            for (i, p) in [Low, Medium, High].into_iter().enumerate() {
                assert_eq!(admission(p, level(l), true), empty[i], "{p:?} at {l}");
                assert_eq!(
                    admission(p, level(l), false),
                    busy[i],
                    "{p:?} at {l}, spill"
                );
            }
        }
    }

    #[test]
    fn notices_are_limited_per_source_per_interval() {
        let mut n = NoticeLimiter::new(50);
        let ms = |m: u64| m * 1_000_000;
        assert!(n.allow(7, ms(0)));
        assert!(!n.allow(7, ms(10)));
        assert!(!n.allow(7, ms(49)));
        assert!(n.allow(8, ms(10)), "another source has its own limit");
        assert!(n.allow(7, ms(50)));
        assert!(!n.allow(7, ms(60)));
        // Key 0 and u64::MAX are ordinary keys.
        assert!(n.allow(0, ms(0)));
        assert!(!n.allow(0, ms(1)));
        assert!(n.allow(u64::MAX, ms(0)));
        // Interval 0: no limit.
        let mut n = NoticeLimiter::new(0);
        assert!(n.allow(7, 0) && n.allow(7, 0));
    }
}
