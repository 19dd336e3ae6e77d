//! Test support for the dta crates (a dev-dependency only, never shipped).
//!
//! - [`test_seed`]: the one seed source of the randomized tests (`DTA_TEST_SEED`), printed so a
//!   failure can be replayed.
//! - [`skip!`]: libtest has no runtime skip, so a test that cannot run here (not root, a tool
//!   missing) calls `skip!("reason")`, which prints `dta-test: SKIPPED <test>: <reason>`, appends
//!   the same line to the file named by `DTA_SKIP_LOG` (so `scripts/test.sh` can count skips
//!   that cargo reports as passed) and returns. With `DTA_REQUIRE_ALL=1` (CI) it panics instead:
//!   a promised test must not silently not run.
//! - [`is_root`], [`have_tool`]: the usual preconditions.
//! - [`udp_receiver`]: a test's UDP receiver with a receive buffer that holds a burst.
//! - [`wait_until`]: poll another thread's or process's state until it holds, bounded by
//!   [`WAIT`] (what a test waits for instead of sleeping and hoping the other side has run).
//! - [`netns`]: network namespaces joined by a veth pair, removed on drop.
//! - [`bench`]: what the benchmark binaries share (generator, median, rate, sizing).
//! - [`kafka`]: a single-node Kafka broker (KRaft) started and stopped by a test.

use std::io::Write;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable holding the seed of randomized tests.
pub const SEED_ENV: &str = "DTA_TEST_SEED";
/// The environment variable naming the file every skip is appended to.
pub const SKIP_LOG_ENV: &str = "DTA_SKIP_LOG";
/// When `1`, a skip is a failure.
pub const REQUIRE_ALL_ENV: &str = "DTA_REQUIRE_ALL";
/// The prefix of every skip line, on stderr and in the skip log.
pub const SKIP_PREFIX: &str = "dta-test: SKIPPED";

/// The receive buffer [`udp_receiver`] asks for.
pub const RX_BUFFER: usize = 16 << 20;

/// A UDP socket bound to `addr` (e.g. `"127.0.0.1:0"`) with a receive buffer of [`RX_BUFFER`]
/// (`SO_RCVBUFFORCE` as root; otherwise `SO_RCVBUF`, capped by `net.core.rmem_max`). Loopback
/// delivers a datagram into the receiver's buffer as it is sent, or drops it when the buffer is
/// full: with the default (about 208 KiB, a few hundred datagrams) a receiving thread that a
/// loaded machine deschedules during a burst loses datagrams the test then misses.
pub fn udp_receiver(addr: &str) -> UdpSocket {
    let s = UdpSocket::bind(addr).unwrap_or_else(|e| panic!("binding {addr}: {e}"));
    let bytes = RX_BUFFER as libc::c_int;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: setsockopt(2) on a socket we own, with a c_int option value.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&bytes as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            break;
        }
    }
    s
}

/// How long [`wait_until`] waits: far beyond what the awaited step takes on an idle machine, so
/// only a test that would fail anyway reaches it (a shared, loaded 2-core CI machine can
/// deschedule a process for seconds).
pub const WAIT: Duration = Duration::from_secs(60);

/// Call `probe` every 20 ms until `done` holds for what it returns, then return that value.
/// For state another thread or process changes (a counter, a file, a port): the test waits for
/// the state it then asserts on, however slowly the other side runs.
///
/// # Panics
/// After [`WAIT`], showing `what` and the last value `probe` returned.
#[track_caller]
pub fn wait_until<T: std::fmt::Debug>(
    what: &str,
    mut probe: impl FnMut() -> T,
    done: impl Fn(&T) -> bool,
) -> T {
    let start = Instant::now();
    loop {
        let v = probe();
        if done(&v) {
            return v;
        }
        assert!(
            start.elapsed() < WAIT,
            "timed out after {WAIT:?} waiting for {what}; last: {v:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The seed of a randomized test: `DTA_TEST_SEED` when set (decimal or `0x` hex), `default`
/// otherwise, so the statistical checks are deterministic by default and other seeds can be
/// explored. The seed is printed (libtest shows it with a failure).
///
/// # Panics
/// When `DTA_TEST_SEED` is set but is not a number: a typo must not quietly fall back.
pub fn test_seed(default: u64) -> u64 {
    let seed = match std::env::var(SEED_ENV) {
        Ok(s) => parse_seed(&s).unwrap_or_else(|| panic!("{SEED_ENV}={s:?} is not a u64")),
        Err(_) => default,
    };
    eprintln!("dta-test: seed {seed:#x} (set {SEED_ENV} to change)");
    seed
}

fn parse_seed(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Whether the effective user is root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether `tool` runs (`tool <probe_arg>` starts and exits); used for `ip -V`,
/// `redis-server --version`.
pub fn have_tool(tool: &str, probe_arg: &str) -> bool {
    Command::new(tool)
        .arg(probe_arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Whether network-namespace tests can run here: root and iproute2's `ip`.
/// Returns the reason they cannot, for [`skip!`].
pub fn netns_unavailable() -> Option<&'static str> {
    if !is_root() {
        Some("needs root to create network namespaces")
    } else if !have_tool("ip", "-V") {
        Some("needs iproute2 `ip` to create network namespaces")
    } else {
        None
    }
}

/// Records a skip of the test `test` for `reason`; see [`skip!`], which supplies the name.
///
/// # Panics
/// When `DTA_REQUIRE_ALL=1`.
pub fn record_skip(test: &str, reason: &str) {
    let line = format!("{SKIP_PREFIX} {test}: {reason}");
    if std::env::var(REQUIRE_ALL_ENV).as_deref() == Ok("1") {
        panic!("{line} (not allowed: {REQUIRE_ALL_ENV}=1)");
    }
    eprintln!("{line}");
    if let Some(path) = std::env::var_os(SKIP_LOG_ENV) {
        // One short write per line with O_APPEND: lines of concurrent tests do not interleave.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        if let Err(e) = written {
            panic!("{SKIP_LOG_ENV}={}: {e}", path.to_string_lossy());
        }
    }
}

/// The name of the running test: libtest names each test's thread after it.
pub fn current_test_name(module: &str) -> String {
    match std::thread::current().name() {
        Some(n) if n != "main" => format!("{module}::{n}"),
        _ => module.to_string(),
    }
}

/// Skips the current test, counted: prints `dta-test: SKIPPED <test>: <reason>`, appends it to
/// `$DTA_SKIP_LOG`, and returns from the enclosing function (which must return `()`). Panics
/// instead when `DTA_REQUIRE_ALL=1`. Accepts `format!` arguments.
#[macro_export]
macro_rules! skip {
    ($($arg:tt)+) => {{
        $crate::record_skip(&$crate::current_test_name(module_path!()), &format!($($arg)+));
        return;
    }};
}

pub mod bench;
pub mod kafka;
pub mod netns;
