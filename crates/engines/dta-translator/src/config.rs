//! Translator configuration (the `[translator]` table of `dta.toml`).

use std::net::SocketAddr;
use std::path::PathBuf;

use dta_wire::prefix::AllowList;
use dta_wire::Priority;
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
    /// After a partial `recvmmsg` batch (fewer than `recv_batch` datagrams waited), sleep this
    /// many microseconds so the next batch gathers in the receive buffer: a wake-up and a
    /// system call per few datagrams cost more CPU than the reports they bring. At most this
    /// much latency is added, and none while the translator is behind (full batches); 0 turns
    /// it off. At most [`MAX_RECV_GATHER_US`].
    pub recv_gather_us: u64,
    /// Socket receive buffer, bytes.
    pub recv_buffer: usize,
    /// UDP port NACKs are sent to on the reporter's address.
    pub nack_port: u16,
    /// NACKs per second, all threads of the translator together (0: unlimited). A NACK over
    /// the budget is not sent; the tracker NACKs its gap again later (docs/flow-control.md).
    pub nack_budget: u64,
    /// A file holding the control key (32 hexadecimal digits): NACKs and congestion notices
    /// are then authenticated, and reporters given the same key obey only those
    /// (docs/security.md). Relative to the configuration file's directory.
    pub control_key_file: Option<PathBuf>,
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
    /// The write meter, priorities, spill, congestion notices and dynamic redundancy
    /// (`[translator.flow_control]`, docs/flow-control.md).
    pub flow_control: FlowControlConfig,
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
    /// A full classifier queue sheds only while the kernel holds at least this fraction of the
    /// socket's receive buffer (0..=1); below it the classifier waits for room, so a burst the
    /// buffer can hold is delayed, not shed. 0: shed whenever a queue is full.
    pub classifier_shed_backlog: f64,
    /// Translator rules (`[[translator.rules]]`, docs/rules.md): match, aggregate, act.
    pub rules: Vec<crate::rules::RuleConfig>,
    /// Window state slots of the rules, per translator thread (rounded up to a power of two,
    /// 1..=2^20).
    pub rule_state_entries: usize,
}

impl TranslatorConfig {
    /// Check every setting against its range before anything is allocated or spawned (a
    /// configuration file is input like any other); the message names the setting. The flow
    /// control table, the tracker size and the classifier's settings are checked by their
    /// owners' functions, called from here.
    pub fn validate(&self) -> Result<(), String> {
        let p = "translator";
        self.allow.validate(&format!("{p}.allow"))?;
        if self.nack_budget > crate::control::MAX_NACK_BUDGET {
            return Err(format!(
                "{p}.nack_budget = {}: 0 (unlimited) ..= {} NACKs per second",
                self.nack_budget,
                crate::control::MAX_NACK_BUDGET
            ));
        }
        if self.threads > MAX_THREADS {
            return Err(format!(
                "{p}.threads = {}: 0..={MAX_THREADS} (0 and 1: one thread)",
                self.threads
            ));
        }
        if !(1..=MAX_RECV_BATCH).contains(&self.recv_batch) {
            return Err(format!(
                "{p}.recv_batch = {}: 1..={MAX_RECV_BATCH} datagrams per recvmmsg",
                self.recv_batch
            ));
        }
        if !RECV_BUFFER_RANGE.contains(&self.recv_buffer) {
            return Err(format!(
                "{p}.recv_buffer = {}: {}..={} bytes",
                self.recv_buffer,
                RECV_BUFFER_RANGE.start(),
                RECV_BUFFER_RANGE.end()
            ));
        }
        if self.recv_gather_us > MAX_RECV_GATHER_US {
            return Err(format!(
                "{p}.recv_gather_us = {}: at most {MAX_RECV_GATHER_US} microseconds",
                self.recv_gather_us
            ));
        }
        for (name, v) in [
            ("nack_interval_ms", self.nack_interval_ms),
            ("resync_after_ms", self.resync_after_ms),
            ("sketch_stall_ms", self.sketch_stall_ms),
            ("postcard_timeout_ms", self.postcard_timeout_ms),
            ("append_flush_ms", self.append_flush_ms),
        ] {
            if v > MAX_INTERVAL_MS {
                return Err(format!("{p}.{name} = {v}: 0..={MAX_INTERVAL_MS} ms"));
            }
        }
        crate::sequence::validate_entries(self.tracker_entries).map_err(|e| format!("{p}.{e}"))?;
        if !(1..=MAX_POSTCARD_CACHE_ENTRIES).contains(&self.postcard_cache_entries) {
            return Err(format!(
                "{p}.postcard_cache_entries = {}: 1..={MAX_POSTCARD_CACHE_ENTRIES} lines of 64 \
                 bytes",
                self.postcard_cache_entries
            ));
        }
        if !(1..=MAX_SKETCH_BATCH_COLUMNS).contains(&self.sketch_batch_columns) {
            return Err(format!(
                "{p}.sketch_batch_columns = {}: 1..={MAX_SKETCH_BATCH_COLUMNS}",
                self.sketch_batch_columns
            ));
        }
        self.flow_control.validate()?;
        validate_depths(&self.classifier_depths()).map_err(|e| format!("{p}.{e}"))?;
        validate_shed_backlog(self.classifier_shed_backlog).map_err(|e| format!("{p}.{e}"))?;
        if !(1..=crate::rules::MAX_STATE_ENTRIES).contains(&self.rule_state_entries) {
            return Err(format!(
                "{p}.rule_state_entries = {}: 1..={}",
                self.rule_state_entries,
                crate::rules::MAX_STATE_ENTRIES
            ));
        }
        Ok(())
    }

