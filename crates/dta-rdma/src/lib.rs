//! RoCEv2 for DTA (issue 3; paper 001 §3, §5.2-5.3): the translator is the only writer of
//! collector memory and writes it with RDMA. This crate holds the three pieces around the wire
//! formats of `dta_roce`: [`link`] (raw Ethernet links: an `AF_PACKET` socket, and an
//! in-memory pair with seeded loss, duplication and reordering for tests); [`requester`], the
//! translator's RoCEv2 sink ([`RoceSinks`], a `dta_translator::Sinks`: RC WRITE / WRITE WITH
//! IMMEDIATE / FETCH_ADD with a retransmission window, go-back-N, RNR backoff, timeouts and
//! rate limiting) and the active side of RDMA CM ([`connect`]); and [`responder`], a software
//! RoCE responder for collectors without an RDMA NIC (passive RDMA CM, registered regions with
//! R_Keys, PSN checks, duplicate detection, ACK coalescing, NAKs, atomics, and notifications of
//! WRITE WITH IMMEDIATE). The memory advertisement formats are in [`adv`]; `docs/rdma.md`
//! describes the connection sequence and the reliability rules.

pub mod adv;
mod common;
pub mod link;
pub mod requester;
pub mod responder;

pub use adv::{AdvertisedStore, ProtoAdv};
pub use common::{psn_add, psn_diff, Endpoint, BROADCAST, DEFAULT_CM_PORT, MAX_FRAME, PSN_MASK};
pub use link::{mem_pair, Impaired, Impairment, Link, MemLink, PacketLink};
pub use requester::{connect, Connection, RdmaError, RequesterConfig, RequesterStats, RoceSinks};
pub use responder::{Notification, Responder, ResponderConfig, ResponderStats};
