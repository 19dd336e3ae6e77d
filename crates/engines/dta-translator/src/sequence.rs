// Size: the selective-repeat tracker is one data structure: its table, spaces, NACK timing and
// resynchronisation; its tests are in sequence/tests.rs.
//! Sequence spaces: the selective-repeat receiver of every sequenced datagram ([DTA-draft §3.2]
//! "Telemetry Flow Control & Prioritization"; [DTA-draft §4.2]: "per-reporter packet sequence
//! trackers ... Lost reports are detected through per-reporter registers ... generate a DTA NACK").
//!
//! One **space** per (source IP, reporter id, priority) for the native protocol (32-bit numbers),
//! one per source IP for the prototype's long header (8-bit numbers). A space holds `base`, the
//! lowest number not yet received, and a bitmap of the numbers received in the window
//! `base .. base + W`, W = min(256, modulus / 2) (256 native, 128 prototype):
//!
//! - in the window and not seen: applied, its bit set, `base` advanced over the run of set bits;
//! - seen, or behind `base`: a duplicate;
//! - ahead of the window: the window slides so the number is its last; the numbers that fall
//!   out unreceived are lost for good (counted `lost` by priority, and `unrecovered` when the
//!   space is retransmittable);
//! - far behind `base` (more than W behind; W/2 in the 8-bit space, whose other half is the
//!   window) while nothing has applied for `resync_after`: the reporter restarted; its number is
//!   adopted (`resyncs`).
//!
//! **Retransmittable** datagrams (R) are deduplicated (a duplicate is dropped, so Key-Increment
//! sums stay exact) and their gaps NACKed: an arrival that leaves a gap yields at most one NACK,
//! for the lowest missing number not NACKed in the current NACK interval plus a bitmap of the
//! missing ones among the next 64 (native; the prototype's NACK means "resend from", so it
//! covers every number up to the newest received). A space's NACK interval starts with its first
//! NACK after the previous one ended, so a missing number is NACKed again at most about once per
//! `nack_interval`, however busy the space. **Non-retransmittable** datagrams are tracked for
//! accounting only: never dropped, never NACKed; a repeat is counted as a duplicate and applied
//! (there is no exactly-once promise without R).
//!
//! [`Tracker::tick`] walks a bounded slice of the spaces with a gap per call (a full sweep about
//! every `nack_interval`): a retransmittable space that has gone silent with a gap is NACKed (its
//! last datagrams before the silence arrived, an earlier one did not); a gap that `resync_after`
//! has not filled is given up (`unrecovered`, `lost`) and `base` moved past it.
//!
//! **Fixed table**: `entries` slots (a power of two) allocated once, in buckets of [`BUCKET`];
//! open addressing with a bounded probe: a space may live in either of two buckets chosen by a
//! keyed hash, goes into the less full one, and is found by a 16-bit fingerprint per slot
//! (one cache line holds four buckets' fingerprints) before its key is compared. Nothing is
//! deleted or moved. With two choices the fullest of 16 384 buckets holds about 7 of 8 at load
//! 0.5 (65 536 spaces in 2^17 slots), where one linear probe range of 8 overflows for about
//! 0.5 % of the spaces. When both buckets are full, the least recently seen space of the two is
//! evicted (`tracker_evictions`, its known gaps `lost`) and the newcomer starts a fresh window
//! at its current number; an evicted space that comes back is counted as a resync (remembered
//! by its fingerprint in one cell per slot: a cell holds the last eviction that hashed there,
//! and a newcomer with the same fingerprint, about 1 in 32 768, counts one too). A slot is a
//! cache line of state (key, `base`, times) and a 32-byte window kept apart, which an in-order
//! datagram of a space without a gap never touches. Nothing allocates after construction and
//! the table is never reset wholesale. Times are kept as 32-bit milliseconds: an age beyond 49
//! days reads modulo 49 days, which at worst delays a resync or give-up by one `resync_after`.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_wire::Priority;

use crate::stats::{add, Stats};

