//! Shared pieces: endpoints, 24-bit PSN arithmetic, frame templates, counters.

use std::sync::atomic::{AtomicU64, Ordering};

use dta_roce::{bth, ethernet, icrc, ipv4, udp, FrameRepr, Opcode, ICRC_LEN};

/// One side of a RoCEv2 connection on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Endpoint {
    pub mac: [u8; 6],
    pub ip: [u8; 4],
}

/// The broadcast MAC address (the first CM REQ goes there; the REP teaches the peer's MAC).
pub const BROADCAST: [u8; 6] = [0xff; 6];

/// The default RDMA CM port the software responder listens on (`rdma_cm` TCP port space).
pub const DEFAULT_CM_PORT: u16 = 7471;

/// Largest frame either side builds or accepts.
pub const MAX_FRAME: usize = 2048;

/// Mask of a 24-bit PSN.
pub const PSN_MASK: u32 = 0x00ff_ffff;

/// `p + n` modulo 2^24.
#[inline]
pub fn psn_add(p: u32, n: u32) -> u32 {
    p.wrapping_add(n) & PSN_MASK
}

/// Signed distance `a - b` in the 24-bit PSN space (IBA §9.7.2: a PSN is "ahead" when within
/// 2^23 after).
#[inline]
pub fn psn_diff(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

/// Headers of frames from `local` to `remote`.
#[derive(Debug, Clone, Copy)]
pub struct PathTemplate {
    pub local: Endpoint,
    pub remote: Endpoint,
    pub udp_src: u16,
}

impl PathTemplate {
    pub fn frame(&self, bth: bth::Repr) -> FrameRepr<'static> {
        FrameRepr::new(
            ethernet::Repr {
                dst: self.remote.mac,
                src: self.local.mac,
                ethertype: dta_net::ethernet::ETHERTYPE_IPV4,
            },
            ipv4::Repr {
                src: self.local.ip,
                dst: self.remote.ip,
                ..Default::default()
            },
            udp::Repr {
                src_port: self.udp_src,
                checksum: 0,
                dst_port: dta_roce::ROCE_PORT,
            },
            bth::Repr::new(bth.opcode, bth.dest_qp, bth.psn),
        )
        .with_bth(bth)
    }
}

trait WithBth {
    fn with_bth(self, bth: bth::Repr) -> Self;
}
impl WithBth for FrameRepr<'static> {
    fn with_bth(mut self, bth: bth::Repr) -> Self {
        self.bth = bth;
        self
    }
}

/// Set the AckReq bit of an emitted frame in place and recompute its ICRC (AckReq is covered
/// by the ICRC).
pub fn set_ack_req(frame: &mut [u8]) {
    let b = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;
    if frame.len() < b + bth::HEADER_LEN + ICRC_LEN || frame[b + 8] & 0x80 != 0 {
        return;
    }
    frame[b + 8] |= 0x80;
    let n = frame.len();
    let c = icrc(&frame[ethernet::HEADER_LEN..n - ICRC_LEN]);
    frame[n - ICRC_LEN..].copy_from_slice(&c.to_le_bytes());
}

/// The opcode of packet `i` of `n` of an RDMA WRITE (with immediate on the last when `imm`).
pub fn write_opcode(i: usize, n: usize, imm: bool) -> Opcode {
    match (n == 1, i == 0, i + 1 == n, imm) {
        (true, _, _, false) => Opcode::RcWriteOnly,
        (true, _, _, true) => Opcode::RcWriteOnlyImm,
        (false, true, _, _) => Opcode::RcWriteFirst,
        (false, false, true, false) => Opcode::RcWriteLast,
        (false, false, true, true) => Opcode::RcWriteLastImm,
        _ => Opcode::RcWriteMiddle,
    }
}

/// The opcode of packet `i` of `n` of a SEND.
pub fn send_opcode(i: usize, n: usize) -> Opcode {
    match (n == 1, i == 0, i + 1 == n) {
        (true, _, _) => Opcode::RcSendOnly,
        (false, true, _) => Opcode::RcSendFirst,
        (false, false, true) => Opcode::RcSendLast,
        _ => Opcode::RcSendMiddle,
    }
}

#[inline]
pub fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

#[inline]
pub fn addc(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// Declares a counters struct of `AtomicU64`s with a JSON snapshot.
#[macro_export]
macro_rules! counters {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $f:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Default)]
        pub struct $name {
            $($(#[$fm])* pub $f: std::sync::atomic::AtomicU64,)*
        }
        impl $name {
            /// Every counter by name.
            pub fn snapshot(&self) -> serde_json::Value {
                let mut m = serde_json::Map::new();
                $(m.insert(stringify!($f).into(), self.$f.load(std::sync::atomic::Ordering::Relaxed).into());)*
                serde_json::Value::Object(m)
            }
            /// One counter's value.
            pub fn get(&self, name: &str) -> Option<u64> {
                match name {
                    $(stringify!($f) => Some(self.$f.load(std::sync::atomic::Ordering::Relaxed)),)*
                    _ => None,
                }
            }
        }
    };
}

/// Connection identifiers that must not be guessable by anyone who can send a frame to the
/// collector (an R_Key is the only authorization of a WRITE, [IBTA §9.7.4.1.6]; a QPN and a
/// starting PSN are what a blind spoofer must hit) and must differ between runs, so that a
/// restarted translator is never taken for a retransmission of its previous incarnation. Every
/// value comes from the OS random source (`getrandom`), never from a seed.
pub fn random_u32() -> u32 {
    use rand::RngCore;
    rand::rngs::OsRng.next_u32()
}

/// A random starting PSN (24 bits).
pub fn random_psn() -> u32 {
    random_u32() & PSN_MASK
}

/// A random QP number: 24 bits, never QP0 or QP1 (the special QPs, [IBTA §9.6.1.5]).
pub fn random_qpn() -> u32 {
    loop {
        let q = random_u32() & PSN_MASK;
        if q > 1 {
            return q;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psn_wraps() {
        assert_eq!(psn_add(PSN_MASK, 1), 0);
        assert_eq!(psn_diff(0, PSN_MASK), 1);
        assert_eq!(psn_diff(PSN_MASK, 0), -1);
        assert_eq!(psn_diff(5, 3), 2);
        assert_eq!(psn_diff(0x80_0000, 0), -0x80_0000);
    }

    #[test]
    fn opcodes_of_multi_packet_messages() {
        assert_eq!(write_opcode(0, 1, true), Opcode::RcWriteOnlyImm);
        assert_eq!(write_opcode(0, 3, true), Opcode::RcWriteFirst);
        assert_eq!(write_opcode(1, 3, true), Opcode::RcWriteMiddle);
        assert_eq!(write_opcode(2, 3, true), Opcode::RcWriteLastImm);
        assert_eq!(write_opcode(2, 3, false), Opcode::RcWriteLast);
        assert_eq!(send_opcode(0, 2), Opcode::RcSendFirst);
        assert_eq!(send_opcode(1, 2), Opcode::RcSendLast);
    }

    #[test]
    fn random_identifiers_differ_and_avoid_special_qps() {
        let qpns: Vec<u32> = (0..64).map(|_| random_qpn()).collect();
        assert!(qpns.iter().all(|&q| q > 1 && q <= PSN_MASK));
        let distinct: std::collections::HashSet<_> = qpns.iter().collect();
        assert!(distinct.len() > 60, "OS random QPNs repeat: {qpns:?}");
        assert!((0..64).all(|_| random_psn() <= PSN_MASK));
    }
}
