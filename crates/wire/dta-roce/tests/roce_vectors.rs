//! `spec/vectors/roce.json` is the truth for the RoCEv2 wire layer: every vector must parse to
//! exactly its fields (with a valid ICRC equal to its `icrc`), emitting a frame built from its
//! fields (read here independently of the emitter) must give exactly its bytes, CM MADs must
//! re-emit byte-exactly, and every invalid vector must be rejected with its reason.

use dta_roce::aeth::{self, NakCode, Syndrome};
use dta_roce::cm::MadRepr;
use dta_roce::{
    atomic_ack_eth, atomic_eth, bth, deth, ethernet, frame_to_json, ipv4, reth, to_json, udp,
    Error, FrameRepr, Opcode,
};
use serde_json::Value;
use std::collections::BTreeSet;

const ROCE: &str = include_str!("../../../../spec/vectors/roce.json");

fn doc() -> Value {
    serde_json::from_str(ROCE).expect("roce.json is JSON")
}

fn bytes(v: &Value) -> Vec<u8> {
    let s = v["hex"].as_str().unwrap();
    assert_eq!(s, s.to_lowercase());
    hex::decode(s).unwrap()
}

fn int(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

fn flag(v: &Value, k: &str) -> bool {
    v[k].as_bool().unwrap_or_else(|| panic!("{k} in {v}"))
}

fn mac(v: &Value) -> [u8; 6] {
    let b = hex::decode(v.as_str().unwrap().replace(':', "")).unwrap();
    b.try_into().unwrap()
}

fn ip(v: &Value) -> [u8; 4] {
    let p: Vec<u8> = v
        .as_str()
        .unwrap()
        .split('.')
        .map(|x| x.parse().unwrap())
        .collect();
    p.try_into().unwrap()
}

/// Build the frame of a vector from its JSON fields.
fn frame_of<'a>(f: &Value, payload: &'a [u8]) -> FrameRepr<'a> {
    let b = &f["bth"];
    let opt = |k: &str| (!f[k].is_null()).then(|| &f[k]);
    FrameRepr {
        eth: ethernet::Repr {
            dst: mac(&f["eth"]["dst"]),
            src: mac(&f["eth"]["src"]),
            ethertype: dta_net::ethernet::ETHERTYPE_IPV4,
        },
        ip: ipv4::Repr {
            src: ip(&f["ip"]["src"]),
            dst: ip(&f["ip"]["dst"]),
            dscp_ecn: int(&f["ip"], "dscp_ecn") as u8,
            ident: int(&f["ip"], "ident") as u16,
            dont_fragment: flag(&f["ip"], "dont_fragment"),
            ttl: int(&f["ip"], "ttl") as u8,
            protocol: dta_net::IPPROTO_UDP,
        },
        udp: udp::Repr {
            src_port: int(&f["udp"], "src_port") as u16,
            checksum: int(&f["udp"], "checksum") as u16,
            dst_port: dta_roce::ROCE_PORT,
        },
        bth: bth::Repr {
            opcode: Opcode::from_name(b["opcode"].as_str().unwrap()).unwrap(),
            solicited: flag(b, "solicited"),
            migreq: flag(b, "migreq"),
            pad_cnt: int(b, "pad_cnt") as u8,
            pkey: int(b, "pkey") as u16,
            fecn: flag(b, "fecn"),
            becn: flag(b, "becn"),
            dest_qp: int(b, "dest_qp") as u32,
            ack_req: flag(b, "ack_req"),
            psn: int(b, "psn") as u32,
        },
        deth: opt("deth").map(|d| deth::Repr {
            qkey: int(d, "qkey") as u32,
            src_qp: int(d, "src_qp") as u32,
        }),
        reth: opt("reth").map(|r| reth::Repr {
            va: int(r, "va"),
            rkey: int(r, "rkey") as u32,
            dma_len: int(r, "dma_len") as u32,
        }),
        atomic_eth: opt("atomic_eth").map(|a| atomic_eth::Repr {
            va: int(a, "va"),
            rkey: int(a, "rkey") as u32,
            swap_add: int(a, "swap_add"),
            compare: int(a, "compare"),
        }),
        aeth: opt("aeth").map(|a| aeth::Repr {
            syndrome: match a["syndrome"].as_str().unwrap() {
                "ack" => Syndrome::Ack {
                    credits: int(a, "credits") as u8,
                },
                "rnr_nak" => Syndrome::RnrNak {
                    timer: int(a, "timer") as u8,
                },
                "nak" => Syndrome::Nak(NakCode::from_name(a["code"].as_str().unwrap()).unwrap()),
                s => panic!("syndrome {s}"),
            },
            msn: int(a, "msn") as u32,
        }),
        atomic_ack_eth: opt("atomic_ack_eth").map(|a| atomic_ack_eth::Repr {
            original: int(a, "original"),
        }),
        immdt: opt("immdt").map(|i| i.as_u64().unwrap() as u32),
        payload,
    }
}

