use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_wire::Priority;
use proptest::prelude::*;

use super::*;

const NACK_MS: u64 = 5;
const RESYNC_MS: u64 = 100;

/// A tracker with a 5 ms NACK interval and a 100 ms give-up, and a clock.
struct T {
    t: Tracker,
    stats: Arc<Stats>,
    t0: Instant,
}

impl T {
    fn new() -> T {
        T::sized(1024)
    }

    fn sized(entries: usize) -> T {
        let stats = Arc::new(Stats::default());
        let t = Tracker::new(
            entries,
            Duration::from_millis(NACK_MS),
            Duration::from_millis(RESYNC_MS),
            stats.clone(),
        )
        .unwrap();
        T {
            t,
            stats,
            t0: Instant::now(),
        }
    }

    fn at(&self, ms: u64) -> Instant {
        self.t0 + Duration::from_millis(ms)
    }

    /// A retransmittable datagram at `ms`.
    fn r(&mut self, s: &Space, seq: u32, ms: u64) -> Verdict {
        let now = self.at(ms);
        self.t.check(s, seq, true, now)
    }

    /// A non-retransmittable datagram at `ms`.
    fn u(&mut self, s: &Space, seq: u32, ms: u64) -> Verdict {
        let now = self.at(ms);
        self.t.check(s, seq, false, now)
    }

    fn tick(&mut self, ms: u64) -> Vec<(Space, Nack)> {
        let mut out = vec![];
        let now = self.at(ms);
        self.t.tick(now, usize::MAX, |s, n| out.push((s, n)));
        out
    }

    fn lost(&self) -> [u64; 3] {
        std::array::from_fn(|i| self.stats.lost[i].load(Relaxed))
    }

    fn dups(&self) -> [u64; 3] {
        std::array::from_fn(|i| self.stats.duplicates_by_priority[i].load(Relaxed))
    }

    fn n(&self, c: &std::sync::atomic::AtomicU64) -> u64 {
        c.load(Relaxed)
    }
}

fn ip(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(192, 0, 2, n))
}

fn high(n: u8) -> Space {
    Space::native(ip(n), n as u32, Priority::High)
}

fn nack(seq: u32, missing: u64) -> Verdict {
    Verdict::Gap {
        nack: Some(Nack { seq, missing }),
    }
}

const GAP: Verdict = Verdict::Gap { nack: None };

#[test]
fn entries_must_be_a_bounded_power_of_two() {
    assert!(validate_entries(DEFAULT_ENTRIES).is_ok());
    assert!(validate_entries(MIN_ENTRIES).is_ok());
    assert!(validate_entries(MAX_ENTRIES).is_ok());
    for bad in [0, 1, 32, 100, 3 << 10, MAX_ENTRIES * 2] {
        let e = validate_entries(bad).unwrap_err();
        assert_eq!(e, BadEntries(bad));
        assert!(e.to_string().contains("power of two"), "{e}");
    }
    let stats = Arc::new(Stats::default());
    let t = Tracker::new(1024, Duration::ZERO, Duration::ZERO, stats.clone()).unwrap();
    assert_eq!(t.entries(), 1024);
    // A cache line of state and a 32-byte window a slot, its 2-byte fingerprint, an evicted
    // space's fingerprint, a pending bit.
    assert_eq!(std::mem::size_of::<Entry>(), 64);
    assert_eq!(std::mem::size_of::<Window>(), 32);
    assert_eq!(t.bytes(), 1024 * (64 + 32 + 2 + 2) + 1024 / 8);
    assert_eq!(stats.tracker_bytes.load(Relaxed), t.bytes() as u64);
}

