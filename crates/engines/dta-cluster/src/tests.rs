use super::*;

const EXAMPLE: &str = include_str!("../../../../examples/cluster.toml");

fn map_of(n: usize) -> String {
    let mut s = String::from("version = 1\n");
    for i in 0..n {
        s += &format!(
            "[[collector]]\nname = \"c{i}\"\ntranslator = \"127.0.0.1:{}\"\nmode = \"shm\"\n",
            41000 + i
        );
    }
    s + "[[store]]\nname = \"kw\"\nkind = \"key-write\"\n"
}

fn err(text: &str) -> MapError {
    ClusterMap::parse(text).expect_err("the map must be refused")
}

#[test]
fn example_map_validates() {
    let m = ClusterMap::parse(EXAMPLE).unwrap();
    assert_eq!(m.version, 1);
    assert_eq!(m.collectors.len(), 3);
    assert_eq!(m.owner("events", Key::List(3)).unwrap().name, "c0");
    assert_eq!(m.owner("events", Key::List(7)).unwrap().name, "c1");
    assert_eq!(m.owner("events", Key::List(15)).unwrap().name, "c2");
    assert_eq!(m.owner("flowsizes", Key::Reporter(9)).unwrap().name, "c0");
    assert_eq!(m.owner("distinct", Key::Reporter(1)).unwrap().name, "c0");
    assert_eq!(m.owner("distinct", Key::Reporter(2)).unwrap().name, "c1");
    assert_eq!(m.owner("distinct", Key::Reporter(3)).unwrap().name, "c2");
    assert_eq!(m.readers("distinct").unwrap(), vec![0, 1, 2]);
    assert_eq!(m.readers("flowsizes").unwrap(), vec![0]);
    assert!(matches!(
        m.owner("kw", Key::List(1)),
        Err(RouteError::WrongKey { .. })
    ));
    assert!(matches!(
        m.owner("nope", Key::Bytes(b"abcd")),
        Err(RouteError::UnknownStore(_))
    ));
}

#[test]
fn rendezvous_spreads_keys_evenly() {
    for n in [2usize, 3, 4, 7] {
        let m = ClusterMap::parse(&map_of(n)).unwrap();
        let keys: Vec<[u8; 4]> = (0u32..60_000).map(|k| k.to_be_bytes()).collect();
        let shares = m.shares(keys.iter().map(|k| &k[..]));
        let fair = keys.len() as f64 / n as f64;
        for (i, &s) in shares.iter().enumerate() {
            let dev = (s as f64 - fair).abs() / fair;
            assert!(
                dev < 0.05,
                "{n} collectors: c{i} got {s} of {} keys",
                keys.len()
            );
        }
    }
}

#[test]
fn adding_a_collector_moves_only_its_share() {
    let three = ClusterMap::parse(&map_of(3)).unwrap();
    let four = ClusterMap::parse(&map_of(4)).unwrap();
    let total = 40_000u32;
    let mut moved = 0;
    for k in 0..total {
        let key = k.to_be_bytes();
        let a = three.owner("kw", Key::Bytes(&key)).unwrap();
        let b = four.owner("kw", Key::Bytes(&key)).unwrap();
        if a.name != b.name {
            // Keys only ever move to the new collector.
            assert_eq!(b.name, "c3", "key {k} moved from {} to {}", a.name, b.name);
            moved += 1;
        }
    }
    let frac = moved as f64 / total as f64;
    assert!((0.22..0.28).contains(&frac), "moved {frac}");
}

#[test]
fn draining_moves_only_the_drained_collectors_keys() {
    let four = ClusterMap::parse(&map_of(4)).unwrap();
    // c1 drained: the map without it.
    let text = map_of(4).replace(
        "[[collector]]\nname = \"c1\"\ntranslator = \"127.0.0.1:41001\"\nmode = \"shm\"\n",
        "",
    );
    let three = ClusterMap::parse(&text).unwrap();
    assert_eq!(three.collectors.len(), 3);
    for k in 0u32..20_000 {
        let key = k.to_be_bytes();
        let a = &four.owner("kw", Key::Bytes(&key)).unwrap().name;
        let b = &three.owner("kw", Key::Bytes(&key)).unwrap().name;
        if a != "c1" {
            assert_eq!(a, b, "key {k} not on the drained collector moved");
        }
    }
}

#[test]
fn owners_during_change_asks_new_then_old() {
    let mut text = map_of(4).replace("version = 1", "version = 2");
    let prev = map_of(3)
        .replace("version = 1", "[previous]\nversion = 1")
        .replace("[[collector]]", "[[previous.collector]]")
        .replace("[[store]]", "[[previous.store]]");
    text += &prev;
    let m = ClusterMap::parse(&text).unwrap();
    assert_eq!(m.previous.as_ref().unwrap().version, 1);
    let mut two = 0;
    for k in 0u32..4000 {
        let key = k.to_be_bytes();
        let o = m.owners_during_change("kw", Key::Bytes(&key)).unwrap();
        assert_eq!(o[0].name, m.owner("kw", Key::Bytes(&key)).unwrap().name);
        if o.len() == 2 {
            assert_eq!(o[0].name, "c3");
            assert_ne!(o[1].name, "c3");
            two += 1;
        }
    }
    assert!(two > 800 && two < 1200, "{two}");
}