#[test]
fn valid_vectors_parse_and_emit_byte_exactly() {
    let d = doc();
    let vectors = d["vectors"].as_array().unwrap();
    assert!(vectors.len() >= 15);
    for v in vectors {
        let name = v["name"].as_str().unwrap();
        let wire = bytes(v);
        let f = &v["frame"];
        let parsed = FrameRepr::parse(&wire).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(frame_to_json(&parsed), *f, "{name}: fields");
        let decoded = FrameRepr::decode(&wire).unwrap();
        assert!(decoded.icrc_valid);
        assert_eq!(u64::from(decoded.icrc), int(v, "icrc"), "{name}: icrc");
        let j = to_json(&decoded);
        assert_eq!(j["icrc_valid"], Value::Bool(true));

        let payload = hex::decode(f["payload"].as_str().unwrap()).unwrap();
        let built = frame_of(f, &payload);
        assert_eq!(built, parsed, "{name}: fields read back");
        let mut out = vec![0u8; built.buffer_len()];
        assert_eq!(built.emit(&mut out), Ok(wire.len()), "{name}");
        assert_eq!(hex::encode(&out), hex::encode(&wire), "{name}: bytes");

        if !f["cm"].is_null() {
            let mad = MadRepr::parse(parsed.payload).unwrap();
            let mut m = [0u8; 256];
            mad.emit(&mut m).unwrap();
            assert_eq!(&m[..], parsed.payload, "{name}: MAD re-emits");
        }
    }
}

#[test]
fn invalid_vectors_fail_with_their_reason() {
    let d = doc();
    let mut reasons = BTreeSet::new();
    for v in d["invalid"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        let want = Error::from_reason(v["error"].as_str().unwrap()).expect("known reason");
        let wire = bytes(v);
        assert_eq!(FrameRepr::parse(&wire), Err(want), "{name}");
        // Only a bad ICRC decodes (reported, not failed).
        match FrameRepr::decode(&wire) {
            Ok(d) => {
                assert_eq!(want, Error::BadIcrc, "{name}");
                assert!(!d.icrc_valid);
                assert_eq!(to_json(&d)["icrc_valid"], Value::Bool(false));
            }
            Err(e) => assert_eq!(e, want, "{name}"),
        }
        reasons.insert(want.reason());
    }
    for e in [
        "truncated",
        "not_ipv4",
        "bad_ip_header",
        "bad_ip_checksum",
        "not_udp",
        "not_roce_port",
        "bad_length",
        "bad_version",
        "bad_opcode",
        "bad_syndrome",
        "bad_icrc",
    ] {
        assert!(reasons.contains(e), "no invalid vector for {e}");
    }
}

#[test]
fn vectors_cover_the_required_cases() {
    let d = doc();
    let vs = d["vectors"].as_array().unwrap();
    let opcodes: BTreeSet<&str> = vs
        .iter()
        .map(|v| v["frame"]["bth"]["opcode"].as_str().unwrap())
        .collect();
    for o in [
        Opcode::RcWriteOnly,
        Opcode::RcWriteFirst,
        Opcode::RcWriteMiddle,
        Opcode::RcWriteLast,
        Opcode::RcWriteOnlyImm,
        Opcode::RcFetchAdd,
        Opcode::RcAcknowledge,
        Opcode::RcAtomicAcknowledge,
        Opcode::UdSendOnly,
    ] {
        assert!(opcodes.contains(o.name()), "{}", o.name());
    }
    let pads: BTreeSet<u64> = vs
        .iter()
        .map(|v| int(&v["frame"]["bth"], "pad_cnt"))
        .collect();
    assert_eq!(pads, [0, 1, 2, 3].into());
    let syndromes: BTreeSet<String> = vs
        .iter()
        .filter(|v| !v["frame"]["aeth"].is_null())
        .map(|v| {
            let a = &v["frame"]["aeth"];
            format!("{}:{}", a["syndrome"], a["code"])
        })
        .collect();
    for s in [
        "\"ack\":null",
        "\"rnr_nak\":null",
        "\"nak\":\"psn_sequence_error\"",
        "\"nak\":\"invalid_request\"",
        "\"nak\":\"remote_access_error\"",
    ] {
        assert!(syndromes.contains(s), "{s} in {syndromes:?}");
    }
    let cms: BTreeSet<&str> = vs
        .iter()
        .filter_map(|v| v["frame"]["cm"]["attribute"].as_str())
        .collect();
    assert!(cms.contains("req") && cms.contains("rep"));
    let req = vs
        .iter()
        .find(|v| v["frame"]["cm"]["attribute"] == "req")
        .unwrap();
    assert_eq!(req["frame"]["cm"]["rdma_cm"]["dst_port"], 7471);
}
