//! Routes from a report to its store, built once from the stores' headers: per primitive, the
//! store's layout and the translator-side state the primitive needs (the Postcarding cache, the
//! Append batcher, the Sketch-Merge aggregator).

use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_store::{
    AppendLayout, KeyIncrementLayout, KeyWriteLayout, PostcardingLayout, SketchKind, SketchLayout,
    StoreSpec,
};

use super::{StoreInfo, Translator};
use crate::append::AppendBatcher;
use crate::config::TranslatorConfig;
use crate::meter::{Meter, Metered};
use crate::overload::NoticeLimiter;
use crate::postcard::{PostcardCache, MAX_HOPS};
use crate::sequence::{BadEntries, Tracker};
use crate::sinks::Sinks;
use crate::sketch::{Merge, SketchAggregator};
use crate::spill::Spill;
use crate::stats::Stats;
use dta_wire::MAX_DATAGRAM;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("store layout: {0}")]
    Layout(String),
    #[error("two Append stores; one Append store holds all lists")]
    TwoAppendStores,
    #[error("two Sketch-Merge stores with sketch id {0}")]
    DuplicateSketch(u16),
    #[error("no store named {0:?}")]
    UnknownStore(String),
    #[error("Postcarding store with B = {0} hops: the translator supports 1..=16")]
    TooManyHops(usize),
    #[error(transparent)]
    TrackerEntries(#[from] BadEntries),
    /// A `[translator]` setting out of its range ([`TranslatorConfig::validate`]).
    #[error("{0}")]
    Config(String),
    /// A translator rule that does not compile against the stores ([`crate::rules`]).
    #[error("{0}")]
    Rules(String),
    /// A Key-Increment store with windows behind a sink that does not map it: the translator
    /// zeroes a window's table when it enters it, which only shared memory lets it do.
    #[error(
        "store {0:?} keeps time windows, which this translator cannot write (it enters a window \
         by zeroing its table in shared memory): run the shared-memory translator, or remove \
         windows from the store"
    )]
    WindowsUnmapped(String),
}

/// The shape a translator routes a report by: the first store of the report's primitive with
/// this shape takes it ([`Translator::new`] keeps the stores' order). Append has one store,
/// Sketch-Merge routes by sketch id (both refused twice at build), so neither can be shadowed.
fn route_shape(spec: &StoreSpec) -> Option<(&'static str, String)> {
    match spec {
        StoreSpec::KeyWrite(s) => Some((
            "key-write",
            format!("{}-byte keys and {}-byte data", s.key_len, s.data_len),
        )),
        StoreSpec::KeyIncrement(s) => Some(("key-increment", format!("{}-byte keys", s.key_len))),
        StoreSpec::Postcarding(s) => Some(("postcarding", format!("{}-byte keys", s.key_len))),
        StoreSpec::Append(_) | StoreSpec::SketchMerge(_) => None,
    }
}

/// The stores no report can ever reach, each with why: a store whose reports have the shape of
/// an earlier store of the same primitive (reports are routed to the first), unless a rule
/// writes into it (`action = "write"`, `target`). `stores` in configuration order.
pub fn unreachable_stores(
    stores: &[(&str, &StoreSpec)],
    rules: &[crate::rules::RuleConfig],
) -> Vec<String> {
    let mut out = vec![];
    for (i, (name, spec)) in stores.iter().enumerate() {
        let Some(shape) = route_shape(spec) else {
            continue;
        };
        let Some((first, _)) = stores[..i]
            .iter()
            .find(|(_, s)| route_shape(s).as_ref() == Some(&shape))
        else {
            continue;
        };
        if rules.iter().any(|r| r.target.as_deref() == Some(*name)) {
            continue;
        }
        let (primitive, what) = shape;
        out.push(format!(
            "store {name:?} can never receive a report: {primitive} reports with {what} are \
             routed to store {first:?}, the first store of that shape (the translator routes by \
             primitive and shape). Give one of the two another key length so that reporters \
             address each, or remove one"
        ));
    }
    out
}

