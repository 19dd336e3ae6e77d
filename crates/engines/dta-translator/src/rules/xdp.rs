//! The rules the XDP program runs (docs/rules.md "In the XDP translator"): a compiled rule
//! lowered to the simple match -> Append / drop form the program evaluates per report, and the
//! split of a rule set between the driver and the userspace translator. One compiler: the XDP
//! form is taken from the compiled [`Rule`], never parsed again.

use super::{Action, Cond, Entry, Field, KeyMatch, Over, PrimitiveName, Rule, RuleSet, Shape};

/// What a rule the XDP program runs does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpAction {
    /// The report is not applied; evaluation ends.
    Drop,
    /// Append an entry built from the report to `list` of the Append store (held in the driver).
    Append {
        list: u32,
        entry: Entry,
        entry_len: u8,
    },
}

/// A rule in the form the XDP program evaluates: match on primitive, store shape, key
/// prefix / mask and up to [`super::MAX_FIELDS`] field tests, test the value, act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpRule<'a> {
    /// The rule's name (per-rule counters are reported under it).
    pub name: &'a str,
    /// The rule's position in its set (rules run in this order).
    pub index: usize,
    pub primitive: PrimitiveName,
    pub shape: Shape,
    pub key: KeyMatch,
    /// The field tests: field, condition, mask applied before the comparison.
    pub fields: &'a [(Field, Cond, u64)],
    /// The value `when` tests (width 0: the first 8 bytes of the data, or all if fewer).
    pub value: Field,
    pub when: Cond,
    pub action: XdpAction,
}

/// Why a rule runs in the userspace translator rather than in the XDP program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotInXdp {
    /// Its primitive's stores are in userspace (Postcarding, Sketch-Merge, or stores another
    /// userspace rule touches).
    Primitive,
    /// It aggregates (over a path or a window): state the program does not keep.
    Aggregate,
    /// Its action is `write` or `immediate` (the program neither derives Key-Writes nor
    /// notifies).
    Action,
    /// It appends with the immediate flag (the program does not notify).
    DerivedImmediate,
    /// It appends while the Append store is in userspace (two writers would share its heads).
    AppendInUserspace,
}

impl NotInXdp {
    pub fn describe(self) -> &'static str {
        match self {
            NotInXdp::Primitive => "its primitive's stores are in userspace",
            NotInXdp::Aggregate => "it aggregates",
            NotInXdp::Action => "its action is write or immediate",
            NotInXdp::DerivedImmediate => "it appends with the immediate flag",
            NotInXdp::AppendInUserspace => "the Append store is in userspace",
        }
    }
}

/// A rule set split between the XDP program and the userspace translator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpSplit<'a> {
    /// The rules the program runs, in set order.
    pub xdp: Vec<XdpRule<'a>>,
    /// The rules left to userspace (index in the set, name, why).
    pub userspace: Vec<(usize, &'a str, NotInXdp)>,
    /// The primitives whose stores must stay in userspace: those not in the driver to begin
    /// with and every primitive a userspace rule looks at or writes.
    pub userspace_primitives: Vec<PrimitiveName>,
}

impl Rule {
    /// The primitives this rule looks at or writes (its own; Append for `append`, Key-Write for
    /// `write`).
    fn touched(&self) -> [Option<PrimitiveName>; 2] {
        let derived = match self.action {
            Action::Append { .. } => Some(PrimitiveName::Append),
            Action::Write { .. } => Some(PrimitiveName::KeyWrite),
            Action::Immediate | Action::Drop => None,
        };
        [Some(self.primitive), derived]
    }

    /// This rule in the XDP program's form, given the primitives whose stores are in userspace.
    pub fn lower_xdp(
        &self,
        index: usize,
        userspace: &[PrimitiveName],
    ) -> Result<XdpRule<'_>, NotInXdp> {
        if userspace.contains(&self.primitive) {
            return Err(NotInXdp::Primitive);
        }
        if self.agg.is_some() || self.over != Over::Report {
            return Err(NotInXdp::Aggregate);
        }
        let action = match self.action {
            Action::Drop => XdpAction::Drop,
            Action::Append { .. } if self.derived_immediate => {
                return Err(NotInXdp::DerivedImmediate)
            }
            Action::Append { .. } if userspace.contains(&PrimitiveName::Append) => {
                return Err(NotInXdp::AppendInUserspace)
            }
            Action::Append {
                list,
                entry,
                entry_len,
            } => XdpAction::Append {
                list,
                entry,
                entry_len,
            },
            Action::Write { .. } | Action::Immediate => return Err(NotInXdp::Action),
        };
        Ok(XdpRule {
            name: &self.name,
            index,
            primitive: self.primitive,
            shape: self.shape,
            key: self.key,
            fields: &self.fields[..self.nfields as usize],
            value: self.value,
            when: self.when,
            action,
        })
    }
}

impl RuleSet {
    /// Split this set between the XDP program and userspace. `userspace` lists the primitives
    /// whose stores are in userspace whatever the rules (those the program cannot hold, or
    /// those already placed there by a running translator). A rule runs in the driver when it
    /// lowers ([`Rule::lower_xdp`]); every primitive a userspace rule touches joins
    /// `userspace_primitives`, which can push further rules to userspace (repeated until
    /// nothing changes: at most one round per primitive).
    pub fn split_xdp(&self, userspace: &[PrimitiveName]) -> XdpSplit<'_> {
        let mut user: Vec<PrimitiveName> = userspace.to_vec();
        loop {
            let mut grew = false;
            for (i, r) in self.rules.iter().enumerate() {
                if r.lower_xdp(i, &user).is_ok() {
                    continue;
                }
                for p in r.touched().into_iter().flatten() {
                    if !user.contains(&p) {
                        user.push(p);
                        grew = true;
                    }
                }
            }
            if !grew {
                break;
            }
        }
        let mut split = XdpSplit {
            xdp: vec![],
            userspace: vec![],
            userspace_primitives: user.clone(),
        };
        for (i, r) in self.rules.iter().enumerate() {
            match r.lower_xdp(i, &user) {
                Ok(x) => split.xdp.push(x),
                Err(why) => split.userspace.push((i, &r.name, why)),
            }
        }
        split
    }
}
