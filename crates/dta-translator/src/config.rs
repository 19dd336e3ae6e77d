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
    /// Do not repeat a NACK for the same gap more often than this.
    pub nack_interval_ms: u64,
    /// A retransmitting reporter from which nothing in order has arrived for this long is
    /// resynchronised to its current sequence number (it restarted, or a gap cannot be filled).
    pub resync_after_ms: u64,
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
    /// Put the first-stage classifier in front of the translator threads
    /// ([`crate::classify`]): one more thread receives, queues by priority, and under overload
    /// sheds low priority first instead of letting the kernel drop blindly. Unset: on when the
    /// machine has a core for it besides the translator threads (more cores than `threads`),
    /// off otherwise (on a machine without a spare core it would take CPU from translation to
    /// receive datagrams only to shed them).
    pub classifier: Option<bool>,
    /// Depth of each translator thread's low-priority queue behind the classifier, datagrams.
    pub classifier_queue_low: usize,
    /// The same, medium priority.
    pub classifier_queue_medium: usize,
    /// The same, high priority.
    pub classifier_queue_high: usize,
}

impl TranslatorConfig {
    /// Whether the classifier runs (the configured choice, or the default for this machine).
    pub fn classifier_enabled(&self) -> bool {
        self.classifier.unwrap_or_else(|| {
            std::thread::available_parallelism().is_ok_and(|n| n.get() > self.threads.max(1))
        })
    }

    /// The classifier's queue depths per translator thread.
    pub fn classifier_depths(&self) -> crate::classify::Depths {
        crate::classify::Depths {
            low: self.classifier_queue_low,
            medium: self.classifier_queue_medium,
            high: self.classifier_queue_high,
        }
    }
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
            sketch_stall_ms: 50,
            postcard_cache_entries: 1 << 16,
            postcard_timeout_ms: 100,
            append_flush_ms: 10,
            sketch_batch_columns: 8,
            classifier: None,
            // A burst of high priority waits rather than being shed; low priority, which is shed
            // first anyway, holds little (each queued datagram pins a 9 KiB buffer).
            classifier_queue_low: 256,
            classifier_queue_medium: 512,
            classifier_queue_high: 1024,
        }
    }
}
