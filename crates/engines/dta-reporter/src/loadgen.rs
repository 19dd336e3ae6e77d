// Size: one generator loop drives every primitive through the same pacing, key derivation and
// progress reporting; its tests check each primitive against that derivation.
//! The load generator behind `dta report`: reports of one primitive, paced, with deterministic
//! keys and data (see [`crate::keys`] for how everything sent derives from the key index, so a
//! test can recompute what it should find in the collector).
//!
//! A run draws key indices from [`LoadSpec::keys`] with a `StdRng` seeded by
//! [`LoadSpec::seed`] ([`key_indices`] replays the exact sequence) and turns each into one
//! report (Postcarding: one whole path of [`LoadSpec::hops`] postcards, hop 0 first, with
//! `path_len = hops`). Pacing is a token bucket that sleeps in batches ([`crate::pacing`]). The
//! run stops after [`LoadSpec::count`] reports (Postcarding: rounded up to whole paths) or
//! [`LoadSpec::duration`], whichever comes first; native datagrams are flushed at the end, and a
//! retransmittable reporter lingers for late NACKs ([`LoadSpec::linger`]).
//!
//! Sketch-Merge: the `count` drawn keys are inserted into a Count-Min sketch
//! (`dta_store::sketch::CountMin`, [`LoadSpec::sketch_rows`] × [`LoadSpec::sketch_columns`],
//! one per key occurrence) which is then sent column by column with a [`SketchSender`]
//! ([DTA-draft §3.1]); `reports` counts columns sent.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::SeedableRng;

use dta_store::sketch::CountMin;
use dta_wire::Opcode;

use crate::cluster::ReportSink;
use crate::keys::{self, KeyDistError, KeySampler, MAX_DATA_LEN, MAX_KEY_LEN};
pub use crate::keys::{expected_counter, expected_data, key_vec, postcard_value, KeyDist};
use crate::pacing::Pacer;
use crate::reporter::{Protocol, ReportError, Reporter, ReporterStats, NACK_POLL_EVERY};
use crate::sketch::{SketchOutcome, SketchSender};

/// What to send. [`LoadSpec::new`] gives the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadSpec {
    /// The primitive.
    pub primitive: Opcode,
    /// Reports per second; `None`: as fast as possible.
    pub rate: Option<f64>,
    /// Reports to send (Postcarding: rounded up to whole paths; Sketch-Merge: keys inserted).
    pub count: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Key index distribution.
    pub keys: KeyDist,
    /// Key bytes (1..=16; the prototype: 4). Default 4.
    pub key_len: u8,
    /// Key-Write data / Append entry bytes (native 4..=64; prototype Key-Write 4, 12, 28,
    /// Append 4). Default 4.
    pub data_len: u8,
    /// Key-Write / Key-Increment redundancy, 1..=[`dta_wire::MAX_REDUNDANCY`]. Default
    /// [`dta_wire::DEFAULT_REDUNDANCY`].
    pub redundancy: u8,
    /// Postcarding: the size of the store's value set; every value sent is below it. Default
    /// [`dta_wire::DEFAULT_POSTCARD_VALUES`].
    pub postcard_values: u32,
    /// Append: lists the entries are spread over (key index modulo `lists`). Default 1.
    pub lists: u32,
    /// Append: the first list id. Default 0.
    pub first_list: u32,
    /// Postcarding: hops per path. Default 5.
    pub hops: u8,
    /// The immediate flag of every report. Default false.
    pub immediate: bool,
    /// Seed of the key sequence. Default 1.
    pub seed: u64,
    /// Sketch-Merge: sketch id. Default 1.
    pub sketch_id: u16,
    /// Sketch-Merge: epoch. Default 1.
    pub epoch: u32,
    /// Sketch-Merge: Count-Min rows (counters per column, 1..=16). Default 4.
    pub sketch_rows: u32,
    /// Sketch-Merge: Count-Min columns. Default 1024.
    pub sketch_columns: u32,
    /// After the last report: wait for NACKs until this long passes without one (a
    /// retransmittable reporter; Sketch-Merge always). Default 50 ms.
    pub linger: Duration,
}

