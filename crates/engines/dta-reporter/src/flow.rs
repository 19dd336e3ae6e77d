//! The reporter's reaction to the translator, without sockets or clocks: which kept datagrams a
//! NACK asks for, and whether a congestion notice lets a datagram go. [`crate::Reporter`] uses
//! these with real time; the behaviour vectors (`spec/vectors/reporter.json`) drive them, and
//! the C and Python reporters, with scripted times.
//!
//! * **Selective resend** (docs/protocol.md "NACK (kind 1)"): a native NACK names `seq` and a
//!   bitmap of further missing numbers; the reporter resends each one it still keeps, `seq`
//!   first, then the bitmap's in increasing order. A named number not sent yet is ignored; one
//!   no longer kept is counted ([`crate::ReporterStats::unrecoverable_nacks`]). The prototype's
//!   2-byte NACK keeps go-back-N (resend from `seqnum` to the newest).
//! * **Congestion notices** (docs/protocol.md "Congestion notice (kind 2)", [DTA-draft §3.2]):
//!   [`Governor`] keeps one token bucket per limited priority (low, medium) for `hold_ms` from
//!   receipt. A bucket holds at most 10 ms of its rate and at least one datagram, starts full
//!   and refills continuously; it is kept in thousandths of a datagram so every language
//!   computes the same admissions from the same millisecond times. Rate 0 pauses,
//!   [`native::RATE_UNLIMITED`] does not limit, high priority is never limited, a newer notice
//!   replaces the older one, `hold_ms` 0 lifts the limits. A datagram refused is not sent and
//!   takes no sequence number (the translator sees no gap); the caller counts it.
//! * **Slowing down when NACKed** (docs/protocol.md "Slowing down when NACKed"): a NACK the
//!   reporter acts on (not a held-off repeat, not one naming only numbers not sent yet) says
//!   datagrams were lost, under load most likely, so the reporter yields to the recovery:
//!   [`Governor::on_nack`] pauses low priority and limits medium to half its recent rate for
//!   [`NACK_SLOWDOWN_MS`], unless limits are already in force (a congestion notice says more
//!   than a NACK; a slowdown is not extended by the NACKs of the same loss). The recent rate is
//!   the datagrams admitted in the current and the previous [`RATE_WINDOW_MS`] window, per
//!   second: medium's limit is `max(1, n · 25)` datagrams/s. High priority is never limited,
//!   retransmissions never.

use std::time::Duration;

use dta_wire::native::{self, NoticeRepr};
use dta_wire::Priority;

/// Priority of a reporter's datagrams when nothing else is said (every language's reporter
/// uses this; `spec/vectors/reporter.json` `defaults` repeats it for the C and Python tests).
pub const DEFAULT_PRIORITY: Priority = Priority::Medium;
/// Datagrams a retransmittable reporter keeps for resending (the translator's tracking window,
/// docs/protocol.md "Sequence numbers, loss and retransmission").
pub const DEFAULT_RETRANSMIT_BUFFER: usize = 256;
/// Times the newest datagram is resent at the end of a retransmittable run (tail probe).
pub const DEFAULT_TAIL_PROBES: u32 = 2;
/// Most tail probes accepted: the end of a run waits at most this many probe intervals.
pub const MAX_TAIL_PROBES: u32 = 64;
/// Spacing of the tail probes.
pub const DEFAULT_TAIL_PROBE_INTERVAL: Duration = Duration::from_millis(10);
/// A repeat of the NACK for the same number within this time is ignored.
pub const DEFAULT_NACK_HOLDOFF: Duration = Duration::from_millis(10);

/// How long an acted-on NACK slows the reporter down (see the module doc), ms.
pub const NACK_SLOWDOWN_MS: u64 = 20;
/// The window the reporter's recent sending rate is counted over, ms (two of them).
pub const RATE_WINDOW_MS: u64 = 10;

/// Token-bucket units per datagram (buckets count thousandths of a datagram).
const UNIT: u64 = 1000;
/// A bucket holds this many milliseconds of its rate (and at least one datagram).
const BURST_MS: u64 = 10;
/// Refill is computed over at most this long (a full bucket never needs more: 1 datagram at
/// 1/s), which bounds `rate * elapsed` well inside u64.
const MAX_REFILL_MS: u64 = 1000;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    rate: u32,
    tokens: u64,
    last_ms: u64,
}

impl Bucket {
    fn new(rate: u32, now_ms: u64) -> Bucket {
        let mut b = Bucket {
            rate,
            tokens: 0,
            last_ms: now_ms,
        };
        b.tokens = b.capacity();
        b
    }

