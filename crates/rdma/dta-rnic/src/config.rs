//! The RNIC collector's settings: where RDMA CM listens and how the queue pairs it accepts are
//! sized. Read from a TOML table (`[rnic]` of an `rnic.toml`, or built from command-line flags).

use std::net::{IpAddr, SocketAddr};

use dta_wire::prefix::AllowList;

use serde::{Deserialize, Serialize};

/// Default RDMA CM port (the one `rping`, `ib_send_bw -R` and our CM vectors use).
pub const DEFAULT_PORT: u16 = 7471;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RnicConfig {
    /// IP:PORT RDMA CM listens on. The IP selects the RDMA device (the one whose netdev has it);
    /// `0.0.0.0` listens on every RDMA device.
    pub listen: SocketAddr,
    /// `rdma_listen` backlog.
    pub backlog: u32,
    /// The store advertised by the prototype-compatible 16-byte SEND (default: the first).
    pub prototype_store: Option<String>,
    /// Send queue depth of each accepted QP (the advertisement SENDs only).
    pub send_queue: u32,
    /// Receive WQEs kept posted per QP: each WRITE WITH IMMEDIATE (a flagged report) consumes
    /// one until the collector polls its completion and reposts it; with none posted the NIC
    /// answers RNR NAK. At most (and by default) [`crate::recv::MAX_RECV_QUEUE`].
    pub recv_queue: u32,
    /// `max_inline_data` requested for each QP (0: send from the registered buffer).
    pub max_inline: u32,
    /// Incoming RDMA READ / atomic operations outstanding per QP (`responder_resources`; the
    /// translator's FETCH_ADDs for Key-Increment need at least 1). Capped at the device's
    /// `max_qp_rd_atom` when accepting.
    pub responder_resources: u8,
    /// Outgoing READ / atomic operations (`initiator_depth`); the collector issues none.
    pub initiator_depth: u8,
    /// Post the prototype 16-byte advertisement (first), then the native ones.
    pub advertise_prototype: bool,
    pub advertise_native: bool,
    /// Translator addresses (CIDR prefixes) whose connection requests are accepted; any other
    /// is rejected (`rejected_not_allowed`) before a queue pair is made, so no other host is
    /// sent the advertisement and its R_Keys. No default: the collector refuses to start
    /// until it is set (`[rnic] allow` or `--allow`).
    pub allow: Option<AllowList>,
}

impl Default for RnicConfig {
    fn default() -> Self {
        RnicConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT)),
            backlog: 16,
            prototype_store: None,
            send_queue: 64,
            recv_queue: crate::recv::MAX_RECV_QUEUE,
            max_inline: 0,
            responder_resources: 16,
            initiator_depth: 0,
            advertise_prototype: true,
            advertise_native: true,
            allow: None,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("rnic configuration: {0}")]
pub struct RnicConfigError(pub String);

/// Parse `IP:PORT`, or a bare IP (port [`DEFAULT_PORT`]).
pub fn parse_listen(s: &str) -> Result<SocketAddr, RnicConfigError> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = s.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, DEFAULT_PORT));
    }
    Err(RnicConfigError(format!(
        "listen address {s:?}: expected IP:PORT (e.g. 192.168.1.2:{DEFAULT_PORT}) or an IP"
    )))
}

