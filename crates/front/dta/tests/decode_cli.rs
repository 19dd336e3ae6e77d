//! `dta decode` on whole Ethernet frames and on bare UDP payloads of every protocol it knows:
//! a frame is dispatched by its UDP destination port, a payload must parse as exactly one
//! protocol, and the output always names the protocol and the layer decoded.

mod common;

use std::net::SocketAddrV4;

use common::dta;
use serde_json::Value;

/// A prototype Key-Write, short header: redundancy 2, key 7, data 01020304.
const PROTOTYPE: &str = "0100020000000701020304";
/// A native datagram: one Append report on list 3.
const NATIVE: &str = "10800100000000010000000502000004000000030a0b0c0d";

fn run(args: &[&str]) -> (Option<i32>, Value) {
    let out = dta().arg("decode").args(args).output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), v)
}

/// `payload` in an Ethernet/IPv4/UDP frame to UDP port `dport` (valid IPv4 header checksum).
fn frame(dport: u16, payload: &[u8]) -> String {
    hex::encode(
        dta_net::udp_frame_between(
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            SocketAddrV4::new([10, 0, 0, 1].into(), 40000),
            SocketAddrV4::new([10, 0, 0, 2].into(), dport),
            payload,
        )
        .unwrap(),
    )
}

fn vectors(file: &str) -> Value {
    let path = format!(
        "{}/../../../spec/vectors/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn vector(doc: &Value, name: &str) -> Value {
    doc["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no vector {name}"))
        .clone()
}

#[test]
fn prototype_and_native_frames_decode_as_dta() {
    for (hex, protocol) in [(PROTOTYPE, "prototype"), (NATIVE, "native")] {
        let f = frame(dta_wire::DTA_PORT, &hex::decode(hex).unwrap());
        let (code, v) = run(&["--hex", &f]);
        assert_eq!(code, Some(0), "{v}");
        assert_eq!(v["decoded_as"], "dta", "{v}");
        assert_eq!(v["layer"], "frame", "{v}");
        assert_eq!(v["protocol"], protocol, "{v}");
        // The same bytes as a bare payload decode identically, at the payload layer.
        let (code, p) = run(&["--hex", hex]);
        assert_eq!(code, Some(0), "{p}");
        assert_eq!(
            (&p["decoded_as"], &p["layer"]),
            (&"dta".into(), &"payload".into())
        );
        assert_eq!(p["report"], v["report"], "{p}");
        assert_eq!(p["reports"], v["reports"], "{p}");
    }
    assert!(run(&[
        "--hex",
        &frame(dta_wire::DTA_PORT, &hex::decode(PROTOTYPE).unwrap())
    ])
    .1
    .to_string()
    .contains("01020304"));
}

#[test]
fn roce_frame_decodes_as_roce_and_its_payload_is_refused() {
    let v = vector(&vectors("roce.json"), "rc_write_only_pad3");
    let hex = v["hex"].as_str().unwrap();
    let (code, d) = run(&["--hex", hex]);
    assert_eq!(code, Some(0), "{d}");
    assert_eq!(
        (&d["decoded_as"], &d["layer"]),
        (&"roce".into(), &"frame".into())
    );
    assert_eq!(d["icrc_valid"], true, "{d}");
    assert_eq!(d["bth"]["opcode"], "rc_rdma_write_only", "{d}");
    // The UDP payload alone (BTH onwards) cannot have its ICRC checked: refused, not guessed.
    let payload = &hex[(14 + 20 + 8) * 2..];
    let (code, e) = run(&["--as", "roce", "--hex", payload]);
    assert_eq!(code, Some(1), "{e}");
    assert_eq!(e["error"], "payload_not_supported", "{e}");
    assert!(e["message"]
        .as_str()
        .unwrap()
        .contains("whole Ethernet frame"));
}

#[test]
fn telemetry_reports_decode_as_int_in_a_frame_and_as_a_payload() {
    let doc = vectors("int.json");
    for name in ["report_v2_one", "report_v05_drop", "report_v10_local"] {
        let vec = vector(&doc, name);
        let payload = vec["hex"].as_str().unwrap();
        let version = &vec["expect"]["version"];
        let f = frame(dta_int_wire::REPORT_PORT, &hex::decode(payload).unwrap());
        let (code, v) = run(&["--hex", &f]);
        assert_eq!(code, Some(0), "{name}: {v}");
        assert_eq!(
            (&v["decoded_as"], &v["layer"]),
            (&"int".into(), &"frame".into())
        );
        assert_eq!(v["kind"], "telemetry_report", "{name}: {v}");
        assert_eq!(&v["version"], version, "{name}: {v}");
        let (code, p) = run(&["--as", "int", "--hex", payload]);
        assert_eq!(code, Some(0), "{name}: {p}");
        assert_eq!(
            (&p["decoded_as"], &p["layer"]),
            (&"int".into(), &"payload".into())
        );
        assert_eq!(&p["version"], version, "{name}: {p}");
    }
    // A v2.0 report payload parses only as a telemetry report: auto picks it.
    let v2 = vector(&doc, "report_v2_one");
    let (code, p) = run(&["--hex", v2["hex"].as_str().unwrap()]);
    assert_eq!(code, Some(0), "{p}");
    assert_eq!(
        (&p["decoded_as"], &p["layer"]),
        (&"int".into(), &"payload".into())
    );
}

#[test]
fn int_data_frame_to_the_int_port_decodes_as_int() {
    let doc = vectors("int.json");
    let port = doc["detect"]["udp_port"].as_u64().unwrap().to_string();
    let vec = vector(&doc, "int_md_udp_2hop");
    let (code, v) = run(&[
        "--int-udp-port",
        &port,
        "--hex",
        vec["hex"].as_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(
        (&v["decoded_as"], &v["layer"]),
        (&"int".into(), &"frame".into())
    );
    assert_eq!(v["hops"], vec["expect"]["hops"], "{v}");
}

#[test]
fn unknown_port_ambiguous_and_undecodable_are_errors_with_messages() {
    // A DTA report in a frame to a port no protocol owns: an error naming the port...
    let f = frame(5555, &hex::decode(PROTOTYPE).unwrap());
    let (code, e) = run(&["--hex", &f]);
    assert_eq!(code, Some(1), "{e}");
    assert_eq!(e["error"], "unknown_port", "{e}");
    assert!(e["message"].as_str().unwrap().contains("5555"), "{e}");
    // ... unless --as says what it carries.
    let (code, v) = run(&["--as", "dta", "--hex", &f]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(
        (&v["decoded_as"], &v["layer"]),
        (&"dta".into(), &"frame".into())
    );
    // --as frame refuses what is not a frame.
    let (code, e) = run(&["--as", "frame", "--hex", PROTOTYPE]);
    assert_eq!(code, Some(1), "{e}");
    assert_eq!(e["error"], "not_a_frame", "{e}");
    // Nothing parses: every attempt is listed.
    let (code, e) = run(&["--hex", "0901"]);
    assert_eq!(code, Some(1), "{e}");
    assert_eq!(e["error"], "undecodable", "{e}");
    assert_eq!(e["tried"]["dta"], "unknown_version", "{e}");
    assert!(
        e["tried"]["int"].is_string() && e["tried"]["frame"].is_string(),
        "{e}"
    );
    assert!(!e["message"].as_str().unwrap().is_empty());
}
