//! `dta cluster check|show|export` on the example map and on refused maps.

mod common;

use common::dta;

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../examples/cluster.toml"
);

#[test]
fn check_show_export_the_example() {
    let out = dta()
        .args(["cluster", "check", "--map", EXAMPLE])
        .output()
        .unwrap();
    common::assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("3 collectors, 7 stores"));

    let out = dta()
        .args([
            "cluster", "show", "--map", EXAMPLE, "--json", "--keys", "30000",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shares: Vec<u64> = v["collectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["hashed_keys"].as_u64().unwrap())
        .collect();
    assert_eq!(shares.iter().sum::<u64>(), 30000);
    assert!(
        shares.iter().all(|&n| (9000..11000).contains(&n)),
        "{shares:?}"
    );
    let events = v["stores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "events")
        .unwrap();
    assert_eq!(events["placement"], "table");

    let out = dta()
        .args(["cluster", "export", "--map", EXAMPLE])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("collector c0 127.0.0.1:40140\n"), "{text}");
    assert!(text.contains("list events 7 c1\n"), "{text}");
    assert!(text.contains("default events c2\n"), "{text}");
}

#[test]
fn refused_maps_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let example = std::fs::read_to_string(EXAMPLE).unwrap();
    for (text, why) in [
        (
            example.replace("name = \"c1\"", "name = \"c0\""),
            "named twice",
        ),
        (
            example.replace("collector = \"c2\"\n", "collector = \"c9\"\n"),
            "c9",
        ),
        (example.replace("version = 1", "version = 0"), "version 0"),
        ("version = 1\n".to_string(), "no collector"),
    ] {
        let p = dir.path().join("map.toml");
        std::fs::write(&p, text).unwrap();
        let out = dta()
            .args(["cluster", "check", "--map"])
            .arg(&p)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{why}: {err}");
    }
}
