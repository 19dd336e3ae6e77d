//! Property tests: arbitrary bytes never panic any parser, and arbitrary valid reports
//! round-trip through the emitters and parsers.

use dta_wire::native::{self, DatagramBuilder, NackRepr, SketchNack};
use dta_wire::prototype::{self, BaseFormat, BaseRepr};
use dta_wire::{Datagram, Priority, Report};
use proptest::prelude::*;

/// An owned report, from which a borrowed [`Report`] is made.
#[derive(Debug, Clone)]
enum Owned {
    KeyWrite(Vec<u8>, Vec<u8>, u8, bool),
    KeyIncrement(Vec<u8>, u64, u8, bool),
    Append(u32, Vec<u8>, bool),
    Postcard(Vec<u8>, u8, u8, u32, bool),
    Sketch(u16, u16, u32, Vec<u8>, bool),
}

impl Owned {
    fn report(&self) -> Report<'_> {
        match self {
            Owned::KeyWrite(k, d, r, i) => Report::KeyWrite {
                key: k,
                data: d,
                redundancy: *r,
                immediate: *i,
            },
            Owned::KeyIncrement(k, c, r, i) => Report::KeyIncrement {
                key: k,
                counter: *c,
                redundancy: *r,
                immediate: *i,
            },
            Owned::Append(l, d, i) => Report::Append {
                list_id: *l,
                data: d,
                immediate: *i,
            },
            Owned::Postcard(k, h, p, v, i) => Report::Postcard {
                key: k,
                hop: *h,
                path_len: *p,
                value: *v,
                immediate: *i,
            },
            Owned::Sketch(s, c, e, d, i) => Report::SketchColumn {
                sketch_id: *s,
                column: *c,
                epoch: *e,
                data: d,
                immediate: *i,
            },
        }
    }
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 1..=16)
}

fn data() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 4..=64)
}

fn native_report() -> impl Strategy<Value = Owned> {
    prop_oneof![
        (key(), data(), 1u8..=4, any::<bool>())
            .prop_map(|(k, d, r, i)| Owned::KeyWrite(k, d, r, i)),
        (key(), any::<u64>(), 1u8..=4, any::<bool>())
            .prop_map(|(k, c, r, i)| Owned::KeyIncrement(k, c, r, i)),
        (any::<u32>(), data(), any::<bool>()).prop_map(|(l, d, i)| Owned::Append(l, d, i)),
        (key(), any::<u8>(), any::<u8>(), any::<u32>(), any::<bool>())
            .prop_map(|(k, h, p, v, i)| Owned::Postcard(k, h, p, v, i)),
        (
            any::<u16>(),
            any::<u16>(),
            any::<u32>(),
            data(),
            any::<bool>()
        )
            .prop_map(|(s, c, e, d, i)| Owned::Sketch(s, c, e, d, i)),
    ]
}

fn prototype_report() -> impl Strategy<Value = Owned> {
    let k4 = prop::collection::vec(any::<u8>(), 4);
    let kw_data = prop_oneof![
        prop::collection::vec(any::<u8>(), 4),
        prop::collection::vec(any::<u8>(), 12),
        prop::collection::vec(any::<u8>(), 28),
    ];
    prop_oneof![
        (k4.clone(), kw_data, 1u8..=4).prop_map(|(k, d, r)| Owned::KeyWrite(k, d, r, false)),
        (k4.clone(), any::<u64>(), 1u8..=4)
            .prop_map(|(k, c, r)| Owned::KeyIncrement(k, c, r, false)),
        (any::<u32>(), prop::collection::vec(any::<u8>(), 4))
            .prop_map(|(l, d)| Owned::Append(l, d, false)),
        (k4, any::<u8>(), any::<u32>()).prop_map(|(k, h, v)| Owned::Postcard(k, h, 0, v, false)),
    ]
}

fn with_immediate(o: Owned, imm: bool) -> Owned {
    match o {
        Owned::KeyWrite(k, d, r, _) => Owned::KeyWrite(k, d, r, imm),
        Owned::KeyIncrement(k, c, r, _) => Owned::KeyIncrement(k, c, r, imm),
        Owned::Append(l, d, _) => Owned::Append(l, d, imm),
        Owned::Postcard(k, h, p, v, _) => Owned::Postcard(k, h, p, v, imm),
        Owned::Sketch(s, c, e, d, _) => Owned::Sketch(s, c, e, d, imm),
    }
}

