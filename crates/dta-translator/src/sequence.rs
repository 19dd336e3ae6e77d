//! Per-reporter sequence tracking for retransmittable reports ([DTA-draft §3.2], NACK-based
//! retransmission).
//!
//! The receiver is go-back-N: a retransmittable datagram is applied only if it carries the next
//! expected sequence number of its reporter. A gap (a lost datagram) makes the translator drop
//! what follows and send one NACK naming the expected number; the reporter resends from there.
//! Datagrams already applied (older numbers, e.g. a retransmission overlap) are dropped as
//! duplicates. This gives exactly-once application of retransmittable reports without any
//! per-report state. The first datagram seen from a reporter sets its expectation.
//!
//! Resynchronisation: a reporter that restarts begins a new sequence, which the tracker would see
//! as endless duplicates or an unfillable gap. When a reporter has sent nothing applicable for
//! `resync_after` while still sending, the tracker adopts its current number and counts a resync.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What to do with a retransmittable datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// In order: apply it.
    Apply,
    /// Already applied: drop it.
    Duplicate,
    /// Ahead of a gap: drop it; if `nack` is `Some(expected)`, send a NACK for that number.
    Gap { nack: Option<u32> },
    /// The reporter restarted (or the gap could not be filled): adopted its number, apply it.
    Resync,
}

struct Peer {
    expected: u32,
    last_nack: Option<(u32, Instant)>,
    last_apply: Instant,
}

/// Tracks the next expected sequence number of each reporter.
pub struct SequenceTracker {
    peers: HashMap<u64, Peer>,
    /// Sequence number space: 2^32 for the native protocol, 2^8 for the prototype's long header.
    modulus: u64,
    /// Do not repeat a NACK for the same number more often than this.
    nack_interval: Duration,
    resync_after: Duration,
    max_peers: usize,
}

impl SequenceTracker {
    pub fn new(bits: u32, nack_interval: Duration, resync_after: Duration) -> Self {
        SequenceTracker {
            peers: HashMap::new(),
            modulus: 1u64 << bits,
            nack_interval,
            resync_after,
            max_peers: 1 << 16,
        }
    }

    /// Judge datagram `seq` from reporter `peer`.
    pub fn check(&mut self, peer: u64, seq: u32, now: Instant) -> Verdict {
        let modulus = self.modulus;
        if !self.peers.contains_key(&peer) && self.peers.len() >= self.max_peers {
            // Bounded state: forget everyone rather than grow without limit (a restart of the
            // tracker only costs one resynchronisation per reporter).
            self.peers.clear();
        }
        let p = self.peers.entry(peer).or_insert(Peer {
            expected: seq,
            last_nack: None,
            last_apply: now,
        });
        // Distance forward from the expected number, in the sequence space.
        let ahead = (seq as u64 + modulus - p.expected as u64) % modulus;
        if ahead == 0 {
            p.expected = ((seq as u64 + 1) % modulus) as u32;
            p.last_nack = None;
            p.last_apply = now;
            Verdict::Apply
        } else if now.duration_since(p.last_apply) >= self.resync_after {
            p.expected = ((seq as u64 + 1) % modulus) as u32;
            p.last_nack = None;
            p.last_apply = now;
            Verdict::Resync
        } else if ahead < modulus / 2 {
            let repeat = match p.last_nack {
                Some((n, at)) => n != p.expected || now.duration_since(at) >= self.nack_interval,
                None => true,
            };
            if repeat {
                p.last_nack = Some((p.expected, now));
                Verdict::Gap {
                    nack: Some(p.expected),
                }
            } else {
                Verdict::Gap { nack: None }
            }
        } else {
            Verdict::Duplicate
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_back_n() {
        let now = Instant::now();
        let mut t = SequenceTracker::new(32, Duration::from_millis(5), Duration::from_secs(60));
        assert_eq!(t.check(1, 100, now), Verdict::Apply);
        assert_eq!(t.check(1, 101, now), Verdict::Apply);
        // 102 lost
        assert_eq!(t.check(1, 103, now), Verdict::Gap { nack: Some(102) });
        assert_eq!(t.check(1, 104, now), Verdict::Gap { nack: None });
        // NACK repeated after the interval
        assert_eq!(
            t.check(1, 105, now + Duration::from_millis(6)),
            Verdict::Gap { nack: Some(102) }
        );
        // retransmission from 102
        assert_eq!(t.check(1, 102, now), Verdict::Apply);
        assert_eq!(t.check(1, 103, now), Verdict::Apply);
        assert_eq!(t.check(1, 101, now), Verdict::Duplicate);
        // other reporters are independent
        assert_eq!(t.check(2, 7, now), Verdict::Apply);
    }

    #[test]
    fn prototype_u8_sequence_wraps() {
        let now = Instant::now();
        let mut t = SequenceTracker::new(8, Duration::ZERO, Duration::from_secs(60));
        assert_eq!(t.check(9, 254, now), Verdict::Apply);
        assert_eq!(t.check(9, 255, now), Verdict::Apply);
        assert_eq!(t.check(9, 0, now), Verdict::Apply);
        assert_eq!(t.check(9, 2, now), Verdict::Gap { nack: Some(1) });
        assert_eq!(t.check(9, 255, now), Verdict::Duplicate);
    }

    #[test]
    fn a_restarted_reporter_is_resynchronised_after_the_timeout() {
        let now = Instant::now();
        let mut t = SequenceTracker::new(32, Duration::ZERO, Duration::from_millis(100));
        for s in 5000..5010 {
            assert_eq!(t.check(1, s, now), Verdict::Apply);
        }
        // Restart: sequence 0 looks like an old duplicate...
        assert_eq!(t.check(1, 0, now), Verdict::Duplicate);
        assert_eq!(
            t.check(1, 1, now + Duration::from_millis(50)),
            Verdict::Duplicate
        );
        // ...until nothing has applied for the resync interval.
        assert_eq!(
            t.check(1, 2, now + Duration::from_millis(101)),
            Verdict::Resync
        );
        assert_eq!(
            t.check(1, 3, now + Duration::from_millis(102)),
            Verdict::Apply
        );
        // An unfillable gap resolves the same way.
        assert_eq!(
            t.check(1, 10, now + Duration::from_millis(103)),
            Verdict::Gap { nack: Some(4) }
        );
        assert_eq!(
            t.check(1, 11, now + Duration::from_millis(300)),
            Verdict::Resync
        );
        assert_eq!(
            t.check(1, 12, now + Duration::from_millis(301)),
            Verdict::Apply
        );
    }
}
