//! TurboFlow ([DTA Table 2]: "Sending 4B counters from evicted microflow-records for
//! aggregation using flow key as keys", on Key-Increment). The switch keeps a small
//! direct-mapped cache of microflow records (flow, packets, bytes; [`Params::cache_slots`]
//! slots, indexed by a hash of the flow). A packet of a flow not in its slot evicts the record
//! there; a record whose 4-byte byte counter would overflow is evicted before it does; at the
//! end every record is evicted. Each eviction sends two Key-Increments: `(flow, 0) += packets`
//! and `(flow, 1) += bytes` ([`STORE_COUNTS`]), which the collector sums into the flow's totals.
//!
//! The answer is count-min ([DTA A.4]): never below the flow's true totals, above them by at
//! most the store's bound with probability `1 - delta` (`CountBound`).

use std::collections::BTreeMap;

use serde::Serialize;

use dta_store::hash::{fmix64, fnv1a64};
use dta_wire::Report;

use crate::trace::Trace;
use crate::{flow_string, Emit, FlowKey, Stores, SystemError};

/// Key-Increment store of per-flow totals: 14-byte keys (flow 5-tuple, then [`COUNT_PACKETS`]
/// or [`COUNT_BYTES`]).
pub const STORE_COUNTS: &str = "turboflow_counts";
/// Last key byte of a flow's packet counter.
pub const COUNT_PACKETS: u8 = 0;
/// Last key byte of a flow's byte counter.
pub const COUNT_BYTES: u8 = 1;
/// Counters per Key-Increment report (the store's `redundancy`).
pub const REDUNDANCY: u8 = dta_wire::DEFAULT_REDUNDANCY;
/// Default microflow cache slots (TurboFlow keeps a few thousand per pipeline; smaller here so
/// that a synthesized trace evicts often).
pub const DEFAULT_CACHE_SLOTS: usize = 256;
/// Most cache slots.
pub const MAX_CACHE_SLOTS: usize = 1 << 20;

/// The switch's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Params {
    /// Microflow cache slots (1..=[`MAX_CACHE_SLOTS`]).
    pub cache_slots: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            cache_slots: DEFAULT_CACHE_SLOTS,
        }
    }
}

/// The [`STORE_COUNTS`] key of a flow's counter `kind`.
pub fn counter_key(flow: &FlowKey, kind: u8) -> [u8; 14] {
    let mut k = [0u8; 14];
    k[..13].copy_from_slice(flow);
    k[13] = kind;
    k
}

#[derive(Clone, Copy)]
struct Record {
    flow: FlowKey,
    packets: u32,
    bytes: u32,
}

/// Reports sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Sent {
    /// Records evicted.
    pub evictions: u64,
    /// Evictions because another flow took the slot.
    pub collisions: u64,
    /// Key-Increment reports (two per eviction).
    pub key_increment: u64,
}

fn evict(r: &Record, emit: &mut Emit, sent: &mut Sent) -> Result<(), SystemError> {
    for (kind, v) in [(COUNT_PACKETS, r.packets), (COUNT_BYTES, r.bytes)] {
        emit(&Report::KeyIncrement {
            key: &counter_key(&r.flow, kind),
            counter: u64::from(v),
            redundancy: REDUNDANCY,
            immediate: false,
        })?;
        sent.key_increment += 1;
    }
    sent.evictions += 1;
    Ok(())
}

/// Run the switch's microflow cache over `trace`, sending the evicted records to `emit`.
pub fn reports(trace: &Trace, p: &Params, emit: &mut Emit) -> Result<Sent, SystemError> {
    if !(1..=MAX_CACHE_SLOTS).contains(&p.cache_slots) {
        return Err(SystemError::BadRequest(format!(
            "TurboFlow cache slots {}: 1..={MAX_CACHE_SLOTS}",
            p.cache_slots
        )));
    }
    let mut cache: Vec<Option<Record>> = vec![None; p.cache_slots];
    let mut sent = Sent::default();
    for pkt in &trace.packets {
        let i = (fmix64(fnv1a64(&pkt.flow)) % p.cache_slots as u64) as usize;
        let size = u32::from(pkt.size);
        match &mut cache[i] {
            Some(r) if r.flow == pkt.flow && r.bytes.checked_add(size).is_some() => {
                r.packets += 1;
                r.bytes += size;
                continue;
            }
            Some(r) => {
                if r.flow != pkt.flow {
                    sent.collisions += 1;
                }
                evict(r, emit, &mut sent)?;
            }
            None => {}
        }
        cache[i] = Some(Record {
            flow: pkt.flow,
            packets: 1,
            bytes: size,
        });
    }
    for r in cache.iter().flatten() {
        evict(r, emit, &mut sent)?;
    }
    Ok(sent)
}

