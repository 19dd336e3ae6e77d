//! Trajectory Sampling ([DTA Table 2]: "Collection of unique packet labels from all hops for
//! sampled packets", on Postcarding). Every switch takes the same sampling decision from the
//! packet's label (a hash of fields that do not change along the path), so a sampled packet is
//! reported by each switch it crosses: one postcard per hop, keyed by the label, carrying the
//! switch's ID. The collector's Postcarding store then holds each sampled packet's trajectory,
//! queried by label.
//!
//! The network is a k = [`FAT_TREE_K`] fat tree ([`path`]), shared with NetSeer (which switch a
//! loss happened at) and PINT (the path digest): sources `10.0.x.y` and destinations
//! `10.1.x.y` of the synthesized traces (any address works) hang off edge switches by a hash of
//! the address, and ECMP picks the aggregation and core switches by a hash of the 5-tuple.
//!
//! | report | store |
//! | --- | --- |
//! | Postcarding `label (8 B BE), hop i, path_len -> switch ID` for every hop of a sampled packet | [`STORE_PATHS`] |

use std::collections::BTreeMap;

use serde::Serialize;

use dta_store::hash::{fmix64, fnv1a64};
use dta_wire::Report;

use crate::trace::Trace;
use crate::{flow_string, Emit, FlowKey, Stores, SystemError};

/// Postcarding store of sampled packets' trajectories: 8-byte label keys, [`MAX_HOPS`] hops.
pub const STORE_PATHS: &str = "trajectory_paths";
/// Bytes of a packet label (the Postcarding key).
pub const LABEL_LEN: usize = 8;
/// Arity of the fat tree.
pub const FAT_TREE_K: u32 = 8;
/// Edge switches: IDs `0..EDGES` (pod = ID / (k/2)).
pub const EDGES: u32 = FAT_TREE_K * FAT_TREE_K / 2;
/// Aggregation switches: IDs `EDGES..EDGES + AGGS`.
pub const AGGS: u32 = FAT_TREE_K * FAT_TREE_K / 2;
/// Core switches: IDs `EDGES + AGGS..SWITCHES`.
pub const CORES: u32 = FAT_TREE_K * FAT_TREE_K / 4;
/// Switches of the network; switch IDs are `0..SWITCHES` (the query's value set).
pub const SWITCHES: u32 = EDGES + AGGS + CORES;
/// Longest path: edge, aggregation, core, aggregation, edge.
pub const MAX_HOPS: usize = 5;
/// Default sampling rate, packets per million.
pub const DEFAULT_SAMPLE_PPM: u32 = 20_000;

/// A path: switch IDs, first hop first (1, 3 or 5 of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Path {
    hops: [u16; MAX_HOPS],
    len: u8,
}

impl Path {
    /// The switch IDs, first hop first.
    pub fn switches(&self) -> &[u16] {
        &self.hops[..self.len as usize]
    }
}

fn edge_of(ip: &[u8]) -> u32 {
    (fmix64(fnv1a64(ip)) % EDGES as u64) as u32
}

/// The path of `flow` through the fat tree: its source's edge switch, then (unless the
/// destination hangs off the same edge) an aggregation switch of the source's pod chosen by
/// ECMP, then (unless the destination is in the same pod) one of that aggregation switch's
/// cores, the destination pod's aggregation switch of the same index, and the destination's
/// edge.
pub fn path(flow: &FlowKey) -> Path {
    let half = FAT_TREE_K / 2;
    let (se, de) = (edge_of(&flow[0..4]), edge_of(&flow[4..8]));
    let h = fmix64(fnv1a64(flow));
    let agg = (h % half as u64) as u32;
    let core = agg * half + ((h >> 16) % half as u64) as u32;
    let (sp, dp) = (se / half, de / half);
    let mut p = Path {
        hops: [0; MAX_HOPS],
        len: 0,
    };
    let ids: &[u32] = if se == de {
        &[se]
    } else if sp == dp {
        &[se, EDGES + sp * half + agg, de]
    } else {
        &[
            se,
            EDGES + sp * half + agg,
            EDGES + AGGS + core,
            EDGES + dp * half + agg,
            de,
        ]
    };
    for (slot, &id) in p.hops.iter_mut().zip(ids) {
        *slot = id as u16;
    }
    p.len = ids.len() as u8;
    p
}

