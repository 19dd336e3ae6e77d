use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use dta_store::{AppendSpec, HashScheme, KeyWriteSpec, PostcardingSpec, StoreSpec};
use dta_wire::Report;

use super::*;
use crate::postcard::{Chunk, MAX_HOPS};

fn stores() -> Vec<(&'static str, StoreSpec)> {
    vec![
        (
            "paths",
            StoreSpec::Postcarding(PostcardingSpec {
                chunks: 64,
                hops: 4,
                slot_bits: 32,
                redundancy: 1,
                key_len: 4,
            }),
        ),
        (
            "out",
            StoreSpec::Append(AppendSpec {
                lists: 2,
                capacity: 64,
                entry_len: 16,
                batch: 4,
                record: Default::default(),
            }),
        ),
        (
            "kw",
            StoreSpec::KeyWrite(KeyWriteSpec {
                slots: 64,
                key_len: 4,
                data_len: 4,
                hash: HashScheme::Native,
                redundancy: 2,
            }),
        ),
    ]
}

fn compile(toml_rules: &str) -> Result<RuleSet, String> {
    #[derive(serde::Deserialize)]
    struct F {
        rules: Vec<RuleConfig>,
    }
    let f: F = toml::from_str(toml_rules).map_err(|e| e.to_string())?;
    let s = stores();
    let cat: Vec<_> = s.iter().map(|(n, s)| (*n, s)).collect();
    RuleSet::compile(&f.rules, &cat, 1)
}

fn engine(toml_rules: &str, state: usize) -> RuleEngine {
    RuleEngine::new(Rules::new(compile(toml_rules).unwrap()), state)
}

fn outputs(e: &mut RuleEngine) -> Vec<(String, Vec<u8>)> {
    let mut v = vec![];
    e.take_outputs(&mut v);
    v.iter()
        .map(|d| match d.report() {
            Report::Append { list_id, data, .. } => (format!("append {list_id}"), data.to_vec()),
            Report::KeyWrite { key, data, .. } => (format!("write {key:?}"), data.to_vec()),
            r => panic!("{r:?}"),
        })
        .collect()
}

const SUM_PATH: &str = r#"
[[rules]]
name = "slow"
primitive = "postcarding"
store = "paths"
aggregate = "sum"
over = "path"
when = { op = "gt", value = 100 }
action = "append"
list = 1
entry = "key_value"
"#;

fn chunk(key: u32, values: &[u32]) -> Chunk {
    let mut c = Chunk {
        key: [0; 16],
        key_len: 4,
        values: [None; MAX_HOPS],
        immediate: false,
        flagged: 0,
    };
    c.key[..4].copy_from_slice(&key.to_be_bytes());
    for (i, v) in values.iter().enumerate() {
        c.values[i] = Some(*v);
    }
    c
}

/// The path rule appends exactly the paths whose sum is over T, with the sum; other paths are
/// written untouched.
#[test]
fn a_path_sum_over_t_appends_the_key_and_the_sum() {
    let mut e = engine(SUM_PATH, 64);
    assert!(e.path_rules());
    for (k, vals, over) in [
        (1, &[50, 50][..], false),
        (2, &[50, 51][..], true),
        (3, &[40, 40, 40][..], true),
        (4, &[][..], false),
    ] {
        assert_eq!(
            e.check_path(&chunk(k, vals)),
            PathVerdict::Write { immediate: false }
        );
        let out = outputs(&mut e);
        if over {
            let sum: u32 = vals.iter().sum();
            let mut entry = k.to_be_bytes().to_vec();
            entry.extend((sum as u64).to_be_bytes());
            entry.resize(16, 0);
            assert_eq!(out, vec![("append 1".to_string(), entry)], "flow {k}");
        } else {
            assert!(out.is_empty(), "flow {k}: {out:?}");
        }
    }
    // Postcards themselves are not looked at by a path rule.
    let pc = Report::Postcard {
        key: &[0, 0, 0, 9],
        hop: 0,
        path_len: 1,
        value: 1000,
        immediate: false,
    };
    assert_eq!(e.check(&pc, Instant::now()), Verdict::Apply(pc));
    assert_eq!(e.pending(), 0);
}

