//! A packet lost when no more reports follow is still retransmitted: the translator's idle
//! timer (`Translator::tick` → `Sinks::poll`) drives the requester's retransmission timeout.

mod common;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use dta_collector::query;
use dta_rdma::{mem_pair, Link};
use dta_rdma_requester::{connect, RequesterConfig};
use dta_rdma_responder::ResponderConfig;
use dta_translator::Translator;
use dta_wire::Report;

/// Drops the next `n` frames it is asked to send.
struct DropNext<L> {
    inner: L,
    drop: Arc<AtomicUsize>,
}

impl<L: Link> Link for DropNext<L> {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        let left = self.drop.load(Ordering::Relaxed);
        if left > 0 {
            self.drop.store(left - 1, Ordering::Relaxed);
            return Ok(());
        }
        self.inner.send(frame)
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        self.inner.recv(buf, timeout)
    }
}

#[test]
fn a_lost_last_write_is_retransmitted_by_the_idle_timer() {
    let (t_ep, c_ep) = (T, C);
    let (tcfg, stores) = embedded();
    let dir = tempfile::tempdir().unwrap();
    let remote = collector(dir.path(), &stores);
    let (a, b) = mem_pair();
    let _srv = serve(b, ResponderConfig::new(c_ep), &remote);
    let drop = Arc::new(AtomicUsize::new(0));
    let link = DropNext {
        inner: a,
        drop: drop.clone(),
    };
    let mut rcfg = RequesterConfig::new(t_ep, c_ep.ip);
    rcfg.rto = Duration::from_millis(20);
    let conn = connect(Box::new(link) as Box<dyn Link>, rcfg).unwrap();
    let infos = conn.store_infos();
    let mut t = Translator::new(&tcfg, &infos, conn.sinks, new_stats()).unwrap();

    // Both copies (N = 2) of the only report are lost, and nothing follows them.
    drop.store(2, Ordering::Relaxed);
    let src: SocketAddr = "127.9.0.1:5000".parse().unwrap();
    let key = 77u32.to_be_bytes();
    t.apply(
        &Report::KeyWrite {
            key: &key,
            data: &[1, 2, 3, 4],
            redundancy: 2,
            immediate: false,
        },
        1,
        src,
        Instant::now(),
    );
    assert_eq!(
        drop.load(Ordering::Relaxed),
        0,
        "both writes were sent and dropped"
    );
    assert!(t.sinks().in_flight() > 0);

    // Only the idle timer runs from here on.
    let deadline = Instant::now() + dta_testkit::WAIT;
    while t.sinks().in_flight() > 0 && Instant::now() < deadline {
        t.tick(Instant::now());
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(t.sinks().in_flight(), 0, "retransmitted and acknowledged");
    let kw = &remote.store("kw").unwrap().region;
    let r = query::key_write(kw, &key, Some(2), 2).unwrap();
    assert_eq!(r.status, "found", "{r:?}");
    assert_eq!(r.data.as_deref(), Some("01020304"));
    assert!(
        t.sinks().stats().snapshot()["retransmitted_packets"]
            .as_u64()
            .unwrap()
            >= 2
    );
}
