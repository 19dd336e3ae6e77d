//! The `dta` command line's library half: output formatting, the load generator command, the
//! monitoring systems' command half and the demo, so that tests can drive them without a
//! subprocess. Every service is built by `dta_node`.

pub mod demo;
pub mod output;
pub mod report;
pub mod systems_cmd;