/// Keys by prefix and mask, data fields by comparison; drop and immediate act on the report.
#[test]
fn matches_by_key_and_fields_drop_and_flag() {
    let mut e = engine(
        r#"
[[rules]]
name = "drop-10"
primitive = "key-write"
key_prefix = "0a"
action = "drop"

[[rules]]
name = "flag-big"
primitive = "key-write"
key_mask = "00ff0000"
key_value = "00010000"
fields = [{ offset = 2, width = 2, op = "ge", value = 0x1000 }]
action = "immediate"
"#,
        64,
    );
    let kw = |key: &'static [u8], data: &'static [u8]| Report::KeyWrite {
        key,
        data,
        redundancy: 1,
        immediate: false,
    };
    let now = Instant::now();
    assert_eq!(e.check(&kw(&[10, 1, 0, 0], &[0; 4]), now), Verdict::Drop);
    // Key matches the mask, field 0x1000 >= 0x1000: flagged.
    let r = kw(&[11, 1, 7, 7], &[0, 0, 0x10, 0]);
    assert!(matches!(e.check(&r, now), Verdict::Apply(x) if x.immediate()));
    // Field below: untouched; key off the mask: untouched.
    let r = kw(&[11, 1, 7, 7], &[0, 0, 0x0f, 0xff]);
    assert_eq!(e.check(&r, now), Verdict::Apply(r));
    let r = kw(&[11, 2, 7, 7], &[0, 0, 0x10, 0]);
    assert_eq!(e.check(&r, now), Verdict::Apply(r));
    // Another primitive: untouched.
    let r = Report::Append {
        list_id: 10,
        data: &[0; 4],
        immediate: false,
    };
    assert_eq!(e.check(&r, now), Verdict::Apply(r));
    let st = e.shared().stats();
    assert_eq!((st.dropped.load(Relaxed), st.flagged.load(Relaxed)), (1, 1));
}

/// A window rule: COUNT per key in a tumbling window, acting once per key and window when
/// the count reaches the threshold; a new window starts over.
#[test]
fn a_window_count_acts_once_per_key_and_window() {
    let mut e = engine(
        r#"
[[rules]]
name = "hot"
primitive = "key-increment"
aggregate = "count"
over = "window"
window_ms = 100
when = { op = "ge", value = 3 }
action = "write"
target = "kw"
"#,
        64,
    );
    let ki = |k: u8| Report::KeyIncrement {
        key: [[0, 0, 0, 1], [0, 0, 0, 2]][k as usize - 1].as_slice(),
        counter: 1,
        redundancy: 1,
        immediate: false,
    };
    let t0 = Instant::now();
    for _ in 0..5 {
        e.check(&ki(1), t0);
    }
    e.check(&ki(2), t0);
    e.check(&ki(2), t0);
    let out = outputs(&mut e);
    assert_eq!(
        out,
        vec![("write [0, 0, 0, 1]".to_string(), vec![0, 0, 0, 3])]
    );
    // The next window counts from zero again.
    let t1 = t0 + Duration::from_millis(150);
    for _ in 0..3 {
        e.check(&ki(2), t1);
    }
    assert_eq!(
        outputs(&mut e),
        vec![("write [0, 0, 0, 2]".to_string(), vec![0, 0, 0, 3])]
    );
}

/// A full state table evicts (counted); the evicted key starts a new window.
#[test]
fn window_state_is_bounded_and_evictions_counted() {
    let mut e = engine(
        r#"
[[rules]]
name = "sum"
primitive = "key-increment"
aggregate = "sum"
over = "window"
window_ms = 1000
when = { op = "gt", value = 1000000 }
action = "immediate"
"#,
        1,
    );
    let now = Instant::now();
    for k in 0u32..100 {
        let key = k.to_be_bytes();
        e.check(
            &Report::KeyIncrement {
                key: &key,
                counter: 1,
                redundancy: 1,
                immediate: false,
            },
            now,
        );
    }
    assert_eq!(e.shared().stats().state_evictions.load(Relaxed), 99);
}

