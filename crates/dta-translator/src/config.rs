//! Translator configuration (the `[translator]` table of `dta.toml`).

use std::net::SocketAddr;

use dta_wire::prefix::AllowList;
use serde::{Deserialize, Serialize};

/// Which prototype base header the reporters send (the prototype could not tell them apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PrototypeHeader {
    /// 2 bytes: `opcode | immediate:1 reserved:7`.
    #[default]
    Short,
    /// 3 bytes: `opcode | seqnum | immediate:1 retransmitable:1 reserved:6`.
    Long,
}

impl From<PrototypeHeader> for dta_wire::prototype::BaseFormat {
    fn from(h: PrototypeHeader) -> Self {
        match h {
            PrototypeHeader::Short => dta_wire::prototype::BaseFormat::Short,
            PrototypeHeader::Long => dta_wire::prototype::BaseFormat::Long,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TranslatorConfig {
    /// UDP address reports arrive on.
    pub listen: SocketAddr,
    /// Reporter source prefixes (CIDR, IPv4 and IPv6) a datagram is accepted from; anything
    /// else is dropped unparsed and counted as `source_not_allowed`. Default: loopback only.
    pub allow: AllowList,
    /// Translator threads, each with its own `SO_REUSEPORT` socket on `listen` (co-located
    /// translator; see `dta_translator::shard`). One per core is the usual choice.
    pub threads: usize,
    pub prototype_header: PrototypeHeader,
    /// Datagrams per `recvmmsg` call.
    pub recv_batch: usize,
    /// Socket receive buffer, bytes.
    pub recv_buffer: usize,
    /// UDP port NACKs are sent to on the reporter's address.
    pub nack_port: u16,
    /// Do not NACK a missing number again within this interval; the timer sweeps the spaces
    /// with gaps about this often.
    pub nack_interval_ms: u64,
    /// A sequence gap not filled for this long is given up (`unrecovered`, `lost`); a reporter
    /// sending only numbers far behind its space's for this long (nothing applying) restarted,
    /// and its number is adopted (`resyncs`).
    pub resync_after_ms: u64,
    /// Slots of the sequence tracker's table, per translator thread ([`crate::sequence`]): a
    /// power of two from 64 to 2^22; each slot holds one (source, reporter, priority) sequence
    /// space in 100 bytes. The default, 2^17 (12.5 MiB), holds 65 536 one-priority reporters at
    /// load 0.5; when both of a new space's buckets are full the least recently seen space of
    /// the two is evicted (`tracker_evictions`).
    pub tracker_entries: usize,
    /// A Sketch-Merge reporter that stopped mid-sketch for this long is NACKed for its next
    /// column (its last column may have been lost, which no later column would reveal).
    pub sketch_stall_ms: u64,
    /// Lines of the Postcarding cache (rounded up to a power of two).
    pub postcard_cache_entries: usize,
    /// A partially collected path is written after waiting this long.
    pub postcard_timeout_ms: u64,
    /// A partial Append batch is written after this long.
    pub append_flush_ms: u64,
    /// Sketch-Merge columns batched into one write.
    pub sketch_batch_columns: u32,
}

impl Default for TranslatorConfig {
    fn default() -> Self {
        TranslatorConfig {
            listen: "127.0.0.1:40040".parse().unwrap(),
            allow: AllowList::loopback(),
            threads: 1,
            prototype_header: PrototypeHeader::Short,
            recv_batch: 64,
            recv_buffer: 8 << 20,
            nack_port: dta_wire::NACK_PORT,
            nack_interval_ms: 5,
            resync_after_ms: 1000,
            tracker_entries: crate::sequence::DEFAULT_ENTRIES,
            sketch_stall_ms: 50,
            postcard_cache_entries: 1 << 16,
            postcard_timeout_ms: 100,
            append_flush_ms: 10,
            sketch_batch_columns: 8,
        }
    }
}
