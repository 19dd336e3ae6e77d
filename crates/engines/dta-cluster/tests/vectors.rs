//! The cluster hash against `spec/vectors/cluster.json` (computed independently in Python; the
//! C and Python tests read the same file).

use dta_cluster::{collector_seed, rendezvous, score, ClusterMap, Key, COLLECTOR_SALT};
use dta_store::hash::fnv1a64;

fn vectors() -> serde_json::Value {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../spec/vectors/cluster.json"
    );
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn hex64(v: &serde_json::Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap(), 16).unwrap()
}

#[test]
fn seeds_scores_and_owners_match_the_vectors() {
    let v = vectors();
    assert_eq!(hex64(&v["collector_salt"]), COLLECTOR_SALT);
    for s in v["seeds"].as_array().unwrap() {
        assert_eq!(
            collector_seed(s["name"].as_str().unwrap()),
            hex64(&s["seed"])
        );
    }
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.len() > 100);
    for c in cases {
        let names: Vec<&str> = c["collectors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        let key = hex::decode(c["key"].as_str().unwrap()).unwrap();
        let seeds: Vec<u64> = names.iter().map(|n| collector_seed(n)).collect();
        for (s, want) in seeds.iter().zip(c["scores"].as_array().unwrap()) {
            assert_eq!(score(fnv1a64(&key), *s), hex64(want));
        }
        let owner = names[rendezvous(&seeds, &key).unwrap()];
        assert_eq!(owner, c["owner"].as_str().unwrap(), "key {}", c["key"]);
    }
}

#[test]
fn shares_and_moves_match_the_vectors() {
    let v = vectors();
    let map = |n: usize| {
        let mut s = String::from("version = 1\n");
        for i in 0..n {
            s += &format!(
                "[[collector]]\nname = \"c{i}\"\ntranslator = \"127.0.0.1:{}\"\nmode = \"shm\"\n",
                40000 + i
            );
        }
        ClusterMap::parse(&(s + "[[store]]\nname = \"kw\"\nkind = \"key-write\"\n")).unwrap()
    };
    let (three, four) = (map(3), map(4));
    let keys: Vec<[u8; 4]> = (0u32..10_000).map(u32::to_be_bytes).collect();
    let want = |k: &str| -> Vec<u64> {
        v["shares_of_10000"][k]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect()
    };
    assert_eq!(three.shares(keys.iter().map(|k| &k[..])), want("c0,c1,c2"));
    assert_eq!(
        four.shares(keys.iter().map(|k| &k[..])),
        want("c0,c1,c2,c3")
    );
    let moved = keys
        .iter()
        .filter(|k| {
            three.owner("kw", Key::Bytes(&k[..])).unwrap().name
                != four.owner("kw", Key::Bytes(&k[..])).unwrap().name
        })
        .count() as u64;
    assert_eq!(moved, v["moved_of_10000_when_c3_joins"].as_u64().unwrap());
}
