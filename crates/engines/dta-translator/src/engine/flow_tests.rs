//! Flow control through the translator: admission by priority, the spill and its re-injection,
//! congestion notices, dynamic redundancy, the adaptive budget, the drain on stop. Time is the
//! `now` the tests pass (the meter's clock starts at its epoch), so nothing here is timed.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use dta_wire::{native, Priority, Report};

use super::tests::{datagram_at, src, translator_with, Mem};
use super::Translator;
use crate::config::{FlowControlConfig, TranslatorConfig};

/// Operations one Key-Increment report costs: N FETCH_ADDs plus the two live counters.
const KI_OPS: u64 = dta_store::DEFAULT_REDUNDANCY as u64 + 2;

fn metered(fc: FlowControlConfig) -> (Translator<Mem>, Instant) {
    let cfg = TranslatorConfig {
        flow_control: FlowControlConfig {
            min_budget: 1,
            ..fc
        },
        ..TranslatorConfig::default()
    };
    let t = translator_with(&cfg);
    let t0 = t.meter().epoch();
    (t, t0)
}

fn ki(p: Priority, reporter: u32, counter: u64) -> Vec<u8> {
    let r = Report::KeyIncrement {
        key: &[9, 9, 9, 9],
        counter,
        redundancy: dta_store::DEFAULT_REDUNDANCY,
        immediate: false,
    };
    datagram_at(p, false, reporter, 0, &[r])
}

fn ms(t0: Instant, n: u64) -> Instant {
    t0 + Duration::from_millis(n)
}

/// The counters of the FETCH_ADDs issued, one per report (its N copies collapsed).
fn applied_counters(t: &Translator<Mem>) -> Vec<u64> {
    let mut v = t.sinks().adds.clone();
    v.dedup();
    v
}

#[test]
fn high_priority_over_budget_is_spilled_and_reinjected_in_order_exactly_once() {
    // 10 datagrams' worth of burst; the budget earns one datagram per 100 ms.
    let (mut t, t0) = metered(FlowControlConfig {
        write_budget: 10 * KI_OPS,
        burst: 10 * KI_OPS,
        ..FlowControlConfig::default()
    });
    let s = t.stats().clone();
    for i in 1..=30 {
        t.handle_datagram(&ki(Priority::High, 1, i), src(), t0);
    }
    assert_eq!(s.overload_admitted[2].load(Relaxed), 10);
    assert_eq!(s.spilled.load(Relaxed), 20);
    assert_eq!(t.spilled(), 20);
    assert_eq!(applied_counters(&t), (1..=10).collect::<Vec<_>>());
    let mut next = 31;
    let mut step = 1;
    while t.spilled() > 0 {
        let now = ms(t0, 100 * step);
        if step % 5 == 0 && next <= 33 {
            // Arriving while the spill holds older ones: queued behind them.
            t.handle_datagram(&ki(Priority::High, 1, next), src(), now);
            next += 1;
        }
        if step == 3 {
            // Strict priority: nothing of lower priority while high ones wait.
            t.handle_datagram(&ki(Priority::Medium, 1, 1000), src(), now);
        }
        t.tick(now);
        step += 1;
        assert!(step < 1000, "the spill does not drain");
    }
    assert_eq!(applied_counters(&t), (1..=33).collect::<Vec<_>>());
    assert_eq!(s.reports_of(dta_wire::Opcode::KeyIncrement), 33);
    assert_eq!(s.spilled.load(Relaxed), 23);
    assert_eq!(s.reinjected.load(Relaxed), 23);
    assert_eq!(s.overload_dropped[1].load(Relaxed), 1);
    assert_eq!(s.overload_dropped[2].load(Relaxed), 0);
    assert_eq!(s.spill_bytes.load(Relaxed), 0);
    // Re-injection waits for the medium threshold: the level never ran far into debt.
    assert!(t.meter().fraction() > -1.0);
}

#[test]
fn a_full_spill_drops_and_counts_high_priority() {
    let one = ki(Priority::High, 1, 1).len() as u64;
    let (mut t, t0) = metered(FlowControlConfig {
        write_budget: 1,
        burst: KI_OPS,
        spill_memory: 2 * (crate::spill::RECORD_HEADER as u64 + one),
        ..FlowControlConfig::default()
    });
    for i in 1..=4 {
        t.handle_datagram(&ki(Priority::High, 1, i), src(), t0);
    }
    let s = t.stats();
    assert_eq!(s.overload_admitted[2].load(Relaxed), 1);
    assert_eq!(s.spilled.load(Relaxed), 2);
    assert_eq!(s.overload_dropped[2].load(Relaxed), 1);
    assert_eq!(s.spill_dropped.load(Relaxed), 1);
    assert_eq!(s.spill_bytes.load(Relaxed), 2 * (24 + one));
}

