//! Token-bucket pacing that sleeps in batches.
//!
//! Sleeping per report costs a syscall and a timer slack of ~50 µs each, which caps a paced
//! sender far below line rate. The pacer instead hands out permission for a *batch* of reports:
//! tokens accrue at `rate` per second (starting from an empty bucket, so a run of `count`
//! reports takes at least `(count - batch) / rate` seconds), and when fewer tokens than one batch
//! are available the caller sleeps until a whole batch has accrued. The batch is sized to about
//! one millisecond of reports (`rate / 1000`, at least 1, at most 4096), so the instantaneous
//! burst stays short while the sleep rate stays at most ~1 kHz.

use std::time::{Duration, Instant};

/// A token bucket that grants reports in batches.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: Option<f64>,
    batch: u64,
    tokens: f64,
    last: Instant,
}

impl Pacer {
    /// Reports per batch for a rate: about 1 ms worth, clamped to 1..=4096.
    pub fn batch_for(rate: f64) -> u64 {
        ((rate / 1000.0).floor() as u64).clamp(1, 4096)
    }

    /// A pacer for `rate` reports per second (`None`: unpaced, batches of 4096).
    pub fn new(rate: Option<f64>) -> Pacer {
        let rate = rate.filter(|r| r.is_finite() && *r > 0.0);
        Pacer {
            rate,
            batch: rate.map_or(4096, Pacer::batch_for),
            tokens: 0.0,
            last: Instant::now(),
        }
    }

    /// The configured rate.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// The batch size.
    pub fn batch(&self) -> u64 {
        self.batch
    }

    /// How many reports (1..=min(batch, max)) may be sent now, sleeping first if needed. `max`
    /// of 0 returns 0 immediately. An optional `deadline` bounds the sleep: if the batch cannot
    /// be granted before it, returns 0 at the deadline.
    pub fn grant(&mut self, max: u64, deadline: Option<Instant>) -> u64 {
        if max == 0 {
            return 0;
        }
        let want = self.batch.min(max);
        let Some(rate) = self.rate else {
            return want;
        };
        loop {
            let now = Instant::now();
            let dt = now.duration_since(self.last).as_secs_f64();
            self.last = now;
            // Cap the bucket at one batch: a stall (e.g. a slow receiver) does not earn a burst.
            self.tokens = (self.tokens + dt * rate).min(self.batch as f64);
            if self.tokens >= want as f64 {
                self.tokens -= want as f64;
                return want;
            }
            let mut wait = Duration::from_secs_f64((want as f64 - self.tokens) / rate);
            if let Some(d) = deadline {
                if now >= d {
                    return 0;
                }
                wait = wait.min(d - now);
            }
            std::thread::sleep(wait);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_sizes() {
        assert_eq!(Pacer::batch_for(10.0), 1);
        assert_eq!(Pacer::batch_for(50_000.0), 50);
        assert_eq!(Pacer::batch_for(1e9), 4096);
        assert_eq!(Pacer::new(None).grant(10, None), 10);
        assert_eq!(Pacer::new(Some(0.0)).rate(), None);
    }

    #[test]
    fn paced_grants_take_the_expected_time() {
        let rate = 2000.0;
        let mut p = Pacer::new(Some(rate));
        let start = Instant::now();
        let mut granted = 0;
        while granted < 400 {
            let g = p.grant(400 - granted, None);
            assert!(g >= 1 && g <= p.batch());
            granted += g;
        }
        let took = start.elapsed().as_secs_f64();
        // Empty bucket at start: 400 tokens need 0.2 s to accrue.
        assert!(took >= 400.0 / rate * 0.8, "took {took}");
    }

    #[test]
    fn deadline_bounds_the_sleep() {
        // Without the deadline the first token would take 10 s; the 5 s bound leaves a loaded
        // machine's oversleeping of the 30 ms plenty of room.
        let mut p = Pacer::new(Some(0.1));
        let start = Instant::now();
        assert_eq!(p.grant(1, Some(start + Duration::from_millis(30))), 0);
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }
}
