//! Property tests of the RoCEv2 wire layer: arbitrary bytes never panic the parsers (whole
//! frames, mutated valid frames, CM MADs), and every emitted frame parses back to itself.

use dta_roce::aeth::{NakCode, Syndrome};
use dta_roce::cm::{CmaHeader, MadRepr};
use dta_roce::{
    aeth, atomic_ack_eth, atomic_eth, bth, deth, ethernet, ipv4, reth, to_json, udp, FrameRepr,
    Opcode,
};
use proptest::prelude::*;

const ROCE: &str = include_str!("../../../../spec/vectors/roce.json");

fn valid_frames() -> Vec<Vec<u8>> {
    let d: serde_json::Value = serde_json::from_str(ROCE).unwrap();
    d["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| hex::decode(v["hex"].as_str().unwrap()).unwrap())
        .collect()
}

fn syndrome() -> impl Strategy<Value = Syndrome> {
    prop_oneof![
        (0u8..32).prop_map(|credits| Syndrome::Ack { credits }),
        (0u8..32).prop_map(|timer| Syndrome::RnrNak { timer }),
        prop::sample::select(NakCode::ALL.to_vec()).prop_map(Syndrome::Nak),
    ]
}

#[derive(Debug, Clone)]
struct Fields {
    opcode: Opcode,
    macs: ([u8; 6], [u8; 6]),
    ips: ([u8; 4], [u8; 4]),
    ip_misc: (u8, u16, bool, u8),
    udp: (u16, u16),
    flags: (bool, bool, bool, bool, bool),
    pkey: u16,
    qp: u32,
    psn: u32,
    a: (u64, u32, u64, u64),
    syndrome: Syndrome,
    msn: u32,
    imm: u32,
    payload: Vec<u8>,
}

fn fields() -> impl Strategy<Value = Fields> {
    (
        (
            prop::sample::select(Opcode::ALL.to_vec()),
            any::<([u8; 6], [u8; 6])>(),
            any::<([u8; 4], [u8; 4])>(),
            any::<(u8, u16, bool, u8)>(),
            any::<(u16, u16)>(),
            any::<(bool, bool, bool, bool, bool)>(),
            any::<u16>(),
        ),
        (
            0u32..=0xff_ffff,
            0u32..=0xff_ffff,
            any::<(u64, u32, u64, u64)>(),
            syndrome(),
            0u32..=0xff_ffff,
            any::<u32>(),
            prop::collection::vec(any::<u8>(), 0..80),
        ),
    )
        .prop_map(
            |(
                (opcode, macs, ips, ip_misc, udp, flags, pkey),
                (qp, psn, a, syndrome, msn, imm, payload),
            )| Fields {
                opcode,
                macs,
                ips,
                ip_misc,
                udp,
                flags,
                pkey,
                qp,
                psn,
                a,
                syndrome,
                msn,
                imm,
                payload,
            },
        )
}

fn frame(f: &Fields) -> FrameRepr<'_> {
    let l = f.opcode.layout();
    let (va, rkey, x, y) = f.a;
    FrameRepr {
        eth: ethernet::Repr {
            dst: f.macs.0,
            src: f.macs.1,
            ethertype: dta_net::ethernet::ETHERTYPE_IPV4,
        },
        ip: ipv4::Repr {
            src: f.ips.0,
            dst: f.ips.1,
            dscp_ecn: f.ip_misc.0,
            ident: f.ip_misc.1,
            dont_fragment: f.ip_misc.2,
            ttl: f.ip_misc.3,
            protocol: dta_net::IPPROTO_UDP,
        },
        udp: udp::Repr {
            src_port: f.udp.0,
            checksum: f.udp.1,
            dst_port: dta_roce::ROCE_PORT,
        },
        bth: bth::Repr {
            opcode: f.opcode,
            solicited: f.flags.0,
            migreq: f.flags.1,
            pad_cnt: 0,
            pkey: f.pkey,
            fecn: f.flags.2,
            becn: f.flags.3,
            dest_qp: f.qp,
            ack_req: f.flags.4,
            psn: f.psn,
        },
        deth: l.deth.then_some(deth::Repr {
            qkey: rkey,
            src_qp: f.msn,
        }),
        reth: l.reth.then_some(reth::Repr {
            va,
            rkey,
            dma_len: x as u32,
        }),
        atomic_eth: l.atomic_eth.then_some(atomic_eth::Repr {
            va,
            rkey,
            swap_add: x,
            compare: y,
        }),
        aeth: l.aeth.then_some(aeth::Repr {
            syndrome: f.syndrome,
            msn: f.msn,
        }),
        atomic_ack_eth: l
            .atomic_ack_eth
            .then_some(atomic_ack_eth::Repr { original: y }),
        immdt: l.immdt.then_some(f.imm),
        payload: if l.payload { &f.payload } else { &[] },
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(d) = FrameRepr::decode(&b) {
            let _ = to_json(&d);
        }
        let _ = FrameRepr::parse(&b);
        let _ = MadRepr::parse(&b);
        let _ = CmaHeader::parse(&b);
        let _ = dta_roce::icrc(&b);
    }

    #[test]
    fn mutated_valid_frames_never_panic(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let frames = valid_frames();
        let mut b = frames[which.index(frames.len())].clone();
        for (i, v) in edits {
            let at = i.index(b.len());
            b[at] = v;
        }
        if let Ok(d) = FrameRepr::decode(&b) {
            let _ = to_json(&d);
            // Whatever decodes re-emits to a frame that parses back to the same fields.
            let mut out = vec![0u8; d.frame.buffer_len()];
            let n = d.frame.emit(&mut out).unwrap();
            let again = FrameRepr::parse(&out[..n]).unwrap();
            prop_assert_eq!(again, d.frame);
        }
        let n = cut.index(b.len() + 1);
        let _ = FrameRepr::decode(&b[..n]);
    }

    #[test]
    fn emit_parse_round_trip(f in fields()) {
        let fr = frame(&f);
        let mut buf = vec![0u8; fr.buffer_len()];
        let n = fr.emit(&mut buf).unwrap();
        prop_assert_eq!(n, buf.len());
        prop_assert_eq!(n % 4, (14 + 20 + 8) % 4);
        let mut expect = fr;
        expect.bth.pad_cnt = fr.pad_len() as u8;
        prop_assert_eq!(FrameRepr::parse(&buf), Ok(expect));
        // One flipped bit anywhere after the Ethernet header is caught (IP checksum, ICRC, or a
        // field check), except in the UDP checksum and BTH byte 4: the ICRC masks them and
        // nothing else checks them (the flipped bit of byte 4 is reserved).
        for i in 14..n {
            if [40usize, 41, 46].contains(&i) {
                continue;
            }
            let mut m = buf.clone();
            m[i] ^= 0x01;
            prop_assert!(FrameRepr::parse(&m).is_err(), "flip at {} accepted", i);
        }
    }
}