impl LoadSpec {
    /// Defaults for `primitive`: 100 000 uniform 4-byte keys, 4-byte data, the default
    /// redundancy, one list, 5 hops, the default postcard value set, seed 1, unpaced, no count or
    /// duration (set one).
    pub fn new(primitive: Opcode) -> LoadSpec {
        LoadSpec {
            primitive,
            rate: None,
            count: None,
            duration: None,
            keys: KeyDist::Uniform { n: 100_000 },
            key_len: 4,
            data_len: 4,
            redundancy: dta_wire::DEFAULT_REDUNDANCY,
            postcard_values: dta_wire::DEFAULT_POSTCARD_VALUES,
            lists: 1,
            first_list: 0,
            hops: 5,
            immediate: false,
            seed: 1,
            sketch_id: 1,
            epoch: 1,
            sketch_rows: 4,
            sketch_columns: 1024,
            linger: Duration::from_millis(50),
        }
    }

    /// Check the spec against a protocol.
    pub fn validate(&self, protocol: Protocol) -> Result<(), LoadError> {
        let bad = |m: String| Err(LoadError::Spec(m));
        if self.count.is_none() && self.duration.is_none() {
            return bad("give a count or a duration".into());
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                return bad(format!("rate {r} must be positive"));
            }
        }
        KeySampler::new(self.keys)?;
        let keyed = matches!(
            self.primitive,
            Opcode::KeyWrite | Opcode::KeyIncrement | Opcode::Postcarding | Opcode::SketchMerge
        );
        if keyed && !(1..=MAX_KEY_LEN).contains(&(self.key_len as usize)) {
            return bad(format!("key_len {} must be 1..=16", self.key_len));
        }
        if keyed && self.key_len < 8 && self.keys.n() > 1u64 << (8 * self.key_len as u32) {
            return bad(format!(
                "{} keys do not fit {}-byte keys",
                self.keys.n(),
                self.key_len
            ));
        }
        if matches!(self.primitive, Opcode::KeyWrite | Opcode::KeyIncrement)
            && !(1..=dta_wire::MAX_REDUNDANCY).contains(&self.redundancy)
        {
            return bad(format!(
                "redundancy {} must be 1..={}",
                self.redundancy,
                dta_wire::MAX_REDUNDANCY
            ));
        }
        if self.primitive == Opcode::Postcarding && self.postcard_values < 2 {
            return bad(format!(
                "postcard_values {} must be at least 2",
                self.postcard_values
            ));
        }
        if matches!(self.primitive, Opcode::KeyWrite | Opcode::Append)
            && !(4..=MAX_DATA_LEN).contains(&(self.data_len as usize))
        {
            return bad(format!("data_len {} must be 4..=64", self.data_len));
        }
        if self.primitive == Opcode::Append && self.lists == 0 {
            return bad("lists must be at least 1".into());
        }
        if self.primitive == Opcode::Postcarding && self.hops == 0 {
            return bad("hops must be at least 1".into());
        }
        if self.primitive == Opcode::SketchMerge {
            if !(1..=16).contains(&self.sketch_rows) {
                return bad(format!(
                    "sketch_rows {} must be 1..=16 (a column is at most 64 bytes)",
                    self.sketch_rows
                ));
            }
            if !(1..=65536).contains(&self.sketch_columns) || !self.sketch_columns.is_power_of_two()
            {
                return bad(format!(
                    "sketch_columns {} must be a power of two, at most 65536",
                    self.sketch_columns
                ));
            }
            if self.count.is_none() {
                return bad("Sketch-Merge needs a count (keys inserted into the sketch)".into());
            }
        }
        if let Protocol::Prototype(_) = protocol {
            let ok = match self.primitive {
                Opcode::SketchMerge => return bad("Sketch-Merge needs the native protocol".into()),
                Opcode::KeyWrite => self.key_len == 4 && matches!(self.data_len, 4 | 12 | 28),
                Opcode::KeyIncrement | Opcode::Postcarding => self.key_len == 4,
                Opcode::Append => self.data_len == 4,
            };
            if !ok {
                return bad(
                    "the prototype carries 4-byte keys, Key-Write data of 4, 12 or 28 bytes and \
                     4-byte Append entries"
                        .into(),
                );
            }
        }
        Ok(())
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The spec is invalid.
    #[error("bad load spec: {0}")]
    Spec(String),
    /// The key distribution is invalid.
    #[error("bad key distribution: {0}")]
    Keys(#[from] KeyDistError),
    /// Sending failed.
    #[error(transparent)]
    Report(#[from] ReportError),
}

impl From<std::io::Error> for LoadError {
    fn from(e: std::io::Error) -> Self {
        LoadError::Report(e.into())
    }
}

/// Progress of a run, passed to the callback about every 100 ms and once at the end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Reports sent so far.
    pub reports: u64,
    /// Datagrams sent so far.
    pub datagrams: u64,
    /// Time since the start.
    pub elapsed: Duration,
    /// The run's target, when it has a count.
    pub target: Option<u64>,
}

/// What a run sent (this run only, whatever the reporter sent before).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct LoadStats {
    /// Reports sent (first transmissions).
    pub reports: u64,
    /// Datagrams sent (first transmissions).
    pub datagrams: u64,
    /// UDP payload bytes sent (first transmissions).
    pub bytes: u64,
    /// Datagrams resent on NACKs.
    pub retransmissions: u64,
    /// NACKs received.
    pub nacks: u64,
    /// Datagrams refused by the kernel (lost).
    pub send_errors: u64,
    /// Datagrams not sent because a congestion notice's (or a NACK slowdown's) limit was
    /// reached.
    pub suppressed: u64,
    /// NACKs that slowed the reporter down (docs/protocol.md "Slowing down when NACKed").
    pub nack_slowdowns: u64,
    /// Congestion notices obeyed.
    pub notices: u64,
    /// Malformed or foreign datagrams on the control socket.
    pub bad_nacks: u64,
    /// Control messages not obeyed (docs/security.md): not from the translator.
    pub control_wrong_source: u64,
    /// Not obeyed: unauthenticated while a key is set.
    pub control_unauthenticated: u64,
    /// Not obeyed: failing the authenticator (a key other than the translator's?).
    pub control_bad_authenticator: u64,
    /// Not obeyed: replayed.
    pub control_replayed: u64,
    /// Not obeyed: bound to no life while the reporter announced one.
    pub control_unbound: u64,
    /// Not obeyed: bound to an earlier life of the reporter.
    pub control_stale_life: u64,
    /// Hellos sent (the life control messages are bound to).
    pub hellos: u64,
    /// From the first report to the end of the flush (and linger).
    pub elapsed: Duration,
    /// Sketch-Merge: what the sketch sender did.
    pub sketch: Option<SketchOutcome>,
}

