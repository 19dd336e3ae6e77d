//! The rules as written in `dta.toml` (`[[translator.rules]]`) and their compilation, against
//! the stores they name, into the bounded form the data path evaluates ([`super::RuleSet`]).
//! Every mistake is refused here with a message naming the rule and the setting.

use serde::{Deserialize, Serialize};

use dta_store::StoreSpec;

use super::{
    Action, Agg, CmpOp, Cond, Entry, Field, KeyMatch, Over, Rule, RuleSet, Shape, MAX_FIELDS,
    MAX_KEY, MAX_RULES, MAX_WINDOW_MS,
};

/// A report's primitive, as a rule names it: spelled as a store's `kind` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PrimitiveName {
    KeyWrite,
    KeyIncrement,
    Postcarding,
    Append,
    SketchMerge,
}

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionName {
    /// Append an entry (`entry`) to list `list` of the Append store.
    Append,
    /// Key-Write the value under the report's key into store `target`.
    Write,
    /// Set the report's (or path's) immediate flag.
    Immediate,
    /// Do not apply the report (or write the path).
    Drop,
}

/// What an Append action appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum EntryName {
    /// The report's key, zero-padded to the entry length.
    #[default]
    Key,
    /// The key, then the value (big-endian u64) after it.
    KeyValue,
    /// The value alone (big-endian u64, right-aligned in the entry).
    Value,
}

/// Which reports an aggregate is taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverName {
    /// The postcards of one flow's path, when the translator writes the path.
    Path,
    /// A key's reports in a tumbling window of `window_ms`.
    Window,
}

/// A big-endian unsigned field of the report's data: `width` bytes at `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldConfig {
    pub offset: u16,
    pub width: u8,
}

/// A field compared with a constant (after `mask`, if given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldMatchConfig {
    pub offset: u16,
    pub width: u8,
    pub op: CmpOp,
    pub value: u64,
    #[serde(default)]
    pub mask: Option<u64>,
}

/// A condition on the value (or the aggregate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CondConfig {
    pub op: CmpOp,
    pub value: u64,
}

/// One rule (docs/rules.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Names the rule in messages and counters.
    pub name: String,
    /// The primitive of the reports the rule looks at.
    pub primitive: PrimitiveName,
    /// Only reports routed to this store (by name).
    #[serde(default)]
    pub store: Option<String>,
    /// Only keys starting with these bytes (hex).
    #[serde(default)]
    pub key_prefix: Option<String>,
    /// Only keys whose bytes under this mask (hex) equal `key_value` under it.
    #[serde(default)]
    pub key_mask: Option<String>,
    #[serde(default)]
    pub key_value: Option<String>,
    /// Only reports whose data fields compare so (all of them).
    #[serde(default)]
    pub fields: Vec<FieldMatchConfig>,
    /// The value the rule aggregates or tests: a field of the data. Default: the first 8 bytes
    /// of the data (a postcard's value, a Key-Increment counter).
    #[serde(default)]
    pub value: Option<FieldConfig>,
    #[serde(default)]
    pub aggregate: Option<Agg>,
    #[serde(default)]
    pub over: Option<OverName>,
    #[serde(default)]
    pub window_ms: Option<u64>,
    /// The condition on the value (no aggregate) or the aggregate; none: always.
    #[serde(default)]
    pub when: Option<CondConfig>,
    pub action: ActionName,
    /// Append: the list.
    #[serde(default)]
    pub list: Option<u32>,
    /// Append: what the entry holds.
    #[serde(default)]
    pub entry: Option<EntryName>,
    /// Write: the Key-Write store.
    #[serde(default)]
    pub target: Option<String>,
    /// Append and Write: the derived report carries the immediate flag.
    #[serde(default)]
    pub immediate: bool,
}

/// The stores a rule set is compiled against: name and geometry, in any order.
pub type StoreCatalog<'a> = [(&'a str, &'a StoreSpec)];

/// Parse hex (an even number of digits, `0x` allowed) into at most [`MAX_KEY`] bytes.
fn hex_key(s: &str) -> Result<Vec<u8>, String> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.len() % 2 != 0 || s.is_empty() {
        return Err(format!("{s:?}: an even, non-zero number of hex digits"));
    }
    let b = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| format!("{s:?}: not hex")))
        .collect::<Result<Vec<u8>, _>>()?;
    if b.len() > MAX_KEY {
        return Err(format!("{s:?}: at most {MAX_KEY} bytes"));
    }
    Ok(b)
}

fn field(offset: u16, width: u8) -> Result<Field, String> {
    if !(1..=8).contains(&width) {
        return Err(format!("width = {width}: 1..=8 bytes"));
    }
    if offset as usize + width as usize > super::MAX_DATA {
        return Err(format!(
            "offset {offset} + width {width}: past the longest data ({} bytes)",
            super::MAX_DATA
        ));
    }
    Ok(Field { offset, width })
}

