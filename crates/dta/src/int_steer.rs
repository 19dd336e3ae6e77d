//! Flow steering for `dta int-sink` threads: one `SO_REUSEPORT` socket per sink thread and a
//! classic BPF program attached to the group (`SO_ATTACH_REUSEPORT_CBPF`) that picks the socket
//! by a hash of the reported packet's flow, so every report of a flow reaches the same thread
//! (its FlowCache entry, its flow record and its "latest" values stay whole) while the reports
//! of one sink switch, all from one source address and port, still spread over every thread.
//! The kernel's own `SO_REUSEPORT` hash is of the outer addresses and ports: it would put a
//! whole switch on one thread.
//!
//! The program runs in the kernel on the UDP payload ([TR v2.0 §3]): the group header (8 bytes,
//! version 2), the first individual report's header (4 bytes: RepType, InType, Report Length,
//! MD Length), for RepType 1 (INT) 8 bytes of main contents plus MD Length words of metadata,
//! then the inner packet, InType 3 (Ethernet, untagged, IPv4) or 4 (IPv4). The hash is
//! [`flow_shard`] of the inner IPv4 source, destination, protocol and source port (the INT-MD
//! sink's frames carry the original destination port in the INT shim, not in the UDP header, so
//! it is left out: the same function of a flow for stacked reports and for postcards). Anything
//! else (v0.5 / v1.0 reports, IPv6, VLAN tags, a truncated packet) goes to socket 0: whole
//! flows still, as such a flow's reports all take that way. A datagram with several
//! individual reports goes by its first.
//!
//! [`steer`] is the same decision in Rust, for tests and for a sender that wants to know.

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

use dta_int::layout::FLOW_KEY_LEN;

/// The multipliers of [`flow_shard`] (odd 32-bit constants of the murmur3 / golden-ratio
/// family; any odd constants spread the bits).
const K1: u32 = 0x9E37_79B1;
const K2: u32 = 0x85EB_CA77;
const K3: u32 = 0xC2B2_AE3D;

/// Most sockets (threads) the steering program spreads over: the sink's thread limit.
pub const MAX_SHARDS: usize = dta_int::sink::MAX_THREADS;

/// The sink thread of a flow among `n`: a hash of the IPv4 source and destination, the source
/// port and the protocol, exactly as the kernel's steering program computes it (32-bit
/// arithmetic; the words big-endian as loaded from the packet).
pub fn flow_shard(src: u32, dst: u32, sport: u16, proto: u8, n: usize) -> usize {
    let mut h = src.wrapping_mul(K1);
    h ^= dst;
    h = h.wrapping_mul(K2);
    h ^= (u32::from(sport) << 16) | u32::from(proto);
    h = h.wrapping_mul(K3);
    h ^= h >> 15;
    (h % n.clamp(1, MAX_SHARDS) as u32) as usize
}

/// [`flow_shard`] of a 13-byte flow key (`src ‖ dst ‖ sport ‖ dport ‖ proto`).
pub fn key_shard(key: &[u8; FLOW_KEY_LEN], n: usize) -> usize {
    let w = |i: usize| u32::from_be_bytes([key[i], key[i + 1], key[i + 2], key[i + 3]]);
    let sport = match key[12] {
        dta_net::IPPROTO_UDP | dta_net::IPPROTO_TCP => u16::from_be_bytes([key[8], key[9]]),
        _ => 0,
    };
    flow_shard(w(0), w(4), sport, key[12], n)
}

/// [`key_shard`] of a Postcarding key: the sink thread that owns a flow's postcards is the one
/// its reports are steered to (`dta_translator::Shards::with_postcard_owner`). A key that is
/// not a flow key goes to 0.
pub fn postcard_owner(key: &[u8], n: usize) -> usize {
    <&[u8; FLOW_KEY_LEN]>::try_from(key).map_or(0, |k| key_shard(k, n))
}

/// The socket the steering program picks for a UDP payload among `n`: what the kernel does.
pub fn steer(payload: &[u8], n: usize) -> usize {
    steer_ip(payload).map_or(0, |(src, dst, sport, proto)| {
        flow_shard(src, dst, sport, proto, n)
    })
}

