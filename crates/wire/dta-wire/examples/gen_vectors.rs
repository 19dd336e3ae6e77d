// Size: the table of every DTA spec vector, one entry each, generated in one run.
//! Regenerates `spec/vectors/{prototype,native,invalid}.json` from the emitters:
//! `cargo run -p dta-wire --example gen_vectors [-- OUT_DIR]`. The committed JSON is the truth;
//! `tests/vectors.rs` checks parsing and emitting against it field by field and byte by byte.

use std::path::PathBuf;

use dta_wire::auth::{self, ControlKey};
use dta_wire::native::{
    DatagramBuilder, HelloRepr, NackRepr, NoticeRepr, SketchNack, RATE_UNLIMITED,
};
use dta_wire::prototype::{self, BaseFormat, BaseRepr};
use dta_wire::{Opcode, Priority, Report};
use serde_json::{json, Value};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// 13-byte IPv4 5-tuple: src 10.0.0.1, dst 10.0.0.2, sport 1234, dport 80, proto 6 (TCP).
const FIVE_TUPLE: [u8; 13] = [10, 0, 0, 1, 10, 0, 0, 2, 0x04, 0xd2, 0x00, 0x50, 6];

fn seq_bytes(n: usize, start: u8) -> Vec<u8> {
    (0..n).map(|i| start.wrapping_add(i as u8)).collect()
}

struct Proto {
    name: &'static str,
    format: BaseFormat,
    seqnum: Option<u8>,
    retransmittable: bool,
    immediate: bool,
    report: Value,
}

fn prototype_vector(v: &Proto) -> Value {
    let r = &v.report;
    let opcode = Opcode::from_name(r["opcode"].as_str().unwrap()).unwrap();
    let key;
    let data;
    let report = match opcode {
        Opcode::KeyWrite => {
            key = (r["key"].as_u64().unwrap() as u32).to_be_bytes();
            data = unhex(r["data"].as_str().unwrap());
            Report::KeyWrite {
                key: &key,
                data: &data,
                redundancy: r["redundancy"].as_u64().unwrap() as u8,
                immediate: v.immediate,
            }
        }
        Opcode::KeyIncrement => {
            key = (r["key"].as_u64().unwrap() as u32).to_be_bytes();
            Report::KeyIncrement {
                key: &key,
                counter: r["counter"].as_u64().unwrap(),
                redundancy: r["redundancy"].as_u64().unwrap() as u8,
                immediate: v.immediate,
            }
        }
        Opcode::Append => {
            data = unhex(r["data"].as_str().unwrap());
            Report::Append {
                list_id: r["list_id"].as_u64().unwrap() as u32,
                data: &data,
                immediate: v.immediate,
            }
        }
        Opcode::Postcarding => {
            key = (r["key"].as_u64().unwrap() as u32).to_be_bytes();
            Report::Postcard {
                key: &key,
                hop: r["hop"].as_u64().unwrap() as u8,
                path_len: 0,
                value: r["data"].as_u64().unwrap() as u32,
                immediate: v.immediate,
            }
        }
        Opcode::SketchMerge => unreachable!(),
    };
    let repr = prototype::Repr {
        base: BaseRepr {
            opcode,
            seqnum: v.seqnum,
            immediate: v.immediate,
            retransmittable: v.retransmittable,
        },
        report,
    };
    let mut buf = [0u8; 64];
    let n = repr.emit(&mut buf, v.format).unwrap();
    let mut fields = r.as_object().unwrap().clone();
    fields.remove("opcode");
    json!({
        "name": v.name,
        "base_header": v.format.name(),
        "hex": hex(&buf[..n]),
        "header": {
            "opcode": opcode.name(),
            "immediate": v.immediate,
            "seqnum": v.seqnum,
            "retransmittable": v.retransmittable,
        },
        "report": fields,
    })
}