pub(super) struct KeyWriteRoute {
    pub(super) store: usize,
    pub(super) layout: KeyWriteLayout,
}
pub(super) struct KeyIncrementRoute {
    pub(super) store: usize,
    pub(super) layout: KeyIncrementLayout,
}
pub(super) struct PostcardRoute {
    pub(super) store: usize,
    pub(super) layout: PostcardingLayout,
    pub(super) cache: PostcardCache,
}
pub(super) struct AppendRoute {
    pub(super) store: usize,
    pub(super) layout: AppendLayout,
    pub(super) batcher: AppendBatcher,
}
pub(super) struct SketchRoute {
    pub(super) store: usize,
    pub(super) sketch_id: u16,
    pub(super) layout: SketchLayout,
    pub(super) agg: SketchAggregator,
}

impl<S: Sinks> Translator<S> {
    /// Build a translator for `stores` (indexed as `sinks` indexes them).
    pub fn new(
        cfg: &TranslatorConfig,
        stores: &[StoreInfo],
        sinks: S,
        stats: Arc<Stats>,
    ) -> Result<Self, BuildError> {
        let layout_err = |e: dta_store::StoreError| BuildError::Layout(e.to_string());
        cfg.validate().map_err(BuildError::Config)?;
        let tracker = Tracker::new(
            cfg.tracker_entries,
            Duration::from_millis(cfg.nack_interval_ms),
            Duration::from_millis(cfg.resync_after_ms),
            stats.clone(),
        )?;
        let fc = &cfg.flow_control;
        let threads = cfg.threads.max(1) as u64;
        stats
            .budget
            .store(fc.write_budget, std::sync::atomic::Ordering::Relaxed);
        let mut t = Translator {
            sinks: Metered::new(sinks),
            meter: Arc::new(Meter::new(fc)),
            spill: Spill::new(
                if fc.metered() {
                    fc.spill_memory / threads
                } else {
                    0
                },
                fc.spill_file.as_deref(),
                fc.spill_file_bytes / threads,
            ),
            reinject_buf: vec![0u8; MAX_DATAGRAM].into_boxed_slice(),
            notice_limiter: NoticeLimiter::new(fc.notice_interval_ms),
            claims: crate::claims::Claims::new(
                fc.high_per_source,
                fc.medium_per_source,
                threads as usize,
            ),
            last_claims_publish: Instant::now(),
            notice_hold_ms: fc.notice_hold_ms.min(u32::MAX as u64) as u32,
            threads: threads as usize,
            stats,
            format: cfg.prototype_header.into(),
            postcard_timeout: Duration::from_millis(cfg.postcard_timeout_ms),
            append_flush: Duration::from_millis(cfg.append_flush_ms),
            recv_gather: Duration::from_micros(cfg.recv_gather_us),
            sketch_stall: Duration::from_millis(cfg.sketch_stall_ms),
            key_write: vec![],
            key_increment: vec![],
            postcarding: vec![],
            append: None,
            sketches: vec![],
            tracker,
            outbox: super::Outbox::new(cfg.nack_port, cfg.nack_budget),
            last_append_flush: Instant::now(),
            last_postcard_expire: Instant::now(),
            shard: None,
            allow: cfg.allow.clone(),
            store_allow: vec![None; stores.len()],
            store_names: stores.iter().map(|s| s.header.name.clone()).collect(),
            rules: super::rules_hook::RuleHook::new(crate::rules::RuleEngine::new(
                crate::rules::Rules::new(
                    crate::rules::RuleSet::compile(
                        &cfg.rules,
                        &stores
                            .iter()
                            .map(|s| (s.header.name.as_str(), &s.header.spec))
                            .collect::<Vec<_>>(),
                        0,
                    )
                    .map_err(BuildError::Rules)?,
                ),
                cfg.rule_state_entries,
            )),
        };
        for (store, info) in stores.iter().enumerate() {
            let h = &info.header;
            match &h.spec {
                StoreSpec::KeyWrite(_) => t.key_write.push(KeyWriteRoute {
                    store,
                    layout: KeyWriteLayout::new(h).map_err(layout_err)?,
                }),
                StoreSpec::KeyIncrement(_) => t.key_increment.push(KeyIncrementRoute {
                    store,
                    layout: KeyIncrementLayout::new(h).map_err(layout_err)?,
                }),
                StoreSpec::Postcarding(_) => {
                    let layout = PostcardingLayout::new(h).map_err(layout_err)?;
                    if layout.hops() > MAX_HOPS {
                        return Err(BuildError::TooManyHops(layout.hops()));
                    }
                    let cache = PostcardCache::new(cfg.postcard_cache_entries, layout.hops() as u8);
                    t.postcarding.push(PostcardRoute {
                        store,
                        layout,
                        cache,
                    });
                }
                StoreSpec::Append(_) => {
                    if t.append.is_some() {
                        return Err(BuildError::TwoAppendStores);
                    }
                    let layout = AppendLayout::new(h).map_err(layout_err)?;
                    let mut heads = info.append_heads.clone();
                    heads.resize(layout.lists() as usize, 0);
                    // Entries in place when the sink maps the store ([`crate::append`]).
                    let in_place = t.sinks.region_mem(store).is_some();
                    let batcher =
                        AppendBatcher::new(layout.entry_len(), layout.batch(), heads, in_place);
                    t.append = Some(AppendRoute {
                        store,
                        layout,
                        batcher,
                    });
                }
                StoreSpec::SketchMerge(spec) => {
                    if t.sketches.iter().any(|s| s.sketch_id == spec.sketch_id) {
                        return Err(BuildError::DuplicateSketch(spec.sketch_id));
                    }
                    let layout = SketchLayout::new(h).map_err(layout_err)?;
                    let merge = match spec.kind {
                        SketchKind::CountMin { rows, .. } => Merge::Sum {
                            rows: rows as usize,
                        },
                        SketchKind::HyperLogLog {
                            registers_per_column,
                            ..
                        } => Merge::Max {
                            width: registers_per_column as usize,
                        },
                    };
                    let agg = SketchAggregator::new(
                        merge,
                        spec.sync,
                        layout.columns(),
                        spec.reporters,
                        cfg.sketch_batch_columns,
                    );
                    t.sketches.push(SketchRoute {
                        store,
                        sketch_id: spec.sketch_id,
                        layout,
                        agg,
                    });
                }
            }
        }
        for r in &t.key_increment {
            if r.layout.windows().is_some() && t.sinks.region_mem(r.store).is_none() {
                return Err(BuildError::WindowsUnmapped(t.store_names[r.store].clone()));
            }
        }
        t.enter_windows();
        Ok(t)
    }