impl LoadStats {
    /// Several senders' statistics as one run: counts summed, the longest elapsed time, no
    /// sketch.
    pub fn combine(all: &[LoadStats]) -> LoadStats {
        let sum = |f: fn(&LoadStats) -> u64| all.iter().map(f).sum::<u64>();
        LoadStats {
            reports: sum(|s| s.reports),
            datagrams: sum(|s| s.datagrams),
            bytes: sum(|s| s.bytes),
            retransmissions: sum(|s| s.retransmissions),
            nacks: sum(|s| s.nacks),
            send_errors: sum(|s| s.send_errors),
            suppressed: sum(|s| s.suppressed),
            nack_slowdowns: sum(|s| s.nack_slowdowns),
            notices: sum(|s| s.notices),
            bad_nacks: sum(|s| s.bad_nacks),
            control_wrong_source: sum(|s| s.control_wrong_source),
            control_unauthenticated: sum(|s| s.control_unauthenticated),
            control_bad_authenticator: sum(|s| s.control_bad_authenticator),
            control_replayed: sum(|s| s.control_replayed),
            control_unbound: sum(|s| s.control_unbound),
            control_stale_life: sum(|s| s.control_stale_life),
            hellos: sum(|s| s.hellos),
            elapsed: all.iter().map(|s| s.elapsed).max().unwrap_or_default(),
            sketch: None,
        }
    }

