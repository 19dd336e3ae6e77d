//! The INT sink's XDP fast path (`bpf/int_xdp.bpf.c`): the loader, the flows it is told about
//! (a BPF hash map: flow key → FlowCache slot, path, histogram blocks), and the aggregates it
//! writes (three `BPF_F_MMAPABLE` arrays, mapped here: per slot the report count, per hop and
//! metric the sum and the latest value; per CPU, switch block, metric and log2 bucket a
//! count; a bit per slot written since the sink last looked), which [`IntXdp::take`] and
//! [`IntXdp::take_hist`] read as differences from what they read last (the program adds to the
//! sums and counts without locked instructions, a slot's report count excepted, so they are
//! never reset under it), and [`IntXdp::changed`] clears.
//! `dta int-sink --xdp IFACE` puts it in front of its sink threads (`dta_int::fast`).

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{
    AtomicU32, AtomicU64,
    Ordering::{Acquire, Relaxed, SeqCst},
};

use aya::maps::{Array, HashMap as BpfHashMap, Map, PerCpuArray};
use aya::programs::Xdp;
use aya::{Ebpf, EbpfLoader};
use serde::Serialize;

use crate::{AttachMode, XdpError};

pub(crate) static INT_PROGRAM: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/int_xdp.o"));

/// Hops per flow the program aggregates (`MAX_HOPS` in the C source).
pub const INT_MAX_HOPS: usize = 5;
/// Metrics per hop (hop latency, queue occupancy, egress tx utilisation).
pub const INT_METRICS: usize = 3;
/// Log2 buckets of a u32 value (`dta_int::Buckets::Log2`).
pub const INT_BUCKETS: usize = 33;
/// Bytes of the program's histogram counters at most (one part per possible CPU, each
/// [`INT_METRICS`] × [`INT_BUCKETS`] counters of 8 bytes per switch): 64 MiB, 4096 switches on
/// up to 20 CPUs. Past it the program counts fewer switches; flows through the others stay the
/// sink's.
pub const INT_HIST_BUDGET: u64 = 64 << 20;

/// What the program is told at load.
#[derive(Debug, Clone)]
pub struct IntXdpConfig {
    /// UDP destination port of the telemetry reports.
    pub port: u16,
    /// UDP destination port of INT over UDP in the reported packets.
    pub int_port: u16,
    /// The one INT instruction bitmap taken (node id, hop latency, queue, egress tx util).
    pub instructions: u16,
    /// Flow slots (the sink's FlowCache capacity); also the most flows known at once.
    pub flows: u32,
    /// Switches with histogram counters (fewer where their counters, one part per possible CPU,
    /// would pass [`INT_HIST_BUDGET`]).
    pub switches: u32,
    /// The sources reports are taken from (`[sink] allow`); others are dropped unparsed and
    /// counted [`IntXdpStats::source_not_allowed`].
    pub allow: dta_wire::prefix::AllowList,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct IntCfg {
    enabled: u32,
    port: u32,
    int_port: u32,
    instructions: u32,
    th_latency: u32,
    th_queue: u32,
    th_util: u32,
    th_path: u32,
    slots: u32,
    blocks: u32,
    /// 1: what goes to the sink goes to its AF_XDP sockets ([`IntXdp::redirect_to`]).
    xsk: u32,
    /// CPUs with a part of `int_hist` (the possible CPUs).
    cpus: u32,
}
// SAFETY: plain C struct of u32s, no padding.
unsafe impl aya::Pod for IntCfg {}

#[repr(C)]
#[derive(Clone, Copy)]
struct FlowKey([u8; 16]);
// SAFETY: a byte array.
unsafe impl aya::Pod for FlowKey {}

#[repr(C)]
#[derive(Clone, Copy)]
struct Known {
    slot: u32,
    hops: u32,
    node: [u32; INT_MAX_HOPS],
    block: [u32; INT_MAX_HOPS],
}
// SAFETY: plain C struct of u32s, no padding.
unsafe impl aya::Pod for Known {}

/// `struct flow_agg` of the C source, as mapped (the program adds with atomic instructions).
#[repr(C)]
struct FlowAgg {
    packets: AtomicU64,
    last_ns: AtomicU64,
    sum: [[AtomicU64; INT_METRICS]; INT_MAX_HOPS],
    last: [[AtomicU32; INT_METRICS]; INT_MAX_HOPS],
    seq: AtomicU32,
}

/// One flow's aggregate as taken ([`IntXdp::take`]); `last_mono_ns` on `CLOCK_MONOTONIC` (its coarse
/// reading, within a tick).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntFlowAgg {
    pub packets: u64,
    pub hops: u8,
    pub last_mono_ns: u64,
    /// Telemetry Report sequence number of the latest report taken.
    pub seq: u32,
    /// `last` and `seq` are a report's taken since the flow was learned or last taken: one
    /// newer, by the reporter's numbering, than the one the sink handed over; false, they are
    /// what the sink already had (or an earlier flow's of the slot).
    pub latest: bool,
    pub sum: [[u64; INT_METRICS]; INT_MAX_HOPS],
    pub last: [[u32; INT_METRICS]; INT_MAX_HOPS],
}