    /// Whether the classifier runs in front of `threads` translator threads (the configured
    /// choice, or the default for this machine).
    pub fn classifier_enabled(&self) -> bool {
        self.classifier_for(self.threads)
    }

    /// [`Self::classifier_enabled`] for a translator that runs `threads` threads whatever
    /// `threads` says (the RoCE and XDP translators run one).
    pub fn classifier_for(&self, threads: usize) -> bool {
        self.classifier.unwrap_or_else(|| {
            std::thread::available_parallelism().is_ok_and(|n| n.get() > threads.max(1))
        })
    }

    /// The classifier's queue depths per translator thread.
    pub fn classifier_depths(&self) -> Depths {
        Depths {
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
            recv_gather_us: DEFAULT_RECV_GATHER_US,
            recv_buffer: 8 << 20,
            nack_port: dta_wire::NACK_PORT,
            nack_budget: crate::control::DEFAULT_NACK_BUDGET,
            control_key_file: None,
            nack_interval_ms: 5,
            resync_after_ms: 1000,
            tracker_entries: crate::sequence::DEFAULT_ENTRIES,
            sketch_stall_ms: 50,
            postcard_cache_entries: 1 << 16,
            postcard_timeout_ms: 100,
            append_flush_ms: 10,
            sketch_batch_columns: 8,
            flow_control: FlowControlConfig::default(),
            classifier: None,
            // A burst of high priority waits rather than being shed; low priority, which is shed
            // first anyway, holds little (each queued datagram pins a 9 KiB buffer).
            classifier_queue_low: 256,
            classifier_queue_medium: 512,
            classifier_queue_high: 1024,
            classifier_shed_backlog: DEFAULT_SHED_BACKLOG,
            rules: vec![],
            rule_state_entries: crate::rules::DEFAULT_STATE_ENTRIES,
        }
    }
}

/// Default `recv_gather_us`: at most this much latency, and at most one wake-up per this long
/// while reports trickle in (the receive buffer holds far more than arrives meanwhile: 8 MiB is
/// ~6 000 datagrams, 500 us at 1 M/s is 500).
pub const DEFAULT_RECV_GATHER_US: u64 = 500;

/// Most translator threads (each holds its tracker, caches and buffers: tens of MiB).
pub const MAX_THREADS: usize = 256;
/// Largest `recv_batch`: the most messages one `recvmmsg` takes (UIO_MAXIOV).
pub const MAX_RECV_BATCH: usize = 1024;
/// Accepted `recv_buffer` (the kernel's own floor is a few KiB; a GiB is plenty).
pub const RECV_BUFFER_RANGE: std::ops::RangeInclusive<usize> = (64 << 10)..=(1 << 30);
/// Most Postcarding cache lines per translator thread (64 bytes each: 256 MiB).
pub const MAX_POSTCARD_CACHE_ENTRIES: usize = 1 << 22;
/// Most Sketch-Merge columns batched into one write (the most columns a sketch has).
pub const MAX_SKETCH_BATCH_COLUMNS: u32 = 1 << 16;

