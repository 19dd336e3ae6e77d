//! A whole RoCEv2 frame: Ethernet, IPv4, UDP to port 4791, BTH, the opcode's extension headers,
//! the payload padded to a multiple of 4 bytes, and the 4-byte invariant CRC ([RoCEv2]
//! Annex A17; [IBTA §7.8.1] "Invariant CRC").

use super::{
    aeth, atomic_ack_eth, atomic_eth, bth, deth, ethernet, immdt, ipv4, reth, udp, Error, ROCE_PORT,
};

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// IPv4 + UDP + BTH: the part of the frame the ICRC masks.
const MASKED_LEN: usize = ipv4::HEADER_LEN + udp::HEADER_LEN + bth::HEADER_LEN;
/// Offsets, from the IP header, of the bytes the ICRC replaces with 0xff: IPv4 ToS (DSCP+ECN),
/// TTL and header checksum; UDP checksum; BTH byte 4 (FECN, BECN, resv6 = rxe's resv8a).
const MASKED: [usize; 7] = [1, 8, 10, 11, 26, 27, 32];

/// The invariant CRC of a RoCEv2 packet over IPv4 (IBA Annex A17.4.3; Linux
/// `drivers/infiniband/sw/rxe/rxe_icrc.c`, `rxe_icrc_hdr`): the CRC-32 (zlib/Ethernet
/// polynomial, `crc32fast`) of 8 bytes of 0xff (the masked LRH of InfiniBand) followed by
/// `frame_from_ip_header` (the IPv4 header through the last pad byte, without the ICRC) in
/// which the IPv4 ToS, TTL and header checksum, the UDP checksum and BTH byte 4 are replaced by
/// ones. The ICRC is sent little-endian: the wire bytes are `icrc(..).to_le_bytes()`.
///
/// A buffer shorter than the headers is hashed as it is (masking what is there); it never
/// panics.
pub fn icrc(frame_from_ip_header: &[u8]) -> u32 {
    let b = frame_from_ip_header;
    let n = b.len().min(MASKED_LEN);
    let mut head = [0u8; MASKED_LEN];
    head[..n].copy_from_slice(&b[..n]);
    for i in MASKED {
        if i < n {
            head[i] = 0xff;
        }
    }
    let mut h = crc32fast::Hasher::new();
    h.update(&[0xff; 8]);
    h.update(&head[..n]);
    h.update(&b[n..]);
    h.finalize()
}

/// A parsed or to-be-emitted RoCEv2 frame. Exactly the extension headers of
/// `bth.opcode.layout()` are `Some`. The payload excludes the padding; lengths, the pad count,
/// the IP checksum and the ICRC are computed by [`FrameRepr::emit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRepr<'a> {
    /// Ethernet header.
    pub eth: ethernet::Repr,
    /// IPv4 header.
    pub ip: ipv4::Repr,
    /// UDP header (destination [`ROCE_PORT`]).
    pub udp: udp::Repr,
    /// Base transport header. `pad_cnt` is as carried when parsed and ignored (recomputed from
    /// the payload length) when emitting.
    pub bth: bth::Repr,
    /// DETH (UD opcodes).
    pub deth: Option<deth::Repr>,
    /// RETH (WRITE First/Only, READ request).
    pub reth: Option<reth::Repr>,
    /// AtomicETH (CmpSwap, FetchAdd).
    pub atomic_eth: Option<atomic_eth::Repr>,
    /// AETH (acknowledgements, READ responses).
    pub aeth: Option<aeth::Repr>,
    /// AtomicAckETH (atomic acknowledge).
    pub atomic_ack_eth: Option<atomic_ack_eth::Repr>,
    /// Immediate data (the "with immediate" opcodes).
    pub immdt: Option<u32>,
    /// Payload, without padding.
    pub payload: &'a [u8],
}

/// A frame parsed without failing on a bad ICRC (for `dta decode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// The frame.
    pub frame: FrameRepr<'a>,
    /// The ICRC as received.
    pub icrc: u32,
    /// Whether it equals the ICRC computed over the frame.
    pub icrc_valid: bool,
}

const L2L4: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;

