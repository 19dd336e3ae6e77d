//! What the translator sends reporters (NACKs, congestion notices): authenticated when the
//! operator configures a control key ([`ControlAuth`], `dta_wire::auth`), and NACKs bounded by
//! one budget for all the threads of a collector's translator ([`NackBudget`]), so recovery
//! converges under load instead of storming (docs/flow-control.md "NACK budget").

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use dta_wire::auth::{self, ControlKey};

/// The key and the message counter of authenticated control messages, shared by the threads.
#[derive(Debug)]
pub struct ControlAuth {
    key: ControlKey,
    /// The next message's counter: starts at the wall clock in nanoseconds, so a restarted
    /// translator's counters stay above the ones its reporters accepted before.
    counter: AtomicU64,
}

impl ControlAuth {
    pub fn new(key: ControlKey) -> Arc<ControlAuth> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        Arc::new(ControlAuth {
            key,
            counter: AtomicU64::new(now),
        })
    }

    /// Seal `buf[..len]` (room for the trailer): the new length.
    pub fn seal(&self, buf: &mut [u8], len: usize) -> usize {
        let c = self.counter.fetch_add(1, Ordering::Relaxed);
        auth::seal(buf, len, &self.key, c)
    }
}

/// The largest `nack_budget`, NACKs per second.
pub const MAX_NACK_BUDGET: u64 = 10_000_000;
/// The default `nack_budget`: 20 000 NACKs of 24 bytes a second, under 0.5 MB/s.
pub const DEFAULT_NACK_BUDGET: u64 = 20_000;

/// A token bucket of NACKs per second shared by threads: at most `rate` a second, bursts of a
/// tenth of a second's worth (GCRA: one atomic "theoretical arrival time").
#[derive(Debug)]
pub struct NackBudget {
    interval_ns: u64,
    burst_ns: u64,
    /// When the bucket is empty again, nanoseconds since `epoch`.
    tat: AtomicU64,
    epoch: Instant,
}

impl NackBudget {
    /// `rate` NACKs per second (0: unlimited).
    pub fn new(rate: u64) -> Arc<NackBudget> {
        let interval_ns = if rate == 0 {
            0
        } else {
            (1_000_000_000 / rate.min(MAX_NACK_BUDGET)).max(1)
        };
        Arc::new(NackBudget {
            interval_ns,
            burst_ns: 100_000_000,
            tat: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }

    /// Take one NACK's token at `now`; false when the budget is spent.
    pub fn take(&self, now: Instant) -> bool {
        if self.interval_ns == 0 {
            return true;
        }
        let t = now.saturating_duration_since(self.epoch).as_nanos() as u64;
        let mut tat = self.tat.load(Ordering::Relaxed);
        loop {
            let next = tat.max(t) + self.interval_ns;
            if next > t + self.burst_ns {
                return false;
            }
            match self
                .tat
                .compare_exchange_weak(tat, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(x) => tat = x,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_budget_allows_its_rate_with_a_tenth_of_a_second_of_burst() {
        let b = NackBudget::new(1000);
        let t0 = Instant::now();
        let burst = (0..1000).filter(|_| b.take(t0)).count();
        assert_eq!(burst, 100, "a tenth of a second's worth at once");
        // A second later: another second's worth, capped by the burst.
        let later = t0 + Duration::from_secs(1);
        assert_eq!((0..1000).filter(|_| b.take(later)).count(), 100);
        // Steady: one every millisecond.
        let mut ok = 0;
        for ms in 0..500 {
            if b.take(later + Duration::from_millis(200 + ms)) {
                ok += 1;
            }
        }
        assert!((495..=500).contains(&ok), "{ok}");
        let unlimited = NackBudget::new(0);
        assert!((0..100_000).all(|_| unlimited.take(t0)));
    }
}