/// Slots per bucket; a space may live in either of two buckets.
pub const BUCKET: usize = 8;
/// The window of a native (32-bit) space: the reporter's in-flight limit the translator can
/// still reorder and fill (`retransmit_buffer`'s default).
pub const WINDOW: u32 = 256;
/// Fewest table entries accepted.
pub const MIN_ENTRIES: usize = 64;
/// Most table entries accepted (at 100 bytes a slot, 400 MiB per translator thread).
pub const MAX_ENTRIES: usize = 1 << 22;
/// Default table entries: 65 536 reporters x 256 in flight at load 0.5.
pub const DEFAULT_ENTRIES: usize = 1 << 17;

const WORDS: usize = WINDOW as usize / 64;
type Bits = [u64; WORDS];
const NONE: Bits = [0; WORDS];

/// `tracker_entries` outside the accepted range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("tracker_entries = {0}: a power of two from {MIN_ENTRIES} to {MAX_ENTRIES} is required")]
pub struct BadEntries(pub usize);

/// Check a `tracker_entries` setting.
pub fn validate_entries(entries: usize) -> Result<(), BadEntries> {
    if entries.is_power_of_two() && (MIN_ENTRIES..=MAX_ENTRIES).contains(&entries) {
        Ok(())
    } else {
        Err(BadEntries(entries))
    }
}

/// The numbering of a space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numbering {
    /// Native protocol: 32-bit numbers, W = 256.
    Native,
    /// Prototype long header: 8-bit numbers, W = 128.
    Prototype,
}

impl Numbering {
    /// Largest number (numbers are taken modulo this + 1).
    pub fn mask(self) -> u32 {
        match self {
            Numbering::Native => u32::MAX,
            Numbering::Prototype => u8::MAX as u32,
        }
    }

    /// W = min(256, modulus / 2).
    pub fn window(self) -> u32 {
        match self {
            Numbering::Native => WINDOW,
            Numbering::Prototype => 128,
        }
    }

    /// How far behind `base` a number must be to be taken for a restarted reporter's.
    fn far(self) -> u32 {
        match self {
            Numbering::Native => WINDOW,
            Numbering::Prototype => 64,
        }
    }
}

/// A sequence space: whose numbers these are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    pub ip: IpAddr,
    pub reporter: u32,
    pub priority: Priority,
    pub numbering: Numbering,
}

impl Space {
    /// A native reporter's space for one priority.
    pub fn native(ip: IpAddr, reporter: u32, priority: Priority) -> Self {
        Space {
            ip,
            reporter,
            priority,
            numbering: Numbering::Native,
        }
    }

    /// A prototype source's space (the prototype has no reporter id and no priority: medium).
    pub fn prototype(ip: IpAddr) -> Self {
        Space {
            ip,
            reporter: 0,
            priority: Priority::Medium,
            numbering: Numbering::Prototype,
        }
    }
}

/// A NACK to send: resend `seq`, and (native) `seq + 1 + i` for every bit i set in `missing`;
/// prototype: resend from `seq` (`missing` is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nack {
    pub seq: u32,
    pub missing: u64,
}

/// What to do with a sequenced datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Apply it; nothing before it is missing.
    Apply,
    /// Apply it; numbers before it are missing (retransmittable space): send `nack` if `Some`.
    Gap { nack: Option<Nack> },
    /// Retransmittable and already applied: drop it (counted). A non-retransmittable repeat is
    /// counted and answered `Apply`.
    Duplicate,
    /// The space's number was adopted (a restarted or evicted reporter; counted): apply it.
    Resync,
}

impl Verdict {
    /// Whether the datagram is applied.
    pub fn applies(self) -> bool {
        !matches!(self, Verdict::Duplicate)
    }
}

const V4: u8 = 0x40;
const PROTOTYPE: u8 = 0x20;
const PRIORITY: u8 = 0x03;