/// The shape of the reports routed to store `spec` of primitive `p`, or why a rule on `p`
/// cannot name it.
fn shape_of(p: PrimitiveName, spec: &StoreSpec) -> Result<Shape, String> {
    match (p, spec) {
        (PrimitiveName::KeyWrite, StoreSpec::KeyWrite(s)) => Ok(Shape {
            key_len: Some(s.key_len),
            data_len: Some(s.data_len),
            id: None,
        }),
        (PrimitiveName::KeyIncrement, StoreSpec::KeyIncrement(s)) => Ok(Shape {
            key_len: Some(s.key_len),
            data_len: None,
            id: None,
        }),
        (PrimitiveName::Postcarding, StoreSpec::Postcarding(s)) => Ok(Shape {
            key_len: Some(s.key_len),
            data_len: None,
            id: None,
        }),
        (PrimitiveName::Append, StoreSpec::Append(_)) => Ok(Shape::ANY),
        (PrimitiveName::SketchMerge, StoreSpec::SketchMerge(s)) => Ok(Shape {
            key_len: None,
            data_len: None,
            id: Some(s.sketch_id as u32),
        }),
        _ => Err(format!("is not a {p:?} store")),
    }
}

impl RuleSet {
    /// Compile `rules` against `stores` (at most [`MAX_RULES`]); `generation` tells this set
    /// from the one it replaces (window state of an older set is not reused).
    pub fn compile(
        rules: &[RuleConfig],
        stores: &StoreCatalog<'_>,
        generation: u64,
    ) -> Result<RuleSet, String> {
        if rules.len() > MAX_RULES {
            return Err(format!(
                "translator.rules: {} rules, at most {MAX_RULES}",
                rules.len()
            ));
        }
        let mut out = Vec::with_capacity(rules.len());
        for (i, r) in rules.iter().enumerate() {
            if rules[..i].iter().any(|o| o.name == r.name) {
                return Err(format!(
                    "translator.rules: two rules are named {:?}",
                    r.name
                ));
            }
            out.push(compile_one(r, stores).map_err(|e| format!("rule {:?}: {e}", r.name))?);
        }
        Ok(RuleSet {
            rules: out,
            generation,
        })
    }
}

