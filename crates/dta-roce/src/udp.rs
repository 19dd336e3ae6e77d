//! The UDP header of a RoCEv2 frame: [`dta_net::udp`] to destination port
//! [`super::ROCE_PORT`]. The source port is flow entropy, and the checksum is usually 0 (unused;
//! the ICRC protects the packet and masks the UDP checksum, [RoCEv2 A17.4.3]).

use super::{Error, ROCE_PORT};
pub use dta_net::udp::{field, Packet, HEADER_LEN};

/// A UDP header to the RoCEv2 port. The length is computed when emitting; the checksum is
/// carried as is (not verified: RoCEv2 senders put 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Source port (flow entropy).
    pub src_port: u16,
    /// Checksum as carried (0 = none).
    pub checksum: u16,
}

impl Repr {
    /// Parse; `NotRocePort` unless the destination is 4791. Returns the header and its length
    /// field (not checked here).
    pub fn parse(buf: &[u8]) -> Result<(Repr, u16), Error> {
        let (r, len) = dta_net::udp::Repr::parse(buf)?;
        if r.dst_port != ROCE_PORT {
            return Err(Error::NotRocePort);
        }
        Ok((
            Repr {
                src_port: r.src_port,
                checksum: r.checksum,
            },
            len,
        ))
    }

    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit to port 4791 with the given payload length.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) -> Result<usize, Error> {
        let r = dta_net::udp::Repr {
            src_port: self.src_port,
            dst_port: ROCE_PORT,
            checksum: self.checksum,
        };
        Ok(r.emit(buf, payload_len)?)
    }
}