/// Largest `recv_gather_us`: 100 ms (a longer sleep would hold reports, timers and the stop
/// that long).
pub const MAX_RECV_GATHER_US: u64 = 100_000;

/// Largest `burst`, in writes (the meter keeps its level in fixed point in an `i64`).
pub const MAX_BURST: u64 = 1 << 32;
/// Largest `write_budget`, writes per second.
pub const MAX_WRITE_BUDGET: u64 = 1 << 36;
/// Largest `spill_memory`, bytes.
pub const MAX_SPILL_MEMORY: u64 = 1 << 32;
/// Largest `spill_file_bytes`.
pub const MAX_SPILL_FILE_BYTES: u64 = 1 << 40;
/// Largest of the `*_ms` intervals (one hour).
pub const MAX_INTERVAL_MS: u64 = 3_600_000;

/// Flow control of the translator's memory writes ([DTA-draft §3.2], [DTA-draft §4.2],
/// [DTA-draft §6]; docs/flow-control.md): a token bucket of memory writes shared by the
/// collector's translator threads, admission of datagrams by priority against its level, a
/// spill of high-priority datagrams re-injected in order, congestion notices to reporters, and
/// lowered redundancy for low-priority Key-Write under sustained pressure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlowControlConfig {
    /// Memory writes per second (RDMA WRITE, WRITE WITH IMMEDIATE, FETCH_ADD) the translator
    /// issues at most on average; 0: unmetered (no admission, no spill, no notices).
    pub write_budget: u64,
    /// Bucket depth, writes: how far a burst may run ahead of the budget.
    pub burst: u64,
    /// The adaptive budget is never cut below this (writes per second).
    pub min_budget: u64,
    /// At most one multiplicative cut per interval; an interval without congestion signals
    /// raises the budget by `write_budget / 16`.
    pub adapt_interval_ms: u64,
    /// A low-priority datagram is admitted while the bucket level (fraction of `burst`) is at
    /// least this.
    pub low_threshold: f64,
    /// A medium-priority datagram is admitted while the level is at least this; the spill is
    /// re-injected while it is.
    pub medium_threshold: f64,
    /// Bytes of memory preallocated for spilled high-priority datagrams (divided among the
    /// translator threads).
    pub spill_memory: u64,
    /// A file the spill continues into when its memory is full; none: a full memory drops.
    pub spill_file: Option<PathBuf>,
    /// Most bytes the spill file holds (divided among the translator threads).
    pub spill_file_bytes: u64,
    /// At most one congestion notice per reporter source per this interval.
    pub notice_interval_ms: u64,
    /// How long a congestion notice holds the reporter's limits.
    pub notice_hold_ms: u64,
    /// Below this level, sustained for `redundancy_after_ms`, low-priority Key-Write reports
    /// are written with redundancy 1.
    pub redundancy_threshold: f64,
    pub redundancy_after_ms: u64,
    /// High-priority datagrams per second one source may claim; beyond, demoted to medium
    /// (`crate::claims`; 0: unlimited).
    pub high_per_source: u64,
    /// Medium-priority datagrams per second one source may claim; beyond, demoted to low.
    pub medium_per_source: u64,
}

impl Default for FlowControlConfig {
    fn default() -> Self {
        FlowControlConfig {
            write_budget: 0,
            burst: 65_536,
            min_budget: 10_000,
            adapt_interval_ms: 10,
            low_threshold: 0.5,
            medium_threshold: 0.25,
            spill_memory: 16 << 20,
            spill_file: None,
            spill_file_bytes: 256 << 20,
            notice_interval_ms: 50,
            notice_hold_ms: 200,
            redundancy_threshold: 0.75,
            redundancy_after_ms: 100,
            high_per_source: crate::claims::DEFAULT_HIGH_PER_SOURCE,
            medium_per_source: crate::claims::DEFAULT_MEDIUM_PER_SOURCE,
        }
    }
}

impl FlowControlConfig {
    /// Whether memory writes are metered at all.
    pub fn metered(&self) -> bool {
        self.write_budget > 0
    }

