//! Translator rules in the XDP program (docs/rules.md "In the XDP translator"): the rules a
//! [`XdpSplit`] gives the driver, written into the program's two-generation rule map, and
//! their per-rule, per-CPU hit counters read back as the userspace rules' counter set
//! ([`RuleCounter`]).

use aya::maps::{Array, PerCpuArray, PerCpuValues};
use dta_store::StoreKind;
use dta_translator::rules::{
    CmpOp, Cond, Entry, Field, PrimitiveName, RuleCounter, XdpAction, XdpRule, XdpSplit,
    MAX_FIELDS, MAX_RULES,
};
use serde::Serialize;

use crate::{XdpError, XdpTranslator};

/// `struct xr_field` of the C source.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct XrField {
    value: u64,
    mask: u64,
    offset: u16,
    width: u8,
    op: u8,
    pad: u32,
}

/// `struct xr_rule` of the C source.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct XrRule {
    prim: u32,
    key_len: u32,
    data_len: u32,
    kmatch_len: u32,
    kmask: [u64; 2],
    kvalue: [u64; 2],
    nfields: u32,
    action: u32,
    list: u32,
    entry: u32,
    entry_len: u32,
    pad: u32,
    value: XrField,
    fields: [XrField; MAX_FIELDS],
}

/// `struct xr_set` of the C source: one generation of rules.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct XrSet {
    n: u32,
    ap_slot: u32,
    generation: u64,
    r: [XrRule; MAX_RULES],
}

// SAFETY: repr(C), plain integers, explicit padding fields (no implicit padding: 8-byte fields
// at 8-byte offsets, sizes multiples of 8).
unsafe impl aya::Pod for XrSet {}
// SAFETY: as above.
unsafe impl aya::Pod for XrRule {}

const XR_DROP: u32 = 1;
const XR_APPEND: u32 = 2;

fn op_code(op: CmpOp) -> u8 {
    match op {
        CmpOp::Eq => 0,
        CmpOp::Ne => 1,
        CmpOp::Lt => 2,
        CmpOp::Le => 3,
        CmpOp::Gt => 4,
        CmpOp::Ge => 5,
    }
}

fn xr_field(f: Field, c: Cond, mask: u64) -> XrField {
    XrField {
        value: c.value,
        mask,
        offset: f.offset,
        width: f.width,
        op: op_code(c.op),
        pad: 0,
    }
}

/// The program's form of `r`, or why it has none (a primitive the program holds no store of).
fn xr_rule(r: &XdpRule<'_>) -> Result<XrRule, XdpError> {
    let prim = match r.primitive {
        PrimitiveName::KeyWrite => StoreKind::KeyWrite,
        PrimitiveName::KeyIncrement => StoreKind::KeyIncrement,
        PrimitiveName::Append => StoreKind::Append,
        PrimitiveName::Postcarding | PrimitiveName::SketchMerge => {
            return Err(XdpError::Rules(format!(
                "rule {:?}: the XDP program holds no {:?} store",
                r.name, r.primitive
            )))
        }
    };
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let mut x = XrRule {
        prim: prim as u32,
        key_len: r.shape.key_len.unwrap_or(0) as u32,
        data_len: r.shape.data_len.unwrap_or(0) as u32,
        kmatch_len: r.key.len as u32,
        kmask: [word(&r.key.mask[..8]), word(&r.key.mask[8..])],
        kvalue: [word(&r.key.value[..8]), word(&r.key.value[8..])],
        nfields: r.fields.len() as u32,
        value: xr_field(r.value, r.when, u64::MAX),
        ..Default::default()
    };
    for (i, (f, c, m)) in r.fields.iter().enumerate() {
        x.fields[i] = xr_field(*f, *c, *m);
    }
    match r.action {
        XdpAction::Drop => x.action = XR_DROP,
        XdpAction::Append {
            list,
            entry,
            entry_len,
        } => {
            x.action = XR_APPEND;
            x.list = list;
            x.entry = match entry {
                Entry::Key => 0,
                Entry::KeyValue => 1,
                Entry::Value => 2,
            };
            x.entry_len = entry_len as u32;
        }
    }
    Ok(x)
}

/// The counters of one rule the program runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct XdpRuleCounts {
    pub name: String,
    /// The [`RuleCounter`] set, by name (those the program counts).
    pub counters: serde_json::Map<String, serde_json::Value>,
}

/// The rules in the driver: the generation installed and the counters, in the userspace
/// rules' counter set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct XdpRuleStats {
    /// Rule sets installed (0: none yet).
    pub generation: u64,
    /// Totals over every rule and generation, by [`RuleCounter`] name.
    pub totals: serde_json::Map<String, serde_json::Value>,
    /// The rules of the installed generation, in order.
    pub rules: Vec<XdpRuleCounts>,
}

impl XdpRuleStats {
    /// A total by counter.
    pub fn total(&self, c: RuleCounter) -> u64 {
        self.totals
            .get(c.name())
            .and_then(|v| v.as_u64())
            .unwrap_or(0)
    }
}

/// The counters the program keeps per rule.
const COUNTED: [RuleCounter; 5] = [
    RuleCounter::Matched,
    RuleCounter::Fired,
    RuleCounter::Dropped,
    RuleCounter::Derived,
    RuleCounter::DerivedUnfit,
];

/// Counters per rule: `struct rule_counts` of the C source, indexed by [`RuleCounter`].
const N_RC: usize = RuleCounter::ALL.len();
type Counts = [u64; N_RC];

