// Size: the rule set, its engine and the window state are one match-action stage; the
// configuration, the limits and the XDP lowering are their own modules.
//! Translator rules: match-action over reports, with aggregation ([DTA §7] "Query-Enhancing
//! Extensions", [DTA-draft §5.1]; docs/rules.md).
//!
//! When a query is known ahead of time the translator can answer it on the way to memory: a
//! rule matches reports by primitive, store, key (prefix or mask) and data fields, optionally
//! aggregates a value across a Postcarding path or a per-key window (SUM, MAX, MIN, COUNT),
//! and when its condition holds acts: appends an entry to a list, Key-Writes a result, sets the
//! immediate flag, or drops the report. `SELECT flowID, path WHERE SUM(latency) > T` is one
//! rule: aggregate `sum` over `path`, `when > T`, action `append` of the key.
//!
//! Bounded cost per report: at most [`MAX_RULES`] rules of at most [`MAX_FIELDS`] field tests
//! each, one state-table probe per window rule, and at most one derived report per rule. The
//! window state is a fixed table ([`DEFAULT_STATE_ENTRIES`] slots per translator thread,
//! direct-mapped; a key that takes an occupied slot within its window evicts it, counted), and
//! derived reports wait in a fixed queue ([`OUTPUTS`]; past it they are counted and dropped).
//! Nothing allocates after construction.
//!
//! Reload: a compiled [`RuleSet`] is immutable and shared behind [`Rules`], which swaps in a
//! new one atomically ([`Rules::replace`]). Each translator thread's [`RuleEngine`] reads one
//! atomic generation per datagram and, when it changed, takes the new set (a lock-free load);
//! a report is evaluated entirely under one set, so a reload loses and doubles nothing.

pub mod config;
mod limits;
mod xdp;

pub use limits::{RuleCounter, MAX_DATA, MAX_FIELDS, MAX_KEY, MAX_RULES};
pub use xdp::{NotInXdp, XdpAction, XdpRule, XdpSplit};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use dta_wire::Report;

use crate::postcard::Chunk;
pub use config::{PrimitiveName, RuleConfig, StoreCatalog};

/// Longest window.
pub const MAX_WINDOW_MS: u64 = 3_600_000;
/// Window state slots per translator thread unless configured (`rule_state_entries`).
pub const DEFAULT_STATE_ENTRIES: usize = 4096;
/// Most window state slots per translator thread.
pub const MAX_STATE_ENTRIES: usize = 1 << 20;
/// Derived reports (Append and Write actions) queued before the translator applies them.
pub const OUTPUTS: usize = 256;
/// Longest derived report data (the longest Append entry or Key-Write data).
const MAX_OUT: usize = 64;

/// A comparison (as written in a rule: `eq`, `ne`, `lt`, `le`, `gt`, `ge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// `value op constant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cond {
    pub op: CmpOp,
    pub value: u64,
}

impl Cond {
    /// Always true (`>= 0`).
    pub const ALWAYS: Cond = Cond {
        op: CmpOp::Ge,
        value: 0,
    };

    #[inline]
    pub fn holds(&self, v: u64) -> bool {
        match self.op {
            CmpOp::Eq => v == self.value,
            CmpOp::Ne => v != self.value,
            CmpOp::Lt => v < self.value,
            CmpOp::Le => v <= self.value,
            CmpOp::Gt => v > self.value,
            CmpOp::Ge => v >= self.value,
        }
    }
}

/// A big-endian unsigned field of the data; width 0: the first 8 bytes (or all, if fewer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub offset: u16,
    pub width: u8,
}

impl Field {
    const ZERO: Field = Field {
        offset: 0,
        width: 1,
    };
    const WHOLE: Field = Field {
        offset: 0,
        width: 0,
    };

    /// The field's value, `None` when the data is too short for it.
    #[inline]
    pub fn read(&self, data: &[u8]) -> Option<u64> {
        let b = if self.width == 0 {
            &data[..data.len().min(8)]
        } else {
            let o = self.offset as usize;
            data.get(o..o + self.width as usize)?
        };
        Some(b.iter().fold(0u64, |a, &x| (a << 8) | x as u64))
    }
}

