//! The committed spec vectors (`spec/vectors/*.json`, schema in `spec/README.md`) are the
//! truth: every vector must parse to exactly its fields, emitting from its fields must give
//! exactly its bytes, and every invalid vector must be rejected with its reason.

use dta_wire::auth::{self, ControlKey};
use dta_wire::native::{self, DatagramBuilder, NackRepr, NoticeRepr, SketchNack};
use dta_wire::prototype::{self, BaseFormat, BaseRepr};
use dta_wire::{Datagram, Error, Opcode, Priority, Report};
use serde_json::Value;
use std::collections::BTreeSet;

const PROTOTYPE: &str = include_str!("../../../../spec/vectors/prototype.json");
const NATIVE: &str = include_str!("../../../../spec/vectors/native.json");
const INVALID: &str = include_str!("../../../../spec/vectors/invalid.json");
const IND_PROTOTYPE: &str = include_str!("../../../../spec/vectors/independent/prototype.json");
const IND_NATIVE: &str = include_str!("../../../../spec/vectors/independent/native.json");

fn load(s: &str) -> Value {
    serde_json::from_str(s).expect("vector file is JSON")
}

fn bytes(v: &Value) -> Vec<u8> {
    let s = v["hex"].as_str().expect("hex");
    assert_eq!(s, s.to_lowercase(), "hex must be lowercase");
    hex::decode(s).expect("valid hex")
}

fn int(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("field {k} in {v}"))
}

fn boolean(v: &Value, k: &str) -> bool {
    v[k].as_bool().unwrap_or_else(|| panic!("field {k} in {v}"))
}

fn hexfield(v: &Value, k: &str) -> Vec<u8> {
    hex::decode(v[k].as_str().unwrap_or_else(|| panic!("field {k} in {v}"))).unwrap()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

fn set(k: &[&str]) -> BTreeSet<String> {
    k.iter().map(|s| s.to_string()).collect()
}

/// Owned storage for a report's slices.
struct Owned {
    key: Vec<u8>,
    data: Vec<u8>,
}

/// Build the expected report of a prototype vector from its JSON fields.
fn prototype_report<'a>(op: Opcode, r: &Value, immediate: bool, o: &'a mut Owned) -> Report<'a> {
    match op {
        Opcode::KeyWrite => {
            assert_eq!(keys(r), set(&["redundancy", "key", "data"]));
            o.key = (int(r, "key") as u32).to_be_bytes().to_vec();
            o.data = hexfield(r, "data");
            Report::KeyWrite {
                key: &o.key,
                data: &o.data,
                redundancy: int(r, "redundancy") as u8,
                immediate,
            }
        }
        Opcode::KeyIncrement => {
            assert_eq!(keys(r), set(&["redundancy", "key", "counter"]));
            o.key = (int(r, "key") as u32).to_be_bytes().to_vec();
            Report::KeyIncrement {
                key: &o.key,
                counter: int(r, "counter"),
                redundancy: int(r, "redundancy") as u8,
                immediate,
            }
        }
        Opcode::Append => {
            assert_eq!(keys(r), set(&["list_id", "data"]));
            o.data = hexfield(r, "data");
            Report::Append {
                list_id: int(r, "list_id") as u32,
                data: &o.data,
                immediate,
            }
        }
        Opcode::Postcarding => {
            assert_eq!(keys(r), set(&["key", "hop", "data"]));
            o.key = (int(r, "key") as u32).to_be_bytes().to_vec();
            Report::Postcard {
                key: &o.key,
                hop: int(r, "hop") as u8,
                path_len: 0,
                value: int(r, "data") as u32,
                immediate,
            }
        }
        Opcode::SketchMerge => panic!("no Sketch-Merge in the prototype"),
    }
}

