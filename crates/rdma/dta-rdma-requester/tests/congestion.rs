//! The RoCE sink's congestion signals (`Sinks::congestion`): RNR NAKs, PSN-sequence NAKs, CNPs
//! and full-window waits, each reported once, by the call after it happened. CNPs come from the
//! software responder, which answers packets marked ECN CE ([RoCEv2 A17.9.3]) at most once per
//! queue pair per `cnp_interval`.

mod common;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use dta_rdma::{mem_pair, Link};
use dta_rdma_requester::{connect, RequesterConfig};
use dta_rdma_responder::ResponderConfig;
use dta_roce::{aeth, FrameRepr, Opcode};
use dta_translator::sinks::Congestion;
use dta_translator::Sinks;

/// Between the requester and the responder: marks the requester's packets ECN CE while `mark`
/// is set (a congested router on the way), remembers the last ACK the requester received, and
/// hands the requester the frames queued in `inject` before anything else.
struct Path<L> {
    inner: L,
    mark: Arc<AtomicBool>,
    last_ack: Arc<Mutex<Option<Vec<u8>>>>,
    inject: Arc<Mutex<Vec<Vec<u8>>>>,
}

fn emit(f: &FrameRepr<'_>) -> Vec<u8> {
    let mut out = vec![0u8; f.buffer_len()];
    let n = f.emit(&mut out).unwrap();
    out.truncate(n);
    out
}

impl<L: Link> Link for Path<L> {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        if self.mark.load(Ordering::Relaxed) {
            if let Ok(mut f) = FrameRepr::parse(frame) {
                f.ip.dscp_ecn |= dta_roce::ipv4::field::ECN_CE;
                return self.inner.send(&emit(&f));
            }
        }
        self.inner.send(frame)
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        if let Some(f) = self.inject.lock().unwrap().pop() {
            buf[..f.len()].copy_from_slice(&f);
            return Ok(Some(f.len()));
        }
        let n = self.inner.recv(buf, timeout)?;
        if let Some(n) = n {
            if FrameRepr::parse(&buf[..n]).is_ok_and(|f| f.bth.opcode == Opcode::RcAcknowledge) {
                *self.last_ack.lock().unwrap() = Some(buf[..n].to_vec());
            }
        }
        Ok(n)
    }
}

struct Setup {
    sinks: dta_rdma_requester::RoceSinks<Box<dyn Link>>,
    srv: Running,
    mark: Arc<AtomicBool>,
    last_ack: Arc<Mutex<Option<Vec<u8>>>>,
    inject: Arc<Mutex<Vec<Vec<u8>>>>,
    _dir: tempfile::TempDir,
}

fn setup(window: usize, cnp_interval: Duration) -> Setup {
    let (_, stores) = embedded();
    let dir = tempfile::tempdir().unwrap();
    let remote = collector(dir.path(), &stores);
    let (a, b) = mem_pair();
    let rcfg = ResponderConfig {
        cnp_interval,
        ..ResponderConfig::new(C)
    };
    let srv = serve(b, rcfg, &remote);
    let mark = Arc::new(AtomicBool::new(false));
    let last_ack = Arc::new(Mutex::new(None));
    let inject = Arc::new(Mutex::new(vec![]));
    let link = Path {
        inner: a,
        mark: mark.clone(),
        last_ack: last_ack.clone(),
        inject: inject.clone(),
    };
    let cfg = RequesterConfig {
        window,
        ..RequesterConfig::new(T, C.ip)
    };
    let conn = connect(Box::new(link) as Box<dyn Link>, cfg).unwrap();
    Setup {
        sinks: conn.sinks,
        srv,
        mark,
        last_ack,
        inject,
        _dir: dir,
    }
}

/// `n` 8-byte writes into store 0, then a flush (every one acknowledged).
fn write(sinks: &mut impl Sinks, n: u64) {
    for i in 0..n {
        sinks.write(0, i * 8, &i.to_le_bytes(), false).unwrap();
    }
    sinks.flush().unwrap();
}

