//! The XDP programs' source allow-list (`dta_allow`, bpf/allow.h): the prefixes of the node's
//! compiled ingress policy (`[translator] allow`, `[sink] allow`) as an LPM trie, so the driver
//! drops a datagram from any other source before it parses it, exactly where the userspace
//! translator would (`dta_wire::prefix::AllowList::allows`: IPv4 and IPv6 prefixes match their
//! own family only; an IPv4-mapped IPv6 source is matched as IPv4).

use std::net::IpAddr;

use aya::maps::lpm_trie::{Key, LpmTrie};
use aya::Ebpf;
use dta_wire::prefix::AllowList;

use crate::XdpError;

/// The key's data after the prefix length: `family`, `addr`, `pad` of `struct src_key`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct SrcData {
    family: u8,
    addr: [u8; 16],
    pad: [u8; 3],
}
// SAFETY: repr(C), bytes only, no padding (1 + 16 + 3 = 20).
unsafe impl aya::Pod for SrcData {}

/// The trie key of `addr/len`: the family byte counts in the prefix.
fn key(addr: IpAddr, len: u8) -> Key<SrcData> {
    let mut d = SrcData::default();
    match addr {
        IpAddr::V4(a) => {
            d.family = 4;
            d.addr[..4].copy_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            d.family = 6;
            d.addr = a.octets();
        }
    }
    Key::new(8 + u32::from(len), d)
}

/// Replace nothing, insert every prefix of `allow` into the program's `dta_allow` map (loaded
/// empty: until this runs, every source is dropped).
pub(crate) fn install(ebpf: &mut Ebpf, allow: &AllowList) -> Result<(), XdpError> {
    allow.validate("allow").map_err(XdpError::Rules)?;
    let mut trie: LpmTrie<_, SrcData, u8> = LpmTrie::try_from(
        ebpf.map_mut("dta_allow")
            .ok_or_else(|| XdpError::MissingMap("dta_allow".into()))?,
    )?;
    for p in allow.prefixes() {
        trie.insert(&key(p.addr(), p.len()), 1, 0)?;
    }
    Ok(())
}