/// What a prototype vector file covers.
#[derive(Default)]
struct PrototypeCoverage {
    /// (opcode, base format).
    ops: BTreeSet<(Opcode, &'static str)>,
    /// Key-Write data widths.
    kw_widths: BTreeSet<usize>,
    /// (base format, immediate, retransmittable).
    flags: BTreeSet<(&'static str, bool, bool)>,
}

/// Every vector of a prototype file parses to its fields and emits its bytes; every NACK too.
fn check_prototype_file(text: &str) -> PrototypeCoverage {
    let file = load(text);
    let vectors = file["vectors"].as_array().unwrap();
    let mut covered = BTreeSet::new();
    let mut kw_widths = BTreeSet::new();
    let mut flags = BTreeSet::new();
    for v in vectors {
        let name = v["name"].as_str().unwrap();
        let b = bytes(v);
        let format = BaseFormat::from_name(v["base_header"].as_str().unwrap()).unwrap();
        let h = &v["header"];
        assert_eq!(
            keys(h),
            set(&["opcode", "immediate", "seqnum", "retransmittable"])
        );
        let op = Opcode::from_name(h["opcode"].as_str().unwrap()).unwrap();
        let seqnum = h["seqnum"].as_u64().map(|s| s as u8);
        let immediate = boolean(h, "immediate");
        let retransmittable = boolean(h, "retransmittable");
        if format == BaseFormat::Short {
            assert_eq!(seqnum, None, "{name}: short has no seqnum");
            assert!(!retransmittable, "{name}: short is never retransmittable");
        } else {
            assert!(seqnum.is_some(), "{name}: long has a seqnum");
        }
        let mut o = Owned {
            key: vec![],
            data: vec![],
        };
        let report = prototype_report(op, &v["report"], immediate, &mut o);
        let expected = prototype::Repr {
            base: BaseRepr {
                opcode: op,
                seqnum,
                immediate,
                retransmittable,
            },
            report,
        };

        // Parse through the dispatcher and directly.
        match dta_wire::parse(&b, format) {
            Ok(Datagram::Prototype(r)) => assert_eq!(r, expected, "{name}"),
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(prototype::Repr::parse(&b, format), Ok(expected), "{name}");
        let p = prototype::Packet::new_checked(&b[..], format).unwrap();
        assert_eq!(p.opcode(), Ok(op));
        assert_eq!(p.seqnum(), seqnum);

        // Emit from the fields.
        assert_eq!(expected.buffer_len(format), b.len(), "{name}");
        let mut out = vec![0xa5u8; b.len() + 8];
        assert_eq!(expected.emit(&mut out, format), Ok(b.len()), "{name}");
        assert_eq!(hex::encode(&out[..b.len()]), hex::encode(&b), "{name}");

        covered.insert((op, format.name()));
        if let Report::KeyWrite { data, .. } = report {
            kw_widths.insert(data.len());
        }
        flags.insert((format.name(), immediate, retransmittable));
    }
    let nacks = file["nacks"].as_array().unwrap();
    assert!(nacks.len() >= 2);
    for v in nacks {
        assert_eq!(keys(v), set(&["name", "hex", "seqnum", "nack"]));
        let b = bytes(v);
        let n = prototype::NackRepr {
            seqnum: int(v, "seqnum") as u8,
            nack: boolean(v, "nack"),
        };
        assert_eq!(prototype::NackRepr::parse(&b), Ok(n));
        let mut out = [0u8; 2];
        assert_eq!(n.emit(&mut out), Ok(2));
        assert_eq!(&out[..], &b[..]);
    }
    PrototypeCoverage {
        ops: covered,
        kw_widths,
        flags,
    }
}

/// Every prototype opcode in both base formats, all three Key-Write widths.
fn assert_prototype_opcodes_and_widths(c: &PrototypeCoverage) {
    for op in &Opcode::ALL[..4] {
        for f in ["short", "long"] {
            assert!(c.ops.contains(&(*op, f)), "no {} {f} vector", op.name());
        }
    }
    assert_eq!(c.kw_widths, [4, 12, 28].into_iter().collect());
}

#[test]
fn prototype_vectors_parse_and_emit() {
    let c = check_prototype_file(PROTOTYPE);
    assert_prototype_opcodes_and_widths(&c);
    for f in [
        ("short", false, false),
        ("short", true, false),
        ("long", false, true),
        ("long", true, false),
        ("long", true, true),
    ] {
        assert!(c.flags.contains(&f), "flags {f:?} not covered");
    }
}

/// The vectors built from docs/protocol.md by `spec/tools/independent_vectors.py`, not by
/// these emitters.
#[test]
fn independent_prototype_vectors_parse_and_emit() {
    let c = check_prototype_file(IND_PROTOTYPE);
    assert_prototype_opcodes_and_widths(&c);
}

/// Build the expected report of a native vector from its JSON fields.
fn native_report<'a>(r: &Value, o: &'a mut Owned) -> Report<'a> {
    let op = Opcode::from_name(r["opcode"].as_str().unwrap()).unwrap();
    let immediate = boolean(r, "immediate");
    match op {
        Opcode::KeyWrite => {
            assert_eq!(
                keys(r),
                set(&["opcode", "immediate", "redundancy", "key", "data"])
            );
            o.key = hexfield(r, "key");
            o.data = hexfield(r, "data");
            Report::KeyWrite {
                key: &o.key,
                data: &o.data,
                redundancy: int(r, "redundancy") as u8,
                immediate,
            }
        }
        Opcode::KeyIncrement => {
            assert_eq!(
                keys(r),
                set(&["opcode", "immediate", "redundancy", "key", "counter"])
            );
            o.key = hexfield(r, "key");
            Report::KeyIncrement {
                key: &o.key,
                counter: int(r, "counter"),
                redundancy: int(r, "redundancy") as u8,
                immediate,
            }
        }
        Opcode::Append => {
            assert_eq!(keys(r), set(&["opcode", "immediate", "list_id", "data"]));
            o.data = hexfield(r, "data");
            Report::Append {
                list_id: int(r, "list_id") as u32,
                data: &o.data,
                immediate,
            }
        }
        Opcode::Postcarding => {
            assert_eq!(
                keys(r),
                set(&["opcode", "immediate", "key", "hop", "path_len", "value"])
            );
            o.key = hexfield(r, "key");
            Report::Postcard {
                key: &o.key,
                hop: int(r, "hop") as u8,
                path_len: int(r, "path_len") as u8,
                value: int(r, "value") as u32,
                immediate,
            }
        }
        Opcode::SketchMerge => {
            assert_eq!(
                keys(r),
                set(&[
                    "opcode",
                    "immediate",
                    "sketch_id",
                    "column",
                    "epoch",
                    "data"
                ])
            );
            o.data = hexfield(r, "data");
            Report::SketchColumn {
                sketch_id: int(r, "sketch_id") as u16,
                column: int(r, "column") as u16,
                epoch: int(r, "epoch") as u32,
                data: &o.data,
                immediate,
            }
        }
    }
}

/// What a native vector file covers.
struct NativeCoverage {
    ops: BTreeSet<Opcode>,
    key_lens: BTreeSet<usize>,
    data_lens: BTreeSet<usize>,
    /// A datagram mixing all five primitives.
    mixed: bool,
    max_count: usize,
    /// NACK bodies covered: none, Sketch-Merge, missing bitmap.
    nacks: BTreeSet<&'static str>,
    /// Congestion notices checked.
    notices: usize,
    /// Hellos checked.
    hellos: usize,
    /// Authenticated messages checked: sealed without a life, bound to one.
    sealed: BTreeSet<&'static str>,
}

/// Every vector of a native file parses to its fields and emits its bytes; every NACK too.
fn check_native_file(text: &str) -> NativeCoverage {
    let file = load(text);
    let mut nack_kinds = BTreeSet::new();
    let vectors = file["vectors"].as_array().unwrap();
    let mut ops = BTreeSet::new();
    let mut key_lens = BTreeSet::new();
    let mut data_lens = BTreeSet::new();
    let mut mixed = false;
    let mut max_count = 0;
    for v in vectors {
        let name = v["name"].as_str().unwrap();
        let b = bytes(v);
        let h = &v["header"];
        assert_eq!(
            keys(h),
            set(&["priority", "retransmittable", "reporter_id", "seq"])
        );
        let priority = Priority::from_name(h["priority"].as_str().unwrap()).unwrap();
        let retransmittable = boolean(h, "retransmittable");
        let reporter_id = int(h, "reporter_id") as u32;
        let seq = int(h, "seq") as u32;
        let json_reports = v["reports"].as_array().unwrap();
        let mut owned: Vec<Owned> = json_reports
            .iter()
            .map(|_| Owned {
                key: vec![],
                data: vec![],
            })
            .collect();
        let expected: Vec<Report> = json_reports
            .iter()
            .zip(owned.iter_mut())
            .map(|(r, o)| native_report(r, o))
            .collect();

        let d = match dta_wire::parse(&b, BaseFormat::Short) {
            Ok(Datagram::Native(d)) => d,
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(native::Datagram::parse(&b), Ok(d));
        assert_eq!(
            d.header,
            native::HeaderRepr {
                kind: native::Kind::Reports,
                priority,
                retransmittable,
                count: expected.len() as u8,
                reporter_id,
                seq,
            },
            "{name}"
        );
        assert_eq!(d.reports().collect::<Vec<_>>(), expected, "{name}");
        assert_eq!(d.nack(), None);
        assert_eq!(
            dta_wire::to_json(&Datagram::Native(d))["reports"],
            v["reports"]
        );

        // Emit from the fields, into a buffer of exactly the right size.
        let total: usize =
            native::HEADER_LEN + expected.iter().map(native::report_len).sum::<usize>();
        assert_eq!(total, b.len(), "{name}");
        let mut out = vec![0xa5u8; total];
        let mut builder =
            DatagramBuilder::new(&mut out, priority, retransmittable, reporter_id, seq).unwrap();
        for r in &expected {
            builder.push(r).unwrap();
        }
        assert_eq!(builder.count() as usize, expected.len());
        assert_eq!(builder.finish(), total);
        assert_eq!(hex::encode(&out), hex::encode(&b), "{name}");

        let distinct: BTreeSet<Opcode> = expected.iter().map(Report::opcode).collect();
        mixed |= distinct.len() == 5;
        max_count = max_count.max(expected.len());
        for r in &expected {
            ops.insert(r.opcode());
            match *r {
                Report::KeyWrite { key, data, .. } => {
                    key_lens.insert(key.len());
                    data_lens.insert(data.len());
                }
                Report::KeyIncrement { key, .. } | Report::Postcard { key, .. } => {
                    key_lens.insert(key.len());
                }
                Report::Append { data, .. } | Report::SketchColumn { data, .. } => {
                    data_lens.insert(data.len());
                }
            }
        }
    }
    for v in file["nacks"].as_array().unwrap() {
        assert_eq!(
            keys(v),
            set(&["name", "hex", "reporter_id", "seq", "sketch", "missing"])
        );
        let b = bytes(v);
        let sketch = match &v["sketch"] {
            Value::Null => None,
            s => {
                assert_eq!(keys(s), set(&["sketch_id", "column", "epoch"]));
                Some(SketchNack {
                    sketch_id: int(s, "sketch_id") as u16,
                    column: int(s, "column") as u16,
                    epoch: int(s, "epoch") as u32,
                })
            }
        };
        let seq = int(v, "seq") as u32;
        let missing = v["missing"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                1u64 << (m.as_u64().unwrap() as u32)
                    .wrapping_sub(seq)
                    .wrapping_sub(1)
            })
            .fold(0, |a, b| a | b);
        let n = NackRepr {
            reporter_id: int(v, "reporter_id") as u32,
            seq,
            sketch,
            missing,
        };
        assert_eq!(NackRepr::parse(&b), Ok(n));
        assert_eq!(
            n.missing_seqs().skip(1).map(u64::from).collect::<Vec<_>>(),
            v["missing"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m.as_u64().unwrap())
                .collect::<Vec<_>>()
        );
        match dta_wire::parse(&b, BaseFormat::Long) {
            Ok(Datagram::Native(d)) => assert_eq!(d.nack(), Some(n)),
            other => panic!("{other:?}"),
        }
        assert_eq!(n.buffer_len(), b.len());
        let mut out = vec![0u8; b.len()];
        assert_eq!(n.emit(&mut out), Ok(b.len()));
        assert_eq!(out, b);
        nack_kinds.insert(match (sketch.is_some(), n.missing != 0) {
            (true, _) => "sketch",
            (false, true) => "missing",
            (false, false) => "plain",
        });
    }
    let mut notices = 0;
    for v in file["notices"].as_array().unwrap() {
        assert_eq!(
            keys(v),
            set(&[
                "name",
                "hex",
                "reporter_id",
                "hold_ms",
                "low_rate",
                "medium_rate"
            ])
        );
        let b = bytes(v);
        let c = NoticeRepr {
            reporter_id: int(v, "reporter_id") as u32,
            hold_ms: int(v, "hold_ms") as u32,
            low_rate: int(v, "low_rate") as u32,
            medium_rate: int(v, "medium_rate") as u32,
        };
        assert_eq!(NoticeRepr::parse(&b), Ok(c));
        match dta_wire::parse(&b, BaseFormat::Long) {
            Ok(Datagram::Native(d)) => assert_eq!(d.notice(), Some(c)),
            other => panic!("{other:?}"),
        }
        let mut out = vec![0u8; b.len()];
        assert_eq!(c.emit(&mut out), Ok(b.len()));
        assert_eq!(out, b);
        notices += 1;
    }
    let mut hellos = 0;
    for v in file["hellos"].as_array().map_or(&[][..], |a| a) {
        assert_eq!(keys(v), set(&["name", "hex", "reporter_id", "life"]));
        let b = bytes(v);
        let h = native::HelloRepr {
            reporter_id: int(v, "reporter_id") as u32,
            life: int(v, "life"),
        };
        assert_eq!(native::HelloRepr::parse(&b), Ok(h));
        let mut out = vec![0u8; b.len()];
        assert_eq!(h.emit(&mut out), Ok(b.len()));
        assert_eq!(out, b);
        hellos += 1;
    }
    let mut sealed = BTreeSet::new();
    for v in file["sealed"].as_array().map_or(&[][..], |a| a) {
        assert_eq!(
            keys(v),
            set(&["name", "key", "message", "counter", "life", "hex"])
        );
        let key = ControlKey::new(hexfield(v, "key").try_into().expect("16-byte key"));
        let msg = hexfield(v, "message");
        let (counter, life) = (int(v, "counter"), v["life"].as_u64());
        let b = bytes(v);
        let mut out = [0u8; 64];
        out[..msg.len()].copy_from_slice(&msg);
        let n = match life {
            Some(l) => auth::seal_bound(&mut out, msg.len(), &key, counter, l),
            None => auth::seal(&mut out, msg.len(), &key, counter),
        };
        assert_eq!(&out[..n], &b[..], "{}", v["name"]);
        let mut plain = [0u8; 64];
        let o = auth::open(&b, &key, life, None, &mut plain).unwrap();
        assert_eq!(
            (&plain[..o.len], o.counter, o.life),
            (&msg[..], counter, life)
        );
        sealed.insert(if life.is_some() { "bound" } else { "sealed" });
    }
    NativeCoverage {
        ops,
        key_lens,
        data_lens,
        mixed,
        max_count,
        nacks: nack_kinds,
        notices,
        hellos,
        sealed,
    }
}

#[test]
fn native_vectors_parse_and_emit() {
    let c = check_native_file(NATIVE);
    assert_eq!(c.ops.len(), 5, "every opcode covered");
    for k in [1, 4, 13, 16] {
        assert!(c.key_lens.contains(&k), "key length {k} not covered");
    }
    for d in [4, 64] {
        assert!(c.data_lens.contains(&d), "data length {d} not covered");
    }
    assert!(c.mixed, "a datagram mixing all five primitives");
    assert!(c.max_count >= 20, "a datagram with many reports");
    assert_eq!(
        c.nacks.len(),
        3,
        "NACKs plain, with a sketch, with a bitmap"
    );
    assert!(c.notices >= 2, "congestion notices");
    assert!(c.hellos >= 1, "hellos");
    assert_eq!(c.sealed.len(), 2, "messages sealed, and bound to a life");
}

/// The vectors built from docs/protocol.md by `spec/tools/independent_vectors.py`, not by
/// these emitters.
#[test]
fn independent_native_vectors_parse_and_emit() {
    let c = check_native_file(IND_NATIVE);
    assert_eq!(c.ops.len(), 5, "every opcode covered");
    assert!(c.mixed, "a datagram mixing all five primitives");
    assert_eq!(
        c.nacks.len(),
        3,
        "NACKs plain, with a sketch, with a bitmap"
    );
    assert!(c.notices >= 2, "congestion notices");
    assert!(c.hellos >= 1, "hellos");
    assert_eq!(c.sealed.len(), 2, "messages sealed, and bound to a life");
}

#[test]
fn invalid_vectors_are_rejected_with_their_reason() {
    let file = load(INVALID);
    let mut reasons = BTreeSet::new();
    for v in file["vectors"].as_array().unwrap() {
        assert_eq!(
            keys(v),
            set(&["name", "protocol", "base_header", "hex", "error"])
        );
        let name = v["name"].as_str().unwrap();
        let b = bytes(v);
        let want = Error::from_reason(v["error"].as_str().unwrap())
            .unwrap_or_else(|| panic!("{name}: unknown reason"));
        let format = match (v["protocol"].as_str().unwrap(), &v["base_header"]) {
            ("prototype", Value::String(f)) => BaseFormat::from_name(f).unwrap(),
            ("native", Value::Null) => BaseFormat::Short,
            other => panic!("{name}: bad protocol/base_header {other:?}"),
        };
        assert_eq!(dta_wire::parse(&b, format).map(|_| ()), Err(want), "{name}");
        // A native vector gets the same verdict from the native parser alone (NACK vectors
        // from the NACK parser too).
        if v["protocol"] == "native" {
            assert_eq!(native::Datagram::parse(&b).map(|_| ()), Err(want), "{name}");
            if b.first() == Some(&0x11) {
                assert_eq!(NackRepr::parse(&b).map(|_| ()), Err(want), "{name}");
            }
        }
        if v["protocol"] == "prototype" && matches!(b.first(), Some(1..=4)) {
            assert_eq!(
                prototype::Repr::parse(&b, format).map(|_| ()),
                Err(want),
                "{name}"
            );
        }
        reasons.insert(want.reason());
    }
    for e in Error::ALL {
        assert!(
            reasons.contains(e.reason()),
            "no invalid vector for {}",
            e.reason()
        );
    }
}

/// docs/protocol.md: reserved bits are sent as 0 and ignored on receipt, and so is `red` of the
/// opcodes without redundancy. Setting them in the independent vectors changes no field.
#[test]
fn independent_vectors_ignore_reserved_bits() {
    let file = load(IND_PROTOTYPE);
    for v in file["vectors"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        let b = bytes(v);
        let format = BaseFormat::from_name(v["base_header"].as_str().unwrap()).unwrap();
        // The flags byte: I (0x80) and, in the long format only, R (0x40) are fields.
        let (at, reserved) = match format {
            BaseFormat::Short => (1, 0x7f),
            BaseFormat::Long => (2, 0x3f),
        };
        let mut m = b.clone();
        m[at] |= reserved;
        assert_eq!(
            prototype::Repr::parse(&m, format),
            prototype::Repr::parse(&b, format),
            "{name}"
        );
    }
    for v in file["nacks"].as_array().unwrap() {
        let mut m = bytes(v);
        m[1] |= 0x7f;
        assert_eq!(
            prototype::NackRepr::parse(&m),
            prototype::NackRepr::parse(&bytes(v))
        );
    }

    let file = load(IND_NATIVE);
    for v in file["vectors"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        let b = bytes(v);
        let mut m = b.clone();
        m[1] |= 0x1f; // datagram header: byte 1 below Pri and R
        m[3] = 0xff; // datagram header: byte 3
        m[native::HEADER_LEN + 1] |= 0x7c; // first report header: byte 1 between I and red
        let first = v["reports"][0]["opcode"].as_str().unwrap();
        if !matches!(first, "key_write" | "key_increment") {
            m[native::HEADER_LEN + 1] |= 0x03; // `red` of an opcode without redundancy
        }
        let want = native::Datagram::parse(&b).unwrap();
        let got = native::Datagram::parse(&m).unwrap();
        assert_eq!(got.header, want.header, "{name}");
        assert_eq!(
            got.reports().collect::<Vec<_>>(),
            want.reports().collect::<Vec<_>>(),
            "{name}"
        );
    }
    for v in file["nacks"].as_array().unwrap() {
        let mut m = bytes(v);
        m[1] |= 0x3f; // R and the reserved bits are ignored in a NACK
        m[3] = 0xff;
        assert_eq!(NackRepr::parse(&m), NackRepr::parse(&bytes(v)));
    }
}
