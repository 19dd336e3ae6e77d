//! JSON rendering of INT blocks and telemetry reports for `dta decode --hex` (feature `json`):
//! every field, hops as an array (newest first), "not available" metadata as `null`, metadata
//! whose instruction bit is clear left out, byte strings as lowercase hex.

use serde_json::{json, Map, Value};

use super::md::instr;
use super::report::{
    IndividualReport, LegacyReport, LegacySubHeader, ReportMetadata, TelemetryReport,
};
use super::{find_int, parse_report, Error, FlowKey, HopMetadata, IntDetect, IntHeader, IntRepr};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn put<T: Into<Value>>(m: &mut Map<String, Value>, k: &str, v: Option<T>) {
    m.insert(k.into(), v.map_or(Value::Null, Into::into));
}

/// One hop: the fields of the bits set in `bitmap`, then `domain_specific` (hex).
pub fn hop_to_json(h: &HopMetadata<'_>, bitmap: u16) -> Value {
    let mut m = Map::new();
    let has = |b: u16| bitmap & b != 0;
    if has(instr::NODE_ID) {
        put(&mut m, "node_id", h.node_id);
    }
    if has(instr::L1_PORTS) {
        put(&mut m, "l1_ingress_port", h.baseline.l1_ingress_port);
        put(&mut m, "l1_egress_port", h.baseline.l1_egress_port);
    }
    if has(instr::HOP_LATENCY) {
        put(&mut m, "hop_latency", h.baseline.hop_latency);
    }
    if has(instr::QUEUE) {
        put(&mut m, "queue_id", h.baseline.queue_id);
        put(&mut m, "queue_occupancy", h.baseline.queue_occupancy);
    }
    if has(instr::INGRESS_TS) {
        put(&mut m, "ingress_timestamp", h.baseline.ingress_timestamp);
    }
    if has(instr::EGRESS_TS) {
        put(&mut m, "egress_timestamp", h.baseline.egress_timestamp);
    }
    if has(instr::L2_PORTS) {
        put(&mut m, "l2_ingress_port", h.baseline.l2_ingress_port);
        put(&mut m, "l2_egress_port", h.baseline.l2_egress_port);
    }
    if has(instr::TX_UTIL) {
        put(&mut m, "egress_tx_util", h.baseline.egress_tx_util);
    }
    if has(instr::BUFFER) {
        put(&mut m, "buffer_id", h.baseline.buffer_id);
        put(&mut m, "buffer_occupancy", h.baseline.buffer_occupancy);
    }
    if has(instr::CHECKSUM) {
        put(&mut m, "checksum_complement", h.checksum_complement);
    }
    m.insert("domain_specific".into(), hex(h.domain_specific).into());
    Value::Object(m)
}

fn flow_to_json(f: &FlowKey) -> Value {
    json!({
        "src": f.src.to_string(),
        "dst": f.dst.to_string(),
        "src_port": f.src_port,
        "dst_port": f.dst_port,
        "protocol": f.protocol,
    })
}

