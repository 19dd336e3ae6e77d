//! The options of `dta translator --xdp IFACE` (the XDP translator, `dta_node::xdp`).

use std::path::PathBuf;

use clap::Args;

#[derive(Args, Clone, Default)]
pub struct XdpArgs {
    /// Apply Key-Write, Key-Increment and Append in the driver with XDP on this interface; the
    /// rest goes to the userspace translator.
    #[arg(long)]
    pub xdp: Option<String>,
    /// Attach in generic (SKB) mode even if the driver supports native XDP.
    #[arg(long, requires = "xdp")]
    pub xdp_generic: bool,
    /// Pin the XDP stores (maps) in this bpffs directory while the translator runs, for `dta
    /// query --region PIN/NAME`.
    #[arg(long, requires = "xdp", default_value = "/sys/fs/bpf/dta")]
    pub xdp_pin: PathBuf,
    /// Leave the pins behind at exit (they then hold the stores as they were at the stop).
    #[arg(long, requires = "xdp")]
    pub xdp_keep_pins: bool,
}

impl XdpArgs {
    pub fn options(&self) -> Option<dta_node::xdp::XdpOptions> {
        Some(dta_node::xdp::XdpOptions {
            iface: self.xdp.clone()?,
            generic: self.xdp_generic,
            pin: self.xdp_pin.clone(),
            keep_pins: self.xdp_keep_pins,
        })
    }
}
