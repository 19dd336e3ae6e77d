//! Receiver-not-ready: the requester backs off for the RNR NAK's timer (doubling on repeats),
//! then resends from the NAKed PSN, and every report still lands.

mod common;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use dta_collector::query;
use dta_rdma::{mem_pair, Link};
use dta_rdma_requester::{connect, RequesterConfig};
use dta_rdma_responder::ResponderConfig;
use dta_roce::{aeth, FrameRepr, Opcode};
use dta_translator::{Sinks, Translator};
use dta_wire::Report;

/// Plays a receiver that is not ready: turns the first `budget` plain ACKs the requester
/// receives into RNR NAKs (timer 18 = 5.12 ms) for the same PSN, and, as a real responder would,
/// acknowledges nothing more until the requester resends that PSN.
struct RnrInjector<L> {
    inner: L,
    budget: Arc<AtomicU64>,
    injected_at: Arc<Mutex<Vec<Instant>>>,
    not_ready_from: Option<u32>,
}

impl<L: Link> Link for RnrInjector<L> {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        if let (Some(p), Ok(f)) = (self.not_ready_from, FrameRepr::parse(frame)) {
            if f.bth.psn == p {
                self.not_ready_from = None;
            }
        }
        self.inner.send(frame)
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        let Some(n) = self.inner.recv(buf, timeout)? else {
            return Ok(None);
        };
        if self.not_ready_from.is_some() {
            return Ok(None); // not ready: the frame is lost
        }
        if self.budget.load(Ordering::Relaxed) == 0 {
            return Ok(Some(n));
        }
        let rewritten = match FrameRepr::parse(&buf[..n]) {
            Ok(f) if f.bth.opcode == Opcode::RcAcknowledge => match f.aeth {
                Some(a) if matches!(a.syndrome, aeth::Syndrome::Ack { .. }) => {
                    let mut nak = f;
                    nak.aeth = Some(aeth::Repr {
                        syndrome: aeth::Syndrome::RnrNak { timer: 18 },
                        msn: a.msn,
                    });
                    let mut out = vec![0u8; nak.buffer_len()];
                    let len = nak.emit(&mut out).unwrap();
                    out.truncate(len);
                    Some(out)
                }
                _ => None,
            },
            _ => None,
        };
        match rewritten {
            Some(out) => {
                self.not_ready_from = FrameRepr::parse(&out).ok().map(|f| f.bth.psn);
                self.budget.fetch_sub(1, Ordering::Relaxed);
                self.injected_at.lock().unwrap().push(Instant::now());
                buf[..out.len()].copy_from_slice(&out);
                Ok(Some(out.len()))
            }
            None => Ok(Some(n)),
        }
    }
}

#[test]
fn rnr_nak_backs_off_then_resends_and_everything_lands_once() {
    let (t_ep, c_ep) = (T, C);
    let (tcfg, stores) = embedded();
    let dir = tempfile::tempdir().unwrap();
    let remote = collector(dir.path(), &stores);
    let (a, b) = mem_pair();
    let srv = serve(b, ResponderConfig::new(c_ep), &remote);
    let budget = Arc::new(AtomicU64::new(0));
    let injected_at = Arc::new(Mutex::new(vec![]));
    let link = RnrInjector {
        inner: a,
        budget: budget.clone(),
        injected_at: injected_at.clone(),
        not_ready_from: None,
    };
    let conn = connect(
        Box::new(link) as Box<dyn Link>,
        RequesterConfig::new(t_ep, c_ep.ip),
    )
    .unwrap();
    let infos = conn.store_infos();
    let mut t = Translator::new(&tcfg, &infos, conn.sinks, new_stats()).unwrap();

    // Two RNR NAKs in a row: the second wait is twice the first.
    budget.store(2, Ordering::Relaxed);
    let src: SocketAddr = "127.9.0.1:5000".parse().unwrap();
    let start = Instant::now();
    for i in 0..200u32 {
        let key = (5_000 + i).to_be_bytes();
        let data = (i + 1).to_be_bytes();
        t.apply(
            &Report::KeyWrite {
                key: &key,
                data: &data,
                redundancy: 2,
                immediate: false,
            },
            1,
            src,
            start,
        );
    }
    t.sinks_mut().flush().unwrap();
    let done = Instant::now();
    assert_eq!(
        budget.load(Ordering::Relaxed),
        0,
        "both RNR NAKs were injected"
    );
    let s = t.sinks().stats().snapshot();
    assert_eq!(s["rnr_naks"], 2, "{s}");
    assert!(s["retransmitted_packets"].as_u64().unwrap() > 0, "{s}");
    // Backoff: 5.12 ms << 1, then << 2 (doubling per consecutive RNR NAK): at least 30 ms.
    let first = injected_at.lock().unwrap()[0];
    assert!(
        done.duration_since(first) >= Duration::from_millis(30),
        "finished {:?} after the first RNR NAK",
        done.duration_since(first)
    );
    // Every write landed (resent ones the responder had executed were duplicates).
    let kw = &remote.store("kw").unwrap().region;
    for i in 0..200u32 {
        let r = query::key_write(kw, &(5_000 + i).to_be_bytes(), Some(2), 1).unwrap();
        assert_eq!(r.data, Some(format!("{:08x}", i + 1)), "key {}", 5_000 + i);
    }
    assert!(srv.stats.duplicates.load(Ordering::Relaxed) > 0);
    drop(srv);
}
