//! The frames the interfaces a service receives on dropped before any socket or XDP program of
//! it saw them: a NIC's full receive ring (`missed`), a full queue between the driver and the
//! stack (`dropped`). The sockets' own drops (`*_kernel_drops_total`) and the AF_XDP rings'
//! (`*_af_xdp_kernel_drops_total`) begin where these end; together they are every report the
//! host lost.
//!
//! Which interfaces: the ones a mode names (`--xdp`, `--af-xdp`, RoCEv2's `--iface`) and the
//! ones holding the listen address when the service starts (every interface that is up for a
//! wildcard address; [`dta_net::iface::receiving`]). Exported at each scrape as
//! `PREFIX_interface_rx_drops_total{interface,reason}` and in the summary: what the kernel
//! counted while the service ran.

use std::net::IpAddr;
use std::sync::Arc;

use dta_net::iface::RxDrops;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

/// The interfaces a service receives on, with their counters when it started.
#[derive(Debug)]
pub struct InterfaceDrops {
    service: &'static str,
    prefix: &'static str,
    /// Name and counters at start (`None`: the interface could not be read then).
    start: Vec<(String, Option<RxDrops>)>,
}

impl InterfaceDrops {
    /// The interfaces `named` and those receiving on `listen` of `service` (`translator`,
    /// `int-sink`: its metric prefix), their counters read now. An interface list the kernel
    /// refuses is said in the log and leaves the named ones.
    pub fn watch(service: &'static str, listen: IpAddr, named: &[&str]) -> Arc<InterfaceDrops> {
        let mut names: Vec<String> = named.iter().map(|n| n.to_string()).collect();
        match dta_net::iface::receiving(listen) {
            Ok(n) => names.extend(n),
            Err(e) => tracing::warn!("listing the interfaces that receive on {listen}: {e}"),
        }
        names.sort();
        names.dedup();
        names.truncate(dta_net::iface::MAX_INTERFACES);
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let now = RxDrops::read_each(&refs).unwrap_or_else(|_| vec![None; names.len()]);
        let start = names.into_iter().zip(now).collect();
        Arc::new(InterfaceDrops {
            service,
            prefix: crate::ops::metric_prefix(service),
            start,
        })
    }

    /// The interfaces watched.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.start.iter().map(|(n, _)| n.as_str())
    }

    /// What each interface dropped since the service started (those that could not be read at
    /// start or now left out), from one listing.
    pub fn since_start(&self) -> Vec<(&str, RxDrops)> {
        let names: Vec<&str> = self.names().collect();
        let now = RxDrops::read_each(&names).unwrap_or_default();
        self.start
            .iter()
            .zip(now)
            .filter_map(|((name, base), now)| Some((name.as_str(), now?.since(base.as_ref()?))))
            .collect()
    }

    /// What each interface dropped since the service started, by reason, with a warning in the
    /// log for each that dropped any: `{"eth0": {"dropped": 0, "missed": 12, "fifo": 0,
    /// "over": 0}}`. An interface that could not be read at start or now is left out.
    pub fn snapshot(&self) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        for (name, d) in self.since_start() {
            if d.total() > 0 {
                tracing::warn!(
                    "{}: interface {name} dropped {} received frames while it ran \
                     ({}), before any socket or XDP program saw them; see \
                     {}_interface_rx_drops_total",
                    self.service,
                    d.total(),
                    d.by_reason()
                        .iter()
                        .filter(|(_, n)| *n > 0)
                        .map(|(r, n)| format!("{r} {n}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    self.prefix,
                );
            }
            out.insert(
                name.to_string(),
                serde_json::Value::Object(
                    d.by_reason()
                        .iter()
                        .map(|(r, n)| (r.to_string(), (*n).into()))
                        .collect(),
                ),
            );
        }
        out.into()
    }

    /// The `/metrics` family, read at each scrape.
    pub fn metrics(self: &Arc<Self>) -> InterfaceMetrics {
        InterfaceMetrics(self.clone())
    }
}

/// `PREFIX_interface_rx_drops_total{interface,reason}`: frames an interface the service
/// receives on dropped on receive since the service started, as the kernel counts them
/// (reasons `dropped`, `missed`, `fifo`, `over`: [`RxDrops`]). Counted from the start, not from
/// when the interface came up: what the host dropped before belongs to no service's loss.
#[derive(Debug)]
pub struct InterfaceMetrics(Arc<InterfaceDrops>);

impl Collector for InterfaceMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let now = self.0.since_start();
        dta_http::metrics::counter_family(
            &mut enc,
            &format!("{}_interface_rx_drops", self.0.prefix),
            "Frames an interface the service receives on dropped before any socket or XDP \
             program saw them since the service started, as the kernel counts them, by \
             interface and reason: dropped (by the driver or the stack), missed (the device's \
             receive ring was full), fifo (its receive FIFO overflowed), over (it ran out of \
             receive buffers)",
            now.iter().flat_map(|(name, d)| {
                d.by_reason().map(|(r, n)| {
                    (
                        vec![("interface", name.to_string()), ("reason", r.to_string())],
                        u64::from(n),
                    )
                })
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_watched_for_its_address_and_exported() {
        let w = InterfaceDrops::watch("translator", "127.0.0.1".parse().unwrap(), &[]);
        assert_eq!(w.names().collect::<Vec<_>>(), ["lo"]);
        let mut reg = prometheus_client::registry::Registry::default();
        reg.register_collector(Box::new(w.metrics()));
        let text = dta_http::metrics::encode(&reg);
        for r in ["dropped", "missed", "fifo", "over"] {
            assert!(
                text.contains(&format!(
                    "dta_translator_interface_rx_drops_total{{interface=\"lo\",reason=\"{r}\"}}"
                )),
                "{text}"
            );
        }
        let s = w.snapshot();
        assert_eq!(s["lo"]["missed"], 0, "{s}");
    }

    #[test]
    fn named_and_listening_interfaces_are_watched_once_and_a_missing_one_is_left_out() {
        let w = InterfaceDrops::watch(
            "int-sink",
            "127.0.0.1".parse().unwrap(),
            &["lo", "dta-none0"],
        );
        assert_eq!(w.names().collect::<Vec<_>>(), ["dta-none0", "lo"]);
        assert_eq!(w.since_start().len(), 1);
        let s = w.snapshot();
        assert!(s.get("dta-none0").is_none() && s.get("lo").is_some(), "{s}");
    }
}
