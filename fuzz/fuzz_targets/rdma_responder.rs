//! Fuzz target `rdma_responder`: arbitrary frames into the software RoCE responder's state
//! machine over one small region. Each run connects first (a real REQ captured from the
//! requester, the responder's REP answered with an RTU), so the fuzzed frames reach the RC
//! checks, not only the parser. The input is a sequence of records `[flags u8][len u16 BE]
//! [bytes]`; a record whose bytes decode as a RoCEv2 frame is fixed up as its flags say
//! (addressed to the responder, from the connected peer, to its QP, at the expected PSN, with
//! the advertised R_Key, with a valid ICRC) so that every check can pass or fail. The responder
//! must never panic, must answer every record, and must write nowhere but the region.
#![no_main]

use std::io;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use dta_rdma::{mem_pair, Endpoint, Link, MemLink, PSN_MASK};
use dta_rdma_requester::{connect, RequesterConfig};
use dta_rdma_responder::{Responder, ResponderConfig};
use dta_store::spec::AppendSpec;
use dta_store::{Region, StoreSpec};
use dta_roce::cm::{IdsRepr, MadRepr, Message, MAD_LEN};
use dta_roce::{reth, FrameRepr};
use libfuzzer_sys::fuzz_target;

const T: Endpoint = Endpoint {
    mac: [2, 0, 0, 0, 0, 1],
    ip: [10, 0, 0, 1],
};
const C: Endpoint = Endpoint {
    mac: [2, 0, 0, 0, 0, 2],
    ip: [10, 0, 0, 2],
};

/// A link that records what is sent and never answers: the requester's REQ, captured.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Vec<u8>>>>);

impl Link for Capture {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.0.lock().unwrap().push(frame.to_vec());
        Ok(())
    }
    fn recv(&mut self, _: &mut [u8], _: Duration) -> io::Result<Option<usize>> {
        Ok(None)
    }
}

struct Fixture {
    regions: Vec<Arc<Region>>,
    req: Vec<u8>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("dta-fuzz-rdma-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let spec = StoreSpec::Append(AppendSpec {
            lists: 2,
            capacity: 16,
            entry_len: 4,
            batch: 4,
            record: Default::default(),
        });
        let region = Region::create(&dir.join("ev.region"), "ev", &spec, true).unwrap();
        let cap = Capture::default();
        let mut cfg = RequesterConfig::new(T, C.ip);
        cfg.cm_retries = 0;
        cfg.cm_timeout = Duration::from_millis(1);
        assert!(connect(cap.clone(), cfg).is_err());
        let req = cap.0.lock().unwrap()[0].clone();
        Fixture {
            regions: vec![Arc::new(region)],
            req,
        }
    })
}

fn emit(f: &FrameRepr<'_>) -> Vec<u8> {
    let mut b = vec![0u8; f.buffer_len()];
    let n = f.emit(&mut b).unwrap();
    b.truncate(n);
    b
}

/// What the fuzzer may aim at: the connection the handshake set up.
struct Peer {
    qpn: u32,
    epsn: u32,
    va: u64,
    len: u64,
    rkey: u32,
}

fn handshake(r: &mut Responder<MemLink>, peer_end: &mut MemLink, fx: &Fixture) -> Option<Peer> {
    peer_end.send(&fx.req).unwrap();
    r.poll(Duration::ZERO).unwrap();
    let mut buf = vec![0u8; 9000];
    let mut rep = None;
    while let Some(n) = peer_end.recv(&mut buf, Duration::ZERO).unwrap() {
        let Ok(f) = FrameRepr::parse(&buf[..n]) else {
            continue;
        };
        let Ok(m) = MadRepr::parse(f.payload) else {
            continue;
        };
        if let Message::Rep(p) = m.message {
            rep = Some((
                p.local_qpn,
                p.starting_psn,
                p.local_comm_id,
                p.remote_comm_id,
            ));
        }
    }
    let (qpn, _psn, local, remote) = rep?;
    let req = FrameRepr::parse(&fx.req).unwrap();
    let mut mad = [0u8; MAD_LEN];
    MadRepr {
        transaction_id: MadRepr::parse(req.payload).unwrap().transaction_id,
        message: Message::Rtu(IdsRepr {
            local_comm_id: remote,
            remote_comm_id: local,
            private_data: &[],
        }),
    }
    .emit(&mut mad)
    .unwrap();
    peer_end
        .send(&emit(&FrameRepr {
            payload: &mad,
            ..req
        }))
        .unwrap();
    r.poll(Duration::ZERO).unwrap();
    let (va, len, rkey) = r.registration(0)?;
    // The REQ's starting PSN is the first PSN the responder expects from us.
    let epsn = match MadRepr::parse(req.payload).unwrap().message {
        Message::Req(q) => q.starting_psn,
        _ => return None,
    };
    Some(Peer {
        qpn,
        epsn,
        va,
        len,
        rkey,
    })
}

fuzz_target!(|data: &[u8]| {
    let fx = fixture();
    let (mut peer_end, link) = mem_pair();
    let mut r = Responder::new(link, ResponderConfig::new(C), fx.regions.clone());
    // Without a connection the fuzzed frames would never get past the QP check.
    let peer = Some(handshake(&mut r, &mut peer_end, fx).expect("the handshake connects"));
    let stats = r.stats().clone();
    let mut rest = data;
    let mut buf = vec![0u8; 9000];
    let mut npsn = peer.as_ref().map_or(0, |p| p.epsn);
    while rest.len() >= 3 {
        let flags = rest[0];
        let len = usize::from(u16::from_be_bytes([rest[1], rest[2]])).min(rest.len() - 3);
        let (rec, tail) = rest[3..].split_at(len);
        rest = tail;
        let frame = match (FrameRepr::decode(rec), &peer) {
            (Ok(d), Some(p)) if flags & 1 != 0 => {
                let mut f = d.frame;
                f.ip.dst = C.ip;
                f.eth.dst = C.mac;
                if flags & 2 != 0 {
                    f.ip.src = T.ip;
                }
                if flags & 4 != 0 {
                    f.bth.dest_qp = p.qpn;
                }
                if flags & 8 != 0 {
                    f.bth.psn = npsn;
                    npsn = (npsn + 1) & PSN_MASK;
                }
                if let (Some(x), true) = (f.reth.as_mut(), flags & 16 != 0) {
                    x.rkey = p.rkey;
                    if flags & 32 != 0 {
                        *x = reth::Repr {
                            va: p.va + x.va % p.len,
                            ..*x
                        };
                    }
                }
                if f.buffer_len() > buf.len() {
                    rec.to_vec()
                } else {
                    emit(&f)
                }
            }
            _ => rec.to_vec(),
        };
        let before = stats.get("frames").unwrap();
        peer_end.send(&frame).unwrap();
        r.poll(Duration::ZERO).unwrap();
        assert_eq!(
            stats.get("frames").unwrap(),
            before + 1,
            "every frame is handled"
        );
        while peer_end.recv(&mut buf, Duration::ZERO).unwrap().is_some() {}
    }
});