impl RnicConfig {
    /// Parse a TOML document holding an `[rnic]` table (other tables are ignored, so the same
    /// file may carry the rest of a deployment's settings).
    pub fn from_toml(text: &str) -> Result<RnicConfig, RnicConfigError> {
        #[derive(Deserialize)]
        struct Doc {
            #[serde(default)]
            rnic: Option<toml::Value>,
        }
        let doc: Doc = toml::from_str(text).map_err(|e| RnicConfigError(e.to_string()))?;
        let cfg = match doc.rnic {
            Some(v) => v
                .try_into::<RnicConfig>()
                .map_err(|e| RnicConfigError(format!("[rnic]: {e}")))?,
            None => RnicConfig::default(),
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Whether a connection request from `peer` is accepted (never without an allow-list or a
    /// known peer address).
    pub fn admits(&self, peer: Option<IpAddr>) -> bool {
        match (&self.allow, peer) {
            (Some(a), Some(ip)) => a.allows(ip),
            _ => false,
        }
    }

    /// Check the values that do not depend on the stores.
    pub fn validate(&self) -> Result<(), RnicConfigError> {
        let e = |m: &str| Err(RnicConfigError(m.into()));
        if self.listen.port() == 0 {
            return e("listen port 0: a translator must know the port to connect to");
        }
        if self.backlog == 0 {
            return e("backlog must be at least 1");
        }
        if self.send_queue == 0 || self.recv_queue == 0 {
            return e("send_queue and recv_queue must be at least 1");
        }
        if self.recv_queue > crate::recv::MAX_RECV_QUEUE {
            return Err(RnicConfigError(format!(
                "recv_queue {}: at most {}",
                self.recv_queue,
                crate::recv::MAX_RECV_QUEUE
            )));
        }
        if !self.advertise_prototype && !self.advertise_native {
            return e("advertise_prototype and advertise_native are both off: the translator would never learn the regions");
        }
        if self.responder_resources == 0 {
            return e("responder_resources 0 refuses every FETCH_ADD (Key-Increment)");
        }
        Ok(())
    }

    /// The index, among `names` (the collector's stores in order), of the store the prototype
    /// advertisement describes.
    pub fn prototype_index(&self, names: &[&str]) -> Result<usize, RnicConfigError> {
        if names.is_empty() {
            return Err(RnicConfigError("the collector has no stores".into()));
        }
        match &self.prototype_store {
            None => Ok(0),
            Some(n) => names.iter().position(|s| s == n).ok_or_else(|| {
                RnicConfigError(format!(
                    "prototype_store {n:?} is not a store (stores: {})",
                    names.join(", ")
                ))
            }),
        }
    }

    /// `responder_resources` and `initiator_depth` for `rdma_accept`: the configured values
    /// capped by the device (`max_qp_rd_atom`, `max_qp_init_rd_atom`) and, for the initiator
    /// depth, by the requester's responder resources (from its connect request).
    pub fn accept_depths(
        &self,
        max_qp_rd_atom: u8,
        max_qp_init_rd_atom: u8,
        requester_responder_resources: u8,
    ) -> (u8, u8) {
        (
            self.responder_resources.min(max_qp_rd_atom),
            self.initiator_depth
                .min(max_qp_init_rd_atom)
                .min(requester_responder_resources),
        )
    }

    /// Send-queue slots one connection needs for its advertisements: the prototype message and
    /// the native one (which covers every store in one SEND).
    pub fn sends_per_connection(&self) -> u32 {
        self.advertise_prototype as u32 + self.advertise_native as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_parsing() {
        assert_eq!(
            parse_listen("192.168.1.2:9000").unwrap(),
            "192.168.1.2:9000".parse().unwrap()
        );
        assert_eq!(parse_listen("10.0.0.1").unwrap().port(), DEFAULT_PORT);
        assert_eq!(parse_listen("[fe80::1]:7000").unwrap().port(), 7000);
        let e = parse_listen("collector:7471").unwrap_err();
        assert!(e.0.contains("IP:PORT"), "{e}");
    }

    #[test]
    fn toml_defaults_overrides_and_errors() {
        assert_eq!(RnicConfig::from_toml("").unwrap(), RnicConfig::default());
        assert_eq!(
            RnicConfig::from_toml("[other]\nx = 1\n").unwrap(),
            RnicConfig::default()
        );
        let c = RnicConfig::from_toml(
            "[rnic]\nlisten = '10.0.0.2:7000'\nprototype_store = 'kw'\nresponder_resources = 4\n",
        )
        .unwrap();
        assert_eq!(c.listen, "10.0.0.2:7000".parse().unwrap());
        assert_eq!(c.prototype_store.as_deref(), Some("kw"));
        assert_eq!(c.responder_resources, 4);
        assert_eq!(c.backlog, 16);
        let e = RnicConfig::from_toml("[rnic]\nlisen = '10.0.0.2:7000'\n").unwrap_err();
        assert!(e.0.contains("lisen"), "{e}");
        let e = RnicConfig::from_toml("[rnic]\nlisten = '10.0.0.2:0'\n").unwrap_err();
        assert!(e.0.contains("port 0"), "{e}");
        let e = RnicConfig::from_toml(
            "[rnic]\nadvertise_prototype = false\nadvertise_native = false\n",
        )
        .unwrap_err();
        assert!(e.0.contains("never learn"), "{e}");
        let e = RnicConfig::from_toml("[rnic]\nresponder_resources = 0\n").unwrap_err();
        assert!(e.0.contains("FETCH_ADD"), "{e}");
        let e = RnicConfig::from_toml("[rnic]\nresponder_resources = 300\n").unwrap_err();
        assert!(e.0.contains("responder_resources"), "{e}");
        assert_eq!(
            RnicConfig::default().recv_queue,
            crate::recv::MAX_RECV_QUEUE
        );
        let c = RnicConfig::from_toml("[rnic]\nrecv_queue = 16\n").unwrap();
        assert_eq!(c.recv_queue, 16);
        let e = RnicConfig::from_toml("[rnic]\nrecv_queue = 1025\n").unwrap_err();
        assert!(e.0.contains("recv_queue 1025: at most 1024"), "{e}");
        let e = RnicConfig::from_toml("[rnic]\nrecv_queue = 0\n").unwrap_err();
        assert!(e.0.contains("at least 1"), "{e}");
    }

    #[test]
    fn prototype_store_selection() {
        let names = ["kw", "ki", "pc"];
        let mut c = RnicConfig::default();
        assert_eq!(c.prototype_index(&names).unwrap(), 0);
        c.prototype_store = Some("pc".into());
        assert_eq!(c.prototype_index(&names).unwrap(), 2);
        c.prototype_store = Some("nope".into());
        let e = c.prototype_index(&names).unwrap_err();
        assert!(e.0.contains("kw, ki, pc"), "{e}");
        assert!(RnicConfig::default().prototype_index(&[]).is_err());
    }

    #[test]
    fn connection_requests_only_from_the_allow_list() {
        let c = RnicConfig::from_toml("[rnic]\nallow = [\"10.0.0.1/32\"]\n").unwrap();
        assert!(c.admits(Some("10.0.0.1".parse().unwrap())));
        assert!(!c.admits(Some("10.0.0.2".parse().unwrap())));
        assert!(!c.admits(None));
        // No list: nobody (the command refuses to start without one).
        assert!(!RnicConfig::default().admits(Some("10.0.0.1".parse().unwrap())));
    }

    #[test]
    fn accept_depths_are_capped_by_the_device_and_the_requester() {
        let mut c = RnicConfig::default();
        // ConnectX-5 reports max_qp_rd_atom 16, max_qp_init_rd_atom 16.
        assert_eq!(c.accept_depths(16, 16, 0), (16, 0));
        assert_eq!(c.accept_depths(4, 16, 0), (4, 0));
        c.initiator_depth = 8;
        assert_eq!(c.accept_depths(16, 16, 2), (16, 2));
        assert_eq!(c.accept_depths(16, 1, 16), (16, 1));
        assert_eq!(c.accept_depths(16, 16, 16), (16, 8));
    }

    #[test]
    fn sends_per_connection_counts_the_adverts() {
        let mut c = RnicConfig::default();
        assert_eq!(c.sends_per_connection(), 2);
        c.advertise_native = false;
        assert_eq!(c.sends_per_connection(), 1);
        c.advertise_prototype = false;
        c.advertise_native = true;
        assert_eq!(c.sends_per_connection(), 1);
    }
}
