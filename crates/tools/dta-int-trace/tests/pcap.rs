//! Generate an INT trace, write it as pcap in both formats, parse every frame back with
//! `dta_int_wire` against the ground truth, and replay it to a local UDP socket.

use std::net::UdpSocket;
use std::path::Path;

use dta_int_trace::intgen::{generate, FlowSizeCdf, GroundTruth, TrafficConfig};
use dta_int_trace::pcap::{
    read_pcap, replay, udp_payload, write_pcap, PcapFormat, ReplayMode, ReplayOptions,
    DEFAULT_REPORT_PORT,
};
use dta_int_wire::{find_int, parse_report, IntDetect, TelemetryReport};

/// A receiving socket with a large buffer (SO_RCVBUFFORCE as root), so a descheduled receiver
/// does not lose datagrams.
fn rx_socket() -> UdpSocket {
    dta_translator::ingest::bind("127.0.0.1:0".parse().unwrap(), 16 << 20).unwrap()
}

fn cdf() -> FlowSizeCdf {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../../shared/workloads/fb_hadoop_flow_size_cdf.txt");
    match FlowSizeCdf::load(&shared) {
        Ok(c) => c,
        // The same points, for a checkout without shared/ beside it.
        Err(_) => FlowSizeCdf::parse("0 0\n100 1\n200 2\n300 5\n350 15\n400 20\n500 30\n600 40\n700 50\n1000 60\n2000 67\n7000 70\n30000 72\n50000 82\n80000 87\n120000 90\n300000 95\n1000000 97.5\n2000000 99\n10000000 100\n").unwrap(),
    }
}

fn config() -> TrafficConfig {
    TrafficConfig {
        seed: 42,
        flows: 80,
        max_packets_per_flow: 40,
        ..TrafficConfig::default()
    }
}