fn priority() -> impl Strategy<Value = Priority> {
    prop::sample::select(Priority::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..300)) {
        for f in [BaseFormat::Short, BaseFormat::Long] {
            if let Ok(d) = dta_wire::parse(&buf, f) {
                let _ = dta_wire::to_json(&d);
                if let Datagram::Native(n) = d {
                    prop_assert_eq!(n.reports().count(), n.reports().len());
                }
            }
            let _ = prototype::Repr::parse(&buf, f);
            let _ = prototype::Packet::new_checked(&buf[..], f);
        }
        let _ = native::Datagram::parse(&buf);
        let _ = NackRepr::parse(&buf);
        let _ = prototype::NackRepr::parse(&buf);
        let _ = native::ReportPacket::new_checked(&buf[..]).map(|p| p.report());
    }

    /// Arbitrary native-looking datagrams (a valid header in front of random report bytes) get
    /// deep into the report parser; whatever parses must re-emit to the same reports.
    #[test]
    fn native_header_random_reports(
        count in 1u8..=4,
        body in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut buf = vec![0x10, 0x00, count, 0, 0, 0, 0, 1, 0, 0, 0, 2];
        buf.extend(body);
        if let Ok(d) = native::Datagram::parse(&buf) {
            if let Some(u) = d.one_shape() {
                prop_assert!(u.views().eq(d.views()));
            }
            let mut out = vec![0u8; buf.len()];
            let mut b = DatagramBuilder::new(&mut out, Priority::Low, false, 1, 2).unwrap();
            for r in d.reports() {
                b.push(&r).unwrap();
            }
            let n = b.finish();
            let again = native::Datagram::parse(&out[..n]).unwrap();
            prop_assert!(again.reports().eq(d.reports()));
        }
    }

    #[test]
    fn native_reports_round_trip(
        reports in prop::collection::vec(native_report(), 1..40),
        pri in priority(),
        retransmittable in any::<bool>(),
        reporter_id in any::<u32>(),
        seq in any::<u32>(),
    ) {
        let mut buf = vec![0u8; 9000];
        let mut b = DatagramBuilder::new(&mut buf, pri, retransmittable, reporter_id, seq).unwrap();
        let mut expected_len = native::HEADER_LEN;
        for o in &reports {
            let r = o.report();
            b.push(&r).unwrap();
            expected_len += native::report_len(&r);
        }
        prop_assert_eq!(b.len(), expected_len);
        let n = b.finish();
        let d = native::Datagram::parse(&buf[..n]).unwrap();
        prop_assert_eq!(d.header.priority, pri);
        prop_assert_eq!(d.header.retransmittable, retransmittable);
        prop_assert_eq!(d.header.reporter_id, reporter_id);
        prop_assert_eq!(d.header.seq, seq);
        prop_assert_eq!(d.header.count as usize, reports.len());
        let got: Vec<Report> = d.reports().collect();
        let want: Vec<Report> = reports.iter().map(Owned::report).collect();
        prop_assert_eq!(got, want);
        // Every proper prefix is rejected (never half a datagram).
        for cut in [n - 1, n / 2, native::HEADER_LEN] {
            prop_assert!(native::Datagram::parse(&buf[..cut]).is_err());
        }
    }

    /// The one-shape reading of a datagram gives the same reports as the report-by-report one,
    /// and is offered exactly when every report has the first's opcode, key and data lengths.
    #[test]
    fn one_shape_reads_the_same_reports(
        reports in prop::collection::vec(native_report(), 1..40),
        same in any::<bool>(),
    ) {
        let reports = if same { vec![reports[0].clone(); reports.len()] } else { reports };
        let mut buf = vec![0u8; 9000];
        let mut b = DatagramBuilder::new(&mut buf, Priority::Low, false, 1, 2).unwrap();
        for o in &reports {
            b.push(&o.report()).unwrap();
        }
        let n = b.finish();
        let d = native::Datagram::parse(&buf[..n]).unwrap();
        let shape = |v: &native::ReportView| (v.bytes()[0], v.bytes()[2], v.bytes()[3]);
        let first = shape(&d.views().next().unwrap());
        let one = d.views().all(|v| shape(&v) == first);
        prop_assert_eq!(d.one_shape().is_some(), one);
        if let Some(u) = d.one_shape() {
            prop_assert_eq!(u.len(), reports.len());
            prop_assert!(u.views().eq(d.views()));
            for r in 0..=5u8 {
                let plain = d.views().all(|v| v.bytes()[1] == r.wrapping_sub(1));
                prop_assert_eq!(u.plain_at(r), plain && (1..=4).contains(&r));
            }
        }
    }

    #[test]
    fn builder_stops_cleanly_when_full(
        reports in prop::collection::vec(native_report(), 1..60),
        cap in native::HEADER_LEN..600,
    ) {
        let mut buf = vec![0u8; cap];
        let mut b = DatagramBuilder::new(&mut buf, Priority::Low, false, 0, 0).unwrap();
        let mut pushed = Vec::new();
        for o in &reports {
            let r = o.report();
            let fits = b.fits(&r);
            match b.push(&r) {
                Ok(()) => { prop_assert!(fits); pushed.push(o.clone()); }
                Err(e) => { prop_assert!(!fits); prop_assert_eq!(e, dta_wire::Error::Truncated); }
            }
        }
        let empty = b.is_empty();
        let n = b.finish();
        if empty {
            prop_assert_eq!(native::Datagram::parse(&buf[..n]).map(|_| ()), Err(dta_wire::Error::BadCount));
        } else {
            let d = native::Datagram::parse(&buf[..n]).unwrap();
            let want: Vec<Report> = pushed.iter().map(Owned::report).collect();
            prop_assert_eq!(d.reports().collect::<Vec<_>>(), want);
        }
    }

    #[test]
    fn prototype_round_trip(
        report in prototype_report(),
        long in any::<bool>(),
        seqnum in any::<u8>(),
        immediate in any::<bool>(),
        retransmittable in any::<bool>(),
    ) {
        let format = if long { BaseFormat::Long } else { BaseFormat::Short };
        let owned = with_immediate(report, immediate);
        let r = owned.report();
        let repr = prototype::Repr {
            base: BaseRepr {
                opcode: r.opcode(),
                seqnum: long.then_some(seqnum),
                immediate,
                retransmittable: long && retransmittable,
            },
            report: r,
        };
        let mut buf = [0u8; 40];
        let n = repr.emit(&mut buf, format).unwrap();
        prop_assert_eq!(n, repr.buffer_len(format));
        prop_assert_eq!(prototype::Repr::parse(&buf[..n], format), Ok(repr));
        match dta_wire::parse(&buf[..n], format) {
            Ok(Datagram::Prototype(p)) => prop_assert_eq!(p, repr),
            other => prop_assert!(false, "{:?}", other),
        }
    }

    #[test]
    fn nacks_round_trip(
        reporter_id in any::<u32>(),
        seq in any::<u32>(),
        sketch in proptest::option::of((any::<u16>(), any::<u16>(), any::<u32>())),
        missing in any::<u64>(),
        pseq in any::<u8>(),
        pn in any::<bool>(),
    ) {
        let n = NackRepr {
            reporter_id,
            seq,
            sketch: sketch.map(|(sketch_id, column, epoch)| SketchNack { sketch_id, column, epoch }),
            missing: if sketch.is_some() { 0 } else { missing },
        };
        let mut buf = [0u8; 32];
        let len = n.emit(&mut buf).unwrap();
        prop_assert_eq!(NackRepr::parse(&buf[..len]), Ok(n));
        // The named numbers are seq and then distinct, increasing distances within the bitmap.
        let named: Vec<u32> = n.missing_seqs().collect();
        prop_assert_eq!(named.len() as u32, 1 + n.missing.count_ones());
        prop_assert_eq!(named[0], seq);
        let mut back = 0u64;
        for s in &named[1..] {
            back |= 1 << (s.wrapping_sub(seq) - 1);
        }
        prop_assert_eq!(back, n.missing);
        let p = prototype::NackRepr { seqnum: pseq, nack: pn };
        let len = p.emit(&mut buf).unwrap();
        prop_assert_eq!(prototype::NackRepr::parse(&buf[..len]), Ok(p));
    }
}
