//! The HTTP query API, served on an ephemeral loopback port by the test itself.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use dta_collector::{query, Collector, StoreConfig};
use dta_store::{AppendLayout, KeyIncrementLayout, KeyWriteLayout};

fn store(toml_text: &str) -> StoreConfig {
    toml::from_str(toml_text).unwrap()
}

fn get(addr: std::net::SocketAddr, path: &str) -> (u16, serde_json::Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status: u16 = resp[9..12].parse().unwrap();
    let body = resp.split("\r\n\r\n").nth(1).unwrap_or("");
    // Chunked or not, the JSON object is between the first '{' or '[' and the last '}' or ']'.
    let start = body.find(['{', '[']).unwrap();
    let end = body.rfind(['}', ']']).unwrap();
    (status, serde_json::from_str(&body[start..=end]).unwrap())
}

#[test]
fn http_api_answers_queries_and_reports_errors() {
    let dir = tempfile::tempdir().unwrap();
    let stores = vec![
        store("name = 'kw'\nkind = 'key-write'\nslots = 1024"),
        store("name = 'ki'\nkind = 'key-increment'\ncounters = 1024"),
        store("name = 'ev'\nkind = 'append'\nlists = 2\ncapacity = 64\nbatch = 4"),
    ];
    let c = Arc::new(Collector::create(dir.path(), &stores, false).unwrap());
    // Write through the store layouts, as the translator would.
    let kw = &c.store("kw").unwrap().region;
    KeyWriteLayout::new(kw.header())
        .unwrap()
        .apply(
            &42u32.to_be_bytes(),
            &[0xde, 0xad, 0xbe, 0xef],
            2,
            &mut kw.mem().sink(),
        )
        .unwrap();
    let ki = &c.store("ki").unwrap().region;
    KeyIncrementLayout::new(ki.header())
        .unwrap()
        .apply(&[10, 0, 0, 1], 5, 2, &mut ki.mem().sink())
        .unwrap();
    let ev = &c.store("ev").unwrap().region;
    AppendLayout::new(ev.header())
        .unwrap()
        .write_entries(1, 0, &[0, 0, 0, 1, 0, 0, 0, 2], &mut ev.mem().sink())
        .unwrap();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let router = dta_collector::http::router(c.clone());
    rt.spawn(async move { axum::serve(listener, router).await });

    let (s, v) = get(addr, "/query/kw/kw?key=42&redundancy=2");
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "found");
    assert_eq!(v["data"], "deadbeef");
    assert_eq!(v["votes"], 2);
    // How sure: one report of 2 copies in 1024 slots (load 2/1024).
    let c = &v["confidence"];
    assert_eq!(c["load"], 2.0 / 1024.0);
    let over = 1.0 - (-2.0f64 / 1024.0).exp();
    let p = c["p_overwritten"].as_f64().unwrap();
    assert!((p - over * over).abs() < 1e-12, "{v}");
    assert!(c["p_wrong"].as_f64().unwrap() < p * 1e-9, "{v}");

    let (_, v) = get(addr, "/query/kw/kw?key=0x0000002b&redundancy=2");
    assert_eq!(v["status"], "empty");
    assert!(v["confidence"]["p_overwritten"].as_f64().unwrap() > 0.0);

    let (_, v) = get(addr, "/query/ki/ki?key=10.0.0.1&redundancy=2");
    assert_eq!(v["count"], 5);
    // The count-min bound from the store's total (5) and width: e·2/1024·5, rounded up.
    assert_eq!(v["bound"]["total"], 5);
    assert_eq!(v["bound"]["error"], 1);
    assert!((v["bound"]["delta"].as_f64().unwrap() - (-2.0f64).exp()).abs() < 1e-12);

    let (_, v) = get(addr, "/query/list/ev?list=1&tail=0");
    assert_eq!(v["entries"], serde_json::json!(["00000001", "00000002"]));
    assert_eq!(v["next_tail"], 2);
    assert_eq!(
        (&v["complete"], &v["more"]),
        (&true.into(), &false.into()),
        "{v}"
    );
    // Cut by max: said, with how many follow.
    let (_, v) = get(addr, "/query/list/ev?list=1&tail=0&max=1");
    assert_eq!(v["entries"], serde_json::json!(["00000001"]));
    assert_eq!(
        (&v["complete"], &v["more"]),
        (&false.into(), &true.into()),
        "{v}"
    );
    assert!(
        v["note"]
            .as_str()
            .unwrap()
            .contains("1 more entries follow"),
        "{v}"
    );
    // Lapped: the overwritten entries are said.
    let lap: Vec<u8> = (0..64u32).flat_map(|i| i.to_be_bytes()).collect();
    let layout = AppendLayout::new(ev.header()).unwrap();
    for first in [0, 64] {
        layout
            .write_entries(0, first, &lap, &mut ev.mem().sink())
            .unwrap();
    }
    let (_, v) = get(addr, "/query/list/ev?list=0&tail=0&max=64");
    // At least the lap (the reader also skips the batch the writer may be in).
    assert!(v["missed"].as_u64().unwrap() >= 64, "{v}");
    assert_eq!(v["complete"], false, "{v}");
    assert!(
        v["note"]
            .as_str()
            .unwrap()
            .contains("entries were overwritten"),
        "{v}"
    );

    let (_, v) = get(addr, "/stores");
    assert_eq!(v.as_array().unwrap().len(), 3);

    // Errors: unknown store, wrong kind, bad key, missing key.
    let (s, v) = get(addr, "/query/kw/nope?key=1");
    assert_eq!(s, 404);
    assert!(v["error"].as_str().unwrap().contains("no store named"));
    // The stores that exist are named.
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("the stores are: ev, ki, kw"),
        "{v}"
    );
    let (s, v) = get(addr, "/query/kw/ki?key=1");
    assert_eq!(s, 400);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("not a KeyWrite store"),
        "{v}"
    );
    let (s, v) = get(addr, "/query/kw/kw?key=0x01");
    assert_eq!(s, 400);
    assert!(v["error"].as_str().unwrap().contains("4 bytes"), "{v}");
    let (s, _) = get(addr, "/query/kw/kw");
    assert_eq!(s, 400);
    let (s, v) = get(addr, "/query/list/ev?list=7");
    assert_eq!(s, 400, "{v}");

    // The same answers through the library, for the CLI.
    let r = query::key_write(kw, &42u32.to_be_bytes(), Some(2), 2).unwrap();
    assert_eq!(r.status, "found");
}