/// Check one parsed INT block against the truth of frame `i`.
fn check_frame(frame: &[u8], i: usize, truth: &GroundTruth) {
    let detect = IntDetect::udp_port(truth.config.int_udp_port);
    let int = find_int(frame, &detect)
        .unwrap_or_else(|e| panic!("frame {i}: {e}"))
        .unwrap_or_else(|| panic!("frame {i}: no INT"));
    let ft = &truth.frames[i];
    let flow = &truth.flows[ft.flow];
    let key = int.flow.unwrap().key13().unwrap();
    assert_eq!(hex(&key), flow.key13, "frame {i}: flow key");
    let stack = int.stack().unwrap();
    assert_eq!(stack.len(), 5);
    // The stack is newest hop first; the truth hop 0 first.
    for (j, h) in stack.iter().enumerate() {
        let t = ft.hops[4 - j];
        assert_eq!(h.node_id, Some(t[0]), "frame {i} hop {j}");
        assert_eq!(h.baseline.hop_latency, Some(t[1]));
        assert_eq!(h.baseline.queue_occupancy, Some(t[2]));
        assert_eq!(h.baseline.egress_tx_util, Some(t[3]));
        assert_eq!(t[0], flow.path[4 - j]);
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn frames_and_reports_parse_back_to_the_ground_truth() {
    let dir = tempfile::tempdir().unwrap();
    let t = generate(&config(), &cdf());
    let n = t.packets.len();
    assert!(n > 80, "{n} packets");
    let truth_path = dir.path().join("x.json");
    t.truth.save(&truth_path).unwrap();
    let truth = GroundTruth::load(&truth_path).unwrap();
    assert_eq!(truth, t.truth);

    let frames = dir.path().join("frames.pcap");
    assert_eq!(
        write_pcap(&frames, &t, PcapFormat::Frames, DEFAULT_REPORT_PORT).unwrap(),
        n
    );
    let recs = read_pcap(&frames).unwrap();
    assert_eq!(recs.len(), n);
    for (i, (ts, frame)) in recs.iter().enumerate() {
        assert_eq!(ts.as_nanos() as u64, truth.frames[i].time_ns);
        check_frame(frame, i, &truth);
    }

    let reports = dir.path().join("reports.pcap");
    write_pcap(&reports, &t, PcapFormat::Reports, DEFAULT_REPORT_PORT).unwrap();
    let recs = read_pcap(&reports).unwrap();
    assert_eq!(recs.len(), n);
    let detect = IntDetect::udp_port(truth.config.int_udp_port);
    for (i, (_, frame)) in recs.iter().enumerate() {
        let payload = udp_payload(frame).unwrap();
        let TelemetryReport::V2(r) = parse_report(payload).unwrap() else {
            panic!("frame {i}: not a v2.0 report");
        };
        let path = &truth.flows[truth.frames[i].flow].path;
        assert_eq!(r.group.node_id, *path.last().unwrap(), "the sink reports");
        assert_eq!(r.group.sequence, i as u32);
        let ind: Vec<_> = r.iter().collect();
        assert_eq!(ind.len(), 1);
        let inner = ind[0].inner_int(&detect).unwrap().unwrap();
        assert_eq!(inner.stack().unwrap().len(), 5);
        // The inner frame is the frames-format record byte for byte.
        check_frame(ind[0].inner, i, &truth);
    }
}

/// Receive datagrams until `n` arrived or nothing came for [`dta_testkit::WAIT`] (only a lost
/// datagram ends it early, however long a loaded machine stalls the sender).
fn receive(rx: UdpSocket, n: usize) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
    std::thread::spawn(move || {
        rx.set_read_timeout(Some(dta_testkit::WAIT)).unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        while got.len() < n {
            match rx.recv(&mut buf) {
                Ok(k) => got.push(buf[..k].to_vec()),
                Err(_) => break,
            }
        }
        got
    })
}

#[test]
fn replay_delivers_every_datagram() {
    let dir = tempfile::tempdir().unwrap();
    let t = generate(&config(), &cdf());
    let n = t.packets.len();
    let frames = dir.path().join("frames.pcap");
    let reports = dir.path().join("reports.pcap");
    write_pcap(&frames, &t, PcapFormat::Frames, DEFAULT_REPORT_PORT).unwrap();
    write_pcap(&reports, &t, PcapFormat::Reports, DEFAULT_REPORT_PORT).unwrap();

    let mut results = Vec::new();
    for path in [&frames, &reports] {
        let rx = rx_socket();
        let to = rx.local_addr().unwrap();
        let h = receive(rx, n);
        let opts = ReplayOptions {
            to,
            rate: Some(20_000.0),
            mode: ReplayMode::Auto,
            int_udp_port: t.truth.config.int_udp_port,
            limit: None,
        };
        let st = replay(path, &opts).unwrap();
        assert_eq!(
            (st.records, st.sent, st.skipped, st.send_errors),
            (n as u64, n as u64, 0, 0)
        );
        // Paced: n datagrams at 20 000/s take at least (n-1)/20 000 s.
        assert!(st.seconds >= (n - 1) as f64 / 20_000.0 * 0.95, "{st:?}");
        let got = h.join().unwrap();
        assert_eq!(got.len(), n, "every datagram delivered");
        results.push((st, got));
    }
    // Frames are wrapped into exactly the reports the reports-format trace carries.
    assert_eq!(results[0].0.wrapped, n as u64);
    assert_eq!(results[1].0.wrapped, 0);
    assert_eq!(results[0].1, results[1].1);
    // Each is a parseable telemetry report.
    for d in &results[0].1 {
        assert!(matches!(parse_report(d), Ok(TelemetryReport::V2(_))));
    }

    // Payload mode on INT frames sends the INT-over-UDP payload (shim first: type 1 = INT-MD);
    // limit stops early.
    let rx = rx_socket();
    let to = rx.local_addr().unwrap();
    let h = receive(rx, 10);
    let st = replay(
        &frames,
        &ReplayOptions {
            to,
            rate: None,
            mode: ReplayMode::Payload,
            int_udp_port: 5000,
            limit: Some(10),
        },
    )
    .unwrap();
    assert_eq!(st.sent, 10);
    let got = h.join().unwrap();
    assert_eq!(got.len(), 10);
    assert!(got.iter().all(|d| d[0] >> 4 == 1));
    // Wrap mode skips what is not INT (the reports trace's frames are reports, not INT).
    let rx = rx_socket();
    let st = replay(
        &reports,
        &ReplayOptions {
            to: rx.local_addr().unwrap(),
            rate: None,
            mode: ReplayMode::Wrap,
            int_udp_port: 5000,
            limit: None,
        },
    )
    .unwrap();
    assert_eq!((st.sent, st.skipped), (0, n as u64));
}
