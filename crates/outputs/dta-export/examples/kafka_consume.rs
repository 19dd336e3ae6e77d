//! A consumer of the Kafka export (docs/kafka.md): reads `{prefix}.append` and
//! `{prefix}.events` from the start, drops the duplicates at-least-once delivery may bring (by
//! (store, list, index) and by the event's `seq`), and prints per store and list how many
//! entries it holds, the index range and any gap, then the events' count.
//!
//! ```text
//! cargo run -p dta-export --example kafka_consume -- 127.0.0.1:9092 [PREFIX]
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::time::Duration;

use dta_export::kafka::consumer::read_topic;
use dta_export::kafka::{TopicKind, DEFAULT_TOPIC_PREFIX};

const MAX_RECORDS: usize = 50_000_000;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(brokers) = args.next() else {
        eprintln!("usage: kafka_consume BROKERS [PREFIX]");
        return ExitCode::FAILURE;
    };
    let prefix = args.next().unwrap_or_else(|| DEFAULT_TOPIC_PREFIX.into());
    let brokers: Vec<String> = brokers.split(',').map(str::to_owned).collect();
    let timeout = Duration::from_secs(30);

    let append = match read_topic(
        &brokers,
        &TopicKind::Append.topic(&prefix),
        MAX_RECORDS,
        timeout,
    ) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut lists: BTreeMap<(String, u32), BTreeSet<u64>> = BTreeMap::new();
    let mut malformed = 0u64;
    for r in &append {
        match r.append_id() {
            Some((store, list, index)) => {
                lists.entry((store, list)).or_default().insert(index);
            }
            None => malformed += 1,
        }
    }
    let unique: usize = lists.values().map(BTreeSet::len).sum();
    println!(
        "{}: {} records, {unique} entries, {} duplicates, {malformed} without dta.* headers",
        TopicKind::Append.topic(&prefix),
        append.len(),
        append.len() as u64 - unique as u64 - malformed
    );
    for ((store, list), idx) in &lists {
        let (lo, hi) = (idx.first().unwrap(), idx.last().unwrap());
        let gaps = (hi - lo + 1) - idx.len() as u64;
        println!(
            "  {store}/{list}: {} entries, indices {lo}..={hi}, {gaps} missing",
            idx.len()
        );
    }

    match read_topic(
        &brokers,
        &TopicKind::Events.topic(&prefix),
        MAX_RECORDS,
        timeout,
    ) {
        Ok(events) => {
            let seqs: BTreeSet<u64> = events
                .iter()
                // Decoded by the record's headers, JSON or protobuf alike.
                .filter_map(|r| r.to_json()["value"]["seq"].as_u64())
                .collect();
            println!(
                "{}: {} records, {} events, {} duplicates",
                TopicKind::Events.topic(&prefix),
                events.len(),
                seqs.len(),
                events.len().saturating_sub(seqs.len())
            );
        }
        Err(e) => println!("{}: {e}", TopicKind::Events.topic(&prefix)),
    }
    ExitCode::SUCCESS
}
