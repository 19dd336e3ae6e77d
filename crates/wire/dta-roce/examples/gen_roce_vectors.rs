//! Regenerates `spec/vectors/roce.json` from the RoCEv2 emitters:
//! `cargo run -p dta-roce --example gen_roce_vectors [-- OUT_DIR]`. The committed JSON is the
//! truth; `tests/roce_vectors.rs` checks parsing and emitting against it, and
//! `spec/tests/test_roce_scapy.py` checks it against scapy's RoCE layer.

use std::path::PathBuf;

use dta_roce::aeth::{NakCode, Syndrome};
use dta_roce::cm::{self, CmaHeader, DreqRepr, IdsRepr, MadRepr, Message, PathRepr};
use dta_roce::{
    aeth, atomic_ack_eth, atomic_eth, bth, deth, ethernet, icrc, ipv4, reth, udp, FrameRepr,
    Opcode, QP1, QP1_QKEY,
};
use serde_json::{json, Value};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

const TRANSLATOR: [u8; 4] = [10, 0, 0, 1];
const COLLECTOR: [u8; 4] = [10, 0, 0, 2];

/// Translator -> collector frame skeleton (QP 0x11, PSN `psn`).
fn req(opcode: Opcode, psn: u32) -> FrameRepr<'static> {
    FrameRepr {
        eth: ethernet::Repr {
            dst: [0x02, 0, 0, 0, 0, 0x02],
            src: [0x02, 0, 0, 0, 0, 0x01],
            ethertype: dta_net::ethernet::ETHERTYPE_IPV4,
        },
        ip: ipv4::Repr {
            src: TRANSLATOR,
            dst: COLLECTOR,
            dscp_ecn: 0,
            ident: 0,
            dont_fragment: true,
            ttl: 64,
            protocol: dta_net::IPPROTO_UDP,
        },
        udp: udp::Repr {
            src_port: 0xc0de,
            checksum: 0,
            dst_port: dta_roce::ROCE_PORT,
        },
        bth: bth::Repr::new(opcode, 0x000011, psn),
        deth: None,
        reth: None,
        atomic_eth: None,
        aeth: None,
        atomic_ack_eth: None,
        immdt: None,
        payload: &[],
    }
}

/// Collector -> translator acknowledgement skeleton (QP 0x22).
fn ack(syndrome: Syndrome, psn: u32, msn: u32) -> FrameRepr<'static> {
    let mut f = req(Opcode::RcAcknowledge, psn);
    std::mem::swap(&mut f.eth.dst, &mut f.eth.src);
    std::mem::swap(&mut f.ip.src, &mut f.ip.dst);
    f.udp.src_port = 0xd00d;
    f.bth.dest_qp = 0x000022;
    f.aeth = Some(aeth::Repr { syndrome, msn });
    f
}

fn emit(f: &FrameRepr<'_>) -> Vec<u8> {
    let mut b = vec![0u8; f.buffer_len()];
    let n = f.emit(&mut b).expect("vector emits");
    assert_eq!(n, b.len());
    b
}

fn mad(m: &MadRepr<'_>) -> Vec<u8> {
    let mut b = vec![0u8; cm::MAD_LEN];
    m.emit(&mut b).unwrap();
    b
}

fn ud_to_qp1(payload: &[u8], from_collector: bool) -> FrameRepr<'_> {
    let mut f = req(Opcode::UdSendOnly, 0x000100);
    if from_collector {
        std::mem::swap(&mut f.eth.dst, &mut f.eth.src);
        std::mem::swap(&mut f.ip.src, &mut f.ip.dst);
    }
    f.bth.dest_qp = QP1;
    f.deth = Some(deth::Repr {
        qkey: QP1_QKEY,
        src_qp: QP1,
    });
    f.payload = payload;
    f
}

fn fix_ip_checksum(b: &mut [u8]) {
    ipv4::Packet::new_unchecked(&mut b[14..34]).fill_checksum();
}

fn fix_icrc(b: &mut [u8]) {
    let n = b.len();
    let c = icrc(&b[14..n - 4]);
    b[n - 4..].copy_from_slice(&c.to_le_bytes());
}

