//! Fuzz target `int`: INT detection in frames, the INT block parser and the telemetry report
//! parser. Nothing may panic; whatever parses is re-emitted and re-parsed, and must come back
//! identical.
#![no_main]

use dta_int_wire::{
    find_int, parse_report, IntDetect, IntRepr, ReportBuilder, TelemetryReport,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let d = IntDetect {
        udp_port: Some(5000),
        dscp: Some((0x17, 0x3f)),
        probe_marker: Some(0x1234_5678_9abc_def0),
    };
    if let Ok(Some(r)) = find_int(data, &d) {
        let _ = dta_int_wire::int_to_json(&r);
    }
    if let Ok(r) = IntRepr::parse(data) {
        let mut out = vec![0u8; r.buffer_len()];
        let n = r.emit(&mut out).expect("a parsed INT block re-emits");
        assert_eq!(IntRepr::parse(&out[..n]), Ok(r));
    }
    if let Ok(r) = parse_report(data) {
        let _ = dta_int_wire::report_to_json(&r, &d);
        if let TelemetryReport::V2(v2) = r {
            let mut out = vec![0u8; data.len() + 64];
            let mut b = ReportBuilder::new(&mut out, &v2.group).unwrap();
            for i in v2.iter() {
                b.push(&i).expect("a parsed report re-emits");
            }
            let n = b.finish().unwrap();
            let Ok(TelemetryReport::V2(again)) = parse_report(&out[..n]) else {
                panic!("re-emitted v2 report must parse")
            };
            assert_eq!(again.group, v2.group);
            assert!(again.iter().eq(v2.iter()));
        }
    }
});
