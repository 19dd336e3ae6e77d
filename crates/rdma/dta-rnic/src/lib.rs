//! `dta-rnic`: the DTA collector for real RDMA NICs ([DTA §5.3] "Collector RDMA
//! Service"). It maps every region of a collector whole (header page + data area), registers
//! each as one memory region with local write, remote write, remote read and remote atomic
//! access, listens with RDMA CM, accepts the translator's RC queue pairs and advertises the
//! regions with two SENDs, the prototype-compatible 16-byte message and the native one covering
//! every store, encoded by `dta_rdma::adv` so that a translator cannot tell this collector from
//! the software responder. After that the collector's CPU does nothing per report: the NIC
//! executes the translator's WRITEs and FETCH_ADDs; the CPU only reposts the receive WQE each
//! WRITE WITH IMMEDIATE (a flagged report) consumes and turns its immediate into a notice on the
//! region directory's notification ring (module `recv`). Everything that needs no device
//! (advertisements, access flags, registrations, configuration) builds and is tested by
//! default; the part that calls libibverbs / librdmacm (module `rnic`) exists only with the
//! `rdma-core` cargo feature, which needs Debian's `libibverbs-dev librdmacm-dev libclang-dev
//! pkg-config`.

pub mod config;
pub mod plan;
pub mod recv;
#[cfg(feature = "rdma-core")]
pub mod rnic;

pub use config::{parse_listen, RnicConfig, RnicConfigError, DEFAULT_PORT};
/// The advertisement formats, shared with the software responder (`docs/rdma.md`).
pub use dta_rdma::adv;
pub use plan::{adverts, Adverts, MappedRegion, PlanError, Registration, REGION_ACCESS};
pub use recv::{RecvQueue, RecvStats, MAX_RECV_QUEUE};