/// The reports routed to one store, as far as a report shows it: key length, data length, or
/// sketch id (`None`: any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub key_len: Option<u8>,
    pub data_len: Option<u8>,
    pub id: Option<u32>,
}

impl Shape {
    const ANY: Shape = Shape {
        key_len: None,
        data_len: None,
        id: None,
    };
}

/// `key[..len] & mask == value` (value pre-masked); len 0: any key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyMatch {
    pub len: u8,
    pub mask: [u8; MAX_KEY],
    pub value: [u8; MAX_KEY],
}

impl KeyMatch {
    const ANY: KeyMatch = KeyMatch {
        len: 0,
        mask: [0; MAX_KEY],
        value: [0; MAX_KEY],
    };

    #[inline]
    fn matches(&self, key: &[u8]) -> bool {
        let n = self.len as usize;
        key.len() >= n && (0..n).all(|i| key[i] & self.mask[i] == self.value[i])
    }
}

/// An aggregate function (as written in a rule: `sum`, `max`, `min`, `count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Agg {
    Sum,
    Max,
    Min,
    Count,
}

impl Agg {
    /// The aggregate of nothing.
    fn start(self) -> u64 {
        match self {
            Agg::Min => u64::MAX,
            Agg::Sum | Agg::Max | Agg::Count => 0,
        }
    }

    #[inline]
    fn step(self, acc: u64, v: u64) -> u64 {
        match self {
            Agg::Sum => acc.saturating_add(v),
            Agg::Max => acc.max(v),
            Agg::Min => acc.min(v),
            Agg::Count => acc + 1,
        }
    }
}

/// What a rule aggregates over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// Each report by itself (no aggregate).
    Report,
    /// A flow's postcards, when its path leaves the Postcarding cache.
    Path,
    /// A key's reports in a tumbling window of `ns`.
    Window { ns: u64 },
}

/// An Append entry's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    Key,
    KeyValue,
    Value,
}

/// A compiled action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Append {
        list: u32,
        entry: Entry,
        entry_len: u8,
    },
    Write {
        key_len: u8,
        data_len: u8,
        redundancy: u8,
    },
    Immediate,
    Drop,
}

/// One compiled rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    name: String,
    primitive: PrimitiveName,
    shape: Shape,
    key: KeyMatch,
    fields: [(Field, Cond, u64); MAX_FIELDS],
    nfields: u8,
    value: Field,
    agg: Option<Agg>,
    over: Over,
    when: Cond,
    action: Action,
    derived_immediate: bool,
}

impl Rule {
    #[inline]
    fn matches(&self, v: &View<'_>) -> bool {
        self.primitive == v.primitive
            && self.shape.key_len.is_none_or(|k| k as usize == v.key.len())
            && self
                .shape
                .data_len
                .is_none_or(|d| d as usize == v.data.len())
            && self.shape.id.is_none_or(|id| Some(id) == v.id)
            && self.key.matches(v.key)
            && self.fields[..self.nfields as usize]
                .iter()
                .all(|(f, c, mask)| f.read(v.data).is_some_and(|x| c.holds(x & mask)))
    }
}

/// A compiled, immutable rule set.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    generation: u64,
}

impl RuleSet {
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// Counters of the rules, shared by the translator threads (atomic adds, only when a rule
/// matches).
#[derive(Debug, Default)]
pub struct RuleStats {
    /// Reports (or paths) a rule matched.
    pub matched: AtomicU64,
    /// Actions taken (the condition held).
    pub fired: AtomicU64,
    /// Reports and paths dropped by a rule.
    pub dropped: AtomicU64,
    /// Immediate flags set by a rule.
    pub flagged: AtomicU64,
    /// Derived reports (Append, Write) queued.
    pub derived: AtomicU64,
    /// Derived reports lost because the queue was full.
    pub derived_overflow: AtomicU64,
    /// Derived reports whose key did not fit the target (Write to a store of another key
    /// length, an Append entry too short for the key).
    pub derived_unfit: AtomicU64,
    /// Window states evicted by another key before their window ended.
    pub state_evictions: AtomicU64,
    /// Rule sets installed after the first.
    pub reloads: AtomicU64,
}

impl RuleStats {
    /// The counter `c` (one set: [`RuleCounter`] names each field).
    pub fn counter(&self, c: RuleCounter) -> &AtomicU64 {
        match c {
            RuleCounter::Matched => &self.matched,
            RuleCounter::Fired => &self.fired,
            RuleCounter::Dropped => &self.dropped,
            RuleCounter::Flagged => &self.flagged,
            RuleCounter::Derived => &self.derived,
            RuleCounter::DerivedOverflow => &self.derived_overflow,
            RuleCounter::DerivedUnfit => &self.derived_unfit,
            RuleCounter::StateEvictions => &self.state_evictions,
            RuleCounter::Reloads => &self.reloads,
        }
    }

