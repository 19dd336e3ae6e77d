//! `dta demo`: the whole system on loopback, on the embedded configuration.
//!
//! It creates the collector's regions, starts the translator on an ephemeral UDP port, sends
//! reports of every primitive through real UDP sockets in both wire protocols (the prototype's
//! and the native one), stops the translator, reopens the regions read-only from their files
//! and queries every report back, comparing each answer with what was sent.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use dta_collector::{query, Collector};
use dta_node::config::Config;
use dta_node::translator::{MemoryTranslator, Options};
use dta_reporter::{Protocol, Reporter, ReporterConfig};
use dta_store::sketch::{CountMin, HyperLogLog};
use dta_wire::prototype::BaseFormat;

pub struct DemoOptions {
    pub region_dir: Option<PathBuf>,
    pub flows: u32,
    pub json: bool,
}

/// One line of the demo's answer table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub primitive: &'static str,
    pub protocol: &'static str,
    pub store: &'static str,
    pub queried: u64,
    pub correct: u64,
    pub empty: u64,
    pub wrong: u64,
    /// One answer, as a person would read it.
    pub example: String,
}

impl Row {
    fn new(primitive: &'static str, protocol: &'static str, store: &'static str) -> Row {
        Row {
            primitive,
            protocol,
            store,
            queried: 0,
            correct: 0,
            empty: 0,
            wrong: 0,
            example: String::new(),
        }
    }

    fn tally(&mut self, outcome: Outcome) {
        self.queried += 1;
        match outcome {
            Outcome::Correct => self.correct += 1,
            Outcome::Empty => self.empty += 1,
            Outcome::Wrong => self.wrong += 1,
        }
    }
}

enum Outcome {
    Correct,
    Empty,
    Wrong,
}

/// Everything the demo measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: Vec<Row>,
    pub translator: serde_json::Value,
    pub region_dir: String,
}

impl Report {
    /// Every query answered correctly, none wrongly.
    pub fn all_correct(&self) -> bool {
        self.rows
            .iter()
            .all(|r| r.queried > 0 && r.correct == r.queried)
    }
}

// Key spaces, kept apart per primitive and protocol so that no two streams share a key.
const KW_NATIVE: u32 = 1_000_000;
const KI_NATIVE: u32 = 2_000_000;
const PC_NATIVE: u32 = 3_000_000;
const KW_PROTO: u32 = 4_000_000;
const KI_PROTO: u32 = 5_000_000;
const PC_PROTO: u32 = 6_000_000;
const LIST_NATIVE: u32 = 1;
const LIST_PROTO: u32 = 2;
const CM_SKETCH: u16 = 1;
const HLL_SKETCH: u16 = 2;

/// The 13-byte 5-tuple of flow `i`: 10.0.x.y:(1024+i%50000) -> 10.1.0.1:80/TCP.
pub fn five_tuple(i: u32) -> [u8; 13] {
    let mut k = [0u8; 13];
    k[0..4].copy_from_slice(&[10, 0, (i >> 8) as u8, i as u8]);
    k[4..8].copy_from_slice(&[10, 1, 0, 1]);
    k[8..10].copy_from_slice(&((1024 + i % 50_000) as u16).to_be_bytes());
    k[10..12].copy_from_slice(&80u16.to_be_bytes());
    k[12] = 6;
    k
}

pub fn kw_data(i: u32) -> [u8; 4] {
    (i.wrapping_mul(2_654_435_761) ^ 0xD7A0_0000).to_be_bytes()
}

pub fn flow_data(i: u32) -> [u8; 8] {
    (i as u64 * 1_000_003 + 7).to_be_bytes()
}

/// Path of flow `i`: length 1..=5, switch ids in 0..2^18.
pub fn path(i: u32, hops: u8) -> Vec<u32> {
    let len = 1 + (i % hops as u32);
    (0..len)
        .map(|h| (i.wrapping_mul(31) + h * 7919) % (1 << 18))
        .collect()
}

fn ki_increments(i: u32) -> (u64, u64) {
    ((i % 7 + 1) as u64, 1)
}

