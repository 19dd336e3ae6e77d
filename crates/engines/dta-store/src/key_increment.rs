//! Key-Increment ([DTA A.4], Algorithms 5-6): a count-min sketch in collector memory.
//!
//! The data area is `counters` little-endian u64 counters. A report adds its counter to N
//! counters `index(scheme, key, n, counters)` with RDMA FETCH_ADD; a query returns the minimum of
//! the N counters, which never underestimates.
//!
//! **Windows** (`docs/regions.md` §2.2): a store with `windows = W` keeps W such tables after a
//! window table (one u64 per window, [`WINDOW_TABLE_LEN`] bytes), each counting the reports of
//! one `window_ms` of wall-clock time: window number `n = unix_ms / window_ms` lives in table
//! `n % W`, whose entry holds `n + 1` (0: never used). The writer moves to a new window at its
//! timer ([`KeyIncrementLayout::enter_window`]): it takes the table's entry with a
//! compare-and-swap to [`CLEARING`], zeroes the table and publishes `n + 1`; every writer of
//! the store (translator threads, INT sink threads) then adds into it. Nothing happens per
//! report on any CPU but the writer's, and a closed window is never written again. A query
//! names the windows it reads ([`WindowSel`]) and says which it covered ([`WindowSpan`]).

use serde::Serialize;

use crate::hash;
use crate::spec::WINDOW_TABLE_LEN;
use crate::{
    ApplyError, HashScheme, Header, MemSink, QueryError, RegionMem, SinkError, StoreError,
    StoreKind, StoreSpec, MAX_REDUNDANCY,
};

/// A window table entry while its window's counters are being zeroed.
pub const CLEARING: u64 = u64::MAX;
/// How long a writer waits for another to finish zeroing a window before it zeroes it itself
/// (the other died half-way).
const CLEARING_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyIncrementLayout {
    counters: u64,
    key_len: usize,
    hash: HashScheme,
    redundancy: u8,
    windows: u32,
    window_ms: u64,
    /// A writer's current window: its number and the byte offset of its table (0 without
    /// windows).
    current: Option<u64>,
    base: u64,
}

/// Which windows a query of a windowed store reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSel {
    /// The newest window the store holds (the one being written).
    Current,
    /// Every window the store holds.
    All,
    /// The windows that overlap the last this many milliseconds.
    Last(u64),
    /// The window holding this time (Unix milliseconds).
    At(u64),
}

impl WindowSel {
    /// Parse `current`, `all`, `last:DURATION` (a number and its unit: `300s`, `5m`, `1h`,
    /// `1d`, `250ms`; a bare number is refused, its unit unsaid) or `at:UNIX_MS`.
    pub fn parse(s: &str) -> Result<WindowSel, String> {
        let dur = |d: &str| -> Result<u64, String> {
            let (num, unit) = d
                .find(|c: char| !c.is_ascii_digit())
                .map_or((d, ""), |i| d.split_at(i));
            let n: u64 = num.parse().map_err(|_| {
                format!("last:{d}: expected a number and its unit (ms, s, m, h or d), e.g. last:5m")
            })?;
            let mult = match unit {
                "ms" => 1,
                "s" => 1000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                "" => {
                    return Err(format!(
                        "last:{d}: the unit is missing (ms, s, m, h or d), e.g. last:{d}m"
                    ))
                }
                _ => return Err(format!("last:{d}: the unit is ms, s, m, h or d")),
            };
            if n == 0 {
                return Err(format!("last:{d}: a duration above 0"));
            }
            n.checked_mul(mult)
                .ok_or_else(|| format!("last:{d}: too long"))
        };
        match s {
            "current" => Ok(WindowSel::Current),
            "all" => Ok(WindowSel::All),
            _ => match s.split_once(':') {
                Some(("last", d)) => Ok(WindowSel::Last(dur(d)?)),
                Some(("at", t)) => t
                    .parse()
                    .map(WindowSel::At)
                    .map_err(|_| format!("at:{t}: expected Unix milliseconds")),
                _ => Err(format!(
                    "window {s:?}: expected current, all, last:DURATION (e.g. last:5m) or \
                     at:UNIX_MS"
                )),
            },
        }
    }
}

/// The syntax [`WindowSel::parse`] reads (`last:` in milliseconds).
impl std::fmt::Display for WindowSel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowSel::Current => f.write_str("current"),
            WindowSel::All => f.write_str("all"),
            WindowSel::Last(ms) => write!(f, "last:{ms}ms"),
            WindowSel::At(t) => write!(f, "at:{t}"),
        }
    }
}