impl<'a> FrameRepr<'a> {
    /// A frame with no extension headers and no payload; set the opcode's headers and the
    /// payload with struct update syntax.
    pub const fn new(
        eth: ethernet::Repr,
        ip: ipv4::Repr,
        udp: udp::Repr,
        bth: bth::Repr,
    ) -> FrameRepr<'static> {
        FrameRepr {
            eth,
            ip,
            udp,
            bth,
            deth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            immdt: None,
            payload: &[],
        }
    }

    /// Parse a whole frame and verify its ICRC. Checks, in order (the first failure is the
    /// reason): `truncated` (shorter than Ethernet), `not_ipv4`, `truncated`, `bad_ip_header`,
    /// `bad_ip_checksum`, `not_udp`, `bad_length` / `truncated` (IP total length), `not_roce_port`,
    /// `bad_length` (UDP length), `truncated` (BTH), `bad_version`, `bad_opcode`, `truncated`
    /// (extension headers), `bad_length` (padding / payload), `bad_syndrome`, `bad_icrc`.
    /// Bytes after the IP total length (Ethernet minimum-frame padding) are ignored.
    pub fn parse(buf: &'a [u8]) -> Result<FrameRepr<'a>, Error> {
        let d = FrameRepr::decode(buf)?;
        if d.icrc_valid {
            Ok(d.frame)
        } else {
            Err(Error::BadIcrc)
        }
    }

    /// Parse like [`FrameRepr::parse`] but report a wrong ICRC in [`Decoded::icrc_valid`]
    /// instead of failing.
    pub fn decode(buf: &'a [u8]) -> Result<Decoded<'a>, Error> {
        let eth = ethernet::Repr::parse(buf)?;
        if eth.ethertype != ethernet::ETHERTYPE_IPV4 {
            return Err(Error::NotIpv4);
        }
        let ipbuf = &buf[ethernet::HEADER_LEN..];
        let (ip, total) = ipv4::Repr::parse(ipbuf)?;
        if ip.protocol != dta_net::IPPROTO_UDP {
            return Err(Error::NotUdp);
        }
        let total = usize::from(total);
        if total < ipv4::HEADER_LEN + udp::HEADER_LEN {
            return Err(Error::BadLength);
        }
        if total > ipbuf.len() {
            return Err(Error::Truncated);
        }
        let dgram = &ipbuf[..total];
        let (udp, ulen) = udp::Repr::parse(&dgram[ipv4::HEADER_LEN..])?;
        if udp.dst_port != ROCE_PORT {
            return Err(Error::NotRocePort);
        }
        if usize::from(ulen) != total - ipv4::HEADER_LEN {
            return Err(Error::BadLength);
        }
        let tp = &dgram[ipv4::HEADER_LEN + udp::HEADER_LEN..];
        if tp.len() < bth::HEADER_LEN + ICRC_LEN {
            return Err(Error::Truncated);
        }
        let bth = bth::Repr::parse(tp)?;
        let layout = bth.opcode.layout();
        let hdrs = bth::HEADER_LEN + layout.ext_len();
        if tp.len() < hdrs + ICRC_LEN {
            return Err(Error::Truncated);
        }
        let body = tp.len() - hdrs - ICRC_LEN;
        let pad = usize::from(bth.pad_cnt);
        if body % 4 != 0 || pad > body || (!layout.payload && body != 0) {
            return Err(Error::BadLength);
        }
        let mut at = bth::HEADER_LEN;
        let mut take = |present: bool, len: usize| {
            let s = if present {
                Some(&tp[at..at + len])
            } else {
                None
            };
            if present {
                at += len;
            }
            s
        };
        let deth_b = take(layout.deth, deth::HEADER_LEN);
        let reth_b = take(layout.reth, reth::HEADER_LEN);
        let atomic_b = take(layout.atomic_eth, atomic_eth::HEADER_LEN);
        let aeth_b = take(layout.aeth, aeth::HEADER_LEN);
        let ack_b = take(layout.atomic_ack_eth, atomic_ack_eth::HEADER_LEN);
        let imm_b = take(layout.immdt, immdt::HEADER_LEN);
        let frame = FrameRepr {
            eth,
            ip,
            udp,
            bth,
            deth: deth_b.map(deth::Repr::parse).transpose()?,
            reth: reth_b.map(reth::Repr::parse).transpose()?,
            atomic_eth: atomic_b.map(atomic_eth::Repr::parse).transpose()?,
            aeth: aeth_b.map(aeth::Repr::parse).transpose()?,
            atomic_ack_eth: ack_b.map(atomic_ack_eth::Repr::parse).transpose()?,
            immdt: imm_b
                .map(|b| immdt::Repr::parse(b).map(|r| r.imm))
                .transpose()?,
            payload: &tp[hdrs..hdrs + body - pad],
        };
        let end = tp.len() - ICRC_LEN;
        let t = &tp[end..];
        let received = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
        let computed = icrc(&dgram[..total - ICRC_LEN]);
        Ok(Decoded {
            frame,
            icrc: received,
            icrc_valid: received == computed,
        })
    }

    /// Number of pad bytes the payload needs (0..=3).
    pub fn pad_len(&self) -> usize {
        (4 - self.payload.len() % 4) % 4
    }

    /// Length of everything before the payload (Ethernet through the last extension header).
    pub fn headers_len(&self) -> usize {
        L2L4 + bth::HEADER_LEN + self.bth.opcode.layout().ext_len()
    }

    /// Length of the whole frame on the wire, ICRC included.
    pub fn buffer_len(&self) -> usize {
        self.headers_len() + self.payload.len() + self.pad_len() + ICRC_LEN
    }

    /// Emit the frame into `buf`, filling the pad count, IP and UDP lengths, the IP checksum,
    /// zero padding and the ICRC. Returns the frame length. `header_mismatch` if the extension
    /// headers are not exactly the opcode's, `bad_length` for a payload on an opcode without
    /// one or a frame too long for IPv4, `field_range` for values wider than their fields,
    /// `truncated` if `buf` is too short.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let layout = self.bth.opcode.layout();
        if layout.deth != self.deth.is_some()
            || layout.reth != self.reth.is_some()
            || layout.atomic_eth != self.atomic_eth.is_some()
            || layout.aeth != self.aeth.is_some()
            || layout.atomic_ack_eth != self.atomic_ack_eth.is_some()
            || layout.immdt != self.immdt.is_some()
        {
            return Err(Error::HeaderMismatch);
        }
        if !layout.payload && !self.payload.is_empty() {
            return Err(Error::BadLength);
        }
        let len = self.buffer_len();
        if len - ethernet::HEADER_LEN > usize::from(u16::MAX) {
            return Err(Error::BadLength);
        }
        if buf.len() < len {
            return Err(Error::Truncated);
        }
        let buf = &mut buf[..len];
        let pad = self.pad_len();
        let mut bth = self.bth;
        bth.pad_cnt = pad as u8;
        // Validate every header before writing anything past the fixed ones.
        let mut at = L2L4;
        at += bth.emit(&mut buf[at..])?;
        if let Some(d) = &self.deth {
            at += d.emit(&mut buf[at..])?;
        }
        if let Some(r) = &self.reth {
            at += r.emit(&mut buf[at..])?;
        }
        if let Some(a) = &self.atomic_eth {
            at += a.emit(&mut buf[at..])?;
        }
        if let Some(a) = &self.aeth {
            at += a.emit(&mut buf[at..])?;
        }
        if let Some(a) = &self.atomic_ack_eth {
            at += a.emit(&mut buf[at..])?;
        }
        if let Some(i) = self.immdt {
            at += immdt::Repr { imm: i }.emit(&mut buf[at..])?;
        }
        buf[at..at + self.payload.len()].copy_from_slice(self.payload);
        at += self.payload.len();
        buf[at..at + pad].fill(0);
        at += pad;
        self.eth.emit(buf)?;
        let ip_payload = len - ethernet::HEADER_LEN - ipv4::HEADER_LEN;
        self.ip.emit(&mut buf[ethernet::HEADER_LEN..], ip_payload)?;
        self.udp.emit(
            &mut buf[ethernet::HEADER_LEN + ipv4::HEADER_LEN..],
            ip_payload - udp::HEADER_LEN,
        )?;
        let c = icrc(&buf[ethernet::HEADER_LEN..at]);
        buf[at..at + ICRC_LEN].copy_from_slice(&c.to_le_bytes());
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{aeth::Syndrome, Opcode, QP1_QKEY};
    use super::*;

    fn base(opcode: Opcode) -> FrameRepr<'static> {
        FrameRepr {
            eth: ethernet::Repr {
                dst: [2, 0, 0, 0, 0, 2],
                src: [2, 0, 0, 0, 0, 1],
                ethertype: dta_net::ethernet::ETHERTYPE_IPV4,
            },
            ip: ipv4::Repr {
                src: [10, 0, 0, 1],
                dst: [10, 0, 0, 2],
                ..Default::default()
            },
            udp: udp::Repr {
                src_port: 0xc000,
                checksum: 0,
                dst_port: crate::ROCE_PORT,
            },
            bth: bth::Repr::new(opcode, 0x11, 0x100),
            deth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            immdt: None,
            payload: &[],
        }
    }

    #[test]
    fn icrc_masks_exactly_the_variant_fields() {
        let f = FrameRepr {
            reth: Some(reth::Repr {
                va: 0x1000,
                rkey: 7,
                dma_len: 5,
            }),
            payload: b"hello",
            ..base(Opcode::RcWriteOnly)
        };
        let mut b = [0u8; 128];
        let n = f.emit(&mut b).unwrap();
        assert_eq!(n, 14 + 20 + 8 + 12 + 16 + 8 + 4);
        // Parsing reports the pad count as carried; emitting computes it.
        let mut expect = f;
        expect.bth.pad_cnt = 3;
        assert_eq!(FrameRepr::parse(&b[..n]), Ok(expect));
        let ip = &b[14..n - 4];
        let c = icrc(ip);
        assert_eq!(&b[n - 4..n], &c.to_le_bytes());
        // Changing a masked byte (ToS, TTL, IP checksum, UDP checksum, BTH byte 4) keeps the ICRC;
        // any other byte changes it.
        for i in 0..ip.len() {
            let mut m = ip.to_vec();
            m[i] ^= 0x5a;
            assert_eq!(icrc(&m) == c, MASKED.contains(&i), "byte {i}");
        }
        // A variant field changed in flight (TTL decrement, ECN mark) leaves the frame valid once
        // the IP checksum is fixed; the ICRC needs no update.
        b[14 + 8] -= 1;
        b[14 + 1] |= 3;
        ipv4::Packet::new_unchecked(&mut b[14..34]).fill_checksum();
        b[14 + 28 + 4] = 0x80;
        let d = FrameRepr::decode(&b[..n]).unwrap();
        assert!(d.icrc_valid);
        assert!(d.frame.bth.fecn);
        b[n - 1] ^= 1;
        assert_eq!(FrameRepr::parse(&b[..n]), Err(Error::BadIcrc));
        let d = FrameRepr::decode(&b[..n]).unwrap();
        assert!(!d.icrc_valid);
    }

    /// A CNP captured on a ConnectX-4 Lx (published with scapy's RoCE regression tests,
    /// `test/contrib/roce.uts`): a known-good ICRC from real hardware, with ECN (ToS 0xc2) and
    /// BECN set, both masked by the ICRC.
    const CONNECTX4_CNP: &str = "e41d2dab2bc2 7cfe90643b32 0800 \
        45c2003c718c400040119161 0a001101 0a001201 \
        000012b700280000 \
        8100ffff 40000118 00000000 \
        00000000000000000000000000000000 \
        82fd002a";

    #[test]
    fn icrc_of_a_frame_captured_on_connectx4() {
        let hex: String = CONNECTX4_CNP
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let b: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        assert_eq!(b.len(), 74);
        let n = b.len();
        assert_eq!(icrc(&b[14..n - 4]).to_le_bytes(), [0x82, 0xfd, 0x00, 0x2a]);
        let f = FrameRepr::parse(&b).unwrap();
        assert_eq!(f.bth.opcode, Opcode::Cnp);
        assert!(f.bth.becn && !f.bth.fecn);
        assert_eq!(f.bth.dest_qp, 0x118);
        assert_eq!(f.ip.dscp_ecn, 0xc2);
        assert_eq!(f.payload, &[0u8; 16]);
        // Our emitter reproduces the NIC's frame byte for byte.
        let mut out = [0u8; 74];
        assert_eq!(f.emit(&mut out), Ok(74));
        assert_eq!(&out[..], &b[..]);
    }

    #[test]
    fn padding_and_lengths() {
        for plen in 0..9usize {
            let payload = vec![0xabu8; plen];
            let f = FrameRepr {
                deth: Some(deth::Repr {
                    qkey: QP1_QKEY,
                    src_qp: 1,
                }),
                payload: &payload,
                ..base(Opcode::UdSendOnly)
            };
            let mut b = [0xeeu8; 128];
            let n = f.emit(&mut b).unwrap();
            assert_eq!(n, 14 + 20 + 8 + 12 + 8 + plen.div_ceil(4) * 4 + 4);
            assert_eq!(usize::from(b[14 + 28 + 1] >> 4 & 3), (4 - plen % 4) % 4);
            assert!(b[14 + 28 + 20 + plen..n - 4].iter().all(|&x| x == 0));
            let p = FrameRepr::parse(&b[..n]).unwrap();
            assert_eq!(p.payload, &payload[..]);
            assert_eq!(p.bth.pad_cnt as usize, f.pad_len());
            assert_eq!(FrameRepr::parse(&b[..n - 1]), Err(Error::Truncated));
        }
    }

    #[test]
    fn emit_errors() {
        let mut b = [0u8; 256];
        assert_eq!(
            base(Opcode::RcWriteOnly).emit(&mut b),
            Err(Error::HeaderMismatch)
        );
        let ack = FrameRepr {
            aeth: Some(aeth::Repr {
                syndrome: Syndrome::Ack { credits: 31 },
                msn: 1,
            }),
            ..base(Opcode::RcAcknowledge)
        };
        assert_eq!(ack.emit(&mut b), Ok(62));
        assert_eq!(ack.emit(&mut b[..61]), Err(Error::Truncated));
        let with_payload = FrameRepr {
            payload: b"x",
            ..ack
        };
        assert_eq!(with_payload.emit(&mut b), Err(Error::BadLength));
        let mut wide = ack;
        wide.bth.dest_qp = 1 << 24;
        assert_eq!(wide.emit(&mut b), Err(Error::FieldRange));
    }
}
