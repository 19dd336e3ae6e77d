//! The impairment of `dta-impair`: seeded per-datagram decisions (loss, duplication, reordering)
//! and a fixed delay, counted by the datagram's priority.
//!
//! [`Decider`] draws one uniform number per datagram from a seeded `StdRng` and maps it onto
//! mutually exclusive outcomes: `u < loss` drops, then `duplicate` sends two copies, then
//! `reorder` holds the datagram back until `reorder_by` later datagrams have been sent (or
//! `hold_max` passed, so the last datagrams of a run are not held forever), else it is
//! forwarded. The same seed and the same sequence of datagrams give the same decisions.
//!
//! [`Pipeline`] applies the decisions to datagrams: held and delayed datagrams wait in bounded
//! queues of recycled buffers (nothing is allocated once the pool is warm), and every datagram is
//! counted by its [`Class`], read from the native header with `dta_wire` (the prototype carries
//! no priority: medium, as the translator treats it; anything unparseable: `other`).
//!
//! For comparing drops with what a translator counts as lost, [`Pipeline`] also tracks each
//! native sequence space (reporter id and priority, as the translator does for one source)
//! and counts the drops that no later datagram of the space followed (`dropped_tail`): a
//! receiver cannot see those gaps.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use dta_wire::native::{self, Kind, Packet};
use dta_wire::{Priority, Protocol};

/// What to do to the datagrams.
#[derive(Debug, Clone, PartialEq)]
pub struct Impairment {
    /// Probability of dropping a datagram, 0..=1.
    pub loss: f64,
    /// Probability of sending a datagram twice.
    pub duplicate: f64,
    /// Probability of holding a datagram back.
    pub reorder: f64,
    /// A held datagram is sent after this many later datagrams (at least 1).
    pub reorder_by: u32,
    /// ... or after this long, whichever comes first.
    pub hold_max: Duration,
    /// Every datagram sent is delayed by this much (order kept).
    pub delay: Duration,
    /// Seed of the decisions.
    pub seed: u64,
}

impl Default for Impairment {
    fn default() -> Self {
        Impairment {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_by: 3,
            hold_max: Duration::from_millis(20),
            delay: Duration::ZERO,
            seed: 1,
        }
    }
}

impl Impairment {
    /// Checks the probabilities (each in 0..=1, their sum at most 1) and `reorder_by`.
    pub fn validate(&self) -> Result<(), String> {
        for (name, p) in [
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("reorder", self.reorder),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("{name} probability {p} must be in 0..=1"));
            }
        }
        let sum = self.loss + self.duplicate + self.reorder;
        if sum > 1.0 {
            return Err(format!(
                "loss + duplicate + reorder = {sum} must be at most 1 (they exclude each other)"
            ));
        }
        if self.reorder > 0.0 && self.reorder_by == 0 {
            return Err("reorder_by must be at least 1".into());
        }
        Ok(())
    }
}

/// The outcome for one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Not sent.
    Drop,
    /// Sent once.
    Forward,
    /// Sent twice, back to back.
    Duplicate,
    /// Sent after later datagrams.
    HoldBack,
}

/// Seeded decisions; see the module doc.
#[derive(Debug)]
pub struct Decider {
    rng: StdRng,
    loss: f64,
    duplicate: f64,
    reorder: f64,
}

impl Decider {
    /// Decisions for `imp` (validated by the caller).
    pub fn new(imp: &Impairment) -> Decider {
        Decider {
            rng: StdRng::seed_from_u64(imp.seed),
            loss: imp.loss,
            duplicate: imp.duplicate,
            reorder: imp.reorder,
        }
    }

    /// The next datagram's fate.
    pub fn decide(&mut self) -> Action {
        let u: f64 = self.rng.gen();
        if u < self.loss {
            Action::Drop
        } else if u < self.loss + self.duplicate {
            Action::Duplicate
        } else if u < self.loss + self.duplicate + self.reorder {
            Action::HoldBack
        } else {
            Action::Forward
        }
    }
}

/// What a datagram is counted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A native datagram (reports, or anything else the native header names) of this priority;
    /// prototype datagrams are medium.
    Priority(Priority),
    /// Not a DTA datagram the header can be read from.
    Other,
}

impl Class {
    /// Number of classes.
    pub const COUNT: usize = 4;
    /// The classes in counter order.
    pub const ALL: [Class; 4] = [
        Class::Priority(Priority::Low),
        Class::Priority(Priority::Medium),
        Class::Priority(Priority::High),
        Class::Other,
    ];