    /// Whether a Key-Increment store takes keys of `key_len` bytes.
    pub fn has_key_increment(&self, key_len: usize) -> bool {
        self.key_increment
            .iter()
            .any(|r| r.layout.key_len() == key_len)
    }

    /// The lists of the Append store, if there is one.
    pub fn append_lists(&self) -> Option<u32> {
        self.append.as_ref().map(|r| r.layout.lists())
    }

    /// Move every windowed Key-Increment store to the window of the wall clock (zeroing its
    /// table if this translator enters it first; dta_store::key_increment "Windows"). Called
    /// when built and at every tick: a window starts within a tick of its time.
    pub fn enter_windows(&mut self) {
        let mut now = None;
        for r in &mut self.key_increment {
            if r.layout.windows().is_none() {
                continue;
            }
            let now_ms = *now.get_or_insert_with(dta_store::key_increment::unix_ms);
            let entered = match self.sinks.region_mem(r.store) {
                Some(mem) => r.layout.enter_window(mem, now_ms).is_ok(),
                None => false,
            };
            if !entered {
                self.stats.reject(crate::reason::Reason::SinkError);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use dta_store::{AppendSpec, Header, StoreSpec};

    use super::super::tests::{infos, translator, Mem, AP, KI, KW, PC, SK};
    use super::*;

    fn build(infos: &[StoreInfo]) -> Result<Translator<Mem>, BuildError> {
        let areas = infos.iter().map(|_| vec![]).collect();
        Translator::new(
            &TranslatorConfig::default(),
            infos,
            Mem {
                areas,
                fail: false,
                tally: vec![],
                adds: vec![],
                signals: Default::default(),
            },
            Arc::new(Stats::default()),
        )
    }

    #[test]
    fn one_route_per_store_indexed_as_the_sinks() {
        let t = translator();
        assert_eq!(t.key_write.len(), 1);
        assert_eq!(t.key_write[0].store, KW);
        assert_eq!(t.key_increment[0].store, KI);
        assert_eq!(t.postcarding[0].store, PC);
        assert_eq!(t.append.as_ref().unwrap().store, AP);
        assert_eq!(t.sketches[0].store, SK);
        assert_eq!(t.sketches[0].sketch_id, 7);
        assert_eq!(t.store_names, ["kw", "ki", "pc", "ap", "sk"]);
    }

    #[test]
    fn a_store_shadowed_by_an_earlier_one_of_its_shape_is_unreachable() {
        let infos = infos();
        let specs: Vec<(&str, &StoreSpec)> = infos
            .iter()
            .map(|i| (i.header.name.as_str(), &i.header.spec))
            .collect();
        assert!(unreachable_stores(&specs, &[]).is_empty());
        // A second Key-Increment store of the same key length (a windowed one beside a
        // cumulative one): never reached; another key length: reached.
        let mut more = specs.clone();
        let ki = specs[KI].1;
        more.push(("ki_windows", ki));
        let why = unreachable_stores(&more, &[]);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(
            why[0].contains("\"ki_windows\"") && why[0].contains("\"ki\""),
            "{}",
            why[0]
        );
        // Key-Write: the same key but other data is another shape; the same both is not,
        // unless a rule writes into it.
        let kw = specs[KW].1.clone();
        let StoreSpec::KeyWrite(mut other) = kw.clone() else {
            unreachable!()
        };
        other.data_len += 4;
        let other = StoreSpec::KeyWrite(other);
        let mut kws = specs.clone();
        kws.push(("kw_wide", &other));
        kws.push(("kw_twin", &kw));
        let why = unreachable_stores(&kws, &[]);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].contains("\"kw_twin\""), "{}", why[0]);
        let rule: crate::rules::RuleConfig = toml::from_str(
            "name = 'copy'\nprimitive = 'key-write'\naction = 'write'\ntarget = 'kw_twin'",
        )
        .unwrap();
        assert!(unreachable_stores(&kws, &[rule]).is_empty());
    }

    #[test]
    fn ambiguous_stores_are_refused() {
        let mut two_append = infos();
        two_append.push(StoreInfo {
            header: Header::new(
                "ap2",
                &StoreSpec::Append(AppendSpec {
                    lists: 1,
                    capacity: 8,
                    entry_len: 4,
                    batch: 1,
                    record: Default::default(),
                }),
            )
            .unwrap(),
            append_heads: vec![],
        });
        assert!(matches!(
            build(&two_append),
            Err(BuildError::TwoAppendStores)
        ));
        let mut two_sketch = infos();
        let mut h = two_sketch[SK].header.clone();
        h.name = "sk2".into();
        two_sketch.push(StoreInfo {
            header: h,
            append_heads: vec![],
        });
        assert!(matches!(
            build(&two_sketch),
            Err(BuildError::DuplicateSketch(7))
        ));
        let mut t = build(&infos()).unwrap();
        assert!(matches!(
            t.set_store_allow("none", dta_wire::prefix::AllowList::any()),
            Err(BuildError::UnknownStore(_))
        ));
    }

    /// A receive gather past its bound is refused with a message naming the setting; the bound
    /// itself is taken.
    #[test]
    fn recv_gather_is_bounded() {
        let mem = || Mem {
            areas: vec![],
            fail: false,
            tally: vec![],
            adds: vec![],
            signals: Default::default(),
        };
        let with = |us| {
            Translator::new(
                &TranslatorConfig {
                    recv_gather_us: us,
                    ..Default::default()
                },
                &[],
                mem(),
                Arc::new(Stats::default()),
            )
        };
        let max = crate::config::MAX_RECV_GATHER_US;
        assert_eq!(
            with(max).unwrap().recv_gather(),
            std::time::Duration::from_micros(max)
        );
        let e = with(max + 1).err().unwrap();
        assert!(matches!(e, BuildError::Config(_)));
        assert!(e.to_string().contains("translator.recv_gather_us"), "{e}");
    }
}
