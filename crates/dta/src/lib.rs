//! The `dta` command line's library half: configuration file, output formatting, the load
//! generator command and the demo, so that tests can drive them without a subprocess.

pub mod config;
pub mod demo;
pub mod int_http;
pub mod int_steer;
pub mod ops;
pub mod output;
pub mod report;
pub mod systems_cmd;
