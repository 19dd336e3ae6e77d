//! Emit → parse round trips of the `Repr`s and the frame builder over arbitrary field values,
//! and parsing arbitrary bytes never panics.

use dta_net::{ethernet, ipv4, udp, udp_frame, Error};
use proptest::prelude::*;

fn ip_repr() -> impl Strategy<Value = ipv4::Repr> {
    (
        any::<[u8; 4]>(),
        any::<[u8; 4]>(),
        any::<u8>(),
        any::<u16>(),
        any::<bool>(),
        any::<u8>(),
        any::<u8>(),
    )
        .prop_map(
            |(src, dst, dscp_ecn, ident, dont_fragment, ttl, protocol)| ipv4::Repr {
                src,
                dst,
                dscp_ecn,
                ident,
                dont_fragment,
                ttl,
                protocol,
            },
        )
}

proptest! {
    #[test]
    fn frame_round_trip(
        dst in any::<[u8; 6]>(),
        src in any::<[u8; 6]>(),
        ip in ip_repr(),
        ports in any::<(u16, u16)>(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let eth = ethernet::Repr { dst, src, ethertype: ethernet::ETHERTYPE_IPV4 };
        let u = udp::Repr { src_port: ports.0, dst_port: ports.1, checksum: 0 };
        let f = udp_frame(&eth, &ip, &u, &payload).unwrap();
        prop_assert_eq!(ethernet::Repr::parse(&f).unwrap(), eth);
        let l3 = &f[ethernet::HEADER_LEN..];
        let (ip2, total) = ipv4::Repr::parse(l3).unwrap();
        prop_assert_eq!(ip2, ipv4::Repr { protocol: dta_net::IPPROTO_UDP, ..ip });
        prop_assert_eq!(usize::from(total), l3.len());
        let l4 = ipv4::Packet::new_checked(l3).unwrap().into_payload();
        let (u2, len) = udp::Repr::parse(l4).unwrap();
        prop_assert_eq!(u2, u);
        prop_assert_eq!(usize::from(len), l4.len());
        prop_assert_eq!(udp::Packet::new_checked(l4).unwrap().into_payload(), &payload[..]);
        // Every cut inside the headers is reported as truncated, never a panic.
        for cut in 0..dta_net::UDP_FRAME_OVERHEAD {
            let t = &f[..cut];
            let r = ethernet::Repr::parse(t).and_then(|_| {
                ipv4::Repr::parse(&t[ethernet::HEADER_LEN..])?;
                udp::Repr::parse(&t[ethernet::HEADER_LEN + ipv4::HEADER_LEN..]).map(|_| ())
            });
            prop_assert_eq!(r, Err(Error::Truncated));
        }
    }

    #[test]
    fn udp_checksum_filled_verifies(
        ip in ip_repr(),
        ports in any::<(u16, u16)>(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        flip in any::<prop::sample::Index>(),
    ) {
        let mut d = vec![0u8; udp::HEADER_LEN + payload.len()];
        udp::Repr { src_port: ports.0, dst_port: ports.1, checksum: 0 }
            .emit(&mut d, payload.len())
            .unwrap();
        d[udp::HEADER_LEN..].copy_from_slice(&payload);
        udp::Packet::new_unchecked(&mut d[..]).fill_checksum_v4(ip.src, ip.dst).unwrap();
        prop_assert!(udp::Packet::new_unchecked(&d[..]).verify_checksum_v4(ip.src, ip.dst).unwrap());
        // One flipped bit anywhere is caught (the checksum field itself included).
        let i = flip.index(d.len());
        d[i] ^= 0x01;
        let still = udp::Packet::new_unchecked(&d[..]).verify_checksum_v4(ip.src, ip.dst);
        prop_assert!(still != Ok(true) || udp::Packet::new_unchecked(&d[..]).checksum() == 0);
    }

    #[test]
    fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
        let _ = ethernet::Repr::parse(&b);
        if let Ok(p) = ethernet::Packet::new_checked(&b[..]) {
            let _ = p.untagged_payload();
        }
        let _ = ipv4::Repr::parse(&b);
        if let Ok(p) = ipv4::Packet::new_checked(&b[..]) {
            let _ = (p.verify_checksum(), p.into_payload());
        }
        if let Ok(p) = dta_net::ipv6::Packet::new_checked(&b[..]) {
            let _ = p.into_payload();
        }
        if let Ok(p) = dta_net::tcp::Packet::new_checked(&b[..]) {
            let _ = p.into_payload();
        }
        if let Ok(p) = udp::Packet::new_checked(&b[..]) {
            let _ = p.verify_checksum_v4([0; 4], [0; 4]);
            let _ = p.verify_checksum_v6([0; 16], [0; 16]);
        }
    }
}