/// Per flow: packets and bytes, from the whole trace.
pub fn truth(trace: &Trace) -> BTreeMap<FlowKey, (u64, u64)> {
    let mut t: BTreeMap<FlowKey, (u64, u64)> = BTreeMap::new();
    for p in &trace.packets {
        let e = t.entry(p.flow).or_default();
        e.0 += 1;
        e.1 += u64::from(p.size);
    }
    t
}

/// The ground truth as JSON.
pub fn truth_json(t: &BTreeMap<FlowKey, (u64, u64)>) -> serde_json::Value {
    t.iter()
        .map(|(f, (p, b))| {
            (
                flow_string(f),
                serde_json::json!({"packets": p, "bytes": b}),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// A flow's totals as the store holds them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FlowAnswer {
    /// The flow.
    pub flow: String,
    /// Packets (count-min: never below the truth).
    pub packets: u64,
    /// Bytes (count-min: never below the truth).
    pub bytes: u64,
    /// The packet counter's bound.
    pub packets_bound: dta_store::CountBound,
    /// The byte counter's bound.
    pub bytes_bound: dta_store::CountBound,
}

/// The totals of `flow`: an error when no record of it was ever evicted to the store.
pub fn query_flow(stores: &Stores, flow: &FlowKey) -> Result<FlowAnswer, SystemError> {
    let ki = stores.open(STORE_COUNTS)?;
    let err = |e: dta_collector::query::QueryError| SystemError::Store {
        store: STORE_COUNTS.into(),
        msg: e.to_string(),
    };
    let p = dta_collector::query::key_increment(&ki, &counter_key(flow, COUNT_PACKETS), None)
        .map_err(err)?;
    let b = dta_collector::query::key_increment(&ki, &counter_key(flow, COUNT_BYTES), None)
        .map_err(err)?;
    ki.check().map_err(|e| SystemError::Store {
        store: STORE_COUNTS.into(),
        msg: e.to_string(),
    })?;
    if p.count == 0 || b.count == 0 {
        // Count-min never undercounts: a 0 means no record of the flow reached the store.
        return Err(SystemError::NotFound(format!(
            "flow {}: no counters in {STORE_COUNTS} (no record of it was evicted to this \
             collector: the switch never saw it, or has not evicted it yet)",
            flow_string(flow)
        )));
    }
    Ok(FlowAnswer {
        flow: flow_string(flow),
        packets: p.count,
        bytes: b.count,
        packets_bound: p.bound,
        bytes_bound: b.bound,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicted_records_sum_to_the_truth() {
        let (t, _) = crate::trace::test_trace(300);
        let truth = truth(&t);
        for slots in [1, 16, DEFAULT_CACHE_SLOTS, 1 << 16] {
            let mut got: BTreeMap<[u8; 14], u64> = BTreeMap::new();
            let sent = reports(&t, &Params { cache_slots: slots }, &mut |r: &Report<'_>| {
                let Report::KeyIncrement { key, counter, .. } = *r else {
                    panic!("TurboFlow sends Key-Increments only")
                };
                *got.entry(key.try_into().unwrap()).or_default() += counter;
                Ok(())
            })
            .unwrap();
            for (f, (p, b)) in &truth {
                assert_eq!(got[&counter_key(f, COUNT_PACKETS)], *p);
                assert_eq!(got[&counter_key(f, COUNT_BYTES)], *b);
            }
            assert_eq!(sent.key_increment, 2 * sent.evictions);
            if slots == 1 << 16 {
                assert!(sent.collisions < sent.evictions);
            } else {
                assert!(sent.collisions > 0, "a small cache evicts on collisions");
            }
        }
        assert!(reports(&t, &Params { cache_slots: 0 }, &mut |_| Ok(())).is_err());
    }
}
