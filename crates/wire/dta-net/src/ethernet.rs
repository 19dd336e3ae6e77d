//! Ethernet II header (14 bytes): destination MAC, source MAC, EtherType; optionally followed by
//! up to [`MAX_VLAN_TAGS`] 802.1Q / 802.1ad tags (4 bytes each: TCI, then the next EtherType),
//! which [`Packet::untagged`] steps over.

use crate::{rd16, wr16, Error};

/// Header length without VLAN tags.
pub const HEADER_LEN: usize = 14;
/// Length of one VLAN tag.
pub const VLAN_TAG_LEN: usize = 4;
/// VLAN tags stepped over at most (a customer tag inside a service tag).
pub const MAX_VLAN_TAGS: usize = 2;
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType (TPID) of an 802.1Q VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// EtherType (TPID) of an 802.1ad (QinQ) service tag.
pub const ETHERTYPE_QINQ: u16 = 0x88a8;

/// Byte ranges.
pub mod field {
    use core::ops::Range;
    /// Destination MAC.
    pub const DST: Range<usize> = 0..6;
    /// Source MAC.
    pub const SRC: Range<usize> = 6..12;
    /// EtherType (or the TPID of the first VLAN tag).
    pub const ETHERTYPE: Range<usize> = 12..14;
}

crate::packet_view!(
    "A zero-copy view of an Ethernet II frame.",
    Error,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Destination MAC.
    pub fn dst(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        a
    }

    /// Source MAC.
    pub fn src(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        a
    }

    /// The EtherType in the fixed header (a TPID when the frame is tagged).
    pub fn ethertype(&self) -> u16 {
        rd16(&self.buffer.as_ref()[field::ETHERTYPE])
    }

    /// The bytes after the 14-byte header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// Step over the VLAN tags: the EtherType after them and the header length including them.
    /// `Truncated` if a tag is cut off, `TooManyVlanTags` after [`MAX_VLAN_TAGS`].
    pub fn untagged(&self) -> Result<(u16, usize), Error> {
        let b = self.buffer.as_ref();
        let mut off = field::ETHERTYPE.start;
        for _ in 0..=MAX_VLAN_TAGS {
            let t = rd16(b.get(off..off + 2).ok_or(Error::Truncated)?);
            if t != ETHERTYPE_VLAN && t != ETHERTYPE_QINQ {
                return Ok((t, off + 2));
            }
            off += VLAN_TAG_LEN;
        }
        Err(Error::TooManyVlanTags)
    }
}

impl<'a> Packet<&'a [u8]> {
    /// [`Packet::untagged`], with the bytes after the tags borrowed from the underlying buffer.
    pub fn untagged_payload(&self) -> Result<(u16, &'a [u8]), Error> {
        let (t, n) = self.untagged()?;
        Ok((t, &self.buffer[n..]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the destination MAC.
    pub fn set_dst(&mut self, mac: [u8; 6]) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&mac);
    }
    /// Set the source MAC.
    pub fn set_src(&mut self, mac: [u8; 6]) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&mac);
    }
    /// Set the EtherType.
    pub fn set_ethertype(&mut self, t: u16) {
        wr16(&mut self.buffer.as_mut()[field::ETHERTYPE], t);
    }
}

/// An untagged Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Destination MAC.
    pub dst: [u8; 6],
    /// Source MAC.
    pub src: [u8; 6],
    /// EtherType.
    pub ethertype: u16,
}

impl Default for Repr {
    /// Zero addresses, EtherType IPv4.
    fn default() -> Repr {
        Repr {
            dst: [0; 6],
            src: [0; 6],
            ethertype: ETHERTYPE_IPV4,
        }
    }
}

impl Repr {
    /// Parse the fixed header (VLAN tags are not stepped over: see [`Packet::untagged`]).
    pub fn parse(buf: &[u8]) -> Result<Repr, Error> {
        let p = Packet::new_checked(buf)?;
        Ok(Repr {
            dst: p.dst(),
            src: p.src(),
            ethertype: p.ethertype(),
        })
    }

    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit; returns the header length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let mut p = Packet::new_checked(buf)?;
        p.set_dst(self.dst);
        p.set_src(self.src);
        p.set_ethertype(self.ethertype);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_emit_and_truncation() {
        let b = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x86, 0xdd, 0xaa];
        let r = Repr::parse(&b).unwrap();
        assert_eq!(r.dst, [1, 2, 3, 4, 5, 6]);
        assert_eq!(r.src, [7, 8, 9, 10, 11, 12]);
        assert_eq!(r.ethertype, ETHERTYPE_IPV6);
        let mut out = [0u8; 14];
        assert_eq!(r.emit(&mut out), Ok(14));
        assert_eq!(out, b[..14]);
        assert_eq!(Repr::parse(&b[..13]), Err(Error::Truncated));
        assert_eq!(r.emit(&mut out[..13]), Err(Error::Truncated));
        assert_eq!(Packet::new_checked(&b[..]).unwrap().payload(), &[0xaa]);
    }

    #[test]
    fn vlan_tags() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x88, 0xa8, 0, 10, 0x81, 0x00, 0, 20, 0x08, 0x00, 0x45]);
        let p = Packet::new_checked(&f[..]).unwrap();
        assert_eq!(p.ethertype(), ETHERTYPE_QINQ);
        assert_eq!(p.untagged(), Ok((ETHERTYPE_IPV4, 22)));
        assert_eq!(p.untagged_payload().unwrap().1, &[0x45]);
        // Cut inside the second tag's EtherType.
        assert_eq!(
            Packet::new_unchecked(&f[..21]).untagged(),
            Err(Error::Truncated)
        );
        // Three tags.
        f[20..22].copy_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&[0, 30, 0x08, 0x00]);
        assert_eq!(
            Packet::new_unchecked(&f[..]).untagged(),
            Err(Error::TooManyVlanTags)
        );
        // Untagged.
        let g = [0u8; 14];
        assert_eq!(Packet::new_unchecked(&g[..]).untagged(), Ok((0, 14)));
    }
}