/// One space's state but its window: one cache line, all an in-order datagram touches.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct Entry {
    /// IPv6 address, or IPv4-mapped (`V4` in `tag`).
    ip: [u8; 16],
    reporter: u32,
    base: u32,
    /// Every missing number from `base` up to (not including) this one was NACKed in the NACK
    /// interval that began at `nack_at`.
    nack_to: u32,
    /// Last datagram (eviction picks the oldest).
    seen: u32,
    /// Last datagram applied (a restart shows as nothing applying).
    applied: u32,
    /// When `base` last moved or the gap opened (give-up).
    since: u32,
    nack_at: u32,
    /// `base` when the current NACK interval began: the same gap NACKed again.
    backoff_base: u32,
    /// `V4 | PROTOTYPE | priority`: with `ip` and `reporter`, the key.
    tag: u8,
    /// The current NACK interval is `nack_interval << backoff`: doubled each time the same gap
    /// is NACKed again, back to 0 when `base` moves ([`MAX_BACKOFF`]).
    backoff: u8,
    /// The latest datagram's R bit: whether the space's gaps are NACKed and given up as
    /// `unrecovered`.
    retransmittable: bool,
}

/// A space's window: bit i = number `base + i` received (bit 0 is never set: `base` is not
/// received). All zero exactly when the space's pending bit is clear.
#[derive(Debug, Clone, Copy, Default)]
#[repr(align(32))]
struct Window(Bits);

#[derive(Clone, Copy)]
struct Key {
    ip: [u8; 16],
    reporter: u32,
    tag: u8,
}

impl Key {
    fn of(s: &Space) -> Key {
        let (ip, v4) = match s.ip {
            IpAddr::V4(a) => (a.to_ipv6_mapped().octets(), V4),
            IpAddr::V6(a) => (a.octets(), 0),
        };
        let proto = match s.numbering {
            Numbering::Native => 0,
            Numbering::Prototype => PROTOTYPE,
        };
        Key {
            ip,
            reporter: s.reporter,
            tag: v4 | proto | s.priority as u8,
        }
    }
}

impl Entry {
    fn key(&self) -> Key {
        Key {
            ip: self.ip,
            reporter: self.reporter,
            tag: self.tag,
        }
    }

    fn is(&self, k: &Key) -> bool {
        self.tag == k.tag && self.reporter == k.reporter && self.ip == k.ip
    }

    fn numbering(&self) -> Numbering {
        if self.tag & PROTOTYPE != 0 {
            Numbering::Prototype
        } else {
            Numbering::Native
        }
    }

    fn priority(&self) -> usize {
        (self.tag & PRIORITY) as usize
    }

    fn space(&self) -> Space {
        let v6 = Ipv6Addr::from(self.ip);
        let ip = match (self.tag & V4 != 0, v6.to_ipv4_mapped()) {
            (true, Some(v4)) => IpAddr::V4(v4),
            _ => IpAddr::V6(v6),
        };
        Space {
            ip,
            reporter: self.reporter,
            priority: Priority::try_from(self.tag & PRIORITY).unwrap_or(Priority::Low),
            numbering: self.numbering(),
        }
    }

    /// A fresh space whose next number is `next`.
    fn fresh(key: Key, next: u32, r: bool, now: u32, nack_interval: u32) -> Entry {
        Entry {
            ip: key.ip,
            reporter: key.reporter,
            base: next,
            nack_to: next,
            seen: now,
            applied: now,
            since: now,
            nack_at: now.wrapping_sub(nack_interval),
            backoff_base: next.wrapping_sub(1),
            tag: key.tag,
            backoff: 0,
            retransmittable: r,
        }
    }

    /// Move `base` over the received run at the start of window `recv`.
    fn advance(&mut self, recv: &mut Bits, mask: u32, now: u32) {
        let k = trailing_ones(recv);
        if k > 0 {
            shr(recv, k);
            self.base = self.base.wrapping_add(k) & mask;
            self.since = now;
            // A new gap is NACKed at the plain interval again.
            self.backoff = 0;
        }
    }

