//! JSON rendering of parsed datagrams (feature `json`), for `dta decode --hex`. Field names
//! follow the spec vectors' schema (`spec/README.md`): prototype reports carry their u32 key as
//! an integer, native reports their key as hex; data is lowercase hex.

use serde_json::{json, Map, Value};

use crate::{be_u32, native, prototype, Datagram, Report};

fn hex(b: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(D[(x >> 4) as usize] as char);
        s.push(D[(x & 15) as usize] as char);
    }
    s
}

/// A report in the native vectors' schema: `opcode`, `immediate`, then the primitive's fields
/// (`redundancy` only for Key-Write and Key-Increment), keys and data as hex.
pub fn report_to_json(report: &Report<'_>) -> Value {
    let mut m = Map::new();
    m.insert("opcode".into(), report.opcode().name().into());
    m.insert("immediate".into(), report.immediate().into());
    let extra = match *report {
        Report::KeyWrite {
            key,
            data,
            redundancy,
            ..
        } => json!({"redundancy": redundancy, "key": hex(key), "data": hex(data)}),
        Report::KeyIncrement {
            key,
            counter,
            redundancy,
            ..
        } => json!({"redundancy": redundancy, "key": hex(key), "counter": counter}),
        Report::Append { list_id, data, .. } => json!({"list_id": list_id, "data": hex(data)}),
        Report::Postcard {
            key,
            hop,
            path_len,
            value,
            ..
        } => json!({"key": hex(key), "hop": hop, "path_len": path_len, "value": value}),
        Report::SketchColumn {
            sketch_id,
            column,
            epoch,
            data,
            ..
        } => json!({"sketch_id": sketch_id, "column": column, "epoch": epoch, "data": hex(data)}),
    };
    if let Value::Object(e) = extra {
        m.extend(e);
    }
    Value::Object(m)
}

/// A prototype report in the prototype vectors' schema (u32 key as an integer; Postcarding's
/// value as `data`).
fn prototype_report_to_json(report: &Report<'_>) -> Value {
    let key_int = |k: &[u8]| {
        if k.len() == 4 {
            json!(be_u32(k))
        } else {
            json!(hex(k))
        }
    };
    match *report {
        Report::KeyWrite {
            key,
            data,
            redundancy,
            ..
        } => json!({"redundancy": redundancy, "key": key_int(key), "data": hex(data)}),
        Report::KeyIncrement {
            key,
            counter,
            redundancy,
            ..
        } => json!({"redundancy": redundancy, "key": key_int(key), "counter": counter}),
        Report::Append { list_id, data, .. } => json!({"list_id": list_id, "data": hex(data)}),
        Report::Postcard {
            key, hop, value, ..
        } => json!({"key": key_int(key), "hop": hop, "data": value}),
        Report::SketchColumn { .. } => report_to_json(report),
    }
}

/// A native NACK: `reporter_id`, `seq`, `sketch` (null or `{sketch_id, column, epoch}`).
pub fn nack_to_json(nack: &native::NackRepr) -> Value {
    json!({
        "reporter_id": nack.reporter_id,
        "seq": nack.seq,
        "sketch": nack.sketch.map(|s| json!({"sketch_id": s.sketch_id, "column": s.column, "epoch": s.epoch})),
        "missing": nack.missing_seqs().skip(1).collect::<Vec<u32>>(),
    })
}

/// A congestion notice as JSON (`reporter_id`, `hold_ms`, `low_rate`, `medium_rate`).
pub fn notice_to_json(notice: &native::NoticeRepr) -> Value {
    json!({
        "reporter_id": notice.reporter_id,
        "hold_ms": notice.hold_ms,
        "low_rate": notice.low_rate,
        "medium_rate": notice.medium_rate,
    })
}

/// A hello as JSON (`reporter_id`, `life`).
pub fn hello_to_json(hello: &native::HelloRepr) -> Value {
    json!({"reporter_id": hello.reporter_id, "life": hello.life})
}