    /// Check every value against its range; the message names the setting.
    pub fn validate(&self) -> Result<(), String> {
        let p = "translator.flow_control";
        for (name, v) in [
            ("low_threshold", self.low_threshold),
            ("medium_threshold", self.medium_threshold),
            ("redundancy_threshold", self.redundancy_threshold),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(format!(
                    "{p}.{name} = {v}: a fraction of the burst in (0, 1]"
                ));
            }
        }
        if self.low_threshold < self.medium_threshold {
            return Err(format!(
                "{p}.low_threshold = {} is below medium_threshold = {}: low priority must need \
                 at least the level medium needs",
                self.low_threshold, self.medium_threshold
            ));
        }
        if self.write_budget > MAX_WRITE_BUDGET {
            return Err(format!(
                "{p}.write_budget = {}: at most {MAX_WRITE_BUDGET} writes/s (0 = unmetered)",
                self.write_budget
            ));
        }
        if !(1..=MAX_BURST).contains(&self.burst) {
            return Err(format!(
                "{p}.burst = {}: 1..={MAX_BURST} writes",
                self.burst
            ));
        }
        if self.metered() && !(1..=self.write_budget).contains(&self.min_budget) {
            return Err(format!(
                "{p}.min_budget = {}: 1..=write_budget ({}) writes/s",
                self.min_budget, self.write_budget
            ));
        }
        for (name, v, min) in [
            ("adapt_interval_ms", self.adapt_interval_ms, 1),
            ("notice_interval_ms", self.notice_interval_ms, 0),
            ("notice_hold_ms", self.notice_hold_ms, 1),
            ("redundancy_after_ms", self.redundancy_after_ms, 0),
        ] {
            if !(min..=MAX_INTERVAL_MS).contains(&v) {
                return Err(format!("{p}.{name} = {v}: {min}..={MAX_INTERVAL_MS} ms"));
            }
        }
        for (name, v) in [
            ("high_per_source", self.high_per_source),
            ("medium_per_source", self.medium_per_source),
        ] {
            if v > crate::claims::MAX_PER_SOURCE {
                return Err(format!(
                    "{p}.{name} = {v}: at most {} datagrams/s (0 = unlimited)",
                    crate::claims::MAX_PER_SOURCE
                ));
            }
        }
        if self.spill_memory > MAX_SPILL_MEMORY {
            return Err(format!(
                "{p}.spill_memory = {}: at most {MAX_SPILL_MEMORY} bytes",
                self.spill_memory
            ));
        }
        if self.spill_file.is_some() && !(1..=MAX_SPILL_FILE_BYTES).contains(&self.spill_file_bytes)
        {
            return Err(format!(
                "{p}.spill_file_bytes = {}: 1..={MAX_SPILL_FILE_BYTES} bytes with a spill_file",
                self.spill_file_bytes
            ));
        }
        Ok(())
    }
}

// The classifier's queues (`crate::classify`): their bounds and checks.

/// Largest depth of one queue; [`crate::classify::Lanes::new`] refuses more (the pool holds `dta_wire::MAX_DATAGRAM` bytes
/// per queued datagram).
pub const MAX_QUEUE_DEPTH: usize = 1 << 16;

/// Queue depths of one translator thread, by priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Depths {
    pub low: usize,
    pub medium: usize,
    pub high: usize,
}

impl Depths {
    pub(crate) fn of(&self, p: Priority) -> usize {
        match p {
            Priority::Low => self.low,
            Priority::Medium => self.medium,
            Priority::High => self.high,
        }
    }

    pub(crate) fn total(&self) -> usize {
        self.low + self.medium + self.high
    }
}

/// The default of `classifier_shed_backlog`: the classifier sheds only once the kernel holds
/// half the socket's receive buffer.
pub const DEFAULT_SHED_BACKLOG: f64 = 0.5;

/// Check the queue depths: each 1..=[`MAX_QUEUE_DEPTH`]; the message names the setting.
pub fn validate_depths(depths: &Depths) -> Result<(), String> {
    for p in Priority::ALL {
        let d = depths.of(p);
        if d == 0 || d > MAX_QUEUE_DEPTH {
            return Err(format!(
                "classifier_queue_{} = {d}: the classifier's queue depth must be 1 to \
                 {MAX_QUEUE_DEPTH}",
                p.name()
            ));
        }
    }
    Ok(())
}

