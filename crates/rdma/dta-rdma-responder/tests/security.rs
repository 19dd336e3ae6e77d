//! The responder against hostile and restarting peers: spoofed RC frames (right QP from the
//! wrong address, right address to the wrong QP, guessed R_Keys) change no byte and are counted;
//! every responder run draws its own R_Keys, QPNs and starting PSNs; a translator that vanishes
//! without a DREQ (SIGKILL) reconnects and writes; a graceful disconnect frees the queue pair.

// The requester's end-to-end fixtures (collector, translator, the responder on a thread), shared
// with its tests rather than copied.
#[path = "../../dta-rdma-requester/tests/common/mod.rs"]
mod common;

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use dta_rdma::{mem_pair, Link, MemLink};
use dta_rdma_requester::{connect, Connection, RequesterConfig};
use dta_rdma_responder::{DropReason, ResponderConfig, ResponderStats};
use dta_roce::{reth, FrameRepr, Opcode};
use dta_translator::Sinks;

/// The translator's end: shareable (a "restarted" translator reuses the wire of a dead one) and
/// recording every frame it sends.
#[derive(Clone)]
struct Tap {
    inner: Arc<Mutex<MemLink>>,
    sent: Arc<Mutex<Vec<Vec<u8>>>>,
    received: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Link for Tap {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.sent.lock().unwrap().push(frame.to_vec());
        self.inner.lock().unwrap().send(frame)
    }
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        let r = self.inner.lock().unwrap().recv(buf, timeout)?;
        if let Some(n) = r {
            self.received.lock().unwrap().push(buf[..n].to_vec());
        }
        Ok(r)
    }
}

/// The collector's end, with a side door: frames pushed to `inject` arrive as if from the wire
/// (an attacker on the collector's network). `polls` counts the responder's receive calls: its
/// one thread handles a frame before it receives again.
struct Door {
    inner: MemLink,
    inject: Inject,
}

/// The side door's frames and the responder's receive calls.
#[derive(Clone, Default)]
struct Inject {
    frames: Arc<Mutex<VecDeque<Vec<u8>>>>,
    polls: Arc<AtomicU64>,
}

impl Link for Door {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.inner.send(frame)
    }
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        self.inject.polls.fetch_add(1, Ordering::SeqCst);
        if let Some(f) = self.inject.frames.lock().unwrap().pop_front() {
            buf[..f.len()].copy_from_slice(&f);
            return Ok(Some(f.len()));
        }
        self.inner.recv(buf, timeout)
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    remote: dta_collector::Collector,
    srv: Running,
    tap: Tap,
    inject: Inject,
}

fn setup() -> Setup {
    setup_with(ResponderConfig::new(C))
}

fn setup_with(cfg: ResponderConfig) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let (_, stores) = embedded();
    let remote = collector(dir.path(), &stores);
    let (a, b) = mem_pair();
    let inject = Inject::default();
    let door = Door {
        inner: b,
        inject: inject.clone(),
    };
    let srv = serve(door, cfg, &remote);
    let tap = Tap {
        inner: Arc::new(Mutex::new(a)),
        sent: Arc::default(),
        received: Arc::default(),
    };
    Setup {
        _dir: dir,
        remote,
        srv,
        tap,
        inject,
    }
}

fn dial(tap: &Tap) -> Connection<Tap> {
    connect(tap.clone(), RequesterConfig::new(T, C.ip)).unwrap()
}

/// The last RC WRITE the translator sent, owned.
fn last_write(tap: &Tap) -> Vec<u8> {
    tap.sent
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|f| {
            FrameRepr::parse(f)
                .is_ok_and(|f| matches!(f.bth.opcode, Opcode::RcWriteOnly | Opcode::RcWriteOnlyImm))
        })
        .expect("a WRITE was sent")
        .clone()
}

fn emit(f: &FrameRepr<'_>) -> Vec<u8> {
    let mut b = vec![0u8; f.buffer_len()];
    let n = f.emit(&mut b).unwrap();
    b.truncate(n);
    b
}

fn data(c: &dta_collector::Collector, store: usize, off: u64, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    c.stores()[store].region.mem().read(off, &mut b).unwrap();
    b
}

fn get(s: &ResponderStats, name: &str) -> u64 {
    s.get(name).unwrap()
}

