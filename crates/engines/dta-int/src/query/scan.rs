//! Filtered queries over the events store's lists that find every match held and say what they
//! cover: "what happened at switch 401", "the events of this flow", "which flows, which are the
//! worst". An Append list holds its last `capacity` entries ([DTA A.3]); a filter may keep
//! entries anywhere in them, so each list is read back from its head to its oldest held entry,
//! a chunk at a time, until the answer is full, the list ends, or the request's budget
//! ([`MAX_SCAN`] entries) is spent. The answer says which:
//!
//! - [`EventPage::complete`]: every held event the filter keeps is in `events`; else `next` is a
//!   cursor (per kind, where its list is to be read on from) that the next request passes back
//!   as [`EventFilter::before`]. Pages never overlap and together hold every match.
//! - [`FlowPage::complete`]: every held flow summary was read; else `covered_from_ns` says how
//!   far back the answer looked.

use std::collections::BTreeMap;

use serde::Serialize;

use dta_store::{AppendLayout, ListReader, Region, StoreKind};

use super::{event_list, expect, layout_err, QueryError};
use crate::events::{Event, EventKind, FlowSummary};
use crate::layout::FLOW_KEY_LEN;

/// Most list entries one request reads (32 MiB of 32-byte entries): every list of the example
/// events store (8 kinds x 16 384 entries) eight times over.
pub const MAX_SCAN: u64 = 1 << 20;
/// Most events one answer holds.
pub const MAX_EVENTS: usize = 4096;
/// Entries read from a list at once.
const CHUNK: u64 = 4096;

/// Where a paged event query goes on: per kind, the entry index its list is read on below.
/// Written `kind:index,kind:index` (e.g. `hop_latency:1200,queue_occupancy:77`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventCursor(pub BTreeMap<EventKind, u64>);

impl EventCursor {
    /// Parse `kind:index,...`; an error names the valid form.
    pub fn parse(s: &str) -> Result<EventCursor, String> {
        let mut m = BTreeMap::new();
        for part in s.split(',').take(EventKind::ALL.len() + 1) {
            let (k, i) = part.split_once(':').ok_or_else(|| {
                format!("cursor {part:?}: expected KIND:INDEX[,KIND:INDEX...] as a page's next")
            })?;
            let kind = EventKind::parse(k)?;
            let index = i
                .parse::<u64>()
                .map_err(|_| format!("cursor {part:?}: INDEX is an entry index (0..2^64)"))?;
            if m.insert(kind, index).is_some() {
                return Err(format!("cursor names {} twice", kind.name()));
            }
        }
        if s.split(',').count() > EventKind::ALL.len() {
            return Err(format!("cursor: at most {} kinds", EventKind::ALL.len()));
        }
        Ok(EventCursor(m))
    }
}

impl std::fmt::Display for EventCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(k, i)| format!("{}:{i}", k.name()))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// Which events [`recent_events`] keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// These kinds (empty: every kind).
    pub kinds: Vec<EventKind>,
    /// At this switch.
    pub node: Option<u32>,
    /// Of this flow.
    pub flow: Option<[u8; FLOW_KEY_LEN]>,
    /// At or after this time (Unix nanoseconds, the sink's clock).
    pub since_ns: Option<u64>,
    /// At or before this time (Unix nanoseconds; [`end_of_ms`] for a millisecond asked): with
    /// `since_ns`, an episode's rows.
    pub until_ns: Option<u64>,
    /// Continue a paged answer: its `next`.
    pub before: Option<EventCursor>,
}

/// The last nanosecond of Unix millisecond `ms`: an `until_ms` asked takes its whole millisecond.
pub fn end_of_ms(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000).saturating_add(999_999)
}

impl EventFilter {
    fn keeps(&self, e: &Event) -> bool {
        self.node.is_none_or(|n| e.node_id == n)
            && self.flow.is_none_or(|f| e.flow == f)
            && self.since_ns.is_none_or(|t| e.time_ns >= t)
            && self.until_ns.is_none_or(|t| e.time_ns <= t)
    }
}