    /// Reports per second over the run.
    pub fn rate(&self) -> f64 {
        self.reports as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// The key indices a run with `spec` draws, in order (infinite; a run uses the first
/// `stats.reports` of them, Postcarding the first `reports / hops`).
pub fn key_indices(spec: &LoadSpec) -> Result<impl Iterator<Item = u64>, KeyDistError> {
    let sampler = KeySampler::new(spec.keys)?;
    let mut rng = StdRng::seed_from_u64(spec.seed);
    Ok(std::iter::repeat_with(move || sampler.sample(&mut rng)))
}

/// Run `spec` through `reporter`, calling `progress` about every 100 ms. See the module doc.
pub fn run<R: ReportSink>(
    spec: &LoadSpec,
    reporter: &mut R,
    progress: &dyn Fn(Progress),
) -> Result<LoadStats, LoadError> {
    spec.validate(reporter.protocol())?;
    if spec.primitive == Opcode::SketchMerge {
        return run_sketch(spec, reporter.sketch_reporter(spec.sketch_id)?, progress);
    }
    let before = ReportSink::stats(reporter);
    let sampler = KeySampler::new(spec.keys)?;
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let unit = if spec.primitive == Opcode::Postcarding {
        spec.hops as u64
    } else {
        1
    };
    // Target in reports, whole units.
    let target = spec.count.map(|c| c.div_ceil(unit) * unit);
    let mut pacer = Pacer::new(spec.rate);
    let start = Instant::now();
    let deadline = spec.duration.map(|d| start + d);
    let mut last_progress = start;
    let mut key = [0u8; MAX_KEY_LEN];
    let key = &mut key[..spec.key_len as usize];
    let mut data = [0u8; MAX_DATA_LEN];
    let data = &mut data[..spec.data_len as usize];
    let mut sent = 0u64;
    let mut credit = 0u64;
    loop {
        let remaining = target.map_or(u64::MAX, |t| t - sent);
        if remaining == 0 || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let g = pacer.grant(remaining - credit, deadline);
        if g == 0 {
            break; // the deadline passed while waiting
        }
        credit += g;
        while credit >= unit {
            let i = sampler.sample(&mut rng);
            send_one(spec, reporter, i, key, data)?;
            credit -= unit;
            sent += unit;
        }
        let now = Instant::now();
        if now.duration_since(last_progress) >= Duration::from_millis(100) {
            last_progress = now;
            progress(snapshot(reporter, &before, start, target, sent));
        }
    }
    reporter.flush()?;
    reporter.take_refused()?;
    if reporter.retransmittable() {
        reporter.linger(spec.linger, spec.linger * 20)?;
    } else {
        reporter.poll_nacks()?;
    }
    progress(snapshot(reporter, &before, start, target, sent));
    Ok(stats(
        ReportSink::stats(reporter),
        &before,
        start.elapsed(),
        None,
    ))
}

/// One key's report(s) sent through `reporter`; `key` and `data` are scratch buffers of the
/// spec's lengths.
fn send_one<R: ReportSink>(
    spec: &LoadSpec,
    reporter: &mut R,
    i: u64,
    key: &mut [u8],
    data: &mut [u8],
) -> Result<(), ReportError> {
    emit_one(spec, i, key, data, &mut |r| reporter.send(r)).map(|_| ())
}

/// Largest UDP payload in a 1500-byte Ethernet frame.
pub const MAX_UDP_PAYLOAD: usize = 1500 - 20 - 8;

/// The native datagrams a run of `spec` would send as `reporter_id` (its first `datagrams` of
/// them, at most `batch` reports each, sequence numbers from 0), built in memory: the frames a
/// raw sender (`dta report --raw`) replays. Same reports, keys and values as [`run`]; a
/// Postcarding path never straddles two datagrams. Sketch-Merge is not supported.
pub fn native_datagrams(
    spec: &LoadSpec,
    reporter_id: u32,
    priority: dta_wire::Priority,
    batch: u8,
    datagrams: usize,
) -> Result<Vec<Vec<u8>>, LoadError> {
    // The datagrams are built, not sent: the run's length is the caller's business.
    let mut check = spec.clone();
    check.count.get_or_insert(1);
    check.validate(Protocol::Native { reporter_id })?;
    if spec.primitive == Opcode::SketchMerge {
        return Err(ReportError::Unsupported("Sketch-Merge is sent whole").into());
    }
    let sampler = KeySampler::new(spec.keys)?;
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let unit = if spec.primitive == Opcode::Postcarding {
        spec.hops as usize
    } else {
        1
    };
    // Reports per datagram: `batch`, fewer if they would not fit a 1500-byte MTU frame, whole
    // paths for Postcarding.
    let report_len = native_report_len(spec);
    let fit = (MAX_UDP_PAYLOAD - dta_wire::native::HEADER_LEN) / report_len;
    let per = ((batch.max(1) as usize).min(fit) / unit).max(1) * unit;
    let mut key = [0u8; MAX_KEY_LEN];
    let key = &mut key[..spec.key_len as usize];
    let mut data = [0u8; MAX_DATA_LEN];
    let data = &mut data[..spec.data_len as usize];
    let mut out = Vec::with_capacity(datagrams);
    let mut buf = vec![0u8; 9000];
    for seq in 0..datagrams as u32 {
        let mut b =
            dta_wire::native::DatagramBuilder::new(&mut buf, priority, false, reporter_id, seq)
                .map_err(ReportError::Wire)?;
        let mut n = 0;
        while n < per {
            let i = sampler.sample(&mut rng);
            let mut push = |r: &dta_wire::Report<'_>| b.push(r).map_err(ReportError::Wire);
            n += emit_one(spec, i, key, data, &mut push)?;
        }
        let len = b.finish();
        out.push(buf[..len].to_vec());
    }
    Ok(out)
}

/// Bytes of one native report of `spec` (header and body; Postcarding: one postcard).
fn native_report_len(spec: &LoadSpec) -> usize {
    let (k, d) = (spec.key_len as usize, spec.data_len as usize);
    dta_wire::native::REPORT_HEADER_LEN
        + match spec.primitive {
            Opcode::KeyWrite => k + d,
            Opcode::KeyIncrement => k + 8,
            Opcode::Append => 4 + d,
            _ => k + 6,
        }
}

/// One key's report(s) handed to `push`; returns how many.
fn emit_one(
    spec: &LoadSpec,
    i: u64,
    key: &mut [u8],
    data: &mut [u8],
    push: &mut dyn FnMut(&dta_wire::Report<'_>) -> Result<(), ReportError>,
) -> Result<usize, ReportError> {
    use dta_wire::Report;
    let immediate = spec.immediate;
    match spec.primitive {
        Opcode::KeyWrite => {
            keys::key_bytes(i, key);
            keys::fill_data(key, data);
            push(&Report::KeyWrite {
                key,
                data,
                redundancy: spec.redundancy,
                immediate,
            })?;
            Ok(1)
        }
        Opcode::KeyIncrement => {
            keys::key_bytes(i, key);
            push(&Report::KeyIncrement {
                key,
                counter: keys::expected_counter(key),
                redundancy: spec.redundancy,
                immediate,
            })?;
            Ok(1)
        }
        Opcode::Append => {
            let mut k = [0u8; MAX_KEY_LEN];
            let k = &mut k[..(spec.key_len as usize).clamp(1, MAX_KEY_LEN)];
            keys::key_bytes(i, k);
            keys::fill_data(k, data);
            push(&Report::Append {
                list_id: keys::append_list(i, spec.first_list, spec.lists),
                data,
                immediate,
            })?;
            Ok(1)
        }
        Opcode::Postcarding => {
            keys::key_bytes(i, key);
            for hop in 0..spec.hops {
                push(&Report::Postcard {
                    key,
                    hop,
                    path_len: spec.hops,
                    value: keys::postcard_value(key, hop, spec.postcard_values),
                    immediate,
                })?;
            }
            Ok(spec.hops as usize)
        }
        Opcode::SketchMerge => Err(ReportError::Unsupported("Sketch-Merge is sent whole")),
    }
}

fn snapshot<R: ReportSink>(
    reporter: &R,
    before: &ReporterStats,
    start: Instant,
    target: Option<u64>,
    reports: u64,
) -> Progress {
    Progress {
        reports,
        datagrams: ReportSink::stats(reporter).datagrams - before.datagrams,
        elapsed: start.elapsed(),
        target,
    }
}

fn stats(
    now: ReporterStats,
    before: &ReporterStats,
    elapsed: Duration,
    sketch: Option<SketchOutcome>,
) -> LoadStats {
    LoadStats {
        reports: now.reports - before.reports,
        datagrams: now.datagrams - before.datagrams,
        bytes: now.bytes - before.bytes,
        retransmissions: now.retransmissions - before.retransmissions,
        nacks: now.nacks - before.nacks,
        send_errors: now.send_errors - before.send_errors,
        suppressed: now.suppressed - before.suppressed,
        nack_slowdowns: now.nack_slowdowns - before.nack_slowdowns,
        notices: now.notices - before.notices,
        bad_nacks: now.bad_nacks - before.bad_nacks,
        control_wrong_source: now.control_wrong_source - before.control_wrong_source,
        control_unauthenticated: now.control_unauthenticated - before.control_unauthenticated,
        control_bad_authenticator: now.control_bad_authenticator - before.control_bad_authenticator,
        control_replayed: now.control_replayed - before.control_replayed,
        control_unbound: now.control_unbound - before.control_unbound,
        control_stale_life: now.control_stale_life - before.control_stale_life,
        // The first hello is said when the reporter is made, before any run: all of them.
        hellos: now.hellos,
        elapsed,
        sketch,
    }
}

/// Sketch-Merge: build the Count-Min of `count` drawn keys, then send it ([DTA-draft §3.1]).
fn run_sketch(
    spec: &LoadSpec,
    reporter: &mut Reporter,
    progress: &dyn Fn(Progress),
) -> Result<LoadStats, LoadError> {
    let before = reporter.stats();
    let start = Instant::now();
    let cm = build_count_min(spec)?;
    let mut sender = SketchSender::new(&cm, spec.sketch_id, spec.epoch).immediate(spec.immediate);
    let outcome = sender.send_sketch(reporter, spec.linger)?;
    let s = stats(reporter.stats(), &before, start.elapsed(), Some(outcome));
    progress(Progress {
        reports: s.reports,
        datagrams: s.datagrams,
        elapsed: s.elapsed,
        target: spec.count,
    });
    Ok(s)
}

/// The Count-Min sketch a Sketch-Merge run sends: `sketch_rows × sketch_columns`, every one of
/// the `count` drawn keys (as [`key_indices`] yields them) added with increment 1. A test can
/// rebuild it to know what the merged sketch should hold.
pub fn build_count_min(spec: &LoadSpec) -> Result<CountMin, LoadError> {
    let mut cm = CountMin::new(spec.sketch_rows, spec.sketch_columns);
    let mut key = [0u8; MAX_KEY_LEN];
    let key = &mut key[..spec.key_len as usize];
    for i in key_indices(spec)?.take(spec.count.unwrap_or(0) as usize) {
        keys::key_bytes(i, key);
        cm.update(key, 1);
    }
    Ok(cm)
}

/// Many retransmittable reporters simulated from one process ([`run_many`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ManySpec {
    /// Reporters simulated, ids `first_id..first_id + reporters`.
    pub reporters: u32,
    /// The first reporter id.
    pub first_id: u32,
    /// Datagrams each reporter keeps for retransmission (its ring): at most this many of its
    /// datagrams are in flight (unconfirmed, resendable) at once.
    pub in_flight: u32,
    /// Datagrams each reporter sends (one report each, sequence numbers from 0).
    pub datagrams: u32,
    /// Priority of every datagram.
    pub priority: dta_wire::Priority,
    /// Local UDP port the NACKs arrive on (the translator sends them to the source address's
    /// [`dta_wire::NACK_PORT`]).
    pub nack_port: u16,
    /// After the last round, every reporter's newest datagram is resent this many times,
    /// `tail_probe_interval` apart, while NACKs are handled: a lost last datagram leaves no gap
    /// the translator could see.
    pub tail_probes: u32,
    /// Time between tail probes.
    pub tail_probe_interval: Duration,
}

/// Most reporters [`run_many`] simulates.
pub const MAX_MANY_REPORTERS: u32 = 1 << 20;
/// Most datagrams in flight per simulated reporter.
pub const MAX_IN_FLIGHT: u32 = 1024;
/// Most bytes of retransmission rings [`run_many`] allocates.
pub const MAX_MANY_RING_BYTES: usize = 4 << 30;

/// `many.reporters` native reporters sending from one UDP socket: round `s` sends datagram `s`
/// of every reporter in turn (one report each, keys drawn from `spec` in send order as
/// [`key_indices`] yields them, so `many.reporters * many.datagrams` draws in all), paced at
/// `spec.rate` reports per second. Each reporter keeps its last datagrams in a retransmission
/// ring of the reporter library (capacity `in_flight`) and resends the one a NACK names, and
/// every number of the NACK's bitmap; after the last round come the tail probes, then NACKs are
/// handled until `spec.linger` passes without one (at most 60 s). `retransmissions` counts the
/// resends and the tail probes. Key-Write, Key-Increment and Append.
pub fn run_many(
    spec: &LoadSpec,
    many: &ManySpec,
    destination: std::net::SocketAddr,
    progress: &dyn Fn(Progress),
) -> Result<LoadStats, LoadError> {
    use crate::reporter::RetransmitRing;
    use dta_wire::native::{DatagramBuilder, HEADER_LEN};
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

    let bad = |m: String| Err(LoadError::Spec(m));
    let mut check = spec.clone();
    check.count.get_or_insert(1);
    check.validate(Protocol::Native {
        reporter_id: many.first_id,
    })?;
    if !matches!(
        spec.primitive,
        Opcode::KeyWrite | Opcode::KeyIncrement | Opcode::Append
    ) {
        return bad("many reporters send Key-Write, Key-Increment or Append".into());
    }
    if !(1..=MAX_MANY_REPORTERS).contains(&many.reporters) {
        return bad(format!("reporters must be 1..={MAX_MANY_REPORTERS}"));
    }
    if !(1..=MAX_IN_FLIGHT).contains(&many.in_flight) {
        return bad(format!("in_flight must be 1..={MAX_IN_FLIGHT}"));
    }
    if many.datagrams == 0 {
        return bad("datagrams must be at least 1".into());
    }
    if many.tail_probes > crate::flow::MAX_TAIL_PROBES {
        return bad(format!(
            "tail_probes must be at most {}",
            crate::flow::MAX_TAIL_PROBES
        ));
    }
    let slot = HEADER_LEN + native_report_len(spec);
    // A ring never holds more than the reporter sends.
    let kept = many.in_flight.min(many.datagrams);
    let ring_bytes = many.reporters as usize * kept as usize * slot;
    if ring_bytes > MAX_MANY_RING_BYTES {
        return bad(format!(
            "{} reporters x {kept} kept x {slot} bytes = {ring_bytes} bytes of rings, more than {}",
            many.reporters, MAX_MANY_RING_BYTES
        ));
    }
    let any: IpAddr = if destination.is_ipv6() {
        Ipv6Addr::UNSPECIFIED.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    };
    let socket = UdpSocket::bind(SocketAddr::new(any, 0))?;
    socket.connect(destination)?;
    // The fleet's control socket: bound or refused naming who holds the port.
    let nacks = crate::control::bind(destination, many.nack_port)?;

    struct Fleet {
        socket: std::net::UdpSocket,
        nacks: std::net::UdpSocket,
        rings: Vec<RetransmitRing>,
        /// Next sequence number of each reporter.
        next: Vec<u32>,
        first_id: u32,
        /// The translator: NACKs from anywhere else are ignored (counted).
        translator: std::net::SocketAddr,
        stats: ReporterStats,
        scratch: Vec<u8>,
    }
    impl Fleet {
        fn send(&mut self, b: &[u8]) -> std::io::Result<bool> {
            match self.socket.send(b) {
                Ok(_) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    self.stats.send_errors += 1;
                    Ok(false)
                }
                Err(e) => Err(e),
            }
        }
        /// Resend datagram `seq` of reporter `r` if still kept.
        fn resend(&mut self, r: usize, seq: u32) -> std::io::Result<()> {
            let back = self.next[r].wrapping_sub(seq) as usize;
            if back == 0 || back > self.rings[r].filled() {
                self.stats.unrecoverable_nacks += 1;
                return Ok(());
            }
            // Sent from a copy: the ring and the socket are both fields of self.
            let d = self.rings[r].get(back);
            let n = d.len();
            self.scratch[..n].copy_from_slice(d);
            let sent = match self.socket.send(&self.scratch[..n]) {
                Ok(_) => true,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    self.stats.send_errors += 1;
                    false
                }
                Err(e) => return Err(e),
            };
            if sent {
                self.stats.retransmissions += 1;
            }
            Ok(())
        }
        /// Handle every NACK waiting; returns how many datagrams arrived.
        fn poll(&mut self) -> std::io::Result<usize> {
            let mut got = 0;
            let mut b = [0u8; 64];
            loop {
                let n = match self.nacks.recv_from(&mut b) {
                    // NACKs only from the translator (docs/security.md).
                    Ok((_, from)) if from != self.translator => {
                        self.stats.control_wrong_source += 1;
                        continue;
                    }
                    Ok((n, _)) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(got),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
                    Err(e) => return Err(e),
                };
                got += 1;
                // Signed by the translator, not checked here (run_many takes no key).
                let mut plain = [0u8; 64];
                let msg = if dta_wire::auth::is_sealed(&b[..n]) {
                    match dta_wire::auth::strip(&b[..n], &mut plain) {
                        Some(m) => &plain[..m],
                        None => &b[..0],
                    }
                } else {
                    &b[..n]
                };
                let Ok(nack) = dta_wire::native::NackRepr::parse(msg) else {
                    self.stats.bad_nacks += 1;
                    continue;
                };
                let r = nack.reporter_id.wrapping_sub(self.first_id) as usize;
                if r >= self.rings.len() || nack.sketch.is_some() {
                    self.stats.bad_nacks += 1;
                    continue;
                }
                self.stats.nacks += 1;
                for seq in nack.missing_seqs() {
                    self.resend(r, seq)?;
                }
            }
        }
    }

