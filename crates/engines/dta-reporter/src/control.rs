//! Where a reporter hears its translator: the control socket (UDP `nack_port`, 40044 by
//! default, docs/protocol.md), which carries NACKs and congestion notices. Flow control is on or
//! refused: a reporter that cannot bind the port does not start (the error names the port and
//! the process holding it) unless told to run without flow control (`nack_port: None`,
//! `dta report --no-flow-control`).
//!
//! Several native reporters of one process (`dta report --senders N`) share the port through a
//! [`ControlHub`]: one socket, read by whichever reporter polls, each message queued for the
//! reporter id its header names. One port per address is what the protocol gives: the translator
//! sends every reporter's messages to its address at `nack_port`.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex};

use dta_wire::native;

/// Messages queued for one reporter of a hub at most; more are dropped and counted
/// ([`ControlHub::overflow`]) until it polls.
pub const INBOX: usize = 1024;
/// Longest control message read (a native NACK or notice with its authenticator is 40 bytes).
pub const MAX_MESSAGE: usize = 64;

/// Bind the control socket on `port` of the wildcard address of `destination`'s family,
/// non-blocking. A port another process holds is refused with who holds it and the ways out.
pub fn bind(destination: SocketAddr, port: u16) -> io::Result<UdpSocket> {
    let any: IpAddr = if destination.is_ipv6() {
        Ipv6Addr::UNSPECIFIED.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    };
    let s = UdpSocket::bind(SocketAddr::new(any, port)).map_err(|e| refused(port, e))?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// The error of a control port that cannot be bound: which port, who holds it, and the ways
/// out (the translator sends NACKs and notices to one port per reporter address).
fn refused(port: u16, e: io::Error) -> io::Error {
    let why = if e.kind() == io::ErrorKind::AddrInUse {
        format!(
            "is already in use by {}",
            dta_net::port_owner::udp_port_holder(port)
        )
    } else {
        format!("cannot be bound ({e})")
    };
    io::Error::new(
        e.kind(),
        format!(
            "the control port {port} (NACKs and congestion notices from the translator) {why}: \
             this reporter could not obey its translator's flow control. Stop the other \
             reporter, give this one another control port (nack_port; the translator's \
             nack_port must match), share one socket between the reporters of one process \
             (dta report --senders), or run without flow control (dta report \
             --no-flow-control, nack_port: None)"
        ),
    )
}

#[derive(Clone, Copy)]
struct Message {
    len: u8,
    buf: [u8; MAX_MESSAGE],
    from: SocketAddr,
}

#[derive(Default)]
struct Inboxes {
    by_id: HashMap<u32, VecDeque<Message>>,
    /// Messages for an id whose inbox was full.
    overflow: u64,
    /// Messages for no reporter of this hub, or not a native NACK or notice.
    foreign: u64,
}

/// One control socket shared by the native reporters of one process (see the module doc).
pub struct ControlHub {
    socket: UdpSocket,
    inboxes: Mutex<Inboxes>,
}

impl std::fmt::Debug for ControlHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ControlHub({:?})", self.socket.local_addr().ok())
    }
}

impl ControlHub {
    /// Bind the control socket as [`bind`] does, for reporters sending to `destination`.
    pub fn bind(destination: SocketAddr, port: u16) -> io::Result<Arc<ControlHub>> {
        Ok(Arc::new(ControlHub {
            socket: bind(destination, port)?,
            inboxes: Mutex::new(Inboxes::default()),
        }))
    }

    /// The control socket `senders` reporters of this process share, or none: several native
    /// reporters share one (the translator sends each reporter's messages to this address's one
    /// control port); one reporter, or prototype ones (whose NACK names no reporter), bind their
    /// own.
    pub fn for_senders(
        destination: SocketAddr,
        port: u16,
        senders: u32,
        native: bool,
    ) -> io::Result<Option<Arc<ControlHub>>> {
        if senders > 1 && native {
            ControlHub::bind(destination, port).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The socket's address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inboxes> {
        self.inboxes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue messages for reporter `id` from now on.
    pub(crate) fn register(&self, id: u32) {
        self.lock().by_id.entry(id).or_default();
    }

    /// Read what waits on the socket into the inboxes, then hand reporter `id` its own, in
    /// arrival order, to `f`. Never blocks; how many were handed.
    pub(crate) fn take(
        &self,
        id: u32,
        f: &mut dyn FnMut(&[u8], SocketAddr) -> io::Result<()>,
    ) -> io::Result<usize> {
        let mine: Vec<Message> = {
            let mut g = self.lock();
            let mut b = [0u8; MAX_MESSAGE + 1];
            loop {
                match self.socket.recv_from(&mut b) {
                    Ok((n, from)) => {
                        let to = (n <= MAX_MESSAGE)
                            .then(|| native::Packet::new_checked(&b[..n]).ok())
                            .flatten()
                            .filter(|h| {
                                h.kind_raw() == native::Kind::Nack as u8
                                    || h.kind_raw() == native::Kind::Notice as u8
                            })
                            .map(|h| h.reporter_id());
                        let inbox = to.and_then(|id| g.by_id.get_mut(&id));
                        match inbox {
                            Some(q) if q.len() < INBOX => {
                                let mut buf = [0u8; MAX_MESSAGE];
                                buf[..n].copy_from_slice(&b[..n]);
                                q.push_back(Message {
                                    len: n as u8,
                                    buf,
                                    from,
                                });
                            }
                            Some(_) => g.overflow += 1,
                            None => g.foreign += 1,
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                    Err(e) => return Err(e),
                }
            }
            g.by_id
                .get_mut(&id)
                .map(|q| q.drain(..).collect())
                .unwrap_or_default()
        };
        for m in &mine {
            f(&m.buf[..m.len as usize], m.from)?;
        }
        Ok(mine.len())
    }

    /// Messages dropped because their reporter's inbox was full.
    pub fn overflow(&self) -> u64 {
        self.lock().overflow
    }

    /// Messages for none of the hub's reporters (or not a NACK or notice).
    pub fn foreign(&self) -> u64 {
        self.lock().foreign
    }
}
