//! BTH opcodes ([IBTA §9.2.1], Table 38 "OpCode field") and which extension headers each one
//! carries (§9.2, the header order BTH, DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt).

use super::Error;

/// Which headers follow the BTH, in wire order, and whether a payload may follow them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Layout {
    /// Datagram Extended Transport Header (UD).
    pub deth: bool,
    /// RDMA Extended Transport Header.
    pub reth: bool,
    /// Atomic Extended Transport Header.
    pub atomic_eth: bool,
    /// ACK Extended Transport Header.
    pub aeth: bool,
    /// Atomic Acknowledge Extended Transport Header.
    pub atomic_ack_eth: bool,
    /// Immediate data.
    pub immdt: bool,
    /// A (possibly empty) payload follows the headers.
    pub payload: bool,
}

impl Layout {
    /// Total length of the extension headers.
    pub const fn ext_len(&self) -> usize {
        (self.deth as usize) * super::deth::HEADER_LEN
            + (self.reth as usize) * super::reth::HEADER_LEN
            + (self.atomic_eth as usize) * super::atomic_eth::HEADER_LEN
            + (self.aeth as usize) * super::aeth::HEADER_LEN
            + (self.atomic_ack_eth as usize) * super::atomic_ack_eth::HEADER_LEN
            + (self.immdt as usize) * super::immdt::HEADER_LEN
    }
}

const fn l(
    deth: bool,
    reth: bool,
    atomic_eth: bool,
    aeth: bool,
    atomic_ack_eth: bool,
    immdt: bool,
    payload: bool,
) -> Layout {
    Layout {
        deth,
        reth,
        atomic_eth,
        aeth,
        atomic_ack_eth,
        immdt,
        payload,
    }
}