/// Userspace state of the rule map: which generation slot is in use and what earlier
/// generations counted.
#[derive(Debug, Default)]
pub(crate) struct RuleSlots {
    /// The slot in use (0 or 1) once a set was installed.
    active: Option<usize>,
    names: [Vec<String>; 2],
    generation: u64,
    /// Counts of generations no longer installed, by [`RuleCounter`] index.
    retired: Counts,
}

impl XdpTranslator {
    /// Install the driver's share of a rule set (`split.xdp`, lowered by
    /// `RuleSet::split_xdp`): written into the generation slot not in use, whose counters are
    /// first folded into the totals and zeroed, then made current with one array write
    /// (`dta_rules_on`). A datagram reads the current slot once, so each report runs under
    /// exactly one set: a reload neither loses nor doubles a report. An empty share turns the
    /// rules off. Returns the generation.
    pub fn install_rules(&mut self, split: &XdpSplit<'_>) -> Result<u64, XdpError> {
        if split.xdp.len() > MAX_RULES {
            return Err(XdpError::Rules(format!(
                "{} rules, at most {MAX_RULES}",
                split.xdp.len()
            )));
        }
        let ap_slot = self
            .stores
            .iter()
            .find(|s| s.region.header().kind == StoreKind::Append)
            .map(|s| s.slot as u32);
        let mut set = XrSet {
            n: split.xdp.len() as u32,
            ap_slot: ap_slot.unwrap_or(0),
            generation: self.rule_slots.generation + 1,
            r: [XrRule::default(); MAX_RULES],
        };
        for (i, r) in split.xdp.iter().enumerate() {
            if matches!(r.action, XdpAction::Append { .. }) && ap_slot.is_none() {
                return Err(XdpError::Rules(format!(
                    "rule {:?} appends, but the XDP program holds no Append store",
                    r.name
                )));
            }
            set.r[i] = xr_rule(r)?;
        }
        let next = match self.rule_slots.active {
            Some(0) => 1,
            _ => 0,
        };
        // Retire what the slot counted under its previous generation.
        let nr = aya::util::nr_cpus().map_err(|(m, e)| XdpError::Io(m.into(), e))?;
        {
            let mut st: PerCpuArray<_, Counts> = PerCpuArray::try_from(
                self.ebpf
                    .map_mut("dta_rule_stats")
                    .ok_or_else(|| XdpError::MissingMap("dta_rule_stats".into()))?,
            )?;
            for r in 0..MAX_RULES {
                let k = rule_key(next, r);
                let per_cpu = st.get(&k, 0)?;
                let mut any = false;
                for v in per_cpu.iter() {
                    for (t, x) in self.rule_slots.retired.iter_mut().zip(v) {
                        *t += x;
                        any |= *x != 0;
                    }
                }
                if any {
                    let zeros = PerCpuValues::try_from(vec![[0u64; N_RC]; nr])
                        .map_err(|e| XdpError::Io("per-CPU zeros".into(), e))?;
                    st.set(k, zeros, 0)?;
                }
            }
        }
        {
            let mut m: Array<_, XrSet> = Array::try_from(
                self.ebpf
                    .map_mut("dta_rules")
                    .ok_or_else(|| XdpError::MissingMap("dta_rules".into()))?,
            )?;
            m.set(next as u32, set, 0)?;
        }
        {
            let mut on: Array<_, u32> = Array::try_from(
                self.ebpf
                    .map_mut("dta_rules_on")
                    .ok_or_else(|| XdpError::MissingMap("dta_rules_on".into()))?,
            )?;
            on.set(
                0,
                if split.xdp.is_empty() {
                    0
                } else {
                    next as u32 + 1
                },
                0,
            )?;
        }
        self.rule_slots.names[next] = split.xdp.iter().map(|r| r.name.to_string()).collect();
        self.rule_slots.active = Some(next);
        self.rule_slots.generation += 1;
        Ok(self.rule_slots.generation)
    }

    /// The rules' counters, summed over CPUs: totals over all generations and, per rule, those
    /// of the installed one.
    pub fn rule_stats(&self) -> Result<XdpRuleStats, XdpError> {
        let st: PerCpuArray<_, Counts> = PerCpuArray::try_from(
            self.ebpf
                .map("dta_rule_stats")
                .ok_or_else(|| XdpError::MissingMap("dta_rule_stats".into()))?,
        )?;
        let mut totals = self.rule_slots.retired;
        let mut rules = vec![];
        for slot in 0..2 {
            for r in 0..MAX_RULES {
                let mut sum = [0u64; N_RC];
                for v in st.get(&rule_key(slot, r), 0)?.iter() {
                    for (s, x) in sum.iter_mut().zip(v) {
                        *s += x;
                    }
                }
                for (t, x) in totals.iter_mut().zip(&sum) {
                    *t += x;
                }
                if self.rule_slots.active == Some(slot) && r < self.rule_slots.names[slot].len() {
                    rules.push(XdpRuleCounts {
                        name: self.rule_slots.names[slot][r].clone(),
                        counters: COUNTED
                            .iter()
                            .map(|&c| (c.name().to_string(), sum[c as usize].into()))
                            .collect(),
                    });
                }
            }
        }
        totals[RuleCounter::Reloads as usize] = self.rule_slots.generation.saturating_sub(1);
        Ok(XdpRuleStats {
            generation: self.rule_slots.generation,
            totals: RuleCounter::ALL
                .iter()
                .map(|&c| (c.name().to_string(), totals[c as usize].into()))
                .collect(),
            rules,
        })
    }
}

/// Rule `r`'s counters in generation slot `slot` (`dta_rule_stats`).
fn rule_key(slot: usize, r: usize) -> u32 {
    (slot * MAX_RULES + r) as u32
}
