//! A UDP receiver on 127.0.0.1 that collects every datagram in a thread.
#![allow(dead_code)]

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use dta_reporter::{Protocol, ReporterConfig};

pub struct Sink {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<Vec<u8>>>,
}

impl Sink {
    pub fn start() -> Sink {
        // A buffer that holds a test's whole burst while this thread is descheduled.
        let socket = dta_testkit::udp_receiver("127.0.0.1:0");
        socket
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut got = vec![];
            let mut buf = [0u8; 65536];
            loop {
                match socket.recv(&mut buf) {
                    Ok(n) => got.push(buf[..n].to_vec()),
                    Err(_) if s.load(Ordering::Relaxed) => return got,
                    Err(_) => {}
                }
            }
        });
        Sink { addr, stop, handle }
    }

    /// Stop once no datagram has arrived for a read timeout; returns all datagrams in order.
    pub fn finish(self) -> Vec<Vec<u8>> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

/// A config sending to `to` with an ephemeral NACK port.
pub fn config(to: SocketAddr, protocol: Protocol) -> ReporterConfig {
    let mut c = ReporterConfig::new(to, protocol);
    c.nack_port = Some(0);
    c
}

/// Receive one datagram on `socket` (blocking up to 2 s).
pub fn recv(socket: &UdpSocket) -> Option<Vec<u8>> {
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut buf = [0u8; 65536];
    socket.recv(&mut buf).ok().map(|n| buf[..n].to_vec())
}