/// What the windows an answer read cover of the time asked: all of it, or (a `last:` longer
/// than the store keeps) only the part the store still holds, said in `note`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Coverage {
    /// Whether the windows read cover all the time asked.
    pub complete: bool,
    /// Why not: what was asked and what the store holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Coverage {
    /// All of what was asked.
    pub const COMPLETE: Coverage = Coverage {
        complete: true,
        note: None,
    };
}

/// One window an answer covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WindowSpan {
    /// `unix_ms / window_ms`.
    pub number: u64,
    /// Its start and end, Unix milliseconds (end exclusive).
    pub start_ms: u64,
    pub end_ms: u64,
    /// Still being written (the newest window, and its end not yet passed).
    pub open: bool,
}

impl KeyIncrementLayout {
    pub fn new(h: &Header) -> Result<Self, StoreError> {
        match &h.spec {
            StoreSpec::KeyIncrement(s) => Ok(KeyIncrementLayout {
                counters: s.counters,
                key_len: s.key_len as usize,
                hash: s.hash,
                redundancy: s.redundancy,
                windows: s.windows,
                window_ms: s.window_ms,
                current: None,
                // Table 0 until the writer enters its window: never the window table.
                base: if s.windows == 0 { 0 } else { WINDOW_TABLE_LEN },
            }),
            _ => Err(StoreError::WrongKind {
                expected: StoreKind::KeyIncrement,
                found: h.kind,
            }),
        }
    }

    pub fn key_len(&self) -> usize {
        self.key_len
    }
    pub fn counters(&self) -> u64 {
        self.counters
    }
    pub fn hash(&self) -> HashScheme {
        self.hash
    }
    /// The store's N (from its header): every report and query uses exactly this N.
    pub fn redundancy(&self) -> u8 {
        self.redundancy
    }

    /// The windows (count, width in ms), if the store keeps them.
    pub fn windows(&self) -> Option<(u32, u64)> {
        (self.windows > 0).then_some((self.windows, self.window_ms))
    }

    /// Byte offset of counter `n` of `key` in the writer's current table.
    #[inline]
    pub fn counter_offset(&self, key: &[u8], n: u8) -> u64 {
        self.base + hash::index(self.hash, key, n, self.counters) * 8
    }

    /// Byte offset of table `slot`'s counters.
    fn table_base(&self, slot: u64) -> u64 {
        if self.windows == 0 {
            0
        } else {
            WINDOW_TABLE_LEN + slot * self.counters * 8
        }
    }

    /// Make the window of `now_ms` (Unix milliseconds) the one this writer adds into, zeroing
    /// its table first if no writer has entered it yet (module doc, "Windows"). Nothing without
    /// windows, or while the window is the current one. Returns whether this call zeroed a table.
    pub fn enter_window(&mut self, mem: &RegionMem, now_ms: u64) -> Result<bool, SinkError> {
        if self.windows == 0 {
            return Ok(false);
        }
        let n = now_ms / self.window_ms;
        if self.current.is_some_and(|c| c >= n) {
            // The same window, or this clock stepped back: stay (a closed window is not
            // written again).
            return Ok(false);
        }
        let slot = n % self.windows as u64;
        let entry = slot * 8;
        let mut cleared = false;
        let mut waited = None;
        loop {
            let e = mem.load_u64(entry)?;
            if e != CLEARING && e > n {
                // Entered (or a newer window there: another writer's clock is ahead; add to it).
                break;
            }
            if e == CLEARING {
                let since = *waited.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() < CLEARING_WAIT {
                    std::thread::yield_now();
                    continue;
                }
            }
            if mem.compare_exchange_u64(entry, e, CLEARING)?.is_ok() {
                let zeros = [0u8; 1 << 16];
                let (start, len) = (self.table_base(slot), self.counters * 8);
                let mut off = 0;
                while off < len {
                    let k = (len - off).min(zeros.len() as u64);
                    mem.write(start + off, &zeros[..k as usize])?;
                    off += k;
                }
                mem.store_u64(entry, n + 1)?;
                cleared = true;
                break;
            }
        }
        self.current = Some(n);
        self.base = self.table_base(slot);
        Ok(cleared)
    }

    /// The windows the store holds (oldest first; empty without windows or before any write),
    /// as of `now_ms`.
    pub fn held_windows(&self, mem: &RegionMem, now_ms: u64) -> Vec<WindowSpan> {
        let mut v: Vec<WindowSpan> = (0..self.windows as u64)
            .filter_map(|slot| match mem.load_u64(slot * 8) {
                Ok(e) if e != 0 && e != CLEARING => Some(self.span(e - 1, now_ms)),
                _ => None,
            })
            .collect();
        v.sort_by_key(|w| w.number);
        if let Some(newest) = v.last_mut() {
            newest.open = newest.end_ms > now_ms;
        }
        v
    }

