//! The timers: partial Append batches and expired Postcarding paths written out, stalled
//! Sketch-Merge reporters NACKed, sequence gaps NACKed or given up, the sink's housekeeping;
//! and the final flush.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use dta_wire::native;

use super::dispatch::{write_batch, write_chunk, write_columns};
use super::{seq_nack, Translator};
use crate::reason::Reason;
use crate::sinks::Sinks;
use crate::stats::add;
use std::sync::atomic::Ordering::Relaxed;

impl<S: Sinks> Translator<S> {
    /// Run the timers: write partial Append batches and expired Postcarding paths, NACK stalled
    /// Sketch-Merge reporters and silent sequence spaces' gaps (giving up old gaps), and let the sink do its housekeeping (RDMA retransmission). Call
    /// it whenever the ingest loop is idle, and at least every few milliseconds.
    pub fn tick(&mut self, now: Instant) {
        self.enter_windows();
        self.drain_inbox(now);
        if self.sinks.poll().is_err() {
            self.stats.reject(Reason::SinkError);
        }
        self.adapt_and_reinject(now);
        if now.duration_since(self.last_claims_publish) >= std::time::Duration::from_secs(1) {
            self.last_claims_publish = now;
            if self.claims.limited() {
                let top = self.claims.top_demoted();
                if !top.is_empty() {
                    *self
                        .stats
                        .demoted_sources
                        .lock()
                        .unwrap_or_else(|e| e.into_inner()) = top;
                }
            }
        }
        if now.duration_since(self.last_append_flush) >= self.append_flush {
            self.last_append_flush = now;
            self.flush_appends();
        }
        if now.duration_since(self.last_postcard_expire) >= self.postcard_timeout / 2 {
            self.last_postcard_expire = now;
            self.expire_postcards(now, Some(self.postcard_timeout));
        }
        let mut stalled: [Option<(u32, SocketAddr, native::SketchNack)>; 16] = [None; 16];
        let mut n = 0;
        for r in &mut self.sketches {
            let sketch_id = r.sketch_id;
            r.agg
                .stalled(now, self.sketch_stall, |reporter, from, column, epoch| {
                    if n < stalled.len() {
                        stalled[n] = Some((
                            reporter,
                            from,
                            native::SketchNack {
                                sketch_id,
                                column,
                                epoch,
                            },
                        ));
                        n += 1;
                    }
                });
        }
        for (reporter, from, nack) in stalled.into_iter().flatten() {
            self.queue_native_nack(from, reporter, 0, Some(nack));
        }
        // Sequence gaps: NACK silent spaces' gaps, give up the old ones.
        let room = self.outbox.room();
        let (outbox, stats) = (&mut self.outbox, &*self.stats);
        self.tracker.tick(now, room, |space, n| {
            if let Some((buf, len)) = seq_nack(&space, n) {
                outbox.nack(space.ip, buf, len, stats);
            }
        });
    }

    /// The meter's side of the timer: count the sink's congestion signals, adapt the budget
    /// (AIMD, [`crate::meter::Meter::adapt`]) and re-inject the spill while the level allows.
    fn adapt_and_reinject(&mut self, now: Instant) {
        let c = self.sinks.congestion();
        let kinds = [c.rnr_naks, c.sequence_naks, c.cnps, c.window_full];
        for (counter, n) in self.stats.congestion_signals.iter().zip(kinds) {
            add(counter, n);
        }
        if !self.meter.metered() {
            return;
        }
        self.sinks.settle(&self.meter);
        let budget = self.meter.adapt(kinds.iter().sum(), now);
        self.stats.budget.store(budget, Relaxed);
        self.reinject(now);
    }

    fn flush_appends(&mut self) {
        let stats = &*self.stats;
        if let Some(r) = self.append.as_mut() {
            let (layout, store, sinks) = (&r.layout, r.store, &mut self.sinks);
            if let Err(e) = r
                .batcher
                .flush_partial(|b| write_batch(layout, store, sinks, stats, b))
            {
                stats.reject(Reason::from(&e));
            }
        }
    }

    fn expire_postcards(&mut self, now: Instant, timeout: Option<Duration>) {
        let stats = &*self.stats;
        let rules = &mut self.rules;
        for r in &mut self.postcarding {
            let (layout, store, sinks) = (&r.layout, r.store, &mut self.sinks);
            r.cache.expire(now, timeout, |chunk, why| {
                let Some(chunk) = rules.path(chunk) else {
                    return;
                };
                if let Err(e) = write_chunk(layout, store, sinks, stats, &chunk, why) {
                    stats.reject(Reason::from(&e));
                }
            });
        }
        self.finish_reports(None, now);
    }

    /// Write out everything the translator holds: partial Append batches, partial paths, complete
    /// sketch columns. Called on shutdown and by tests.
    pub fn flush_all(&mut self) {
        self.drain_spill();
        self.drain_inbox(Instant::now());
        self.flush_appends();
        self.expire_postcards(Instant::now(), None);
        // Entries the rules appended for the paths just written.
        self.flush_appends();
        let stats = &*self.stats;
        for r in &mut self.sketches {
            let (layout, store, sinks) = (&r.layout, r.store, &mut self.sinks);
            if let Err(e) = r
                .agg
                .flush(|ready| write_columns(layout, store, sinks, stats, false, ready))
            {
                stats.reject(Reason::from(&e));
            }
        }
        if self.sinks.flush().is_err() {
            stats.reject(Reason::SinkError);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;
    use std::time::{Duration, Instant};

    use dta_wire::Report;

    use super::super::tests::{src, translator_with, AP};
    use crate::config::TranslatorConfig;

    fn entry(e: u8) -> Report<'static> {
        static E: [[u8; 4]; 4] = [[1; 4], [2; 4], [3; 4], [4; 4]];
        Report::Append {
            list_id: 0,
            data: &E[e as usize],
            immediate: false,
        }
    }

    /// A partial Append batch waits for the flush timer (or the final flush), then is written.
    #[test]
    fn partial_batches_are_written_by_tick_after_the_flush_interval_and_by_flush_all() {
        let cfg = TranslatorConfig {
            append_flush_ms: 50,
            ..TranslatorConfig::default()
        };
        let mut t = translator_with(&cfg);
        let t0 = Instant::now();
        t.apply(&entry(0), 1, src(), t0);
        t.tick(t0 + Duration::from_millis(10));
        assert!(t.sinks().areas[AP].iter().all(|&b| b == 0), "written early");
        t.tick(t0 + Duration::from_millis(60));
        assert_eq!(t.stats().append_partial_batches.load(Relaxed), 1);
        assert!(t.sinks().areas[AP].windows(4).any(|w| w == [1; 4]));

        t.apply(&entry(1), 1, src(), t0);
        t.flush_all();
        assert_eq!(t.stats().append_partial_batches.load(Relaxed), 2);
        assert!(t.sinks().areas[AP].windows(4).any(|w| w == [2; 4]));
    }
}
