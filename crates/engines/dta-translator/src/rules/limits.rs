// The rules' bounds and counter set: one definition for the userspace rule engine (this crate)
// and the XDP program (crates/engines/dta-xdp/build.rs `include!`s this file and hands each item to
// clang as a `-D` define, so bpf/dta_xdp.bpf.c lays out its rule map and counters from it).
// Keep it free of `use` and crate paths.

/// Most rules in a set (also the XDP program's rule slots per generation).
pub const MAX_RULES: usize = 32;
/// Most field tests of a rule.
pub const MAX_FIELDS: usize = 4;
/// Longest key a rule matches or a window state slot holds (the native protocol's longest).
pub const MAX_KEY: usize = 16;
/// A field lies within the first this many bytes of the data (the longest report data).
pub const MAX_DATA: usize = 64;

/// The rules' counters, one set for the userspace engine (`RuleStats`) and the XDP program's
/// per-rule, per-CPU counters (which count `Matched`, `Fired`, `Dropped`, `Derived` and
/// `DerivedUnfit`; the others are userspace's alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleCounter {
    /// Reports (or paths) a rule matched.
    Matched,
    /// Actions taken (the condition held).
    Fired,
    /// Reports and paths dropped by a rule.
    Dropped,
    /// Immediate flags set by a rule.
    Flagged,
    /// Derived reports (Append, Write) queued.
    Derived,
    /// Derived reports lost because the queue was full.
    DerivedOverflow,
    /// Derived reports whose key did not fit the target.
    DerivedUnfit,
    /// Window states evicted by another key before their window ended.
    StateEvictions,
    /// Rule sets installed after the first.
    Reloads,
}

impl RuleCounter {
    /// Every counter, in index order.
    pub const ALL: [RuleCounter; 9] = [
        RuleCounter::Matched,
        RuleCounter::Fired,
        RuleCounter::Dropped,
        RuleCounter::Flagged,
        RuleCounter::Derived,
        RuleCounter::DerivedOverflow,
        RuleCounter::DerivedUnfit,
        RuleCounter::StateEvictions,
        RuleCounter::Reloads,
    ];

    /// The counter's name in `--json` output and metrics; the XDP program's define is
    /// `RC_` and this name in upper case.
    pub const fn name(self) -> &'static str {
        match self {
            RuleCounter::Matched => "matched",
            RuleCounter::Fired => "fired",
            RuleCounter::Dropped => "dropped",
            RuleCounter::Flagged => "flagged",
            RuleCounter::Derived => "derived",
            RuleCounter::DerivedOverflow => "derived_overflow",
            RuleCounter::DerivedUnfit => "derived_unfit",
            RuleCounter::StateEvictions => "state_evictions",
            RuleCounter::Reloads => "reloads",
        }
    }
}