/// An INT block: `shim`, the MD/MX header fields, `hops` (INT-MD), `flow` when known.
pub fn int_to_json(r: &IntRepr<'_>) -> Value {
    let s = r.shim;
    let mut m = Map::new();
    m.insert("int_type".into(), s.int_type.name().into());
    m.insert(
        "shim".into(),
        json!({"type": s.int_type as u8, "npt": s.npt, "length": s.length, "next": s.next}),
    );
    match r.header {
        IntHeader::Md { header: h, stack } => {
            m.insert(
                "header".into(),
                json!({
                    "version": s.version.number(),
                    "d": h.discard, "e": h.hop_count_exceeded, "m": h.mtu_exceeded,
                    "hop_ml": h.hop_ml, "remaining_hop_count": h.remaining_hop_count,
                    "instructions": h.instructions, "domain_id": h.domain_id,
                    "ds_instructions": h.ds_instructions, "ds_flags": h.ds_flags,
                }),
            );
            m.insert("hop_count".into(), stack.len().into());
            let hops: Vec<Value> = stack
                .iter()
                .map(|hop| hop_to_json(&hop, h.instructions))
                .collect();
            m.insert("hops".into(), hops.into());
        }
        IntHeader::Mx(h) => {
            m.insert(
                "header".into(),
                json!({
                    "version": super::INT_VERSION,
                    "d": h.discard, "e": h.hop_count_exceeded, "m": h.mtu_exceeded,
                    "instructions": h.instructions, "domain_id": h.domain_id,
                    "ds_instructions": h.ds_instructions, "ds_flags": h.ds_flags,
                }),
            );
        }
        IntHeader::Destination(b) => {
            m.insert("body".into(), hex(b).into());
        }
    }
    m.insert(
        "flow".into(),
        r.flow.as_ref().map_or(Value::Null, flow_to_json),
    );
    Value::Object(m)
}

fn metadata_to_json(md: &ReportMetadata, bits: u16) -> Value {
    let mut m = Map::new();
    let has = |b: u16| bits & b != 0;
    if has(instr::L1_PORTS) {
        put(&mut m, "l1_ingress_port", md.baseline.l1_ingress_port);
        put(&mut m, "l1_egress_port", md.baseline.l1_egress_port);
    }
    if has(instr::HOP_LATENCY) {
        put(&mut m, "hop_latency", md.baseline.hop_latency);
    }
    if has(instr::QUEUE) {
        put(&mut m, "queue_id", md.baseline.queue_id);
        put(&mut m, "queue_occupancy", md.baseline.queue_occupancy);
    }
    if has(instr::INGRESS_TS) {
        put(&mut m, "ingress_timestamp", md.baseline.ingress_timestamp);
    }
    if has(instr::EGRESS_TS) {
        put(&mut m, "egress_timestamp", md.baseline.egress_timestamp);
    }
    if has(instr::L2_PORTS) {
        put(&mut m, "l2_ingress_port", md.baseline.l2_ingress_port);
        put(&mut m, "l2_egress_port", md.baseline.l2_egress_port);
    }
    if has(instr::TX_UTIL) {
        put(&mut m, "egress_tx_util", md.baseline.egress_tx_util);
    }
    if has(instr::BUFFER) {
        put(&mut m, "buffer_id", md.baseline.buffer_id);
        put(&mut m, "buffer_occupancy", md.baseline.buffer_occupancy);
    }
    if has(super::report::REP_MD_DROP) {
        put(&mut m, "drop_queue_id", md.drop_queue_id);
        put(&mut m, "drop_reason", md.drop_reason);
    }
    Value::Object(m)
}

fn inner_int_json(r: Result<Option<IntRepr<'_>>, Error>) -> Value {
    match r {
        Ok(Some(i)) => int_to_json(&i),
        Ok(None) => Value::Null,
        Err(e) => json!({"error": e.reason()}),
    }
}

fn individual_to_json(r: &IndividualReport<'_>, detect: &IntDetect) -> Value {
    let mut m = Map::new();
    m.insert("rep_type".into(), r.rep_type.into());
    m.insert("in_type".into(), r.in_type.into());
    m.insert("report_length".into(), r.report_length.into());
    m.insert("md_length".into(), r.md_length.into());
    m.insert("d".into(), r.dropped.into());
    m.insert("q".into(), r.congested_queue.into());
    m.insert("f".into(), r.tracked_flow.into());
    m.insert("i".into(), r.intermediate.into());
    if let Some(main) = r.main {
        m.insert(
            "main".into(),
            json!({
                "rep_md_bits": main.rep_md_bits,
                "domain_id": main.domain_id,
                "ds_md_bits": main.ds_md_bits,
                "ds_md_status": main.ds_md_status,
                "metadata": metadata_to_json(&main.metadata, main.rep_md_bits),
                "ds_metadata": hex(main.ds_metadata),
            }),
        );
    }
    let tlvs: Vec<Value> = r
        .tlvs()
        .map(|t| json!({"type": t.tlv_type, "template": t.template, "data": hex(t.data)}))
        .collect();
    if r.in_type == super::report::IN_TYPE_TLV {
        m.insert("tlvs".into(), tlvs.into());
    }
    m.insert("inner".into(), hex(r.inner).into());
    m.insert("inner_int".into(), inner_int_json(r.inner_int(detect)));
    Value::Object(m)
}