/// The program's counters (`enum` at the top of the C source), summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IntXdpStats {
    pub packets: u64,
    /// Reports aggregated in the program and dropped.
    pub fast: u64,
    pub pass_other: u64,
    pub pass_shape: u64,
    pub pass_unknown_flow: u64,
    pub pass_path: u64,
    pub pass_event: u64,
    /// Dropped unparsed: a source outside `[sink] allow`.
    pub source_not_allowed: u64,
    /// Passed: an outer IPv4 header with options (the sink parses it).
    pub pass_ip_options: u64,
    /// Passed: an outer IPv4 fragment (the stack reassembles it for the sink).
    pub pass_fragment: u64,
    /// Of the reports passed to the sink (`pass_shape`, `pass_unknown_flow`, `pass_path`,
    /// `pass_event`), those handed to one of its AF_XDP sockets ([`IntXdp::redirect_to`])
    /// instead of the stack; not a verdict of its own.
    pub af_xdp: u64,
    /// `bpf_prog_info` run time and count (with `kernel.bpf_stats_enabled` = 1; else 0).
    pub run_time_ns: u64,
    pub run_count: u64,
}

impl IntXdpStats {
    /// What the program did with the frames it saw, by action (the `action` label of
    /// `dta_int_sink_xdp_program_total`): aggregated in the driver (`fast`), passed up to the
    /// sink (`pass_*`), dropped (`source_not_allowed`).
    pub fn actions(&self) -> [(&'static str, u64); 9] {
        [
            ("fast", self.fast),
            ("pass_other", self.pass_other),
            ("pass_shape", self.pass_shape),
            ("pass_unknown_flow", self.pass_unknown_flow),
            ("pass_path", self.pass_path),
            ("pass_event", self.pass_event),
            ("pass_ip_options", self.pass_ip_options),
            ("pass_fragment", self.pass_fragment),
            ("source_not_allowed", self.source_not_allowed),
        ]
    }
}

/// The program's verdict counters (`C_COUNT` in the C source); `C_AF_XDP` follows them.
const N_VERDICTS: usize = 9;

/// A shared mapping of an mmapable array map.
struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is plain shared memory, read and written with atomics.
unsafe impl Send for Mapping {}

impl Mapping {
    fn new(ebpf: &Ebpf, name: &str, bytes: usize) -> Result<Mapping, XdpError> {
        let map = ebpf
            .map(name)
            .ok_or_else(|| XdpError::MissingMap(name.into()))?;
        let Map::Array(data) = map else {
            return Err(XdpError::MissingMap(name.into()));
        };
        let page = 4096;
        let len = bytes.div_ceil(page) * page;
        // SAFETY: a shared, writable mapping of the map's value area (an mmapable array), kept
        // for the life of `self` and unmapped in Drop. Populated: the kernel allocated the
        // array when it created the map, so this costs page-table entries only, at load,
        // instead of a fault at the first touch of each page (a flow learned, a slot drained).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                data.fd().as_fd().as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(XdpError::Io(
                format!("mapping {name}"),
                std::io::Error::last_os_error(),
            ));
        }
        Ok(Mapping { ptr, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this length.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// The loaded fast path.
pub struct IntXdp {
    ebpf: Ebpf,
    flows: Mapping,
    hist: Mapping,
    /// `int_changed`: a bit per slot, `slots / 64` words rounded up.
    changed: Mapping,
    /// Per (block, metric, bucket), the sum over CPUs of the cumulative counts as
    /// [`Self::take_hist`] read it last.
    hist_read: Vec<u64>,
    cfg: IntCfg,
    /// Per slot, the hop count of the flow learned there.
    hops: Vec<u8>,
    /// Per slot, the cumulative words as [`Self::take`] read them last.
    read: Vec<Read>,
    /// Histogram block of each switch, and the switch of each block.
    block_of: HashMap<u32, u32>,
    nodes: Vec<u32>,
    attached: Option<(String, AttachMode)>,
}

/// A slot's cumulative report count and sums as last read, and its latest report's sequence
/// number as last read or handed over.
#[derive(Clone, Copy, Default)]
struct Read {
    packets: u64,
    sum: [[u64; INT_METRICS]; INT_MAX_HOPS],
    seq: u32,
}

fn key16(key: &[u8; 13]) -> FlowKey {
    let mut k = [0u8; 16];
    k[..13].copy_from_slice(key);
    FlowKey(k)
}

impl IntXdp {
    /// Load the program sized for `cfg` (nothing attached: [`IntXdp::attach`]); it takes nothing
    /// until [`IntXdp::set_thresholds`] enables it.
    pub fn load(cfg: &IntXdpConfig) -> Result<IntXdp, XdpError> {
        if INT_PROGRAM.is_empty() {
            return Err(XdpError::NotBuilt);
        }
        let slots = cfg.flows.max(1);
        let cpus = aya::util::nr_cpus()
            .map_err(|(what, e)| XdpError::Io(what.into(), e))?
            .max(1) as u64;
        let per_block = (INT_METRICS * INT_BUCKETS) as u64 * 8;
        let blocks = (cfg.switches as u64)
            .min(INT_HIST_BUDGET / (per_block * cpus))
            .max(1) as u32;
        let counters = cpus * blocks as u64 * (INT_METRICS * INT_BUCKETS) as u64;
        if counters > u32::MAX as u64 {
            return Err(XdpError::TooLarge("int_hist".into(), counters * 8));
        }
        let mut ebpf = EbpfLoader::new()
            .set_max_entries("int_known", slots)
            .set_max_entries("int_flows", slots)
            .set_max_entries("int_changed", slots.div_ceil(64))
            // An element per CPU and switch block (`struct hist_block`: its metrics' buckets).
            .set_max_entries("int_hist", (cpus * blocks as u64) as u32)
            .load(INT_PROGRAM)?;
        let flows = Mapping::new(
            &ebpf,
            "int_flows",
            slots as usize * std::mem::size_of::<FlowAgg>(),
        )?;
        let hist = Mapping::new(&ebpf, "int_hist", counters as usize * 8)?;
        let changed = Mapping::new(&ebpf, "int_changed", slots.div_ceil(64) as usize * 8)?;
        let c = IntCfg {
            enabled: 0,
            port: u32::from(cfg.port),
            int_port: u32::from(cfg.int_port),
            instructions: u32::from(cfg.instructions),
            th_latency: u32::MAX,
            th_queue: u32::MAX,
            th_util: u32::MAX,
            th_path: u32::MAX,
            slots,
            blocks,
            xsk: 0,
            cpus: cpus as u32,
        };
        crate::allow::install(&mut ebpf, &cfg.allow)?;
        let prog: &mut Xdp = ebpf
            .program_mut("int_xdp")
            .ok_or_else(|| XdpError::MissingMap("program int_xdp".into()))?
            .try_into()?;
        prog.load()?;
        let mut x = IntXdp {
            ebpf,
            flows,
            hist,
            changed,
            hist_read: vec![0; blocks as usize * INT_METRICS * INT_BUCKETS],
            cfg: c,
            hops: vec![0; slots as usize],
            read: vec![Read::default(); slots as usize],
            block_of: HashMap::new(),
            nodes: Vec::new(),
            attached: None,
        };
        x.write_cfg()?;
        Ok(x)
    }

    fn write_cfg(&mut self) -> Result<(), XdpError> {
        let mut a: Array<_, IntCfg> = Array::try_from(
            self.ebpf
                .map_mut("int_cfg")
                .ok_or_else(|| XdpError::MissingMap("int_cfg".into()))?,
        )?;
        a.set(0, self.cfg, 0)?;
        Ok(())
    }

    /// Attach to `iface`: native mode if the driver has it (and not `force_generic`), else
    /// generic mode.
    pub fn attach(&mut self, iface: &str, force_generic: bool) -> Result<AttachMode, XdpError> {
        let mode = crate::attach_program(&mut self.ebpf, "int_xdp", iface, force_generic)?;
        self.attached = Some((iface.to_string(), mode));
        Ok(mode)
    }

    /// Enable (or not) the program, with the event thresholds: a report with a value above one
    /// goes to userspace.
    pub fn set_thresholds(
        &mut self,
        enabled: bool,
        latency: u32,
        queue: u32,
        util: u32,
        path: u32,
    ) -> Result<(), XdpError> {
        let c = IntCfg {
            enabled: u32::from(enabled),
            th_latency: latency,
            th_queue: queue,
            th_util: util,
            th_path: path,
            ..self.cfg
        };
        if c.enabled != self.cfg.enabled
            || (c.th_latency, c.th_queue, c.th_util, c.th_path)
                != (
                    self.cfg.th_latency,
                    self.cfg.th_queue,
                    self.cfg.th_util,
                    self.cfg.th_path,
                )
        {
            self.cfg = c;
            self.write_cfg()?;
        }
        Ok(())
    }

    /// Flow `key` (13 bytes: src, dst, sport, dport, proto) at `slot` takes path `nodes` (hop 0
    /// first, at most [`INT_MAX_HOPS`]).
    /// `seq` is the Telemetry Report sequence number (its 22 bits) of the flow's latest report
    /// the sink handled: the program takes latest values only from newer reports.
    pub fn learn(
        &mut self,
        key: &[u8; 13],
        slot: u32,
        nodes: &[u32],
        seq: u32,
    ) -> Result<(), XdpError> {
        if slot >= self.cfg.slots || nodes.is_empty() || nodes.len() > INT_MAX_HOPS {
            return Err(XdpError::MissingMap(format!(
                "flow slot {slot} of {} with {} hops",
                self.cfg.slots,
                nodes.len()
            )));
        }
        let mut k = Known {
            slot,
            hops: nodes.len() as u32,
            node: [0; INT_MAX_HOPS],
            block: [u32::MAX; INT_MAX_HOPS],
        };
        for (i, &n) in nodes.iter().enumerate() {
            k.node[i] = n;
            k.block[i] = match self.block_of.get(&n) {
                Some(&b) => b,
                None if (self.nodes.len() as u32) < self.cfg.blocks => {
                    let b = self.nodes.len() as u32;
                    self.nodes.push(n);
                    self.block_of.insert(n, b);
                    b
                }
                // No block left: the program counts no histogram for it, so it cannot take the
                // flow's reports.
                None => {
                    return Err(XdpError::MissingMap(format!(
                        "histogram blocks: all {} switches in use",
                        self.cfg.blocks
                    )))
                }
            };
        }
        self.hops[slot as usize] = nodes.len() as u8;
        // Before the flow is known to the program: its first report compares with this.
        Self::agg(&self.flows, slot).seq.store(seq, Relaxed);
        self.read[slot as usize].seq = seq;
        let mut m: BpfHashMap<_, FlowKey, Known> = BpfHashMap::try_from(
            self.ebpf
                .map_mut("int_known")
                .ok_or_else(|| XdpError::MissingMap("int_known".into()))?,
        )?;
        m.insert(key16(key), k, 0)?;
        Ok(())
    }

    /// Flow `key` is no longer taken.
    pub fn forget(&mut self, key: &[u8; 13]) {
        if let Some(map) = self.ebpf.map_mut("int_known") {
            if let Ok(mut m) = BpfHashMap::<_, FlowKey, Known>::try_from(map) {
                let _ = m.remove(&key16(key));
            }
        }
    }

    /// Slot `slot` of the mapped `int_flows` (`flows`); the caller checked `slot < slots`.
    fn agg(flows: &Mapping, slot: u32) -> &FlowAgg {
        debug_assert!(slot as usize * std::mem::size_of::<FlowAgg>() < flows.len);
        // SAFETY: `slot` is below the map's entries (callers check), the mapping holds
        // `slots` elements of `struct flow_agg` (200 bytes, 8-aligned), alive while `flows` is.
        unsafe { &*(flows.ptr as *const FlowAgg).add(slot as usize) }
    }

    /// Append to `out`, in ascending order, the slots of `from..to` the program wrote since the
    /// last call that covered them, clearing their bits: the slots a drain has to
    /// [`Self::take`] (the others took no report since). Its work is a word per 64 slots and a
    /// take per slot written, not a read of every slot.
    pub fn changed(&mut self, from: u32, to: u32, out: &mut Vec<u32>) {
        let to = to.min(self.cfg.slots);
        if from >= to {
            return;
        }
        // SAFETY: the mapping holds `slots.div_ceil(64)` u64 words, alive while
        // `self.changed` is; the program writes them with atomic instructions.
        let words = unsafe {
            std::slice::from_raw_parts(
                self.changed.ptr as *const AtomicU64,
                self.cfg.slots.div_ceil(64) as usize,
            )
        };
        for w in from / 64..=(to - 1) / 64 {
            // This range's bits of word `w` (another sink thread may own the rest).
            let lo = from.max(w * 64) - w * 64;
            let hi = to.min(w * 64 + 64) - w * 64;
            let mask = (u64::MAX >> (64 - hi)) & (u64::MAX << lo);
            let word = &words[w as usize];
            if word.load(Relaxed) & mask == 0 {
                continue;
            }
            // A full barrier before the slots are read, as the program's fetching add is one
            // before it reads the bit: a report either finds its bit clear and sets it again,
            // or is seen by the take that follows.
            let mut bits = word.fetch_and(!mask, SeqCst) & mask;
            while bits != 0 {
                out.push(w * 64 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
    }

    /// Take slot `slot`'s aggregate since the last take: the differences of its cumulative
    /// words from what this read last; `None` if it took no report since. The count is read
    /// first: the program writes it after a report's sums, so sums read after it include every
    /// report it counts (and perhaps part of the next, which the next take then leaves out).
    pub fn take(&mut self, slot: u32) -> Option<IntFlowAgg> {
        if slot >= self.cfg.slots {
            return None;
        }
        let a = Self::agg(&self.flows, slot);
        let packets = a.packets.load(Acquire);
        let was = &mut self.read[slot as usize];
        if packets == was.packets {
            return None;
        }
        let seq = a.seq.load(Relaxed);
        let mut out = IntFlowAgg {
            packets: packets.wrapping_sub(was.packets),
            hops: self.hops[slot as usize],
            last_mono_ns: a.last_ns.load(Relaxed),
            seq,
            latest: seq != was.seq,
            ..IntFlowAgg::default()
        };
        was.packets = packets;
        was.seq = seq;
        for h in 0..INT_MAX_HOPS {
            for m in 0..INT_METRICS {
                let sum = a.sum[h][m].load(Relaxed);
                out.sum[h][m] = sum.wrapping_sub(was.sum[h][m]);
                was.sum[h][m] = sum;
                out.last[h][m] = a.last[h][m].load(Relaxed);
            }
        }
        Some(out)
    }

    /// Hand every histogram count since the last call (switch, metric index, log2 bucket,
    /// count) to `add`: the CPUs' cumulative counts summed, less the sum read last.
    pub fn take_hist(&mut self, add: &mut dyn FnMut(u32, usize, u8, u64)) {
        let part = self.cfg.blocks as usize * INT_METRICS * INT_BUCKETS;
        // SAFETY: the mapping holds `cpus * blocks * METRICS * BUCKETS` u64 counters, alive
        // while `self.hist` is; the program writes them with aligned 8-byte stores.
        let c = unsafe {
            std::slice::from_raw_parts(
                self.hist.ptr as *const AtomicU64,
                self.cfg.cpus as usize * part,
            )
        };
        for (b, &node) in self.nodes.iter().enumerate() {
            for m in 0..INT_METRICS {
                for k in 0..INT_BUCKETS {
                    let i = (b * INT_METRICS + m) * INT_BUCKETS + k;
                    let sum = (0..self.cfg.cpus as usize)
                        .map(|cpu| c[cpu * part + i].load(Relaxed))
                        .fold(0u64, u64::wrapping_add);
                    let was = std::mem::replace(&mut self.hist_read[i], sum);
                    if sum != was {
                        add(node, m, k as u8, sum.wrapping_sub(was));
                    }
                }
            }
        }
    }

    /// The program's counters and run time.
    pub fn stats(&self) -> Result<IntXdpStats, XdpError> {
        let arr: PerCpuArray<_, u64> = PerCpuArray::try_from(
            self.ebpf
                .map("int_stats")
                .ok_or_else(|| XdpError::MissingMap("int_stats".into()))?,
        )?;
        let mut c = [0u64; N_VERDICTS + 1];
        for (i, v) in c.iter_mut().enumerate() {
            *v = arr.get(&(i as u32), 0)?.iter().sum();
        }
        // One counter per verdict: the frames seen are their sum.
        let packets = c[..N_VERDICTS].iter().sum();
        let prog: &Xdp = self
            .ebpf
            .program("int_xdp")
            .ok_or_else(|| XdpError::MissingMap("program int_xdp".into()))?
            .try_into()?;
        let info = prog.info()?;
        Ok(IntXdpStats {
            packets,
            fast: c[0],
            pass_other: c[1],
            pass_shape: c[2],
            pass_unknown_flow: c[3],
            pass_path: c[4],
            pass_event: c[5],
            source_not_allowed: c[6],
            pass_ip_options: c[7],
            pass_fragment: c[8],
            af_xdp: c[N_VERDICTS],
            run_time_ns: info.run_time().as_nanos() as u64,
            run_count: info.run_count(),
        })
    }

    /// Hand what goes to the sink on receive queue `queue` to the AF_XDP socket `fd` (bound
    /// to that queue of the interface the program is attached to) instead of the stack: the
    /// fast path and AF_XDP receive with one program on one interface. A queue without a
    /// socket keeps passing to the stack.
    pub fn redirect_to(&mut self, queue: u32, fd: std::os::fd::RawFd) -> Result<(), XdpError> {
        let mut m: aya::maps::XskMap<_> = aya::maps::XskMap::try_from(
            self.ebpf
                .map_mut("xsks")
                .ok_or_else(|| XdpError::MissingMap("xsks".into()))?,
        )?;
        m.set(queue, fd, 0)?;
        if self.cfg.xsk == 0 {
            self.cfg.xsk = 1;
            self.write_cfg()?;
        }
        Ok(())
    }

    /// The interface and mode the program is attached with, if any.
    pub fn attached(&self) -> Option<(&str, AttachMode)> {
        self.attached.as_ref().map(|(i, m)| (i.as_str(), *m))
    }

    /// Run the program once on Ethernet frame `frame` (`BPF_PROG_TEST_RUN`, attached or not):
    /// its verdict (`XDP_DROP` 1, `XDP_PASS` 2), its maps updated as for a received frame. For
    /// tests of what the program does with a report (aya has no wrapper for the command).
    pub fn test_run(&self, frame: &[u8]) -> Result<u32, XdpError> {
        let prog: &Xdp = self
            .ebpf
            .program("int_xdp")
            .ok_or_else(|| XdpError::MissingMap("program int_xdp".into()))?
            .try_into()?;
        let fd = prog.fd()?.as_fd().as_raw_fd();
        // union bpf_attr, its `test` member (include/uapi/linux/bpf.h): prog_fd, retval,
        // data_size_in, data_size_out, data_in, data_out, repeat, duration; the rest zero.
        #[repr(C)]
        #[derive(Default)]
        struct TestRun {
            prog_fd: u32,
            retval: u32,
            data_size_in: u32,
            data_size_out: u32,
            data_in: u64,
            data_out: u64,
            repeat: u32,
            duration: u32,
            rest: [u64; 8],
        }
        let mut attr = TestRun {
            prog_fd: fd as u32,
            data_size_in: frame.len() as u32,
            data_in: frame.as_ptr() as u64,
            repeat: 1,
            ..TestRun::default()
        };
        const BPF_PROG_TEST_RUN: libc::c_long = 10;
        // SAFETY: `attr` is a valid `bpf_attr` prefix of its size; the kernel reads `frame`
        // (alive for the call) and writes `retval` and `duration` into `attr`.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_TEST_RUN,
                &mut attr as *mut TestRun,
                std::mem::size_of::<TestRun>(),
            )
        };
        if r < 0 {
            return Err(XdpError::Io(
                "BPF_PROG_TEST_RUN".into(),
                std::io::Error::last_os_error(),
            ));
        }
        Ok(attr.retval)
    }
}
