//! SketchSender against a translator stand-in that keeps the last in-order column ([DTA-draft
//! §3.1]), loses one column, and NACKs every out-of-order column with the column expected next.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use common::config;
use dta_reporter::sketch::HllColumns;
use dta_reporter::{Protocol, Reporter, SketchSender};
use dta_store::sketch::{CountMin, HyperLogLog};
use dta_wire::native::{NackRepr, SketchNack};
use dta_wire::prototype::BaseFormat;
use dta_wire::{parse, Datagram, Report};

/// What the stand-in saw: every column received (in order of arrival) and the columns merged
/// in order, with their bytes.
struct Seen {
    arrived: Vec<u16>,
    merged: Vec<(u16, Vec<u8>)>,
    nacks: usize,
}

/// Receive columns of (`sketch_id`, `epoch`) from `reporter_id` until `columns` are merged;
/// drop the first arrival of column `lose`.
fn translator(rx: UdpSocket, nack_to: SocketAddr, columns: u16, lose: u16) -> Seen {
    rx.set_read_timeout(Some(dta_testkit::WAIT)).unwrap();
    let mut seen = Seen {
        arrived: vec![],
        merged: vec![],
        nacks: 0,
    };
    let mut lost = false;
    let mut b = [0u8; 2048];
    while seen.merged.len() < columns as usize {
        let n = rx.recv(&mut b).expect("the sender stalled");
        let Datagram::Native(d) = parse(&b[..n], BaseFormat::Short).unwrap() else {
            panic!("not native")
        };
        for rep in d.reports() {
            let Report::SketchColumn {
                sketch_id,
                column,
                epoch,
                data,
                ..
            } = rep
            else {
                panic!("not a column: {rep:?}")
            };
            assert_eq!((sketch_id, epoch, d.header.reporter_id), (7, 3, 21));
            seen.arrived.push(column);
            if column == lose && !lost {
                lost = true;
                continue;
            }
            let expected = seen.merged.len() as u16;
            if column == expected {
                seen.merged.push((column, data.to_vec()));
            } else if column > expected {
                let mut nb = [0u8; 32];
                let len = NackRepr {
                    reporter_id: 21,
                    seq: 0,
                    sketch: Some(SketchNack {
                        sketch_id: 7,
                        column: expected,
                        epoch: 3,
                    }),
                    missing: 0,
                }
                .emit(&mut nb)
                .unwrap();
                rx.send_to(&nb[..len], nack_to).unwrap();
                seen.nacks += 1;
            } // else a duplicate: ignored
        }
    }
    seen
}

/// How long the sender waits for a NACK after its last column: the stand-in translator NACKs
/// from its own thread, which a loaded machine can deschedule for far longer than the sending
/// takes (and then the sender would finish before the NACK it is tested on).
const NACK_WAIT: Duration = Duration::from_secs(3);

fn sender_rig(max_reports: u8) -> (UdpSocket, Reporter, SocketAddr) {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut cfg = config(
        rx.local_addr().unwrap(),
        Protocol::Native { reporter_id: 21 },
    );
    cfg.max_reports_per_datagram = max_reports;
    let r = Reporter::new(cfg).unwrap();
    let nack_to = SocketAddr::from(([127, 0, 0, 1], r.nack_addr().unwrap().port()));
    (rx, r, nack_to)
}

#[test]
fn count_min_restarts_from_the_nacked_column() {
    let mut cm = CountMin::new(4, 32);
    for i in 0..500u32 {
        cm.update(&i.to_be_bytes(), 1 + i % 3);
    }
    let (rx, mut reporter, nack_to) = sender_rig(1);
    let t = std::thread::spawn(move || translator(rx, nack_to, 32, 5));
    let mut sender = SketchSender::new(&cm, 7, 3);
    let out = sender.send_sketch(&mut reporter, NACK_WAIT).unwrap();
    let seen = t.join().unwrap();
    assert!(out.complete);
    assert!(out.restarts >= 1, "{out:?}");
    assert!(seen.nacks >= 1);
    // Every column merged once, in order, with the Count-Min's wire bytes.
    for (c, (col, data)) in seen.merged.iter().enumerate() {
        assert_eq!(*col as usize, c);
        let mut want = vec![0u8; 16];
        cm.column_wire(c as u32, &mut want);
        assert_eq!(data, &want);
    }
    // The restart begins at the NACKed column: columns before it are sent once only.
    for c in 0..5u16 {
        assert_eq!(seen.arrived.iter().filter(|&&a| a == c).count(), 1);
    }
    assert!(seen.arrived.iter().filter(|&&a| a == 5).count() >= 2);
    let first_restart = seen.arrived.iter().skip(6).position(|&a| a == 5).unwrap() + 6;
    assert!(seen.arrived[..first_restart]
        .windows(2)
        .all(|w| w[1] == w[0] + 1));
    assert_eq!(out.columns_sent as usize, seen.arrived.len());
}

#[test]
fn hyperloglog_packed_columns_restart_too() {
    let mut hll = HyperLogLog::new(1024);
    for i in 0..3000u32 {
        hll.insert(&i.to_be_bytes());
    }
    let cols = HllColumns {
        hll: &hll,
        per_column: 32,
    };
    // Several columns per datagram: losing column 9 loses only that report here (the
    // stand-in drops one column), the rest of its datagram is then out of order.
    let (rx, mut reporter, nack_to) = sender_rig(4);
    let t = std::thread::spawn(move || translator(rx, nack_to, 32, 9));
    let out = SketchSender::new(cols, 7, 3)
        .send_sketch(&mut reporter, NACK_WAIT)
        .unwrap();
    let seen = t.join().unwrap();
    assert!(out.complete && out.restarts >= 1, "{out:?}");
    for (c, (col, data)) in seen.merged.iter().enumerate() {
        assert_eq!(*col as usize, c);
        assert_eq!(&data[..], hll.column(c as u32, 32));
    }
}

#[test]
fn no_nack_means_one_pass() {
    let mut cm = CountMin::new(2, 8);
    cm.update(b"x", 5);
    let (rx, mut reporter, nack_to) = sender_rig(255);
    let t = std::thread::spawn(move || translator(rx, nack_to, 8, u16::MAX));
    let out = SketchSender::new(&cm, 7, 3)
        .send_sketch(&mut reporter, Duration::from_millis(100))
        .unwrap();
    let seen = t.join().unwrap();
    assert_eq!((out.columns_sent, out.restarts, out.complete), (8, 0, true));
    assert_eq!(seen.arrived, (0..8).collect::<Vec<u16>>());
    assert_eq!(
        reporter.stats().datagrams,
        1,
        "8 small columns fit one datagram"
    );
}