    /// Offset from `base` where the current NACK interval's coverage ends.
    fn nacked_to(&mut self) -> u32 {
        let n = self.numbering();
        let o = self.nack_to.wrapping_sub(self.base) & n.mask();
        if o > n.window() {
            // `base` has moved past it: nothing from `base` on was NACKed.
            self.nack_to = self.base;
            0
        } else {
            o
        }
    }

    /// The next NACK of this interval: the lowest missing number not NACKed in it, with the
    /// missing ones among the next 64 (native).
    fn nack_from(&mut self, recv: &Bits) -> Option<Nack> {
        let n = self.numbering();
        let start = self.nacked_to();
        let top = top(recv);
        let i = first_zero(recv, start, top)?;
        let (missing, end) = match n {
            // "Resend from": the reporter resends everything after it too.
            Numbering::Prototype => (0, top),
            Numbering::Native => {
                let span = top - i - 1;
                let valid = if span >= 64 {
                    u64::MAX
                } else {
                    (1u64 << span) - 1
                };
                (!extract64(recv, i + 1) & valid, (i + 65).min(top))
            }
        };
        self.nack_to = self.base.wrapping_add(end) & n.mask();
        Some(Nack {
            seq: self.base.wrapping_add(i) & n.mask(),
            missing,
        })
    }

    /// The first NACK owed now: a new NACK interval begins if the last one has ended. An
    /// interval that begins on the gap of the last one (`base` has not moved) lasts twice as
    /// long, up to `nack_interval << MAX_BACKOFF`: a reporter that cannot answer (gone, or
    /// behind a congested path) is asked less and less often until the gap is given up.
    fn nack(&mut self, recv: &Bits, now: u32, interval: u32) -> Option<Nack> {
        if now.wrapping_sub(self.nack_at) >= interval.saturating_mul(1 << self.backoff) {
            if self.base == self.backoff_base {
                self.backoff = (self.backoff + 1).min(MAX_BACKOFF);
            } else {
                self.backoff = 0;
                self.backoff_base = self.base;
            }
            self.nack_to = self.base;
            self.nack_at = now;
        }
        self.nack_from(recv)
    }
}

// The window bitmap, bit i = number `base + i`.

fn count(b: &Bits) -> u32 {
    b.iter().map(|w| w.count_ones()).sum()
}

/// Numbers known missing: below the newest received and not received.
fn missing(b: &Bits) -> u32 {
    top(b) - count(b)
}

/// One past the highest set bit (0 if none).
fn top(b: &Bits) -> u32 {
    for i in (0..WORDS).rev() {
        if b[i] != 0 {
            return i as u32 * 64 + 64 - b[i].leading_zeros();
        }
    }
    0
}

fn trailing_ones(b: &Bits) -> u32 {
    let mut n = 0;
    for w in b {
        let t = w.trailing_ones();
        n += t;
        if t < 64 {
            break;
        }
    }
    n
}

fn test(b: &Bits, i: u32) -> bool {
    b[(i / 64) as usize] >> (i % 64) & 1 == 1
}

fn set(b: &mut Bits, i: u32) {
    b[(i / 64) as usize] |= 1 << (i % 64);
}

/// Set bits below `k` (`k <= WINDOW`).
fn count_below(b: &Bits, k: u32) -> u32 {
    let (w, s) = ((k / 64) as usize, k % 64);
    let mut n: u32 = b[..w].iter().map(|x| x.count_ones()).sum();
    if s > 0 {
        n += (b[w] & ((1u64 << s) - 1)).count_ones();
    }
    n
}

fn shr(b: &mut Bits, k: u32) {
    if k >= WINDOW {
        *b = NONE;
        return;
    }
    let (w, s) = ((k / 64) as usize, k % 64);
    for i in 0..WORDS {
        let lo = b.get(i + w).copied().unwrap_or(0);
        let hi = b.get(i + w + 1).copied().unwrap_or(0);
        b[i] = if s == 0 {
            lo
        } else {
            (lo >> s) | (hi << (64 - s))
        };
    }
}