fn legacy_to_json(r: &LegacyReport<'_>, detect: &IntDetect) -> Value {
    let sub = match r.sub {
        LegacySubHeader::None => Value::Null,
        LegacySubHeader::Drop {
            switch_id,
            ingress_port,
            egress_port,
            queue_id,
            drop_reason,
        } => json!({"kind": "drop", "switch_id": switch_id, "ingress_port": ingress_port,
            "egress_port": egress_port, "queue_id": queue_id, "drop_reason": drop_reason}),
        LegacySubHeader::Local {
            switch_id,
            ingress_port,
            egress_port,
            queue_id,
            queue_occupancy,
            egress_timestamp,
        } => json!({"kind": "local", "switch_id": switch_id, "ingress_port": ingress_port,
            "egress_port": egress_port, "queue_id": queue_id,
            "queue_occupancy": queue_occupancy, "egress_timestamp": egress_timestamp}),
    };
    json!({
        "version": if r.version == 0 { "0.5" } else { "1.0" },
        "length": r.length,
        "next_proto": r.next_proto,
        "rep_md_bits": r.rep_md_bits,
        "d": r.dropped, "q": r.congested_queue, "f": r.tracked_flow,
        "hw_id": r.hw_id,
        "switch_id": r.switch_id,
        "sequence": r.sequence,
        "ingress_timestamp": r.ingress_timestamp,
        "sub_header": sub,
        "inner": hex(r.inner),
        "inner_int": inner_int_json(r.inner_int(detect)),
    })
}

/// A telemetry report; inner packets are searched for INT with `detect`.
pub fn report_to_json(r: &TelemetryReport<'_>, detect: &IntDetect) -> Value {
    match r {
        TelemetryReport::V2(v2) => {
            let reports: Vec<Value> = v2.iter().map(|i| individual_to_json(&i, detect)).collect();
            json!({
                "version": "2.0",
                "hw_id": v2.group.hw_id,
                "sequence": v2.group.sequence,
                "node_id": v2.group.node_id,
                "reports": reports,
            })
        }
        TelemetryReport::Legacy(l) => legacy_to_json(l, detect),
    }
}

/// What [`decode`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// An Ethernet frame carrying INT.
    Int(IntRepr<'a>),
    /// A telemetry report (UDP payload).
    Report(TelemetryReport<'a>),
}

/// For `dta decode --hex`: an Ethernet frame carrying INT (per `detect`), else a telemetry
/// report UDP payload. The error is the report parser's when neither fits.
pub fn decode<'a>(buf: &'a [u8], detect: &IntDetect) -> Result<Decoded<'a>, Error> {
    if let Ok(Some(i)) = find_int(buf, detect) {
        return Ok(Decoded::Int(i));
    }
    parse_report(buf).map(Decoded::Report)
}

/// JSON of a [`Decoded`]: `{"kind": "int", ...}` or `{"kind": "telemetry_report", ...}`.
pub fn to_json(d: &Decoded<'_>, detect: &IntDetect) -> Value {
    let (kind, mut v) = match d {
        Decoded::Int(i) => ("int", int_to_json(i)),
        Decoded::Report(r) => ("telemetry_report", report_to_json(r, detect)),
    };
    if let Value::Object(m) = &mut v {
        m.insert("kind".into(), kind.into());
    }
    v
}