#[test]
fn in_order_applies_and_a_retransmitted_duplicate_is_dropped_and_counted() {
    let mut t = T::new();
    let s = high(1);
    for seq in 1000..1010 {
        assert_eq!(t.r(&s, seq, 0), Verdict::Apply);
    }
    assert_eq!(t.r(&s, 1005, 1), Verdict::Duplicate);
    assert_eq!(t.r(&s, 1009, 1), Verdict::Duplicate);
    // Far behind, but something applied recently: a duplicate, not a restart.
    assert_eq!(t.r(&s, 1, 1), Verdict::Duplicate);
    assert_eq!(t.dups(), [0, 0, 3]);
    assert_eq!(t.n(&t.stats.duplicates), 3);
    assert_eq!(t.lost(), [0; 3]);
}

#[test]
fn a_gap_is_nacked_selectively_once_per_interval() {
    let mut t = T::new();
    let s = high(1);
    assert_eq!(t.r(&s, 1010, 0), Verdict::Apply);
    // 11 lost: 12 is applied and 11 NACKed, no bitmap (nothing else known missing).
    assert_eq!(t.r(&s, 1012, 0), nack(1011, 0));
    // 13, 14 lost: 15 reveals them; 11 was NACKed in this interval already.
    assert_eq!(t.r(&s, 1015, 1), nack(1013, 0b1));
    assert_eq!(t.r(&s, 1016, 2), GAP);
    // The interval ends: everything missing is NACKed again, from the lowest.
    assert_eq!(t.r(&s, 1017, 5), nack(1011, 0b110));
    assert_eq!(t.r(&s, 1018, 6), GAP);
    // The retransmissions fill the gap; base moves over the run of received numbers.
    assert_eq!(t.r(&s, 1013, 7), GAP);
    assert_eq!(t.r(&s, 1011, 7), GAP);
    assert_eq!(t.r(&s, 1014, 7), Verdict::Apply);
    assert_eq!(t.r(&s, 1019, 7), Verdict::Apply);
    assert_eq!(t.r(&s, 1014, 8), Verdict::Duplicate);
    assert_eq!(t.lost(), [0; 3]);
}

#[test]
fn the_nack_bitmap_covers_the_next_64_and_further_gaps_get_their_own_nack() {
    let mut t = T::new();
    let s = high(1);
    assert_eq!(t.r(&s, 0, 0), Verdict::Apply);
    // Only the even numbers arrive, 2..=200: 1, 3, ..., 199 are missing.
    let mut first = None;
    for seq in (2..=200).step_by(2) {
        let v = t.r(&s, seq, 0);
        first.get_or_insert(v);
    }
    assert_eq!(first, Some(nack(1, 0)));
    // Each arrival NACKed the odd number it revealed. In a fresh interval one arrival NACKs
    // the lowest missing number and the next 64 numbers' gaps.
    let mut t = T::new();
    t.r(&s, 0, 0);
    for seq in (2..200).step_by(2) {
        t.r(&s, seq, 0);
    }
    let v = t.r(&s, 200, 5);
    // bit i = 1 + 1 + i missing: bits 1, 3, 5, ... (numbers 3, 5, 7, ...).
    let odd = (0..64).filter(|i| i % 2 == 1).fold(0u64, |m, i| m | 1 << i);
    assert_eq!(v, nack(1, odd));
    // The next arrival continues after the 65 numbers covered.
    assert_eq!(t.r(&s, 202, 5), nack(67, odd));
    assert_eq!(t.r(&s, 204, 5), nack(133, odd));
    // 199 and the odd numbers up to 205 (the newest received is 206).
    assert_eq!(t.r(&s, 206, 5), nack(199, 0b10_1010));
    assert_eq!(t.r(&s, 208, 5), nack(207, 0));
    assert_eq!(t.r(&s, 210, 5), nack(209, 0));
}

#[test]
fn reordering_within_the_window_applies_each_number_once() {
    let mut t = T::new();
    let s = high(1);
    assert_eq!(t.r(&s, 1000, 0), Verdict::Apply);
    let order: Vec<u32> = (1001..1001 + WINDOW).rev().collect();
    for &seq in &order {
        assert!(t.r(&s, seq, 0).applies(), "{seq}");
    }
    for &seq in &order {
        assert_eq!(t.r(&s, seq, 1), Verdict::Duplicate, "{seq}");
    }
    assert_eq!(t.r(&s, 1001 + WINDOW, 1), Verdict::Apply);
    assert_eq!(t.lost(), [0; 3]);
}

