//! JSON rendering of RoCEv2 frames and CM MADs (feature `json`), for `dta decode --hex` and the
//! spec vectors (`spec/vectors/roce.json`, schema in `docs/rdma.md`). Byte strings are lowercase
//! hex, MACs `aa:bb:..`, IPv4 addresses dotted, integers JSON numbers.

use serde_json::{json, Map, Value};

use super::aeth::Syndrome;
use super::cm::{self, CmaHeader, MadRepr, Message, PathRepr};
use super::{Decoded, FrameRepr, Opcode, QP1, QP1_QKEY};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn mac(m: &[u8; 6]) -> String {
    m.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn ip(a: &[u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

/// Every header field of a frame, and `cm` (the decoded MAD) for a UD SEND to QP1 whose payload
/// is a CM MAD. Absent extension headers are `null`.
pub fn frame_to_json(f: &FrameRepr<'_>) -> Value {
    let b = &f.bth;
    let aeth = f.aeth.map(|a| {
        let mut m = Map::new();
        m.insert("syndrome".into(), a.syndrome.kind().into());
        match a.syndrome {
            Syndrome::Ack { credits } => m.insert("credits".into(), credits.into()),
            Syndrome::RnrNak { timer } => m.insert("timer".into(), timer.into()),
            Syndrome::Nak(c) => m.insert("code".into(), c.name().into()),
        };
        m.insert("msn".into(), a.msn.into());
        Value::Object(m)
    });
    let mut v = json!({
        "eth": {"dst": mac(&f.eth.dst), "src": mac(&f.eth.src)},
        "ip": {
            "src": ip(&f.ip.src), "dst": ip(&f.ip.dst), "dscp_ecn": f.ip.dscp_ecn,
            "ident": f.ip.ident, "dont_fragment": f.ip.dont_fragment, "ttl": f.ip.ttl,
        },
        "udp": {"src_port": f.udp.src_port, "checksum": f.udp.checksum},
        "bth": {
            "opcode": b.opcode.name(), "solicited": b.solicited, "migreq": b.migreq,
            "pad_cnt": b.pad_cnt, "pkey": b.pkey, "fecn": b.fecn, "becn": b.becn,
            "dest_qp": b.dest_qp, "ack_req": b.ack_req, "psn": b.psn,
        },
        "deth": f.deth.map(|d| json!({"qkey": d.qkey, "src_qp": d.src_qp})),
        "reth": f.reth.map(|r| json!({"va": r.va, "rkey": r.rkey, "dma_len": r.dma_len})),
        "atomic_eth": f.atomic_eth.map(|a| json!({
            "va": a.va, "rkey": a.rkey, "swap_add": a.swap_add, "compare": a.compare,
        })),
        "aeth": aeth,
        "atomic_ack_eth": f.atomic_ack_eth.map(|a| json!({"original": a.original})),
        "immdt": f.immdt,
        "payload": hex(f.payload),
    });
    let to_qp1 = matches!(b.opcode, Opcode::UdSendOnly)
        && b.dest_qp == QP1
        && f.deth.is_some_and(|d| d.qkey == QP1_QKEY);
    if to_qp1 {
        if let Ok(mad) = MadRepr::parse(f.payload) {
            v["cm"] = cm_to_json(&mad);
        }
    }
    v
}

/// [`frame_to_json`] plus the received `icrc` (the little-endian u32 of the last 4 bytes) and
/// `icrc_valid`.
pub fn to_json(d: &Decoded<'_>) -> Value {
    let mut v = frame_to_json(&d.frame);
    v["icrc"] = d.icrc.into();
    v["icrc_valid"] = d.icrc_valid.into();
    v
}

fn path(p: &PathRepr) -> Value {
    json!({
        "local_lid": p.local_lid, "remote_lid": p.remote_lid,
        "local_gid": hex(&p.local_gid), "remote_gid": hex(&p.remote_gid),
        "flow_label": p.flow_label, "packet_rate": p.packet_rate,
        "traffic_class": p.traffic_class, "hop_limit": p.hop_limit, "sl": p.sl,
        "subnet_local": p.subnet_local, "local_ack_timeout": p.local_ack_timeout,
    })
}

/// A CM MAD: `transaction_id`, `attribute` (`req`, `rep`, ...) and the attribute's fields. A REQ
/// to an RDMA CM service id also gets `rdma_cm`: the destination port and the [`CmaHeader`].
pub fn cm_to_json(m: &MadRepr<'_>) -> Value {
    let body = match &m.message {
        Message::Req(r) => {
            let rdma_cm = match (
                cm::rdma_cm_port(r.service_id),
                CmaHeader::parse(r.private_data),
            ) {
                (Some(port), Ok(h)) => json!({
                    "dst_port": port, "src_port": h.src_port,
                    "src_ip": ip(&h.src_ip), "dst_ip": ip(&h.dst_ip),
                }),
                _ => Value::Null,
            };
            json!({
                "local_comm_id": r.local_comm_id, "vendor_id": r.vendor_id,
                "service_id": r.service_id, "local_ca_guid": r.local_ca_guid,
                "local_qkey": r.local_qkey, "local_qpn": r.local_qpn,
                "responder_resources": r.responder_resources, "local_eecn": r.local_eecn,
                "initiator_depth": r.initiator_depth, "remote_eecn": r.remote_eecn,
                "remote_cm_response_timeout": r.remote_cm_response_timeout,
                "transport_service_type": r.transport_service_type,
                "end_to_end_flow_control": r.end_to_end_flow_control,
                "starting_psn": r.starting_psn,
                "local_cm_response_timeout": r.local_cm_response_timeout,
                "retry_count": r.retry_count, "pkey": r.pkey, "path_mtu": r.path_mtu,
                "rdc_exists": r.rdc_exists, "rnr_retry_count": r.rnr_retry_count,
                "max_cm_retries": r.max_cm_retries, "srq": r.srq,
                "extended_transport_type": r.extended_transport_type,
                "primary_path": path(&r.primary_path),
                "alternate_path": path(&r.alternate_path),
                "sap_supported": r.sap_supported,
                "private_data": hex(r.private_data),
                "rdma_cm": rdma_cm,
            })
        }
        Message::Rep(r) => json!({
            "local_comm_id": r.local_comm_id, "remote_comm_id": r.remote_comm_id,
            "local_qkey": r.local_qkey, "local_qpn": r.local_qpn, "local_eecn": r.local_eecn,
            "starting_psn": r.starting_psn, "responder_resources": r.responder_resources,
            "initiator_depth": r.initiator_depth, "target_ack_delay": r.target_ack_delay,
            "failover_accepted": r.failover_accepted,
            "end_to_end_flow_control": r.end_to_end_flow_control,
            "rnr_retry_count": r.rnr_retry_count, "srq": r.srq, "vendor_id": r.vendor_id,
            "local_ca_guid": r.local_ca_guid, "private_data": hex(r.private_data),
        }),
        Message::Rej(r) => json!({
            "local_comm_id": r.local_comm_id, "remote_comm_id": r.remote_comm_id,
            "message_rejected": r.message_rejected, "reject_info_length": r.reject_info_length,
            "reason": r.reason, "ari": hex(r.ari), "private_data": hex(r.private_data),
        }),
        Message::Mra(r) => json!({
            "local_comm_id": r.local_comm_id, "remote_comm_id": r.remote_comm_id,
            "message_mraed": r.message_mraed, "service_timeout": r.service_timeout,
            "private_data": hex(r.private_data),
        }),
        Message::Rtu(r) | Message::Drep(r) => json!({
            "local_comm_id": r.local_comm_id, "remote_comm_id": r.remote_comm_id,
            "private_data": hex(r.private_data),
        }),
        Message::Dreq(r) => json!({
            "local_comm_id": r.local_comm_id, "remote_comm_id": r.remote_comm_id,
            "remote_qpn": r.remote_qpn, "private_data": hex(r.private_data),
        }),
    };
    let mut v = json!({
        "transaction_id": m.transaction_id,
        "attribute": m.message.attribute_id().name(),
    });
    if let (Value::Object(o), Value::Object(b)) = (&mut v, body) {
        o.extend(b);
    }
    v
}
