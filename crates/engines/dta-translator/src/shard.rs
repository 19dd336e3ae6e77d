//! Several translator threads over the same stores ("one translator thread per core
//! with `SO_REUSEPORT`").
//!
//! Each thread owns a [`Translator`](crate::Translator) and a socket bound to the same port with
//! `SO_REUSEPORT`; the kernel spreads reporters over the sockets by their address and port, so
//! one reporter's datagrams keep reaching one thread, in order (its sequence spaces and its
//! Sketch-Merge columns stay with that thread). Key-Write and Key-Increment need no shared
//! state: every thread writes them straight into the stores (Key-Increment with atomic adds,
//! Key-Write last-writer-wins per slot, as on the hardware). The stateful primitives have one
//! owner each, so their state is never shared: a Postcarding flow belongs to thread
//! `fnv1a64(key) % threads` (its postcards come from different switches, hence from different
//! sockets), an Append list to `list % threads`, a sketch to `sketch_id % threads`. A thread that
//! receives a report it does not own re-encodes it (native report encoding) into the owner's
//! bounded inbox, a preallocated lock-free queue; owners drain their inboxes every loop turn.

use std::net::SocketAddr;
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use dta_store::hash;
use dta_wire::native::{self, MAX_REPORT_LEN};
use dta_wire::Report;

/// A report handed to the thread that owns its state.
#[derive(Clone, Copy)]
pub(crate) struct Forwarded {
    pub reporter: u32,
    pub src: SocketAddr,
    pub len: u8,
    pub bytes: [u8; MAX_REPORT_LEN],
}

impl Forwarded {
    /// Encode `report` (any primitive fits in [`MAX_REPORT_LEN`]).
    pub fn new(report: &Report<'_>, reporter: u32, src: SocketAddr) -> Option<Forwarded> {
        let mut bytes = [0u8; MAX_REPORT_LEN];
        let len = native::emit_report(report, &mut bytes).ok()?;
        Some(Forwarded {
            reporter,
            src,
            len: len as u8,
            bytes,
        })
    }

    /// The report again (it was valid when encoded).
    pub fn report(&self) -> Option<Report<'_>> {
        native::ReportPacket::new_unchecked(&self.bytes[..self.len as usize])
            .report()
            .ok()
    }
}

/// The owner of a Postcarding flow among `threads`, by its key.
pub type KeyOwner = fn(key: &[u8], threads: usize) -> usize;

/// The inboxes of a group of translator threads.
pub struct Shards {
    inboxes: Box<[ArrayQueue<Forwarded>]>,
    /// Who owns a Postcarding flow; `None`: `fnv1a64(key) % threads`.
    postcard_owner: Option<KeyOwner>,
}

impl Shards {
    /// Inboxes for `threads` translators, each holding up to `capacity` reports.
    pub fn new(threads: usize, capacity: usize) -> Arc<Shards> {
        Self::build(threads, capacity, None)
    }

    /// As [`Shards::new`], the Postcarding flows owned by `owner(key, threads)`: the thread
    /// that receives a flow's reports anyway (the INT sink steers flows to its threads), so
    /// its postcards are never handed over.
    pub fn with_postcard_owner(threads: usize, capacity: usize, owner: KeyOwner) -> Arc<Shards> {
        Self::build(threads, capacity, Some(owner))
    }

    fn build(threads: usize, capacity: usize, postcard_owner: Option<KeyOwner>) -> Arc<Shards> {
        let threads = threads.max(1);
        Arc::new(Shards {
            inboxes: (0..threads)
                .map(|_| ArrayQueue::new(capacity.max(1)))
                .collect(),
            postcard_owner,
        })
    }

    /// How many threads share the stores.
    pub fn threads(&self) -> usize {
        self.inboxes.len()
    }

    /// Thread `index`'s membership, to give to its translator
    /// ([`Translator::with_shard`](crate::Translator::with_shard)).
    pub fn shard(self: &Arc<Self>, index: usize) -> Shard {
        assert!(
            index < self.threads(),
            "shard {index} of {}",
            self.threads()
        );
        Shard {
            index,
            shards: self.clone(),
        }
    }
}

/// One translator thread's place in a [`Shards`] group.
#[derive(Clone)]
pub struct Shard {
    index: usize,
    shards: Arc<Shards>,
}

impl Shard {
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn threads(&self) -> usize {
        self.shards.threads()
    }

    /// The thread that owns `report`'s state, or `None` for the stateless Key-Write and
    /// Key-Increment, which any thread applies.
    #[inline]
    pub fn owner(&self, report: &Report<'_>) -> Option<usize> {
        let n = self.threads() as u64;
        let h = match *report {
            Report::KeyWrite { .. } | Report::KeyIncrement { .. } => return None,
            Report::Postcard { key, .. } => match self.shards.postcard_owner {
                // Bounded: an owner outside the group would be a lost report.
                Some(owner) => return Some(owner(key, n as usize) % n as usize),
                None => hash::fnv1a64(key),
            },
            Report::Append { list_id, .. } => list_id as u64,
            Report::SketchColumn { sketch_id, .. } => sketch_id as u64,
        };
        Some((h % n) as usize)
    }

    /// Hand `f` to thread `owner`; gives it back if that inbox is full.
    pub(crate) fn forward(&self, owner: usize, f: Forwarded) -> Result<(), Forwarded> {
        self.shards.inboxes[owner].push(f)
    }

    /// The next report handed to this thread.
    pub(crate) fn pop(&self) -> Option<Forwarded> {
        self.shards.inboxes[self.index].pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn postcard(key: &[u8]) -> Report<'_> {
        Report::Postcard {
            key,
            hop: 0,
            path_len: 5,
            value: 1,
            immediate: false,
        }
    }

    #[test]
    fn postcards_go_to_the_owner_given_bounded_to_the_group() {
        let key = [7u8; 13];
        let default = Shards::new(3, 8);
        assert_eq!(
            default.shard(0).owner(&postcard(&key)),
            Some((hash::fnv1a64(&key) % 3) as usize)
        );
        let to_two = Shards::with_postcard_owner(3, 8, |_, _| 2);
        assert_eq!(to_two.shard(0).owner(&postcard(&key)), Some(2));
        // An owner beyond the group is folded into it, never an inbox that does not exist.
        let beyond = Shards::with_postcard_owner(3, 8, |_, n| n + 1);
        assert_eq!(beyond.shard(1).owner(&postcard(&key)), Some(1));
        // The stateless primitives have no owner either way.
        let kw = Report::KeyWrite {
            key: &key,
            data: &[0; 4],
            redundancy: 2,
            immediate: false,
        };
        assert_eq!(to_two.shard(0).owner(&kw), None);
    }
}