#[test]
fn stop_drains_the_spill_regardless_of_the_budget() {
    let (mut t, t0) = metered(FlowControlConfig {
        write_budget: 1,
        burst: KI_OPS,
        ..FlowControlConfig::default()
    });
    for i in 1..=6 {
        t.handle_datagram(&ki(Priority::High, 1, i), src(), t0);
    }
    assert_eq!(t.spilled(), 5);
    assert_eq!(t.reinject(t0), 0, "no budget: nothing re-injected");
    t.flush_all();
    assert_eq!(t.spilled(), 0);
    assert_eq!(applied_counters(&t), (1..=6).collect::<Vec<_>>());
    assert_eq!(t.stats().reinjected.load(Relaxed), 5);
}

#[test]
fn low_and_medium_are_admitted_by_their_thresholds_and_dropped_below() {
    // 10 datagrams of burst; low needs 5 left, medium 2.5; no refill to speak of.
    let (mut t, t0) = metered(FlowControlConfig {
        write_budget: 1,
        burst: 10 * KI_OPS,
        ..FlowControlConfig::default()
    });
    let s = t.stats().clone();
    for i in 0..8 {
        t.handle_datagram(&ki(Priority::Low, 1, i + 1), src(), t0);
    }
    // Admitted at 10, 9, .., 5 datagrams left: 6; dropped at 4 and 4.
    assert_eq!(s.overload_admitted[0].load(Relaxed), 6);
    assert_eq!(s.overload_dropped[0].load(Relaxed), 2);
    for i in 0..4 {
        t.handle_datagram(&ki(Priority::Medium, 1, i + 100), src(), t0);
    }
    // Admitted at 4 and 3 left; dropped at 2.
    assert_eq!(s.overload_admitted[1].load(Relaxed), 2);
    assert_eq!(s.overload_dropped[1].load(Relaxed), 2);
    // High still goes in while anything is left.
    t.handle_datagram(&ki(Priority::High, 1, 200), src(), t0);
    assert_eq!(s.overload_admitted[2].load(Relaxed), 1);
    assert_eq!(s.reports_of(dta_wire::Opcode::KeyIncrement), 9);
    // Unmetered: nothing is counted, everything applied.
    let (mut u, t0) = metered(FlowControlConfig::default());
    for i in 0..100 {
        u.handle_datagram(&ki(Priority::Low, 1, i + 1), src(), t0);
    }
    assert_eq!(u.stats().reports_of(dta_wire::Opcode::KeyIncrement), 100);
    assert_eq!(u.stats().overload_admitted[0].load(Relaxed), 0);
}

#[test]
fn dynamic_redundancy_lowers_low_priority_key_write_under_sustained_pressure_only() {
    let (mut t, t0) = metered(FlowControlConfig {
        write_budget: 10,
        burst: 100,
        redundancy_threshold: 0.75,
        redundancy_after_ms: 100,
        ..FlowControlConfig::default()
    });
    let s = t.stats().clone();
    let kw = |p, k: u8| {
        let r = Report::KeyWrite {
            key: &[k; 4],
            data: &[k; 4],
            redundancy: dta_store::MAX_REDUNDANCY,
            immediate: false,
        };
        datagram_at(p, false, 1, 0, &[r])
    };
    let n = dta_store::MAX_REDUNDANCY as u64;
    let writes = || s.writes.load(Relaxed);
    t.meter().debit(40); // 60 % left: below 75 %, above low's 50 %
    let w = writes();
    t.handle_datagram(&kw(Priority::Low, 1), src(), t0);
    assert_eq!(writes() - w, n, "not sustained yet");
    let w = writes();
    t.handle_datagram(&kw(Priority::Low, 2), src(), ms(t0, 100));
    assert_eq!(writes() - w, 1, "sustained for 100 ms: one copy");
    assert_eq!(s.redundancy_lowered.load(Relaxed), 1);
    let w = writes();
    t.handle_datagram(&kw(Priority::Medium, 3), src(), ms(t0, 110));
    assert_eq!(writes() - w, n, "only low priority is lowered");
    // The level recovers: N copies again at once.
    let w = writes();
    t.handle_datagram(&kw(Priority::Low, 4), src(), ms(t0, 60_000));
    assert_eq!(writes() - w, n);
    assert_eq!(s.redundancy_lowered.load(Relaxed), 1);
    assert_eq!(s.reports_of(dta_wire::Opcode::KeyWrite), 4);
}

#[test]
fn congestion_signals_cut_the_budget_and_quiet_raises_it() {
    let (mut t, t0) = metered(FlowControlConfig {
        write_budget: 1600,
        adapt_interval_ms: 10,
        ..FlowControlConfig::default()
    });
    t.sinks_mut().signals.cnps = 2;
    t.sinks_mut().signals.rnr_naks = 1;
    t.tick(ms(t0, 1));
    let s = t.stats().clone();
    assert_eq!(s.budget.load(Relaxed), 800);
    assert_eq!(s.congestion_signals[2].load(Relaxed), 2);
    assert_eq!(s.congestion_signals[0].load(Relaxed), 1);
    t.tick(ms(t0, 5));
    assert_eq!(
        s.budget.load(Relaxed),
        800,
        "no signal, but not a whole interval"
    );
    t.tick(ms(t0, 12));
    assert_eq!(s.budget.load(Relaxed), 900);
    assert_eq!(t.meter().budget(), 900);
}