    let mut fleet = Fleet {
        socket,
        nacks,
        rings: (0..many.reporters)
            .map(|_| RetransmitRing::new(kept as usize, slot))
            .collect(),
        next: vec![0; many.reporters as usize],
        first_id: many.first_id,
        translator: destination,
        stats: ReporterStats::default(),
        scratch: vec![0; slot],
    };
    let sampler = KeySampler::new(spec.keys)?;
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let mut pacer = Pacer::new(spec.rate);
    let total = many.reporters as u64 * many.datagrams as u64;
    let mut key = [0u8; MAX_KEY_LEN];
    let key = &mut key[..spec.key_len as usize];
    let mut data = [0u8; MAX_DATA_LEN];
    let data = &mut data[..spec.data_len as usize];
    let mut buf = vec![0u8; slot];
    let start = Instant::now();
    let mut last_progress = start;
    let mut sent = 0u64;
    let mut credit = 0u64;
    let show = |fleet: &Fleet, sent: u64| Progress {
        reports: sent,
        datagrams: fleet.stats.datagrams,
        elapsed: start.elapsed(),
        target: Some(total),
    };
    for round in 0..many.datagrams {
        for r in 0..many.reporters as usize {
            if credit == 0 {
                credit = pacer.grant(total - sent, None);
            }
            credit -= 1;
            let id = many.first_id.wrapping_add(r as u32);
            let mut b = DatagramBuilder::new(&mut buf, many.priority, true, id, round)
                .map_err(ReportError::Wire)?;
            let i = sampler.sample(&mut rng);
            emit_one(spec, i, key, data, &mut |rep| {
                b.push(rep).map_err(ReportError::Wire)
            })?;
            let len = b.finish();
            fleet.send(&buf[..len])?;
            fleet.rings[r].push(&buf[..len]);
            fleet.next[r] = round.wrapping_add(1);
            fleet.stats.datagrams += 1;
            fleet.stats.reports += 1;
            fleet.stats.bytes += len as u64;
            sent += 1;
            if sent % NACK_POLL_EVERY as u64 == 0 {
                fleet.poll()?;
                let now = Instant::now();
                if now.duration_since(last_progress) >= Duration::from_millis(100) {
                    last_progress = now;
                    progress(show(&fleet, sent));
                }
            }
        }
    }
    // Tail probes, paced like the run, NACKs handled in between.
    for _ in 0..many.tail_probes {
        let until = Instant::now() + many.tail_probe_interval;
        while Instant::now() < until {
            if fleet.poll()? == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        for r in 0..many.reporters as usize {
            if credit == 0 {
                credit = pacer.grant(u64::MAX, None);
            }
            credit -= 1;
            let newest = fleet.next[r].wrapping_sub(1);
            fleet.resend(r, newest)?;
            if r % NACK_POLL_EVERY as usize == 0 {
                fleet.poll()?;
            }
        }
    }
    // Linger: NACKs until `linger` passes without one.
    let end = Instant::now() + Duration::from_secs(60);
    let mut quiet_since = Instant::now();
    while Instant::now() < end && quiet_since.elapsed() < spec.linger {
        if fleet.poll()? > 0 {
            quiet_since = Instant::now();
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    if let Some(e) = fleet.socket.take_error()? {
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            fleet.stats.send_errors += 1;
        }
    }
    progress(show(&fleet, sent));
    Ok(stats(
        fleet.stats,
        &ReporterStats::default(),
        start.elapsed(),
        None,
    ))
}
