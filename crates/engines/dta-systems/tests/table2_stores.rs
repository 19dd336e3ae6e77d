//! NetSeer, TurboFlow, PINT, Sonata and Trajectory Sampling through real stores: each system's
//! reports over a seeded synthesized trace go through a co-located translator into the stores of
//! `examples/systems.toml`, and each query answers what the ground truth says (exactly where
//! the primitive is exact, within the store's bound for Key-Increment), and refuses with a
//! message what it cannot answer.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use dta_collector::{Collector, StoreConfig};
use dta_systems::trace::{synthesize, FlowSizeCdf, SynthConfig, Trace};
use dta_systems::{netseer, pint, sonata, trajectory, turboflow, FlowKey, Stores, SystemError};
use dta_translator::{Stats, Translator, TranslatorConfig};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Priority, Report};

const SYSTEMS_TOML: &str = include_str!("../../../../examples/systems.toml");

/// The stores of `examples/systems.toml`, created in `dir`.
fn collector(dir: &Path) -> Collector {
    let t: toml::Table = toml::from_str(SYSTEMS_TOML).unwrap();
    let stores: Vec<StoreConfig> = t["store"].clone().try_into().unwrap();
    Collector::create(dir, &stores, false).unwrap()
}

/// A co-located translator over `c`'s stores, fed one report per datagram.
struct Feed {
    t: Translator<dta_translator::RegionSinks>,
    seq: u32,
    buf: Vec<u8>,
}

impl Feed {
    fn new(c: &Collector) -> Feed {
        Feed {
            t: Translator::colocated(
                &TranslatorConfig::default(),
                c.regions(),
                Arc::new(Stats::default()),
            )
            .unwrap(),
            seq: 0,
            buf: vec![0; 2048],
        }
    }

    fn report(&mut self, r: &Report<'_>) -> Result<(), SystemError> {
        let mut b = DatagramBuilder::new(&mut self.buf, Priority::Medium, false, 7, self.seq)
            .map_err(|e| SystemError::Send(format!("{e:?}")))?;
        b.push(r).map_err(|e| SystemError::Send(format!("{e:?}")))?;
        let n = b.finish();
        self.seq += 1;
        let src: SocketAddr = "127.0.0.1:9999".parse().unwrap();
        self.t.handle_datagram(&self.buf[..n], src, Instant::now());
        Ok(())
    }

    fn finish(mut self) {
        self.t.flush_all();
        let s = self.t.stats();
        assert_eq!(s.total_rejected(), 0, "{}", s.snapshot());
    }
}

fn trace() -> Trace {
    synthesize(
        &SynthConfig {
            flows: 300,
            seed: 7,
            ..SynthConfig::default()
        },
        &FlowSizeCdf::builtin("fb_hadoop").unwrap(),
    )
    .unwrap()
    .0
}

fn not_found(r: Result<impl std::fmt::Debug, SystemError>, needle: &str) {
    match r {
        Err(SystemError::NotFound(m)) | Err(SystemError::BadRequest(m)) => {
            assert!(m.contains(needle), "{m:?} does not say {needle:?}")
        }
        other => panic!("expected an error saying {needle:?}, got {other:?}"),
    }
}

#[test]
fn netseer_loss_events() {
    let dir = tempfile::tempdir().unwrap();
    let c = collector(dir.path());
    let stores = Stores::new(dir.path());
    let all = netseer::LossFilter {
        max: usize::MAX,
        ..Default::default()
    };
    not_found(netseer::query_losses(&stores, &all), "was ever reported");
    let t = trace();
    let mut feed = Feed::new(&c);
    netseer::reports(&t, &netseer::Params::default(), &mut |r| feed.report(r)).unwrap();
    feed.finish();
    let truth = netseer::truth(&t);
    let a = netseer::query_losses(&stores, &all).unwrap();
    assert_eq!(a.overwritten, 0);
    let mut got: BTreeMap<(FlowKey, u16, netseer::Reason), u64> = BTreeMap::new();
    for e in &a.events {
        let k = (
            dta_systems::parse_flow(&e.flow).unwrap(),
            e.switch,
            netseer::Reason::parse(e.reason).unwrap(),
        );
        *got.entry(k).or_default() += u64::from(e.count);
    }
    assert_eq!(got, truth);
    assert_eq!(a.packets_lost, truth.values().sum::<u64>());

    // One switch, one reason, one flow; positions from --since on.
    let (&(flow, sw, reason), &n) = truth.iter().next().unwrap();
    let one = netseer::query_losses(
        &stores,
        &netseer::LossFilter {
            switch: Some(sw),
            flow: Some(flow),
            reason: Some(reason),
            ..all.clone()
        },
    )
    .unwrap();
    assert_eq!(one.packets_lost, n);
    assert_eq!(
        one.lists,
        netseer::switch_list(sw)..netseer::switch_list(sw) + 1
    );
    let head = one.appended;
    not_found(
        netseer::query_losses(
            &stores,
            &netseer::LossFilter {
                switch: Some(sw),
                since: Some(head),
                ..all.clone()
            },
        ),
        "from position",
    );
    let listed = netseer::query_losses(
        &stores,
        &netseer::LossFilter {
            max: 3,
            ..all.clone()
        },
    )
    .unwrap();
    assert_eq!((listed.events.len(), listed.matched), (3, a.matched));
}