/// Wait until the responder has handled every injected frame: the side door is empty, and the
/// responder has come back for another frame since (so it finished the last one it took).
fn drain(inject: &Inject) {
    dta_testkit::wait_until(
        "the responder to take the injected frames",
        || inject.frames.lock().unwrap().len(),
        |&n| n == 0,
    );
    let polls = inject.polls.load(Ordering::SeqCst);
    dta_testkit::wait_until(
        "the responder to handle the last injected frame",
        || inject.polls.load(Ordering::SeqCst),
        |&p| p > polls,
    );
}

#[test]
fn spoofed_writes_change_nothing_and_are_counted_by_reason() {
    let s = setup();
    let mut conn = dial(&s.tap);
    let kw = conn.stores[0].clone();
    let (va, rkey) = (kw.data_va(), kw.rkey);
    // One genuine write, to learn the frame a spoofer would imitate (QPN, PSN, R_Key).
    conn.sinks.write_raw(va, rkey, &[0x11; 8], None).unwrap();
    conn.sinks.flush().unwrap();
    assert_eq!(data(&s.remote, 0, 0, 8), vec![0x11; 8]);
    let genuine = last_write(&s.tap);
    let g = FrameRepr::parse(&genuine).unwrap();
    let next_psn = (g.bth.psn + 1) & dta_rdma::PSN_MASK;
    let target = va + 4096;
    let spoof = |src_ip: [u8; 4], qp: u32, psn: u32, key: u32| {
        let mut f = g;
        f.ip.src = src_ip;
        f.bth.dest_qp = qp;
        f.bth.psn = psn;
        f.bth.ack_req = true;
        f.reth = Some(reth::Repr {
            va: target,
            rkey: key,
            dma_len: 8,
        });
        f.payload = &[0xee; 8];
        emit(&f)
    };
    let before_nak = get(&s.srv.stats, "naks_remote_access");
    {
        let mut q = s.inject.frames.lock().unwrap();
        // Right QPN, PSN and R_Key, wrong source address.
        q.push_back(spoof([10, 0, 0, 66], g.bth.dest_qp, next_psn, rkey));
        // Right address, PSN and R_Key, a QP that is not the connection's.
        q.push_back(spoof(T.ip, g.bth.dest_qp ^ 0x5a5a, next_psn, rkey));
    }
    drain(&s.inject);
    assert_eq!(get(&s.srv.stats, "drop_wrong_peer"), 1);
    assert_eq!(get(&s.srv.stats, "drop_unknown_qp"), 1);
    assert_eq!(data(&s.remote, 0, 4096, 8), vec![0; 8]);
    // Right address, QP and PSN, guessed R_Keys: every guess is NAKed, none writes.
    let guesses = 200u32;
    {
        let mut q = s.inject.frames.lock().unwrap();
        for i in 0..guesses {
            let key = rkey.wrapping_add(1 + i.wrapping_mul(0x9e37_79b9));
            assert_ne!(key, rkey);
            q.push_back(spoof(T.ip, g.bth.dest_qp, (next_psn + i) & 0xff_ffff, key));
        }
    }
    drain(&s.inject);
    assert_eq!(
        get(&s.srv.stats, "naks_remote_access") - before_nak,
        u64::from(guesses)
    );
    assert_eq!(data(&s.remote, 0, 4096, 8), vec![0; 8]);
    // Every reason has its own counter, and the snapshot shows them.
    let snap = s.srv.stats.snapshot();
    for r in DropReason::ALL {
        let c = r.counter(&s.srv.stats).load(Ordering::Relaxed);
        assert!(snap.as_object().unwrap().values().any(|v| v == c));
    }
    std::mem::forget(conn);
}

#[test]
fn every_responder_run_draws_its_own_keys_qpns_and_psns() {
    let a = setup();
    let b = setup();
    let (ka, kb) = (&a.srv.registrations, &b.srv.registrations);
    assert!(ka.iter().zip(kb).all(|(x, y)| x.2 != y.2), "{ka:?} {kb:?}");
    let mut keys: Vec<u32> = ka.iter().map(|r| r.2).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), ka.len());
    let rep = |s: &Setup| {
        let ca = dial(&s.tap);
        let f = s
            .tap
            .received
            .lock()
            .unwrap()
            .iter()
            .find_map(|f| {
                let f = FrameRepr::parse(f).ok()?;
                let m = dta_roce::cm::MadRepr::parse(f.payload).ok()?;
                match m.message {
                    dta_roce::cm::Message::Rep(r) => {
                        Some((r.local_qpn, r.starting_psn, r.local_comm_id))
                    }
                    _ => None,
                }
            })
            .expect("a REP");
        drop(ca);
        f
    };
    let (ra, rb) = (rep(&a), rep(&b));
    assert_ne!(ra.0, rb.0, "QPN");
    assert_ne!(ra.1, rb.1, "starting PSN");
    assert_ne!(ra.2, rb.2, "communication id");
}