/// A JSON object with every field of a datagram: `protocol`, the header, and the report(s)
/// (or, for a native NACK, `nack`; for a congestion notice, `notice`; for a hello, `hello`).
pub fn to_json(datagram: &Datagram<'_>) -> Value {
    match datagram {
        Datagram::Prototype(r) => {
            let format = if r.base.seqnum.is_some() {
                prototype::BaseFormat::Long
            } else {
                prototype::BaseFormat::Short
            };
            json!({
                "protocol": "prototype",
                "base_header": format.name(),
                "length": r.buffer_len(format),
                "header": {
                    "opcode": r.base.opcode.name(),
                    "immediate": r.base.immediate,
                    "seqnum": r.base.seqnum,
                    "retransmittable": r.base.retransmittable,
                },
                "report": prototype_report_to_json(&r.report),
            })
        }
        Datagram::Native(d) => {
            let h = d.header;
            let mut m = Map::new();
            m.insert("protocol".into(), "native".into());
            m.insert("length".into(), d.bytes().len().into());
            m.insert(
                "header".into(),
                json!({
                    "version": native::VERSION,
                    "kind": h.kind.name(),
                    "priority": h.priority.name(),
                    "retransmittable": h.retransmittable,
                    "count": h.count,
                    "reporter_id": h.reporter_id,
                    "seq": h.seq,
                }),
            );
            match (d.nack(), d.notice(), d.hello()) {
                (Some(n), _, _) => m.insert("nack".into(), nack_to_json(&n)),
                (None, Some(c), _) => m.insert("notice".into(), notice_to_json(&c)),
                (None, None, Some(h)) => m.insert("hello".into(), hello_to_json(&h)),
                (None, None, None) => m.insert(
                    "reports".into(),
                    d.reports().map(|r| report_to_json(&r)).collect(),
                ),
            };
            Value::Object(m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prototype::BaseFormat;

    #[test]
    fn prototype_json() {
        let b = [0x04, 0x11, 0x80, 0xc0, 0xa8, 0, 1, 3, 0, 0, 0x01, 0x00];
        let d = crate::parse(&b, BaseFormat::Long).unwrap();
        assert_eq!(
            to_json(&d),
            json!({
                "protocol": "prototype", "base_header": "long", "length": 12,
                "header": {"opcode": "postcarding", "immediate": true, "seqnum": 17, "retransmittable": false},
                "report": {"key": 0xc0a80001u32, "hop": 3, "data": 256},
            })
        );
    }

    #[test]
    fn native_json() {
        #[rustfmt::skip]
        let b = [
            0x10, 0x40, 0x01, 0x00, 0, 0, 0, 1, 0, 0, 0, 2,
            0x04, 0x80, 0x02, 0x04, 0xab, 0xcd, 5, 6, 0, 0, 0, 9,
        ];
        let d = crate::parse(&b, BaseFormat::Short).unwrap();
        assert_eq!(
            to_json(&d),
            json!({
                "protocol": "native", "length": 24,
                "header": {"version": 1, "kind": "reports", "priority": "medium", "retransmittable": false,
                           "count": 1, "reporter_id": 1, "seq": 2},
                "reports": [{"opcode": "postcarding", "immediate": true, "key": "abcd", "hop": 5,
                             "path_len": 6, "value": 9}],
            })
        );
        let n = [
            0x11, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 1, 0, 2, 0, 0, 0, 3,
        ];
        let d = crate::parse(&n, BaseFormat::Short).unwrap();
        assert_eq!(
            to_json(&d)["nack"],
            json!({"reporter_id": 1, "seq": 2, "sketch": {"sketch_id": 1, "column": 2, "epoch": 3}, "missing": []})
        );
        let c = [
            0x12, 0, 1, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 50, 0, 0, 0, 0, 0, 0, 0, 10,
        ];
        let d = crate::parse(&c, BaseFormat::Short).unwrap();
        assert_eq!(to_json(&d)["header"]["kind"], "notice");
        assert_eq!(
            to_json(&d)["notice"],
            json!({"reporter_id": 4, "hold_ms": 50, "low_rate": 0, "medium_rate": 10})
        );
    }
}
