//! Fuzz target `rdma_adv`: the memory-advertisement parsers a translator runs on what a
//! collector SENDs after RTU (`docs/rdma.md`, "Memory advertisement"). Whatever parses must
//! describe data areas inside their regions, re-emit, and parse back to the same stores.
#![no_main]

use dta_rdma::adv::{emit_native, parse_native, ProtoAdv, PROTO_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(p) = ProtoAdv::parse(data) {
        assert_eq!(data.len(), PROTO_LEN);
        assert_eq!(p.emit()[..], data[..]);
    }
    if let Ok(stores) = parse_native(data) {
        for s in &stores {
            let end = s.header.data_offset.checked_add(s.header.data_len);
            assert!(
                end.is_some_and(|e| e <= s.region_len),
                "data area past the region"
            );
            let _ = s.store_info();
        }
        let again = parse_native(&emit_native(&stores)).expect("re-emitted advertisement parses");
        assert_eq!(again.len(), stores.len());
        for (a, b) in again.iter().zip(&stores) {
            assert_eq!(
                (
                    a.region_va,
                    a.region_len,
                    a.rkey,
                    &a.header,
                    &a.append_heads
                ),
                (
                    b.region_va,
                    b.region_len,
                    b.rkey,
                    &b.header,
                    &b.append_heads
                )
            );
        }
    }
});