    fn capacity(&self) -> u64 {
        (u64::from(self.rate) * BURST_MS).max(UNIT)
    }

    fn take(&mut self, now_ms: u64) -> bool {
        match self.rate {
            0 => return false,
            native::RATE_UNLIMITED => return true,
            _ => {}
        }
        let elapsed = now_ms.saturating_sub(self.last_ms).min(MAX_REFILL_MS);
        self.tokens = (self.tokens + u64::from(self.rate) * elapsed).min(self.capacity());
        self.last_ms = self.last_ms.max(now_ms);
        if self.tokens >= UNIT {
            self.tokens -= UNIT;
            true
        } else {
            false
        }
    }
}

/// The limits of the last congestion notice (see the module doc). Times are milliseconds on
/// any monotonic clock the caller keeps.
#[derive(Debug, Clone, Copy, Default)]
pub struct Governor {
    /// Limits hold while `now_ms < until_ms`; `None`: no limits.
    until_ms: Option<u64>,
    low: Bucket,
    medium: Bucket,
    /// The recent rate: datagrams admitted since `window_ms`, and in the window before.
    window_ms: u64,
    in_window: u64,
    last_window: u64,
}

impl Governor {
    /// No limits.
    pub fn new() -> Governor {
        Governor::default()
    }

    /// Obey `notice` (received at `now_ms`), replacing any earlier one.
    pub fn on_notice(&mut self, notice: &NoticeRepr, now_ms: u64) {
        if notice.hold_ms == 0 {
            self.until_ms = None;
            return;
        }
        self.until_ms = Some(now_ms + u64::from(notice.hold_ms));
        self.low = Bucket::new(notice.low_rate, now_ms);
        self.medium = Bucket::new(notice.medium_rate, now_ms);
    }

    /// Slow down after an acted-on NACK received at `now_ms` (see the module doc): low paused,
    /// medium at half the recent rate, for [`NACK_SLOWDOWN_MS`]. Returns whether it did
    /// (`false` while limits are in force).
    pub fn on_nack(&mut self, now_ms: u64) -> bool {
        if self.limited(now_ms) {
            return false;
        }
        self.roll(now_ms);
        let recent = self.in_window + self.last_window;
        // n datagrams in up to 20 ms: n · 50 per second; half of it.
        let half = (recent.saturating_mul(25)).clamp(1, u64::from(native::RATE_UNLIMITED - 1));
        self.until_ms = Some(now_ms + NACK_SLOWDOWN_MS);
        self.low = Bucket::new(0, now_ms);
        self.medium = Bucket::new(half as u32, now_ms);
        true
    }

    /// Start a new rate window at `now_ms` once the current one is over.
    fn roll(&mut self, now_ms: u64) {
        if now_ms >= self.window_ms + RATE_WINDOW_MS {
            self.last_window = if now_ms < self.window_ms + 2 * RATE_WINDOW_MS {
                self.in_window
            } else {
                0
            };
            self.in_window = 0;
            self.window_ms = now_ms;
        }
    }

    /// Whether limits are in force at `now_ms`.
    pub fn limited(&self, now_ms: u64) -> bool {
        self.until_ms.is_some_and(|u| now_ms < u)
    }

    /// May a datagram of `priority` be sent at `now_ms`? Takes its token if so. Never waits.
    pub fn admit(&mut self, priority: Priority, now_ms: u64) -> bool {
        self.roll(now_ms);
        let ok = if !self.limited(now_ms) {
            self.until_ms = None;
            true
        } else {
            match priority {
                Priority::High => true,
                Priority::Medium => self.medium.take(now_ms),
                Priority::Low => self.low.take(now_ms),
            }
        };
        self.in_window += u64::from(ok);
        ok
    }
}

/// Where a sequence number a NACK names stands in a ring of the `kept` newest datagrams before
/// `next_seq` (numbers wrap in a space of `modulus`, 2^32 native, 2^8 prototype).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// Kept: the `n`-th newest (1 = the newest).
    Kept(usize),
    /// Sent, but no longer kept.
    Gone,
    /// Not sent yet (the translator expects it next, or a number ahead): nothing to resend.
    Ahead,
}