/// Run the demo and return what it measured, without printing.
pub fn measure(opts: &DemoOptions) -> anyhow::Result<Report> {
    let mut cfg = Config::embedded();
    let tmp;
    let dir = match &opts.region_dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_owned()
        }
    };
    cfg.region_dir = dir.clone();
    cfg.translator.listen = "127.0.0.1:0".parse().unwrap();
    let flows = opts.flows.max(1);

    // The collector creates its regions (fresh ones: the demo starts from empty stores).
    cfg.collector.force = true;
    let collector = dta_node::collector::create(&cfg)?;

    // The reporters' control socket, on an ephemeral port the translator sends its NACKs and
    // notices to: the demo's flow control is its own, whatever else runs on this host.
    let hub = dta_reporter::ControlHub::bind("127.0.0.1:0".parse().unwrap(), 0)?;
    cfg.translator.nack_port = hub.local_addr()?.port();

    // The translator, on its own thread, writing into the regions through shared memory.
    let translator = MemoryTranslator::build(&cfg, Options::default())?;
    let stats = translator.stats()[0].clone();
    let to: SocketAddr = translator.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let handle = {
        let stop = stop.clone();
        std::thread::spawn(move || translator.run(&stop))
    };

    let sent_datagrams = send_all(to, flows, &hub).context("sending reports")?;

    // Wait until the translator has seen every datagram, then stop it (it flushes its batches,
    // its postcard cache and its sketch columns on the way out).
    let deadline = Instant::now() + Duration::from_secs(10);
    while stats.datagrams.load(Ordering::Relaxed) < sent_datagrams && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    handle
        .join()
        .map_err(|_| anyhow::anyhow!("translator thread panicked"))??;
    collector.flush();
    drop(collector);

    // Query from the files, read-only, as any other process would.
    let c = Collector::open_dir(&dir, false)?;
    let rows = query_all(&c, flows)?;
    Ok(Report {
        rows,
        translator: stats.snapshot(),
        region_dir: dir.display().to_string(),
    })
}

/// Send every primitive in both protocols, the native reporters hearing the translator
/// through `hub`; returns the number of datagrams sent.
fn send_all(
    to: SocketAddr,
    flows: u32,
    hub: &Arc<dta_reporter::ControlHub>,
) -> anyhow::Result<u64> {
    let native_reporter = |id: u32| {
        let mut c = ReporterConfig::new(to, Protocol::Native { reporter_id: id });
        c.control_hub = Some(hub.clone());
        Reporter::new(c)
    };
    let mut native = native_reporter(1)?;
    let mut proto = Reporter::new(ReporterConfig::new(
        to,
        Protocol::Prototype(BaseFormat::Short),
    ))?;
    // Loopback drops datagrams when the receive buffer overflows; pace the prototype stream,
    // which sends one report per datagram.
    let pace = |i: u32| {
        if i % 64 == 63 {
            std::thread::sleep(Duration::from_micros(500));
        }
    };
    for i in 0..flows {
        native.key_write(&(KW_NATIVE + i).to_be_bytes(), &kw_data(i), 2, false)?;
        native.key_write(&five_tuple(i), &flow_data(i), 2, false)?;
        let (a, b) = ki_increments(i);
        native.key_increment(&(KI_NATIVE + i).to_be_bytes(), a, 2, false)?;
        native.key_increment(&(KI_NATIVE + i).to_be_bytes(), b, 2, false)?;
        let p = path(i, 5);
        for (hop, v) in p.iter().enumerate() {
            native.postcard(
                &(PC_NATIVE + i).to_be_bytes(),
                hop as u8,
                p.len() as u8,
                *v,
                false,
            )?;
        }
        native.append(LIST_NATIVE, &i.to_be_bytes(), false)?;

        proto.key_write(&(KW_PROTO + i).to_be_bytes(), &kw_data(i), 2, false)?;
        proto.key_increment(&(KI_PROTO + i).to_be_bytes(), a + b, 2, false)?;
        // The prototype carries no path length: short paths leave the cache on its timeout.
        for (hop, v) in p.iter().enumerate() {
            proto.postcard(&(PC_PROTO + i).to_be_bytes(), hop as u8, 0, *v, false)?;
        }
        proto.append(LIST_PROTO, &i.to_be_bytes(), false)?;
        pace(i);
    }
    native.flush()?;

    // Sketch-Merge: two reporters each send their own Count-Min and HyperLogLog, column by
    // column; the translator merges them and writes each column once both have contributed.
    for (id, (cm, hll)) in [(11u32, sketches(flows, 0)), (12, sketches(flows, 1))] {
        let mut r = native_reporter(id)?;
        for c in 0..cm.columns() {
            let data: Vec<u8> = cm.column(c).iter().flat_map(|v| v.to_be_bytes()).collect();
            r.sketch_column(CM_SKETCH, c as u16, 1, &data, false)?;
        }
        for c in 0..(hll.registers().len() as u32 / 64) {
            r.sketch_column(HLL_SKETCH, c as u16, 1, hll.column(c, 64), false)?;
        }
        r.flush()?;
        native_add(&mut native, &r);
    }
    Ok(native.stats().datagrams + proto.stats().datagrams)
}