fn main() {
    let out =
        PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../../spec/vectors").into()
        }));
    let rkey = 0x0000_1234;
    let va = 0x7f00_0000_1000u64;
    let mut frames: Vec<(&str, Vec<u8>)> = Vec::new();

    let mut f = req(Opcode::RcWriteOnly, 0x000100);
    f.reth = Some(reth::Repr {
        va,
        rkey,
        dma_len: 5,
    });
    f.payload = b"\x0a\x00\x00\x01\xee";
    f.bth.ack_req = true;
    frames.push(("rc_write_only_pad3", emit(&f)));

    // An ECN-marked, DSCP 26 write with FECN set in flight: masked by the ICRC.
    let mut g = f;
    g.ip.dscp_ecn = (26 << 2) | 3;
    g.ip.ttl = 17;
    g.bth.fecn = true;
    g.bth.migreq = true;
    g.payload = b"\x01\x02\x03\x04\x05\x06\x07\x08";
    g.reth = Some(reth::Repr {
        va,
        rkey,
        dma_len: 8,
    });
    frames.push(("rc_write_only_ecn_fecn_pad0", emit(&g)));

    let mut f = req(Opcode::RcWriteFirst, 0x000101);
    f.reth = Some(reth::Repr {
        va: va + 64,
        rkey,
        dma_len: 23,
    });
    f.payload = &[0x11; 8];
    frames.push(("rc_write_first", emit(&f)));
    let mut f = req(Opcode::RcWriteMiddle, 0x000102);
    f.payload = &[0x22; 8];
    frames.push(("rc_write_middle", emit(&f)));
    let mut f = req(Opcode::RcWriteLast, 0x000103);
    f.payload = &[0x33; 7];
    f.bth.ack_req = true;
    frames.push(("rc_write_last_pad1", emit(&f)));

    let mut f = req(Opcode::RcWriteOnlyImm, 0xffffff);
    f.reth = Some(reth::Repr {
        va: va + 128,
        rkey,
        dma_len: 6,
    });
    f.immdt = Some(0xdead_beef);
    f.bth.solicited = true;
    f.payload = b"report";
    frames.push(("rc_write_only_with_immediate_pad2", emit(&f)));

    let mut f = req(Opcode::RcWriteLastImm, 0x000104);
    f.immdt = Some(7);
    f.payload = &[0x44; 3];
    frames.push(("rc_write_last_with_immediate_pad1", emit(&f)));

    let mut f = req(Opcode::RcFetchAdd, 0x000105);
    f.atomic_eth = Some(atomic_eth::Repr {
        va: va + 0x800,
        rkey,
        swap_add: 1_000_000_007,
        compare: 0,
    });
    f.bth.ack_req = true;
    frames.push(("rc_fetch_add", emit(&f)));

    frames.push((
        "rc_ack",
        emit(&ack(Syndrome::Ack { credits: 31 }, 0x000105, 0x000006)),
    ));
    let mut f = ack(Syndrome::Ack { credits: 0 }, 0x000105, 0x000006);
    f.bth.opcode = Opcode::RcAtomicAcknowledge;
    f.atomic_ack_eth = Some(atomic_ack_eth::Repr {
        original: 41_999_999_993,
    });
    frames.push(("rc_atomic_ack", emit(&f)));
    frames.push((
        "rc_rnr_nak",
        emit(&ack(Syndrome::RnrNak { timer: 14 }, 0x000101, 0x000002)),
    ));
    frames.push((
        "rc_nak_psn_sequence_error",
        emit(&ack(
            Syndrome::Nak(NakCode::PsnSequenceError),
            0x000102,
            0x000002,
        )),
    ));
    frames.push((
        "rc_nak_invalid_request",
        emit(&ack(
            Syndrome::Nak(NakCode::InvalidRequest),
            0x000103,
            0x000002,
        )),
    ));
    frames.push((
        "rc_nak_remote_access_error",
        emit(&ack(Syndrome::Nak(NakCode::RemoteAccessError), 0x000100, 0)),
    ));

    // RDMA CM over QP1: REQ (translator -> collector port 7471), REP, RTU, DREQ.
    let mut pd = [0u8; cm::CMA_HEADER_LEN];
    CmaHeader {
        src_port: 0xa1b2,
        src_ip: TRANSLATOR,
        dst_ip: COLLECTOR,
    }
    .emit(&mut pd)
    .unwrap();
    let tid = 0x0000_0001_2345_6789;
    let req_mad = mad(&MadRepr {
        transaction_id: tid,
        message: Message::Req(cm::ReqRepr {
            local_comm_id: 0x1111_0001,
            vendor_id: 0,
            service_id: cm::rdma_cm_service_id(7471),
            local_ca_guid: 0x0200_00ff_fe00_0001,
            local_qkey: 0,
            local_qpn: 0x000022,
            responder_resources: 1,
            local_eecn: 0,
            initiator_depth: 1,
            remote_eecn: 0,
            remote_cm_response_timeout: 20,
            transport_service_type: 0,
            end_to_end_flow_control: true,
            starting_psn: 0x000100,
            local_cm_response_timeout: 20,
            retry_count: 7,
            pkey: 0xffff,
            path_mtu: 3,
            rdc_exists: false,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            srq: false,
            extended_transport_type: 0,
            primary_path: PathRepr {
                local_lid: 0xffff,
                remote_lid: 0xffff,
                local_gid: cm::ipv4_mapped_gid(TRANSLATOR),
                remote_gid: cm::ipv4_mapped_gid(COLLECTOR),
                flow_label: 0,
                packet_rate: 0,
                traffic_class: 0,
                hop_limit: 64,
                sl: 0,
                subnet_local: true,
                local_ack_timeout: 18,
            },
            alternate_path: PathRepr::default(),
            sap_supported: false,
            private_data: &pd,
        }),
    });
    frames.push(("ud_send_only_cm_req", emit(&ud_to_qp1(&req_mad, false))));
    let rep_mad = mad(&MadRepr {
        transaction_id: tid,
        message: Message::Rep(cm::RepRepr {
            local_comm_id: 0x2222_0001,
            remote_comm_id: 0x1111_0001,
            local_qkey: 0,
            local_qpn: 0x000011,
            local_eecn: 0,
            starting_psn: 0x000200,
            responder_resources: 1,
            initiator_depth: 1,
            target_ack_delay: 15,
            failover_accepted: 0,
            end_to_end_flow_control: true,
            rnr_retry_count: 7,
            srq: false,
            vendor_id: 0,
            local_ca_guid: 0x0200_00ff_fe00_0002,
            private_data: &[],
        }),
    });
    frames.push(("ud_send_only_cm_rep", emit(&ud_to_qp1(&rep_mad, true))));
    let rtu_mad = mad(&MadRepr {
        transaction_id: tid,
        message: Message::Rtu(IdsRepr {
            local_comm_id: 0x1111_0001,
            remote_comm_id: 0x2222_0001,
            private_data: &[],
        }),
    });
    frames.push(("ud_send_only_cm_rtu", emit(&ud_to_qp1(&rtu_mad, false))));
    let dreq_mad = mad(&MadRepr {
        transaction_id: tid + 1,
        message: Message::Dreq(DreqRepr {
            local_comm_id: 0x1111_0001,
            remote_comm_id: 0x2222_0001,
            remote_qpn: 0x000011,
            private_data: &[],
        }),
    });
    frames.push(("ud_send_only_cm_dreq", emit(&ud_to_qp1(&dreq_mad, false))));

    // A CNP captured on a ConnectX-4 Lx (published with scapy's RoCE regression tests): built
    // here from its fields, it must come out as the NIC sent it, ICRC included.
    let cnp = FrameRepr {
        eth: ethernet::Repr {
            dst: [0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2],
            src: [0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32],
            ethertype: dta_net::ethernet::ETHERTYPE_IPV4,
        },
        ip: ipv4::Repr {
            src: [10, 0, 17, 1],
            dst: [10, 0, 18, 1],
            dscp_ecn: 0xc2,
            ident: 0x718c,
            dont_fragment: true,
            ttl: 64,
            protocol: dta_net::IPPROTO_UDP,
        },
        udp: udp::Repr {
            src_port: 0,
            checksum: 0,
            dst_port: dta_roce::ROCE_PORT,
        },
        bth: bth::Repr {
            becn: true,
            ..bth::Repr::new(Opcode::Cnp, 0x000118, 0)
        },
        deth: None,
        reth: None,
        atomic_eth: None,
        aeth: None,
        atomic_ack_eth: None,
        immdt: None,
        payload: &[0; 16],
    };
    let cnp = emit(&cnp);
    assert_eq!(
        hex(&cnp),
        "e41d2dab2bc27cfe90643b32080045c2003c718c4000401191610a0011010a001201000012b7002800008100ffff40000118000000000000000000000000000000000000000082fd002a"
    );
    frames.push(("cnp_captured_connectx4_lx", cnp));

    let vectors: Vec<Value> = frames
        .iter()
        .map(|(name, b)| {
            let d = FrameRepr::decode(b).expect("vector decodes");
            assert!(d.icrc_valid);
            json!({"name": name, "hex": hex(b), "frame": dta_roce::frame_to_json(&d.frame), "icrc": d.icrc})
        })
        .collect();

    // Invalid frames: one defect each, everything else (IP checksum, ICRC) kept consistent
    // unless the defect is that field.
    let base = frames[0].1.clone();
    let ackf = frames.iter().find(|f| f.0 == "rc_ack").unwrap().1.clone();
    let mut invalid: Vec<(&str, Vec<u8>, &str)> = Vec::new();
    let m = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = base.clone();
        f(&mut b);
        b
    };
    invalid.push(("empty", vec![], "truncated"));
    invalid.push(("ethernet_only", base[..14].to_vec(), "truncated"));
    invalid.push(("ends_in_bth", base[..14 + 28 + 6].to_vec(), "truncated"));
    invalid.push((
        "ipv6_ethertype",
        m(&|b| b[12..14].copy_from_slice(&[0x86, 0xdd])),
        "not_ipv4",
    ));
    invalid.push((
        "ip_options",
        m(&|b| {
            b[14] = 0x46;
            fix_ip_checksum(b)
        }),
        "bad_ip_header",
    ));
    invalid.push((
        "ip_fragment",
        m(&|b| {
            b[14 + 6] |= 0x20;
            fix_ip_checksum(b)
        }),
        "bad_ip_header",
    ));
    invalid.push(("ip_checksum", m(&|b| b[14 + 11] ^= 0x01), "bad_ip_checksum"));
    invalid.push((
        "tcp",
        m(&|b| {
            b[14 + 9] = 6;
            fix_ip_checksum(b)
        }),
        "not_udp",
    ));
    invalid.push(("udp_port_4792", m(&|b| b[14 + 23] = 0xb8), "not_roce_port"));
    invalid.push((
        "ip_total_length_beyond_frame",
        m(&|b| {
            b[14 + 3] += 4;
            fix_ip_checksum(b)
        }),
        "truncated",
    ));
    invalid.push(("udp_length", m(&|b| b[14 + 25] -= 4), "bad_length"));
    invalid.push((
        "transport_not_multiple_of_4",
        m(&|b| {
            b.pop();
            b[14 + 3] -= 1;
            b[14 + 25] -= 1;
            fix_ip_checksum(b);
            fix_icrc(b)
        }),
        "bad_length",
    ));
    invalid.push((
        "bth_tver_1",
        m(&|b| {
            b[14 + 28 + 1] |= 1;
            fix_icrc(b)
        }),
        "bad_version",
    ));
    invalid.push((
        "opcode_0x15",
        m(&|b| {
            b[14 + 28] = 0x15;
            fix_icrc(b)
        }),
        "bad_opcode",
    ));
    let mut b = ackf.clone();
    b[14 + 28 + 12] = 0x40;
    fix_icrc(&mut b);
    invalid.push(("aeth_reserved_syndrome", b, "bad_syndrome"));
    let mut b = ackf.clone();
    b[14 + 28 + 12] = 0x65;
    fix_icrc(&mut b);
    invalid.push(("aeth_reserved_nak_code", b, "bad_syndrome"));
    let mut b = ackf.clone();
    b[14 + 28 + 1] |= 0x10;
    fix_icrc(&mut b);
    invalid.push(("ack_pad_without_payload", b, "bad_length"));
    invalid.push((
        "icrc_flipped",
        m(&|b| *b.last_mut().unwrap() ^= 0x80),
        "bad_icrc",
    ));
    invalid.push((
        "payload_flipped",
        m(&|b| b[14 + 28 + 12 + 16] ^= 0x01),
        "bad_icrc",
    ));

    let invalid: Vec<Value> = invalid
        .iter()
        .map(|(name, b, err)| {
            let got = FrameRepr::parse(b).expect_err(name);
            assert_eq!(got.reason(), *err, "{name}");
            json!({"name": name, "hex": hex(b), "error": err})
        })
        .collect();

    let doc = json!({"vectors": vectors, "invalid": invalid});
    let path = out.join("roce.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap() + "\n").unwrap();
    println!("wrote {}", path.display());
}
