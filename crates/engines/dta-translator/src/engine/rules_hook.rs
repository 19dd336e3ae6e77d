//! Where the rules ([`crate::rules`]) and the push notifications meet the data path: every
//! received report is checked before it is staged or dispatched (it may be dropped or flagged
//! immediate), every path leaving the Postcarding cache before it is written; the reports the
//! rules derive (Append entries, Key-Write results) are applied right after, through the same
//! dispatch, without being checked again; and each flagged Key-Write or Key-Increment report
//! is announced ([`Sinks::announce`]) once its writes are issued (Append batches, paths and
//! sketch columns are announced where they are written).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use dta_wire::{Opcode, Report};

use super::Translator;
use crate::postcard::{Chunk, MAX_KEY};
use crate::rules::{Derived, PathVerdict, RuleEngine, Rules, Verdict, MAX_RULES, OUTPUTS};
use crate::sinks::{Flagged, Sinks};

/// The source derived reports are applied as when no datagram caused them (a path the timer
/// wrote out).
const TIMER_SOURCE: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// Flagged Key-Write and Key-Increment reports held until their writes are issued.
const FLAGGED: usize = 64;

/// A flagged Key-Write or Key-Increment report: its store's shape and key.
#[derive(Clone, Copy)]
struct FlaggedKey {
    primitive: Opcode,
    key: [u8; MAX_KEY],
    key_len: u8,
    data_len: u8,
}

/// A translator's rule engine, the buffer its derived reports are taken into, and the flagged
/// reports waiting to be announced.
pub(super) struct RuleHook {
    pub(super) engine: RuleEngine,
    taken: Vec<Derived>,
    flagged: Vec<FlaggedKey>,
}

impl RuleHook {
    pub(super) fn new(engine: RuleEngine) -> Self {
        RuleHook {
            engine,
            taken: Vec::with_capacity(OUTPUTS),
            flagged: Vec::with_capacity(FLAGGED),
        }
    }

    /// Whether one more report's derived reports and flag fit before the queues are drained.
    #[inline]
    pub(super) fn has_room(&self) -> bool {
        self.engine.has_room() && self.flagged.len() + MAX_RULES < FLAGGED
    }

    /// Whether derived reports or flagged reports wait for the stage to be written.
    #[inline]
    pub(super) fn waiting(&self) -> bool {
        self.engine.pending() > 0 || !self.flagged.is_empty()
    }

    /// Whether `chunk` is written, and with which immediate flag.
    #[inline]
    pub(super) fn path(&mut self, chunk: &Chunk) -> Option<Chunk> {
        match self.engine.check_path(chunk) {
            PathVerdict::Drop => None,
            PathVerdict::Write { immediate } => {
                let mut c = *chunk;
                c.immediate = immediate;
                Some(c)
            }
        }
    }

    /// Hold a flagged Key-Write or Key-Increment report until its write is issued.
    #[inline]
    pub(super) fn flag(&mut self, r: &Report<'_>) {
        let (primitive, key, data_len) = match *r {
            Report::KeyWrite { key, data, .. } => (Opcode::KeyWrite, key, data.len()),
            Report::KeyIncrement { key, .. } => (Opcode::KeyIncrement, key, 0),
            _ => return,
        };
        if self.flagged.len() < FLAGGED && key.len() <= MAX_KEY {
            let mut k = [0; MAX_KEY];
            k[..key.len()].copy_from_slice(key);
            self.flagged.push(FlaggedKey {
                primitive,
                key: k,
                key_len: key.len() as u8,
                data_len: data_len as u8,
            });
        }
    }
}

impl<S: Sinks> Translator<S> {
    /// Share `rules` (one per collector, replaced on reload) instead of this translator's own
    /// (compiled from its configuration).
    pub fn with_rules(mut self, rules: Arc<Rules>, state_entries: usize) -> Self {
        self.rules = RuleHook::new(RuleEngine::new(rules, state_entries));
        self
    }

    /// The rule set this translator evaluates (replace it to reload).
    pub fn rules(&self) -> &Arc<Rules> {
        self.rules.engine.shared()
    }

    /// The rules' verdict on a received report; `None`: dropped.
    #[inline]
    pub(super) fn ruled<'a>(&mut self, report: &Report<'a>, now: Instant) -> Option<Report<'a>> {
        if !self.rules.engine.active() {
            return Some(*report);
        }
        match self.rules.engine.check(report, now) {
            Verdict::Apply(r) => Some(r),
            Verdict::Drop => None,
        }
    }

    /// After a datagram's reports were written (from `src`, or by the timer): apply the
    /// reports the rules derived, then announce the flagged Key-Write and Key-Increment
    /// reports staged meanwhile.
    pub(super) fn finish_reports(&mut self, src: Option<SocketAddr>, now: Instant) {
        if self.rules.engine.pending() > 0 {
            let mut taken = std::mem::take(&mut self.rules.taken);
            self.rules.engine.take_outputs(&mut taken);
            let src = src.unwrap_or(TIMER_SOURCE);
            for d in &taken {
                self.apply(&d.report(), 0, src, now);
            }
            taken.clear();
            self.rules.taken = taken;
        }
        self.announce_flagged();
    }

    /// Announce the flagged Key-Write and Key-Increment reports held (their writes are
    /// issued).
    pub(super) fn announce_flagged(&mut self) {
        if self.rules.flagged.is_empty() {
            return;
        }
        let mut flagged = std::mem::take(&mut self.rules.flagged);
        for f in &flagged {
            let (kl, dl) = (f.key_len as usize, f.data_len as usize);
            let store = match f.primitive {
                Opcode::KeyWrite => self
                    .key_write
                    .iter()
                    .find(|r| r.layout.key_len() == kl && r.layout.data_len() == dl)
                    .map(|r| r.store),
                _ => self
                    .key_increment
                    .iter()
                    .find(|r| r.layout.key_len() == kl)
                    .map(|r| r.store),
            };
            if let Some(store) = store {
                self.sinks.announce(
                    store,
                    &Flagged {
                        primitive: f.primitive,
                        key: &f.key[..kl],
                        list: 0,
                        reports: 1,
                    },
                );
            }
        }
        flagged.clear();
        self.rules.flagged = flagged;
    }
}
