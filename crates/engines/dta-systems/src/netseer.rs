//! NetSeer ([DTA Table 2]: "Appending 18B loss event reports into network-wide list of packet
//! losses"). Each switch detects the packets lost on it or on its outgoing link, aggregates them
//! per (flow, reason) in a small event table, and every [`Params::window_ns`] (and at the end)
//! sends each entry as one 18-byte loss event, appended to its own list of
//! [`crate::APPEND_STORE`] (switch `s` appends to `lists::NETSEER.start + s % 16`).
//!
//! In the trace, a packet lost downstream of the monitoring point shows up as its
//! retransmission ([`SeqTracker`]); the loss is attributed to one switch of the flow's fat-tree
//! path ([`crate::trajectory::path`]) and one [`Reason`], both by a hash of the lost packet, so
//! the ground truth ([`truth`]) is computed from the packets alone.
//!
//! Entry (18 bytes, zero padded to [`crate::ENTRY_LEN`]): flow 5-tuple (13), switch ID (u16),
//! reason (u8), packets lost (u16, a full count splits into several events).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use serde::Serialize;

use dta_store::hash::{fmix64, fnv1a64};
use dta_wire::Report;

use crate::trace::{Packet, Trace};
use crate::{flow_string, lists, read_list, Emit, FlowKey, Stores, SystemError, ENTRY_LEN};

/// Bytes of a loss event.
pub const EVENT_LEN: usize = 18;
/// Default aggregation window of the switches' event tables: 10 ms.
pub const DEFAULT_WINDOW_NS: u64 = 10_000_000;

const _: () = assert!(EVENT_LEN <= ENTRY_LEN);

/// Why a packet was lost (NetSeer's drop types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// Buffer overflow at the egress queue.
    Congestion = 1,
    /// Corrupted on the link to the next switch (found by the inter-switch sequence gap).
    Corruption = 2,
    /// Dropped by the pipeline (table miss, ACL).
    Pipeline = 3,
}

impl Reason {
    /// Every reason.
    pub const ALL: [Reason; 3] = [Reason::Congestion, Reason::Corruption, Reason::Pipeline];

    /// The reason of a wire byte.
    pub fn from_u8(b: u8) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| *r as u8 == b)
    }

    /// The reason's name.
    pub fn name(self) -> &'static str {
        match self {
            Reason::Congestion => "congestion",
            Reason::Corruption => "corruption",
            Reason::Pipeline => "pipeline",
        }
    }

    /// Parse a name of [`Reason::name`].
    pub fn parse(s: &str) -> Result<Reason, SystemError> {
        Reason::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                SystemError::BadRequest(format!(
                    "bad reason {s:?}: congestion, corruption or pipeline"
                ))
            })
    }
}

/// Tells retransmissions from new segments, per flow: a segment that ends at or below the
/// highest sequence number the flow has reached is a retransmission.
#[derive(Debug, Default)]
pub struct SeqTracker {
    max_end: HashMap<FlowKey, u32>,
}

impl SeqTracker {
    /// Account `p`; whether it retransmits an earlier segment of its flow.
    pub fn retransmission(&mut self, p: &Packet) -> bool {
        let end = p.seq_end();
        match self.max_end.get_mut(&p.flow) {
            None => {
                self.max_end.insert(p.flow, end);
                false
            }
            Some(m) => {
                let le = (end.wrapping_sub(*m) as i32) <= 0;
                if end != p.seq && le {
                    return true;
                }
                if !le {
                    *m = end;
                }
                false
            }
        }
    }
}

/// Where the original of retransmission `p` was lost: a switch of its path and a reason.
pub fn loss_site(p: &Packet) -> (u16, Reason) {
    let mut b = [0u8; 17];
    b[..13].copy_from_slice(&p.flow);
    b[13..].copy_from_slice(&p.seq.to_be_bytes());
    let h = fmix64(fnv1a64(&b) ^ 0x006e_6574_7365_6572);
    let path = crate::trajectory::path(&p.flow);
    let hops = path.switches();
    let sw = hops[(h % hops.len() as u64) as usize];
    (sw, Reason::ALL[((h >> 32) % 3) as usize])
}

/// The list of switch `s`'s events.
pub fn switch_list(s: u16) -> u32 {
    let n = lists::NETSEER.end - lists::NETSEER.start;
    lists::NETSEER.start + u32::from(s) % n
}

/// The switches' parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Params {
    /// Event tables are flushed this often, ns.
    pub window_ns: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            window_ns: DEFAULT_WINDOW_NS,
        }
    }
}

