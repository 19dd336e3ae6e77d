//! What the translator sends reporters (NACKs, congestion notices): authenticated when the
//! operator configures a control key ([`ControlAuth`], `dta_wire::auth`) and bound to the life
//! each reporter announced in its hello, and NACKs bounded by one budget for all the threads of
//! a collector's translator ([`NackBudget`]), so recovery converges under load instead of
//! storming (docs/flow-control.md "NACK budget").

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dta_wire::auth::{self, AuthError, ControlKey};
use dta_wire::native;

/// Reporters' lives kept at most (one per address and reporter id that said hello with the
/// key): 65 536 entries of about 48 bytes.
pub const MAX_LIVES: usize = 65_536;
/// A life not announced again for this long is forgotten: its reporter stopped, or its clock
/// went back so that its hellos read as replays (it is bound again by its next hello).
/// Reporters announce once a second.
pub const LIFE_TTL: Duration = Duration::from_secs(60);

/// What became of a hello (`dta_translator_hellos_total{outcome}`), in counter order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelloOutcome {
    /// Verified and fresh: what is sent to the reporter is bound to its life from now on.
    Accepted,
    /// No control key is configured here: nothing is sealed, so nothing is bound.
    NoKey,
    /// Not sealed.
    Unauthenticated,
    /// A MAC that does not verify (another key, or forged).
    BadAuthenticator,
    /// A counter not above the last hello accepted from that reporter (a recorded one).
    Replayed,
    /// Not a well-formed hello under its trailer.
    Malformed,
    /// [`MAX_LIVES`] reporters are known and none has gone quiet for [`LIFE_TTL`].
    TableFull,
}

impl HelloOutcome {
    /// Every outcome, in counter order.
    pub const ALL: [HelloOutcome; 7] = [
        HelloOutcome::Accepted,
        HelloOutcome::NoKey,
        HelloOutcome::Unauthenticated,
        HelloOutcome::BadAuthenticator,
        HelloOutcome::Replayed,
        HelloOutcome::Malformed,
        HelloOutcome::TableFull,
    ];

    /// The counter slot (position in [`HelloOutcome::ALL`]).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The label value.
    pub const fn name(self) -> &'static str {
        match self {
            HelloOutcome::Accepted => "accepted",
            HelloOutcome::NoKey => "no_key",
            HelloOutcome::Unauthenticated => "unauthenticated",
            HelloOutcome::BadAuthenticator => "bad_authenticator",
            HelloOutcome::Replayed => "replayed",
            HelloOutcome::Malformed => "malformed",
            HelloOutcome::TableFull => "table_full",
        }
    }
}

/// A reporter's announced life.
#[derive(Debug, Clone, Copy)]
struct Life {
    life: u64,
    /// The counter of the hello that announced it (later hellos must be above it).
    counter: u64,
    seen: Instant,
}

/// The reporters' lives, by address and reporter id, bounded by [`MAX_LIVES`].
#[derive(Debug, Default)]
struct Lives {
    by: HashMap<(IpAddr, u32), Life>,
    /// When the table was last swept of quiet lives (at most once a second, when full).
    swept: Option<Instant>,
}

/// The key, the message counter and the reporters' lives of authenticated control messages,
/// shared by the threads.
#[derive(Debug)]
pub struct ControlAuth {
    key: ControlKey,
    /// The next message's counter: starts at the wall clock in nanoseconds, so a restarted
    /// translator's counters stay above the ones its reporters accepted before.
    counter: AtomicU64,
    /// Taken once per hello and per message sent (NACKs are budgeted, notices rare): never on
    /// the path of reports.
    lives: Mutex<Lives>,
}