/// A page of [`recent_events`].
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EventPage {
    /// Newest first.
    pub events: Vec<Event>,
    /// Whether every held event the filter keeps is in `events` (with the pages before it).
    pub complete: bool,
    /// List entries read.
    pub scanned: u64,
    /// Pass as `before` for the next page; absent when complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// One list read backwards: entry indices below `from` down to the oldest held, newest first,
/// to `f` (index, bytes) until it returns false or `budget` runs out. The lowest index read and
/// whether the list's oldest held entry was reached.
pub(crate) fn scan_back(
    region: &Region,
    l: &AppendLayout,
    list: u32,
    from: u64,
    budget: &mut u64,
    mut f: impl FnMut(u64, &[u8]) -> bool,
) -> Result<(u64, bool), QueryError> {
    let head = region
        .mem()
        .load_u64(l.head_offset(list))
        .map_err(|e| layout_err(region, e))?;
    // Clear of the entries a writer may be overwriting (dta_store::ListReader).
    let oldest = head.saturating_sub(l.capacity().saturating_sub(l.batch() as u64));
    let mut pos = from.min(head);
    let mut buf = Vec::new();
    while pos > oldest {
        if *budget == 0 {
            return Ok((pos, false));
        }
        let start = pos.saturating_sub(CHUNK.min(*budget)).max(oldest);
        let mut reader = ListReader::new(l.clone(), list, 0, 1)
            .map_err(|e| layout_err(region, e))?
            .with_tail(start);
        buf.clear();
        let polled = reader.poll(region.mem(), (pos - start) as usize, &mut buf);
        let first = start + polled.missed;
        *budget = budget.saturating_sub(pos - start);
        // Entries at or past `pos` (read when the reader skipped overwritten ones) were read
        // before.
        let n = (pos.saturating_sub(first) as usize).min(polled.entries);
        let entries: Vec<&[u8]> = buf.chunks(l.entry_len()).take(n).collect();
        for (i, e) in entries.iter().enumerate().rev() {
            if !f(first + i as u64, e) {
                return Ok((first + i as u64, false));
            }
        }
        if polled.missed > 0 {
            // Overwritten while read: what is below is gone.
            return Ok((first, true));
        }
        pos = start;
    }
    Ok((pos, true))
}

/// "What happened": the events of the filter's kinds (every kind by default) that it keeps,
/// newest first, at most `max` (at most [`MAX_EVENTS`]), found wherever they are in the lists
/// held; the page says whether it holds them all and where the next one starts (module doc).
pub fn recent_events(
    region: &Region,
    list_base: u32,
    filter: &EventFilter,
    max: usize,
) -> Result<EventPage, QueryError> {
    expect(region, StoreKind::Append, "append")?;
    let l = AppendLayout::new(region.header()).map_err(|e| layout_err(region, e))?;
    let max = max.clamp(1, MAX_EVENTS);
    let mut kinds: Vec<EventKind> = if filter.kinds.is_empty() {
        EventKind::ALL.to_vec()
    } else {
        filter.kinds.clone()
    };
    if let Some(c) = &filter.before {
        kinds.retain(|k| c.0.contains_key(k));
    }
    let mut budget = MAX_SCAN;
    // Per kind: where it started, its matches (newest first), where it stopped, whether done.
    struct Run {
        kind: EventKind,
        start: u64,
        found: Vec<Event>,
        stopped: u64,
        done: bool,
        taken: usize,
    }
    let mut runs = vec![];
    for k in kinds {
        let list = event_list(region, &l, list_base, k as u32 - 1)?;
        let start = filter
            .before
            .as_ref()
            .and_then(|c| c.0.get(&k).copied())
            .unwrap_or(u64::MAX);
        let mut found = vec![];
        let (stopped, done) = scan_back(region, &l, list, start, &mut budget, |i, bytes| {
            if let Some(e) = Event::decode(bytes, i).filter(|e| filter.keeps(e)) {
                found.push(e);
            }
            found.len() < max
        })?;
        // Stopped on the max-th match: the entries below it are unread.
        let done = done && found.len() < max;
        runs.push(Run {
            kind: k,
            start,
            found,
            stopped,
            done,
            taken: 0,
        });
    }
    // The newest `max` over the kinds, each kind's newest first (so each gives a prefix).
    let mut events = Vec::with_capacity(max);
    while events.len() < max {
        let next = runs
            .iter_mut()
            .filter(|r| r.taken < r.found.len())
            .max_by_key(|r| (r.found[r.taken].time_ns, r.found[r.taken].seq));
        let Some(r) = next else { break };
        events.push(r.found[r.taken]);
        r.taken += 1;
    }
    let mut next = BTreeMap::new();
    for r in &runs {
        let resume = if r.taken < r.found.len() {
            // Matches left out of this page: read on below the last one given.
            Some(r.taken.checked_sub(1).map_or(r.start, |t| r.found[t].seq))
        } else if !r.done {
            Some(r.stopped)
        } else {
            None
        };
        if let Some(at) = resume {
            next.insert(r.kind, at);
        }
    }
    Ok(EventPage {
        events,
        complete: next.is_empty(),
        scanned: MAX_SCAN - budget,
        next: (!next.is_empty()).then(|| EventCursor(next).to_string()),
    })
}

/// Which flows [`flows`] keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowFilter {
    /// Source or destination address in this prefix.
    pub prefix: Option<dta_wire::prefix::Prefix>,
    /// Source or destination port.
    pub port: Option<u16>,
    /// Through this switch (needs the paths store).
    pub node: Option<u32>,
    /// Seen at or after this time (Unix nanoseconds, the sink's clock).
    pub since_ns: Option<u64>,
    /// This flow only, and every summary of it held (the flow over time: one per
    /// `active_timeout_ms` while it ran, and one when it left the FlowCache), not only its
    /// newest.
    pub flow: Option<[u8; FLOW_KEY_LEN]>,
}

