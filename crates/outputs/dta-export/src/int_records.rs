//! The INT sink's notifications as exportable points ([`Record`]): an [`Event`] ([INT-NIC §III.C]:
//! "switch ID, measurement value at that switch, bitmap indicating the event type and the
//! timestamp") is measurement `int_event`; a [`FlowRecord`] (a flow leaving the FlowCache,
//! §III.B: packet count, last update, latest and average per-hop metrics) is `int_flow`.
//! Field and tag names are listed in `docs/exports.md`.

use dta_int::events::HOP_NONE;
use dta_int::layout::MAX_PATH;
use dta_int::{flow_string, Event, EvictReason, FlowRecord, Notification};

use crate::record::{FieldValue, Record};

impl Record for Event {
    fn measurement(&self) -> &str {
        "int_event"
    }
    /// `kind` (e.g. `queue_occupancy`), `class` (`threshold`, `change`, `drop`), `node` (the
    /// switch id), `hop` (index from the INT source, or `e2e` for end-to-end events).
    fn tags(&self) -> Vec<(&str, String)> {
        vec![
            ("kind", self.kind.name().to_owned()),
            ("class", self.kind.class().to_owned()),
            ("node", self.node_id.to_string()),
            (
                "hop",
                if self.hop == HOP_NONE {
                    "e2e".to_owned()
                } else {
                    self.hop.to_string()
                },
            ),
        ]
    }
    /// `value` (the measured or new value, the previous node id of a path change, or the drop
    /// reason), `flow` (`SRC:SPORT-DST:DPORT/PROTO`), `seq` (position in the event stream).
    fn fields(&self) -> Vec<(&str, FieldValue)> {
        vec![
            ("value", FieldValue::UInt(u64::from(self.value))),
            ("flow", FieldValue::Str(flow_string(&self.flow))),
            ("seq", FieldValue::UInt(self.seq)),
        ]
    }
    fn timestamp_ns(&self) -> u64 {
        self.time_ns
    }
}

/// Per-hop field names of a flow record, hop 0 (the INT source) first.
const HOP_FIELDS: [[&str; 7]; MAX_PATH] = {
    macro_rules! hop {
        ($i:literal) => {
            [
                concat!("hop", $i, "_node"),
                concat!("hop", $i, "_latency"),
                concat!("hop", $i, "_avg_latency"),
                concat!("hop", $i, "_queue"),
                concat!("hop", $i, "_avg_queue"),
                concat!("hop", $i, "_util"),
                concat!("hop", $i, "_avg_util"),
            ]
        };
    }
    [hop!(0), hop!(1), hop!(2), hop!(3), hop!(4)]
};

fn reason_name(r: EvictReason) -> &'static str {
    match r {
        EvictReason::Idle => "idle",
        EvictReason::Capacity => "capacity",
        EvictReason::Flush => "flush",
    }
}

impl Record for FlowRecord {
    fn measurement(&self) -> &str {
        "int_flow"
    }
    /// `reason` (`idle`, `capacity`, `flush`).
    fn tags(&self) -> Vec<(&str, String)> {
        vec![("reason", reason_name(self.reason).to_owned())]
    }
    /// `flow` (`SRC:SPORT-DST:DPORT/PROTO`).
    fn entity(&self) -> Option<(&str, String)> {
        Some(("flow", flow_string(&self.flow)))
    }
    /// `packets`, `first_ns`, `last_ns`, `hops`, then per hop i (up to 5): `hop{i}_node`,
    /// `hop{i}_latency`, `hop{i}_avg_latency`, `hop{i}_queue`, `hop{i}_avg_queue`, `hop{i}_util`,
    /// `hop{i}_avg_util` (absent when the hop never reported the value).
    fn fields(&self) -> Vec<(&str, FieldValue)> {
        let mut f = vec![
            ("packets", FieldValue::UInt(self.packets)),
            ("first_ns", FieldValue::UInt(self.first_ns)),
            ("last_ns", FieldValue::UInt(self.last_ns)),
            ("hops", FieldValue::UInt(self.hops.len() as u64)),
        ];
        for (h, names) in self.hops.iter().zip(HOP_FIELDS.iter()) {
            let u = |v: Option<u32>| v.map(|v| FieldValue::UInt(u64::from(v)));
            let x = |v: Option<f64>| v.filter(|v| v.is_finite()).map(FieldValue::Float);
            for (name, v) in names.iter().zip([
                u(h.node_id),
                u(h.hop_latency),
                x(h.avg_hop_latency),
                u(h.queue_occupancy),
                x(h.avg_queue_occupancy),
                u(h.egress_tx_util),
                x(h.avg_egress_tx_util),
            ]) {
                if let Some(v) = v {
                    f.push((name, v));
                }
            }
        }
        f
    }
    /// The flow's last update.
    fn timestamp_ns(&self) -> u64 {
        self.last_ns
    }
}

/// A notification as a record.
pub fn notification_record(n: &Notification) -> &dyn Record {
    match n {
        Notification::Event(e) => e,
        Notification::Flow(f) => f,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::influx::to_line;
    use dta_int::{EventKind, HopRecord};

    const FLOW: [u8; 13] = [10, 0, 0, 1, 10, 1, 0, 2, 0x13, 0x88, 0, 80, 17];

    #[test]
    fn event_line() {
        let e = Event {
            seq: 4,
            time_ns: 1_000,
            kind: EventKind::QueueOccupancy,
            flow: FLOW,
            hop: 2,
            node_id: 301,
            value: 250,
        };
        assert_eq!(
            to_line(&e).unwrap(),
            "int_event,class=threshold,hop=2,kind=queue_occupancy,node=301 value=250i,flow=\"10.0.0.1:5000-10.1.0.2:80/17\",seq=4i 1000"
        );
        let e2e = Event {
            hop: HOP_NONE,
            kind: EventKind::PathLatency,
            ..e
        };
        assert!(to_line(&e2e)
            .unwrap()
            .contains(",hop=e2e,kind=path_latency,"));
    }

    #[test]
    fn flow_record_line() {
        let r = FlowRecord {
            flow: FLOW,
            packets: 3,
            first_ns: 10,
            last_ns: 30,
            reason: EvictReason::Idle,
            hops: vec![
                HopRecord {
                    node_id: Some(101),
                    hop_latency: Some(7),
                    avg_hop_latency: Some(6.5),
                    ..HopRecord::default()
                },
                HopRecord {
                    node_id: Some(201),
                    ..HopRecord::default()
                },
            ],
        };
        assert_eq!(
            to_line(notification_record(&Notification::Flow(r))).unwrap(),
            "int_flow,reason=idle flow=\"10.0.0.1:5000-10.1.0.2:80/17\",packets=3i,first_ns=10i,last_ns=30i,hops=2i,hop0_node=101i,hop0_latency=7i,hop0_avg_latency=6.5,hop1_node=201i 30"
        );
    }
}
