//! Fuzz target `roce`: `dta_roce::FrameRepr::decode` / `parse` and the CM MAD parser on
//! arbitrary bytes. Whatever decodes is rendered to JSON, re-emitted and re-parsed, and must come
//! back with the same fields (and a valid ICRC).
#![no_main]

use dta_roce::cm::{CmaHeader, MadRepr};
use dta_roce::FrameRepr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = dta_roce::icrc(data);
    if let Ok(d) = FrameRepr::decode(data) {
        let _ = dta_roce::to_json(&d);
        assert_eq!(FrameRepr::parse(data).is_ok(), d.icrc_valid);
        let mut out = [0u8; 70000];
        let n = d.frame.emit(&mut out).expect("a decoded frame re-emits");
        assert_eq!(n, d.frame.buffer_len());
        let again = FrameRepr::parse(&out[..n]).expect("re-parses with a valid ICRC");
        assert_eq!(again, d.frame);
    }
    if let Ok(m) = MadRepr::parse(data) {
        let _ = dta_roce::cm_to_json(&m);
        let mut out = [0u8; 256];
        m.emit(&mut out).expect("a parsed MAD re-emits");
        assert_eq!(MadRepr::parse(&out), Ok(m));
    }
    if let Ok(h) = CmaHeader::parse(data) {
        let mut out = [0u8; 36];
        h.emit(&mut out).unwrap();
        assert_eq!(CmaHeader::parse(&out), Ok(h));
    }
});