/// The inner IPv4 source, destination, source port (0 unless UDP or TCP) and protocol, as the
/// program finds them; `None` where it returns socket 0.
fn steer_ip(p: &[u8]) -> Option<(u32, u32, u16, u8)> {
    let b = |i: usize| p.get(i).copied();
    let h = |i: usize| Some(u16::from_be_bytes([b(i)?, b(i + 1)?]));
    let w = |i: usize| Some(u32::from_be_bytes([b(i)?, b(i + 1)?, b(i + 2)?, b(i + 3)?]));
    if b(0)? >> 4 != 2 {
        return None;
    }
    let types = b(8)?;
    let mut ip = if types >> 4 == 1 {
        INNER + 8 + usize::from(b(10)?) * 4
    } else {
        INNER
    };
    match types & 0x0f {
        4 => {}
        3 => {
            if h(ip + 12)? != 0x0800 {
                return None;
            }
            ip += 14;
        }
        _ => return None,
    }
    let v = b(ip)?;
    if v >> 4 != 4 {
        return None;
    }
    let proto = b(ip + 9)?;
    let (src, dst) = (w(ip + 12)?, w(ip + 16)?);
    let sport = match proto {
        dta_net::IPPROTO_UDP | dta_net::IPPROTO_TCP => h(ip + usize::from(v & 0x0f) * 4)?,
        _ => 0,
    };
    Some((src, dst, sport, proto))
}

/// Offset of the inner contents of a RepType 0 report: group header and individual header.
const INNER: usize = 12;

// Classic BPF encoding (linux/filter.h, linux/bpf_common.h).
const LD: u16 = 0x00;
const LDX: u16 = 0x01;
const ST: u16 = 0x02;
const STX: u16 = 0x03;
const ALU: u16 = 0x04;
const JMP: u16 = 0x05;
const RET: u16 = 0x06;
const MISC: u16 = 0x07;
const W: u16 = 0x00;
const H: u16 = 0x08;
const B: u16 = 0x10;
const IMM: u16 = 0x00;
const ABS: u16 = 0x20;
const IND: u16 = 0x40;
const MEM: u16 = 0x60;
const ADD: u16 = 0x00;
const MUL: u16 = 0x20;
const AND: u16 = 0x50;
const LSH: u16 = 0x60;
const RSH: u16 = 0x70;
const MOD: u16 = 0x90;
const OR: u16 = 0x40;
const XOR: u16 = 0xa0;
const JA: u16 = 0x00;
const JEQ: u16 = 0x10;
const K: u16 = 0x00;
const X: u16 = 0x08;
const RET_A: u16 = 0x10;
const TAX: u16 = 0x00;
const TXA: u16 = 0x80;

/// Scratch words of the program.
const M_TYPES: u32 = 0;
const M_PROTO: u32 = 1;
const M_HASH: u32 = 2;
const M_IP: u32 = 3;
const M_PORTS: u32 = 4;