impl ControlAuth {
    pub fn new(key: ControlKey) -> Arc<ControlAuth> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        Arc::new(ControlAuth {
            key,
            counter: AtomicU64::new(now),
            lives: Mutex::new(Lives::default()),
        })
    }

    fn lives(&self) -> std::sync::MutexGuard<'_, Lives> {
        self.lives.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take the hello `msg` (sealed, from `src`) at `now`: on success what is sent to that
    /// reporter is bound to its life.
    pub fn hello(&self, src: IpAddr, msg: &[u8], now: Instant) -> HelloOutcome {
        let mut plain = [0u8; 64];
        if msg.len() > plain.len() {
            return HelloOutcome::Malformed;
        }
        let opened = match auth::open(msg, &self.key, None, None, &mut plain) {
            Ok(o) if o.life.is_none() => o,
            Ok(_) => return HelloOutcome::Malformed,
            Err(AuthError::Unauthenticated) => return HelloOutcome::Unauthenticated,
            Err(AuthError::BadTag) => return HelloOutcome::BadAuthenticator,
            Err(_) => return HelloOutcome::Malformed,
        };
        let Ok(h) = native::HelloRepr::parse(&plain[..opened.len]) else {
            return HelloOutcome::Malformed;
        };
        let mut t = self.lives();
        let fresh = Life {
            life: h.life,
            counter: opened.counter,
            seen: now,
        };
        let id = (src, h.reporter_id);
        if let Some(l) = t.by.get_mut(&id) {
            if opened.counter <= l.counter && now.duration_since(l.seen) < LIFE_TTL {
                return HelloOutcome::Replayed;
            }
            *l = fresh;
            return HelloOutcome::Accepted;
        }
        if t.by.len() >= MAX_LIVES {
            if t.swept
                .is_some_and(|s| now.duration_since(s) < Duration::from_secs(1))
            {
                return HelloOutcome::TableFull;
            }
            t.swept = Some(now);
            t.by.retain(|_, l| now.duration_since(l.seen) < LIFE_TTL);
            if t.by.len() >= MAX_LIVES {
                return HelloOutcome::TableFull;
            }
        }
        t.by.insert(id, fresh);
        HelloOutcome::Accepted
    }

    /// Seal `buf[..len]`, a native message to `to` (room for the longest trailer): bound to the
    /// life its reporter announced, if it did and is not quiet for [`LIFE_TTL`]. The new length.
    pub fn seal(&self, buf: &mut [u8], len: usize, to: IpAddr) -> usize {
        let c = self.counter.fetch_add(1, Ordering::Relaxed);
        let id = native::Packet::new_unchecked(&buf[..len]).reporter_id();
        let life = {
            let t = self.lives();
            t.by.get(&(to, id))
                .filter(|l| l.seen.elapsed() < LIFE_TTL)
                .map(|l| l.life)
        };
        match life {
            Some(life) => auth::seal_bound(buf, len, &self.key, c, life),
            None => auth::seal(buf, len, &self.key, c),
        }
    }

    /// Reporters whose life is known.
    pub fn lives_known(&self) -> usize {
        self.lives().by.len()
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

    fn hello(key: &ControlKey, id: u32, life: u64, counter: u64) -> Vec<u8> {
        let mut b = [0u8; 64];
        let n = native::HelloRepr {
            reporter_id: id,
            life,
        }
        .emit(&mut b)
        .unwrap();
        let n = auth::seal(&mut b, n, key, counter);
        b[..n].to_vec()
    }

    #[test]
    fn what_is_sent_to_a_reporter_is_bound_to_the_life_of_its_last_hello() {
        let key = ControlKey::new([7; 16]);
        let a = ControlAuth::new(key.clone());
        let src: IpAddr = "10.0.0.1".parse().unwrap();
        let t0 = Instant::now();
        let notice = native::NoticeRepr {
            reporter_id: 4,
            hold_ms: 100,
            low_rate: 0,
            medium_rate: 0,
        };
        let sealed = |a: &ControlAuth| {
            let mut b = [0u8; 64];
            let n = notice.emit(&mut b).unwrap();
            let n = a.seal(&mut b, n, src);
            b[..n].to_vec()
        };
        let mut out = [0u8; 64];
        // Before any hello: sealed, bound to nothing; a reporter with a life refuses it.
        let m = sealed(&a);
        assert_eq!(m.len(), native::NOTICE_LEN + auth::TRAILER_LEN);
        assert_eq!(
            auth::open(&m, &key, Some(11), None, &mut out),
            Err(AuthError::Unbound)
        );
        assert_eq!(
            a.hello(src, &hello(&key, 4, 11, 100), t0),
            HelloOutcome::Accepted
        );
        let m = sealed(&a);
        assert_eq!(m.len(), native::NOTICE_LEN + auth::BOUND_TRAILER_LEN);
        assert!(auth::open(&m, &key, Some(11), None, &mut out).is_ok());
        // The reporter restarts with a new life: the old message is stale to it.
        assert_eq!(
            a.hello(src, &hello(&key, 4, 12, 200), t0),
            HelloOutcome::Accepted
        );
        assert_eq!(
            auth::open(&m, &key, Some(12), None, &mut out),
            Err(AuthError::StaleLife)
        );
        assert!(auth::open(&sealed(&a), &key, Some(12), None, &mut out).is_ok());
        // A recorded hello of the old life is a replay; one under another key is refused;
        // another address's reporter 4 is another reporter.
        assert_eq!(
            a.hello(src, &hello(&key, 4, 11, 100), t0),
            HelloOutcome::Replayed
        );
        let other = ControlKey::new([8; 16]);
        assert_eq!(
            a.hello(src, &hello(&other, 4, 13, 300), t0),
            HelloOutcome::BadAuthenticator
        );
        let mut plain = [0u8; 64];
        let n = native::HelloRepr {
            reporter_id: 4,
            life: 13,
        }
        .emit(&mut plain)
        .unwrap();
        assert_eq!(a.hello(src, &plain[..n], t0), HelloOutcome::Unauthenticated);
        let mut longer = hello(&key, 4, 13, 300);
        longer.extend_from_slice(&[0; 64]);
        assert_eq!(a.hello(src, &longer, t0), HelloOutcome::Malformed);
        assert_eq!(
            a.hello("10.0.0.2".parse().unwrap(), &hello(&key, 4, 14, 1), t0),
            HelloOutcome::Accepted
        );
        assert_eq!(a.lives_known(), 2);
        // A reporter whose clock went back is bound again once its life has been quiet.
        assert_eq!(
            a.hello(src, &hello(&key, 4, 15, 50), t0 + LIFE_TTL),
            HelloOutcome::Accepted
        );
    }

    #[test]
    fn the_table_of_lives_is_bounded_and_makes_room_for_the_quiet() {
        let key = ControlKey::new([7; 16]);
        let a = ControlAuth::new(key.clone());
        let t0 = Instant::now();
        let ip = |i: u32| IpAddr::from((0x0a00_0000u32 + i).to_be_bytes());
        for i in 0..MAX_LIVES as u32 {
            assert_eq!(
                a.hello(ip(i), &hello(&key, 1, 1, 1), t0),
                HelloOutcome::Accepted
            );
        }
        let late = hello(&key, 1, 1, 1);
        assert_eq!(a.hello(ip(1 << 20), &late, t0), HelloOutcome::TableFull);
        assert_eq!(a.lives_known(), MAX_LIVES);
        assert_eq!(
            a.hello(ip(1 << 20), &late, t0 + LIFE_TTL),
            HelloOutcome::Accepted
        );
        assert_eq!(a.lives_known(), 1);
    }

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