/// Classify `seq` against the ring (see [`Named`]). `modulus` is a power of two up to 2^32.
pub fn named(seq: u32, next_seq: u32, kept: usize, modulus: u64) -> Named {
    let mask = (modulus - 1) as u32;
    let back = u64::from(next_seq.wrapping_sub(seq) & mask);
    if back == 0 || back > modulus / 2 {
        Named::Ahead
    } else if back as usize <= kept {
        Named::Kept(back as usize)
    } else {
        Named::Gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(hold_ms: u32, low_rate: u32, medium_rate: u32) -> NoticeRepr {
        NoticeRepr {
            reporter_id: 1,
            hold_ms,
            low_rate,
            medium_rate,
        }
    }

    #[test]
    fn pause_hold_and_lift() {
        let mut g = Governor::new();
        assert!(g.admit(Priority::Low, 0));
        g.on_notice(&notice(100, 0, native::RATE_UNLIMITED), 10);
        assert!(!g.admit(Priority::Low, 10));
        assert!(!g.admit(Priority::Low, 109));
        assert!(g.admit(Priority::Medium, 50));
        assert!(g.admit(Priority::High, 50));
        assert!(g.admit(Priority::Low, 110), "the hold ended");
        g.on_notice(&notice(100, 0, 0), 200);
        assert!(!g.admit(Priority::Medium, 201));
        g.on_notice(&notice(0, 0, 0), 202);
        assert!(g.admit(Priority::Medium, 202), "hold_ms 0 lifts");
    }

    #[test]
    fn rate_is_a_bucket_of_ten_milliseconds() {
        let mut g = Governor::new();
        // 1000/s: 10 at once, then one per millisecond.
        g.on_notice(&notice(1000, 1000, 0), 0);
        let burst = (0..20).filter(|_| g.admit(Priority::Low, 0)).count();
        assert_eq!(burst, 10);
        assert!(g.admit(Priority::Low, 1));
        assert!(!g.admit(Priority::Low, 1));
        let later = (0..20).filter(|_| g.admit(Priority::Low, 6)).count();
        assert_eq!(later, 5);
        // 1/s: one datagram, the next a second later.
        g.on_notice(&notice(5000, 1, 0), 0);
        assert!(g.admit(Priority::Low, 0));
        assert!(!g.admit(Priority::Low, 999));
        assert!(g.admit(Priority::Low, 1000));
        // The largest finite rate does not overflow.
        g.on_notice(&notice(u32::MAX, native::RATE_UNLIMITED - 1, 0), 0);
        assert!(g.admit(Priority::Low, u64::from(u32::MAX) - 1));
    }

    #[test]
    fn a_nack_pauses_low_and_halves_medium_unless_limited() {
        let mut g = Governor::new();
        // 2 datagrams a ms for 20 ms. At 20 a new window starts: the one before (10..19) held
        // 20, the new one none yet: 20 in 20 ms is 1000/s, half is 500/s.
        for t in 0..20 {
            assert!(g.admit(Priority::Medium, t));
            assert!(g.admit(Priority::Medium, t));
        }
        assert!(g.on_nack(20));
        assert!(!g.admit(Priority::Low, 20));
        assert!(g.admit(Priority::High, 20));
        // 500/s: a bucket of 5, then one per 2 ms.
        let burst = (0..30).filter(|_| g.admit(Priority::Medium, 20)).count();
        assert_eq!(burst, 5);
        assert!(!g.admit(Priority::Medium, 21));
        assert!(g.admit(Priority::Medium, 22));
        assert!(!g.admit(Priority::Medium, 22));
        // Not extended by a NACK while it holds; over after NACK_SLOWDOWN_MS.
        assert!(!g.on_nack(30));
        assert!(!g.admit(Priority::Low, 39));
        assert!(g.admit(Priority::Low, 40));
        // A notice in force is not replaced by a NACK.
        g.on_notice(&notice(100, 0, 5000), 50);
        assert!(!g.on_nack(51));
        // A reporter silent for long: medium at 1/s (at least one datagram).
        let mut q = Governor::new();
        assert!(q.on_nack(1000));
        assert!(q.admit(Priority::Medium, 1000));
        assert!(!q.admit(Priority::Medium, 1001));
    }

    #[test]
    fn named_numbers_wrap() {
        assert_eq!(named(9, 10, 4, 1 << 32), Named::Kept(1));
        assert_eq!(named(6, 10, 4, 1 << 32), Named::Kept(4));
        assert_eq!(named(5, 10, 4, 1 << 32), Named::Gone);
        assert_eq!(named(10, 10, 4, 1 << 32), Named::Ahead);
        assert_eq!(named(11, 10, 4, 1 << 32), Named::Ahead);
        assert_eq!(named(u32::MAX, 1, 4, 1 << 32), Named::Kept(2));
        assert_eq!(named(255, 2, 128, 256), Named::Kept(3));
        assert_eq!(
            named(0x1FF, 2, 128, 256),
            Named::Kept(3),
            "prototype: low byte"
        );
    }
}