/// One instruction of [`program`] before its jumps are resolved.
enum Ins {
    Op(u16, u32),
    /// A conditional jump: to `jt` if the test holds, else to `jf` (`None`: the next one).
    Jump(u16, u32, Option<&'static str>, Option<&'static str>),
    /// An unconditional jump.
    Goto(&'static str),
    Label(&'static str),
}

use Ins::{Goto, Jump, Label, Op};

/// The steering program for a group of `n` sockets (see the module documentation; the same
/// decision as [`steer`]).
pub fn program(n: usize) -> Vec<libc::sock_filter> {
    let n = n.clamp(1, MAX_SHARDS) as u32;
    let ins = [
        // Version 2.
        Op(LD | B | ABS, 0),
        Op(ALU | RSH | K, 4),
        Jump(JMP | JEQ | K, 2, None, Some("fail")),
        // RepType | InType of the first individual report.
        Op(LD | B | ABS, 8),
        Op(ST, M_TYPES),
        Op(ALU | RSH | K, 4),
        Jump(JMP | JEQ | K, 1, None, Some("raw")),
        // INT: the inner contents after 8 bytes of main contents and MD Length words.
        Op(LD | B | ABS, 10),
        Op(ALU | LSH | K, 2),
        Op(ALU | ADD | K, INNER as u32 + 8),
        Op(MISC | TAX, 0),
        Goto("intype"),
        Label("raw"),
        Op(LDX | W | IMM, INNER as u32),
        // X = the inner contents.
        Label("intype"),
        Op(LD | MEM, M_TYPES),
        Op(ALU | AND | K, 0x0f),
        Jump(JMP | JEQ | K, 4, Some("ipv4"), None),
        Jump(JMP | JEQ | K, 3, None, Some("fail")),
        // Ethernet: IPv4 EtherType, then past the 14-byte header.
        Op(LD | H | IND, 12),
        Jump(JMP | JEQ | K, 0x0800, None, Some("fail")),
        Op(MISC | TXA, 0),
        Op(ALU | ADD | K, 14),
        Op(MISC | TAX, 0),
        // X = the IPv4 header.
        Label("ipv4"),
        Op(STX, M_IP),
        Op(LD | B | IND, 0),
        Op(ALU | RSH | K, 4),
        Jump(JMP | JEQ | K, 4, None, Some("fail")),
        Op(LD | B | IND, 9),
        Op(ST, M_PROTO),
        Jump(
            JMP | JEQ | K,
            u32::from(dta_net::IPPROTO_UDP),
            Some("ports"),
            None,
        ),
        Jump(
            JMP | JEQ | K,
            u32::from(dta_net::IPPROTO_TCP),
            Some("ports"),
            Some("noports"),
        ),
        // UDP / TCP: A = sport << 16 | proto, the port at 4 * IHL past the IPv4 header.
        Label("ports"),
        Op(LD | B | IND, 0),
        Op(ALU | AND | K, 0x0f),
        Op(ALU | LSH | K, 2),
        Op(ALU | ADD | X, 0),
        Op(MISC | TAX, 0),
        Op(LD | H | IND, 0),
        Op(ALU | LSH | K, 16),
        Op(LDX | MEM, M_PROTO),
        Op(ALU | OR | X, 0),
        Goto("mix"),
        Label("noports"),
        Op(LD | MEM, M_PROTO),
        // The hash of `flow_shard`.
        Label("mix"),
        Op(ST, M_PORTS),
        Op(LDX | MEM, M_IP),
        Op(LD | W | IND, 12),
        Op(ALU | MUL | K, K1),
        Op(ST, M_HASH),
        Op(LD | W | IND, 16),
        Op(LDX | MEM, M_HASH),
        Op(ALU | XOR | X, 0),
        Op(ALU | MUL | K, K2),
        Op(LDX | MEM, M_PORTS),
        Op(ALU | XOR | X, 0),
        Op(ALU | MUL | K, K3),
        Op(ST, M_HASH),
        Op(ALU | RSH | K, 15),
        Op(LDX | MEM, M_HASH),
        Op(ALU | XOR | X, 0),
        Op(ALU | MOD | K, n),
        Op(RET | RET_A, 0),
        Label("fail"),
        Op(RET | K, 0),
    ];
    assemble(&ins)
}

/// Resolve labels into relative forward jumps.
fn assemble(ins: &[Ins]) -> Vec<libc::sock_filter> {
    let mut at = std::collections::HashMap::new();
    let mut pc = 0usize;
    for i in ins {
        match i {
            Label(l) => {
                at.insert(*l, pc);
            }
            _ => pc += 1,
        }
    }
    let mut out = Vec::with_capacity(pc);
    for i in ins {
        let here = out.len();
        // Offsets count from the instruction after this one; every jump is forward.
        let rel = |l: &Option<&'static str>| -> u32 { l.map_or(0, |l| (at[l] - here - 1) as u32) };
        match i {
            Label(_) => {}
            Op(code, k) => out.push(libc::sock_filter {
                code: *code,
                jt: 0,
                jf: 0,
                k: *k,
            }),
            Jump(code, k, jt, jf) => out.push(libc::sock_filter {
                code: *code,
                jt: u8::try_from(rel(jt)).expect("short jump"),
                jf: u8::try_from(rel(jf)).expect("short jump"),
                k: *k,
            }),
            Goto(l) => out.push(libc::sock_filter {
                code: JMP | JA,
                jt: 0,
                jf: 0,
                k: rel(&Some(l)),
            }),
        }
    }
    out
}

/// Attach the steering program for `sockets.len()` sockets to their `SO_REUSEPORT` group
/// (bound in order: the kernel numbers a group's sockets in the order they joined it). One
/// socket needs none.
pub fn attach(sockets: &[UdpSocket]) -> io::Result<()> {
    if sockets.len() < 2 {
        return Ok(());
    }
    let mut prog = program(sockets.len());
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: setsockopt with a valid fd and a sock_fprog pointing at `prog`, alive for the
    // call (the kernel copies the program).
    let r = unsafe {
        libc::setsockopt(
            sockets[0].as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dta_int::gen::{generate, md_frame, postcard_report, stacked_report, GenConfig};
    use std::collections::HashMap;
    use std::time::Duration;

    /// Reports of every kind the generator makes, with their flow keys.
    fn reports(flows: usize) -> Vec<([u8; FLOW_KEY_LEN], Vec<u8>)> {
        let cfg = GenConfig {
            flows,
            max_flow_packets: 3,
            ..GenConfig::default()
        };
        let mut v = vec![];
        for (i, p) in generate(&cfg).iter().enumerate() {
            let frame = md_frame(p, cfg.int_udp_port);
            v.push((p.flow, stacked_report(p.hops[0].node_id, i as u32, &frame)));
            v.push((
                p.flow,
                postcard_report(p, i % p.hops.len(), i as u32, 64, None),
            ));
        }
        v
    }

    #[test]
    fn steer_is_flow_shard_of_the_inner_flow_for_stacked_reports_and_postcards() {
        let mut per_shard = [0usize; 4];
        for (key, r) in reports(300) {
            let s = steer(&r, 4);
            assert_eq!(s, key_shard(&key, 4));
            per_shard[s] += 1;
        }
        // Spread: every shard takes a fair part.
        assert!(per_shard.iter().all(|&c| c > 100), "{per_shard:?}");
        // What is not a v2.0 report over IPv4 goes to 0.
        assert_eq!(steer(&[0x10; 64], 4), 0);
        assert_eq!(steer(&[0x20; 5], 4), 0);
        assert_eq!(steer(&[], 4), 0);
    }

    #[test]
    fn the_kernel_steers_each_flow_to_its_socket() {
        // Three sockets of one SO_REUSEPORT group; the program decides, not the outer 4-tuple
        // (one sender here: without it everything would reach one socket).
        let group =
            dta_translator::ingest::bind_group("127.0.0.1:0".parse().unwrap(), 3, 4 << 20).unwrap();
        attach(&group).unwrap();
        let to = group[0].local_addr().unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sent = reports(200);
        for (_, r) in &sent {
            tx.send_to(r, to).unwrap();
        }
        let shard_of: HashMap<Vec<u8>, usize> =
            sent.iter().map(|(_, r)| (r.clone(), steer(r, 3))).collect();
        let mut got = 0;
        let mut per_socket = [0usize; 3];
        let mut buf = [0u8; 2048];
        for (i, s) in group.iter().enumerate() {
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            while let Ok(n) = s.recv(&mut buf) {
                assert_eq!(shard_of[&buf[..n].to_vec()], i, "datagram on socket {i}");
                per_socket[i] += 1;
                got += 1;
            }
        }
        assert_eq!(got, sent.len());
        assert!(per_socket.iter().all(|&c| c > 0), "{per_socket:?}");
    }

    #[test]
    fn every_program_size_assembles_forward_jumps() {
        for n in [1, 2, 3, 7, 64, MAX_SHARDS, 10_000] {
            let p = program(n);
            assert!(p.len() < 100);
            assert_eq!(p.last().unwrap().code, RET | K);
            assert!(p
                .iter()
                .any(|i| i.code == ALU | MOD | K && i.k as usize == n.min(MAX_SHARDS)));
        }
    }
}