/// A reload takes effect at the next refresh; a rule set that does not compile is refused
/// and the running one stays.
#[test]
fn reload_swaps_the_set_and_a_bad_one_is_refused() {
    let mut e = engine(SUM_PATH, 64);
    let s = stores();
    let cat: Vec<_> = s.iter().map(|(n, s)| (*n, s)).collect();
    let shared = e.shared().clone();
    let bad = RuleConfig {
        list: Some(9),
        ..toml::from_str::<RuleConfig>(
            "name = 'x'\nprimitive = 'append'\naction = 'append'\nlist = 0\n",
        )
        .unwrap()
    };
    let err = shared.replace(&[bad], &cat).unwrap_err();
    assert!(err.contains("list = 9"), "{err}");
    e.refresh();
    assert!(e.path_rules(), "the running set stays");
    let g = shared.replace(&[], &cat).unwrap();
    assert!(e.path_rules(), "not before the next refresh");
    e.refresh();
    assert!(!e.active() && !e.path_rules());
    assert_eq!(shared.current().generation(), g);
    assert_eq!(shared.stats().reloads.load(Relaxed), 1);
}

/// Every mistake is refused with a message naming the rule and the setting.
#[test]
fn rules_are_validated_with_messages() {
    let rule = |body: &str| format!("[[rules]]\nname = \"r\"\n{body}\n");
    for (body, says) in [
        (
            "primitive = 'postcarding'\nstore = 'nope'\naction = 'drop'",
            "no store named \"nope\"",
        ),
        (
            "primitive = 'key-write'\nstore = 'paths'\naction = 'drop'",
            "is not a KeyWrite store",
        ),
        (
            "primitive = 'key-write'\nkey_prefix = 'abc'\naction = 'drop'",
            "key_prefix",
        ),
        (
            "primitive = 'key-write'\nkey_mask = 'ff'\naction = 'drop'",
            "key_mask and key_value go together",
        ),
        (
            "primitive = 'key-write'\nstore = 'kw'\nkey_prefix = '0102030405'\naction = 'drop'",
            "longer than the store's 4-byte keys",
        ),
        (
            "primitive = 'key-write'\nfields = [{offset = 60, width = 8, op = 'eq', value = 1}]\naction = 'drop'",
            "past the longest data",
        ),
        (
            "primitive = 'key-write'\nfields = [{offset = 0, width = 9, op = 'eq', value = 1}]\naction = 'drop'",
            "width = 9",
        ),
        (
            "primitive = 'key-write'\naggregate = 'sum'\naction = 'drop'",
            "aggregate needs over",
        ),
        (
            "primitive = 'key-write'\naggregate = 'sum'\nover = 'path'\naction = 'drop'",
            "over = \"path\" aggregates postcards",
        ),
        (
            "primitive = 'key-write'\naggregate = 'sum'\nover = 'window'\naction = 'drop'",
            "needs window_ms",
        ),
        (
            "primitive = 'key-write'\naggregate = 'sum'\nover = 'window'\nwindow_ms = 0\naction = 'drop'",
            "window_ms = 0",
        ),
        ("primitive = 'key-write'\naction = 'append'", "needs list"),
        (
            "primitive = 'key-write'\naction = 'append'\nlist = 2",
            "list = 2: the Append store has lists 0..2",
        ),
        (
            "primitive = 'postcarding'\nstore = 'paths'\naction = 'append'\nlist = 0\nentry = 'key_value'\n",
            "",
        ),
        ("primitive = 'key-write'\naction = 'write'", "needs target"),
        (
            "primitive = 'key-write'\naction = 'write'\ntarget = 'out'",
            "is not a Key-Write store",
        ),
        (
            "primitive = 'key-write'\naction = 'drop'\nlist = 1",
            "list does not apply to action Drop",
        ),
        ("primitive = 'key-write'\naction = 'explode'", "unknown variant"),
        ("primitive = 'key-write'\naction = 'drop'\ncolour = 1", "unknown field"),
    ] {
        let r = compile(&rule(body));
        if says.is_empty() {
            assert!(r.is_ok(), "{body}: {r:?}");
            continue;
        }
        let e = r.unwrap_err();
        assert!(e.contains(says), "{body}: {e}");
    }
    let many: String = (0..=MAX_RULES)
        .map(|i| format!("[[rules]]\nname = \"r{i}\"\nprimitive = 'append'\naction = 'drop'\n"))
        .collect();
    assert!(compile(&many).unwrap_err().contains("at most 32"));
    let twice = "[[rules]]\nname = 'a'\nprimitive = 'append'\naction = 'drop'\n".repeat(2);
    assert!(compile(&twice).unwrap_err().contains("two rules are named"));
}