#[test]
fn drops_send_congestion_notices_rate_limited_per_reporter_source() {
    let (mut t, t0) = metered(FlowControlConfig {
        write_budget: 1,
        burst: 10 * KI_OPS,
        notice_interval_ms: 50,
        notice_hold_ms: 200,
        ..FlowControlConfig::default()
    });
    let notices = |t: &mut Translator<Mem>| -> Vec<native::NoticeRepr> {
        t.drain_nacks()
            .map(|n| {
                assert_eq!(n.to, (src().ip(), dta_wire::NACK_PORT).into());
                native::NoticeRepr::parse(n.bytes()).expect("a congestion notice")
            })
            .collect()
    };
    for i in 0..8 {
        t.handle_datagram(&ki(Priority::Low, 1, i + 1), src(), t0);
    }
    // Two lows dropped: one notice, pausing low only.
    let n = notices(&mut t);
    assert_eq!(
        n,
        [native::NoticeRepr {
            reporter_id: 1,
            hold_ms: 200,
            low_rate: 0,
            medium_rate: native::RATE_UNLIMITED
        }]
    );
    for i in 0..4 {
        t.handle_datagram(&ki(Priority::Medium, 1, i + 100), src(), ms(t0, 10));
    }
    assert_eq!(t.stats().overload_dropped[1].load(Relaxed), 2);
    assert!(
        notices(&mut t).is_empty(),
        "one per reporter source per interval"
    );
    // Another reporter at the same address has its own limit; a medium drop pauses medium too.
    t.handle_datagram(&ki(Priority::Medium, 2, 7), src(), ms(t0, 10));
    let n = notices(&mut t);
    assert_eq!(
        (n.len(), n[0].reporter_id, n[0].low_rate, n[0].medium_rate),
        (1, 2, 0, 0)
    );
    // After the interval, reporter 1 is told again.
    t.handle_datagram(&ki(Priority::Low, 1, 8), src(), ms(t0, 60));
    assert_eq!(notices(&mut t).len(), 1);
    // A prototype datagram (medium, no reporter id to address) is dropped without a notice.
    let mut b = [0u8; 64];
    let len = dta_wire::prototype::Repr {
        base: dta_wire::prototype::BaseRepr {
            opcode: dta_wire::Opcode::KeyWrite,
            seqnum: None,
            immediate: false,
            retransmittable: false,
        },
        report: Report::KeyWrite {
            key: &[1, 2, 3, 4],
            data: &[5, 6, 7, 8],
            redundancy: 1,
            immediate: false,
        },
    }
    .emit(&mut b, dta_wire::prototype::BaseFormat::Short)
    .unwrap();
    t.handle_datagram(&b[..len], src(), ms(t0, 200));
    assert_eq!(t.stats().overload_dropped[1].load(Relaxed), 4);
    assert!(notices(&mut t).is_empty());
    assert_eq!(t.stats().notices_sent.load(Relaxed), 3);
    assert_eq!(
        t.stats().nacks_sent.load(Relaxed),
        0,
        "notices are not NACKs"
    );
}

/// A source that marks its flood high priority takes its budget of precedence and no more: the
/// excess is treated as low and counted, and a well-behaved medium reporter's datagrams are
/// admitted beside it (without the budget, every one of them was dropped).
#[test]
fn a_flood_claiming_high_priority_does_not_starve_a_medium_reporter() {
    let (mut t, t0) = metered(FlowControlConfig {
        write_budget: 2000 * KI_OPS,
        burst: 200 * KI_OPS,
        high_per_source: 100,
        ..FlowControlConfig::default()
    });
    let flood = std::net::SocketAddr::from(([127, 0, 0, 66], 5000));
    let calm = std::net::SocketAddr::from(([127, 0, 0, 7], 5000));
    let s = t.stats().clone();
    let mut calm_sent = 0;
    for ms_ in 0..1000u64 {
        let now = ms(t0, ms_);
        // 20 high datagrams a millisecond from one source (20 000/s, the budget 10 times over)...
        for i in 0..20 {
            t.handle_datagram(&ki(Priority::High, 66, ms_ * 20 + i), flood, now);
        }
        // ...and a medium reporter at 247 datagrams a second.
        if ms_ % 4 == 0 && calm_sent < 247 {
            t.handle_datagram(&ki(Priority::Medium, 7, 1_000_000 + ms_), calm, now);
            calm_sent += 1;
        }
        t.tick(now);
    }
    let demoted = s.demoted[2].load(Relaxed);
    assert!(demoted > 15_000, "the flood's excess is demoted: {demoted}");
    let medium_dropped = s.overload_dropped[1].load(Relaxed);
    assert!(
        medium_dropped < calm_sent / 10,
        "{medium_dropped} of {calm_sent} medium datagrams dropped"
    );
    assert!(
        s.overload_dropped[0].load(Relaxed) > 10_000,
        "the excess is shed first"
    );
}