#[test]
fn turboflow_flow_counters() {
    let dir = tempfile::tempdir().unwrap();
    let c = collector(dir.path());
    let stores = Stores::new(dir.path());
    let t = trace();
    let mut feed = Feed::new(&c);
    let sent =
        turboflow::reports(&t, &turboflow::Params::default(), &mut |r| feed.report(r)).unwrap();
    feed.finish();
    assert!(sent.collisions > 0);
    let truth = turboflow::truth(&t);
    let mut over_bound = 0;
    for (f, &(p, b)) in &truth {
        let a = turboflow::query_flow(&stores, f).unwrap();
        // Count-min: never below the truth.
        assert!(a.packets >= p && a.bytes >= b, "{}", a.flow);
        if a.packets - p > a.packets_bound.error || a.bytes - b > a.bytes_bound.error {
            over_bound += 1;
        }
    }
    // Above the bound with probability at most delta per counter.
    let delta = turboflow::query_flow(&stores, truth.keys().next().unwrap())
        .unwrap()
        .packets_bound
        .delta;
    assert!(
        (over_bound as f64) <= 2.0 * delta * truth.len() as f64,
        "{over_bound} of {} flows over the bound",
        truth.len()
    );
    let unknown = dta_systems::parse_flow("192.0.2.1:1-192.0.2.2:2/6").unwrap();
    not_found(turboflow::query_flow(&stores, &unknown), "no counters");
}

#[test]
fn pint_digests_rebuilt_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let c = collector(dir.path());
    let stores = Stores::new(dir.path());
    let t = trace();
    let mut feed = Feed::new(&c);
    pint::reports(&t, &mut |r| feed.report(r)).unwrap();
    feed.finish();
    let truth = pint::truth(&t);
    let (mut complete, mut partial) = (0, 0);
    for (f, v) in &truth {
        let r = pint::query_digest(&stores, f);
        if v.complete() {
            complete += 1;
            assert_eq!(r.unwrap().digest, format!("{:08x}", v.digest));
        } else {
            partial += 1;
            not_found(r, "cannot be rebuilt");
        }
    }
    assert!(complete > 50 && partial > 0, "{complete} {partial}");
    let unknown = dta_systems::parse_flow("192.0.2.1:1-192.0.2.2:2/6").unwrap();
    not_found(pint::query_digest(&stores, &unknown), "no fragment");
}

#[test]
fn sonata_results_and_tuples() {
    let dir = tempfile::tempdir().unwrap();
    let c = collector(dir.path());
    let stores = Stores::new(dir.path());
    not_found(
        sonata::query_tuples(&stores, sonata::Query::NewConns, None, 10),
        "was ever appended",
    );
    let t = trace();
    let p = sonata::Params::default();
    let mut feed = Feed::new(&c);
    sonata::reports(&t, &p, &mut |r| feed.report(r)).unwrap();
    feed.finish();
    let truth = sonata::truth(&t, &p).unwrap();
    for (&(q, w), &(a, b)) in &truth.results {
        let r = sonata::query_result(&stores, q, w).unwrap();
        let want = match q {
            sonata::Query::NewConns => serde_json::json!({"syns": a, "destinations": b}),
            sonata::Query::Retransmissions => {
                serde_json::json!({"retransmissions": a, "flows": b})
            }
            sonata::Query::HeavyDst if b == 0 => {
                serde_json::json!({"destination": null, "bytes": 0})
            }
            sonata::Query::HeavyDst => serde_json::json!({
                "destination": std::net::Ipv4Addr::from(a).to_string(), "bytes": b
            }),
        };
        assert_eq!(r.result, want, "{} window {w}", q.name());
    }
    let last = truth.results.keys().map(|k| k.1).max().unwrap();
    not_found(
        sonata::query_result(&stores, sonata::Query::HeavyDst, last + 1000),
        "no result",
    );
    for (q, want) in &truth.tuples {
        let a = sonata::query_tuples(&stores, *q, None, usize::MAX).unwrap();
        let got: Vec<(FlowKey, u32, u32)> = a
            .tuples
            .iter()
            .map(|x| (dta_systems::parse_flow(&x.flow).unwrap(), x.seq, x.window))
            .collect();
        assert_eq!(&got, want, "{}", q.name());
        let tail = sonata::query_tuples(&stores, *q, Some(a.appended - 2), usize::MAX).unwrap();
        assert_eq!(tail.matched, 2);
        not_found(
            sonata::query_tuples(&stores, *q, Some(a.appended), 10),
            "at or after position",
        );
    }
    not_found(
        sonata::query_tuples(&stores, sonata::Query::HeavyDst, None, 10),
        "no raw tuples",
    );
}

#[test]
fn trajectory_paths_of_sampled_packets() {
    let dir = tempfile::tempdir().unwrap();
    let c = collector(dir.path());
    let stores = Stores::new(dir.path());
    let t = trace();
    let p = trajectory::Params::default();
    let mut feed = Feed::new(&c);
    let sent = trajectory::reports(&t, &p, &mut |r| feed.report(r)).unwrap();
    feed.finish();
    let truth = trajectory::truth(&t, &p);
    assert!(truth.len() > 50, "{} sampled", truth.len());
    assert!(sent.postcards >= truth.len() as u64);
    for (&label, s) in &truth {
        let a = trajectory::query_packet(&stores, label).unwrap();
        let want: Vec<u32> = s.path.iter().map(|&x| u32::from(x)).collect();
        assert_eq!(a.path, want, "packet {label:016x}");
    }
    let unsampled = t
        .packets
        .iter()
        .map(|pkt| trajectory::label(&pkt.flow, pkt.seq))
        .find(|l| !trajectory::sampled(*l, p.sample_ppm))
        .unwrap();
    not_found(trajectory::query_packet(&stores, unsampled), "not sampled");
}
