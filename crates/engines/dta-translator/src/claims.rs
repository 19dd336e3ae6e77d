//! Priority is a claim with a budget (docs/security.md "What a reporter is trusted with"): a
//! datagram's priority is what its sender says, so each source may claim high and medium
//! priority for at most a budget of datagrams per second (`[translator.flow_control]
//! high_per_source`, `medium_per_source`). What a source claims beyond it is treated as low
//! priority (shed first, never spilled) and counted, by the priority claimed and by source (the
//! sources demoted most, [`Claims::top_demoted`]), and said in the log naming the source
//! (rate-limited). Within the budget, priority is what DTA-draft §3.2 makes it: high spills, low
//! is shed first. A flood marked high therefore takes no more than its budget of the precedence
//! well-behaved reporters rely on, and its excess yields to their medium traffic.
//!
//! The budget is per source address, whatever reporter ids the source uses (a source cannot
//! multiply it by inventing ids); each translator thread keeps its own buckets over the
//! datagrams it receives and takes its share of the budget (`threads` divides it). The table of
//! sources is bounded ([`MAX_SOURCES`]): a source beyond it is held to the budget of one shared
//! bucket, so many sources cannot grow memory.

use std::net::IpAddr;
use std::time::Instant;

use dta_wire::Priority;

/// Sources one translator thread keeps a bucket for.
pub const MAX_SOURCES: usize = 65_536;
/// Default `high_per_source`: high-priority datagrams per second one source may claim.
pub const DEFAULT_HIGH_PER_SOURCE: u64 = 20_000;
/// Default `medium_per_source`: medium-priority datagrams per second one source may claim.
pub const DEFAULT_MEDIUM_PER_SOURCE: u64 = 200_000;
/// Largest per-source budget, datagrams per second (0: unlimited).
pub const MAX_PER_SOURCE: u64 = 100_000_000;
/// A bucket holds this long's worth: the burst a source may claim at once.
const BURST_NS: u64 = 100_000_000;

/// A token bucket as a theoretical arrival time (GCRA), nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, Default)]
struct Gcra {
    tat: u64,
}

impl Gcra {
    fn take(&mut self, now: u64, interval: u64) -> bool {
        if interval == 0 {
            return true;
        }
        let next = self.tat.max(now) + interval;
        if next > now + BURST_NS {
            return false;
        }
        self.tat = next;
        true
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Buckets {
    high: Gcra,
    medium: Gcra,
    /// Datagrams of this source treated as low for claiming beyond its budget.
    demoted: u64,
}

/// Sources whose demotions each thread publishes ([`Claims::top_demoted`]), the most first.
pub const TOP_SOURCES: usize = 16;

/// One translator thread's buckets (see the module doc).
#[derive(Debug)]
pub struct Claims {
    /// Nanoseconds between two datagrams of a priority's budget (0: unlimited).
    high_ns: u64,
    medium_ns: u64,
    sources: hashbrown::HashMap<IpAddr, Buckets>,
    /// The bucket of the sources beyond [`MAX_SOURCES`].
    overflow: Buckets,
    epoch: Instant,
}

/// Nanoseconds between two datagrams of `per_s` a second shared by `threads` threads.
fn interval(per_s: u64, threads: usize) -> u64 {
    if per_s == 0 {
        0
    } else {
        (1_000_000_000 * threads.max(1) as u64 / per_s.min(MAX_PER_SOURCE)).max(1)
    }
}

impl Claims {
    /// Budgets of `high` and `medium` datagrams per second per source (0: unlimited), this
    /// thread's share of `threads`.
    pub fn new(high: u64, medium: u64, threads: usize) -> Claims {
        Claims {
            high_ns: interval(high, threads),
            medium_ns: interval(medium, threads),
            sources: hashbrown::HashMap::new(),
            overflow: Buckets::default(),
            epoch: Instant::now(),
        }
    }

    /// Whether any budget applies.
    pub fn limited(&self) -> bool {
        self.high_ns != 0 || self.medium_ns != 0
    }

    /// The priority a datagram from `src` claiming `p` is treated with at `now`: `p` within
    /// the source's budget for `p`, else low.
    #[inline]
    pub fn claim(&mut self, src: IpAddr, p: Priority, now: Instant) -> Priority {
        if p == Priority::Low || !self.limited() {
            return p;
        }
        let t = now.saturating_duration_since(self.epoch).as_nanos() as u64;
        let full = self.sources.len() >= MAX_SOURCES;
        let b = match self.sources.get_mut(&src) {
            Some(b) => b,
            None if full => &mut self.overflow,
            None => self.sources.entry(src).or_default(),
        };
        let within = match p {
            Priority::High => b.high.take(t, self.high_ns),
            _ => b.medium.take(t, self.medium_ns),
        };
        if within {
            p
        } else {
            b.demoted += 1;
            Priority::Low
        }
    }
}

impl Claims {
    /// The [`TOP_SOURCES`] sources with the most demotions, the most first (the sources beyond
    /// the table under the unspecified address). A scan of the table: once a second, off the
    /// per-datagram path.
    pub fn top_demoted(&self) -> Vec<(IpAddr, u64)> {
        let mut v: Vec<(IpAddr, u64)> = self
            .sources
            .iter()
            .filter(|(_, b)| b.demoted > 0)
            .map(|(a, b)| (*a, b.demoted))
            .collect();
        if self.overflow.demoted > 0 {
            v.push((IpAddr::from([0u8; 4]), self.overflow.demoted));
        }
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(TOP_SOURCES);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_source_claims_its_budget_and_no_more() {
        let mut c = Claims::new(1000, 10_000, 1);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let t0 = Instant::now();
        // A tenth of a second's worth at once, then treated as low.
        let high = (0..1000)
            .filter(|_| c.claim(a, Priority::High, t0) == Priority::High)
            .count();
        assert_eq!(high, 100);
        assert_eq!(c.claim(a, Priority::High, t0), Priority::Low);
        // Another source's budget is its own.
        assert_eq!(c.claim(b, Priority::High, t0), Priority::High);
        // A second later the budget is back.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(c.claim(a, Priority::High, t1), Priority::High);
        // Medium beyond its budget is low; low is never touched.
        let medium = (0..5000)
            .filter(|_| c.claim(b, Priority::Medium, t1) == Priority::Medium)
            .count();
        assert_eq!(medium, 1000);
        assert_eq!(c.claim(b, Priority::Medium, t1), Priority::Low);
        assert_eq!(
            c.claim(b, Priority::High, t1 + Duration::from_millis(1)),
            Priority::High
        );
        assert_eq!(c.claim(b, Priority::Low, t1), Priority::Low);
        // Counted by source, the most first.
        assert_eq!(c.top_demoted(), vec![(b, 4001), (a, 901)]);
        // Unlimited: what is claimed.
        let mut u = Claims::new(0, 0, 4);
        assert!(!u.limited());
        assert!((0..100_000).all(|_| u.claim(a, Priority::High, t0) == Priority::High));
    }

    #[test]
    fn threads_share_the_budget_and_the_table_is_bounded() {
        let t0 = Instant::now();
        let mut c = Claims::new(1000, 0, 4);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let high = (0..1000)
            .filter(|_| c.claim(a, Priority::High, t0) == Priority::High)
            .count();
        assert_eq!(high, 25, "a quarter of the burst on each of four threads");
        let mut c = Claims::new(1000, 0, 1);
        for i in 0..MAX_SOURCES as u32 + 10 {
            c.claim(IpAddr::from(i.to_be_bytes()), Priority::High, t0);
        }
        assert_eq!(c.sources.len(), MAX_SOURCES);
    }
}