#[test]
fn native_numbers_wrap_at_32_bits() {
    let mut t = T::new();
    let s = high(1);
    assert_eq!(t.r(&s, u32::MAX - 2, 0), Verdict::Apply);
    assert_eq!(t.r(&s, u32::MAX - 1, 0), Verdict::Apply);
    // u32::MAX lost: 0 and 1 are in the window across the wrap.
    assert_eq!(t.r(&s, 0, 0), nack(u32::MAX, 0));
    // 1 lost too: revealed by 2.
    assert_eq!(t.r(&s, 2, 0), nack(1, 0));
    assert_eq!(t.r(&s, u32::MAX, 1), GAP); // 1 is still missing
    assert_eq!(t.r(&s, 1, 1), Verdict::Apply);
    assert_eq!(t.r(&s, 3, 1), Verdict::Apply);
    assert_eq!(t.r(&s, u32::MAX - 1, 2), Verdict::Duplicate);
    assert_eq!(t.r(&s, 0, 2), Verdict::Duplicate);
    assert_eq!(t.lost(), [0; 3]);
}

#[test]
fn prototype_numbers_wrap_at_8_bits_and_nack_resend_from() {
    let mut t = T::new();
    let s = Space::prototype(ip(9));
    assert_eq!(s.priority, Priority::Medium);
    assert_eq!(t.r(&s, 254, 0), Verdict::Apply);
    assert_eq!(t.r(&s, 255, 0), Verdict::Apply);
    assert_eq!(t.r(&s, 0, 0), Verdict::Apply);
    // 1 and 3 lost: "resend from" (no bitmap in the prototype's NACK), each once revealed.
    assert_eq!(t.r(&s, 2, 0), nack(1, 0));
    assert_eq!(t.r(&s, 4, 0), nack(3, 0));
    assert_eq!(t.r(&s, 5, 0), GAP);
    assert_eq!(t.r(&s, 255, 0), Verdict::Duplicate);
    // A number 128 or more ahead is behind in an 8-bit space: W = 128.
    assert_eq!(t.r(&s, 2 + 128, 0), Verdict::Duplicate);
    assert_eq!(t.r(&s, 1, 1), GAP);
    assert_eq!(t.r(&s, 3, 1), Verdict::Apply);
    assert_eq!(Numbering::Prototype.window(), 128);
    // The native space of the same address is another space (new, numbered from 0: 0 lost).
    assert_eq!(
        t.r(&Space::native(ip(9), 0, Priority::Medium), 1, 1),
        nack(0, 0)
    );
}

#[test]
fn a_jump_beyond_the_window_slides_it_and_counts_what_fell_out() {
    let mut t = T::new();
    let s = high(1);
    assert_eq!(t.r(&s, 0, 0), Verdict::Apply);
    assert_eq!(t.r(&s, 2, 0), nack(1, 0));
    assert_eq!(t.r(&s, 4, 0), nack(3, 0));
    // 300 is beyond base (1) + 256: the window slides to 45..=300; 1, 3 and 5..=44 are lost
    // (2 and 4 were received), 45..=299 are now missing.
    let v = t.r(&s, 300, 1);
    assert!(matches!(v, Verdict::Gap { .. }), "{v:?}");
    assert_eq!(t.lost(), [0, 0, 2 + 40]);
    assert_eq!(t.n(&t.stats.unrecovered), 42);
    // Numbers that fell out are behind: duplicates.
    assert_eq!(t.r(&s, 3, 2), Verdict::Duplicate);
    // 45..=109 were NACKed with 300; the next arrival NACKs the next 65.
    assert_eq!(t.r(&s, 45, 2), nack(110, u64::MAX));

    // Non-retransmittable: lost by priority, not unrecovered; never NACKed.
    let m = Space::native(ip(1), 1, Priority::Medium);
    assert_eq!(t.u(&m, 0, 3), Verdict::Apply);
    assert_eq!(t.u(&m, 2, 3), Verdict::Apply);
    assert_eq!(t.u(&m, 1000, 3), Verdict::Apply);
    // base 1 -> 745: 1 and 3..=744 lost; 2 was received.
    assert_eq!(t.lost(), [0, 743, 42]);
    assert_eq!(t.n(&t.stats.unrecovered), 42);
}