/// Which of a flow's summaries [`summaries`] gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// Its newest.
    Newest,
    /// The one of the highest path latency (the newest of equals): its worst in the time read.
    Worst,
}

/// The flow summaries of the events store (list `list_base + FLOW_SUMMARY_LIST`) since
/// `since_ns`, in the order of each flow's newest: each flow once (the summary `keep` says), or
/// with `flow`, every summary of that flow. At most [`MAX_SCAN`] read; whether that was every
/// one held, and the oldest time read.
pub(crate) fn summaries(
    events: &Region,
    list_base: u32,
    since_ns: Option<u64>,
    flow: Option<[u8; FLOW_KEY_LEN]>,
    keep: Keep,
) -> Result<(Vec<FlowSummary>, bool, Option<u64>), QueryError> {
    expect(events, StoreKind::Append, "append")?;
    let l = AppendLayout::new(events.header()).map_err(|e| layout_err(events, e))?;
    let list = event_list(events, &l, list_base, crate::events::FLOW_SUMMARY_LIST)?;
    // Each flow's place in `out`.
    let mut at = std::collections::HashMap::new();
    let mut out: Vec<FlowSummary> = vec![];
    let mut oldest_ns: Option<u64> = None;
    let mut budget = MAX_SCAN;
    let (_, done) = scan_back(events, &l, list, u64::MAX, &mut budget, |i, bytes| {
        let Some(s) = FlowSummary::decode(bytes, i) else {
            return true;
        };
        oldest_ns = Some(oldest_ns.map_or(s.last_ns, |t| t.min(s.last_ns)));
        if since_ns.is_some_and(|t| s.last_ns < t) {
            return true;
        }
        match flow {
            Some(k) if s.flow == k => out.push(s),
            Some(_) => {}
            None => match at.entry(s.flow) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(out.len());
                    out.push(s);
                }
                std::collections::hash_map::Entry::Occupied(o) => {
                    let held = &mut out[*o.get()];
                    if keep == Keep::Worst && s.path_latency > held.path_latency {
                        *held = s;
                    }
                }
            },
        }
        true
    })?;
    Ok((out, done, oldest_ns))
}