/// Bits `from .. from + 64` as a word (bits past the window read 0).
fn extract64(b: &Bits, from: u32) -> u64 {
    let (w, s) = ((from / 64) as usize, from % 64);
    let lo = b.get(w).copied().unwrap_or(0);
    let hi = b.get(w + 1).copied().unwrap_or(0);
    if s == 0 {
        lo
    } else {
        (lo >> s) | (hi << (64 - s))
    }
}

/// The lowest clear bit in `from .. to`.
fn first_zero(b: &Bits, from: u32, to: u32) -> Option<u32> {
    let mut i = from;
    while i < to {
        let w = (i / 64) as usize;
        let free = !b[w] >> (i % 64);
        if free != 0 {
            let j = i + free.trailing_zeros();
            return (j < to).then_some(j);
        }
        i = (w as u32 + 1) * 64;
    }
    None
}

/// The most a gap's NACK interval doubles ([`Entry::nack`]): 64 times `nack_interval`.
pub const MAX_BACKOFF: u8 = 6;

/// Milliseconds as the tracker keeps them (at most 2^29, so an age comparison cannot wrap).
fn millis(d: Duration) -> u32 {
    d.as_millis().min(1 << 29) as u32
}

/// The sequence spaces of one translator thread.
pub struct Tracker {
    slots: Box<[Entry]>,
    windows: Box<[Window]>,
    /// Per slot, the fingerprint of the space in it (never 0), or 0 if free.
    prints: Box<[u16]>,
    /// One bit per slot: the space has a gap (the timer's work list).
    pending: Box<[u64]>,
    /// The bits set in `pending`: with none, the timer has no work and reads no word.
    pending_count: usize,
    /// Per hash, the fingerprint of the last space evicted that hashed here (0: none).
    ghosts: Box<[u16]>,
    mask: usize,
    seed: u64,
    nack_interval: u32,
    resync_after: u32,
    /// The first instant seen: times are milliseconds since.
    epoch: Option<Instant>,
    /// The latest time seen (time never goes back inside the tracker).
    now: u32,
    /// The instant `now` was last computed from.
    last_instant: Option<Instant>,
    /// The next word of `pending` the timer visits.
    cursor: usize,
    last_tick: Option<Instant>,
    stats: Arc<Stats>,
}

impl Tracker {
    /// A table of `entries` spaces (see [`validate_entries`]); counts go to `stats`.
    pub fn new(
        entries: usize,
        nack_interval: Duration,
        resync_after: Duration,
        stats: Arc<Stats>,
    ) -> Result<Tracker, BadEntries> {
        validate_entries(entries)?;
        let words = entries / 64;
        let t = Tracker {
            slots: vec![Entry::default(); entries].into_boxed_slice(),
            windows: vec![Window::default(); entries].into_boxed_slice(),
            prints: vec![0; entries].into_boxed_slice(),
            pending: vec![0; words].into_boxed_slice(),
            pending_count: 0,
            ghosts: vec![0; entries].into_boxed_slice(),
            mask: entries - 1,
            // Keyed so that reporters cannot choose ids that collide in the table.
            seed: RandomState::new().build_hasher().finish() | 1,
            nack_interval: millis(nack_interval),
            resync_after: millis(resync_after),
            epoch: None,
            now: 0,
            last_instant: None,
            cursor: 0,
            last_tick: None,
            stats,
        };
        t.stats
            .tracker_bytes
            .store(t.bytes() as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(t)
    }

    /// Memory held by the table.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.slots)
            + std::mem::size_of_val(&*self.windows)
            + std::mem::size_of_val(&*self.prints)
            + std::mem::size_of_val(&*self.pending)
            + std::mem::size_of_val(&*self.ghosts)
    }

    /// Slots in the table.
    pub fn entries(&self) -> usize {
        self.slots.len()
    }

    fn clock(&mut self, now: Instant) -> u32 {
        // The ingest loop passes one instant per receive batch.
        if self.last_instant == Some(now) {
            return self.now;
        }
        self.last_instant = Some(now);
        let epoch = *self.epoch.get_or_insert(now);
        let t = now.saturating_duration_since(epoch).as_millis() as u32;
        if (t.wrapping_sub(self.now) as i32) > 0 {
            self.now = t;
        }
        self.now
    }