/// The derived-report queue is bounded; what does not fit is counted.
#[test]
fn derived_reports_are_bounded() {
    let mut e = engine(
        "[[rules]]\nname = 'all'\nprimitive = 'append'\naction = 'append'\nlist = 0\nentry = 'value'\n",
        64,
    );
    let now = Instant::now();
    for _ in 0..OUTPUTS + 10 {
        e.check(
            &Report::Append {
                list_id: 1,
                data: &[0, 0, 0, 7],
                immediate: false,
            },
            now,
        );
    }
    assert_eq!(e.pending(), OUTPUTS);
    assert_eq!(e.shared().stats().derived_overflow.load(Relaxed), 10);
    let out = outputs(&mut e);
    let mut want = vec![0u8; 16];
    want[15] = 7;
    assert_eq!(out[0], ("append 0".to_string(), want));
}

#[test]
fn xdp_lowering_keeps_simple_rules_and_says_why_not_the_others() {
    let set = compile(
        r#"
[[rules]]
name = "drop"
primitive = "key-write"
key_mask = "ff00"
key_value = "0a00"
fields = [{ offset = 0, width = 2, op = "lt", value = 9, mask = 0xff }]
action = "drop"

[[rules]]
name = "flag"
primitive = "key-write"
action = "immediate"

[[rules]]
name = "app-imm"
primitive = "key-write"
action = "append"
list = 0
immediate = true

[[rules]]
name = "slow"
primitive = "postcarding"
aggregate = "sum"
over = "path"
action = "drop"
"#,
    )
    .unwrap();
    let user = [PrimitiveName::Postcarding, PrimitiveName::SketchMerge];
    let r = set.rules[0].lower_xdp(0, &user).unwrap();
    assert_eq!((r.name, r.index), ("drop", 0));
    assert_eq!(r.action, XdpAction::Drop);
    assert_eq!((r.key.len, r.key.mask[0], r.key.value[0]), (2, 0xff, 0x0a));
    assert_eq!(r.fields.len(), 1);
    assert_eq!(r.fields[0].2, 0xff);
    assert_eq!(set.rules[1].lower_xdp(1, &user), Err(NotInXdp::Action));
    assert_eq!(
        set.rules[2].lower_xdp(2, &user),
        Err(NotInXdp::DerivedImmediate)
    );
    assert_eq!(set.rules[3].lower_xdp(3, &user), Err(NotInXdp::Primitive));
    assert_eq!(set.rules[3].lower_xdp(3, &[]), Err(NotInXdp::Aggregate));
    // "flag" and "app-imm" run in userspace, so Key-Write and Append go there, and "drop" too.
    let split = set.split_xdp(&user);
    assert!(split.xdp.is_empty());
    assert_eq!(split.userspace.len(), 4);
    // One counter set: every counter reads its own field.
    let st = RuleStats::default();
    for (i, c) in RuleCounter::ALL.iter().enumerate() {
        // The XDP program's counter indices are positions in ALL, and readers index by value.
        assert_eq!(*c as usize, i);
        st.counter(*c).store(i as u64 + 1, Relaxed);
    }
    let snap = st.snapshot();
    assert_eq!(snap["matched"], 1);
    assert_eq!(snap["reloads"], 9);
    assert_eq!(st.derived_unfit.load(Relaxed), 7);
}
