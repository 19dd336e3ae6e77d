//! `dashboards/grafana-dta.json` is valid JSON, uses the Prometheus datasource variable, has
//! a panel for every loss and delivery counter, and references only metric names that the
//! node's services really expose (translator, INT sink, their sockets and AF_XDP sockets,
//! exporters, Kafka, collector stores), checked against a live encoding.

use std::collections::BTreeSet;
use std::sync::Arc;

use dta_export::metrics::{ExportMetrics, KafkaMetrics};
use dta_metrics::{
    encode, parse_exposition, IntSinkMetrics, PriorityReceiveMetrics, TranslatorMetrics,
    UdpReceiveMetrics,
};
use dta_node::af_xdp::{AfXdpMetrics, Reading, SocketReading};
use dta_translator::Stats;
use prometheus_client::registry::Registry;

fn dashboard() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../dashboards/grafana-dta.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every sample name our exporters produce.
fn exposed() -> BTreeSet<String> {
    let mut reg = Registry::default();
    reg.register_collector(Box::new(TranslatorMetrics::new(vec![Arc::new(
        Stats::default(),
    )])));
    reg.register_collector(Box::new(
        TranslatorMetrics::new(vec![Arc::new(Stats::default())])
            .with_prefix(dta_metrics::INT_SINK_TRANSLATOR_PREFIX),
    ));
    reg.register_collector(Box::new(IntSinkMetrics::new(vec![Arc::new(
        dta_int::IntStats::default(),
    )])));
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    reg.register_collector(Box::new(UdpReceiveMetrics::new("dta_int_sink", vec![udp])));
    let prio =
        dta_translator::prio_sockets::bind("127.0.0.1:0".parse().unwrap(), 1, 1 << 16).unwrap();
    reg.register_collector(Box::new(PriorityReceiveMetrics::new(prio)));
    reg.register_collector(Box::new(KafkaMetrics::new(Default::default())));
    for service in ["translator", "int-sink"] {
        let one = Reading {
            sockets: vec![SocketReading {
                rejected: vec![("truncated", 1)],
                ..Default::default()
            }],
            ..Default::default()
        };
        reg.register_collector(Box::new(AfXdpMetrics::of_reading(service, one)));
        let lo =
            dta_node::interfaces::InterfaceDrops::watch(service, "127.0.0.1".parse().unwrap(), &[]);
        reg.register_collector(Box::new(lo.metrics()));
    }
    let x = ExportMetrics::default();
    x.register(&mut reg);
    // Families without children expose nothing: give each one a series.
    x.exported("redis", 1, 1);
    let mut text = encode(&reg);

    let dir = tempfile::tempdir().unwrap();
    let stores: Vec<dta_collector::StoreConfig> = [
        "name = 'ki'\nkind = 'key-increment'\ncounters = 64",
        "name = 'ev'\nkind = 'append'\nlists = 2\ncapacity = 64\nbatch = 4",
    ]
    .iter()
    .map(|t| toml::from_str(t).unwrap())
    .collect();
    let c = Arc::new(dta_collector::Collector::create(dir.path(), &stores, false).unwrap());
    text.push_str(&dta_collector::metrics::encode(c));
    parse_exposition(&text)
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect()
}

fn metric_names(expr: &str) -> Vec<String> {
    let b = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = expr[i..].find("dta_") {
        let start = i + p;
        let boundary =
            start == 0 || !(b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_');
        let mut end = start;
        while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
            end += 1;
        }
        if boundary {
            out.push(expr[start..end].to_owned());
        }
        i = end;
    }
    out
}

fn exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr" | "definition", serde_json::Value::String(s)) => out.push(s.clone()),
                    ("query", serde_json::Value::String(s)) if s.contains("dta_") => {
                        out.push(s.clone())
                    }
                    _ => exprs(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| exprs(x, out)),
        _ => {}
    }
}

#[test]
fn dashboard_references_only_exposed_metrics() {
    let d = dashboard();
    let names = exposed();
    let mut all = Vec::new();
    exprs(&d, &mut all);
    assert!(all.len() >= 15, "{} expressions", all.len());
    let mut used = BTreeSet::new();
    for e in &all {
        let m = metric_names(e);
        assert!(!m.is_empty(), "expression without a dta metric: {e}");
        for n in m {
            assert!(
                names.contains(&n),
                "{n} (in {e}) is not exposed; exposed: {names:?}"
            );
            used.insert(n);
        }
    }
    // Intake, events, fill, and every loss and delivery counter has a panel.
    for n in [
        "dta_translator_reports_total",
        "dta_translator_dropped_total",
        "dta_translator_nacks_total",
        "dta_translator_kernel_drops_total",
        "dta_translator_af_xdp_kernel_drops_total",
        "dta_translator_lost_total",
        "dta_translator_shed_total",
        "dta_translator_interface_rx_drops_total",
        "dta_store_fill_ratio",
        "dta_int_events_total",
        "dta_int_sink_kernel_drops_total",
        "dta_int_sink_af_xdp_kernel_drops_total",
        "dta_int_sink_translator_dropped_total",
        "dta_int_sink_interface_rx_drops_total",
        "dta_export_errors_total",
    ] {
        assert!(used.contains(n), "no panel uses {n}");
    }
    // The metric-name check itself catches a typo.
    assert!(!names.contains("dta_translator_report_total"));
    assert_eq!(
        metric_names("rate(dta_x_total[5m]) + dta_y"),
        vec!["dta_x_total", "dta_y"]
    );
}

#[test]
fn dashboard_uses_the_datasource_variable() {
    let d = dashboard();
    let vars = d["templating"]["list"].as_array().unwrap();
    let ds = vars.iter().find(|v| v["type"] == "datasource").unwrap();
    assert_eq!(ds["query"], "prometheus");
    let var = format!("${{{}}}", ds["name"].as_str().unwrap());
    let panels = d["panels"].as_array().unwrap();
    let mut ids = BTreeSet::new();
    for p in panels {
        assert!(ids.insert(p["id"].as_u64().unwrap()), "duplicate panel id");
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], var, "panel {}", p["title"]);
        assert_eq!(p["datasource"]["type"], "prometheus");
        for t in p["targets"].as_array().unwrap() {
            assert_eq!(t["datasource"]["uid"], var);
        }
        let g = &p["gridPos"];
        assert!(g["x"].as_u64().unwrap() + g["w"].as_u64().unwrap() <= 24);
    }
}
