//! `ClusterReporter`: each report to the translator of its owner in the cluster map (UDP
//! sockets of this test stand in for the translators), native datagrams packed per translator,
//! and the refusal of retransmission across several translators.

use std::net::UdpSocket;
use std::sync::Arc;
use std::time::Duration;

use dta_cluster::{ClusterMap, Key};
use dta_reporter::{ClusterError, ClusterReporter, Protocol, ReporterConfig};
use dta_wire::{prototype::BaseFormat, Datagram, Report};

fn translators(n: usize) -> Vec<UdpSocket> {
    (0..n)
        .map(|_| {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            s
        })
        .collect()
}

/// c0 and c1 share the first socket (one translator serving two collectors), c2 the second.
fn map(socks: &[UdpSocket]) -> ClusterMap {
    let port = |i: usize| socks[i].local_addr().unwrap().port();
    ClusterMap::parse(&format!(
        "version = 1\n\
         [[collector]]\nname = \"c0\"\ntranslator = \"127.0.0.1:{}\"\nmode = \"shm\"\n\
         [[collector]]\nname = \"c1\"\ntranslator = \"127.0.0.1:{}\"\nmode = \"shm\"\n\
         [[collector]]\nname = \"c2\"\ntranslator = \"127.0.0.1:{}\"\nmode = \"shm\"\n\
         [[store]]\nname = \"kw\"\nkind = \"key-write\"\n\
         [[store]]\nname = \"ev\"\nkind = \"append\"\ntable = {{ c2 = [9] }}\ncollector = \"c1\"\n",
        port(0),
        port(0),
        port(1)
    ))
    .unwrap()
}

#[test]
fn every_report_reaches_its_owners_translator() {
    let socks = translators(2);
    let map = Arc::new(map(&socks));
    let mut cfg = ReporterConfig::new(
        socks[0].local_addr().unwrap(),
        Protocol::Native { reporter_id: 5 },
    );
    cfg.nack_port = Some(0);
    let mut r = ClusterReporter::new(map.clone(), &cfg).unwrap();
    assert_eq!(
        r.reporters().len(),
        2,
        "one reporter per translator address"
    );
    let keys: Vec<[u8; 4]> = (0u32..500).map(u32::to_be_bytes).collect();
    for k in &keys {
        let c = r
            .route(&Report::KeyWrite {
                key: k,
                data: &[1, 2, 3, 4],
                redundancy: 1,
                immediate: false,
            })
            .unwrap();
        assert_eq!(c, map.owner_index("kw", Key::Bytes(k)).unwrap());
    }
    for l in [9u32, 3] {
        r.route(&Report::Append {
            list_id: l,
            data: &[0; 4],
            immediate: false,
        })
        .unwrap();
    }
    let per = r.per_collector();
    let stats = r.close().unwrap();
    assert_eq!(stats.reports, 502);
    assert_eq!(per.iter().sum::<u64>(), 502);
    // What each socket received: c0's and c1's keys on the first, c2's on the second.
    let mut got = [vec![], vec![]];
    for (i, s) in socks.iter().enumerate() {
        let mut buf = [0u8; 2048];
        while let Ok(n) = s.recv(&mut buf) {
            let Datagram::Native(d) = dta_wire::parse(&buf[..n], BaseFormat::Short).unwrap() else {
                panic!("not native")
            };
            for rep in d.reports() {
                got[i].push(match rep {
                    Report::KeyWrite { key, .. } => {
                        let o = map.owner("kw", Key::Bytes(key)).unwrap().name.clone();
                        assert_eq!(o == "c2", i == 1, "key {key:?} of {o} on socket {i}");
                        o
                    }
                    Report::Append { list_id, .. } => {
                        assert_eq!(list_id == 9, i == 1, "list {list_id} on socket {i}");
                        format!("list{list_id}")
                    }
                    other => panic!("{other:?}"),
                });
            }
        }
    }
    let count = |i: usize, n: &str| got[i].iter().filter(|x| *x == n).count() as u64;
    assert_eq!(count(0, "c0"), per[0]);
    assert_eq!(count(0, "c1") + count(0, "list3"), per[1]);
    assert_eq!(count(1, "c2") + count(1, "list9"), per[2]);
    assert!(per.iter().all(|&n| n > 100), "{per:?}");
}

#[test]
fn retransmission_across_translators_is_refused() {
    let socks = translators(2);
    let map = Arc::new(map(&socks));
    let mut cfg = ReporterConfig::new(
        socks[0].local_addr().unwrap(),
        Protocol::Native { reporter_id: 5 },
    );
    cfg.retransmittable = true;
    cfg.nack_port = Some(0);
    assert!(matches!(
        ClusterReporter::new(map, &cfg),
        Err(ClusterError::Retransmit(2))
    ));
}