#[test]
fn a_killed_translator_restarts_reconnects_and_writes() {
    let s = setup();
    let mut first = dial(&s.tap);
    let (va, rkey) = (first.stores[0].data_va(), first.stores[0].rkey);
    first.sinks.write_raw(va, rkey, &[1; 8], None).unwrap();
    first.sinks.flush().unwrap();
    let first_req = s.tap.sent.lock().unwrap().len();
    // SIGKILL: the process is gone, no DREQ, nothing more from it.
    std::mem::forget(first);
    let mut second = dial(&s.tap);
    assert!(s.tap.sent.lock().unwrap().len() > first_req);
    assert_eq!(get(&s.srv.stats, "cm_replaced"), 1);
    assert_eq!(get(&s.srv.stats, "cm_dreq"), 0);
    // The advertisement is the same memory; the new connection writes.
    assert_eq!(second.stores[0].rkey, rkey);
    second.sinks.write(0, 64, &[2; 8], false).unwrap();
    second.sinks.flush().unwrap();
    assert_eq!(data(&s.remote, 0, 64, 8), vec![2; 8]);
    second.sinks.disconnect().unwrap();
}

#[test]
fn a_graceful_exit_sends_dreq_and_the_responder_frees_the_qp() {
    let s = setup();
    let mut conn = dial(&s.tap);
    let (va, rkey) = (conn.stores[0].data_va(), conn.stores[0].rkey);
    conn.sinks.write_raw(va, rkey, &[3; 8], None).unwrap();
    conn.sinks.flush().unwrap();
    let genuine = last_write(&s.tap);
    conn.sinks.disconnect().unwrap();
    assert_eq!(get(&s.srv.stats, "cm_dreq"), 1);
    // Disconnecting twice is harmless.
    conn.sinks.disconnect().unwrap();
    // The queue pair is gone: its old frame, replayed from the right address, is dropped.
    let mut f = FrameRepr::parse(&genuine).unwrap();
    f.bth.psn = (f.bth.psn + 1) & dta_rdma::PSN_MASK;
    f.payload = &[0xee; 8];
    s.inject.frames.lock().unwrap().push_back(emit(&f));
    drain(&s.inject);
    assert_eq!(get(&s.srv.stats, "drop_unknown_qp"), 1);
    assert_eq!(data(&s.remote, 0, 0, 8), vec![3; 8]);
    // Dropping a still-connected sink (an error path) also sends a DREQ.
    let again = dial(&s.tap);
    drop(again);
    dta_testkit::wait_until(
        "the responder to count the second DREQ",
        || get(&s.srv.stats, "cm_dreq"),
        |&n| n >= 2,
    );
    assert_eq!(get(&s.srv.stats, "cm_dreq"), 2);
    assert_eq!(get(&s.srv.stats, "cm_replaced"), 0);
}

/// A connection request from outside the responder's allow-list is dropped unanswered and
/// counted: no REP, no memory advertisement (so no R_Key) reaches that host.
#[test]
fn connection_request_from_outside_the_allow_list_learns_nothing() {
    let mut cfg = ResponderConfig::new(C);
    cfg.allow = dta_wire::prefix::AllowList::new(vec!["10.9.9.0/24".parse().unwrap()]);
    assert!(!cfg.allow.allows(std::net::Ipv4Addr::from(T.ip).into()));
    let s = setup_with(cfg);
    let mut rc = RequesterConfig::new(T, C.ip);
    rc.cm_timeout = Duration::from_millis(50);
    rc.cm_retries = 2;
    assert!(connect(s.tap.clone(), rc).is_err());
    // The responder runs on its own thread: it has dropped a request once it counts one.
    dta_testkit::wait_until(
        "the responder to drop a request",
        || get(&s.srv.stats, "drop_req_not_allowed"),
        |&n| n >= 1,
    );
    assert_eq!(get(&s.srv.stats, "cm_req"), 0);
    assert_eq!(get(&s.srv.stats, "cm_rep_sent"), 0);
    assert_eq!(get(&s.srv.stats, "adv_packets_sent"), 0);
    assert!(s.tap.received.lock().unwrap().is_empty());
}