/// The label of a packet: a hash of what no switch changes (its flow and TCP sequence number).
/// A retransmission carries its original's label (it is the same packet to the network).
pub fn label(flow: &FlowKey, seq: u32) -> u64 {
    let mut b = [0u8; 17];
    b[..13].copy_from_slice(flow);
    b[13..].copy_from_slice(&seq.to_be_bytes());
    fmix64(fnv1a64(&b))
}

/// Whether every switch samples the packet of `label` at `sample_ppm` packets per million.
pub fn sampled(label: u64, sample_ppm: u32) -> bool {
    (label >> 24) % 1_000_000 < u64::from(sample_ppm)
}

/// The switches' parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Params {
    /// Sampling rate, packets per million (1..=1 000 000).
    pub sample_ppm: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            sample_ppm: DEFAULT_SAMPLE_PPM,
        }
    }
}

impl Params {
    /// Check the rate.
    pub fn validate(&self) -> Result<(), SystemError> {
        if !(1..=1_000_000).contains(&self.sample_ppm) {
            return Err(SystemError::BadRequest(format!(
                "trajectory sampling rate {} ppm: 1..=1000000",
                self.sample_ppm
            )));
        }
        Ok(())
    }
}

/// Reports sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Sent {
    /// Packets sampled (distinct labels may repeat for a retransmission).
    pub sampled_packets: u64,
    /// Postcards (one per hop of each sampled packet).
    pub postcards: u64,
}

/// Every switch on each sampled packet's path sends its postcard to `emit`.
pub fn reports(trace: &Trace, p: &Params, emit: &mut Emit) -> Result<Sent, SystemError> {
    p.validate()?;
    let mut sent = Sent::default();
    for pkt in &trace.packets {
        let l = label(&pkt.flow, pkt.seq);
        if !sampled(l, p.sample_ppm) {
            continue;
        }
        let key = l.to_be_bytes();
        let path = path(&pkt.flow);
        let hops = path.switches();
        for (i, &sw) in hops.iter().enumerate() {
            emit(&Report::Postcard {
                key: &key,
                hop: i as u8,
                path_len: hops.len() as u8,
                value: u32::from(sw),
                immediate: false,
            })?;
            sent.postcards += 1;
        }
        sent.sampled_packets += 1;
    }
    Ok(sent)
}

/// A sampled packet as the ground truth has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SampledPacket {
    /// Its flow.
    pub flow: FlowKey,
    /// Its TCP sequence number.
    pub seq: u32,
    /// The switches it crossed.
    pub path: Vec<u16>,
}

/// The sampled packets of `trace`, by label.
pub fn truth(trace: &Trace, p: &Params) -> BTreeMap<u64, SampledPacket> {
    trace
        .packets
        .iter()
        .filter_map(|pkt| {
            let l = label(&pkt.flow, pkt.seq);
            sampled(l, p.sample_ppm).then(|| {
                (
                    l,
                    SampledPacket {
                        flow: pkt.flow,
                        seq: pkt.seq,
                        path: path(&pkt.flow).switches().to_vec(),
                    },
                )
            })
        })
        .collect()
}