    /// Index into the per-class counters.
    pub fn index(self) -> usize {
        match self {
            Class::Priority(p) => p as usize,
            Class::Other => 3,
        }
    }

    /// "low", "medium", "high" or "other".
    pub fn name(self) -> &'static str {
        match self {
            Class::Priority(p) => p.name(),
            Class::Other => "other",
        }
    }
}

/// The class of a datagram, and for a native report datagram its sequence space (reporter id,
/// priority) and number.
pub fn classify(buf: &[u8]) -> (Class, Option<(u32, Priority, u32)>) {
    match dta_wire::protocol_of(buf) {
        Ok(Protocol::Prototype) => (Class::Priority(Priority::Medium), None),
        Ok(Protocol::Native) => {
            let Ok(p) = Packet::new_checked(buf) else {
                return (Class::Other, None);
            };
            match native::HeaderRepr::parse(&p) {
                Ok(h) if h.kind == Kind::Reports => (
                    Class::Priority(h.priority),
                    Some((h.reporter_id, h.priority, h.seq)),
                ),
                Ok(h) => (Class::Priority(h.priority), None),
                Err(_) => (Class::Other, None),
            }
        }
        Err(_) => (Class::Other, None),
    }
}

/// Counters of one direction, per [`Class`] (serialized as maps keyed by class name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Datagrams received.
    pub received: [u64; Class::COUNT],
    /// Datagrams sent (a duplicated datagram counts twice).
    pub sent: [u64; Class::COUNT],
    /// Datagrams dropped by the loss draw.
    pub dropped: [u64; Class::COUNT],
    /// Native report datagrams dropped (each number once, however often resent) that no later
    /// datagram of their sequence space followed (a receiver cannot tell they were sent).
    pub dropped_tail: [u64; Class::COUNT],
    /// Dropped native report datagrams sent before any datagram of their sequence space got
    /// through (a receiver that starts a space at the first number it sees cannot tell).
    pub dropped_head: [u64; Class::COUNT],
    /// Datagrams sent twice.
    pub duplicated: [u64; Class::COUNT],
    /// Datagrams held back (reordered).
    pub reordered: [u64; Class::COUNT],
    /// Datagrams dropped because a queue (held or delayed) was full.
    pub overflow: [u64; Class::COUNT],
}

impl Counts {
    fn map(a: &[u64; Class::COUNT]) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for c in Class::ALL {
            m.insert(c.name().into(), a[c.index()].into());
        }
        serde_json::Value::Object(m)
    }

    /// Every counter as `{"received": {"low": n, ...}, ...}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "received": Counts::map(&self.received),
            "sent": Counts::map(&self.sent),
            "dropped": Counts::map(&self.dropped),
            "dropped_tail": Counts::map(&self.dropped_tail),
            "dropped_head": Counts::map(&self.dropped_head),
            "duplicated": Counts::map(&self.duplicated),
            "reordered": Counts::map(&self.reordered),
            "overflow": Counts::map(&self.overflow),
        })
    }
}

impl Serialize for Counts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

/// Most datagrams held back at once; a datagram to hold beyond it is sent instead (not
/// counted as reordered).
pub const MAX_HELD: usize = 4096;
/// Most datagrams waiting out the delay; beyond it a datagram is dropped, counted `overflow`.
pub const MAX_DELAYED: usize = 1 << 18;
/// Most sequence spaces tracked for `dropped_tail`; drops in further spaces count as
/// `dropped_untracked` (the tail figure is then a lower bound).
pub const MAX_SPACES: usize = 1 << 20;
/// Most drops remembered per space above its highest forwarded number.
pub const MAX_TAIL_PER_SPACE: usize = 1024;
/// Largest datagram handled (the largest UDP payload).
pub const MAX_DATAGRAM: usize = 65507;

/// Per sequence space: the highest number sent (by serial arithmetic), the drops above it and
/// the drops before anything was sent.
#[derive(Debug, Default)]
struct Space {
    hi: Option<u32>,
    above: Vec<u32>,
    head: u32,
}

/// `a` after `b` in 32-bit serial arithmetic.
fn after(a: u32, b: u32) -> bool {
    a != b && a.wrapping_sub(b) < 1 << 31
}