/// Check `classifier_shed_backlog`: a fraction in 0..=1.
pub fn validate_shed_backlog(f: f64) -> Result<(), String> {
    if (0.0..=1.0).contains(&f) {
        Ok(())
    } else {
        Err(format!(
            "classifier_shed_backlog = {f}: a fraction of the receive buffer in 0..=1"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<FlowControlConfig, String> {
        let c: FlowControlConfig = toml::from_str(t).map_err(|e| e.to_string())?;
        c.validate().map(|()| c)
    }

    #[test]
    fn flow_control_values_are_validated_with_messages() {
        assert_eq!(parse("").unwrap(), FlowControlConfig::default());
        let c = parse("write_budget = 1000\nmin_budget = 10\nspill_file = '/tmp/s'").unwrap();
        assert!(c.metered());
        for (t, says) in [
            ("low_threshold = 0.0", "low_threshold = 0"),
            ("medium_threshold = 1.5", "(0, 1]"),
            ("redundancy_threshold = -1.0", "redundancy_threshold"),
            (
                "low_threshold = 0.2\nmedium_threshold = 0.3",
                "below medium_threshold",
            ),
            ("burst = 0", "burst = 0"),
            ("write_budget = 100\nmin_budget = 200", "min_budget = 200"),
            ("adapt_interval_ms = 0", "adapt_interval_ms"),
            ("spill_memory = 99999999999", "spill_memory"),
            ("spill_file = 'x'\nspill_file_bytes = 0", "spill_file_bytes"),
            ("write_budgt = 1", "unknown field"),
        ] {
            let e = parse(t).unwrap_err();
            assert!(e.contains(says), "{t}: {e}");
        }
    }

    fn translator(t: &str) -> Result<TranslatorConfig, String> {
        let c: TranslatorConfig = toml::from_str(t).map_err(|e| e.to_string())?;
        c.validate().map(|()| c)
    }

    /// Every numeric setting has a range, checked before anything is allocated: the largest
    /// value TOML holds is refused with a message naming the setting, as is each bound's
    /// neighbour outside; the bounds themselves are accepted.
    #[test]
    fn translator_settings_are_validated_with_messages() {
        assert_eq!(translator("").unwrap(), TranslatorConfig::default());
        let huge = i64::MAX;
        for (name, low, high) in [
            ("threads", None, MAX_THREADS as i64),
            ("recv_batch", Some(1), MAX_RECV_BATCH as i64),
            (
                "recv_buffer",
                Some(*RECV_BUFFER_RANGE.start() as i64),
                *RECV_BUFFER_RANGE.end() as i64,
            ),
            ("recv_gather_us", None, MAX_RECV_GATHER_US as i64),
            ("nack_interval_ms", None, MAX_INTERVAL_MS as i64),
            ("resync_after_ms", None, MAX_INTERVAL_MS as i64),
            ("sketch_stall_ms", None, MAX_INTERVAL_MS as i64),
            ("postcard_timeout_ms", None, MAX_INTERVAL_MS as i64),
            ("append_flush_ms", None, MAX_INTERVAL_MS as i64),
            (
                "tracker_entries",
                Some(64),
                crate::sequence::MAX_ENTRIES as i64,
            ),
            (
                "postcard_cache_entries",
                Some(1),
                MAX_POSTCARD_CACHE_ENTRIES as i64,
            ),
            (
                "sketch_batch_columns",
                Some(1),
                MAX_SKETCH_BATCH_COLUMNS as i64,
            ),
            ("classifier_queue_low", Some(1), MAX_QUEUE_DEPTH as i64),
            (
                "rule_state_entries",
                Some(1),
                crate::rules::MAX_STATE_ENTRIES as i64,
            ),
        ] {
            let mut bad = vec![high + 1, huge];
            let mut good = vec![high];
            if let Some(low) = low {
                bad.push(low - 1);
                good.push(low);
            }
            for v in bad {
                let t = format!("{name} = {v}");
                let e = translator(&t).unwrap_err();
                // Beyond the field's type (u32) the TOML parser refuses it, quoting the line.
                assert!(e.contains(&format!("{name} = {v}")), "{t}: {e}");
            }
            for v in good {
                let t = format!("{name} = {v}");
                translator(&t).unwrap_or_else(|e| panic!("{t}: {e}"));
            }
        }
        for (t, says) in [
            (
                "classifier_shed_backlog = 1.5",
                "classifier_shed_backlog = 1.5",
            ),
            (
                "classifier_shed_backlog = nan",
                "classifier_shed_backlog = NaN",
            ),
            ("[flow_control]\nburst = 0", "burst = 0"),
        ] {
            let e = translator(t).unwrap_err();
            assert!(e.contains(says), "{t}: {e}");
        }
    }
}
