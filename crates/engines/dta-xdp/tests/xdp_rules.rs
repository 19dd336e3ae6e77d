//! Translator rules in the XDP program, end to end in network namespaces over a veth pair the
//! test creates: drop rules keep matching reports out of the stores (counted), Append rules
//! put exactly the matching reports in their list, and the stores and rule counters equal the
//! userspace translator's running the same rules on the same datagrams; a reload under load
//! (generation flips while reports stream in) loses and doubles no report. Needs root: a
//! counted skip otherwise.

use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_store::{
    AppendLayout, AppendSpec, HashScheme, Header, KeyIncrementSpec, KeyWriteSpec, Region, StoreSpec,
};
use dta_testkit::netns::run_in;
use dta_translator::rules::{NotInXdp, RuleConfig, RuleCounter, RuleSet};
use dta_translator::{Stats, Translator, TranslatorConfig};
use dta_xdp::{userspace_primitives, XdpTranslator};

mod common;
use common::*;

fn kw_spec() -> StoreSpec {
    StoreSpec::KeyWrite(KeyWriteSpec {
        hash: HashScheme::Prototype,
        redundancy: 2,
        ..KeyWriteSpec::new(1024, 4, 4)
    })
}

fn headers(app: AppendSpec) -> Vec<Header> {
    vec![
        Header::new("kw", &kw_spec()).unwrap(),
        Header::new(
            "ki",
            &StoreSpec::KeyIncrement(KeyIncrementSpec {
                counters: 1024,
                key_len: 4,
                hash: HashScheme::Prototype,
                redundancy: 2,
                windows: 0,
                window_ms: 0,
            }),
        )
        .unwrap(),
        Header::new("app", &StoreSpec::Append(app)).unwrap(),
    ]
}

fn rules(toml_rules: &str) -> Vec<RuleConfig> {
    #[derive(serde::Deserialize)]
    struct F {
        rules: Vec<RuleConfig>,
    }
    toml::from_str::<F>(toml_rules).unwrap().rules
}

fn compile(rs: &[RuleConfig], hs: &[Header], generation: u64) -> RuleSet {
    let cat: Vec<(&str, &StoreSpec)> = hs.iter().map(|h| (h.name.as_str(), &h.spec)).collect();
    RuleSet::compile(rs, &cat, generation).unwrap()
}

/// Every rule here lowers to the driver: drops by key prefix (Key-Write) and by list id
/// (Append), Append of matching Key-Writes (field test) and Key-Increments (value test).
const RULES: &str = r#"
[[rules]]
name = "drop-0b"
primitive = "key-write"
key_prefix = "0b"
action = "drop"

[[rules]]
name = "big-data"
primitive = "key-write"
store = "kw"
fields = [{ offset = 0, width = 4, op = "ge", value = 100 }]
action = "append"
list = 1
entry = "key_value"

[[rules]]
name = "big-add"
primitive = "key-increment"
when = { op = "gt", value = 20 }
action = "append"
list = 2
entry = "value"

[[rules]]
name = "drop-list-3"
primitive = "append"
key_mask = "000000ff"
key_value = "00000003"
action = "drop"
"#;

fn proto_kw2(key: u32, data: u32) -> Vec<u8> {
    proto_kw(key, 2, data.to_be_bytes())
}

fn workload() -> (Vec<Vec<u8>>, u64, u64, u64, u64) {
    let (mut d, mut dropped_kw, mut big, mut big_add, mut dropped_ap) = (vec![], 0, 0, 0, 0);
    for i in 0..60u32 {
        d.push(proto_kw2(0x0a00_0000 + i, i * 7));
        big += (i * 7 >= 100) as u64;
        d.push(proto_kw2(0x0b00_0000 + i, i * 7));
        dropped_kw += 1;
        d.push(proto_ki(i % 9, 2, i as u64 + 1));
        big_add += (i + 1 > 20) as u64;
        // Received Appends go to lists 0 and 3 (the rules derive into 1 and 2).
        let list = if i % 2 == 0 { 0u32 } else { 3 };
        let mut ap = list.to_be_bytes().to_vec();
        ap.extend((0..16).map(|j| i as u8 ^ j));
        d.push(native(&[(2, 0, vec![], ap)]));
        dropped_ap += (list == 3) as u64;
    }
    // A native datagram of several reports, some dropped, some deriving entries.
    for i in 0..10u8 {
        let mut ap = 3u32.to_be_bytes().to_vec();
        ap.extend([i; 16]);
        d.push(native(&[
            (1, 1, vec![0x0b, 0, 1, i], vec![0, 0, 1, i]),
            (1, 1, vec![0x0c, 0, 1, i], vec![0, 0, 1, i]),
            (2, 0, vec![], ap),
        ]));
        dropped_kw += 1;
        big += 1;
        dropped_ap += 1;
    }
    (d, dropped_kw, big, big_add, dropped_ap)
}

fn data_of_all(x: &XdpTranslator) -> Vec<Vec<u8>> {
    x.stores().iter().map(|s| data_of(&s.region)).collect()
}