#[derive(Debug)]
struct Held {
    buf: Vec<u8>,
    class: Class,
    /// Later datagrams still to be sent before this one.
    left: u32,
    since: Instant,
}

/// Decisions applied to a stream of datagrams; see the module doc.
#[derive(Debug)]
pub struct Pipeline {
    imp: Impairment,
    decider: Decider,
    counts: Counts,
    held: VecDeque<Held>,
    delayed: VecDeque<(Instant, Class, Vec<u8>)>,
    free: Vec<Vec<u8>>,
    spaces: HashMap<(u32, u8), Space>,
    /// Drops in spaces beyond [`MAX_SPACES`] or beyond [`MAX_TAIL_PER_SPACE`].
    untracked: u64,
}

impl Pipeline {
    /// A pipeline for `imp`.
    pub fn new(imp: Impairment) -> Result<Pipeline, String> {
        imp.validate()?;
        Ok(Pipeline {
            decider: Decider::new(&imp),
            imp,
            counts: Counts::default(),
            held: VecDeque::new(),
            delayed: VecDeque::new(),
            free: Vec::new(),
            spaces: HashMap::new(),
            untracked: 0,
        })
    }

    /// The counters so far (with `dropped_tail` as of now).
    pub fn counts(&self) -> Counts {
        let mut c = self.counts.clone();
        for (&(_, p), s) in &self.spaces {
            c.dropped_tail[p as usize] += s.above.len() as u64;
            c.dropped_head[p as usize] += s.head as u64;
        }
        c
    }

    /// Drops that could not be tracked for `dropped_tail`.
    pub fn untracked(&self) -> u64 {
        self.untracked
    }

    /// Datagrams waiting (held or delayed).
    pub fn waiting(&self) -> usize {
        self.held.len() + self.delayed.len()
    }

    /// Takes one datagram at `now`; whatever is due goes to `out`.
    pub fn push(&mut self, buf: &[u8], now: Instant, out: &mut dyn FnMut(&[u8])) {
        let (class, space) = classify(buf);
        let ci = class.index();
        self.counts.received[ci] += 1;
        let action = self.decider.decide();
        if action == Action::Drop {
            self.counts.dropped[ci] += 1;
            if let Some((id, p, seq)) = space {
                self.note_drop(id, p, seq);
            }
            return;
        }
        if let Some((id, p, seq)) = space {
            self.note_sent(id, p, seq);
        }
        match action {
            Action::HoldBack if self.held.len() < MAX_HELD => {
                self.counts.reordered[ci] += 1;
                let mut b = self.free.pop().unwrap_or_default();
                b.clear();
                b.extend_from_slice(buf);
                self.held.push_back(Held {
                    buf: b,
                    class,
                    left: self.imp.reorder_by.max(1),
                    since: now,
                });
            }
            Action::Duplicate => {
                self.counts.duplicated[ci] += 1;
                self.emit(buf, class, now, out);
                self.emit(buf, class, now, out);
                self.count_down(now, out);
            }
            _ => {
                self.emit(buf, class, now, out);
                self.count_down(now, out);
            }
        }
        self.poll(now, out);
    }

    /// Sends what is due at `now`: held datagrams older than `hold_max`, delayed ones whose
    /// time came.
    pub fn poll(&mut self, now: Instant, out: &mut dyn FnMut(&[u8])) {
        while self
            .held
            .front()
            .is_some_and(|h| now.duration_since(h.since) >= self.imp.hold_max)
        {
            let h = self.held.pop_front().expect("checked");
            self.emit(&h.buf, h.class, now, out);
            self.free.push(h.buf);
        }
        while self.delayed.front().is_some_and(|(t, _, _)| *t <= now) {
            let (_, class, b) = self.delayed.pop_front().expect("checked");
            self.counts.sent[class.index()] += 1;
            out(&b);
            self.free.push(b);
        }
    }

    /// When [`Pipeline::poll`] next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let h = self.held.front().map(|h| h.since + self.imp.hold_max);
        let d = self.delayed.front().map(|(t, _, _)| *t);
        match (h, d) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sends everything waiting, now (the end of a run).
    pub fn drain(&mut self, out: &mut dyn FnMut(&[u8])) {
        while let Some(h) = self.held.pop_front() {
            self.counts.sent[h.class.index()] += 1;
            out(&h.buf);
        }
        while let Some((_, class, b)) = self.delayed.pop_front() {
            self.counts.sent[class.index()] += 1;
            out(&b);
        }
    }

