//! Per-primitive dispatch of one report: Key-Write and Key-Increment through the staging (what
//! it cannot take is classified here), Postcarding through the path cache, Append through the
//! per-list batches, Sketch-Merge through the column aggregator ([DTA §4]); each rejection
//! counted under its [`Reason`].

use std::net::SocketAddr;
use std::time::Instant;

use dta_store::{AppendLayout, PostcardingLayout, SketchLayout};
use dta_wire::{native, Opcode, Report};

use super::routes::{KeyIncrementRoute, KeyWriteRoute};
use super::staging::{RouteCache, Stage};
use super::{allowed, Translator};
use crate::append::Batch;
use crate::meter::Metered;
use crate::postcard::{Chunk, Eviction, MAX_KEY};
use crate::reason::Reason;
use crate::sinks::{Flagged, Sinks, StoreSink};
use crate::sketch::{ColumnVerdict, ReadyColumns};
use crate::stats::{add, Stats};

impl<S: Sinks> Translator<S> {
    /// Translate one report.
    pub fn apply(&mut self, report: &Report<'_>, reporter: u32, src: SocketAddr, now: Instant) {
        if matches!(
            report,
            Report::KeyWrite { .. } | Report::KeyIncrement { .. }
        ) {
            let mut stage = Stage::new(src.ip());
            if self.stage(&mut stage, &mut RouteCache::default(), report) {
                self.write_stage(&mut stage);
                if report.immediate() {
                    self.rules.flag(report);
                    self.announce_flagged();
                }
                return;
            }
        }
        if self.forward(report, reporter, src, now) {
            return;
        }
        let stats = &*self.stats;
        stats.report(report.opcode());
        if report.immediate() {
            add(&stats.immediates, 1);
        }
        let result: Result<(), Reason> = match *report {
            // Staging above applied every Key-Write and Key-Increment a store can take; what
            // is left is rejected, for the reason its store's layout would give.
            Report::KeyWrite {
                key,
                data,
                redundancy,
                ..
            } => {
                let shape = |r: &&KeyWriteRoute| {
                    r.layout.key_len() == key.len() && r.layout.data_len() == data.len()
                };
                let route = self.key_write.iter().find(shape);
                Err(unstaged(route.map(|r| r.layout.check(key, redundancy))))
            }
            Report::KeyIncrement {
                key, redundancy, ..
            } => {
                let shape = |r: &&KeyIncrementRoute| r.layout.key_len() == key.len();
                let route = self.key_increment.iter().find(shape);
                Err(unstaged(route.map(|r| r.layout.check(key, redundancy))))
            }
            Report::Append {
                list_id,
                data,
                immediate,
            } => match self.append.as_mut() {
                None => Err(Reason::NoStore),
                Some(r) if !allowed(&self.store_allow, r.store, src.ip()) => {
                    Err(Reason::SourceNotAllowed)
                }
                Some(r) if list_id >= r.layout.lists() => Err(Reason::BadListId),
                Some(r) if data.len() != r.layout.entry_len() => Err(Reason::BadDataLen),
                Some(r) if r.batcher.in_place() => {
                    // Reserve-then-publish: the entry straight into its slot, the head once
                    // the batch is complete.
                    let index = r.batcher.reserve(list_id);
                    let placed = match self.sinks.region_mem(r.store) {
                        Some(mem) => r.layout.write_entry(list_id, index, data, &mut mem.sink()),
                        None => Err(dta_store::SinkError::RegionLost.into()),
                    };
                    match placed {
                        Ok(()) => match r.batcher.placed(list_id, immediate) {
                            Some(b) => write_batch(&r.layout, r.store, &mut self.sinks, stats, b),
                            None => Ok(()),
                        },
                        Err(e) => Err(e),
                    }
                    .map_err(|e| Reason::from(&e))
                }
                Some(r) => {
                    let (layout, store, sinks) = (&r.layout, r.store, &mut self.sinks);
                    r.batcher
                        .push(list_id, data, immediate, |b| {
                            write_batch(layout, store, sinks, stats, b)
                        })
                        .map_err(|e| Reason::from(&e))
                }
            },
            Report::Postcard {
                key,
                hop,
                path_len,
                value,
                immediate,
            } => match self
                .postcarding
                .iter_mut()
                .find(|r| r.layout.key_len() == key.len())
            {
                None => Err(Reason::NoStore),
                Some(r) if !allowed(&self.store_allow, r.store, src.ip()) => {
                    Err(Reason::SourceNotAllowed)
                }
                Some(r) if hop as usize >= r.layout.hops() => Err(Reason::BadHop),
                Some(_) if key.len() > MAX_KEY => Err(Reason::BadKeyLen),
                Some(r) => {
                    let (layout, store, sinks) = (&r.layout, r.store, &mut self.sinks);
                    let rules = &mut self.rules;
                    let mut err = Ok(());
                    r.cache
                        .insert(key, hop, path_len, value, immediate, now, |chunk, why| {
                            let Some(chunk) = rules.path(chunk) else {
                                return;
                            };
                            let res = write_chunk(layout, store, sinks, stats, &chunk, why);
                            if err.is_ok() {
                                err = res;
                            }
                        });
                    err.map_err(|e| Reason::from(&e))
                }
            },
            Report::SketchColumn {
                sketch_id,
                column,
                epoch,
                data,
                immediate,
            } => match self.sketches.iter_mut().find(|r| r.sketch_id == sketch_id) {
                None => Err(Reason::NoStore),
                Some(r) if !allowed(&self.store_allow, r.store, src.ip()) => {
                    Err(Reason::SourceNotAllowed)
                }
                Some(r) if column as u32 >= r.agg.columns() => Err(Reason::BadColumn),
                Some(r) if data.len() != r.agg.merge_kind().wire_len() => Err(Reason::BadDataLen),
                Some(r) => {
                    let (layout, store, sinks) = (&r.layout, r.store, &mut self.sinks);
                    let verdict = r
                        .agg
                        .receive(reporter, src, epoch, column, data, now, |ready| {
                            write_columns(layout, store, sinks, stats, immediate, ready)
                        });
                    match verdict {
                        Ok(ColumnVerdict::Merged) => Ok(()),
                        Ok(ColumnVerdict::Duplicate) => {
                            add(&stats.duplicates, 1);
                            Ok(())
                        }
                        Ok(ColumnVerdict::Stale) => Err(Reason::StaleEpoch),
                        Ok(ColumnVerdict::UnknownReporter) => Err(Reason::UnknownReporter),
                        Ok(ColumnVerdict::OutOfOrder { column, epoch }) => {
                            self.queue_native_nack(
                                src,
                                reporter,
                                0,
                                Some(native::SketchNack {
                                    sketch_id,
                                    column,
                                    epoch,
                                }),
                            );
                            Err(Reason::OutOfOrder)
                        }
                        Err(e) => Err(Reason::from(&e)),
                    }
                }
            },
        };
        if let Err(r) = result {
            self.stats.reject(r);
        }
    }
}

