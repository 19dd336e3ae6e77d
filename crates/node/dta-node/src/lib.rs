//! A DTA node: every service of `dta`, assembled from one configuration by one builder each, so
//! that every way of running it keeps the same promises (docs/modes.md).
//!
//! Between the engines (`dta-translator`, `dta-collector`, `dta-int`, the RDMA and XDP crates)
//! and the front-ends (the `dta` command line, the C ABI, the demo, the benches), it owns:
//! - the configuration files and their validation ([`config`]);
//! - the ingress policy, compiled once and applied to every translator of every mode by one
//!   function ([`policy::IngressPolicy::apply`]): global and per-store allow-lists, rules, the
//!   write meter, notifications; the XDP programs get the same policy as data;
//! - which mode keeps which promise, and the refusal of a setting a mode cannot honour
//!   ([`modes`]);
//! - one builder per service: the translator in shared memory with threads or the classifier
//!   ([`translator`]), with XDP ([`xdp`]) and over RoCEv2 ([`rdma`]); the collector with its HTTP
//!   API and console ([`collector`]); the software responder ([`rdma`]); the rdma-core
//!   collector ([`rnic`], feature `rdma-core`); the INT sink with its receive loop, flow
//!   steering, XDP fast path, HTTP routes and exports ([`int_sink`]); the node embedded in a C
//!   program ([`embedded`]);
//! - what every service shares: metrics and health servers, logging ([`ops`]), signals
//!   ([`signals`]), live reloads ([`reload`]) and the flush on stop.
//!
//! Front-ends parse their input, call a builder and print; none depends on another.

pub mod af_xdp;
pub mod collector;
pub mod config;
pub mod embedded;
pub mod exports;
pub mod int_check;
pub mod int_http;
pub mod int_sink;
pub mod interfaces;
pub mod modes;
pub mod ops;
pub mod policy;
pub mod rdma;
pub mod reload;
pub mod signals;
pub mod translator;
pub mod xdp;

#[cfg(feature = "rdma-core")]
pub mod rnic;

pub use config::{Config, IntSinkFile};
pub use modes::Mode;
pub use policy::IngressPolicy;
