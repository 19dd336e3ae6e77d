//! Network namespaces for tests: two namespaces joined by a veth pair, addressed
//! `10.<net>.0.1/24` and `10.<net>.0.2/24`, loopback up, deleted on drop.

use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};

/// Runs `ip ARGS`, quietly; whether it succeeded.
pub fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Moves the calling thread into namespace `ns` (other threads are unaffected).
///
/// # Panics
/// When the namespace cannot be opened or entered.
pub fn enter(ns: &str) {
    let f = std::fs::File::open(format!("/var/run/netns/{ns}"))
        .unwrap_or_else(|e| panic!("open netns {ns}: {e}"));
    // SAFETY: setns on a namespace fd we hold; affects only the calling thread.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns {ns}: {}", std::io::Error::last_os_error());
}

/// Runs `f` on a new thread inside namespace `ns` and returns its result (the calling thread
/// stays where it is).
///
/// # Panics
/// When the namespace cannot be entered, or when `f` panics.
pub fn run_in<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        enter(&ns);
        f()
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// Two namespaces `a` and `b` joined by veth `dev_a` (in `a`, `ip_a`) and `dev_b` (in `b`,
/// `ip_b`). Names carry the process id and a caller's tag so concurrent tests do not collide.
#[derive(Debug)]
pub struct VethPair {
    pub a: String,
    pub b: String,
    pub dev_a: String,
    pub dev_b: String,
    /// Address of `dev_a`, without the prefix length.
    pub ip_a: String,
    /// Address of `dev_b`, without the prefix length.
    pub ip_b: String,
}

impl VethPair {
    /// Creates the pair. `tag` (a few letters) distinguishes fixtures of one process;
    /// `net` picks the `10.<net>.0.0/24` subnet.
    ///
    /// # Panics
    /// When any `ip` step fails (callers check [`crate::netns_unavailable`] first).
    pub fn new(tag: &str, net: u8) -> VethPair {
        Self::with_queues(tag, net, 1)
    }

    /// [`VethPair::new`] with `queues` receive and transmit queues on each end (AF_XDP binds a
    /// socket per receive queue).
    pub fn with_queues(tag: &str, net: u8, queues: u32) -> VethPair {
        let id = std::process::id() % 100_000;
        let a = format!("dta{tag}a{id}");
        let b = format!("dta{tag}b{id}");
        // Interface names are limited to 15 bytes (IFNAMSIZ - 1).
        let dev_a = format!("v{tag}a{id}");
        let dev_b = format!("v{tag}b{id}");
        assert!(
            dev_a.len() <= 15,
            "tag {tag:?} too long for an interface name"
        );
        let _ = ip(&["netns", "del", &a]);
        let _ = ip(&["netns", "del", &b]);
        assert!(ip(&["netns", "add", &a]), "ip netns add {a}");
        let pair = VethPair {
            ip_a: format!("10.{net}.0.1"),
            ip_b: format!("10.{net}.0.2"),
            a,
            b,
            dev_a,
            dev_b,
        };
        assert!(ip(&["netns", "add", &pair.b]), "ip netns add {}", pair.b);
        let q = queues.max(1).to_string();
        assert!(
            ip(&[
                "link",
                "add",
                &pair.dev_a,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "netns",
                &pair.a,
                "type",
                "veth",
                "peer",
                "name",
                &pair.dev_b,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "netns",
                &pair.b,
            ]),
            "ip link add veth"
        );
        for (ns, dev, addr) in [
            (&pair.a, &pair.dev_a, &pair.ip_a),
            (&pair.b, &pair.dev_b, &pair.ip_b),
        ] {
            assert!(ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                dev
            ]));
            assert!(ip(&["-n", ns, "link", "set", dev, "up"]));
            assert!(ip(&["-n", ns, "link", "set", "lo", "up"]));
        }
        pair
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end inside it, and with it the peer.
        ip(&["netns", "del", &self.a]);
        ip(&["netns", "del", &self.b]);
    }
}