/// Why a Key-Write or Key-Increment report was not staged: no store of its shape (`None`), or
/// the reason its store's layout `check` gives (staging refuses exactly what `check` refuses,
/// so `Ok` does not reach here; it counts as the redundancy staging refused).
fn unstaged(check: Option<Result<(), dta_store::ApplyError>>) -> Reason {
    match check {
        None => Reason::NoStore,
        Some(Err(e)) => Reason::from(&e),
        Some(Ok(())) => Reason::BadRedundancy,
    }
}

/// Write out one Append batch: its entries then its head, or, in place (the entries already
/// in their slots), the head alone, counted (stats and meter) as the same writes as the
/// buffered batch.
pub(super) fn write_batch<S: Sinks>(
    layout: &AppendLayout,
    store: usize,
    sinks: &mut Metered<S>,
    stats: &Stats,
    b: Batch<'_>,
) -> Result<(), dta_store::ApplyError> {
    if b.full {
        add(&stats.append_batches, 1);
    } else {
        add(&stats.append_partial_batches, 1);
    }
    if b.entries.is_empty() && b.count > 0 {
        let ops = layout.batch_writes(b.first_index, b.count);
        add(&stats.writes, ops);
        add(&stats.write_bytes, b.count * layout.entry_len() as u64 + 8);
        sinks.issued(ops);
        match sinks.region_mem(store) {
            Some(mem) => layout.publish(b.list, b.first_index + b.count, &mut mem.sink())?,
            None => return Err(dta_store::SinkError::RegionLost.into()),
        }
    } else {
        let mut sink = StoreSink {
            sinks,
            store,
            immediate: b.immediate,
            stats,
        };
        layout.write_entries(b.list, b.first_index, b.entries, &mut sink)?;
    }
    // Announced once the batch is published: a subscriber woken by it reads the entries.
    if b.flagged > 0 {
        sinks.announce(
            store,
            &Flagged {
                primitive: Opcode::Append,
                key: &[],
                list: b.list as u64,
                reports: b.flagged,
            },
        );
    }
    Ok(())
}