macro_rules! opcodes {
    ($( $(#[$doc:meta])* $var:ident = $val:literal, $name:literal, $layout:expr; )*) => {
        /// A BTH opcode: the transport (bits 7-5: 000 RC, 011 UD, 100 CNP) and the operation
        /// (bits 4-0).
        #[repr(u8)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Opcode {
            $( $(#[$doc])* $var = $val, )*
        }

        impl Opcode {
            /// Every supported opcode, in wire order.
            pub const ALL: &'static [Opcode] = &[ $( Opcode::$var, )* ];

            /// The snake_case name used in JSON and the spec vectors (`rc_rdma_write_only` ...).
            pub const fn name(self) -> &'static str {
                match self { $( Opcode::$var => $name, )* }
            }

            /// The headers the opcode carries after the BTH.
            pub const fn layout(self) -> Layout {
                match self { $( Opcode::$var => $layout, )* }
            }

            /// Decode a wire value; `BadOpcode` for values this implementation does not know.
            pub const fn from_u8(v: u8) -> Result<Opcode, Error> {
                match v { $( $val => Ok(Opcode::$var), )* _ => Err(Error::BadOpcode) }
            }
        }
    };
}

const P: bool = true;
const N: bool = false;

opcodes! {
    /// RC SEND First.
    RcSendFirst = 0x00, "rc_send_first", l(N, N, N, N, N, N, P);
    /// RC SEND Middle.
    RcSendMiddle = 0x01, "rc_send_middle", l(N, N, N, N, N, N, P);
    /// RC SEND Last.
    RcSendLast = 0x02, "rc_send_last", l(N, N, N, N, N, N, P);
    /// RC SEND Last with Immediate.
    RcSendLastImm = 0x03, "rc_send_last_with_immediate", l(N, N, N, N, N, P, P);
    /// RC SEND Only (the prototype's memory advertisement, [P4-RDMA §V-C]).
    RcSendOnly = 0x04, "rc_send_only", l(N, N, N, N, N, N, P);
    /// RC SEND Only with Immediate.
    RcSendOnlyImm = 0x05, "rc_send_only_with_immediate", l(N, N, N, N, N, P, P);
    /// RC RDMA WRITE First.
    RcWriteFirst = 0x06, "rc_rdma_write_first", l(N, P, N, N, N, N, P);
    /// RC RDMA WRITE Middle.
    RcWriteMiddle = 0x07, "rc_rdma_write_middle", l(N, N, N, N, N, N, P);
    /// RC RDMA WRITE Last.
    RcWriteLast = 0x08, "rc_rdma_write_last", l(N, N, N, N, N, N, P);
    /// RC RDMA WRITE Last with Immediate.
    RcWriteLastImm = 0x09, "rc_rdma_write_last_with_immediate", l(N, N, N, N, N, P, P);
    /// RC RDMA WRITE Only ([P4-RDMA Figure 2]: the DTA report write).
    RcWriteOnly = 0x0a, "rc_rdma_write_only", l(N, P, N, N, N, N, P);
    /// RC RDMA WRITE Only with Immediate.
    RcWriteOnlyImm = 0x0b, "rc_rdma_write_only_with_immediate", l(N, P, N, N, N, P, P);
    /// RC RDMA READ Request (decoded; DTA never reads).
    RcReadRequest = 0x0c, "rc_rdma_read_request", l(N, P, N, N, N, N, N);
    /// RC RDMA READ Response First.
    RcReadResponseFirst = 0x0d, "rc_rdma_read_response_first", l(N, N, N, P, N, N, P);
    /// RC RDMA READ Response Middle.
    RcReadResponseMiddle = 0x0e, "rc_rdma_read_response_middle", l(N, N, N, N, N, N, P);
    /// RC RDMA READ Response Last.
    RcReadResponseLast = 0x0f, "rc_rdma_read_response_last", l(N, N, N, P, N, N, P);
    /// RC RDMA READ Response Only.
    RcReadResponseOnly = 0x10, "rc_rdma_read_response_only", l(N, N, N, P, N, N, P);
    /// RC Acknowledge (ACK, RNR NAK or NAK, per the AETH syndrome).
    RcAcknowledge = 0x11, "rc_acknowledge", l(N, N, N, P, N, N, N);
    /// RC ATOMIC Acknowledge (carries the original value).
    RcAtomicAcknowledge = 0x12, "rc_atomic_acknowledge", l(N, N, N, P, P, N, N);
    /// RC CmpSwap.
    RcCompareSwap = 0x13, "rc_compare_swap", l(N, N, P, N, N, N, N);
    /// RC FetchAdd (Key-Increment, [DTA §4]).
    RcFetchAdd = 0x14, "rc_fetch_add", l(N, N, P, N, N, N, N);
    /// UD SEND Only (CM MADs to QP1).
    UdSendOnly = 0x64, "ud_send_only", l(P, N, N, N, N, N, P);
    /// UD SEND Only with Immediate.
    UdSendOnlyImm = 0x65, "ud_send_only_with_immediate", l(P, N, N, N, N, P, P);
    /// Congestion Notification Packet (RoCEv2 Annex A17.9.3, DCQCN): BECN set, the payload is
    /// 16 reserved bytes. Sent by a congested receiver's NIC; decoded so that a translator can
    /// count them.
    Cnp = 0x81, "cnp", l(N, N, N, N, N, N, P);
}

impl Opcode {
    /// The inverse of [`Opcode::name`].
    pub fn from_name(name: &str) -> Option<Opcode> {
        Opcode::ALL.iter().copied().find(|o| o.name() == name)
    }

    /// True for the Reliable Connection opcodes (transport bits 000).
    pub const fn is_rc(self) -> bool {
        (self as u8) >> 5 == 0
    }

    /// True for the opcodes that start or are a whole RDMA WRITE message.
    pub const fn is_write(self) -> bool {
        matches!(
            self,
            Opcode::RcWriteFirst
                | Opcode::RcWriteMiddle
                | Opcode::RcWriteLast
                | Opcode::RcWriteLastImm
                | Opcode::RcWriteOnly
                | Opcode::RcWriteOnlyImm
        )
    }
}

impl TryFrom<u8> for Opcode {
    type Error = Error;
    fn try_from(v: u8) -> Result<Opcode, Error> {
        Opcode::from_u8(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_names_and_layouts() {
        for &o in Opcode::ALL {
            assert_eq!(Opcode::try_from(o as u8), Ok(o));
            assert_eq!(Opcode::from_name(o.name()), Some(o));
        }
        assert_eq!(Opcode::RcWriteOnly as u8, 0x0a);
        assert_eq!(Opcode::RcFetchAdd as u8, 0x14);
        assert_eq!(Opcode::UdSendOnly as u8, 0x64);
        assert_eq!(Opcode::try_from(0x15), Err(Error::BadOpcode));
        assert_eq!(Opcode::try_from(0x81), Ok(Opcode::Cnp));
        assert_eq!(Opcode::try_from(0x80), Err(Error::BadOpcode));
        assert_eq!(Opcode::RcWriteOnlyImm.layout().ext_len(), 16 + 4);
        assert_eq!(Opcode::RcAtomicAcknowledge.layout().ext_len(), 4 + 8);
        assert_eq!(Opcode::RcFetchAdd.layout().ext_len(), 28);
        assert_eq!(Opcode::UdSendOnly.layout().ext_len(), 8);
        assert!(!Opcode::RcAcknowledge.layout().payload);
        assert!(Opcode::RcWriteMiddle.layout().payload);
        assert!(Opcode::RcWriteLastImm.layout().immdt);
        assert!(Opcode::RcSendOnly.is_rc() && !Opcode::UdSendOnly.is_rc());
        assert!(Opcode::RcWriteFirst.is_write() && !Opcode::RcFetchAdd.is_write());
    }
}