/// The ground truth as JSON: label (hex) -> flow, seq, path.
pub fn truth_json(t: &BTreeMap<u64, SampledPacket>) -> serde_json::Value {
    t.iter()
        .map(|(l, s)| {
            (
                format!("{l:016x}"),
                serde_json::json!({"flow": flow_string(&s.flow), "seq": s.seq, "path": s.path}),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// A sampled packet's trajectory as the store holds it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TrajectoryAnswer {
    /// The packet's label, hex.
    pub label: String,
    /// Switch IDs, first hop first.
    pub path: Vec<u32>,
    /// Each hop's role: `edge`, `aggregation` or `core`.
    pub roles: Vec<&'static str>,
    /// How sure the answer is.
    pub confidence: dta_store::Confidence,
}

/// A switch's tier in the fat tree.
pub fn role(switch: u32) -> &'static str {
    if switch < EDGES {
        "edge"
    } else if switch < EDGES + AGGS {
        "aggregation"
    } else {
        "core"
    }
}

/// Parse a label: 16 hex digits, optionally `0x`-prefixed.
pub fn parse_label(s: &str) -> Result<u64, SystemError> {
    let t = s.trim();
    let t = t.strip_prefix("0x").unwrap_or(t);
    if t.is_empty() || t.len() > 16 {
        return Err(SystemError::BadRequest(format!(
            "bad label {s:?}: 1-16 hex digits (as `dta report --truth` lists them)"
        )));
    }
    u64::from_str_radix(t, 16).map_err(|e| SystemError::BadRequest(format!("bad label {s:?}: {e}")))
}

/// The trajectory of the packet labelled `label`: an error when the store holds none for it
/// (the packet was not sampled, or its chunks were overwritten) or holds conflicting ones.
pub fn query_packet(stores: &Stores, label: u64) -> Result<TrajectoryAnswer, SystemError> {
    let region = stores.open(STORE_PATHS)?;
    let key = label.to_be_bytes();
    let r = dta_collector::query::postcard(&region, &key, SWITCHES).map_err(|e| {
        SystemError::Store {
            store: STORE_PATHS.into(),
            msg: e.to_string(),
        }
    })?;
    region.check().map_err(|e| SystemError::Store {
        store: STORE_PATHS.into(),
        msg: e.to_string(),
    })?;
    match r.status {
        "found" => Ok(TrajectoryAnswer {
            label: format!("{label:016x}"),
            roles: r.path.iter().map(|&s| role(s)).collect(),
            path: r.path,
            confidence: r.confidence,
        }),
        "ambiguous" => Err(SystemError::NotFound(format!(
            "packet {label:016x}: {STORE_PATHS} holds conflicting trajectories for it (chunks \
             overwritten by other packets); no answer"
        ))),
        _ => Err(SystemError::NotFound(format!(
            "packet {label:016x}: no trajectory in {STORE_PATHS} (not sampled: only packets \
             whose label hashes under the sampling rate are reported; or overwritten: p = {:.2e})",
            r.confidence.p_overwritten
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_fat_tree_paths() {
        let mut lens = [0usize; MAX_HOPS + 1];
        for i in 0..2000u32 {
            let f = crate::flow_key(
                [10, 0, (i >> 8) as u8, i as u8].into(),
                [10, 1, (i % 7) as u8, (i % 251) as u8 + 1].into(),
                1024 + i as u16,
                80,
                6,
            );
            let p = path(&f);
            let s = p.switches();
            lens[s.len()] += 1;
            assert_eq!(role(s[0].into()), "edge");
            assert_eq!(role((*s.last().unwrap()).into()), "edge");
            assert!(s.iter().all(|&x| u32::from(x) < SWITCHES));
            if s.len() == 5 {
                assert_eq!(role(s[2].into()), "core");
                // The core hangs off the aggregation switches of the same index in both pods.
                let half = FAT_TREE_K / 2;
                let (a1, c, a2) = (
                    u32::from(s[1]) - EDGES,
                    u32::from(s[2]) - EDGES - AGGS,
                    u32::from(s[3]) - EDGES,
                );
                assert_eq!((a1 % half, a2 % half), (c / half, c / half));
            }
            assert_eq!(path(&f), p, "deterministic");
        }
        assert!(lens[5] > lens[3] && lens[3] > 0 && lens[1] > 0, "{lens:?}");
        assert_eq!(lens[2] + lens[4], 0);
    }

    #[test]
    fn sampling_is_by_label_at_the_rate() {
        let n = 200_000u32;
        let hit = (0..n)
            .filter(|&s| sampled(label(&[7; 13], s), 20_000))
            .count() as f64;
        let rate = hit / n as f64;
        assert!((0.018..0.022).contains(&rate), "{rate}");
        assert!(Params { sample_ppm: 0 }.validate().is_err());
        assert_eq!(parse_label("0x00000000000000ff").unwrap(), 255);
        assert!(parse_label("xyz").is_err());
        assert!(parse_label("").is_err());
    }
}