/// Encode one event.
pub fn event_entry(flow: &FlowKey, switch: u16, reason: Reason, count: u16) -> [u8; ENTRY_LEN] {
    let mut e = [0u8; ENTRY_LEN];
    e[..13].copy_from_slice(flow);
    e[13..15].copy_from_slice(&switch.to_be_bytes());
    e[15] = reason as u8;
    e[16..18].copy_from_slice(&count.to_be_bytes());
    e
}

type EventKey = (u16, FlowKey, Reason);

fn flush(
    table: &mut BTreeMap<EventKey, u64>,
    emit: &mut Emit,
    sent: &mut u64,
) -> Result<(), SystemError> {
    for ((sw, flow, reason), mut n) in std::mem::take(table) {
        while n > 0 {
            let c = n.min(u64::from(u16::MAX)) as u16;
            emit(&Report::Append {
                list_id: switch_list(sw),
                data: &event_entry(&flow, sw, reason, c),
                immediate: false,
            })?;
            *sent += 1;
            n -= u64::from(c);
        }
    }
    Ok(())
}

/// Run every switch's loss detection over `trace`, sending loss events to `emit`; returns the
/// events sent.
pub fn reports(trace: &Trace, p: &Params, emit: &mut Emit) -> Result<u64, SystemError> {
    if p.window_ns == 0 {
        return Err(SystemError::BadRequest(
            "NetSeer window must be positive".into(),
        ));
    }
    let mut seq = SeqTracker::default();
    let mut table: BTreeMap<EventKey, u64> = BTreeMap::new();
    let mut sent = 0;
    let mut window_end = p.window_ns;
    for pkt in &trace.packets {
        if pkt.ts_ns >= window_end {
            flush(&mut table, emit, &mut sent)?;
            window_end = (pkt.ts_ns / p.window_ns + 1).saturating_mul(p.window_ns);
        }
        if seq.retransmission(pkt) {
            let (sw, reason) = loss_site(pkt);
            *table.entry((sw, pkt.flow, reason)).or_default() += 1;
        }
    }
    flush(&mut table, emit, &mut sent)?;
    Ok(sent)
}

/// Packets lost per (flow, switch, reason), from the whole trace.
pub fn truth(trace: &Trace) -> BTreeMap<(FlowKey, u16, Reason), u64> {
    let mut seq = SeqTracker::default();
    let mut t = BTreeMap::new();
    for pkt in &trace.packets {
        if seq.retransmission(pkt) {
            let (sw, reason) = loss_site(pkt);
            *t.entry((pkt.flow, sw, reason)).or_default() += 1;
        }
    }
    t
}

/// The ground truth as JSON: one object per (flow, switch, reason).
pub fn truth_json(t: &BTreeMap<(FlowKey, u16, Reason), u64>) -> serde_json::Value {
    t.iter()
        .map(|((f, s, r), n)| {
            serde_json::json!({"flow": flow_string(f), "switch": s, "reason": r.name(), "count": n})
        })
        .collect::<Vec<_>>()
        .into()
}

/// One loss event as read back.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LossEvent {
    /// The flow.
    pub flow: String,
    /// The switch that lost the packets.
    pub switch: u16,
    /// Why.
    pub reason: &'static str,
    /// Packets lost.
    pub count: u16,
    /// The list it is in.
    pub list: u32,
    /// Its position in that list (entries appended before it).
    pub position: u64,
}

/// What to list.
#[derive(Debug, Clone, Default)]
pub struct LossFilter {
    /// Only this switch's list.
    pub switch: Option<u16>,
    /// Only this flow.
    pub flow: Option<FlowKey>,
    /// Only this reason.
    pub reason: Option<Reason>,
    /// Only events at or after this position of their list.
    pub since: Option<u64>,
    /// List at most this many events (all matching ones are counted).
    pub max: usize,
}

/// Loss events read back.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LossAnswer {
    /// The lists read.
    pub lists: Range<u32>,
    /// Matching events, by list then position (at most the filter's `max`).
    pub events: Vec<LossEvent>,
    /// Matching events (also those not listed).
    pub matched: u64,
    /// Packets lost over the matching events.
    pub packets_lost: u64,
    /// Packets lost per reason over the matching events.
    pub by_reason: BTreeMap<&'static str, u64>,
    /// Entries of the lists read that were overwritten before this query (0: complete).
    pub overwritten: u64,
    /// Events ever appended to the lists read.
    pub appended: u64,
}

