//! RoCEv2 pieces both sides of DTA's RDMA path share ([DTA §3], [DTA §5.2]): the translator is
//! the only writer of collector memory and writes it with RDMA. This crate holds what the
//! requester (`dta-rdma-requester`, translator side) and the software responder
//! (`dta-rdma-responder`, collector side) both use around the wire formats of `dta_roce`:
//! [`link`] (raw Ethernet links: an `AF_PACKET` socket, and an in-memory pair with seeded loss,
//! duplication and reordering for tests); [`adv`], the memory advertisement a collector sends
//! after RTU (also emitted by `dta-rnic`); and [`common`]: endpoints, 24-bit PSN arithmetic,
//! frame templates, counters, and the random connection identifiers (R_Keys, QPNs, starting
//! PSNs, CM ids) drawn from the OS random source. `docs/rdma.md` describes the connection
//! sequence and the reliability rules. It links neither the translator nor the collector.

pub mod adv;
pub mod common;
pub mod link;

pub use adv::{AdvertisedStore, ProtoAdv};
pub use common::{psn_add, psn_diff, Endpoint, BROADCAST, DEFAULT_CM_PORT, MAX_FRAME, PSN_MASK};
pub use link::{mem_pair, Impaired, Impairment, Link, MemLink, PacketLink};