    fn hash(&self, k: &Key) -> u64 {
        let a = u64::from_le_bytes(k.ip[..8].try_into().unwrap_or_default());
        let b = u64::from_le_bytes(k.ip[8..].try_into().unwrap_or_default());
        let c = (k.reporter as u64) << 8 | k.tag as u64;
        mix(mix(mix(self.seed ^ a) ^ b) ^ c)
    }

    /// Remember an evicted space (by its hash).
    fn bury(&mut self, h: u64) {
        self.ghosts[(h >> 32) as usize & self.mask] = fingerprint(h);
    }

    /// Whether a space (by its hash) was evicted, forgetting it. Another space's ghost in the
    /// same place is left alone: taking it would make that space, when it returns, look new
    /// instead of resynced.
    fn exhume(&mut self, h: u64) -> bool {
        let g = &mut self.ghosts[(h >> 32) as usize & self.mask];
        if *g == fingerprint(h) {
            *g = 0;
            true
        } else {
            false
        }
    }

    fn set_pending(&mut self, slot: usize, on: bool) {
        let (w, bit) = (slot / 64, 1u64 << (slot % 64));
        let was = self.pending[w] & bit != 0;
        if on && !was {
            self.pending[w] |= bit;
            self.pending_count += 1;
        } else if !on && was {
            self.pending[w] &= !bit;
            self.pending_count -= 1;
        }
    }

    /// Count `n` numbers of a space lost for good.
    fn lost(&self, priority: usize, retransmittable: bool, n: u32) {
        if n > 0 {
            add(&self.stats.lost[priority], n as u64);
            if retransmittable {
                add(&self.stats.unrecovered, n as u64);
            }
        }
    }

    /// The slot of `key`: `Ok` if it is there, `Err` if a fresh entry goes there (a free slot
    /// of the less full of its two buckets, or the least recently seen of both, evicted), with
    /// whether `key` was evicted before.
    /// The two buckets a space with hash `h` may live in.
    fn buckets(&self, h: u64) -> [usize; 2] {
        let n = self.prints.len() / BUCKET;
        let first = h as usize & (n - 1);
        let second = (h >> 20) as usize & (n - 1);
        [first, if second == first { first ^ 1 } else { second }]
    }

    /// The slot holding `key` (hash `h`), if any.
    #[inline]
    fn find(&self, key: &Key, h: u64) -> Option<usize> {
        let print = fingerprint(h);
        for b in self.buckets(h) {
            let group: &[u16; BUCKET] = self.prints[b * BUCKET..][..BUCKET].try_into().ok()?;
            for (i, &p) in group.iter().enumerate() {
                if p == print && self.slots[b * BUCKET + i].is(key) {
                    return Some(b * BUCKET + i);
                }
            }
        }
        None
    }

    fn locate(&mut self, key: &Key, now: u32) -> Result<usize, (usize, bool)> {
        let h = self.hash(key);
        if let Some(s) = self.find(key, h) {
            return Ok(s);
        }
        let [first, second] = self.buckets(h);
        let free = [first, second].map(|b| {
            let used = self.prints[b * BUCKET..(b + 1) * BUCKET]
                .iter()
                .filter(|&&p| p != 0)
                .count();
            (BUCKET - used, b * BUCKET + used)
        });
        // Slots fill in order within a bucket and are never freed: the free ones are its tail.
        let (slot, evicted) = if free[0].0 >= free[1].0 && free[0].0 > 0 {
            (free[0].1, false)
        } else if free[1].0 > 0 {
            (free[1].1, false)
        } else {
            let mut victim = first * BUCKET;
            let mut oldest = 0;
            for s in
                (first * BUCKET..(first + 1) * BUCKET).chain(second * BUCKET..(second + 1) * BUCKET)
            {
                let age = now.wrapping_sub(self.slots[s].seen);
                if age > oldest {
                    (victim, oldest) = (s, age);
                }
            }
            (victim, true)
        };
        if evicted {
            let old = self.slots[slot];
            self.lost(
                old.priority(),
                old.retransmittable,
                missing(&self.windows[slot].0),
            );
            add(&self.stats.tracker_evictions, 1);
            let oh = self.hash(&old.key());
            self.bury(oh);
        }
        self.prints[slot] = fingerprint(h);
        Err((slot, self.exhume(h)))
    }