fn head(r: &Region, list: u32) -> u64 {
    let l = AppendLayout::new(r.header()).unwrap();
    let mut b = [0u8; 8];
    r.mem().read(l.head_offset(list), &mut b).unwrap();
    u64::from_le_bytes(b)
}

#[test]
fn xdp_rules_drop_and_append_as_the_userspace_translator() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("the XDP rules test loads BPF: {why}");
    }
    let net = net("r", 97);
    let hs = headers(AppendSpec {
        lists: 4,
        capacity: 256,
        entry_len: 16,
        batch: 4,
        record: Default::default(),
    });
    let rs = rules(RULES);
    let set = compile(&rs, &hs, 1);
    let split = set.split_xdp(&userspace_primitives(&hs));
    assert_eq!(
        split.xdp.len(),
        4,
        "every rule runs in the driver: {split:?}"
    );
    let (hs2, dev_a) = (hs.clone(), net.dev_a.clone());
    let mut x = run_in(&net.a, move || {
        let mut x = XdpTranslator::load(&any_source(), &hs2).expect("load XDP program");
        x.attach(&dev_a, false).expect("attach");
        x
    });
    assert_eq!(x.install_rules(&split).unwrap(), 1);
    let to: SocketAddr = format!("{}:40040", net.ip_a).parse().unwrap();
    let _sock = run_in(&net.a, move || UdpSocket::bind(to).unwrap());

    let (work, dropped_kw, big, big_add, dropped_ap) = workload();
    let n = work.len() as u64;
    send_all(&net.b, to, work.clone());
    assert!(
        wait_for(|| x.stats().unwrap().datagrams >= n),
        "XDP applied {:?}",
        x.stats()
    );
    let st = x.stats().unwrap();
    assert_eq!(st.datagrams, n, "every datagram is consumed in the driver");
    assert_eq!(st.rule_dropped, dropped_kw + dropped_ap);
    assert_eq!(st.drop_map_error, 0);
    let rst = x.rule_stats().unwrap();
    assert_eq!(rst.total(RuleCounter::Dropped), dropped_kw + dropped_ap);
    assert_eq!(rst.total(RuleCounter::Derived), big + big_add);
    assert_eq!(rst.total(RuleCounter::DerivedUnfit), 0);
    let per: Vec<(String, u64)> = rst
        .rules
        .iter()
        .map(|r| (r.name.clone(), r.counters["fired"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        per,
        vec![
            ("drop-0b".into(), dropped_kw),
            ("big-data".into(), big),
            ("big-add".into(), big_add),
            ("drop-list-3".into(), dropped_ap),
        ]
    );
    let app = x.region("app").unwrap();
    assert_eq!(
        head(app, 1),
        big,
        "list 1 holds the Key-Writes with data >= 100"
    );
    assert_eq!(head(app, 2), big_add, "list 2 holds the adds over 20");
    assert_eq!(head(app, 3), 0, "appends to list 3 were dropped");

    // The same datagrams and rules through the userspace translator.
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<Arc<Region>> = hs
        .iter()
        .map(|h| {
            Arc::new(Region::create(&dir.path().join(&h.name), &h.name, &h.spec, false).unwrap())
        })
        .collect();
    let cfg = TranslatorConfig {
        rules: rs.clone(),
        ..Default::default()
    };
    let mut t = Translator::colocated(&cfg, files.clone(), Arc::new(Stats::default())).unwrap();
    let src: SocketAddr = "127.0.0.9:5000".parse().unwrap();
    for d in &work {
        t.handle_datagram(d, src, Instant::now());
    }
    t.flush_all();
    assert_eq!(t.stats().total_rejected(), 0);
    let us = t.rules().stats();
    for c in [
        RuleCounter::Matched,
        RuleCounter::Fired,
        RuleCounter::Dropped,
        RuleCounter::Derived,
    ] {
        assert_eq!(
            rst.total(c),
            us.counter(c).load(Ordering::Relaxed),
            "{}: XDP and userspace differ",
            c.name()
        );
    }
    for ((h, f), m) in hs.iter().zip(&files).zip(data_of_all(&x)) {
        assert!(
            m == data_of(f),
            "{}: the XDP store differs from the userspace translator's",
            h.name
        );
    }
}

/// Rules that are not simple stay in userspace with every store they touch.
#[test]
fn rules_that_aggregate_or_write_stay_in_userspace() {
    let hs = headers(AppendSpec {
        lists: 4,
        capacity: 256,
        entry_len: 16,
        batch: 4,
        record: Default::default(),
    });
    let mut rs = rules(RULES);
    rs.extend(rules(
        r#"
[[rules]]
name = "window"
primitive = "key-increment"
aggregate = "sum"
over = "window"
window_ms = 100
when = { op = "gt", value = 1 }
action = "drop"
"#,
    ));
    // The window rule takes Key-Increment to userspace, and with it "big-add", which appends:
    // so Append goes too, and with it "drop-list-3" and "big-data", which looks at Key-Write:
    // so "drop-0b" goes too.
    let set = compile(&rs, &hs, 1);
    let split = set.split_xdp(&userspace_primitives(&hs));
    assert!(split.xdp.is_empty(), "{split:?}");
    assert_eq!(split.userspace_primitives.len(), 5);
    // Without "big-data", Key-Write stays in the driver with "drop-0b".
    rs.retain(|r| r.name != "big-data");
    let set = compile(&rs, &hs, 1);
    let split = set.split_xdp(&userspace_primitives(&hs));
    let names: Vec<&str> = split.xdp.iter().map(|r| r.name).collect();
    assert_eq!(names, ["drop-0b"]);
    let mut up = split.userspace_primitives.clone();
    up.sort_by_key(|p| format!("{p:?}"));
    assert_eq!(
        format!("{up:?}"),
        "[Append, KeyIncrement, Postcarding, SketchMerge]"
    );
    let why: Vec<_> = split.userspace.iter().map(|(_, n, w)| (*n, *w)).collect();
    assert_eq!(
        why,
        [
            ("big-add", NotInXdp::Primitive),
            ("drop-list-3", NotInXdp::Primitive),
            ("window", NotInXdp::Primitive),
        ]
    );
}

/// A reload under load: while datagrams stream in, the rule set flips between two sets that
/// append each report's key to list 0 or list 1; every report must be in exactly one list.
#[test]
fn xdp_rule_reload_under_load_loses_and_doubles_nothing() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("the XDP rules test loads BPF: {why}");
    }
    const N: u32 = 6000;
    let net = net("q", 96);
    let hs = headers(AppendSpec {
        lists: 2,
        capacity: 8192,
        entry_len: 4,
        batch: 4,
        record: Default::default(),
    });
    let sets: Vec<Vec<RuleConfig>> = (0..2)
        .map(|l| {
            rules(&format!(
                "[[rules]]\nname = \"to-{l}\"\nprimitive = \"key-write\"\naction = \"append\"\nlist = {l}\nentry = \"key\"\n"
            ))
        })
        .collect();
    let (hs2, dev_a) = (hs.clone(), net.dev_a.clone());
    let mut x = run_in(&net.a, move || {
        let mut x = XdpTranslator::load(&any_source(), &hs2).expect("load XDP program");
        x.attach(&dev_a, false).expect("attach");
        x
    });
    let to: SocketAddr = format!("{}:40040", net.ip_a).parse().unwrap();
    let _sock = run_in(&net.a, move || UdpSocket::bind(to).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    // The reloads so far: the sender holds its second half until RELOADS happened, so that many
    // fall between datagrams however the two threads are scheduled.
    let reloads = Arc::new(AtomicU64::new(0));
    const RELOADS: u64 = 20;
    let sender = {
        let (b, done, reloads) = (net.b.clone(), done.clone(), reloads.clone());
        std::thread::spawn(move || {
            run_in(&b, move || {
                let s = UdpSocket::bind("0.0.0.0:0").unwrap();
                for i in 0..N {
                    if i == N / 2 {
                        dta_testkit::wait_until(
                            "the rule reloads mid-stream",
                            || reloads.load(Ordering::Relaxed),
                            |&g| g >= RELOADS,
                        );
                    }
                    s.send_to(&proto_kw(0x0a00_0000 + i, 1, [0, 0, 0, 1]), to)
                        .unwrap();
                    if i % 8 == 0 {
                        std::thread::sleep(Duration::from_micros(300));
                    }
                }
            });
            done.store(true, Ordering::Relaxed);
        })
    };
    let mut g = 0u64;
    while !done.load(Ordering::Relaxed) {
        let set = compile(&sets[(g % 2) as usize], &hs, g + 1);
        g = x
            .install_rules(&set.split_xdp(&userspace_primitives(&hs)))
            .unwrap();
        reloads.store(g, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(2));
    }
    sender.join().unwrap();
    assert!(
        wait_for(|| x.stats().unwrap().datagrams >= N as u64),
        "XDP applied {:?}",
        x.stats()
    );
    assert_eq!(x.stats().unwrap().datagrams, N as u64);
    assert!(
        g >= RELOADS,
        "only {g} reloads while the reports streamed in"
    );
    let app = x.region("app").unwrap();
    let l = AppendLayout::new(app.header()).unwrap();
    let mut seen = HashSet::new();
    let mut per_list = [0u64; 2];
    for list in 0..2u32 {
        let h = head(app, list);
        per_list[list as usize] = h;
        for i in 0..h {
            let mut e = [0u8; 4];
            app.mem().read(l.entry_offset(list, i), &mut e).unwrap();
            assert!(
                seen.insert(u32::from_be_bytes(e)),
                "report {e:?} appended twice"
            );
        }
    }
    assert!(
        per_list[0] > 0 && per_list[1] > 0,
        "both sets ran: {per_list:?}"
    );
    assert_eq!(seen.len() as u32, N, "reports lost across {g} reloads");
    assert!(seen
        .iter()
        .all(|k| (0x0a00_0000..0x0a00_0000 + N).contains(k)));
    let rst = x.rule_stats().unwrap();
    assert_eq!(rst.total(RuleCounter::Derived), N as u64);
    assert_eq!(rst.total(RuleCounter::Reloads), g - 1);
}