fn native_add(total: &mut Reporter, other: &Reporter) {
    total.add_stats(other.stats());
}

/// Reporter `which`'s sketches: Count-Min over flows (counts differ per reporter) and
/// HyperLogLog over half-overlapping key sets.
fn sketches(flows: u32, which: u32) -> (CountMin, HyperLogLog) {
    let mut cm = CountMin::new(4, 1024);
    let mut hll = HyperLogLog::new(4096);
    for i in 0..flows {
        cm.update(&five_tuple(i), cm_count(i, which) as u32);
        hll.insert(&(i + which * flows / 2).to_be_bytes());
    }
    (cm, hll)
}

fn cm_count(i: u32, which: u32) -> u64 {
    if which == 0 {
        (i % 5 + 1) as u64
    } else {
        (i % 3 + 1) as u64
    }
}

fn query_all(c: &Collector, flows: u32) -> anyhow::Result<Vec<Row>> {
    let mut rows = vec![];
    let kw = &c.store("kw")?.region;
    let flows_store = &c.store("flows")?.region;
    let counters = &c.store("counters")?.region;
    let paths = &c.store("paths")?.region;
    let events = &c.store("events")?.region;
    let cm = &c.store("flowsizes")?.region;
    let hll = &c.store("distinct")?.region;

    for (protocol, base) in [("native", KW_NATIVE), ("prototype", KW_PROTO)] {
        let mut row = Row::new("Key-Write", protocol, "kw");
        for i in 0..flows {
            let key = (base + i).to_be_bytes();
            let r = query::key_write(kw, &key, None, 1)?;
            row.tally(match &r.data {
                Some(d) if *d == hex::encode(kw_data(i)) => Outcome::Correct,
                Some(_) => Outcome::Wrong,
                None => Outcome::Empty,
            });
            if i == 0 {
                row.example = format!("key {} -> 0x{}", base + i, r.data.unwrap_or_default());
            }
        }
        rows.push(row);
    }

    let mut row = Row::new("Key-Write", "native", "flows");
    for i in 0..flows {
        let r = query::key_write(flows_store, &five_tuple(i), None, 1)?;
        row.tally(match &r.data {
            Some(d) if *d == hex::encode(flow_data(i)) => Outcome::Correct,
            Some(_) => Outcome::Wrong,
            None => Outcome::Empty,
        });
        if i == 0 {
            row.example = format!(
                "flow 10.0.0.0:1024-10.1.0.1:80/6 -> 0x{}",
                r.data.unwrap_or_default()
            );
        }
    }
    rows.push(row);

    for (protocol, base) in [("native", KI_NATIVE), ("prototype", KI_PROTO)] {
        let mut row = Row::new("Key-Increment", protocol, "counters");
        for i in 0..flows {
            let (a, b) = ki_increments(i);
            let r = query::key_increment(counters, &(base + i).to_be_bytes(), None)?;
            row.tally(match r.count {
                0 => Outcome::Empty,
                n if n == a + b => Outcome::Correct,
                _ => Outcome::Wrong,
            });
            if i == 0 {
                row.example = format!("key {} -> {}", base + i, r.count);
            }
        }
        rows.push(row);
    }

    let layout = dta_store::PostcardingLayout::new(paths.header())?;
    let table = dta_store::ValueTable::range(&layout, 1 << 18)?;
    for (protocol, base) in [("native", PC_NATIVE), ("prototype", PC_PROTO)] {
        let mut row = Row::new("Postcarding", protocol, "paths");
        for i in 0..flows {
            let r = query::postcard_with(paths, &layout, &table, &(base + i).to_be_bytes())?;
            row.tally(match r.status {
                "found" if r.path == path(i, 5) => Outcome::Correct,
                "found" => Outcome::Wrong,
                _ => Outcome::Empty,
            });
            if i == 2 {
                let hops: Vec<String> = r.path.iter().map(|v| v.to_string()).collect();
                row.example = format!("key {} -> {}", base + i, hops.join(" -> "));
            }
        }
        rows.push(row);
    }

    for (protocol, list) in [("native", LIST_NATIVE), ("prototype", LIST_PROTO)] {
        let mut row = Row::new("Append", protocol, "events");
        let r = query::list(
            events,
            list,
            Some(0),
            flows as usize + 16,
            dta_int::events::decode_record,
        )?;
        for i in 0..flows {
            row.tally(match r.entries.get(i as usize) {
                Some(e) if *e == hex::encode(i.to_be_bytes()) => Outcome::Correct,
                Some(_) => Outcome::Wrong,
                None => Outcome::Empty,
            });
        }
        if r.entries.len() > flows as usize {
            row.wrong += (r.entries.len() - flows as usize) as u64;
        }
        row.example = format!(
            "list {list}: {} entries, first {:?}, missed {}",
            r.entries.len(),
            r.entries.iter().take(3).collect::<Vec<_>>(),
            r.missed
        );
        rows.push(row);
    }

    // Count-Min: never below the merged truth, and within the sketch's additive bound
    // e/w * (total count) (Cormode & Muthukrishnan), which holds with probability 1 - e^-d.
    let mut row = Row::new("Sketch-Merge (Count-Min)", "native", "flowsizes");
    let total: u64 = (0..flows).map(|i| cm_count(i, 0) + cm_count(i, 1)).sum();
    let bound = (std::f64::consts::E / 1024.0 * total as f64).ceil() as u64;
    let mut exact = 0;
    for i in 0..flows {
        let truth = cm_count(i, 0) + cm_count(i, 1);
        let r = query::sketch(cm, Some(&five_tuple(i)))?;
        let est = r.estimate.unwrap_or(0);
        exact += (est == truth) as u64;
        row.tally(match est {
            0 => Outcome::Empty,
            e if e >= truth && e - truth <= bound => Outcome::Correct,
            _ => Outcome::Wrong,
        });
    }
    row.example = format!("{exact}/{flows} estimates exact; the rest within the bound +{bound}");
    rows.push(row);

    let mut row = Row::new("Sketch-Merge (HyperLogLog)", "native", "distinct");
    let truth = flows as f64 * 1.5;
    let r = query::sketch(hll, None)?;
    let est = r.cardinality.unwrap_or(0.0);
    let sigma = 1.04 / (4096f64).sqrt();
    row.tally(if est == 0.0 {
        Outcome::Empty
    } else if ((est - truth) / truth).abs() <= 3.0 * sigma {
        Outcome::Correct
    } else {
        Outcome::Wrong
    });
    row.example = format!(
        "{est:.0} distinct keys (truth {truth:.0}, 3 sigma = {:.1}%)",
        300.0 * sigma
    );
    rows.push(row);
    Ok(rows)
}