/// Loss events matching `f`: an error when none was ever reported, or none matches.
pub fn query_losses(stores: &Stores, f: &LossFilter) -> Result<LossAnswer, SystemError> {
    let region = stores.open(crate::APPEND_STORE)?;
    let lists = match f.switch {
        Some(s) => switch_list(s)..switch_list(s) + 1,
        None => lists::NETSEER,
    };
    let mut a = LossAnswer {
        lists: lists.clone(),
        events: vec![],
        matched: 0,
        packets_lost: 0,
        by_reason: BTreeMap::new(),
        overwritten: 0,
        appended: 0,
    };
    let mut malformed = 0u64;
    for list in lists.clone() {
        let l = read_list(&region, list)?;
        a.appended += l.appended;
        a.overwritten += l.overwritten;
        let first = l.appended - l.entries.len() as u64;
        for (i, e) in l.entries.iter().enumerate() {
            let pos = first + i as u64;
            if f.since.is_some_and(|s| pos < s) {
                continue;
            }
            let flow: FlowKey = e[..13].try_into().expect("13 bytes");
            let switch = u16::from_be_bytes([e[13], e[14]]);
            let Some(reason) = Reason::from_u8(e[15]) else {
                malformed += 1;
                continue;
            };
            let count = u16::from_be_bytes([e[16], e[17]]);
            if f.switch.is_some_and(|s| s != switch)
                || f.flow.is_some_and(|x| x != flow)
                || f.reason.is_some_and(|r| r != reason)
            {
                continue;
            }
            a.matched += 1;
            a.packets_lost += u64::from(count);
            *a.by_reason.entry(reason.name()).or_default() += u64::from(count);
            if a.events.len() < f.max {
                a.events.push(LossEvent {
                    flow: flow_string(&flow),
                    switch,
                    reason: reason.name(),
                    count,
                    list,
                    position: pos,
                });
            }
        }
    }
    if a.appended == 0 {
        return Err(SystemError::NotFound(format!(
            "no loss event was ever reported to {} (lists {lists:?}): has `dta report --workload \
             netseer` sent to this collector?",
            crate::APPEND_STORE
        )));
    }
    if malformed > 0 {
        return Err(SystemError::Store {
            store: crate::APPEND_STORE.into(),
            msg: format!("{malformed} entries of lists {lists:?} are not NetSeer loss events"),
        });
    }
    if a.matched == 0 {
        return Err(SystemError::NotFound(format!(
            "no loss event matches among the {} held in lists {lists:?}{}{}",
            a.appended - a.overwritten,
            f.since
                .map(|s| format!(" (from position {s} on)"))
                .unwrap_or_default(),
            if a.overwritten > 0 {
                format!("; {} older events were overwritten", a.overwritten)
            } else {
                String::new()
            }
        )));
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_sum_to_the_truth_and_windows_split_them() {
        let (t, inj) = crate::trace::test_trace(300);
        let truth = truth(&t);
        let lost: u64 = truth.values().sum();
        assert_eq!(lost, inj.values().map(|i| i.retransmissions).sum::<u64>());
        assert!(lost > 0);
        for window_ns in [DEFAULT_WINDOW_NS, 1_000_000_000_000] {
            let mut got: BTreeMap<(FlowKey, u16, Reason), u64> = BTreeMap::new();
            let mut events = 0;
            let sent = reports(&t, &Params { window_ns }, &mut |r: &Report<'_>| {
                let Report::Append { list_id, data, .. } = *r else {
                    panic!("NetSeer appends only")
                };
                let e: [u8; ENTRY_LEN] = data.try_into().unwrap();
                let sw = u16::from_be_bytes([e[13], e[14]]);
                assert_eq!(switch_list(sw), list_id);
                let k = (
                    e[..13].try_into().unwrap(),
                    sw,
                    Reason::from_u8(e[15]).unwrap(),
                );
                *got.entry(k).or_default() += u64::from(u16::from_be_bytes([e[16], e[17]]));
                events += 1;
                Ok(())
            })
            .unwrap();
            assert_eq!(sent, events);
            assert_eq!(got, truth);
            if window_ns == DEFAULT_WINDOW_NS {
                assert!(events > truth.len() as u64, "windows split a flow's events");
            } else {
                assert_eq!(events, truth.len() as u64);
            }
        }
        assert!(reports(&t, &Params { window_ns: 0 }, &mut |_| Ok(())).is_err());
    }

    #[test]
    fn reasons_round_trip() {
        for r in Reason::ALL {
            assert_eq!(Reason::from_u8(r as u8), Some(r));
            assert_eq!(Reason::parse(r.name()).unwrap(), r);
        }
        assert_eq!(Reason::from_u8(0), None);
        assert!(Reason::parse("heat").is_err());
    }
}
