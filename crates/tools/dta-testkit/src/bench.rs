//! Helpers shared by the benchmark binaries (`benches/*.rs` of the dta crates): a fast
//! deterministic generator, the median of runs, rate timers (wall clock and the thread's own CPU
//! time) and power-of-two sizing. Benchmarks
//! compare against a baseline measured in the same run and quote medians; these are the pieces
//! every one of them repeats.

use std::time::{Duration, Instant};

/// xorshift64*: deterministic, cheap enough that generating keys does not dominate a timed loop.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// A generator from `seed` (0 is mapped to a non-zero state: xorshift never leaves 0).
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`; the modulo bias is below 2^-32 for the sizes benchmarks use).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The median of `v` (the upper one of an even count). Panics on an empty `v` or a NaN.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN among benchmark figures"));
    v[v.len() / 2]
}

/// The largest power of two `<= x` (1 for 0).
pub fn pow2_at_most(x: u64) -> u64 {
    1u64 << (63 - x.max(1).leading_zeros())
}

/// Items per second of `f` over `n` items.
pub fn rate(n: usize, f: impl FnOnce()) -> f64 {
    let t0 = Instant::now();
    f();
    n as f64 / t0.elapsed().as_secs_f64()
}

/// CPU time the calling thread has used so far (`CLOCK_THREAD_CPUTIME_ID`): on a machine
/// shared with other work, a rate per second of the thread's own CPU time is far steadier than
/// one per wall-clock second (time spent descheduled is not counted).
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Items per second of the calling thread's own CPU time of `f` over `n` items ([`rate`] per
/// CPU second instead of per wall-clock second).
pub fn cpu_rate(n: usize, f: impl FnOnce()) -> f64 {
    let t0 = thread_cpu();
    f();
    n as f64 / (thread_cpu() - t0).as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_picks_the_middle() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
    }

    #[test]
    fn pow2_rounds_down() {
        assert_eq!(pow2_at_most(0), 1);
        assert_eq!(pow2_at_most(1), 1);
        assert_eq!(pow2_at_most(1023), 512);
        assert_eq!(pow2_at_most(1024), 1024);
    }

    #[test]
    fn thread_cpu_counts_work_not_sleep() {
        let t0 = thread_cpu();
        std::thread::sleep(Duration::from_millis(50));
        let slept = thread_cpu() - t0;
        let t1 = thread_cpu();
        let mut x = 0u64;
        while thread_cpu() - t1 < Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(
            slept < Duration::from_millis(20),
            "sleeping used {slept:?} of CPU"
        );
        assert!(
            cpu_rate(1000, || {
                std::hint::black_box(x);
            }) > 0.0
        );
    }

    #[test]
    fn rng_is_deterministic_and_spread() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let xs: Vec<u64> = (0..1000).map(|_| a.next()).collect();
        assert!(xs.iter().all(|&x| x == b.next()));
        let mut r = Rng::new(1);
        let mut hist = [0u32; 8];
        for _ in 0..8000 {
            hist[r.below(8) as usize] += 1;
        }
        assert!(hist.iter().all(|&h| (800..1200).contains(&h)), "{hist:?}");
    }
}