/// A page of [`super::flows`].
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FlowPage {
    pub flows: Vec<super::FlowInfo>,
    /// Whether every flow summary held was read (else only those since `covered_from_ns`).
    pub complete: bool,
    /// The oldest summary read (Unix ns, the sink's clock); absent when none is held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub covered_from_ns: Option<u64>,
    /// Flows that matched beyond `max` (ranked out of this answer).
    pub more: usize,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use dta_store::{AppendRecord, AppendSpec, StoreSpec};

    /// An events store of `capacity` entries a list holding `events`, each appended to its
    /// kind's list in the order given.
    pub(crate) fn events_region(
        dir: &std::path::Path,
        capacity: u64,
        events: impl IntoIterator<Item = Event>,
    ) -> Region {
        let spec = StoreSpec::Append(AppendSpec {
            lists: 9,
            capacity,
            entry_len: 32,
            batch: 1,
            record: AppendRecord::IntEvent,
        });
        let r = Region::create(&dir.join("events.region"), "events", &spec, true).unwrap();
        let l = AppendLayout::new(r.header()).unwrap();
        let mut sink = r.mem().sink();
        let mut next = [0u64; 9];
        for e in events {
            let list = e.kind as u32 - 1;
            let i = next[list as usize];
            l.write_entry(list, i, &e.encode(), &mut sink).unwrap();
            l.publish(list, i + 1, &mut sink).unwrap();
            next[list as usize] += 1;
        }
        r
    }

    /// An events store of `capacity` entries a list, with `n` hop-latency events at switches
    /// 1..=4 in turn (switch 9 for the 10 oldest) and `n` queue events at switch 2.
    fn store(dir: &std::path::Path, capacity: u64, n: u64) -> Region {
        let events = [
            (EventKind::HopLatency, None),
            (EventKind::QueueOccupancy, Some(2)),
        ]
        .into_iter()
        .flat_map(|(kind, node)| {
            (0..n).map(move |i| Event {
                seq: i,
                time_ns: 1_000 + i * 10 + kind as u64,
                kind,
                flow: [i as u8; FLOW_KEY_LEN],
                hop: 0,
                node_id: node.unwrap_or(if i < 10 { 9 } else { 1 + (i % 4) as u32 }),
                value: i as u32,
            })
        });
        events_region(dir, capacity, events)
    }

    fn filter(node: Option<u32>) -> EventFilter {
        EventFilter {
            node,
            ..Default::default()
        }
    }

    #[test]
    fn a_filter_finds_its_matches_anywhere_in_the_lists_held() {
        let d = tempfile::tempdir().unwrap();
        let r = store(d.path(), 4096, 3000);
        // Switch 9's ten events are the oldest, 2990 entries behind the head.
        let p = recent_events(&r, 0, &filter(Some(9)), 100).unwrap();
        assert_eq!(p.events.len(), 10, "{p:?}");
        assert!(p.complete && p.next.is_none());
        assert!(p.events.iter().all(|e| e.node_id == 9));
        let seqs: Vec<u64> = p.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (0..10).rev().collect::<Vec<_>>(), "newest first");
        // Nothing matches: an empty answer that says it looked at everything.
        let none = recent_events(&r, 0, &filter(Some(77)), 100).unwrap();
        assert!(none.events.is_empty() && none.complete);
        assert_eq!(none.scanned, 6000);
    }

    #[test]
    fn pages_hold_every_match_once_and_say_when_they_are_partial() {
        let d = tempfile::tempdir().unwrap();
        let r = store(d.path(), 4096, 3000);
        // Switch 2: 3000 queue events and 747 hop-latency ones; pages of 1000.
        let want = 3000 + (10..3000).filter(|i| 1 + i % 4 == 2).count();
        let mut f = filter(Some(2));
        let mut got = std::collections::HashSet::new();
        let mut pages = 0;
        loop {
            let p = recent_events(&r, 0, &f, 1000).unwrap();
            pages += 1;
            assert!(p.events.len() <= 1000);
            let times: Vec<u64> = p.events.iter().map(|e| e.time_ns).collect();
            assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first");
            for e in &p.events {
                assert!(got.insert((e.kind, e.seq)), "{e:?} twice");
            }
            match p.next {
                Some(n) => {
                    assert!(!p.complete);
                    f.before = Some(EventCursor::parse(&n).unwrap());
                }
                None => {
                    assert!(p.complete);
                    break;
                }
            }
            assert!(pages < 10, "the pages end");
        }
        assert_eq!(got.len(), want);
    }

    #[test]
    fn only_what_is_held_is_read_and_cursors_are_checked() {
        let d = tempfile::tempdir().unwrap();
        // 3000 written into lists of 1024: the oldest 1976 are overwritten.
        let r = store(d.path(), 1024, 3000);
        let p = recent_events(&r, 0, &filter(Some(9)), 100).unwrap();
        assert!(
            p.events.is_empty() && p.complete,
            "switch 9's were overwritten"
        );
        assert!(p.scanned <= 2048, "{}", p.scanned);
        for bad in [
            "",
            "hop_latency",
            "hop_latency:x",
            "flood:1",
            "drop:1,drop:2",
        ] {
            assert!(EventCursor::parse(bad).is_err(), "{bad:?}");
        }
        let c = EventCursor::parse("queue_occupancy:7,hop_latency:12").unwrap();
        assert_eq!(c.to_string(), "hop_latency:12,queue_occupancy:7");
        // A cursor continues below its index only.
        let p = recent_events(
            &r,
            0,
            &EventFilter {
                before: Some(c),
                ..Default::default()
            },
            100,
        )
        .unwrap();
        assert!(p.events.iter().all(|e| e.seq < 12));
    }
}