fn prototype_file() -> Value {
    use BaseFormat::*;
    let p = |name, format, seqnum, retransmittable, immediate, report| Proto {
        name,
        format,
        seqnum,
        retransmittable,
        immediate,
        report,
    };
    let d4 = "deadbeef";
    let d12 = hex(&seq_bytes(12, 0x10));
    let d28 = hex(&seq_bytes(28, 0xe0));
    let vectors = [
        p(
            "key_write_short_4",
            Short,
            None,
            false,
            true,
            json!({"opcode": "key_write", "redundancy": 1, "key": 0x0a000001u32, "data": d4}),
        ),
        p(
            "key_write_short_12",
            Short,
            None,
            false,
            false,
            json!({"opcode": "key_write", "redundancy": 2, "key": 0xc0a80101u32, "data": d12}),
        ),
        p(
            "key_write_short_28",
            Short,
            None,
            false,
            true,
            json!({"opcode": "key_write", "redundancy": 4, "key": 0u32, "data": d28}),
        ),
        p(
            "key_write_long_4",
            Long,
            Some(0),
            true,
            false,
            json!({"opcode": "key_write", "redundancy": 3, "key": 0x01020304u32, "data": "00000001"}),
        ),
        p(
            "key_write_long_12",
            Long,
            Some(255),
            false,
            true,
            json!({"opcode": "key_write", "redundancy": 2, "key": 0x7f000001u32, "data": d12}),
        ),
        p(
            "key_write_long_28_max_key",
            Long,
            Some(17),
            true,
            true,
            json!({"opcode": "key_write", "redundancy": 4, "key": 0xffffffffu32, "data": d28}),
        ),
        p(
            "key_increment_short",
            Short,
            None,
            false,
            false,
            json!({"opcode": "key_increment", "redundancy": 3, "key": 0x0a000002u32, "counter": 1}),
        ),
        p(
            "key_increment_short_immediate_max",
            Short,
            None,
            false,
            true,
            json!({"opcode": "key_increment", "redundancy": 4, "key": 0xffffffffu32, "counter": u64::MAX}),
        ),
        p(
            "key_increment_long",
            Long,
            Some(42),
            true,
            false,
            json!({"opcode": "key_increment", "redundancy": 1, "key": 0u32, "counter": 1_000_000_007u64}),
        ),
        p(
            "append_short",
            Short,
            None,
            false,
            false,
            json!({"opcode": "append", "list_id": 0, "data": "cafebabe"}),
        ),
        p(
            "append_short_immediate",
            Short,
            None,
            false,
            true,
            json!({"opcode": "append", "list_id": 131071, "data": "00000000"}),
        ),
        p(
            "append_long",
            Long,
            Some(200),
            true,
            true,
            json!({"opcode": "append", "list_id": 0xffffffffu32, "data": "ffffffff"}),
        ),
        p(
            "postcarding_short",
            Short,
            None,
            false,
            false,
            json!({"opcode": "postcarding", "key": 0x0a000001u32, "hop": 0, "data": 0}),
        ),
        p(
            "postcarding_short_immediate",
            Short,
            None,
            false,
            true,
            json!({"opcode": "postcarding", "key": 0x0a000001u32, "hop": 4, "data": 0x00abcdefu32}),
        ),
        p(
            "postcarding_long",
            Long,
            Some(1),
            true,
            false,
            json!({"opcode": "postcarding", "key": 0xc0a80001u32, "hop": 255, "data": 0xfffffffeu32}),
        ),
        p(
            "postcarding_long_not_retransmittable",
            Long,
            Some(128),
            false,
            true,
            json!({"opcode": "postcarding", "key": 1u32, "hop": 2, "data": 7}),
        ),
    ];
    let vectors: Vec<Value> = vectors.iter().map(prototype_vector).collect();
    let nacks: Vec<Value> = [
        ("nack_set", 7u8, true),
        ("nack_clear", 0, false),
        ("nack_max_seqnum", 255, true),
    ]
    .iter()
    .map(|&(name, seqnum, nack)| {
        let mut b = [0u8; 2];
        prototype::NackRepr { seqnum, nack }.emit(&mut b).unwrap();
        json!({"name": name, "hex": hex(&b), "seqnum": seqnum, "nack": nack})
    })
    .collect();
    json!({"vectors": vectors, "nacks": nacks})
}

struct Native {
    name: &'static str,
    priority: Priority,
    retransmittable: bool,
    reporter_id: u32,
    seq: u32,
}

