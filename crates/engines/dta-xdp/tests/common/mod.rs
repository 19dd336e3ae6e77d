//! Shared by the XDP namespace tests: the namespaces, datagram builders, sending and waiting.
#![allow(dead_code)]

use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

use dta_store::Region;
use dta_testkit::netns::{run_in, VethPair};

/// Two namespaces joined by a veth pair: `a` (10.N.0.1, the translator) and `b` (10.N.0.2).
/// Native XDP on veth sees frames only when the peer has an XDP program or GRO on, so GRO is
/// turned on at `b`'s end.
pub fn net(tag: &str, n: u8) -> VethPair {
    let net = VethPair::new(tag, n);
    let _ = Command::new("ip")
        .args([
            "netns", "exec", &net.b, "ethtool", "-K", &net.dev_b, "gro", "on",
        ])
        .status();
    net
}

pub fn proto_kw(key: u32, red: u8, data: [u8; 4]) -> Vec<u8> {
    let mut v = vec![0x01, 0x00, red];
    v.extend(key.to_be_bytes());
    v.extend(data);
    v
}
pub fn proto_ki(key: u32, red: u8, add: u64) -> Vec<u8> {
    let mut v = vec![0x03, 0x00, red];
    v.extend(key.to_be_bytes());
    v.extend(add.to_be_bytes());
    v
}
pub fn proto_ap(list: u32, data: [u8; 4]) -> Vec<u8> {
    let mut v = vec![0x02, 0x00];
    v.extend(list.to_be_bytes());
    v.extend(data);
    v
}
/// A native datagram of `reports` (each: opcode, flags, key, data), not retransmittable.
pub fn native(reports: &[(u8, u8, Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut v = vec![0x10, 0x40, reports.len() as u8, 0, 0, 0, 0, 7, 0, 0, 0, 1];
    for (op, f, key, data) in reports {
        let (kl, dl) = if *op == 2 {
            (0, data.len() - 4)
        } else {
            (key.len(), data.len())
        };
        v.extend([*op, *f, kl as u8, dl as u8]);
        v.extend(key);
        v.extend(data);
    }
    v
}
pub fn send_all(ns: &str, to: SocketAddr, dgrams: Vec<Vec<u8>>) {
    run_in(ns, move || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        for d in &dgrams {
            s.send_to(d, to).unwrap();
            // Stay well under the veth queue: the test checks exact contents, not speed.
            std::thread::sleep(Duration::from_micros(200));
        }
    });
}

pub fn wait_for(mut ok: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < dta_testkit::WAIT {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

pub fn data_of(r: &Region) -> Vec<u8> {
    let mut v = vec![0u8; r.mem().len() as usize];
    r.mem().read(0, &mut v).unwrap();
    v
}

/// The program's settings with every source allowed (the tests send from the peer namespace;
/// the allow-list itself is tested by the conformance suite, crates/front/dta/tests/conformance.rs).
pub fn any_source() -> dta_xdp::XdpConfig {
    dta_xdp::XdpConfig {
        allow: dta_wire::prefix::AllowList::any(),
        ..Default::default()
    }
}