/// Run the demo and print its answers. Returns whether every answer was right.
pub fn run(opts: &DemoOptions) -> anyhow::Result<bool> {
    eprintln!(
        "dta demo: collector + translator + reporters on loopback, {} flows per primitive",
        opts.flows
    );
    let report = measure(opts)?;
    if opts.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{:<27} {:<10} {:<10} {:>8} {:>8} {:>6} {:>6}  example",
            "primitive", "protocol", "store", "queried", "correct", "empty", "wrong"
        );
        for r in &report.rows {
            println!(
                "{:<27} {:<10} {:<10} {:>8} {:>8} {:>6} {:>6}  {}",
                r.primitive, r.protocol, r.store, r.queried, r.correct, r.empty, r.wrong, r.example
            );
        }
        println!(
            "translator: {} datagrams, reports {}, rejected {}",
            report.translator["datagrams"],
            report.translator["reports"],
            report.translator["rejected"]
                .as_object()
                .map(|m| m.values().filter_map(|v| v.as_u64()).sum::<u64>())
                .unwrap_or(0)
        );
        println!("regions: {}", report.region_dir);
    }
    let ok = report.all_correct();
    eprintln!(
        "{}",
        if ok {
            "every answer correct"
        } else {
            "SOME ANSWERS WERE NOT CORRECT"
        }
    );
    Ok(ok)
}