fn emit_native(v: &Native, reports: &[Report<'_>]) -> Value {
    let mut buf = vec![0u8; 65536];
    let mut b = DatagramBuilder::new(
        &mut buf,
        v.priority,
        v.retransmittable,
        v.reporter_id,
        v.seq,
    )
    .unwrap();
    for r in reports {
        b.push(r).unwrap();
    }
    let n = b.finish();
    json!({
        "name": v.name,
        "hex": hex(&buf[..n]),
        "header": {
            "priority": v.priority.name(),
            "retransmittable": v.retransmittable,
            "reporter_id": v.reporter_id,
            "seq": v.seq,
        },
        "reports": reports.iter().map(dta_wire::report_to_json).collect::<Vec<_>>(),
    })
}

fn native_file() -> Value {
    let d64 = seq_bytes(64, 0x40);
    let d20 = seq_bytes(20, 1);
    let key16 = seq_bytes(16, 0xf0);
    let ipv4 = [10u8, 0, 0, 1];
    let kw = |key, data, redundancy, immediate| Report::KeyWrite {
        key,
        data,
        redundancy,
        immediate,
    };
    let ki = |key, counter, redundancy, immediate| Report::KeyIncrement {
        key,
        counter,
        redundancy,
        immediate,
    };
    let ap = |list_id, data, immediate| Report::Append {
        list_id,
        data,
        immediate,
    };
    let pc = |key, hop, path_len, value, immediate| Report::Postcard {
        key,
        hop,
        path_len,
        value,
        immediate,
    };
    let sk = |sketch_id, column, epoch, data, immediate| Report::SketchColumn {
        sketch_id,
        column,
        epoch,
        data,
        immediate,
    };
    let hdr = |name, priority, retransmittable, reporter_id, seq| Native {
        name,
        priority,
        retransmittable,
        reporter_id,
        seq,
    };
    use Priority::*;
    let many: Vec<Report> = (0..40u32)
        .map(|i| match i % 5 {
            0 => kw(&FIVE_TUPLE[..], &d20[..], (i % 4 + 1) as u8, i % 2 == 0),
            1 => ap(i, &d64[..4 + (i as usize % 61)], false),
            2 => ki(&ipv4[..], u64::from(i) << 32, 2, true),
            3 => pc(&FIVE_TUPLE[..], (i % 5) as u8, 5, i * 1000, false),
            _ => sk(7, i as u16, 3, &d64[..16], i == 39),
        })
        .collect();
    let cases: Vec<(Native, Vec<Report>)> = vec![
        (
            hdr("key_write_min", Low, false, 0, 0),
            vec![kw(&[0x2a][..], &d64[..4], 1, false)],
        ),
        (
            hdr("key_write_max", High, true, u32::MAX, u32::MAX),
            vec![kw(&key16[..], &d64[..], 4, true)],
        ),
        (
            hdr("key_write_five_tuple_int_path", Medium, false, 12, 1000),
            vec![kw(&FIVE_TUPLE[..], &d20[..], 2, false)],
        ),
        (
            hdr("key_increment_five_tuple", Low, true, 3, 1),
            vec![ki(&FIVE_TUPLE[..], u64::MAX, 3, false)],
        ),
        (
            hdr("key_increment_ipv4_immediate", Medium, false, 3, 2),
            vec![ki(&ipv4[..], 1, 1, true)],
        ),
        (
            hdr("append_min", Low, false, 1, 7),
            vec![ap(0, &d64[..4], false)],
        ),
        (
            hdr("append_max", High, true, 1, 8),
            vec![ap(131071, &d64[..], true)],
        ),
        (
            hdr("postcarding_five_tuple", Medium, true, 5, 0x8000_0000),
            vec![pc(&FIVE_TUPLE[..], 2, 5, 0xdeadbeef, false)],
        ),
        (
            hdr("postcarding_unknown_path_len", Low, false, 5, 1),
            vec![pc(&ipv4[..], 0, 0, 0, true)],
        ),
        (
            hdr("sketch_merge_first_column", High, true, 9, 0),
            vec![sk(1, 0, 0, &d64[..], false)],
        ),
        (
            hdr("sketch_merge_last_column", Medium, false, 9, 1),
            vec![sk(u16::MAX, u16::MAX, u32::MAX, &d64[..4], true)],
        ),
        (
            hdr("mixed_all_primitives", Medium, true, 0x0102_0304, 77),
            vec![
                kw(&FIVE_TUPLE[..], &d20[..], 2, true),
                ap(17, &d64[..8], false),
                ki(&ipv4[..], 5, 4, false),
                pc(&FIVE_TUPLE[..], 1, 3, 42, true),
                sk(2, 5, 11, &d64[..32], false),
            ],
        ),
        (hdr("many_reports", High, true, 4242, 65536), many),
    ];
    let vectors: Vec<Value> = cases.iter().map(|(v, r)| emit_native(v, r)).collect();
    let nacks: Vec<Value> = [
        ("nack_plain", 7u32, 257u32, None, 0u64),
        ("nack_max", u32::MAX, u32::MAX, None, 0),
        ("nack_sketch", 9, 12, Some(SketchNack { sketch_id: 3, column: 16, epoch: 2 }), 0),
        ("nack_missing", 3, 100, None, 0b1010 | 1 << 63),
        ("nack_missing_wraps", 1, u32::MAX, None, 0b11),
    ]
    .iter()
    .map(|&(name, reporter_id, seq, sketch, missing)| {
        let n = NackRepr { reporter_id, seq, sketch, missing };
        let mut b = [0u8; 32];
        let len = n.emit(&mut b).unwrap();
        json!({
            "name": name, "hex": hex(&b[..len]), "reporter_id": reporter_id, "seq": seq,
            "sketch": sketch.map(|s| json!({"sketch_id": s.sketch_id, "column": s.column, "epoch": s.epoch})),
            "missing": n.missing_seqs().skip(1).collect::<Vec<u32>>(),
        })
    })
    .collect();
    let notices: Vec<Value> = [
        (
            "notice_pause_low",
            0x0102_0304u32,
            200u32,
            0u32,
            RATE_UNLIMITED,
        ),
        ("notice_lower_both", 7, 1000, 50, 500),
        ("notice_lift", 7, 0, RATE_UNLIMITED, RATE_UNLIMITED),
    ]
    .iter()
    .map(|&(name, reporter_id, hold_ms, low_rate, medium_rate)| {
        let c = NoticeRepr {
            reporter_id,
            hold_ms,
            low_rate,
            medium_rate,
        };
        let mut b = [0u8; 32];
        let len = c.emit(&mut b).unwrap();
        json!({
            "name": name, "hex": hex(&b[..len]), "reporter_id": reporter_id,
            "hold_ms": hold_ms, "low_rate": low_rate, "medium_rate": medium_rate,
        })
    })
    .collect();
    let hellos: Vec<Value> = [
        ("hello", 7u32, 0x0123_4567_89ab_cdefu64),
        ("hello_extremes", u32::MAX, u64::MAX),
    ]
    .iter()
    .map(|&(name, reporter_id, life)| {
        let mut b = [0u8; 32];
        let len = HelloRepr { reporter_id, life }.emit(&mut b).unwrap();
        json!({"name": name, "hex": hex(&b[..len]), "reporter_id": reporter_id, "life": life})
    })
    .collect();
    // Authenticated control messages (docs/protocol.md "Authenticated NACKs and notices"):
    // the message, its key, counter and life (null: sealed without one), and the sealed bytes.
    let key_bytes: [u8; 16] = std::array::from_fn(|i| i as u8);
    let key = ControlKey::new(key_bytes);
    let mut notice = [0u8; 32];
    let notice_len = NoticeRepr {
        reporter_id: 7,
        hold_ms: 1000,
        low_rate: 50,
        medium_rate: 500,
    }
    .emit(&mut notice)
    .unwrap();
    let mut nack = [0u8; 32];
    let nack_len = NackRepr {
        reporter_id: 7,
        seq: 257,
        sketch: None,
        missing: 0b101,
    }
    .emit(&mut nack)
    .unwrap();
    let mut hello = [0u8; 32];
    let hello_len = HelloRepr {
        reporter_id: 7,
        life: 0x0123_4567_89ab_cdef,
    }
    .emit(&mut hello)
    .unwrap();
    let sealed: Vec<Value> = [
        (
            "sealed_notice",
            &notice[..notice_len],
            0x1867_0000_0000_0001u64,
            None,
        ),
        (
            "bound_notice",
            &notice[..notice_len],
            0x1867_0000_0000_0002,
            Some(0x0123_4567_89ab_cdefu64),
        ),
        (
            "bound_nack",
            &nack[..nack_len],
            u64::MAX,
            Some(0x0123_4567_89ab_cdef),
        ),
        ("sealed_hello", &hello[..hello_len], 1, None),
    ]
    .iter()
    .map(|&(name, msg, counter, life)| {
        let mut b = [0u8; 64];
        b[..msg.len()].copy_from_slice(msg);
        let len = match life {
            Some(l) => auth::seal_bound(&mut b, msg.len(), &key, counter, l),
            None => auth::seal(&mut b, msg.len(), &key, counter),
        };
        json!({
            "name": name, "key": hex(&key_bytes), "message": hex(msg), "counter": counter,
            "life": life, "hex": hex(&b[..len]),
        })
    })
    .collect();
    json!({"vectors": vectors, "nacks": nacks, "notices": notices, "hellos": hellos,
           "sealed": sealed})
}

fn invalid_file() -> Value {
    // Valid starting points, then one defect each.
    let proto_kw = "010002".to_string() + "0a000001" + "deadbeef"; // short KW, red 2
    let hdr = "10000100".to_string() + "00000001" + "00000002"; // native v1, low, count 1
    let v = |name: &str, protocol: &str, base: Option<&str>, hex: String, error: &str| json!({"name": name, "protocol": protocol, "base_header": base, "hex": hex, "error": error});
    let s = Some("short");
    let l = Some("long");
    let vectors = vec![
        // truncated
        v("empty", "prototype", s, String::new(), "truncated"),
        v(
            "prototype_base_header_cut",
            "prototype",
            s,
            "01".into(),
            "truncated",
        ),
        v(
            "prototype_long_base_header_cut",
            "prototype",
            l,
            "0300".into(),
            "truncated",
        ),
        v(
            "prototype_key_write_cut",
            "prototype",
            s,
            proto_kw[..20].into(),
            "truncated",
        ),
        v(
            "prototype_append_cut",
            "prototype",
            l,
            "02004000000001aabbcc".into(),
            "truncated",
        ),
        v(
            "prototype_key_increment_cut",
            "prototype",
            s,
            "0300010000000100000000000000".into(),
            "truncated",
        ),
        v(
            "native_header_cut",
            "native",
            None,
            hdr[..22].into(),
            "truncated",
        ),
        v(
            "native_report_header_cut",
            "native",
            None,
            hdr.clone() + "010004",
            "truncated",
        ),
        v(
            "native_report_body_cut",
            "native",
            None,
            hdr.clone() + "01000404" + "0a000001" + "deadbe",
            "truncated",
        ),
        v(
            "native_fewer_reports_than_count",
            "native",
            None,
            "10000200000000010000000201000404".to_string() + "0a000001deadbeef",
            "truncated",
        ),
        v(
            "native_nack_sketch_body_cut",
            "native",
            None,
            "11000100000000070000000100030010000000".into(),
            "truncated",
        ),
        v(
            "native_nack_missing_body_cut",
            "native",
            None,
            "1100020000000007000000010000000000000001"[..38].into(),
            "truncated",
        ),
        v(
            "native_notice_body_cut",
            "native",
            None,
            "120001000000000700000000000000c800000000ffffff".into(),
            "truncated",
        ),
        // unknown_version
        v(
            "first_byte_zero",
            "prototype",
            s,
            "00800000000000000000".into(),
            "unknown_version",
        ),
        v(
            "prototype_opcode_5",
            "prototype",
            l,
            "050000000000000000000000".into(),
            "unknown_version",
        ),
        v(
            "native_version_2",
            "native",
            None,
            "20".to_string() + &hdr[2..] + "01000404" + "0a000001deadbeef",
            "unknown_version",
        ),
        v(
            "native_version_15",
            "native",
            None,
            "f0".to_string() + &hdr[2..],
            "unknown_version",
        ),
        // unknown_kind
        v(
            "native_kind_4",
            "native",
            None,
            "14".to_string() + &hdr[2..] + "01000404" + "0a000001deadbeef",
            "unknown_kind",
        ),
        v(
            "native_kind_15",
            "native",
            None,
            "1f".to_string() + &hdr[2..],
            "unknown_kind",
        ),
        // unknown_opcode
        v(
            "native_opcode_0",
            "native",
            None,
            hdr.clone() + "00000404" + "0a000001deadbeef",
            "unknown_opcode",
        ),
        v(
            "native_opcode_6",
            "native",
            None,
            hdr.clone() + "06000404" + "0a000001deadbeef",
            "unknown_opcode",
        ),
        // bad_length
        v(
            "prototype_key_write_8_byte_data",
            "prototype",
            s,
            proto_kw.clone() + "00000000",
            "bad_length",
        ),
        v(
            "prototype_key_write_between_widths",
            "prototype",
            l,
            "01010102".to_string() + "0a000001" + &"ab".repeat(20),
            "bad_length",
        ),
        v(
            "prototype_key_write_too_long",
            "prototype",
            s,
            "010001".to_string() + "0a000001" + &"ab".repeat(32),
            "bad_length",
        ),
        // bad_redundancy
        v(
            "prototype_key_write_redundancy_0",
            "prototype",
            s,
            "010000".to_string() + &proto_kw[6..],
            "bad_redundancy",
        ),
        v(
            "prototype_key_write_redundancy_5",
            "prototype",
            l,
            "01000105".to_string() + &proto_kw[6..],
            "bad_redundancy",
        ),
        v(
            "prototype_key_increment_redundancy_255",
            "prototype",
            s,
            "0300ff0a0000010000000000000001".into(),
            "bad_redundancy",
        ),
        // bad_priority
        v(
            "native_priority_3",
            "native",
            None,
            "10c0".to_string() + &hdr[4..] + "01000404" + "0a000001deadbeef",
            "bad_priority",
        ),
        // bad_key_len
        v(
            "native_key_write_key_0",
            "native",
            None,
            hdr.clone() + "01000004" + "deadbeef",
            "bad_key_len",
        ),
        v(
            "native_key_write_key_17",
            "native",
            None,
            hdr.clone() + "01001104" + &"11".repeat(17) + "deadbeef",
            "bad_key_len",
        ),
        v(
            "native_append_with_key",
            "native",
            None,
            hdr.clone() + "02000104" + "00000001" + "deadbeef",
            "bad_key_len",
        ),
        v(
            "native_sketch_merge_with_key",
            "native",
            None,
            hdr.clone() + "05000404" + "0001000200000003deadbeef",
            "bad_key_len",
        ),
        v(
            "native_postcarding_key_0",
            "native",
            None,
            hdr.clone() + "04000004" + "0105deadbeef",
            "bad_key_len",
        ),
        // bad_data_len
        v(
            "native_key_write_data_3",
            "native",
            None,
            hdr.clone() + "01000403" + "0a000001" + "deadbe",
            "bad_data_len",
        ),
        v(
            "native_key_write_data_65",
            "native",
            None,
            hdr.clone() + "01000441" + "0a000001" + &"ab".repeat(65),
            "bad_data_len",
        ),
        v(
            "native_key_increment_data_4",
            "native",
            None,
            hdr.clone() + "03000404" + "0a000001" + "00000001",
            "bad_data_len",
        ),
        v(
            "native_postcarding_data_8",
            "native",
            None,
            hdr.clone() + "04000408" + "0a000001" + "0105" + "0000000000000001",
            "bad_data_len",
        ),
        v(
            "native_append_data_0",
            "native",
            None,
            hdr.clone() + "02000000" + "00000001",
            "bad_data_len",
        ),
        // bad_count
        v(
            "native_count_0",
            "native",
            None,
            "10000000".to_string() + &hdr[8..],
            "bad_count",
        ),
        v(
            "native_nack_count_3",
            "native",
            None,
            "11000300000000070000000100030010000000020003001100000002".into(),
            "bad_count",
        ),
        v(
            "native_notice_count_0",
            "native",
            None,
            "120000000000000700000000000000c800000000ffffffff".into(),
            "bad_count",
        ),
        // trailing_bytes
        v(
            "prototype_append_extra_byte",
            "prototype",
            s,
            "02000000000102030405ff".into(),
            "trailing_bytes",
        ),
        v(
            "prototype_postcarding_extra_byte",
            "prototype",
            l,
            "0400000a00000101000000ff00".into(),
            "trailing_bytes",
        ),
        v(
            "prototype_key_increment_extra_byte",
            "prototype",
            s,
            "0300010a000001000000000000000100".into(),
            "trailing_bytes",
        ),
        v(
            "native_after_last_report",
            "native",
            None,
            hdr.clone() + "01000404" + "0a000001deadbeef" + "00",
            "trailing_bytes",
        ),
        v(
            "native_count_1_of_2",
            "native",
            None,
            hdr.clone() + "01000404" + "0a000001deadbeef" + "02000004" + "00000001deadbeef",
            "trailing_bytes",
        ),
        v(
            "native_nack_extra_byte",
            "native",
            None,
            "1100000000000007000000010000".into(),
            "trailing_bytes",
        ),
        v(
            "native_notice_extra_byte",
            "native",
            None,
            "120001000000000700000000000000c800000000ffffffff00".into(),
            "trailing_bytes",
        ),
    ];
    json!({"vectors": vectors})
}

fn main() {
    let out = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../spec/vectors"));
    std::fs::create_dir_all(&out).unwrap();
    for (name, v) in [
        ("prototype.json", prototype_file()),
        ("native.json", native_file()),
        ("invalid.json", invalid_file()),
    ] {
        let mut s = serde_json::to_string_pretty(&v).unwrap();
        s.push('\n');
        std::fs::write(out.join(name), s).unwrap();
        println!("wrote {}", out.join(name).display());
    }
}