fn compile_one(r: &RuleConfig, stores: &StoreCatalog<'_>) -> Result<Rule, String> {
    if r.name.is_empty() || r.name.len() > 64 {
        return Err("name: 1..=64 characters".into());
    }
    let find = |n: &str| {
        stores
            .iter()
            .find(|(name, _)| *name == n)
            .map(|(_, s)| *s)
            .ok_or_else(|| format!("no store named {n:?}"))
    };
    let shape = match &r.store {
        Some(n) => shape_of(r.primitive, find(n)?).map_err(|e| format!("store {n:?} {e}"))?,
        None => Shape::ANY,
    };
    let mut key = KeyMatch::ANY;
    if let Some(p) = &r.key_prefix {
        let b = hex_key(p).map_err(|e| format!("key_prefix {e}"))?;
        key.len = b.len() as u8;
        key.value[..b.len()].copy_from_slice(&b);
        key.mask[..b.len()].fill(0xff);
    }
    match (&r.key_mask, &r.key_value) {
        (None, None) => {}
        (Some(m), Some(v)) => {
            if r.key_prefix.is_some() {
                return Err("key_prefix and key_mask: give one of them".into());
            }
            let m = hex_key(m).map_err(|e| format!("key_mask {e}"))?;
            let v = hex_key(v).map_err(|e| format!("key_value {e}"))?;
            if m.len() != v.len() {
                return Err(format!(
                    "key_mask ({} bytes) and key_value ({} bytes) differ in length",
                    m.len(),
                    v.len()
                ));
            }
            key.len = m.len() as u8;
            for i in 0..m.len() {
                key.mask[i] = m[i];
                key.value[i] = v[i] & m[i];
            }
        }
        _ => return Err("key_mask and key_value go together".into()),
    }
    if let (Some(kl), true) = (shape.key_len, key.len > 0) {
        if key.len > kl {
            return Err(format!(
                "the key match is {} bytes, longer than the store's {kl}-byte keys",
                key.len
            ));
        }
    }
    if r.fields.len() > MAX_FIELDS {
        return Err(format!("fields: at most {MAX_FIELDS}"));
    }
    let mut fields = [(Field::ZERO, Cond::ALWAYS, u64::MAX); MAX_FIELDS];
    for (i, f) in r.fields.iter().enumerate() {
        let fl = field(f.offset, f.width).map_err(|e| format!("fields[{i}]: {e}"))?;
        fields[i] = (
            fl,
            Cond {
                op: f.op,
                value: f.value,
            },
            f.mask.unwrap_or(u64::MAX),
        );
    }
    let value = match r.value {
        Some(f) => field(f.offset, f.width).map_err(|e| format!("value: {e}"))?,
        None => Field::WHOLE,
    };
    let over = match (r.aggregate, r.over, r.window_ms) {
        (None, None, None) => Over::Report,
        (None, _, _) => return Err("over and window_ms need an aggregate".into()),
        (Some(_), None, _) => return Err("aggregate needs over = \"path\" or \"window\"".into()),
        (Some(_), Some(OverName::Path), None) => {
            if r.primitive != PrimitiveName::Postcarding {
                return Err(
                    "over = \"path\" aggregates postcards (primitive = \"postcarding\")".into(),
                );
            }
            Over::Path
        }
        (Some(_), Some(OverName::Path), Some(_)) => {
            return Err("window_ms applies to over = \"window\"".into())
        }
        (Some(_), Some(OverName::Window), w) => {
            let w = w.ok_or("over = \"window\" needs window_ms")?;
            if !(1..=MAX_WINDOW_MS).contains(&w) {
                return Err(format!("window_ms = {w}: 1..={MAX_WINDOW_MS}"));
            }
            Over::Window { ns: w * 1_000_000 }
        }
    };
    let agg = r.aggregate;
    let when = r
        .when
        .map(|c| Cond {
            op: c.op,
            value: c.value,
        })
        .unwrap_or(Cond::ALWAYS);
    let misplaced = |what: &str, set: bool| {
        if set {
            Err(format!("{what} does not apply to action {:?}", r.action))
        } else {
            Ok(())
        }
    };
    let action = match r.action {
        ActionName::Append => {
            misplaced("target", r.target.is_some())?;
            let list = r.list.ok_or("action \"append\" needs list")?;
            let (_, spec) = stores
                .iter()
                .find(|(_, s)| matches!(s, StoreSpec::Append(_)))
                .ok_or("action \"append\": there is no Append store")?;
            let StoreSpec::Append(a) = spec else {
                unreachable!("found by kind")
            };
            if list >= a.lists {
                return Err(format!(
                    "list = {list}: the Append store has lists 0..{}",
                    a.lists
                ));
            }
            let entry = match r.entry.unwrap_or_default() {
                EntryName::Key => Entry::Key,
                EntryName::KeyValue => Entry::KeyValue,
                EntryName::Value => Entry::Value,
            };
            let need = match (entry, shape.key_len) {
                (Entry::Value, _) => 8,
                (Entry::Key, Some(k)) => k as usize,
                (Entry::KeyValue, Some(k)) => k as usize + 8,
                (Entry::Key | Entry::KeyValue, None) => 0,
            };
            if need > a.entry_len as usize {
                return Err(format!(
                    "entry {:?} takes {need} bytes, the Append store's entries are {}",
                    r.entry.unwrap_or_default(),
                    a.entry_len
                ));
            }
            Action::Append {
                list,
                entry,
                entry_len: a.entry_len,
            }
        }
        ActionName::Write => {
            misplaced("list", r.list.is_some())?;
            misplaced("entry", r.entry.is_some())?;
            let t = r.target.as_deref().ok_or("action \"write\" needs target")?;
            let StoreSpec::KeyWrite(kw) = find(t)? else {
                return Err(format!("target {t:?} is not a Key-Write store"));
            };
            match shape.key_len {
                Some(k) if k != kw.key_len => {
                    return Err(format!(
                        "target {t:?} has {}-byte keys, the matched store {k}-byte keys",
                        kw.key_len
                    ))
                }
                _ => {}
            }
            Action::Write {
                key_len: kw.key_len,
                data_len: kw.data_len,
                redundancy: kw.redundancy,
            }
        }
        ActionName::Immediate | ActionName::Drop => {
            misplaced("list", r.list.is_some())?;
            misplaced("entry", r.entry.is_some())?;
            misplaced("target", r.target.is_some())?;
            misplaced("immediate", r.immediate)?;
            if r.action == ActionName::Drop {
                Action::Drop
            } else {
                Action::Immediate
            }
        }
    };
    Ok(Rule {
        name: r.name.clone(),
        primitive: r.primitive,
        shape,
        key,
        fields,
        nfields: r.fields.len() as u8,
        value,
        agg,
        over,
        when,
        action,
        derived_immediate: r.immediate,
    })
}

impl PrimitiveName {
    /// The primitive whose reports store `spec` takes.
    pub fn of(spec: &StoreSpec) -> PrimitiveName {
        match spec {
            StoreSpec::KeyWrite(_) => PrimitiveName::KeyWrite,
            StoreSpec::KeyIncrement(_) => PrimitiveName::KeyIncrement,
            StoreSpec::Postcarding(_) => PrimitiveName::Postcarding,
            StoreSpec::Append(_) => PrimitiveName::Append,
            StoreSpec::SketchMerge(_) => PrimitiveName::SketchMerge,
        }
    }
}

/// The primitives `rules` look at or write (Append and Write actions): a translator that
/// applies reports without the rules (the XDP program) must leave every store of these
/// primitives to the one that runs them, or a report would skip its rules (or two writers
/// would share an Append list).
pub fn primitives_touched(rules: &[RuleConfig]) -> Vec<PrimitiveName> {
    let mut out = vec![];
    for r in rules {
        let derived = match r.action {
            ActionName::Append => Some(PrimitiveName::Append),
            ActionName::Write => Some(PrimitiveName::KeyWrite),
            ActionName::Immediate | ActionName::Drop => None,
        };
        for p in std::iter::once(r.primitive).chain(derived) {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}
