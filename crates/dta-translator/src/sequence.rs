//! Per-reporter sequence tracking for retransmittable reports (paper 000 §3.2, NACK-based
//! retransmission).
//!
//! The receiver is go-back-N: a retransmittable datagram is applied only if it carries the next
//! expected sequence number of its reporter. A gap (a lost datagram) makes the translator drop
//! what follows and send one NACK naming the expected number; the reporter resends from there.
//! Datagrams already applied (older numbers, e.g. a retransmission overlap) are dropped as
//! duplicates. This gives exactly-once application of retransmittable reports without any
//! per-report state. The first datagram seen from a reporter sets its expectation.

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
}

struct Peer {
    expected: u32,
    last_nack: Option<(u32, Instant)>,
}

/// Tracks the next expected sequence number of each reporter.
pub struct SequenceTracker {
    peers: HashMap<u64, Peer>,
    /// Sequence number space: 2^32 for the native protocol, 2^8 for the prototype's long header.
    modulus: u64,
    /// Do not repeat a NACK for the same number more often than this.
    nack_interval: Duration,
    max_peers: usize,
}

impl SequenceTracker {
    pub fn new(bits: u32, nack_interval: Duration) -> Self {
        SequenceTracker {
            peers: HashMap::new(),
            modulus: 1u64 << bits,
            nack_interval,
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
        });
        // Distance forward from the expected number, in the sequence space.
        let ahead = (seq as u64 + modulus - p.expected as u64) % modulus;
        if ahead == 0 {
            p.expected = ((seq as u64 + 1) % modulus) as u32;
            p.last_nack = None;
            Verdict::Apply
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
        let mut t = SequenceTracker::new(32, Duration::from_millis(5));
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
        let mut t = SequenceTracker::new(8, Duration::ZERO);
        assert_eq!(t.check(9, 254, now), Verdict::Apply);
        assert_eq!(t.check(9, 255, now), Verdict::Apply);
        assert_eq!(t.check(9, 0, now), Verdict::Apply);
        assert_eq!(t.check(9, 2, now), Verdict::Gap { nack: Some(1) });
        assert_eq!(t.check(9, 255, now), Verdict::Duplicate);
    }
}
