//! Fuzz target `parse`: `dta_wire::parse` with both prototype base formats, and the NACK and
//! congestion-notice parsers. Whatever parses is re-emitted and re-parsed, and must come back
//! identical.
#![no_main]

use dta_wire::native::{self, DatagramBuilder};
use dta_wire::prototype::{self, BaseFormat};
use dta_wire::Datagram;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for format in [BaseFormat::Short, BaseFormat::Long] {
        let Ok(d) = dta_wire::parse(data, format) else {
            continue;
        };
        let _ = dta_wire::to_json(&d);
        let mut out = [0u8; 70000];
        match d {
            Datagram::Prototype(repr) => {
                let n = repr
                    .emit(&mut out, format)
                    .expect("a parsed report re-emits");
                assert_eq!(n, repr.buffer_len(format));
                assert_eq!(prototype::Repr::parse(&out[..n], format), Ok(repr));
                // Only reserved bits may differ between input and output.
                assert_eq!(n, data.len());
            }
            Datagram::Native(dg) => {
                let n = match (dg.nack(), dg.notice(), dg.hello()) {
                    (Some(nack), _, _) => nack.emit(&mut out).expect("a parsed NACK re-emits"),
                    (None, Some(notice), _) => {
                        notice.emit(&mut out).expect("a parsed notice re-emits")
                    }
                    (None, None, Some(hello)) => {
                        hello.emit(&mut out).expect("a parsed hello re-emits")
                    }
                    (None, None, None) => {
                        let h = dg.header;
                        let mut b = DatagramBuilder::new(
                            &mut out,
                            h.priority,
                            h.retransmittable,
                            h.reporter_id,
                            h.seq,
                        )
                        .unwrap();
                        for r in dg.reports() {
                            b.push(&r).expect("a parsed report re-emits");
                        }
                        b.finish()
                    }
                };
                let short_form = dg.nack().is_some_and(|k| k.missing == 0);
                if short_form {
                    // A NACK whose bitmap is all zero (count 2) names nothing more than the
                    // short form does, and re-emits as it (count 0, 8 bytes shorter).
                    assert!(n == data.len() || n + 8 == data.len());
                } else {
                    assert_eq!(n, data.len());
                }
                let again = native::Datagram::parse(&out[..n]).expect("re-parses");
                if short_form {
                    let count = again.header.count;
                    assert_eq!(again.header, native::HeaderRepr { count, ..dg.header });
                } else {
                    assert_eq!(again.header, dg.header);
                }
                assert_eq!(again.nack(), dg.nack());
                assert_eq!(again.notice(), dg.notice());
                assert_eq!(again.hello(), dg.hello());
                assert!(again.reports().eq(dg.reports()));
            }
        }
    }
    if let Ok(n) = native::NackRepr::parse(data) {
        let mut out = [0u8; 32];
        let len = n.emit(&mut out).unwrap();
        assert_eq!(native::NackRepr::parse(&out[..len]), Ok(n));
    }
    if let Ok(h) = native::HelloRepr::parse(data) {
        let mut out = [0u8; native::HELLO_LEN];
        let len = h.emit(&mut out).unwrap();
        assert_eq!(native::HelloRepr::parse(&out[..len]), Ok(h));
    }
    if let Ok(c) = native::NoticeRepr::parse(data) {
        let mut out = [0u8; native::NOTICE_LEN];
        let len = c.emit(&mut out).unwrap();
        assert_eq!(native::NoticeRepr::parse(&out[..len]), Ok(c));
    }
    if let Ok(n) = prototype::NackRepr::parse(data) {
        let mut out = [0u8; 2];
        n.emit(&mut out).unwrap();
        assert_eq!(prototype::NackRepr::parse(&out), Ok(n));
    }
});
