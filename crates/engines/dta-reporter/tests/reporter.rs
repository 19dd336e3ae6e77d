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

/// Flow control is on or refused: a control port another process holds stops the reporter
/// with the port and the process named; `nack_port: None` is the explicit way to run without.
#[test]
fn a_control_port_held_by_another_process_is_refused_naming_it() {
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let Ok(mut holder) = std::process::Command::new("python3")
        .args([
            "-c",
            &format!(
                "import socket,sys,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
                 s.bind(('0.0.0.0',{port}))\nprint('bound',flush=True)\ntime.sleep(30)"
            ),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
    else {
        dta_testkit::skip!("python3 missing: no other process to hold the port");
    };
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "bound");
    let to = "127.0.0.1:9".parse().unwrap();
    let mut cfg = config(to, Protocol::Native { reporter_id: 1 });
    cfg.nack_port = Some(port);
    let e = Reporter::new(cfg.clone()).err().expect("refused");
    let msg = e.to_string();
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    assert!(
        msg.contains(&format!("control port {port}"))
            && msg.contains(&format!("process {}", holder.id()))
            && msg.contains("python3")
            && msg.contains("no-flow-control"),
        "{msg}"
    );
    // Retransmittable or not, native or prototype with NACKs: the same.
    let mut proto = config(to, Protocol::Prototype(BaseFormat::Long));
    proto.retransmittable = true;
    let held = std::net::UdpSocket::bind(("0.0.0.0", 0)).unwrap();
    proto.nack_port = Some(held.local_addr().unwrap().port());
    assert!(Reporter::new(proto).is_err());
    // A prototype reporter that is not retransmittable has nothing to hear: no socket.
    let mut plain = config(to, Protocol::Prototype(BaseFormat::Short));
    plain.nack_port = Some(held.local_addr().unwrap().port());
    let r = Reporter::new(plain).unwrap();
    assert!(r.nack_addr().is_none() && !r.hears_translator());
    cfg.nack_port = None;
    assert!(!Reporter::new(cfg).unwrap().hears_translator());
}

/// The native reporters of one process share one control socket: each obeys the notices that
/// name it, none another's.
#[test]
fn reporters_sharing_a_control_hub_each_get_their_own_notices() {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = rx.local_addr().unwrap();
    let hub = dta_reporter::ControlHub::bind(to, 0).unwrap();
    let reporter = |id| {
        let mut c = config(to, Protocol::Native { reporter_id: id });
        c.control_hub = Some(hub.clone());
        Reporter::new(c).unwrap()
    };
    let (mut a, mut b) = (reporter(1), reporter(2));
    assert_eq!(a.nack_addr(), hub.local_addr().ok());
    let notice = |id| {
        let mut buf = [0u8; 64];
        let n = dta_wire::native::NoticeRepr {
            reporter_id: id,
            hold_ms: 60_000,
            low_rate: 0,
            medium_rate: 0,
        }
        .emit(&mut buf)
        .unwrap();
        buf[..n].to_vec()
    };
    let hub_addr = std::net::SocketAddr::from(([127, 0, 0, 1], hub.local_addr().unwrap().port()));
    for id in [2, 2, 1, 7] {
        rx.send_to(&notice(id), hub_addr).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    // Whoever polls first reads the socket; each gets its own.
    b.poll_nacks().unwrap();
    a.poll_nacks().unwrap();
    assert_eq!((a.stats().notices, b.stats().notices), (1, 2));
    assert_eq!(hub.foreign(), 1, "the notice for reporter 7");
    let mut proto = config(to, Protocol::Prototype(BaseFormat::Long));
    proto.control_hub = Some(hub.clone());
    assert!(
        Reporter::new(proto).is_err(),
        "the prototype's NACK names no reporter"
    );
}
