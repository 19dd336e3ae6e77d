//! The Redis export against a real `redis-server` started here (random loopback port, no
//! persistence), killed at the end. A counted skip (`dta_testkit::skip!`) only when redis-server is not installed
//! (`scripts/setup.sh` installs it).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dta_export::redis_ts::{series_name, RedisExporter, RedisOptions};
use dta_export::Point;

const NO_REDIS: &str = "redis-server is not installed (scripts/setup.sh installs it)";

struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    /// `None` when redis-server is not installed; the caller skips with [`NO_REDIS`].
    fn start() -> Option<RedisServer> {
        if !dta_testkit::have_tool("redis-server", "--version") {
            return None;
        }
        // A port that was free a moment ago; retry a few times should another process take it.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawning redis-server");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // exited: the port was taken; try another
                }
                if let Ok(c) = redis::Client::open(format!("redis://127.0.0.1:{port}/")) {
                    if let Ok(mut con) = c.get_connection() {
                        if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                            return Some(RedisServer { child, port });
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("could not start redis-server");
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn event(switch: u32, ts_ms: u64, value: u64) -> Point {
    Point::new("int_event", ts_ms * 1_000_000 + 17)
        .tag("switch", switch.to_string())
        .tag("metric", "queue_occupancy")
        .tag("class", "threshold")
        .field("value", value)
        .field("flow", "10.0.0.1:5000-10.0.1.2:80/17")
}

#[test]
fn events_become_time_series_streams_and_latest_values() {
    let Some(server) = RedisServer::start() else {
        dta_testkit::skip!("{NO_REDIS}");
    };
    let mut x = RedisExporter::connect(&server.url(), RedisOptions::default()).unwrap();
    let pts: Vec<Point> = (0..50u64)
        .map(|i| event(1 + (i % 2) as u32, 1_700_000_000_000 + i, 100 + i))
        .collect();
    let refs: Vec<&dyn dta_export::Record> =
        pts.iter().map(|p| p as &dyn dta_export::Record).collect();
    x.write_batch(&refs[..30]).unwrap();
    x.write_batch(&refs[30..]).unwrap();
    assert_eq!(x.written, 50);

    let s1 = series_name(&pts[0]);
    assert_eq!(s1, "class=threshold,metric=queue_occupancy,switch=1");
    assert_eq!(
        x.series("int_event").unwrap(),
        vec![
            s1.clone(),
            "class=threshold,metric=queue_occupancy,switch=2".to_string()
        ]
    );
    // Switch 1 got the even i: 25 samples, in time order, exact values and ns timestamps.
    let all = x.range("int_event", &s1, "value", 0, u64::MAX / 2).unwrap();
    assert_eq!(all.len(), 25);
    for (k, (t, v)) in all.iter().enumerate() {
        let i = 2 * k as u64;
        assert_eq!(*t, (1_700_000_000_000 + i) * 1_000_000 + 17);
        assert_eq!(*v, (100 + i) as f64);
    }
    // A time window selects by milliseconds, inclusive.
    let win = x
        .range(
            "int_event",
            &s1,
            "value",
            1_700_000_000_010,
            1_700_000_000_020,
        )
        .unwrap();
    assert_eq!(
        win.iter().map(|p| p.1 as u64).collect::<Vec<_>>(),
        vec![110, 112, 114, 116, 118, 120]
    );
    // String fields are not time series, but are in the stream and the latest hash.
    assert!(x
        .range("int_event", &s1, "flow", 0, u64::MAX / 2)
        .unwrap()
        .is_empty());
    let recent = x.recent("int_event", 2).unwrap();
    assert_eq!(recent.len(), 2);
    let newest: std::collections::HashMap<_, _> = recent[0].iter().cloned().collect();
    assert_eq!(newest["value"], "149");
    assert_eq!(newest["switch"], "2");
    assert_eq!(newest["flow"], "10.0.0.1:5000-10.0.1.2:80/17");
    assert_eq!(
        newest["ts"],
        ((1_700_000_000_000u64 + 49) * 1_000_000 + 17).to_string()
    );
    let latest = x.latest("int_event", &s1).unwrap();
    assert!(latest.contains(&("value".to_string(), "148".to_string())));

    let len: u64 = redis::cmd("XLEN")
        .arg(x.stream_key("int_event"))
        .query(x.connection())
        .unwrap();
    assert_eq!(len, 50);
}

#[test]
fn same_millisecond_points_stay_distinct_and_retention_trims() {
    let Some(server) = RedisServer::start() else {
        dta_testkit::skip!("{NO_REDIS}");
    };
    let opts = RedisOptions {
        prefix: "t".into(),
        stream_maxlen: 0,
        retention_ms: Some(1000),
        key_ttl_s: 0,
    };
    let mut x = RedisExporter::connect(&server.url(), opts).unwrap();
    // Two points in the same millisecond with the same value: both kept.
    for ns in [5_000_000_001u64, 5_000_000_002] {
        x.write(
            &Point::new("int_flow", ns)
                .tag("flow", "f")
                .field("packets", 7u64),
        )
        .unwrap();
    }
    assert_eq!(
        x.range("int_flow", "flow=f", "packets", 0, 10_000)
            .unwrap()
            .len(),
        2
    );
    // 3 s later: everything older than 1 s before it is trimmed.
    x.write(
        &Point::new("int_flow", 8_000_000_000)
            .tag("flow", "f")
            .field("packets", 9u64),
    )
    .unwrap();
    assert_eq!(
        x.range("int_flow", "flow=f", "packets", 0, 10_000).unwrap(),
        vec![(8_000_000_000, 9.0)]
    );
    let keys: Vec<String> = redis::cmd("KEYS").arg("t:*").query(x.connection()).unwrap();
    assert!(keys.iter().all(|k| k.starts_with("t:")));
    assert!(keys.contains(&"t:ts:int_flow:flow=f".to_string()));
}

/// However many flows and fields: two keys per flow (its samples, its newest point), each with a
/// TTL, plus the stream and the index; a flow not seen for the TTL is forgotten.
#[test]
fn keys_are_bounded_per_flow_and_expire() {
    let Some(server) = RedisServer::start() else {
        dta_testkit::skip!("{NO_REDIS}");
    };
    let opts = RedisOptions {
        prefix: "b".into(),
        key_ttl_s: 2,
        ..Default::default()
    };
    let mut x = RedisExporter::connect(&server.url(), opts).unwrap();
    let flows = 300u64;
    let points: Vec<Point> = (0..flows)
        .map(|f| {
            let mut p = Point::new("int_flow", 1_000_000_000 + f).tag("flow", format!("f{f}"));
            for (i, field) in [
                "packets",
                "hop0_latency",
                "hop1_latency",
                "hop2_latency",
                "hops",
            ]
            .iter()
            .enumerate()
            {
                p = p.field(*field, f + i as u64);
            }
            p
        })
        .collect();
    let refs: Vec<&dyn dta_export::record::Record> = points
        .iter()
        .map(|p| p as &dyn dta_export::record::Record)
        .collect();
    x.write_batch(&refs).unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("b:*").query(x.connection()).unwrap();
    assert_eq!(
        keys.len() as u64,
        2 * flows + 2,
        "two keys a flow: {}",
        keys.len()
    );
    for k in keys.iter().filter(|k| !k.starts_with("b:stream:")) {
        let ttl: i64 = redis::cmd("TTL").arg(k).query(x.connection()).unwrap();
        assert!(ttl > 0 && ttl <= 2, "{k}: TTL {ttl}");
    }
    assert_eq!(x.series("int_flow").unwrap().len() as u64, flows);
    assert_eq!(
        x.range("int_flow", "flow=f7", "hop1_latency", 0, u64::MAX / 2)
            .unwrap(),
        vec![(1_000_000_007, 9.0)]
    );
    std::thread::sleep(std::time::Duration::from_millis(3100));
    let keys: Vec<String> = redis::cmd("KEYS").arg("b:*").query(x.connection()).unwrap();
    assert_eq!(
        keys,
        vec!["b:stream:int_flow".to_string()],
        "only the capped stream stays"
    );
}

#[test]
fn export_thread_drains_sink_notifications_to_redis_and_line_protocol() {
    use dta_export::metrics::ExportMetrics;
    use dta_export::pipeline::{spawn, ExportOptions, Target};
    use dta_http::exposition::{parse_exposition, value};
    use dta_http::metrics::encode;
    use dta_int::{Event, EventKind, EvictReason, FlowRecord, HopRecord, Notification};

    let Some(server) = RedisServer::start() else {
        dta_testkit::skip!("{NO_REDIS}");
    };
    let dir = tempfile::tempdir().unwrap();
    let lines_path = dir.path().join("events.lp");
    let file: Box<dyn std::io::Write + Send> =
        Box::new(std::fs::File::create(&lines_path).unwrap());
    let targets = vec![
        Target::Redis(RedisExporter::connect(&server.url(), RedisOptions::default()).unwrap()),
        Target::Lines(dta_export::influx::LineWriter::new(file)),
    ];
    let metrics = ExportMetrics::default();
    let mut reg = prometheus_client::registry::Registry::default();
    metrics.register(&mut reg);
    let (tx, rx) = std::sync::mpsc::sync_channel(1024);
    let h = spawn(
        rx,
        targets,
        metrics.clone(),
        ExportOptions {
            batch: 7,
            max_delay: Duration::from_secs(30),
        },
    )
    .unwrap();
    let flow = [10, 0, 0, 1, 10, 1, 0, 2, 0x13, 0x88, 0, 80, 17];
    for i in 0..20u64 {
        tx.send(Notification::Event(Event {
            seq: i,
            time_ns: 1_000_000_000 + i * 1_000_000,
            kind: EventKind::QueueOccupancy,
            flow,
            hop: 1,
            node_id: 201,
            value: 150 + i as u32,
        }))
        .unwrap();
    }
    tx.send(Notification::Flow(FlowRecord {
        flow,
        packets: 20,
        first_ns: 1_000_000_000,
        last_ns: 1_019_000_000,
        reason: EvictReason::Idle,
        hops: vec![HopRecord {
            node_id: Some(101),
            hop_latency: Some(900),
            avg_hop_latency: Some(1000.5),
            ..HopRecord::default()
        }],
    }))
    .unwrap();
    drop(tx);
    let sum = h.join().unwrap();
    assert_eq!(sum.notifications, 21);
    assert_eq!(sum.batches, 3, "7 + 7 + 7");
    assert_eq!(
        sum.targets,
        vec![("redis".to_string(), 21, 0), ("influx".to_string(), 21, 0)]
    );

    let mut x = RedisExporter::connect(&server.url(), RedisOptions::default()).unwrap();
    let series = "class=threshold,hop=1,kind=queue_occupancy,node=201";
    let v = x
        .range("int_event", series, "value", 0, u64::MAX / 2)
        .unwrap();
    assert_eq!(v.len(), 20);
    assert_eq!(v[19], (1_019_000_000, 169.0));
    let flow_latest = x
        .latest("int_flow", "flow=10.0.0.1:5000-10.1.0.2:80/17,reason=idle")
        .unwrap();
    assert!(flow_latest.contains(&("hop0_avg_latency".to_string(), "1000.5".to_string())));

    let text = std::fs::read_to_string(&lines_path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 21);
    assert_eq!(
        lines[0],
        "int_event,class=threshold,hop=1,kind=queue_occupancy,node=201 value=150i,flow=\"10.0.0.1:5000-10.1.0.2:80/17\",seq=0i 1000000000"
    );
    assert!(lines[20]
        .starts_with("int_flow,reason=idle flow=\"10.0.0.1:5000-10.1.0.2:80/17\",packets=20i,"));

    let s = parse_exposition(&encode(&reg)).unwrap();
    assert_eq!(
        value(&s, "dta_export_points_total", &[("sink", "redis")]),
        Some(21.0)
    );
    assert_eq!(
        value(&s, "dta_export_points_total", &[("sink", "influx")]),
        Some(21.0)
    );
}