pub(super) fn write_chunk<S: Sinks>(
    layout: &PostcardingLayout,
    store: usize,
    sinks: &mut S,
    stats: &Stats,
    chunk: &Chunk,
    why: Eviction,
) -> Result<(), dta_store::ApplyError> {
    let counter = match why {
        Eviction::Complete => &stats.postcard_chunks_complete,
        Eviction::Collision => &stats.postcard_chunks_collision,
        Eviction::Timeout | Eviction::Flush => &stats.postcard_chunks_timeout,
    };
    add(counter, 1);
    let mut sink = StoreSink {
        sinks,
        store,
        immediate: chunk.immediate,
        stats,
    };
    layout.apply_chunk(chunk.key(), &chunk.values[..layout.hops()], &mut sink)?;
    if chunk.immediate {
        sinks.announce(
            store,
            &Flagged {
                primitive: Opcode::Postcarding,
                key: chunk.key(),
                list: 0,
                reports: (chunk.flagged as u32).max(1),
            },
        );
    }
    Ok(())
}

pub(super) fn write_columns<S: Sinks>(
    layout: &SketchLayout,
    store: usize,
    sinks: &mut S,
    stats: &Stats,
    immediate: bool,
    ready: ReadyColumns<'_>,
) -> Result<(), dta_store::ApplyError> {
    add(&stats.sketch_columns_written, ready.count as u64);
    let mut sink = StoreSink {
        sinks,
        store,
        immediate,
        stats,
    };
    layout.write_columns(
        ready.first_column,
        ready.epoch,
        ready.reporters,
        ready.values,
        &mut sink,
    )?;
    if immediate {
        sinks.announce(
            store,
            &Flagged {
                primitive: Opcode::SketchMerge,
                key: &[],
                list: ready.first_column as u64,
                reports: 1,
            },
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use dta_wire::Report;

    use super::super::tests::{src, translator};
    use crate::reason::Reason;

    /// Each report no store can take is rejected under its own reason.
    #[test]
    fn rejections_by_reason() {
        let mut t = translator();
        let now = Instant::now();
        let cases: [(Report<'_>, Reason); 9] = [
            (
                Report::KeyWrite {
                    key: &[1; 5],
                    data: &[0; 4],
                    redundancy: 1,
                    immediate: false,
                },
                Reason::NoStore,
            ),
            (
                Report::KeyWrite {
                    key: &[1; 4],
                    data: &[0; 4],
                    redundancy: 9,
                    immediate: false,
                },
                Reason::BadRedundancy,
            ),
            (
                Report::KeyIncrement {
                    key: &[1; 4],
                    counter: 1,
                    redundancy: 3,
                    immediate: false,
                },
                Reason::RedundancyMismatch,
            ),
            (
                Report::KeyIncrement {
                    key: &[1; 3],
                    counter: 1,
                    redundancy: 1,
                    immediate: false,
                },
                Reason::NoStore,
            ),
            (
                Report::Append {
                    list_id: 2,
                    data: &[0; 4],
                    immediate: false,
                },
                Reason::BadListId,
            ),
            (
                Report::Append {
                    list_id: 0,
                    data: &[0; 8],
                    immediate: false,
                },
                Reason::BadDataLen,
            ),
            (
                Report::Postcard {
                    key: &[1; 4],
                    hop: 2,
                    path_len: 2,
                    value: 1,
                    immediate: false,
                },
                Reason::BadHop,
            ),
            (
                Report::SketchColumn {
                    sketch_id: 7,
                    column: 4,
                    epoch: 0,
                    data: &[0; 4],
                    immediate: false,
                },
                Reason::BadColumn,
            ),
            (
                Report::SketchColumn {
                    sketch_id: 8,
                    column: 0,
                    epoch: 0,
                    data: &[0; 4],
                    immediate: false,
                },
                Reason::NoStore,
            ),
        ];
        for (r, why) in cases {
            let before = t.stats().rejected_by(why);
            t.apply(&r, 1, src(), now);
            assert_eq!(t.stats().rejected_by(why), before + 1, "{r:?}");
        }
        assert_eq!(t.stats().total_rejected(), 9);
        assert!(t.sinks().areas.iter().all(|a| a.iter().all(|&b| b == 0)));
    }

    #[test]
    fn sketch_columns_from_an_unknown_reporter_are_rejected() {
        let mut t = translator();
        let col = |c| Report::SketchColumn {
            sketch_id: 7,
            column: c,
            epoch: 0,
            data: &[0, 0, 0, 1],
            immediate: false,
        };
        t.apply(&col(0), 1, src(), Instant::now());
        t.apply(&col(0), 2, src(), Instant::now());
        assert_eq!(t.stats().rejected_by(Reason::UnknownReporter), 1);
        assert_eq!(t.stats().total_rejected(), 1);
    }
}
