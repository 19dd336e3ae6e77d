//! PINT ([DTA Table 2]: "1B reports with 5-tuple keys, using redundancies for data compression
//! through n = f(pktID)", on Key-Write). The per-flow value is a 32-bit digest of the flow's
//! path ([`digest`]); no packet carries all of it. Packet `pktID` of a flow carries one byte,
//! fragment `n = f(pktID)` ([`fragment_of`]) of the digest, so the value is spread over the
//! flow's packets and each report is 1 byte of telemetry. The switch at the end of the path
//! sends it as a Key-Write under the key `(flow, n)` ([`STORE_DIGESTS`]; the native wire's
//! smallest Key-Write data is 4 bytes: the byte, `n`, two zero bytes). Where plain Key-Write
//! spends its N copies on one value, here the [`FRAGMENTS`] keys of a flow hold different parts
//! of it: redundancy becomes compression. Each key still has [`REDUNDANCY`] copies against
//! overwrites.
//!
//! The query reads the [`FRAGMENTS`] keys of the flow and rebuilds the digest, or says which
//! fragments are missing: a flow whose packets never drew some `n` (too few packets), or whose
//! fragment's copies were all overwritten, cannot be answered.

use std::collections::BTreeMap;

use serde::Serialize;

use dta_store::hash::{fmix64, fnv1a64};
use dta_wire::Report;

use crate::trace::Trace;
use crate::{flow_string, Emit, FlowKey, Stores, SystemError};

/// Key-Write store of digest fragments: 14-byte keys (flow 5-tuple, fragment index), 4 bytes of
/// data (the fragment byte, its index, 0, 0).
pub const STORE_DIGESTS: &str = "pint_digests";
/// Fragments of a digest (bytes of a u32).
pub const FRAGMENTS: u8 = 4;
/// Copies per Key-Write (the store's `redundancy`).
pub const REDUNDANCY: u8 = dta_wire::DEFAULT_REDUNDANCY;

/// The flow's value: a 32-bit digest of the switch IDs on its path
/// ([`crate::trajectory::path`]).
pub fn digest(flow: &FlowKey) -> u32 {
    let p = crate::trajectory::path(flow);
    let mut b = [0u8; 2 * crate::trajectory::MAX_HOPS];
    let hops = p.switches();
    for (c, s) in b.chunks_exact_mut(2).zip(hops) {
        c.copy_from_slice(&s.to_be_bytes());
    }
    fmix64(fnv1a64(&b[..2 * hops.len()])) as u32
}

/// The fragment packet `pkt_id` of `flow` carries: `n = f(pktID)`, a hash, so that any run of
/// a flow's packets draws every fragment with the same probability.
pub fn fragment_of(flow: &FlowKey, pkt_id: u32) -> u8 {
    let mut b = [0u8; 17];
    b[..13].copy_from_slice(flow);
    b[13..].copy_from_slice(&pkt_id.to_be_bytes());
    (fmix64(fnv1a64(&b)) % u64::from(FRAGMENTS)) as u8
}

/// Byte `n` of a digest (0: most significant).
fn digest_byte(d: u32, n: u8) -> u8 {
    d.to_be_bytes()[n as usize]
}

/// The [`STORE_DIGESTS`] key of fragment `n` of `flow`.
pub fn fragment_key(flow: &FlowKey, n: u8) -> [u8; 14] {
    let mut k = [0u8; 14];
    k[..13].copy_from_slice(flow);
    k[13] = n;
    k
}

/// Reports sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Sent {
    /// Key-Write reports (one per packet).
    pub key_write: u64,
}

/// Every packet of `trace` reports its fragment to `emit`. The packet ID is the packet's TCP
/// sequence number (a retransmission carries its original's fragment).
pub fn reports(trace: &Trace, emit: &mut Emit) -> Result<Sent, SystemError> {
    let mut sent = Sent::default();
    let mut digests: std::collections::HashMap<FlowKey, u32> = Default::default();
    for pkt in &trace.packets {
        let d = *digests.entry(pkt.flow).or_insert_with(|| digest(&pkt.flow));
        let n = fragment_of(&pkt.flow, pkt.seq);
        emit(&Report::KeyWrite {
            key: &fragment_key(&pkt.flow, n),
            data: &[digest_byte(d, n), n, 0, 0],
            redundancy: REDUNDANCY,
            immediate: false,
        })?;
        sent.key_write += 1;
    }
    Ok(sent)
}

/// A flow's value and the fragments its packets carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FlowTruth {
    /// The digest.
    pub digest: u32,
    /// Bit `n` set: some packet carried fragment `n`.
    pub fragments: u8,
}

impl FlowTruth {
    /// Whether the packets carried every fragment (the value can be rebuilt).
    pub fn complete(&self) -> bool {
        self.fragments == (1u8 << FRAGMENTS) - 1
    }
}