    fn span(&self, number: u64, _now_ms: u64) -> WindowSpan {
        WindowSpan {
            number,
            start_ms: number.saturating_mul(self.window_ms),
            end_ms: number.saturating_add(1).saturating_mul(self.window_ms),
            open: false,
        }
    }

    /// The windows `sel` names among those held: an error with a message when the store keeps
    /// no windows (only [`WindowSel::All`] reads a cumulative store) or none is held.
    pub fn select_windows(
        &self,
        mem: &RegionMem,
        sel: WindowSel,
        now_ms: u64,
    ) -> Result<Vec<WindowSpan>, QueryError> {
        if self.windows == 0 {
            return match sel {
                WindowSel::All => Ok(vec![]),
                _ => Err(QueryError::Window(
                    "this store keeps no windows (one cumulative table): ask for all, or \
                     configure windows and window_ms"
                        .into(),
                )),
            };
        }
        let held = self.held_windows(mem, now_ms);
        let chosen: Vec<WindowSpan> = match sel {
            WindowSel::Current => held.last().copied().into_iter().collect(),
            WindowSel::All => held.clone(),
            WindowSel::Last(ms) => {
                let from = now_ms.saturating_sub(ms);
                held.iter().filter(|w| w.end_ms > from).copied().collect()
            }
            WindowSel::At(t) => held
                .iter()
                .filter(|w| (w.start_ms..w.end_ms).contains(&t))
                .copied()
                .collect(),
        };
        if chosen.is_empty() {
            let range = match (held.first(), held.last()) {
                (Some(a), Some(b)) => format!(
                    "it holds {} window(s) of {} ms, from {} to {} (Unix ms)",
                    held.len(),
                    self.window_ms,
                    a.start_ms,
                    b.end_ms
                ),
                _ => "nothing has been written to it yet".into(),
            };
            return Err(QueryError::Window(format!(
                "no window of this store matches: {range}"
            )));
        }
        Ok(chosen)
    }

    /// What the windows `sel` selects cover of the time it asks: a `last:` reaching past what
    /// the store keeps (`windows` x `window_ms`, older windows reused) is cut there, and said;
    /// every other selection is whole (`all` is what is held; `current` and `at:` one window).
    pub fn coverage(&self, sel: WindowSel, now_ms: u64) -> Coverage {
        let kept = (self.windows as u64).saturating_mul(self.window_ms);
        match sel {
            WindowSel::Last(ms) if self.windows > 0 && ms > kept => {
                let human = |ms: u64| {
                    if ms % 3_600_000 == 0 {
                        format!("{} h", ms / 3_600_000)
                    } else if ms % 60_000 == 0 {
                        format!("{} min", ms / 60_000)
                    } else {
                        format!("{} s", ms as f64 / 1000.0)
                    }
                };
                Coverage {
                    complete: false,
                    note: Some(format!(
                        "asked for the last {}; this store keeps {} windows of {} ({}): the \
                         answer covers from {} (Unix ms) on",
                        human(ms),
                        self.windows,
                        human(self.window_ms),
                        human(kept),
                        (now_ms / self.window_ms.max(1))
                            .saturating_sub(self.windows as u64 - 1)
                            .saturating_mul(self.window_ms)
                    )),
                }
            }
            _ => Coverage::COMPLETE,
        }
    }

    /// [`Self::query`] over the windows `sel` names: the sum of each window's minimum, and
    /// the windows read. A window reused while it was read is an error (ask again).
    pub fn query_windows(
        &self,
        mem: &RegionMem,
        key: &[u8],
        redundancy: Option<u8>,
        sel: WindowSel,
        now_ms: u64,
    ) -> Result<(u64, Vec<WindowSpan>), QueryError> {
        let spans = self.select_windows(mem, sel, now_ms)?;
        Ok((self.query_spans(mem, key, redundancy, &spans)?, spans))
    }

    /// The sum over `spans` (from [`Self::select_windows`]; a cumulative store: its one table)
    /// of the key's minimum: several keys read over the same windows.
    pub fn query_spans(
        &self,
        mem: &RegionMem,
        key: &[u8],
        redundancy: Option<u8>,
        spans: &[WindowSpan],
    ) -> Result<u64, QueryError> {
        QueryError::key(key, self.key_len)?;
        let redundancy = QueryError::redundancy(redundancy, self.redundancy)?;
        if self.windows == 0 {
            return Ok(self.min_at(mem, 0, key, redundancy));
        }
        let mut total = 0u64;
        for w in spans {
            let slot = w.number % self.windows as u64;
            total = total.wrapping_add(self.min_at(mem, self.table_base(slot), key, redundancy));
            if mem.load_u64(slot * 8).ok() != Some(w.number + 1) {
                return Err(QueryError::Window(format!(
                    "window {} was reused while it was read; ask again",
                    w.number
                )));
            }
        }
        Ok(total)
    }