    pub fn snapshot(&self) -> serde_json::Value {
        RuleCounter::ALL
            .iter()
            .map(|&c| {
                (
                    c.name().to_string(),
                    self.counter(c).load(Ordering::Relaxed).into(),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

#[inline]
fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// The rule set every translator thread of a collector uses, replaceable while they run.
#[derive(Debug)]
pub struct Rules {
    set: ArcSwap<RuleSet>,
    generation: AtomicU64,
    stats: RuleStats,
}

impl Rules {
    pub fn new(set: RuleSet) -> Arc<Rules> {
        Arc::new(Rules {
            generation: AtomicU64::new(set.generation),
            set: ArcSwap::from_pointee(set),
            stats: RuleStats::default(),
        })
    }

    /// Compile `rules` against `stores` and install them (the translator threads take them at
    /// their next datagram). On an error the running set stays. Returns the new generation.
    pub fn replace(&self, rules: &[RuleConfig], stores: &StoreCatalog<'_>) -> Result<u64, String> {
        let g = self.generation.load(Ordering::Acquire) + 1;
        let set = RuleSet::compile(rules, stores, g)?;
        self.set.store(Arc::new(set));
        self.generation.store(g, Ordering::Release);
        bump(&self.stats.reloads);
        Ok(g)
    }

    pub fn current(&self) -> Arc<RuleSet> {
        self.set.load_full()
    }

    pub fn stats(&self) -> &RuleStats {
        &self.stats
    }
}

/// A report as the rules see it: primitive, key, data (and sketch id).
struct View<'a> {
    primitive: PrimitiveName,
    key: &'a [u8],
    data: &'a [u8],
    id: Option<u32>,
}

/// What the rules decided about a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// Apply this report (the immediate flag possibly set).
    Apply(Report<'a>),
    /// A rule dropped it.
    Drop,
}

/// What the rules decided about a path leaving the Postcarding cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathVerdict {
    Write { immediate: bool },
    Drop,
}

/// A derived report waiting to be applied.
#[derive(Clone, Copy)]
pub struct Derived {
    kind: DerivedKind,
    key: [u8; MAX_KEY],
    key_len: u8,
    data: [u8; MAX_OUT],
    data_len: u8,
    immediate: bool,
}

#[derive(Clone, Copy)]
enum DerivedKind {
    Append { list: u32 },
    Write { redundancy: u8 },
}

impl Derived {
    /// The report the translator applies.
    pub fn report(&self) -> Report<'_> {
        let data = &self.data[..self.data_len as usize];
        match self.kind {
            DerivedKind::Append { list } => Report::Append {
                list_id: list,
                data,
                immediate: self.immediate,
            },
            DerivedKind::Write { redundancy } => Report::KeyWrite {
                key: &self.key[..self.key_len as usize],
                data,
                redundancy,
                immediate: self.immediate,
            },
        }
    }
}

/// One window's state: a (rule, key) and its running aggregate.
#[derive(Clone, Copy)]
struct Slot {
    generation: u64,
    start_ns: u64,
    acc: u64,
    key: [u8; MAX_KEY],
    rule: u16,
    key_len: u8,
    in_use: bool,
    fired: bool,
}

impl Slot {
    const EMPTY: Slot = Slot {
        generation: 0,
        start_ns: 0,
        acc: 0,
        key: [0; MAX_KEY],
        rule: 0,
        key_len: 0,
        in_use: false,
        fired: false,
    };
}

/// One translator thread's rule evaluation: the current set, the window state table and the
/// derived-report queue.
pub struct RuleEngine {
    shared: Arc<Rules>,
    set: Arc<RuleSet>,
    seen: u64,
    state: Box<[Slot]>,
    mask: usize,
    epoch: Instant,
    outputs: Vec<Derived>,
    path_rules: bool,
}

impl RuleEngine {
    /// `state_entries` is rounded up to a power of two (at most [`MAX_STATE_ENTRIES`]).
    pub fn new(shared: Arc<Rules>, state_entries: usize) -> RuleEngine {
        let n = state_entries
            .clamp(1, MAX_STATE_ENTRIES)
            .next_power_of_two();
        let set = shared.current();
        RuleEngine {
            seen: set.generation,
            path_rules: set.rules.iter().any(|r| r.over == Over::Path),
            set,
            shared,
            state: vec![Slot::EMPTY; n].into_boxed_slice(),
            mask: n - 1,
            epoch: Instant::now(),
            outputs: Vec::with_capacity(OUTPUTS),
        }
    }

    pub fn shared(&self) -> &Arc<Rules> {
        &self.shared
    }

    /// Take a newly installed set, if any (one atomic load; called once per datagram).
    #[inline]
    pub fn refresh(&mut self) {
        if self.shared.generation.load(Ordering::Acquire) != self.seen {
            self.set = self.shared.current();
            self.seen = self.set.generation;
            self.path_rules = self.set.rules.iter().any(|r| r.over == Over::Path);
        }
    }

    /// Whether any rule is installed.
    #[inline]
    pub fn active(&self) -> bool {
        !self.set.rules.is_empty()
    }

    /// Whether a rule looks at paths.
    #[inline]
    pub fn path_rules(&self) -> bool {
        self.path_rules
    }

    /// Derived reports waiting.
    pub fn pending(&self) -> usize {
        self.outputs.len()
    }

    /// Room for the derived reports of one more report.
    pub fn has_room(&self) -> bool {
        self.outputs.len() + MAX_RULES <= OUTPUTS
    }

    /// Take the derived reports queued so far, oldest first.
    pub fn take_outputs(&mut self, into: &mut Vec<Derived>) {
        into.clear();
        into.append(&mut self.outputs);
    }

    /// Evaluate the per-report and window rules on `report`.
    pub fn check<'a>(&mut self, report: &Report<'a>, now: Instant) -> Verdict<'a> {
        if self.set.rules.is_empty() {
            return Verdict::Apply(*report);
        }
        let (mut kb, mut db) = ([0u8; 4], [0u8; 8]);
        let view = view(report, &mut kb, &mut db);
        let t = now.saturating_duration_since(self.epoch).as_nanos() as u64;
        // Disjoint borrows: the set is read while the state and the queue change.
        let (set, stats) = (&*self.set, &self.shared.stats);
        let mut win = Windows {
            state: &mut self.state,
            mask: self.mask,
            generation: self.seen,
        };
        let mut immediate = false;
        for (i, r) in set.rules.iter().enumerate() {
            if r.over == Over::Path || !r.matches(&view) {
                continue;
            }
            bump(&stats.matched);
            let Some(v) = r.value.read(view.data) else {
                continue;
            };
            // The value the action carries: the report's, or the window's aggregate.
            let fired = match (r.over, r.agg) {
                (Over::Window { ns }, Some(agg)) => win.step(stats, i, r, ns, agg, view.key, v, t),
                _ => Some(v).filter(|&v| r.when.holds(v)),
            };
            let Some(v) = fired else {
                continue;
            };
            bump(&stats.fired);
            match r.action {
                Action::Drop => {
                    bump(&stats.dropped);
                    return Verdict::Drop;
                }
                Action::Immediate => {
                    if !report.immediate() && !immediate {
                        bump(&stats.flagged);
                    }
                    immediate = true;
                }
                a => derive(
                    &mut self.outputs,
                    stats,
                    a,
                    r.derived_immediate,
                    view.key,
                    v,
                ),
            }
        }
        Verdict::Apply(if immediate {
            with_immediate(report)
        } else {
            *report
        })
    }

