//! The reporter against a real UDP receiver on 127.0.0.1: what arrives, decoded with
//! `dta_wire::parse`, is exactly what was sent.

mod common;

use common::{config, Sink};
use dta_reporter::{Protocol, ReportError, Reporter};
use dta_wire::native::HEADER_LEN;
use dta_wire::prototype::BaseFormat;
use dta_wire::{parse, Datagram, Priority, Report};

fn native_reports(d: &[u8]) -> (dta_wire::native::HeaderRepr, Vec<Report<'_>>) {
    match parse(d, BaseFormat::Short).unwrap() {
        Datagram::Native(n) => (n.header, n.reports().collect()),
        other => panic!("not native: {other:?}"),
    }
}

#[test]
fn prototype_short_sends_one_report_per_datagram() {
    let sink = Sink::start();
    let mut r = Reporter::new(config(sink.addr, Protocol::Prototype(BaseFormat::Short))).unwrap();
    r.key_write(&[0, 0, 0, 7], &[1, 2, 3, 4], 2, true).unwrap();
    r.key_increment(&[0, 0, 0, 8], 99, 3, false).unwrap();
    r.append(5, &[9, 9, 9, 9], false).unwrap();
    r.postcard(&[0, 0, 0, 9], 3, 5, 0xABCD, false).unwrap();
    r.key_write(&[0, 0, 0, 7], &[7; 28], 1, false).unwrap();
    // Not expressible in the prototype: an error, nothing sent.
    assert!(matches!(
        r.sketch_column(1, 0, 1, &[0; 8], false),
        Err(ReportError::Unsupported(_))
    ));
    assert!(matches!(
        r.key_write(&[1, 2, 3, 4, 5], &[0; 4], 1, false),
        Err(ReportError::Wire(dta_wire::Error::BadKeyLen))
    ));
    assert!(matches!(
        r.key_write(&[1, 2, 3, 4], &[0; 8], 1, false),
        Err(ReportError::Wire(dta_wire::Error::BadDataLen))
    ));
    let st = r.stats();
    assert_eq!((st.datagrams, st.reports), (5, 5));
    drop(r);
    let got = sink.finish();
    assert_eq!(got.len(), 5);
    assert_eq!(st.bytes, got.iter().map(|d| d.len() as u64).sum::<u64>());
    let reports: Vec<Report> = got
        .iter()
        .map(|d| match parse(d, BaseFormat::Short).unwrap() {
            Datagram::Prototype(p) => {
                assert_eq!(p.base.seqnum, None);
                p.report
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        reports,
        vec![
            Report::KeyWrite {
                key: &[0, 0, 0, 7],
                data: &[1, 2, 3, 4],
                redundancy: 2,
                immediate: true
            },
            Report::KeyIncrement {
                key: &[0, 0, 0, 8],
                counter: 99,
                redundancy: 3,
                immediate: false
            },
            Report::Append {
                list_id: 5,
                data: &[9, 9, 9, 9],
                immediate: false
            },
            // The prototype carries no path length.
            Report::Postcard {
                key: &[0, 0, 0, 9],
                hop: 3,
                path_len: 0,
                value: 0xABCD,
                immediate: false
            },
            Report::KeyWrite {
                key: &[0, 0, 0, 7],
                data: &[7; 28],
                redundancy: 1,
                immediate: false
            },
        ]
    );
}

#[test]
fn prototype_long_carries_the_wrapping_seqnum() {
    let sink = Sink::start();
    let mut cfg = config(sink.addr, Protocol::Prototype(BaseFormat::Long));
    cfg.retransmittable = true;
    let mut r = Reporter::new(cfg).unwrap();
    for i in 0..300u32 {
        r.append(1, &i.to_be_bytes(), false).unwrap();
        if i % 50 == 49 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    drop(r);
    let got = sink.finish();
    assert_eq!(got.len(), 300);
    for (i, d) in got.iter().enumerate() {
        match parse(d, BaseFormat::Long).unwrap() {
            Datagram::Prototype(p) => {
                assert_eq!(p.base.seqnum, Some(i as u8));
                assert!(p.base.retransmittable);
                assert_eq!(
                    p.report,
                    Report::Append {
                        list_id: 1,
                        data: &(i as u32).to_be_bytes(),
                        immediate: false
                    }
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn prototype_short_cannot_be_retransmittable() {
    let mut cfg = config(
        "127.0.0.1:9".parse().unwrap(),
        Protocol::Prototype(BaseFormat::Short),
    );
    cfg.retransmittable = true;
    assert_eq!(
        Reporter::new(cfg).err().unwrap().kind(),
        std::io::ErrorKind::InvalidInput
    );
}

#[test]
fn native_packing_respects_max_datagram() {
    let sink = Sink::start();
    let mut cfg = config(sink.addr, Protocol::Native { reporter_id: 77 });
    cfg.max_datagram = 200;
    cfg.priority = Priority::High;
    let mut r = Reporter::new(cfg).unwrap();
    // Key-Write of a 4-byte key and 16-byte data: 4 + 4 + 16 = 24 bytes per report, so
    // (200 - 12) / 24 = 7 reports per datagram.
    for i in 0..50u32 {
        r.key_write(
            &i.to_be_bytes(),
            &[i as u8; 16],
            1 + (i % 4) as u8,
            i % 2 == 0,
        )
        .unwrap();
    }
    assert_eq!(r.pending(), 1, "50 = 7 * 7 + 1 reports: one left open");
    assert_eq!(r.stats().datagrams, 7);
    r.flush().unwrap();
    r.flush().unwrap(); // nothing open: no empty datagram
    let st = r.stats();
    drop(r);
    let got = sink.finish();
    assert_eq!(got.len(), 8);
    assert_eq!(st.datagrams, 8);
    assert_eq!(st.reports, 50);
    let mut i = 0u32;
    for (seq, d) in got.iter().enumerate() {
        assert!(d.len() <= 200);
        let (h, reports) = native_reports(d);
        assert_eq!(h.seq, seq as u32);
        assert_eq!(h.reporter_id, 77);
        assert_eq!(h.priority, Priority::High);
        assert!(!h.retransmittable);
        assert_eq!(reports.len(), if seq < 7 { 7 } else { 1 });
        assert_eq!(d.len(), HEADER_LEN + 24 * reports.len());
        for rep in reports {
            assert_eq!(
                rep,
                Report::KeyWrite {
                    key: &i.to_be_bytes(),
                    data: &[i as u8; 16],
                    redundancy: 1 + (i % 4) as u8,
                    immediate: i % 2 == 0
                }
            );
            i += 1;
        }
    }
    assert_eq!(i, 50);
}

#[test]
fn native_packing_mixes_primitives_and_respects_the_report_limit() {
    let sink = Sink::start();
    let mut cfg = config(sink.addr, Protocol::Native { reporter_id: 1 });
    cfg.max_reports_per_datagram = 3;
    let mut r = Reporter::new(cfg).unwrap();
    let key13: Vec<u8> = (1..=13).collect();
    r.key_write(&key13, &[5; 64], 4, false).unwrap();
    r.key_increment(&[1], 1 << 40, 1, false).unwrap();
    r.append(123_456, &[1; 4], true).unwrap(); // third: sent at once
    assert_eq!(r.pending(), 0);
    r.postcard(&key13, 2, 5, 77, false).unwrap();
    r.sketch_column(3, 9, 2, &[0xEE; 16], false).unwrap();
    // Invalid reports are rejected without disturbing the open datagram.
    assert!(matches!(
        r.key_write(&[0; 17], &[0; 4], 1, false),
        Err(ReportError::Wire(dta_wire::Error::BadKeyLen))
    ));
    assert!(matches!(
        r.key_write(&[0; 4], &[0; 3], 1, false),
        Err(ReportError::Wire(dta_wire::Error::BadDataLen))
    ));
    assert!(matches!(
        r.key_write(&[0; 4], &[0; 4], 5, false),
        Err(ReportError::Wire(dta_wire::Error::BadRedundancy))
    ));
    assert_eq!(r.pending(), 2);
    drop(r); // flushes
    let got = sink.finish();
    assert_eq!(got.len(), 2);
    let (_, a) = native_reports(&got[0]);
    let (h, b) = native_reports(&got[1]);
    assert_eq!(h.seq, 1);
    assert_eq!(a.len(), 3);
    assert_eq!(
        a[1],
        Report::KeyIncrement {
            key: &[1],
            counter: 1 << 40,
            redundancy: 1,
            immediate: false
        }
    );
    assert_eq!(
        b,
        vec![
            Report::Postcard {
                key: &key13,
                hop: 2,
                path_len: 5,
                value: 77,
                immediate: false
            },
            Report::SketchColumn {
                sketch_id: 3,
                column: 9,
                epoch: 2,
                data: &[0xEE; 16],
                immediate: false
            }
        ]
    );
}

#[test]
fn config_validation() {
    let to = "127.0.0.1:9".parse().unwrap();
    let mut cfg = config(to, Protocol::Native { reporter_id: 1 });
    cfg.max_datagram = 50; // smaller than the header and the largest report
    assert!(Reporter::new(cfg).is_err());
    let mut cfg = config(to, Protocol::Native { reporter_id: 1 });
    cfg.max_reports_per_datagram = 0;
    assert!(Reporter::new(cfg).is_err());
    let mut cfg = config(to, Protocol::Native { reporter_id: 1 });
    cfg.nack_port = None;
    let r = Reporter::new(cfg).unwrap();
    assert!(r.nack_addr().is_none());
}