#[test]
fn non_retransmittable_repeats_are_applied_and_counted_and_gaps_never_nacked() {
    let mut t = T::new();
    let s = Space::native(ip(2), 7, Priority::Low);
    assert_eq!(t.u(&s, 1005, 0), Verdict::Apply);
    assert_eq!(t.u(&s, 1007, 0), Verdict::Apply);
    assert_eq!(t.u(&s, 1007, 0), Verdict::Apply);
    assert_eq!(t.u(&s, 1005, 0), Verdict::Apply);
    assert_eq!(t.dups(), [2, 0, 0]);
    assert!(
        t.tick(50).is_empty(),
        "non-retransmittable gaps are not NACKed"
    );
    // The gap (1006) is given up after resync_after: lost, not unrecovered.
    assert!(t.tick(50 + RESYNC_MS).is_empty());
    assert_eq!(t.lost(), [1, 0, 0]);
    assert_eq!(t.n(&t.stats.unrecovered), 0);
}

#[test]
fn a_restarted_reporter_is_adopted_when_nothing_applies_for_resync_after() {
    let mut t = T::new();
    let s = high(1);
    for seq in 5000..5010 {
        assert_eq!(t.r(&s, seq, 0), Verdict::Apply);
    }
    // Restarted at 0: far behind; dropped while the space applied recently.
    assert_eq!(t.r(&s, 0, 10), Verdict::Duplicate);
    assert_eq!(t.r(&s, 1, 50), Verdict::Duplicate);
    assert_eq!(t.r(&s, 2, RESYNC_MS), Verdict::Resync);
    assert_eq!(t.n(&t.stats.resyncs), 1);
    assert_eq!(t.r(&s, 3, RESYNC_MS), Verdict::Apply);
    // Close behind (within the window) is never a restart.
    for seq in 4..10 {
        assert_eq!(t.r(&s, seq, RESYNC_MS + 1), Verdict::Apply);
    }
    assert_eq!(
        t.r(&s, 10u32.wrapping_sub(200), 10 * RESYNC_MS),
        Verdict::Duplicate
    );
    assert_eq!(
        t.r(&s, 10u32.wrapping_sub(300), 10 * RESYNC_MS),
        Verdict::Resync
    );
    // The 8-bit space: more than 64 behind.
    let p = Space::prototype(ip(3));
    let ms = 20 * RESYNC_MS;
    for seq in 100..110 {
        assert_eq!(t.r(&p, seq, ms), Verdict::Apply);
    }
    assert_eq!(t.r(&p, 60, ms + RESYNC_MS), Verdict::Duplicate);
    assert_eq!(t.r(&p, 0, ms + RESYNC_MS), Verdict::Resync);
}