    /// Evaluate the path rules on a chunk leaving the Postcarding cache (its key and the hops'
    /// values).
    pub fn check_path(&mut self, chunk: &Chunk) -> PathVerdict {
        let mut immediate = chunk.immediate;
        if !self.path_rules {
            return PathVerdict::Write { immediate };
        }
        let key = chunk.key();
        let view = View {
            primitive: PrimitiveName::Postcarding,
            key,
            data: &[],
            id: None,
        };
        let (set, stats) = (&*self.set, &self.shared.stats);
        for r in set.rules.iter() {
            let Some(agg) = r.agg.filter(|_| r.over == Over::Path) else {
                continue;
            };
            if !(r.shape.key_len.is_none_or(|k| k as usize == key.len()) && r.key.matches(view.key))
            {
                continue;
            }
            bump(&stats.matched);
            // The hops' values that pass the field tests are aggregated.
            let (mut acc, mut n) = (agg.start(), 0u32);
            for v in chunk.values.iter().flatten() {
                let b = v.to_be_bytes();
                let ok = r.fields[..r.nfields as usize]
                    .iter()
                    .all(|(f, c, mask)| f.read(&b).is_some_and(|x| c.holds(x & mask)));
                if let (true, Some(x)) = (ok, r.value.read(&b)) {
                    acc = agg.step(acc, x);
                    n += 1;
                }
            }
            if (n == 0 && agg != Agg::Count) || !r.when.holds(acc) {
                continue;
            }
            bump(&stats.fired);
            match r.action {
                Action::Drop => {
                    bump(&stats.dropped);
                    return PathVerdict::Drop;
                }
                Action::Immediate => {
                    if !immediate {
                        bump(&stats.flagged);
                    }
                    immediate = true;
                }
                a => derive(&mut self.outputs, stats, a, r.derived_immediate, key, acc),
            }
        }
        PathVerdict::Write { immediate }
    }
}

/// The window state table, borrowed for one report's evaluation.
struct Windows<'a> {
    state: &'a mut [Slot],
    mask: usize,
    generation: u64,
}