    /// Judge datagram `seq` of `space`, with its R bit.
    pub fn check(
        &mut self,
        space: &Space,
        seq: u32,
        retransmittable: bool,
        now: Instant,
    ) -> Verdict {
        let now = self.clock(now);
        let key = Key::of(space);
        let n = space.numbering;
        let (mask, w) = (n.mask(), n.window());
        let seq = seq & mask;
        let slot = match self.locate(&key, now) {
            Ok(s) => s,
            Err((s, false)) if n == Numbering::Native && seq != 0 && seq < w => {
                // A new native space whose first number is within a window of 0: reporters
                // number from 0, so the numbers below it were sent and lost (a reporter whose
                // first datagrams are all lost would otherwise never be NACKed for them). The
                // space starts at 0 and `seq` is checked against it like any other number. The
                // cost: after a translator restart, a reporter still in its first window is
                // asked again for numbers applied before the restart. Not for the prototype's
                // 8-bit numbers, where half the space is "within a window of 0".
                self.slots[s] = Entry::fresh(key, 0, retransmittable, now, self.nack_interval);
                self.windows[s] = Window::default();
                self.set_pending(s, false);
                s
            }
            Err((s, evicted_before)) => {
                self.slots[s] = Entry::fresh(
                    key,
                    seq.wrapping_add(1) & mask,
                    retransmittable,
                    now,
                    self.nack_interval,
                );
                self.windows[s] = Window::default();
                self.set_pending(s, false);
                return if evicted_before {
                    add(&self.stats.resyncs, 1);
                    Verdict::Resync
                } else {
                    Verdict::Apply
                };
            }
        };
        let (resync_after, nack_interval) = (self.resync_after, self.nack_interval);
        let e = &mut self.slots[slot];
        e.seen = now;
        e.retransmittable = retransmittable;
        let d = seq.wrapping_sub(e.base) & mask;
        if d == 0 && self.pending[slot / 64] >> (slot % 64) & 1 == 0 {
            // In order with no gap (the window is empty): the window is not touched.
            e.base = seq.wrapping_add(1) & mask;
            e.applied = now;
            e.since = now;
            return Verdict::Apply;
        }
        let recv = &mut self.windows[slot].0;
        let mut lost = 0;
        enum Outcome {
            New,
            Repeat,
            Adopted,
        }
        let outcome = if d < w {
            if test(recv, d) {
                Outcome::Repeat
            } else {
                if *recv == NONE && d > 0 {
                    e.since = now; // a gap opens
                }
                set(recv, d);
                e.applied = now;
                e.advance(recv, mask, now);
                Outcome::New
            }
        } else if d <= mask / 2 {
            // Ahead of the window: slide it so `seq` is its last number.
            let shift = d - (w - 1);
            let within = shift.min(w);
            lost = within - count_below(recv, within) + (shift - within);
            shr(recv, shift);
            e.base = e.base.wrapping_add(shift) & mask;
            e.since = now;
            set(recv, w - 1);
            e.applied = now;
            e.advance(recv, mask, now);
            Outcome::New
        } else {
            let behind = e.base.wrapping_sub(seq) & mask;
            if behind > n.far() && now.wrapping_sub(e.applied) >= resync_after {
                lost = missing(recv);
                *recv = NONE;
                let next = seq.wrapping_add(1) & mask;
                *e = Entry::fresh(key, next, retransmittable, now, nack_interval);
                Outcome::Adopted
            } else {
                Outcome::Repeat
            }
        };
        let gap = *recv != NONE;
        let nack = match outcome {
            Outcome::New if gap && retransmittable => e.nack(recv, now, nack_interval),
            _ => None,
        };
        let priority = e.priority();
        self.set_pending(slot, gap);
        self.lost(priority, retransmittable, lost);
        match outcome {
            Outcome::New if gap && retransmittable => Verdict::Gap { nack },
            Outcome::New => Verdict::Apply,
            Outcome::Repeat => {
                add(&self.stats.duplicates, 1);
                add(&self.stats.duplicates_by_priority[priority], 1);
                if retransmittable {
                    Verdict::Duplicate
                } else {
                    Verdict::Apply
                }
            }
            Outcome::Adopted => {
                add(&self.stats.resyncs, 1);
                Verdict::Resync
            }
        }
    }

