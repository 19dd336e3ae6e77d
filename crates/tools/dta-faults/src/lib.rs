//! The fault-injection harness of `scripts/faults.sh` (`docs/testing.md`, "Faults and
//! overload"):
//!
//! - [`impair`]: seeded loss, duplication, reordering and delay applied to DTA datagrams and
//!   counted by priority, behind the `dta-impair` forwarder (userspace: the test machines have
//!   no `sch_netem`).
//! - [`mmsg`]: batched UDP receive and send for the forwarder.
//! - [`check`]: what a `dta report` run of Key-Increment reports must have left in the store,
//!   compared key by key with what the store answers (`dta-faults check-ki`).

#![warn(missing_docs)]

pub mod check;
pub mod impair;
