//! The drop-only XDP program (`bpf/xdp_drop.bpf.c`): the baseline of the XDP benchmark
//! (docs/benchmarks.md §4). It
//! counts every frame in a per-CPU map and drops it, so its packet rate is the ceiling an XDP
//! program can reach on the interface; the XDP translator is measured against it in the same run.

use aya::maps::PerCpuArray;
use aya::programs::{Xdp, XdpFlags};
use aya::Ebpf;

use crate::{AttachMode, XdpError};

pub(crate) static DROP_PROGRAM: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdp_drop.o"));

/// The loaded and attached drop-only program; detached when dropped.
pub struct DropProgram {
    ebpf: Ebpf,
    mode: AttachMode,
}

impl DropProgram {
    /// Load the program and attach it to `iface` (native mode, else generic mode).
    pub fn load_attach(iface: &str) -> Result<DropProgram, XdpError> {
        if DROP_PROGRAM.is_empty() {
            return Err(XdpError::NotBuilt);
        }
        let mut ebpf = Ebpf::load(DROP_PROGRAM)?;
        let prog: &mut Xdp = ebpf
            .program_mut("xdp_drop")
            .ok_or_else(|| XdpError::MissingMap("program xdp_drop".into()))?
            .try_into()?;
        prog.load()?;
        let mode = match prog.attach(iface, XdpFlags::DRV_MODE) {
            Ok(_) => AttachMode::Native,
            Err(_) => {
                prog.attach(iface, XdpFlags::SKB_MODE)?;
                AttachMode::Generic
            }
        };
        Ok(DropProgram { ebpf, mode })
    }

    /// How the program is attached.
    pub fn mode(&self) -> AttachMode {
        self.mode
    }

    /// Frames counted (and dropped), summed over CPUs.
    pub fn packets(&self) -> Result<u64, XdpError> {
        let arr: PerCpuArray<_, u64> = PerCpuArray::try_from(
            self.ebpf
                .map("drop_count")
                .ok_or_else(|| XdpError::MissingMap("drop_count".into()))?,
        )?;
        Ok(arr.get(&0, 0)?.iter().sum())
    }
}