    /// The minimum of `key`'s N counters in the table at byte `base`.
    fn min_at(&self, mem: &RegionMem, base: u64, key: &[u8], redundancy: u8) -> u64 {
        let mut offs = [0u64; MAX_REDUNDANCY as usize];
        self.counter_offsets_from(0, key, redundancy, &mut offs);
        offs[..redundancy as usize]
            .iter()
            .filter_map(|&o| mem.load_u64(base + o).ok())
            .min()
            .unwrap_or(0)
    }

    /// The byte offsets of the `redundancy` counters of `key` into `out[..redundancy]` ([DTA A.4]
    /// Algorithm 5), hashing the key once: the batch API (compute, prefetch, then FETCH_ADD).
    /// Redundancy is capped at [`MAX_REDUNDANCY`].
    /// In the writer's current table (a windowed store: [`Self::enter_window`] first).
    #[inline(always)]
    pub fn counter_offsets(
        &self,
        key: &[u8],
        redundancy: u8,
        out: &mut [u64; MAX_REDUNDANCY as usize],
    ) {
        self.counter_offsets_from(self.base, key, redundancy, out)
    }

    #[inline(always)]
    fn counter_offsets_from(
        &self,
        base: u64,
        key: &[u8],
        redundancy: u8,
        out: &mut [u64; MAX_REDUNDANCY as usize],
    ) {
        let n = redundancy.min(MAX_REDUNDANCY);
        match self.hash {
            HashScheme::Native => {
                let h = hash::fnv1a64(key);
                for i in 0..n {
                    out[i as usize] = base + hash::native_index(h, i, self.counters) * 8;
                }
            }
            HashScheme::Xxh3 => {
                let h = hash::xxh3_128(key);
                for i in 0..n {
                    out[i as usize] = base + hash::xxh3_index(h, i, self.counters) * 8;
                }
            }
            HashScheme::Prototype => {
                for i in 0..n {
                    out[i as usize] = base + hash::index(self.hash, key, i, self.counters) * 8;
                }
            }
        }
    }

    /// Whether a report of `key` at `redundancy` can be applied: `BadKeyLen`, `BadRedundancy`
    /// (outside 1..=MAX_REDUNDANCY) or `RedundancyMismatch` (not the store's N).
    #[inline]
    pub fn check(&self, key: &[u8], redundancy: u8) -> Result<(), ApplyError> {
        crate::check_report(key, self.key_len, redundancy, MAX_REDUNDANCY)?;
        if redundancy != self.redundancy {
            return Err(ApplyError::RedundancyMismatch);
        }
        Ok(())
    }

    /// N FETCH_ADDs ([DTA A.4] Algorithm 5). The report's N must be the store's: a minimum over
    /// more counters than were added to reads 0, over fewer it loses accuracy, so a mismatch is
    /// `RedundancyMismatch`.
    #[inline]
    pub fn apply(
        &self,
        key: &[u8],
        counter: u64,
        redundancy: u8,
        sink: &mut impl MemSink,
    ) -> Result<(), ApplyError> {
        self.check(key, redundancy)?;
        let mut offs = [0u64; MAX_REDUNDANCY as usize];
        self.counter_offsets(key, redundancy, &mut offs);
        for &o in &offs[..redundancy as usize] {
            sink.fetch_add(o, counter)?;
        }
        sink.count(redundancy as u64, counter)?;
        Ok(())
    }

    /// The count-min error bound of an answer, from the region's live counters
    /// ([`crate::confidence::key_increment`]).
    pub fn bound(&self, mem: &RegionMem) -> crate::CountBound {
        crate::confidence::key_increment(mem.tally(), self.counters, self.redundancy)
    }

    /// The minimum of the key's N counters ([DTA A.4] Algorithm 6); `redundancy` `None` reads
    /// the store's N. A key of the wrong length or an N outside 1..=store N is an error (a
    /// minimum over more counters than were written would read 0).
    ///
    /// A windowed store answers its current window ([`Self::query_windows`] names others).
    pub fn query(
        &self,
        mem: &RegionMem,
        key: &[u8],
        redundancy: Option<u8>,
    ) -> Result<u64, QueryError> {
        if self.windows == 0 {
            QueryError::key(key, self.key_len)?;
            let redundancy = QueryError::redundancy(redundancy, self.redundancy)?;
            return Ok(self.min_at(mem, 0, key, redundancy));
        }
        self.query_windows(mem, key, redundancy, WindowSel::Current, unix_ms())
            .map(|(v, _)| v)
    }
}

/// The wall clock, Unix milliseconds (the windows' clock).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