impl Windows<'_> {
    /// Rule `i`'s (`r`) running aggregate for `key`, stepped by `v` at `t` (ns): the aggregate
    /// if the rule acts. Append and Write act once per key and window (when the aggregate first
    /// satisfies the condition); Drop and Immediate on every report of the window from then on.
    #[allow(clippy::too_many_arguments)] // the rule and the report's parts, on the data path
    #[inline]
    fn step(
        &mut self,
        stats: &RuleStats,
        i: usize,
        r: &Rule,
        ns: u64,
        agg: Agg,
        key: &[u8],
        v: u64,
        t: u64,
    ) -> Option<u64> {
        let key = &key[..key.len().min(MAX_KEY)];
        let h =
            dta_store::hash::fnv1a64(key) ^ ((i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let generation = self.generation;
        let s = &mut self.state[h as usize & self.mask];
        let mine = s.in_use
            && s.generation == generation
            && s.rule == i as u16
            && &s.key[..s.key_len as usize] == key;
        let live = s.in_use && s.generation == generation && t < s.start_ns.saturating_add(ns);
        if !mine || !live {
            if !mine && live {
                bump(&stats.state_evictions);
            }
            *s = Slot {
                generation,
                start_ns: t,
                acc: agg.start(),
                key: [0; MAX_KEY],
                rule: i as u16,
                key_len: key.len() as u8,
                in_use: true,
                fired: false,
            };
            s.key[..key.len()].copy_from_slice(key);
        }
        s.acc = agg.step(s.acc, v);
        if !r.when.holds(s.acc) {
            return None;
        }
        let acts = match r.action {
            Action::Drop | Action::Immediate => true,
            Action::Append { .. } | Action::Write { .. } => !std::mem::replace(&mut s.fired, true),
        };
        acts.then_some(s.acc)
    }
}

/// Queue the derived report of action `a` for `key` and `value`.
fn derive(
    outputs: &mut Vec<Derived>,
    stats: &RuleStats,
    a: Action,
    immediate: bool,
    key: &[u8],
    value: u64,
) {
    if outputs.len() >= OUTPUTS {
        bump(&stats.derived_overflow);
        return;
    }
    let mut d = Derived {
        kind: DerivedKind::Append { list: 0 },
        key: [0; MAX_KEY],
        key_len: 0,
        data: [0; MAX_OUT],
        data_len: 0,
        immediate,
    };
    let vb = value.to_be_bytes();
    match a {
        Action::Append {
            list,
            entry,
            entry_len,
        } => {
            let e = entry_len as usize;
            let fits = match entry {
                Entry::Key => key.len() <= e,
                Entry::KeyValue => key.len() + 8 <= e,
                Entry::Value => 8 <= e,
            };
            if !fits || e > MAX_OUT {
                bump(&stats.derived_unfit);
                return;
            }
            match entry {
                Entry::Key => d.data[..key.len()].copy_from_slice(key),
                Entry::KeyValue => {
                    d.data[..key.len()].copy_from_slice(key);
                    d.data[key.len()..key.len() + 8].copy_from_slice(&vb);
                }
                Entry::Value => d.data[e - 8..e].copy_from_slice(&vb),
            }
            d.kind = DerivedKind::Append { list };
            d.data_len = entry_len;
        }
        Action::Write {
            key_len,
            data_len,
            redundancy,
        } => {
            let dl = data_len as usize;
            if key.len() != key_len as usize || dl > MAX_OUT {
                bump(&stats.derived_unfit);
                return;
            }
            d.key[..key.len()].copy_from_slice(key);
            d.key_len = key_len;
            // The value, big-endian, right-aligned; saturated when the data is narrower.
            let w = dl.min(8);
            let v = if w < 8 && value >> (8 * w) != 0 {
                (1u64 << (8 * w)) - 1
            } else {
                value
            };
            d.data[dl - w..dl].copy_from_slice(&v.to_be_bytes()[8 - w..]);
            d.data_len = data_len;
            d.kind = DerivedKind::Write { redundancy };
        }
        Action::Immediate | Action::Drop => return,
    }
    bump(&stats.derived);
    outputs.push(d);
}

/// The rules' view of `report`: its key (an Append's list id, a sketch's id, big-endian) and
/// data (a Key-Increment's counter and a postcard's value, big-endian).
fn view<'a>(report: &Report<'a>, kb: &'a mut [u8; 4], db: &'a mut [u8; 8]) -> View<'a> {
    match *report {
        Report::KeyWrite { key, data, .. } => View {
            primitive: PrimitiveName::KeyWrite,
            key,
            data,
            id: None,
        },
        Report::KeyIncrement { key, counter, .. } => {
            *db = counter.to_be_bytes();
            View {
                primitive: PrimitiveName::KeyIncrement,
                key,
                data: &db[..],
                id: None,
            }
        }
        Report::Append { list_id, data, .. } => {
            *kb = list_id.to_be_bytes();
            View {
                primitive: PrimitiveName::Append,
                key: &kb[..],
                data,
                id: None,
            }
        }
        Report::Postcard { key, value, .. } => {
            db[..4].copy_from_slice(&value.to_be_bytes());
            View {
                primitive: PrimitiveName::Postcarding,
                key,
                data: &db[..4],
                id: None,
            }
        }
        Report::SketchColumn {
            sketch_id, data, ..
        } => {
            *kb = (sketch_id as u32).to_be_bytes();
            View {
                primitive: PrimitiveName::SketchMerge,
                key: &kb[..],
                data,
                id: Some(sketch_id as u32),
            }
        }
    }
}

/// `report` with its immediate flag set.
fn with_immediate<'a>(report: &Report<'a>) -> Report<'a> {
    let mut r = *report;
    match &mut r {
        Report::KeyWrite { immediate, .. }
        | Report::KeyIncrement { immediate, .. }
        | Report::Append { immediate, .. }
        | Report::Postcard { immediate, .. }
        | Report::SketchColumn { immediate, .. } => *immediate = true,
    }
    r
}

#[cfg(test)]
mod tests;