#[test]
fn reports_route_by_primitive_and_shape() {
    let m = ClusterMap::parse(EXAMPLE).unwrap();
    let kw = Report::KeyWrite {
        key: &[0, 0, 0, 42],
        data: &[1, 2, 3, 4],
        redundancy: 2,
        immediate: false,
    };
    assert_eq!(m.rule_for(&kw).unwrap().name, "kw");
    assert_eq!(
        m.route(&kw, 0).unwrap(),
        m.owner_index("kw", Key::Bytes(&[0, 0, 0, 42])).unwrap()
    );
    let flow = Report::KeyWrite {
        key: &[7; 13],
        data: &[0; 8],
        redundancy: 2,
        immediate: false,
    };
    assert_eq!(m.rule_for(&flow).unwrap().name, "flows");
    let ap = Report::Append {
        list_id: 6,
        data: &[0; 4],
        immediate: false,
    };
    assert_eq!(m.collectors[m.route(&ap, 0).unwrap()].name, "c1");
    let col = Report::SketchColumn {
        sketch_id: 2,
        column: 0,
        epoch: 1,
        data: &[0; 8],
        immediate: false,
    };
    assert_eq!(m.rule_for(&col).unwrap().name, "distinct");
    assert_eq!(m.collectors[m.route(&col, 2).unwrap()].name, "c1");
    let col1 = Report::SketchColumn {
        sketch_id: 1,
        column: 0,
        epoch: 1,
        data: &[0; 8],
        immediate: false,
    };
    assert_eq!(m.rule_for(&col1).unwrap().name, "flowsizes");
}

#[test]
fn invalid_maps_are_refused_with_their_reason() {
    assert!(matches!(err("version = 1\n"), MapError::Empty));
    assert!(matches!(
        err("version = 1\n[[store]]\n"),
        MapError::Syntax(_)
    ));
    let two = map_of(2).replace("name = \"c1\"", "name = \"c0\"");
    assert!(matches!(err(&two), MapError::DuplicateCollector(n) if n == "c0"));
    // Two collectors at one place: an HTTP address, a region directory (one translator address
    // may serve several).
    ClusterMap::parse(&map_of(2).replace("127.0.0.1:41001", "127.0.0.1:41000")).unwrap();
    let with = |field: &str, a: &str, b: &str| {
        map_of(2)
            .replacen(
                "mode = \"shm\"",
                &format!("mode = \"shm\"\n{field} = \"{a}\""),
                1,
            )
            .replacen(
                "name = \"c1\"",
                &format!("name = \"c1\"\n{field} = \"{b}\""),
                1,
            )
    };
    let e = err(&with("http", "127.0.0.1:8080", "127.0.0.1:8080"));
    assert!(
        matches!(
            e,
            MapError::SharedPlace {
                what: "HTTP address",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("127.0.0.1:8080"), "{e}");
    assert!(matches!(
        err(&with("region_dir", "/var/lib/dta", "/var/lib/dta")),
        MapError::SharedPlace {
            what: "region directory",
            ..
        }
    ));
    ClusterMap::parse(&with("http", "127.0.0.1:8080", "127.0.0.1:8081")).unwrap();
    let dup_store = map_of(2) + "[[store]]\nname = \"kw\"\nkind = \"key-write\"\n";
    assert!(matches!(err(&dup_store), MapError::DuplicateStore(_)));
    let unknown = map_of(2) + "[[store]]\nname = \"ev\"\nkind = \"append\"\ntable = { c9 = [1] }\n";
    assert!(
        matches!(err(&unknown), MapError::UnknownCollector { collector, .. } if collector == "c9")
    );
    let twice =
        map_of(2) + "[[store]]\nname = \"ev\"\nkind = \"append\"\ntable = { c0 = [1], c1 = [1] }\n";
    assert!(matches!(err(&twice), MapError::AssignedTwice { id: 1, .. }));
    let kind = map_of(2) + "[[store]]\nname = \"x\"\nkind = \"key-read\"\n";
    assert!(matches!(err(&kind), MapError::UnknownKind { .. }));
    let placement =
        map_of(2) + "[[store]]\nname = \"x\"\nkind = \"append\"\nplacement = \"hash\"\n";
    assert!(matches!(err(&placement), MapError::BadPlacement { .. }));
    let one = map_of(2) + "[[store]]\nname = \"x\"\nkind = \"sketch-merge\"\n";
    assert!(matches!(err(&one), MapError::BadPlacement { .. }));
    let empty_table = map_of(2) + "[[store]]\nname = \"x\"\nkind = \"append\"\n";
    assert!(matches!(err(&empty_table), MapError::BadPlacement { .. }));
    assert!(matches!(
        err(&map_of(1).replace("version = 1", "version = 0")),
        MapError::VersionNotIncreasing { .. }
    ));
    let not_newer = map_of(1)
        + "[previous]\nversion = 1\n[[previous.collector]]\nname = \"c0\"\n\
           translator = \"127.0.0.1:1\"\nmode = \"shm\"\n";
    assert!(matches!(
        err(&not_newer),
        MapError::VersionNotIncreasing {
            version: 1,
            previous: 1
        }
    ));
    let bad_prev = map_of(1).replace("version = 1", "version = 2") + "[previous]\nversion = 1\n";
    assert!(matches!(err(&bad_prev), MapError::Previous(_)));
    assert!(matches!(
        err(&map_of(1).replace("name = \"c0\"", "name = \"c 0\"")),
        MapError::BadName(_)
    ));
    assert!(matches!(
        err(&map_of(1).replace("mode = \"shm\"", "mode = \"tcp\"")),
        MapError::Syntax(_)
    ));
    let unknown_field = map_of(1).replace("mode = \"shm\"", "mode = \"shm\"\nweight = 2");
    assert!(matches!(err(&unknown_field), MapError::Syntax(_)));
    assert!(matches!(
        err(&map_of(MAX_COLLECTORS + 1)),
        MapError::TooMany { .. }
    ));
    let big = "#".repeat(MAX_MAP_BYTES as usize + 1);
    assert!(matches!(err(&big), MapError::TooLarge(_)));
}
