//! The sequence tracker at its design load, directly (no sockets): 65 536 retransmitting
//! reporters with 256 datagrams each in flight at once, 1 % of every transmission lost (first
//! sends, resends, NACKs, tail probes alike), the reporters resending exactly what the NACKs
//! name. Every datagram must end up applied exactly once, with no eviction and nothing given up.
//! Not timed: performance is the `tracker` section of the benchmark suite.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_translator::sequence::{Nack, Space, Tracker, Verdict, DEFAULT_ENTRIES};
use dta_translator::Stats;
use dta_wire::Priority;

const REPORTERS: usize = 65_536;
/// Datagrams in flight per reporter (after one first datagram that opens its space).
const IN_FLIGHT: usize = 256;
/// Loss per transmission, in 1/10 000.
const LOSS: u64 = 100;
/// Tail probes per reporter (the reporter resends its newest datagram on flush).
const TAIL_PROBES: usize = 3;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn lost(&mut self) -> bool {
        self.next() % 10_000 < LOSS
    }
}

struct Sim {
    tracker: Tracker,
    rng: Rng,
    spaces: Vec<Space>,
    starts: Vec<u32>,
    /// Times each datagram was applied: reporter r's datagram `starts[r] + k` at
    /// `r * (IN_FLIGHT + 1) + k`.
    applied: Vec<u8>,
    /// Resends the reporters owe (NACKs received), delivered at the next step.
    resends: Vec<(u32, u16)>,
    lost_sends: u64,
    duplicates: u64,
}

impl Sim {
    /// Reporter `r` transmits its datagram `k` (0 = the one that opened the space).
    fn send(&mut self, r: usize, k: usize, now: Instant) {
        if self.rng.lost() {
            self.lost_sends += 1;
            return;
        }
        let seq = self.starts[r].wrapping_add(k as u32);
        let verdict = self.tracker.check(&self.spaces[r], seq, true, now);
        match verdict {
            Verdict::Duplicate => self.duplicates += 1,
            Verdict::Apply | Verdict::Gap { .. } => {
                self.applied[r * (IN_FLIGHT + 1) + k] += 1;
            }
            Verdict::Resync => panic!("reporter {r} resynchronised"),
        }
        if let Verdict::Gap { nack: Some(n) } = verdict {
            self.nacked(r, n);
        }
    }

    /// A NACK for reporter `r` reached it (or not): it owes the datagrams it names.
    fn nacked(&mut self, r: usize, n: Nack) {
        if self.rng.lost() {
            return;
        }
        let start = self.starts[r];
        let mut owe = |seq: u32| {
            let k = seq.wrapping_sub(start) as usize;
            assert!((1..=IN_FLIGHT).contains(&k), "NACK of {seq}: never sent");
            self.resends.push((r as u32, k as u16));
        };
        owe(n.seq);
        for i in 0..64 {
            if n.missing >> i & 1 == 1 {
                owe(n.seq.wrapping_add(1 + i));
            }
        }
    }

    fn deliver_resends(&mut self, now: Instant) {
        let owed = std::mem::take(&mut self.resends);
        for &(r, k) in &owed {
            self.send(r as usize, k as usize, now);
        }
    }

    fn tick(&mut self, now: Instant) {
        let mut nacks = vec![];
        self.tracker
            .tick(now, usize::MAX, |s, n| nacks.push((s, n)));
        for (s, n) in nacks {
            self.nacked(s.reporter as usize, n);
        }
    }
}