#[test]
fn a_new_spaces_lost_first_numbers_are_nacked_and_counted() {
    let mut t = T::new();
    // Reporters number from 0: a new native space first seen at 3 lost 0, 1 and 2.
    let s = high(1);
    assert_eq!(t.r(&s, 3, 0), nack(0, 0b11));
    assert_eq!(t.r(&s, 0, 1), GAP);
    assert_eq!(t.r(&s, 2, 1), GAP);
    assert_eq!(t.r(&s, 1, 1), Verdict::Apply);
    assert_eq!(t.r(&s, 4, 1), Verdict::Apply);
    // A reporter whose only datagram (1) was not its first: 0 is NACKed by the timer while
    // the space is silent, and counted lost (unrecovered) when given up.
    let q = high(2);
    assert_eq!(t.r(&q, 1, 1), nack(0, 0));
    assert_eq!(t.tick(1 + NACK_MS), vec![(q, Nack { seq: 0, missing: 0 })]);
    t.tick(RESYNC_MS + 2);
    assert_eq!(t.lost(), [0, 0, 1]);
    assert_eq!(t.n(&t.stats.unrecovered), 1);
    // Non-retransmittable: counted lost, never NACKed.
    let m = Space::native(ip(3), 3, Priority::Medium);
    assert_eq!(t.u(&m, 5, 0), Verdict::Apply);
    assert!(t.tick(2 * RESYNC_MS + 2).is_empty());
    assert_eq!(t.lost(), [0, 5, 1]);
    // A first number beyond the first window starts the space there (a reporter that was
    // running before this translator); prototype numbers (8-bit) always start where seen.
    assert_eq!(t.r(&high(4), WINDOW, 0), Verdict::Apply);
    assert_eq!(t.r(&Space::prototype(ip(5)), 3, 0), Verdict::Apply);
    assert_eq!(t.lost(), [0, 5, 1]);
}

impl T {
    /// Whether `space` has a slot (looked up without inserting).
    fn holds(&self, space: &Space) -> bool {
        let k = Key::of(space);
        self.t.find(&k, self.t.hash(&k)).is_some()
    }
}

#[test]
fn a_full_table_evicts_the_least_recently_seen_and_a_returning_space_is_resynced() {
    let mut t = T::sized(MIN_ENTRIES);
    let spaces: Vec<Space> = (0..200u32)
        .map(|i| Space::native(ip(1), i, Priority::High))
        .collect();
    // Space i is seen at i ms, with a gap (1011 and 1012 missing). Insert until the first eviction.
    let mut n = 0;
    while t.n(&t.stats.tracker_evictions) == 0 {
        let s = &spaces[n];
        assert_eq!(t.r(s, 1010, n as u64), Verdict::Apply);
        assert_eq!(t.r(s, 1013, n as u64), nack(1011, 0b1));
        n += 1;
    }
    // At least one bucket of the two filled (BUCKET slots); at most the table.
    assert!((BUCKET + 1..=MIN_ENTRIES + 1).contains(&n), "{n}");
    let newest = n - 1;
    // The evicted space is the least recently seen of the newest one's two buckets.
    let gone: Vec<usize> = (0..n).filter(|&i| !t.holds(&spaces[i])).collect();
    assert_eq!(gone.len(), 1, "{gone:?}");
    let bucket_of = |t: &T, i: usize| {
        let k = Key::of(&spaces[i]);
        let s = t.t.find(&k, t.t.hash(&k)).unwrap();
        s / BUCKET
    };
    let k = Key::of(&spaces[newest]);
    let buckets = t.t.buckets(t.t.hash(&k));
    let neighbours: Vec<usize> = (0..newest)
        .filter(|&i| i != gone[0] && buckets.contains(&bucket_of(&t, i)))
        .collect();
    // The newest took the evicted one's slot: the other 15 slots hold older spaces.
    assert_eq!(neighbours.len(), 2 * BUCKET - 1, "both buckets were full");
    assert!(neighbours.iter().all(|&i| i > gone[0]), "not the oldest");
    // Its known gap (1011, 1012) is lost for good: retransmittable, so unrecovered.
    assert_eq!(t.lost(), [0, 0, 2]);
    assert_eq!(t.n(&t.stats.unrecovered), 2);
    assert_eq!(t.n(&t.stats.resyncs), 0);
    // It comes back with its next number: a fresh window at that number, a resync.
    let back = &spaces[gone[0]];
    assert_eq!(t.r(back, 1014, 1000), Verdict::Resync);
    assert_eq!(t.n(&t.stats.resyncs), 1);
    assert_eq!(t.r(back, 1015, 1000), Verdict::Apply);
    assert_eq!(t.r(back, 1013, 1000), Verdict::Duplicate);
    // Far more spaces than slots: work stays bounded, every datagram is judged, the table
    // holds at most its size.
    for (i, s) in spaces.iter().enumerate() {
        assert!(t.r(s, 1100, 2000 + i as u64).applies());
    }
    let held = spaces.iter().filter(|s| t.holds(s)).count();
    assert!(held <= MIN_ENTRIES, "{held}");
    assert!(t.n(&t.stats.tracker_evictions) >= (200 - MIN_ENTRIES) as u64);
}