#[test]
fn rnr_and_sequence_naks_are_reported_once() {
    let mut s = setup(256, Duration::from_micros(50));
    write(&mut s.sinks, 4);
    assert_eq!(s.sinks.congestion(), Congestion::default());
    // An RNR NAK and a PSN-sequence NAK for the next PSN (nothing outstanding), built from the
    // last ACK the collector sent us.
    let ack = s.last_ack.lock().unwrap().clone().expect("an ACK");
    let ack = FrameRepr::parse(&ack).unwrap();
    let next = (ack.bth.psn + 1) & 0x00ff_ffff;
    for syndrome in [
        aeth::Syndrome::RnrNak { timer: 1 },
        aeth::Syndrome::Nak(aeth::NakCode::PsnSequenceError),
    ] {
        let mut f = ack;
        f.bth.psn = next;
        f.aeth = Some(aeth::Repr {
            syndrome,
            msn: ack.aeth.unwrap().msn,
        });
        s.inject.lock().unwrap().push(emit(&f));
    }
    for _ in 0..4 {
        Sinks::poll(&mut s.sinks).unwrap();
    }
    assert!(s.inject.lock().unwrap().is_empty());
    assert_eq!(
        s.sinks.congestion(),
        Congestion {
            rnr_naks: 1,
            sequence_naks: 1,
            ..Congestion::default()
        }
    );
    assert_eq!(s.sinks.congestion(), Congestion::default());
    // The connection still works after both.
    write(&mut s.sinks, 4);
    assert_eq!(s.sinks.congestion(), Congestion::default());
}

#[test]
fn a_full_window_is_reported_as_often_as_it_was_waited_for() {
    let mut s = setup(2, Duration::from_micros(50));
    write(&mut s.sinks, 12);
    let waits = s.sinks.stats().window_full_waits.load(Ordering::Relaxed);
    assert!(waits > 0, "a window of 2 never filled");
    let c = s.sinks.congestion();
    assert_eq!(
        c,
        Congestion {
            window_full: waits,
            ..Congestion::default()
        }
    );
    assert_eq!(s.sinks.congestion(), Congestion::default());
}

/// Packets marked CE on the way: the responder sends one CNP per queue pair per interval (an
/// hour here: exactly one), the requester counts it and reports it once; unmarked packets
/// bring none.
#[test]
fn ecn_marked_packets_bring_one_cnp_per_interval_reported_once() {
    let mut s = setup(256, Duration::from_secs(3600));
    write(&mut s.sinks, 4);
    assert_eq!(s.srv.stats.cnps_sent.load(Ordering::Relaxed), 0);
    s.mark.store(true, Ordering::Relaxed);
    write(&mut s.sinks, 20);
    s.mark.store(false, Ordering::Relaxed);
    assert!(s.srv.stats.ecn_ce_received.load(Ordering::Relaxed) >= 20);
    assert_eq!(s.srv.stats.cnps_sent.load(Ordering::Relaxed), 1);
    // The CNP may trail the last ACK: poll until it is in.
    let mut c = Congestion::default();
    let deadline = std::time::Instant::now() + dta_testkit::WAIT;
    while std::time::Instant::now() < deadline {
        Sinks::poll(&mut s.sinks).unwrap();
        c = s.sinks.congestion();
        if c.cnps > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        c,
        Congestion {
            cnps: 1,
            ..Congestion::default()
        }
    );
    assert_eq!(s.sinks.stats().cnps.load(Ordering::Relaxed), 1);
    write(&mut s.sinks, 4);
    assert_eq!(s.sinks.congestion(), Congestion::default());
}

/// With no interval every marked packet is answered: the rate limit is what bounds CNPs.
#[test]
fn without_an_interval_every_marked_packet_gets_its_cnp() {
    let mut s = setup(256, Duration::ZERO);
    s.mark.store(true, Ordering::Relaxed);
    write(&mut s.sinks, 10);
    s.mark.store(false, Ordering::Relaxed);
    let marked = s.srv.stats.ecn_ce_received.load(Ordering::Relaxed);
    assert!(marked >= 10);
    assert_eq!(s.srv.stats.cnps_sent.load(Ordering::Relaxed), marked);
    let mut cnps = 0;
    let deadline = std::time::Instant::now() + dta_testkit::WAIT;
    while std::time::Instant::now() < deadline {
        Sinks::poll(&mut s.sinks).unwrap();
        cnps += s.sinks.congestion().cnps;
        if cnps == marked {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(cnps, marked);
}