#[test]
fn config_errors_name_the_store_and_the_problem() {
    let e = store("name = 'x'\nkind = 'append'\nslots = 4")
        .spec()
        .unwrap_err();
    assert!(e.to_string().contains("`slots` does not apply"), "{e}");
    // A record layout: Append stores only, and with the entry length it needs.
    let e = store("name = 'x'\nkind = 'key-write'\nrecord = 'int-event'")
        .spec()
        .unwrap_err();
    assert!(e.to_string().contains("`record` does not apply"), "{e}");
    let bad = store("name = 'x'\nkind = 'append'\nentry_len = 16\nrecord = 'int-event'")
        .spec()
        .unwrap();
    let e = dta_store::Header::new("x", &bad).unwrap_err();
    assert!(e.to_string().contains("needs entry_len = 32"), "{e}");
    let spec = store("name = 'x'\nkind = 'append'\nentry_len = 32\nrecord = 'int-event'")
        .spec()
        .unwrap();
    let h = dta_store::Header::new("x", &spec).unwrap();
    let mut page = vec![0u8; dta_store::header::HEADER_LEN];
    h.emit(&mut page);
    let back = dta_store::Header::parse(&page).unwrap();
    assert_eq!(back.spec, spec, "the layout is kept in the region header");
    let e = store("name = 'bad name'\nkind = 'append'")
        .spec()
        .unwrap_err();
    assert!(e.to_string().contains("name must be"), "{e}");
    let e = store("name = 'x'").spec().unwrap_err();
    assert!(e.to_string().contains("missing `kind`"), "{e}");
    let e = store("name = 'x'\nkind = 'key-write'\nhash = 'md5'")
        .spec()
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("expected \"prototype\", \"native\" or \"xxh3\""),
        "{e}"
    );
    // Invalid geometry is refused when the region is created, with the store's name.
    let dir = tempfile::tempdir().unwrap();
    let bad = store("name = 'odd'\nkind = 'key-write'\nslots = 1000");
    let e = Collector::create(dir.path(), &[bad], false).err().unwrap();
    assert!(e.to_string().contains("odd"), "{e}");
    // Two stores with one name.
    let a = store("name = 'a'\nkind = 'key-write'\nslots = 64");
    let e = Collector::create(dir.path(), &[a.clone(), a], false)
        .err()
        .unwrap();
    assert!(e.to_string().contains("two stores"), "{e}");
}

#[test]
fn parse_key_forms() {
    assert_eq!(query::parse_key("42", Some(4)).unwrap(), vec![0, 0, 0, 42]);
    assert_eq!(query::parse_key("0x0a0b", Some(2)).unwrap(), vec![10, 11]);
    assert_eq!(
        query::parse_key("10.1.2.3", Some(4)).unwrap(),
        vec![10, 1, 2, 3]
    );
    let k = query::parse_key("10.0.0.1:1234-10.0.0.2:80/6", Some(13)).unwrap();
    assert_eq!(k, vec![10, 0, 0, 1, 10, 0, 0, 2, 0x04, 0xd2, 0, 80, 6]);
    assert!(query::parse_key("300", Some(1)).is_err());
    assert!(query::parse_key("42", Some(13)).is_err());
    assert!(query::parse_key("0xzz", Some(1)).is_err());
    assert!(query::parse_key("hello", None).is_err());
    assert_eq!(query::parse_key("7", None).unwrap(), vec![0, 0, 0, 7]);
}

/// Another writer's directory is served read-only beside the collector's own: its stores are
/// answered, never written (opened read-only), and a name the collector already has is refused.
#[test]
fn another_writers_stores_are_served_read_only() {
    let own = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let kw = store("name = 'kw'\nkind = 'key-write'\nslots = 64\nkey_len = 4\ndata_len = 4");
    let ev = store("name = 'ev'\nkind = 'append'\nlists = 1\ncapacity = 64\nentry_len = 4");
    let writer = Collector::create(other.path(), &[ev], false).unwrap();
    let mut c = Collector::create(own.path(), std::slice::from_ref(&kw), false).unwrap();
    c.serve_read_only(other.path()).unwrap();
    let served = c.store("ev").unwrap();
    assert_eq!(served.path, other.path().join("ev.region"));
    assert!(
        !served.region.is_writable(),
        "opened read-only: this collector never writes another writer's stores"
    );
    assert_eq!(c.status().len(), 2);
    // A clash of names is refused.
    let clash = tempfile::tempdir().unwrap();
    let _w2 = Collector::create(clash.path(), &[kw], false).unwrap();
    let e = c.serve_read_only(clash.path()).unwrap_err();
    assert!(e.to_string().contains("two stores are named \"kw\""), "{e}");
    drop(writer);
}