#[test]
fn the_timer_nacks_a_silent_spaces_gap_and_gives_up_after_resync_after() {
    // One word of pending bits: every tick sweeps the whole table.
    let mut t = T::sized(MIN_ENTRIES);
    let s = high(4);
    t.r(&s, 0, 0);
    assert_eq!(t.r(&s, 3, 0), nack(1, 0b1));
    // Not silent yet, and NACKed in this interval: nothing.
    assert!(t.tick(1).is_empty());
    // Silent for the interval: NACKed again (the NACK or the retransmission may be lost).
    assert_eq!(
        t.tick(NACK_MS),
        vec![(
            s,
            Nack {
                seq: 1,
                missing: 0b1
            }
        )]
    );
    assert!(t.tick(NACK_MS + 1).is_empty(), "rate-limited");
    // The same gap again: the interval doubles (backoff), so not at 2 intervals but at 3.
    assert!(t.tick(2 * NACK_MS).is_empty(), "backed off");
    assert_eq!(
        t.tick(3 * NACK_MS),
        vec![(
            s,
            Nack {
                seq: 1,
                missing: 0b1
            }
        )]
    );
    // 1 arrives; 2 never does: a new gap, NACKed at the plain interval again.
    assert_eq!(t.r(&s, 1, 3 * NACK_MS + 1), GAP);
    assert_eq!(
        t.tick(4 * NACK_MS + 1),
        vec![(s, Nack { seq: 2, missing: 0 })]
    );
    // Give up once the gap has not moved for resync_after (base moved at 3 * NACK_MS + 1).
    t.tick(3 * NACK_MS + RESYNC_MS);
    assert_eq!(t.lost(), [0; 3]);
    assert!(t.tick(3 * NACK_MS + 1 + RESYNC_MS).is_empty());
    assert_eq!(t.lost(), [0, 0, 1]);
    assert_eq!(t.n(&t.stats.unrecovered), 1);
    // The space goes on after the gap; the given-up number is now behind.
    assert_eq!(t.r(&s, 4, 200), Verdict::Apply);
    assert_eq!(t.r(&s, 2, 200), Verdict::Duplicate);
    assert!(t.tick(300).is_empty());
}

#[test]
fn the_timer_nacks_a_whole_window_of_gaps_and_respects_its_budget() {
    let mut t = T::sized(MIN_ENTRIES);
    let s = high(5);
    t.r(&s, 0, 0);
    assert_eq!(t.r(&s, 255, 0), nack(1, u64::MAX));
    // 1..=254 missing: 4 NACKs of up to 65 numbers cover them.
    let n = t.tick(NACK_MS);
    let seqs: Vec<u32> = n.iter().map(|(_, n)| n.seq).collect();
    assert_eq!(seqs, vec![1, 66, 131, 196]);
    let covered: u32 = n.iter().map(|(_, n)| 1 + n.missing.count_ones()).sum();
    assert_eq!(covered, 254);
    // A budget of 1 NACK per tick (the gap's interval has doubled: the next one is due at 3).
    let mut got = vec![];
    let now = t.at(3 * NACK_MS);
    t.t.tick(now, 1, |_, n| got.push(n.seq));
    assert_eq!(got, vec![1]);
    // The rest of the window's NACKs come on the next tick, still in the interval.
    let now = t.at(3 * NACK_MS);
    t.t.tick(now, 10, |_, n| got.push(n.seq));
    assert_eq!(got, vec![1, 66, 131, 196]);
}

