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
//! it is left out: the same function of a flow for stacked reports and for postcards), the one
//! sharding function of the INT sink ([`crate::shard`]: its sinks and their translators
//! own flows by it). Anything
//! else (v0.5 / v1.0 reports, IPv6, VLAN tags, a truncated packet) goes to socket 0: whole
//! flows still, as such a flow's reports all take that way. A datagram with several
//! individual reports goes by its first.
//!
//! [`steer`] is the same decision in Rust, for tests and for a sender that wants to know.

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

use crate::shard::{flow_shard, K1, K2, K3};

/// Most sockets (threads) the steering program spreads over: the sink's thread limit.
pub const MAX_SHARDS: usize = crate::shard::MAX_THREADS;

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

use dta_net::cbpf::*;

/// Scratch words of the program.
const M_TYPES: u32 = 0;
const M_PROTO: u32 = 1;
const M_HASH: u32 = 2;
const M_IP: u32 = 3;
const M_PORTS: u32 = 4;

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

/// Attach the steering program for `sockets.len()` sockets to their `SO_REUSEPORT` group
/// (bound in order: the kernel numbers a group's sockets in the order they joined it). One
/// socket needs none.
pub fn attach(sockets: &[UdpSocket]) -> io::Result<()> {
    if sockets.len() < 2 {
        return Ok(());
    }
    attach_reuseport(sockets[0].as_raw_fd(), &mut program(sockets.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{generate, md_frame, postcard_report, stacked_report, GenConfig};
    use crate::layout::FLOW_KEY_LEN;
    use crate::shard::shard_of;
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
            assert_eq!(s, shard_of(&key, 4));
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

    /// Run a classic BPF program over `pkt` as the kernel does (a load past the end returns 0).
    fn run_cbpf(prog: &[libc::sock_filter], pkt: &[u8]) -> u32 {
        let (mut a, mut x, mut mem, mut pc) = (0u32, 0u32, [0u32; 16], 0usize);
        let load = |off: u32, size: usize| -> Option<u32> {
            let off = off as usize;
            let b = pkt.get(off..off.checked_add(size)?)?;
            Some(b.iter().fold(0u32, |v, &c| (v << 8) | u32::from(c)))
        };
        loop {
            let i = prog[pc];
            pc += 1;
            let src = |k: u32| if i.code & X != 0 { x } else { k };
            match i.code & 0x07 {
                LD | LDX => {
                    let size = match i.code & 0x18 {
                        W => 4,
                        H => 2,
                        _ => 1,
                    };
                    let v = match i.code & 0xe0 {
                        IMM => i.k,
                        MEM => mem[i.k as usize],
                        ABS => match load(i.k, size) {
                            Some(v) => v,
                            None => return 0,
                        },
                        IND => match load(x.wrapping_add(i.k), size) {
                            Some(v) => v,
                            None => return 0,
                        },
                        m => panic!("load mode {m:#x}"),
                    };
                    if i.code & 0x07 == LD {
                        a = v
                    } else {
                        x = v
                    }
                }
                ST => mem[i.k as usize] = a,
                STX => mem[i.k as usize] = x,
                ALU => {
                    let v = src(i.k);
                    a = match i.code & 0xf0 {
                        ADD => a.wrapping_add(v),
                        MUL => a.wrapping_mul(v),
                        AND => a & v,
                        OR => a | v,
                        XOR => a ^ v,
                        LSH => a << v,
                        RSH => a >> v,
                        MOD => a % v,
                        op => panic!("alu op {op:#x}"),
                    }
                }
                JMP => match i.code & 0xf0 {
                    JA => pc += i.k as usize,
                    JEQ => pc += usize::from(if a == src(i.k) { i.jt } else { i.jf }),
                    op => panic!("jump op {op:#x}"),
                },
                RET => return if i.code & RET_A != 0 { a } else { i.k },
                MISC => {
                    if i.code & TXA != 0 {
                        a = x
                    } else {
                        x = a
                    }
                }
                c => panic!("class {c:#x}"),
            }
        }
    }

    /// A v2.0 report of one individual report about an IPv4 packet of flow `key`: RepType 1 (with
    /// `md_words` of metadata) or 0, InType 3 (Ethernet) or 4, an IPv4 header of `ihl` words.
    fn raw_report(
        key: &[u8; FLOW_KEY_LEN],
        int: Option<u8>,
        ethernet: bool,
        ihl: u8,
        truncate: usize,
    ) -> Vec<u8> {
        let mut p = vec![0x20, 0, 0, 0, 0, 0, 0, 1];
        let in_type = if ethernet { 3 } else { 4 };
        // RepType | InType, Report Length, MD Length, flags.
        p.extend([
            (u8::from(int.is_some()) << 4) | in_type,
            0,
            int.unwrap_or(0),
            0,
        ]);
        if let Some(words) = int {
            p.extend([0u8; 8]);
            p.extend(std::iter::repeat_n(0xee, usize::from(words) * 4));
        }
        if ethernet {
            p.extend([0u8; 12]);
            p.extend([0x08, 0x00]);
        }
        let mut ip = vec![0u8; usize::from(ihl) * 4];
        ip[0] = 0x40 | ihl;
        ip[8] = 60;
        ip[9] = key[12];
        ip[12..20].copy_from_slice(&key[..8]);
        p.extend(ip);
        p.extend(&key[8..12]);
        p.extend([0u8; 4]);
        p.truncate(p.len().saturating_sub(truncate));
        p
    }

    #[test]
    fn the_steering_program_computes_shard_of_for_many_keys() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let progs: Vec<(usize, Vec<libc::sock_filter>)> =
            [2, 3, 4, 7, 16, MAX_SHARDS].map(|n| (n, program(n))).into();
        let mut per_shard = [0usize; 4];
        for i in 0..20_000 {
            let r = next();
            let mut key = [0u8; FLOW_KEY_LEN];
            key[..8].copy_from_slice(&next().to_be_bytes());
            key[8..12].copy_from_slice(&(r as u32).to_be_bytes());
            key[12] = [dta_net::IPPROTO_UDP, dta_net::IPPROTO_TCP, 1, 47][(r >> 32) as usize % 4];
            let int = ((r >> 34) & 1 == 1).then_some((r >> 35) as u8 % 40);
            let ethernet = (r >> 41) & 1 == 1;
            let ihl = 5 + (r >> 42) as u8 % 11;
            // Some reports end early: the program returns 0 where the Rust side finds no flow.
            let truncate = if i % 16 == 0 {
                (r >> 48) as usize % 24
            } else {
                0
            };
            let p = raw_report(&key, int, ethernet, ihl, truncate);
            for (n, prog) in &progs {
                let kernel = run_cbpf(prog, &p) as usize;
                assert_eq!(kernel, steer(&p, *n), "report {i} of {n} sockets: {p:02x?}");
                if truncate == 0 {
                    assert_eq!(kernel, shard_of(&key, *n), "report {i} of {n} sockets");
                }
            }
            if truncate == 0 {
                per_shard[steer(&p, 4)] += 1;
            }
        }
        assert!(per_shard.iter().all(|&c| c > 4000), "{per_shard:?}");
        // What is not a v2.0 report over IPv4 goes to 0 in both.
        for p in [&[0x10u8; 64][..], &[0x20; 5], &[]] {
            assert_eq!(run_cbpf(&progs[2].1, p), 0);
            assert_eq!(steer(p, 4), 0);
        }
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