    /// The timer: visit the spaces with a gap in the next slice of the table (sized so a full
    /// sweep takes about `nack_interval`), NACK the gaps of silent retransmittable spaces (at
    /// most `max_nacks` NACKs in all, handed to `emit`), and give up gaps older than
    /// `resync_after`; nothing while no space has a gap.
    pub fn tick(&mut self, now: Instant, max_nacks: usize, mut emit: impl FnMut(Space, Nack)) {
        let words = self.pending.len();
        let sweep = Duration::from_millis(self.nack_interval.max(1) as u64).as_nanos();
        let elapsed = self
            .last_tick
            .map_or(sweep, |t| now.saturating_duration_since(t).as_nanos());
        self.last_tick = Some(now);
        if self.pending_count == 0 {
            return;
        }
        let budget = (words as u128 * elapsed)
            .div_ceil(sweep)
            .clamp(1, words as u128) as usize;
        let now = self.clock(now);
        let mut sent = 0;
        for _ in 0..budget {
            let w = self.cursor;
            let mut bits = self.pending[w];
            while bits != 0 {
                let slot = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if !self.visit(slot, now, &mut sent, max_nacks, &mut emit) {
                    return; // no room for NACKs: resume at this word
                }
            }
            self.cursor = (w + 1) % words;
        }
    }

    /// The timer's work on one space with a gap; false when the NACK budget is spent.
    fn visit(
        &mut self,
        slot: usize,
        now: u32,
        sent: &mut usize,
        max_nacks: usize,
        emit: &mut impl FnMut(Space, Nack),
    ) -> bool {
        let (resync_after, interval) = (self.resync_after, self.nack_interval);
        let e = &mut self.slots[slot];
        let recv = &mut self.windows[slot].0;
        if *recv == NONE {
            self.set_pending(slot, false);
            return true;
        }
        if now.wrapping_sub(e.since) >= resync_after {
            // Give up: move `base` past the newest received.
            let (lost, top) = (missing(recv), top(recv));
            e.base = e.base.wrapping_add(top) & e.numbering().mask();
            *recv = NONE;
            e.nack_to = e.base;
            e.since = now;
            let (priority, r) = (e.priority(), e.retransmittable);
            self.set_pending(slot, false);
            self.lost(priority, r, lost);
            return true;
        }
        if !e.retransmittable || now.wrapping_sub(e.seen) < interval {
            return true; // not NACKed, or still sending (its arrivals NACK)
        }
        let space = e.space();
        // A whole window needs at most WORDS NACKs of 65 numbers.
        for k in 0..WORDS {
            if *sent >= max_nacks {
                return false;
            }
            let next = if k == 0 {
                e.nack(recv, now, interval)
            } else {
                e.nack_from(recv)
            };
            let Some(n) = next else { break };
            emit(space, n);
            *sent += 1;
        }
        true
    }
}

/// A space's 16-bit fingerprint (never 0, which marks a free slot).
fn fingerprint(h: u64) -> u16 {
    (h >> 48) as u16 | 1
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 32;
    x = x.wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^= x >> 32;
    x = x.wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^ (x >> 32)
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker")
            .field("entries", &self.slots.len())
            .field("bytes", &self.bytes())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