#[test]
fn the_timer_sweeps_the_whole_table_in_about_one_interval() {
    let mut t = T::sized(1 << 12);
    let spaces: Vec<Space> = (0..1000u32)
        .map(|i| Space::native(ip(7), i, Priority::High))
        .collect();
    for s in &spaces {
        t.r(s, 0, 0);
        t.r(s, 2, 0);
    }
    // The first tick sweeps everything.
    assert_eq!(t.tick(NACK_MS).len(), 1000);
    // Then each tick covers its share of the table, 64 slots a word: ticks 1 ms apart cover a
    // fifth each with a 5 ms interval. Spaces visited before their NACK interval ends (doubled
    // now: the same gaps again) are not NACKed...
    for ms in NACK_MS + 1..3 * NACK_MS {
        assert!(t.tick(ms).is_empty());
    }
    // ...and over the next interval every space is visited, and NACKed, exactly once.
    let mut seen = HashMap::new();
    for ms in 3 * NACK_MS..4 * NACK_MS {
        for (s, _) in t.tick(ms) {
            *seen.entry(s.reporter).or_insert(0) += 1;
        }
    }
    assert_eq!(seen.len(), 1000, "one sweep in one interval");
    assert!(seen.values().all(|&n| n == 1));
}

/// What a reporter's datagrams do to a space: every number of `0..=n` arrives at least once
/// (some several times) in an order within the window; each is applied exactly once, and a NACK
/// never names a number already received.
fn exactly_once(numbering: Numbering, start: u32, arrivals: &[u32]) {
    let mut t = T::new();
    let s = Space {
        ip: ip(1),
        reporter: 1,
        priority: Priority::High,
        numbering,
    };
    let mask = numbering.mask();
    assert_eq!(t.r(&s, start, 0), Verdict::Apply);
    let mut applied: HashMap<u32, u32> = HashMap::new();
    let mut received = std::collections::HashSet::new();
    for (i, &off) in arrivals.iter().enumerate() {
        let seq = start.wrapping_add(1 + off) & mask;
        let v = t.r(&s, seq, i as u64);
        if v.applies() {
            *applied.entry(off).or_default() += 1;
        }
        received.insert(off);
        if let Verdict::Gap { nack: Some(n) } = v {
            let first = n.seq.wrapping_sub(start.wrapping_add(1)) & mask;
            assert!(!received.contains(&first), "NACK of received {first}");
            for b in 0..64 {
                if n.missing >> b & 1 == 1 {
                    assert!(!received.contains(&(first + 1 + b)), "NACK bit {b}");
                }
            }
        }
    }
    for off in &received {
        assert_eq!(applied.get(off), Some(&1), "offset {off}");
    }
    assert_eq!(applied.len(), received.len());
    assert_eq!(t.lost(), [0; 3]);
}

proptest! {
    /// Any permutation, duplication and loss pattern within the window applies each number
    /// exactly once (native, across the 32-bit wrap too).
    #[test]
    fn any_pattern_within_the_window_applies_each_number_once(
        start in prop_oneof![WINDOW..=u32::MAX, (u32::MAX - 300)..=u32::MAX],
        arrivals in prop::collection::vec(0..WINDOW, 0..600),
    ) {
        exactly_once(Numbering::Native, start, &arrivals);
    }

    /// The same in the prototype's 8-bit space (W = 128).
    #[test]
    fn any_pattern_within_the_8_bit_window_applies_each_number_once(
        start in 0u32..256,
        arrivals in prop::collection::vec(0u32..128, 0..300),
    ) {
        exactly_once(Numbering::Prototype, start, &arrivals);
    }
}
