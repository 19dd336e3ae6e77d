//! `dta-rnic`: the DTA collector for real RDMA NICs (issue 3; 001 §5.3 "Collector RDMA
//! Service"). It maps every region of a collector whole (header page + data area), registers
//! each as one memory region with local write, remote write, remote read and remote atomic
//! access, listens with RDMA CM, accepts the translator's RC queue pairs and advertises the
//! regions with SENDs (the prototype-compatible 16-byte message, then one native message per
//! store, [`advert`]). After that the collector's CPU does nothing per report: the NIC executes
//! the translator's WRITEs and FETCH_ADDs. Everything that needs no device (advertisement bytes,
//! access flags, registrations, configuration) builds and is tested by default; the part that
//! calls libibverbs / librdmacm (module `rnic`) exists only with the `rdma-core` cargo feature, which
//! needs Debian's `libibverbs-dev librdmacm-dev libclang-dev pkg-config`.

pub mod advert;
pub mod config;
pub mod plan;
#[cfg(feature = "rdma-core")]
pub mod rnic;

pub use config::{parse_listen, RnicConfig, RnicConfigError, DEFAULT_PORT};
pub use plan::{adverts, Adverts, MappedRegion, PlanError, Registration, REGION_ACCESS};