    /// One datagram sent: the held ones count it.
    fn count_down(&mut self, now: Instant, out: &mut dyn FnMut(&[u8])) {
        for h in self.held.iter_mut() {
            h.left = h.left.saturating_sub(1);
        }
        // Release in hold order every datagram whose count reached zero.
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].left == 0 {
                let h = self.held.remove(i).expect("in range");
                self.emit(&h.buf, h.class, now, out);
                self.free.push(h.buf);
            } else {
                i += 1;
            }
        }
    }

    /// Sends `buf` now, or queues it for the delay.
    fn emit(&mut self, buf: &[u8], class: Class, now: Instant, out: &mut dyn FnMut(&[u8])) {
        if self.imp.delay.is_zero() {
            self.counts.sent[class.index()] += 1;
            out(buf);
            return;
        }
        if self.delayed.len() >= MAX_DELAYED {
            self.counts.overflow[class.index()] += 1;
            return;
        }
        let mut b = self.free.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(buf);
        self.delayed.push_back((now + self.imp.delay, class, b));
    }

    fn space(&mut self, id: u32, p: Priority) -> Option<&mut Space> {
        let full = self.spaces.len() >= MAX_SPACES;
        match self.spaces.entry((id, p as u8)) {
            std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
            std::collections::hash_map::Entry::Vacant(_) if full => None,
            std::collections::hash_map::Entry::Vacant(e) => Some(e.insert(Space::default())),
        }
    }

    fn note_drop(&mut self, id: u32, p: Priority, seq: u32) {
        if let Some(s) = self.space(id, p) {
            if s.hi.is_none() {
                s.head += 1;
            }
        }
        match self.space(id, p) {
            // A number dropped again (a resend of a dropped datagram) is one datagram lost.
            Some(s) if s.above.contains(&seq) => {}
            Some(s) if s.hi.is_none_or(|hi| after(seq, hi)) => {
                if s.above.len() < MAX_TAIL_PER_SPACE {
                    s.above.push(seq);
                } else {
                    self.untracked += 1;
                }
            }
            Some(_) => {}
            None => self.untracked += 1,
        }
    }

    fn note_sent(&mut self, id: u32, p: Priority, seq: u32) {
        if let Some(s) = self.space(id, p) {
            if s.hi.is_none_or(|hi| after(seq, hi)) {
                s.hi = Some(seq);
                s.above.retain(|&d| after(d, seq));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dta_wire::native::DatagramBuilder;
    use dta_wire::Report;

    fn datagram(priority: Priority, id: u32, seq: u32) -> Vec<u8> {
        let mut buf = [0u8; 64];
        let mut b = DatagramBuilder::new(&mut buf, priority, false, id, seq).unwrap();
        b.push(&Report::KeyIncrement {
            key: &[1, 2, 3, 4],
            counter: 1,
            redundancy: 2,
            immediate: false,
        })
        .unwrap();
        let n = b.finish();
        buf[..n].to_vec()
    }

    fn seq_of(b: &[u8]) -> u32 {
        Packet::new_checked(b).unwrap().seq()
    }

    #[test]
    fn decisions_are_seeded_and_exclusive() {
        let imp = Impairment {
            loss: 0.05,
            duplicate: 0.02,
            reorder: 0.03,
            seed: 7,
            ..Impairment::default()
        };
        let run = || {
            let mut d = Decider::new(&imp);
            let mut n = [0u32; 4];
            for _ in 0..100_000 {
                n[d.decide() as usize] += 1;
            }
            n
        };
        let n = run();
        // The same seed gives exactly the same decisions.
        assert_eq!(n, run());
        assert_eq!(n.iter().sum::<u32>(), 100_000);
        // Exact counts for this seed (regenerate if the RNG changes), and each share within 3
        // standard deviations of its probability.
        assert_eq!(
            n,
            [4902, 90181, 1967, 2950],
            "drop, forward, duplicate, hold"
        );
        for (got, p) in [(n[0], 0.05f64), (n[2], 0.02), (n[3], 0.03)] {
            let sd = (100_000.0 * p * (1.0 - p)).sqrt();
            assert!(
                (got as f64 - 100_000.0 * p).abs() < 3.0 * sd,
                "{got} vs {p}"
            );
        }
        let mut other = Decider::new(&Impairment { seed: 8, ..imp });
        let mut d = Decider::new(&imp);
        assert!((0..1000).any(|_| d.decide() != other.decide()));
    }

    #[test]
    fn validation_refuses_impossible_settings() {
        let bad = |imp: Impairment| Pipeline::new(imp).unwrap_err();
        assert!(bad(Impairment {
            loss: 1.5,
            ..Default::default()
        })
        .contains("loss"));
        assert!(bad(Impairment {
            loss: 0.6,
            duplicate: 0.6,
            ..Default::default()
        })
        .contains("at most 1"));
        assert!(bad(Impairment {
            reorder: 0.1,
            reorder_by: 0,
            ..Default::default()
        })
        .contains("reorder_by"));
    }

    #[test]
    fn classify_reads_the_native_header() {
        let d = datagram(Priority::High, 9, 77);
        assert_eq!(
            classify(&d),
            (
                Class::Priority(Priority::High),
                Some((9, Priority::High, 77))
            )
        );
        // A native NACK: its priority, no sequence space.
        let mut nack = [0u8; native::HEADER_LEN];
        native::HeaderRepr {
            kind: Kind::Nack,
            priority: Priority::Low,
            retransmittable: false,
            count: 0,
            reporter_id: 9,
            seq: 3,
        }
        .emit(&mut Packet::new_unchecked(&mut nack[..]));
        assert_eq!(classify(&nack).1, None);
        // Prototype: medium; garbage: other.
        assert_eq!(
            classify(&[0x01, 0, 0, 0]).0,
            Class::Priority(Priority::Medium)
        );
        assert_eq!(classify(&[0xff; 20]), (Class::Other, None));
        assert_eq!(classify(&[]), (Class::Other, None));
        assert_eq!(classify(&[0x10, 0, 0]), (Class::Other, None));
    }

    /// Every datagram received is dropped, sent once, sent twice or held and then sent; the
    /// counters add up exactly, per priority, and match what came out.
    #[test]
    fn counts_add_up_by_priority() {
        let imp = Impairment {
            loss: 0.05,
            duplicate: 0.02,
            reorder: 0.04,
            reorder_by: 5,
            seed: 3,
            ..Impairment::default()
        };
        let mut p = Pipeline::new(imp).unwrap();
        let t = Instant::now();
        let mut out: Vec<Vec<u8>> = vec![];
        let mut sink = |b: &[u8]| out.push(b.to_vec());
        for seq in 0..10_000u32 {
            let prio = [Priority::Low, Priority::High][(seq % 2) as usize];
            p.push(&datagram(prio, 1, seq / 2), t, &mut sink);
        }
        p.drain(&mut sink);
        let c = p.counts();
        for prio in [Priority::Low, Priority::High] {
            let i = prio as usize;
            assert_eq!(c.received[i], 5000);
            assert_eq!(c.sent[i], c.received[i] - c.dropped[i] + c.duplicated[i]);
            assert!(c.dropped[i] > 150 && c.duplicated[i] > 50 && c.reordered[i] > 100);
        }
        assert_eq!(out.len() as u64, c.sent.iter().sum::<u64>());
        // Exact for this seed.
        assert_eq!(
            (c.dropped[0], c.dropped[2], c.duplicated[0], c.reordered[2]),
            (259, 269, 91, 197)
        );
    }

    /// A held datagram comes out after exactly `reorder_by` later ones, or after `hold_max`.
    #[test]
    fn hold_back_moves_a_datagram_by_k_positions_or_until_hold_max() {
        let imp = Impairment {
            reorder: 1.0,
            reorder_by: 3,
            hold_max: Duration::from_millis(10),
            ..Impairment::default()
        };
        let mut p = Pipeline::new(imp).unwrap();
        let t = Instant::now();
        let mut out = vec![];
        p.push(&datagram(Priority::Low, 1, 0), t, &mut |b| {
            out.push(seq_of(b))
        });
        assert!(out.is_empty());
        assert_eq!(p.next_deadline(), Some(t + Duration::from_millis(10)));
        p.poll(t + Duration::from_millis(9), &mut |b| out.push(seq_of(b)));
        assert!(out.is_empty());
        p.poll(t + Duration::from_millis(10), &mut |b| out.push(seq_of(b)));
        assert_eq!(out, [0]);

        // Positions: with only 1 in 2 held (forward everything else) the held one moves by 3.
        let imp = Impairment {
            reorder: 0.0,
            ..Impairment::default()
        };
        let mut p = Pipeline::new(imp).unwrap();
        p.held.push_back(Held {
            buf: datagram(Priority::Low, 1, 100),
            class: Class::Priority(Priority::Low),
            left: 3,
            since: t,
        });
        let mut out = vec![];
        for s in 101..106 {
            p.push(&datagram(Priority::Low, 1, s), t, &mut |b| {
                out.push(seq_of(b))
            });
        }
        assert_eq!(out, [101, 102, 103, 100, 104, 105]);
    }

    #[test]
    fn delay_keeps_order_and_releases_on_time() {
        let imp = Impairment {
            delay: Duration::from_millis(5),
            ..Impairment::default()
        };
        let mut p = Pipeline::new(imp).unwrap();
        let t = Instant::now();
        let mut out = vec![];
        for s in 0..3 {
            p.push(
                &datagram(Priority::Medium, 2, s),
                t + Duration::from_millis(s as u64),
                &mut |b| out.push(seq_of(b)),
            );
        }
        assert!(out.is_empty());
        assert_eq!(p.next_deadline(), Some(t + Duration::from_millis(5)));
        p.poll(t + Duration::from_millis(6), &mut |b| out.push(seq_of(b)));
        assert_eq!(out, [0, 1]);
        p.poll(t + Duration::from_millis(7), &mut |b| out.push(seq_of(b)));
        assert_eq!(out, [0, 1, 2]);
        assert_eq!(p.counts().sent[Priority::Medium as usize], 3);
        assert_eq!(p.waiting(), 0);
    }

    /// Drops followed by a later datagram of their space are visible gaps; the others are the
    /// tail. Spaces are per reporter id and priority.
    #[test]
    fn dropped_tail_counts_only_drops_after_the_last_datagram_sent() {
        let mut p = Pipeline::new(Impairment::default()).unwrap();
        let t = Instant::now();
        let mut sink = |_: &[u8]| {};
        for s in [0, 1, 3] {
            p.push(&datagram(Priority::Low, 1, s), t, &mut sink);
        }
        // Reporter 1, low: 2 dropped before 3 was sent (a gap), 4 and 5 dropped after.
        p.note_drop(1, Priority::Low, 2);
        p.note_drop(1, Priority::Low, 4);
        p.note_drop(1, Priority::Low, 5);
        // Reporter 2, high: 0 dropped, nothing sent: tail, and head.
        p.note_drop(2, Priority::High, 0);
        let c = p.counts();
        assert_eq!(c.dropped_tail[Priority::Low as usize], 2);
        assert_eq!(c.dropped_tail[Priority::High as usize], 1);
        assert_eq!(c.dropped_head[Priority::High as usize], 1);
        assert_eq!(c.dropped_head[Priority::Low as usize], 0);
        // Once 1 of reporter 2 gets through, 0 is a head drop only.
        p.push(&datagram(Priority::High, 2, 1), t, &mut sink);
        let c = p.counts();
        assert_eq!(c.dropped_tail[Priority::High as usize], 0);
        assert_eq!(c.dropped_head[Priority::High as usize], 1);
        // 4 retransmitted later: only 5 remains a tail drop.
        p.push(&datagram(Priority::Low, 1, 4), t, &mut sink);
        assert_eq!(p.counts().dropped_tail[Priority::Low as usize], 1);
        // 5 resent (a tail probe) and dropped again: still one datagram lost.
        p.note_drop(1, Priority::Low, 5);
        assert_eq!(p.counts().dropped_tail[Priority::Low as usize], 1);
        // Serial arithmetic across the wrap.
        let mut p = Pipeline::new(Impairment::default()).unwrap();
        p.push(&datagram(Priority::Low, 1, u32::MAX), t, &mut sink);
        p.note_drop(1, Priority::Low, 0);
        assert_eq!(p.counts().dropped_tail[Priority::Low as usize], 1);
        p.push(&datagram(Priority::Low, 1, 1), t, &mut sink);
        assert_eq!(p.counts().dropped_tail[Priority::Low as usize], 0);
    }

    #[test]
    fn counts_serialize_by_class_name() {
        let mut c = Counts::default();
        c.dropped[Priority::High as usize] = 4;
        c.received[Class::Other.index()] = 2;
        let j = serde_json::to_value(&c).unwrap();
        assert_eq!(j["dropped"]["high"], 4);
        assert_eq!(j["received"]["other"], 2);
        assert_eq!(j["sent"]["low"], 0);
    }
}
