//! `dta int-sink --influx http://.../write?db=` against a real InfluxDB (Debian's `influxdb`,
//! 1.x, started here on free loopback ports with its data in a temporary directory): an INT
//! trace replayed into the sink arrives whole (every flow record and every event, none
//! overwriting another although the sink stamps a receive batch's reports alike), and the
//! series stay bounded by the network, not by the flows. A counted skip without `influxd`.

mod common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::free_tcp_port;

struct Influx {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Influx {
    /// `influxd` with its own configuration; `Err` when it is not installed.
    fn start() -> Result<Influx, String> {
        if !dta_testkit::have_tool("influxd", "version") {
            return Err(
                "influxd is not installed (scripts/setup.sh installs Debian's influxdb)".into(),
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let (http, rpc) = (free_tcp_port(), free_tcp_port());
        let conf = dir.path().join("influxdb.conf");
        std::fs::write(
            &conf,
            format!(
                "reporting-disabled = true\nbind-address = \"127.0.0.1:{rpc}\"\n\
                 [meta]\n  dir = \"{d}/meta\"\n\
                 [data]\n  dir = \"{d}/data\"\n  wal-dir = \"{d}/wal\"\n  query-log-enabled = false\n\
                 [http]\n  bind-address = \"127.0.0.1:{http}\"\n  log-enabled = false\n"
            ),
        )
        .unwrap();
        let child = Command::new("influxd")
            .arg("-config")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("influxd: {e}"))?;
        let i = Influx {
            child,
            addr: format!("127.0.0.1:{http}").parse().unwrap(),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while dta_http::client::get(i.addr, "/ping", None, Duration::from_secs(1))
            .map_or(true, |a| a.status != 204)
        {
            assert!(Instant::now() < deadline, "influxd did not answer /ping");
            std::thread::sleep(Duration::from_millis(100));
        }
        i.query("CREATE DATABASE dta");
        Ok(i)
    }

    /// InfluxQL `q` on database `dta`: the JSON answer's first series' values.
    fn query(&self, q: &str) -> Vec<Vec<serde_json::Value>> {
        let enc: String = q
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let a = dta_http::client::post(
            self.addr,
            &format!("/query?db=dta&q={enc}"),
            None,
            "text/plain",
            b"",
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(a.status, 200, "{q}: {}", String::from_utf8_lossy(&a.body));
        let v: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
        assert!(v["results"][0]["error"].is_null(), "{q}: {v}");
        v["results"][0]["series"][0]["values"]
            .as_array()
            .map(|rows| rows.iter().map(|r| r.as_array().unwrap().clone()).collect())
            .unwrap_or_default()
    }

    /// The single number `q` answers (e.g. a count).
    fn number(&self, q: &str) -> u64 {
        let rows = self.query(q);
        rows.first()
            .and_then(|r| r.get(1))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or_else(|| panic!("{q}: {rows:?}"))
    }
}

impl Drop for Influx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn every_flow_and_event_reaches_influxdb_in_bounded_series() {
    let influx = match Influx::start() {
        Ok(i) => i,
        Err(why) => dta_testkit::skip!("{why}"),
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let target = format!("http://{}/write?db=dta", influx.addr);
    let (truth, summary) = common::replay_into_int_sink(d, 150, 21, 6000, &["--influx", &target]);
    let flows = truth["flows"].as_array().unwrap();
    let packets: u64 = flows.iter().map(|f| f["packets"].as_u64().unwrap()).sum();
    let (written, failed) = summary["exported"]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t[0] == "influx")
        .map(|t| (t[1].as_u64().unwrap(), t[2].as_u64().unwrap()))
        .expect("an influx target");
    assert_eq!(failed, 0, "{summary}");

    // Every flow record and every event is a point of its own.
    let flow_points = influx.number("SELECT count(packets) FROM int_flow");
    let event_points = influx.number("SELECT count(value) FROM int_event");
    assert_eq!(flow_points, flows.len() as u64, "one point per flow");
    assert!(event_points > 0, "the thresholds make events");
    assert_eq!(flow_points + event_points, written, "{summary}");
    assert_eq!(influx.number("SELECT sum(packets) FROM int_flow"), packets);
    let distinct_flows = influx.query("SELECT count(distinct(flow)) FROM int_flow");
    assert_eq!(distinct_flows[0][1], flows.len());
    // The series: three reasons at most for flows; events by kind, switch and hop.
    let series = influx.query("SHOW SERIES");
    let flow_series = series
        .iter()
        .filter(|s| s[0].as_str().unwrap().starts_with("int_flow,"))
        .count();
    assert!((1..=3).contains(&flow_series), "{series:?}");
    let switches = truth["switches"].as_object().unwrap().len();
    let event_series = series.len() - flow_series;
    // hop_latency events at each switch, each at its one hop index.
    assert!(
        event_series <= switches,
        "{event_series} event series, {switches} switches"
    );
}
