//! Who else has a UDP socket on a port. The translator binds with `SO_REUSEPORT` (several
//! threads share one port), which would let a second translator on the same port silently take
//! a share of the traffic; so before binding it looks for another process's socket on the
//! port; and a reporter that cannot bind its control port names who holds it. The kernel's
//! socket tables (/proc/net/udp, /proc/net/udp6) give the sockets' inodes, /proc/PID/fd maps an
//! inode to the process holding it, /proc/PID/comm names the process.

use std::collections::HashSet;
use std::io;
use std::path::Path;

/// At most this many lines of a /proc/net table are read, and this many processes' descriptor
/// tables scanned (the check runs once, at start-up; the bounds keep it finite on any host).
const MAX_TABLE_LINES: usize = 1 << 20;
const MAX_PROCESSES: usize = 1 << 16;

/// A socket on the port: its inode and, if it could be found (a process of another user may
/// not be inspectable), the PID holding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortUser {
    /// The socket's inode (`/proc/net/udp`).
    pub inode: u64,
    /// The process holding it, when this user may inspect it.
    pub pid: Option<u32>,
}

impl PortUser {
    /// `process 1234 (dta)`, or what can be said of a socket no inspectable process holds.
    pub fn describe(&self) -> String {
        match self.pid {
            Some(pid) => {
                let comm = std::fs::read(format!("/proc/{pid}/comm"))
                    .ok()
                    .map(|b| {
                        String::from_utf8_lossy(&b[..b.len().min(64)])
                            .trim()
                            .to_owned()
                    })
                    .filter(|c| !c.is_empty());
                match comm {
                    Some(c) => format!("process {pid} ({c})"),
                    None => format!("process {pid}"),
                }
            }
            None => format!(
                "a process this user cannot inspect (socket inode {})",
                self.inode
            ),
        }
    }
}

/// Who holds UDP `port` besides this process, for a message: `process 1234 (dta)`, or `another
/// process` when the tables do not say.
pub fn udp_port_holder(port: u16) -> String {
    match other_udp_users(port) {
        Ok(users) if !users.is_empty() => users
            .iter()
            .map(PortUser::describe)
            .collect::<Vec<_>>()
            .join(", "),
        _ => "another process".to_owned(),
    }
}

/// The UDP sockets (IPv4 and IPv6) bound to local port `port`, with their holders, other than
/// this process's.
pub fn other_udp_users(port: u16) -> io::Result<Vec<PortUser>> {
    let mut inodes = HashSet::new();
    for table in ["/proc/net/udp", "/proc/net/udp6"] {
        match std::fs::read_to_string(table) {
            Ok(text) => inodes.extend(inodes_on_port(&text, port)),
            // No IPv6 in this kernel: no IPv6 sockets.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    if inodes.is_empty() {
        return Ok(vec![]);
    }
    let me = std::process::id();
    let mut found: Vec<PortUser> = vec![];
    for entry in std::fs::read_dir("/proc")?.flatten().take(MAX_PROCESSES) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        for inode in socket_inodes(&entry.path().join("fd")) {
            if inodes.contains(&inode) && !found.iter().any(|u| u.inode == inode && u.pid.is_some())
            {
                found.push(PortUser {
                    inode,
                    pid: Some(pid),
                });
            }
        }
    }
    // Ours are not "other"; sockets no inspectable process holds are reported without a PID.
    let mine: HashSet<u64> = found
        .iter()
        .filter(|u| u.pid == Some(me))
        .map(|u| u.inode)
        .collect();
    let mut out: Vec<PortUser> = found
        .into_iter()
        .filter(|u| !mine.contains(&u.inode))
        .collect();
    for &inode in &inodes {
        if !mine.contains(&inode) && !out.iter().any(|u| u.inode == inode) {
            out.push(PortUser { inode, pid: None });
        }
    }
    out.sort_by_key(|u| (u.pid.is_none(), u.pid, u.inode));
    Ok(out)
}

/// Inodes of the sockets bound to local `port` in one /proc/net/udp{,6} table: lines
/// `sl local_address:PORT rem_address st ... uid timeout inode ...`, the port in hex.
pub fn inodes_on_port(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .take(MAX_TABLE_LINES)
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let local = f.nth(1)?;
            let (_, p) = local.rsplit_once(':')?;
            if u16::from_str_radix(p, 16).ok()? != port {
                return None;
            }
            // After local_address: rem_address st tx:rx tr:when retrnsmt uid timeout inode.
            f.nth(7)?.parse().ok()
        })
        .filter(|&inode| inode != 0)
        .collect()
}

/// The socket inodes a process's descriptor table (`/proc/PID/fd`) holds; none if it cannot
/// be read.
fn socket_inodes(fd_dir: &Path) -> Vec<u64> {
    let Ok(dir) = std::fs::read_dir(fd_dir) else {
        return vec![];
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|target| {
            let t = target.to_str()?;
            t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_table_format() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
            \x20 123: 0100007F:9C68 00000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 4242 2 0000000000000000 0\n\
            \x20 124: 00000000:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 17 2 0000000000000000 0\n";
        assert_eq!(inodes_on_port(table, 0x9c68), vec![4242]);
        assert_eq!(inodes_on_port(table, 53), vec![17]);
        assert!(inodes_on_port(table, 1).is_empty());
        assert!(inodes_on_port("header only\n", 53).is_empty());
        assert!(inodes_on_port("h\n garbage\n 1: nocolon x\n", 53).is_empty());
    }

    #[test]
    fn a_socket_of_this_process_is_found_but_not_other() {
        if !Path::new("/proc/net/udp").exists() {
            dta_testkit::skip!("no /proc/net/udp");
        }
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = s.local_addr().unwrap().port();
        let text = std::fs::read_to_string("/proc/net/udp").unwrap();
        assert_eq!(inodes_on_port(&text, port).len(), 1);
        assert!(
            other_udp_users(port).unwrap().is_empty(),
            "our own socket is not other"
        );
    }

    #[test]
    fn another_processs_socket_is_named_by_pid() {
        if !Path::new("/proc/net/udp").exists() {
            dta_testkit::skip!("no /proc/net/udp");
        }
        let Ok(mut child) = std::process::Command::new("python3")
            .args([
                "-c",
                "import socket,sys,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
                 s.bind(('127.0.0.1',0))\nprint(s.getsockname()[1],flush=True)\ntime.sleep(30)",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
        else {
            dta_testkit::skip!("python3 not available");
        };
        let mut line = String::new();
        use std::io::BufRead;
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().unwrap();
        let users = other_udp_users(port).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(users.len(), 1, "{users:?}");
        assert_eq!(users[0].pid, Some(child.id()));
    }
}