#[test]
fn sixty_five_thousand_reporters_with_256_in_flight_recover_every_loss_exactly_once() {
    let stats = Arc::new(Stats::default());
    let tracker = Tracker::new(
        DEFAULT_ENTRIES,
        Duration::from_millis(5),
        Duration::from_millis(1000),
        stats.clone(),
    )
    .unwrap();
    println!(
        "tracker: {} entries, {} bytes ({:.1} MiB)",
        tracker.entries(),
        tracker.bytes(),
        tracker.bytes() as f64 / (1 << 20) as f64
    );
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // Reporter r: 10.0.0.0/16 address r, reporter id r, high priority; every 16th starts just
    // before the 32-bit wrap.
    let spaces: Vec<Space> = (0..REPORTERS)
        .map(|r| {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0A00_0000 | r as u32));
            Space::native(ip, r as u32, Priority::High)
        })
        .collect();
    let starts: Vec<u32> = (0..REPORTERS)
        .map(|r| {
            if r % 16 == 0 {
                u32::MAX - (rng.next() % IN_FLIGHT as u64) as u32
            } else {
                rng.next() as u32
            }
        })
        .collect();
    // Each reporter's in-flight datagrams arrive in order but for 2 % of neighbours swapped
    // (the network reorders a little; any reordering within the window is the property test's
    // in `sequence`).
    let mut order: Vec<u16> = Vec::with_capacity(REPORTERS * IN_FLIGHT);
    for _ in 0..REPORTERS {
        let base = order.len();
        order.extend(1..=IN_FLIGHT as u16);
        for i in 0..IN_FLIGHT - 1 {
            if rng.next() % 100 < 2 {
                order.swap(base + i, base + i + 1);
            }
        }
    }
    let mut sim = Sim {
        tracker,
        rng,
        spaces,
        starts,
        applied: vec![0; REPORTERS * (IN_FLIGHT + 1)],
        resends: vec![],
        lost_sends: 0,
        duplicates: 0,
    };
    let t0 = Instant::now();
    let mut ms = 0u64;
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    // The first datagram of each reporter opens its space (its loss would only move the start).
    for r in 0..REPORTERS {
        sim.tracker
            .check(&sim.spaces[r], sim.starts[r], true, at(0));
        sim.applied[r * (IN_FLIGHT + 1)] += 1;
    }
    // One round per millisecond: every reporter sends one datagram of its flight; then the
    // resends NACKed during the round, then the timer.
    for k in 0..IN_FLIGHT {
        ms += 1;
        for r in 0..REPORTERS {
            let d = order[r * IN_FLIGHT + k] as usize;
            sim.send(r, d, at(ms));
        }
        sim.deliver_resends(at(ms));
        sim.tick(at(ms));
    }
    // Flush: tail probes of each reporter's newest datagram, then resends and timer NACKs
    // until nothing is owed (well within the 1 s give-up).
    for _ in 0..TAIL_PROBES {
        ms += 1;
        for r in 0..REPORTERS {
            sim.send(r, IN_FLIGHT, at(ms));
        }
        sim.deliver_resends(at(ms));
        sim.tick(at(ms));
    }
    let mut quiet = 0;
    while quiet < 20 {
        ms += 1;
        assert!(ms < 900, "not recovered before the give-up");
        sim.deliver_resends(at(ms));
        sim.tick(at(ms));
        quiet = if sim.resends.is_empty() { quiet + 1 } else { 0 };
    }
    let never: Vec<usize> = (0..sim.applied.len())
        .filter(|&i| sim.applied[i] != 1)
        .collect();
    assert!(
        never.is_empty(),
        "{} datagrams not applied exactly once, e.g. reporter {} datagram {} applied {} times",
        never.len(),
        never[0] / (IN_FLIGHT + 1),
        never[0] % (IN_FLIGHT + 1),
        sim.applied[never[0]]
    );
    let l = |c: &std::sync::atomic::AtomicU64| c.load(Relaxed);
    assert_eq!(l(&stats.tracker_evictions), 0);
    assert_eq!(l(&stats.unrecovered), 0);
    assert_eq!(stats.lost.iter().map(l).sum::<u64>(), 0);
    assert_eq!(l(&stats.resyncs), 0);
    assert_eq!(l(&stats.duplicates), sim.duplicates);
    // 1 % of 16.8 M first sends were lost and all recovered.
    let sends = (REPORTERS * IN_FLIGHT) as u64;
    assert!(sim.lost_sends > sends / 200, "{}", sim.lost_sends);
    println!(
        "{} reporters x {} in flight: {} transmissions lost, {} duplicates dropped, all {} \
         datagrams applied exactly once in {} simulated ms",
        REPORTERS,
        IN_FLIGHT,
        sim.lost_sends,
        sim.duplicates,
        sim.applied.len(),
        ms
    );
}