/// Per flow: its digest and the fragments sent, from the whole trace.
pub fn truth(trace: &Trace) -> BTreeMap<FlowKey, FlowTruth> {
    let mut t: BTreeMap<FlowKey, FlowTruth> = BTreeMap::new();
    for p in &trace.packets {
        let e = t.entry(p.flow).or_insert_with(|| FlowTruth {
            digest: digest(&p.flow),
            fragments: 0,
        });
        e.fragments |= 1 << fragment_of(&p.flow, p.seq);
    }
    t
}

/// The ground truth as JSON: flow -> digest (hex) and whether it can be rebuilt.
pub fn truth_json(t: &BTreeMap<FlowKey, FlowTruth>) -> serde_json::Value {
    t.iter()
        .map(|(f, v)| {
            (
                flow_string(f),
                serde_json::json!({"digest": format!("{:08x}", v.digest), "complete": v.complete()}),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// A flow's digest as rebuilt from the store.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DigestAnswer {
    /// The flow.
    pub flow: String,
    /// The digest, hex.
    pub digest: String,
    /// The largest probability, over the fragments, that a fragment's answer is wrong.
    pub p_wrong: f64,
}

/// Rebuild the digest of `flow`: an error naming the fragments that are missing or ambiguous
/// when it cannot.
pub fn query_digest(stores: &Stores, flow: &FlowKey) -> Result<DigestAnswer, SystemError> {
    let kw = stores.open(STORE_DIGESTS)?;
    let store_err = |m: String| SystemError::Store {
        store: STORE_DIGESTS.into(),
        msg: m,
    };
    let mut bytes = [0u8; FRAGMENTS as usize];
    let mut missing = vec![];
    let mut ambiguous = vec![];
    let mut p_wrong = 0f64;
    let mut p_overwritten = 0f64;
    for n in 0..FRAGMENTS {
        let r = dta_collector::query::key_write(&kw, &fragment_key(flow, n), None, 1)
            .map_err(|e| store_err(e.to_string()))?;
        p_wrong = p_wrong.max(r.confidence.p_wrong);
        p_overwritten = p_overwritten.max(r.confidence.p_overwritten);
        match (r.status, r.data) {
            ("found", Some(d)) => {
                let d = hex::decode(d).map_err(|e| store_err(e.to_string()))?;
                if d.len() != 4 || d[1] != n {
                    return Err(store_err(format!(
                        "fragment {n} of flow {}: data {d:02x?} is not a PINT fragment",
                        flow_string(flow)
                    )));
                }
                bytes[n as usize] = d[0];
            }
            ("ambiguous", _) => ambiguous.push(n),
            _ => missing.push(n),
        }
    }
    kw.check().map_err(|e| store_err(e.to_string()))?;
    if missing.len() == FRAGMENTS as usize {
        return Err(SystemError::NotFound(format!(
            "flow {}: no fragment in {STORE_DIGESTS} (no packet of it was reported, or all were \
             overwritten: p = {p_overwritten:.2e})",
            flow_string(flow)
        )));
    }
    if !missing.is_empty() || !ambiguous.is_empty() {
        return Err(SystemError::NotFound(format!(
            "flow {}: the digest cannot be rebuilt: fragments {missing:?} of 0..{FRAGMENTS} were \
             never carried (the flow sent too few packets to draw them all) or overwritten \
             (p = {p_overwritten:.2e}){}",
            flow_string(flow),
            if ambiguous.is_empty() {
                String::new()
            } else {
                format!("; fragments {ambiguous:?} hold conflicting values")
            }
        )));
    }
    Ok(DigestAnswer {
        flow: flow_string(flow),
        digest: format!("{:08x}", u32::from_be_bytes(bytes)),
        p_wrong,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_rebuild_the_digest_of_complete_flows() {
        let (t, _) = crate::trace::test_trace(300);
        let truth = truth(&t);
        let mut got: BTreeMap<FlowKey, [Option<u8>; 4]> = BTreeMap::new();
        let sent = reports(&t, &mut |r: &Report<'_>| {
            let Report::KeyWrite { key, data, .. } = *r else {
                panic!("PINT sends Key-Writes only")
            };
            assert_eq!((key.len(), data.len()), (14, 4));
            let f: FlowKey = key[..13].try_into().unwrap();
            let slot = &mut got.entry(f).or_default()[key[13] as usize];
            assert!(
                slot.is_none_or(|b| b == data[0]),
                "a fragment never changes"
            );
            *slot = Some(data[0]);
            assert_eq!(data[1], key[13]);
            Ok(())
        })
        .unwrap();
        assert_eq!(sent.key_write, t.packets.len() as u64);
        let (mut complete, mut partial) = (0, 0);
        for (f, v) in &truth {
            let g = got[f];
            assert_eq!(v.complete(), g.iter().all(Option::is_some));
            if v.complete() {
                complete += 1;
                let b: Vec<u8> = g.iter().map(|x| x.unwrap()).collect();
                assert_eq!(u32::from_be_bytes(b.try_into().unwrap()), v.digest);
            } else {
                partial += 1;
            }
        }
        assert!(complete > 0 && partial > 0, "{complete} {partial}");
    }
}
